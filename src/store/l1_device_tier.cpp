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

void L1DeviceTier::add_gradients(const RowId* ids, size_t n, const float* grads) {
  for (size_t i = 0; i < n; ++i) gradients_.add(slot_of(ids[i]), grads + i * dim_);
}

void L1DeviceTier::apply_step() {
  gradients_.drain([&](int64_t slot, const float* grad) {
    float* row = cache_.row(slot);
    optimizer_->apply(row, row + dim_, grad, dim_);
    cache_.set_dirty(slot, true);
  });
}

void L1DeviceTier::collect_dirty(RowBlock& out) {
  out.width = cache_.width();
  cache_.for_each([&](const RowId& id, int64_t slot) {
    if (!cache_.dirty(slot)) return;
    out.append(id, cache_.row(slot));
    cache_.set_dirty(slot, false);
  });
}

}  // namespace strata::store
