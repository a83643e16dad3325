// The L1 directory's plans executed by a real L1DeviceTier, over random rounds
// of requests from several trainers: every served slot holds the row its
// requester asked for, no row in the window is ever evicted, dirty rows come
// back when evicted, and the staging message carries the plan unchanged.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "common/error.hpp"
#include "model/optimizers.hpp"
#include "store/eviction_policy.hpp"
#include "store/l1_device_tier.hpp"
#include "store/l1_directory.hpp"
#include "store/staging_message.hpp"

namespace strata::store {
namespace {

constexpr int kDim = 4;

std::unique_ptr<model::SparseOptimizer> adagrad() {
  OptimizerOptions o;
  o.sparse = "adagrad";
  o.sparse_lr = 0.1;
  return model::make_sparse_optimizer(o);
}

// A recognisable row: every value is a function of the id.
void fill_row(const RowId& id, float* row, int width) {
  for (int j = 0; j < width; ++j) row[j] = float(id.table * 1000 + id.key % 997) + 0.001f * float(j);
}

OwnerRequests random_round(std::mt19937_64& rng, int requesters, int per_requester, uint64_t keys) {
  OwnerRequests r;
  r.offsets = {0};
  for (int t = 0; t < requesters; ++t) {
    std::set<RowId> mine;  // each requester asks once per row (its batch is de-duplicated)
    while (static_cast<int>(mine.size()) < per_requester) {
      // Skewed: low keys are hot, as in Zipf data.
      const uint64_t k = uint64_t(std::pow(double(rng() % 1000000) / 1e6, 3.0) * double(keys));
      mine.insert({uint32_t(k % 3), k});
    }
    r.ids.insert(r.ids.end(), mine.begin(), mine.end());
    r.offsets.push_back(static_cast<int32_t>(r.ids.size()));
  }
  return r;
}

void run_plans(const std::string& policy_name, int64_t capacity, int depth, int horizon, int per_requester = 20) {
  auto policy = make_eviction_policy(policy_name);
  AccessHistory history(1 << 12, 1 << 14);
  L1Directory directory(0, capacity, 8 * kDim * 4, *policy, &history);
  L1DeviceTier l1(capacity, kDim, adagrad());
  const int width = l1.width();
  std::mt19937_64 rng(17);
  const int rounds = 300, requesters = 3;
  std::vector<OwnerRequests> all;
  for (int r = 0; r < rounds; ++r) all.push_back(random_round(rng, requesters, per_requester, 400));
  int64_t added = 0;
  std::map<RowId, int> written_back;
  int64_t evicted = 0, inserted = 0;
  StagingPlan plan;
  for (int64_t r = 0; r < rounds; ++r) {
    while (added < rounds && added <= r + depth + horizon) {
      directory.add_round(added, all[added]);
      ++added;
    }
    directory.plan(r, depth, plan);
    // Through the wire, as the trainer gets it.
    std::vector<char> message;
    StagingWriter writer(message, r, false, width);
    writer.evict_slots(plan.evict_slots);
    writer.reserve_inserts(plan.insert.size());
    writer.serve(plan.serve_offsets, plan.serve_slots);
    std::copy(plan.insert_slots.begin(), plan.insert_slots.end(), writer.insert_slots());
    std::copy(plan.insert.begin(), plan.insert.end(), writer.insert_ids());
    for (size_t i = 0; i < plan.insert.size(); ++i) {
      fill_row(plan.insert[i], writer.insert_values() + i * width, width);
      writer.insert_dirty()[i] = 0;
    }
    const double stats[kProducerStats] = {};
    writer.finish(stats, "");
    const StagingView view = read_staging(message.data(), message.size());
    ASSERT_EQ(view.round, r);
    ASSERT_EQ(view.evict_slots.size, plan.evict_slots.size());
    ASSERT_EQ(view.serve_slots.size, plan.serve_slots.size());
    // Rows of the window are never evicted.
    std::set<RowId> window;
    for (int64_t w = r; w <= std::min<int64_t>(r + depth, rounds - 1); ++w) window.insert(all[w].ids.begin(), all[w].ids.end());
    for (const RowId& id : plan.evict) ASSERT_EQ(window.count(id), 0u) << "round " << r << " evicted a pinned row";
    RowBlock back;
    l1.apply(view, back);
    for (const RowId& id : back.ids) written_back[id] += 1;
    evicted += int64_t(plan.evict.size());
    inserted += int64_t(plan.insert.size());
    ASSERT_LE(l1.size(), capacity);
    ASSERT_EQ(l1.size(), directory.size());
    // Every requester finds its rows where the plan says.
    const OwnerRequests& req = all[r];
    ASSERT_EQ(view.serve_offsets.size, size_t(requesters + 1));
    for (size_t i = 0; i < req.ids.size(); ++i) {
      const int32_t slot = view.serve_slots[i];
      ASSERT_TRUE(l1.holds(slot));
      ASSERT_EQ(l1.id(slot), req.ids[i]) << "round " << r << " request " << i;
    }
    // A step touches every served row: they become dirty and must come back when evicted.
    std::vector<float> grad(kDim, 0.5f);
    for (size_t i = 0; i < req.ids.size(); ++i) l1.add_gradient(view.serve_slots[i], grad.data());
    l1.apply_step();
  }
  EXPECT_GT(evicted, 0) << "the budget never forced an eviction";
  // Every evicted row was dirty (every row is updated in the round that needs it).
  int64_t back_total = 0;
  for (const auto& [id, n] : written_back) back_total += n;
  EXPECT_EQ(back_total, evicted);
  EXPECT_GE(inserted, evicted);
}

TEST(L1Plans, ServedSlotsHoldTheRequestedRowsUnderEveryPolicy) {
  for (const std::string& policy : eviction_policy_names()) {
    SCOPED_TRACE(policy);
    run_plans(policy, /*capacity=*/200, /*depth=*/2, /*horizon=*/16);
  }
}

TEST(L1Plans, DeepWindowsAndLongHorizons) { run_plans("lookahead", 300, 8, 128, 10); }

TEST(L1Plans, AWindowLargerThanTheBudgetIsAClearError) {
  auto policy = make_eviction_policy("lru");
  L1Directory directory(3, /*capacity_rows=*/10, 64, *policy);
  std::mt19937_64 rng(1);
  directory.add_round(0, random_round(rng, 2, 8, 1000));
  try {
    directory.plan(0, 0);
    FAIL() << "a 16-row round fit a 10-row L1";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("trainer 3"), std::string::npos) << e.what();
    EXPECT_NE(e.how_to_fix().find("store.l1_mb"), std::string::npos) << e.how_to_fix();
  }
}

TEST(L1DeviceTier, RefusesSlotsThePlanCouldNotHaveMade) {
  L1DeviceTier l1(4, kDim, adagrad());
  std::vector<char> message;
  StagingWriter writer(message, 0, false, l1.width());
  writer.evict_slots({});
  writer.reserve_inserts(1);
  writer.serve({}, {});
  writer.insert_slots()[0] = 7;  // outside the 4-row arena
  writer.insert_ids()[0] = RowId{0, 1};
  writer.insert_dirty()[0] = 0;
  std::fill(writer.insert_values(), writer.insert_values() + l1.width(), 0.0f);
  const double stats[kProducerStats] = {};
  writer.finish(stats, "");
  RowBlock back;
  EXPECT_THROW(l1.apply(read_staging(message.data(), message.size()), back), Error);
  const int32_t empty = 2;
  float out[kDim];
  EXPECT_THROW(l1.gather(&empty, 1, out), Error);
}

TEST(StagingMessage, TruncatedOrInconsistentMessagesAreErrors) {
  std::vector<char> message;
  StagingWriter writer(message, 5, false, 8);
  writer.evict_slots({1, 2});
  writer.reserve_inserts(2);
  writer.serve({0, 1, 2}, {3, 4});
  for (int i = 0; i < 2; ++i) writer.insert_slots()[i] = i, writer.insert_ids()[i] = RowId{0, uint64_t(i)},
                              writer.insert_dirty()[i] = 1;
  std::fill(writer.insert_values(), writer.insert_values() + 16, 1.0f);
  const double stats[kProducerStats] = {};
  writer.finish(stats, "note");
  const StagingView v = read_staging(message.data(), message.size());
  EXPECT_EQ(v.note, "note");
  EXPECT_EQ(v.serve_slots[1], 4);
  for (size_t n = 0; n < message.size(); n += 8) EXPECT_THROW(read_staging(message.data(), n), Error) << n;
}

}  // namespace
}  // namespace strata::store
