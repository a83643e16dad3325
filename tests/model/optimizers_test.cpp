// Optimizers against hand-computed steps (the numbers in the comments were worked out
// on paper / in double; float arithmetic agrees to ~1e-7).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "model/optimizers.hpp"

using namespace strata::model;
using strata::OptimizerOptions;

namespace {

OptimizerOptions options(const std::string& dense, const std::string& sparse, float lr) {
  OptimizerOptions o;
  o.dense = dense;
  o.sparse = sparse;
  o.dense_lr = lr;
  o.sparse_lr = lr;
  return o;
}

}  // namespace

TEST(DenseSgd, HandComputedStep) {
  auto opt = make_dense_optimizer(options("sgd", "sgd", 0.5f), 3);
  std::vector<float> w = {1.0f, -2.0f, 0.25f};
  const std::vector<float> g = {0.5f, 0.25f, -1.0f};
  opt->step(w.data(), g.data(), 3);
  // w - 0.5 g, exact in binary floating point.
  EXPECT_EQ(w, (std::vector<float>{0.75f, -2.125f, 0.75f}));
  EXPECT_EQ(opt->steps_taken(), 1);
  EXPECT_TRUE(opt->state().empty());
  EXPECT_STREQ(opt->name(), "sgd");
}

TEST(DenseAdagrad, HandComputedSteps) {
  OptimizerOptions o = options("adagrad", "sgd", 0.1f);
  o.eps = 0.0f;
  o.adagrad_init = 0.0f;
  auto opt = make_dense_optimizer(o, 2);
  std::vector<float> w = {1.0f, 0.0f};
  // Step 1: g = 3 -> acc 9, w -= 0.1 * 3 / 3 = 0.1.   g = -4 -> acc 16, w += 0.1.
  std::vector<float> g = {3.0f, -4.0f};
  opt->step(w.data(), g.data(), 2);
  EXPECT_NEAR(w[0], 0.9f, 1e-7);
  EXPECT_NEAR(w[1], 0.1f, 1e-7);
  // Step 2: g = 4 -> acc 25, w -= 0.1 * 4 / 5 = 0.08 -> 0.82.  g = 3 -> acc 25, w -= 0.06 -> 0.04.
  g = {4.0f, 3.0f};
  opt->step(w.data(), g.data(), 2);
  EXPECT_NEAR(w[0], 0.82f, 1e-7);
  EXPECT_NEAR(w[1], 0.04f, 1e-7);
  EXPECT_EQ(opt->state(), (std::vector<float>{25.0f, 25.0f}));
}

TEST(DenseAdagrad, InitialAccumulatorAndEps) {
  OptimizerOptions o = options("adagrad", "sgd", 1.0f);
  o.adagrad_init = 7.0f;
  o.eps = 1.0f;
  auto opt = make_dense_optimizer(o, 1);
  float w = 10.0f;
  const float g = 3.0f;
  opt->step(&w, &g, 1);  // acc = 7 + 9 = 16; w -= 3 / (4 + 1)
  EXPECT_FLOAT_EQ(w, 9.4f);
}

TEST(DenseAdam, HandComputedSteps) {
  OptimizerOptions o = options("adam", "sgd", 1e-3f);  // beta1 0.9, beta2 0.999, eps 1e-8
  auto opt = make_dense_optimizer(o, 2);
  std::vector<float> w = {0.5f, -0.25f};
  std::vector<float> g = {1.0f, -0.5f};
  // Step 1: m = 0.1 g, v = 0.001 g^2; bias-corrected m / sqrt(v) = sign(g): w -= lr sign(g).
  opt->step(w.data(), g.data(), 2);
  EXPECT_NEAR(w[0], 0.499f, 1e-7);
  EXPECT_NEAR(w[1], -0.249f, 1e-7);
  // Step 2, g = (2, 0.25): m = (0.29, -0.02), v = (0.004999, 0.00031225);
  // w -= (1e-3 / 0.19) m / (sqrt(v) / sqrt(0.001999) + 1e-8) -> (0.498034818, -0.248733663).
  g = {2.0f, 0.25f};
  opt->step(w.data(), g.data(), 2);
  EXPECT_NEAR(w[0], 0.498034818f, 2e-7);
  EXPECT_NEAR(w[1], -0.248733663f, 2e-7);
  const std::vector<float> s = opt->state();
  ASSERT_EQ(s.size(), 4u);
  EXPECT_NEAR(s[0], 0.29f, 1e-7);
  EXPECT_NEAR(s[1], -0.02f, 1e-8);
  // beta2 = 0.999f is 0.99900001287 in float, so 1 - beta2 is off by 1.3e-5 relative;
  // the bias correction uses the same beta2 and cancels it in the weights above.
  EXPECT_NEAR(s[2], 0.004999f, 0.004999 * 2e-5);
  EXPECT_NEAR(s[3], 0.00031225f, 0.00031225 * 2e-5);
  EXPECT_EQ(opt->steps_taken(), 2);
}

TEST(DenseAdam, StateRoundTripContinuesIdentically) {
  OptimizerOptions o = options("adam", "sgd", 1e-2f);
  auto a = make_dense_optimizer(o, 3);
  std::vector<float> w = {0.1f, 0.2f, 0.3f};
  const std::vector<float> g1 = {0.3f, -0.1f, 0.7f}, g2 = {-0.2f, 0.4f, 0.1f};
  a->step(w.data(), g1.data(), 3);
  auto b = make_dense_optimizer(o, 3);
  b->set_state(a->state());
  b->set_steps_taken(a->steps_taken());
  std::vector<float> wa = w, wb = w;
  a->step(wa.data(), g2.data(), 3);
  b->step(wb.data(), g2.data(), 3);
  EXPECT_EQ(wa, wb);
  EXPECT_EQ(a->state(), b->state());
  EXPECT_THROW(b->set_state(std::vector<float>(5)), strata::Error);
}

TEST(SparseSgd, HandComputedStep) {
  auto opt = make_sparse_optimizer(options("adam", "sgd", 0.25f));
  EXPECT_EQ(opt->state_width(16), 0);
  std::vector<float> w = {1.0f, 2.0f};
  const std::vector<float> g = {4.0f, -2.0f};
  opt->apply(w.data(), nullptr, g.data(), 2);
  EXPECT_EQ(w, (std::vector<float>{0.0f, 2.5f}));
}

TEST(SparseAdagrad, ElementwiseAccumulatorHandComputed) {
  OptimizerOptions o = options("adam", "adagrad", 0.1f);
  o.adagrad_init = 7.0f;
  o.eps = 0.0f;
  auto opt = make_sparse_optimizer(o);
  EXPECT_EQ(opt->state_width(16), 16);
  std::vector<float> w = {1.0f, 1.0f}, state(2, -1.0f);
  opt->init_state(state.data(), 2);
  EXPECT_EQ(state, (std::vector<float>{7.0f, 7.0f}));
  // g = 3: acc 16, w -= 0.1 * 3 / 4 = 0.075.  g = 0: nothing moves.
  std::vector<float> g = {3.0f, 0.0f};
  opt->apply(w.data(), state.data(), g.data(), 2);
  EXPECT_NEAR(w[0], 0.925f, 1e-7);
  EXPECT_EQ(w[1], 1.0f);
  EXPECT_EQ(state, (std::vector<float>{16.0f, 7.0f}));
  // g = -3: acc 25, w += 0.1 * 3 / 5 = 0.06 -> 0.985.
  g = {-3.0f, 0.0f};
  opt->apply(w.data(), state.data(), g.data(), 2);
  EXPECT_NEAR(w[0], 0.985f, 1e-7);
  EXPECT_EQ(state[0], 25.0f);
}

// The vectorised row update must give the scalar formula's bits for every lane and
// the tail (dim 19 = four blocks of 4 and 3 left over), over many steps.
TEST(SparseAdagrad, VectorisedRowUpdateIsBitIdenticalToScalarFormula) {
  OptimizerOptions o = options("adam", "adagrad", 0.05f);
  o.adagrad_init = 0.1f;
  auto opt = make_sparse_optimizer(o);
  const int dim = 19;
  std::vector<float> w(dim), a(dim), w_ref(dim), a_ref(dim), g(dim);
  uint32_t state = 12345;
  auto next = [&] { state = state * 1664525u + 1013904223u; return (int32_t(state >> 8) - (1 << 23)) / float(1 << 22); };
  for (int i = 0; i < dim; ++i) w[i] = w_ref[i] = next();
  opt->init_state(a.data(), dim);
  a_ref.assign(dim, o.adagrad_init);
  for (int step = 0; step < 200; ++step) {
    for (int i = 0; i < dim; ++i) g[i] = next() * (step % 7 == 0 ? 1e-4f : 1.0f);
    opt->apply(w.data(), a.data(), g.data(), dim);
    for (int i = 0; i < dim; ++i) {
      a_ref[i] += g[i] * g[i];
      w_ref[i] -= o.sparse_lr * g[i] / (std::sqrt(a_ref[i]) + o.eps);
    }
  }
  for (int i = 0; i < dim; ++i) {
    EXPECT_EQ(w[i], w_ref[i]) << "lane " << i;
    EXPECT_EQ(a[i], a_ref[i]) << "lane " << i;
  }
}

// Lazy row-wise Adam: a row that steps every time follows the dense Adam (whose bias
// corrections come from pow() in double, the row's from products in float: equal to
// float rounding), keeps b1^t and b2^t as its step count, and a row without a
// gradient does not step.
TEST(SparseAdam, FollowsDenseAdamAndCountsItsOwnSteps) {
  OptimizerOptions o = options("adam", "adam", 0.01f);
  o.beta1 = 0.9f;
  o.beta2 = 0.99f;
  auto sparse = make_sparse_optimizer(o);
  EXPECT_STREQ(sparse->name(), "adam");
  const int dim = 5;
  EXPECT_EQ(sparse->state_width(dim), 2 * dim + 2);
  std::vector<float> w = {1.0f, -1.0f, 0.5f, 0.0f, 2.0f}, state(2 * dim + 2, -3.0f);
  sparse->init_state(state.data(), dim);
  for (int i = 0; i < 2 * dim; ++i) EXPECT_EQ(state[size_t(i)], 0.0f);
  EXPECT_EQ(state[2 * dim], 1.0f);
  EXPECT_EQ(state[2 * dim + 1], 1.0f);
  // Step 1 moves every component with a gradient by lr sign(g) (m / sqrt(v) = sign(g) after bias correction).
  const std::vector<float> first = {0.3f, -2.0f, 1e-3f, 0.0f, 5.0f};
  std::vector<float> w_dense = w;
  auto dense = make_dense_optimizer(o, dim);
  sparse->apply(w.data(), state.data(), first.data(), dim);
  dense->step(w_dense.data(), first.data(), dim);
  EXPECT_NEAR(w[0], 0.99f, 1e-6);
  EXPECT_NEAR(w[1], -0.99f, 1e-6);
  EXPECT_EQ(w[3], 0.0f);
  for (int step = 2; step <= 50; ++step) {
    std::vector<float> g(dim);
    for (int i = 0; i < dim; ++i) g[size_t(i)] = std::sin(float(step * (i + 1)));
    sparse->apply(w.data(), state.data(), g.data(), dim);
    dense->step(w_dense.data(), g.data(), dim);
  }
  for (int i = 0; i < dim; ++i) EXPECT_NEAR(w[size_t(i)], w_dense[size_t(i)], 1e-5f) << i;
  float p1 = 1.0f, p2 = 1.0f;
  for (int t = 0; t < 50; ++t) p1 *= 0.9f, p2 *= 0.99f;
  EXPECT_EQ(state[2 * dim], p1);
  EXPECT_EQ(state[2 * dim + 1], p2);
  // Bit-reproducible: the same row, state and gradient give the same bits.
  std::vector<float> w2 = w, s2 = state;
  const std::vector<float> g(dim, 0.25f);
  sparse->apply(w.data(), state.data(), g.data(), dim);
  sparse->apply(w2.data(), s2.data(), g.data(), dim);
  EXPECT_EQ(w, w2);
  EXPECT_EQ(state, s2);
}

TEST(OptimizerOptions, UnknownNamesAreErrorsNamingTheKey) {
  try {
    make_dense_optimizer(options("rmsprop", "sgd", 0.1f), 4);
    FAIL() << "no error";
  } catch (const strata::Error& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("optim.dense"), std::string::npos) << text;
    EXPECT_NE(text.find("adam, adagrad, sgd"), std::string::npos) << text;
  }
  try {
    make_sparse_optimizer(options("adam", "rmsprop", 0.1f));
    FAIL() << "no error";
  } catch (const strata::Error& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("optim.sparse"), std::string::npos) << text;
    EXPECT_NE(text.find("adagrad, sgd, adam"), std::string::npos) << text;
  }
}
