// Embedding-bag pooling on the host: sum/mean of the rows of each bag, and its backward,
// which sums the gradient of every unique row over its occurrences in sample order.
// Common widths are compiled with a fixed width so that a bag's sum stays in registers.
#include <algorithm>

#include "backend/host/host_kernels.hpp"
#include "backend/host/impl/host_views.hpp"

namespace strata::backend::host {

namespace {

// D > 0: width known at compile time (== dim); D == 0: any width up to kMaxLocal, or
// accumulated in place beyond that.
constexpr int kMaxLocal = 256;
constexpr int kPrefetchBags = 8;

template <int D>
void forward_impl(int batch, int dim_rt, const int32_t* offsets, const int32_t* index,
                  const float* rows, bool mean, float* pooled, PooledLayout layout) {
  const int64_t ss = layout.sample_stride, cs = layout.component_stride;
  Kokkos::parallel_for(impl::Range(0, batch), KOKKOS_LAMBDA(int64_t b) {
    const int dim = D > 0 ? D : dim_rt;
    float acc[D > 0 ? D : kMaxLocal];
    for (int c = 0; c < dim; ++c) acc[c] = 0.0f;
    const int32_t begin = offsets[b], end = offsets[b + 1];
    // Rows are random gathers: ask for the rows of a few bags ahead.
    if (b + kPrefetchBags < batch) {
      for (int32_t k = offsets[b + kPrefetchBags]; k < offsets[b + kPrefetchBags + 1]; ++k) {
        const float* row = rows + int64_t(index[k]) * dim;
        __builtin_prefetch(row);
        __builtin_prefetch(row + dim - 1);  // a row may straddle two cache lines
      }
    }
    for (int32_t k = begin; k < end; ++k) {
      const float* row = rows + int64_t(index[k]) * dim;
      for (int c = 0; c < dim; ++c) acc[c] += row[c];
    }
    if (mean && end > begin) {
      const float inv = 1.0f / float(end - begin);
      for (int c = 0; c < dim; ++c) acc[c] *= inv;
    }
    float* out = pooled + b * ss;
    for (int c = 0; c < dim; ++c) out[c * cs] = acc[c];
  });
}

// Widths beyond kMaxLocal: accumulate in the output itself.
void forward_wide(int batch, int dim, const int32_t* offsets, const int32_t* index,
                  const float* rows, bool mean, float* pooled, PooledLayout layout) {
  const int64_t ss = layout.sample_stride, cs = layout.component_stride;
  Kokkos::parallel_for(impl::Range(0, batch), KOKKOS_LAMBDA(int64_t b) {
    float* out = pooled + b * ss;
    for (int c = 0; c < dim; ++c) out[c * cs] = 0.0f;
    const int32_t begin = offsets[b], end = offsets[b + 1];
    for (int32_t k = begin; k < end; ++k) {
      const float* row = rows + int64_t(index[k]) * dim;
      for (int c = 0; c < dim; ++c) out[c * cs] += row[c];
    }
    if (mean && end > begin) {
      const float inv = 1.0f / float(end - begin);
      for (int c = 0; c < dim; ++c) out[c * cs] *= inv;
    }
  });
}

// Sequential on purpose: this is the order every other algorithm must reproduce.
template <int D>
void backward_scatter(int batch, int dim_rt, int num_unique, const int32_t* offsets,
                      const int32_t* index, const float* dpooled, PooledLayout layout, bool mean,
                      float* row_grads) {
  const int dim = D > 0 ? D : dim_rt;
  std::fill(row_grads, row_grads + int64_t(num_unique) * dim, 0.0f);
  for (int b = 0; b < batch; ++b) {
    const int32_t begin = offsets[b], end = offsets[b + 1];
    if (end == begin) continue;
    const float* src = dpooled + b * layout.sample_stride;
    float g[D > 0 ? D : kMaxLocal];
    if (mean) {
      const float inv = 1.0f / float(end - begin);
      for (int c = 0; c < dim; ++c) g[c] = src[c * layout.component_stride] * inv;
    } else {
      for (int c = 0; c < dim; ++c) g[c] = src[c * layout.component_stride];
    }
    for (int32_t k = begin; k < end; ++k) {
      float* acc = row_grads + int64_t(index[k]) * dim;
      for (int c = 0; c < dim; ++c) acc[c] += g[c];
    }
  }
}

void backward_scatter_wide(int batch, int dim, int num_unique, const int32_t* offsets,
                           const int32_t* index, const float* dpooled, PooledLayout layout,
                           bool mean, float* row_grads) {
  std::fill(row_grads, row_grads + int64_t(num_unique) * dim, 0.0f);
  for (int b = 0; b < batch; ++b) {
    const int32_t begin = offsets[b], end = offsets[b + 1];
    const float* src = dpooled + b * layout.sample_stride;
    const float inv = end > begin ? 1.0f / float(end - begin) : 1.0f;
    for (int32_t k = begin; k < end; ++k) {
      float* acc = row_grads + int64_t(index[k]) * dim;
      for (int c = 0; c < dim; ++c)
        acc[c] += mean ? src[c * layout.component_stride] * inv : src[c * layout.component_stride];
    }
  }
}

void backward_row_gather(int batch, int dim, int num_unique, const int32_t* offsets,
                         const int32_t* index, const float* dpooled, PooledLayout layout,
                         bool mean, float* row_grads, RowGatherScratch& s) {
  const int32_t nnz = offsets[batch];
  if (s.row_start.size() < size_t(num_unique) + 1) s.row_start.resize(size_t(num_unique) + 1);
  if (s.occurrence.size() < size_t(nnz)) s.occurrence.resize(nnz);
  if (s.bag_of.size() < size_t(nnz)) s.bag_of.resize(nnz);
  int32_t* start = s.row_start.data();
  int32_t* occ = s.occurrence.data();
  int32_t* bag_of = s.bag_of.data();
  // Counting sort of occurrences by row; a stable fill keeps k ascending within a row.
  std::fill(start, start + num_unique + 1, 0);
  for (int b = 0; b < batch; ++b)
    for (int32_t k = offsets[b]; k < offsets[b + 1]; ++k) {
      bag_of[k] = b;
      ++start[index[k] + 1];
    }
  for (int u = 0; u < num_unique; ++u) start[u + 1] += start[u];
  for (int32_t k = 0; k < nnz; ++k) occ[start[index[k]]++] = k;  // start[] as a cursor
  for (int u = num_unique; u > 0; --u) start[u] = start[u - 1];   // shift it back
  start[0] = 0;

  const int64_t ss = layout.sample_stride, cs = layout.component_stride;
  impl::Matrix<float> out(row_grads, num_unique, dim);
  Kokkos::parallel_for(impl::Range(0, num_unique), KOKKOS_LAMBDA(int64_t u) {
    float* acc = &out(u, 0);
    for (int c = 0; c < dim; ++c) acc[c] = 0.0f;
    for (int32_t p = start[u]; p < start[u + 1]; ++p) {
      const int32_t b = bag_of[occ[p]];
      const float* src = dpooled + b * ss;
      if (mean) {
        const float inv = 1.0f / float(offsets[b + 1] - offsets[b]);
        for (int c = 0; c < dim; ++c) acc[c] += src[c * cs] * inv;
      } else {
        for (int c = 0; c < dim; ++c) acc[c] += src[c * cs];
      }
    }
  });
}

}  // namespace

void embedding_bag_forward(int batch, int dim, const int32_t* offsets, const int32_t* index,
                           const float* rows, PoolingMode mode, float* pooled, PooledLayout layout) {
  if (batch <= 0 || dim <= 0) return;
  const bool mean = mode == PoolingMode::kMean;
  switch (dim) {
    case 8: return forward_impl<8>(batch, dim, offsets, index, rows, mean, pooled, layout);
    case 16: return forward_impl<16>(batch, dim, offsets, index, rows, mean, pooled, layout);
    case 32: return forward_impl<32>(batch, dim, offsets, index, rows, mean, pooled, layout);
    case 64: return forward_impl<64>(batch, dim, offsets, index, rows, mean, pooled, layout);
    default:
      if (dim <= kMaxLocal) return forward_impl<0>(batch, dim, offsets, index, rows, mean, pooled, layout);
      return forward_wide(batch, dim, offsets, index, rows, mean, pooled, layout);
  }
}

void embedding_bag_backward(int batch, int dim, int num_unique, const int32_t* offsets,
                            const int32_t* index, const float* dpooled, PooledLayout layout,
                            PoolingMode mode, float* row_grads, RowGatherScratch& scratch,
                            RowGradAlgorithm algorithm) {
  if (num_unique <= 0 || dim <= 0) return;
  const bool mean = mode == PoolingMode::kMean;
  if (batch <= 0) {
    std::fill(row_grads, row_grads + int64_t(num_unique) * dim, 0.0f);
    return;
  }
  if (algorithm == RowGradAlgorithm::kAuto)
    algorithm = impl::kSerialHost ? RowGradAlgorithm::kOrderedScatter : RowGradAlgorithm::kRowGather;
  if (algorithm == RowGradAlgorithm::kRowGather)
    return backward_row_gather(batch, dim, num_unique, offsets, index, dpooled, layout, mean, row_grads, scratch);
  switch (dim) {
    case 8: return backward_scatter<8>(batch, dim, num_unique, offsets, index, dpooled, layout, mean, row_grads);
    case 16: return backward_scatter<16>(batch, dim, num_unique, offsets, index, dpooled, layout, mean, row_grads);
    case 32: return backward_scatter<32>(batch, dim, num_unique, offsets, index, dpooled, layout, mean, row_grads);
    case 64: return backward_scatter<64>(batch, dim, num_unique, offsets, index, dpooled, layout, mean, row_grads);
    default:
      if (dim <= kMaxLocal)
        return backward_scatter<0>(batch, dim, num_unique, offsets, index, dpooled, layout, mean, row_grads);
      return backward_scatter_wide(batch, dim, num_unique, offsets, index, dpooled, layout, mean, row_grads);
  }
}

}  // namespace strata::backend::host
