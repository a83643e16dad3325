// ExpertRouter: the gate of a mixture of experts. From each sample's gate logits it
// takes the softmax, picks the top-k experts (k = 1 as Switch, k = 2 as GShard with
// the two weights renormalised), applies the capacity of every expert within one
// trainer's batch, and gives the load-balancing loss (Switch: E * sum_e f_e P_e, f_e
// the share of samples whose first choice is e, P_e the mean gate probability) and
// the backward of all of it to the gate logits.
//
// Everything is per sample except the capacity and the balancing loss, which see
// the whole batch of one trainer: a trainer's batch routes the same whatever the
// expert-parallel layout, so the layout cannot change which samples are dropped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata::model {

class ExpertRouter {
 public:
  // capacity_factor 0 = dropless. Needs 1 <= top_k <= 2 and top_k <= num_experts.
  ExpertRouter(int num_experts, int top_k, double capacity_factor);

  int num_experts() const { return experts_; }
  int top_k() const { return k_; }
  // Slots of one expert in a batch of `batch` samples: ceil(factor * batch * k / E),
  // or the batch size when dropless.
  int capacity(int batch) const;

  // logits (batch, E) -> the routing below. First choices claim capacity before
  // second choices; within a choice, samples in batch order.
  void route(int batch, const float* logits);

  int batch() const { return batch_; }
  const float* probs() const { return probs_.data(); }  // (batch, E) softmax of the logits
  int expert(int b, int j) const { return choice_[size_t(b) * k_ + j]; }  // j-th choice of sample b
  float weight(int b, int j) const { return weight_[size_t(b) * k_ + j]; }  // its combine weight
  bool kept(int b, int j) const { return kept_[size_t(b) * k_ + j] != 0; }  // within capacity
  const std::vector<int64_t>& routed() const { return routed_; }  // (E) choices of each expert
  const std::vector<int64_t>& accepted() const { return accepted_; }  // (E) of those, within capacity

  // The balancing loss of the routed batch (unweighted): E * sum_e f_e P_e; 1 when balanced.
  double balance_loss() const;

  // dweights (batch, k): d loss / d combine weight of each choice (0 for a dropped one).
  // dlogits (batch, E) overwritten: through the renormalisation and the softmax, plus
  // the gradient of balance_scale * batch * balance_loss() (f_e held constant, as in
  // Switch): with balance_scale = weight * loss_scale the balancing loss counts like
  // batch samples' losses, so that it weighs the same in every trainer count.
  void backward(const float* dweights, float balance_scale, float* dlogits) const;

 private:
  int experts_;
  int k_;
  double capacity_factor_;
  int batch_ = 0;
  std::vector<float> probs_;      // (batch, E)
  std::vector<int32_t> choice_;   // (batch, k)
  std::vector<float> weight_;     // (batch, k)
  std::vector<uint8_t> kept_;     // (batch, k)
  std::vector<int64_t> routed_;   // (E)
  std::vector<int64_t> accepted_; // (E)
  std::vector<int64_t> first_;    // (E) samples whose first choice is e (f_e * batch)
};

}  // namespace strata::model
