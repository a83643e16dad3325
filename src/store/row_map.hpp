// RowMap<V>: a flat hash map from RowId to a small value, for the caches' hot
// paths (a node-based std::unordered_map costs one allocation per row and a
// pointer chase per lookup). Open addressing with linear probing at load <= 1/2;
// erase shifts the following entries back, so there are no tombstones.
#pragma once

#include <cstdint>
#include <vector>

#include "store/row_key.hpp"

namespace strata::store {

template <class V>
class RowMap {
 public:
  explicit RowMap(size_t expected = 16) { rehash(capacity_for(expected)); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // The value of id, or nullptr.
  V* find(const RowId& id) {
    for (size_t b = bucket_of(id);; b = (b + 1) & mask_) {
      Slot& s = slots_[b];
      if (!s.used) return nullptr;
      if (s.id == id) return &s.value;
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
      if (!s.used) break;
      if (s.id == id) {
        if (inserted) *inserted = false;
        return s.value;
      }
    }
    slots_[b] = Slot{id, initial, true};
    ++size_;
    if (inserted) *inserted = true;
    return slots_[b].value;
  }
  V& operator[](const RowId& id) { return insert(id, V{}); }

  // Removes id; false if it was absent.
  bool erase(const RowId& id) {
    size_t b = bucket_of(id);
    for (;; b = (b + 1) & mask_) {
      if (!slots_[b].used) return false;
      if (slots_[b].id == id) break;
    }
    // Backward-shift: move later entries of the probe run into the hole when
    // the hole lies between their home bucket and where they sit.
    size_t hole = b;
    for (size_t next = (hole + 1) & mask_; slots_[next].used; next = (next + 1) & mask_) {
      const size_t home = bucket_of(slots_[next].id);
      const bool movable = hole <= next ? (home <= hole || home > next) : (home <= hole && home > next);
      if (movable) {
        slots_[hole] = slots_[next];
        hole = next;
      }
    }
    slots_[hole].used = false;
    --size_;
    return true;
  }

  void clear() {
    for (auto& s : slots_) s.used = false;
    size_ = 0;
  }

  // f(id, value) for every entry, in bucket order (deterministic for a given history).
  template <class F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_) {
      if (s.used) f(s.id, s.value);
    }
  }

 private:
  struct Slot {
    RowId id;
    V value{};
    bool used = false;
  };

  static size_t capacity_for(size_t n) {
    size_t c = 16;
    while (c < n * 2) c *= 2;
    return c;
  }
  size_t bucket_of(const RowId& id) const { return static_cast<size_t>(mix64(id.key, id.table ^ 0x5bd1e995u)) & mask_; }

  void rehash(size_t capacity) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    size_ = 0;
    for (const Slot& s : old) {
      if (s.used) insert(s.id, s.value);
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace strata::store
