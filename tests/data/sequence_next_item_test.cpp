// Next-item samples: one per user, histories that end before their targets, positives
// that are the next events, negatives the user never had, evaluation on the held-out
// events only, max_seq_len, random access, options checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "common/error.hpp"
#include "data/sequence_next_item.hpp"
#include "data/synthetic_sequences.hpp"
#include "data_test_util.hpp"

namespace strata::data {
namespace {

// Users with 1, 2, 3, 4, 7 and 12 events; item u * 100 + t, plus filler items 900+
// that nobody had, so negatives have somewhere to come from.
std::shared_ptr<const SequenceCorpus> small_corpus() {
  SequenceCorpus c;
  const std::vector<int64_t> lengths = {1, 2, 3, 4, 7, 12, 30};
  for (size_t u = 0; u < lengths.size(); ++u) {
    c.user_keys.push_back(1000 + u);
    for (int64_t t = 0; t < lengths[u]; ++t) c.items.push_back(u == 6 ? uint64_t(900 + t) : uint64_t(u * 100 + size_t(t)));
    c.offsets.push_back(int64_t(c.items.size()));
  }
  return std::make_shared<const SequenceCorpus>(std::move(c));
}

Batch make(const NextItemSamples& samples, Stream stream, int64_t first, int32_t count) {
  return testing::make_batch(samples, stream, first, count);
}

using testing::bag_keys;
std::vector<uint64_t> bag(const Batch& batch, int table, int b) { return bag_keys(batch, table, b); }

std::set<uint64_t> items_of_user(const SequenceCorpus& c, uint64_t u) {
  return {c.items.begin() + c.offsets[u], c.items.begin() + c.offsets[u + 1]};
}

TEST(NextItemSamples, EveryTrainingUserOnceWithTheNextItemAtEachPosition) {
  const auto corpus = small_corpus();
  const NextItemSamples samples(corpus, {});
  // Train parts 1, 2, 1, 2, 5, 10, 28 events: users 1, 3, 4, 5, 6 have something to predict.
  ASSERT_EQ(samples.size(Stream::kTrain), 5);
  const Batch batch = make(samples, Stream::kTrain, 0, 5);
  ASSERT_EQ(batch.size, 5);
  std::set<int64_t> users;
  for (int b = 0; b < batch.size; ++b) {
    const std::vector<uint64_t> history = bag(batch, kNextItemHistoryTable, b);
    const std::vector<uint64_t> candidates = bag(batch, kNextItemCandidateTable, b);
    ASSERT_FALSE(history.empty());
    ASSERT_EQ(candidates.size(), 2 * history.size());
    const int64_t u = int64_t(history[0] >= 900 ? 6 : history[0] / 100);
    EXPECT_TRUE(users.insert(u).second);
    const int64_t n = corpus->length(u);
    const int64_t train = n >= 3 ? n - 2 : n;
    EXPECT_EQ(int64_t(history.size()), train - 1);
    const std::set<uint64_t> seen = items_of_user(*corpus, uint64_t(u));
    for (size_t i = 0; i < history.size(); ++i) {
      EXPECT_EQ(history[i], corpus->items[size_t(corpus->offsets[size_t(u)] + int64_t(i))]);
      EXPECT_EQ(candidates[2 * i], corpus->items[size_t(corpus->offsets[size_t(u)] + int64_t(i) + 1)]);
      EXPECT_EQ(seen.count(candidates[2 * i + 1]), 0u) << "a negative the user had";
    }
    EXPECT_EQ(batch.labels[size_t(b)], 1.0f);
  }
  EXPECT_EQ(users, (std::set<int64_t>{1, 3, 4, 5, 6}));
}

TEST(NextItemSamples, EvaluationRanksTheHeldOutItemAmongUnseenOnes) {
  const auto corpus = small_corpus();
  for (const bool test : {false, true}) {
    NextItemOptions options;
    options.eval_on_test = test;
    options.eval_negatives = 5;
    const NextItemSamples samples(corpus, options);
    ASSERT_EQ(samples.size(Stream::kEval), 5);  // users with >= 3 events: 2, 3, 4, 5, 6
    const Batch batch = make(samples, Stream::kEval, 0, 5);
    for (int b = 0; b < batch.size; ++b) {
      const std::vector<uint64_t> history = bag(batch, kNextItemHistoryTable, b);
      const std::vector<uint64_t> candidates = bag(batch, kNextItemCandidateTable, b);
      const uint64_t u = history[0] >= 900 ? 6 : history[0] / 100;
      const int64_t n = corpus->length(int64_t(u));
      const int64_t target = corpus->offsets[u] + n - (test ? 1 : 2);
      ASSERT_EQ(candidates.size(), 6u);
      EXPECT_EQ(candidates[0], corpus->items[size_t(target)]);
      EXPECT_EQ(int64_t(history.size()), target - corpus->offsets[u]);
      const std::set<uint64_t> seen = items_of_user(*corpus, u);
      for (size_t k = 1; k < candidates.size(); ++k) EXPECT_EQ(seen.count(candidates[k]), 0u);
    }
  }
}

TEST(NextItemSamples, MaxHistoryKeepsTheMostRecentPositions) {
  NextItemOptions options;
  options.max_history = 4;
  const auto corpus = small_corpus();
  const NextItemSamples samples(corpus, options);
  const Batch batch = make(samples, Stream::kTrain, 0, int32_t(samples.size(Stream::kTrain)));
  for (int b = 0; b < batch.size; ++b) {
    const std::vector<uint64_t> history = bag(batch, kNextItemHistoryTable, b);
    const std::vector<uint64_t> candidates = bag(batch, kNextItemCandidateTable, b);
    EXPECT_LE(history.size(), 4u);
    ASSERT_EQ(candidates.size(), 2 * history.size());
    // The last position's positive is the last train event.
    const uint64_t u = history[0] >= 900 ? 6 : history[0] / 100;
    const int64_t n = corpus->length(int64_t(u));
    EXPECT_EQ(candidates[candidates.size() - 2], corpus->items[size_t(corpus->offsets[u] + (n >= 3 ? n - 2 : n) - 1)]);
  }
}

TEST(NextItemSamples, AnyRangeEqualsOnePassAndTheSeedOnlyReorders) {
  SyntheticSequenceOptions synthetic;
  synthetic.num_users = 80;
  synthetic.num_items = 2000;
  const auto corpus = std::make_shared<const SequenceCorpus>(SyntheticSequences(synthetic).corpus({0, 80}));
  const NextItemSamples samples(corpus, {});
  const int32_t n = int32_t(samples.size(Stream::kTrain));
  ASSERT_GT(n, 40);
  const Batch whole = make(samples, Stream::kTrain, 0, n);
  for (const auto& [first, count] : std::vector<std::pair<int64_t, int32_t>>{{0, 1}, {5, 9}, {n - 3, 3}}) {
    const Batch part = make(samples, Stream::kTrain, first, count);
    for (int b = 0; b < count; ++b) {
      for (int t = 0; t < kNextItemTables; ++t) EXPECT_EQ(bag(part, t, b), bag(whole, t, int(first + b)));
    }
  }
  EXPECT_THROW(make(samples, Stream::kTrain, n - 1, 2), Error);
  NextItemOptions other;
  other.seed = 99;
  const Batch reordered = make(NextItemSamples(corpus, other), Stream::kTrain, 0, n);
  std::multiset<uint64_t> a, b;
  for (int i = 0; i < n; ++i) {
    a.insert(bag(whole, kNextItemHistoryTable, i).at(0));
    b.insert(bag(reordered, kNextItemHistoryTable, i).at(0));
  }
  EXPECT_EQ(a, b) << "the same users";
}

TEST(NextItemSamples, EachEpochHasItsOwnOrderAndFreshNegatives) {
  SyntheticSequenceOptions synthetic;
  synthetic.num_users = 80;
  synthetic.num_items = 2000;
  const auto corpus = std::make_shared<const SequenceCorpus>(SyntheticSequences(synthetic).corpus({0, 80}));
  const NextItemSamples samples(corpus, {});
  const int32_t n = int32_t(samples.size(Stream::kTrain));
  auto epoch_batch = [&](Stream stream, int64_t epoch) {
    Batch batch;
    batch.reset(samples.num_dense(), samples.num_tables());
    samples.generate(stream, 0, stream == Stream::kTrain ? n : int32_t(samples.size(stream)), batch, epoch);
    return batch;
  };
  const Batch first = make(samples, Stream::kTrain, 0, n);
  const Batch zero = epoch_batch(Stream::kTrain, 0), one = epoch_batch(Stream::kTrain, 1);
  // Per user (its first history item names it): the same history and positives,
  // other negatives; and the users come in another order.
  std::map<uint64_t, std::vector<uint64_t>> negatives0, negatives1;
  int moved = 0;
  for (int i = 0; i < n; ++i) {
    for (int t = 0; t < kNextItemTables; ++t) EXPECT_EQ(bag(zero, t, i), bag(first, t, i)) << "epoch 0 as before";
    const std::vector<uint64_t> h0 = bag(zero, kNextItemHistoryTable, i), h1 = bag(one, kNextItemHistoryTable, i);
    moved += h0 != h1;
    const std::vector<uint64_t> c0 = bag(zero, kNextItemCandidateTable, i), c1 = bag(one, kNextItemCandidateTable, i);
    for (size_t k = 1; k < c0.size(); k += 2) negatives0[h0.at(0)].push_back(c0[k]);
    for (size_t k = 1; k < c1.size(); k += 2) negatives1[h1.at(0)].push_back(c1[k]);
  }
  EXPECT_GT(moved, n / 2) << "epoch 1 visits the users in its own order";
  ASSERT_EQ(negatives0.size(), negatives1.size());
  int same = 0, total = 0;
  for (const auto& [user, negs] : negatives0) {
    const std::vector<uint64_t>& other = negatives1.at(user);
    ASSERT_EQ(negs.size(), other.size());
    for (size_t k = 0; k < negs.size(); ++k) same += negs[k] == other[k], ++total;
  }
  EXPECT_LT(same, total / 10) << "fresh negatives in epoch 1";
  // Evaluation does not change with the epoch.
  const Batch eval0 = epoch_batch(Stream::kEval, 0), eval3 = epoch_batch(Stream::kEval, 3);
  for (int i = 0; i < eval0.size; ++i) {
    EXPECT_EQ(bag(eval0, kNextItemCandidateTable, i), bag(eval3, kNextItemCandidateTable, i));
  }
}

TEST(NextItemSamples, OptionsAreChecked) {
  NextItemOptions options;
  options.eval_negatives = 0;
  EXPECT_THROW(NextItemSamples(small_corpus(), options), Error);
  options = {};
  options.max_history = -1;
  EXPECT_THROW(NextItemSamples(small_corpus(), options), Error);
  EXPECT_THROW(NextItemSamples(std::make_shared<const SequenceCorpus>(), NextItemOptions{}), Error);
}

}  // namespace
}  // namespace strata::data
