// Evaluation metrics: rank-based exact AUC and clamped mean log loss.
#include "model/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace strata::model {

double exact_auc(const float* probs, const float* labels, size_t n) {
  struct Scored {
    float score;
    bool positive;
  };
  std::vector<Scored> items(n);
  size_t positives = 0;
  for (size_t i = 0; i < n; ++i) {
    // NaN would break the sort's ordering; rank it lowest instead.
    const float score = std::isnan(probs[i]) ? -INFINITY : probs[i];
    items[i] = {score, labels[i] > 0.5f};
    positives += items[i].positive ? 1 : 0;
  }
  const size_t negatives = n - positives;
  if (positives == 0 || negatives == 0) return 0.5;
  std::sort(items.begin(), items.end(), [](const Scored& a, const Scored& b) { return a.score < b.score; });
  // Sum of the (1-based, tie-averaged) ranks of the positives: Mann-Whitney U.
  double rank_sum = 0.0;
  size_t i = 0;
  while (i < n) {
    size_t j = i;
    size_t pos_in_group = 0;
    while (j < n && items[j].score == items[i].score) {
      pos_in_group += items[j].positive ? 1 : 0;
      ++j;
    }
    const double mean_rank = 0.5 * (double(i + 1) + double(j));  // ranks i+1 .. j
    rank_sum += mean_rank * double(pos_in_group);
    i = j;
  }
  const double p = double(positives), q = double(negatives);
  return (rank_sum - p * (p + 1.0) / 2.0) / (p * q);
}

double mean_logloss(const float* probs, const float* labels, size_t n) {
  if (n == 0) return 0.0;
  constexpr double kLow = 1e-7, kHigh = 1.0 - 1e-7;
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double p = std::min(std::max(double(probs[i]), kLow), kHigh);
    const double y = labels[i];
    total -= y * std::log(p) + (1.0 - y) * std::log(1.0 - p);
  }
  return total / double(n);
}

int64_t target_rank(const float* scores, size_t n) {
  if (n == 0) return 0;
  const float target = scores[0];
  if (std::isnan(target)) return int64_t(n) - 1;  // below everything
  int64_t rank = 0;
  for (size_t i = 1; i < n; ++i) rank += scores[i] >= target ? 1 : 0;  // NaN compares false: below
  return rank;
}

void RankingSums::add(int64_t rank, int k) {
  ++samples;
  if (rank < k) {
    hits += 1.0;
    ndcg += 1.0 / std::log2(double(rank) + 2.0);
  }
}

}  // namespace strata::model
