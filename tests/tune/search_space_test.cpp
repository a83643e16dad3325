// SearchSpace::from_options: the tune.space_* specs become knobs of the right
// type; a malformed spec, or one the engine would refuse, is an error naming
// the deck key and the accepted forms.
#include <gtest/gtest.h>

#include "tune/objective.hpp"
#include "tune/search_space.hpp"
#include "tune_test_util.hpp"

namespace strata {
namespace {

using test::contains;
using test::expect_error;

TuneOptions only(std::string TuneOptions::*key, const std::string& spec) {
  TuneOptions options;
  options.space_l1_mb = options.space_l2_mb = options.space_prefetch_depth = options.space_policy = "";
  options.space_layout = options.space_batch_size = "";
  options.*key = spec;
  return options;
}

// A numeric knob's name, deck key, type and range.
void expect_range_knob(const Knob& knob, const std::string& name, const std::string& deck_key, KnobType type,
                       double low, double high, bool log_scale) {
  EXPECT_EQ(knob.name, name);
  EXPECT_EQ(knob.deck_key, deck_key);
  EXPECT_EQ(knob.type, type);
  EXPECT_EQ(knob.low, low);
  EXPECT_EQ(knob.high, high);
  EXPECT_EQ(knob.log_scale, log_scale);
}

TEST(TuneSearchSpace, HorizonIsAWholeNumberKnobOfItsOwn) {
  const SearchSpace space = SearchSpace::from_options(only(&TuneOptions::space_horizon, "8:128:log"));
  ASSERT_EQ(space.knobs().size(), 1u);
  expect_range_knob(space.knobs()[0], "store.horizon", "tune.space_horizon", KnobType::integer, 8, 128, true);
  EXPECT_TRUE(SearchSpace::from_options(TuneOptions{}).find("store.horizon") == nullptr) << "not searched by default";
}

TEST(TuneSearchSpace, DefaultsSearchTheStoreKnobs) {
  const SearchSpace space = SearchSpace::from_options(TuneOptions{});
  ASSERT_EQ(space.knobs().size(), 4u);
  expect_range_knob(space.knobs()[0], "store.l1_mb", "tune.space_l1_mb", KnobType::integer, 1, 64, true);
  EXPECT_EQ(space.knobs()[1].name, "store.l2_mb");
  EXPECT_FALSE(space.knobs()[1].log_scale);
  EXPECT_EQ(space.knobs()[2].name, "store.prefetch_depth");
  const Knob& policy = space.knobs()[3];
  EXPECT_EQ(policy.type, KnobType::categorical);
  EXPECT_EQ(policy.candidates, (std::vector<std::string>{"lru", "lfu", "lookahead"}));
}

TEST(TuneSearchSpace, EveryKeyInItsFixedOrder) {
  TuneOptions options;
  options.space_layout = "1/2/1|2/1/1";
  options.space_batch_size = "128:1024:log";
  options.space_sparse_lr = "0.01:0.2:log";
  options.space_dense_lr = "0.001|0.01";
  const SearchSpace space = SearchSpace::from_options(options);
  std::vector<std::string> names;
  for (const auto& knob : space.knobs()) names.push_back(knob.name);
  EXPECT_EQ(names, (std::vector<std::string>{"store.l1_mb", "store.l2_mb", "store.prefetch_depth", "store.policy",
                                             "layout", "train.batch_size", "optim.sparse_lr", "optim.dense_lr"}));
  const Knob& sparse_lr = *space.find("optim.sparse_lr");
  EXPECT_EQ(sparse_lr.type, KnobType::real);
  EXPECT_TRUE(sparse_lr.log_scale);
  EXPECT_EQ(sparse_lr.deck_key, "tune.space_sparse_lr");
  EXPECT_EQ(space.find("optim.dense_lr")->candidates, (std::vector<std::string>{"0.001", "0.01"}));
  EXPECT_EQ(space.find("layout")->candidates, (std::vector<std::string>{"1/2/1", "2/1/1"}));
  EXPECT_EQ(space.find("train.batch_size")->type, KnobType::integer);
  EXPECT_EQ(space.find("nothing"), nullptr);
}

TEST(TuneSearchSpace, LearningRatesTheEngineRefusesNameTheirKey) {
  // A learning rate must be > 0: a range reaching 0 fails here, naming the tune key.
  auto message = [](std::string TuneOptions::*key, const std::string& spec) {
    return std::string(expect_error([&] { SearchSpace::from_options(only(key, spec)); }).what());
  };
  const std::string zero = message(&TuneOptions::space_sparse_lr, "0:0.1");
  EXPECT_TRUE(contains(zero, "tune.space_sparse_lr") && contains(zero, "optim.sparse_lr") && contains(zero, "> 0"))
      << zero;
  const std::string negative = message(&TuneOptions::space_dense_lr, "0.01|-1");
  EXPECT_TRUE(contains(negative, "tune.space_dense_lr") && contains(negative, "optim.dense_lr = -1")) << negative;
  const std::string log = message(&TuneOptions::space_dense_lr, "0:0.1:log");
  EXPECT_TRUE(contains(log, "tune.space_dense_lr") && contains(log, "lo > 0")) << log;
}

TEST(TuneObjective, NamedObjectivesKnowTheirDirection) {
  EXPECT_EQ(Objective::named("samples_per_s").direction, Direction::maximize);
  EXPECT_EQ(Objective::named("eval_auc").direction, Direction::maximize);
  EXPECT_EQ(Objective::named("eval_logloss").direction, Direction::minimize);
  EXPECT_TRUE(Objective::named("eval_logloss").better(0.40, 0.45));
  EXPECT_FALSE(Objective::named("eval_auc").better(0.70, 0.71));
}

TEST(TuneSearchSpace, LayoutsWithAxesAreCheckedPerTrialNotHere) {
  // sp = 2 needs a sequence model the default deck lacks: the search still
  // starts, and the trial is pruned with the engine's reason (e2e_tune_layouts).
  TuneOptions options;
  options.space_layout = "1/2/1|1/2/1,sp=2|1/2/1,ep=2";
  const SearchSpace space = SearchSpace::from_options(options);
  EXPECT_EQ(space.find("layout")->candidates, (std::vector<std::string>{"1/2/1", "1/2/1,sp=2", "1/2/1,ep=2"}));
}

TEST(TuneSearchSpace, FloatsWhenABoundIsNotWhole) {
  const SearchSpace space = SearchSpace::from_options(only(&TuneOptions::space_l1_mb, " 0.5 : 64 : log "));
  ASSERT_EQ(space.knobs().size(), 1u);
  EXPECT_EQ(space.knobs()[0].type, KnobType::real);
  EXPECT_EQ(space.knobs()[0].low, 0.5);
  EXPECT_TRUE(space.knobs()[0].log_scale);
  const SearchSpace numbers = SearchSpace::from_options(only(&TuneOptions::space_batch_size, "256|512"));
  EXPECT_EQ(numbers.knobs()[0].type, KnobType::categorical);
}

TEST(TuneSearchSpace, EmptySpecsSearchNothing) {
  EXPECT_TRUE(SearchSpace::from_options(only(&TuneOptions::space_l1_mb, "  ")).empty());
}

struct BadSpec {
  std::string TuneOptions::*key;
  const char* deck_key;
  const char* spec;
  const char* detail;  // a part of the message
};

TEST(TuneSearchSpace, MalformedSpecsNameTheirKey) {
  const BadSpec cases[] = {
      {&TuneOptions::space_l1_mb, "tune.space_l1_mb", "64:1", "lo > hi"},
      {&TuneOptions::space_l1_mb, "tune.space_l1_mb", "0:64:log", "log range needs lo > 0"},
      {&TuneOptions::space_l1_mb, "tune.space_l1_mb", "1:64:lin", "lo:hi or lo:hi:log"},
      {&TuneOptions::space_l1_mb, "tune.space_l1_mb", "one:two", "must be numbers"},
      {&TuneOptions::space_l1_mb, "tune.space_l1_mb", "1:2|3", "mixes a range"},
      {&TuneOptions::space_l1_mb, "tune.space_l1_mb", "0:64", "the engine refuses store.l1_mb = 0"},
      {&TuneOptions::space_l2_mb, "tune.space_l2_mb", "-5:10", "the engine refuses store.l2_mb = -5"},
      {&TuneOptions::space_prefetch_depth, "tune.space_prefetch_depth", "1.5:8", "whole numbers"},
      {&TuneOptions::space_prefetch_depth, "tune.space_prefetch_depth", "deep", "not a whole number"},
      {&TuneOptions::space_prefetch_depth, "tune.space_prefetch_depth", "0:4", "store.prefetch_depth = 0"},
      {&TuneOptions::space_horizon, "tune.space_horizon", "-1:64", "store.horizon = -1"},
      {&TuneOptions::space_horizon, "tune.space_horizon", "8:300", "store.horizon = 300"},
      {&TuneOptions::space_horizon, "tune.space_horizon", "8:64.5", "whole numbers"},
      {&TuneOptions::space_policy, "tune.space_policy", "lru|lfru", "the engine refuses store.policy = lfru"},
      {&TuneOptions::space_policy, "tune.space_policy", "lru||lfu", "an empty candidate"},
      {&TuneOptions::space_policy, "tune.space_policy", "lru|lru", "appears twice"},
      {&TuneOptions::space_policy, "tune.space_policy", "1:3", "candidates only"},
      {&TuneOptions::space_layout, "tune.space_layout", "1/2|1/2/1", "bad layout '1/2'"},
      {&TuneOptions::space_layout, "tune.space_layout", "1/0/1", "layout.trainers"},
      {&TuneOptions::space_layout, "tune.space_layout", "1/4/1|1/4/1,sq=2", "'sq=2'"},
      {&TuneOptions::space_batch_size, "tune.space_batch_size", "64:256.5", "whole numbers"},
  };
  for (const BadSpec& bad : cases) {
    Error error = expect_error([&] { SearchSpace::from_options(only(bad.key, bad.spec)); });
    EXPECT_TRUE(contains(error.what_failed(), bad.deck_key)) << bad.spec << " -> " << error.what();
    EXPECT_TRUE(contains(error.what_failed(), std::string("'") + bad.spec + "'")) << error.what();
    EXPECT_TRUE(contains(error.what_failed(), bad.detail)) << bad.spec << " -> " << error.what();
    EXPECT_FALSE(error.how_to_fix().empty()) << error.what();
  }
}

TEST(TuneSearchSpace, RangeErrorsListTheAcceptedForms) {
  Error error = expect_error([] { SearchSpace::from_options(only(&TuneOptions::space_l1_mb, "64:1")); });
  EXPECT_TRUE(contains(error.how_to_fix(), "lo:hi:log")) << error.what();
  EXPECT_TRUE(contains(error.how_to_fix(), "a|b|c")) << error.what();
}

TEST(TuneSearchSpace, KnobsAreUnique) {
  SearchSpace space;
  space.add(Knob{"x", "test", KnobType::real, 0, 1, false, {}});
  Error error = expect_error([&] { space.add(Knob{"x", "test", KnobType::real, 0, 1, false, {}}); });
  EXPECT_TRUE(contains(error.what_failed(), "x")) << error.what();
}

}  // namespace
}  // namespace strata
