// Sasrec: gradients of the whole model (dense weights, history and candidate rows)
// against finite differences on a jagged batch with histories of 0, 1, 2, 7 and 33
// items, repeated items within a history and keys in both tables; causality (a later
// history item leaves the earlier positions alone); training and scoring read the
// same user state; bitwise repeatability; independence of a sample from the rest of
// the batch; the option and batch checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "model/dlrm.hpp"
#include "model/model.hpp"
#include "model/sasrec.hpp"
#include "model_test_util.hpp"
#include "next_item_test_util.hpp"

using namespace strata::model;
using namespace strata::model::testing;
using strata::ModelOptions;
using strata::data::Batch;

namespace {


const std::vector<int> kLengths = {2, 0, 33, 1, 7};

ModelOptions small_options() {
  ModelOptions o;
  o.kind = "sasrec";
  o.embedding_dim = kDim;
  o.sasrec_heads = 2;
  o.sasrec_blocks = 2;
  o.sasrec_max_len = 40;
  return o;
}

// Biases and gains away from their 0 and 1 initial values, so that their gradients
// are checked off the symmetric point.
void perturb_biases_and_gains(DenseParameters& p) {
  for (const auto& s : p.slices()) {
    const bool bias = s.name.find("bias") != std::string::npos, gain = s.name.find("gain") != std::string::npos;
    if (!bias && !gain) continue;
    const auto r = random_vector(s.size(), s.offset, -0.2f, 0.2f);
    for (size_t i = 0; i < s.size(); ++i) p.values(s.offset)[i] = (gain ? 1.0f : 0.0f) + r[i];
  }
}

// Sample s of f alone, as a batch of one.
Fixture single_sample(const Fixture& f, int s) {
  Fixture one = f;
  Batch& b = one.batch;
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

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
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

}  // namespace

TEST(Sasrec, ShapeAndParameterLayout) {
  Sasrec model(small_options(), 0, 2, 1);
  EXPECT_EQ(model.kind(), "sasrec");
  EXPECT_TRUE(model.ranks_items());
  EXPECT_EQ(model.shape().head_dim(), 4);
  const DenseParameters& p = model.parameters();
  EXPECT_EQ(p.slices().front().name, "position");
  EXPECT_EQ(p.slice("position").shape, (std::vector<int64_t>{40, kDim}));
  EXPECT_EQ(p.slice("block.1.query.weight").shape, (std::vector<int64_t>{kDim, kDim}));
  EXPECT_EQ(p.slice("block.0.ffn.1.bias").shape, (std::vector<int64_t>{kDim}));
  EXPECT_EQ(p.slice("block.0.ln2.gain").shape, (std::vector<int64_t>{kDim}));
  EXPECT_EQ(p.slices().back().name, "final_ln.bias");
  EXPECT_EQ(p.values()[p.slice("final_ln.gain").offset + 3], 1.0f);
  EXPECT_EQ(make_model(small_options(), 0, 2, 1)->kind(), "sasrec");
  // Weights are a function of the seed only.
  EXPECT_EQ(Sasrec(small_options(), 5, 2, 1).parameters().values(), p.values());
  EXPECT_NE(Sasrec(small_options(), 0, 2, 2).parameters().values(), p.values());

  // The other models do not rank.
  ModelOptions dlrm;
  dlrm.embedding_dim = kDim;
  dlrm.bottom_mlp = "8";
  auto other = make_model(dlrm, 2, 2, 1);
  EXPECT_FALSE(other->ranks_items());
  std::vector<float> scores;
  Fixture f = training_fixture(kLengths, 3);
  expect_error_naming([&] { other->score_candidates(f.batch, f.row_ptrs(), scores); },
                      {"model.kind dlrm does not rank items"});
}

TEST(Sasrec, GradientsMatchFiniteDifferences) {
  Fixture f = training_fixture(kLengths, 7);
  Sasrec model(small_options(), 0, 2, 6);
  DenseParameters& p = model.parameters();
  perturb_biases_and_gains(p);
  const float scale = 0.1f;
  const double loss = model.forward_backward(f.batch, f.row_ptrs(), f.grad_ptrs(), scale);
  EXPECT_GT(loss, 0.0);
  const std::vector<float> dense_grads = p.grads();
  const auto row_grads = f.grads;

  Fixture scratch = f;
  const auto objective = [&] {
    return scale * model.forward_backward(f.batch, f.row_ptrs(), scratch.grad_ptrs(), scale);
  };
  // Every dense weight but most positions: those past the longest history (33) have no
  // gradient, checked exactly below.
  const ParameterSlice& position = p.slice("position");
  for (size_t i = 0; i < p.size(); ++i) {
    const bool in_position = i >= position.offset && i < position.offset + position.size();
    if (in_position && (i - position.offset) % 5 != 0) continue;
    expect_gradient_fine(dense_grads[i], &p.values()[i], objective, 1e-4, 1e-2, "dense", i);
  }
  for (size_t i = 33 * kDim; i < position.size(); ++i) EXPECT_EQ(dense_grads[position.offset + i], 0.0f) << i;
  // Attention is in the graph: the keys' weights have a gradient.
  const ParameterSlice& key = p.slice("block.0.key.weight");
  double max_key_grad = 0.0;
  for (size_t i = 0; i < key.size(); ++i)
    max_key_grad = std::max(max_key_grad, std::fabs(double(dense_grads[key.offset + i])));
  EXPECT_GT(max_key_grad, 1e-4);
  for (size_t t = 0; t < f.rows.size(); ++t) {
    double max_grad = 0.0;
    for (size_t i = 0; i < f.rows[t].size(); ++i) {
      max_grad = std::max(max_grad, std::fabs(double(row_grads[t][i])));
      expect_gradient_fine(row_grads[t][i], &f.rows[t][i], objective, 1e-4, 1e-2, "row", t * 1000 + i);
    }
    EXPECT_GT(max_grad, 1e-3) << "table " << t;
  }
}

// Changing history item j must leave the user states at positions < j unchanged.
TEST(Sasrec, ALaterHistoryItemDoesNotChangeEarlierPositions) {
  const int L = 33;
  Fixture f = readout_fixture(L, 13);
  Sasrec model(small_options(), 0, 2, 4);
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
TEST(Sasrec, TheMostRecentItemHasPositionZero) {
  const int L = 7;
  Fixture f = readout_fixture(L, 15);
  Sasrec model(small_options(), 0, 2, 4);
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
TEST(Sasrec, ScoringReadsTheLastTrainingPosition) {
  Sasrec model(small_options(), 0, 2, 8);
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

TEST(Sasrec, ForwardBackwardIsBitwiseRepeatable) {
  Fixture f = training_fixture(kLengths, 11);
  Sasrec model(small_options(), 0, 2, 9);
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
}

// A sample's loss and scores are functions of its own bags only.
TEST(Sasrec, ASampleDoesNotDependOnTheRestOfTheBatch) {
  Fixture f = training_fixture(kLengths, 21);
  Sasrec model(small_options(), 0, 2, 3);
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

TEST(Sasrec, BatchWithoutHistoryHasNoLossAndNoGradient) {
  Fixture f = training_fixture({0, 0}, 5);
  Sasrec model(small_options(), 0, 2, 3);
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

TEST(Sasrec, OptionsAndBatchesAreChecked) {
  ModelOptions o = small_options();
  o.sasrec_heads = 3;
  expect_error_naming([&] { Sasrec(o, 0, 2, 1); }, {"model.sasrec_heads", "model.embedding_dim"});
  o.sasrec_heads = 0;
  expect_error_naming([&] { Sasrec(o, 0, 2, 1); }, {"model.sasrec_heads"});
  o = small_options();
  o.sasrec_blocks = 0;
  expect_error_naming([&] { Sasrec(o, 0, 2, 1); }, {"model.sasrec_blocks"});
  o = small_options();
  o.sasrec_max_len = 0;
  expect_error_naming([&] { Sasrec(o, 0, 2, 1); }, {"model.sasrec_max_len"});
  expect_error_naming([&] { Sasrec(small_options(), 0, 3, 1); }, {"2 tables"});
  expect_error_naming([&] { make_model(small_options(), 0, 1, 1); }, {"2 tables"});

  Sasrec model(small_options(), 0, 2, 1);
  // A history longer than model.sasrec_max_len (40), in training and in scoring.
  Fixture longer = training_fixture({3, 41}, 2);
  std::vector<float> scores;
  expect_error_naming([&] { model.forward_backward(longer.batch, longer.row_ptrs(), longer.grad_ptrs(), 1.0f); },
                      {"model.sasrec_max_len", "data.max_seq_len"});
  expect_error_naming([&] { model.score_candidates(longer.batch, longer.row_ptrs(), scores); },
                      {"model.sasrec_max_len", "data.max_seq_len"});
  Fixture longest = training_fixture({3, 40}, 2);
  EXPECT_NO_THROW(model.forward_backward(longest.batch, longest.row_ptrs(), longest.grad_ptrs(), 1.0f));

  // A training candidates bag that is not 2 L_b long.
  Fixture f = training_fixture(kLengths, 2);
  Fixture wrong = f;
  wrong.batch.tables[1] = make_bags({{1, 2, 3, 4}, {}, {}, {}, {}}, 14);
  fill_rows(wrong, 2);
  expect_error_naming([&] { model.forward_backward(wrong.batch, wrong.row_ptrs(), wrong.grad_ptrs(), 1.0f); },
                      {"training sample 2", "2 * 33"});
  // ... is fine for scoring, but every scored sample needs a candidate to predict.
  EXPECT_NO_THROW(model.score_candidates(wrong.batch, wrong.row_ptrs(), scores));
  std::vector<float> probs(5);
  expect_error_naming([&] { model.predict(wrong.batch, wrong.row_ptrs(), probs.data()); }, {"sample 1"});

  // A batch of the wrong number of tables.
  Fixture three = f;
  three.batch.tables.push_back(f.batch.tables[1]);
  three.rows.push_back(f.rows[1]);
  three.grads.push_back(f.grads[1]);
  expect_error_naming([&] { model.forward_backward(three.batch, three.row_ptrs(), three.grad_ptrs(), 1.0f); },
                      {"2 tables"});
}
