// GradientAccumulator: sums the row gradients of one step, per row, in the
// order they are added (callers add trainer by trainer in rank order), then
// applies the sparse optimizer once per row. The servers (Scheme A) and the L1
// owners (Scheme B) both use it, so both modes do exactly the same float
// additions and updates: the heart of the exactness invariant.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "model/optimizers.hpp"

namespace strata::store {

class GradientAccumulator {
 public:
  explicit GradientAccumulator(int dim) : dim_(dim) {}

  // Adds grad (dim) to the sum of row `slot` (slots are small dense integers).
  void add(int64_t slot, const float* grad) {
    if (static_cast<size_t>(slot) >= index_of_slot_.size()) index_of_slot_.resize(slot + 1, -1);
    int32_t& at = index_of_slot_[slot];
    if (at < 0) {
      at = static_cast<int32_t>(slots_.size());
      slots_.push_back(slot);
      sums_.resize(slots_.size() * dim_, 0.0f);
    }
    float* sum = sums_.data() + static_cast<size_t>(at) * dim_;
    for (int j = 0; j < dim_; ++j) sum[j] += grad[j];
  }

  // Calls update(slot, summed_grad) for every touched row, in the order rows were
  // first added, then resets. prefetch(slot) is called a few rows ahead of update.
  template <class Update, class Prefetch>
  void drain(Update&& update, Prefetch&& prefetch) {
    constexpr size_t kAhead = 8;
    for (size_t i = 0; i < std::min(slots_.size(), kAhead); ++i) prefetch(slots_[i]);
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (i + kAhead < slots_.size()) prefetch(slots_[i + kAhead]);
      update(slots_[i], sums_.data() + i * dim_);
      index_of_slot_[slots_[i]] = -1;
    }
    slots_.clear();
    sums_.clear();
  }
  template <class Update>
  void drain(Update&& update) {
    drain(std::forward<Update>(update), [](int64_t) {});
  }

  // Room for `rows` touched rows at once (a step's row count is known before
  // its gradients arrive): no doubling past what the step needs.
  void reserve(size_t rows) {
    slots_.reserve(rows);
    sums_.reserve(rows * size_t(dim_));
  }
  // The touched rows in first-add order and their sums (touched, dim), read in
  // place instead of drained into a copy; reset() then starts the next step.
  const std::vector<int64_t>& slots() const { return slots_; }
  const float* sums() const { return sums_.data(); }
  void reset() {
    for (int64_t slot : slots_) index_of_slot_[slot] = -1;
    slots_.clear();
    sums_.clear();
  }

 private:
  int dim_;
  std::vector<int32_t> index_of_slot_;
  std::vector<int64_t> slots_;
  std::vector<float> sums_;  // (touched, dim)
};

}  // namespace strata::store
