// Every CUDA kernel against its host reference on random inputs: empty batches,
// duplicate keys, a full hash table, evictions; and the staged CUDA backend
// behind the neutral interface against the host one. Bitwise wherever
// backend/cuda/kernels.hpp says a kernel is bit-identical (all of them today).
// Exits 77 (ctest: skipped) where no GPU can run.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <unordered_map>

#include "backend/cuda/kernels.hpp"
#include "backend/dense_kernels.hpp"
#include "backend/device.hpp"
#include "backend/row_kernels.hpp"
#include "kernel_references.hpp"

namespace strata {
namespace {

using backend::reference::bits_equal;
namespace ref = backend::reference;

template <class T>
struct Dev {
  cuda::DeviceBuffer<T> buf;
  size_t n = 0;
  explicit Dev(const std::vector<T>& host) : buf(host.size()), n(host.size()) {
    if (n) cuda::check(cudaMemcpy(buf.data(), host.data(), n * sizeof(T), cudaMemcpyHostToDevice), "H2D");
  }
  explicit Dev(size_t count) : buf(count), n(count) {}
  T* get() const { return buf.data(); }
  std::vector<T> host() const {
    std::vector<T> out(n);
    cuda::check(cudaDeviceSynchronize(), "sync");
    if (n) cuda::check(cudaMemcpy(out.data(), buf.data(), n * sizeof(T), cudaMemcpyDeviceToHost), "D2H");
    return out;
  }
};

TEST(CudaEmbeddingBag, ForwardAndBackwardEqualTheHostBitForBit) {
  for (int dim : {1, 7, 16, 64, 300})
    for (auto mode : {backend::PoolingMode::kSum, backend::PoolingMode::kMean})
      for (int batch : {0, 1, 257}) {
        const int num_unique = 97;
        const auto bags = ref::random_bags(batch, num_unique, 9, 3 + dim + batch);
        const auto rows = ref::random_floats(size_t(num_unique) * dim, 5 + dim);
        const auto dpooled = ref::random_floats(size_t(batch) * dim, 7 + dim);
        Dev<int32_t> offsets(bags.offsets), index(bags.index);
        Dev<float> d_rows(rows), d_dpooled(dpooled), pooled(size_t(batch) * dim), grads(size_t(num_unique) * dim);
        const auto layout = backend::PooledLayout::sample_major(dim);
        cuda::embedding_bag_forward(nullptr, batch, dim, offsets.get(), index.get(), d_rows.get(), mode,
                                    pooled.get(), layout);
        EXPECT_TRUE(bits_equal(pooled.host(), ref::pool_forward(bags, dim, rows, mode))) << dim << " " << batch;
        cuda::EmbeddingBagBackwardScratch scratch;
        cuda::embedding_bag_backward(nullptr, batch, dim, num_unique, int(bags.index.size()), offsets.get(),
                                     index.get(), d_dpooled.get(), layout, mode, grads.get(), scratch);
        EXPECT_TRUE(bits_equal(grads.host(), ref::pool_backward(bags, dim, num_unique, dpooled, mode)))
            << dim << " " << batch;
      }
}

TEST(CudaRows, GatherScatterAddAndCopyEqualTheHost) {
  for (int dim : {3, 16, 64}) {
    const int width = dim + (dim % 4 == 0 ? dim : 1), rows = 4000;
    const auto arena = ref::random_floats(size_t(rows) * width, dim);
    std::vector<int32_t> slots32(rows);
    std::iota(slots32.begin(), slots32.end(), 0);
    std::shuffle(slots32.begin(), slots32.end(), std::mt19937(dim));
    for (size_t n : {size_t(0), size_t(1), size_t(999)}) {
      std::vector<int32_t> s32(slots32.begin(), slots32.begin() + n);
      std::vector<int64_t> s64(s32.begin(), s32.end());
      std::vector<float> expected(n * dim);
      backend::gather_rows(arena.data(), width, s32.data(), n, dim, expected.data());
      Dev<float> d_arena(arena), out32(n * dim), out64(n * dim);
      Dev<int32_t> d32(s32);
      Dev<int64_t> d64(s64);
      cuda::gather_rows(nullptr, d_arena.get(), width, d32.get(), n, dim, out32.get());
      cuda::gather_rows(nullptr, d_arena.get(), width, d64.get(), n, dim, out64.get());
      EXPECT_TRUE(bits_equal(out32.host(), expected));
      EXPECT_TRUE(bits_equal(out64.host(), expected));
      const auto grads = ref::random_floats(n * dim, 9);
      std::vector<float> want = arena;
      backend::scatter_add_rows(want.data(), width, s64.data(), n, dim, grads.data());
      Dev<float> d_grads(grads);
      cuda::scatter_add_rows(nullptr, d_arena.get(), width, d64.get(), n, dim, d_grads.get());
      EXPECT_TRUE(bits_equal(d_arena.host(), want));
      // Whole rows copied into their slots (staging into the arena).
      const auto staged = ref::random_floats(n * width, 10);
      for (size_t i = 0; i < n; ++i) std::copy_n(staged.begin() + i * width, width, want.begin() + size_t(s32[i]) * width);
      Dev<float> d_staged(staged);
      cuda::scatter_copy_rows(nullptr, d_arena.get(), width, d32.get(), n, d_staged.get());
      EXPECT_TRUE(bits_equal(d_arena.host(), want));
    }
  }
}

TEST(CudaSparseOptimizer, StepAndFusedScatterEqualTheHostBitForBit) {
  for (auto kind : {backend::SparseOptimizerKind::kSgd, backend::SparseOptimizerKind::kAdagrad,
                    backend::SparseOptimizerKind::kAdam})
    for (int dim : {1, 5, 16, 64}) {
      const backend::SparseOptimizerParams p{kind, 0.05f, 1e-8f, 0.9f, 0.999f};
      const int width = dim + backend::sparse_optimizer_state_width(kind, dim), rows = 1000;
      auto arena = ref::random_arena(rows, width, dim, 11 + dim);
      if (kind == backend::SparseOptimizerKind::kAdam)  // b1^t, b2^t: powers in (0, 1]
        for (int r = 0; r < rows; ++r)
          for (int c = width - 2; c < width; ++c) arena[size_t(r) * width + c] = 1.0f / float(1 + (r + c) % 7);
      std::vector<int32_t> distinct(rows);
      std::iota(distinct.begin(), distinct.end(), 0);
      std::shuffle(distinct.begin(), distinct.end(), std::mt19937(dim));
      for (size_t n : {size_t(0), size_t(1), size_t(rows)}) {  // rows: every slot of the arena
        std::vector<int32_t> slots(distinct.begin(), distinct.begin() + n);
        const auto grads = ref::random_floats(n * dim, 13 + dim);
        std::vector<float> want = arena;
        backend::sparse_optimizer_step(p, want.data(), width, slots.data(), n, dim, grads.data());
        Dev<float> d_arena(arena), d_grads(grads);
        Dev<int32_t> d_slots(slots);
        cuda::sparse_optimizer_step(nullptr, p, d_arena.get(), width, d_slots.get(), n, dim, d_grads.get());
        EXPECT_TRUE(bits_equal(d_arena.host(), want)) << dim << " " << n;
      }
      std::mt19937 rng(dim);
      for (size_t n : {size_t(0), size_t(1), size_t(5000)}) {  // 5000 occurrences of 1000 slots: duplicates
        std::vector<int32_t> occ(n);
        for (auto& s : occ) s = int32_t(rng() % rows);
        const auto grads = ref::random_floats(n * dim, 17 + dim);
        std::vector<float> want = arena;
        backend::ScatterOptimizerScratch host_scratch;
        backend::scatter_sparse_optimizer_step(p, want.data(), width, occ.data(), n, dim, grads.data(), host_scratch);
        Dev<float> d_arena(arena), d_grads(grads);
        Dev<int32_t> d_occ(occ);
        cuda::ScatterOptimizerDeviceScratch scratch;
        cuda::scatter_sparse_optimizer_step(nullptr, p, d_arena.get(), width, d_occ.get(), n, dim, d_grads.get(),
                                            scratch);
        EXPECT_TRUE(bits_equal(d_arena.host(), want)) << dim << " " << n;
      }
    }
}

std::vector<int32_t> find_all(const cuda::DeviceHashTable& table, const std::vector<uint64_t>& keys) {
  Dev<uint64_t> d_keys(keys);
  Dev<int32_t> out(keys.size());
  table.find(nullptr, d_keys.get(), keys.size(), out.get());
  return out.host();
}

TEST(CudaHashTable, FindInsertEvictAgreeWithAMapUpToAFullTable) {
  cuda::DeviceHashTable table(4096);
  const int64_t capacity = table.capacity();
  ASSERT_GE(capacity, 4096);
  std::mt19937_64 rng(5);
  std::unordered_map<uint64_t, int32_t> model;
  std::vector<uint64_t> keys;
  while (int64_t(keys.size()) < capacity) {
    const uint64_t k = rng() >> 2;  // never the empty or tombstone key
    if (model.emplace(k, int32_t(keys.size())).second) keys.push_back(k);
  }
  std::vector<int32_t> slots(keys.size());
  std::iota(slots.begin(), slots.end(), 0);
  // Empty calls, then the table filled in two inserts (the second one to the last entry).
  EXPECT_EQ(table.insert(nullptr, nullptr, nullptr, 0), 0);
  const size_t half = keys.size() / 2;
  {
    Dev<uint64_t> k1(std::vector<uint64_t>(keys.begin(), keys.begin() + half));
    Dev<int32_t> s1(std::vector<int32_t>(slots.begin(), slots.begin() + half));
    EXPECT_EQ(table.insert(nullptr, k1.get(), s1.get(), half), 0);
    Dev<uint64_t> k2(std::vector<uint64_t>(keys.begin() + half, keys.end()));
    Dev<int32_t> s2(std::vector<int32_t>(slots.begin() + half, slots.end()));
    EXPECT_EQ(table.insert(nullptr, k2.get(), s2.get(), keys.size() - half), 0);
  }
  // Finds with duplicates and absent keys.
  std::vector<uint64_t> queries(keys.begin(), keys.end());
  for (int i = 0; i < 100; ++i) queries.push_back(keys[rng() % keys.size()]);
  for (int i = 0; i < 100; ++i) queries.push_back(uint64_t(1) << 63 | i);  // absent: keys above are < 2^62
  auto found = find_all(table, queries);
  for (size_t i = 0; i < queries.size(); ++i) {
    auto it = model.find(queries[i]);
    ASSERT_EQ(found[i], it == model.end() ? -1 : it->second) << i;
  }
  // Full: one more key finds no room; a present key is reassigned in place.
  {
    Dev<uint64_t> extra(std::vector<uint64_t>{uint64_t(1) << 63});
    Dev<int32_t> s(std::vector<int32_t>{7});
    EXPECT_EQ(table.insert(nullptr, extra.get(), s.get(), 1), 1);
    Dev<uint64_t> again(std::vector<uint64_t>{keys[3]});
    EXPECT_EQ(table.insert(nullptr, again.get(), s.get(), 1), 0);
    model[keys[3]] = 7;
  }
  // Evict by plan (every other key, plus an absent one), then reinsert some with new slots.
  std::vector<uint64_t> evicted;
  for (size_t i = 0; i < keys.size(); i += 2) evicted.push_back(keys[i]), model.erase(keys[i]);
  evicted.push_back(uint64_t(1) << 62 | 1);
  {
    Dev<uint64_t> d(evicted);
    table.evict(nullptr, d.get(), evicted.size());
  }
  std::vector<uint64_t> back(evicted.begin(), evicted.begin() + 500);
  std::vector<int32_t> back_slots(back.size());
  for (size_t i = 0; i < back.size(); ++i) back_slots[i] = int32_t(100000 + i), model[back[i]] = back_slots[i];
  {
    Dev<uint64_t> k(back);
    Dev<int32_t> s(back_slots);
    EXPECT_EQ(table.insert(nullptr, k.get(), s.get(), back.size()), 0);
  }
  found = find_all(table, queries);
  for (size_t i = 0; i < queries.size(); ++i) {
    auto it = model.find(queries[i]);
    ASSERT_EQ(found[i], it == model.end() ? -1 : it->second) << i;
  }
}

// The staged backend behind the neutral interface gives the host's bits.
TEST(CudaStagedBackend, NeutralCallsOnCudaEqualTheHost) {
  const int dim = 16, num_unique = 50, batch = 40;
  const auto bags = ref::random_bags(batch, num_unique, 5, 1);
  const auto rows = ref::random_floats(size_t(num_unique) * dim, 2);
  const auto dpooled = ref::random_floats(size_t(batch) * dim, 3);
  const backend::SparseOptimizerParams p{backend::SparseOptimizerKind::kAdagrad, 0.05f, 1e-8f};
  const int width = 2 * dim;
  const auto arena = ref::random_arena(num_unique, width, dim, 4);
  std::vector<int32_t> occ;
  for (int i = 0; i < 300; ++i) occ.push_back(int32_t((i * 7) % num_unique));
  const auto occ_grads = ref::random_floats(occ.size() * dim, 5);
  std::vector<float> results[2][3];
  for (int d = 0; d < 2; ++d) {
    backend::select_device(d ? backend::Device::kCuda : backend::Device::kHost);
    auto& r = results[d];
    r[0].assign(size_t(batch) * dim, 0.0f);
    backend::embedding_bag_forward(batch, dim, bags.offsets.data(), bags.index.data(), rows.data(),
                                   backend::PoolingMode::kMean, r[0].data(), backend::PooledLayout::sample_major(dim));
    r[1].assign(size_t(num_unique) * dim, 0.0f);
    backend::RowGatherScratch scratch;
    backend::embedding_bag_backward(batch, dim, num_unique, bags.offsets.data(), bags.index.data(), dpooled.data(),
                                    backend::PooledLayout::sample_major(dim), backend::PoolingMode::kMean,
                                    r[1].data(), scratch);
    r[2] = arena;
    backend::ScatterOptimizerScratch opt_scratch;
    backend::scatter_sparse_optimizer_step(p, r[2].data(), width, occ.data(), occ.size(), dim, occ_grads.data(),
                                           opt_scratch);
    std::vector<int32_t> distinct = {4, 9, 0};
    backend::sparse_optimizer_step(p, r[2].data(), width, distinct.data(), distinct.size(), dim, occ_grads.data());
  }
  backend::select_device(backend::Device::kHost);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(bits_equal(results[0][i], results[1][i])) << i;
}

// cuBLAS sums in another order than the host's BLAS: within FP32 rounding, not
// bit for bit (README "Kernel backend" says which kernels are which).
TEST(CudaStagedBackend, GemmThroughCublasMatchesTheHostWithinRounding) {
  struct Shape {
    bool ta, tb;
    int m, n, k;
    float beta;
  };
  for (const Shape& g : {Shape{false, false, 7, 5, 3, 0.0f}, Shape{true, false, 33, 17, 64, 1.0f},
                         Shape{false, true, 128, 1, 9, 0.5f}, Shape{true, true, 3, 70, 257, 0.0f},
                         Shape{false, false, 4, 6, 0, 2.0f}}) {
    const auto a = ref::random_floats(size_t(g.m) * size_t(g.k), 11);
    const auto b = ref::random_floats(size_t(g.k) * size_t(g.n), 12);
    const auto c0 = ref::random_floats(size_t(g.m) * size_t(g.n), 13);
    std::vector<float> out[2];
    for (int d = 0; d < 2; ++d) {
      backend::select_device(d ? backend::Device::kCuda : backend::Device::kHost);
      out[d] = c0;
      backend::gemm(g.ta, g.tb, g.m, g.n, g.k, 0.75f, a.data(), b.data(), g.beta, out[d].data());
    }
    backend::select_device(backend::Device::kHost);
    for (size_t i = 0; i < out[0].size(); ++i) {
      const float scale = 1.0f + std::fabs(out[0][i]);
      ASSERT_NEAR(out[0][i], out[1][i], 1e-5f * scale * float(std::max(g.k, 1))) << g.m << "x" << g.n << "x" << g.k;
    }
  }
}

}  // namespace
}  // namespace strata

int main(int argc, char** argv) {
  const std::string why = strata::backend::cuda_unavailable_reason();
  if (!why.empty()) {
    std::printf("skipped: %s\n", why.c_str());
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
