// Plain-loop references of the neutral kernel families and random inputs for
// them (multi-hot bags with duplicate keys and empty bags), shared by the host
// interface test and the CUDA kernel test.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "backend/embedding_kernels.hpp"
#include "backend/sparse_optimizer_kernels.hpp"

namespace strata::backend::reference {

inline std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

inline bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

struct Bags {
  std::vector<int32_t> offsets;  // (batch + 1)
  std::vector<int32_t> index;    // (nnz) into (num_unique) rows, repeats allowed
};

// Bag lengths 0..max_len (about one in five empty), rows drawn from num_unique.
inline Bags random_bags(int batch, int num_unique, int max_len, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Bags bags;
  bags.offsets.push_back(0);
  for (int b = 0; b < batch; ++b) {
    const int len = rng() % 5 == 0 ? 0 : int(rng() % (max_len + 1));
    for (int k = 0; k < len; ++k) bags.index.push_back(int32_t(rng() % num_unique));
    bags.offsets.push_back(int32_t(bags.index.size()));
  }
  return bags;
}

inline std::vector<float> pool_forward(const Bags& bags, int dim, const std::vector<float>& rows, PoolingMode mode) {
  const int batch = int(bags.offsets.size()) - 1;
  std::vector<float> out(size_t(batch) * dim, 0.0f);
  for (int b = 0; b < batch; ++b) {
    const int begin = bags.offsets[b], end = bags.offsets[b + 1];
    for (int c = 0; c < dim; ++c) {
      float acc = 0.0f;
      for (int k = begin; k < end; ++k) acc += rows[size_t(bags.index[k]) * dim + c];
      if (mode == PoolingMode::kMean && end > begin) acc *= 1.0f / float(end - begin);
      out[size_t(b) * dim + c] = acc;
    }
  }
  return out;
}

inline std::vector<float> pool_backward(const Bags& bags, int dim, int num_unique, const std::vector<float>& dpooled,
                                        PoolingMode mode) {
  const int batch = int(bags.offsets.size()) - 1;
  std::vector<float> grads(size_t(num_unique) * dim, 0.0f);
  for (int b = 0; b < batch; ++b) {
    const int begin = bags.offsets[b], end = bags.offsets[b + 1];
    if (end == begin) continue;
    const float inv = 1.0f / float(end - begin);
    for (int k = begin; k < end; ++k)
      for (int c = 0; c < dim; ++c) {
        const float g = dpooled[size_t(b) * dim + c];
        grads[size_t(bags.index[k]) * dim + c] += mode == PoolingMode::kMean ? g * inv : g;
      }
  }
  return grads;
}

// The scalar loop of every sparse optimizer step.
inline void optimizer_row(const SparseOptimizerParams& p, float* w, float* a, const float* g, int dim) {
  for (int i = 0; i < dim; ++i) {
    if (p.kind == SparseOptimizerKind::kAdagrad) {
      a[i] += g[i] * g[i];
      w[i] -= p.lr * g[i] / (std::sqrt(a[i]) + p.eps);
    } else {
      w[i] -= p.lr * g[i];
    }
  }
}

// Each distinct slot: sum from zero in occurrence order, then one step.
inline void scatter_optimizer(const SparseOptimizerParams& p, std::vector<float>& arena, int width,
                              const std::vector<int32_t>& slots, int dim, const std::vector<float>& grads) {
  std::map<int32_t, std::vector<float>> sums;
  for (size_t k = 0; k < slots.size(); ++k) {
    auto& s = sums[slots[k]];
    if (s.empty()) s.assign(dim, 0.0f);
    for (int c = 0; c < dim; ++c) s[c] += grads[k * dim + c];
  }
  for (auto& [slot, g] : sums) {
    float* row = arena.data() + size_t(slot) * width;
    optimizer_row(p, row, row + dim, g.data(), dim);
  }
}

// Positive Adagrad accumulators in the state columns of every row.
inline std::vector<float> random_arena(int64_t rows, int width, int dim, uint64_t seed) {
  std::vector<float> arena = random_floats(size_t(rows) * width, seed);
  for (int64_t r = 0; r < rows; ++r)
    for (int c = dim; c < width; ++c) arena[size_t(r) * width + c] = std::fabs(arena[size_t(r) * width + c]) + 0.1f;
  return arena;
}

}  // namespace strata::backend::reference
