// The byte packer of every MPI message: round trips, alignment of arrays
// (views into a received buffer must be aligned for their type), and that a
// truncated or lying buffer is an error, never an out-of-bounds read.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "comm/wire.hpp"
#include "common/error.hpp"

namespace strata::comm {
namespace {

struct Pair {
  uint32_t a;
  uint64_t b;
};

std::vector<char> sample_message() {
  std::vector<char> buffer;
  ByteWriter w(buffer);
  w.put<uint8_t>(7);
  w.put_vector(std::vector<double>{1.5, -2.25});
  w.put<uint16_t>(9);
  w.put_vector(std::vector<Pair>{{1, 2}, {3, 4}, {5, 6}});
  w.put_string("héllo");
  w.put_vector(std::vector<float>{});
  return buffer;
}

TEST(Wire, RoundTripsScalarsArraysAndStrings) {
  const std::vector<char> buffer = sample_message();
  ByteReader r(buffer.data(), buffer.size());
  EXPECT_EQ(r.get<uint8_t>(), 7);
  std::vector<double> d;
  r.get_vector(d);
  EXPECT_EQ(d, (std::vector<double>{1.5, -2.25}));
  EXPECT_EQ(r.get<uint16_t>(), 9);
  const Span<Pair> pairs = r.view_array<Pair>();
  ASSERT_EQ(pairs.size, 3u);
  EXPECT_EQ(pairs[2].a, 5u);
  EXPECT_EQ(pairs[2].b, 6u);
  EXPECT_EQ(r.get_string(), "héllo");
  EXPECT_TRUE(r.view_array<float>().empty());
  r.expect_end();
}

TEST(Wire, ArraysStartAlignedForTheirType) {
  const std::vector<char> buffer = sample_message();
  ByteReader r(buffer.data(), buffer.size());
  r.get<uint8_t>();
  const Span<double> d = r.view_array<double>();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(d.data) % alignof(double), 0u);
  r.get<uint16_t>();
  const Span<Pair> p = r.view_array<Pair>();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p.data) % alignof(Pair), 0u);
}

TEST(Wire, UninitializedArraysAreFilledInPlace) {
  std::vector<char> buffer;
  ByteWriter w(buffer);
  w.put<uint8_t>(1);
  float* values = w.put_array_uninitialized<float>(4);
  for (int i = 0; i < 4; ++i) values[i] = float(i) * 0.5f;
  ByteReader r(buffer.data(), buffer.size());
  r.get<uint8_t>();
  const Span<float> view = r.view_array<float>();
  ASSERT_EQ(view.size, 4u);
  EXPECT_EQ(view[3], 1.5f);
}

TEST(Wire, EveryTruncationIsAnError) {
  const std::vector<char> buffer = sample_message();
  for (size_t n = 0; n < buffer.size(); ++n) {
    ByteReader r(buffer.data(), n);
    EXPECT_THROW(
        {
          r.get<uint8_t>();
          std::vector<double> d;
          r.get_vector(d);
          r.get<uint16_t>();
          r.view_array<Pair>();
          r.get_string();
          r.view_array<float>();
          r.expect_end();
        },
        Error)
        << "accepted a buffer cut at " << n;
  }
}

TEST(Wire, ACountLargerThanTheBufferIsAnError) {
  std::vector<char> buffer;
  ByteWriter w(buffer);
  w.put<uint64_t>(uint64_t(1) << 60);  // what a count of 2^60 floats would look like
  ByteReader r(buffer.data(), buffer.size(), "test message");
  try {
    r.view_array<float>();
    FAIL() << "accepted an absurd count";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("test message"), std::string::npos) << e.what();
  }
}

TEST(Wire, RandomGarbageNeverReadsOutOfBounds) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<char> garbage(rng() % 64);
    for (char& c : garbage) c = static_cast<char>(rng());
    ByteReader r(garbage.data(), garbage.size());
    try {
      while (true) {
        r.view_array<uint32_t>();
        r.get<uint8_t>();
      }
    } catch (const Error&) {
    }
  }
}

}  // namespace
}  // namespace strata::comm
