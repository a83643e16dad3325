// Sparse optimizers on the host. The per-row arithmetic is the reference of the
// CUDA kernels (cuda/sparse_optimizer.cu), which reproduce it bit for bit.
#include "backend/host/host_sparse_optimizer.hpp"

#ifdef __SSE2__
#include <immintrin.h>
#endif

#include <cmath>
#include <cstring>

namespace strata::backend::host {

namespace {

void sgd_row(float lr, float* w, const float* g, int dim) {
  for (int i = 0; i < dim; ++i) w[i] -= lr * g[i];
}

// Four lanes at a time where SSE exists: sqrt, division and the separate
// multiply and add are IEEE-exact per lane, so the bits equal the scalar loop's.
void adagrad_row(float lr_s, float eps_s, float* w, float* a, const float* g, int dim) {
  int i = 0;
#ifdef __SSE2__
  const __m128 lr = _mm_set1_ps(lr_s), eps = _mm_set1_ps(eps_s);
  for (; i + 4 <= dim; i += 4) {
    const __m128 gv = _mm_loadu_ps(g + i);
    const __m128 av = _mm_add_ps(_mm_loadu_ps(a + i), _mm_mul_ps(gv, gv));
    _mm_storeu_ps(a + i, av);
    const __m128 step = _mm_div_ps(_mm_mul_ps(lr, gv), _mm_add_ps(_mm_sqrt_ps(av), eps));
    _mm_storeu_ps(w + i, _mm_sub_ps(_mm_loadu_ps(w + i), step));
  }
#endif
  for (; i < dim; ++i) {
    a[i] += g[i] * g[i];
    w[i] -= lr_s * g[i] / (std::sqrt(a[i]) + eps_s);
  }
}

// The reference of the device's Adam: each operation rounded on its own, in this
// order (the build never contracts a multiply and an add into one).
void adam_row(const SparseOptimizerParams& p, float* w, float* state, const float* g, int dim) {
  float* m = state;
  float* v = state + dim;
  float* powers = state + 2 * dim;
  const float p1 = powers[0] * p.beta1, p2 = powers[1] * p.beta2;
  powers[0] = p1;
  powers[1] = p2;
  const float step_size = p.lr / (1.0f - p1);
  const float sqrt_bc2 = std::sqrt(1.0f - p2);
  const float c1 = 1.0f - p.beta1, c2 = 1.0f - p.beta2;
  for (int i = 0; i < dim; ++i) {
    m[i] = p.beta1 * m[i] + c1 * g[i];
    v[i] = p.beta2 * v[i] + (c2 * g[i]) * g[i];
    const float denom = std::sqrt(v[i]) / sqrt_bc2 + p.eps;
    w[i] -= (step_size * m[i]) / denom;
  }
}

}  // namespace

void sparse_optimizer_apply_row(const SparseOptimizerParams& p, float* values, float* state, const float* grad,
                                int dim) {
  switch (p.kind) {
    case SparseOptimizerKind::kAdagrad: adagrad_row(p.lr, p.eps, values, state, grad, dim); break;
    case SparseOptimizerKind::kAdam: adam_row(p, values, state, grad, dim); break;
    default: sgd_row(p.lr, values, grad, dim);
  }
}

void sparse_optimizer_step(const SparseOptimizerParams& p, float* arena, int width, const int32_t* slots, size_t n,
                           int dim, const float* grads) {
  constexpr size_t kAhead = 8;  // rows are random in a large arena: request a few ahead
  for (size_t i = 0; i < n; ++i) {
    if (i + kAhead < n) __builtin_prefetch(arena + size_t(slots[i + kAhead]) * width, 1);
    float* row = arena + size_t(slots[i]) * width;
    host::sparse_optimizer_apply_row(p, row, row + dim, grads + i * size_t(dim), dim);
  }
}

void scatter_sparse_optimizer_step(const SparseOptimizerParams& p, float* arena, int width, const int32_t* slots,
                                   size_t n, int dim, const float* grads, ScatterOptimizerScratch& s) {
  // GradientAccumulator's algorithm: one sum per distinct slot, added in occurrence order.
  s.slots.clear();
  s.sums.clear();
  for (size_t k = 0; k < n; ++k) {
    const int32_t slot = slots[k];
    if (size_t(slot) >= s.index_of_slot.size()) s.index_of_slot.resize(size_t(slot) + 1, -1);
    int32_t& at = s.index_of_slot[slot];
    if (at < 0) {
      at = int32_t(s.slots.size());
      s.slots.push_back(slot);
      s.sums.resize(s.slots.size() * size_t(dim), 0.0f);
    }
    float* sum = s.sums.data() + size_t(at) * dim;
    const float* g = grads + k * size_t(dim);
    for (int j = 0; j < dim; ++j) sum[j] += g[j];
  }
  host::sparse_optimizer_step(p, arena, width, s.slots.data(), s.slots.size(), dim, s.sums.data());
  for (int32_t slot : s.slots) s.index_of_slot[slot] = -1;
}

}  // namespace strata::backend::host
