// Counter-based random numbers: every value is a pure function of (seed, counters),
// so data and initial rows do not depend on which rank or in what order they are made.
#pragma once

#include <cmath>
#include <cstdint>

namespace strata {

// splitmix64 finaliser: a bijective mix of 64 bits with full avalanche.
inline constexpr uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline constexpr uint64_t mix64(uint64_t a, uint64_t b) { return mix64(a ^ mix64(b)); }
inline constexpr uint64_t mix64(uint64_t a, uint64_t b, uint64_t c) { return mix64(mix64(a, b), c); }

// Uniform in [0, 1) from the top 53 bits.
inline double to_unit_double(uint64_t bits) { return double(bits >> 11) * 0x1.0p-53; }
// Uniform in [0, 1) from the top 24 bits, exactly representable as float.
inline float to_unit_float(uint64_t bits) { return float(bits >> 40) * 0x1.0p-24f; }

// A small sequential generator seeded from a counter-derived state.
class CounterRng {
 public:
  explicit CounterRng(uint64_t state) : state_(state) {}
  uint64_t next() { return mix64(state_++); }
  double uniform() { return to_unit_double(next()); }
  // Standard normal by Box-Muller (one of the pair; simplicity beats speed here).
  double normal() {
    double u1 = uniform();
    double u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t state_;
};

}  // namespace strata
