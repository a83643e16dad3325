// One struct of function pointers per backend (the nccl-tests pattern): the
// neutral kernel headers forward every call to the table of the selected device.
// Private to src/backend.
#pragma once

#include "backend/attention_kernels.hpp"
#include "backend/dense_kernels.hpp"
#include "backend/embedding_kernels.hpp"
#include "backend/row_kernels.hpp"
#include "backend/sparse_optimizer_kernels.hpp"
#include "strata/config.hpp"

namespace strata::backend::impl {

// The dense network and attention (backend/dense_kernels.hpp, attention_kernels.hpp).
struct DenseKernelTable {
  void (*gemm)(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, const float* b,
               float beta, float* c);
  void (*bias_activation_forward)(int rows, int cols, const float* bias, Activation act, float* y);
  void (*bias_activation_backward)(int rows, int cols, const float* y, Activation act, float* dy, float* dbias);
  size_t (*dot_interaction_packed_size)(int batch, int num_features, int dim);
  size_t (*dot_interaction_scratch_size)(int num_features, int dim);
  void (*dot_interaction_forward)(int batch, int num_features, int dim, const float* const* features, float* packed,
                                  float* out);
  void (*dot_interaction_backward)(int batch, int num_features, int dim, const float* packed, const float* dout,
                                   float* scratch, float* const* dfeatures);
  void (*bce_with_logits)(int batch, const float* logits, const float* labels, float scale, double* losses,
                          float* dlogits);
  void (*sigmoid)(int n, const float* logits, float* probs);
  size_t (*attention_scratch_bytes)(AttentionKind kind, int dim, int max_len, const AttentionOptions& options);
  void (*causal_attention_forward)(const JaggedAttentionShape& shape, const float* q, const float* k, const float* v,
                                   float* out, float* lse, AttentionScratch& scratch, const AttentionOptions& options);
  void (*causal_attention_backward)(const JaggedAttentionShape& shape, const float* q, const float* k,
                                    const float* v, const float* out, const float* lse, const float* dout, float* dq,
                                    float* dk, float* dv, AttentionScratch& scratch, const AttentionOptions& options);
  void (*hstu_attention_forward)(const JaggedAttentionShape& shape, const float* q, const float* k, const float* v,
                                 const float* bias, int num_buckets, float* out, AttentionScratch& scratch,
                                 const AttentionOptions& options);
  void (*hstu_attention_backward)(const JaggedAttentionShape& shape, const float* q, const float* k, const float* v,
                                  const float* bias, int num_buckets, const float* dout, float* dq, float* dk,
                                  float* dv, float* dbias, AttentionScratch& scratch, const AttentionOptions& options);
  void (*hstu_attention_bias_backward)(const JaggedAttentionShape& shape, const float* q, const float* k,
                                       const float* v, const float* bias, int num_buckets, const float* dout,
                                       float* dbias, AttentionScratch& scratch, const AttentionOptions& options);
};

// The host kernels of the dense network (kernels.cpp); the CUDA table uses them too for now.
const DenseKernelTable& host_dense_kernel_table();

struct KernelTable {
  const char* name;
  const DenseKernelTable* dense;
  void (*embedding_bag_forward)(int batch, int dim, const int32_t* offsets, const int32_t* index, const float* rows,
                                PoolingMode mode, float* pooled, PooledLayout layout);
  void (*embedding_bag_backward)(int batch, int dim, int num_unique, const int32_t* offsets, const int32_t* index,
                                 const float* dpooled, PooledLayout layout, PoolingMode mode, float* row_grads,
                                 RowGatherScratch& scratch, RowGradAlgorithm algorithm);
  void (*gather_rows_i32)(const float* arena, int width, const int32_t* slots, size_t n, int dim, float* out);
  void (*gather_rows_i64)(const float* arena, int width, const int64_t* slots, size_t n, int dim, float* out);
  void (*scatter_add_rows)(float* arena, int width, const int64_t* slots, size_t n, int dim, const float* grads);
  void (*sparse_optimizer_step)(const SparseOptimizerParams& p, float* arena, int width, const int32_t* slots,
                                size_t n, int dim, const float* grads);
  void (*scatter_sparse_optimizer_step)(const SparseOptimizerParams& p, float* arena, int width,
                                        const int32_t* slots, size_t n, int dim, const float* grads,
                                        ScatterOptimizerScratch& scratch);
};

const KernelTable& host_kernel_table();
#if STRATA_HAVE_CUDA
const KernelTable& cuda_kernel_table();  // backend/cuda/staged_kernels.cu
#endif
const KernelTable& active_kernel_table();

}  // namespace strata::backend::impl
