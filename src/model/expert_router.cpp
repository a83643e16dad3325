// ExpertRouter: softmax in double per sample, top-k by value (the lower expert on a
// tie), capacity in priority order, and the backward of the combine weights.
#include "model/expert_router.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.hpp"

namespace strata::model {

ExpertRouter::ExpertRouter(int num_experts, int top_k, double capacity_factor)
    : experts_(num_experts), k_(top_k), capacity_factor_(capacity_factor) {
  if (num_experts < 1 || top_k < 1 || top_k > 2 || top_k > num_experts || !(capacity_factor >= 0)) {
    throw Error("expert router: " + std::to_string(num_experts) + " experts, top_k " + std::to_string(top_k) +
                    ", capacity factor " + std::to_string(capacity_factor),
                "model.top_k must be 1 or 2 and at most model.num_experts; model.capacity_factor >= 0");
  }
}

int ExpertRouter::capacity(int batch) const {
  if (capacity_factor_ <= 0) return batch;
  return int(std::ceil(capacity_factor_ * double(batch) * k_ / experts_));
}

void ExpertRouter::route(int batch, const float* logits) {
  const size_t E = size_t(experts_), K = size_t(k_);
  batch_ = batch;
  probs_.resize(size_t(batch) * E);
  choice_.resize(size_t(batch) * K);
  weight_.resize(size_t(batch) * K);
  kept_.assign(size_t(batch) * K, 0);
  routed_.assign(E, 0);
  accepted_.assign(E, 0);
  first_.assign(E, 0);
  for (int b = 0; b < batch; ++b) {
    const float* l = logits + size_t(b) * E;
    float* p = probs_.data() + size_t(b) * E;
    const float top = *std::max_element(l, l + E);
    double sum = 0.0;
    for (size_t e = 0; e < E; ++e) sum += std::exp(double(l[e]) - double(top));
    for (size_t e = 0; e < E; ++e) p[e] = float(std::exp(double(l[e]) - double(top)) / sum);
    int best = 0;
    for (int e = 1; e < experts_; ++e) best = p[e] > p[best] ? e : best;
    choice_[size_t(b) * K] = best;
    if (k_ == 1) {
      weight_[size_t(b)] = p[best];
    } else {
      int second = best == 0 ? 1 : 0;
      for (int e = 0; e < experts_; ++e) second = e != best && p[e] > p[second] ? e : second;
      choice_[size_t(b) * K + 1] = second;
      const float both = p[best] + p[second];
      weight_[size_t(b) * K] = p[best] / both;
      weight_[size_t(b) * K + 1] = p[second] / both;
    }
    first_[size_t(best)] += 1;
  }
  const int slots = capacity(batch);
  for (int j = 0; j < k_; ++j) {
    for (int b = 0; b < batch; ++b) {
      const size_t at = size_t(b) * K + size_t(j);
      const int e = choice_[at];
      routed_[size_t(e)] += 1;
      if (accepted_[size_t(e)] < slots) {
        accepted_[size_t(e)] += 1;
        kept_[at] = 1;
      }
    }
  }
}

double ExpertRouter::balance_loss() const {
  if (batch_ == 0) return 0.0;
  double loss = 0.0;
  for (int e = 0; e < experts_; ++e) {
    double mean_prob = 0.0;
    for (int b = 0; b < batch_; ++b) mean_prob += probs_[size_t(b) * experts_ + e];
    loss += double(first_[size_t(e)]) / batch_ * (mean_prob / batch_);
  }
  return experts_ * loss;
}

void ExpertRouter::backward(const float* dweights, float balance_scale, float* dlogits) const {
  const size_t E = size_t(experts_), K = size_t(k_);
  std::vector<float> dprobs(E);
  for (int b = 0; b < batch_; ++b) {
    const float* p = probs_.data() + size_t(b) * E;
    // d (batch * balance_loss) / d p_{b,e} = E * f_e = E * first_e / batch.
    for (size_t e = 0; e < E; ++e) dprobs[e] = balance_scale * float(experts_) * float(first_[e]) / float(batch_);
    const int32_t* c = choice_.data() + size_t(b) * K;
    const float* dw = dweights + size_t(b) * K;
    if (k_ == 1) {
      dprobs[size_t(c[0])] += dw[0];
    } else {
      // w1 = p1 / (p1 + p2), w2 = p2 / (p1 + p2).
      const float p1 = p[c[0]], p2 = p[c[1]], both = p1 + p2;
      const float square = both * both;
      dprobs[size_t(c[0])] += (dw[0] - dw[1]) * p2 / square;
      dprobs[size_t(c[1])] += (dw[1] - dw[0]) * p1 / square;
    }
    float dot = 0.0f;
    for (size_t e = 0; e < E; ++e) dot += p[e] * dprobs[e];
    float* dl = dlogits + size_t(b) * E;
    for (size_t e = 0; e < E; ++e) dl[e] = p[e] * (dprobs[e] - dot);
  }
}

}  // namespace strata::model
