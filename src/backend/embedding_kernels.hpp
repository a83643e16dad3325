// Embedding-bag pooling (sum/mean of each bag's rows, multi-hot) and its backward:
// the neutral interface model/ calls. The selected device's kernels run them
// (backend/device.hpp); pointers are host memory (the CUDA backend stages them,
// see backend/cuda/staged_kernels.cu). Host kernels: host/host_embedding_bag.cpp;
// CUDA kernels: cuda/embedding_bag.cu. Both give bit-identical results.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata::backend {

enum class PoolingMode { kSum, kMean };

// Where component c of sample b's pooled vector lives: b * sample_stride + c * component_stride.
struct PooledLayout {
  int64_t sample_stride;
  int64_t component_stride;
  static PooledLayout sample_major(int dim) { return {dim, 1}; }        // (batch, dim)
  static PooledLayout feature_major(int batch) { return {1, batch}; }   // (dim, batch)
};

// How row gradients are summed. Both give bit-identical results: every row's gradient
// is the sum, starting from zero, of its occurrences in sample order (b ascending, then
// position in the bag); an occurrence contributes dpooled[b] (mean: dpooled[b] * (1.0f / len)).
enum class RowGradAlgorithm {
  kAuto,            // kOrderedScatter on a serial host execution space, else kRowGather
  kOrderedScatter,  // one sequential pass over the occurrences; fastest on one thread
  kRowGather,       // counting sort of the occurrences by row, then one task per row
};

// Scratch of the kRowGather algorithm; grows on first use and is reused afterwards.
struct RowGatherScratch {
  std::vector<int32_t> row_start;   // (num_unique + 1) CSR of occurrences by row
  std::vector<int32_t> occurrence;  // (nnz) occurrence k, grouped by row, k ascending
  std::vector<int32_t> bag_of;      // (nnz) bag of occurrence k
};

// pooled: bag b = sum (or mean) of rows[index[k]] for k in [offsets[b], offsets[b+1]),
// added in bag order starting from zero; an empty bag pools to zeros. Mean multiplies
// the sum by 1.0f / bag length.
//   offsets (batch + 1), index (nnz) into rows (num_unique, dim).
void embedding_bag_forward(int batch, int dim, const int32_t* offsets, const int32_t* index,
                           const float* rows, PoolingMode mode, float* pooled, PooledLayout layout);

// row_grads (num_unique, dim) overwritten from dpooled (laid out as `layout`).
void embedding_bag_backward(int batch, int dim, int num_unique, const int32_t* offsets,
                            const int32_t* index, const float* dpooled, PooledLayout layout,
                            PoolingMode mode, float* row_grads, RowGatherScratch& scratch,
                            RowGradAlgorithm algorithm = RowGradAlgorithm::kAuto);

}  // namespace strata::backend
