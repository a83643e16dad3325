// L1Directory: a producer's exact mirror of one trainer's L1 device tier. The
// producer decides every insertion and eviction of that L1 (the trainer only
// executes them), so the mirror never drifts. Rows needed by any batch inside
// the prefetch window are pinned; the others sit in the policy's eviction queue,
// scored with their next use inside the known look-ahead horizon.
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "store/eviction_policy.hpp"
#include "store/row_cache.hpp"

namespace strata::store {

// What one trainer's L1 must do before running one round's batch.
struct StagingPlan {
  int64_t round = 0;
  std::vector<RowId> evict;   // leave L1 (dirty ones are written back to L2)
  std::vector<RowId> insert;  // enter L1 (values supplied by the producer)
  int64_t hits = 0;           // needed rows already in L1
};

class L1Directory {
 public:
  L1Directory(int owner, int64_t capacity_rows, int row_bytes, const EvictionPolicy& policy);

  // Round r's rows owned by this trainer (unique) enter the look-ahead horizon.
  void add_round(int64_t round, std::vector<RowId> rows);
  // Plans round `round` (the oldest added, not yet planned) with the window
  // [round, round + depth] pinned. Throws strata::Error when the pinned rows do
  // not fit (names the minimum budget in rows).
  StagingPlan plan(int64_t round, int depth);

  int64_t size() const { return static_cast<int64_t>(present_.size()); }
  int64_t capacity() const { return capacity_; }
  // Distinct rows the current window needs (the minimum capacity).
  int64_t window_rows() const { return static_cast<int64_t>(pins_.size()); }

 private:
  struct Entry {
    RowUsage usage;
    int pins = 0;       // window rounds that need the row
  };
  void pin_round(int64_t round);
  void unpin_round(int64_t round);
  int64_t next_use_after(const RowId& id, int64_t round) const;

  int owner_;
  int64_t capacity_;
  int row_bytes_;
  const EvictionPolicy& policy_;
  EvictionQueue queue_;                               // evictable present rows
  std::unordered_map<int64_t, RowId> id_of_slot_;     // queue works on slot numbers
  std::unordered_map<RowId, int64_t, RowIdHash> slot_of_;
  std::unordered_map<RowId, Entry, RowIdHash> present_;   // rows in L1
  std::unordered_map<RowId, int, RowIdHash> pins_;        // window pins, present or not
  std::unordered_map<RowId, std::deque<int64_t>, RowIdHash> future_;  // rounds of use in the horizon
  std::deque<std::pair<int64_t, std::vector<RowId>>> rounds_;          // added, not yet retired
  int64_t pinned_through_ = -1;  // last round whose rows are pinned
  int64_t next_slot_ = 0;
};

}  // namespace strata::store
