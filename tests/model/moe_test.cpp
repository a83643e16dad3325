// Moe: the parameter layout; whole-model gradients against finite differences
// (dense weights, embedding rows, the load-balancing loss) for top-1 and top-2,
// dropless and with capacity; the router's choices, weights and capacity order;
// batch invariance in dropless mode (a sample's probability is bitwise the same
// alone, in halves, and in a permuted batch); the option checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "model/expert_router.hpp"
#include "model/model.hpp"
#include "model/moe.hpp"
#include "model_test_util.hpp"

using namespace strata::model;
using namespace strata::model::testing;
using strata::ModelOptions;
using strata::data::Batch;

namespace {

Fixture moe_fixture(int B, int dim, uint64_t seed) { return click_fixture(B, 1, dim, seed); }

ModelOptions moe_options(int experts, int top_k, double capacity_factor, double aux = 0.05) {
  ModelOptions o;
  o.kind = "moe";
  o.embedding_dim = 4;
  o.bottom_mlp = "6,4";
  o.top_mlp = "5";
  o.num_experts = experts;
  o.top_k = top_k;
  o.capacity_factor = capacity_factor;
  o.aux_loss_weight = aux;
  return o;
}

}  // namespace

TEST(Moe, ShapeAndParameterLayout) {
  Moe model(moe_options(4, 2, 0), 3, 3, 1);
  const int W = 4 + 4 * 3 / 2;
  EXPECT_EQ(model.shape().dlrm.interaction_width(), W);
  const auto& slices = model.parameters().slices();
  ASSERT_EQ(slices.size(), 4u + 2u + 4u * 4u);
  EXPECT_EQ(slices[4].name, "gate.weight");
  EXPECT_EQ(slices[4].shape, (std::vector<int64_t>{4, W}));
  EXPECT_EQ(slices[6].name, "expert.0.0.weight");
  EXPECT_EQ(slices[6].shape, (std::vector<int64_t>{5, W}));
  EXPECT_EQ(slices[9].name, "expert.0.1.bias");
  EXPECT_EQ(slices.back().name, "expert.3.1.bias");
  const size_t per_expert = 5 * W + 5 + 5 + 1;
  for (int e = 0; e < 4; ++e) {
    const auto [begin, end] = model.expert_range(e);
    EXPECT_EQ(begin, slices[6].offset + e * per_expert) << e;
    EXPECT_EQ(end - begin, per_expert) << e;
  }
  EXPECT_EQ(model.expert_range(3).second, model.parameters().size());
  EXPECT_EQ(make_model(moe_options(4, 2, 0), 3, 3, 1)->kind(), "moe");
}

TEST(ExpertRouter, TopTwoWeightsAndCapacityOrder) {
  // Four samples over 3 experts; every sample's first choice is expert 0.
  const float logits[4 * 3] = {3, 2, 0, 3, 0, 2, 3, 2, 1, 3, 1, 2};
  ExpertRouter router(3, 2, 1.0);  // capacity ceil(1.0 * 4 * 2 / 3) = 3
  EXPECT_EQ(router.capacity(4), 3);
  router.route(4, logits);
  for (int b = 0; b < 4; ++b) {
    EXPECT_EQ(router.expert(b, 0), 0);
    EXPECT_FLOAT_EQ(router.weight(b, 0) + router.weight(b, 1), 1.0f);
    EXPECT_GT(router.weight(b, 0), router.weight(b, 1));
  }
  EXPECT_EQ(router.expert(0, 1), 1);
  EXPECT_EQ(router.expert(1, 1), 2);
  // Expert 0 takes the first three first choices; the fourth sample's is dropped.
  EXPECT_TRUE(router.kept(2, 0));
  EXPECT_FALSE(router.kept(3, 0));
  EXPECT_EQ(router.routed(), (std::vector<int64_t>{4, 2, 2}));
  EXPECT_EQ(router.accepted(), (std::vector<int64_t>{3, 2, 2}));
  // Balanced routing has balance loss 1; all first choices on one expert, E * P_0.
  double p0 = 0;
  for (int b = 0; b < 4; ++b) p0 += router.probs()[b * 3] / 4.0;
  EXPECT_NEAR(router.balance_loss(), 3.0 * p0, 1e-6);
  ExpertRouter dropless(3, 1, 0.0);
  EXPECT_EQ(dropless.capacity(4), 4);
}

struct GradientCase {
  int top_k;
  double capacity_factor;
};

class MoeGradient : public ::testing::TestWithParam<GradientCase> {};

// The whole objective, scale * sum of BCE + aux weight * scale * B * balance loss,
// against central differences in every dense weight and row.
TEST_P(MoeGradient, MatchesFiniteDifferences) {
  const GradientCase c = GetParam();
  Fixture f = moe_fixture(8, 4, 7);
  const double aux = 0.05;
  Moe model(moe_options(4, c.top_k, c.capacity_factor, aux), 3, 3, 5);
  DenseParameters& p = model.parameters();
  perturb_biases(p);
  const float scale = 1.0f / f.batch.size;
  AnalyticGradients g = analytic_gradients(model, f, scale);
  EXPECT_GT(g.loss, 0.0);
  const RoutingStats stats = model.take_routing_stats();
  ASSERT_EQ(stats.routed.size(), 4u);
  EXPECT_EQ(std::accumulate(stats.routed.begin(), stats.routed.end(), 0.0), 8.0 * c.top_k);
  if (c.capacity_factor > 0) {
    EXPECT_LT(std::accumulate(stats.accepted.begin(), stats.accepted.end(), 0.0), 8.0 * c.top_k)
        << "the case should drop something";
  }
  // The objective includes the weighted balancing loss.
  Fixture* scratch = g.scratch.get();
  g.objective = [&, scratch] {
    const double bce = model.forward_backward(f.batch, f.row_ptrs(), scratch->grad_ptrs(), scale);
    const double balance = model.take_routing_stats().balance_loss;
    return scale * bce + aux * scale * f.batch.size * balance;
  };
  const size_t gate_at = p.slice("gate.weight").offset, experts_at = model.expert_range(0).first;
  double max_expert_grad = 0.0, max_gate_grad = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (i >= experts_at) max_expert_grad = std::max(max_expert_grad, std::fabs(double(g.dense[i])));
    if (i >= gate_at && i < experts_at) max_gate_grad = std::max(max_gate_grad, std::fabs(double(g.dense[i])));
  }
  EXPECT_GT(max_expert_grad, 1e-3);  // not vacuous
  EXPECT_GT(max_gate_grad, 1e-4);
  expect_gradients_match(model, f, g);
}

INSTANTIATE_TEST_SUITE_P(Routing, MoeGradient,
                         ::testing::Values(GradientCase{1, 0.0}, GradientCase{2, 0.0}, GradientCase{1, 0.5},
                                           GradientCase{2, 0.5}));

// Dropless: a sample's probability is a function of its own features only, bit for
// bit, whatever else is in the batch and where it sits in it.
TEST(Moe, DroplessPredictionIsBatchInvariant) {
  for (int top_k : {1, 2}) {
    Fixture f = moe_fixture(37, 4, 21);
    Moe model(moe_options(4, top_k, 0), 3, 3, 3);
    perturb_biases(model.parameters());
    std::vector<float> all(37);
    model.predict(f.batch, f.row_ptrs(), all.data());
    const auto expect_same = [&](const std::vector<int>& picked, const char* what) {
      Fixture part = sub_batch(f, picked);
      std::vector<float> probs(picked.size());
      model.predict(part.batch, part.row_ptrs(), probs.data());
      for (size_t i = 0; i < picked.size(); ++i) {
        EXPECT_EQ(probs[i], all[size_t(picked[i])]) << what << ": sample " << picked[i] << ", top_k " << top_k;
      }
    };
    for (int s = 0; s < 37; ++s) expect_same({s}, "alone");
    std::vector<int> first(18), second(19);
    std::iota(first.begin(), first.end(), 0);
    std::iota(second.begin(), second.end(), 18);
    expect_same(first, "first half");
    expect_same(second, "second half");
    std::vector<int> permuted(37);
    for (int i = 0; i < 37; ++i) permuted[size_t(i)] = (i * 14 + 5) % 37;
    expect_same(permuted, "permuted");
    // The training pass computes the same probabilities as predict.
    std::vector<float> twice(37);
    model.forward_backward(f.batch, f.row_ptrs(), f.grad_ptrs(), 1.0f);
    model.predict(f.batch, f.row_ptrs(), twice.data());
    EXPECT_EQ(twice, all);
  }
}

// With capacity every expert takes at most ceil(factor * B * k / E) samples of the
// batch: the batch decides who is dropped (why batch invariance holds only dropless).
TEST(Moe, CapacityCapsEveryExpert) {
  Fixture f = moe_fixture(40, 4, 5);
  Moe model(moe_options(4, 1, 0.5), 3, 3, 3);
  model.forward_backward(f.batch, f.row_ptrs(), f.grad_ptrs(), 1.0f);
  const RoutingStats s = model.take_routing_stats();
  const int capacity = int(std::ceil(0.5 * 40 / 4));
  for (size_t e = 0; e < 4; ++e) {
    EXPECT_EQ(s.accepted[e], std::min(s.routed[e], double(capacity))) << e;
  }
  EXPECT_EQ(s.steps, 1.0);
  EXPECT_TRUE(model.take_routing_stats().routed.empty()) << "take_routing_stats resets";
}

// Training drops by model.capacity_factor; evaluation routes by
// model.eval_capacity_factor, dropless by default: predict is then the dropless
// model's, batch-invariant, and with an evaluation capacity it drops too.
TEST(Moe, EvaluationHasItsOwnCapacity) {
  Fixture f = moe_fixture(40, 4, 5);
  ModelOptions capped = moe_options(4, 1, 0.5);
  Moe trained_capped(capped, 3, 3, 3), dropless(moe_options(4, 1, 0), 3, 3, 3);
  std::vector<float> a(40), b(40);
  trained_capped.predict(f.batch, f.row_ptrs(), a.data());
  dropless.predict(f.batch, f.row_ptrs(), b.data());
  EXPECT_EQ(a, b) << "same weights: evaluation is dropless whatever the training capacity";
  EXPECT_TRUE(trained_capped.take_routing_stats().routed.empty()) << "predict is not counted as routing";
  capped.eval_capacity_factor = 0.5;
  Moe eval_capped(capped, 3, 3, 3);
  eval_capped.predict(f.batch, f.row_ptrs(), a.data());
  EXPECT_NE(a, b) << "an evaluation capacity of 0.5 drops some of 40 samples' choices";
  capped.eval_capacity_factor = -1;
  EXPECT_NE(error_text([&] { Moe(capped, 3, 3, 1); }).find("model.eval_capacity_factor"), std::string::npos);
}

TEST(Moe, OptionsAreChecked) {
  EXPECT_NE(error_text([] { Moe(moe_options(0, 1, 0), 3, 3, 1); }).find("model.num_experts"), std::string::npos);
  EXPECT_NE(error_text([] { Moe(moe_options(4, 3, 0), 3, 3, 1); }).find("model.top_k"), std::string::npos);
  EXPECT_NE(error_text([] { Moe(moe_options(1, 2, 0), 3, 3, 1); }).find("model.top_k"), std::string::npos);
  EXPECT_NE(error_text([] { Moe(moe_options(4, 1, -1), 3, 3, 1); }).find("model.capacity_factor"),
            std::string::npos);
  EXPECT_NE(error_text([] { Moe(moe_options(4, 1, 0, -0.5), 3, 3, 1); }).find("model.aux_loss_weight"),
            std::string::npos);
  ModelOptions bad = moe_options(4, 1, 0);
  bad.bottom_mlp = "6,5";
  EXPECT_NE(error_text([&] { Moe(bad, 3, 3, 1); }).find("model.bottom_mlp"), std::string::npos);
}
