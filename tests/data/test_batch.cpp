// Batch: de-duplication against a reference, the wire format round trip, and
// rejection of truncated or corrupted buffers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "common/error.hpp"
#include "common/rng.hpp"
#include "data/batch.hpp"

namespace strata::data {
namespace {

// A batch of `size` samples whose bags draw keys from a small pool (many duplicates).
Batch random_batch(int32_t size, int num_dense, int num_tables, uint64_t seed) {
  CounterRng rng(seed);
  Batch batch;
  batch.reset(num_dense, num_tables);
  batch.first_sample = 1234;
  for (int32_t b = 0; b < size; ++b) {
    batch.labels.push_back(rng.uniform() < 0.3 ? 1.0f : 0.0f);
    for (int j = 0; j < num_dense; ++j) batch.dense.push_back(float(rng.uniform()));
    for (int t = 0; t < num_tables; ++t) {
      SparseBags& bags = batch.tables[size_t(t)];
      const int len = int(rng.next() % 4);  // empty bags too
      for (int k = 0; k < len; ++k) bags.keys.push_back(mix64(rng.next() % (7 + t * 50)));
      bags.offsets.push_back(int32_t(bags.keys.size()));
    }
  }
  batch.size = size;
  return batch;
}

TEST(Batch, ResetKeepsShapeAndClears) {
  Batch batch = random_batch(10, 3, 2, 1);
  batch.reset(5, 4);
  EXPECT_EQ(batch.size, 0);
  EXPECT_EQ(batch.num_dense, 5);
  EXPECT_EQ(batch.first_sample, -1);
  EXPECT_TRUE(batch.labels.empty());
  EXPECT_TRUE(batch.dense.empty());
  ASSERT_EQ(batch.tables.size(), 4u);
  for (const SparseBags& bags : batch.tables) {
    EXPECT_EQ(bags.offsets, std::vector<int32_t>{0});
    EXPECT_TRUE(bags.keys.empty() && bags.unique_keys.empty() && bags.index.empty());
  }
}

TEST(Batch, DeduplicateMatchesReference) {
  for (int32_t size : {0, 1, 7, 256, 4096}) {
    Batch batch = random_batch(size, 2, 5, uint64_t(size) + 11);
    const Batch original = batch;
    deduplicate(batch);
    for (size_t t = 0; t < batch.tables.size(); ++t) {
      const SparseBags& bags = batch.tables[t];
      const std::vector<uint64_t>& keys = original.tables[t].keys;
      EXPECT_TRUE(bags.keys.empty());
      EXPECT_EQ(bags.offsets, original.tables[t].offsets);
      std::set<uint64_t> reference(keys.begin(), keys.end());
      EXPECT_EQ(bags.unique_keys, std::vector<uint64_t>(reference.begin(), reference.end()));
      ASSERT_EQ(bags.index.size(), keys.size());
      for (size_t i = 0; i < keys.size(); ++i) {
        ASSERT_GE(bags.index[i], 0);
        ASSERT_LT(size_t(bags.index[i]), bags.unique_keys.size());
        EXPECT_EQ(bags.unique_keys[size_t(bags.index[i])], keys[i]);
      }
    }
    // A second call leaves a de-duplicated batch as it is.
    const Batch once = batch;
    deduplicate(batch);
    for (size_t t = 0; t < batch.tables.size(); ++t) {
      EXPECT_EQ(batch.tables[t].unique_keys, once.tables[t].unique_keys);
      EXPECT_EQ(batch.tables[t].index, once.tables[t].index);
    }
  }
}

void expect_same(const Batch& a, const Batch& b) {
  EXPECT_EQ(a.first_sample, b.first_sample);
  EXPECT_EQ(a.size, b.size);
  EXPECT_EQ(a.num_dense, b.num_dense);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.dense, b.dense);
  ASSERT_EQ(a.tables.size(), b.tables.size());
  for (size_t t = 0; t < a.tables.size(); ++t) {
    EXPECT_EQ(a.tables[t].offsets, b.tables[t].offsets);
    EXPECT_EQ(a.tables[t].unique_keys, b.tables[t].unique_keys);
    EXPECT_EQ(a.tables[t].index, b.tables[t].index);
    EXPECT_EQ(a.tables[t].keys_of, b.tables[t].keys_of);
    EXPECT_TRUE(b.tables[t].keys.empty());
  }
}

// Tied tables (one row space for two tables): table 0 holds the union of both
// tables' keys, each index points into it, and the tie travels on the wire.
TEST(Batch, TiedTablesShareOneKeyList) {
  for (int32_t size : {0, 1, 7, 256}) {
    Batch batch = random_batch(size, 2, 3, uint64_t(size) + 3);
    const Batch original = batch;
    deduplicate(batch, {-1, 0, -1});
    const SparseBags& own = batch.tables[0];
    const SparseBags& tied = batch.tables[1];
    EXPECT_EQ(own.keys_of, -1);
    EXPECT_EQ(tied.keys_of, 0);
    EXPECT_EQ(keys_table(batch, 1), 0);
    EXPECT_EQ(keys_table(batch, 2), 2);
    EXPECT_TRUE(tied.unique_keys.empty());
    std::set<uint64_t> reference(original.tables[0].keys.begin(), original.tables[0].keys.end());
    reference.insert(original.tables[1].keys.begin(), original.tables[1].keys.end());
    EXPECT_EQ(own.unique_keys, std::vector<uint64_t>(reference.begin(), reference.end()));
    for (int t : {0, 1}) {
      const auto& keys = original.tables[size_t(t)].keys;
      ASSERT_EQ(batch.tables[size_t(t)].index.size(), keys.size());
      for (size_t i = 0; i < keys.size(); ++i)
        EXPECT_EQ(own.unique_keys[size_t(batch.tables[size_t(t)].index[i])], keys[i]);
    }
    // Table 2 is de-duplicated on its own, as without ties.
    Batch alone = original;
    deduplicate(alone);
    EXPECT_EQ(batch.tables[2].unique_keys, alone.tables[2].unique_keys);
    EXPECT_EQ(batch.tables[2].index, alone.tables[2].index);
    const std::vector<char> wire = serialize(batch);
    expect_same(batch, deserialize(wire.data(), wire.size()));
    // A second call leaves the tied batch as it is.
    const Batch once = batch;
    deduplicate(batch, {-1, 0, -1});
    expect_same(once, batch);
  }
}

TEST(Batch, InconsistentTiesAreRefused) {
  Batch batch = random_batch(5, 2, 3, 9);
  for (const std::vector<int32_t>& ties : std::vector<std::vector<int32_t>>{{-1, 1, -1}, {-1, 2, -1}, {-1, 0, 1}, {-1, 0}, {0, -1, -1}}) {
    Batch copy = batch;
    EXPECT_THROW(deduplicate(copy, ties), Error);
  }
  // A tie made up on the wire: a table tied to a later one, or one with keys of its own.
  Batch tied = batch;
  deduplicate(tied, {-1, 0, -1});
  for (int variant = 0; variant < 2; ++variant) {
    Batch bad = tied;
    if (variant == 0) bad.tables[2].keys_of = 1;
    if (variant == 1) bad.tables[1].unique_keys = {1};
    EXPECT_THROW(serialize(bad), Error) << variant;
  }
}

TEST(Batch, SerializeRoundTrip) {
  for (int32_t size : {0, 1, 100}) {
    Batch batch = random_batch(size, 13, 26, 7);
    deduplicate(batch);
    const std::vector<char> wire = serialize(batch);
    expect_same(batch, deserialize(wire.data(), wire.size()));
  }
  Batch no_tables;
  no_tables.reset(0, 0);
  const std::vector<char> wire = serialize(no_tables);
  expect_same(no_tables, deserialize(wire.data(), wire.size()));
}

TEST(Batch, SerializeRoundTripKeepsEveryTasksLabels) {
  Batch batch = random_batch(5, 2, 3, 9);
  batch.num_tasks = 3;
  batch.labels.clear();
  for (int i = 0; i < 15; ++i) batch.labels.push_back(float(i % 2));
  deduplicate(batch);
  const std::vector<char> wire = serialize(batch);
  const Batch back = deserialize(wire.data(), wire.size());
  EXPECT_EQ(back.num_tasks, 3);
  EXPECT_EQ(back.labels, batch.labels);
  expect_same(batch, back);
  batch.labels.pop_back();  // one label short of 5 x 3
  EXPECT_THROW(serialize(batch), Error);
}

TEST(Batch, SerializeNeedsDeduplicatedBatch) {
  Batch batch = random_batch(20, 1, 2, 3);
  EXPECT_THROW(serialize(batch), Error);
}

TEST(Batch, DeserializeRejectsEveryTruncation) {
  Batch batch = random_batch(9, 2, 3, 5);
  deduplicate(batch);
  const std::vector<char> wire = serialize(batch);
  for (size_t n = 0; n < wire.size(); ++n) {
    EXPECT_THROW(deserialize(wire.data(), n), Error) << "accepted a buffer cut at " << n;
  }
  std::vector<char> longer = wire;
  longer.push_back(0);
  EXPECT_THROW(deserialize(longer.data(), longer.size()), Error);
}

TEST(Batch, DeserializeRejectsCorruption) {
  Batch batch = random_batch(9, 2, 3, 5);
  deduplicate(batch);
  const std::vector<char> wire = serialize(batch);
  {
    std::vector<char> bad = wire;
    bad[0] ^= 1;  // magic
    EXPECT_THROW(deserialize(bad.data(), bad.size()), Error);
  }
  {
    std::vector<char> bad = wire;
    const int32_t huge = 1 << 30;  // size field at byte 16
    std::memcpy(bad.data() + 16, &huge, 4);
    EXPECT_THROW(deserialize(bad.data(), bad.size()), Error);
  }
  {
    std::vector<char> bad = wire;
    const int32_t negative = -1;  // num_tables at byte 24
    std::memcpy(bad.data() + 24, &negative, 4);
    EXPECT_THROW(deserialize(bad.data(), bad.size()), Error);
  }
  for (int32_t tasks : {0, -3, 1 << 20}) {
    std::vector<char> bad = wire;
    std::memcpy(bad.data() + 28, &tasks, 4);  // num_tasks at byte 28
    EXPECT_THROW(deserialize(bad.data(), bad.size()), Error) << tasks;
  }
  {
    std::vector<char> bad = wire;  // last index of the last table out of range
    const int32_t out_of_range = 1 << 20;
    std::memcpy(bad.data() + bad.size() - 4, &out_of_range, 4);
    EXPECT_THROW(deserialize(bad.data(), bad.size()), Error);
  }
  try {
    deserialize(wire.data(), wire.size() / 2);
    FAIL() << "accepted a truncated buffer";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata::data
