// overrides(): a trial becomes --key=value arguments that the engine's own deck
// parser reads back into exactly the trial's values.
#include <gtest/gtest.h>

#include "config/deck.hpp"
#include "tune/trial_overrides.hpp"
#include "tune_test_util.hpp"

namespace strata {
namespace {

Trial sample_trial() {
  Trial trial;
  trial.number = 3;
  trial.settings = {KnobSetting::real("store.l1_mb", 12.5), KnobSetting::integer("store.l2_mb", 200),
                    KnobSetting::integer("store.prefetch_depth", 4), KnobSetting::categorical("store.policy", "lfu"),
                    KnobSetting::categorical("layout", "1/2/1"), KnobSetting::categorical("train.batch_size", "512")};
  return trial;
}

TEST(TuneTrialOverrides, OneArgumentPerKnobAndThreeForTheLayout) {
  EXPECT_EQ(overrides(sample_trial()),
            (std::vector<std::string>{"--store.l1_mb=12.5", "--store.l2_mb=200", "--store.prefetch_depth=4",
                                      "--store.policy=lfu", "--layout.producers=1", "--layout.trainers=2",
                                      "--layout.servers=1", "--train.batch_size=512"}));
}

TEST(TuneTrialOverrides, TheEngineReadsThemBack) {
  const RunOptions options = parse_run_options(overrides(sample_trial()));
  EXPECT_EQ(options.store.l1_mb, 12.5);
  EXPECT_EQ(options.store.l2_mb, 200);
  EXPECT_EQ(options.store.prefetch_depth, 4);
  EXPECT_EQ(options.store.policy, "lfu");
  EXPECT_EQ(options.layout.producers, 1);
  EXPECT_EQ(options.layout.trainers, 2);
  EXPECT_EQ(options.layout.servers, 1);
  EXPECT_EQ(options.train.batch_size, 512);
}

TEST(TuneTrialOverrides, NumbersKeepEveryDigit) {
  EXPECT_EQ(format_number(0.1), "0.1");
  EXPECT_EQ(format_number(64), "64");
  EXPECT_EQ(format_number(3.0000000000000004), "3.0000000000000004");
  const double awkward = 7.123456789012345;
  EXPECT_EQ(std::stod(format_number(awkward)), awkward);
}

TEST(TuneTrialOverrides, BadLayoutsAreErrors) {
  for (const char* bad : {"1/2", "1/2/1/1", "a/b/c", "1//1", "-1/2/1", ""}) {
    Error error = test::expect_error([&] { parse_layout_split(bad); });
    EXPECT_TRUE(test::contains(error.how_to_fix(), "producers/trainers/servers")) << bad;
  }
  const LayoutSplit split = parse_layout_split("2/4/1");
  EXPECT_EQ(split.producers, 2);
  EXPECT_EQ(split.trainers, 4);
  EXPECT_EQ(split.servers, 1);
}

TEST(TuneTrialOverrides, ALayoutWithAxesSetsAllThree) {
  const Trial trial{0, {KnobSetting::categorical("layout", "1/4/1,sp=2,sp_mode=alltoall")}};
  EXPECT_EQ(overrides(trial), (std::vector<std::string>{"--layout.producers=1", "--layout.trainers=4",
                                                        "--layout.servers=1", "--layout.dp=0", "--layout.sp=2",
                                                        "--layout.ep=1", "--layout.sp_mode=alltoall"}));
  const LayoutSplit split = parse_layout_split("1/8/2,dp=2,ep=4");
  EXPECT_TRUE(split.parallel);
  EXPECT_EQ(split.dp, 2);
  EXPECT_EQ(split.sp, 1);
  EXPECT_EQ(split.ep, 4);
  EXPECT_TRUE(split.sp_mode.empty());
  EXPECT_FALSE(parse_layout_split("1/2/1").parallel);
  // Read back by the engine with a model that has sequences to split.
  std::vector<std::string> args = overrides(trial);
  args.push_back("--model.kind=sasrec");
  args.push_back("--data.source=synthetic_sequences");
  args.push_back("--data.sequence_task=next_item");
  args.push_back("--model.sasrec_heads=2");
  const RunOptions options = parse_run_options(args);
  EXPECT_EQ(options.layout.sp, 2);
  EXPECT_EQ(options.layout.dp, 2);
  EXPECT_EQ(options.layout.sp_mode, "alltoall");
}

TEST(TuneTrialOverrides, BadLayoutAxesAreErrors) {
  for (const char* bad : {"1/4/1,", "1/4/1,sp", "1/4/1,sp=0", "1/4/1,ep=-1", "1/4/1,tp=2", "1/4/1,sp_mode=ulysses",
                          "1/4/1,sp=2,"}) {
    Error error = test::expect_error([&] { parse_layout_split(bad); });
    EXPECT_TRUE(test::contains(error.what_failed(), bad)) << bad;
    EXPECT_TRUE(test::contains(error.how_to_fix(), "sp=2")) << bad;
  }
}

}  // namespace
}  // namespace strata
