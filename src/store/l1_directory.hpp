// L1Directory: a producer's exact mirror of one trainer's L1 device tier. The
// producer decides every insertion and eviction of that L1 and the slot of
// every row (the trainer only executes them), so the mirror never drifts, and
// it can tell every trainer where the rows it asks for sit. Rows needed by any
// batch inside the prefetch window are pinned; the others sit in the policy's
// eviction queue, scored with their next use inside the known look-ahead horizon.
//
// One flat entry per row that is present, pinned or used inside the horizon;
// its future uses are a 256-bit mask over round numbers (bit r mod 256), which
// is why the horizon (prefetch depth + store.horizon) must stay below 256
// rounds. Every per-round pass walks the round's entry indices with software
// prefetch, so the entries' cache misses overlap instead of queueing.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "config/options.hpp"
#include "store/count_min_sketch.hpp"
#include "store/eviction_policy.hpp"
#include "store/round_requests.hpp"
#include "store/row_map.hpp"

namespace strata::store {

// What one trainer's L1 must do before running one round's batch.
struct StagingPlan {
  int64_t round = 0;
  std::vector<RowId> evict;           // leave L1 (dirty ones are written back to L2)
  std::vector<int32_t> evict_slots;   // (evict) their slots
  std::vector<int64_t> evict_next_use;  // (evict) next known use when evicted, INT64_MAX if none
  std::vector<RowId> insert;          // enter L1 (values supplied by the producer)
  std::vector<int32_t> insert_slots;  // (insert) where they go
  std::vector<int32_t> serve_offsets;  // (trainers + 1) requester r: serve_slots[offsets[r], offsets[r + 1])
  std::vector<int32_t> serve_slots;    // slots of each requester's rows, in its request order
  int64_t hits = 0;                    // needed rows already in L1
  void clear();
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

  // history (may be null): access counts that outlive a row's stays in L1;
  // add_round counts every round that needs a row into it.
  L1Directory(int owner, int64_t capacity_rows, int row_bytes, const EvictionPolicy& policy,
              AccessHistory* history = nullptr);

  // Round r's requests of this owner's rows enter the look-ahead horizon.
  // Rounds are added in order. The round's rows not in L1 now are appended to
  // *absent when given (their level below may want to know), and all its
  // distinct rows, in first-request order, to *distinct when given.
  void add_round(int64_t round, const OwnerRequests& requests, std::vector<RowId>* absent = nullptr,
                 std::vector<RowId>* distinct = nullptr);
  // The same for one requester's list (tests and tools).
  void add_round(int64_t round, const std::vector<RowId>& rows, std::vector<RowId>* absent = nullptr);
  // The next known round that needs `id` (after the rounds already planned), INT64_MAX if none.
  int64_t next_use(const RowId& id) const;
  // A next_use(id) soon: start loading its index bucket, then (a few rows
  // later, the bucket in cache) its entry.
  void prefetch_index(const RowId& id) const { index_.prefetch(id); }
  void prefetch_entry_of(const RowId& id) const {
    if (const int32_t* index = index_.find(id)) prefetch_entry(*index);
  }
  // Plans round `round` (the oldest added, not yet planned) with the window
  // [round, round + depth] pinned, into *plan (cleared first). Throws
  // strata::Error when the pinned rows do not fit (names the minimum budget).
  void plan(int64_t round, int depth, StagingPlan& plan);
  StagingPlan plan(int64_t round, int depth) {
    StagingPlan p;
    plan(round, depth, p);
    return p;
  }

  int64_t size() const { return present_; }
  int64_t capacity() const { return capacity_; }
  // The online controller's new budget: the next plan evicts down to it. Never
  // below the current window (callers check; the plan would refuse it).
  void set_capacity(int64_t rows) { capacity_ = rows; }
  // Distinct rows the current window needs (the minimum capacity).
  int64_t window_rows() const { return pinned_; }
  // Rows the directory tracks (present, pinned or known to be used): its memory.
  size_t entries() const { return index_.size(); }
  // The directory's bytes (capacities): per L1 slot, and per row it tracks
  // (present, or known to be used within the look-ahead horizon).
  size_t memory_bytes() const;

 private:
  // One cache line, so each per-round pass costs one miss per row. What the
  // policy knows of a row matters only while it is present: it lives by slot
  // (usage_), not here.
  struct alignas(64) Entry {
    RoundMask future;      // bit (r mod 256): the row is used in known round r
    int64_t listed = -1;   // last round whose requests listed it (de-duplication)
    int32_t pins = 0;      // window rounds that need the row
    int32_t slot = -1;     // L1 slot when present, else -1
    RowId id;
  };
  static_assert(sizeof(Entry) == 64, "an entry is one cache line");
  struct KnownRound {
    int64_t round = 0;
    std::vector<int32_t> distinct;  // entry indices, first-request order
    std::vector<int32_t> requests;  // entry index of every request, requester-major
    std::vector<int32_t> offsets;   // (trainers + 1) into requests
  };
  int32_t entry_index(const RowId& id);  // creates the entry when absent
  void release_if_unused(int32_t index);
  void evict_slot(int32_t slot, StagingPlan& plan);  // a slot already taken out of the queue
  void release_evicted();  // release_if_unused for the plan's evicted entries
  void prefetch_entry(int32_t index) const { __builtin_prefetch(&entries_[index]); }
  // Second-stage prefetches (the entry itself was loaded earlier) of what a
  // pass will touch of a present row's slot, and only that: most rows of a
  // round need neither their usage nor their queue state in most passes.
  void prefetch_slot_of(int32_t index, bool usage, bool queue) const {
    const int32_t slot = entries_[index].slot;
    if (slot < 0) return;
    if (usage) __builtin_prefetch(&usage_[slot]);
    if (queue) queue_.prefetch(slot);
  }

  int owner_;
  int64_t capacity_;
  int row_bytes_;
  const EvictionPolicy& policy_;
  AccessHistory* history_;
  EvictionQueue queue_;              // evictable present rows, by L1 slot
  RowMap<int32_t> index_;            // row -> entries_ index
  std::vector<Entry> entries_;
  std::vector<int32_t> free_entries_;
  std::vector<int32_t> evicted_entries_;  // of the plan being made
  std::vector<int32_t> to_insert_;  // (plan scratch) entries of the front round's absent rows
  std::vector<int32_t> victims_;    // (plan scratch) slots the queue gave up, in its order
  std::vector<int32_t> entry_of_slot_;  // L1 slot -> entries_ index
  std::vector<RowUsage> usage_;         // L1 slot -> what the policy knows of its row
  std::vector<int32_t> free_slots_;
  std::deque<KnownRound> rounds_;    // added, not retired
  std::vector<KnownRound> spare_rounds_;  // retired, kept for their capacity
  int64_t pinned_through_ = -1;  // last round whose rows are pinned
  int64_t served_through_ = -1;  // last round planned (its rows present; their accesses recorded at retirement)
  int64_t present_ = 0;
  int64_t pinned_ = 0;
};

}  // namespace strata::store
