// Din: gradients of the whole model (dense weights, history and candidate rows)
// against finite differences on target-last bags that include a bag of one key (no
// history), an empty bag, repeated items and a candidate that is also in the
// history; bitwise repeatability; independence of a sample's output from the rest
// of the batch; the option checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "model/din.hpp"
#include "model/model.hpp"
#include "model_test_util.hpp"

using namespace strata::model;
using namespace strata::model::testing;
using strata::ModelOptions;
using strata::data::Batch;

namespace {


// B = 5, 2 dense features, table 0 one-hot, table 1 the history (target-last).
Fixture small_fixture(int dim, uint64_t seed) {
  Fixture f;
  Batch& b = f.batch;
  b.size = 5;
  b.num_dense = 2;
  b.labels = {1.0f, 0.0f, 1.0f, 0.0f, 1.0f};
  b.dense = random_vector(5 * 2, seed + 1, 0.0f, 2.0f);
  b.tables.push_back(make_bags({{0}, {1}, {2}, {0}, {1}}, 3));
  // Bags: history then candidate. Sample 2 has only a candidate, sample 3 nothing,
  // sample 4 a candidate (0) that is also in its history, with a repeat.
  b.tables.push_back(make_bags({{0, 1, 2}, {3, 1, 4, 0}, {2}, {}, {0, 3, 0, 4, 0}}, 5));
  for (size_t t = 0; t < b.tables.size(); ++t) {
    const size_t U = b.tables[t].unique_keys.size();
    f.rows.push_back(random_vector(U * dim, seed + 10 + t, -0.5f, 0.5f));
    f.grads.emplace_back(U * dim, 0.0f);
  }
  return f;
}

ModelOptions small_options() { return small_din_options(); }

}  // namespace

TEST(Din, ShapeAndParameterLayout) {
  Din model(small_options(), 2, 2, 1);
  EXPECT_EQ(model.kind(), "din");
  EXPECT_EQ(model.shape().history_table, 1);
  EXPECT_EQ(model.shape().top_input_width(), 4 * 3);
  EXPECT_EQ(model.parameters().slice("attention.0.weight").shape, (std::vector<int64_t>{6, 12}));
  EXPECT_EQ(model.parameters().slice("attention.1.weight").shape, (std::vector<int64_t>{1, 6}));
  EXPECT_EQ(model.parameters().slice("top.0.weight").shape, (std::vector<int64_t>{5, 12}));
  EXPECT_EQ(make_model(small_options(), 2, 2, 1)->kind(), "din");
}

TEST(Din, GradientsMatchFiniteDifferences) {
  Fixture f = small_fixture(3, 7);
  Din model(small_options(), 2, 2, 5);
  perturb_biases(model.parameters(), 0.1f);
  const AnalyticGradients g = analytic_gradients(model, f, 1.0f / f.batch.size);
  EXPECT_GT(g.loss, 0.0);
  EXPECT_GT(max_abs_grad(g, model.parameters().slice("attention.0.weight")), 1e-4);  // the activation unit is in the graph
  double max_history_grad = 0.0;
  for (float d : g.rows[1]) max_history_grad = std::max(max_history_grad, std::fabs(double(d)));
  EXPECT_GT(max_history_grad, 1e-3);
  expect_gradients_match(model, f, g);
}

TEST(Din, ForwardBackwardIsBitwiseRepeatable) {
  Fixture f = small_fixture(3, 11);
  Din model(small_options(), 2, 2, 9);
  const double loss1 = model.forward_backward(f.batch, f.row_ptrs(), f.grad_ptrs(), 0.2f);
  const auto g1 = model.parameters().grads();
  const auto r1 = f.grads;
  Fixture other = small_fixture(3, 12);
  other.batch.size = 2;  // a smaller batch in between must not leak into the next step
  other.batch.labels.resize(2);
  other.batch.dense.resize(4);
  for (auto& bags : other.batch.tables) bags.offsets.resize(3), bags.index.resize(size_t(bags.offsets[2]));
  model.forward_backward(other.batch, other.row_ptrs(), other.grad_ptrs(), 0.5f);
  for (auto& g : f.grads) std::fill(g.begin(), g.end(), 9.0f);
  EXPECT_EQ(model.forward_backward(f.batch, f.row_ptrs(), f.grad_ptrs(), 0.2f), loss1);
  EXPECT_TRUE(bits_equal(g1, model.parameters().grads()));
  for (size_t t = 0; t < r1.size(); ++t) EXPECT_TRUE(bits_equal(r1[t], f.grads[t])) << t;
}

// A sample's probability is a function of its own features only.
TEST(Din, PredictionOfASampleDoesNotDependOnTheRestOfTheBatch) {
  Fixture f = small_fixture(3, 21);
  Din model(small_options(), 2, 2, 3);
  std::vector<float> all(5);
  model.predict(f.batch, f.row_ptrs(), all.data());
  for (int s = 0; s < 5; ++s) {
    Fixture one = f;
    Batch& b = one.batch;
    b.size = 1;
    b.labels = {f.batch.labels[s]};
    b.dense.assign(f.batch.dense.begin() + 2 * s, f.batch.dense.begin() + 2 * s + 2);
    for (size_t t = 0; t < b.tables.size(); ++t) {
      const auto& src = f.batch.tables[t];
      b.tables[t].index.assign(src.index.begin() + src.offsets[s], src.index.begin() + src.offsets[s + 1]);
      b.tables[t].offsets = {0, src.offsets[s + 1] - src.offsets[s]};
    }
    float prob = 0;
    model.predict(b, one.row_ptrs(), &prob);
    EXPECT_EQ(prob, all[s]) << "sample " << s;
  }
}

TEST(Din, OptionsAreChecked) {
  ModelOptions o = small_options();
  o.din_history_table = 2;
  try {
    Din(o, 2, 2, 1);
    FAIL();
  } catch (const strata::Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.din_history_table"), std::string::npos) << e.what();
  }
  o = small_options();
  o.din_attention_mlp = "6,x";
  EXPECT_THROW(Din(o, 2, 2, 1), strata::Error);
  EXPECT_THROW(Din(small_options(), 2, 0, 1), strata::Error);
}
