// Device figures of the CUDA backend (issue 16): random row gather / scatter-add
// of the L1 arena against a measured device-to-device cudaMemcpy (the HBM limit),
// and the L1 hash table's find / insert rates. Every timed run also checks its
// result. Bytes counted as read + written, for the copy and the kernels alike.
// Usage: bench_gpu_device [arena_rows] [batch_rows] [dim] [table_keys]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cuda/kernels.hpp"

namespace {

using strata::cuda::check;
using strata::cuda::DeviceBuffer;

__global__ void random_keys(uint64_t* keys, size_t n, uint64_t seed) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ULL;  // splitmix64: distinct inputs, distinct outputs
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  keys[i] = (z ^ (z >> 31)) >> 2;  // below the empty and tombstone keys
}

__global__ void iota_slots(int32_t* slots, size_t n) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) slots[i] = int32_t(i);
}

template <class F>
double best_ms(int reps, F&& f) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event"), check(cudaEventCreate(&b), "event");
  f();  // warm-up
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    check(cudaEventRecord(a), "record");
    f();
    check(cudaEventRecord(b), "record");
    check(cudaEventSynchronize(b), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "elapsed");
    best = std::min(best, double(ms));
  }
  cudaEventDestroy(a), cudaEventDestroy(b);
  return best;
}

int failures = 0;
void expect(bool ok, const char* what) {
  if (!ok) {
    std::printf("CHECK FAILED: %s\n", what);
    ++failures;
  }
}

}  // namespace

int main(int argc, char** argv) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("skipped: no usable CUDA device\n");
    return 77;
  }
  const int64_t arena_rows = argc > 1 ? std::atoll(argv[1]) : 8 << 20;  // 8 Mi rows
  const size_t n = argc > 2 ? std::atoll(argv[2]) : 1 << 20;             // rows per gather
  const int dim = argc > 3 ? std::atoi(argv[3]) : 64;
  const int64_t table_keys = argc > 4 ? std::atoll(argv[4]) : 64 << 20;
  const int width = 2 * dim;  // values + Adagrad state
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  std::printf("device %s, %.1f GiB; arena %lld rows x %d floats (%.2f GiB), %zu rows per call, dim %d\n", prop.name,
              prop.totalGlobalMem / double(1 << 30), (long long)arena_rows, width,
              arena_rows * width * 4.0 / (1 << 30), n, dim);

  // ---- HBM copy: the limit ---------------------------------------------------------
  const size_t copy_bytes = size_t(1) << 31;
  DeviceBuffer<char> src(copy_bytes), dst(copy_bytes);
  check(cudaMemset(src.data(), 1, copy_bytes), "memset");
  const double copy_ms = best_ms(5, [&] {
    check(cudaMemcpy(dst.data(), src.data(), copy_bytes, cudaMemcpyDeviceToDevice), "memcpy D2D");
  });
  const double copy_gbs = 2.0 * copy_bytes / (copy_ms * 1e6);
  std::printf("hbm_copy          %8.1f GB/s (cudaMemcpy D2D of %zu MiB, read + write)\n", copy_gbs, copy_bytes >> 20);

  // ---- gather / scatter-add of random rows -----------------------------------------
  DeviceBuffer<float> arena(size_t(arena_rows) * width), out(n * dim), grads(n * dim);
  check(cudaMemset(arena.data(), 0, sizeof(float) * arena.size()), "memset");
  std::vector<int32_t> slots(n);
  {
    std::mt19937_64 rng(1);
    std::vector<int32_t> all(arena_rows);
    std::iota(all.begin(), all.end(), 0);
    for (size_t i = 0; i < n; ++i) std::swap(all[i], all[i + rng() % (arena_rows - i)]);  // distinct
    std::copy_n(all.begin(), n, slots.begin());
  }
  std::vector<float> host_rows(n * dim);
  for (size_t i = 0; i < n * dim; ++i) host_rows[i] = float(i % 977);
  DeviceBuffer<int32_t> d_slots(n);
  check(cudaMemcpy(d_slots.data(), slots.data(), n * 4, cudaMemcpyHostToDevice), "H2D");
  check(cudaMemcpy(grads.data(), host_rows.data(), n * dim * 4, cudaMemcpyHostToDevice), "H2D");
  // Rows in place (values only, state zero): scatter_add into a zero arena puts grads there.
  strata::cuda::scatter_add_rows(nullptr, arena.data(), width, d_slots.data(), n, dim, grads.data());
  const double gather_ms =
      best_ms(10, [&] { strata::cuda::gather_rows(nullptr, arena.data(), width, d_slots.data(), n, dim, out.data()); });
  std::vector<float> back(n * dim);
  check(cudaMemcpy(back.data(), out.data(), n * dim * 4, cudaMemcpyDeviceToHost), "D2H");
  expect(back == host_rows, "gather returns the rows scattered into the arena");
  const double row_bytes = double(n) * dim * 4;
  const double gather_gbs = (2 * row_bytes + n * 4.0) / (gather_ms * 1e6);
  std::printf("gather            %8.1f GB/s (%zu random rows of %d floats)\n", gather_gbs, n, dim);
  const double scatter_ms = best_ms(10, [&] {
    strata::cuda::scatter_add_rows(nullptr, arena.data(), width, d_slots.data(), n, dim, grads.data());
  });
  const double scatter_gbs = (3 * row_bytes + n * 4.0) / (scatter_ms * 1e6);
  std::printf("scatter_add       %8.1f GB/s (read row + grad, write row)\n", scatter_gbs);
  // 1 + 11 scatters of the same grads: each row is now 12 * grads (exact: small integers).
  strata::cuda::gather_rows(nullptr, arena.data(), width, d_slots.data(), n, dim, out.data());
  check(cudaMemcpy(back.data(), out.data(), n * dim * 4, cudaMemcpyDeviceToHost), "D2H");
  bool scatter_ok = true;
  for (size_t i = 0; i < n * dim; i += 97) scatter_ok &= back[i] == 12.0f * host_rows[i];
  expect(scatter_ok, "scatter_add added every gradient once per call");
  const strata::backend::SparseOptimizerParams adagrad{strata::backend::SparseOptimizerKind::kAdagrad, 0.01f, 1e-8f};
  const double step_ms = best_ms(10, [&] {
    strata::cuda::sparse_optimizer_step(nullptr, adagrad, arena.data(), width, d_slots.data(), n, dim, grads.data());
  });
  const double step_gbs = (5 * row_bytes + n * 4.0) / (step_ms * 1e6);  // read w, a, g; write w, a
  std::printf("adagrad_step      %8.1f GB/s (read values + state + grad, write values + state)\n", step_gbs);

  // ---- L1 hash table -------------------------------------------------------------
  const size_t keys_n = size_t(table_keys) * 3 / 4;  // load 0.75
  DeviceBuffer<uint64_t> keys(keys_n);
  DeviceBuffer<int32_t> kslots(keys_n), found(keys_n);
  random_keys<<<(keys_n + 255) / 256, 256>>>(keys.data(), keys_n, 42);
  iota_slots<<<(keys_n + 255) / 256, 256>>>(kslots.data(), keys_n);
  check(cudaDeviceSynchronize(), "keys");
  strata::cuda::DeviceHashTable table(table_keys);
  int64_t failed = 0;
  const double insert_ms = best_ms(3, [&] {
    table.clear(nullptr);
    failed += table.insert(nullptr, keys.data(), kslots.data(), keys_n);
  });
  expect(failed == 0, "every insert found room at load 0.75");
  const double find_ms = best_ms(10, [&] { table.find(nullptr, keys.data(), keys_n, found.data()); });
  std::vector<int32_t> got(keys_n);
  check(cudaMemcpy(got.data(), found.data(), keys_n * 4, cudaMemcpyDeviceToHost), "D2H");
  bool find_ok = true;
  for (size_t i = 0; i < keys_n; ++i) find_ok &= got[i] == int32_t(i);
  expect(find_ok, "find returns every inserted key's slot");
  // insert_ms includes clear (a memset of the keys) and the failure-count readback.
  const double insert_rate = keys_n / (insert_ms * 1e6), find_rate = keys_n / (find_ms * 1e6);
  std::printf("hash_insert       %8.3f G keys/s (%zu keys, capacity %lld, load 0.75)\n", insert_rate, keys_n,
              (long long)table.capacity());
  std::printf("hash_find         %8.3f G keys/s\n", find_rate);

  std::printf("\nratios (targets: gather and scatter >= 0.7 of the HBM copy; HierarchicalKV reports ~2 G finds/s)\n");
  std::printf("ratio gather/hbm_copy       %.3f\n", gather_gbs / copy_gbs);
  std::printf("ratio scatter_add/hbm_copy  %.3f\n", scatter_gbs / copy_gbs);
  std::printf("ratio adagrad_step/hbm_copy %.3f\n", step_gbs / copy_gbs);
  std::printf("ratio hash_find/2G          %.3f\n", find_rate / 2.0);
  std::printf("ratio hash_insert/2G        %.3f\n", insert_rate / 2.0);
  std::printf("checks %s\n", failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}
