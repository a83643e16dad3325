// Mlp: forward keeps every layer's output; backward walks the layers in reverse with two
// ping-pong gradient buffers.
#include "model/mlp.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace strata::model {

Mlp::Mlp(DenseParameters& params, const std::string& prefix, int in, const std::vector<int>& widths,
         bool relu_last)
    : in_(in) {
  int prev = in;
  for (size_t l = 0; l < widths.size(); ++l) {
    const bool last = l + 1 == widths.size();
    const Activation act = (!last || relu_last) ? Activation::kRelu : Activation::kNone;
    layers_.emplace_back(params, prefix + "." + std::to_string(l), prev, widths[l], act);
    prev = widths[l];
    max_width_ = std::max(max_width_, widths[l]);
  }
  max_width_ = std::max(max_width_, in);
  acts_.resize(layers_.size());
}

void Mlp::init(DenseParameters& params, uint64_t seed) const {
  for (const Linear& layer : layers_) layer.init(params, seed);
}

void Mlp::reserve(int batch) {
  if (batch <= capacity_) return;
  for (size_t l = 0; l < layers_.size(); ++l) acts_[l].resize(size_t(batch) * layers_[l].out());
  grad_a_.resize(size_t(batch) * max_width_);
  grad_b_.resize(size_t(batch) * max_width_);
  capacity_ = batch;
}

const float* Mlp::forward(const DenseParameters& params, const float* x, int batch) {
  reserve(batch);
  const float* input = x;
  for (size_t l = 0; l < layers_.size(); ++l) {
    layers_[l].forward(params, input, batch, acts_[l].data());
    input = acts_[l].data();
  }
  return input;
}

void Mlp::backward(DenseParameters& params, const float* x, float* dy, int batch, float* dx) {
  if (layers_.empty()) {
    if (dx != nullptr) std::copy(dy, dy + size_t(batch) * in_, dx);
    return;
  }
  reserve(batch);
  float* grad = dy;
  float* spare[2] = {grad_a_.data(), grad_b_.data()};
  for (size_t l = layers_.size(); l-- > 0;) {
    const float* input = l == 0 ? x : acts_[l - 1].data();
    float* grad_in = l == 0 ? dx : spare[l % 2];
    layers_[l].backward(params, input, acts_[l].data(), grad, batch, grad_in);
    grad = grad_in;
  }
}

}  // namespace strata::model
