// Helpers of the next-item model tests (sasrec, hstu): hand-built training batches
// of the batch contract in model/next_item_head.hpp and their rows, and a read-out of
// how each position's user state moved.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "model_test_util.hpp"

namespace strata::model::testing {

constexpr int kDim = 8;

// Fills rows (random; a key in both tables has the same values, as the store hands
// out) and zeroed grads for the batch's tables.
void fill_rows(Fixture& f, uint64_t seed) {
  const std::vector<float> values = random_vector(64 * kDim, seed, -0.5f, 0.5f);
  f.rows.clear();
  f.grads.clear();
  for (const auto& bags : f.batch.tables) {
    std::vector<float> r(bags.unique_keys.size() * kDim);
    for (size_t u = 0; u < bags.unique_keys.size(); ++u)
      std::copy_n(&values[size_t(bags.unique_keys[u] - 1000) % 64 * kDim], kDim, &r[u * kDim]);
    f.rows.push_back(r);
    f.grads.emplace_back(r.size(), 0.0f);
  }
}

// Training samples of the given history lengths over `items` item rows: histories with
// repeats, positives the next history item (the last one a new item), negatives
// spread over the key space; the candidates table shares keys with the history table.
Fixture training_fixture(const std::vector<int>& lengths, uint64_t seed, int items = 10) {
  Fixture f;
  data::Batch& b = f.batch;
  b.size = int32_t(lengths.size());
  b.labels.assign(lengths.size(), 1.0f);
  std::vector<std::vector<int32_t>> history, candidates;
  for (size_t s = 0; s < lengths.size(); ++s) {
    std::vector<int32_t> h, c;
    for (int i = 0; i < lengths[s]; ++i) h.push_back(int32_t((3 * s + 5 * i + i * i / 3) % items));
    for (int i = 0; i < lengths[s]; ++i) {
      c.push_back(i + 1 < lengths[s] ? h[size_t(i) + 1] : int32_t((7 * s + 2) % 14));
      c.push_back(int32_t((11 * s + 3 * i + 1) % 14));
    }
    history.push_back(h);
    candidates.push_back(c);
  }
  b.tables.push_back(make_bags(history, items));
  b.tables.push_back(make_bags(candidates, 14));
  fill_rows(f, seed);
  return f;
}

// One training sample of history length L whose 2 L candidate occurrences each have a
// row of their own, so that a candidate row's gradient ds h_i reads out the user state
// at its position.
Fixture readout_fixture(int L, uint64_t seed) {
  Fixture f = training_fixture({L}, seed);
  std::vector<int32_t> c(size_t(2 * L));
  for (int i = 0; i < 2 * L; ++i) c[size_t(i)] = i;
  f.batch.tables[1] = make_bags({c}, 2 * L);
  fill_rows(f, seed);
  return f;
}

// Positions (of a readout_fixture's gradients `before` and `after`) whose user state
// moved: the largest change of each position's two candidate row gradients.
std::vector<double> state_changes(const std::vector<float>& before, const std::vector<float>& after) {
  std::vector<double> change(before.size() / (2 * kDim), 0.0);
  for (size_t k = 0; k < before.size(); ++k) {
    const size_t i = k / (2 * kDim);
    const double tol = 1e-6 * std::fabs(before[k]) + 1e-9;
    const double d = std::fabs(double(after[k]) - before[k]);
    if (d > tol) change[i] = std::max(change[i], d);
  }
  return change;
}

}  // namespace strata::model::testing
