// TrialLog: trials.csv rows read back exactly (reasons with commas, quotes and
// newlines included), the best trial by direction, best.ini that the engine's
// deck parser accepts, continuing a log, refusing a log of another space.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "config/deck.hpp"
#include "tune/trial_log.hpp"
#include "tune/trial_overrides.hpp"
#include "tune_test_util.hpp"

namespace strata {
namespace {

using test::contains;

SearchSpace store_space() {
  TuneOptions options;
  options.space_layout = "1/2/1|2/1/1";
  return SearchSpace::from_options(options);  // l1 (integer, log), l2, prefetch, policy, layout
}

Trial store_trial(int64_t number, int64_t l1, const std::string& policy, const std::string& layout) {
  return Trial{number,
               {KnobSetting::integer("store.l1_mb", l1), KnobSetting::integer("store.l2_mb", 128),
                KnobSetting::integer("store.prefetch_depth", 3), KnobSetting::categorical("store.policy", policy),
                KnobSetting::categorical("layout", layout)}};
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(TuneTrialLog, RowsReadBackExactly) {
  const std::string dir = test::scratch_dir("log") + "/nested/run";
  TrialLog log(dir, store_space(), Objective{});
  const std::string awkward = "crashed, said \"out of memory\"\non rank 2";
  log.record(store_trial(0, 8, "lru", "1/2/1"), TrialOutcome::completed(1500.25), 2.5);
  log.record(store_trial(1, 64, "lfu", "2/1/1"), TrialOutcome::pruned("store.l1_mb over the limit"), 0);
  log.record(store_trial(2, 16, "lookahead", "1/2/1"), TrialOutcome::failed(awkward), 1.25);

  const std::string csv = read_text(dir + "/trials.csv");
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "trial,store.l1_mb,store.l2_mb,store.prefetch_depth,store.policy,layout,samples_per_s,direction,state,"
            "reason,seconds");
  const auto rows = log.read();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].trial.number, 0);
  EXPECT_EQ(rows[0].trial.find("store.l1_mb")->text, "8");
  EXPECT_EQ(rows[0].trial.find("layout")->text, "1/2/1");
  EXPECT_EQ(rows[0].outcome.state, TrialOutcome::State::complete);
  EXPECT_EQ(rows[0].outcome.value, 1500.25);
  EXPECT_EQ(rows[0].seconds, 2.5);
  EXPECT_EQ(rows[1].outcome.state, TrialOutcome::State::pruned);
  EXPECT_EQ(rows[1].outcome.reason, "store.l1_mb over the limit");
  EXPECT_EQ(rows[2].outcome.state, TrialOutcome::State::failed);
  EXPECT_EQ(rows[2].outcome.reason, awkward);
  EXPECT_EQ(rows[2].trial.find("store.policy")->text, "lookahead");
}

TEST(TuneTrialLog, BestFollowsTheDirection) {
  const std::string base = test::scratch_dir("best");
  TrialLog maximize(base + "/max", store_space(), Objective{"samples_per_s", Direction::maximize});
  TrialLog minimize(base + "/min", store_space(), Objective{"seconds_per_step", Direction::minimize});
  EXPECT_FALSE(maximize.best().has_value());
  for (TrialLog* log : {&maximize, &minimize}) {
    log->record(store_trial(0, 8, "lru", "1/2/1"), TrialOutcome::completed(20), 1);
    log->record(store_trial(1, 16, "lfu", "1/2/1"), TrialOutcome::completed(10), 1);
    log->record(store_trial(2, 32, "lfu", "1/2/1"), TrialOutcome::completed(30), 1);
    log->record(store_trial(3, 4, "lfu", "1/2/1"), TrialOutcome::pruned("too big"), 0);
  }
  EXPECT_EQ(maximize.best()->trial.number, 2);
  EXPECT_EQ(minimize.best()->trial.number, 1);
  EXPECT_TRUE(contains(read_text(base + "/min/trials.csv"), ",seconds_per_step,direction,"));
}

TEST(TuneTrialLog, BestDeckIsAcceptedByTheEngine) {
  const std::string dir = test::scratch_dir("deck");
  TrialLog log(dir, store_space(), Objective{});
  EXPECT_FALSE(log.write_best_deck([](const Trial&) { return std::string("never called"); }).has_value());
  log.record(store_trial(0, 8, "lru", "1/2/1"), TrialOutcome::completed(100), 1);
  log.record(store_trial(1, 24, "lfu", "2/1/1"), TrialOutcome::completed(300), 1);
  const std::vector<std::string> base_args = {"--train.steps=10", "--output.dir=runs/elsewhere"};
  auto best = log.write_best_deck([&](const Trial& trial) {
    auto args = base_args;
    for (const auto& arg : overrides(trial)) args.push_back(arg);
    return to_ini(parse_run_options(args));
  });
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->trial.number, 1);

  const std::string deck = read_text(log.best_deck_path());
  EXPECT_TRUE(contains(deck, "trial 1, samples_per_s = 300")) << deck;
  const RunOptions reread = parse_run_options({"--config", log.best_deck_path()});
  EXPECT_EQ(reread.store.l1_mb, 24);
  EXPECT_EQ(reread.store.policy, "lfu");
  EXPECT_EQ(reread.layout.producers, 2);
  EXPECT_EQ(reread.layout.trainers, 1);
  EXPECT_EQ(reread.train.steps, 10);
}

TEST(TuneTrialLog, ContinuesALogOfTheSameSpaceAndRefusesAnother) {
  const std::string dir = test::scratch_dir("continue");
  {
    TrialLog first(dir, store_space(), Objective{});
    first.record(store_trial(0, 8, "lru", "1/2/1"), TrialOutcome::completed(5), 1);
  }
  TrialLog second(dir, store_space(), Objective{});
  second.record(store_trial(1, 8, "lru", "1/2/1"), TrialOutcome::completed(7), 1);
  EXPECT_EQ(second.read().size(), 2u);
  EXPECT_EQ(second.best()->trial.number, 1);

  Error error = test::expect_error([&] { TrialLog other(dir, SearchSpace::from_options(TuneOptions{}), Objective{}); });
  EXPECT_TRUE(contains(error.what_failed(), dir + "/trials.csv")) << error.what();
  EXPECT_TRUE(contains(error.how_to_fix(), "output.dir")) << error.what();
}

TEST(TuneTrialLog, TwoWritersShareOneFile) {
  // Two logs on one folder, as two processes sharing an output.dir would be.
  const std::string dir = test::scratch_dir("shared");
  TrialLog a(dir, store_space(), Objective{});
  TrialLog b(dir, store_space(), Objective{});
  for (int i = 0; i < 20; ++i) {
    (i % 2 ? a : b).record(store_trial(i, 8, "lru", "1/2/1"), TrialOutcome::completed(i), 0.5);
  }
  const auto rows = a.read();
  ASSERT_EQ(rows.size(), 20u);
  EXPECT_EQ(b.best()->trial.number, 19);
  const std::string csv = read_text(dir + "/trials.csv");
  EXPECT_EQ(csv.find("trial,"), 0u);
  EXPECT_EQ(csv.find("trial,", 1), std::string::npos) << "one header only";
}

}  // namespace
}  // namespace strata
