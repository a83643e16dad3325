// CountMinSketch: approximate counts of row ids in fixed memory (4 rows of
// `width` saturating 32-bit counters, conservative update). It never
// under-counts. halve() ages every count, so a sketch can follow a workload
// whose hot set moves (TinyLFU's reset). Used by frequency admission
// (store.min_count) and by the eviction policies' access history.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/rng.hpp"

namespace strata::store {

class CountMinSketch {
 public:
  static constexpr int kRows = 4;

  explicit CountMinSketch(uint64_t width) : width_(std::max<uint64_t>(width, 1)), counters_(kRows * width_, 0) {}

  // Adds one to (table, key); returns the new estimate.
  uint32_t increment(uint32_t table, uint64_t key) {
    size_t cells[kRows];
    uint32_t current = std::numeric_limits<uint32_t>::max();
    for (int r = 0; r < kRows; ++r) {
      cells[r] = cell(r, table, key);
      current = std::min(current, counters_[cells[r]]);
    }
    if (current == std::numeric_limits<uint32_t>::max()) return current;
    // Conservative update: only the smallest counters grow, which keeps the
    // over-count of a rare key that shares cells with hot ones low.
    const uint32_t next = current + 1;
    for (int r = 0; r < kRows; ++r) counters_[cells[r]] = std::max(counters_[cells[r]], next);
    return next;
  }

  uint32_t estimate(uint32_t table, uint64_t key) const {
    uint32_t best = std::numeric_limits<uint32_t>::max();
    for (int r = 0; r < kRows; ++r) best = std::min(best, counters_[cell(r, table, key)]);
    return best;
  }

  void halve() {
    for (uint32_t& c : counters_) c >>= 1;
  }

  uint64_t width() const { return width_; }
  // Checkpoint state: (kRows, width) counters.
  const std::vector<uint32_t>& counters() const { return counters_; }
  std::vector<uint32_t>& counters() { return counters_; }

 private:
  size_t cell(int row, uint32_t table, uint64_t key) const {
    const uint64_t h = mix64(key, (uint64_t(table) << 8) | uint64_t(row + 1));
    return static_cast<size_t>(row) * width_ + static_cast<size_t>(h % width_);
  }

  uint64_t width_;
  std::vector<uint32_t> counters_;  // (kRows, width_)
};

// BlockedFrequencySketch: a count-min sketch whose 4 counters of a key share
// one 64-byte block (32 saturating 16-bit counters), so counting a key costs
// one cache miss instead of four. For the access history, which counts every
// row of every round; admission keeps the plain sketch (its counters are in
// checkpoints).
class BlockedFrequencySketch {
 public:
  static constexpr int kCountersPerKey = 4;
  // width: counters per row of an equivalent 4-row sketch (blocks = width / 8).
  explicit BlockedFrequencySketch(uint64_t width) {
    uint64_t blocks = 1;
    while (blocks * 8 < width) blocks <<= 1;
    blocks_.resize(blocks);
    mask_ = blocks - 1;
  }
  void prefetch(uint32_t table, uint64_t key) const { __builtin_prefetch(&blocks_[hash(table, key) & mask_]); }
  uint32_t increment(uint32_t table, uint64_t key) {
    const uint64_t h = hash(table, key);
    Block& b = blocks_[h & mask_];
    int at[kCountersPerKey];
    uint16_t current = UINT16_MAX;
    for (int i = 0; i < kCountersPerKey; ++i) {
      at[i] = static_cast<int>((h >> (40 + 6 * i)) & 31);
      current = std::min(current, b.counters[at[i]]);
    }
    if (current == UINT16_MAX) return current;
    const uint16_t next = static_cast<uint16_t>(current + 1);
    for (int i = 0; i < kCountersPerKey; ++i) b.counters[at[i]] = std::max(b.counters[at[i]], next);
    return next;
  }
  uint32_t estimate(uint32_t table, uint64_t key) const {
    const uint64_t h = hash(table, key);
    const Block& b = blocks_[h & mask_];
    uint16_t best = UINT16_MAX;
    for (int i = 0; i < kCountersPerKey; ++i) best = std::min(best, b.counters[(h >> (40 + 6 * i)) & 31]);
    return best;
  }
  void halve() {
    for (Block& b : blocks_) {
      for (uint16_t& c : b.counters) c >>= 1;
    }
  }
  size_t bytes() const { return blocks_.size() * sizeof(Block); }

 private:
  struct alignas(64) Block {
    uint16_t counters[32] = {};
  };
  static uint64_t hash(uint32_t table, uint64_t key) { return mix64(key, (uint64_t(table) << 8) | 0x5a); }
  std::vector<Block> blocks_;
  uint64_t mask_ = 0;
};

// AccessHistory: how often each row was needed, across its stays in a cache
// level, so that LFU and the look-ahead policy's tie-break rank a returning
// row by its whole past, not by its accesses since it last came in. Counts
// one per round that needs the row; halves every `period` counts.
class AccessHistory {
 public:
  AccessHistory(uint64_t width, uint64_t period) : sketch_(width), period_(std::max<uint64_t>(period, 1)) {}
  void prefetch(uint32_t table, uint64_t key) const { sketch_.prefetch(table, key); }
  void record(uint32_t table, uint64_t key) {
    sketch_.increment(table, key);
    if (++since_halving_ >= period_) {
      sketch_.halve();
      since_halving_ = 0;
    }
  }
  double frequency(uint32_t table, uint64_t key) const { return sketch_.estimate(table, key); }
  size_t bytes() const { return sketch_.bytes(); }

 private:
  BlockedFrequencySketch sketch_;
  uint64_t period_;
  uint64_t since_halving_ = 0;
};

}  // namespace strata::store
