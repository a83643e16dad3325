// The names and version of strata's columnar HDF5 dataset, shared by the writer
// (strata convert) and the reader. docs/DATA_HDF5.md describes the layout:
//
//   /                 attrs format, format_version, source, num_rows, num_dense, num_tables, ...
//   /labels           float32 (N)
//   /dense            float32 (N, num_dense)   already log(1 + max(x, 0))
//   /tables/<t>       group per table t = 0 .. num_tables-1, attr multi_hot (0 | 1)
//   /tables/<t>/keys     uint64 (N) one-hot, or (nnz_t) multi-hot: feature_key of each value
//   /tables/<t>/offsets  int64 (N + 1), multi-hot only: row r holds keys [offsets[r], offsets[r+1])
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
inline constexpr const char* kSourceAttr = "source";  // criteo | csv
inline constexpr const char* kNumRowsAttr = "num_rows";
inline constexpr const char* kNumDenseAttr = "num_dense";
inline constexpr const char* kNumTablesAttr = "num_tables";
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

inline std::string table_group(int table) { return std::to_string(table); }

// Limits a reader enforces before it allocates anything sized by the file.
inline constexpr int64_t kMaxColumns = int64_t(1) << 20;  // dense features or tables
inline constexpr int64_t kMaxChunkRows = int64_t(1) << 24;

}  // namespace strata::data::hdf5_format
