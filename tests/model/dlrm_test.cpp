// Dlrm: whole-model gradients against finite differences (dense weights and embedding
// rows), determinism, and the checks on the model options.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "model/dlrm.hpp"
#include "model_test_util.hpp"

using namespace strata::model;
using namespace strata::model::testing;
using strata::ModelOptions;
using strata::data::Batch;

namespace {


// B = 5 samples, 3 dense features, 3 tables: one-hot, multi-hot with an empty bag and
// repeats, and a table whose keys are shared by most samples.
Fixture small_fixture(int dim, uint64_t seed) {
  Fixture f;
  Batch& b = f.batch;
  b.size = 5;
  b.num_dense = 3;
  b.labels = {1.0f, 0.0f, 0.0f, 1.0f, 0.0f};
  b.dense = random_vector(5 * 3, seed + 1, 0.0f, 2.0f);
  b.tables.push_back(make_bags({{0}, {1}, {2}, {0}, {3}}, 4));
  b.tables.push_back(make_bags({{0, 1}, {}, {2, 2, 0}, {1}, {3, 0}}, 4));
  b.tables.push_back(make_bags({{0}, {0, 1}, {1}, {0}, {}}, 2));
  for (size_t t = 0; t < b.tables.size(); ++t) {
    const size_t U = b.tables[t].unique_keys.size();
    f.rows.push_back(random_vector(U * dim, seed + 10 + t, -0.5f, 0.5f));
    f.grads.emplace_back(U * dim, 0.0f);
  }
  return f;
}

// The default Criteo-shaped model on a random batch of B samples (hotness 1).
Fixture criteo_fixture(int B, uint64_t seed, int dim = 16, int tables = 26, int vocab = 1000) {
  Fixture f;
  Batch& b = f.batch;
  b.size = B;
  b.num_dense = 13;
  strata::CounterRng rng(seed);
  for (int i = 0; i < B; ++i) b.labels.push_back(rng.uniform() < 0.25 ? 1.0f : 0.0f);
  b.dense = random_vector(size_t(B) * 13, seed + 1, 0.0f, 3.0f);
  for (int t = 0; t < tables; ++t) {
    std::vector<std::vector<int32_t>> bags(B);
    int U = std::min(vocab, B);
    for (int i = 0; i < B; ++i) bags[i] = {int32_t(rng.next() % U)};
    b.tables.push_back(make_bags(bags, U));
    f.rows.push_back(random_vector(size_t(U) * dim, seed + 100 + t, -0.05f, 0.05f));
    f.grads.emplace_back(size_t(U) * dim, 0.0f);
  }
  return f;
}

ModelOptions small_options(const std::string& pooling) {
  ModelOptions o;
  o.embedding_dim = 4;
  o.bottom_mlp = "6,4";
  o.top_mlp = "5,3";
  o.pooling = pooling;
  return o;
}

}  // namespace

TEST(Dlrm, ShapeAndParameterLayout) {
  Dlrm model(ModelOptions{}, 13, 26, 1);
  const DlrmShape& s = model.shape();
  EXPECT_EQ(s.dim, 16);
  EXPECT_EQ(s.bottom, (std::vector<int>{64, 16}));
  EXPECT_EQ(s.top, (std::vector<int>{64, 32, 1}));
  EXPECT_EQ(s.interaction_width(), 16 + 27 * 26 / 2);
  const auto& slices = model.parameters().slices();
  ASSERT_EQ(slices.size(), 10u);
  EXPECT_EQ(slices[0].name, "bottom.0.weight");
  EXPECT_EQ(slices[0].shape, (std::vector<int64_t>{64, 13}));
  EXPECT_EQ(slices[4].name, "top.0.weight");
  EXPECT_EQ(slices[4].shape, (std::vector<int64_t>{64, 367}));
  EXPECT_EQ(slices[9].name, "top.2.bias");
  const size_t expected = 64 * 13 + 64 + 16 * 64 + 16 + 64 * 367 + 64 + 32 * 64 + 32 + 32 + 1;
  EXPECT_EQ(model.parameters().size(), expected);
  EXPECT_EQ(model.embedding_dim(), 16);
  EXPECT_EQ(model.num_tables(), 26);
}

class DlrmGradient : public ::testing::TestWithParam<std::string> {};

TEST_P(DlrmGradient, MatchesFiniteDifferences) {
  Fixture f = small_fixture(4, 7);
  Dlrm model(small_options(GetParam()), 3, 3, 5);
  perturb_biases(model.parameters(), 0.1f);  // exercised away from the zero init
  const AnalyticGradients g = analytic_gradients(model, f, 1.0f / f.batch.size);
  EXPECT_GT(g.loss, 0.0);
  double max_grad = 0.0;
  for (float d : g.dense) max_grad = std::max(max_grad, std::fabs(double(d)));
  EXPECT_GT(max_grad, 1e-3);  // the check is not vacuous
  expect_gradients_match(model, f, g);
}

INSTANTIATE_TEST_SUITE_P(Pooling, DlrmGradient, ::testing::Values("sum", "mean"));

TEST(Dlrm, SameSeedSameWeightsOtherSeedOthers) {
  Dlrm a(ModelOptions{}, 13, 26, 42), b(ModelOptions{}, 13, 26, 42), c(ModelOptions{}, 13, 26, 43);
  EXPECT_TRUE(bits_equal(a.parameters().values(), b.parameters().values()));
  EXPECT_FALSE(bits_equal(a.parameters().values(), c.parameters().values()));
  // Weights are Glorot-uniform within their limit, biases zero.
  for (const auto& s : a.parameters().slices()) {
    const float* v = a.parameters().values().data() + s.offset;
    if (s.shape.size() == 2) {
      const double limit = std::sqrt(6.0 / double(s.shape[0] + s.shape[1]));
      double mean_abs = 0.0;
      for (size_t i = 0; i < s.size(); ++i) {
        ASSERT_LE(std::fabs(v[i]), limit) << s.name;
        mean_abs += std::fabs(v[i]) / s.size();
      }
      EXPECT_NEAR(mean_abs, limit / 2, limit * 0.2) << s.name;
    } else {
      for (size_t i = 0; i < s.size(); ++i) ASSERT_EQ(v[i], 0.0f) << s.name;
    }
  }
}

TEST(Dlrm, ForwardBackwardIsBitwiseRepeatable) {
  Fixture f = criteo_fixture(300, 3);
  Dlrm model(ModelOptions{}, 13, 26, 9);
  const float scale = 1.0f / 300;
  const double loss1 = model.forward_backward(f.batch, f.row_ptrs(), f.grad_ptrs(), scale);
  const std::vector<float> g1 = model.parameters().grads();
  const auto r1 = f.grads;
  // A different batch in between (other size) must not leak into the next step.
  Fixture other = criteo_fixture(517, 4);
  model.forward_backward(other.batch, other.row_ptrs(), other.grad_ptrs(), 1.0f / 517);
  for (auto& g : f.grads) std::fill(g.begin(), g.end(), 123.0f);
  const double loss2 = model.forward_backward(f.batch, f.row_ptrs(), f.grad_ptrs(), scale);
  EXPECT_EQ(loss1, loss2);
  EXPECT_TRUE(bits_equal(g1, model.parameters().grads()));
  for (size_t t = 0; t < r1.size(); ++t) EXPECT_TRUE(bits_equal(r1[t], f.grads[t])) << t;

  // A second model of the same seed computes the same bits.
  Dlrm twin(ModelOptions{}, 13, 26, 9);
  Fixture g = criteo_fixture(300, 3);
  EXPECT_EQ(twin.forward_backward(g.batch, g.row_ptrs(), g.grad_ptrs(), scale), loss1);
  EXPECT_TRUE(bits_equal(g1, twin.parameters().grads()));
}

TEST(Dlrm, PredictMatchesTheLossOfForwardBackward) {
  Fixture f = criteo_fixture(64, 5);
  Dlrm model(ModelOptions{}, 13, 26, 2);
  std::vector<float> probs(64);
  const std::vector<float> grads_before = model.parameters().grads();
  model.predict(f.batch, f.row_ptrs(), probs.data());
  EXPECT_TRUE(bits_equal(grads_before, model.parameters().grads()));
  double ref = 0.0;
  for (int b = 0; b < 64; ++b) {
    ASSERT_GT(probs[b], 0.0f);
    ASSERT_LT(probs[b], 1.0f);
    const double y = f.batch.labels[b];
    ref -= y * std::log(double(probs[b])) + (1 - y) * std::log(1 - double(probs[b]));
  }
  const double loss = model.forward_backward(f.batch, f.row_ptrs(), f.grad_ptrs(), 1.0f);
  EXPECT_NEAR(loss, ref, 1e-4 * ref);
}

TEST(Dlrm, EmptyBatchWritesZeroGradients) {
  Dlrm model(small_options("sum"), 3, 3, 1);
  std::fill(model.parameters().grads().begin(), model.parameters().grads().end(), 5.0f);
  Batch b;
  b.num_dense = 3;
  b.tables.assign(3, make_bags({}, 0));
  const std::vector<const float*> rows(3, nullptr);
  const std::vector<float*> grads(3, nullptr);
  EXPECT_EQ(model.forward_backward(b, rows, grads, 1.0f), 0.0);
  for (float g : model.parameters().grads()) ASSERT_EQ(g, 0.0f);
}

TEST(Dlrm, MalformedBatchIsAnError) {
  Dlrm model(small_options("sum"), 3, 3, 1);
  Fixture f = small_fixture(4, 1);
  f.batch.tables[1].index[0] = 99;
  EXPECT_NE(error_text([&] { model.forward_backward(f.batch, f.row_ptrs(), f.grad_ptrs(), 1.0f); })
                .find("index out of range"),
            std::string::npos);
  Fixture g = small_fixture(4, 1);
  g.batch.tables.pop_back();
  EXPECT_THROW(model.forward_backward(g.batch, g.row_ptrs(), g.grad_ptrs(), 1.0f), strata::Error);
}

TEST(DlrmOptions, BadValuesNameTheirKey) {
  ModelOptions o;
  o.bottom_mlp = "64,8";  // embedding_dim is 16
  std::string text = error_text([&] { Dlrm(o, 13, 26, 1); });
  EXPECT_NE(text.find("model.bottom_mlp"), std::string::npos) << text;
  EXPECT_NE(text.find("model.embedding_dim"), std::string::npos) << text;

  o = ModelOptions{};
  o.bottom_mlp = "64,x";
  text = error_text([&] { dlrm_shape(o, 13, 26); });
  EXPECT_NE(text.find("model.bottom_mlp"), std::string::npos) << text;

  o = ModelOptions{};
  o.bottom_mlp = "";
  EXPECT_NE(error_text([&] { dlrm_shape(o, 13, 26); }).find("model.bottom_mlp"), std::string::npos);

  o = ModelOptions{};
  o.top_mlp = "64,,32";
  text = error_text([&] { dlrm_shape(o, 13, 26); });
  EXPECT_NE(text.find("model.top_mlp"), std::string::npos) << text;

  o = ModelOptions{};
  o.top_mlp = "-3";
  EXPECT_NE(error_text([&] { dlrm_shape(o, 13, 26); }).find("model.top_mlp"), std::string::npos);

  o = ModelOptions{};
  o.pooling = "max";
  EXPECT_NE(error_text([&] { dlrm_shape(o, 13, 26); }).find("model.pooling"), std::string::npos);

  o = ModelOptions{};
  o.embedding_dim = 0;
  o.bottom_mlp = "64,0";
  EXPECT_NE(error_text([&] { dlrm_shape(o, 13, 26); }).find("model.embedding_dim"), std::string::npos);

  // Spaces are fine; an empty top list means the final 1-wide layer only.
  o = ModelOptions{};
  o.bottom_mlp = " 32 , 16 ";
  o.top_mlp = "";
  const DlrmShape s = dlrm_shape(o, 13, 26);
  EXPECT_EQ(s.bottom, (std::vector<int>{32, 16}));
  EXPECT_EQ(s.top, (std::vector<int>{1}));
}

// make_model is how the trainer gets its network: model.kind = dlrm is this
// class, with the same weights; an unknown kind names the key and the choices.
TEST(MakeModel, DlrmKindIsTheDlrmWithTheSameWeights) {
  ModelOptions options;
  auto model = make_model(options, 3, 4, 7);
  Dlrm direct(options, 3, 4, 7);
  EXPECT_EQ(model->kind(), "dlrm");
  EXPECT_EQ(model->num_tables(), 4);
  EXPECT_EQ(model->embedding_dim(), options.embedding_dim);
  ASSERT_EQ(model->parameters().size(), direct.parameters().size());
  EXPECT_EQ(model->parameters().values(), direct.parameters().values());
}

TEST(MakeModel, UnknownKindIsAnErrorNamingTheKey) {
  ModelOptions options;
  options.kind = "transformer";
  try {
    make_model(options, 3, 4, 7);
    FAIL() << "expected an error";
  } catch (const strata::Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.kind"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("dlrm"), std::string::npos) << e.what();
  }
}
