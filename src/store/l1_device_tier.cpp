#include "store/l1_device_tier.hpp"

#include <cstring>

#include "backend/host/host_row_gather.hpp"
#include "common/error.hpp"

namespace strata::store {

L1DeviceTier::L1DeviceTier(int64_t capacity_rows, int dim, std::unique_ptr<model::SparseOptimizer> optimizer)
    : dim_(dim),
      optimizer_(std::move(optimizer)),
      cache_(capacity_rows, dim + optimizer_->state_width(dim)),
      gradients_(dim) {}

int64_t L1DeviceTier::slot_of(const RowId& id) const {
  const int64_t slot = cache_.find(id);
  if (slot < 0) {
    throw Error("row (table " + std::to_string(id.table) + ", key " + std::to_string(id.key) +
                ") is not resident in its owner's L1 (staging bug)");
  }
  return slot;
}

void L1DeviceTier::apply(const StagingMessage& staging, RowBlock& write_back) {
  write_back.width = cache_.width();
  for (const RowId& id : staging.evict) {
    const int64_t slot = slot_of(id);
    if (cache_.dirty(slot)) write_back.append(id, cache_.row(slot));
    cache_.erase(slot);
  }
  if (staging.insert.size() && staging.insert.width != cache_.width()) {
    throw Error("staged rows of width " + std::to_string(staging.insert.width) + " for an L1 of width " +
                std::to_string(cache_.width()));
  }
  for (size_t i = 0; i < staging.insert.size(); ++i) {
    // A row that left L2 dirty is newer than the servers' copy: L1 must write it
    // back even if no step touches it (e.g. a plan applied while draining).
    cache_.insert(staging.insert.ids[i], staging.insert.row(i), staging.insert_dirty[i] != 0);
  }
}

void L1DeviceTier::gather(const RowId* ids, size_t n, float* values) {
  gather_slots_.resize(n);
  for (size_t i = 0; i < n; ++i) gather_slots_[i] = slot_of(ids[i]);
  if (n) backend::host::gather_rows(cache_.row(0), cache_.width(), gather_slots_.data(), n, dim_, values);
}

void L1DeviceTier::add_gradients_of_gathered(size_t first, size_t n, const float* grads) {
  if (first + n > gather_slots_.size()) throw Error("gradients for rows the last gather did not read (bug)");
  for (size_t i = 0; i < n; ++i) gradients_.add(gather_slots_[first + i], grads + i * dim_);
}

void L1DeviceTier::apply_step() {
  gradients_.drain(
      [&](int64_t slot, const float* grad) {
        float* row = cache_.row(slot);
        optimizer_->apply(row, row + dim_, grad, dim_);
        cache_.set_dirty(slot, true);
      },
      [&](int64_t slot) { __builtin_prefetch(cache_.row(slot), 1); });
}

void L1DeviceTier::collect_dirty(size_t max_rows,
                                 const std::function<void(const RowBlock& block, bool last)>& part) {
  std::vector<int64_t> dirty;
  cache_.for_each([&](const RowId&, int64_t slot) {
    if (cache_.dirty(slot)) dirty.push_back(slot);
  });
  RowBlock block;
  block.width = cache_.width();
  size_t next = 0;
  do {
    block.ids.clear();
    block.values.clear();
    for (; next < dirty.size() && block.size() < max_rows; ++next) {
      block.append(cache_.id(dirty[next]), cache_.row(dirty[next]));
      cache_.set_dirty(dirty[next], false);
    }
    part(block, next == dirty.size());
  } while (next < dirty.size());
}

}  // namespace strata::store
