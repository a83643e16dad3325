// What an earlier run left in output.dir, and the rule that a new run never
// replaces it silently: `strata train`, `trace` and `tune` refuse a folder that
// holds another run's outputs unless output.overwrite is set, which removes them
// first. A run that resumes from a checkpoint continues in its own folder.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "config/options.hpp"

namespace strata::runtime {

// The entries of `dir` that strata train/trace/tune write: summary.json,
// metrics.jsonl, trials.csv, best.ini and trial-NNNNN/ folders, sorted by name
// (empty when dir is missing or holds none of them).
std::vector<std::string> earlier_run_outputs(const std::string& dir);

// On the calling rank: throws strata::Error naming `dir`, what it holds and the
// fixes when it holds earlier outputs and `overwrite` is false; with `overwrite`,
// removes them. `command` ("strata train") and `extra_fix` go into the message.
// Creates nothing: the writers create the folder when they first need it.
void claim_output_dir(const std::string& dir, bool overwrite, const std::string& command,
                      const std::string& extra_fix = {});

// Collective over `world` at the start of a train job: world rank 0 (which writes
// the outputs) claims options.output.dir unless the run resumes
// (checkpoint.resume set), and tells every rank. False on every rank when it
// refused; rank 0 has then printed the error once.
bool claim_train_output_dir(const RunOptions& options, MPI_Comm world);

}  // namespace strata::runtime
