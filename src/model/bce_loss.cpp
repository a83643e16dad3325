// BceLoss: per-sample losses from the host kernel, then one sequential sum so that the
// total does not depend on the thread count.
#include "model/bce_loss.hpp"

#include "backend/dense_kernels.hpp"
#include "backend/embedding_kernels.hpp"

namespace strata::model {

double BceLoss::forward_backward(int batch, const float* logits, const float* labels,
                                 float loss_scale, float* dlogits) {
  if (batch <= 0) return 0.0;
  if (losses_.size() < size_t(batch)) losses_.resize(batch);
  backend::bce_with_logits(batch, logits, labels, loss_scale, losses_.data(), dlogits);
  double total = 0.0;
  for (int b = 0; b < batch; ++b) total += losses_[b];
  return total;
}

}  // namespace strata::model
