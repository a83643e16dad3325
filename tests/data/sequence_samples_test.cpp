// Click-through samples cut from behaviour sequences: every training positive once
// per epoch, histories that end before their event (capped by max_seq_len), negatives
// beside their positive, evaluation on the held-out events only, random access equal
// to a sequential pass, and the deck's options checked.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "data/sequence_samples.hpp"
#include "data/feature_hash.hpp"
#include "data/synthetic_sequences.hpp"
#include "data_test_util.hpp"

namespace strata::data {
namespace {

// Users with 1, 2, 3, 7 and 12 events; items i * 10 + t, so every event is unique.
std::shared_ptr<const SequenceCorpus> small_corpus() {
  SequenceCorpus c;
  const std::vector<int64_t> lengths = {1, 2, 3, 7, 12};
  for (size_t u = 0; u < lengths.size(); ++u) {
    c.user_keys.push_back(1000 + u);
    for (int64_t t = 0; t < lengths[u]; ++t) {
      c.items.push_back(uint64_t(u * 100 + size_t(t)));
      c.timestamps.push_back(t);
    }
    c.offsets.push_back(int64_t(c.items.size()));
  }
  return std::make_shared<const SequenceCorpus>(std::move(c));
}

Batch make(const SequenceSamples& samples, Stream stream, int64_t first, int32_t count) {
  return testing::make_batch(samples, stream, first, count);
}

using testing::bag_keys;
std::vector<uint64_t> bag(const Batch& batch, int table, int b) { return bag_keys(batch, table, b); }

constexpr int kHistory = kSequenceFirstSideTable;  // no side columns here

TEST(SequenceSamples, EveryTrainingPositiveOnceWithTheEventsBeforeIt) {
  const auto corpus = small_corpus();
  SequenceSampleOptions options;
  options.negatives = 2;
  const SequenceSamples samples(corpus, options);
  // Train parts: 1, 2, 1, 5, 10 events -> 0, 1, 0, 4, 9 positives.
  ASSERT_EQ(samples.size(Stream::kTrain), 14 * 3);
  ASSERT_EQ(samples.size(Stream::kEval), 3 * 3);
  const Batch batch = make(samples, Stream::kTrain, 0, int32_t(samples.size(Stream::kTrain)));
  ASSERT_EQ(batch.size, 42);
  std::set<uint64_t> positives;
  for (int b = 0; b < batch.size; ++b) {
    const std::vector<uint64_t> history = bag(batch, kHistory, b);
    const uint64_t candidate = bag(batch, kSequenceCandidateTable, b).at(0);
    ASSERT_FALSE(history.empty());
    EXPECT_EQ(history.back(), candidate) << "target-last bag";
    EXPECT_FLOAT_EQ(batch.dense[size_t(b)], std::log1p(float(history.size() - 1)));
    const uint64_t user = bag(batch, kSequenceUserTable, b).at(0);
    if (b % 3 == 0) {
      ASSERT_EQ(batch.labels[size_t(b)], 1.0f);
      // Items u * 100 + t: the history is exactly t = 0 .. position - 1 of that user.
      const uint64_t u = user - 1000, t = candidate - u * 100;
      ASSERT_LT(candidate / 100, 5u);
      EXPECT_EQ(candidate / 100, u) << "the candidate is the user's own event";
      EXPECT_GE(t, 1u);
      for (uint64_t i = 0; i < t; ++i) EXPECT_EQ(history[size_t(i)], u * 100 + i);
      EXPECT_EQ(history.size(), size_t(t) + 1);
      const int64_t n = corpus->length(int64_t(u));
      EXPECT_LT(int64_t(t), n >= 3 ? n - 2 : n) << "a held-out event is never trained";
      EXPECT_TRUE(positives.insert(candidate).second) << "positive " << candidate << " twice";
    } else {
      // A negative: its positive's user and history, another item.
      const int p = b - b % 3;
      EXPECT_EQ(batch.labels[size_t(b)], 0.0f);
      EXPECT_EQ(user, bag(batch, kSequenceUserTable, p).at(0));
      std::vector<uint64_t> expected = bag(batch, kHistory, p);
      expected.back() = candidate;
      EXPECT_EQ(history, expected);
      EXPECT_NE(candidate, bag(batch, kSequenceCandidateTable, p).at(0));
    }
  }
  EXPECT_EQ(positives.size(), 14u);
}

TEST(SequenceSamples, TrainingOrderMixesUsers) {
  SyntheticSequenceOptions synthetic;
  synthetic.num_users = 200;
  synthetic.num_items = 5000;
  const SyntheticSequences generator(synthetic);
  const auto corpus = std::make_shared<const SequenceCorpus>(generator.corpus({0, 200}));
  const SequenceSamples samples(corpus, {});
  const Batch batch = make(samples, Stream::kTrain, 0, 256);
  std::set<uint64_t> users;
  for (int b = 0; b < batch.size; b += 2) users.insert(bag(batch, kSequenceUserTable, b).at(0));
  EXPECT_GT(users.size(), 60u) << "128 positives should come from many users, not a few users' runs";
}

TEST(SequenceSamples, EvaluationAsksForTheHeldOutEvents) {
  const auto corpus = small_corpus();
  for (const bool test : {false, true}) {
    SequenceSampleOptions options;
    options.eval_on_test = test;
    const SequenceSamples samples(corpus, options);
    const Batch batch = make(samples, Stream::kEval, 0, int32_t(samples.size(Stream::kEval)));
    ASSERT_EQ(batch.size, 6);  // users 2, 3, 4 with >= 3 events, one negative each
    for (int b = 0; b < batch.size; b += 2) {
      const uint64_t u = bag(batch, kSequenceUserTable, b).at(0) - 1000;
      const int64_t n = corpus->length(int64_t(u));
      const uint64_t target = u * 100 + uint64_t(test ? n - 1 : n - 2);
      EXPECT_EQ(bag(batch, kSequenceCandidateTable, b).at(0), target);
      EXPECT_EQ(bag(batch, kHistory, b).size(), size_t(test ? n : n - 1)) << "every event before it, then it";
      EXPECT_EQ(batch.labels[size_t(b)], 1.0f);
      EXPECT_EQ(batch.labels[size_t(b) + 1], 0.0f);
    }
  }
}

TEST(SequenceSamples, MaxHistoryKeepsTheMostRecentEvents) {
  SequenceSampleOptions options;
  options.max_history = 3;
  const SequenceSamples samples(small_corpus(), options);
  const Batch batch = make(samples, Stream::kTrain, 0, int32_t(samples.size(Stream::kTrain)));
  size_t longest = 0;
  for (int b = 0; b < batch.size; ++b) {
    const std::vector<uint64_t> history = bag(batch, kHistory, b);
    longest = std::max(longest, history.size() - 1);
    if (batch.labels[size_t(b)] == 1.0f && history.size() > 1) {
      EXPECT_EQ(history[history.size() - 2] + 1, history.back()) << "the event just before the candidate";
    }
  }
  EXPECT_EQ(longest, 3u);
}

TEST(SequenceSamples, AnyRangeEqualsTheSameSamplesOfOnePass) {
  SyntheticSequenceOptions synthetic;
  synthetic.num_users = 50;
  synthetic.num_items = 1000;
  const auto corpus = std::make_shared<const SequenceCorpus>(SyntheticSequences(synthetic).corpus({0, 50}));
  const SequenceSamples samples(corpus, {});
  const int32_t n = int32_t(samples.size(Stream::kTrain));
  const Batch whole = make(samples, Stream::kTrain, 0, n);
  for (const auto& [first, count] : std::vector<std::pair<int64_t, int32_t>>{{0, 1}, {7, 13}, {n - 5, 5}}) {
    const Batch part = make(samples, Stream::kTrain, first, count);
    for (int b = 0; b < count; ++b) {
      EXPECT_EQ(part.labels[size_t(b)], whole.labels[size_t(first + b)]);
      for (int t = 0; t < samples.num_tables(); ++t) {
        EXPECT_EQ(bag(part, t, b), bag(whole, t, int(first + b))) << "sample " << first + b << " table " << t;
      }
    }
  }
  EXPECT_THROW(make(samples, Stream::kTrain, n - 1, 2), Error);
  EXPECT_THROW(make(samples, Stream::kTrain, -1, 1), Error);
  // Another seed: the same samples in another order.
  SequenceSampleOptions other;
  other.seed = 7;
  const Batch reordered = make(SequenceSamples(corpus, other), Stream::kTrain, 0, n);
  std::multiset<uint64_t> a, b;
  for (int i = 0; i < n; i += 2) {
    a.insert(bag(whole, kSequenceCandidateTable, i).at(0));
    b.insert(bag(reordered, kSequenceCandidateTable, i).at(0));
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(bag(whole, kSequenceCandidateTable, 0), bag(reordered, kSequenceCandidateTable, 0));
}

TEST(SequenceSamples, OptionsAreChecked) {
  SequenceSampleOptions options;
  options.negatives = 0;
  EXPECT_THROW(SequenceSamples(small_corpus(), options), Error);
  EXPECT_THROW(SequenceSamples(std::make_shared<const SequenceCorpus>(), SequenceSampleOptions{}), Error);

  SyntheticSequenceOptions law;
  parse_sequence_length("fixed:16384", law);
  EXPECT_EQ(law.length_law, SequenceLengthLaw::kFixed);
  EXPECT_EQ(law.max_length, 16384);
  parse_sequence_length("zipf:3:16384:1.2", law);
  EXPECT_EQ(law.length_law, SequenceLengthLaw::kZipf);
  EXPECT_EQ(law.min_length, 3);
  EXPECT_EQ(law.max_length, 16384);
  EXPECT_DOUBLE_EQ(law.length_zipf_exponent, 1.2);
  parse_sequence_length("uniform:5:9", law);
  EXPECT_EQ(law.length_law, SequenceLengthLaw::kUniform);
  for (const char* bad : {"", "fixed", "fixed:0", "fixed:-3", "uniform:9:5", "uniform:3", "zipf:3:10:0",
                          "zipf:3:10:x", "normal:3:10", "fixed:12abc"}) {
    try {
      parse_sequence_length(bad, law);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("data.sequence_length"), std::string::npos) << e.what();
    }
  }
}

TEST(SequenceSamples, DeckCorpusKeepsTheMostRecentEvents) {
  DataOptions options;
  options.source = "synthetic_sequences";
  options.sequence_users = 40;
  options.sequence_items = 2000;
  options.sequence_length = "uniform:3:40";
  const auto whole = load_sequence_corpus(options);
  ASSERT_EQ(whole->num_users(), 40);
  options.max_seq_len = 10;
  const auto cut = load_sequence_corpus(options);
  ASSERT_EQ(cut->num_users(), 40);
  for (int64_t u = 0; u < 40; ++u) {
    const int64_t n = whole->length(u);
    ASSERT_EQ(cut->length(u), std::min<int64_t>(n, 10));
    for (int64_t i = 0; i < cut->length(u); ++i) {
      EXPECT_EQ(cut->items[size_t(cut->offsets[size_t(u)] + i)],
                whole->items[size_t(whole->offsets[size_t(u) + 1] - cut->length(u) + i)]);
    }
  }
  EXPECT_EQ(sequence_sample_tables(options), 3);
  options.source = "sequences";
  options.sequence_side_columns = "category,action";
  EXPECT_EQ(sequence_sample_tables(options), 5);
  options.sequence_side_columns = "category,,action";
  EXPECT_THROW(sequence_sample_tables(options), Error);
}

TEST(SequenceSamples, EventFileSideColumnsFollowTheCandidate) {
  testing::ScratchDir dir;
  DataOptions options;
  options.source = "sequences";
  options.sequence_side_columns = "category";
  // Two users, out of time order in the file; the category is a function of the item.
  options.train = dir.file("events.tsv",
                           "u1\ta\t3\tcat_a\nu1\tb\t1\tcat_b\nu2\tc\t5\tcat_c\nu1\tc\t2\tcat_c\n"
                           "u1\td\t9\tcat_d\nu1\ta\t10\tcat_a\nu2\td\t6\tcat_d\n");
  ParseStats stats;
  const auto corpus = load_sequence_corpus(options, &stats);
  EXPECT_EQ(stats.samples, 7);
  const SequenceSamples samples(corpus, sequence_sample_options(options));
  ASSERT_EQ(samples.num_tables(), 4);
  // u1: b c a d a -> train part b c a: positives c, a; u2: c d, too short to hold out: positive d.
  ASSERT_EQ(samples.size(Stream::kTrain), 3 * 2);
  const Batch batch = make(samples, Stream::kTrain, 0, 6);
  const SequenceOptions reader;
  std::map<uint64_t, uint64_t> category_of;
  for (const char* token : {"a", "b", "c", "d"}) {
    category_of[feature_key(reader.item_table, token)] =
        feature_key(reader.first_side_table, std::string("cat_") + token);
  }
  for (int b = 0; b < batch.size; ++b) {
    const uint64_t candidate = bag(batch, kSequenceCandidateTable, b).at(0);
    EXPECT_EQ(bag(batch, kSequenceFirstSideTable, b).at(0), category_of.at(candidate)) << "sample " << b;
    EXPECT_EQ(bag(batch, kSequenceFirstSideTable + 1, b).back(), candidate) << "the history table comes last";
  }
}

}  // namespace
}  // namespace strata::data
