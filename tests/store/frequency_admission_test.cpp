// FrequencyAdmission against exact counting: keys are remapped to the default
// row until they have been seen min_count times; evaluation never counts.
#include <gtest/gtest.h>

#include <map>

#include "common/error.hpp"
#include "common/rng.hpp"
#include "store/frequency_admission.hpp"

namespace strata::store {
namespace {

data::Batch one_table_batch(const std::vector<uint64_t>& keys) {
  data::Batch batch;
  batch.reset(0, 1);
  batch.size = static_cast<int32_t>(keys.size());
  batch.tables[0].keys = keys;
  batch.tables[0].offsets.resize(keys.size() + 1);
  for (size_t i = 0; i <= keys.size(); ++i) batch.tables[0].offsets[i] = static_cast<int32_t>(i);
  return batch;
}

TEST(FrequencyAdmission, DefaultsKeysUntilSeenMinCountTimes) {
  FrequencyAdmission admission(3, 1 << 16);
  data::Batch b = one_table_batch({7, 7, 9, 7, 9, 11});
  admission.admit_training(b);
  // 7: counts 1, 2, 3 -> default, default, admitted; 9: 1, 2; 11: 1.
  const std::vector<uint64_t> expected = {kDefaultRowKey, kDefaultRowKey, kDefaultRowKey, 7, kDefaultRowKey,
                                          kDefaultRowKey};
  EXPECT_EQ(b.tables[0].keys, expected);
  EXPECT_EQ(admission.keys_seen(), 6u);
  EXPECT_EQ(admission.keys_defaulted(), 5u);
  data::Batch next = one_table_batch({9, 9, 11});
  admission.admit_training(next);
  EXPECT_EQ(next.tables[0].keys, (std::vector<uint64_t>{9, 9, kDefaultRowKey}));
}

TEST(FrequencyAdmission, EvaluationDoesNotCount) {
  FrequencyAdmission admission(2, 1 << 16);
  data::Batch train = one_table_batch({5, 5});
  admission.admit_training(train);
  data::Batch eval = one_table_batch({5, 6, 6, 6});
  admission.admit_eval(eval);
  EXPECT_EQ(eval.tables[0].keys, (std::vector<uint64_t>{5, kDefaultRowKey, kDefaultRowKey, kDefaultRowKey}));
  EXPECT_EQ(admission.estimate(0, 6), 0u);
}

TEST(FrequencyAdmission, SketchNeverUndercountsAndRarelyOvercounts) {
  FrequencyAdmission admission(1000000, 1 << 16);  // high threshold: only counting matters here
  std::map<uint64_t, uint32_t> exact;
  CounterRng rng(3);
  std::vector<uint64_t> keys;
  for (int i = 0; i < 50000; ++i) keys.push_back(rng.next() % 20000);
  data::Batch b = one_table_batch(keys);
  admission.admit_training(b);
  for (uint64_t k : keys) exact[k] += 1;
  int over = 0;
  for (const auto& [key, count] : exact) {
    const uint32_t estimate = admission.estimate(0, key);
    ASSERT_GE(estimate, count) << key;
    over += estimate > count;
  }
  EXPECT_LT(over, static_cast<int>(exact.size()) / 50);  // about 18000 keys in 4 x 65536 counters
}

TEST(FrequencyAdmission, TablesAreCountedApart) {
  FrequencyAdmission admission(2, 1 << 16);
  data::Batch b;
  b.reset(0, 2);
  b.tables[0].keys = {4};
  b.tables[1].keys = {4};
  admission.admit_training(b);
  EXPECT_EQ(admission.estimate(0, 4), 1u);
  EXPECT_EQ(admission.estimate(1, 4), 1u);
}

TEST(FrequencyAdmission, OffBelowTwo) {
  FrequencyAdmission admission(1, 1 << 12);
  data::Batch b = one_table_batch({1, 2, 3});
  admission.admit_training(b);
  EXPECT_EQ(b.tables[0].keys, (std::vector<uint64_t>{1, 2, 3}));
}

TEST(FrequencyAdmission, RestoreChecksTheSize) {
  FrequencyAdmission admission(2, 1 << 12);
  EXPECT_THROW(admission.restore(std::vector<uint32_t>(10), 0, 0), Error);
  std::vector<uint32_t> counters(FrequencyAdmission::kRows * (1 << 12), 0);
  admission.restore(counters, 5, 2);
  EXPECT_EQ(admission.keys_seen(), 5u);
}

}  // namespace
}  // namespace strata::store
