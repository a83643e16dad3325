// Generic delimited text: a column spec (data.csv_columns) says which columns are
// the label, dense numbers, single categoricals, multi-hot lists or ignored. No
// quoting: a delimiter inside a field is not supported.
#pragma once

#include <string>
#include <vector>

#include "data/text_format.hpp"

namespace strata::data {

// One column of the input, expanded from the spec.
struct CsvColumn {
  enum class Kind { kLabel, kDense, kCategorical, kMultiHot, kSkip };
  Kind kind = Kind::kSkip;
  int target = 0;      // dense index (kDense) or table index (kCategorical, kMultiHot)
  char separator = 0;  // between the values of a multi-hot field
};

struct CsvSchema {
  char delimiter = ',';
  std::vector<CsvColumn> columns;  // in file order
  int num_dense = 0;
  int num_tables = 0;
};

// The grammar of data.csv_columns, for error messages.
inline constexpr const char* kCsvColumnsGrammar =
    "a comma list of column groups in file order: label (exactly once), dense:N, cat:N, "
    "multi:N:SEP (SEP one character, not ','), skip:N; e.g. data.csv_columns=label,dense:13,cat:26";

// Parses data.csv_columns and data.csv_delimiter; throws strata::Error naming the key.
CsvSchema parse_csv_schema(const DataOptions& options);

class CsvParser final : public LineParser {
 public:
  explicit CsvParser(CsvSchema schema);
  int num_dense() const override { return schema_.num_dense; }
  int num_tables() const override { return schema_.num_tables; }
  // Every declared column must be present: a line with fewer fields is malformed.
  bool parse(std::string_view line, Batch& batch, LineError& error) override;

 private:
  bool missing_columns(LineError& error, size_t present) const;

  CsvSchema schema_;
  std::vector<uint64_t> empty_key_;  // (num_tables) key of a missing categorical
};

}  // namespace strata::data
