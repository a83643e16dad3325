// Helpers of the model tests: random buffers, hand-built batches, finite differences.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/rng.hpp"
#include "data/batch.hpp"

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

}  // namespace strata::model::testing
