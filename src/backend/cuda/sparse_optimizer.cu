// Sparse optimizers on the GPU. Reference: host/host_sparse_optimizer.cpp; both
// bit-identical: per element the same IEEE operations in the same order
// (Adagrad: a + g*g, then (lr*g) / (sqrt(a) + eps), then w - step), written with
// the _rn intrinsics so that nvcc fuses no multiply-add. The fused scatter sums
// each distinct slot's occurrences from zero in occurrence order (a stable radix
// sort by slot keeps that order), as GradientAccumulator does on the host.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>

#include "backend/cuda/kernels.hpp"

namespace strata::cuda {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ void step_element(const SparseOptimizerParams& p, float* w, float* a, float g) {
  if (p.kind == backend::SparseOptimizerKind::kAdagrad) {
    const float acc = __fadd_rn(*a, __fmul_rn(g, g));
    *a = acc;
    *w = __fsub_rn(*w, __fdiv_rn(__fmul_rn(p.lr, g), __fadd_rn(__fsqrt_rn(acc), p.eps)));
  } else {
    *w = __fsub_rn(*w, __fmul_rn(p.lr, g));
  }
}

// Block: threadIdx.x over components, threadIdx.y over rows.
__global__ void step_kernel(SparseOptimizerParams p, float* __restrict__ arena, int width,
                            const int32_t* __restrict__ slots, size_t n, int dim, const float* __restrict__ grads) {
  const size_t i = size_t(blockIdx.x) * blockDim.y + threadIdx.y;
  if (i >= n) return;
  float* row = arena + int64_t(slots[i]) * width;
  for (int c = threadIdx.x; c < dim; c += blockDim.x) step_element(p, row + c, row + dim + c, grads[i * dim + c]);
}

__global__ void iota_kernel(int32_t n, int32_t* out) {
  const int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = i;
}

// One distinct slot u per row of threads: its occurrences order[starts[u] ..
// starts[u] + counts[u]) in occurrence order.
__global__ void scatter_step_kernel(SparseOptimizerParams p, float* __restrict__ arena, int width,
                                    const int32_t* __restrict__ unique_slots, const int32_t* __restrict__ counts,
                                    const int32_t* __restrict__ starts, const int32_t* __restrict__ num_unique,
                                    const int32_t* __restrict__ order, int dim, const float* __restrict__ grads) {
  const int u = blockIdx.x * blockDim.y + threadIdx.y;
  if (u >= *num_unique) return;
  float* row = arena + int64_t(unique_slots[u]) * width;
  const int32_t begin = starts[u], end = begin + counts[u];
  for (int c = threadIdx.x; c < dim; c += blockDim.x) {
    float sum = 0.0f;
    for (int32_t q = begin; q < end; ++q) sum = __fadd_rn(sum, grads[int64_t(order[q]) * dim + c]);
    step_element(p, row + c, row + dim + c, sum);
  }
}

dim3 rows_block(int dim) {
  const int x = dim >= 32 ? 32 : (dim >= 16 ? 16 : 8);
  return dim3(x, kThreads / x);
}

}  // namespace

void sparse_optimizer_step(cudaStream_t stream, const SparseOptimizerParams& p, float* arena, int width,
                           const int32_t* slots, size_t n, int dim, const float* grads) {
  if (n == 0 || dim <= 0) return;
  const dim3 block = rows_block(dim);
  STRATA_CUDA_LAUNCH(step_kernel, (n + block.y - 1) / block.y, block, 0, stream, p, arena, width, slots, n, dim,
                     grads);
}

void scatter_sparse_optimizer_step(cudaStream_t stream, const SparseOptimizerParams& p, float* arena, int width,
                                   const int32_t* slots, size_t n, int dim, const float* grads,
                                   ScatterOptimizerDeviceScratch& s) {
  if (n == 0 || dim <= 0) return;
  const int32_t count = int32_t(n);
  int32_t* iota = s.iota.reserve(n);
  int32_t* keys_sorted = s.keys_sorted.reserve(n);
  int32_t* order = s.order.reserve(n);
  int32_t* unique_slots = s.unique_slots.reserve(n);
  int32_t* counts = s.counts.reserve(n);
  int32_t* starts = s.starts.reserve(n);
  int32_t* num_unique = s.num_unique.reserve(1);
  STRATA_CUDA_LAUNCH(iota_kernel, (count + kThreads - 1) / kThreads, kThreads, 0, stream, count, iota);
  // Counts past num_unique stay zero, so the scan over all n stays defined.
  check(cudaMemsetAsync(counts, 0, sizeof(int32_t) * n, stream), "cudaMemsetAsync");
  size_t sort_bytes = 0, rle_bytes = 0, scan_bytes = 0;
  check(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, slots, keys_sorted, iota, order, count, 0, 31, stream),
        "cub::DeviceRadixSort (size)");
  check(cub::DeviceRunLengthEncode::Encode(nullptr, rle_bytes, keys_sorted, unique_slots, counts, num_unique, count,
                                           stream),
        "cub::DeviceRunLengthEncode (size)");
  check(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, counts, starts, count, stream),
        "cub::DeviceScan (size)");
  unsigned char* temp = s.temp.reserve(std::max(sort_bytes, std::max(rle_bytes, scan_bytes)));
  // Slots are >= 0: bits 0..30 order them; the stable sort keeps occurrence order per slot.
  check(cub::DeviceRadixSort::SortPairs(temp, sort_bytes, slots, keys_sorted, iota, order, count, 0, 31, stream),
        "cub::DeviceRadixSort");
  check(cub::DeviceRunLengthEncode::Encode(temp, rle_bytes, keys_sorted, unique_slots, counts, num_unique, count,
                                           stream),
        "cub::DeviceRunLengthEncode");
  check(cub::DeviceScan::ExclusiveSum(temp, scan_bytes, counts, starts, count, stream), "cub::DeviceScan");
  const dim3 block = rows_block(dim);
  STRATA_CUDA_LAUNCH(scatter_step_kernel, (n + block.y - 1) / block.y, block, 0, stream, p, arena, width,
                     unique_slots, counts, starts, num_unique, order, dim, grads);
}

}  // namespace strata::cuda
