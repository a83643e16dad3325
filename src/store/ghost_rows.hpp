// GhostRows: the ids of the rows a cache evicted last (ids only, no values),
// to measure what more memory would buy it: a miss on a row still among its
// ghosts would have been a hit with `capacity()` more rows. The shared L2 pool
// of co-trained models (store/l2_pool.hpp) moves memory to the model whose
// ghosts are hit most per byte.
#pragma once

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "store/row_key.hpp"

namespace strata::store {

class GhostRows {
 public:
  explicit GhostRows(int64_t capacity) : ring_(size_t(std::max<int64_t>(capacity, 1)), kEmpty) {
    seen_.reserve(ring_.size());
  }

  int64_t capacity() const { return int64_t(ring_.size()); }
  uint64_t hits() const { return hits_; }

  void evicted(const RowId& id) {
    const uint64_t h = placement_hash(id.table, id.key) | 1;  // never kEmpty
    uint64_t& slot = ring_[next_];
    if (slot != kEmpty) {
      auto it = seen_.find(slot);
      if (it != seen_.end() && --it->second == 0) seen_.erase(it);
    }
    slot = h;
    ++seen_[h];
    next_ = next_ + 1 == ring_.size() ? 0 : next_ + 1;
  }

  // A miss of the cache: counts a hit if the row was evicted recently.
  void missed(const RowId& id) {
    if (seen_.count(placement_hash(id.table, id.key) | 1)) ++hits_;
  }

 private:
  static constexpr uint64_t kEmpty = 0;
  std::vector<uint64_t> ring_;
  size_t next_ = 0;
  std::unordered_map<uint64_t, int32_t> seen_;
  uint64_t hits_ = 0;
};

}  // namespace strata::store
