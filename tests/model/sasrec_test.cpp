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



ModelOptions small_options();
std::unique_ptr<Model> make_sasrec(uint64_t seed);

ModelOptions small_options() {
  ModelOptions o;
  o.kind = "sasrec";
  o.embedding_dim = kDim;
  o.sasrec_heads = 2;
  o.sasrec_blocks = 2;
  o.sasrec_max_len = 40;
  return o;
}

std::unique_ptr<Model> make_sasrec(uint64_t seed) { return std::make_unique<Sasrec>(small_options(), 0, 2, seed); }

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
  const AnalyticGradients g = analytic_gradients(model, f, 0.1f);
  EXPECT_GT(g.loss, 0.0);
  expect_next_item_gradients(model, f, g, 33);  // the longest history of kLengths
  // Attention is in the graph: the keys' weights have a gradient.
  EXPECT_GT(max_abs_grad(g, p.slice("block.0.key.weight")), 1e-4);
}

TEST(Sasrec, ALaterHistoryItemDoesNotChangeEarlierPositions) { expect_causal(make_sasrec); }

TEST(Sasrec, TheMostRecentItemHasPositionZero) { expect_latest_item_at_position_zero(make_sasrec); }

TEST(Sasrec, ScoringReadsTheLastTrainingPosition) { expect_scoring_reads_last_position(make_sasrec); }

TEST(Sasrec, ForwardBackwardIsBitwiseRepeatable) { expect_bitwise_repeatable(make_sasrec); }

TEST(Sasrec, ASampleDoesNotDependOnTheRestOfTheBatch) { expect_batch_independence(make_sasrec); }

TEST(Sasrec, BatchWithoutHistoryHasNoLossAndNoGradient) { expect_no_history_no_gradient(make_sasrec); }

TEST(Sasrec, TiedItemRowsSumTheirHistoryAndCandidateGradients) { expect_tied_rows_sum_both_parts(make_sasrec); }

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
