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
      // Sized whole: growing it by rehashing would hold the old and new index at once.
      slot_of_(static_cast<size_t>(std::max<int64_t>(capacity_rows, 1))) {
  ids_.reserve(static_cast<size_t>(capacity_rows));
  dirty_.reserve(static_cast<size_t>(capacity_rows));
  free_slots_.reserve(static_cast<size_t>(capacity_rows));
}

size_t RowCache::bytes_for(int64_t rows, int width) {
  const size_t n = static_cast<size_t>(std::max<int64_t>(rows, 0));
  return n * (size_t(width) * sizeof(float) + sizeof(RowId) + sizeof(uint8_t) + sizeof(int64_t)) +
         RowMap<int64_t>::bytes_for(std::max<size_t>(n, 1));
}

size_t RowCache::memory_bytes() const {
  return arena_bytes() + ids_.capacity() * sizeof(RowId) + dirty_.capacity() + free_slots_.capacity() * sizeof(int64_t) +
         slot_of_.memory_bytes();
}

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

void RowCache::erase(int64_t slot, const RowId& id) {
  slot_of_.erase(id);
  dirty_[slot] = 0;
  free_slots_.push_back(slot);
}

}  // namespace strata::store
