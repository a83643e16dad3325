// Evaluation metrics: exact ROC AUC (ties count one half) and mean log loss.
#pragma once

#include <cstddef>

namespace strata::model {

double exact_auc(const float* probs, const float* labels, size_t n);
double mean_logloss(const float* probs, const float* labels, size_t n);

}  // namespace strata::model
