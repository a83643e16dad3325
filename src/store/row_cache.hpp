// RowCache: a bounded set of rows with insert, lookup and erase, in one arena of
// `capacity` rows allocated up front (the level's byte budget, as HBM would be
// reserved). The arena is not zeroed and the per-slot bookkeeping grows with
// the slots actually used, so a generous budget costs nothing until it fills.
// Used by the L1 device tier and the L2 host tier. Each row carries a dirty
// bit: it is newer than the copy in the level below.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "store/row_key.hpp"
#include "store/row_map.hpp"

namespace strata::store {

struct RowIdHash {
  size_t operator()(const RowId& id) const { return static_cast<size_t>(mix64(id.key, id.table)); }
};

class RowCache {
 public:
  RowCache(int64_t capacity_rows, int width);

  int width() const { return width_; }
  int64_t capacity() const { return limit_; }   // rows it may hold now (<= the arena)
  int64_t arena_rows() const { return capacity_; }
  // Changes how many rows it may hold, up to the arena; evict down to it first.
  void set_limit(int64_t rows) { limit_ = rows < capacity_ ? rows : capacity_; }
  int64_t size() const { return static_cast<int64_t>(slot_of_.size()); }
  bool full() const { return size() >= limit_; }
  size_t arena_bytes() const { return static_cast<size_t>(capacity_) * width_ * sizeof(float); }
  // What a cache of `rows` rows holds, all of it sized at construction: the
  // arena, the index, and each slot's id, dirty bit and free-list place.
  static size_t bytes_for(int64_t rows, int width);
  size_t memory_bytes() const;

  void prefetch(const RowId& id) const { slot_of_.prefetch(id); }
  int64_t find(const RowId& id) const {
    const int64_t* slot = slot_of_.find(id);
    return slot ? *slot : -1;
  }
  // Inserts a row (must be absent, cache must not be full); returns its slot.
  int64_t insert(const RowId& id, const float* values, bool dirty);
  void erase(int64_t slot) { erase(slot, ids_[slot]); }
  // The same when the caller knows the slot's id (saves loading it).
  void erase(int64_t slot, const RowId& id);

  float* row(int64_t slot) { return arena_.get() + static_cast<size_t>(slot) * width_; }
  const float* row(int64_t slot) const { return arena_.get() + static_cast<size_t>(slot) * width_; }
  bool dirty(int64_t slot) const { return dirty_[slot] != 0; }
  void set_dirty(int64_t slot, bool dirty) { dirty_[slot] = dirty ? 1 : 0; }
  const RowId& id(int64_t slot) const { return ids_[slot]; }

  template <class F>
  void for_each(F&& f) const {
    slot_of_.for_each([&](const RowId& id, int64_t slot) { f(id, slot); });
  }

 private:
  int64_t capacity_;  // arena rows
  int64_t limit_;     // rows it may hold now
  int width_;
  std::unique_ptr<float[]> arena_;  // (capacity, width), uninitialised
  std::vector<uint8_t> dirty_;      // (slots used so far)
  std::vector<RowId> ids_;          // (slots used so far)
  std::vector<int64_t> free_slots_; // erased slots, reused first (LIFO)
  RowMap<int64_t> slot_of_;
};

}  // namespace strata::store
