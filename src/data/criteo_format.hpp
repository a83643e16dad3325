// CriteoParser: the Criteo display-ads TSV line, label <TAB> I1..I13 <TAB> C1..C26.
// Empty fields are missing values (dense -> 0, categorical -> the key of the empty
// string); lines with stripped trailing fields are padded with empty ones.
#pragma once

#include "data/text_format.hpp"

namespace strata::data {

class CriteoParser final : public LineParser {
 public:
  static constexpr int kNumDense = 13;
  static constexpr int kNumTables = 26;
  static constexpr int kNumFields = 1 + kNumDense + kNumTables;

  CriteoParser();
  int num_dense() const override { return kNumDense; }
  int num_tables() const override { return kNumTables; }
  bool parse(std::string_view line, Batch& batch, LineError& error) override;

 private:
  float small_log1p_[1024];         // dense_transform of the common small counts
  uint64_t empty_key_[kNumTables];  // key of a missing categorical, per table
};

}  // namespace strata::data
