// Fuzz target: one line of Criteo TSV and of CSV (a schema with every column kind:
// label, dense, single and multi-hot categoricals, a sequence with its candidate).
#include <cstdint>
#include <memory>
#include <string_view>

#include "common/error.hpp"
#include "config/options.hpp"
#include "data/batch.hpp"
#include "data/text_format.hpp"

namespace {

std::unique_ptr<strata::data::LineParser> parser(const char* source) {
  strata::DataOptions options;
  options.source = source;
  if (options.source == "csv") {
    options.csv_delimiter = ";";
    options.csv_columns = "label,dense:2,cat:1,multi:1:|,seq:|,cand,skip:1";
    options.max_seq_len = 4;
  }
  return strata::data::make_line_parser(options);
}

void parse(strata::data::LineParser& p, std::string_view line) {
  strata::data::Batch batch;
  batch.reset(p.num_dense(), p.num_tables());
  strata::data::LineError error;
  try {
    p.parse(line, batch, error);
  } catch (const strata::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto criteo = parser("criteo");
  static const auto csv = parser("csv");
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  parse(*criteo, line);
  parse(*csv, line);
  return 0;
}
