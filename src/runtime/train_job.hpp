// run_train_job: one `strata train` under MPI. Splits the world into roles, runs
// this rank's role, then gathers every rank's report so that rank 0 can write
// summary.json.
#pragma once

#include <mpi.h>

#include <nlohmann/json.hpp>

#include "config/options.hpp"

namespace strata::runtime {

// Returns the process exit code. Throws strata::Error on failure.
int run_train_job(const RunOptions& options, MPI_Comm world);

// The same, also returning summary.json's content on world rank 0 (null elsewhere).
struct TrainJobResult {
  int exit_code = 0;
  nlohmann::json summary;
};
TrainJobResult run_train_job_with_result(const RunOptions& options, MPI_Comm world);

// The checks that need the data's shape and the model (a bottom MLP that does
// not end in embedding_dim, heads that do not divide it, a model that cannot
// read this data); strata::Error naming the key. Reads no more than the data's header.
void check_model_reads_data(const RunOptions& options);

}  // namespace strata::runtime
