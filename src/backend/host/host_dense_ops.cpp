// Element-wise kernels of the dense layers: fused bias + activation (forward and
// backward with the bias-gradient column sums) and the logistic loss.
#include <cmath>

#include "backend/host/host_kernels.hpp"
#include "backend/host/impl/host_views.hpp"

namespace strata::backend::host {

namespace {
// Columns per task of the backward column sums: wide enough to vectorise the inner
// loop, narrow enough to give threads work on a 16-wide layer.
constexpr int kColumnChunk = 16;
}  // namespace

void bias_activation_forward(int rows, int cols, const float* bias, Activation act, float* y) {
  if (rows <= 0 || cols <= 0) return;
  impl::Matrix<float> yv(y, rows, cols);
  const bool relu = act == Activation::kRelu;
  Kokkos::parallel_for(impl::Range(0, rows), KOKKOS_LAMBDA(int64_t r) {
    float* row = &yv(r, 0);
    if (relu) {
      for (int c = 0; c < cols; ++c) {
        const float v = row[c] + bias[c];
        row[c] = v > 0.0f ? v : 0.0f;
      }
    } else {
      for (int c = 0; c < cols; ++c) row[c] += bias[c];
    }
  });
}

namespace {

// Masks one chunk of columns of dy by y > 0 (ReLU) and adds it to acc. Loads first and
// stores last, so that the compiler need not fear dy and y overlapping.
template <bool kRelu, int W>
KOKKOS_INLINE_FUNCTION void mask_and_sum(const float* out, float* g, float (&acc)[W]) {
  float v[W];
  for (int c = 0; c < W; ++c) v[c] = g[c];
  if (kRelu) {
    float keep[W];
    for (int c = 0; c < W; ++c) keep[c] = out[c];
    for (int c = 0; c < W; ++c) v[c] = keep[c] > 0.0f ? v[c] : 0.0f;
    for (int c = 0; c < W; ++c) g[c] = v[c];
  }
  for (int c = 0; c < W; ++c) acc[c] += v[c];
}

template <bool kRelu>
void bias_backward_impl(int rows, int cols, const float* y, float* dy, float* dbias) {
  const int chunks = (cols + kColumnChunk - 1) / kColumnChunk;
  // One task per column chunk: every column is summed over rows in ascending order.
  Kokkos::parallel_for(impl::Range(0, chunks), KOKKOS_LAMBDA(int64_t chunk) {
    const int c0 = int(chunk) * kColumnChunk;
    const int width = cols - c0 < kColumnChunk ? cols - c0 : kColumnChunk;
    float acc[kColumnChunk] = {};
    if (width == kColumnChunk) {
      for (int r = 0; r < rows; ++r)
        mask_and_sum<kRelu>(y + int64_t(r) * cols + c0, dy + int64_t(r) * cols + c0, acc);
    } else {  // the ragged last chunk: plain loops
      for (int r = 0; r < rows; ++r) {
        const float* out = y + int64_t(r) * cols + c0;
        float* g = dy + int64_t(r) * cols + c0;
        for (int c = 0; c < width; ++c) {
          const float v = kRelu && !(out[c] > 0.0f) ? 0.0f : g[c];
          g[c] = v;
          acc[c] += v;
        }
      }
    }
    for (int c = 0; c < width; ++c) dbias[c0 + c] = acc[c];
  });
}

}  // namespace

void bias_activation_backward(int rows, int cols, const float* y, Activation act, float* dy,
                              float* dbias) {
  if (cols <= 0) return;
  if (act == Activation::kRelu)
    bias_backward_impl<true>(rows, cols, y, dy, dbias);
  else
    bias_backward_impl<false>(rows, cols, y, dy, dbias);
}

namespace {
KOKKOS_INLINE_FUNCTION float stable_sigmoid(float s) {
  if (s >= 0.0f) return 1.0f / (1.0f + std::exp(-s));
  const float e = std::exp(s);
  return e / (1.0f + e);
}
}  // namespace

void bce_with_logits(int batch, const float* logits, const float* labels, float scale,
                     double* losses, float* dlogits) {
  if (batch <= 0) return;
  impl::Vector<const float> sv(logits, batch), yv(labels, batch);
  impl::Vector<double> lv(losses, batch);
  impl::Vector<float> gv(dlogits, batch);
  Kokkos::parallel_for(impl::Range(0, batch), KOKKOS_LAMBDA(int64_t b) {
    const double s = sv(b);
    const double y = yv(b);
    lv(b) = (s > 0.0 ? s : 0.0) - s * y + std::log1p(std::exp(-std::fabs(s)));
    gv(b) = scale * (stable_sigmoid(sv(b)) - yv(b));
  });
}

void sigmoid(int n, const float* logits, float* probs) {
  if (n <= 0) return;
  impl::Vector<const float> sv(logits, n);
  impl::Vector<float> pv(probs, n);
  Kokkos::parallel_for(impl::Range(0, n), KOKKOS_LAMBDA(int64_t i) { pv(i) = stable_sigmoid(sv(i)); });
}

}  // namespace strata::backend::host
