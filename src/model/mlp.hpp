// Mlp: a stack of Linear layers with ReLU between them, owning its activations so that
// backward can follow forward without allocating. Buffers grow with the batch size and
// are then reused. Activations are sample-major (batch, width).
#pragma once

#include <string>
#include <vector>

#include "model/linear.hpp"

namespace strata::model {

class Mlp {
 public:
  // Layers "<prefix>.<l>" with the given output widths; ReLU after every layer, or after
  // every layer but the last when relu_last is false.
  Mlp(DenseParameters& params, const std::string& prefix, int in, const std::vector<int>& widths,
      bool relu_last);

  int in() const { return in_; }
  int out() const { return layers_.empty() ? in_ : layers_.back().out(); }
  const std::vector<Linear>& layers() const { return layers_; }

  void init(DenseParameters& params, uint64_t seed) const;
  // Sizes the buffers for batches of up to `batch` samples.
  void reserve(int batch);

  // Returns the output (batch, out); valid until the next forward.
  const float* forward(const DenseParameters& params, const float* x, int batch);

  // After forward(x): dy (batch, out) is consumed (overwritten). Writes every layer's
  // gradients into params.grads(); dx (batch, in) when not null.
  void backward(DenseParameters& params, const float* x, float* dy, int batch, float* dx);

 private:
  int in_;
  int capacity_ = 0;                      // batch size the buffers hold
  int max_width_ = 0;
  std::vector<Linear> layers_;
  std::vector<std::vector<float>> acts_;  // acts_[l] (capacity, layers_[l].out())
  std::vector<float> grad_a_, grad_b_;    // (capacity, max width) ping-pong gradients
};

}  // namespace strata::model
