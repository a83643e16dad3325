// params_digest: SHA-256 known answer, and sensitivity to every part it covers.
#include <gtest/gtest.h>

#include "io/params_digest.hpp"

namespace strata::io {
namespace {

TEST(Sha256, KnownAnswer) {
  Sha256 sha;
  sha.update("abc", 3);
  EXPECT_EQ(sha.hex_digest(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(ParamsDigest, ChangesWithAnyNumber) {
  store::RowDump rows;
  rows.width = 2;
  rows.ids = {{0, 5}, {1, 3}};
  rows.values = {1, 2, 3, 4};
  std::vector<float> dense = {0.5f, -1.0f}, state = {0.0f};
  const std::string base = params_digest(dense, state, 3, rows);
  EXPECT_EQ(base, params_digest(dense, state, 3, rows));
  EXPECT_NE(base, params_digest({0.5f, -1.5f}, state, 3, rows));
  EXPECT_NE(base, params_digest(dense, {1.0f}, 3, rows));
  EXPECT_NE(base, params_digest(dense, state, 4, rows));
  store::RowDump other = rows;
  other.values[3] = 4.5f;
  EXPECT_NE(base, params_digest(dense, state, 3, other));
  other = rows;
  other.ids[1].key = 4;
  EXPECT_NE(base, params_digest(dense, state, 3, other));
}

}  // namespace
}  // namespace strata::io
