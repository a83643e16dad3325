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

// The evictable rows of one level, ordered by (policy score, slot): an indexed
// binary heap over small dense slot numbers, so re-scoring a row is O(log n)
// with no allocation.
class EvictionQueue {
 public:
  explicit EvictionQueue(const EvictionPolicy& policy) : policy_(policy) {}
  // Adds or re-scores `slot`.
  void update(int64_t slot, const RowUsage& usage);
  void erase(int64_t slot);
  bool contains(int64_t slot) const {
    return slot >= 0 && static_cast<size_t>(slot) < position_.size() && position_[slot] >= 0;
  }
  // The next victim, or -1 when nothing is evictable.
  int64_t peek_victim() const { return heap_.empty() ? -1 : heap_.front().slot; }
  size_t size() const { return heap_.size(); }

 private:
  struct Item {
    EvictionPolicy::Score score;
    int64_t slot;
    bool operator<(const Item& o) const {
      if (score < o.score) return true;
      if (o.score < score) return false;
      return slot < o.slot;
    }
  };
  void place(size_t at, const Item& item) {
    heap_[at] = item;
    position_[item.slot] = static_cast<int64_t>(at);
  }
  void sift_up(size_t at);
  void sift_down(size_t at);

  const EvictionPolicy& policy_;
  std::vector<Item> heap_;
  std::vector<int64_t> position_;  // slot -> index in heap_, -1 if absent
};

}  // namespace strata::store
