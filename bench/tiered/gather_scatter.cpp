// Benchmark 5 of the tiered store: gather + scatter-add of random rows from a
// table far larger than the CPU caches (~1 GiB), dims 16..128, in GB/s of row
// bytes moved, against a sequential memcpy of the same table on this machine.
// Prints the naive row loop and strata's kernel; the ratio to memcpy comes last.
//
// usage: bench_gather_scatter [table_mib=1024] [rows_per_batch=65536]
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "backend/host/host_row_gather.hpp"

using namespace strata::backend::host;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

float* allocate(size_t bytes) {
  void* p = std::aligned_alloc(2 << 20, (bytes + (2 << 20) - 1) / (2 << 20) * (2 << 20));
  if (!p) {
    std::perror("aligned_alloc");
    std::exit(1);
  }
  madvise(p, bytes, MADV_HUGEPAGE);  // as strata's arenas would on a production host
  std::memset(p, 0, bytes);
  return static_cast<float*>(p);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t table_bytes = size_t(argc > 1 ? std::atol(argv[1]) : 1024) << 20;
  const size_t batch = argc > 2 ? std::atol(argv[2]) : 65536;
  float* table = allocate(table_bytes);
  float* copy = allocate(table_bytes);
  // memcpy limit: read + write of the whole table.
  std::memcpy(copy, table, table_bytes);
  auto t = Clock::now();
  const int copies = 3;
  for (int i = 0; i < copies; ++i) std::memcpy(copy, table, table_bytes);
  const double memcpy_gbs = 2.0 * table_bytes * copies / seconds_since(t) / 1e9;
  std::printf("sequential memcpy of %zu MiB: %.2f GB/s (read + write)\n", table_bytes >> 20, memcpy_gbs);

  std::mt19937_64 rng(1);
  double worst_ratio = 1e9;
  for (int dim : {16, 32, 64, 128}) {
    const int width = dim;  // values only: the gradient path touches the values
    const int64_t rows = int64_t(table_bytes / (sizeof(float) * width));
    std::vector<int64_t> slots(batch);
    std::vector<float> out(batch * dim), grads(batch * dim, 0.001f);
    double naive_s = 0, strata_s = 0;
    const int reps = 6;
    for (int r = 0; r < reps; ++r) {
      // Distinct random rows per batch (a de-duplicated batch).
      for (auto& s : slots) s = int64_t(rng() % uint64_t(rows));
      std::sort(slots.begin(), slots.end());
      slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
      std::shuffle(slots.begin(), slots.end(), rng);
      const size_t n = slots.size();
      t = Clock::now();
      gather_rows_reference(table, width, slots.data(), n, dim, out.data());
      scatter_add_rows_reference(table, width, slots.data(), n, dim, grads.data());
      naive_s += seconds_since(t);
      t = Clock::now();
      gather_rows(table, width, slots.data(), n, dim, out.data());
      scatter_add_rows(table, width, slots.data(), n, dim, grads.data());
      strata_s += seconds_since(t);
    }
    // Bytes moved per row: gather reads the row and writes it out; scatter reads
    // the gradient and the row and writes the row.
    const double bytes = double(reps) * batch * dim * sizeof(float) * 5;
    const double naive_gbs = bytes / naive_s / 1e9, strata_gbs = bytes / strata_s / 1e9;
    std::printf("dim %3d: naive %.2f GB/s (%.3f of memcpy), strata %.2f GB/s (%.3f of memcpy)\n", dim, naive_gbs,
                naive_gbs / memcpy_gbs, strata_gbs, strata_gbs / memcpy_gbs);
    worst_ratio = std::min(worst_ratio, strata_gbs / memcpy_gbs);
  }
  std::printf("ratio gather+scatter/memcpy (worst dim, target >= 0.25): %.3f\n", worst_ratio);
  std::free(table);
  std::free(copy);
  return 0;
}
