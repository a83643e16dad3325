// bench_attention: training throughput of strata's host attention kernels, forward +
// backward on one thread, over a batch of B sequences of L tokens (a jagged batch whose
// lengths happen to be equal, so that the PyTorch peer in bench_attention.py can run the
// same shapes). Prints tokens/s, seconds per step and GFLOP/s, and checks its result:
// a few output rows and gradient rows of the first sequence against a double-precision
// computation from the same inputs.
//
// Usage: bench_attention [--batch=16] [--len=1024] [--heads=2] [--dim=64] [--kind=softmax|hstu]
//                        [--seconds=1.0] [--query-block=64] [--key-block=64] [--json]
// It times whole steps for at least --seconds after a warm-up of a quarter of that.
// FLOPs counted per step (the FlashAttention convention, causal so half the pairs):
// forward 2 GEMMs (Q K^T, P V), backward 5 (Q K^T again, dV, dP, dQ, dK), each 2 D per
// (query, key) pair and head: 14 D H B L (L + 1) / 2.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/host/attention.hpp"
#include "backend/host/blas_kernels.hpp"
#include "common/error.hpp"
#include "common/rng.hpp"

namespace host = strata::backend::host;

namespace {

struct Settings {
  int batch = 16;          // B: sequences
  int len = 1024;          // L: tokens per sequence
  int heads = 2;           // H
  int dim = 64;            // D: width of a head
  bool hstu = false;       // --kind=hstu times the HSTU kernels instead
  double seconds = 1.0;    // timed time (at least one step)
  host::AttentionOptions options;
  bool json = false;       // one JSON line instead of text
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "bench_attention: %s\nusage: bench_attention [--batch=16] [--len=1024] [--heads=2] [--dim=64] "
               "[--kind=softmax|hstu] [--seconds=1.0] [--query-block=64] [--key-block=64] [--json]\n",
               why.c_str());
  std::exit(2);
}

Settings parse(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto eq = arg.find('=');
    const std::string key = arg.substr(0, eq), value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    try {
      if (key == "--batch") s.batch = std::stoi(value);
      else if (key == "--len") s.len = std::stoi(value);
      else if (key == "--heads") s.heads = std::stoi(value);
      else if (key == "--dim") s.dim = std::stoi(value);
      else if (key == "--kind" && (value == "softmax" || value == "hstu")) s.hstu = value == "hstu";
      else if (key == "--seconds") s.seconds = std::stod(value);
      else if (key == "--query-block") s.options.query_block = std::stoi(value);
      else if (key == "--key-block") s.options.key_block = std::stoi(value);
      else if (key == "--json") s.json = true;
      else usage("unknown argument " + arg);
    } catch (const std::logic_error&) {
      usage("bad value in " + arg);
    }
  }
  if (s.batch < 1 || s.len < 1 || s.heads < 1 || s.dim < 1) usage("batch, len, heads and dim must be >= 1");
  return s;
}

std::vector<float> random_vector(size_t n, uint64_t seed) {
  strata::CounterRng rng(strata::mix64(seed, 0xbe7c));
  std::vector<float> v(n);
  for (float& x : v) x = float(2.0 * rng.uniform() - 1.0);
  return v;
}

struct Tensors {
  std::vector<float> q, k, v, dout, out, lse, dq, dk, dv, bias, dbias;  // (tokens, H * D), lse (tokens, H)
};

// One training step of the kernels under test.
void step(const Settings& s, const host::JaggedAttentionShape& shape, Tensors& t, host::AttentionScratch& scratch) {
  if (s.hstu) {
    const int buckets = int(t.bias.size());
    host::hstu_attention_forward(shape, t.q.data(), t.k.data(), t.v.data(), t.bias.data(), buckets, t.out.data(),
                                 scratch, s.options);
    host::hstu_attention_backward(shape, t.q.data(), t.k.data(), t.v.data(), t.bias.data(), buckets,
                                  t.dout.data(), t.dq.data(), t.dk.data(), t.dv.data(), t.dbias.data(), scratch,
                                  s.options);
  } else {
    host::causal_attention_forward(shape, t.q.data(), t.k.data(), t.v.data(), t.out.data(), t.lse.data(), scratch,
                                   s.options);
    host::causal_attention_backward(shape, t.q.data(), t.k.data(), t.v.data(), t.out.data(), t.lse.data(),
                                    t.dout.data(), t.dq.data(), t.dk.data(), t.dv.data(), scratch, s.options);
  }
}

// Rows of sequence 0, head 0 against double precision: out and dq of queries 0, L/2 and
// L - 1 (each needs only its own row of scores) and dv of the last key (seen only by the
// last query). Returns the largest error relative to the largest magnitude checked.
double check_result(const Settings& s, const Tensors& t) {
  const int L = s.len, D = s.dim;
  const size_t ld = size_t(s.heads) * D;
  const double scale = 1.0 / std::sqrt(double(D));
  const double inv_norm = 1.0 / L;
  const int buckets = int(t.bias.size());
  double err = 0.0, mag = 1e-30;
  auto compare = [&](double ref, float got) {
    if (!std::isfinite(got)) err = INFINITY;
    err = std::max(err, std::fabs(ref - double(got)));
    mag = std::max(mag, std::fabs(ref));
  };
  auto dot = [&](const float* a, const float* b) {
    double x = 0.0;
    for (int d = 0; d < D; ++d) x += double(a[d]) * double(b[d]);
    return x;
  };
  for (int i : {0, L / 2, L - 1}) {
    const float* qi = t.q.data() + i * ld;
    const float* gi = t.dout.data() + i * ld;
    std::vector<double> z(size_t(i) + 1), w(size_t(i) + 1), dp(size_t(i) + 1);
    for (int j = 0; j <= i; ++j) {
      z[j] = scale * dot(qi, t.k.data() + j * ld);
      dp[j] = dot(gi, t.v.data() + j * ld);
    }
    if (s.hstu) {  // w = SiLU(z + bias) / L, and dZ in z
      for (int j = 0; j <= i; ++j) {
        const double x = z[j] + t.bias[std::min(i - j, buckets - 1)];
        const double sig = 1.0 / (1.0 + std::exp(-x));
        w[j] = x * sig * inv_norm;
        z[j] = dp[j] * sig * (1.0 + x * (1.0 - sig)) * inv_norm;
      }
    } else {  // w = softmax(z), and dS in z
      const double mx = *std::max_element(z.begin(), z.end());
      double sum = 0.0, delta = 0.0;
      for (int j = 0; j <= i; ++j) sum += std::exp(z[j] - mx);
      for (int j = 0; j <= i; ++j) w[j] = std::exp(z[j] - mx) / sum, delta += w[j] * dp[j];
      for (int j = 0; j <= i; ++j) z[j] = w[j] * (dp[j] - delta);
    }
    for (int d = 0; d < D; ++d) {
      double o = 0.0, g = 0.0;
      for (int j = 0; j <= i; ++j) o += w[j] * t.v[j * ld + d], g += scale * z[j] * t.k[j * ld + d];
      compare(o, t.out[i * ld + d]);
      compare(g, t.dq[i * ld + d]);
    }
    if (i == L - 1)
      for (int d = 0; d < D; ++d) compare(w[i] * gi[d], t.dv[i * ld + d]);
  }
  return err / mag;
}

}  // namespace

int main(int argc, char** argv) {
  host::ensure_tuned_blas_kernels(argv);
  const Settings s = parse(argc, argv);
  // The kernels are single-threaded by design; so is every GEMM they call.
  openblas_set_num_threads(1);

  std::vector<int32_t> offsets(size_t(s.batch) + 1);
  for (int b = 0; b <= s.batch; ++b) offsets[b] = b * s.len;
  host::JaggedAttentionShape shape;
  shape.batch = s.batch;
  shape.heads = s.heads;
  shape.dim = s.dim;
  shape.offsets = offsets.data();
  const size_t tokens = size_t(s.batch) * s.len, n = tokens * s.heads * s.dim;
  Tensors t;
  t.q = random_vector(n, 1);
  t.k = random_vector(n, 2);
  t.v = random_vector(n, 3);
  t.dout = random_vector(n, 4);
  t.out.resize(n);
  t.lse.resize(tokens * s.heads);
  t.dq.resize(n);
  t.dk.resize(n);
  t.dv.resize(n);
  if (s.hstu) {
    t.bias = random_vector(std::min(s.len, 256), 5);
    for (float& x : t.bias) x *= 0.1f;
    t.dbias.resize(t.bias.size());
  }

  host::AttentionScratch scratch;
  try {
    using clock = std::chrono::steady_clock;
    // Warm-up (scratch, page faults, BLAS buffers) for a quarter of the timed time, at
    // least one step, as bench_attention.py's torch side does.
    const auto warm = clock::now();
    do step(s, shape, t, scratch);
    while (std::chrono::duration<double>(clock::now() - warm).count() < 0.25 * s.seconds);
    const double error = check_result(s, t);
    int steps = 0;
    const auto start = clock::now();
    double elapsed = 0.0;
    do {
      step(s, shape, t, scratch);
      ++steps;
      elapsed = std::chrono::duration<double>(clock::now() - start).count();
    } while (elapsed < s.seconds);
    const double per_step = elapsed / steps;
    const double flops = 14.0 * s.dim * s.heads * s.batch * (double(s.len) * (s.len + 1) / 2);
    const double tokens_per_s = double(tokens) / per_step;
    const double gflops = flops / per_step * 1e-9;
    const bool ok = error < 1e-4;
    const char* kind = s.hstu ? "hstu" : "softmax";
    if (s.json) {
      std::printf("{\"kind\": \"%s\", \"batch\": %d, \"len\": %d, \"heads\": %d, \"dim\": %d, \"threads\": 1, "
                  "\"steps\": %d, \"seconds_per_step\": %.6g, \"tokens_per_s\": %.6g, \"gflops\": %.4g, "
                  "\"check_error\": %.3g, \"check_ok\": %s, \"blas\": \"%s\"}\n",
                  kind, s.batch, s.len, s.heads, s.dim, steps, per_step, tokens_per_s, gflops, error,
                  ok ? "true" : "false", host::blas_kernel_name());
    } else {
      std::printf("bench_attention %s B=%d L=%d H=%d D=%d, 1 thread, BLAS kernels %s\n", kind, s.batch, s.len,
                  s.heads, s.dim, host::blas_kernel_name());
      std::printf("  %d steps, %.4f s/step (forward + backward), %.0f tokens/s, %.1f GFLOP/s\n", steps, per_step,
                  tokens_per_s, gflops);
      std::printf("  result check against double precision: error %.2e (%s)\n", error, ok ? "ok" : "FAILED");
    }
    return ok ? 0 : 1;
  } catch (const strata::Error& e) {
    std::fprintf(stderr, "bench_attention: %s\n", e.what());
    return 1;
  }
}
