// OnlineController (autotune.online): every autotune.every_steps rounds a
// producer looks at what its levels did in that window and moves budget
// between its trainers' L1s and its L2, or changes the prefetch depth. The
// total of one producer's budgets stays fixed; only where it sits moves.
// Caching never changes the numbers, so no decision can break exactness.
#pragma once

#include <cstdint>
#include <string>

#include "config/options.hpp"

namespace strata::store {

// What the levels did during one decision window (deltas of the counters).
struct ControllerWindow {
  uint64_t rounds = 0;
  uint64_t late_rounds = 0;      // rounds the trainers had run dry
  uint64_t l1_hits = 0, l1_misses = 0;
  uint64_t l2_hits = 0;          // L1 misses found in L2 (promotions)
  int64_t window_rows = 0;       // largest pinned window of an L1 (its floor)
};

// Where the budgets stand (per trainer L1, the producer's L2).
struct ControllerBudgets {
  double l1_mb = 0;
  double l2_mb = 0;
  int prefetch_depth = 1;
};

struct ControllerDecision {
  ControllerBudgets next;
  std::string action;  // e.g. "l1 4.0 -> 5.0 MiB, l2 16.0 -> 14.0 MiB"; empty when nothing changes
  std::string reason;  // the measurement behind it
};

// The most one L1 may hold under the controller: autotune.max_l1_mb, or the
// producer's whole budget (its trainers' L1s and its L2) when that is 0.
double online_l1_max_mb(const RunOptions& options, int owners);

class OnlineController {
 public:
  // owners: trainers this producer feeds; row_bytes: one cached row;
  // l1_max_mb: the most one L1 may hold (its arena is reserved at that size).
  OnlineController(const AutotuneOptions& options, int horizon, int owners, int row_bytes, double l1_max_mb);

  ControllerDecision decide(const ControllerWindow& window, const ControllerBudgets& now) const;

 private:
  AutotuneOptions options_;
  int horizon_;
  int owners_;
  int row_bytes_;
  double l1_max_mb_;
};

}  // namespace strata::store
