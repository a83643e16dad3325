// Helpers of the model tests: random buffers, hand-built batches, finite differences.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/rng.hpp"
#include "config/options.hpp"
#include "data/batch.hpp"
#include "model/dense_parameters.hpp"
#include "model/model.hpp"

namespace strata::model::testing {

inline std::vector<float> random_vector(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  CounterRng rng(mix64(seed, 0x7e57));
  std::vector<float> v(n);
  for (float& x : v) x = lo + (hi - lo) * float(rng.uniform());
  return v;
}

// Central difference of f() in the float *x; *x is restored. Divides by the perturbation
// actually applied (x +- eps rounded to float).
template <class F>
double central_difference(float* x, float eps, F&& f) {
  const float saved = *x;
  const float up_x = saved + eps, down_x = saved - eps;
  *x = up_x;
  const double up = f();
  *x = down_x;
  const double down = f();
  *x = saved;
  return (up - down) / (double(up_x) - double(down_x));
}

inline void expect_close(double analytic, double numeric, double atol, double rtol, const char* what,
                         size_t i) {
  const double tol = atol + rtol * std::max(std::fabs(analytic), std::fabs(numeric));
  EXPECT_NEAR(analytic, numeric, tol) << what << " [" << i << "]";
}

// Piecewise-smooth functions (ReLU) have kinks that a finite difference may straddle,
// and then only a smaller step, or a one-sided one that stays on the kink's side,
// agrees with the true derivative. Accepts the analytic value when one of these
// estimates matches it; a wrong gradient matches none of them.
template <class F>
void expect_gradient(double analytic, float* x, F&& f, double atol, double rtol, const char* what,
                     size_t i) {
  double estimates[5];
  estimates[0] = central_difference(x, 1e-2f, f);
  estimates[1] = central_difference(x, 3e-3f, f);
  estimates[2] = central_difference(x, 1e-3f, f);
  const float saved = *x, h = 1e-3f;
  const double f0 = f();
  *x = saved + h;
  estimates[3] = (f() - f0) / (double(*x) - double(saved));  // forward
  *x = saved - h;
  estimates[4] = (f0 - f()) / (double(saved) - double(*x));  // backward
  *x = saved;
  for (double numeric : estimates) {
    const double tol = atol + rtol * std::max(std::fabs(analytic), std::fabs(numeric));
    if (std::fabs(analytic - numeric) <= tol) return;
  }
  ADD_FAILURE() << what << " [" << i << "]: analytic " << analytic << "; central differences "
                << estimates[0] << " (1e-2) " << estimates[1] << " (3e-3) " << estimates[2]
                << " (1e-3); one-sided " << estimates[3] << " " << estimates[4] << " (1e-3)";
}

// A table's bags from explicit per-sample index lists into `num_unique` rows.
inline data::SparseBags make_bags(const std::vector<std::vector<int32_t>>& bags, int num_unique) {
  data::SparseBags out;
  out.offsets.push_back(0);
  for (const auto& bag : bags) {
    out.index.insert(out.index.end(), bag.begin(), bag.end());
    out.offsets.push_back(int32_t(out.index.size()));
  }
  for (int u = 0; u < num_unique; ++u) out.unique_keys.push_back(uint64_t(1000 + u));
  return out;
}

// A batch and the rows a store would hand a model for it, with their gradients.
struct Fixture {
  data::Batch batch;
  std::vector<std::vector<float>> rows;   // rows[t] (U_t, dim)
  std::vector<std::vector<float>> grads;  // grads[t] (U_t, dim)

  std::vector<const float*> row_ptrs() const {
    std::vector<const float*> p;
    for (const auto& r : rows) p.push_back(r.data());
    return p;
  }
  std::vector<float*> grad_ptrs() {
    std::vector<float*> p;
    for (auto& g : grads) p.push_back(g.data());
    return p;
  }
};

// What f throws as a strata::Error, or "(no strata::Error)".
inline std::string error_text(const std::function<void()>& f) {
  try {
    f();
  } catch (const strata::Error& e) {
    return e.what();
  }
  return "(no strata::Error)";
}

// Biases uniform in [-range, range), a function of their offset: zero biases would
// leave ReLU units at their kinks and the gradient checks toothless.
inline void perturb_biases(DenseParameters& p, float range = 0.3f) {
  for (const auto& s : p.slices())
    if (s.name.find("bias") != std::string::npos) {
      const auto b = random_vector(s.size(), s.offset, -range, range);
      std::copy(b.begin(), b.end(), p.values(s.offset));
    }
}

// One training pass's analytic gradients of scale * (sum of sample losses), and the
// objective that finite differences evaluate (its passes write their gradients to a
// scratch copy of the fixture, so `rows` stay the analytic ones).
struct AnalyticGradients {
  double loss = 0;                        // the pass's unscaled loss
  std::vector<float> dense;               // d objective / d every dense weight
  std::vector<std::vector<float>> rows;   // d objective / d every row value, per table
  std::shared_ptr<Fixture> scratch;
  std::function<double()> objective;
};

inline AnalyticGradients analytic_gradients(Model& model, Fixture& f, float scale) {
  AnalyticGradients g;
  g.loss = model.forward_backward(f.batch, f.row_ptrs(), f.grad_ptrs(), scale);
  g.dense = model.parameters().grads();
  g.rows = f.grads;
  g.scratch = std::make_shared<Fixture>(f);
  Fixture* scratch = g.scratch.get();
  g.objective = [&model, &f, scratch, scale] {
    return scale * model.forward_backward(f.batch, f.row_ptrs(), scratch->grad_ptrs(), scale);
  };
  return g;
}

// Every dense weight and every row value of f against central differences of g.objective.
inline void expect_gradients_match(Model& model, Fixture& f, const AnalyticGradients& g, double atol = 1e-4,
                                   double rtol = 1e-2) {
  DenseParameters& p = model.parameters();
  for (size_t i = 0; i < p.size(); ++i) expect_gradient(g.dense[i], &p.values()[i], g.objective, atol, rtol, "dense", i);
  for (size_t t = 0; t < f.rows.size(); ++t)
    for (size_t i = 0; i < f.rows[t].size(); ++i)
      expect_gradient(g.rows[t][i], &f.rows[t][i], g.objective, atol, rtol, "row", t * 1000 + i);
}

// The largest |gradient| of a dense slice.
inline double max_abs_grad(const AnalyticGradients& g, const ParameterSlice& slice) {
  double most = 0.0;
  for (size_t i = slice.offset; i < slice.offset + slice.size(); ++i) most = std::max(most, std::fabs(double(g.dense[i])));
  return most;
}

// A click batch of B samples with `tasks` labels each, 3 dense features and 3 tables
// (one-hot, multi-hot with empty bags, shared keys), rows of width dim.
// B samples of `tasks` random labels each (about 0.4 of them 1) and num_dense
// dense features in [0, 2), no tables yet; rng (seeded by the caller) drew the labels.
inline Fixture labelled_fixture(int B, int tasks, int num_dense, uint64_t seed, CounterRng& rng) {
  Fixture f;
  data::Batch& b = f.batch;
  b.size = B;
  b.num_dense = num_dense;
  b.num_tasks = tasks;
  for (int i = 0; i < B * tasks; ++i) b.labels.push_back(rng.uniform() < 0.4 ? 1.0f : 0.0f);
  b.dense = random_vector(size_t(B) * num_dense, seed + 1, 0.0f, 2.0f);
  return f;
}

// Appends a table of these bags over num_unique rows of `dim` floats (random in
// [-0.5, 0.5) from row_seed), with zeroed gradients.
inline void add_table(Fixture& f, const std::vector<std::vector<int32_t>>& bags, int num_unique, int dim,
                      uint64_t row_seed) {
  f.batch.tables.push_back(make_bags(bags, num_unique));
  f.rows.push_back(random_vector(size_t(num_unique) * dim, row_seed, -0.5f, 0.5f));
  f.grads.emplace_back(size_t(num_unique) * dim, 0.0f);
}

// DIN's small test shape: dim 3, bottom 4-3, top 5, activation unit 6.
inline ModelOptions small_din_options() {
  ModelOptions o;
  o.kind = "din";
  o.embedding_dim = 3;
  o.bottom_mlp = "4,3";
  o.top_mlp = "5";
  o.din_attention_mlp = "6";
  return o;
}

inline Fixture click_fixture(int B, int tasks, int dim, uint64_t seed) {
  CounterRng rng(seed);
  Fixture f = labelled_fixture(B, tasks, 3, seed, rng);
  const int unique[3] = {7, 5, 3};
  for (int t = 0; t < 3; ++t) {
    std::vector<std::vector<int32_t>> bags(static_cast<size_t>(B));
    for (int i = 0; i < B; ++i) {
      const int len = t == 0 ? 1 : int(rng.next() % 3);
      for (int k = 0; k < len; ++k) bags[size_t(i)].push_back(int32_t(rng.next() % unique[t]));
    }
    add_table(f, bags, unique[t], dim, seed + 10 + t);
  }
  return f;
}

// The samples `picked` of a click_fixture, in that order, reading the same rows.
inline Fixture sub_batch(const Fixture& f, const std::vector<int>& picked) {
  Fixture out = f;
  data::Batch& b = out.batch;
  const int K = f.batch.num_tasks, D = f.batch.num_dense;
  b.size = int(picked.size());
  b.labels.clear();
  b.dense.clear();
  for (int s : picked) {
    b.labels.insert(b.labels.end(), f.batch.labels.begin() + K * s, f.batch.labels.begin() + K * s + K);
    b.dense.insert(b.dense.end(), f.batch.dense.begin() + D * s, f.batch.dense.begin() + D * s + D);
  }
  for (size_t t = 0; t < b.tables.size(); ++t) {
    const auto& src = f.batch.tables[t];
    auto& dst = b.tables[t];
    dst.index.clear();
    dst.offsets = {0};
    for (int s : picked) {
      dst.index.insert(dst.index.end(), src.index.begin() + src.offsets[size_t(s)],
                       src.index.begin() + src.offsets[size_t(s) + 1]);
      dst.offsets.push_back(int32_t(dst.index.size()));
    }
  }
  return out;
}

// Same values, bit for bit (NaNs and signed zeros included).
inline bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace strata::model::testing
