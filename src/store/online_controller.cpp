#include "store/online_controller.hpp"

#include <algorithm>
#include <cstdio>

namespace strata::store {
namespace {

std::string percent(double share) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.0f%%", 100.0 * share);
  return text;
}

std::string mib(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f", value);
  return text;
}

}  // namespace

double online_l1_max_mb(const RunOptions& options, int owners) {
  if (options.autotune.max_l1_mb > 0) return std::max(options.autotune.max_l1_mb, options.store.l1_mb);
  return options.store.l1_mb + options.store.l2_mb / std::max(owners, 1);
}

OnlineController::OnlineController(const AutotuneOptions& options, int horizon, int owners, int row_bytes,
                                   double l1_max_mb)
    : options_(options), horizon_(horizon), owners_(std::max(owners, 1)), row_bytes_(row_bytes), l1_max_mb_(l1_max_mb) {}

ControllerDecision OnlineController::decide(const ControllerWindow& w, const ControllerBudgets& now) const {
  ControllerDecision d;
  d.next = now;
  const double rounds = double(std::max<uint64_t>(w.rounds, 1));
  const double late_share = double(w.late_rounds) / rounds;
  const double l1_hit_rate = double(w.l1_hits) / double(std::max<uint64_t>(w.l1_hits + w.l1_misses, 1));
  const double l2_share = double(w.l2_hits) / double(std::max<uint64_t>(w.l1_misses, 1));  // of L1 misses
  const double window_mb = double(w.window_rows) * row_bytes_ / 1048576.0;
  // The L1 floor: the window must fit, with room to stage the next round.
  const double l1_floor_mb = 1.25 * window_mb;

  // 1. Trainers waiting for staging: look further ahead.
  if (late_share > 0.2 && now.prefetch_depth < options_.max_prefetch && now.prefetch_depth + 1 + horizon_ <= kMaxLookAheadRounds &&
      l1_floor_mb * (now.prefetch_depth + 2) / (now.prefetch_depth + 1) <= now.l1_mb) {
    d.next.prefetch_depth = now.prefetch_depth + 1;
    d.action = "prefetch_depth " + std::to_string(now.prefetch_depth) + " -> " + std::to_string(d.next.prefetch_depth);
    d.reason = "trainers waited for staging in " + percent(late_share) + " of rounds";
    return d;
  }
  // 2. L1 misses keep being found in L2: the hot set outgrew L1; move L2 budget up.
  if (l2_share > 0.15 && now.l1_mb < l1_max_mb_ && now.l2_mb > 0) {
    const double moved = std::min(options_.step_fraction * now.l2_mb, (l1_max_mb_ - now.l1_mb) * owners_);
    if (moved * 1048576.0 >= row_bytes_ * owners_) {
      d.next.l1_mb = now.l1_mb + moved / owners_;
      d.next.l2_mb = now.l2_mb - moved;
      d.action = "l1 " + mib(now.l1_mb) + " -> " + mib(d.next.l1_mb) + " MiB per trainer, l2 " + mib(now.l2_mb) +
                 " -> " + mib(d.next.l2_mb) + " MiB";
      d.reason = percent(l2_share) + " of L1 misses were found in L2: the hot set outgrew L1";
      return d;
    }
  }
  // 3. L1 barely misses and holds far more than its window: give HBM back to L2.
  if (l1_hit_rate > 0.98 && now.l1_mb > 2 * l1_floor_mb && l2_share < 0.05) {
    const double per_trainer = std::min(options_.step_fraction * now.l1_mb, now.l1_mb - l1_floor_mb);
    if (per_trainer * 1048576.0 >= row_bytes_) {
      d.next.l1_mb = now.l1_mb - per_trainer;
      d.next.l2_mb = now.l2_mb + per_trainer * owners_;
      d.action = "l1 " + mib(now.l1_mb) + " -> " + mib(d.next.l1_mb) + " MiB per trainer, l2 " + mib(now.l2_mb) +
                 " -> " + mib(d.next.l2_mb) + " MiB";
      d.reason = "L1 hit rate " + percent(l1_hit_rate) + " with a window of " + std::to_string(w.window_rows) +
                 " rows: L1 has room to spare";
      return d;
    }
  }
  // 4. No waiting and the pinned window crowds L1: a shallower window frees it.
  if (late_share == 0 && now.prefetch_depth > options_.min_prefetch && window_mb > 0.8 * now.l1_mb) {
    d.next.prefetch_depth = now.prefetch_depth - 1;
    d.action = "prefetch_depth " + std::to_string(now.prefetch_depth) + " -> " + std::to_string(d.next.prefetch_depth);
    d.reason = "no round was late and the pinned window fills " + percent(window_mb / now.l1_mb) + " of L1";
  }
  return d;
}

}  // namespace strata::store
