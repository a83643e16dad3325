// RowMap and EvictionQueue against the standard containers they replace, under
// long random sequences of inserts, updates and erases (the erase path's
// backward shift and the heap's sift paths are where bugs would hide).
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "store/eviction_policy.hpp"
#include "store/row_map.hpp"

namespace strata::store {
namespace {

TEST(RowMap, MatchesStdMapUnderRandomInsertsAndErases) {
  RowMap<int> map(4);
  std::map<RowId, int> reference;
  std::mt19937_64 rng(3);
  for (int op = 0; op < 200000; ++op) {
    const RowId id{uint32_t(rng() % 3), rng() % 3000};  // small key space: many collisions and re-inserts
    const int action = int(rng() % 3);
    if (action == 0) {
      bool inserted = false;
      int& value = map.insert(id, op, &inserted);
      EXPECT_EQ(inserted, reference.count(id) == 0);
      if (inserted) reference[id] = op;
      EXPECT_EQ(value, reference[id]);
    } else if (action == 1) {
      EXPECT_EQ(map.erase(id), reference.erase(id) == 1);
    } else {
      const int* value = map.find(id);
      auto it = reference.find(id);
      ASSERT_EQ(value != nullptr, it != reference.end());
      if (value) EXPECT_EQ(*value, it->second);
    }
    ASSERT_EQ(map.size(), reference.size());
  }
  size_t visited = 0;
  map.for_each([&](const RowId& id, int value) {
    ++visited;
    EXPECT_EQ(reference.at(id), value);
  });
  EXPECT_EQ(visited, reference.size());
}

TEST(EvictionQueue, VictimIsAlwaysTheSmallestScoreThenSlot) {
  auto policy = make_eviction_policy("lfu");
  EvictionQueue queue(*policy);
  std::map<int64_t, RowUsage> usage;
  std::mt19937_64 rng(4);
  for (int op = 0; op < 50000; ++op) {
    const int64_t slot = int64_t(rng() % 500);
    if (rng() % 4 == 0) {
      queue.erase(slot);
      usage.erase(slot);
    } else {
      RowUsage u;
      u.frequency = double(rng() % 20);
      u.last_use = int64_t(rng() % 50);
      queue.update(slot, u);
      usage[slot] = u;
    }
    ASSERT_EQ(queue.size(), usage.size());
    int64_t expected = -1;
    EvictionPolicy::Score best{};
    for (const auto& [s, u] : usage) {
      const auto score = policy->score(u);
      if (expected < 0 || score < best) expected = s, best = score;  // ties: smallest slot (map order)
    }
    ASSERT_EQ(queue.peek_victim(), expected) << "op " << op;
  }
}

}  // namespace
}  // namespace strata::store
