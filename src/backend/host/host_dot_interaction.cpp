// Pairwise dot interaction on the host. Samples are processed in blocks of
// kInteractionLanes (8), transposed ("packed") to [feature][component][lane] so that one
// SIMD vector holds one component of the block's samples: every dot product becomes a
// chain of lane-wise multiply-adds in component order, without horizontal sums, for any
// width. Rows go in and out of that layout through 8 x 8 in-register transposes.
// The block bodies are compiled twice, generic and AVX2 (see impl/cpu_dispatch.hpp);
// both add the same products in the same order, so they agree bit for bit.
#include <atomic>

#include "backend/host/host_kernels.hpp"
#include "backend/host/impl/cpu_dispatch.hpp"
#include "backend/host/impl/host_views.hpp"

#if !defined(__GNUC__)
#error "host_dot_interaction.cpp uses GCC/Clang vector extensions"
#endif
// Lanes values only cross always-inlined functions, so the vector ABI never matters.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace strata::backend::host {

namespace {

constexpr int L = kInteractionLanes;
static_assert(L == 8, "the transposes below are written for 8 lanes");
// One component of L samples. Without AVX the compiler splits it into two SSE halves.
typedef float Lanes __attribute__((vector_size(L * sizeof(float))));
typedef int LaneIndex __attribute__((vector_size(L * sizeof(int))));

#if defined(__clang__)
#define STRATA_SHUFFLE(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define STRATA_SHUFFLE(a, b, ...) __builtin_shuffle(a, b, LaneIndex{__VA_ARGS__})
#endif

STRATA_ALWAYS_INLINE Lanes load(const float* p) {
  Lanes v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
STRATA_ALWAYS_INLINE void store(float* p, const Lanes& v) { __builtin_memcpy(p, &v, sizeof v); }

// r[k][l] <- r[l][k]. The shuffle patterns are AVX's unpack / shuffle / permute2f128.
STRATA_ALWAYS_INLINE void transpose8(Lanes (&r)[8]) {
  Lanes t[8], u[8];
  for (int k = 0; k < 8; k += 2) {
    t[k] = STRATA_SHUFFLE(r[k], r[k + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[k + 1] = STRATA_SHUFFLE(r[k], r[k + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int k = 0; k < 8; k += 4) {
    u[k] = STRATA_SHUFFLE(t[k], t[k + 2], 0, 1, 8, 9, 4, 5, 12, 13);
    u[k + 1] = STRATA_SHUFFLE(t[k], t[k + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    u[k + 2] = STRATA_SHUFFLE(t[k + 1], t[k + 3], 0, 1, 8, 9, 4, 5, 12, 13);
    u[k + 3] = STRATA_SHUFFLE(t[k + 1], t[k + 3], 2, 3, 10, 11, 6, 7, 14, 15);
  }
  for (int k = 0; k < 4; ++k) {
    r[k] = STRATA_SHUFFLE(u[k], u[k + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    r[k + 4] = STRATA_SHUFFLE(u[k], u[k + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
}

inline int64_t num_blocks(int batch) { return (int64_t(batch) + L - 1) / L; }
inline int pair_index(int i, int j) { return i * (i - 1) / 2 + j; }  // i > j

struct ForwardArgs {
  int batch, num_features, dim, width;
  const float* const* features;
  float* packed;
  float* out;
};

struct BackwardArgs {
  int batch, num_features, dim, width;
  const float* packed;
  const float* dout;
  float* scratch;
  float* const* dfeatures;
};

constexpr int kPairChunk = 64;       // pair results buffered before being transposed out
constexpr int kComponentChunk = 32;  // feature-gradient components buffered likewise

// buf[g] = z_i . z_(j0+g), components summed in ascending order from zero.
template <int G>
STRATA_ALWAYS_INLINE void dots(const float* blk, int dim, int i, int j0, Lanes* buf) {
  const int64_t fs = int64_t(dim) * L;
  const float* zi = blk + i * fs;
  const float* zj = blk + j0 * fs;
  Lanes acc[G];
  for (int g = 0; g < G; ++g) acc[g] = Lanes{};
  for (int c = 0; c < dim; ++c) {
    const Lanes x = load(zi + c * L);
    for (int g = 0; g < G; ++g) acc[g] += x * load(zj + g * fs + c * L);
  }
  for (int g = 0; g < G; ++g) buf[g] = acc[g];
}

// buf[g] = d/d z_i[c0 + g]: sum over j != i, ascending, of dpair(i, j) * z_j[c0 + g].
template <int G>
STRATA_ALWAYS_INLINE void feature_grad(const float* blk, const float* dpair, int F, int dim, int i,
                                       int c0, Lanes* buf) {
  Lanes acc[G];
  for (int g = 0; g < G; ++g) acc[g] = Lanes{};
  for (int j = 0; j < F; ++j) {
    if (j == i) continue;
    const Lanes w = load(dpair + int64_t(j < i ? pair_index(i, j) : pair_index(j, i)) * L);
    const float* z = blk + (int64_t(j) * dim + c0) * L;
    for (int g = 0; g < G; ++g) acc[g] += w * load(z + g * L);
  }
  for (int g = 0; g < G; ++g) buf[g] = acc[g];
}

// rows[l][0 .. n) <- buf[0 .. n)[l] for l < lanes (row l at rows + l * stride).
STRATA_ALWAYS_INLINE void unpack_rows(const Lanes* buf, int n, int lanes, float* rows, int64_t stride) {
  int q = 0;
  if (lanes == L) {
    for (; q + L <= n; q += L) {
      Lanes t[8];
      for (int k = 0; k < 8; ++k) t[k] = buf[q + k];
      transpose8(t);
      for (int l = 0; l < L; ++l) store(rows + l * stride + q, t[l]);
    }
  }
  for (int l = 0; l < lanes; ++l)
    for (int r = q; r < n; ++r) rows[l * stride + r] = buf[r][l];
}

// dst[0 .. n) <- lanes of rows[l][0 .. n) (row l at rows + l * stride); missing lanes zero.
STRATA_ALWAYS_INLINE void pack_rows(const float* rows, int64_t stride, int n, int lanes, float* dst) {
  int q = 0;
  if (lanes == L) {
    for (; q + L <= n; q += L) {
      Lanes t[8];
      for (int l = 0; l < L; ++l) t[l] = load(rows + l * stride + q);
      transpose8(t);
      for (int k = 0; k < 8; ++k) store(dst + (q + k) * L, t[k]);
    }
  }
  for (int r = q; r < n; ++r)
    for (int l = 0; l < L; ++l) dst[r * L + l] = l < lanes ? rows[l * stride + r] : 0.0f;
}

template <int G>
STRATA_ALWAYS_INLINE void forward_block(const ForwardArgs& a, int64_t blk_id) {
  const int F = a.num_features, dim = a.dim, width = a.width;
  const int64_t b0 = blk_id * L;
  const int lanes = a.batch - b0 < L ? int(a.batch - b0) : L;
  float* blk = a.packed + blk_id * F * dim * L;
  for (int f = 0; f < F; ++f)  // blk[f][c][l] = features[f][b0 + l][c]
    pack_rows(a.features[f] + b0 * dim, dim, dim, lanes, blk + int64_t(f) * dim * L);
  float* out0 = a.out + b0 * width;
  for (int l = 0; l < lanes; ++l) {
    const float* x0 = a.features[0] + (b0 + l) * dim;
    for (int c = 0; c < dim; ++c) out0[l * width + c] = x0[c];
  }
  // Pairs in output order (1,0), (2,0), (2,1), ..., buffered kPairChunk at a time.
  Lanes buf[kPairChunk];
  int n = 0, column = dim;
  for (int i = 1; i < F; ++i) {
    int j = 0;
    for (; j + G <= i; j += G) {
      if (n + G > kPairChunk) {
        unpack_rows(buf, n, lanes, out0 + column, width);
        column += n;
        n = 0;
      }
      dots<G>(blk, dim, i, j, buf + n);
      n += G;
    }
    for (; j < i; ++j) {
      if (n + 1 > kPairChunk) {
        unpack_rows(buf, n, lanes, out0 + column, width);
        column += n;
        n = 0;
      }
      dots<1>(blk, dim, i, j, buf + n);
      n += 1;
    }
  }
  unpack_rows(buf, n, lanes, out0 + column, width);
}

template <int G>
STRATA_ALWAYS_INLINE void backward_block(const BackwardArgs& a, int64_t blk_id, int slot) {
  const int F = a.num_features, dim = a.dim, width = a.width;
  const int64_t b0 = blk_id * L;
  const int lanes = a.batch - b0 < L ? int(a.batch - b0) : L;
  const float* blk = a.packed + blk_id * F * dim * L;
  const int pairs = dot_interaction_pairs(F);
  float* dpair = a.scratch + int64_t(slot) * pairs * L;
  const float* g0 = a.dout + b0 * width;
  pack_rows(g0 + dim, width, pairs, lanes, dpair);  // dpair[p][l] = d loss / d pair p of sample l
  Lanes buf[kComponentChunk];
  for (int i = 0; i < F; ++i) {
    float* dst = a.dfeatures[i] + b0 * dim;
    for (int c0 = 0; c0 < dim; c0 += kComponentChunk) {
      const int n = dim - c0 < kComponentChunk ? dim - c0 : kComponentChunk;
      int c = 0;
      for (; c + G <= n; c += G) feature_grad<G>(blk, dpair, F, dim, i, c0 + c, buf + c);
      for (; c < n; ++c) feature_grad<1>(blk, dpair, F, dim, i, c0 + c, buf + c);
      unpack_rows(buf, n, lanes, dst + c0, dim);
    }
  }
  // Feature 0 also passes straight through to the first dim outputs (added last).
  float* d0 = a.dfeatures[0] + b0 * dim;
  for (int l = 0; l < lanes; ++l)
    for (int c = 0; c < dim; ++c) d0[l * dim + c] += g0[l * width + c];
}

// Generic x86-64 (SSE: a Lanes is two registers, so fewer accumulators) and AVX2.
void forward_block_generic(const ForwardArgs& a, int64_t blk) { forward_block<4>(a, blk); }
void backward_block_generic(const BackwardArgs& a, int64_t blk, int slot) {
  backward_block<4>(a, blk, slot);
}
#if STRATA_HOST_AVX2_CLONE
STRATA_TARGET_AVX2 void forward_block_avx2(const ForwardArgs& a, int64_t blk) { forward_block<6>(a, blk); }
STRATA_TARGET_AVX2 void backward_block_avx2(const BackwardArgs& a, int64_t blk, int slot) {
  backward_block<8>(a, blk, slot);
}
#endif

std::atomic<bool> g_allow_avx2{true};

bool use_avx2() { return g_allow_avx2.load(std::memory_order_relaxed) && impl::cpu_has_avx2(); }

}  // namespace

void allow_avx2_kernels(bool allow) { g_allow_avx2.store(allow); }

size_t dot_interaction_packed_size(int batch, int num_features, int dim) {
  return size_t(num_blocks(batch) * num_features * dim * L);
}

size_t dot_interaction_scratch_size(int num_features, int dim) {
  (void)dim;
  // One (pairs, L) block of pair gradients per thread.
  return size_t(impl::ExecSpace::concurrency()) * dot_interaction_pairs(num_features) * L;
}

void dot_interaction_forward(int batch, int num_features, int dim, const float* const* features,
                             float* packed, float* out) {
  if (batch <= 0) return;
  const ForwardArgs args{batch, num_features, dim, dot_interaction_width(num_features, dim),
                         features, packed, out};
  auto body = &forward_block_generic;
#if STRATA_HOST_AVX2_CLONE
  if (use_avx2()) body = &forward_block_avx2;
#endif
  Kokkos::parallel_for(impl::Range(0, num_blocks(batch)), KOKKOS_LAMBDA(int64_t blk) { body(args, blk); });
}

void dot_interaction_backward(int batch, int num_features, int dim, const float* packed,
                              const float* dout, float* scratch, float* const* dfeatures) {
  if (batch <= 0) return;
  const BackwardArgs args{batch, num_features, dim, dot_interaction_width(num_features, dim),
                          packed, dout, scratch, dfeatures};
  auto body = &backward_block_generic;
#if STRATA_HOST_AVX2_CLONE
  if (use_avx2()) body = &backward_block_avx2;
#endif
  // Each thread owns one slot of the scratch for its pair gradients.
  Kokkos::Experimental::UniqueToken<impl::ExecSpace> token;
  Kokkos::parallel_for(impl::Range(0, num_blocks(batch)), KOKKOS_LAMBDA(int64_t blk) {
    const int slot = token.acquire();
    body(args, blk, slot);
    token.release(slot);
  });
}

}  // namespace strata::backend::host
