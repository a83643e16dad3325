// SyntheticSequences: a pure function of (seed, user) whatever the shard; length laws
// and their bounds (up to 16384); popularity skew; drifting interest; a teacher whose
// probabilities sum to one and whose HR@10 is far above random.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>

#include "common/error.hpp"
#include "data/feature_hash.hpp"
#include "data/synthetic_sequences.hpp"

namespace strata::data {
namespace {

std::vector<uint64_t> items_of(const SequenceCorpus& corpus, int64_t u) {
  return {corpus.items.begin() + corpus.offsets[size_t(u)], corpus.items.begin() + corpus.offsets[size_t(u) + 1]};
}

SyntheticSequenceOptions small() {
  SyntheticSequenceOptions options;
  options.num_users = 300;
  options.num_items = 5000;
  options.min_length = 3;
  options.max_length = 60;
  return options;
}

TEST(SyntheticSequences, SameUserSameSequenceOnAnyShard) {
  const SyntheticSequences a(small()), b(small());
  const SequenceCorpus whole = a.corpus({0, a.num_users()});
  EXPECT_EQ(whole.first_user, 0);
  for (int shards : {3, 7}) {
    for (int s = 0; s < shards; ++s) {
      const UserRange range = shard_users(b.num_users(), s, shards);
      const SequenceCorpus part = b.corpus(range);
      ASSERT_EQ(part.num_users(), range.size());
      EXPECT_EQ(part.first_user, range.begin);
      for (int64_t u = 0; u < part.num_users(); ++u) {
        EXPECT_EQ(items_of(part, u), items_of(whole, range.begin + u)) << "user " << range.begin + u;
        EXPECT_EQ(part.user_keys[size_t(u)], whole.user_keys[size_t(range.begin + u)]);
      }
    }
  }
  // Keys live in the item table's key space; timestamps increase.
  std::vector<uint64_t> ids;
  std::vector<int64_t> times;
  a.generate(17, ids, times);
  ASSERT_EQ(int64_t(ids.size()), a.length(17));
  EXPECT_EQ(items_of(whole, 17)[0], feature_key(small().item_table, ids[0]));
  EXPECT_EQ(whole.user_keys[17], feature_key(small().user_table, uint64_t(17)));
  for (size_t t = 1; t < times.size(); ++t) EXPECT_LT(times[t - 1], times[t]);
  EXPECT_EQ(std::vector<int64_t>(whole.timestamps.begin() + whole.offsets[17],
                                 whole.timestamps.begin() + whole.offsets[18]),
            times);
  for (uint64_t id : ids) EXPECT_LT(id, small().num_items);

  SyntheticSequenceOptions other = small();
  other.seed = 7;
  std::vector<uint64_t> ids7;
  SyntheticSequences(other).generate(17, ids7, times);
  EXPECT_NE(ids7, ids);
  EXPECT_THROW(a.corpus({5, 301}), Error);
}

TEST(SyntheticSequences, LengthLawsStayInTheirBounds) {
  SyntheticSequenceOptions options = small();
  options.num_users = 2000;
  options.length_law = SequenceLengthLaw::kFixed;
  options.max_length = 16384;
  {
    const SyntheticSequences fixed(options);
    for (int64_t u = 0; u < 100; ++u) EXPECT_EQ(fixed.length(u), 16384);
    std::vector<uint64_t> ids;
    std::vector<int64_t> times;
    fixed.generate(3, ids, times);
    EXPECT_EQ(ids.size(), 16384u);
    EXPECT_EQ(times.size(), 16384u);
  }
  options.length_law = SequenceLengthLaw::kUniform;
  options.min_length = 3;
  options.max_length = 10;
  {
    const SyntheticSequences uniform(options);
    std::map<int64_t, int> counts;
    for (int64_t u = 0; u < options.num_users; ++u) ++counts[uniform.length(u)];
    EXPECT_EQ(counts.begin()->first, 3);
    EXPECT_EQ(counts.rbegin()->first, 10);
    EXPECT_EQ(counts.size(), 8u);
    for (const auto& [length, n] : counts) EXPECT_NEAR(n, 250, 75) << length;
  }
  options.length_law = SequenceLengthLaw::kZipf;
  options.min_length = 5;
  options.max_length = 16384;
  {
    const SyntheticSequences zipf(options);
    int64_t shortest = 1 << 30, longest = 0, at_min = 0, long_tail = 0;
    for (int64_t u = 0; u < options.num_users; ++u) {
      const int64_t n = zipf.length(u);
      shortest = std::min(shortest, n);
      longest = std::max(longest, n);
      at_min += n == 5;
      long_tail += n > 1000;
    }
    EXPECT_EQ(shortest, 5);
    EXPECT_LE(longest, 16384);
    EXPECT_GE(longest, 8192);  // the cap is reachable, not just allowed
    EXPECT_GT(at_min, options.num_users / 20);  // most mass at the short end
    EXPECT_GT(long_tail, options.num_users / 20);
  }
  options.min_length = 0;
  EXPECT_THROW(SyntheticSequences{options}, Error);
}

TEST(SyntheticSequences, PopularItemsDominate) {
  SyntheticSequenceOptions options = small();
  const SyntheticSequences data(options);
  const SequenceCorpus corpus = data.corpus({0, data.num_users()});
  std::map<uint64_t, int> counts;
  for (uint64_t key : corpus.items) ++counts[key];
  int head = 0;  // events on the 1% most popular ids
  std::vector<uint64_t> ids;
  std::vector<int64_t> times;
  int64_t events = 0;
  for (int64_t u = 0; u < data.num_users(); ++u) {
    data.generate(u, ids, times);
    for (uint64_t id : ids) head += id < options.num_items / 100;
    events += int64_t(ids.size());
  }
  EXPECT_GT(double(head) / double(events), 0.2);
  EXPECT_GT(counts.size(), 500u);  // and yet a long tail is seen
}

// Share of users whose most frequent cluster differs between the first and the last
// 100 events of a 2000-event sequence.
double moved_share(double drift) {
  SyntheticSequenceOptions options = small();
  options.length_law = SequenceLengthLaw::kFixed;
  options.max_length = 2000;
  options.drift = drift;
  const SyntheticSequences data(options);
  const uint64_t k = uint64_t(options.num_clusters);
  auto dominant = [&](const std::vector<uint64_t>& ids, size_t begin) {
    std::vector<int> counts(k, 0);
    for (size_t t = begin; t < begin + 100; ++t) ++counts[ids[t] % k];
    return std::max_element(counts.begin(), counts.end()) - counts.begin();
  };
  int moved = 0;
  const int users = 20;
  std::vector<uint64_t> ids;
  std::vector<int64_t> times;
  for (int64_t u = 0; u < users; ++u) {
    data.generate(u, ids, times);
    moved += dominant(ids, 0) != dominant(ids, ids.size() - 100);
  }
  return double(moved) / users;
}

TEST(SyntheticSequences, InterestDriftsOnlyWithDrift) {
  EXPECT_EQ(moved_share(0.0), 0.0);
  EXPECT_GE(moved_share(0.05), 0.7);
}

TEST(SyntheticSequences, TeacherProbabilitiesSumToOne) {
  SyntheticSequenceOptions options = small();
  options.num_items = 1000;
  options.num_clusters = 10;
  const SyntheticSequences data(options);
  for (uint64_t previous : {uint64_t(0), uint64_t(17), uint64_t(999), options.num_items /* none */}) {
    for (int cluster : {0, 3, 9}) {
      double total = 0.0;
      for (uint64_t j = 0; j < options.num_items; ++j) total += data.teacher_probability(previous, cluster, j);
      EXPECT_NEAR(total, 1.0, 1e-9) << previous << " " << cluster;
    }
  }
}

TEST(SyntheticSequences, TeacherHitRateIsFarAboveRandom) {
  SyntheticSequenceOptions options;
  options.num_users = 2000;
  options.max_length = 50;
  const SyntheticSequences data(options);
  constexpr int kNegatives = 100;
  const double hr = data.teacher_hit_rate(options.num_users, kNegatives, 10);
  const double random = 10.0 / (kNegatives + 1);
  std::printf("teacher HR@10 against %d negatives: %.4f (random %.4f)\n", kNegatives, hr, random);
  EXPECT_GT(hr, 5 * random);
  EXPECT_LE(hr, 1.0);
  EXPECT_EQ(hr, SyntheticSequences(options).teacher_hit_rate(options.num_users, kNegatives, 10));
  // Without any signal (pure popularity noise, uniform items) the teacher is random.
  options.follow_probability = 0.0;
  options.cluster_probability = 0.0;
  options.item_zipf_exponent = 0.0;
  EXPECT_NEAR(SyntheticSequences(options).teacher_hit_rate(options.num_users, kNegatives, 10), random, 0.01);
}

TEST(SyntheticSequences, CorpusFeedsSequenceBatches) {
  const SyntheticSequences data(small());
  const SequenceCorpus part = data.corpus(shard_users(data.num_users(), 1, 2));
  Batch batch;
  std::vector<int64_t> times;
  append_sequence_batch(part, SequenceSplit::kTrain, 0, 8, {}, batch, &times);
  EXPECT_EQ(batch.first_sample, 150);
  EXPECT_EQ(batch.tables.size(), 2u);
  EXPECT_EQ(times.size(), batch.tables[kHistoryTable].keys.size());
  for (int32_t b = 0; b < batch.size; ++b) {
    EXPECT_EQ(batch.tables[kHistoryTable].offsets[size_t(b) + 1] - batch.tables[kHistoryTable].offsets[size_t(b)],
              part.length(b) - 3);  // n - 2 train events, one fewer positions
    EXPECT_EQ(batch.labels[size_t(b)], 1.0f);
  }
}

}  // namespace
}  // namespace strata::data
