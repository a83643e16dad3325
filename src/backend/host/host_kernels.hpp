// Host backend kernels of the dense network: GEMM, bias + activation, embedding-bag
// pooling, dot interaction and the logistic loss. Written with Kokkos (Serial here;
// the same code gains threads where Kokkos was built with OpenMP/Threads), with GEMMs
// through KokkosBlas::gemm and so the system BLAS.
//
// Layout. Activations are sample-major, (batch, features) row-major like the dense
// inputs, the embedding rows and PyTorch: the GEMMs see plain row-major operands and a
// pooled bag is one contiguous vector. (A feature-major layout was tried: with batch
// sizes that are powers of two its rows alias in the L1 cache and the interaction
// slowed down ten-fold.) The interaction transposes blocks of samples internally.
//
// The interface is raw pointers on purpose: model/ headers stay free of Kokkos, which
// keeps their compile time low. All buffers are host memory and contiguous. None of
// these functions allocates (RowGatherScratch grows on first use; KokkosBlas::gemm
// builds one short profiling-region string per call). A plain-loop reference of every
// kernel lives in tests/backend/host_kernels_test.cpp.
#pragma once
#ifndef STRATA_BACKEND_INTERNAL
#error "backend/host/ is the host backend's own: model/, store/ and the rest include the neutral backend/*_kernels.hpp"
#endif

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/dense_kernels.hpp"
#include "backend/embedding_kernels.hpp"

namespace strata::backend::host {

// ---- GEMM ----------------------------------------------------------------------------
// c (m, n) = alpha * op(a) * op(b) + beta * c, all row-major.
//   a: (m, k), or (k, m) when trans_a;  b: (k, n), or (n, k) when trans_b.
// k == 0 gives c = beta * c (BLAS itself would leave c untouched).
void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
          const float* b, float beta, float* c);

// ---- bias + activation -------------------------------------------------------------
using backend::Activation;  // the neutral interface's (backend/dense_kernels.hpp)

// y (rows, cols) <- act(y + bias) in place; bias (cols).
void bias_activation_forward(int rows, int cols, const float* bias, Activation act, float* y);

// Backward of bias_activation_forward, given its output y (rows, cols):
//   dy (rows, cols): in d/d output, out d/d pre-activation (zeroed where y <= 0 for ReLU);
//   dbias (cols) overwritten with the column sums of the new dy, each summed over rows in
//   ascending order from zero (deterministic whatever the thread count).
void bias_activation_backward(int rows, int cols, const float* y, Activation act, float* dy,
                              float* dbias);

// ---- embedding-bag pooling ---------------------------------------------------------
// The types and contracts are the neutral interface's (backend/embedding_kernels.hpp);
// these are its host implementations.
using backend::PooledLayout;
using backend::PoolingMode;
using backend::RowGatherScratch;
using backend::RowGradAlgorithm;

void embedding_bag_forward(int batch, int dim, const int32_t* offsets, const int32_t* index,
                           const float* rows, PoolingMode mode, float* pooled, PooledLayout layout);

// row_grads (num_unique, dim) overwritten from dpooled (laid out as `layout`).
void embedding_bag_backward(int batch, int dim, int num_unique, const int32_t* offsets,
                            const int32_t* index, const float* dpooled, PooledLayout layout,
                            PoolingMode mode, float* row_grads, RowGatherScratch& scratch,
                            RowGradAlgorithm algorithm = RowGradAlgorithm::kAuto);

// ---- dot interaction ---------------------------------------------------------------
// F = num_features vectors of width dim per sample: features[f] (batch, dim); feature 0
// is the bottom-MLP output. The output row of a sample is
//   [features[0] (dim) | z_i . z_j for i > j, in row-major lower-triangle order
//    (1,0), (2,0), (2,1), (3,0), ...]   width dim + F (F - 1) / 2.
// The kernels work on blocks of kInteractionLanes samples, transposed ("packed") so that
// SIMD lanes run over samples: no horizontal sums, any dim vectorises, and every dot
// product sums its components in ascending order from zero.
inline constexpr int kInteractionLanes = 8;

using backend::dot_interaction_pairs;
using backend::dot_interaction_width;
// Floats of the `packed` buffer: the transposed features, kept from forward to backward.
size_t dot_interaction_packed_size(int batch, int num_features, int dim);
// Floats of the backward's scratch (per-thread pair gradients).
size_t dot_interaction_scratch_size(int num_features, int dim);

// out (batch, dot_interaction_width). packed (packed_size) receives the transposed
// features; backward reads it, so keep it until then.
void dot_interaction_forward(int batch, int num_features, int dim, const float* const* features,
                             float* packed, float* out);

// dfeatures[f] (batch, dim) overwritten with d/d features[f] from dout (batch, width),
// given packed as left by the forward of the same features: for every component, the
// pair terms summed over j != i ascending from zero, then (feature 0 only) the
// pass-through part of dout added. scratch (scratch_size floats) is overwritten.
void dot_interaction_backward(int batch, int num_features, int dim, const float* packed,
                              const float* dout, float* scratch, float* const* dfeatures);

// Testing hook. Kernels with an AVX2 build (the interaction) use it where the CPU has
// AVX2 unless this is set to false; both builds give bit-identical results.
void allow_avx2_kernels(bool allow);

// ---- logistic loss -----------------------------------------------------------------
// Per sample, numerically stable binary cross-entropy with logits, in double:
//   losses[b] = max(s, 0) - s * y + log1p(exp(-|s|)),
//   dlogits[b] = scale * (sigmoid(s) - y)   (float).
void bce_with_logits(int batch, const float* logits, const float* labels, float scale,
                     double* losses, float* dlogits);

// probs (n) = sigmoid(logits (n)), stable for large |logit|.
void sigmoid(int n, const float* logits, float* probs);

}  // namespace strata::backend::host
