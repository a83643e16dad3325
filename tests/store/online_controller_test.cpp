// OnlineController's decisions on hand-made windows: each rule fires on the
// measurement it is meant for, in the right direction, and keeps the totals.
#include <gtest/gtest.h>

#include "store/online_controller.hpp"

namespace strata::store {
namespace {

AutotuneOptions options() {
  AutotuneOptions o;
  o.online = true;
  o.min_prefetch = 1;
  o.max_prefetch = 6;
  o.step_fraction = 0.25;
  return o;
}

constexpr int kRowBytes = 128;

TEST(OnlineController, HotSetOutgrowingL1MovesBudgetFromL2ToL1) {
  OnlineController c(options(), 4, 2, kRowBytes, 100.0);
  ControllerWindow w{100, 0, 6000, 4000, 2000, 5000};  // half of L1's misses hit L2
  ControllerBudgets now{8.0, 64.0, 2};
  ControllerDecision d = c.decide(w, now);
  EXPECT_GT(d.next.l1_mb, now.l1_mb);
  EXPECT_LT(d.next.l2_mb, now.l2_mb);
  EXPECT_NEAR(2 * d.next.l1_mb + d.next.l2_mb, 2 * now.l1_mb + now.l2_mb, 1e-9);  // total kept
  EXPECT_NE(d.reason.find("outgrew L1"), std::string::npos) << d.reason;
}

TEST(OnlineController, L1NeverGrowsPastItsLimit) {
  OnlineController c(options(), 4, 2, kRowBytes, 8.0);
  ControllerWindow w{100, 0, 6000, 4000, 2000, 5000};
  ControllerDecision d = c.decide(w, {8.0, 64.0, 2});
  EXPECT_EQ(d.next.l1_mb, 8.0);
  EXPECT_TRUE(d.action.empty() || d.action.find("prefetch") != std::string::npos) << d.action;
}

TEST(OnlineController, IdleL1GivesBudgetBackToL2) {
  OnlineController c(options(), 4, 2, kRowBytes, 100.0);
  ControllerWindow w{100, 0, 99900, 100, 0, 1000};  // 1000 rows = 0.12 MiB window in a 16 MiB L1
  ControllerDecision d = c.decide(w, {16.0, 16.0, 2});
  EXPECT_LT(d.next.l1_mb, 16.0);
  EXPECT_GT(d.next.l2_mb, 16.0);
  EXPECT_NEAR(2 * d.next.l1_mb + d.next.l2_mb, 48.0, 1e-9);
}

TEST(OnlineController, LateStagingDeepensTheWindow) {
  OnlineController c(options(), 4, 1, kRowBytes, 100.0);
  ControllerWindow w{100, 40, 6000, 4000, 0, 1000};
  ControllerDecision d = c.decide(w, {16.0, 16.0, 2});
  EXPECT_EQ(d.next.prefetch_depth, 3);
  EXPECT_NE(d.reason.find("waited"), std::string::npos);
  // Not past the limit.
  EXPECT_EQ(c.decide(w, {16.0, 16.0, 6}).next.prefetch_depth, 6);
}

TEST(OnlineController, CrowdedL1ShortensTheWindowWhenNothingWaits) {
  OnlineController c(options(), 4, 1, kRowBytes, 4.0);
  ControllerWindow w{100, 0, 6000, 4000, 0, 30000};  // 3.7 MiB window in a 4 MiB L1
  ControllerDecision d = c.decide(w, {4.0, 0.0, 4});
  EXPECT_EQ(d.next.prefetch_depth, 3);
}

TEST(OnlineController, SteadyWindowChangesNothing) {
  OnlineController c(options(), 4, 1, kRowBytes, 100.0);
  ControllerWindow w{100, 0, 9000, 1000, 50, 20000};
  ControllerDecision d = c.decide(w, {8.0, 8.0, 2});
  EXPECT_TRUE(d.action.empty()) << d.action;
  EXPECT_EQ(d.next.l1_mb, 8.0);
}

}  // namespace
}  // namespace strata::store
