// L2HostTier: a producer's host-DRAM cache (store.l2_mb) of the rows owned by
// the trainers it feeds. It is exclusive of L1 (a victim cache): it takes the
// dirty rows the L1s evict, and a row staged into an L1 leaves L2, so the two
// budgets add up instead of holding the hot rows twice. Rows missing from both
// come from the servers (L3) straight into L1; dirty L2 victims go back to L3.
// When it can hold nothing (no budget, or the allocation failed) it falls back
// to Scheme A: rows pass straight between the servers and L1, counted as such.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "store/count_min_sketch.hpp"
#include "store/eviction_policy.hpp"
#include "store/ghost_rows.hpp"
#include "store/known_rows_filter.hpp"
#include "store/row_cache.hpp"
#include "store/row_map.hpp"
#include "store/staging_message.hpp"

namespace strata::store {

struct L2Counters {
  uint64_t hits = 0, misses = 0, evictions = 0, write_backs_to_l3 = 0, fallback_rows = 0;
  uint64_t bytes_from_l3 = 0, bytes_to_l3 = 0;
  uint64_t rows_created = 0;  // first uses made here, with no server round trip
  double fetch_wait_s = 0;
};

class L2HostTier {
 public:
  // `service` runs while waiting on the servers so the producer keeps answering its trainers.
  // `new_row` writes the initial full row of an id. Every row this tier's trainers
  // own passes through this tier, so when the servers started empty it knows which
  // rows they hold; a row they do not hold is made here instead of fetched.
  // `next_use` tells the look-ahead policy the next round a row is known to be
  // needed in (INT64_MAX if none).
  // arena_rows >= capacity_rows: reserved for budgets the online controller may grant later.
  L2HostTier(int64_t capacity_rows, int64_t arena_rows, int width, const EvictionPolicy& policy, MPI_Comm world,
             std::vector<int> server_ranks, std::function<void()> service,
             std::function<void(const RowId&, float*)> new_row, std::function<int64_t(const RowId&)> next_use,
             const AccessHistory* history = nullptr, bool servers_may_hold_rows = false);
  // store.l2_mb counts everything a row costs here, not only its values: the
  // arena, the cache's index and per-slot bookkeeping, the row's usage and
  // eviction order, and its share of the known-rows filter.
  static size_t bytes_for(int64_t rows, int width);
  static int64_t rows_for_budget(double megabytes, int width);
  // What this tier holds now (capacities, not sizes: what it may touch).
  size_t memory_bytes() const;
  // A round that needs `ids` entered the look-ahead horizon (rows not here are skipped).
  void note_future_use(const std::vector<RowId>& ids, int64_t round);

  // Full rows (values + state) of `ids`, in order, into values (n, width), with
  // one dirty flag each (1: newer than the servers' copy). Rows found here leave L2.
  void read(const std::vector<RowId>& ids, int64_t round, float* values, uint8_t* dirty);
  // Dirty rows coming back from an L1: they are newer than anything below.
  // next_use (may be null): each row's next known use, INT64_MAX when it must
  // be asked for (a finite one saves the look-up); with next_use_exact,
  // INT64_MAX means no known use (the caller asked already).
  void write_back(const RowBlock& rows, int64_t round, const int64_t* next_use = nullptr,
                  bool next_use_exact = false);
  // The dirty rows of an L1 written down whole (end of training, checkpoint):
  // rows held here are updated in place; the rest go straight to the servers,
  // without displacing L2's rows (an L1 being emptied or checkpointed needs no
  // victim cache). Call flush() afterwards to have them acknowledged.
  void write_down(const RowBlock& rows);
  // Writes every dirty row to the servers and waits until they have them.
  void flush();

  const L2Counters& counters() const { return counters_; }
  int64_t capacity() const { return cache_ ? cache_->capacity() : 0; }
  int64_t arena_rows() const { return cache_ ? cache_->arena_rows() : 0; }
  int64_t size() const { return cache_ ? cache_->size() : 0; }
  bool fallback() const { return !cache_; }
  // While refusing, L2 takes no new rows (as when its memory is exhausted): misses
  // pass straight from the servers to L1 and write-backs of rows it does not
  // hold go straight to the servers. Used by the fault-injection flag.
  void set_refusing(bool refusing);
  // The online controller's new budget in rows (up to the arena): shrinking
  // evicts now, dirty victims going to the servers.
  void set_capacity(int64_t rows);
  // Keeps the ids of the last `rows` victims, to count misses that more rows
  // would have saved (the shared L2 pool's measure of benefit).
  void track_ghosts(int64_t rows) { ghosts_ = std::make_unique<GhostRows>(rows); }
  const GhostRows* ghosts() const { return ghosts_.get(); }

 private:
  void make_room(RowBlock& spill);  // evicts until one row fits; dirty victims go to spill
  // Rows of ids into values (n, width) at their positions; `at` (may be null)
  // maps position i to the row it fills.
  void fetch_from_servers(const std::vector<RowId>& ids, const std::vector<size_t>* at, float* values);
  // Sends rows to their servers; with `wait`, returns once the servers have them.
  void write_to_servers(const RowBlock& rows, bool wait);
  void complete_sends(bool all);
  void touch(int64_t slot, int64_t round, int64_t next_use = INT64_MAX, bool next_use_exact = false);
  void remove(int64_t slot);  // drops a row without writing it anywhere
  void remove(int64_t slot, const RowId& id);  // the same, its id known
  void prefetch_slot(int64_t slot) const;  // a slot's row and bookkeeping (no-op for -1)
  void prefetch_usage(int64_t slot) const;  // its bookkeeping only (no-op for -1)

  int width_;
  const EvictionPolicy& policy_;
  MPI_Comm world_;
  std::vector<int> server_ranks_;
  std::function<void()> service_;
  std::unique_ptr<RowCache> cache_;
  EvictionQueue queue_;
  std::vector<RowUsage> usage_;  // by slot, grown as slots come into use
  struct PendingSend {
    MPI_Request request;
    std::vector<char> bytes;
  };
  std::vector<PendingSend> pending_sends_;  // asynchronous write-backs in flight
  L2Counters counters_;
  std::unique_ptr<GhostRows> ghosts_;  // only under a shared pool
  bool refusing_ = false;
  std::function<void(const RowId&, float*)> new_row_;
  std::function<int64_t(const RowId&)> next_use_;
  const AccessHistory* history_;
  KnownRowsFilter on_servers_;  // rows this tier has written to the servers (or, rarely, not)
  std::vector<RowId> missing_;   // scratch of read()
  std::vector<size_t> missing_at_;
  bool servers_may_hold_rows_ = false;  // resumed: the servers started with rows; always ask them
};

}  // namespace strata::store
