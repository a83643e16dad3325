// CriteoParser: the Criteo display-ads TSV line, label <TAB> I1..I13 <TAB> C1..C26.
// Empty fields are missing values (dense -> 0, categorical -> the key of the empty
// string); lines with stripped trailing fields are padded with empty ones. Strict
// (data.strict): only trailing categoricals may be stripped; a line that ends
// before I13 (a label alone, say) is malformed.
#pragma once

#include "data/text_format.hpp"

namespace strata::data {

class CriteoParser final : public LineParser {
 public:
  static constexpr int kNumDense = 13;
  static constexpr int kNumTables = 26;
  static constexpr int kNumFields = 1 + kNumDense + kNumTables;

  explicit CriteoParser(bool strict = false);
  int num_dense() const override { return kNumDense; }
  int num_tables() const override { return kNumTables; }
  bool parse(std::string_view line, Batch& batch, LineError& error) override;

 private:
  bool strict_;                     // the integer fields I1..I13 must all be present
  float small_log1p_[1024];         // dense_transform of the common small counts
  uint64_t empty_key_[kNumTables];  // key of a missing categorical, per table
};

}  // namespace strata::data
