// Evaluation metrics: exact ROC AUC (ties count one half), mean log loss, and the
// ranking metrics of next-item models (HR@k, NDCG@k).
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::model {

// Area under the ROC curve from the ranks of the scores (O(n log n) sort): the
// probability that a random positive scores above a random negative, a tie counting
// one half. A label > 0.5 is positive. Returns 0.5 when only one class is present (or
// n == 0): the AUC is undefined there and 0.5 is "no information". NaN scores rank lowest.
double exact_auc(const float* probs, const float* labels, size_t n);

// -mean(y log p + (1 - y) log(1 - p)) with p clamped to [1e-7, 1 - 1e-7], in double;
// 0 for n == 0. Labels may be soft (any value in [0, 1]).
double mean_logloss(const float* probs, const float* labels, size_t n);

// Rank of the target (scores[0]) among its candidates scores[0, n): how many others
// score at least as high, so ties count against the target (a model that scores
// everything alike ranks last, not first). NaN scores rank lowest.
int64_t target_rank(const float* scores, size_t n);

// Sums over samples of the hit (rank < k) and of NDCG@k (1 / log2(rank + 2) when
// rank < k, else 0): divide by the sample count for HR@k and NDCG@k.
struct RankingSums {
  double hits = 0;
  double ndcg = 0;
  int64_t samples = 0;
  void add(int64_t rank, int k);
};

}  // namespace strata::model
