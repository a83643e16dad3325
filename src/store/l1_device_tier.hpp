// L1DeviceTier: one trainer's cache of the rows it owns, in a fixed arena that
// stands for HBM (store.l1_mb). It is addressed by slot: its producer mirrors
// it exactly (L1Directory) and says which slot every staged row goes to and
// which slots every trainer's rows sit in, so a step needs no lookup here. It
// serves its rows to every trainer, applies the sparse optimizer to them, and
// sends evicted dirty rows back to the producer's L2.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "model/optimizers.hpp"
#include "store/gradient_accumulator.hpp"
#include "store/staging_message.hpp"

namespace strata::store {

class L1DeviceTier {
 public:
  L1DeviceTier(int64_t capacity_rows, int dim, std::unique_ptr<model::SparseOptimizer> optimizer);

  int dim() const { return dim_; }
  int width() const { return width_; }
  // Rows an L1 of `megabytes` holds: each slot's row and its id and state
  // (store.l1_mb counts both; the producers' directories are counted apart).
  static int64_t rows_for_budget(double megabytes, int width);
  static size_t bytes_per_slot(int width) { return size_t(width) * sizeof(float) + sizeof(RowId) + sizeof(uint8_t); }
  int64_t capacity() const { return capacity_; }
  int64_t size() const { return size_; }
  size_t arena_bytes() const { return static_cast<size_t>(capacity_) * width_ * sizeof(float); }
  // The arena with its ids and states: what store.l1_mb counts.
  size_t memory_bytes() const { return arena_bytes() + ids_.capacity() * sizeof(RowId) + state_.capacity(); }

  // Empties the plan's evict slots (dirty rows are appended to write_back),
  // then puts the staged rows into their slots. strata::Error (a protocol
  // bug) for a slot outside the arena, an empty slot evicted or a full one filled.
  void apply(const StagingView& staging, RowBlock& write_back);
  // values (n, dim) <- the rows in slots (each must hold a row).
  void gather(const int32_t* slots, size_t n, float* values) const;
  // Adds grads (n, dim) to the step's sums of the rows in slots, in call order
  // (callers go trainer by trainer in rank order: the servers' summation order).
  void add_gradients(const int32_t* slots, size_t n, const float* grads);
  void add_gradient(int32_t slot, const float* grad) { gradients_.add(slot, grad); }
  // A step will touch at most `rows` rows (sizes the gradient sums once).
  void reserve_gradients(size_t rows) { gradients_.reserve(rows); }
  // Applies the optimizer to every row that received gradients; marks them dirty.
  void apply_step();
  // Hands every dirty row to `part` in blocks of at most max_rows rows (one
  // block object, refilled between calls) and marks them clean. `part` is
  // called at least once; `last` is true on its final call.
  void collect_dirty(size_t max_rows, const std::function<void(const RowBlock& block, bool last)>& part);

  bool holds(int32_t slot) const { return slot >= 0 && slot < capacity_ && state_of(slot) != kEmpty; }
  const RowId& id(int32_t slot) const { return ids_[slot]; }
  const float* row(int32_t slot) const { return arena_.get() + static_cast<size_t>(slot) * width_; }

 private:
  enum : uint8_t { kEmpty = 0, kClean = 1, kDirty = 2 };
  uint8_t state_of(int32_t slot) const {
    return static_cast<size_t>(slot) < state_.size() ? state_[slot] : uint8_t{kEmpty};
  }
  float* row(int32_t slot) { return arena_.get() + static_cast<size_t>(slot) * width_; }
  [[noreturn]] void bad_slot(int32_t slot, const char* what) const;

  int dim_;
  std::unique_ptr<model::SparseOptimizer> optimizer_;
  int width_;
  int64_t capacity_;
  int64_t size_ = 0;
  std::unique_ptr<float[]> arena_;  // (capacity, width), uninitialised: touched as slots fill
  std::vector<RowId> ids_;          // (slots used so far)
  std::vector<uint8_t> state_;      // (slots used so far) kEmpty / kClean / kDirty
  GradientAccumulator gradients_;
  std::vector<int32_t> step_slots_;  // (touched) apply_step's rows, reused
};

}  // namespace strata::store
