#include "io/metrics_writer.hpp"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/error.hpp"

namespace strata::io {

MetricsWriter::MetricsWriter(const std::string& dir) : dir_(dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    throw Error("cannot create output directory '" + dir + "': " + ec.message(),
                "set output.dir to a writable directory");
  }
  path_ = dir + "/metrics.jsonl";
  metrics_.open(path_, std::ios::out | std::ios::trunc);
  if (!metrics_) throw Error("cannot write '" + path_ + "'", "set output.dir to a writable directory");
}

void MetricsWriter::append(const nlohmann::json& line) {
  errno = 0;
  metrics_ << line.dump() << '\n';
  metrics_.flush();
  if (metrics_) return;
  const int error = errno;
  metrics_.clear();  // the next line tries again (the disk may have room by then)
  if (failed_writes_++ == 0) {
    first_failure_ = "cannot write '" + path_ + "': " + (error != 0 ? std::strerror(error) : "write failed");
    spdlog::warn("{} (metrics lines are lost until a write succeeds; summary.json is written at the end)",
                 first_failure_);
  }
}

void write_summary(const std::string& dir, const nlohmann::json& summary) {
  write_file_atomically(dir + "/summary.json", summary.dump(2) + "\n");
}

void write_file_atomically(const std::string& path, const std::string& content) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::out | std::ios::trunc | std::ios::binary);
    out << content;
    out.flush();
    if (!out) throw Error("cannot write '" + temporary + "'", "check free space and permissions of its directory");
  }
  std::error_code ec;
  std::filesystem::rename(temporary, path, ec);
  if (ec) throw Error("cannot rename '" + temporary + "' to '" + path + "': " + ec.message());
}

}  // namespace strata::io
