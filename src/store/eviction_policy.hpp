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

// The evictable rows of one level, in the order the policy evicts them.
//
// lru, lfu, lfu_decay: by (policy score, slot), a binary min-heap with lazy
// deletion: re-scoring or removing a row only bumps the slot's version (O(1));
// stale heap items are dropped when they surface or when the heap is compacted.
//
// lookahead: rows with no known next use leave first, least frequent first
// (one list per whole count below 64, oldest first; other counts in a heap by
// (frequency, slot)); then rows by their next use, furthest first, kept in one
// list per round of the look-ahead ring (256 rounds). Every list deletes
// lazily, so re-scoring a row is O(1) and touches 8 bytes of it. Rows with the
// same next use leave in any order (newest first): the next use is what
// Belady's rule ranks by. set_now() tells it the round being planned (the ring
// is read from there).
class EvictionQueue {
 public:
  explicit EvictionQueue(const EvictionPolicy& policy);
  ~EvictionQueue();
  EvictionQueue(EvictionQueue&&) noexcept;
  EvictionQueue& operator=(EvictionQueue&&) noexcept;

  // Adds or re-scores `slot`.
  void update(int64_t slot, const RowUsage& usage);
  void erase(int64_t slot);
  bool contains(int64_t slot) const;
  // The next victim, or -1 when nothing is evictable.
  int64_t peek_victim();
  size_t size() const;
  // Starts loading `slot`'s bookkeeping (an update or erase of it follows soon).
  void prefetch(int64_t slot) const;
  // The round being planned: next uses before it are past.
  void set_now(int64_t round);
  // Sizes the bookkeeping for `slots` slots up front, so that it never grows
  // past bytes_for(slots) (a level's budget counts it).
  void reserve(int64_t slots);
  // The most any policy's queue holds for `slots` slots.
  static size_t bytes_for(int64_t slots);

  class Order;  // the implementations (eviction_policy.cpp)

 private:
  std::unique_ptr<Order> order_;
};

}  // namespace strata::store
