// RowCache, the bounded row set under the L1 and L2 tiers: what insert, find
// and erase promise, that the arena bounds the rows held and erased slots are
// used again, and a long random sequence checked against a std::map.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "common/error.hpp"
#include "store/row_cache.hpp"

namespace strata::store {
namespace {

constexpr int kWidth = 5;

// A row's values, distinct per (table, key, version), so a row read back
// from the wrong slot or an old version shows.
std::vector<float> values_of(const RowId& id, int version = 0) {
  std::vector<float> v(kWidth);
  for (int j = 0; j < kWidth; ++j) v[j] = float(id.table) * 1000.0f + float(id.key) + 0.125f * j + 7.0f * version;
  return v;
}

std::vector<float> row_at(const RowCache& cache, int64_t slot) {
  return std::vector<float>(cache.row(slot), cache.row(slot) + cache.width());
}

TEST(RowCache, StartsEmptyWithTheArenaItWasGiven) {
  RowCache cache(8, kWidth);
  EXPECT_EQ(cache.width(), kWidth);
  EXPECT_EQ(cache.capacity(), 8);
  EXPECT_EQ(cache.arena_rows(), 8);
  EXPECT_EQ(cache.arena_bytes(), size_t(8) * kWidth * sizeof(float));
  EXPECT_EQ(cache.size(), 0);
  EXPECT_FALSE(cache.full());
  EXPECT_EQ(cache.find({0, 1}), -1);
}

TEST(RowCache, InsertedRowsAreFoundWithTheirValuesFlagsAndIds) {
  RowCache cache(6, kWidth);
  // (0, 7) and (1, 7): same key in two tables, two rows.
  const std::vector<RowId> ids = {{0, 7}, {1, 7}, {0, 8}, {3, 1ull << 40}};
  std::vector<int64_t> slots;
  for (size_t i = 0; i < ids.size(); ++i) {
    slots.push_back(cache.insert(ids[i], values_of(ids[i]).data(), /*dirty=*/i % 2 == 1));
    EXPECT_EQ(cache.size(), int64_t(i + 1));
  }
  EXPECT_EQ(std::set<int64_t>(slots.begin(), slots.end()).size(), ids.size()) << "two rows share a slot";
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_GE(slots[i], 0);
    ASSERT_LT(slots[i], cache.arena_rows());
    EXPECT_EQ(cache.find(ids[i]), slots[i]);
    EXPECT_EQ(cache.id(slots[i]), ids[i]);
    EXPECT_EQ(row_at(cache, slots[i]), values_of(ids[i]));
    EXPECT_EQ(cache.dirty(slots[i]), i % 2 == 1);
  }
  EXPECT_EQ(cache.find({2, 7}), -1);
  EXPECT_EQ(cache.find({0, 9}), -1);
}

TEST(RowCache, RowsAreWritableInPlaceAndDirtyBitsSettable) {
  RowCache cache(4, kWidth);
  const RowId a{0, 1}, b{0, 2};
  const int64_t slot_a = cache.insert(a, values_of(a).data(), false);
  const int64_t slot_b = cache.insert(b, values_of(b).data(), false);
  const std::vector<float> newer = values_of(a, 1);
  std::copy(newer.begin(), newer.end(), cache.row(slot_a));
  cache.set_dirty(slot_a, true);
  EXPECT_EQ(row_at(cache, cache.find(a)), newer);
  EXPECT_TRUE(cache.dirty(cache.find(a)));
  EXPECT_EQ(row_at(cache, slot_b), values_of(b)) << "writing one row changed another";
  EXPECT_FALSE(cache.dirty(slot_b));
  cache.set_dirty(slot_a, false);
  EXPECT_FALSE(cache.dirty(slot_a));
}

TEST(RowCache, EraseRemovesOnlyThatRow) {
  RowCache cache(64, kWidth);
  std::vector<RowId> ids;
  for (uint64_t k = 0; k < 64; ++k) ids.push_back({uint32_t(k % 3), k * 977});
  for (const auto& id : ids) cache.insert(id, values_of(id).data(), id.key % 2 == 0);
  ASSERT_TRUE(cache.full());
  for (size_t i = 0; i < ids.size(); i += 3) cache.erase(cache.find(ids[i]));
  int64_t kept = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t slot = cache.find(ids[i]);
    if (i % 3 == 0) {
      EXPECT_EQ(slot, -1) << "erased row still found";
      continue;
    }
    ++kept;
    ASSERT_GE(slot, 0) << "erasing a neighbour lost row " << i;
    EXPECT_EQ(row_at(cache, slot), values_of(ids[i]));
    EXPECT_EQ(cache.dirty(slot), ids[i].key % 2 == 0);
  }
  EXPECT_EQ(cache.size(), kept);
  EXPECT_FALSE(cache.full());
}

TEST(RowCache, FullArenaRefusesAnotherRow) {
  RowCache cache(3, kWidth);
  for (uint64_t k = 0; k < 3; ++k) cache.insert({0, k}, values_of({0, k}).data(), true);
  EXPECT_TRUE(cache.full());
  EXPECT_THROW(cache.insert({0, 99}, values_of({0, 99}).data(), true), Error);
  EXPECT_EQ(cache.size(), 3);
  EXPECT_EQ(cache.find({0, 99}), -1);
  for (uint64_t k = 0; k < 3; ++k) EXPECT_EQ(row_at(cache, cache.find({0, k})), values_of({0, k}));
}

TEST(RowCache, InsertingAPresentRowIsRefusedAndKeepsTheOldRow) {
  RowCache cache(4, kWidth);
  const RowId a{1, 5};
  const int64_t slot = cache.insert(a, values_of(a).data(), true);
  EXPECT_THROW(cache.insert(a, values_of(a, 1).data(), false), Error);
  EXPECT_EQ(cache.size(), 1);
  EXPECT_EQ(cache.find(a), slot);
  EXPECT_EQ(row_at(cache, slot), values_of(a));
  EXPECT_TRUE(cache.dirty(slot));
}

// A refused insert should cost nothing: the cache still takes its full
// capacity of other rows afterwards.
TEST(RowCache, RefusedInsertLosesNoSlot) {
  RowCache cache(2, kWidth);
  const RowId a{0, 1}, b{0, 2};
  cache.insert(a, values_of(a).data(), false);
  EXPECT_THROW(cache.insert(a, values_of(a).data(), false), Error);
  ASSERT_FALSE(cache.full());
  EXPECT_NO_THROW(cache.insert(b, values_of(b).data(), false));
  EXPECT_EQ(cache.size(), 2);
}

TEST(RowCache, ErasedSlotsAreUsedAgainAndTheArenaNeverGrows) {
  RowCache cache(5, kWidth);
  std::vector<int64_t> slots;
  for (uint64_t k = 0; k < 5; ++k) slots.push_back(cache.insert({0, k}, values_of({0, k}).data(), true));
  const std::set<int64_t> freed = {cache.find({0, 1}), cache.find({0, 3}), cache.find({0, 4})};
  for (int64_t s : freed) cache.erase(s);
  std::set<int64_t> reused;
  for (uint64_t k = 10; k < 13; ++k) {
    const int64_t slot = cache.insert({2, k}, values_of({2, k}).data(), false);
    reused.insert(slot);
    EXPECT_FALSE(cache.dirty(slot)) << "the new row took the erased row's dirty bit";
    EXPECT_EQ(cache.id(slot), (RowId{2, k}));
  }
  EXPECT_EQ(reused, freed) << "a full arena must put new rows in the erased slots";
  EXPECT_TRUE(cache.full());
  for (uint64_t k : {0, 2}) EXPECT_EQ(row_at(cache, cache.find({0, k})), values_of({0, k}));
  for (uint64_t k = 10; k < 13; ++k) EXPECT_EQ(row_at(cache, cache.find({2, k})), values_of({2, k}));

  // Many rounds of churn through one slot of room: the slots stay inside the arena.
  for (uint64_t k = 100; k < 1100; ++k) {
    cache.erase(cache.find({2, 10 + (k % 3)}));
    const int64_t slot = cache.insert({2, 10 + (k % 3)}, values_of({2, 10 + (k % 3)}, int(k)).data(), k % 2 == 0);
    ASSERT_GE(slot, 0);
    ASSERT_LT(slot, cache.arena_rows());
    ASSERT_EQ(cache.size(), 5);
  }
}

TEST(RowCache, AnErasedRowCanComeBackWithNewValues) {
  RowCache cache(2, kWidth);
  const RowId a{0, 42};
  cache.erase(cache.insert(a, values_of(a).data(), true));
  EXPECT_EQ(cache.find(a), -1);
  const int64_t slot = cache.insert(a, values_of(a, 3).data(), false);
  EXPECT_EQ(cache.find(a), slot);
  EXPECT_EQ(row_at(cache, slot), values_of(a, 3));
  EXPECT_FALSE(cache.dirty(slot));
  EXPECT_EQ(cache.size(), 1);
}

TEST(RowCache, LimitBoundsFullUpToTheArena) {
  RowCache cache(6, kWidth);
  cache.set_limit(100);
  EXPECT_EQ(cache.capacity(), 6) << "the limit may not exceed the arena";
  cache.set_limit(2);
  EXPECT_EQ(cache.capacity(), 2);
  EXPECT_EQ(cache.arena_rows(), 6);
  cache.insert({0, 1}, values_of({0, 1}).data(), false);
  EXPECT_FALSE(cache.full());
  cache.insert({0, 2}, values_of({0, 2}).data(), false);
  EXPECT_TRUE(cache.full());
  cache.set_limit(4);  // the online controller grants more
  EXPECT_FALSE(cache.full());
  cache.insert({0, 3}, values_of({0, 3}).data(), false);
  cache.insert({0, 4}, values_of({0, 4}).data(), false);
  EXPECT_TRUE(cache.full());
  cache.set_limit(1);  // and takes it back: full until the owner evicts down to it
  EXPECT_TRUE(cache.full());
  for (uint64_t k = 1; k <= 3; ++k) cache.erase(cache.find({0, k}));
  EXPECT_TRUE(cache.full());
  EXPECT_EQ(cache.size(), 1);
  EXPECT_EQ(row_at(cache, cache.find({0, 4})), values_of({0, 4}));
  cache.set_limit(0);
  EXPECT_TRUE(cache.full());
}

TEST(RowCache, ForEachVisitsEveryRowOnceWithItsSlot) {
  RowCache cache(32, kWidth);
  std::map<RowId, int64_t> expected;
  for (uint64_t k = 0; k < 32; ++k) expected[{uint32_t(k % 4), k}] = cache.insert({uint32_t(k % 4), k}, values_of({0, k}).data(), false);
  for (uint64_t k = 0; k < 32; k += 5) {
    cache.erase(expected.at({uint32_t(k % 4), k}));
    expected.erase({uint32_t(k % 4), k});
  }
  std::map<RowId, int64_t> seen;
  cache.for_each([&](const RowId& id, int64_t slot) {
    EXPECT_TRUE(seen.emplace(id, slot).second) << "visited twice";
  });
  EXPECT_EQ(seen, expected);
}

// Random inserts (while not full), in-place writes, dirty flips, erases and
// look-ups against a std::map, with a small key space so rows come and go.
TEST(RowCache, MatchesAReferenceUnderRandomOperations) {
  constexpr int64_t kRows = 97;
  RowCache cache(kRows, kWidth);
  struct Entry {
    std::vector<float> values;
    bool dirty;
  };
  std::map<RowId, Entry> reference;
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (int op = 0; op < 100000; ++op) {
    const RowId id{uint32_t(rng() % 2), rng() % 300};
    const int64_t slot = cache.find(id);
    auto it = reference.find(id);
    ASSERT_EQ(slot >= 0, it != reference.end()) << "op " << op;
    const int action = int(rng() % 4);
    if (slot < 0) {
      if (action == 0 || cache.full()) continue;
      Entry e{std::vector<float>(kWidth), rng() % 2 == 0};
      for (auto& x : e.values) x = value(rng);
      const int64_t at = cache.insert(id, e.values.data(), e.dirty);
      ASSERT_GE(at, 0);
      ASSERT_LT(at, kRows);
      reference.emplace(id, std::move(e));
    } else {
      ASSERT_EQ(row_at(cache, slot), it->second.values) << "op " << op;
      ASSERT_EQ(cache.dirty(slot), it->second.dirty) << "op " << op;
      ASSERT_EQ(cache.id(slot), id);
      if (action == 0) {
        cache.erase(slot);
        reference.erase(it);
      } else if (action == 1) {
        for (int j = 0; j < kWidth; ++j) cache.row(slot)[j] = it->second.values[j] = value(rng);
      } else if (action == 2) {
        it->second.dirty = !it->second.dirty;
        cache.set_dirty(slot, it->second.dirty);
      }
    }
    ASSERT_EQ(cache.size(), int64_t(reference.size()));
    ASSERT_EQ(cache.full(), int64_t(reference.size()) >= kRows);
  }
  EXPECT_GT(reference.size(), size_t(kRows / 2));  // the run did fill the cache
}

}  // namespace
}  // namespace strata::store
