// largest_window_rows: the tiered store's minimum L1 budget for the start of a
// run, computed from the data alone, exactly as the producers will see it: the
// most distinct rows one trainer owns over prefetch_depth + 1 consecutive
// rounds. strata tune prunes a trial whose L1 is below it instead of letting
// the job fail mid-trial.
#pragma once

#include <cstdint>

#include "config/options.hpp"

namespace strata::runtime {

// Over the first `rounds` rounds (fewer if the first epoch ends sooner).
int64_t largest_window_rows(const RunOptions& options, int64_t rounds);

}  // namespace strata::runtime
