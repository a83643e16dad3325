// The L1 directory's look-ahead bookkeeping: the ring of known rounds against a
// plain set, and next uses far beyond 64 rounds (the horizon the default deck uses).
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "common/error.hpp"
#include "store/eviction_policy.hpp"
#include "store/l1_directory.hpp"

namespace strata::store {
namespace {

TEST(RoundMask, FindsTheNextRoundLikeASetOverASlidingWindow) {
  RoundMask mask;
  std::set<int64_t> reference;
  std::mt19937_64 rng(11);
  const int64_t window = RoundMask::kBits - 1;
  for (int64_t now = 0; now < 5000; ++now) {
    // Retire `now - 1`, then learn uses up to now + window - 1 (never more than 256 known).
    mask.clear(now - 1);
    reference.erase(now - 1);
    const int64_t newest = now + window - 1;
    if (rng() % 3 == 0) mask.set(newest), reference.insert(newest);
    for (int64_t asked : {now - 1, now, now + 63, now + 64, now + 127, now + 200}) {
      if (asked >= newest) continue;
      auto next = reference.upper_bound(asked);
      const int64_t expected = next == reference.end() ? INT64_MAX : *next;
      ASSERT_EQ(mask.next_after(asked), expected) << "now " << now << ", after " << asked;
    }
    ASSERT_EQ(mask.empty(), reference.empty());
  }
}

TEST(L1Directory, SeesUsesFarBeyondSixtyFourRounds) {
  auto policy = make_eviction_policy("lookahead");
  L1Directory directory(/*owner=*/0, /*capacity_rows=*/16, /*row_bytes=*/64, *policy);
  const RowId far{1, 42}, near{1, 7};
  for (int64_t round = 0; round < 200; ++round) {
    std::vector<RowId> rows;
    if (round == 0 || round == 190) rows.push_back(far);
    if (round == 0 || round == 3) rows.push_back(near);
    directory.add_round(round, rows);
  }
  EXPECT_EQ(directory.next_use(far), 0);
  StagingPlan plan = directory.plan(0, /*depth=*/1);
  EXPECT_EQ(plan.insert.size(), 2u);
  directory.plan(1, 1);
  EXPECT_EQ(directory.next_use(near), 3);
  EXPECT_EQ(directory.next_use(far), 190);
}

TEST(L1Directory, RefusesMoreKnownRoundsThanItTracks) {
  auto policy = make_eviction_policy("lookahead");
  L1Directory directory(0, 16, 64, *policy);
  for (int64_t round = 0; round < L1Directory::kMaxKnownRounds; ++round) directory.add_round(round, std::vector<RowId>{});
  EXPECT_THROW(directory.add_round(L1Directory::kMaxKnownRounds, std::vector<RowId>{}), Error);
}

}  // namespace
}  // namespace strata::store
