// run_train_job: one `strata train` under MPI. Splits the world into roles, runs
// this rank's role, then gathers every rank's report so that rank 0 can write
// summary.json.
#pragma once

#include <mpi.h>

#include "config/options.hpp"

namespace strata::runtime {

// Returns the process exit code. Throws strata::Error on failure.
int run_train_job(const RunOptions& options, MPI_Comm world);

}  // namespace strata::runtime
