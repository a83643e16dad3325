// Helpers of the next-item model tests (sasrec, hstu), and the behaviour both must
// show (causality, positions, scoring, repeatability, independence): hand-built training batches
// of the batch contract in model/next_item_head.hpp and their rows, and a read-out of
// how each position's user state moved.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "model/dense_parameters.hpp"
#include "model/model.hpp"
#include "model_test_util.hpp"

namespace strata::model::testing {

constexpr int kDim = 8;

// Fills rows (random; a key in both tables has the same values, as the store hands
// out) and zeroed grads for the batch's tables.
inline void fill_rows(Fixture& f, uint64_t seed) {
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
inline Fixture training_fixture(const std::vector<int>& lengths, uint64_t seed, int items = 10) {
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
inline Fixture readout_fixture(int L, uint64_t seed) {
  Fixture f = training_fixture({L}, seed);
  std::vector<int32_t> c(size_t(2 * L));
  for (int i = 0; i < 2 * L; ++i) c[size_t(i)] = i;
  f.batch.tables[1] = make_bags({c}, 2 * L);
  fill_rows(f, seed);
  return f;
}

// Positions (of a readout_fixture's gradients `before` and `after`) whose user state
// moved: the largest change of each position's two candidate row gradients.
inline std::vector<double> state_changes(const std::vector<float>& before, const std::vector<float>& after) {
  std::vector<double> change(before.size() / (2 * kDim), 0.0);
  for (size_t k = 0; k < before.size(); ++k) {
    const size_t i = k / (2 * kDim);
    const double tol = 1e-6 * std::fabs(before[k]) + 1e-9;
    const double d = std::fabs(double(after[k]) - before[k]);
    if (d > tol) change[i] = std::max(change[i], d);
  }
  return change;
}

const std::vector<int> kLengths = {2, 0, 33, 1, 7};

// Biases and gains away from their 0 and 1 initial values, so that their gradients
// are checked off the symmetric point.
inline void perturb_biases_and_gains(DenseParameters& p) {
  for (const auto& s : p.slices()) {
    const bool bias = s.name.find("bias") != std::string::npos, gain = s.name.find("gain") != std::string::npos;
    if (!bias && !gain) continue;
    const auto r = random_vector(s.size(), s.offset, -0.2f, 0.2f);
    for (size_t i = 0; i < s.size(); ++i) p.values(s.offset)[i] = (gain ? 1.0f : 0.0f) + r[i];
  }
}

// Sample s of f alone, as a batch of one.
inline Fixture single_sample(const Fixture& f, int s) {
  Fixture one = f;
  data::Batch& b = one.batch;
  b.size = 1;
  b.labels = {f.batch.labels[size_t(s)]};
  for (size_t t = 0; t < b.tables.size(); ++t) {
    const auto& src = f.batch.tables[t];
    b.tables[t].index.assign(src.index.begin() + src.offsets[s], src.index.begin() + src.offsets[s + 1]);
    b.tables[t].offsets = {0, src.offsets[s + 1] - src.offsets[s]};
  }
  return one;
}

// expect_gradient, and then central differences of 3e-4 and 1e-4: with 2 x 43 x dim
// ReLU units in the FFNs, one of them may lie within the larger steps of its kink.
template <class F>
void expect_gradient_fine(double analytic, float* x, F&& f, double atol, double rtol, const char* what, size_t i) {
  for (float eps : {3e-4f, 1e-4f}) {
    const double numeric = central_difference(x, eps, f);
    if (std::fabs(analytic - numeric) <= atol + rtol * std::max(std::fabs(analytic), std::fabs(numeric))) return;
  }
  expect_gradient(analytic, x, f, atol, rtol, what, i);
}

// The next-item models' gradient check: every dense weight except most positional
// rows (every fifth of those), with the positions past the longest history
// (`longest` events) exactly zero, and every row value, each table's rows with a
// gradient, all against expect_gradient_fine.
inline void expect_next_item_gradients(Model& model, Fixture& f, const AnalyticGradients& g, size_t longest) {
  DenseParameters& p = model.parameters();
  const ParameterSlice& position = p.slice("position");
  for (size_t i = 0; i < p.size(); ++i) {
    const bool in_position = i >= position.offset && i < position.offset + position.size();
    if (in_position && (i - position.offset) % 5 != 0) continue;
    expect_gradient_fine(g.dense[i], &p.values()[i], g.objective, 1e-4, 1e-2, "dense", i);
  }
  for (size_t i = longest * kDim; i < position.size(); ++i) EXPECT_EQ(g.dense[position.offset + i], 0.0f) << i;
  for (size_t t = 0; t < f.rows.size(); ++t) {
    double max_grad = 0.0;
    for (size_t i = 0; i < f.rows[t].size(); ++i) {
      max_grad = std::max(max_grad, std::fabs(double(g.rows[t][i])));
      expect_gradient_fine(g.rows[t][i], &f.rows[t][i], g.objective, 1e-4, 1e-2, "row", t * 1000 + i);
    }
    EXPECT_GT(max_grad, 1e-3) << "table " << t;
  }
}

template <class F>
void expect_error_naming(F&& f, const std::vector<std::string>& names) {
  try {
    f();
    ADD_FAILURE() << "no strata::Error";
  } catch (const strata::Error& e) {
    for (const auto& name : names) EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
}


// ---- the behaviour every next-item model shares (its tests call these) -----------
// make(seed): the model under test, of small options, with weights of that seed.
using MakeModel = std::function<std::unique_ptr<Model>(uint64_t seed)>;

// Changing history item j must leave the user states at positions < j unchanged.
inline void expect_causal(const MakeModel& make) {
  const int L = 33;
  Fixture f = readout_fixture(L, 13);
  std::unique_ptr<Model> made = make(4);
  Model& model = *made;
  perturb_biases_and_gains(model.parameters());
  model.forward_backward(f.batch, f.row_ptrs(), f.grad_ptrs(), 1.0f);
  for (int j : {1, 20, 32}) {
    Fixture changed = f;
    int32_t& item = changed.batch.tables[0].index[size_t(j)];
    item = (item + 1) % 10;
    model.forward_backward(changed.batch, changed.row_ptrs(), changed.grad_ptrs(), 1.0f);
    const std::vector<double> change = state_changes(f.grads[1], changed.grads[1]);
    for (int i = 0; i < L; ++i) {
      if (i < j)
        EXPECT_EQ(change[size_t(i)], 0.0) << "item " << j << " changed position " << i;
      else
        EXPECT_GT(change[size_t(i)], 1e-5) << "item " << j << " left position " << i << " alone";
    }
  }
}

// Positions count back from the most recent event: P[0] belongs to the last item, so
// changing it moves only the last user state (and the one that scoring reads).
inline void expect_latest_item_at_position_zero(const MakeModel& make) {
  const int L = 7;
  Fixture f = readout_fixture(L, 15);
  std::unique_ptr<Model> made = make(4);
  Model& model = *made;
  perturb_biases_and_gains(model.parameters());
  model.forward_backward(f.batch, f.row_ptrs(), f.grad_ptrs(), 1.0f);
  DenseParameters& p = model.parameters();
  float* p0 = p.values(p.slice("position").offset);
  for (int d = 0; d < kDim; ++d) p0[d] += 0.1f * float(d + 1);  // not a constant shift, which LN removes
  Fixture changed = f;
  model.forward_backward(changed.batch, changed.row_ptrs(), changed.grad_ptrs(), 1.0f);
  const std::vector<double> change = state_changes(f.grads[1], changed.grads[1]);
  for (int i = 0; i + 1 < L; ++i) EXPECT_EQ(change[size_t(i)], 0.0) << "position " << i;
  EXPECT_GT(change[size_t(L - 1)], 1e-5);
}

// The last training position and scoring read the same user state h_{L-1}: with a row
// of its own, the positive's gradient at the last position is -sigmoid(-s) h_{L-1}, so
// its dot product with the row is -sigmoid(-s) s for the s that scoring gives.
inline void expect_scoring_reads_last_position(const MakeModel& make) {
  std::unique_ptr<Model> made = make(8);
  Model& model = *made;
  perturb_biases_and_gains(model.parameters());
  for (int L : {1, 2, 7, 33}) {
    Fixture train = readout_fixture(L, 17);
    model.forward_backward(train.batch, train.row_ptrs(), train.grad_ptrs(), 1.0f);

    Fixture score = train;
    score.batch.tables[1] = make_bags({{2 * L - 2, 2 * L - 1, 0}}, 2 * L);
    std::vector<float> scores;
    model.score_candidates(score.batch, score.row_ptrs(), scores);
    ASSERT_EQ(scores.size(), 3u);
    const float* e = &train.rows[1][size_t(2 * L - 2) * kDim];
    const float* g = &train.grads[1][size_t(2 * L - 2) * kDim];
    double g_dot_e = 0.0;
    for (int d = 0; d < kDim; ++d) g_dot_e += double(g[d]) * e[d];
    const double s = scores[0];
    EXPECT_NEAR(g_dot_e, -s / (1.0 + std::exp(s)), 1e-5) << "L = " << L;
    float prob = 0.0f;
    model.predict(score.batch, score.row_ptrs(), &prob);
    EXPECT_FLOAT_EQ(prob, float(1.0 / (1.0 + std::exp(-s)))) << "L = " << L;
  }
}

inline void expect_bitwise_repeatable(const MakeModel& make) {
  Fixture f = training_fixture(kLengths, 11);
  std::unique_ptr<Model> made = make(9);
  Model& model = *made;
  const double loss1 = model.forward_backward(f.batch, f.row_ptrs(), f.grad_ptrs(), 0.2f);
  const auto g1 = model.parameters().grads();
  const auto r1 = f.grads;
  std::vector<float> s1;
  model.score_candidates(f.batch, f.row_ptrs(), s1);
  // A different batch in between must not leak into the next step.
  Fixture other = training_fixture({5, 40, 3}, 12);
  model.forward_backward(other.batch, other.row_ptrs(), other.grad_ptrs(), 0.5f);
  for (auto& g : f.grads) std::fill(g.begin(), g.end(), 9.0f);
  model.parameters().grads().assign(model.parameters().size(), 9.0f);
  EXPECT_EQ(model.forward_backward(f.batch, f.row_ptrs(), f.grad_ptrs(), 0.2f), loss1);
  EXPECT_TRUE(bits_equal(g1, model.parameters().grads()));
  for (size_t t = 0; t < r1.size(); ++t) EXPECT_TRUE(bits_equal(r1[t], f.grads[t])) << t;
  std::vector<float> s2;
  model.score_candidates(f.batch, f.row_ptrs(), s2);
  EXPECT_TRUE(bits_equal(s1, s2));
  // Scoring leaves the gradients alone.
  EXPECT_TRUE(bits_equal(g1, model.parameters().grads()));
  // A second model of the same seed gives the same bits.
  std::unique_ptr<Model> twin = make(9);
  Fixture g = training_fixture(kLengths, 11);
  EXPECT_EQ(twin->forward_backward(g.batch, g.row_ptrs(), g.grad_ptrs(), 0.2f), loss1);
  EXPECT_TRUE(bits_equal(g1, twin->parameters().grads()));
  for (size_t t = 0; t < r1.size(); ++t) EXPECT_TRUE(bits_equal(r1[t], g.grads[t])) << t;
}

// A sample's loss and scores are functions of its own bags only.
inline void expect_batch_independence(const MakeModel& make) {
  Fixture f = training_fixture(kLengths, 21);
  std::unique_ptr<Model> made = make(3);
  Model& model = *made;
  perturb_biases_and_gains(model.parameters());
  const double total = model.forward_backward(f.batch, f.row_ptrs(), f.grad_ptrs(), 1.0f);
  std::vector<float> all;
  model.score_candidates(f.batch, f.row_ptrs(), all);
  ASSERT_EQ(all.size(), f.batch.tables[1].index.size());
  double sum = 0.0;
  for (int s = 0; s < f.batch.size; ++s) {
    Fixture one = single_sample(f, s);
    const double loss = model.forward_backward(one.batch, one.row_ptrs(), one.grad_ptrs(), 1.0f);
    sum += loss;
    EXPECT_EQ(loss == 0.0, kLengths[size_t(s)] == 0) << "sample " << s;
    std::vector<float> scores;
    model.score_candidates(one.batch, one.row_ptrs(), scores);
    const auto& offsets = f.batch.tables[1].offsets;
    ASSERT_EQ(scores.size(), size_t(offsets[s + 1] - offsets[s]));
    for (size_t c = 0; c < scores.size(); ++c) {
      EXPECT_EQ(scores[c], all[size_t(offsets[s]) + c]) << "sample " << s << " candidate " << c;
      if (kLengths[size_t(s)] == 0) EXPECT_EQ(scores[c], 0.0f);
    }
  }
  EXPECT_EQ(sum, total);
}

inline void expect_no_history_no_gradient(const MakeModel& make) {
  Fixture f = training_fixture({0, 0}, 5);
  std::unique_ptr<Model> made = make(3);
  Model& model = *made;
  model.parameters().grads().assign(model.parameters().size(), 9.0f);
  EXPECT_EQ(model.forward_backward(f.batch, f.row_ptrs(), f.grad_ptrs(), 1.0f), 0.0);
  for (float g : model.parameters().grads()) ASSERT_EQ(g, 0.0f);
  Fixture score = f;
  score.batch.tables[1] = make_bags({{1, 2}, {3}}, 14);
  fill_rows(score, 5);
  std::vector<float> scores;
  model.score_candidates(score.batch, score.row_ptrs(), scores);
  EXPECT_EQ(scores, (std::vector<float>{0.0f, 0.0f, 0.0f}));
  float probs[2];
  model.predict(score.batch, score.row_ptrs(), probs);
  EXPECT_EQ(probs[0], 0.5f);
  EXPECT_EQ(probs[1], 0.5f);
}

// f with its two tables tied (model.tie_item_rows): one de-duplicated key list in
// table 0 that the candidates index, rows filled by key as before.
inline Fixture tied(const Fixture& f, uint64_t seed) {
  Fixture t = f;
  for (auto& bags : t.batch.tables) {
    bags.keys.clear();
    for (int32_t i : bags.index) bags.keys.push_back(bags.unique_keys[size_t(i)]);
    bags.unique_keys.clear();
    bags.index.clear();
  }
  data::deduplicate(t.batch, {-1, 0});
  fill_rows(t, seed);
  return t;
}

// Tied item rows: the loss, the dense gradients and the scores are those of the
// untied model on the same row values, and each row's gradient is, bit for bit, its
// history part plus its candidate part (the untied rows' gradients, added in that order).
inline void expect_tied_rows_sum_both_parts(const MakeModel& make) {
  const Fixture untied = training_fixture(kLengths, 31);
  Fixture f = untied;
  Fixture t = tied(untied, 31);
  ASSERT_EQ(t.batch.tables[1].keys_of, 0);
  ASSERT_TRUE(t.batch.tables[1].unique_keys.empty());
  std::unique_ptr<Model> a = make(5), b = make(5);
  const double loss_untied = a->forward_backward(f.batch, f.row_ptrs(), f.grad_ptrs(), 0.25f);
  for (auto& g : t.grads) std::fill(g.begin(), g.end(), 7.0f);  // every tied row's gradient is written
  const double loss_tied = b->forward_backward(t.batch, t.row_ptrs(), t.grad_ptrs(), 0.25f);
  EXPECT_EQ(loss_untied, loss_tied);
  EXPECT_TRUE(bits_equal(a->parameters().grads(), b->parameters().grads()));
  const auto& union_keys = t.batch.tables[0].unique_keys;
  for (size_t u = 0; u < union_keys.size(); ++u) {
    const auto part = [&](int table) {
      const auto& keys = f.batch.tables[size_t(table)].unique_keys;
      const auto at = std::lower_bound(keys.begin(), keys.end(), union_keys[u]);
      std::vector<float> g(kDim, 0.0f);
      if (at != keys.end() && *at == union_keys[u])
        std::copy_n(&f.grads[size_t(table)][size_t(at - keys.begin()) * kDim], kDim, g.begin());
      return g;
    };
    const std::vector<float> history = part(0), candidates = part(1);
    for (int d = 0; d < kDim; ++d)
      EXPECT_EQ(t.grads[0][u * kDim + size_t(d)], history[size_t(d)] + candidates[size_t(d)]) << u << " " << d;
  }
  std::vector<float> scores_untied, scores_tied;
  a->score_candidates(f.batch, f.row_ptrs(), scores_untied);
  b->score_candidates(t.batch, t.row_ptrs(), scores_tied);
  EXPECT_TRUE(bits_equal(scores_untied, scores_tied));
  // A batch whose tables are tied the other way round is refused.
  Fixture wrong = t;
  wrong.batch.tables[0].keys_of = 1;
  EXPECT_THROW(b->forward_backward(wrong.batch, wrong.row_ptrs(), wrong.grad_ptrs(), 0.25f), Error);
}

}  // namespace strata::model::testing
