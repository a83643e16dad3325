// Hashing of raw categorical values into 64-bit row keys. Stable across runs,
// machines and versions: changing it invalidates every checkpoint.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace strata::data {

// Fixed seed of the key hash (never change it).
inline constexpr uint64_t kKeyHashSeed = 0x5354524154414b31ULL;  // "STRATAK1"

// Key of a raw value (its bytes as they appear in the input) of table `table`.
uint64_t feature_key(uint32_t table, std::string_view raw_value);
// Key of an integer-valued category (synthetic data): hashes its 8 little-endian bytes.
uint64_t feature_key(uint32_t table, uint64_t value_id);
// keys[i] = feature_key(table, value_ids[i]) for i < n, in one call (the generator's hot loop).
void feature_keys(uint32_t table, const uint64_t* value_ids, size_t n, uint64_t* keys);

}  // namespace strata::data
