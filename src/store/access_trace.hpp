// Key-access traces (strata trace): for every round, the unique rows each L1
// owner needs, in the order producers planned them. The cache simulator in
// bench/ replays them. Binary, little-endian:
//   header: "STRATRC1" (8 bytes)
//   record: round (i64), owner (i32), count (u32), then count x {table u32, pad u32, key u64}
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "store/row_key.hpp"

namespace strata::store {

class AccessTraceWriter {
 public:
  explicit AccessTraceWriter(const std::string& path);  // throws strata::Error naming the path
  ~AccessTraceWriter();
  AccessTraceWriter(const AccessTraceWriter&) = delete;
  AccessTraceWriter& operator=(const AccessTraceWriter&) = delete;
  void write(int64_t round, int32_t owner, const std::vector<RowId>& rows);

 private:
  std::FILE* file_;
  std::string path_;
};

struct AccessTraceRecord {
  int64_t round = 0;
  int32_t owner = 0;
  std::vector<RowId> rows;
};

// Reads a whole trace; throws strata::Error on a truncated or foreign file.
std::vector<AccessTraceRecord> read_access_trace(const std::string& path);

}  // namespace strata::store
