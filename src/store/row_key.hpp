// Row identity and placement. A row is (table, key); placement functions decide
// which server shard holds it and which trainer owns it. The two use different
// bits of one mix so that shards and owners are independent.
#pragma once

#include <cstdint>

#include "common/rng.hpp"

namespace strata::store {

struct RowId {
  uint32_t table = 0;
  uint64_t key = 0;
  bool operator<(const RowId& other) const {
    return table != other.table ? table < other.table : key < other.key;
  }
  bool operator==(const RowId& other) const { return table == other.table && key == other.key; }
};

inline uint64_t placement_hash(uint32_t table, uint64_t key) { return mix64(key, table); }
inline int server_of(uint32_t table, uint64_t key, int servers) {
  return static_cast<int>((placement_hash(table, key) & 0xffffffffULL) % static_cast<uint64_t>(servers));
}
inline int owner_of(uint32_t table, uint64_t key, int trainers) {
  return static_cast<int>((placement_hash(table, key) >> 32) % static_cast<uint64_t>(trainers));
}

}  // namespace strata::store
