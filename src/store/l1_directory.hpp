// L1Directory: a producer's exact mirror of one trainer's L1 device tier. The
// producer decides every insertion and eviction of that L1 (the trainer only
// executes them), so the mirror never drifts. Rows needed by any batch inside
// the prefetch window are pinned; the others sit in the policy's eviction queue,
// scored with their next use inside the known look-ahead horizon.
//
// One flat entry per row that is present, pinned or used inside the horizon;
// its future uses are a 64-bit mask over round numbers (bit r mod 64), which is
// why the horizon (prefetch depth + store.horizon) must stay below 64 rounds.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "config/options.hpp"
#include "store/count_min_sketch.hpp"
#include "store/eviction_policy.hpp"
#include "store/row_map.hpp"

namespace strata::store {

// What one trainer's L1 must do before running one round's batch.
struct StagingPlan {
  int64_t round = 0;
  std::vector<RowId> evict;   // leave L1 (dirty ones are written back to L2)
  std::vector<RowId> insert;  // enter L1 (values supplied by the producer)
  int64_t hits = 0;           // needed rows already in L1
};

// One bit per known round, r mod 256 (a ring: retired rounds' bits are cleared
// before their numbers come round again).
class RoundMask {
 public:
  static constexpr int kBits = 256;
  bool empty() const { return (words_[0] | words_[1] | words_[2] | words_[3]) == 0; }
  void set(int64_t round) { words_[bit(round) >> 6] |= uint64_t(1) << (bit(round) & 63); }
  void clear(int64_t round) { words_[bit(round) >> 6] &= ~(uint64_t(1) << (bit(round) & 63)); }
  // The first set round after `round`, searching the ring (round, round + 256); INT64_MAX if none.
  int64_t next_after(int64_t round) const {
    const int start = bit(round + 1);
    for (int step = 0; step <= 4; ++step) {
      // Word w from bit `from` on: the first step starts mid-word, the last
      // (step 4) finishes the word it began in, below the start bit.
      const int w = ((start >> 6) + step) & 3;
      uint64_t word = words_[w];
      if (step == 0) word &= ~uint64_t(0) << (start & 63);
      if (step == 4) word &= (start & 63) ? ~(~uint64_t(0) << (start & 63)) : 0;
      if (word) {
        const int at = (w << 6) + __builtin_ctzll(word);
        return round + 1 + ((at - start + kBits) % kBits);
      }
    }
    return INT64_MAX;
  }

 private:
  static int bit(int64_t round) { return static_cast<int>(round & (kBits - 1)); }
  uint64_t words_[4] = {0, 0, 0, 0};
};

class L1Directory {
 public:
  // Rounds that may be known (added, not retired) at once.
  static constexpr int64_t kMaxKnownRounds = 256;
  static_assert(kMaxLookAheadRounds + 4 <= kMaxKnownRounds, "the deck may ask for more rounds than are tracked");

  // history (may be null): access counts that outlive a row's stay in L1.
  L1Directory(int owner, int64_t capacity_rows, int row_bytes, const EvictionPolicy& policy,
              const AccessHistory* history = nullptr);

  // Round r's rows owned by this trainer (unique) enter the look-ahead horizon.
  // Rounds are added in order, one after the other. Rows not in L1 now are
  // appended to *absent when given (their level below may want to know).
  void add_round(int64_t round, std::vector<RowId> rows, std::vector<RowId>* absent = nullptr);
  // The next known round that needs `id` (after the rounds already planned), INT64_MAX if none.
  int64_t next_use(const RowId& id) const;
  // Plans round `round` (the oldest added, not yet planned) with the window
  // [round, round + depth] pinned. Throws strata::Error when the pinned rows do
  // not fit (names the minimum budget in rows).
  StagingPlan plan(int64_t round, int depth);

  int64_t size() const { return present_; }
  int64_t capacity() const { return capacity_; }
  // The online controller's new budget: the next plan evicts down to it. Never
  // below the current window (callers check; the plan would refuse it).
  void set_capacity(int64_t rows) { capacity_ = rows; }
  // Distinct rows the current window needs (the minimum capacity).
  int64_t window_rows() const { return pinned_; }

 private:
  struct Entry {
    RowId id;
    RowUsage usage;
    RoundMask future;     // bit (r mod 256): the row is used in known round r
    int32_t pins = 0;     // window rounds that need the row
    int32_t slot = -1;    // L1 slot when present, else -1
  };
  int32_t entry_index(const RowId& id);  // creates the entry when absent
  void release_if_unused(int32_t index);
  void evict_slot(int64_t slot, StagingPlan& plan);
  void pin_round(int64_t round);
  void unpin_round(int64_t round);
  int64_t next_use_after(const Entry& entry, int64_t round) const;
  const std::vector<int32_t>& entries_of(int64_t round) const;

  int owner_;
  int64_t capacity_;
  int row_bytes_;
  const EvictionPolicy& policy_;
  const AccessHistory* history_;
  EvictionQueue queue_;              // evictable present rows, by L1 slot
  RowMap<int32_t> index_;            // row -> entries_ index
  std::vector<Entry> entries_;
  std::vector<int32_t> free_entries_;
  std::vector<int32_t> entry_of_slot_;  // L1 slot -> entries_ index
  std::vector<int32_t> free_slots_;
  std::deque<std::pair<int64_t, std::vector<int32_t>>> rounds_;  // added, not retired: entries_ indices
  int64_t pinned_through_ = -1;  // last round whose rows are pinned
  int64_t present_ = 0;
  int64_t pinned_ = 0;
};

}  // namespace strata::store
