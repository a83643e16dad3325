// ZipfSampler: ranks 0..n-1 with P(rank r) proportional to (r + 1)^-s, for any n up
// to 2^53 in O(1) memory. The popular head (the first kHeadSize ranks, most of the
// draws) comes from a fixed-size alias table, because that is 5x faster than the
// transcendentals of inversion; the long tail from rejection-inversion (Hoermann and
// Derflinger 1996, as in Apache Commons' RejectionInversionZipfSampler), which needs
// no table at all. Head probabilities are exact to 2^-32.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/error.hpp"

namespace strata::data {

class ZipfSampler {
 public:
  static constexpr uint64_t kHeadSize = 16384;  // alias-table ranks (128 KB, stays in L2)

  ZipfSampler(uint64_t n, double s) : n_(n), s_(s) {
    if (n == 0) throw Error("Zipf sampler over an empty vocabulary", "use a vocab size >= 1");
    if (!(s >= 0.0) || !std::isfinite(s)) {
      throw Error("Zipf exponent " + std::to_string(s) + " is not >= 0",
                  "set data.zipf_exponent to 0 (uniform) or a positive value such as 1.05");
    }
    if (s == 0.0 || n == 1) return;  // uniform: no tables needed
    const uint64_t head = std::min(n, kHeadSize);
    build_alias(head);
    if (n > head) {
      // Mixture weight of the head: its exact mass against the tail's mass, the
      // latter by Euler-Maclaurin (relative error ~1e-12 from rank 4097 on).
      double head_mass = 0.0;
      for (uint64_t k = head; k >= 1; --k) head_mass += h(double(k));  // small terms first
      const double tail_mass = tail_sum(double(head + 1), double(n));
      const double head_probability = head_mass / (head_mass + tail_mass);
      head_threshold_ = head_probability >= 1.0 ? ~uint64_t(0) : uint64_t(std::ldexp(head_probability, 64));
      // Rejection-inversion over ranks [a, n] (1-based), a = head + 1.
      tail_first_ = double(head + 1);
      h_upper_ = H(double(n) + 0.5);
      h_lower_ = H(tail_first_ + 0.5) - h(tail_first_);
      squeeze_ = (tail_first_ + 1.0) - H_inverse(H(tail_first_ + 1.5) - h(tail_first_ + 1.0));
    } else {
      head_threshold_ = ~uint64_t(0);
    }
  }

  uint64_t size() const { return n_; }
  double exponent() const { return s_; }

  // A rank in [0, n); `rng.next()` must return uniform 64-bit words and
  // `rng.uniform()` uniform doubles in [0, 1) (CounterRng does).
  template <typename Rng>
  uint64_t operator()(Rng& rng) const {
    const uint64_t r = rng.next();
    if (head_.empty()) return scale_to(r, n_);  // s = 0 or n = 1: uniform
    if (r < head_threshold_) return head_sample(rng.next());
    return tail_sample(rng);
  }

 private:
  // P(rank k), k 1-based, unnormalised.
  double h(double k) const { return std::exp(-s_ * std::log(k)); }
  // H(x) = integral of h from 1 to x (any primitive works), stable near s = 1.
  double H(double x) const {
    const double log_x = std::log(x);
    return expm1_over((1.0 - s_) * log_x) * log_x;
  }
  double H_inverse(double y) const {
    double t = y * (1.0 - s_);
    if (t < -1.0) t = -1.0;  // rounding guard, as in the reference implementation
    return std::exp(log1p_over(t) * y);
  }
  static double expm1_over(double x) {  // expm1(x) / x
    return std::abs(x) > 1e-8 ? std::expm1(x) / x : 1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + x * 0.25));
  }
  static double log1p_over(double x) {  // log1p(x) / x
    return std::abs(x) > 1e-8 ? std::log1p(x) / x : 1.0 - x * (0.5 - x * (1.0 / 3.0 - x * 0.25));
  }
  // sum_{k=a}^{b} k^-s by Euler-Maclaurin (integral, end points, first derivative terms).
  double tail_sum(double a, double b) const {
    const double integral = H(b) - H(a);
    const double ends = 0.5 * (h(a) + h(b));
    const double d1 = (-s_ * h(b) / b) - (-s_ * h(a) / a);
    const double d3 =
        (-s_ * (s_ + 1) * (s_ + 2) * h(b) / (b * b * b)) - (-s_ * (s_ + 1) * (s_ + 2) * h(a) / (a * a * a));
    return integral + ends + d1 / 12.0 - d3 / 720.0;
  }

  // floor(r / 2^64 * n) without division or rounding bias worth mentioning.
  static uint64_t scale_to(uint64_t r, uint64_t n) {
    __extension__ using u128 = unsigned __int128;
    return uint64_t((u128(r) * n) >> 64);
  }

  void build_alias(uint64_t k) {
    // Vose's alias method; deterministic for a given (k, s).
    std::vector<double> p(k);
    double total = 0.0;
    for (uint64_t i = k; i >= 1; --i) total += h(double(i));
    for (uint64_t i = 0; i < k; ++i) p[i] = h(double(i + 1)) * double(k) / total;
    std::vector<double> keep(k, 1.0);
    std::vector<uint32_t> alias(k);
    for (uint64_t i = 0; i < k; ++i) alias[i] = uint32_t(i);
    std::vector<uint32_t> small, large;
    for (uint64_t i = 0; i < k; ++i) (p[i] < 1.0 ? small : large).push_back(uint32_t(i));
    while (!small.empty() && !large.empty()) {
      const uint32_t lo = small.back();
      small.pop_back();
      const uint32_t hi = large.back();
      keep[lo] = p[lo];
      alias[lo] = hi;
      p[hi] = (p[hi] + p[lo]) - 1.0;
      if (p[hi] < 1.0) {
        large.pop_back();
        small.push_back(hi);
      }
    }
    // Leftovers keep themselves (their p is 1 up to rounding).
    head_.resize(k);
    for (uint64_t i = 0; i < k; ++i) {
      const double scaled = std::ldexp(keep[i], 32);
      head_[i].keep = scaled >= 4294967295.0 ? 0xffffffffu : uint32_t(scaled);
      head_[i].alias = alias[i];
    }
  }

  uint64_t head_sample(uint64_t r) const {
    // Top 32 bits pick the column, the low 32 bits decide between it and its alias.
    const uint64_t i = ((r >> 32) * head_.size()) >> 32;
    const AliasEntry& entry = head_[i];
    const uint32_t frac = uint32_t(r);
    return frac < entry.keep ? i : entry.alias;  // keep = 2^32 - 1 stands for 1 (2^-32 off)
  }

  template <typename Rng>
  uint64_t tail_sample(Rng& rng) const {
    const double last = double(n_);
    while (true) {
      const double u = h_upper_ + rng.uniform() * (h_lower_ - h_upper_);
      const double x = H_inverse(u);
      double k = std::floor(x + 0.5);
      if (k < tail_first_) k = tail_first_;
      if (k > last) k = last;
      if (k - x <= squeeze_ || u >= H(k + 0.5) - h(k)) return uint64_t(k) - 1;
    }
  }

  uint64_t n_;
  double s_;
  struct AliasEntry {
    uint32_t keep;   // P(keep this column) * 2^32
    uint32_t alias;  // the column's alias
  };
  std::vector<AliasEntry> head_;  // (min(n, kHeadSize))
  uint64_t head_threshold_ = 0;   // P(head) * 2^64
  double tail_first_ = 0.0, h_upper_ = 0.0, h_lower_ = 0.0, squeeze_ = 0.0;
};

}  // namespace strata::data
