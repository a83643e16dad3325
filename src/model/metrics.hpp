// Evaluation metrics: exact ROC AUC (ties count one half) and mean log loss.
#pragma once

#include <cstddef>

namespace strata::model {

// Area under the ROC curve from the ranks of the scores (O(n log n) sort): the
// probability that a random positive scores above a random negative, a tie counting
// one half. A label > 0.5 is positive. Returns 0.5 when only one class is present (or
// n == 0): the AUC is undefined there and 0.5 is "no information". NaN scores rank lowest.
double exact_auc(const float* probs, const float* labels, size_t n);

// -mean(y log p + (1 - y) log(1 - p)) with p clamped to [1e-7, 1 - 1e-7], in double;
// 0 for n == 0. Labels may be soft (any value in [0, 1]).
double mean_logloss(const float* probs, const float* labels, size_t n);

}  // namespace strata::model
