// BceLoss: sigmoid + binary cross-entropy on logits, numerically stable, with the
// per-sample losses summed in double in sample order.
#pragma once

#include <vector>

namespace strata::model {

class BceLoss {
 public:
  // logits, labels (batch). dlogits (batch) = loss_scale * d(sample loss)/d logit.
  // Returns the unscaled sum of the sample losses.
  double forward_backward(int batch, const float* logits, const float* labels, float loss_scale,
                          float* dlogits);

 private:
  std::vector<double> losses_;  // (batch) per-sample losses
};

}  // namespace strata::model
