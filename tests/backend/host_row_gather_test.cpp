// Row gather / scatter-add kernels against their plain-loop references on random inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "backend/host/host_row_gather.hpp"

namespace strata::backend::host {
namespace {

TEST(RowGather, MatchesReferenceOnRandomSlots) {
  std::mt19937_64 rng(7);
  const int width = 24, dim = 16;
  const int64_t rows = 5000;
  std::vector<float> arena(rows * width);
  for (auto& v : arena) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  std::vector<int64_t> all(rows);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  for (size_t n : {size_t(0), size_t(1), size_t(17), size_t(1000)}) {
    std::vector<int64_t> slots(all.begin(), all.begin() + n);  // distinct
    std::vector<float> out(n * dim), expected(n * dim), grads(n * dim);
    gather_rows(arena.data(), width, slots.data(), n, dim, out.data());
    gather_rows_reference(arena.data(), width, slots.data(), n, dim, expected.data());
    EXPECT_EQ(out, expected);
    for (auto& g : grads) g = std::uniform_real_distribution<float>(-1, 1)(rng);
    std::vector<float> a = arena, b = arena;
    scatter_add_rows(a.data(), width, slots.data(), n, dim, grads.data());
    scatter_add_rows_reference(b.data(), width, slots.data(), n, dim, grads.data());
    EXPECT_EQ(a, b);
  }
}

}  // namespace
}  // namespace strata::backend::host
