// Gather and scatter-add of embedding rows from a large row arena (the L1 / L2
// tiers). Random rows of a table far larger than the CPU caches are bound by
// memory latency, not bandwidth, unless many loads are in flight: the kernels
// visit rows in ascending address order (fewer TLB misses, sequential DRAM
// pages where keys cluster) and prefetch a fixed distance ahead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace strata::backend::host {

// Reusable buffers of the gather/scatter kernels (no allocation after warm-up).
struct RowGatherPlan {
  std::vector<uint64_t> order;  // (n) slot << 24 | position, sorted
};

// out[i, 0:dim] = arena[slots[i] * width + 0:dim] for i < n; out is (n, dim).
void gather_rows(const float* arena, int width, const int64_t* slots, size_t n, int dim, float* out,
                 RowGatherPlan& plan);
// arena[slots[i] * width + 0:dim] += grads[i, 0:dim]; slots must be distinct.
void scatter_add_rows(float* arena, int width, const int64_t* slots, size_t n, int dim, const float* grads,
                      RowGatherPlan& plan);

// Plain loops in request order: the reference for tests and the baseline of the benchmark.
void gather_rows_reference(const float* arena, int width, const int64_t* slots, size_t n, int dim, float* out);
void scatter_add_rows_reference(float* arena, int width, const int64_t* slots, size_t n, int dim,
                                const float* grads);

}  // namespace strata::backend::host
