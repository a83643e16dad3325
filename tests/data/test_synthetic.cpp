// SyntheticDataset: a pure function of (seed, stream, index); shapes from the
// options; Zipf-skewed keys; a teacher with a meaningful AUC and click rate.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "common/error.hpp"
#include "data/feature_hash.hpp"
#include "data/synthetic.hpp"
#include "data_test_util.hpp"

namespace strata::data {
namespace {

using testing::Drained;

Drained generate(const SyntheticDataset& ds, Stream stream, int64_t first, int32_t count) {
  Batch batch;
  batch.reset(ds.num_dense(), ds.num_tables());
  ds.generate(stream, first, count, batch);
  EXPECT_EQ(batch.size, count);
  EXPECT_EQ(batch.first_sample, first);
  Drained all;
  testing::append(all, batch);
  return all;
}

void expect_equal(const Drained& a, const Drained& b) {
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.dense, b.dense);
  EXPECT_EQ(a.keys, b.keys);
  EXPECT_EQ(a.lengths, b.lengths);
}

TEST(Synthetic, PureFunctionOfSeedStreamAndIndex) {
  DataOptions options;
  options.hotness = "2";
  const SyntheticDataset a(options), b(options);
  const Drained whole = generate(a, Stream::kTrain, 0, 100);
  expect_equal(whole, generate(b, Stream::kTrain, 0, 100));  // same range twice

  Batch split;  // [0, 50) then [50, 100) appended to one batch
  split.reset(a.num_dense(), a.num_tables());
  a.generate(Stream::kTrain, 0, 50, split);
  a.generate(Stream::kTrain, 50, 50, split);
  EXPECT_EQ(split.first_sample, 0);
  Drained joined;
  testing::append(joined, split);
  expect_equal(whole, joined);

  const Drained middle = generate(a, Stream::kTrain, 37, 20);  // any range, any order
  for (int i = 0; i < 20; ++i) EXPECT_EQ(middle.labels[size_t(i)], whole.labels[size_t(37 + i)]);
  for (size_t t = 0; t < 26; ++t) {
    EXPECT_TRUE(std::equal(middle.keys[t].begin(), middle.keys[t].end(), whole.keys[t].begin() + 2 * 37));
  }
  EXPECT_EQ(a.teacher_probability(Stream::kTrain, 42), b.teacher_probability(Stream::kTrain, 42));
}

TEST(Synthetic, StreamsAndSeedsAreIndependent) {
  DataOptions options;
  const SyntheticDataset ds(options);
  const Drained train = generate(ds, Stream::kTrain, 0, 500);
  const Drained eval = generate(ds, Stream::kEval, 0, 500);
  options.data_seed += 1;
  const Drained other_seed = generate(SyntheticDataset(options), Stream::kTrain, 0, 500);
  for (const Drained* other : {&eval, &other_seed}) {
    int same_dense = 0;
    for (size_t i = 0; i < train.dense.size(); ++i) same_dense += train.dense[i] == other->dense[i];
    EXPECT_LT(same_dense, int(train.dense.size()) / 3);  // small counts do coincide sometimes
    EXPECT_NE(train.keys, other->keys);
    // Popular keys repeat; the sample-by-sample agreement stays at chance level.
    int same_key = 0;
    for (size_t i = 0; i < 500; ++i) same_key += train.keys[3][i] == other->keys[3][i];
    EXPECT_LT(same_key, 50);
  }
}

TEST(Synthetic, ShapesFollowTheOptions) {
  DataOptions options;
  options.num_dense = 3;
  options.num_tables = 4;
  options.vocab_sizes = "1,10,1000,1000000000";
  options.hotness = "1,3,2,5";
  const SyntheticDataset ds(options);
  EXPECT_EQ(ds.num_dense(), 3);
  EXPECT_EQ(ds.num_tables(), 4);
  EXPECT_EQ(ds.size(Stream::kTrain), options.synthetic_train_samples);
  EXPECT_EQ(ds.size(Stream::kEval), options.synthetic_eval_samples);
  const Drained got = generate(ds, Stream::kTrain, 1000, 300);
  EXPECT_EQ(got.dense.size(), 900u);
  const int hot[] = {1, 3, 2, 5};
  for (size_t t = 0; t < 4; ++t) {
    EXPECT_EQ(got.lengths[t], std::vector<int32_t>(300, hot[t]));
    EXPECT_EQ(got.keys[t].size(), size_t(300 * hot[t]));
  }
  // Keys are feature_key(table, rank) with rank < vocab size.
  EXPECT_EQ(std::set<uint64_t>(got.keys[0].begin(), got.keys[0].end()),
            std::set<uint64_t>{feature_key(0, uint64_t(0))});
  std::set<uint64_t> allowed;
  for (uint64_t v = 0; v < 10; ++v) allowed.insert(feature_key(1, v));
  for (uint64_t k : got.keys[1]) EXPECT_TRUE(allowed.count(k));
  for (float d : got.dense) EXPECT_GE(d, 0.0f);
  for (float y : got.labels) EXPECT_TRUE(y == 0.0f || y == 1.0f);
}

TEST(Synthetic, KeysAreZipfSkewed) {
  DataOptions options;  // vocab 1e5, s = 1.05
  options.num_tables = 2;
  const SyntheticDataset ds(options);
  Batch batch;
  std::map<uint64_t, int64_t> counts;
  for (int64_t first = 0; first < 400000; first += 4096) {
    batch.reset(ds.num_dense(), ds.num_tables());
    ds.generate(Stream::kTrain, first, 4096, batch);
    for (uint64_t k : batch.tables[1].keys) ++counts[k];
  }
  const double top = double(counts[feature_key(1, uint64_t(0))]);
  const double second = double(counts[feature_key(1, uint64_t(1))]);
  EXPECT_NEAR(top / second, std::pow(2.0, 1.05), 0.08);
  EXPECT_GT(counts.size(), 20000u);  // the tail is there too
}

TEST(Synthetic, TeacherIsMeaningful) {
  DataOptions options;  // the defaults
  const SyntheticDataset ds(options);
  const double auc = ds.teacher_auc(65536);
  EXPECT_GT(auc, 0.75);
  EXPECT_LT(auc, 0.88);
  Batch batch;
  batch.reset(ds.num_dense(), ds.num_tables());
  ds.generate(Stream::kEval, 0, 65536, batch);
  double clicks = 0, probability = 0;
  for (int i = 0; i < batch.size; ++i) clicks += batch.labels[size_t(i)];
  for (int i = 0; i < 65536; i += 16) probability += ds.teacher_probability(Stream::kEval, i);
  clicks /= 65536;
  probability /= 4096;
  EXPECT_GT(clicks, 0.2);
  EXPECT_LT(clicks, 0.5);
  EXPECT_NEAR(probability, clicks, 0.02);
  std::printf("teacher AUC %.4f, click rate %.4f (defaults, 65536 eval samples)\n", auc, clicks);

  options.teacher_scale = 0.0;  // no signal: every probability is the same
  const SyntheticDataset flat(options);
  EXPECT_DOUBLE_EQ(flat.teacher_auc(4096), 0.5);
  options.teacher_scale = 2.0;  // a stronger teacher separates better
  EXPECT_GT(SyntheticDataset(options).teacher_auc(16384), auc);
  options.teacher_scale = 1.0;
  options.hotness = "4";  // multi-hot bags: the teacher averages, still meaningful
  const double multi = SyntheticDataset(options).teacher_auc(16384);
  EXPECT_GT(multi, 0.7);
}

TEST(Synthetic, OptionErrorsNameTheKey) {
  auto error_of = [](const DataOptions& options) -> std::string {
    try {
      SyntheticDataset ds(options);
    } catch (const Error& e) {
      return e.what();
    }
    return "<no error>";
  };
  DataOptions options;
  options.vocab_sizes = "10,20";
  EXPECT_NE(error_of(options).find("data.vocab_sizes"), std::string::npos);
  options.vocab_sizes = "10,x";
  EXPECT_NE(error_of(options).find("data.vocab_sizes"), std::string::npos);
  options.vocab_sizes = "0";
  EXPECT_NE(error_of(options).find("data.vocab_sizes"), std::string::npos);
  options = DataOptions();
  options.hotness = "0";
  EXPECT_NE(error_of(options).find("data.hotness"), std::string::npos);
  options = DataOptions();
  options.zipf_exponent = -1;
  EXPECT_NE(error_of(options).find("data.zipf_exponent"), std::string::npos);
  options = DataOptions();
  options.num_tables = 0;
  EXPECT_NE(error_of(options).find("data.num_tables"), std::string::npos);

  const SyntheticDataset ds{DataOptions()};
  Batch batch;
  batch.reset(ds.num_dense(), ds.num_tables());
  EXPECT_THROW(ds.generate(Stream::kEval, ds.size(Stream::kEval) - 10, 11, batch), Error);
  EXPECT_THROW(ds.generate(Stream::kTrain, -1, 1, batch), Error);
}

TEST(Synthetic, ReaderShardsCoverTheStream) {
  DataOptions options;
  options.synthetic_eval_samples = 1000;
  const SyntheticDataset ds(options);
  const Drained whole = generate(ds, Stream::kEval, 0, 1000);
  for (int n = 1; n <= 7; ++n) {
    Drained joined;
    for (int s = 0; s < n; ++s) {
      auto reader = open_synthetic_reader(ds, Stream::kEval, s, n);
      Batch batch;
      while (true) {
        batch.reset(ds.num_dense(), ds.num_tables());
        if (reader->read(64, batch) == 0) break;
        testing::append(joined, batch);
      }
    }
    expect_equal(whole, joined);
  }
  auto reader = open_synthetic_reader(ds, Stream::kEval, 1, 2);
  Batch batch;
  batch.reset(ds.num_dense(), ds.num_tables());
  reader->read(10, batch);
  const ReaderPosition at = reader->position();
  EXPECT_EQ(at.byte_offset, 510);
  auto again = open_synthetic_reader(ds, Stream::kEval, 1, 2);
  again->seek(at);
  batch.reset(ds.num_dense(), ds.num_tables());
  again->read(5, batch);
  EXPECT_EQ(batch.first_sample, 510);
  EXPECT_THROW(again->seek({3, 0}), Error);
}

// The history table: one more table, target-last bags of 2..L+1 keys in the
// history table's own key space, the same samples whatever the ranges, and
// labels that depend on the history (the teacher beats the one without it).
TEST(Synthetic, HistoryTableIsJaggedDeterministicAndInformative) {
  DataOptions options;
  options.num_tables = 4;
  options.synthetic_history_length = 30;
  options.synthetic_history_vocab = 5000;
  const SyntheticDataset a(options);
  ASSERT_EQ(a.num_tables(), 5);
  const Drained whole = generate(a, Stream::kTrain, 0, 400);
  std::set<int32_t> lengths;
  for (int32_t n : whole.lengths[4]) {
    EXPECT_GE(n, 2);
    EXPECT_LE(n, 31);
    lengths.insert(n);
  }
  EXPECT_GT(lengths.size(), 20u);  // jagged, not padded to L
  const Drained middle = generate(a, Stream::kTrain, 100, 50);
  size_t before = 0;
  for (int i = 0; i < 100; ++i) before += size_t(whole.lengths[4][size_t(i)]);
  EXPECT_TRUE(std::equal(middle.keys[4].begin(), middle.keys[4].end(), whole.keys[4].begin() + long(before)));
  std::set<uint64_t> items(whole.keys[4].begin(), whole.keys[4].end());
  EXPECT_LE(items.size(), 5000u);
  EXPECT_GT(items.size(), 100u);

  DataOptions plain = options;
  plain.synthetic_history_length = 0;
  EXPECT_EQ(SyntheticDataset(plain).num_tables(), 4);
  EXPECT_GT(a.teacher_auc(20000), SyntheticDataset(plain).teacher_auc(20000) + 0.03);

  options.synthetic_history_length = -1;
  EXPECT_THROW(SyntheticDataset{options}, Error);
  options.synthetic_history_length = 5;
  options.synthetic_history_vocab = 10;
  EXPECT_THROW(SyntheticDataset{options}, Error);
}

// data.synthetic_tasks: task 0 is the single-task label bit for bit; the other tasks
// have their own teachers, their own click rates, and labels correlated with task 0's.
TEST(Synthetic, MultiTaskLabels) {
  DataOptions one;
  one.synthetic_eval_samples = 20000;
  DataOptions three = one;
  three.synthetic_tasks = 3;
  const SyntheticDataset single(one), multi(three);
  EXPECT_EQ(single.num_tasks(), 1);
  EXPECT_EQ(multi.num_tasks(), 3);
  Batch a, b;
  a.reset(single.num_dense(), single.num_tables());
  b.reset(multi.num_dense(), multi.num_tables());
  single.generate(Stream::kEval, 0, 20000, a);
  multi.generate(Stream::kEval, 0, 20000, b);
  ASSERT_EQ(b.num_tasks, 3);
  ASSERT_EQ(b.labels.size(), 3u * 20000u);
  EXPECT_EQ(a.dense, b.dense);
  for (size_t t = 0; t < a.tables.size(); ++t) EXPECT_EQ(a.tables[t].keys, b.tables[t].keys);
  double rate[3] = {}, both = 0;
  for (int i = 0; i < 20000; ++i) {
    ASSERT_EQ(a.labels[size_t(i)], b.labels[size_t(i) * 3]) << "task 0 is the single-task label, sample " << i;
    for (int k = 0; k < 3; ++k) rate[k] += b.labels[size_t(i) * 3 + size_t(k)] / 20000.0;
    both += b.labels[size_t(i) * 3] * b.labels[size_t(i) * 3 + 1] / 20000.0;
  }
  EXPECT_NEAR(rate[1], 0.15, 0.02);
  EXPECT_NEAR(rate[2], 0.15, 0.02);
  EXPECT_GT(both, rate[0] * rate[1] * 1.2) << "tasks 0 and 1 are positively correlated";
  EXPECT_NE(std::vector<float>(b.labels.begin(), b.labels.begin() + 30), std::vector<float>(30, 0.0f));
  EXPECT_DOUBLE_EQ(multi.teacher_auc(20000, 0), single.teacher_auc(20000));
  for (int k = 1; k < 3; ++k) {
    const double auc = multi.teacher_auc(20000, k);
    EXPECT_GT(auc, 0.7) << k;
    EXPECT_LT(auc, 0.95) << k;
  }
  EXPECT_NE(multi.teacher_auc(20000, 1), multi.teacher_auc(20000, 2));
  // Pure: a range generated alone equals the same range inside a larger batch.
  Batch c;
  c.reset(multi.num_dense(), multi.num_tables());
  multi.generate(Stream::kEval, 100, 50, c);
  EXPECT_EQ(c.labels, std::vector<float>(b.labels.begin() + 300, b.labels.begin() + 450));
  three.synthetic_tasks = 17;
  try {
    SyntheticDataset bad(three);
    ADD_FAILURE() << "17 tasks accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data.synthetic_tasks"), std::string::npos);
  }
}

}  // namespace
}  // namespace strata::data
