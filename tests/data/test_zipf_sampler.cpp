// ZipfSampler against the exact Zipf law: the rank 1 / rank 2 ratio, the log-log
// slope, the head/tail split, bucket frequencies, and huge or degenerate vocabularies.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/error.hpp"
#include "common/rng.hpp"
#include "data/zipf_sampler.hpp"

namespace strata::data {
namespace {

std::vector<int64_t> histogram(uint64_t n, double s, int64_t draws, uint64_t seed) {
  ZipfSampler zipf(n, s);
  CounterRng rng(seed);
  std::vector<int64_t> counts(n, 0);
  for (int64_t i = 0; i < draws; ++i) {
    const uint64_t r = zipf(rng);
    EXPECT_LT(r, n);
    ++counts[r];
  }
  return counts;
}

// Exact P(rank in [lo, hi)) for rank r having weight (r + 1)^-s.
double mass(uint64_t n, double s, uint64_t lo, uint64_t hi) {
  double total = 0.0, part = 0.0;
  for (uint64_t k = n; k >= 1; --k) {
    const double w = std::pow(double(k), -s);
    total += w;
    if (k - 1 >= lo && k - 1 < hi) part += w;
  }
  return part / total;
}

TEST(ZipfSampler, RankRatioAndSlope) {
  const uint64_t n = 100000;
  for (double s : {0.8, 1.05, 1.5}) {
    const int64_t draws = 4000000;
    const std::vector<int64_t> counts = histogram(n, s, draws, 17);
    const double ratio = double(counts[0]) / double(counts[1]);
    EXPECT_NEAR(ratio, std::pow(2.0, s), 0.03 * std::pow(2.0, s)) << "s = " << s;
    // Least-squares slope of log count against log rank over ranks 1..300.
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    const int m = 300;
    for (int r = 0; r < m; ++r) {
      const double x = std::log(double(r + 1));
      const double y = std::log(double(counts[size_t(r)]));
      sx += x;
      sy += y;
      sxx += x * x;
      sxy += x * y;
    }
    const double slope = (m * sxy - sx * sy) / (m * sxx - sx * sx);
    EXPECT_NEAR(slope, -s, 0.03) << "s = " << s;
  }
}

TEST(ZipfSampler, BucketsMatchTheExactLawAcrossHeadAndTail) {
  // Buckets straddle the alias head (first 16384 ranks) and the rejection-inversion tail.
  for (auto [n, s] : {std::pair<uint64_t, double>{100000, 1.05},
                      {100000, 1.0},
                      {100000, 0.5},
                      {40000, 1.2},
                      {20000, 2.0},
                      {50, 1.3},
                      {7, 0.0}}) {
    const int64_t draws = 2000000;
    const std::vector<int64_t> counts = histogram(n, s, draws, 99);
    std::vector<uint64_t> edges = {0, 1, 2, 5, 16, 100, 1000, 16383, 16384, 16385, 20000, 40000, 70000, n};
    for (size_t b = 0; b + 1 < edges.size(); ++b) {
      const uint64_t lo = std::min(edges[b], n), hi = std::min(edges[b + 1], n);
      if (lo >= hi) continue;
      int64_t got = 0;
      for (uint64_t r = lo; r < hi; ++r) got += counts[r];
      const double p = mass(n, s, lo, hi);
      const double expected = p * double(draws);
      const double sigma = std::sqrt(expected * (1 - p)) + 1.0;
      EXPECT_NEAR(double(got), expected, 5 * sigma)
          << "n " << n << " s " << s << " ranks [" << lo << ", " << hi << ")";
    }
  }
}

TEST(ZipfSampler, HugeAndDegenerateVocabularies) {
  {
    const uint64_t n = 1000000000;
    ZipfSampler zipf(n, 1.05);
    CounterRng rng(5);
    int64_t beyond_million = 0, zeros = 0;
    const int draws = 1000000;
    for (int i = 0; i < draws; ++i) {
      const uint64_t r = zipf(rng);
      ASSERT_LT(r, n);
      beyond_million += r >= 1000000;
      zeros += r == 0;
    }
    // P(rank >= 1e6) = 1 - H(1e6) / H(1e9) ~ 0.3 for s = 1.05: the tail is alive.
    EXPECT_GT(beyond_million, draws / 5);
    EXPECT_LT(beyond_million, draws / 2);
    EXPECT_GT(zeros, draws / 40);
  }
  {
    ZipfSampler one(1, 1.05);
    CounterRng rng(1);
    for (int i = 0; i < 100; ++i) EXPECT_EQ(one(rng), 0u);
  }
  {
    ZipfSampler uniform(1000, 0.0);
    CounterRng rng(2);
    double sum = 0;
    for (int i = 0; i < 100000; ++i) sum += double(uniform(rng));
    EXPECT_NEAR(sum / 100000, 499.5, 3.0);
  }
  EXPECT_THROW(ZipfSampler(0, 1.0), Error);
  EXPECT_THROW(ZipfSampler(10, -0.5), Error);
  EXPECT_THROW(ZipfSampler(10, std::nan("")), Error);
}

}  // namespace
}  // namespace strata::data
