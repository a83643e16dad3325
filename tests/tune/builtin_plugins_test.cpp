// The built-in grid and random plugins: the grid covers its discretised space
// exactly once and is then exhausted; random is reproducible by seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "tune/tuner.hpp"
#include "tune_test_util.hpp"

namespace strata {
namespace {

TuneOptions options_for(const std::string& plugin, int trials) {
  TuneOptions options;
  options.plugin = plugin;
  options.trials = trials;
  return options;
}

std::vector<std::string> texts(const Trial& trial) {
  std::vector<std::string> values;
  for (const auto& setting : trial.settings) values.push_back(setting.text);
  return values;
}

std::vector<Trial> drain(Tuner& tuner) {
  std::vector<Trial> trials;
  while (auto trial = tuner.ask()) {
    tuner.tell(*trial, TrialOutcome::completed(double(trial->number)));
    trials.push_back(*trial);
  }
  return trials;
}

TEST(TuneGridPlugin, CoversEveryCombinationOnceThenStops) {
  SearchSpace space;
  space.add(Knob{"a", "test", KnobType::integer, 1, 4, false, {}});       // 1, 2.5 -> 3, 4
  space.add(Knob{"b", "test", KnobType::integer, 1, 64, true, {}});       // 4 points: 1, 4, 16, 64
  space.add(Knob{"c", "test", KnobType::real, 0.5, 2, false, {}});        // 0.5, 1.25, 2
  space.add(Knob{"d", "test", KnobType::categorical, 0, 0, false, {"lru", "lfu"}});
  TuneOptions options = options_for("grid", 1000);
  options.grid_points = 4;
  // 4 points on a (1..4): 1, 2, 3, 4; on c: 0.5, 1, 1.5, 2.
  const std::vector<std::vector<std::string>> axes = {
      {"1", "2", "3", "4"}, {"1", "4", "16", "64"}, {"0.5", "1", "1.5", "2"}, {"lru", "lfu"}};

  Tuner tuner(options, space);
  const auto trials = drain(tuner);
  std::set<std::vector<std::string>> seen;
  for (const auto& trial : trials) {
    EXPECT_TRUE(seen.insert(texts(trial)).second) << "combination proposed twice";
  }
  std::set<std::vector<std::string>> expected;
  for (const auto& a : axes[0])
    for (const auto& b : axes[1])
      for (const auto& c : axes[2])
        for (const auto& d : axes[3]) expected.insert({a, b, c, d});
  EXPECT_EQ(trials.size(), 4u * 4 * 4 * 2);
  EXPECT_EQ(seen, expected);
  // Numbers run from 0 in order.
  for (size_t i = 0; i < trials.size(); ++i) EXPECT_EQ(trials[i].number, int64_t(i));
  EXPECT_FALSE(tuner.ask().has_value());
}

TEST(TuneGridPlugin, RoundsIntegersAndDropsDuplicates) {
  SearchSpace space;
  space.add(Knob{"depth", "test", KnobType::integer, 1, 3, false, {}});  // 1, 1.5, 2, 2.5, 3 -> 1, 2, 3
  space.add(Knob{"mb", "test", KnobType::integer, 1, 8, true, {}});      // 1, 1.68, 2.83, 4.76, 8 -> 1, 2, 3, 5, 8
  TuneOptions options = options_for("grid", 1000);
  options.grid_points = 5;
  Tuner tuner(options, space);
  std::map<std::string, std::set<std::string>> values;
  const auto trials = drain(tuner);
  for (const auto& trial : trials) {
    for (const auto& setting : trial.settings) values[setting.name].insert(setting.text);
  }
  EXPECT_EQ(values["depth"], (std::set<std::string>{"1", "2", "3"}));
  EXPECT_EQ(values["mb"], (std::set<std::string>{"1", "2", "3", "5", "8"}));
  EXPECT_EQ(trials.size(), 15u);
}

TEST(TuneGridPlugin, OnePointSitsInTheMiddleAndLogKnobsAreGeometric) {
  SearchSpace space;
  space.add(Knob{"x", "test", KnobType::real, 1, 100, true, {}});
  TuneOptions options = options_for("grid", 1000);
  options.grid_points = 1;
  Tuner one(options, space);
  auto trials = drain(one);
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_NEAR(trials[0].settings[0].number, 10.0, 1e-9);

  options.grid_points = 3;
  Tuner three(options, space);
  trials = drain(three);
  ASSERT_EQ(trials.size(), 3u);
  EXPECT_EQ(trials[0].settings[0].text, "1");
  EXPECT_NEAR(trials[1].settings[0].number, 10.0, 1e-9);
  EXPECT_EQ(trials[2].settings[0].text, "100");
}

TEST(TuneGridPlugin, TrialBudgetStopsBeforeTheGridIsDone) {
  SearchSpace space;
  space.add(Knob{"d", "test", KnobType::categorical, 0, 0, false, {"a", "b", "c"}});
  Tuner tuner(options_for("grid", 2), space);
  EXPECT_EQ(drain(tuner).size(), 2u);
}

SearchSpace random_space() {
  SearchSpace space;
  space.add(Knob{"i", "test", KnobType::integer, 1, 64, true, {}});
  space.add(Knob{"j", "test", KnobType::integer, -3, 3, false, {}});
  space.add(Knob{"x", "test", KnobType::real, 0.5, 2, false, {}});
  space.add(Knob{"p", "test", KnobType::categorical, 0, 0, false, {"lru", "lfu", "lookahead"}});
  return space;
}

std::vector<std::vector<std::string>> random_sequence(uint64_t seed, int count) {
  TuneOptions options = options_for("random", count);
  options.seed = seed;
  Tuner tuner(options, random_space());
  std::vector<std::vector<std::string>> sequence;
  for (const auto& trial : drain(tuner)) sequence.push_back(texts(trial));
  return sequence;
}

TEST(TuneRandomPlugin, SameSeedSameTrialsOtherSeedOtherTrials) {
  const auto first = random_sequence(42, 30);
  const auto again = random_sequence(42, 30);
  const auto other = random_sequence(43, 30);
  ASSERT_EQ(first.size(), 30u);
  EXPECT_EQ(first, again);
  EXPECT_NE(first, other);
}

TEST(TuneRandomPlugin, StaysInsideTheSpaceAndReachesEveryCandidate) {
  TuneOptions options = options_for("random", 400);
  options.seed = 9;
  Tuner tuner(options, random_space());
  std::set<std::string> policies;
  std::set<int64_t> small_integers;
  for (const auto& trial : drain(tuner)) {
    const double i = trial.find("i")->number;
    const double j = trial.find("j")->number;
    const double x = trial.find("x")->number;
    EXPECT_TRUE(i >= 1 && i <= 64 && i == std::floor(i)) << i;
    EXPECT_TRUE(j >= -3 && j <= 3) << j;
    EXPECT_TRUE(x >= 0.5 && x <= 2) << x;
    small_integers.insert(int64_t(j));
    policies.insert(trial.find("p")->text);
  }
  EXPECT_EQ(policies.size(), 3u);
  EXPECT_EQ(small_integers.size(), 7u);  // -3 .. 3, bounds included
}

}  // namespace
}  // namespace strata
