#include "backend/host/host_row_gather.hpp"

#include <algorithm>
#include <cstring>

#include "common/error.hpp"

namespace strata::backend::host {
namespace {

constexpr int kPrefetchDistance = 16;  // rows in flight: covers DRAM latency at ~100 ns per row

void prefetch_row(const float* row, int bytes, bool write) {
  for (int b = 0; b < bytes; b += 64) {
    if (write) {
      __builtin_prefetch(reinterpret_cast<const char*>(row) + b, 1, 0);
    } else {
      __builtin_prefetch(reinterpret_cast<const char*>(row) + b, 0, 0);
    }
  }
}

}  // namespace

// Rows are visited in request order, with the row kPrefetchDistance ahead
// already requested: the loads of many rows overlap, which is what a random
// gather needs. (Sorting by address first was measured slower here: the sort
// costs more than the TLB misses it saves once arenas sit on huge pages.)
template <class Slot>
void gather_rows_impl(const float* arena, int width, const Slot* slots, size_t n, int dim, float* out) {
  const int bytes = dim * int(sizeof(float));
  const size_t ahead = std::min<size_t>(n, kPrefetchDistance);
  for (size_t k = 0; k < ahead; ++k) prefetch_row(arena + slots[k] * width, bytes, false);
  for (size_t k = 0; k < n; ++k) {
    if (k + kPrefetchDistance < n) prefetch_row(arena + slots[k + kPrefetchDistance] * width, bytes, false);
    std::memcpy(out + k * dim, arena + slots[k] * width, bytes);
  }
}

void gather_rows(const float* arena, int width, const int64_t* slots, size_t n, int dim, float* out) {
  gather_rows_impl(arena, width, slots, n, dim, out);
}
void gather_rows(const float* arena, int width, const int32_t* slots, size_t n, int dim, float* out) {
  gather_rows_impl(arena, width, slots, n, dim, out);
}

void scatter_add_rows(float* arena, int width, const int64_t* slots, size_t n, int dim, const float* grads) {
  const int bytes = dim * int(sizeof(float));
  const size_t ahead = std::min<size_t>(n, kPrefetchDistance);
  for (size_t k = 0; k < ahead; ++k) prefetch_row(arena + slots[k] * width, bytes, true);
  for (size_t k = 0; k < n; ++k) {
    if (k + kPrefetchDistance < n) prefetch_row(arena + slots[k + kPrefetchDistance] * width, bytes, true);
    float* row = arena + slots[k] * width;
    const float* g = grads + k * dim;
    for (int j = 0; j < dim; ++j) row[j] += g[j];
  }
}

void gather_rows_reference(const float* arena, int width, const int64_t* slots, size_t n, int dim, float* out) {
  for (size_t i = 0; i < n; ++i) std::memcpy(out + i * dim, arena + slots[i] * width, sizeof(float) * dim);
}

void scatter_add_rows_reference(float* arena, int width, const int64_t* slots, size_t n, int dim,
                                const float* grads) {
  for (size_t i = 0; i < n; ++i) {
    float* row = arena + slots[i] * width;
    for (int j = 0; j < dim; ++j) row[j] += grads[i * dim + j];
  }
}

}  // namespace strata::backend::host
