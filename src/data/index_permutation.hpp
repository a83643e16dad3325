// IndexPermutation: a keyed bijection of [0, n), so a stream can visit its items in
// a pseudo-random order and still be random access (item i of the order is computed,
// not looked up). A 4-round Feistel network on the smallest even-width power of two
// >= n, walked until it lands inside [0, n) (about 4 steps at most on average).
#pragma once

#include <cstdint>

#include "common/rng.hpp"

namespace strata::data {

class IndexPermutation {
 public:
  IndexPermutation(uint64_t n, uint64_t key) : n_(n), key_(key) {
    int bits = 2;
    while (bits < 62 && (uint64_t(1) << bits) < n) bits += 2;
    half_ = bits / 2;
    mask_ = (uint64_t(1) << half_) - 1;
  }

  uint64_t operator()(uint64_t i) const {
    if (n_ <= 1) return i;
    uint64_t x = i;
    do x = rounds(x);
    while (x >= n_);
    return x;
  }

 private:
  uint64_t rounds(uint64_t x) const {
    uint64_t left = x >> half_, right = x & mask_;
    for (uint64_t r = 0; r < 4; ++r) {
      const uint64_t next = left ^ (mix64(key_, r, right) & mask_);
      left = right;
      right = next;
    }
    return (left << half_) | right;
  }

  uint64_t n_, key_;
  int half_ = 1;
  uint64_t mask_ = 1;
};

}  // namespace strata::data
