// The dense network's kernels: GEMM, bias + activation, the DLRM dot interaction
// and the logistic loss; the neutral interface model/ calls. The selected
// device's table runs them (backend/device.hpp); pointers are host memory.
// Host kernels: host/host_kernels.hpp (contracts there). The CUDA table runs
// these on the host too until its cuBLAS kernels land (issue 16), so a
// runtime.device = cuda job computes the dense network exactly as the host does.
#pragma once

#include <cstddef>

namespace strata::backend {

enum class Activation { kNone, kRelu };

// c (m, n) = alpha * op(a) * op(b) + beta * c, all row-major; k == 0 gives c = beta * c.
void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, const float* b, float beta,
          float* c);
// y (rows, cols) <- act(y + bias) in place; bias (cols).
void bias_activation_forward(int rows, int cols, const float* bias, Activation act, float* y);
// dy: in d/d output, out d/d pre-activation; dbias (cols) the column sums of the new dy.
void bias_activation_backward(int rows, int cols, const float* y, Activation act, float* dy, float* dbias);

inline int dot_interaction_pairs(int num_features) { return num_features * (num_features - 1) / 2; }
inline int dot_interaction_width(int num_features, int dim) { return dim + dot_interaction_pairs(num_features); }
size_t dot_interaction_packed_size(int batch, int num_features, int dim);
size_t dot_interaction_scratch_size(int num_features, int dim);
// out (batch, dot_interaction_width); packed keeps the transposed features for backward.
void dot_interaction_forward(int batch, int num_features, int dim, const float* const* features, float* packed,
                             float* out);
void dot_interaction_backward(int batch, int num_features, int dim, const float* packed, const float* dout,
                              float* scratch, float* const* dfeatures);

// losses[b] = BCE with logits (double), dlogits[b] = scale * (sigmoid(s) - y).
void bce_with_logits(int batch, const float* logits, const float* labels, float scale, double* losses,
                     float* dlogits);
// probs (n) = sigmoid(logits (n)).
void sigmoid(int n, const float* logits, float* probs);

}  // namespace strata::backend
