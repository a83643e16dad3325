#include "store/row_cache.hpp"

#include <algorithm>
#include <cstring>

#include "common/error.hpp"

namespace strata::store {

RowCache::RowCache(int64_t capacity_rows, int width)
    : capacity_(capacity_rows),
      limit_(capacity_rows),
      width_(width),
      arena_(new float[static_cast<size_t>(capacity_rows) * width]),
      slot_of_(static_cast<size_t>(std::min<int64_t>(capacity_rows, 4096))) {}

int64_t RowCache::insert(const RowId& id, const float* values, bool dirty) {
  int64_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else if (static_cast<int64_t>(ids_.size()) < capacity_) {
    slot = static_cast<int64_t>(ids_.size());
    ids_.emplace_back();
    dirty_.push_back(0);
  } else {
    throw Error("RowCache::insert into a full cache (bug: evict first)");
  }
  bool inserted = false;
  slot_of_.insert(id, slot, &inserted);
  if (!inserted) {
    free_slots_.push_back(slot);  // a refused insert must not cost a slot
    throw Error("RowCache::insert of a row already present (bug)");
  }
  std::memcpy(row(slot), values, sizeof(float) * width_);
  dirty_[slot] = dirty ? 1 : 0;
  ids_[slot] = id;
  return slot;
}

void RowCache::erase(int64_t slot) {
  slot_of_.erase(ids_[slot]);
  dirty_[slot] = 0;
  free_slots_.push_back(slot);
}

}  // namespace strata::store
