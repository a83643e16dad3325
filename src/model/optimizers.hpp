// Optimizers. Dense ones run over the flat DenseParameters buffer, identically on
// every trainer; sparse ones update one embedding row where that row lives.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/options.hpp"

namespace strata::model {

class DenseOptimizer {
 public:
  virtual ~DenseOptimizer() = default;
  // values -= update(grads); n values.
  virtual void step(float* values, const float* grads, size_t n) = 0;
  // Optimizer state in a fixed order, for digests and checkpoints.
  virtual std::vector<float> state() const = 0;
  virtual void set_state(const std::vector<float>& state) = 0;
  virtual int64_t steps_taken() const = 0;
};

std::unique_ptr<DenseOptimizer> make_dense_optimizer(const OptimizerOptions& options, size_t n);

// Row layout: [values (dim) | state (state_width(dim))].
class SparseOptimizer {
 public:
  virtual ~SparseOptimizer() = default;
  virtual int state_width(int dim) const = 0;
  virtual void init_state(float* state, int dim) const = 0;
  // Applies one step to a row given its summed gradient.
  virtual void apply(float* values, float* state, const float* grad, int dim) const = 0;
};

std::unique_ptr<SparseOptimizer> make_sparse_optimizer(const OptimizerOptions& options);

}  // namespace strata::model
