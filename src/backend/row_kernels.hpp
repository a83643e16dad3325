// Gather and scatter-add of embedding rows in a row arena (the L1 tier's slots):
// the neutral interface store/ calls. Host kernels: host/host_row_gather.cpp (with
// prefetching); CUDA kernels: cuda/row_gather.cu. Copies and one add per element:
// bit-identical on every device.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::backend {

// out[i, 0:dim] = arena[slots[i] * width + 0:dim] for i < n; out is (n, dim).
void gather_rows(const float* arena, int width, const int32_t* slots, size_t n, int dim, float* out);
void gather_rows(const float* arena, int width, const int64_t* slots, size_t n, int dim, float* out);
// arena[slots[i] * width + 0:dim] += grads[i, 0:dim]; slots must be distinct.
void scatter_add_rows(float* arena, int width, const int64_t* slots, size_t n, int dim, const float* grads);

}  // namespace strata::backend
