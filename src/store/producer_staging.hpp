// ProducerStaging: the parameter work of a producer in Scheme B. For every
// round it plans each of its trainers' L1 (L1Directory), reads the missing rows
// from its L2 (and through it from L3), and tracks the rows evicted from L1
// until their write-backs arrive, so that no row is ever staged from a copy
// older than the one an L1 is still sending back.
#pragma once

#include <mpi.h>

#include <deque>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "config/options.hpp"
#include "model/optimizers.hpp"
#include "store/eviction_policy.hpp"
#include "store/l1_directory.hpp"
#include "store/tiered_protocol.hpp"
#include "store/l2_host_tier.hpp"
#include "store/l2_pool.hpp"
#include "store/access_trace.hpp"
#include "store/online_controller.hpp"
#include "store/round_requests.hpp"
#include "store/row_map.hpp"
#include "store/staging_message.hpp"

namespace strata::store {

struct StagingCounters {
  uint64_t l1_hits = 0, l1_misses = 0, l1_evictions = 0;
  uint64_t rounds = 0;
  uint64_t late_rounds = 0;      // rounds staged after their trainer had run out of queued batches
  int64_t max_window_rows = 0;   // largest pinned window of any L1 (the minimum L1 size)
  double write_back_wait_s = 0;  // waiting for an L1 to return an evicted row
  double staging_s = 0;          // planning and reading rows (wall clock)
  double staging_cpu_s = 0;      // the same in this rank's CPU time
};

class ProducerStaging {
 public:
  // owners: trainer indices this producer feeds; owner_ranks: their world ranks.
  // servers_may_hold_rows: resumed from a checkpoint, so a row this producer
  // never wrote down may still be on the servers (always fetch, never create).
  // l2_pool: this producer's share of its node's shared L2 pool (co-trained
  // models), or null for an L2 of store.l2_mb of its own.
  ProducerStaging(const RunOptions& options, int width, std::vector<int> owners, std::vector<int> owner_ranks,
                  std::vector<int> server_ranks, MPI_Comm world, bool servers_may_hold_rows = false,
                  L2Pool* l2_pool = nullptr);

  // Round r's requests of the rows owned by owners()[i], from every trainer.
  void add_round(int64_t round, const std::vector<OwnerRequests>& per_owner);
  // Appends the staging plan of round r for owners()[i] to `out` (the batch
  // message of that owner). Call once per owner, in round order.
  void stage(int64_t round, size_t owner_index, std::vector<char>& out);
  // Receives write-backs that have arrived (any wait loop may call it).
  void poll();
  // poll() and apply what arrived. Only from outside L2 operations (the
  // producer's own wait loops), since applying write-backs changes L2.
  void service();
  // Checkpoint: waits for every owner's flushed L1 rows, then writes L2 down to
  // the servers (acknowledged). Rows stay cached, clean.
  void write_down_for_checkpoint();
  // Called while staging waits on a trainer (for a row on its way back, or
  // its final flush): the producer joins a checkpoint the trainers started.
  void set_wait_hook(std::function<void()> hook) { on_wait_ = std::move(hook); }
  // End of training (or the switch to Scheme A): applies every write-back and
  // flush, writes L2 down to the servers, then tells each trainer it may read
  // the servers.
  void finish_training();

  // Called once per round before it is staged: collects the trainers'
  // reports. A round is late when one of its trainers waited longer than
  // kLateWaitSeconds for its batch (the trainer says so in the round's
  // write-back); counts late rounds and the newest run of consecutive ones.
  void note_lateness();
  // store.fallback_late_rounds consecutive late rounds: time to fall back to Scheme A.
  bool wants_fallback() const { return fallback_late_rounds_ > 0 && late_run_ >= fallback_late_rounds_; }
  // Appends a staging message for `round` that switches its owner to Scheme A.
  void append_switch(int64_t round, std::vector<char>& out) const;

  const std::vector<int>& owners() const { return owners_; }
  const StagingCounters& counters() const { return counters_; }
  const L2Counters& l2_counters() const { return l2_->counters(); }
  int64_t l1_capacity_rows() const { return l1_rows_; }
  // The prefetch depth now (the online controller may change it between rounds).
  int prefetch_depth() const { return depth_; }
  // autotune.online: every every_steps rounds, decide and apply; returns the
  // log line of a change ("" when nothing changed). Once per round, before staging it.
  std::string run_controller(int64_t round);
  int64_t l2_capacity_rows() const { return l2_->capacity(); }
  // Shared L2 pool: every few rounds, reports this L2's ghost hits and takes
  // the grant it is given (the log line of a change, or "").
  std::string run_l2_pool(int64_t round, uint64_t samples);
  double l2_pool_grant_mb() const { return pool_grant_mb_; }
  int64_t l2_pool_changes() const { return pool_changes_; }
  int64_t l2_pool_decisions() const { return l2_pool_ ? l2_pool_->decisions() : 0; }
  // What the budgets count (README "Memory"): the L2 tier (store.l2_mb), the
  // copies of the trainers' L1 directories, and the access history.
  size_t l2_bytes() const { return l2_->memory_bytes(); }
  size_t directory_bytes() const;
  size_t history_bytes() const { return history_ ? history_->bytes() : 0; }

 private:
  struct Arrived {
    size_t owner_index;
    std::vector<char> bytes;
  };
  struct Evicted {
    int64_t round;
    std::vector<RowId> ids;
    std::vector<int64_t> next_use;  // when evicted; INT64_MAX: ask the directory when the row arrives
    // Checkpoints only: the rows this round's plan promoted from L2 dirty. Until
    // the trainer applies the plan (its write-back of the round arrives) their
    // newest values exist only in the plan's message, so a checkpoint writes them down.
    RowBlock promoted_dirty;
  };
  void apply_arrived();
  void note_report(const WriteBackHeader& header);
  void fill_stats(double* stats) const;
  // The L1 directory of the owner of `id` (one of this producer's trainers).
  const L1Directory& directory_of(const RowId& id) const {
    return directories_[owner_of(id.table, id.key, trainers_) / producers_];
  }  // (kProducerStats) cumulative counters for a staging message
  bool is_pending(const RowId& id) const { return pending_.contains(id); }

  // Initial full row (values + optimizer state), as the servers would make it.
  void new_row(const RowId& id, float* row) const;

  L2Pool* l2_pool_ = nullptr;
  double pool_grant_mb_ = 0;
  int64_t pool_changes_ = 0;
  int64_t ghost_rows_ = 0;
  uint64_t seed_;
  float row_init_scale_;
  int dim_;
  std::unique_ptr<model::SparseOptimizer> sparse_optimizer_;
  int depth_;
  int fault_l2_every_;
  int width_;
  int64_t l1_rows_;
  std::vector<int> owners_;
  std::vector<int> owner_ranks_;
  MPI_Comm world_;
  std::unique_ptr<EvictionPolicy> policy_;
  std::unique_ptr<AccessHistory> history_;  // uses per row across rounds, for L1's and L2's policy
  std::vector<L1Directory> directories_;
  std::unique_ptr<L2HostTier> l2_;
  std::deque<Arrived> arrived_;
  std::vector<std::vector<char>> spare_buffers_;  // of applied write-backs, reused
  // Per owner: the rounds whose evictions have not been written back yet.
  std::vector<std::deque<Evicted>> evicted_;
  RowMap<int> pending_;  // evicted, write-back not yet applied
  std::vector<bool> flushed_;
  int64_t newest_late_round_ = -1;  // newest round a trainer reported late
  int fallback_late_rounds_ = 0;
  int64_t late_run_ = 0;          // consecutive late rounds
  std::vector<bool> checkpoint_flushed_;  // per owner: its checkpoint write-back was applied
  bool keep_promoted_dirty_ = false;      // checkpoints may be taken (checkpoint.dir set)
  bool finished_ = false;         // finish_training done: L2 is written down for good
  std::function<void()> on_wait_;
  int trainers_ = 1, producers_ = 1;  // trainer t is fed by producer t % producers, as its (t / producers)-th
  std::vector<RowId> absent_;     // scratch: a round's rows not in L1
  std::vector<RowId> distinct_;   // scratch: a round's distinct rows (for the trace)
  StagingPlan plan_;              // scratch of stage()
  std::vector<int64_t> arrived_next_use_;  // scratch: next uses of a write-back's rows
  std::unique_ptr<OnlineController> controller_;  // autotune.online
  ControllerBudgets budgets_;     // where the controller has put the budgets
  StagingCounters window_start_counters_;
  L2Counters window_start_l2_;
  int64_t window_max_rows_ = 0;   // largest pinned window since the last decision
  int64_t every_steps_ = 0;
  std::string pending_note_;      // the latest decision, carried by the next staging messages
  std::unique_ptr<AccessTraceWriter> trace_;  // output.trace (one file per producer)
  StagingCounters counters_;
};

}  // namespace strata::store
