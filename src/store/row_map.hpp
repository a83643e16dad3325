// RowMap<V>: a flat hash map from RowId to a small value, for the caches' hot
// paths (a node-based std::unordered_map costs one allocation per row and a
// pointer chase per lookup). Open addressing with linear probing at load <= 1/2;
// erase shifts the following entries back, so there are no tombstones. A slot
// is the key, the table and the value (16 bytes for a 32-bit value): the table
// id UINT32_MAX marks an empty slot, so it may not be used as a table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "store/row_key.hpp"

namespace strata::store {

template <class V>
class RowMap {
 public:
  explicit RowMap(size_t expected = 16) { rehash(capacity_for(expected)); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t memory_bytes() const { return slots_.capacity() * sizeof(Slot); }
  // What a map made for `expected` entries holds while it has at most that many.
  static size_t bytes_for(size_t expected) { return capacity_for(expected) * sizeof(Slot); }

  // The value of id, or nullptr.
  V* find(const RowId& id) {
    for (size_t b = bucket_of(id);; b = (b + 1) & mask_) {
      Slot& s = slots_[b];
      if (s.table == kEmpty) return nullptr;
      if (s.key == id.key && s.table == id.table) return &s.value;
    }
  }
  const V* find(const RowId& id) const { return const_cast<RowMap*>(this)->find(id); }
  bool contains(const RowId& id) const { return find(id) != nullptr; }
  // Starts loading id's bucket (a lookup a few rows later then hits the cache).
  void prefetch(const RowId& id) const { __builtin_prefetch(&slots_[bucket_of(id)]); }

  // The value of id, inserted as `initial` when absent; *inserted tells which.
  V& insert(const RowId& id, const V& initial, bool* inserted = nullptr) {
    if ((size_ + 1) * 2 > slots_.size()) rehash(slots_.size() * 2);
    size_t b = bucket_of(id);
    for (;; b = (b + 1) & mask_) {
      Slot& s = slots_[b];
      if (s.table == kEmpty) break;
      if (s.key == id.key && s.table == id.table) {
        if (inserted) *inserted = false;
        return s.value;
      }
    }
    if (id.table == kEmpty) throw_reserved_table();
    slots_[b] = Slot{id.key, id.table, initial};
    ++size_;
    if (inserted) *inserted = true;
    return slots_[b].value;
  }
  V& operator[](const RowId& id) { return insert(id, V{}); }

  // Removes id; false if it was absent.
  bool erase(const RowId& id) {
    size_t b = bucket_of(id);
    for (;; b = (b + 1) & mask_) {
      if (slots_[b].table == kEmpty) return false;
      if (slots_[b].key == id.key && slots_[b].table == id.table) break;
    }
    // Backward-shift: move later entries of the probe run into the hole when
    // the hole lies between their home bucket and where they sit.
    size_t hole = b;
    for (size_t next = (hole + 1) & mask_; slots_[next].table != kEmpty; next = (next + 1) & mask_) {
      const size_t home = bucket_of(slots_[next].key, slots_[next].table);
      const bool movable = hole <= next ? (home <= hole || home > next) : (home <= hole && home > next);
      if (movable) {
        slots_[hole] = slots_[next];
        hole = next;
      }
    }
    slots_[hole].table = kEmpty;
    --size_;
    return true;
  }

  void clear() {
    for (auto& s : slots_) s.table = kEmpty;
    size_ = 0;
  }

  // f(id, value) for every entry, in bucket order (deterministic for a given history).
  template <class F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_) {
      if (s.table != kEmpty) f(RowId{s.table, s.key}, s.value);
    }
  }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  struct Slot {
    uint64_t key = 0;
    uint32_t table = kEmpty;
    V value{};
  };
  [[noreturn]] static void throw_reserved_table();

  static size_t capacity_for(size_t n) {
    size_t c = 16;
    while (c < n * 2) c *= 2;
    return c;
  }
  size_t bucket_of(uint64_t key, uint32_t table) const {
    return static_cast<size_t>(mix64(key ^ (uint64_t(table) * 0x9e3779b97f4a7c15ULL))) & mask_;
  }
  size_t bucket_of(const RowId& id) const { return bucket_of(id.key, id.table); }

  void rehash(size_t capacity) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    size_ = 0;
    for (const Slot& s : old) {
      if (s.table != kEmpty) insert(RowId{s.table, s.key}, s.value);
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

template <class V>
void RowMap<V>::throw_reserved_table() {
  throw Error("table id " + std::to_string(UINT32_MAX) + " is reserved", "use fewer tables");
}

}  // namespace strata::store
