// Generic delimited text: a column spec (data.csv_columns) says which columns are
// the label, dense numbers, single categoricals, multi-hot lists, behaviour
// sequences with their candidates, or ignored. No quoting: a delimiter inside a
// field is not supported.
//
// Sequences (DIN's click-log layouts, e.g. hist_items;hist_cates;item;cate;label as
// seq:|,seq:|,cand,cand,label): each seq:SEP column is an ordered list of ids and
// opens a table; the i-th cand column is the candidate of the i-th seq column. The
// table's bag is the history (oldest first, at most data.max_seq_len most recent),
// then the candidate last: the target-last bag model.kind = din reads, history and
// candidate hashed into one key space.
#pragma once

#include <string>
#include <vector>

#include "data/text_format.hpp"

namespace strata::data {

// One column of the input, expanded from the spec.
struct CsvColumn {
  enum class Kind { kLabel, kDense, kCategorical, kMultiHot, kSkip, kSequence, kCandidate };
  Kind kind = Kind::kSkip;
  int target = 0;      // dense index (kDense) or table index (the others but kLabel, kSkip)
  char separator = 0;  // between the values of a multi-hot or sequence field
  int sequence = -1;   // kSequence, kCandidate: which seq column (0-based) it belongs to
};

struct CsvSchema {
  char delimiter = ',';
  std::vector<CsvColumn> columns;  // in file order
  int num_dense = 0;
  int num_tables = 0;
  int num_tasks = 0;              // label columns: one per task, in file order
  int num_sequences = 0;          // seq:SEP columns (each with one cand column)
  std::vector<int> sequence_tables;  // (num_sequences) table of each
  int64_t max_history = 0;        // data.max_seq_len: most recent history ids kept (0 = all)
};

// The grammar of data.csv_columns, for error messages.
inline constexpr const char* kCsvColumnsGrammar =
    "a comma list of column groups in file order: label (once, or once per task for model.kind = mmoe | ple), dense:N, cat:N, "
    "multi:N:SEP (SEP one character, not ','), seq:SEP (an ordered id list; the i-th cand column is "
    "the candidate of the i-th seq), cand, skip:N; e.g. data.csv_columns=label,dense:13,cat:26";

// Parses data.csv_columns and data.csv_delimiter; throws strata::Error naming the key.
CsvSchema parse_csv_schema(const DataOptions& options);

class CsvParser final : public LineParser {
 public:
  explicit CsvParser(CsvSchema schema);
  int num_dense() const override { return schema_.num_dense; }
  int num_tables() const override { return schema_.num_tables; }
  int num_tasks() const override { return schema_.num_tasks; }
  // Every declared column must be present: a line with fewer fields is malformed.
  bool parse(std::string_view line, Batch& batch, LineError& error) override;

 private:
  bool missing_columns(LineError& error, size_t present) const;

  CsvSchema schema_;
  std::vector<uint64_t> empty_key_;  // (num_tables) key of a missing categorical
  std::vector<uint64_t> candidates_;  // (num_sequences) this line's candidate keys
};

}  // namespace strata::data
