// L1DeviceTier: one trainer's cache of the rows it owns, in a fixed arena that
// stands for HBM (store.l1_mb). It executes the staging plans its producer
// makes, serves its rows to every trainer, and applies the sparse optimizer to
// them; evicted dirty rows go back to the producer's L2.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "backend/host/host_row_gather.hpp"
#include "model/optimizers.hpp"
#include "store/gradient_accumulator.hpp"
#include "store/row_cache.hpp"
#include "store/staging_message.hpp"

namespace strata::store {

class L1DeviceTier {
 public:
  L1DeviceTier(int64_t capacity_rows, int dim, std::unique_ptr<model::SparseOptimizer> optimizer);

  int dim() const { return dim_; }
  int width() const { return cache_.width(); }
  int64_t capacity() const { return cache_.capacity(); }
  int64_t size() const { return cache_.size(); }
  size_t arena_bytes() const { return cache_.arena_bytes(); }

  // Evicts and inserts as planned; dirty evicted rows are appended to write_back.
  void apply(const StagingMessage& staging, RowBlock& write_back);
  // values (n, dim) of owned rows; every one must be resident (staged).
  void gather(const RowId* ids, size_t n, float* values);
  // Adds one trainer's gradients (n, dim) for rows [first, first + n) of the
  // last gather(), whose slots it already knows (a step's pushes answer its
  // pulls); call trainer by trainer in rank order.
  void add_gradients_of_gathered(size_t first, size_t n, const float* grads);
  // Applies the optimizer to every row that received gradients; marks them dirty.
  void apply_step();
  // Hands every dirty row to `part` in blocks of at most max_rows rows (one
  // block object, refilled between calls) and marks them clean. `part` is
  // called at least once; `last` is true on its final call.
  void collect_dirty(size_t max_rows, const std::function<void(const RowBlock& block, bool last)>& part);

 private:
  int64_t slot_of(const RowId& id) const;

  int dim_;
  std::unique_ptr<model::SparseOptimizer> optimizer_;
  RowCache cache_;
  GradientAccumulator gradients_;
  std::vector<int64_t> gather_slots_;
};

}  // namespace strata::store
