// The producer role: reads its shard, builds and de-duplicates batches, and keeps
// up to store.prefetch_depth of them in flight to each of its trainers.
#pragma once

#include <cstdint>

#include "common/cpu_time.hpp"
#include "config/options.hpp"
#include "data/sample_reader.hpp"
#include "data/shared_chunk_cache.hpp"
#include "runtime/checkpointing.hpp"
#include "runtime/role_layout.hpp"

namespace strata::runtime {

struct ProducerReport {
  int64_t batches = 0;
  int64_t samples = 0;
  uint64_t bytes_sent = 0;     // producer -> trainer
  double build_s = 0;          // parsing, hashing, de-duplicating
  double blocked_s = 0;        // waiting because prefetch_depth batches were in flight
  data::ParseStats parse;
  // Tiered store (Scheme B): what this producer's L1 plans and L2 saw.
  bool tiered = false;
  uint64_t l1_hits = 0, l1_misses = 0, l1_evictions = 0;
  uint64_t l2_hits = 0, l2_misses = 0, l2_evictions = 0, l2_write_backs = 0, fallback_rows = 0;
  uint64_t bytes_l3_to_l2 = 0, bytes_l2_to_l3 = 0;
  double staging_s = 0, write_back_wait_s = 0, l3_wait_s = 0;
  double staging_cpu_s = 0;    // CPU time of planning and staging (tiered)
  CpuTimes train_cpu;          // this rank's CPU time over the training phases
  double l2_bytes = 0;          // what the budgets count: its L2 tier,
  double directory_bytes = 0;   // its copies of its trainers' L1 directories,
  double history_bytes = 0;     // and the access history
  int64_t max_window_rows = 0, l1_capacity_rows = 0, l2_capacity_rows = 0;
  uint64_t late_rounds = 0;        // rounds staged after the trainers had run dry
  int64_t ps_fallback_round = -1;  // first step served in Scheme A after a fallback, -1 if none
  // The shared L2 pool (co-trained models): the last grant, its changes, and the decisions this producer took.
  double l2_pool_grant_mb = 0;
  int64_t l2_pool_changes = 0, l2_pool_decisions = 0;
  // Shared ingestion (co-trained models): chunks served by the node's cache and made here.
  data::SharedChunkStats shared;
  data::SharedChunkStats shared_batches;  // whole de-duplicated batches
  // Frequency admission (store.min_count).
  uint64_t admission_keys_seen = 0, admission_keys_defaulted = 0;
};

// True when the run evaluates at the end (same answer on every rank).
bool run_has_eval(const RunOptions& options);

ProducerReport run_producer(const RunOptions& options, const RankContext& context, const ResumePoint& resume);

}  // namespace strata::runtime
