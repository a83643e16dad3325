#include "store/l1_device_tier.hpp"

#include <algorithm>
#include <cstring>

#include "backend/row_kernels.hpp"
#include "backend/sparse_optimizer_kernels.hpp"
#include "common/error.hpp"

namespace strata::store {

L1DeviceTier::L1DeviceTier(int64_t capacity_rows, int dim, std::unique_ptr<model::SparseOptimizer> optimizer)
    : dim_(dim),
      optimizer_(std::move(optimizer)),
      width_(dim + optimizer_->state_width(dim)),
      capacity_(capacity_rows),
      arena_(new float[static_cast<size_t>(std::max<int64_t>(capacity_rows, 1)) * width_]),
      gradients_(dim) {
  // Reserved whole so that growing them as slots fill never overshoots the budget.
  ids_.reserve(static_cast<size_t>(std::max<int64_t>(capacity_rows, 0)));
  state_.reserve(static_cast<size_t>(std::max<int64_t>(capacity_rows, 0)));
}

int64_t L1DeviceTier::rows_for_budget(double megabytes, int width) {
  return static_cast<int64_t>(megabytes * 1048576.0 / double(bytes_per_slot(width)));
}

void L1DeviceTier::bad_slot(int32_t slot, const char* what) const {
  throw Error("L1 of capacity " + std::to_string(capacity_) + ": " + what + " slot " + std::to_string(slot) +
              " (staging protocol bug)");
}

void L1DeviceTier::apply(const StagingView& staging, RowBlock& write_back) {
  write_back.width = width_;
  for (int32_t slot : staging.evict_slots) {
    const uint8_t state = state_of(slot);
    if (state == kEmpty) bad_slot(slot, "evicting the empty");
    if (state == kDirty) write_back.append(ids_[slot], row(slot));
    state_[slot] = kEmpty;
    --size_;
  }
  if (staging.insert_slots.size && staging.width != width_) {
    throw Error("staged rows of width " + std::to_string(staging.width) + " for an L1 of width " +
                std::to_string(width_));
  }
  for (size_t i = 0; i < staging.insert_slots.size; ++i) {
    const int32_t slot = staging.insert_slots[i];
    if (slot < 0 || slot >= capacity_) bad_slot(slot, "filling the out-of-range");
    if (static_cast<size_t>(slot) >= state_.size()) {
      const size_t grown = std::min<size_t>(capacity_, std::max<size_t>(slot + 1, 2 * state_.size()));
      state_.resize(grown, kEmpty);
      ids_.resize(grown);
    }
    if (state_[slot] != kEmpty) bad_slot(slot, "filling the occupied");
    std::memcpy(row(slot), staging.insert_values.data + i * width_, sizeof(float) * width_);
    ids_[slot] = staging.insert_ids[i];
    // A row that left L2 dirty is newer than the servers' copy: L1 must write it
    // back even if no step touches it (e.g. a plan applied while draining).
    state_[slot] = staging.insert_dirty[i] ? kDirty : kClean;
    ++size_;
  }
}

void L1DeviceTier::gather(const int32_t* slots, size_t n, float* values) const {
  for (size_t i = 0; i < n; ++i) {
    if (!holds(slots[i])) bad_slot(slots[i], "reading the empty");
  }
  if (n) backend::gather_rows(arena_.get(), width_, slots, n, dim_, values);
}

void L1DeviceTier::add_gradients(const int32_t* slots, size_t n, const float* grads) {
  for (size_t i = 0; i < n; ++i) gradients_.add(slots[i], grads + i * dim_);
}

void L1DeviceTier::apply_step() {
  // The summed gradients go to the backend's optimizer kernel in one batch (rows
  // in order of first gradient, as before; they are distinct, so order is free).
  // The accumulator's sums are already (touched, dim) in that order: no copy.
  step_slots_.clear();
  for (const int64_t slot : gradients_.slots()) {
    if (!holds(static_cast<int32_t>(slot))) bad_slot(static_cast<int32_t>(slot), "updating the empty");
    step_slots_.push_back(static_cast<int32_t>(slot));
    state_[slot] = kDirty;
  }
  if (!step_slots_.empty())
    backend::sparse_optimizer_step(optimizer_->params(), arena_.get(), width_, step_slots_.data(),
                                   step_slots_.size(), dim_, gradients_.sums());
  gradients_.reset();
}

void L1DeviceTier::collect_dirty(size_t max_rows,
                                 const std::function<void(const RowBlock& block, bool last)>& part) {
  std::vector<int32_t> dirty;
  for (size_t slot = 0; slot < state_.size(); ++slot) {
    if (state_[slot] == kDirty) dirty.push_back(static_cast<int32_t>(slot));
  }
  RowBlock block;
  block.width = width_;
  const size_t part_rows = std::min(max_rows, dirty.size());  // the block never doubles past a part
  block.ids.reserve(part_rows);
  block.values.reserve(part_rows * size_t(width_));
  size_t next = 0;
  do {
    block.clear();
    for (; next < dirty.size() && block.size() < max_rows; ++next) {
      block.append(ids_[dirty[next]], row(dirty[next]));
      state_[dirty[next]] = kClean;
    }
    part(block, next == dirty.size());
  } while (next < dirty.size());
}

}  // namespace strata::store
