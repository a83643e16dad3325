// Gather, scatter-add and scatter-copy of arena rows on the GPU. Reference:
// host/host_row_gather.cpp; bit-identical (copies, one add per element). One
// warp per row, lanes over components, four floats per lane where rows allow:
// random rows of a large arena are bound by HBM transactions, and a warp per row
// keeps each row's load one coalesced request.
#include "backend/cuda/kernels.hpp"

namespace strata::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;

enum class Op { kGather, kScatterAdd, kScatterCopy };

// V floats per access (1 or 4). gather: out (n, dim) <- arena; scatter_add:
// arena += in (n, dim); scatter_copy: arena <- in (n, dim) (dim = width there).
template <Op op, int V, class Slot>
__global__ void rows_kernel(float* __restrict__ arena, int width, const Slot* __restrict__ slots, size_t n, int dim,
                            float* __restrict__ buffer) {
  const size_t i = size_t(blockIdx.x) * kWarpsPerBlock + threadIdx.y;
  if (i >= n) return;
  float* row = arena + int64_t(slots[i]) * width;
  float* mine = buffer + i * dim;
  const int lanes = dim / V;
  for (int c = threadIdx.x; c < lanes; c += 32) {
    if constexpr (V == 4) {
      float4* r = reinterpret_cast<float4*>(row) + c;
      float4* m = reinterpret_cast<float4*>(mine) + c;
      if constexpr (op == Op::kGather) {
        *m = *r;
      } else if constexpr (op == Op::kScatterCopy) {
        *r = *m;
      } else {
        float4 a = *r;
        const float4 g = *m;
        a.x = __fadd_rn(a.x, g.x), a.y = __fadd_rn(a.y, g.y), a.z = __fadd_rn(a.z, g.z), a.w = __fadd_rn(a.w, g.w);
        *r = a;
      }
    } else {
      if constexpr (op == Op::kGather) {
        mine[c] = row[c];
      } else if constexpr (op == Op::kScatterCopy) {
        row[c] = mine[c];
      } else {
        row[c] = __fadd_rn(row[c], mine[c]);
      }
    }
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

template <Op op, class Slot>
void launch(cudaStream_t stream, float* arena, int width, const Slot* slots, size_t n, int dim, float* buffer) {
  if (n == 0 || dim <= 0) return;
  const dim3 block(32, kWarpsPerBlock);
  const size_t grid = (n + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (dim % 4 == 0 && width % 4 == 0 && aligned16(arena) && aligned16(buffer)) {
    STRATA_CUDA_LAUNCH((rows_kernel<op, 4, Slot>), grid, block, 0, stream, arena, width, slots, n, dim, buffer);
  } else {
    STRATA_CUDA_LAUNCH((rows_kernel<op, 1, Slot>), grid, block, 0, stream, arena, width, slots, n, dim, buffer);
  }
}

}  // namespace

void gather_rows(cudaStream_t stream, const float* arena, int width, const int32_t* slots, size_t n, int dim,
                 float* out) {
  launch<Op::kGather>(stream, const_cast<float*>(arena), width, slots, n, dim, out);
}
void gather_rows(cudaStream_t stream, const float* arena, int width, const int64_t* slots, size_t n, int dim,
                 float* out) {
  launch<Op::kGather>(stream, const_cast<float*>(arena), width, slots, n, dim, out);
}
void scatter_add_rows(cudaStream_t stream, float* arena, int width, const int64_t* slots, size_t n, int dim,
                      const float* grads) {
  launch<Op::kScatterAdd>(stream, arena, width, slots, n, dim, const_cast<float*>(grads));
}
void scatter_add_rows(cudaStream_t stream, float* arena, int width, const int32_t* slots, size_t n, int dim,
                      const float* grads) {
  launch<Op::kScatterAdd>(stream, arena, width, slots, n, dim, const_cast<float*>(grads));
}
void scatter_copy_rows(cudaStream_t stream, float* arena, int width, const int32_t* slots, size_t n,
                       const float* rows) {
  launch<Op::kScatterCopy>(stream, arena, width, slots, n, width, const_cast<float*>(rows));
}

}  // namespace strata::cuda
