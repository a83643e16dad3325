// The server role: serves one shard of every sparse table to the trainers in
// rounds (see store/server_protocol.hpp) until the trainers stop it.
#pragma once

#include "common/cpu_time.hpp"
#include "config/options.hpp"
#include "runtime/checkpointing.hpp"
#include "runtime/role_layout.hpp"

namespace strata::runtime {

struct ServerReport {
  int64_t rounds = 0;
  int64_t rows = 0;          // rows held at the end
  size_t memory_bytes = 0;
  double training_rss_mib = 0;  // peak RSS before the end-of-run dump of every row
  CpuTimes train_cpu;        // from the first round to the first one after training (eval, dump, stop)
};

ServerReport run_server(const RunOptions& options, const RankContext& context, const ResumePoint& resume);

}  // namespace strata::runtime
