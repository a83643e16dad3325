// KnownRowsFilter: which rows a producer has written to the servers, in a fixed
// number of bytes. A blocked Bloom filter (the 4 bits of a row share one
// 64-byte block): it may say "written" for a row that was not, never the
// reverse. That is the safe side: a row it calls written is fetched, and a
// server that lacks it answers with the row's initial value, the same bytes
// the producer would have made itself. So the filter's memory is bounded by
// its budget whatever the key space, and a full filter only costs round trips.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "store/row_key.hpp"

namespace strata::store {

class KnownRowsFilter {
 public:
  static constexpr int kBitsPerRow = 4;
  // bits: the filter's size, rounded up to a power of two of 512-bit blocks.
  explicit KnownRowsFilter(uint64_t bits) {
    uint64_t blocks = 1;
    while (blocks * 512 < bits) blocks <<= 1;
    blocks_.resize(blocks);
    mask_ = blocks - 1;
  }
  void prefetch(const RowId& id) const { __builtin_prefetch(&blocks_[hash(id) & mask_]); }
  void insert(const RowId& id) {
    const uint64_t h = hash(id);
    Block& b = blocks_[h & mask_];
    for (int i = 0; i < kBitsPerRow; ++i) {
      const unsigned bit = (h >> (32 + 8 * i)) & 511;
      b.words[bit >> 6] |= uint64_t(1) << (bit & 63);
    }
  }
  bool may_contain(const RowId& id) const {
    const uint64_t h = hash(id);
    const Block& b = blocks_[h & mask_];
    for (int i = 0; i < kBitsPerRow; ++i) {
      const unsigned bit = (h >> (32 + 8 * i)) & 511;
      if (!(b.words[bit >> 6] & (uint64_t(1) << (bit & 63)))) return false;
    }
    return true;
  }
  size_t bytes() const { return blocks_.size() * sizeof(Block); }

 private:
  struct alignas(64) Block {
    uint64_t words[8] = {};
  };
  static uint64_t hash(const RowId& id) { return mix64(id.key, (uint64_t(id.table) << 8) | 0xa5); }
  std::vector<Block> blocks_;
  uint64_t mask_ = 0;
};

}  // namespace strata::store
