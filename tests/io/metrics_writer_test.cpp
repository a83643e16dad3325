// MetricsWriter: one JSON object per line, and a failed write (a full disk, here
// /dev/full) reported once by name and reason without stopping the run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/error.hpp"
#include "io/metrics_writer.hpp"

namespace strata::io {
namespace {

namespace fs = std::filesystem;

std::string fresh_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "metrics_writer_" + name;
  fs::remove_all(dir);
  return dir;
}

TEST(MetricsWriter, WritesOneJsonObjectPerLine) {
  const std::string dir = fresh_dir("lines");
  MetricsWriter writer(dir);
  writer.append({{"step", 1}, {"loss", 0.5}});
  writer.append({{"step", 2}});
  std::ifstream in(dir + "/metrics.jsonl");
  std::string first, second, third;
  std::getline(in, first);
  std::getline(in, second);
  EXPECT_EQ(nlohmann::json::parse(first)["step"], 1);
  EXPECT_EQ(nlohmann::json::parse(second)["step"], 2);
  EXPECT_FALSE(std::getline(in, third));
  EXPECT_EQ(writer.failed_writes(), 0);
}

TEST(MetricsWriter, AFullDiskIsReportedAtTheFirstFailedWrite) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  const std::string dir = fresh_dir("full");
  fs::create_directories(dir);
  fs::create_symlink("/dev/full", dir + "/metrics.jsonl");  // every write: ENOSPC
  MetricsWriter writer(dir);
  writer.append({{"step", 1}});
  EXPECT_EQ(writer.failed_writes(), 1);
  EXPECT_NE(writer.first_failure().find(dir + "/metrics.jsonl"), std::string::npos) << writer.first_failure();
  EXPECT_NE(writer.first_failure().find("No space left on device"), std::string::npos) << writer.first_failure();
  writer.append({{"step", 2}});
  EXPECT_EQ(writer.failed_writes(), 2) << "every failure counted, the first one kept";
}

TEST(MetricsWriter, AnUnwritableDirectoryIsAnErrorNamingIt) {
  const std::string dir = fresh_dir("file");
  std::ofstream(dir) << "a file, not a folder";
  try {
    MetricsWriter writer(dir);
    ADD_FAILURE() << "accepted a file as output.dir";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata::io
