#include "io/metrics_writer.hpp"

#include <cstdio>
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
  const std::string path = dir + "/metrics.jsonl";
  metrics_.open(path, std::ios::out | std::ios::trunc);
  if (!metrics_) throw Error("cannot write '" + path + "'", "set output.dir to a writable directory");
}

void MetricsWriter::append(const nlohmann::json& line) {
  metrics_ << line.dump() << '\n';
  metrics_.flush();
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
