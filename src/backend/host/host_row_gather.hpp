// Gather and scatter-add of embedding rows from a large row arena (the L1 / L2
// tiers). Random rows of a table far larger than the CPU caches are bound by
// memory latency, not bandwidth, unless many loads are in flight: the kernels
// prefetch a fixed distance ahead in request order, so that many row loads
// overlap (bench/tiered/gather_scatter.cpp measures them against memcpy).
#pragma once
#ifndef STRATA_BACKEND_INTERNAL
#error "backend/host/ is the host backend's own: model/, store/ and the rest include the neutral backend/*_kernels.hpp"
#endif

#include <cstddef>
#include <cstdint>

namespace strata::backend::host {

// out[i, 0:dim] = arena[slots[i] * width + 0:dim] for i < n; out is (n, dim).
void gather_rows(const float* arena, int width, const int64_t* slots, size_t n, int dim, float* out);
void gather_rows(const float* arena, int width, const int32_t* slots, size_t n, int dim, float* out);
// arena[slots[i] * width + 0:dim] += grads[i, 0:dim]; slots must be distinct.
void scatter_add_rows(float* arena, int width, const int64_t* slots, size_t n, int dim, const float* grads);

// Plain loops in request order: the reference for tests and the baseline of the benchmark.
void gather_rows_reference(const float* arena, int width, const int64_t* slots, size_t n, int dim, float* out);
void scatter_add_rows_reference(float* arena, int width, const int64_t* slots, size_t n, int dim,
                                const float* grads);

}  // namespace strata::backend::host
