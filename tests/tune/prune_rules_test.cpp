// prune_reason(): trials over the memory limits, or whose layout does not fit
// the job, are pruned with a reason naming the knob and the limit.
#include <gtest/gtest.h>

#include "tune/prune_rules.hpp"
#include "tune_test_util.hpp"

namespace strata {
namespace {

using test::contains;

Trial trial_with(double l1, double l2) {
  return Trial{0, {KnobSetting::real("store.l1_mb", l1), KnobSetting::integer("store.l2_mb", int64_t(l2))}};
}

TEST(TunePruneRules, WithinTheLimitsRuns) {
  TuneOptions options;
  options.l1_limit_mb = 64;
  options.l2_limit_mb = 256;
  EXPECT_EQ(prune_reason(trial_with(64, 256), options), "");
  EXPECT_EQ(prune_reason(Trial{0, {KnobSetting::categorical("store.policy", "lru")}}, options), "");
}

TEST(TunePruneRules, OverALimitIsPrunedWithTheReason) {
  TuneOptions options;
  options.l1_limit_mb = 64;
  options.l2_limit_mb = 256;
  const std::string l1 = prune_reason(trial_with(64.5, 10), options);
  EXPECT_TRUE(contains(l1, "store.l1_mb = 64.5")) << l1;
  EXPECT_TRUE(contains(l1, "tune.l1_limit_mb = 64")) << l1;
  EXPECT_FALSE(contains(l1, "l2")) << l1;
  const std::string both = prune_reason(trial_with(100, 300), options);
  EXPECT_TRUE(contains(both, "store.l1_mb") && contains(both, "store.l2_mb = 300")) << both;
  // Numeric candidates ("8|128") are checked too.
  const std::string candidate = prune_reason(Trial{0, {KnobSetting::categorical("store.l1_mb", "128")}}, options);
  EXPECT_TRUE(contains(candidate, "store.l1_mb = 128")) << candidate;
}

TEST(TunePruneRules, LayoutMustMatchTheWorldSize) {
  TuneOptions options;
  const Trial trial{0, {KnobSetting::categorical("layout", "1/2/1")}};
  EXPECT_EQ(prune_reason(trial, options), "");      // world size unknown: not checked
  EXPECT_EQ(prune_reason(trial, options, 4), "");
  const std::string reason = prune_reason(trial, options, 3);
  EXPECT_TRUE(contains(reason, "needs 4 ranks")) << reason;
}

}  // namespace
}  // namespace strata
