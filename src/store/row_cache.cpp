#include "store/row_cache.hpp"

#include <cstring>

#include "common/error.hpp"

namespace strata::store {

RowCache::RowCache(int64_t capacity_rows, int width)
    : capacity_(capacity_rows),
      width_(width),
      arena_(static_cast<size_t>(capacity_rows) * width),
      dirty_(capacity_rows, 0),
      ids_(capacity_rows),
      slot_of_(static_cast<size_t>(capacity_rows)) {
  free_slots_.reserve(capacity_rows);
  for (int64_t s = capacity_rows - 1; s >= 0; --s) free_slots_.push_back(s);
}

int64_t RowCache::insert(const RowId& id, const float* values, bool dirty) {
  if (free_slots_.empty()) throw Error("RowCache::insert into a full cache (bug: evict first)");
  const int64_t slot = free_slots_.back();
  free_slots_.pop_back();
  bool inserted = false;
  slot_of_.insert(id, slot, &inserted);
  if (!inserted) throw Error("RowCache::insert of a row already present (bug)");
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
