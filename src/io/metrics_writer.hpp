// MetricsWriter: metrics.jsonl (one JSON object per line, flushed per line so a
// killed run keeps what it measured) and summary.json in the output directory.
#pragma once

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace strata::io {

class MetricsWriter {
 public:
  // Creates `dir` (and parents); throws strata::Error naming it when that fails.
  explicit MetricsWriter(const std::string& dir);
  // Appends one line and flushes it. A failed write (a full disk, an I/O error) does
  // not stop training: the first one is logged as a warning naming the file and the
  // reason, every one is counted, and the next line tries again.
  void append(const nlohmann::json& line);
  const std::string& dir() const { return dir_; }
  int64_t failed_writes() const { return failed_writes_; }
  const std::string& first_failure() const { return first_failure_; }

 private:
  std::string dir_;
  std::string path_;
  std::ofstream metrics_;
  int64_t failed_writes_ = 0;
  std::string first_failure_;
};

// Writes dir/summary.json atomically.
void write_summary(const std::string& dir, const nlohmann::json& summary);

// Writes `content` to path atomically (temporary file + rename).
void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace strata::io
