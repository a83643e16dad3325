// Embedding-bag pooling on the GPU. Reference: host/host_embedding_bag.cpp; both
// bit-identical: one thread per (bag, component) or (row, component) adds in the
// host's order from zero with __fadd_rn / __fmul_rn (no fused multiply-add).
#include <cub/device/device_radix_sort.cuh>

#include "backend/cuda/kernels.hpp"

namespace strata::cuda {

namespace {

constexpr int kThreads = 256;

// Block: threadIdx.x over components, threadIdx.y over bags.
__global__ void forward_kernel(int batch, int dim, const int32_t* __restrict__ offsets,
                               const int32_t* __restrict__ index, const float* __restrict__ rows, bool mean,
                               float* __restrict__ pooled, int64_t ss, int64_t cs) {
  const int b = blockIdx.x * blockDim.y + threadIdx.y;
  if (b >= batch) return;
  const int32_t begin = offsets[b], end = offsets[b + 1];
  const float inv = end > begin ? __fdiv_rn(1.0f, float(end - begin)) : 1.0f;
  for (int c = threadIdx.x; c < dim; c += blockDim.x) {
    float acc = 0.0f;
    for (int32_t k = begin; k < end; ++k) acc = __fadd_rn(acc, rows[int64_t(index[k]) * dim + c]);
    if (mean && end > begin) acc = __fmul_rn(acc, inv);
    pooled[b * ss + c * cs] = acc;
  }
}

__global__ void iota_kernel(int32_t n, int32_t* out) {
  const int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = i;
}

// bag_of[k]: the last bag b with offsets[b] <= k (the non-empty bag holding k).
__global__ void bag_of_kernel(int batch, int nnz, const int32_t* __restrict__ offsets, int32_t* __restrict__ bag_of) {
  const int32_t k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= nnz) return;
  int lo = 0, hi = batch;  // offsets[lo] <= k < offsets[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (offsets[mid] <= k) lo = mid; else hi = mid;
  }
  bag_of[k] = lo;
}

// row_start[u] = first p with keys_sorted[p] >= u, for u in [0, num_unique].
__global__ void row_start_kernel(int num_unique, int nnz, const int32_t* __restrict__ keys_sorted,
                                 int32_t* __restrict__ row_start) {
  const int u = blockIdx.x * blockDim.x + threadIdx.x;
  if (u > num_unique) return;
  int lo = 0, hi = nnz;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (keys_sorted[mid] < u) lo = mid + 1; else hi = mid;
  }
  row_start[u] = lo;
}

__global__ void backward_kernel(int num_unique, int dim, const int32_t* __restrict__ offsets,
                                const int32_t* __restrict__ row_start, const int32_t* __restrict__ occurrence,
                                const int32_t* __restrict__ bag_of, const float* __restrict__ dpooled, bool mean,
                                int64_t ss, int64_t cs, float* __restrict__ row_grads) {
  const int u = blockIdx.x * blockDim.y + threadIdx.y;
  if (u >= num_unique) return;
  for (int c = threadIdx.x; c < dim; c += blockDim.x) {
    float acc = 0.0f;
    for (int32_t p = row_start[u]; p < row_start[u + 1]; ++p) {
      const int32_t b = bag_of[occurrence[p]];
      const float g = dpooled[b * ss + c * cs];
      if (mean) {
        const float inv = __fdiv_rn(1.0f, float(offsets[b + 1] - offsets[b]));
        acc = __fadd_rn(acc, __fmul_rn(g, inv));
      } else {
        acc = __fadd_rn(acc, g);
      }
    }
    row_grads[int64_t(u) * dim + c] = acc;
  }
}

dim3 rows_block(int dim) {
  const int x = dim >= 32 ? 32 : (dim >= 16 ? 16 : 8);
  return dim3(x, kThreads / x);
}

int bits_for(int n) {
  int bits = 1;
  while (bits < 31 && (int64_t(1) << bits) < n) ++bits;
  return bits;
}

}  // namespace

void embedding_bag_forward(cudaStream_t stream, int batch, int dim, const int32_t* offsets, const int32_t* index,
                           const float* rows, PoolingMode mode, float* pooled, PooledLayout layout) {
  if (batch <= 0 || dim <= 0) return;
  const dim3 block = rows_block(dim);
  const int grid = (batch + block.y - 1) / block.y;
  STRATA_CUDA_LAUNCH(forward_kernel, grid, block, 0, stream, batch, dim, offsets, index, rows,
                     mode == PoolingMode::kMean, pooled, layout.sample_stride, layout.component_stride);
}

void embedding_bag_backward(cudaStream_t stream, int batch, int dim, int num_unique, int nnz, const int32_t* offsets,
                            const int32_t* index, const float* dpooled, PooledLayout layout, PoolingMode mode,
                            float* row_grads, EmbeddingBagBackwardScratch& s) {
  if (num_unique <= 0 || dim <= 0) return;
  if (batch <= 0 || nnz <= 0) {
    check(cudaMemsetAsync(row_grads, 0, sizeof(float) * size_t(num_unique) * dim, stream), "cudaMemsetAsync");
    return;
  }
  int32_t* iota = s.iota.reserve(nnz);
  int32_t* keys_sorted = s.keys_sorted.reserve(nnz);
  int32_t* occurrence = s.occurrence.reserve(nnz);
  int32_t* bag_of = s.bag_of.reserve(nnz);
  int32_t* row_start = s.row_start.reserve(size_t(num_unique) + 1);
  const int grid_nnz = (nnz + kThreads - 1) / kThreads;
  STRATA_CUDA_LAUNCH(iota_kernel, grid_nnz, kThreads, 0, stream, nnz, iota);
  STRATA_CUDA_LAUNCH(bag_of_kernel, grid_nnz, kThreads, 0, stream, batch, nnz, offsets, bag_of);
  // Radix sort is stable: within a row the occurrences keep k ascending, the host's order.
  const int end_bit = bits_for(num_unique);
  size_t temp_bytes = 0;
  check(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, index, keys_sorted, iota, occurrence, nnz, 0, end_bit,
                                        stream),
        "cub::DeviceRadixSort (size)");
  check(cub::DeviceRadixSort::SortPairs(s.sort_temp.reserve(temp_bytes), temp_bytes, index, keys_sorted, iota,
                                        occurrence, nnz, 0, end_bit, stream),
        "cub::DeviceRadixSort");
  STRATA_CUDA_LAUNCH(row_start_kernel, (num_unique + 1 + kThreads - 1) / kThreads, kThreads, 0, stream, num_unique,
                     nnz, keys_sorted, row_start);
  const dim3 block = rows_block(dim);
  STRATA_CUDA_LAUNCH(backward_kernel, (num_unique + block.y - 1) / block.y, block, 0, stream, num_unique, dim,
                     offsets, row_start, occurrence, bag_of, dpooled, mode == PoolingMode::kMean,
                     layout.sample_stride, layout.component_stride, row_grads);
}

}  // namespace strata::cuda
