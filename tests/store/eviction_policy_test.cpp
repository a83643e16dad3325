// Eviction policies: each one picks the victim its rule says, and pinned rows
// (absent from the queue) are never chosen.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <unordered_map>

#include "common/error.hpp"
#include "store/eviction_policy.hpp"

namespace strata::store {
namespace {

struct Fixture {
  explicit Fixture(const std::string& name) : policy(make_eviction_policy(name, 0.5)), queue(*policy) {}
  void access(int64_t slot, int64_t step) {
    policy->record_access(usage[slot], step);
    queue.update(slot, usage[slot]);
  }
  std::unique_ptr<EvictionPolicy> policy;
  EvictionQueue queue;
  std::unordered_map<int64_t, RowUsage> usage;
};

TEST(EvictionPolicy, LruEvictsLeastRecent) {
  Fixture f("lru");
  f.access(1, 1);
  f.access(2, 2);
  f.access(3, 3);
  f.access(1, 4);
  EXPECT_EQ(f.queue.peek_victim(), 2);
  f.queue.erase(2);  // pinned
  EXPECT_EQ(f.queue.peek_victim(), 3);
}

TEST(EvictionPolicy, LfuEvictsLeastFrequentThenOldest) {
  Fixture f("lfu");
  for (int s = 1; s <= 3; ++s) f.access(1, s);
  f.access(2, 4);
  f.access(2, 5);
  f.access(3, 6);
  f.access(4, 7);
  EXPECT_EQ(f.queue.peek_victim(), 3);  // 3 and 4 have one access; 3 is older
}

TEST(EvictionPolicy, LfuDecayForgetsOldPopularity) {
  Fixture f("lfu_decay");  // decay 0.5 per step
  for (int s = 1; s <= 4; ++s) f.access(1, s);  // popular long ago
  f.access(2, 20);
  f.access(2, 21);
  // Row 1's count has decayed to ~2 * 0.5^17; row 2 is the one to keep.
  EXPECT_EQ(f.queue.peek_victim(), 1);
  Fixture plain("lfu");
  for (int s = 1; s <= 4; ++s) plain.access(1, s);
  plain.access(2, 20);
  plain.access(2, 21);
  EXPECT_EQ(plain.queue.peek_victim(), 2);  // without decay the old row stays
}

TEST(EvictionPolicy, LookaheadEvictsFurthestNextUseThenLeastFrequent) {
  Fixture f("lookahead");
  f.access(1, 1);
  f.access(2, 1);
  f.access(3, 1);
  f.access(3, 2);
  f.usage[1].next_use = 10;
  f.usage[2].next_use = 5;
  f.queue.update(1, f.usage[1]);
  f.queue.update(2, f.usage[2]);
  f.queue.update(3, f.usage[3]);  // no known next use
  EXPECT_EQ(f.queue.peek_victim(), 3);
  f.queue.erase(3);
  EXPECT_EQ(f.queue.peek_victim(), 1);
  f.access(4, 3);  // no next use, frequency 1: leaves before 1
  EXPECT_EQ(f.queue.peek_victim(), 4);
}

TEST(EvictionPolicy, LookaheadRowsWithoutAUseLeaveOldestFirstAmongEqualCounts) {
  Fixture f("lookahead");
  for (int64_t slot : {7, 3, 5}) {
    f.usage[slot].frequency = 2;
    f.queue.update(slot, f.usage[slot]);
  }
  f.usage[9].frequency = 2.5;  // not a whole count: the heap, after the count-2 rows
  f.queue.update(9, f.usage[9]);
  for (int64_t expected : {7, 3, 5, 9}) {
    EXPECT_EQ(f.queue.peek_victim(), expected);
    f.queue.erase(expected);
  }
  EXPECT_EQ(f.queue.peek_victim(), -1);
}

// Random updates, erases and rounds: the victim is always one the rule allows
// (no known use and least frequent, else the furthest next use), and size()
// counts the rows, however many stale items the lists carry.
TEST(EvictionPolicy, LookaheadVictimFollowsTheRuleUnderRandomUpdates) {
  auto policy = make_eviction_policy("lookahead");
  EvictionQueue queue(*policy);
  constexpr int64_t kSlots = 500;
  queue.reserve(kSlots);
  std::unordered_map<int64_t, RowUsage> live;
  std::mt19937_64 rng(7);
  int64_t now = 0;
  for (int step = 0; step < 40000; ++step) {
    const int64_t slot = int64_t(rng() % kSlots);
    const int op = int(rng() % 10);
    if (op < 6) {
      RowUsage u;
      u.frequency = (rng() % 4 == 0) ? double(rng() % 100) + 0.5 : double(rng() % 80);
      u.next_use = (rng() % 3 == 0) ? INT64_MAX : now - 3 + int64_t(rng() % 203);
      queue.update(slot, u);
      live[slot] = u;
    } else if (op < 9) {
      queue.erase(slot);
      live.erase(slot);
    } else {
      now += 1;
      queue.set_now(now);
    }
    ASSERT_EQ(queue.size(), live.size());
    const int64_t victim = queue.peek_victim();
    if (live.empty()) {
      ASSERT_EQ(victim, -1);
      continue;
    }
    ASSERT_TRUE(live.count(victim)) << "step " << step;
    double least = INFINITY;
    int64_t furthest = INT64_MIN;
    for (const auto& [s, u] : live) {
      if (u.next_use == INT64_MAX) least = std::min(least, u.frequency);
      if (u.next_use != INT64_MAX && u.next_use >= now) furthest = std::max(furthest, u.next_use);
    }
    const RowUsage& chosen = live[victim];
    if (least != INFINITY) {
      ASSERT_EQ(chosen.next_use, INT64_MAX) << "step " << step;
      ASSERT_EQ(chosen.frequency, least) << "step " << step;
    } else if (furthest != INT64_MIN) {
      ASSERT_EQ(chosen.next_use, furthest) << "step " << step;
    } else {
      ASSERT_LT(chosen.next_use, now) << "step " << step;  // only past uses left: any of them
    }
  }
}

TEST(EvictionPolicy, UnknownNameIsAClearError) {
  try {
    make_eviction_policy("fifo");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("store.policy"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("lookahead"), std::string::npos);
  }
}

}  // namespace
}  // namespace strata::store
