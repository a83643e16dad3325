// One struct of function pointers per backend (the nccl-tests pattern): the
// neutral kernel headers forward every call to the table of the selected device.
// Private to src/backend.
#pragma once

#include "backend/embedding_kernels.hpp"
#include "backend/row_kernels.hpp"
#include "backend/sparse_optimizer_kernels.hpp"
#include "strata/config.hpp"

namespace strata::backend::impl {

struct KernelTable {
  const char* name;
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
