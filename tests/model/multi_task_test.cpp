// MultiTask (mmoe, ple): the parameter layout; whole-model gradients against
// finite differences (dense weights and embedding rows) for mmoe, one-level ple
// (CGC) and two-level ple; predict agrees with the training pass and is batch
// invariant; the option and data checks name their keys.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "model/model.hpp"
#include "model/multi_task.hpp"
#include "model_test_util.hpp"

using namespace strata::model;
using namespace strata::model::testing;
using strata::ModelOptions;
using strata::data::Batch;

namespace {

ModelOptions options_of(const std::string& kind, int shared, int task_experts = 1, int levels = 1) {
  ModelOptions o;
  o.kind = kind;
  o.embedding_dim = 4;
  o.bottom_mlp = "6,4";
  o.expert_mlp = "5,3";
  o.tower_mlp = "4";
  o.num_experts = shared;
  o.task_experts = task_experts;
  o.ple_levels = levels;
  return o;
}

bool has_slice(const DenseParameters& p, const std::string& name) {
  for (const auto& s : p.slices())
    if (s.name == name) return true;
  return false;
}

}  // namespace

TEST(MultiTask, ParameterLayout) {
  // mmoe: 3 shared experts, a gate per task over them, a tower per task; no task experts.
  MultiTask mmoe(options_of("mmoe", 3, /*task_experts=*/2), 3, 3, 2, 1);
  const int W = 4 + 4 * 3 / 2;
  EXPECT_EQ(mmoe.num_tasks(), 2);
  EXPECT_EQ(mmoe.shape().task_experts, 0);
  EXPECT_EQ(mmoe.shape().levels, 1);
  const DenseParameters& p = mmoe.parameters();
  EXPECT_EQ(p.slice("level.0.shared.0.0.weight").shape, (std::vector<int64_t>{5, W}));
  EXPECT_EQ(p.slice("level.0.shared.2.1.weight").shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(p.slice("level.0.gate.1.weight").shape, (std::vector<int64_t>{3, W}));
  EXPECT_EQ(p.slice("tower.1.1.weight").shape, (std::vector<int64_t>{1, 4}));
  EXPECT_FALSE(has_slice(p, "level.0.task.0.0.0.weight"));
  EXPECT_FALSE(has_slice(p, "level.0.gate.shared.weight"));

  // ple, two levels: task experts, gates over own + shared, a shared gate below the top.
  MultiTask ple(options_of("ple", 2, 1, 2), 3, 3, 3, 1);
  const DenseParameters& q = ple.parameters();
  EXPECT_EQ(q.slice("level.0.task.2.0.0.weight").shape, (std::vector<int64_t>{5, W}));
  EXPECT_EQ(q.slice("level.1.task.2.0.0.weight").shape, (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(q.slice("level.0.gate.0.weight").shape, (std::vector<int64_t>{1 + 2, W}));
  EXPECT_EQ(q.slice("level.0.gate.shared.weight").shape, (std::vector<int64_t>{3 * 1 + 2, W}));
  EXPECT_FALSE(has_slice(q, "level.1.gate.shared.weight"));
  EXPECT_EQ(make_model(options_of("ple", 2), 3, 3, 1, 2)->kind(), "ple");
  EXPECT_EQ(make_model(options_of("mmoe", 2), 3, 3, 1, 2)->num_tasks(), 2);
}

struct GradientCase {
  const char* kind;
  int shared, task_experts, levels, tasks;
};

class MultiTaskGradient : public ::testing::TestWithParam<GradientCase> {};

// scale * sum over samples and tasks of BCE, against differences in every dense
// weight and every embedding row value.
TEST_P(MultiTaskGradient, MatchesFiniteDifferences) {
  const GradientCase c = GetParam();
  Fixture f = click_fixture(6, c.tasks, 4, 11);
  MultiTask model(options_of(c.kind, c.shared, c.task_experts, c.levels), 3, 3, c.tasks, 6);
  DenseParameters& p = model.parameters();
  perturb_biases(p);
  const AnalyticGradients g = analytic_gradients(model, f, 1.0f / f.batch.size);
  EXPECT_GT(g.loss, 0.0);
  double max_gate = 0.0, max_tower = 0.0;
  for (const auto& s : p.slices()) {
    if (s.name.find("gate") != std::string::npos) max_gate = std::max(max_gate, max_abs_grad(g, s));
    if (s.name.find("tower") != std::string::npos) max_tower = std::max(max_tower, max_abs_grad(g, s));
  }
  EXPECT_GT(max_gate, 1e-5) << "gate gradients should not vanish";
  EXPECT_GT(max_tower, 1e-3);
  expect_gradients_match(model, f, g);
}

INSTANTIATE_TEST_SUITE_P(Kinds, MultiTaskGradient,
                         ::testing::Values(GradientCase{"mmoe", 3, 0, 1, 2}, GradientCase{"mmoe", 2, 0, 1, 1},
                                           GradientCase{"ple", 2, 1, 1, 2}, GradientCase{"ple", 1, 2, 2, 3},
                                           GradientCase{"ple", 2, 0, 2, 2}));

// A sample's probabilities depend on its own features only, bit for bit; the
// training pass computes the same logits as predict.
TEST(MultiTask, PredictIsBatchInvariantAndMatchesTraining) {
  for (const char* kind : {"mmoe", "ple"}) {
    const int K = 2, B = 23;
    Fixture f = click_fixture(B, K, 4, 3);
    MultiTask model(options_of(kind, 2, 1, 2), 3, 3, K, 7);
    perturb_biases(model.parameters());
    std::vector<float> all(size_t(B) * K);
    model.predict(f.batch, f.row_ptrs(), all.data());
    for (float p : all) {
      EXPECT_GT(p, 0.0f);
      EXPECT_LT(p, 1.0f);
    }
    std::vector<int> permuted(static_cast<size_t>(B));
    for (int i = 0; i < B; ++i) permuted[size_t(i)] = (i * 7 + 3) % B;
    for (const std::vector<int>& picked : {std::vector<int>{5}, std::vector<int>{0, 1, 2}, permuted}) {
      Fixture part = sub_batch(f, picked);
      std::vector<float> probs(picked.size() * K);
      model.predict(part.batch, part.row_ptrs(), probs.data());
      for (size_t i = 0; i < picked.size(); ++i)
        for (int t = 0; t < K; ++t)
          EXPECT_EQ(probs[i * K + size_t(t)], all[size_t(picked[i]) * K + size_t(t)]) << kind << " sample " << picked[i];
    }
    // Loss of the training pass = sum over tasks of BCE of predict's probabilities.
    double expected = 0.0;
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < K; ++t) {
        const double p = all[size_t(b) * K + size_t(t)], y = f.batch.labels[size_t(b) * K + size_t(t)];
        expected -= y * std::log(p) + (1 - y) * std::log(1 - p);
      }
    EXPECT_NEAR(model.forward_backward(f.batch, f.row_ptrs(), f.grad_ptrs(), 1.0f), expected, 1e-3 * expected) << kind;
  }
}

// The gates' soft load: every gate's weights of every training sample, each expert
// numbered level by level (shared first, then each task's own); predict counts nothing.
TEST(MultiTask, GateLoadCountsEveryGateOfEveryTrainingSample) {
  const int B = 9, K = 3, S = 2, P = 1, L = 2;
  Fixture f = click_fixture(B, K, 4, 5);
  MultiTask model(options_of("ple", S, P, L), 3, 3, K, 2);
  model.forward_backward(f.batch, f.row_ptrs(), f.grad_ptrs(), 1.0f);
  model.forward_backward(f.batch, f.row_ptrs(), f.grad_ptrs(), 1.0f);
  std::vector<float> probs(size_t(B) * K);
  model.predict(f.batch, f.row_ptrs(), probs.data());
  const RoutingStats stats = model.take_routing_stats();
  ASSERT_EQ(stats.routed.size(), size_t(L * (S + K * P)));
  EXPECT_EQ(stats.routed, stats.accepted);
  EXPECT_EQ(stats.steps, 2.0);
  // Per sample and step: K task gates on each level and a shared gate below the top.
  const double total = std::accumulate(stats.routed.begin(), stats.routed.end(), 0.0);
  EXPECT_NEAR(total, 2.0 * B * (K * L + (L - 1)), 1e-3);
  // Level 1 has no shared gate: its task experts get only their own task's gate.
  double level1 = 0.0;
  for (int x = S + K * P; x < 2 * (S + K * P); ++x) level1 += stats.routed[size_t(x)];
  EXPECT_NEAR(level1, 2.0 * B * K, 1e-3);
  for (double load : stats.routed) EXPECT_GT(load, 0.0);
  EXPECT_TRUE(model.take_routing_stats().routed.empty()) << "take_routing_stats resets";
}

TEST(MultiTask, ChecksNameTheirKeys) {
  EXPECT_NE(error_text([] { check_multi_task_options(options_of("mmoe", 0)); }).find("model.num_experts"),
            std::string::npos);
  EXPECT_NE(error_text([] { check_multi_task_options(options_of("ple", 2, -1)); }).find("model.task_experts"),
            std::string::npos);
  EXPECT_NE(error_text([] { check_multi_task_options(options_of("ple", 2, 1, 0)); }).find("model.ple_levels"),
            std::string::npos);
  ModelOptions bad = options_of("mmoe", 2);
  bad.expert_mlp = "";
  EXPECT_NE(error_text([&] { check_multi_task_options(bad); }).find("model.expert_mlp"), std::string::npos);
  bad = options_of("mmoe", 2);
  bad.tower_mlp = "4,x";
  EXPECT_NE(error_text([&] { check_multi_task_options(bad); }).find("model.tower_mlp"), std::string::npos);
  // A single-task model refuses multi-task data, naming where the labels come from.
  ModelOptions dlrm;
  const std::string refused = error_text([&] { make_model(dlrm, 3, 3, 1, 2); });
  EXPECT_NE(refused.find("model.kind = dlrm"), std::string::npos) << refused;
  EXPECT_NE(refused.find("data.synthetic_tasks"), std::string::npos) << refused;
  // A batch of the wrong task count is refused, not misread.
  Fixture f = click_fixture(4, 3, 4, 1);
  MultiTask model(options_of("mmoe", 2), 3, 3, 2, 1);
  EXPECT_NE(error_text([&] { model.forward_backward(f.batch, f.row_ptrs(), f.grad_ptrs(), 1.0f); }).find("labels per sample"),
            std::string::npos);
}
