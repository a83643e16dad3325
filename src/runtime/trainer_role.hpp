// The trainer role: the synchronous training loop. Receives batches from its
// producer, reaches rows through the ParameterStore, runs the DLRM forward and
// backward, all-reduces dense gradients, evaluates, and (trainer 0) writes the
// metrics, the summary and the params digest.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "common/cpu_time.hpp"
#include "config/options.hpp"
#include "model/model.hpp"
#include "runtime/checkpointing.hpp"
#include "runtime/role_layout.hpp"

namespace strata::runtime {

struct TrainerReport {
  int64_t steps = 0;
  int64_t samples = 0;          // over all trainers
  double train_seconds = 0;
  double samples_per_s = 0;
  double measured_samples_per_s = 0;  // after options.measure_after_steps (strata tune), else = samples_per_s
  double train_logloss = 0;     // mean over the last metrics window
  double eval_auc = -1;
  double eval_logloss = -1;
  std::vector<double> eval_auc_per_task, eval_logloss_per_task;  // multi-task models (task 0 = eval_auc)
  double eval_hit_rate = -1;  // next-item models: HR@10 on the held-out events
  double eval_ndcg = -1;      // next-item models: NDCG@10
  int64_t eval_samples = 0;
  std::string params_digest;    // trainer 0 only
  int64_t sparse_rows = 0;      // trainer 0 only: rows in the store at the end
  double stall_s = 0;           // this trainer: waiting for batches
  double pull_wait_s = 0;       // this trainer: waiting for rows
  uint64_t rows_pulled = 0, bytes_pulled = 0, rows_pushed = 0, bytes_pushed = 0, bytes_requested = 0;
  uint64_t bytes_batches = 0;   // producer -> this trainer
  uint64_t bytes_allreduce = 0; // this trainer's dense all-reduce payload
  uint64_t keys_total = 0;      // training keys read, every occurrence (all tables, all steps)
  uint64_t keys_unique = 0;     // the same after de-duplication per table and batch
  uint64_t keys_batches = 0;    // training batches those were counted over (this run)
  bool preempted = false;       // stopped by SIGTERM/SIGUSR1 after writing a checkpoint
  int64_t resumed_from_step = -1;
  int64_t checkpoints = 0;      // written by this run
  double checkpoint_pause_s = 0;  // training time spent writing them
  CpuTimes train_cpu;           // this rank's CPU time over the training loop
  double training_rss_mib = 0;  // peak RSS before the end-of-run dump of every row
  double l1_bytes = 0;          // what its L1 tier holds (tiered mode)
  double dense_bytes = 0;       // its dense weights, their gradients and optimizer state (its own experts only under ep)
  model::RoutingStats routing;  // trainer 0: every trainer's expert routing over the run (moe)
  uint64_t bytes_experts = 0;   // this trainer's expert all-to-all and replica-chain payload
  uint64_t bytes_sequence = 0;  // this trainer's sequence-parallel attention payload (layout.sp > 1)
  model::SequenceParallelStats sequence_parallel;  // this trainer's SP plans over the run
};

// The expert routing counters as JSON: per-expert counts, drop fraction, max/mean load.
nlohmann::json routing_json(const model::RoutingStats& stats);

TrainerReport run_trainer(const RunOptions& options, const RankContext& context, const ResumePoint& resume);

}  // namespace strata::runtime
