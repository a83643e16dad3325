// Sparse optimizers on the GPU. Reference: host/host_sparse_optimizer.cpp; both
// bit-identical: per element the same IEEE operations in the same order
// (Adagrad: a + g*g, then (lr*g) / (sqrt(a) + eps), then w - step; Adam as adam_row), written with
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

// Adam's per-row factors from the powers b1^t, b2^t before this step (host: adam_row).
struct AdamFactors {
  float p1 = 1.0f, p2 = 1.0f, step_size = 0.0f, sqrt_bc2 = 1.0f;
};
__device__ __forceinline__ AdamFactors adam_factors(const SparseOptimizerParams& p, const float* powers) {
  AdamFactors f;
  f.p1 = __fmul_rn(powers[0], p.beta1);
  f.p2 = __fmul_rn(powers[1], p.beta2);
  f.step_size = __fdiv_rn(p.lr, __fsub_rn(1.0f, f.p1));
  f.sqrt_bc2 = __fsqrt_rn(__fsub_rn(1.0f, f.p2));
  return f;
}
__device__ __forceinline__ void adam_element(const SparseOptimizerParams& p, const AdamFactors& f, float* w, float* m,
                                             float* v, float g) {
  const float mi = __fadd_rn(__fmul_rn(p.beta1, *m), __fmul_rn(__fsub_rn(1.0f, p.beta1), g));
  const float vi = __fadd_rn(__fmul_rn(p.beta2, *v), __fmul_rn(__fmul_rn(__fsub_rn(1.0f, p.beta2), g), g));
  *m = mi;
  *v = vi;
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), f.sqrt_bc2), p.eps);
  *w = __fsub_rn(*w, __fdiv_rn(__fmul_rn(f.step_size, mi), denom));
}

// One row's step by the threads of its threadIdx.y (threadIdx.x over components);
// grad_of(c) gives component c's gradient. Adam's powers are read by every thread
// before thread 0 writes them back: the threads of a row are one warp or part of one
// (rows_block), and every thread of the warp reaches the __syncwarp (none returns early).
template <class GradOf>
__device__ __forceinline__ void step_row(const SparseOptimizerParams& p, float* row, int dim, bool active,
                                         GradOf grad_of) {
  if (p.kind == backend::SparseOptimizerKind::kAdam) {
    AdamFactors f;
    if (active) f = adam_factors(p, row + 3 * dim);  // row: w (dim), m (dim), v (dim), b1^t, b2^t
    __syncwarp();
    if (!active) return;
    for (int c = threadIdx.x; c < dim; c += blockDim.x)
      adam_element(p, f, row + c, row + dim + c, row + 2 * dim + c, grad_of(c));
    if (threadIdx.x == 0) {
      row[3 * dim] = f.p1;
      row[3 * dim + 1] = f.p2;
    }
    return;
  }
  if (!active) return;
  for (int c = threadIdx.x; c < dim; c += blockDim.x) step_element(p, row + c, row + dim + c, grad_of(c));
}

// Block: threadIdx.x over components, threadIdx.y over rows.
__global__ void step_kernel(SparseOptimizerParams p, float* __restrict__ arena, int width,
                            const int32_t* __restrict__ slots, size_t n, int dim, const float* __restrict__ grads) {
  const size_t i = size_t(blockIdx.x) * blockDim.y + threadIdx.y;
  const bool active = i < n;
  float* row = active ? arena + int64_t(slots[i]) * width : nullptr;
  step_row(p, row, dim, active, [&](int c) { return grads[i * dim + c]; });
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
  const bool active = u < *num_unique;
  float* row = active ? arena + int64_t(unique_slots[u]) * width : nullptr;
  const int32_t begin = active ? starts[u] : 0, end = active ? begin + counts[u] : 0;
  step_row(p, row, dim, active, [&](int c) {
    float sum = 0.0f;
    for (int32_t q = begin; q < end; ++q) sum = __fadd_rn(sum, grads[int64_t(order[q]) * dim + c]);
    return sum;
  });
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
