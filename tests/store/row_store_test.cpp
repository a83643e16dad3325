// RowTable, row initialisation and ServerShard: creation on first pull, no
// creation on read-only pulls, and gradient sums in trainer-rank order.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "common/error.hpp"
#include "config/options.hpp"
#include "model/optimizers.hpp"
#include "store/row_init.hpp"
#include "store/row_table.hpp"
#include "store/server_shard.hpp"

namespace strata::store {
namespace {

TEST(RowInit, PureFunctionOfKeyAndSeed) {
  float a[8], b[8], c[8], d[8];
  init_row_values(3, 12345, 7, 0.05f, a, 8);
  init_row_values(3, 12345, 7, 0.05f, b, 8);
  init_row_values(4, 12345, 7, 0.05f, c, 8);
  init_row_values(3, 12345, 8, 0.05f, d, 8);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(a[i], b[i]);
    EXPECT_LE(std::fabs(a[i]), 0.05f);
  }
  EXPECT_NE(a[0], c[0]);
  EXPECT_NE(a[0], d[0]);
}

TEST(RowTable, InsertFindGrowAndSort) {
  RowTable table(4, 4);
  std::mt19937_64 rng(1);
  std::vector<RowId> ids;
  for (int i = 0; i < 5000; ++i) ids.push_back({uint32_t(rng() % 3), rng()});
  for (const auto& id : ids) {
    bool created = false;
    int64_t slot = table.find_or_insert(id.table, id.key, &created);
    EXPECT_TRUE(created);
    table.row(slot)[0] = float(id.key % 1000);
  }
  EXPECT_EQ(table.size(), ids.size());
  for (const auto& id : ids) {
    bool created = true;
    int64_t slot = table.find_or_insert(id.table, id.key, &created);
    EXPECT_FALSE(created);
    EXPECT_EQ(table.find(id.table, id.key), slot);
    EXPECT_EQ(table.row(slot)[0], float(id.key % 1000));
  }
  EXPECT_EQ(table.find(9, 1), -1);
  auto sorted = table.sorted_slots();
  for (size_t i = 1; i < sorted.size(); ++i) EXPECT_TRUE(table.id(sorted[i - 1]) < table.id(sorted[i]));
}

// The batched, prefetching lookup agrees with one-at-a-time lookups, including
// duplicates inside one batch, growth of the index mid-way and rows that span
// several chunks; rows keep their contents (and addresses) as the table grows.
TEST(RowTable, BatchedLookupMatchesSingleLookups) {
  RowTable batched(4, 4), single(4, 4);
  std::mt19937_64 rng(2);
  std::vector<uint32_t> tables;
  std::vector<uint64_t> keys;
  for (int i = 0; i < 20000; ++i) {
    tables.push_back(uint32_t(rng() % 4));
    keys.push_back(rng() % 6000);  // repeats, also inside one batch
  }
  const float* first_row = nullptr;
  for (size_t at = 0; at < keys.size(); at += 1700) {
    const size_t n = std::min<size_t>(1700, keys.size() - at);
    std::vector<int64_t> slots(n);
    std::vector<uint8_t> created(n);
    batched.find_or_insert_many(tables.data() + at, keys.data() + at, n, slots.data(), created.data());
    for (size_t i = 0; i < n; ++i) {
      bool was_created = false;
      const int64_t expected = single.find_or_insert(tables[at + i], keys[at + i], &was_created);
      ASSERT_EQ(slots[i], expected) << "key " << at + i;
      ASSERT_EQ(bool(created[i]), was_created) << "key " << at + i;
      if (created[i]) batched.row(slots[i])[3] = float(keys[at + i]);
      ASSERT_EQ(batched.row(slots[i])[3], float(keys[at + i]));
    }
    if (!first_row) first_row = batched.row(0);
    EXPECT_EQ(batched.row(0), first_row) << "rows must not move when the table grows";
  }
  EXPECT_EQ(batched.size(), single.size());
  EXPECT_GT(batched.size(), size_t(4096) * 2);  // several chunks
}

ServerShard make_shard(const std::string& optimizer, float lr) {
  OptimizerOptions o;
  o.sparse = optimizer;
  o.sparse_lr = lr;
  ServerShardOptions s;
  s.dim = 4;
  s.seed = 11;
  return ServerShard(s, model::make_sparse_optimizer(o));
}

TEST(ServerShard, PullCreatesRowsWithInitialValues) {
  ServerShard shard = make_shard("sgd", 0.1f);
  uint32_t tables[2] = {0, 1};
  uint64_t keys[2] = {42, 42};
  float values[8], expected[4];
  shard.pull_for_training(0, tables, keys, 2, values);
  EXPECT_EQ(shard.rows().size(), 2u);
  init_row_values(1, 42, 11, 0.05f, expected, 4);
  for (int j = 0; j < 4; ++j) EXPECT_EQ(values[4 + j], expected[j]);
}

TEST(ServerShard, ReadOnlyPullCreatesNothing) {
  ServerShard shard = make_shard("sgd", 0.1f);
  uint32_t table = 2;
  uint64_t key = 7;
  float values[4], expected[4];
  shard.pull_read_only(&table, &key, 1, values);
  EXPECT_EQ(shard.rows().size(), 0u);
  init_row_values(2, 7, 11, 0.05f, expected, 4);
  for (int j = 0; j < 4; ++j) EXPECT_EQ(values[j], expected[j]);
}

TEST(ServerShard, SumsTrainersInRankOrderThenAppliesOnce) {
  ServerShard shard = make_shard("sgd", 0.5f);
  uint32_t t0[2] = {0, 0}, t1[1] = {0};
  uint64_t k0[2] = {1, 2}, k1[1] = {2};
  float v0[8], v1[4];
  shard.pull_for_training(0, t0, k0, 2, v0);
  shard.pull_for_training(1, t1, k1, 1, v1);
  float g0[8] = {1, 1, 1, 1, 0.25f, 0.25f, 0.25f, 0.25f};
  float g1[4] = {0.5f, 0.5f, 0.5f, 0.5f};
  shard.add_gradients(0, g0, 2);
  shard.add_gradients(1, g1, 1);
  shard.apply_step();
  float after[8];
  shard.pull_for_training(0, t0, k0, 2, after);
  for (int j = 0; j < 4; ++j) {
    EXPECT_FLOAT_EQ(after[j], v0[j] - 0.5f * 1.0f);
    EXPECT_FLOAT_EQ(after[4 + j], v0[4 + j] - 0.5f * (0.25f + 0.5f));
  }
  EXPECT_THROW(shard.add_gradients(0, g0, 1), Error);  // count differs from the pull
}

}  // namespace
}  // namespace strata::store
