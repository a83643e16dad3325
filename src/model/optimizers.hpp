// Optimizers. Dense ones run over the flat DenseParameters buffer, identically on
// every trainer; sparse ones update one embedding row where that row lives.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/sparse_optimizer_kernels.hpp"
#include "config/options.hpp"

namespace strata::model {

class DenseOptimizer {
 public:
  virtual ~DenseOptimizer() = default;
  // values -= update(grads); n values (the n given to make_dense_optimizer).
  virtual void step(float* values, const float* grads, size_t n) = 0;
  // Optimizer state in a fixed order, for digests and checkpoints:
  //   sgd: empty;  adagrad: accumulator (n);  adam: first moment (n), second moment (n).
  // The step count is not part of it: see steps_taken / set_steps_taken.
  virtual std::vector<float> state() const = 0;
  // strata::Error when the size does not match.
  virtual void set_state(const std::vector<float>& state) = 0;
  virtual int64_t steps_taken() const = 0;
  // Restores the step count (Adam's bias correction depends on it) from a checkpoint.
  virtual void set_steps_taken(int64_t steps) = 0;
  virtual const char* name() const = 0;
};

// Formulas (all arithmetic in float, as PyTorch does; t = steps taken after this one):
//   sgd:     w -= lr g
//   adagrad: a += g^2;  w -= lr g / (sqrt(a) + eps)                  (a starts at adagrad_init)
//   adam:    m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//            w -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)   (PyTorch's form)
//   sparse adam: the same per row, lazily (a row steps only with a gradient), t the
//            row's own step count, kept in its state as b1^t and b2^t
//            (state [m (dim) | v (dim) | b1^t, b2^t], width 2 dim + 2)
// Unknown names: strata::Error naming optim.dense / optim.sparse and the allowed values.

std::unique_ptr<DenseOptimizer> make_dense_optimizer(const OptimizerOptions& options, size_t n);

// Row layout: [values (dim) | state (state_width(dim))].
class SparseOptimizer {
 public:
  virtual ~SparseOptimizer() = default;
  virtual int state_width(int dim) const = 0;
  virtual void init_state(float* state, int dim) const = 0;
  // Applies one step to a row given its summed gradient.
  virtual void apply(float* values, float* state, const float* grad, int dim) const = 0;
  // The step as the backend's kernels take it (batched rows, any device).
  virtual const backend::SparseOptimizerParams& params() const = 0;
  virtual const char* name() const = 0;
};

std::unique_ptr<SparseOptimizer> make_sparse_optimizer(const OptimizerOptions& options);

}  // namespace strata::model
