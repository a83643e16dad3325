// feature_key: the one hash from raw categorical values to row keys (xxHash3,
// seeded per table so equal text in two tables gives unrelated keys).
#include "data/feature_hash.hpp"

#include <array>

#define XXH_INLINE_ALL  // the inputs are a few bytes: inlining beats the call into libxxhash
#include <xxhash.h>

#include "common/rng.hpp"

namespace strata::data {

namespace {

constexpr uint32_t kCachedSeeds = 1024;

constexpr std::array<uint64_t, kCachedSeeds> make_table_seeds() {
  std::array<uint64_t, kCachedSeeds> seeds{};
  for (uint32_t t = 0; t < kCachedSeeds; ++t) seeds[t] = mix64(kKeyHashSeed, t);
  return seeds;
}

// The per-table seeds of the first tables, computed at compile time: the seed
// derivation costs as much as the hash of an 8-byte value itself.
constexpr std::array<uint64_t, kCachedSeeds> kTableSeeds = make_table_seeds();

inline uint64_t table_seed(uint32_t table) {
  return table < kCachedSeeds ? kTableSeeds[table] : mix64(kKeyHashSeed, table);
}

}  // namespace

uint64_t feature_key(uint32_t table, std::string_view raw_value) {
  return XXH3_64bits_withSeed(raw_value.data(), raw_value.size(), table_seed(table));
}

namespace {
inline uint64_t value_key(uint64_t seed, uint64_t value_id) {
  unsigned char bytes[8];  // little-endian whatever the host
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(value_id >> (8 * i));
  return XXH3_64bits_withSeed(bytes, sizeof(bytes), seed);
}
}  // namespace

uint64_t feature_key(uint32_t table, uint64_t value_id) { return value_key(table_seed(table), value_id); }

void feature_keys(uint32_t table, const uint64_t* value_ids, size_t n, uint64_t* keys) {
  const uint64_t seed = table_seed(table);
  for (size_t i = 0; i < n; ++i) keys[i] = value_key(seed, value_ids[i]);
}

}  // namespace strata::data
