// The sparse optimizers' arithmetic on embedding rows laid out [values (dim) |
// state (state width)]: the neutral interface model/optimizers and store/ call.
// Host kernels: host/host_sparse_optimizer.cpp (SSE2 Adagrad); CUDA kernels:
// cuda/sparse_optimizer.cu. Both are bit-identical (IEEE add, multiply, divide and
// sqrt per element in the same order, no fused multiply-add on the device).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata::backend {

enum class SparseOptimizerKind {
  kSgd,      // w -= lr g                                       (state width 0)
  kAdagrad,  // a += g^2; w -= lr g / (sqrt(a) + eps)           (state width dim)
  kAdam,     // lazy row-wise Adam, state [m (dim) | v (dim) | b1^t, b2^t] (width 2 dim + 2):
             //   P1 = b1^t b1, P2 = b2^t b2 (the row's own step count t, kept as the powers
             //   so that no pow() is needed and host and device agree bit for bit);
             //   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g g;
             //   w -= (lr / (1 - P1)) m / (sqrt(v) / sqrt(1 - P2) + eps)
             // A row steps only when it has a gradient, so t counts the row's updates
             // (TensorFlow's LazyAdam and PyTorch's SparseAdam count the job's steps).
};

struct SparseOptimizerParams {
  SparseOptimizerKind kind = SparseOptimizerKind::kSgd;
  float lr = 0.0f;
  float eps = 0.0f;    // Adagrad, Adam
  float beta1 = 0.0f;  // Adam
  float beta2 = 0.0f;  // Adam
};

int sparse_optimizer_state_width(SparseOptimizerKind kind, int dim);

// One row in host memory, whatever the device (the servers' and L2's rows live
// there): values (dim), state (state width), grad (dim).
void sparse_optimizer_apply_row(const SparseOptimizerParams& p, float* values, float* state, const float* grad,
                                int dim);

// Rows of an arena (capacity, width): for i < n, row slots[i] takes one step with
// grads (n, dim). Slots must be distinct.
void sparse_optimizer_step(const SparseOptimizerParams& p, float* arena, int width, const int32_t* slots, size_t n,
                           int dim, const float* grads);

// Scratch of scatter_sparse_optimizer_step; grows on first use.
struct ScatterOptimizerScratch {
  std::vector<int32_t> index_of_slot;  // (max slot + 1) -1, or the slot's place in `slots`
  std::vector<int32_t> slots;          // (distinct) in order of first occurrence
  std::vector<float> sums;             // (distinct, dim)
};

// The fused backward scatter + optimizer: occurrences (n) may repeat slots. Each
// distinct slot's gradient is the sum, from zero, of grads (n, dim) of its
// occurrences in occurrence order (GradientAccumulator's order, so the servers'),
// then the slot takes one step.
void scatter_sparse_optimizer_step(const SparseOptimizerParams& p, float* arena, int width, const int32_t* slots,
                                   size_t n, int dim, const float* grads, ScatterOptimizerScratch& scratch);

}  // namespace strata::backend
