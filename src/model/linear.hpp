// Linear: one fully connected layer y = act(x W^T + b) whose weight (out, in) and bias
// (out) are slices of a DenseParameters buffer. Activations are sample-major
// (batch, width). Stateless apart from its shape: the caller (Mlp) owns the activations.
#pragma once

#include <cstdint>
#include <string>

#include "backend/dense_kernels.hpp"
#include "backend/embedding_kernels.hpp"
#include "model/dense_parameters.hpp"

namespace strata::model {

using backend::Activation;

class Linear {
 public:
  // Registers "<name>.weight" (out, in) and "<name>.bias" (out) in params.
  Linear(DenseParameters& params, const std::string& name, int in, int out, Activation act);

  int in() const { return in_; }
  int out() const { return out_; }
  Activation activation() const { return act_; }
  size_t weight_offset() const { return weight_; }
  size_t bias_offset() const { return bias_; }

  // Glorot-uniform weights, each a pure function of (seed, its index in the flat
  // buffer); zero biases. Call after params.finalize().
  void init(DenseParameters& params, uint64_t seed) const;

  // y (batch, out) = act(x (batch, in) W^T + b).
  void forward(const DenseParameters& params, const float* x, int batch, float* y) const;

  // Given the forward's x and y: dy (batch, out) in d loss/d y, out d loss/d pre-activation.
  // Writes (overwrites) d weight and d bias into params.grads(); dx (batch, in) when
  // not null.
  void backward(DenseParameters& params, const float* x, const float* y, float* dy, int batch,
                float* dx) const;

 private:
  int in_;
  int out_;
  Activation act_;
  size_t weight_;
  size_t bias_;
};

}  // namespace strata::model
