// Hstu: gradients of the whole model (dense weights incl. the relative-position bias
// tables and LN gains, history and candidate rows) against finite differences on a
// jagged batch with histories of 0, 1, 2, 7 and 33 items, repeated items within a
// history and keys in both tables; causality (a later history item leaves the earlier
// positions alone); the relative-position bias reaches exactly the positions that have
// its distance; training and scoring read the same user state; bitwise repeatability;
// independence of a sample from the rest of the batch; the option, deck and batch
// checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "config/deck.hpp"
#include "model/hstu.hpp"
#include "model/model.hpp"
#include "model_test_util.hpp"
#include "next_item_test_util.hpp"

using namespace strata::model;
using namespace strata::model::testing;
using strata::ModelOptions;
using strata::data::Batch;

namespace {


constexpr int kBuckets = 16;  // fewer than the longest history: the last bucket gathers distances 15..32

ModelOptions small_options() {
  ModelOptions o;
  o.kind = "hstu";
  o.embedding_dim = kDim;
  o.hstu_heads = 2;
  o.hstu_blocks = 2;
  o.hstu_max_len = 40;
  o.hstu_buckets = kBuckets;
  return o;
}

double max_abs(const std::vector<float>& v, size_t first, size_t count) {
  double m = 0.0;
  for (size_t i = first; i < first + count; ++i) m = std::max(m, std::fabs(double(v[i])));
  return m;
}


std::unique_ptr<Model> make_hstu(uint64_t seed) { return std::make_unique<Hstu>(small_options(), 0, 2, seed); }

}  // namespace

TEST(Hstu, ShapeAndParameterLayout) {
  Hstu model(small_options(), 0, 2, 1);
  EXPECT_EQ(model.kind(), "hstu");
  EXPECT_TRUE(model.ranks_items());
  EXPECT_EQ(model.shape().head_dim(), 4);
  EXPECT_EQ(model.embedding_dim(), kDim);
  EXPECT_EQ(model.num_tables(), 2);
  const DenseParameters& p = model.parameters();
  EXPECT_EQ(p.slices().front().name, "position");
  EXPECT_EQ(p.slice("position").shape, (std::vector<int64_t>{40, kDim}));
  EXPECT_EQ(p.slice("block.0.uvqk.weight").shape, (std::vector<int64_t>{4 * kDim, kDim}));
  EXPECT_EQ(p.slice("block.1.uvqk.bias").shape, (std::vector<int64_t>{4 * kDim}));
  EXPECT_EQ(p.slice("block.1.relative_bias").shape, (std::vector<int64_t>{kBuckets}));
  EXPECT_EQ(p.slice("block.0.output.weight").shape, (std::vector<int64_t>{kDim, kDim}));
  EXPECT_EQ(p.slice("block.0.input_ln.gain").shape, (std::vector<int64_t>{kDim}));
  EXPECT_EQ(p.slice("block.1.attention_ln.bias").shape, (std::vector<int64_t>{kDim}));
  EXPECT_EQ(p.slices().back().name, "final_ln.bias");
  EXPECT_EQ(p.values()[p.slice("final_ln.gain").offset + 3], 1.0f);
  // The bias tables start small and not all equal.
  const ParameterSlice& rab = p.slice("block.0.relative_bias");
  EXPECT_LT(max_abs(p.values(), rab.offset, rab.size()), 0.035);
  EXPECT_NE(p.values()[rab.offset], p.values()[rab.offset + 1]);
  EXPECT_EQ(make_model(small_options(), 0, 2, 1)->kind(), "hstu");
  EXPECT_EQ(make_model(small_options(), 0, 2, 1)->parameters().values(), p.values());
  // Weights are a function of the seed only.
  EXPECT_EQ(Hstu(small_options(), 5, 2, 1).parameters().values(), p.values());
  EXPECT_NE(Hstu(small_options(), 0, 2, 2).parameters().values(), p.values());
  EXPECT_NE(std::find(model_kinds().begin(), model_kinds().end(), "hstu"), model_kinds().end());
}

TEST(Hstu, GradientsMatchFiniteDifferences) {
  Fixture f = training_fixture(kLengths, 7);
  Hstu model(small_options(), 0, 2, 6);
  DenseParameters& p = model.parameters();
  perturb_biases_and_gains(p);
  const AnalyticGradients g = analytic_gradients(model, f, 0.1f);
  EXPECT_GT(g.loss, 0.0);
  expect_next_item_gradients(model, f, g, 33);  // the longest history of kLengths
  // Attention is in the graph: the keys' weights (the last quarter of uvqk) and every
  // bucket of both bias tables have a gradient (distances 0..32 reach all 16).
  for (int l = 0; l < 2; ++l) {
    const std::string block = "block." + std::to_string(l);
    const ParameterSlice& uvqk = p.slice(block + ".uvqk.weight");
    EXPECT_GT(max_abs(g.dense, uvqk.offset + 3 * kDim * kDim, kDim * kDim), 1e-4) << block;
    const ParameterSlice& rab = p.slice(block + ".relative_bias");
    for (size_t i = 0; i < rab.size(); ++i)
      EXPECT_GT(std::fabs(g.dense[rab.offset + i]), 1e-7) << block << " " << i;
  }
}

// One head and one layer too (heads and blocks are not just 2).
TEST(Hstu, GradientsMatchFiniteDifferencesWithOneHeadAndOneLayer) {
  ModelOptions o = small_options();
  o.hstu_heads = 1;
  o.hstu_blocks = 1;
  o.hstu_buckets = 64;  // more buckets than distances
  Fixture f = training_fixture({7, 1, 12}, 9);
  Hstu model(o, 0, 2, 2);
  DenseParameters& p = model.parameters();
  perturb_biases_and_gains(p);
  const AnalyticGradients g = analytic_gradients(model, f, 1.0f);
  // Every position of the 12-event history, each checked (the rest have no gradient).
  const ParameterSlice& position = p.slice("position");
  for (size_t i = 0; i < p.size(); ++i) {
    if (i >= position.offset + 12 * kDim && i < position.offset + position.size()) continue;
    expect_gradient_fine(g.dense[i], &p.values()[i], g.objective, 1e-4, 1e-2, "dense", i);
  }
  // Buckets past the longest distance (11) see no token pair.
  const ParameterSlice& rab = p.slice("block.0.relative_bias");
  for (size_t i = 12; i < rab.size(); ++i) EXPECT_EQ(g.dense[rab.offset + i], 0.0f) << i;
  for (size_t t = 0; t < f.rows.size(); ++t)
    for (size_t i = 0; i < f.rows[t].size(); ++i)
      expect_gradient_fine(g.rows[t][i], &f.rows[t][i], g.objective, 1e-4, 1e-2, "row", t * 1000 + i);
}

TEST(Hstu, ALaterHistoryItemDoesNotChangeEarlierPositions) { expect_causal(make_hstu); }

// Bucket k of the relative-position bias holds distance k (the last bucket every
// distance from kBuckets - 1 on): it moves exactly the positions i >= k, which have a
// key k or more events back.
TEST(Hstu, ARelativeBiasBucketMovesOnlyPositionsThatReachIt) {
  const int L = 33;
  Fixture f = readout_fixture(L, 19);
  Hstu model(small_options(), 0, 2, 5);
  perturb_biases_and_gains(model.parameters());
  model.forward_backward(f.batch, f.row_ptrs(), f.grad_ptrs(), 1.0f);
  DenseParameters& p = model.parameters();
  for (int bucket : {0, 3, kBuckets - 1}) {
    float* rab = p.values(p.slice("block.0.relative_bias").offset);
    const float saved = rab[bucket];
    rab[bucket] += 0.5f;
    Fixture changed = f;
    model.forward_backward(changed.batch, changed.row_ptrs(), changed.grad_ptrs(), 1.0f);
    rab[bucket] = saved;
    const std::vector<double> change = state_changes(f.grads[1], changed.grads[1]);
    for (int i = 0; i < L; ++i) {
      if (i < bucket)
        EXPECT_EQ(change[size_t(i)], 0.0) << "bucket " << bucket << " changed position " << i;
      else
        EXPECT_GT(change[size_t(i)], 1e-6) << "bucket " << bucket << " left position " << i << " alone";
    }
  }
}

TEST(Hstu, TheMostRecentItemHasPositionZero) { expect_latest_item_at_position_zero(make_hstu); }

TEST(Hstu, ScoringReadsTheLastTrainingPosition) { expect_scoring_reads_last_position(make_hstu); }

TEST(Hstu, ForwardBackwardIsBitwiseRepeatable) { expect_bitwise_repeatable(make_hstu); }

TEST(Hstu, ASampleDoesNotDependOnTheRestOfTheBatch) { expect_batch_independence(make_hstu); }

TEST(Hstu, BatchWithoutHistoryHasNoLossAndNoGradient) { expect_no_history_no_gradient(make_hstu); }

TEST(Hstu, TiedItemRowsSumTheirHistoryAndCandidateGradients) { expect_tied_rows_sum_both_parts(make_hstu); }

TEST(Hstu, OptionsAndBatchesAreChecked) {
  ModelOptions o = small_options();
  o.hstu_heads = 3;
  expect_error_naming([&] { Hstu(o, 0, 2, 1); }, {"model.hstu_heads", "model.embedding_dim"});
  o.hstu_heads = 0;
  expect_error_naming([&] { Hstu(o, 0, 2, 1); }, {"model.hstu_heads"});
  o = small_options();
  o.hstu_blocks = 0;
  expect_error_naming([&] { Hstu(o, 0, 2, 1); }, {"model.hstu_blocks"});
  o = small_options();
  o.hstu_max_len = 0;
  expect_error_naming([&] { Hstu(o, 0, 2, 1); }, {"model.hstu_max_len", "data.max_seq_len"});
  o = small_options();
  o.hstu_buckets = 0;
  expect_error_naming([&] { Hstu(o, 0, 2, 1); }, {"model.hstu_buckets"});
  o = small_options();
  o.embedding_dim = 0;
  expect_error_naming([&] { Hstu(o, 0, 2, 1); }, {"model.embedding_dim"});
  expect_error_naming([&] { Hstu(small_options(), 0, 3, 1); }, {"2 tables"});
  expect_error_naming([&] { make_model(small_options(), 0, 1, 1); }, {"model.kind = hstu", "2 tables"});

  Hstu model(small_options(), 0, 2, 1);
  // A history longer than model.hstu_max_len (40), in training and in scoring.
  Fixture longer = training_fixture({3, 41}, 2);
  std::vector<float> scores;
  expect_error_naming([&] { model.forward_backward(longer.batch, longer.row_ptrs(), longer.grad_ptrs(), 1.0f); },
                      {"model.hstu_max_len", "data.max_seq_len"});
  expect_error_naming([&] { model.score_candidates(longer.batch, longer.row_ptrs(), scores); },
                      {"model.hstu_max_len", "data.max_seq_len"});
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
  // An index past the unique keys.
  Fixture bad = f;
  bad.batch.tables[0].index[0] = 10;
  expect_error_naming([&] { model.forward_backward(bad.batch, bad.row_ptrs(), bad.grad_ptrs(), 1.0f); },
                      {"index out of range"});
}

// The deck keys reach ModelOptions, and hstu trains only on next-item samples.
TEST(Hstu, DeckKeys) {
  const std::vector<std::string> base = {"--data.source=synthetic_sequences", "--model.kind=hstu"};
  std::vector<std::string> args = base;
  args.insert(args.end(), {"--data.sequence_task=next_item", "--model.hstu_blocks=3", "--model.hstu_heads=2",
                           "--model.hstu_max_len=48", "--model.hstu_buckets=32"});
  const strata::RunOptions o = strata::parse_run_options(args);
  EXPECT_EQ(o.model.kind, "hstu");
  EXPECT_EQ(o.model.hstu_blocks, 3);
  EXPECT_EQ(o.model.hstu_heads, 2);
  EXPECT_EQ(o.model.hstu_max_len, 48);
  EXPECT_EQ(o.model.hstu_buckets, 32);
  const strata::RunOptions defaults = strata::parse_run_options({});
  EXPECT_EQ(defaults.model.hstu_blocks, 2);
  EXPECT_EQ(defaults.model.hstu_heads, 1);
  EXPECT_EQ(defaults.model.hstu_max_len, 200);
  EXPECT_EQ(defaults.model.hstu_buckets, 64);
  const std::string help = strata::deck_help();
  for (const char* key : {"model.hstu_blocks", "model.hstu_heads", "model.hstu_max_len", "model.hstu_buckets"})
    EXPECT_NE(help.find(key), std::string::npos) << key;
  expect_error_naming([&] { strata::parse_run_options(base); }, {"data.sequence_task", "next_item"});
  expect_error_naming([&] { strata::parse_run_options({"--model.kind=hstu"}); }, {"data.source = sequences"});
}
