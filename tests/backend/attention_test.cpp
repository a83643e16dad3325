// Host attention kernels (causal softmax and HSTU) against a naive double-precision
// reference that builds every sequence's full score matrix, on random jagged batches.
//
// Tolerances. The kernels compute in float (unit roundoff u = 6e-8) and the reference in
// double, so the reference is exact for our purposes and the gap is the kernels' own
// rounding: dot products of length D (<= 32 here), block-wise exp (the polynomial's
// relative error is ~1e-7) and sums over up to L = 100 keys or queries, a worst-case
// relative error of about (D + L) u = 1e-5 of the sum of the terms' magnitudes. Errors
// are measured against the largest magnitude of the tensor (sums of mixed-sign terms may
// cancel to values much smaller than their terms, where a per-element relative bound
// would be meaningless). The errors seen are ~1e-6 (typical rounding, not worst case);
// kForwardTol = 1e-5 is the worst-case bound and kBackwardTol = 5e-5 allows for
// dS = P (dP - delta) subtracting two nearly equal sums before two more GEMMs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/host/attention.hpp"
#include "common/error.hpp"
#include "common/rng.hpp"

namespace host = strata::backend::host;

namespace {

constexpr double kForwardTol = 1e-5;
constexpr double kBackwardTol = 5e-5;

struct Batch {
  std::vector<int32_t> offsets;  // (B + 1)
  int heads = 1, dim = 1, tokens = 0, max_len = 0;
  std::vector<float> q, k, v, dout;  // (tokens, heads * dim)

  host::JaggedAttentionShape shape() const {
    host::JaggedAttentionShape s;
    s.batch = int(offsets.size()) - 1;
    s.heads = heads;
    s.dim = dim;
    s.offsets = offsets.data();
    return s;
  }
  size_t width() const { return size_t(heads) * dim; }
  size_t elements() const { return size_t(tokens) * width(); }
};

std::vector<float> random_vector(size_t n, uint64_t seed, float amplitude) {
  strata::CounterRng rng(strata::mix64(seed, 0xa77e));
  std::vector<float> v(n);
  for (float& x : v) x = amplitude * float(2.0 * rng.uniform() - 1.0);
  return v;
}

Batch make_batch(const std::vector<int>& lengths, int heads, int dim, uint64_t seed,
                 float amplitude = 1.0f) {
  Batch b;
  b.heads = heads;
  b.dim = dim;
  b.offsets.push_back(0);
  for (int len : lengths) {
    b.offsets.push_back(b.offsets.back() + len);
    b.max_len = std::max(b.max_len, len);
  }
  b.tokens = b.offsets.back();
  b.q = random_vector(b.elements(), seed * 4 + 0, amplitude);
  b.k = random_vector(b.elements(), seed * 4 + 1, amplitude);
  b.v = random_vector(b.elements(), seed * 4 + 2, 1.0f);
  b.dout = random_vector(b.elements(), seed * 4 + 3, 1.0f);
  return b;
}

// Lengths with an empty sequence, 1, 7, odd ones and ones not divisible by 8, 16 or 64.
const std::vector<int> kLengths = {17, 1, 0, 7, 100, 33, 16, 2, 64, 31};

// Outputs are pre-filled with NaN so that any element a kernel fails to write shows.
std::vector<float> poisoned(size_t n) { return std::vector<float>(n, std::nanf("")); }

// max |a - ref| / max(max |ref|, tiny); NaN anywhere gives infinity.
double scaled_error(const std::vector<float>& a, const std::vector<double>& ref) {
  EXPECT_EQ(a.size(), ref.size());
  double err = 0.0, mag = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return std::numeric_limits<double>::infinity();
    err = std::max(err, std::fabs(double(a[i]) - ref[i]));
    mag = std::max(mag, std::fabs(ref[i]));
  }
  return err / mag;
}

std::vector<double> to_double(const std::vector<float>& a) { return {a.begin(), a.end()}; }

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// ---- double-precision references (full score matrices) -------------------------------

template <class A, class B>
double dot(const A* a, const B* b, int n) {
  double s = 0.0;
  for (int d = 0; d < n; ++d) s += double(a[d]) * double(b[d]);
  return s;
}

struct RefSoftmax {
  std::vector<double> out, lse, dq, dk, dv;
};

// Inputs as double so that the same code also serves the finite-difference checks.
RefSoftmax ref_softmax(const Batch& b, const std::vector<double>& q, const std::vector<double>& k,
                       const std::vector<double>& v, double scale, bool backward) {
  const int H = b.heads, D = b.dim;
  const size_t ld = b.width();
  RefSoftmax r;
  r.out.assign(b.elements(), 0.0);
  r.lse.assign(size_t(b.tokens) * H, 0.0);
  r.dq.assign(b.elements(), 0.0);
  r.dk.assign(b.elements(), 0.0);
  r.dv.assign(b.elements(), 0.0);
  for (size_t s = 0; s + 1 < b.offsets.size(); ++s) {
    const int t0 = b.offsets[s], L = b.offsets[s + 1] - t0;
    for (int h = 0; h < H; ++h) {
      auto at = [&](const std::vector<double>& x, int i) { return x.data() + (t0 + i) * ld + h * D; };
      auto at_mut = [&](std::vector<double>& x, int i) { return x.data() + (t0 + i) * ld + h * D; };
      std::vector<double> p(size_t(L) * L, 0.0);  // (L, L), zero above the diagonal
      for (int i = 0; i < L; ++i) {
        double mx = -1e300;
        for (int j = 0; j <= i; ++j) {
          p[i * L + j] = scale * dot(at(q, i), at(k, j), D);
          mx = std::max(mx, p[i * L + j]);
        }
        double sum = 0.0;
        for (int j = 0; j <= i; ++j) sum += std::exp(p[i * L + j] - mx);
        for (int j = 0; j <= i; ++j) p[i * L + j] = std::exp(p[i * L + j] - mx) / sum;
        r.lse[(t0 + i) * H + h] = mx + std::log(sum);
        for (int j = 0; j <= i; ++j)
          for (int d = 0; d < D; ++d) at_mut(r.out, i)[d] += p[i * L + j] * at(v, j)[d];
      }
      if (!backward) continue;
      for (int i = 0; i < L; ++i) {
        const float* g = b.dout.data() + (t0 + i) * ld + h * D;
        std::vector<double> dp(size_t(i) + 1);
        double delta = 0.0;
        for (int j = 0; j <= i; ++j) {
          dp[j] = dot(g, at(v, j), D);
          delta += p[i * L + j] * dp[j];
          for (int d = 0; d < D; ++d) at_mut(r.dv, j)[d] += p[i * L + j] * g[d];
        }
        for (int j = 0; j <= i; ++j) {
          const double ds = p[i * L + j] * (dp[j] - delta);
          for (int d = 0; d < D; ++d) {
            at_mut(r.dq, i)[d] += scale * ds * at(k, j)[d];
            at_mut(r.dk, j)[d] += scale * ds * at(q, i)[d];
          }
        }
      }
    }
  }
  return r;
}

RefSoftmax ref_softmax(const Batch& b, double scale) {
  return ref_softmax(b, to_double(b.q), to_double(b.k), to_double(b.v), scale, true);
}

struct RefHstu {
  std::vector<double> out, dq, dk, dv, dbias;
};

RefHstu ref_hstu(const Batch& b, const std::vector<double>& q, const std::vector<double>& k,
                 const std::vector<double>& v, const std::vector<double>& bias, double scale,
                 int fixed_norm, bool backward) {
  const int H = b.heads, D = b.dim, buckets = int(bias.size());
  const size_t ld = b.width();
  RefHstu r;
  r.out.assign(b.elements(), 0.0);
  r.dq.assign(b.elements(), 0.0);
  r.dk.assign(b.elements(), 0.0);
  r.dv.assign(b.elements(), 0.0);
  r.dbias.assign(bias.size(), 0.0);
  for (size_t s = 0; s + 1 < b.offsets.size(); ++s) {
    const int t0 = b.offsets[s], L = b.offsets[s + 1] - t0;
    const double inv_norm = 1.0 / (fixed_norm > 0 ? fixed_norm : L);
    for (int h = 0; h < H; ++h) {
      auto at = [&](const std::vector<double>& x, int i) { return x.data() + (t0 + i) * ld + h * D; };
      auto at_mut = [&](std::vector<double>& x, int i) { return x.data() + (t0 + i) * ld + h * D; };
      for (int i = 0; i < L; ++i) {
        const float* g = b.dout.data() + (t0 + i) * ld + h * D;
        for (int j = 0; j <= i; ++j) {
          const int bucket = std::min(i - j, buckets - 1);
          const double z = scale * dot(at(q, i), at(k, j), D) + (buckets > 0 ? bias[bucket] : 0.0);
          const double sig = 1.0 / (1.0 + std::exp(-z));
          const double a = z * sig * inv_norm;
          for (int d = 0; d < D; ++d) at_mut(r.out, i)[d] += a * at(v, j)[d];
          if (!backward) continue;
          const double dz = dot(g, at(v, j), D) * sig * (1.0 + z * (1.0 - sig)) * inv_norm;
          for (int d = 0; d < D; ++d) {
            at_mut(r.dv, j)[d] += a * g[d];
            at_mut(r.dq, i)[d] += scale * dz * at(k, j)[d];
            at_mut(r.dk, j)[d] += scale * dz * at(q, i)[d];
          }
          if (buckets > 0) r.dbias[bucket] += dz;
        }
      }
    }
  }
  return r;
}

// ---- kernel runs -------------------------------------------------------------------------

struct SoftmaxRun {
  std::vector<float> out, lse, dq, dk, dv;
};

SoftmaxRun run_softmax(const Batch& b, const host::AttentionOptions& options,
                       host::AttentionScratch& scratch, bool backward = true) {
  SoftmaxRun r;
  r.out = poisoned(b.elements());
  r.lse = poisoned(size_t(b.tokens) * b.heads);
  host::causal_attention_forward(b.shape(), b.q.data(), b.k.data(), b.v.data(), r.out.data(),
                                 r.lse.data(), scratch, options);
  if (!backward) return r;
  r.dq = poisoned(b.elements());
  r.dk = poisoned(b.elements());
  r.dv = poisoned(b.elements());
  host::causal_attention_backward(b.shape(), b.q.data(), b.k.data(), b.v.data(), r.out.data(),
                                  r.lse.data(), b.dout.data(), r.dq.data(), r.dk.data(),
                                  r.dv.data(), scratch, options);
  return r;
}

SoftmaxRun run_softmax(const Batch& b, const host::AttentionOptions& options = {}) {
  host::AttentionScratch scratch;
  return run_softmax(b, options, scratch);
}

struct HstuRun {
  std::vector<float> out, dq, dk, dv, dbias;
};

HstuRun run_hstu(const Batch& b, const std::vector<float>& bias, const host::AttentionOptions& options,
                 host::AttentionScratch& scratch, bool backward = true) {
  HstuRun r;
  const int buckets = int(bias.size());
  const float* bias_ptr = buckets > 0 ? bias.data() : nullptr;
  r.out = poisoned(b.elements());
  host::hstu_attention_forward(b.shape(), b.q.data(), b.k.data(), b.v.data(), bias_ptr, buckets,
                               r.out.data(), scratch, options);
  if (!backward) return r;
  r.dq = poisoned(b.elements());
  r.dk = poisoned(b.elements());
  r.dv = poisoned(b.elements());
  r.dbias = poisoned(bias.size());
  host::hstu_attention_backward(b.shape(), b.q.data(), b.k.data(), b.v.data(), bias_ptr, buckets,
                                b.dout.data(), r.dq.data(), r.dk.data(), r.dv.data(),
                                buckets > 0 ? r.dbias.data() : nullptr, scratch, options);
  return r;
}

HstuRun run_hstu(const Batch& b, const std::vector<float>& bias, const host::AttentionOptions& options = {}) {
  host::AttentionScratch scratch;
  return run_hstu(b, bias, options, scratch);
}

host::AttentionOptions blocks(int query_block, int key_block) {
  host::AttentionOptions o;
  o.query_block = query_block;
  o.key_block = key_block;
  return o;
}

// Block shapes: square, tall, wide, odd (key blocks round up to 8 lanes), one query a block,
// and blocks longer than every sequence.
const std::vector<host::AttentionOptions> kBlockShapes = {blocks(16, 16), blocks(32, 8), blocks(8, 32),
                                                          blocks(5, 13),  blocks(1, 8),  blocks(128, 128)};

std::string describe(const host::AttentionOptions& o) {
  return "blocks " + std::to_string(o.query_block) + "x" + std::to_string(o.key_block);
}

// ---- causal softmax attention ----------------------------------------------------------

TEST(CausalAttention, MatchesReferenceOnJaggedBatches) {
  for (int dim : {16, 12}) {
    const Batch b = make_batch(kLengths, 3, dim, 11 + dim);
    const RefSoftmax ref = ref_softmax(b, 1.0 / std::sqrt(double(dim)));
    for (const auto& options : kBlockShapes) {
      SCOPED_TRACE(describe(options) + ", dim " + std::to_string(dim));
      const SoftmaxRun run = run_softmax(b, options);
      EXPECT_LT(scaled_error(run.out, ref.out), kForwardTol);
      EXPECT_LT(scaled_error(run.lse, ref.lse), kForwardTol);
      EXPECT_LT(scaled_error(run.dq, ref.dq), kBackwardTol);
      EXPECT_LT(scaled_error(run.dk, ref.dk), kBackwardTol);
      EXPECT_LT(scaled_error(run.dv, ref.dv), kBackwardTol);
    }
  }
}

// Large scores (|s| up to ~50) make the softmax peaked and the running max change from
// block to block, which exercises the online rescaling.
TEST(CausalAttention, MatchesReferenceWithPeakedScores) {
  const Batch b = make_batch(kLengths, 2, 16, 23, 3.0f);
  host::AttentionOptions options = blocks(16, 16);
  options.scale = 0.35f;
  const RefSoftmax ref = ref_softmax(b, double(options.scale));
  const SoftmaxRun run = run_softmax(b, options);
  EXPECT_LT(scaled_error(run.out, ref.out), kForwardTol);
  EXPECT_LT(scaled_error(run.lse, ref.lse), kForwardTol);
  EXPECT_LT(scaled_error(run.dq, ref.dq), kBackwardTol);
  EXPECT_LT(scaled_error(run.dk, ref.dk), kBackwardTol);
  EXPECT_LT(scaled_error(run.dv, ref.dv), kBackwardTol);
}

// Block sizes change only the rounding: every block shape agrees with the others far
// more closely than the tolerance against the reference requires.
TEST(CausalAttention, BlockSizesChangeOnlyRounding) {
  const Batch b = make_batch(kLengths, 2, 16, 5);
  const SoftmaxRun base = run_softmax(b, blocks(64, 64));
  for (const auto& options : kBlockShapes) {
    SCOPED_TRACE(describe(options));
    const SoftmaxRun run = run_softmax(b, options);
    EXPECT_LT(scaled_error(run.out, to_double(base.out)), 2e-6);
    EXPECT_LT(scaled_error(run.lse, to_double(base.lse)), 2e-6);
    EXPECT_LT(scaled_error(run.dq, to_double(base.dq)), 2e-5);
    EXPECT_LT(scaled_error(run.dk, to_double(base.dk)), 2e-5);
    EXPECT_LT(scaled_error(run.dv, to_double(base.dv)), 2e-5);
  }
}

TEST(CausalAttention, Deterministic) {
  const Batch b = make_batch(kLengths, 3, 16, 7);
  const host::AttentionOptions options = blocks(16, 16);
  host::AttentionScratch reused;
  const SoftmaxRun first = run_softmax(b, options, reused);
  const SoftmaxRun second = run_softmax(b, options, reused);  // scratch holds stale data now
  const SoftmaxRun fresh = run_softmax(b, options);
  host::allow_avx2_attention_kernels(false);
  const SoftmaxRun generic = run_softmax(b, options);
  host::allow_avx2_attention_kernels(true);
  for (const SoftmaxRun* run : {&second, &fresh, &generic}) {
    EXPECT_TRUE(bits_equal(run->out, first.out));
    EXPECT_TRUE(bits_equal(run->lse, first.lse));
    EXPECT_TRUE(bits_equal(run->dq, first.dq));
    EXPECT_TRUE(bits_equal(run->dk, first.dk));
    EXPECT_TRUE(bits_equal(run->dv, first.dv));
  }
}

// Loss = sum(dout * out). Two checks: central differences of the double reference's
// forward against the reference's backward (h = 1e-5, agreement to ~1e-9, so the
// reference's gradients are right), and central differences of the float kernel's forward
// against the kernel's backward. The latter is limited by float rounding of the loss
// (~1e-6 absolute on these sizes, divided by 2h) and by h^2 truncation: h = 1e-2 gives
// ~1e-4 of each, checked at 2e-3 + 1e-2 |g|.
double loss(const Batch& b, const std::vector<double>& out) {
  double s = 0.0;
  for (size_t i = 0; i < out.size(); ++i) s += double(b.dout[i]) * out[i];
  return s;
}

TEST(CausalAttention, BackwardMatchesFiniteDifferences) {
  Batch b = make_batch({1, 6, 0, 9}, 2, 4, 31, 1.5f);
  const double scale = 0.5;
  host::AttentionOptions options = blocks(4, 8);
  options.scale = float(scale);
  const SoftmaxRun run = run_softmax(b, options);
  const RefSoftmax ref = ref_softmax(b, scale);
  std::vector<float>* inputs[3] = {&b.q, &b.k, &b.v};
  const std::vector<float>* kernel_grads[3] = {&run.dq, &run.dk, &run.dv};
  const std::vector<double>* ref_grads[3] = {&ref.dq, &ref.dk, &ref.dv};
  host::AttentionScratch scratch;
  for (int t = 0; t < 3; ++t) {
    for (size_t i = 0; i < inputs[t]->size(); ++i) {
      std::vector<double> in[3] = {to_double(b.q), to_double(b.k), to_double(b.v)};
      const double h = 1e-5;
      in[t][i] += h;
      const double up = loss(b, ref_softmax(b, in[0], in[1], in[2], scale, false).out);
      in[t][i] -= 2 * h;
      const double down = loss(b, ref_softmax(b, in[0], in[1], in[2], scale, false).out);
      EXPECT_NEAR((up - down) / (2 * h), (*ref_grads[t])[i], 1e-7) << "reference, tensor " << t << " element " << i;

      const float x = (*inputs[t])[i], hf = 1e-2f;
      (*inputs[t])[i] = x + hf;
      const double kup = loss(b, to_double(run_softmax(b, options, scratch, false).out));
      (*inputs[t])[i] = x - hf;
      const double kdown = loss(b, to_double(run_softmax(b, options, scratch, false).out));
      (*inputs[t])[i] = x;
      const double fd = (kup - kdown) / (2.0 * double(hf));
      const double g = (*kernel_grads[t])[i];
      EXPECT_NEAR(fd, g, 2e-3 + 1e-2 * std::fabs(g)) << "kernel, tensor " << t << " element " << i;
    }
  }
}

// ---- HSTU pointwise attention -----------------------------------------------------------

TEST(HstuAttention, MatchesReferenceOnJaggedBatches) {
  const Batch b = make_batch(kLengths, 3, 16, 41);
  // Fewer buckets than the longest sequence (distances >= 39 share the last bucket), more
  // buckets than it (the tail gets zero gradient), and no bias at all.
  for (int buckets : {40, 130, 0}) {
    const std::vector<float> bias = random_vector(size_t(buckets), 43, 0.5f);
    for (int fixed_norm : {0, 128}) {
      const RefHstu ref = ref_hstu(b, to_double(b.q), to_double(b.k), to_double(b.v), to_double(bias),
                                   0.25, fixed_norm, true);
      for (auto options : kBlockShapes) {
        options.hstu_norm = fixed_norm;
        SCOPED_TRACE(describe(options) + ", buckets " + std::to_string(buckets) + ", norm " +
                     std::to_string(fixed_norm));
        const HstuRun run = run_hstu(b, bias, options);
        EXPECT_LT(scaled_error(run.out, ref.out), kForwardTol);
        EXPECT_LT(scaled_error(run.dq, ref.dq), kBackwardTol);
        EXPECT_LT(scaled_error(run.dk, ref.dk), kBackwardTol);
        EXPECT_LT(scaled_error(run.dv, ref.dv), kBackwardTol);
        if (buckets > 0) EXPECT_LT(scaled_error(run.dbias, ref.dbias), kBackwardTol);
      }
    }
  }
}

TEST(HstuAttention, BlockSizesChangeOnlyRounding) {
  const Batch b = make_batch(kLengths, 2, 16, 47);
  const std::vector<float> bias = random_vector(50, 49, 0.5f);
  const HstuRun base = run_hstu(b, bias, blocks(64, 64));
  for (const auto& options : kBlockShapes) {
    SCOPED_TRACE(describe(options));
    const HstuRun run = run_hstu(b, bias, options);
    EXPECT_LT(scaled_error(run.out, to_double(base.out)), 2e-6);
    EXPECT_LT(scaled_error(run.dq, to_double(base.dq)), 2e-5);
    EXPECT_LT(scaled_error(run.dk, to_double(base.dk)), 2e-5);
    EXPECT_LT(scaled_error(run.dv, to_double(base.dv)), 2e-5);
    EXPECT_LT(scaled_error(run.dbias, to_double(base.dbias)), 2e-5);
  }
}

TEST(HstuAttention, Deterministic) {
  const Batch b = make_batch(kLengths, 3, 16, 53);
  const std::vector<float> bias = random_vector(70, 59, 0.5f);
  const host::AttentionOptions options = blocks(16, 16);
  host::AttentionScratch reused;
  const HstuRun first = run_hstu(b, bias, options, reused);
  const HstuRun second = run_hstu(b, bias, options, reused);
  const HstuRun fresh = run_hstu(b, bias, options);
  host::allow_avx2_attention_kernels(false);
  const HstuRun generic = run_hstu(b, bias, options);
  host::allow_avx2_attention_kernels(true);
  for (const HstuRun* run : {&second, &fresh, &generic}) {
    EXPECT_TRUE(bits_equal(run->out, first.out));
    EXPECT_TRUE(bits_equal(run->dq, first.dq));
    EXPECT_TRUE(bits_equal(run->dk, first.dk));
    EXPECT_TRUE(bits_equal(run->dv, first.dv));
    EXPECT_TRUE(bits_equal(run->dbias, first.dbias));
  }
}

// As for softmax attention, with the bias table as a fourth input.
TEST(HstuAttention, BackwardMatchesFiniteDifferences) {
  Batch b = make_batch({1, 6, 0, 9}, 2, 4, 61, 1.5f);
  std::vector<float> bias = random_vector(5, 67, 0.5f);
  const double scale = 0.5;
  host::AttentionOptions options = blocks(4, 8);
  options.scale = float(scale);
  const HstuRun run = run_hstu(b, bias, options);
  const RefHstu ref =
      ref_hstu(b, to_double(b.q), to_double(b.k), to_double(b.v), to_double(bias), scale, 0, true);
  std::vector<float>* inputs[4] = {&b.q, &b.k, &b.v, &bias};
  const std::vector<float>* kernel_grads[4] = {&run.dq, &run.dk, &run.dv, &run.dbias};
  const std::vector<double>* ref_grads[4] = {&ref.dq, &ref.dk, &ref.dv, &ref.dbias};
  host::AttentionScratch scratch;
  for (int t = 0; t < 4; ++t) {
    for (size_t i = 0; i < inputs[t]->size(); ++i) {
      std::vector<double> in[4] = {to_double(b.q), to_double(b.k), to_double(b.v), to_double(bias)};
      const double h = 1e-5;
      in[t][i] += h;
      const double up = loss(b, ref_hstu(b, in[0], in[1], in[2], in[3], scale, 0, false).out);
      in[t][i] -= 2 * h;
      const double down = loss(b, ref_hstu(b, in[0], in[1], in[2], in[3], scale, 0, false).out);
      EXPECT_NEAR((up - down) / (2 * h), (*ref_grads[t])[i], 1e-7) << "reference, tensor " << t << " element " << i;

      const float x = (*inputs[t])[i], hf = 1e-2f;
      (*inputs[t])[i] = x + hf;
      const double kup = loss(b, to_double(run_hstu(b, bias, options, scratch, false).out));
      (*inputs[t])[i] = x - hf;
      const double kdown = loss(b, to_double(run_hstu(b, bias, options, scratch, false).out));
      (*inputs[t])[i] = x;
      const double fd = (kup - kdown) / (2.0 * double(hf));
      const double g = (*kernel_grads[t])[i];
      EXPECT_NEAR(fd, g, 2e-3 + 1e-2 * std::fabs(g)) << "kernel, tensor " << t << " element " << i;
    }
  }
}

// ---- scratch and errors --------------------------------------------------------------------

TEST(Attention, ScratchStaysWithinReportedBytes) {
  for (int max_len : {1, 100, 1000}) {
    const Batch b = make_batch({max_len, max_len / 2 + 1}, 2, 32, 71);
    const host::AttentionOptions options = blocks(64, 64);
    host::AttentionScratch scratch;
    run_softmax(b, options, scratch);
    const size_t softmax_used = scratch.blocks.size() * sizeof(float) +
                                scratch.bias_table.size() * sizeof(float) +
                                scratch.bias_grad.size() * sizeof(double);
    EXPECT_LE(softmax_used, host::attention_scratch_bytes(host::AttentionKind::kCausalSoftmax, 32, max_len, options));
    host::AttentionScratch hstu_scratch;
    run_hstu(b, random_vector(16, 73, 0.5f), options, hstu_scratch);
    const size_t hstu_used = hstu_scratch.blocks.size() * sizeof(float) +
                             hstu_scratch.bias_table.size() * sizeof(float) +
                             hstu_scratch.bias_grad.size() * sizeof(double);
    EXPECT_LE(hstu_used, host::attention_scratch_bytes(host::AttentionKind::kHstu, 32, max_len, options));
  }
  // Softmax attention's scratch does not grow with L; HSTU's grows linearly.
  EXPECT_EQ(host::attention_scratch_bytes(host::AttentionKind::kCausalSoftmax, 64, 16384),
            host::attention_scratch_bytes(host::AttentionKind::kCausalSoftmax, 64, 256));
  const size_t h1 = host::attention_scratch_bytes(host::AttentionKind::kHstu, 64, 1000);
  const size_t h2 = host::attention_scratch_bytes(host::AttentionKind::kHstu, 64, 2000);
  const size_t h3 = host::attention_scratch_bytes(host::AttentionKind::kHstu, 64, 3000);
  EXPECT_EQ(h3 - h2, h2 - h1);
}

TEST(Attention, RejectsInvalidShapes) {
  Batch b = make_batch({3, 2}, 1, 8, 79);
  host::AttentionScratch scratch;
  std::vector<float> out(b.elements()), lse(size_t(b.tokens));
  auto forward = [&](const host::JaggedAttentionShape& shape, const host::AttentionOptions& options) {
    host::causal_attention_forward(shape, b.q.data(), b.k.data(), b.v.data(), out.data(), lse.data(),
                                   scratch, options);
  };
  host::JaggedAttentionShape shape = b.shape();
  EXPECT_NO_THROW(forward(shape, {}));
  shape.dim = 0;
  EXPECT_THROW(forward(shape, {}), strata::Error);
  shape = b.shape();
  EXPECT_THROW(forward(shape, blocks(0, 16)), strata::Error);
  b.offsets = {0, 3, 2};
  EXPECT_THROW(forward(b.shape(), {}), strata::Error);
  b.offsets = {1, 3, 5};
  EXPECT_THROW(forward(b.shape(), {}), strata::Error);
}

}  // namespace
