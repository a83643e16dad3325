// Host kernels against plain-loop CPU references on random inputs. Where the kernel and
// the reference add the same numbers in the same order the comparison is bitwise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/host/host_kernels.hpp"
#include "common/rng.hpp"

namespace host = strata::backend::host;

namespace {

std::vector<float> random_vector(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  strata::CounterRng rng(strata::mix64(seed, 0x7e57));
  std::vector<float> v(n);
  for (float& x : v) x = lo + (hi - lo) * float(rng.uniform());
  return v;
}

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// ---- references ------------------------------------------------------------------

void ref_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, const float* b,
              float beta, float* c) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int p = 0; p < k; ++p) {
        const double av = ta ? a[p * m + i] : a[i * k + p];
        const double bv = tb ? b[j * k + p] : b[p * n + j];
        acc += av * bv;
      }
      c[i * n + j] = float(alpha * acc + (beta == 0.0f ? 0.0 : double(beta) * c[i * n + j]));
    }
}

void ref_bias_act_forward(int rows, int cols, const float* bias, bool relu, float* y) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const float v = y[r * cols + c] + bias[c];
      y[r * cols + c] = relu ? (v > 0.0f ? v : 0.0f) : v;
    }
}

void ref_bias_act_backward(int rows, int cols, const float* y, bool relu, float* dy, float* db) {
  for (int c = 0; c < cols; ++c) db[c] = 0.0f;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      float& g = dy[r * cols + c];
      if (relu && !(y[r * cols + c] > 0.0f)) g = 0.0f;
      db[c] += g;
    }
}

struct Bags {
  std::vector<int32_t> offsets, index;
  int num_unique = 0;
};

// Bags with empty ones, repeated keys within a bag and keys shared between bags.
Bags random_bags(int batch, int num_unique, uint64_t seed) {
  strata::CounterRng rng(strata::mix64(seed, 0xba95));
  Bags bags;
  bags.num_unique = num_unique;
  bags.offsets.push_back(0);
  for (int b = 0; b < batch; ++b) {
    const int len = b % 5 == 3 ? 0 : int(rng.next() % 6);
    for (int k = 0; k < len; ++k) bags.index.push_back(int32_t(rng.next() % num_unique));
    if (len >= 2 && b % 3 == 0) bags.index.back() = bags.index[bags.index.size() - 2];  // repeat
    bags.offsets.push_back(int32_t(bags.index.size()));
  }
  return bags;
}

// pooled (batch, dim), sample-major.
void ref_pool_forward(const Bags& bags, int batch, int dim, const float* rows, bool mean, float* out) {
  for (int b = 0; b < batch; ++b) {
    for (int c = 0; c < dim; ++c) out[b * dim + c] = 0.0f;
    const int begin = bags.offsets[b], end = bags.offsets[b + 1];
    for (int k = begin; k < end; ++k)
      for (int c = 0; c < dim; ++c) out[b * dim + c] += rows[bags.index[k] * dim + c];
    if (mean && end > begin)
      for (int c = 0; c < dim; ++c) out[b * dim + c] *= 1.0f / float(end - begin);
  }
}

void ref_pool_backward(const Bags& bags, int batch, int dim, const float* dpooled, bool mean,
                       float* row_grads) {
  for (int i = 0; i < bags.num_unique * dim; ++i) row_grads[i] = 0.0f;
  for (int b = 0; b < batch; ++b) {
    const int begin = bags.offsets[b], end = bags.offsets[b + 1];
    const float scale = mean && end > begin ? 1.0f / float(end - begin) : 1.0f;
    for (int k = begin; k < end; ++k)
      for (int c = 0; c < dim; ++c)
        row_grads[bags.index[k] * dim + c] += mean ? dpooled[b * dim + c] * scale : dpooled[b * dim + c];
  }
}

std::vector<float> transpose(const std::vector<float>& m, int rows, int cols) {
  std::vector<float> t(m.size());
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) t[size_t(c) * rows + r] = m[size_t(r) * cols + c];
  return t;
}

// z[f] (batch, dim); out (batch, width).
void ref_interaction_forward(int batch, int F, int dim, const std::vector<std::vector<float>>& z,
                             float* out) {
  const int width = dim + F * (F - 1) / 2;
  for (int b = 0; b < batch; ++b) {
    float* row = out + b * width;
    for (int c = 0; c < dim; ++c) row[c] = z[0][b * dim + c];
    int p = dim;
    for (int i = 1; i < F; ++i)
      for (int j = 0; j < i; ++j) {
        float acc = 0.0f;
        for (int c = 0; c < dim; ++c) acc += z[i][b * dim + c] * z[j][b * dim + c];
        row[p++] = acc;
      }
  }
}

void ref_interaction_backward(int batch, int F, int dim, const std::vector<std::vector<float>>& z,
                              const float* dout, std::vector<std::vector<double>>& dz) {
  const int width = dim + F * (F - 1) / 2;
  for (int f = 0; f < F; ++f) dz[f].assign(size_t(batch) * dim, 0.0);
  for (int b = 0; b < batch; ++b) {
    const float* g = dout + b * width;
    for (int c = 0; c < dim; ++c) dz[0][b * dim + c] += g[c];
    int p = dim;
    for (int i = 1; i < F; ++i)
      for (int j = 0; j < i; ++j, ++p)
        for (int c = 0; c < dim; ++c) {
          dz[i][b * dim + c] += double(g[p]) * z[j][b * dim + c];
          dz[j][b * dim + c] += double(g[p]) * z[i][b * dim + c];
        }
  }
}

}  // namespace

TEST(HostGemm, AllTransposesMatchReference) {
  const int shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {33, 17, 65}, {256, 64, 13}, {5, 1, 32}};
  uint64_t seed = 1;
  for (const auto& s : shapes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (float beta : {0.0f, 0.5f}) {
          const int m = s[0], n = s[1], k = s[2];
          const auto a = random_vector(size_t(m) * k, ++seed);
          const auto b = random_vector(size_t(k) * n, ++seed);
          auto c = random_vector(size_t(m) * n, ++seed);
          auto ref = c;
          host::gemm(ta, tb, m, n, k, 0.75f, a.data(), b.data(), beta, c.data());
          ref_gemm(ta, tb, m, n, k, 0.75f, a.data(), b.data(), beta, ref.data());
          for (size_t i = 0; i < c.size(); ++i)
            ASSERT_NEAR(c[i], ref[i], 1e-5 * (1 + k)) << m << "x" << n << "x" << k << " ta " << ta
                                                      << " tb " << tb << " at " << i;
        }
}

TEST(HostGemm, EmptyInnerDimensionGivesBetaTimesC) {
  std::vector<float> c = {1.0f, 2.0f, 3.0f, 4.0f};
  host::gemm(true, false, 2, 2, 0, 1.0f, nullptr, nullptr, 0.0f, c.data());
  for (float v : c) EXPECT_EQ(v, 0.0f);
  c = {1.0f, 2.0f, 3.0f, 4.0f};
  host::gemm(false, false, 2, 2, 0, 1.0f, nullptr, nullptr, 2.0f, c.data());
  EXPECT_EQ(c[3], 8.0f);
}

TEST(HostBiasActivation, ForwardAndBackwardMatchReferenceBitwise) {
  for (int cols : {1, 5, 16, 37, 64}) {
    for (bool relu : {false, true}) {
      const int rows = 29;
      const auto bias = random_vector(cols, 10 + cols);
      auto y = random_vector(size_t(rows) * cols, 20 + cols);
      auto ref = y;
      const host::Activation act = relu ? host::Activation::kRelu : host::Activation::kNone;
      host::bias_activation_forward(rows, cols, bias.data(), act, y.data());
      ref_bias_act_forward(rows, cols, bias.data(), relu, ref.data());
      ASSERT_TRUE(bits_equal(y, ref)) << cols << " relu " << relu;

      auto dy = random_vector(size_t(rows) * cols, 30 + cols);
      auto dy_ref = dy;
      std::vector<float> db(cols, 99.0f), db_ref(cols);
      host::bias_activation_backward(rows, cols, y.data(), act, dy.data(), db.data());
      ref_bias_act_backward(rows, cols, y.data(), relu, dy_ref.data(), db_ref.data());
      ASSERT_TRUE(bits_equal(dy, dy_ref)) << cols << " relu " << relu;
      ASSERT_TRUE(bits_equal(db, db_ref)) << cols << " relu " << relu;
    }
  }
  std::vector<float> db(2, 1.0f);
  host::bias_activation_backward(0, 2, nullptr, host::Activation::kRelu, nullptr, db.data());
  EXPECT_EQ(db, (std::vector<float>{0.0f, 0.0f}));  // an empty batch has zero bias gradient
}

TEST(HostEmbeddingBag, ForwardMatchesReferenceWithEmptyBagsAndRepeats) {
  for (int dim : {1, 4, 8, 16, 19, 32, 300}) {
    for (bool mean : {false, true}) {
      const int batch = 37, U = 11;
      const Bags bags = random_bags(batch, U, dim);
      const auto rows = random_vector(size_t(U) * dim, 40 + dim);
      const auto mode = mean ? host::PoolingMode::kMean : host::PoolingMode::kSum;
      std::vector<float> out(size_t(batch) * dim, 7.0f), ref(out.size());
      host::embedding_bag_forward(batch, dim, bags.offsets.data(), bags.index.data(), rows.data(), mode,
                                  out.data(), host::PooledLayout::sample_major(dim));
      ref_pool_forward(bags, batch, dim, rows.data(), mean, ref.data());
      ASSERT_TRUE(bits_equal(out, ref)) << dim << " mean " << mean;
      // Empty bags (b % 5 == 3) pool to exact zeros.
      for (int c = 0; c < dim; ++c) EXPECT_EQ(out[3 * dim + c], 0.0f);
      std::vector<float> fm(out.size(), 7.0f);
      host::embedding_bag_forward(batch, dim, bags.offsets.data(), bags.index.data(), rows.data(), mode,
                                  fm.data(), host::PooledLayout::feature_major(batch));
      ASSERT_TRUE(bits_equal(fm, transpose(ref, batch, dim))) << dim << " mean " << mean;
    }
  }
}

TEST(HostEmbeddingBag, HandCase) {
  // Bags: {0, 1, 1}, {}, {2}; rows r0 = 1, r1 = 10, r2 = 100 (dim 1).
  const std::vector<int32_t> offsets = {0, 3, 3, 4}, index = {0, 1, 1, 2};
  const std::vector<float> rows = {1.0f, 10.0f, 100.0f};
  std::vector<float> out(3);
  const auto layout = host::PooledLayout::sample_major(1);
  host::embedding_bag_forward(3, 1, offsets.data(), index.data(), rows.data(), host::PoolingMode::kSum, out.data(), layout);
  EXPECT_EQ(out, (std::vector<float>{21.0f, 0.0f, 100.0f}));
  host::embedding_bag_forward(3, 1, offsets.data(), index.data(), rows.data(), host::PoolingMode::kMean, out.data(), layout);
  EXPECT_FLOAT_EQ(out[0], 7.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(out[2], 100.0f);

  const std::vector<float> dpooled = {3.0f, 5.0f, 2.0f};
  std::vector<float> grads(3, -1.0f);
  host::RowGatherScratch scratch;
  host::embedding_bag_backward(3, 1, 3, offsets.data(), index.data(), dpooled.data(), layout,
                               host::PoolingMode::kSum, grads.data(), scratch);
  EXPECT_EQ(grads, (std::vector<float>{3.0f, 6.0f, 2.0f}));  // the repeated key counts twice
  host::embedding_bag_backward(3, 1, 3, offsets.data(), index.data(), dpooled.data(), layout,
                               host::PoolingMode::kMean, grads.data(), scratch);
  EXPECT_FLOAT_EQ(grads[0], 1.0f);
  EXPECT_FLOAT_EQ(grads[1], 2.0f);
  EXPECT_EQ(grads[2], 2.0f);
}

TEST(HostEmbeddingBag, BackwardAlgorithmsAndLayoutsMatchReferenceBitwise) {
  for (int dim : {1, 4, 8, 16, 19, 32, 300}) {
    for (bool mean : {false, true}) {
      const int batch = 53, U = 13;
      const Bags bags = random_bags(batch, U, 100 + dim);
      const auto dpooled = random_vector(size_t(batch) * dim, 50 + dim);  // (batch, dim)
      const auto dpooled_fm = transpose(dpooled, batch, dim);               // (dim, batch)
      std::vector<float> ref(size_t(U) * dim);
      ref_pool_backward(bags, batch, dim, dpooled.data(), mean, ref.data());
      host::RowGatherScratch scratch;
      for (auto algo : {host::RowGradAlgorithm::kAuto, host::RowGradAlgorithm::kOrderedScatter,
                        host::RowGradAlgorithm::kRowGather}) {
        for (bool feature_major : {false, true}) {
          std::vector<float> grads(size_t(U) * dim, 5.0f);
          host::embedding_bag_backward(
              batch, dim, U, bags.offsets.data(), bags.index.data(),
              feature_major ? dpooled_fm.data() : dpooled.data(),
              feature_major ? host::PooledLayout::feature_major(batch) : host::PooledLayout::sample_major(dim),
              mean ? host::PoolingMode::kMean : host::PoolingMode::kSum, grads.data(), scratch, algo);
          ASSERT_TRUE(bits_equal(grads, ref))
              << dim << " mean " << mean << " algo " << int(algo) << " feature-major " << feature_major;
        }
      }
    }
  }
}

namespace {

struct InteractionInputs {
  std::vector<std::vector<float>> z;  // z[f] (batch, dim)
  std::vector<const float*> ptrs;
  InteractionInputs(int batch, int F, int dim, uint64_t seed) : z(F), ptrs(F) {
    for (int f = 0; f < F; ++f) {
      z[f] = random_vector(size_t(batch) * dim, seed + f);
      ptrs[f] = z[f].data();
    }
  }
};

struct InteractionResult {
  std::vector<float> out;                 // (batch, width)
  std::vector<std::vector<float>> dz;     // dz[f] (batch, dim)
};

InteractionResult run_interaction(int batch, int F, int dim, const InteractionInputs& in,
                                  const std::vector<float>& dout) {
  const int width = host::dot_interaction_width(F, dim);
  InteractionResult r;
  r.out.assign(size_t(batch) * width, 3.0f);
  r.dz.assign(F, std::vector<float>(size_t(batch) * dim, 9.0f));
  std::vector<float*> dptrs(F);
  for (int f = 0; f < F; ++f) dptrs[f] = r.dz[f].data();
  std::vector<float> packed(host::dot_interaction_packed_size(batch, F, dim), 5.0f);
  std::vector<float> scratch(host::dot_interaction_scratch_size(F, dim), 1.0f);
  host::dot_interaction_forward(batch, F, dim, in.ptrs.data(), packed.data(), r.out.data());
  host::dot_interaction_backward(batch, F, dim, packed.data(), dout.data(), scratch.data(), dptrs.data());
  return r;
}

// Batches below, at and above the lane count with ragged last blocks; dims below, at
// and above the 8-wide transposes; pair counts below and above a transposed chunk.
const int kInteractionCases[][3] = {{1, 1, 4}, {8, 2, 4},  {13, 5, 3},  {29, 27, 16},
                                    {17, 4, 7}, {3, 9, 33}, {64, 6, 16}, {5, 27, 16},
                                    {16, 13, 8}, {24, 16, 24}};

}  // namespace

TEST(HostDotInteraction, ForwardMatchesReferenceBitwise) {
  for (const auto& cs : kInteractionCases) {
    const int batch = cs[0], F = cs[1], dim = cs[2];
    const InteractionInputs in(batch, F, dim, 1000 * F);
    const int width = host::dot_interaction_width(F, dim);
    std::vector<float> ref(size_t(batch) * width);
    ref_interaction_forward(batch, F, dim, in.z, ref.data());
    const auto r = run_interaction(batch, F, dim, in, std::vector<float>(ref.size(), 0.0f));
    ASSERT_TRUE(bits_equal(r.out, ref)) << batch << " " << F << " " << dim;
  }
}

TEST(HostDotInteraction, BackwardMatchesReference) {
  for (const auto& cs : kInteractionCases) {
    const int batch = cs[0], F = cs[1], dim = cs[2];
    const InteractionInputs in(batch, F, dim, 2000 * F);
    const int width = host::dot_interaction_width(F, dim);
    const auto dout = random_vector(size_t(batch) * width, 77 + F);
    const auto r = run_interaction(batch, F, dim, in, dout);
    std::vector<std::vector<double>> ref(F);
    ref_interaction_backward(batch, F, dim, in.z, dout.data(), ref);
    for (int f = 0; f < F; ++f)
      for (size_t i = 0; i < ref[f].size(); ++i)
        ASSERT_NEAR(r.dz[f][i], ref[f][i], 1e-5 * F) << batch << " " << F << " " << dim << " f " << f;
  }
}

TEST(HostDotInteraction, GenericAndAvx2BuildsAgreeBitwise) {
  for (const auto& cs : kInteractionCases) {
    const int batch = cs[0], F = cs[1], dim = cs[2];
    const InteractionInputs in(batch, F, dim, 3000 * F);
    const auto dout = random_vector(size_t(batch) * host::dot_interaction_width(F, dim), 91 + F);
    const auto fast = run_interaction(batch, F, dim, in, dout);
    host::allow_avx2_kernels(false);
    const auto generic = run_interaction(batch, F, dim, in, dout);
    host::allow_avx2_kernels(true);
    ASSERT_TRUE(bits_equal(fast.out, generic.out)) << batch << " " << F << " " << dim;
    for (int f = 0; f < F; ++f) ASSERT_TRUE(bits_equal(fast.dz[f], generic.dz[f])) << f;
  }
}

TEST(HostLoss, BceMatchesReferenceAndIsStable) {
  const std::vector<float> logits = {0.0f, 2.5f, -1.25f, 40.0f, -40.0f, 200.0f, -200.0f, 0.5f};
  const std::vector<float> labels = {1.0f, 0.0f, 1.0f, 1.0f, 0.0f, 0.0f, 1.0f, 0.5f};
  const int n = int(logits.size());
  std::vector<double> losses(n);
  std::vector<float> dl(n), probs(n);
  host::bce_with_logits(n, logits.data(), labels.data(), 0.25f, losses.data(), dl.data());
  host::sigmoid(n, logits.data(), probs.data());
  for (int i = 0; i < n; ++i) {
    const double s = logits[i], y = labels[i];
    const double p = 1.0 / (1.0 + std::exp(-s));
    // -(y log p + (1 - y) log(1 - p)) written with log1p so that large |s| stays finite.
    const double ref = s >= 0 ? (1 - y) * s + std::log1p(std::exp(-s)) : -y * s + std::log1p(std::exp(s));
    EXPECT_NEAR(losses[i], ref, 1e-12 * (1 + std::fabs(ref))) << i;
    EXPECT_TRUE(std::isfinite(losses[i]));
    EXPECT_NEAR(dl[i], 0.25 * (p - y), 1e-7) << i;
    EXPECT_NEAR(probs[i], p, 1e-7) << i;
  }
  EXPECT_NEAR(losses[0], std::log(2.0), 1e-12);
  EXPECT_NEAR(losses[5], 200.0, 1e-9);  // label 0 at logit 200
  EXPECT_NEAR(losses[6], 200.0, 1e-9);  // label 1 at logit -200
  EXPECT_EQ(probs[5], 1.0f);
  EXPECT_EQ(probs[6], 0.0f);
}
