// run_model_set_job: `strata train` of a deck that co-trains several models
// (config/model_set.hpp). The world is cut into one job per model, in the
// deck's order (model 0 takes the first ranks), each a complete strata job of
// its own layout in its own communicator; every model writes output.dir/NAME,
// and world rank 0 writes the job's summary.json beside them.
#pragma once

#include <mpi.h>

#include <nlohmann/json.hpp>

#include "config/model_set.hpp"

namespace strata::runtime {

struct ModelSetResult {
  int exit_code = 0;       // the same on every rank
  nlohmann::json summary;  // the job's summary.json, on world rank 0 (null elsewhere)
};

// The same, returning the job's summary too (strata tune --tune.co_train).
ModelSetResult run_model_set_job_with_result(const ModelSet& set, MPI_Comm world);

// Returns the process exit code (the same on every rank). Throws strata::Error on failure.
int run_model_set_job(const ModelSet& set, MPI_Comm world);

}  // namespace strata::runtime
