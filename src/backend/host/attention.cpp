// Blocked attention kernels on the host (see attention.hpp for the layout and contract).
//
// Each (sequence, head) is processed on its own, in score blocks of bq queries x bk keys
// (bk a multiple of the 8 lanes). A score block S (m, n) = scale * Q_i K_j^T comes from
// one cblas_sgemm on strided views of Q and K (leading dimension heads * dim); the
// element-wise work on it (mask, exp, SiLU, bias) runs row by row in 8-lane vectors;
// the products with V, dO, Q, K are again cblas_sgemm on strided views, accumulating
// into the caller's output with beta = 1 in a fixed block order.
//
// Causal mask of a block: query q0 + r sees keys k0 + c with c < valid(r) =
// clamp(q0 + r - k0 + 1, 0, n). Masked entries are written as exact zeros, so the
// products that follow need no mask. Lanes past n in a block row are computed (on
// stale but finite data) and stored as zeros; they never reach a GEMM.
#include "backend/host/attention.hpp"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <string>

#include "backend/host/impl/cpu_dispatch.hpp"
#include "common/error.hpp"

#if !defined(__GNUC__)
#error "attention.cpp uses GCC/Clang vector extensions"
#endif
// Lane values only cross always-inlined functions, so the vector ABI never matters.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace strata::backend::host {

namespace {

constexpr int W = 8;  // lanes of the element-wise passes
typedef float Lanes __attribute__((vector_size(W * sizeof(float))));
typedef int32_t LaneInts __attribute__((vector_size(W * sizeof(int32_t))));
typedef double Lanes64 __attribute__((vector_size(W * sizeof(double))));

STRATA_ALWAYS_INLINE Lanes splat(float x) { return Lanes{} + x; }
STRATA_ALWAYS_INLINE Lanes load(const float* p) {
  Lanes v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
STRATA_ALWAYS_INLINE void store(float* p, const Lanes& v) { __builtin_memcpy(p, &v, sizeof v); }
STRATA_ALWAYS_INLINE Lanes64 load64(const double* p) {
  Lanes64 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
STRATA_ALWAYS_INLINE void store64(double* p, const Lanes64& v) { __builtin_memcpy(p, &v, sizeof v); }

// Lanes of columns c0 .. c0 + 7 that are below `valid`.
STRATA_ALWAYS_INLINE LaneInts valid_lanes(int c0, int valid) {
  const LaneInts iota = {0, 1, 2, 3, 4, 5, 6, 7};
  return (iota + c0) < (LaneInts{} + valid);
}

// Fixed-order horizontal reductions (the same tree in every build).
STRATA_ALWAYS_INLINE float hsum(const Lanes& v) {
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}
STRATA_ALWAYS_INLINE float max2(float a, float b) { return a > b ? a : b; }
STRATA_ALWAYS_INLINE float hmax(const Lanes& v) {
  return max2(max2(max2(v[0], v[1]), max2(v[2], v[3])), max2(max2(v[4], v[5]), max2(v[6], v[7])));
}

// exp(x) lane-wise: Cephes' expf (range reduction by ln 2 in two parts, degree-5
// polynomial, relative error ~1e-7), branch-free. Exactly 0 for x < -87 (and -inf),
// saturates at exp(88) above 88. Plain IEEE multiplies and adds only, so every build
// and every lane width gives the same bits.
STRATA_ALWAYS_INLINE Lanes exp_lanes(const Lanes& x_in) {
  const LaneInts under = x_in < splat(-87.0f);
  Lanes x = under ? splat(-87.0f) : x_in;
  x = x > splat(88.0f) ? splat(88.0f) : x;
  const Lanes magic = splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const Lanes n = (x * 1.44269504088896341f + magic) - magic;
  Lanes r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  Lanes p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const Lanes y = p * (r * r) + r + 1.0f;
  const LaneInts bits = (__builtin_convertvector(n, LaneInts) + 127) << 23;  // 2^n
  Lanes two_n;
  __builtin_memcpy(&two_n, &bits, sizeof two_n);
  return under ? Lanes{} : y * two_n;
}

STRATA_ALWAYS_INLINE float exp_scalar(float x) { return exp_lanes(splat(x))[0]; }

STRATA_ALWAYS_INLINE int valid_keys(int diag, int r, int n) {
  return std::min(n, std::max(0, diag + r + 1));
}

// One score block: m rows of n columns at row stride kb; diag = q0 - k0.
struct Block {
  int m, n, kb, diag;
};

// ---- element-wise passes (compiled generic and AVX2) ---------------------------------

// Online softmax over one key block: s (scores) becomes P = exp(s - new max); the rows'
// running max and sum are updated and corr[r] = exp(old max - new max) returned.
STRATA_ALWAYS_INLINE void softmax_forward_rows_body(const Block& b, float* s, float* row_max,
                                                    float* row_sum, float* corr) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int r = 0; r < b.m; ++r) {
    float* row = s + int64_t(r) * b.kb;
    const int valid = valid_keys(b.diag, r, b.n);
    if (valid == 0) {
      for (int c = 0; c < b.n; c += W) store(row + c, Lanes{});
      corr[r] = 1.0f;
      continue;
    }
    Lanes vmax = splat(neg_inf);
    for (int c = 0; c < valid; c += W) {
      const Lanes x = load(row + c);
      const LaneInts keep = valid_lanes(c, valid) & (x > vmax);
      vmax = keep ? x : vmax;
    }
    const float new_max = max2(row_max[r], hmax(vmax));
    const float scale_old = exp_scalar(row_max[r] - new_max);  // 0 on the first block (-inf)
    Lanes vsum = Lanes{};
    const Lanes mx = splat(new_max);
    for (int c = 0; c < b.n; c += W) {
      const Lanes p = valid_lanes(c, valid) ? exp_lanes(load(row + c) - mx) : Lanes{};
      store(row + c, p);
      vsum += p;
    }
    row_sum[r] = row_sum[r] * scale_old + hsum(vsum);
    row_max[r] = new_max;
    corr[r] = scale_old;
  }
}

// Backward: s (scores) becomes P = exp(s - lse[r]), the forward's probabilities.
STRATA_ALWAYS_INLINE void softmax_probs_body(const Block& b, float* s, const float* lse) {
  for (int r = 0; r < b.m; ++r) {
    float* row = s + int64_t(r) * b.kb;
    const int valid = valid_keys(b.diag, r, b.n);
    const Lanes l = splat(lse[r]);
    for (int c = 0; c < b.n; c += W)
      store(row + c, valid_lanes(c, valid) ? exp_lanes(load(row + c) - l) : Lanes{});
  }
}

// Backward: dp (dO V^T) becomes dS = P * (dp - delta[r]).
STRATA_ALWAYS_INLINE void softmax_dscores_body(const Block& b, const float* p, float* dp,
                                               const float* delta) {
  for (int r = 0; r < b.m; ++r) {
    const float* prow = p + int64_t(r) * b.kb;
    float* drow = dp + int64_t(r) * b.kb;
    const int valid = valid_keys(b.diag, r, b.n);
    const Lanes d = splat(delta[r]);
    for (int c = 0; c < b.n; c += W)
      store(drow + c, valid_lanes(c, valid) ? load(prow + c) * (load(drow + c) - d) : Lanes{});
  }
}

STRATA_ALWAYS_INLINE Lanes sigmoid_lanes(const Lanes& z) { return 1.0f / (1.0f + exp_lanes(-z)); }

// HSTU forward: s (scores) becomes A = SiLU(s + bias) * inv_norm. `table` points at the
// block's diagonal in the reversed bias table (see fill_bias_table), so row r's biases
// are table[c - r]: valid columns read real entries, masked ones its zero padding.
STRATA_ALWAYS_INLINE void hstu_forward_rows_body(const Block& b, float* s, const float* table,
                                                 float inv_norm) {
  for (int r = 0; r < b.m; ++r) {
    float* row = s + int64_t(r) * b.kb;
    const int valid = valid_keys(b.diag, r, b.n);
    if (valid == 0) {
      for (int c = 0; c < b.n; c += W) store(row + c, Lanes{});
      continue;
    }
    const float* bias = table - r;
    for (int c = 0; c < b.n; c += W) {
      const Lanes z = load(row + c) + load(bias + c);
      store(row + c, valid_lanes(c, valid) ? z * sigmoid_lanes(z) * inv_norm : Lanes{});
    }
  }
}

// HSTU backward: from s (scores), a <- A and s <- dA/dZ = inv_norm * SiLU'(z),
// SiLU'(z) = sig(z) (1 + z (1 - sig(z))).
STRATA_ALWAYS_INLINE void hstu_backward_rows_body(const Block& b, float* s, float* a,
                                                  const float* table, float inv_norm) {
  for (int r = 0; r < b.m; ++r) {
    float* row = s + int64_t(r) * b.kb;
    float* arow = a + int64_t(r) * b.kb;
    const int valid = valid_keys(b.diag, r, b.n);
    if (valid == 0) {
      for (int c = 0; c < b.n; c += W) store(row + c, Lanes{}), store(arow + c, Lanes{});
      continue;
    }
    const float* bias = table - r;
    for (int c = 0; c < b.n; c += W) {
      const LaneInts keep = valid_lanes(c, valid);
      const Lanes z = load(row + c) + load(bias + c);
      const Lanes sig = sigmoid_lanes(z);
      store(arow + c, keep ? z * sig * inv_norm : Lanes{});
      store(row + c, keep ? sig * (1.0f + z * (1.0f - sig)) * inv_norm : Lanes{});
    }
  }
}

// HSTU backward: da (dO V^T) becomes dZ = da * g; with bias_grad (laid out like the
// bias table), dZ is also added to it in double.
STRATA_ALWAYS_INLINE void hstu_dz_body(const Block& b, const float* g, float* da, double* bias_grad) {
  for (int r = 0; r < b.m; ++r) {
    const float* grow = g + int64_t(r) * b.kb;
    float* drow = da + int64_t(r) * b.kb;
    const int valid = valid_keys(b.diag, r, b.n);
    if (valid == 0) {
      for (int c = 0; c < b.n; c += W) store(drow + c, Lanes{});
      continue;
    }
    double* acc = bias_grad ? bias_grad - r : nullptr;
    for (int c = 0; c < b.n; c += W) {
      const Lanes dz = valid_lanes(c, valid) ? load(drow + c) * load(grow + c) : Lanes{};
      store(drow + c, dz);
      // Masked lanes add +0.0: to the padding past the diagonal or, for lanes past n,
      // to real distances, which +0.0 leaves unchanged.
      if (acc) store64(acc + c, load64(acc + c) + __builtin_convertvector(dz, Lanes64));
    }
  }
}

struct RowKernels {
  void (*softmax_forward)(const Block&, float*, float*, float*, float*);
  void (*softmax_probs)(const Block&, float*, const float*);
  void (*softmax_dscores)(const Block&, const float*, float*, const float*);
  void (*hstu_forward)(const Block&, float*, const float*, float);
  void (*hstu_backward)(const Block&, float*, float*, const float*, float);
  void (*hstu_dz)(const Block&, const float*, float*, double*);
};

#define STRATA_ATTENTION_ROW_KERNELS(SUFFIX, TARGET)                                            \
  TARGET void softmax_forward_##SUFFIX(const Block& b, float* s, float* mx, float* sum,         \
                                       float* corr) {                                          \
    softmax_forward_rows_body(b, s, mx, sum, corr);                                            \
  }                                                                                            \
  TARGET void softmax_probs_##SUFFIX(const Block& b, float* s, const float* lse) {             \
    softmax_probs_body(b, s, lse);                                                             \
  }                                                                                            \
  TARGET void softmax_dscores_##SUFFIX(const Block& b, const float* p, float* dp,              \
                                       const float* delta) {                                   \
    softmax_dscores_body(b, p, dp, delta);                                                     \
  }                                                                                            \
  TARGET void hstu_forward_##SUFFIX(const Block& b, float* s, const float* t, float inv) {     \
    hstu_forward_rows_body(b, s, t, inv);                                                      \
  }                                                                                            \
  TARGET void hstu_backward_##SUFFIX(const Block& b, float* s, float* a, const float* t,       \
                                     float inv) {                                              \
    hstu_backward_rows_body(b, s, a, t, inv);                                                  \
  }                                                                                            \
  TARGET void hstu_dz_##SUFFIX(const Block& b, const float* g, float* da, double* bg) {        \
    hstu_dz_body(b, g, da, bg);                                                                \
  }                                                                                            \
  constexpr RowKernels kRowKernels_##SUFFIX = {softmax_forward_##SUFFIX, softmax_probs_##SUFFIX, \
                                               softmax_dscores_##SUFFIX, hstu_forward_##SUFFIX,  \
                                               hstu_backward_##SUFFIX, hstu_dz_##SUFFIX};

STRATA_ATTENTION_ROW_KERNELS(generic, )
#if STRATA_HOST_AVX2_CLONE
STRATA_ATTENTION_ROW_KERNELS(avx2, STRATA_TARGET_AVX2)
#endif
#undef STRATA_ATTENTION_ROW_KERNELS

std::atomic<bool> g_allow_avx2{true};

const RowKernels& row_kernels() {
#if STRATA_HOST_AVX2_CLONE
  if (g_allow_avx2.load(std::memory_order_relaxed) && impl::cpu_has_avx2()) return kRowKernels_avx2;
#endif
  return kRowKernels_generic;
}

// ---- shared set-up ---------------------------------------------------------------------

// c (m, n) = alpha * op(a) op(b) + beta * c, row-major with leading dimensions.
inline void sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                  int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// Block sizes after validation: bk rounded up to whole lanes.
struct Plan {
  int bq, bk, heads, dim, ld, max_len;
  float scale;
};

Plan make_plan(const JaggedAttentionShape& shape, const AttentionOptions& options, const char* kernel) {
  const std::string name = kernel;
  if (shape.batch < 0 || shape.heads < 1 || shape.dim < 1)
    throw Error(name + ": invalid shape (batch " + std::to_string(shape.batch) + ", heads " +
                    std::to_string(shape.heads) + ", dim " + std::to_string(shape.dim) + ")",
                "pass batch >= 0, heads >= 1 and dim >= 1");
  if (options.query_block < 1 || options.key_block < 1)
    throw Error(name + ": block sizes must be positive", "set AttentionOptions query_block, key_block >= 1");
  if (options.first_query < 0 || options.first_query % options.query_block != 0)
    throw Error(name + ": first_query " + std::to_string(options.first_query) + " is not a multiple of query_block " +
                    std::to_string(options.query_block),
                "start a forward at a query block boundary (AttentionOptions first_query)");
  if (shape.batch > 0 && shape.offsets == nullptr)
    throw Error(name + ": offsets missing", "pass the (batch + 1) jagged offsets");
  int max_len = 0;
  if (shape.batch > 0) {
    if (shape.offsets[0] != 0) throw Error(name + ": offsets[0] must be 0", "pass offsets starting at 0");
    for (int b = 0; b < shape.batch; ++b) {
      const int len = shape.offsets[b + 1] - shape.offsets[b];
      if (len < 0)
        throw Error(name + ": offsets decrease at sequence " + std::to_string(b),
                    "pass non-decreasing offsets (sequence b owns tokens offsets[b] .. offsets[b+1])");
      max_len = std::max(max_len, len);
    }
  }
  Plan p;
  p.bq = options.query_block;
  p.bk = (options.key_block + W - 1) / W * W;
  p.heads = shape.heads;
  p.dim = shape.dim;
  p.ld = shape.heads * shape.dim;
  p.max_len = max_len;
  p.scale = options.scale != 0.0f ? options.scale : 1.0f / std::sqrt(float(shape.dim));
  return p;
}

void check_buckets(int num_buckets, const char* kernel) {
  if (num_buckets < 0)
    throw Error(std::string(kernel) + ": num_buckets is " + std::to_string(num_buckets),
                "pass the bias table's length (>= 0; 0 for no bias)");
}

// Floats of the block scratch: score blocks (bq, bk) and per-row vectors (bq).
size_t block_floats(AttentionKind kind, int bq, int bk, int dim) {
  const size_t block = size_t(bq) * bk;
  return kind == AttentionKind::kCausalSoftmax ? 2 * block + size_t(bq) * dim + 4 * size_t(bq)
                                               : 3 * block;
}

template <class T>
T* grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.assign(n, T(0));  // zeros: lanes past n then always hold finite data
  return v.data();
}

// The HSTU bias by reversed distance, so that a row's biases are contiguous:
// table[u] = bias[min(max_len - 1 - u, num_buckets - 1)] for u < max_len, then bk
// zeros of padding for the lanes past the mask.
float* fill_bias_table(const Plan& p, const float* bias, int num_buckets, AttentionScratch& scratch) {
  float* table = grow(scratch.bias_table, size_t(p.max_len) + p.bk);
  const bool has_bias = bias != nullptr && num_buckets > 0;
  for (int u = 0; u < p.max_len + p.bk; ++u) {
    const int d = p.max_len - 1 - u;
    table[u] = has_bias && d >= 0 ? bias[std::min(d, num_buckets - 1)] : 0.0f;
  }
  return table;
}

}  // namespace

void allow_avx2_attention_kernels(bool allow) { g_allow_avx2.store(allow); }

size_t attention_scratch_bytes(AttentionKind kind, int dim, int max_len, const AttentionOptions& options) {
  const int bq = std::max(1, options.query_block);
  const int bk = (std::max(1, options.key_block) + W - 1) / W * W;
  size_t bytes = block_floats(kind, bq, bk, dim) * sizeof(float);
  if (kind == AttentionKind::kHstu) bytes += (size_t(max_len) + bk) * (sizeof(float) + sizeof(double));
  return bytes;
}

// ---- causal softmax attention ----------------------------------------------------------

void causal_attention_forward(const JaggedAttentionShape& shape, const float* q, const float* k,
                              const float* v, float* out, float* lse, AttentionScratch& scratch,
                              const AttentionOptions& options) {
  const Plan p = make_plan(shape, options, "causal_attention_forward");
  const RowKernels& kern = row_kernels();
  const int bq = p.bq, bk = p.bk, D = p.dim, ld = p.ld, H = p.heads;
  float* s = grow(scratch.blocks, block_floats(AttentionKind::kCausalSoftmax, bq, bk, D));
  float* acc = s + 2 * size_t(bq) * bk;  // (bq, D) unnormalised output rows
  float* row_max = acc + size_t(bq) * D;  // (bq)
  float* row_sum = row_max + bq;          // (bq)
  float* corr = row_sum + bq;             // (bq)
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int b = 0; b < shape.batch; ++b) {
    const int64_t s0 = shape.offsets[b];
    const int L = shape.offsets[b + 1] - shape.offsets[b];
    for (int h = 0; h < H; ++h) {
      const float* qh = q + s0 * ld + h * D;
      const float* kh = k + s0 * ld + h * D;
      const float* vh = v + s0 * ld + h * D;
      float* oh = out + s0 * ld + h * D;
      for (int q0 = options.first_query; q0 < L; q0 += bq) {
        const int m = std::min(bq, L - q0);
        std::fill(row_max, row_max + m, neg_inf);
        std::fill(row_sum, row_sum + m, 0.0f);
        // Keys after the block's last query are masked for all its rows: stop there.
        for (int k0 = 0; k0 < q0 + m; k0 += bk) {
          const int n = std::min(bk, q0 + m - k0);
          const Block blk{m, n, bk, q0 - k0};
          sgemm(false, true, m, n, D, p.scale, qh + int64_t(q0) * ld, ld, kh + int64_t(k0) * ld, ld,
                0.0f, s, bk);
          kern.softmax_forward(blk, s, row_max, row_sum, corr);
          if (k0 > 0) {
            for (int r = 0; r < m; ++r) {
              if (corr[r] == 1.0f) continue;
              float* a = acc + int64_t(r) * D;
              for (int d = 0; d < D; ++d) a[d] *= corr[r];
            }
          }
          sgemm(false, false, m, D, n, 1.0f, s, bk, vh + int64_t(k0) * ld, ld, k0 == 0 ? 0.0f : 1.0f,
                acc, D);
        }
        for (int r = 0; r < m; ++r) {
          const float* a = acc + int64_t(r) * D;
          float* o = oh + int64_t(q0 + r) * ld;
          for (int d = 0; d < D; ++d) o[d] = a[d] / row_sum[r];
          lse[(s0 + q0 + r) * H + h] = row_max[r] + std::log(row_sum[r]);
        }
      }
    }
  }
}

void causal_attention_backward(const JaggedAttentionShape& shape, const float* q, const float* k,
                               const float* v, const float* out, const float* lse,
                               const float* dout, float* dq, float* dk, float* dv,
                               AttentionScratch& scratch, const AttentionOptions& options) {
  const Plan p = make_plan(shape, options, "causal_attention_backward");
  const RowKernels& kern = row_kernels();
  const int bq = p.bq, bk = p.bk, D = p.dim, ld = p.ld, H = p.heads;
  float* ps = grow(scratch.blocks, block_floats(AttentionKind::kCausalSoftmax, bq, bk, D));
  float* dps = ps + size_t(bq) * bk;               // (bq, bk) dP, then dS
  float* row_lse = dps + size_t(bq) * bk + size_t(bq) * D;  // (bq)
  float* delta = row_lse + bq;                     // (bq) rowsum(dO * O)
  for (int b = 0; b < shape.batch; ++b) {
    const int64_t s0 = shape.offsets[b];
    const int L = shape.offsets[b + 1] - shape.offsets[b];
    for (int h = 0; h < H; ++h) {
      const int64_t base = s0 * ld + h * D;
      const float *qh = q + base, *kh = k + base, *vh = v + base, *oh = out + base, *doh = dout + base;
      float *dqh = dq + base, *dkh = dk + base, *dvh = dv + base;
      // Key blocks outer: dK_j and dV_j accumulate over the query blocks that see them
      // (in ascending order) straight into the output; dQ_i accumulates over key blocks
      // in ascending order, starting with key block 0 which every query sees.
      for (int k0 = 0; k0 < L; k0 += bk) {
        const int n = std::min(bk, L - k0);
        const float* kj = kh + int64_t(k0) * ld;
        const float* vj = vh + int64_t(k0) * ld;
        float* dkj = dkh + int64_t(k0) * ld;
        float* dvj = dvh + int64_t(k0) * ld;
        bool first = true;
        for (int q0 = k0 / bq * bq; q0 < L; q0 += bq) {
          const int m = std::min(bq, L - q0);
          const Block blk{m, n, bk, q0 - k0};
          const float* qi = qh + int64_t(q0) * ld;
          const float* doi = doh + int64_t(q0) * ld;
          for (int r = 0; r < m; ++r) {
            const float* o = oh + int64_t(q0 + r) * ld;
            const float* g = doi + int64_t(r) * ld;
            float dot = 0.0f;
            for (int d = 0; d < D; ++d) dot += g[d] * o[d];
            delta[r] = dot;
            row_lse[r] = lse[(s0 + q0 + r) * H + h];
          }
          sgemm(false, true, m, n, D, p.scale, qi, ld, kj, ld, 0.0f, ps, bk);
          kern.softmax_probs(blk, ps, row_lse);
          const float beta = first ? 0.0f : 1.0f;
          sgemm(true, false, n, D, m, 1.0f, ps, bk, doi, ld, beta, dvj, ld);  // dV_j += P^T dO_i
          sgemm(false, true, m, n, D, 1.0f, doi, ld, vj, ld, 0.0f, dps, bk);  // dP = dO_i V_j^T
          kern.softmax_dscores(blk, ps, dps, delta);
          sgemm(false, false, m, D, n, p.scale, dps, bk, kj, ld, k0 == 0 ? 0.0f : 1.0f,
                dqh + int64_t(q0) * ld, ld);                                   // dQ_i += dS K_j
          sgemm(true, false, n, D, m, p.scale, dps, bk, qi, ld, beta, dkj, ld);  // dK_j += dS^T Q_i
          first = false;
        }
      }
    }
  }
}

// ---- HSTU pointwise attention ------------------------------------------------------------

void hstu_attention_forward(const JaggedAttentionShape& shape, const float* q, const float* k,
                            const float* v, const float* bias, int num_buckets, float* out,
                            AttentionScratch& scratch, const AttentionOptions& options) {
  const Plan p = make_plan(shape, options, "hstu_attention_forward");
  check_buckets(num_buckets, "hstu_attention_forward");
  const RowKernels& kern = row_kernels();
  const int bq = p.bq, bk = p.bk, D = p.dim, ld = p.ld, H = p.heads;
  float* s = grow(scratch.blocks, block_floats(AttentionKind::kHstu, bq, bk, D));
  const float* table = fill_bias_table(p, bias, num_buckets, scratch);
  for (int b = 0; b < shape.batch; ++b) {
    const int64_t s0 = shape.offsets[b];
    const int L = shape.offsets[b + 1] - shape.offsets[b];
    const float inv_norm = 1.0f / float(options.hstu_norm > 0 ? options.hstu_norm : L);
    for (int h = 0; h < H; ++h) {
      const int64_t base = s0 * ld + h * D;
      const float *qh = q + base, *kh = k + base, *vh = v + base;
      float* oh = out + base;
      for (int q0 = options.first_query; q0 < L; q0 += bq) {
        const int m = std::min(bq, L - q0);
        for (int k0 = 0; k0 < q0 + m; k0 += bk) {
          const int n = std::min(bk, q0 + m - k0);
          const Block blk{m, n, bk, q0 - k0};
          sgemm(false, true, m, n, D, p.scale, qh + int64_t(q0) * ld, ld, kh + int64_t(k0) * ld, ld,
                0.0f, s, bk);
          kern.hstu_forward(blk, s, table + (p.max_len - 1 - blk.diag), inv_norm);
          sgemm(false, false, m, D, n, 1.0f, s, bk, vh + int64_t(k0) * ld, ld, k0 == 0 ? 0.0f : 1.0f,
                oh + int64_t(q0) * ld, ld);
        }
      }
    }
  }
}

void hstu_attention_backward(const JaggedAttentionShape& shape, const float* q, const float* k,
                             const float* v, const float* bias, int num_buckets,
                             const float* dout, float* dq, float* dk, float* dv, float* dbias,
                             AttentionScratch& scratch, const AttentionOptions& options) {
  const Plan p = make_plan(shape, options, "hstu_attention_backward");
  check_buckets(num_buckets, "hstu_attention_backward");
  const RowKernels& kern = row_kernels();
  const int bq = p.bq, bk = p.bk, D = p.dim, ld = p.ld, H = p.heads;
  float* gs = grow(scratch.blocks, block_floats(AttentionKind::kHstu, bq, bk, D));  // scores, then dA/dZ
  float* as = gs + size_t(bq) * bk;   // (bq, bk) A
  float* das = as + size_t(bq) * bk;  // (bq, bk) dA, then dZ
  const float* table = fill_bias_table(p, bias, num_buckets, scratch);
  const bool want_dbias = dbias != nullptr && num_buckets > 0;
  double* bias_grad = nullptr;  // by reversed distance, like the table
  if (want_dbias) {
    bias_grad = grow(scratch.bias_grad, size_t(p.max_len) + bk);
    std::fill(bias_grad, bias_grad + p.max_len + bk, 0.0);
  }
  for (int b = 0; b < shape.batch; ++b) {
    const int64_t s0 = shape.offsets[b];
    const int L = shape.offsets[b + 1] - shape.offsets[b];
    const float inv_norm = 1.0f / float(options.hstu_norm > 0 ? options.hstu_norm : L);
    for (int h = 0; h < H; ++h) {
      const int64_t base = s0 * ld + h * D;
      const float *qh = q + base, *kh = k + base, *vh = v + base, *doh = dout + base;
      float *dqh = dq + base, *dkh = dk + base, *dvh = dv + base;
      for (int k0 = 0; k0 < L; k0 += bk) {  // same block order as the softmax backward
        const int n = std::min(bk, L - k0);
        const float* kj = kh + int64_t(k0) * ld;
        const float* vj = vh + int64_t(k0) * ld;
        float* dkj = dkh + int64_t(k0) * ld;
        float* dvj = dvh + int64_t(k0) * ld;
        bool first = true;
        for (int q0 = k0 / bq * bq; q0 < L; q0 += bq) {
          const int m = std::min(bq, L - q0);
          const Block blk{m, n, bk, q0 - k0};
          const int64_t shift = p.max_len - 1 - blk.diag;
          const float* qi = qh + int64_t(q0) * ld;
          const float* doi = doh + int64_t(q0) * ld;
          sgemm(false, true, m, n, D, p.scale, qi, ld, kj, ld, 0.0f, gs, bk);
          kern.hstu_backward(blk, gs, as, table + shift, inv_norm);
          const float beta = first ? 0.0f : 1.0f;
          sgemm(true, false, n, D, m, 1.0f, as, bk, doi, ld, beta, dvj, ld);   // dV_j += A^T dO_i
          sgemm(false, true, m, n, D, 1.0f, doi, ld, vj, ld, 0.0f, das, bk);   // dA = dO_i V_j^T
          kern.hstu_dz(blk, gs, das, want_dbias ? bias_grad + shift : nullptr);
          sgemm(false, false, m, D, n, p.scale, das, bk, kj, ld, k0 == 0 ? 0.0f : 1.0f,
                dqh + int64_t(q0) * ld, ld);                                    // dQ_i += dZ K_j
          sgemm(true, false, n, D, m, p.scale, das, bk, qi, ld, beta, dkj, ld);  // dK_j += dZ^T Q_i
          first = false;
        }
      }
    }
  }
  if (want_dbias) {
    // Distance d lives at max_len - 1 - d; the last bucket sums every d >= num_buckets - 1,
    // d ascending.
    for (int bucket = 0; bucket < num_buckets; ++bucket) {
      double sum = 0.0;
      if (bucket < num_buckets - 1) {
        if (bucket < p.max_len) sum = bias_grad[p.max_len - 1 - bucket];
      } else {
        for (int d = bucket; d < p.max_len; ++d) sum += bias_grad[p.max_len - 1 - d];
      }
      dbias[bucket] = float(sum);
    }
  }
}

// The backward's block loop without the dq, dk, dv products: the same scores, dA and
// dZ blocks, so the same additions into the bias gradient in the same order.
void hstu_attention_bias_backward(const JaggedAttentionShape& shape, const float* q, const float* k,
                                  const float* v, const float* bias, int num_buckets, const float* dout,
                                  float* dbias, AttentionScratch& scratch, const AttentionOptions& options) {
  const Plan p = make_plan(shape, options, "hstu_attention_bias_backward");
  check_buckets(num_buckets, "hstu_attention_bias_backward");
  const RowKernels& kern = row_kernels();
  const int bq = p.bq, bk = p.bk, D = p.dim, ld = p.ld, H = p.heads;
  float* gs = grow(scratch.blocks, block_floats(AttentionKind::kHstu, bq, bk, D));  // scores, then dA/dZ
  float* as = gs + size_t(bq) * bk;   // (bq, bk) A
  float* das = as + size_t(bq) * bk;  // (bq, bk) dA, then dZ
  const float* table = fill_bias_table(p, bias, num_buckets, scratch);
  const bool want_dbias = dbias != nullptr && num_buckets > 0;
  if (!want_dbias) return;
  double* bias_grad = nullptr;  // by reversed distance, like the table
  if (want_dbias) {
    bias_grad = grow(scratch.bias_grad, size_t(p.max_len) + bk);
    std::fill(bias_grad, bias_grad + p.max_len + bk, 0.0);
  }
  for (int b = 0; b < shape.batch; ++b) {
    const int64_t s0 = shape.offsets[b];
    const int L = shape.offsets[b + 1] - shape.offsets[b];
    const float inv_norm = 1.0f / float(options.hstu_norm > 0 ? options.hstu_norm : L);
    for (int h = 0; h < H; ++h) {
      const int64_t base = s0 * ld + h * D;
      const float *qh = q + base, *kh = k + base, *vh = v + base, *doh = dout + base;
      for (int k0 = 0; k0 < L; k0 += bk) {  // same block order as the softmax backward
        const int n = std::min(bk, L - k0);
        const float* kj = kh + int64_t(k0) * ld;
        const float* vj = vh + int64_t(k0) * ld;
        for (int q0 = k0 / bq * bq; q0 < L; q0 += bq) {
          const int m = std::min(bq, L - q0);
          const Block blk{m, n, bk, q0 - k0};
          const int64_t shift = p.max_len - 1 - blk.diag;
          const float* qi = qh + int64_t(q0) * ld;
          const float* doi = doh + int64_t(q0) * ld;
          sgemm(false, true, m, n, D, p.scale, qi, ld, kj, ld, 0.0f, gs, bk);
          kern.hstu_backward(blk, gs, as, table + shift, inv_norm);
          sgemm(false, true, m, n, D, 1.0f, doi, ld, vj, ld, 0.0f, das, bk);   // dA = dO_i V_j^T
          kern.hstu_dz(blk, gs, das, want_dbias ? bias_grad + shift : nullptr);
        }
      }
    }
  }
  if (want_dbias) {
    // Distance d lives at max_len - 1 - d; the last bucket sums every d >= num_buckets - 1,
    // d ascending.
    for (int bucket = 0; bucket < num_buckets; ++bucket) {
      double sum = 0.0;
      if (bucket < num_buckets - 1) {
        if (bucket < p.max_len) sum = bias_grad[p.max_len - 1 - bucket];
      } else {
        for (int d = bucket; d < p.max_len; ++d) sum += bias_grad[p.max_len - 1 - d];
      }
      dbias[bucket] = float(sum);
    }
  }
}

}  // namespace strata::backend::host
