// The names and version of strata's columnar HDF5 dataset, shared by the writer
// (strata convert) and the reader. docs/DATA_HDF5.md describes the layout:
//
//   /                 attrs format, format_version, source, num_rows, num_dense, num_tables, ...
//   /labels           float32 (N), or (N, num_tasks) for multi-task data (root attr num_tasks > 1)
//   /dense            float32 (N, num_dense)   already log(1 + max(x, 0))
//   /tables/<t>       group per table t = 0 .. num_tables-1, attr multi_hot (0 | 1)
//   /tables/<t>/keys     uint64 (N) one-hot, or (nnz_t) multi-hot: feature_key of each value
//   /tables/<t>/offsets  int64 (N + 1), multi-hot only: row r holds keys [offsets[r], offsets[r+1])
//
// Behaviour sequences (source sequences | synthetic_sequences) share the root
// attributes format, format_version and source, and hold jagged events instead:
//   /                  attrs num_users, num_events, side_columns, timestamps, max_seq_len, ...
//   /users/keys        uint64 (U)      feature_key(user_table, user token)
//   /users/offsets     int64 (U + 1)   user u's events are [offsets[u], offsets[u+1]), oldest first
//   /events/items      uint64 (E)      feature_key(item_table, item token)
//   /events/timestamps int64 (E)       when timestamps = 1
//   /events/side       uint64 (E, S)   when S > 0: side column c of each event
#pragma once

#include <cstdint>
#include <string>

namespace strata::data::hdf5_format {

inline constexpr const char* kFormatName = "strata columnar dataset";
// Bumped whenever a reader of the previous version would misread a new file.
inline constexpr int64_t kVersion = 1;

// Root attributes.
inline constexpr const char* kFormatAttr = "format";
inline constexpr const char* kVersionAttr = "format_version";
inline constexpr const char* kSourceAttr = "source";  // criteo | csv | sequences | synthetic_sequences
inline constexpr const char* kNumRowsAttr = "num_rows";
inline constexpr const char* kNumDenseAttr = "num_dense";
inline constexpr const char* kNumTablesAttr = "num_tables";
inline constexpr const char* kNumTasksAttr = "num_tasks";  // optional: absent = 1 label per sample
inline constexpr int64_t kMaxTasks = 16;
inline constexpr const char* kChunkRowsAttr = "chunk_rows";
inline constexpr const char* kCsvColumnsAttr = "csv_columns";      // csv only
inline constexpr const char* kCsvDelimiterAttr = "csv_delimiter";  // csv only
inline constexpr const char* kInputAttr = "input";                 // the text file converted
inline constexpr const char* kInputLinesAttr = "input_lines";
inline constexpr const char* kMalformedLinesAttr = "malformed_lines";
inline constexpr const char* kKeyHashAttr = "key_hash";
inline constexpr const char* kDenseTransformAttr = "dense_transform";
inline constexpr const char* kCompressionAttr = "compression";

// Datasets and groups.
inline constexpr const char* kLabels = "labels";
inline constexpr const char* kDense = "dense";
inline constexpr const char* kTables = "tables";
inline constexpr const char* kKeys = "keys";
inline constexpr const char* kOffsets = "offsets";
inline constexpr const char* kMultiHotAttr = "multi_hot";  // on /tables/<t>

// Behaviour sequences (sequence_hdf5.*).
inline constexpr const char* kNumUsersAttr = "num_users";  // written last: a file without it is incomplete
inline constexpr const char* kNumEventsAttr = "num_events";
inline constexpr const char* kSideColumnsAttr = "side_columns";  // names, comma-separated ("" = none)
inline constexpr const char* kTimestampsAttr = "timestamps";      // 1: /events/timestamps exists
inline constexpr const char* kMaxSeqLenAttr = "max_seq_len";      // data.max_seq_len of the conversion (0 = all)
inline constexpr const char* kUserTableAttr = "user_table";       // feature_key tables of the hashes
inline constexpr const char* kItemTableAttr = "item_table";
inline constexpr const char* kFirstSideTableAttr = "first_side_table";
inline constexpr const char* kUsers = "users";
inline constexpr const char* kEvents = "events";
inline constexpr const char* kItems = "items";
inline constexpr const char* kTimestamps = "timestamps";
inline constexpr const char* kSide = "side";

inline bool is_sequence_source(const std::string& source) {
  return source == "sequences" || source == "synthetic_sequences";
}

inline std::string table_group(int table) { return std::to_string(table); }

// Limits a reader enforces before it allocates anything sized by the file.
inline constexpr int64_t kMaxColumns = int64_t(1) << 20;  // dense features or tables
inline constexpr int64_t kMaxChunkRows = int64_t(1) << 24;

}  // namespace strata::data::hdf5_format
