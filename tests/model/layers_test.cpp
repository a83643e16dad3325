// Every layer's backward against central finite differences of a random linear
// functional of its output, L = sum(w * y), on small shapes in float.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/error.hpp"
#include "model/bce_loss.hpp"
#include "model/dense_parameters.hpp"
#include "model/dot_interaction.hpp"
#include "model/embedding_bag_pooling.hpp"
#include "model/linear.hpp"
#include "model/mlp.hpp"
#include "model_test_util.hpp"

using namespace strata::model;
using namespace strata::model::testing;

namespace {

double dot(const std::vector<float>& w, const float* y) {
  double acc = 0.0;
  for (size_t i = 0; i < w.size(); ++i) acc += double(w[i]) * y[i];
  return acc;
}

}  // namespace

TEST(DenseParameters, SlicesAreLaidOutInOrder) {
  DenseParameters p;
  EXPECT_EQ(p.add("a.weight", {3, 2}), 0u);
  EXPECT_EQ(p.add("a.bias", {3}), 6u);
  EXPECT_EQ(p.add("b.weight", {1, 3}), 9u);
  EXPECT_THROW(p.add("a.bias", {1}), strata::Error);
  p.finalize();
  EXPECT_EQ(p.size(), 12u);
  EXPECT_EQ(p.grads().size(), 12u);
  EXPECT_EQ(p.slice("a.bias").offset, 6u);
  EXPECT_EQ(p.slice("a.weight").size(), 6u);
  EXPECT_EQ(p.slices().size(), 3u);
  EXPECT_THROW(p.slice("nope"), strata::Error);
  EXPECT_THROW(p.add("late", {1}), strata::Error);
  p.grads(6)[0] = 1.0f;
  p.zero_grads();
  EXPECT_EQ(p.grads()[6], 0.0f);
}

TEST(Linear, BackwardMatchesFiniteDifferences) {
  for (Activation act : {Activation::kNone, Activation::kRelu}) {
    const int B = 3, in = 5, out = 4;
    DenseParameters p;
    Linear layer(p, "l", in, out, act);
    p.finalize();
    layer.init(p, 11);
    auto bias = random_vector(out, 3, -0.2f, 0.2f);
    std::copy(bias.begin(), bias.end(), p.values(layer.bias_offset()));
    auto x = random_vector(size_t(B) * in, 4);
    const auto w = random_vector(size_t(B) * out, 5);
    std::vector<float> y(size_t(B) * out);
    const auto objective = [&] {
      layer.forward(p, x.data(), B, y.data());
      return dot(w, y.data());
    };
    objective();
    // Hand check of one output: y[b][o] = act(sum_i x[b][i] W[o][i] + bias[o]).
    const float* W = p.values(layer.weight_offset());
    double pre = bias[1];
    for (int i = 0; i < in; ++i) pre += double(W[1 * in + i]) * x[2 * in + i];
    EXPECT_NEAR(y[2 * out + 1], act == Activation::kRelu ? std::max(pre, 0.0) : pre, 1e-6);
    // Keep clear of the ReLU kink: the finite difference must not cross it.
    for (float v : y)
      if (act == Activation::kRelu && v > 0.0f) ASSERT_GT(v, 0.03f);
    std::vector<float> dy = w, dx(x.size());
    layer.backward(p, x.data(), y.data(), dy.data(), B, dx.data());
    const std::vector<float> grads = p.grads();
    for (size_t i = 0; i < p.size(); ++i)
      expect_close(grads[i], central_difference(&p.values()[i], 1e-2f, objective), 1e-4, 1e-3, "param", i);
    for (size_t i = 0; i < x.size(); ++i)
      expect_close(dx[i], central_difference(&x[i], 1e-2f, objective), 1e-4, 1e-3, "x", i);
  }
}

TEST(Mlp, BackwardMatchesFiniteDifferences) {
  const int B = 4, in = 3;
  DenseParameters p;
  Mlp mlp(p, "m", in, {6, 5, 2}, /*relu_last=*/false);
  p.finalize();
  mlp.init(p, 21);
  ASSERT_EQ(mlp.out(), 2);
  ASSERT_EQ(p.slices().size(), 6u);
  EXPECT_EQ(p.slices()[2].name, "m.1.weight");
  auto x = random_vector(size_t(B) * in, 6);
  const auto w = random_vector(size_t(B) * 2, 7);
  const auto objective = [&] { return dot(w, mlp.forward(p, x.data(), B)); };
  objective();
  std::vector<float> dy = w, dx(x.size());
  mlp.backward(p, x.data(), dy.data(), B, dx.data());
  const std::vector<float> grads = p.grads();
  for (size_t i = 0; i < p.size(); ++i)
    expect_gradient(grads[i], &p.values()[i], objective, 2e-4, 2e-3, "param", i);
  for (size_t i = 0; i < x.size(); ++i) expect_gradient(dx[i], &x[i], objective, 2e-4, 2e-3, "x", i);
}

TEST(Mlp, GrowsWithTheBatchAndGivesTheSameSamples) {
  DenseParameters p;
  Mlp mlp(p, "m", 3, {4, 2}, true);
  p.finalize();
  mlp.init(p, 1);
  const auto x = random_vector(9 * 3, 8);  // (9, 3): the first 2 samples are a batch of 2
  const float* small = mlp.forward(p, x.data(), 2);
  const std::vector<float> first(small, small + 4);  // (2, 2)
  const float* big = mlp.forward(p, x.data(), 9);    // grows the buffers
  for (int i = 0; i < 4; ++i) EXPECT_EQ(first[i], big[i]);
}

TEST(EmbeddingBagPooling, BackwardMatchesFiniteDifferences) {
  for (PoolingMode mode : {PoolingMode::kSum, PoolingMode::kMean}) {
    const int dim = 3, U = 4;
    // Empty bag, repeated key in one bag, a key shared by bags.
    const auto bags = make_bags({{0, 2}, {}, {1, 1, 3}, {2}, {3, 0, 2, 2}}, U);
    const int B = 5;
    EmbeddingBagPooling pool(dim, mode);
    auto rows = random_vector(size_t(U) * dim, 9);
    const auto w = random_vector(size_t(B) * dim, 10);
    std::vector<float> pooled(size_t(B) * dim);
    const auto objective = [&] {
      pool.forward(bags, B, rows.data(), pooled.data());
      return dot(w, pooled.data());
    };
    objective();
    for (int c = 0; c < dim; ++c) EXPECT_EQ(pooled[1 * dim + c], 0.0f);  // empty bag
    std::vector<float> grads(rows.size(), 42.0f);
    pool.backward(bags, B, w.data(), grads.data());
    for (size_t i = 0; i < rows.size(); ++i)
      expect_close(grads[i], central_difference(&rows[i], 1e-2f, objective), 1e-4, 1e-3, "row", i);
  }
  EXPECT_EQ(parse_pooling("mean"), PoolingMode::kMean);
  try {
    parse_pooling("max");
    FAIL() << "no error";
  } catch (const strata::Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.pooling"), std::string::npos);
  }
}

TEST(DotInteraction, BackwardMatchesFiniteDifferences) {
  const int B = 11, F = 4, dim = 3;  // B not a multiple of the lane count
  DotInteraction layer(F, dim);
  ASSERT_EQ(layer.output_width(), dim + 6);
  std::vector<std::vector<float>> z(F), dz(F);  // z[f] (B, dim)
  std::vector<const float*> ptrs(F);
  std::vector<float*> dptrs(F);
  for (int f = 0; f < F; ++f) {
    z[f] = random_vector(size_t(B) * dim, 30 + f);
    dz[f].assign(z[f].size(), 0.0f);
    ptrs[f] = z[f].data();
    dptrs[f] = dz[f].data();
  }
  const int W = layer.output_width();
  const auto w = random_vector(size_t(B) * W, 12);
  std::vector<float> out(w.size());  // (B, W)
  const auto objective = [&] {
    layer.forward(B, ptrs.data(), out.data());
    return dot(w, out.data());
  };
  objective();
  // Hand check of sample 10: out = [z0 | z1.z0, z2.z0, z2.z1, z3.z0, z3.z1, z3.z2].
  const int s = 10;
  const auto d = [&](int i, int j) {
    float acc = 0.0f;
    for (int c = 0; c < dim; ++c) acc += z[i][s * dim + c] * z[j][s * dim + c];
    return acc;
  };
  const std::vector<float> expected = {z[0][s * dim + 0], z[0][s * dim + 1], z[0][s * dim + 2],
                                       d(1, 0), d(2, 0), d(2, 1), d(3, 0), d(3, 1), d(3, 2)};
  for (int r = 0; r < W; ++r) EXPECT_FLOAT_EQ(out[s * W + r], expected[r]) << r;
  layer.backward(B, w.data(), dptrs.data());
  for (int f = 0; f < F; ++f)
    for (size_t i = 0; i < z[f].size(); ++i)
      expect_close(dz[f][i], central_difference(&z[f][i], 1e-2f, objective), 1e-4, 1e-3, "feature", i);
}

TEST(BceLoss, GradientMatchesFiniteDifferences) {
  BceLoss loss;
  std::vector<float> logits = {-3.0f, -0.5f, 0.0f, 0.7f, 4.0f, 1.5f};
  const std::vector<float> labels = {0.0f, 1.0f, 1.0f, 0.0f, 1.0f, 0.0f};
  const int B = int(logits.size());
  const float scale = 1.0f / B;
  std::vector<float> dl(B), scratch(B);
  const double total = loss.forward_backward(B, logits.data(), labels.data(), scale, dl.data());
  double ref = 0.0;
  for (int b = 0; b < B; ++b) {
    const double p = 1.0 / (1.0 + std::exp(-double(logits[b])));
    ref -= labels[b] * std::log(p) + (1 - labels[b]) * std::log(1 - p);
  }
  EXPECT_NEAR(total, ref, 1e-9);
  const auto objective = [&] { return scale * loss.forward_backward(B, logits.data(), labels.data(), scale, scratch.data()); };
  for (int b = 0; b < B; ++b)
    expect_close(dl[b], central_difference(&logits[b], 1e-3f, objective), 1e-6, 1e-4, "logit", b);
}
