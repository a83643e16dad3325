// MetricsWriter: metrics.jsonl (one JSON object per line, flushed per line so a
// killed run keeps what it measured) and summary.json in the output directory.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace strata::io {

class MetricsWriter {
 public:
  // Creates `dir` (and parents); throws strata::Error naming it when that fails.
  explicit MetricsWriter(const std::string& dir);
  void append(const nlohmann::json& line);
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::ofstream metrics_;
};

// Writes dir/summary.json atomically.
void write_summary(const std::string& dir, const nlohmann::json& summary);

// Writes `content` to path atomically (temporary file + rename).
void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace strata::io
