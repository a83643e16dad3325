// strata tune: a search over configurations inside one MPI job. World rank 0
// asks the tuner plugin for a trial and broadcasts its overrides; every rank
// re-splits into the trial's roles, trains warm-up + tune.trial_steps steps,
// and rank 0 reports the measured samples/s (after the warm-up) to the plugin,
// logs trials.csv and rewrites best.ini. A trial whose budgets exceed the
// limits, whose layout does not fit the job, whose configuration the engine
// refuses, or whose L1 cannot hold one prefetch window is pruned before it runs.
#pragma once

#include <string>
#include <vector>

namespace strata {

// Collective over MPI_COMM_WORLD. Returns the exit code; throws strata::Error
// for a bad deck or search space (the same on every rank).
int run_tune_command(const std::vector<std::string>& args);

}  // namespace strata
