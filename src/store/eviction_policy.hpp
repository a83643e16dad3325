// Eviction policies of the cache levels (store.policy): lru, lfu, lfu_decay and
// lookahead. A policy scores every evictable row (lower score leaves first) and
// keeps them ordered; rows pinned for the look-ahead window are not in the set
// at all, so they can never be chosen.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace strata::store {

// What a policy knows of a row.
struct RowUsage {
  int64_t last_use = 0;        // step of the last access
  double frequency = 0;        // accesses (decayed for lfu_decay)
  int64_t next_use = INT64_MAX;  // next step inside the known look-ahead, INT64_MAX if none
  int64_t accesses = 0;          // plain count of accesses
};

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  virtual const char* name() const = 0;
  // Updates usage for an access at `step` (frequency, recency).
  virtual void record_access(RowUsage& usage, int64_t step) const;
  // A row enters the level: start its frequency from its access history
  // (uses counted across earlier stays), not from zero.
  virtual void admit(RowUsage& usage, double history) const { usage.frequency = history; }
  // Ordering score: the row with the smallest score is evicted first.
  struct Score {
    double primary = 0;
    double secondary = 0;
    bool operator<(const Score& o) const { return primary != o.primary ? primary < o.primary : secondary < o.secondary; }
  };
  virtual Score score(const RowUsage& usage) const = 0;
};

// Throws strata::Error naming store.policy and the allowed values.
std::unique_ptr<EvictionPolicy> make_eviction_policy(const std::string& name, double decay = 0.99);
const std::vector<std::string>& eviction_policy_names();

// The evictable rows of one level, ordered by (policy score, slot). A binary
// min-heap with lazy deletion: pinning or re-scoring a row only bumps the
// slot's version (O(1)); stale heap items are dropped when they surface or when
// the heap is compacted. Rows are pinned and unpinned once per use while only
// misses evict, so this keeps a hit at O(1) and a miss at O(log n).
class EvictionQueue {
 public:
  explicit EvictionQueue(const EvictionPolicy& policy) : policy_(policy) {}
  // Adds or re-scores `slot`.
  void update(int64_t slot, const RowUsage& usage);
  void erase(int64_t slot);
  bool contains(int64_t slot) const {
    return slot >= 0 && static_cast<size_t>(slot) < live_.size() && live_[slot];
  }
  // The next victim (smallest score, then smallest slot), or -1 when nothing is evictable.
  int64_t peek_victim();
  size_t size() const { return live_count_; }

 private:
  struct Item {
    EvictionPolicy::Score score;
    int64_t slot;
    uint64_t version;
  };
  // Heap order: a before b when a leaves first. std::*_heap build max-heaps, so
  // the comparator says "a leaves later than b".
  static bool leaves_later(const Item& a, const Item& b) {
    if (b.score < a.score) return true;
    if (a.score < b.score) return false;
    return a.slot > b.slot;
  }
  bool is_current(const Item& item) const { return live_[item.slot] && version_[item.slot] == item.version; }
  void compact();

  const EvictionPolicy& policy_;
  std::vector<Item> heap_;
  std::vector<uint64_t> version_;  // slot -> version of its current heap item
  std::vector<uint8_t> live_;      // slot -> evictable now
  size_t live_count_ = 0;
};

}  // namespace strata::store
