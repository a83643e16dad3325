// Which trials are pruned before they run: a trial must not ask for more memory
// than the machine has (tune.l1_limit_mb, tune.l2_limit_mb), so that an
// over-budget configuration is skipped instead of crashing the job.
#pragma once

#include <string>

#include "config/options.hpp"
#include "tune/trial.hpp"

namespace strata {

// Empty when the trial may run; otherwise every reason it may not, joined by "; ".
// With world_size > 0 a layout knob whose producers + trainers + servers differ
// from it is pruned too (the trial could not be placed on the job's ranks).
std::string prune_reason(const Trial& trial, const TuneOptions& options, int world_size = 0);

}  // namespace strata
