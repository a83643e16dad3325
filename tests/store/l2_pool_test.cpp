// L2Pool: first grants fill floors then share the rest up to the caps; a
// decision gives free memory to the member whose ghosts say more would help
// most, moves a step from the member whose held bytes buy least only when the
// gain beats that (and below the donor's first grant only while its L2 is
// idle), keeps every grant within its floor and cap, and the grants in force
// never add up to more than the pool. GhostRows counts misses on
// recently evicted rows only.
#include "store/l2_pool.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>

#include "common/error.hpp"
#include "store/ghost_rows.hpp"

namespace strata::store {
namespace {

constexpr double kMiB = 1048576.0;

// An L1 that will not fill: the rows it could hold.
constexpr int64_t kRoomy = int64_t(1) << 40;

// The bytes of a member whose L2 holds all it is granted.
int64_t full(const L2Pool& member) { return int64_t(member.granted_mb() * kMiB); }

// One window of a member: its ghost hits, L2 hits and samples so far, the bytes
// its L2 holds, its L1's rows and capacity (and 1,000 ghost rows of 1 KiB); then
// it applies the grant it is given.
void report_window(L2Pool& member, uint64_t ghost_hits, uint64_t l2_hits, uint64_t samples, int64_t held_bytes,
                   int64_t l1_rows, int64_t l1_capacity_rows) {
  member.report(ghost_hits, l2_hits, samples, 1000, 1024, held_bytes, l1_rows, l1_capacity_rows);
  member.applied(member.granted_mb());
}

TEST(L2Pool, FirstGrantsFillFloorsThenShareUpToCaps) {
  // 100 MiB; a ps member holds nothing; floors 10 and 0; caps 30 and the whole pool.
  const std::vector<L2PoolMember> members = {{true, 10, 30}, {false, 0, 0}, {true, 0, 0}, {true, 0, 0}};
  const std::vector<double> g = initial_l2_grants(100, members);
  EXPECT_DOUBLE_EQ(g[1], 0);
  EXPECT_NEAR(g[0], 30, 1e-9);  // 10 + an equal share, capped at 30
  EXPECT_NEAR(g[2], 35, 1e-9);
  EXPECT_NEAR(g[3], 35, 1e-9);
  EXPECT_NEAR(g[0] + g[2] + g[3], 100, 1e-9);
  EXPECT_THROW(initial_l2_grants(15, {{true, 10, 0}, {true, 10, 0}}), Error);  // floors above the pool
  EXPECT_THROW(initial_l2_grants(100, {{true, 40, 20}}), Error);               // floor above cap
}

struct Ledger {
  explicit Ledger(double pool_mb, const std::vector<L2PoolMember>& members)
      : memory(static_cast<char*>(std::aligned_alloc(64, (L2Pool::bytes_needed(int(members.size())) + 63) / 64 * 64)),
               &std::free) {
    L2Pool::initialize(memory.get(), pool_mb, members, /*decide_every_s=*/0);
    for (int i = 0; i < int(members.size()); ++i)
      pools.push_back(std::make_unique<L2Pool>(memory.get(), int(members.size()), i));
  }
  std::unique_ptr<char, decltype(&std::free)> memory;
  std::vector<std::unique_ptr<L2Pool>> pools;
};

// Two members a and b of a 100 MiB pool, and b's counters so far.
struct Pair {
  explicit Pair(const std::vector<L2PoolMember>& members)
      : ledger(100, members), a(*ledger.pools[0]), b(*ledger.pools[1]) {}
  // One window in which b's L2 is full and b gains 500 ghost hits and 800 L2 hits
  // (its L1 holding b_l1_rows): report_a() reports a's window first.
  template <class ReportA>
  void window_b_wants_more(ReportA&& report_a, int64_t b_l1_rows = 0) {
    samples += 1000, b_ghosts += 500, b_hits += 800;
    report_a();
    report_window(b, b_ghosts, b_hits, samples, full(b), b_l1_rows, kRoomy);
  }
  Ledger ledger;
  L2Pool& a;
  L2Pool& b;
  uint64_t samples = 0, b_ghosts = 0, b_hits = 0;
};

TEST(L2Pool, MemoryMovesToWhereGhostsHitFromWhereItIsIdle) {
  Pair pair({{true, 0, 0}, {true, 20, 0}});
  L2Pool& a = pair.a;
  L2Pool& b = pair.b;
  EXPECT_NEAR(a.granted_mb(), 40, 1e-6);
  EXPECT_NEAR(b.granted_mb(), 60, 1e-6);
  // a: its L2 is never hit and its ghosts neither; b: its ghosts are hit often.
  for (int step = 0; step < 200; ++step) {
    pair.window_b_wants_more([&] { report_window(a, 0, 0, pair.samples, 0, 0, kRoomy); });
    EXPECT_LE(a.granted_mb() + b.granted_mb(), 100 + 1e-6);
    EXPECT_GE(b.granted_mb(), 20 - 1e-6);
  }
  EXPECT_NEAR(a.granted_mb(), 0, 1e-6);   // all of it moved, in steps
  EXPECT_NEAR(b.granted_mb(), 100, 1e-6);
  EXPECT_GT(a.moves() + b.moves(), 10);
  // A member that leaves returns its grant; nobody decides for it again.
  a.leave();
  EXPECT_EQ(a.granted_mb(), 0);
}

TEST(L2Pool, AMemberThatUsesItsL2KeepsItsFirstGrant) {
  // a's L2 is full and serves 1 hit per 1000 samples, far less per byte than
  // b's ghosts promise: above its first grant it would give memory up, below it
  // not, so a ends no worse off than with a static split.
  Pair pair({{true, 0, 0}, {true, 20, 0}});
  L2Pool& a = pair.a;
  L2Pool& b = pair.b;
  uint64_t a_hits = 0;
  for (int step = 0; step < 200; ++step) {
    pair.window_b_wants_more([&] { report_window(a, 0, a_hits += 1, pair.samples, full(a), 0, kRoomy); });
    EXPECT_GE(a.granted_mb(), 40 - 1e-6);
  }
  EXPECT_NEAR(a.granted_mb(), 40, 1e-6);
  EXPECT_NEAR(b.granted_mb(), 60, 1e-6);
  // Once its L2 empties (its L1 took its rows), that space moves.
  for (int step = 0; step < 200; ++step) {
    pair.window_b_wants_more([&] { report_window(a, 0, a_hits, pair.samples, 0, 0, kRoomy); });
  }
  EXPECT_NEAR(a.granted_mb(), 0, 1e-6);
  EXPECT_NEAR(b.granted_mb(), 100, 1e-6);
  // When it fills again and its ghosts say it needs more, it takes memory back
  // up to its first grant, though b's gain is larger.
  uint64_t a_ghosts = 0;
  for (int step = 0; step < 200; ++step) {
    pair.window_b_wants_more(
        [&] { report_window(a, a_ghosts += 5, a_hits += 5, pair.samples, full(a), 0, kRoomy); });
    EXPECT_LE(a.granted_mb() + b.granted_mb(), 100 + 1e-6);
  }
  EXPECT_NEAR(a.granted_mb(), 40, 1e-6);
  EXPECT_NEAR(b.granted_mb(), 60, 1e-6);
}

TEST(L2Pool, AnEmptyL2WhoseL1FillsSoonIsNotLent) {
  // a's L2 is empty only because its L1 (30,000 rows) has not filled yet: at
  // 1,000 more rows a window it fills within 40 windows and will then evict
  // into the L2, so its space stays. Once its L1 holds steady with room to
  // spare, the empty space moves.
  Pair pair({{true, 0, 0}, {true, 0, 0}});
  L2Pool& a = pair.a;
  L2Pool& b = pair.b;
  int64_t a_l1_rows = 1000;
  for (int step = 0; step < 125; ++step) {
    if (step < 25) a_l1_rows += 1000;  // then it holds steady
    pair.window_b_wants_more([&] { report_window(a, 0, 0, pair.samples, 0, a_l1_rows, 30000); }, 5000);
    if (step < 25) EXPECT_NEAR(a.granted_mb(), 50, 1e-6);
  }
  EXPECT_NEAR(a.granted_mb(), 0, 1e-6);
  EXPECT_NEAR(b.granted_mb(), 100, 1e-6);
}

TEST(L2Pool, NoMoveWhenTheGainDoesNotBeatWhatTheBytesBuy) {
  Pair pair({{true, 0, 0}, {true, 0, 0}});
  L2Pool& a = pair.a;
  L2Pool& b = pair.b;
  uint64_t samples = 0, a_hits = 0, b_ghosts = 0;
  for (int step = 0; step < 50; ++step) {
    // a's 50 MiB buy 200 hits per 1000 samples; b's 1000 ghost rows of 1 KiB would buy 1.
    samples += 1000, a_hits += 200, b_ghosts += 1;
    a.report(0, a_hits, samples, 1000, 1024, full(a), 0, kRoomy);
    b.report(b_ghosts, 0, samples, 1000, 1024, full(b), 0, kRoomy);
  }
  EXPECT_NEAR(a.granted_mb(), 50, 1e-6);
  EXPECT_NEAR(b.granted_mb(), 50, 1e-6);
}

TEST(L2Pool, CapsAndFloorsHold) {
  Pair pair({{true, 30, 0}, {true, 0, 55}});
  L2Pool& a = pair.a;
  L2Pool& b = pair.b;
  uint64_t samples = 0, b_ghosts = 0;
  for (int step = 0; step < 200; ++step) {
    samples += 1000, b_ghosts += 900;
    report_window(a, 0, 0, samples, 0, 0, kRoomy);
    report_window(b, b_ghosts, 0, samples, full(b), 0, kRoomy);
  }
  EXPECT_GE(a.granted_mb(), 30 - 1e-6);
  EXPECT_LE(b.granted_mb(), 55 + 1e-6);
  EXPECT_NEAR(b.granted_mb(), 55, 5.0 + 1e-6);  // within a step of its cap
}

TEST(L2Pool, AGrantIsGivenOnlyOnceTheDonorHasShrunk) {
  Pair pair({{true, 0, 0}, {true, 0, 0}});
  L2Pool& a = pair.a;
  L2Pool& b = pair.b;
  uint64_t samples = 0;
  for (int step = 1; step <= 20; ++step) {
    samples += 1000;
    a.report(0, 0, samples, 1000, 1024, 0, 0, kRoomy);  // a never applies what it is granted
    report_window(b, uint64_t(step) * 900, 0, samples, full(b), 0, kRoomy);
  }
  // a was lowered once; its bytes are still held, so b got nothing yet.
  EXPECT_LT(a.granted_mb(), 50);
  EXPECT_NEAR(b.granted_mb(), 50, 1e-6);
  a.applied(a.granted_mb());
  samples += 1000;
  b.report(21 * 900, 0, samples, 1000, 1024, full(b), 0, kRoomy);
  EXPECT_GT(b.granted_mb(), 50);
}

TEST(GhostRows, CountsMissesOnRecentVictimsOnly) {
  GhostRows ghosts(3);
  ghosts.evicted({0, 1});
  ghosts.evicted({0, 2});
  ghosts.missed({0, 1});
  ghosts.missed({1, 1});  // another table
  EXPECT_EQ(ghosts.hits(), 1u);
  ghosts.evicted({0, 3});
  ghosts.evicted({0, 4});  // pushes key 1 out
  ghosts.missed({0, 1});
  ghosts.missed({0, 4});
  EXPECT_EQ(ghosts.hits(), 2u);
  ghosts.evicted({0, 4});  // twice in the ring: still there after one leaves
  ghosts.evicted({0, 5});
  ghosts.evicted({0, 6});
  ghosts.missed({0, 4});
  EXPECT_EQ(ghosts.hits(), 3u);
}

}  // namespace
}  // namespace strata::store
