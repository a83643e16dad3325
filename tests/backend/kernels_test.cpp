// The neutral kernel interface on the host: runtime.device parsing and refusal,
// and every kernel family through it against the plain-loop references (bit for
// bit: the same additions in the same order).
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "backend/device.hpp"
#include "backend/embedding_kernels.hpp"
#include "backend/row_kernels.hpp"
#include "backend/sparse_optimizer_kernels.hpp"
#include "common/error.hpp"
#include "kernel_references.hpp"

namespace strata::backend {
namespace {

using reference::bits_equal;

TEST(Device, ParsesHostAndCudaAndNamesTheKeyOtherwise) {
  EXPECT_EQ(parse_device("host"), Device::kHost);
  EXPECT_EQ(parse_device("cuda"), Device::kCuda);
  try {
    parse_device("gpu");
    FAIL() << "gpu accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("runtime.device"), std::string::npos) << e.what();
  }
}

TEST(Device, CudaIsRefusedWithTheKeyWhereItCannotRun) {
  const std::string why = cuda_unavailable_reason();
  if (why.empty()) {
    select_device(Device::kCuda);
    EXPECT_EQ(active_device(), Device::kCuda);
  } else {
    try {
      select_device(Device::kCuda);
      FAIL() << "cuda selected although: " << why;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("runtime.device = cuda"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
    EXPECT_EQ(active_device(), Device::kHost);
  }
  select_device(Device::kHost);
  EXPECT_EQ(active_device(), Device::kHost);
}

// runtime.device = cuda: the node's trainers share its GPUs round-robin, and a GPU
// must hold ceil(trainers / GPUs) L1 tiers in its free memory.
TEST(Device, HbmBudgetRule) {
  const size_t gib = size_t(1) << 30;
  EXPECT_EQ(hbm_budget_problem(64, 4, {}), "") << "no GPU: select_device says why, not the budget";
  EXPECT_EQ(hbm_budget_problem(1024, 2, {80 * gib}), "");
  EXPECT_EQ(hbm_budget_problem(40 * 1024, 2, {80 * gib}), "") << "exactly full fits";
  const std::string over = hbm_budget_problem(40 * 1024 + 1, 2, {80 * gib});
  EXPECT_NE(over.find("store.l1_mb = 40961 MiB x 2 trainer(s) per GPU"), std::string::npos) << over;
  EXPECT_NE(over.find("81920 MiB free"), std::string::npos) << over;
  // Three trainers on two GPUs: one GPU holds two tiers; the smallest free memory decides.
  EXPECT_EQ(hbm_budget_problem(30 * 1024, 3, {80 * gib, 60 * gib}), "");
  EXPECT_NE(hbm_budget_problem(31 * 1024, 3, {80 * gib, 60 * gib}), "");
  if (!cuda_unavailable_reason().empty()) EXPECT_TRUE(gpu_free_bytes().empty()) << "no usable GPU, no free memory";
}

TEST(HostBlasThreads, RequestedWinsThenTheEnvironmentThenCoresOverRanks) {
  EXPECT_EQ(choose_host_blas_threads(3, true, 2, 4), 3);
  EXPECT_EQ(choose_host_blas_threads(0, true, 64, 1), 0);  // OPENBLAS_NUM_THREADS set: left alone
  EXPECT_EQ(choose_host_blas_threads(0, false, 2, 4), 1);  // 4 ranks on 2 cores: never below 1
  EXPECT_EQ(choose_host_blas_threads(0, false, 64, 8), 8);
  EXPECT_EQ(choose_host_blas_threads(0, false, 64, 12), 5);
  EXPECT_EQ(choose_host_blas_threads(0, false, 0, 0), 1);
}

TEST(HostBlasThreads, ConfiguringSetsOpenBlas) {
  const int before = configure_host_blas_threads(0, 1);  // the tests set OPENBLAS_NUM_THREADS=1: unchanged
  if (before == 0) GTEST_SKIP() << "the BLAS is not OpenBLAS";
  EXPECT_EQ(configure_host_blas_threads(2, 1), 2);
  EXPECT_EQ(configure_host_blas_threads(1, 1), 1);
  EXPECT_EQ(configure_host_blas_threads(before, 1), before);
}

TEST(EmbeddingKernels, PoolingMatchesTheReferenceWithDuplicatesAndEmptyBags) {
  select_device(Device::kHost);
  for (int dim : {1, 7, 16, 64, 300})
    for (PoolingMode mode : {PoolingMode::kSum, PoolingMode::kMean})
      for (int batch : {0, 1, 33}) {
        const int num_unique = 11;
        const auto bags = reference::random_bags(batch, num_unique, 6, 3 + dim + batch);
        const auto rows = reference::random_floats(size_t(num_unique) * dim, 5 + dim);
        std::vector<float> pooled(size_t(batch) * dim, 9.0f);
        embedding_bag_forward(batch, dim, bags.offsets.data(), bags.index.data(), rows.data(), mode, pooled.data(),
                              PooledLayout::sample_major(dim));
        EXPECT_TRUE(bits_equal(pooled, reference::pool_forward(bags, dim, rows, mode))) << dim << " " << batch;
        const auto dpooled = reference::random_floats(size_t(batch) * dim, 7 + dim);
        const auto expected = reference::pool_backward(bags, dim, num_unique, dpooled, mode);
        for (auto algorithm : {RowGradAlgorithm::kOrderedScatter, RowGradAlgorithm::kRowGather}) {
          std::vector<float> grads(size_t(num_unique) * dim, 9.0f);
          RowGatherScratch scratch;
          embedding_bag_backward(batch, dim, num_unique, bags.offsets.data(), bags.index.data(), dpooled.data(),
                                 PooledLayout::sample_major(dim), mode, grads.data(), scratch, algorithm);
          EXPECT_TRUE(bits_equal(grads, expected)) << dim << " " << batch;
        }
      }
}

TEST(RowKernels, GatherAndScatterAddThroughTheInterface) {
  const int width = 20, dim = 12, rows = 300;
  const auto arena = reference::random_floats(size_t(rows) * width, 1);
  std::vector<int32_t> slots32(rows);
  std::iota(slots32.begin(), slots32.end(), 0);
  std::shuffle(slots32.begin(), slots32.end(), std::mt19937(2));
  slots32.resize(57);
  std::vector<int64_t> slots64(slots32.begin(), slots32.end());
  std::vector<float> out32(slots32.size() * dim), out64(out32.size()), expected(out32.size());
  for (size_t i = 0; i < slots32.size(); ++i)
    std::copy_n(arena.begin() + size_t(slots32[i]) * width, dim, expected.begin() + i * dim);
  gather_rows(arena.data(), width, slots32.data(), slots32.size(), dim, out32.data());
  gather_rows(arena.data(), width, slots64.data(), slots64.size(), dim, out64.data());
  EXPECT_TRUE(bits_equal(out32, expected));
  EXPECT_TRUE(bits_equal(out64, expected));
  const auto grads = reference::random_floats(expected.size(), 3);
  std::vector<float> a = arena, b = arena;
  scatter_add_rows(a.data(), width, slots64.data(), slots64.size(), dim, grads.data());
  for (size_t i = 0; i < slots32.size(); ++i)
    for (int c = 0; c < dim; ++c) b[size_t(slots32[i]) * width + c] += grads[i * dim + c];
  EXPECT_TRUE(bits_equal(a, b));
  gather_rows(arena.data(), width, slots32.data(), 0, dim, out32.data());  // empty: nothing happens
}

TEST(SparseOptimizerKernels, StepsMatchTheScalarLoopBitForBit) {
  for (auto kind : {SparseOptimizerKind::kSgd, SparseOptimizerKind::kAdagrad})
    for (int dim : {1, 5, 8, 33}) {
      const SparseOptimizerParams p{kind, 0.05f, 1e-8f};
      const int width = dim + sparse_optimizer_state_width(kind, dim), rows = 64;
      const auto arena = reference::random_arena(rows, width, dim, 11 + dim);
      // Distinct slots: one step each.
      std::vector<int32_t> slots = {3, 0, 63, 17, 40};
      const auto grads = reference::random_floats(slots.size() * dim, 13 + dim);
      std::vector<float> got = arena, want = arena;
      sparse_optimizer_step(p, got.data(), width, slots.data(), slots.size(), dim, grads.data());
      for (size_t i = 0; i < slots.size(); ++i) {
        float* row = want.data() + size_t(slots[i]) * width;
        reference::optimizer_row(p, row, row + dim, grads.data() + i * dim, dim);
      }
      EXPECT_TRUE(bits_equal(got, want)) << dim;
      // One row through the row entry point.
      std::vector<float> one = arena, ref = arena;
      sparse_optimizer_apply_row(p, one.data(), one.data() + dim, grads.data(), dim);
      reference::optimizer_row(p, ref.data(), ref.data() + dim, grads.data(), dim);
      EXPECT_TRUE(bits_equal(one, ref));
      // Fused scatter with duplicates, every slot of the table, and an empty call.
      std::mt19937 rng(dim);
      std::vector<int32_t> occ(500);
      for (auto& s : occ) s = int32_t(rng() % rows);
      const auto occ_grads = reference::random_floats(occ.size() * dim, 17 + dim);
      std::vector<float> fused = arena, fused_ref = arena;
      ScatterOptimizerScratch scratch;
      scatter_sparse_optimizer_step(p, fused.data(), width, occ.data(), occ.size(), dim, occ_grads.data(), scratch);
      reference::scatter_optimizer(p, fused_ref, width, occ, dim, occ_grads);
      EXPECT_TRUE(bits_equal(fused, fused_ref)) << dim;
      scatter_sparse_optimizer_step(p, fused.data(), width, occ.data(), 0, dim, occ_grads.data(), scratch);
      EXPECT_TRUE(bits_equal(fused, fused_ref));
    }
}

}  // namespace
}  // namespace strata::backend
