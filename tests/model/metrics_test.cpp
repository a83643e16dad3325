// exact_auc and mean_logloss against hand cases and a brute-force pair count.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/rng.hpp"
#include "model/metrics.hpp"

using namespace strata::model;

namespace {

double auc(const std::vector<float>& p, const std::vector<float>& y) { return exact_auc(p.data(), y.data(), p.size()); }

// P(score of a positive > score of a negative), ties one half: O(n^2).
double brute_force_auc(const std::vector<float>& p, const std::vector<float>& y) {
  double wins = 0.0, pairs = 0.0;
  for (size_t i = 0; i < p.size(); ++i)
    for (size_t j = 0; j < p.size(); ++j)
      if (y[i] > 0.5f && y[j] <= 0.5f) {
        pairs += 1.0;
        wins += p[i] > p[j] ? 1.0 : (p[i] == p[j] ? 0.5 : 0.0);
      }
  return wins / pairs;
}

}  // namespace

TEST(ExactAuc, HandCases) {
  EXPECT_DOUBLE_EQ(auc({0.1f, 0.4f, 0.35f, 0.8f}, {0, 0, 1, 1}), 0.75);
  EXPECT_DOUBLE_EQ(auc({0.1f, 0.2f, 0.8f, 0.9f}, {0, 0, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(auc({0.9f, 0.8f, 0.2f, 0.1f}, {0, 0, 1, 1}), 0.0);
  // Ties count one half: pairs (0.5+, 0.5-) = 1/2, the other three are wins -> 3.5 / 4.
  EXPECT_DOUBLE_EQ(auc({0.5f, 0.5f, 0.2f, 0.8f}, {1, 0, 0, 1}), 0.875);
  // Everything tied: 0.5.
  EXPECT_DOUBLE_EQ(auc({0.3f, 0.3f, 0.3f}, {1, 0, 1}), 0.5);
}

TEST(ExactAuc, OneClassOrEmptyGivesOneHalf) {
  EXPECT_EQ(auc({0.1f, 0.7f, 0.3f}, {1, 1, 1}), 0.5);
  EXPECT_EQ(auc({0.1f, 0.7f, 0.3f}, {0, 0, 0}), 0.5);
  EXPECT_EQ(exact_auc(nullptr, nullptr, 0), 0.5);
}

TEST(ExactAuc, MatchesBruteForceWithManyTies) {
  strata::CounterRng rng(99);
  std::vector<float> p(700), y(700);
  for (size_t i = 0; i < p.size(); ++i) {
    p[i] = float(rng.next() % 20) / 20.0f;  // heavy ties
    y[i] = rng.uniform() < 0.3 + 0.5 * p[i] ? 1.0f : 0.0f;
  }
  EXPECT_NEAR(auc(p, y), brute_force_auc(p, y), 1e-12);
}

TEST(MeanLogloss, HandCasesAndClamping) {
  const std::vector<float> p = {0.9f, 0.2f}, y = {1, 0};
  EXPECT_NEAR(mean_logloss(p.data(), y.data(), 2), -(std::log(0.9f) + std::log(0.8f)) / 2, 1e-7);  // 0.16425
  // p = 0 with label 1 and p = 1 with label 0 are clamped to 1e-7 away: -log(1e-7) each.
  const std::vector<float> q = {0.0f, 1.0f}, z = {1, 0};
  EXPECT_NEAR(mean_logloss(q.data(), z.data(), 2), -std::log(1e-7), 1e-6);
  EXPECT_TRUE(std::isfinite(mean_logloss(q.data(), z.data(), 2)));
  // Perfect predictions cost only the clamping.
  const std::vector<float> r = {1.0f, 0.0f}, x = {1, 0};
  EXPECT_NEAR(mean_logloss(r.data(), x.data(), 2), 1e-7, 1e-9);
  EXPECT_EQ(mean_logloss(nullptr, nullptr, 0), 0.0);
}

TEST(TargetRank, CountsEveryCandidateAtLeastAsHigh) {
  const std::vector<float> best = {0.9f, 0.1f, 0.5f, -2.0f};
  EXPECT_EQ(target_rank(best.data(), best.size()), 0);
  const std::vector<float> third = {0.4f, 0.5f, 0.1f, 0.7f};
  EXPECT_EQ(target_rank(third.data(), third.size()), 2);
  // Ties count against the target: a constant model ranks last, not first.
  const std::vector<float> flat(101, 0.25f);
  EXPECT_EQ(target_rank(flat.data(), flat.size()), 100);
  // NaN: a NaN target is below everything, a NaN candidate below the target.
  const float nan = std::nanf("");
  const std::vector<float> nan_target = {nan, 0.1f, 0.2f};
  EXPECT_EQ(target_rank(nan_target.data(), 3), 2);
  const std::vector<float> nan_other = {0.1f, nan, 0.2f};
  EXPECT_EQ(target_rank(nan_other.data(), 3), 1);
  EXPECT_EQ(target_rank(best.data(), 1), 0);
}

TEST(RankingSums, HitRateAndNdcgAtK) {
  RankingSums sums;
  sums.add(0, 10);   // hit, NDCG 1
  sums.add(1, 10);   // hit, NDCG 1 / log2(3)
  sums.add(9, 10);   // hit, NDCG 1 / log2(11)
  sums.add(10, 10);  // miss
  EXPECT_EQ(sums.samples, 4);
  EXPECT_DOUBLE_EQ(sums.hits, 3.0);
  EXPECT_NEAR(sums.ndcg, 1.0 + 1.0 / std::log2(3.0) + 1.0 / std::log2(11.0), 1e-12);
}
