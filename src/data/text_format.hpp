// LineParser: turns one line of a text input (Criteo TSV or a generic CSV) into one
// sample of a Batch. The shared reader (text_reader.cpp) owns files, shards, line
// numbers and error reporting; a format owns only the meaning of the fields.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "config/options.hpp"
#include "data/batch.hpp"

namespace strata::data {

// Why a line is malformed: 1-based column (0 = the line as a whole) and a reason
// that names the field and quotes (an excerpt of) its text.
struct LineError {
  int column = 0;
  std::string reason;
};

class LineParser {
 public:
  virtual ~LineParser() = default;
  virtual int num_dense() const = 0;
  virtual int num_tables() const = 0;
  virtual int num_tasks() const { return 1; }  // labels per sample
  // Appends the sample of `line` (no newline, no trailing CR) to `batch`: its labels,
  // num_dense() dense values, and its keys to each table's `keys`. The caller closes
  // the bags (offsets) on success and rolls back the appended values on failure.
  virtual bool parse(std::string_view line, Batch& batch, LineError& error) = 0;
};

// The parser of options.source ("criteo" or "csv").
std::unique_ptr<LineParser> make_line_parser(const DataOptions& options);

// Dense transform shared by every format and the synthetic generator: log(1 + max(x, 0)).
inline float dense_transform(double x) { return x > 0.0 ? float(std::log1p(x)) : 0.0f; }

// `text` for a log line: at most 40 characters, non-printable bytes as \xNN.
std::string quote_field(std::string_view text);

}  // namespace strata::data
