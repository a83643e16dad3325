// feature_key: fixed known values (a change would invalidate every checkpoint),
// table separation and the batch form.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>

#include "data/feature_hash.hpp"

namespace strata::data {
namespace {

TEST(FeatureHash, KnownValuesNeverChange) {
  // Computed once from the implementation; a mismatch means every stored row key changed.
  EXPECT_EQ(feature_key(0, std::string_view("68fd1e64")), 0xf636b67a73bc9cdaULL);
  EXPECT_EQ(feature_key(25, std::string_view("68fd1e64")), 0x7fc4729b7aebc009ULL);
  EXPECT_EQ(feature_key(3, std::string_view()), 0x84d291c562005c17ULL);
  EXPECT_EQ(feature_key(0, uint64_t(0)), 0x842b813e79b321a5ULL);
  EXPECT_EQ(feature_key(7, uint64_t(123456789)), 0x0211cebd34ff63b6ULL);
  EXPECT_EQ(feature_key(5000, uint64_t(42)), 0x79d5f456bf10de9fULL);
}

TEST(FeatureHash, TablesAndValuesAreSeparated) {
  std::set<uint64_t> keys;
  for (uint32_t t = 0; t < 30; ++t) {
    for (uint64_t v = 0; v < 100; ++v) keys.insert(feature_key(t, v));
    keys.insert(feature_key(t, std::string_view("")));
  }
  EXPECT_EQ(keys.size(), 30u * 101u);
  // The id form hashes the 8 little-endian bytes: it differs from hashing the text.
  EXPECT_NE(feature_key(1, uint64_t(5)), feature_key(1, std::string_view("5")));
}

TEST(FeatureHash, BatchFormMatchesSingleCalls) {
  std::vector<uint64_t> ids = {0, 1, 2, 99999, ~uint64_t(0), 1ull << 40};
  std::vector<uint64_t> keys(ids.size());
  for (uint32_t table : {0u, 3u, 2000u}) {
    feature_keys(table, ids.data(), ids.size(), keys.data());
    for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(keys[i], feature_key(table, ids[i]));
  }
}

}  // namespace
}  // namespace strata::data
