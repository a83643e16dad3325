// Sharded reading: for 1..7 shards every line is read exactly once and in order,
// including tiny files and lines longer than the read buffer; error line numbers
// are the file's; position()/seek() resume exactly; rewind replays the epoch.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "common/error.hpp"
#include "data/feature_hash.hpp"
#include "data/text_reader.hpp"
#include "data_test_util.hpp"

namespace strata::data {
namespace {

using testing::criteo_line;
using testing::criteo_options;
using testing::Drained;
using testing::LogCapture;
using testing::ScratchDir;

// Line i carries its number as C1 = hex(i); line lengths vary with i, and
// long lines (~600 bytes, every field filled) exceed the small read buffers.
std::string id_line(int i, bool long_line) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%x", unsigned(i));
  std::vector<std::string> dense;
  for (int j = 0; j < (long_line ? 13 : i % 5); ++j)
    dense.push_back(std::to_string(long_line ? 1234567890123 + j : j));
  std::vector<std::string> cats = {hex};
  if (long_line) cats.resize(26, "ffffffffffffffff");
  return criteo_line(i % 2 ? "1" : "0", dense, cats);
}

// Maps the C1 keys back to line ids.
std::map<uint64_t, int> id_of_key(int lines) {
  std::map<uint64_t, int> ids;
  for (int i = 0; i < lines; ++i) {
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%x", unsigned(i));
    ids[feature_key(0, std::string_view(hex))] = i;
  }
  return ids;
}

std::string make_file(int lines, bool final_newline, int long_every) {
  std::string content;
  for (int i = 0; i < lines; ++i) {
    content += id_line(i, long_every > 0 && i % long_every == 1);
    if (i + 1 < lines || final_newline) content += "\n";
  }
  return content;
}

TEST(Sharding, EveryLineExactlyOnceInOrder) {
  ScratchDir dir;
  struct Case {
    int lines;
    bool final_newline;
    int long_every;
    size_t buffer;
  };
  const std::vector<Case> cases = {
      {1, true, 0, 16},   {1, false, 0, 16}, {2, true, 0, 16},    {2, false, 0, 4096},      {3, true, 2, 16},
      {10, false, 3, 32}, {57, true, 4, 64}, {200, true, 7, 100}, {200, false, 0, 1 << 20},
  };
  for (const Case& c : cases) {
    const std::string path = dir.file("ids.tsv", make_file(c.lines, c.final_newline, c.long_every));
    const std::map<uint64_t, int> ids = id_of_key(c.lines);
    TextReaderTuning tuning;
    tuning.buffer_bytes = c.buffer;
    for (int n = 1; n <= 7; ++n) {
      std::vector<int> seen;
      for (int s = 0; s < n; ++s) {
        auto reader = open_text_reader(criteo_options(), path, s, n, tuning);
        const Drained got = testing::drain(*reader, 5, 13, 26);
        EXPECT_EQ(reader->stats().malformed, 0);
        for (uint64_t key : got.keys[0]) seen.push_back(ids.at(key));
      }
      std::vector<int> expected(size_t(c.lines));
      for (int i = 0; i < c.lines; ++i) expected[size_t(i)] = i;
      EXPECT_EQ(seen, expected) << c.lines << " lines, " << n << " shards, buffer " << c.buffer;
    }
  }
}

TEST(Sharding, ErrorLineNumbersAreTheFilesForEveryShardCount) {
  ScratchDir dir;
  std::string content;
  std::set<int64_t> bad;
  for (int i = 1; i <= 120; ++i) {
    if (i % 9 == 0 || i == 1 || i == 120) {
      content += criteo_line("x", {}, {}) + "\n";
      bad.insert(i);
    } else {
      content += id_line(i, i % 13 == 0) + "\n";
    }
  }
  const std::string path = dir.file("bad.tsv", content);
  DataOptions options = criteo_options();
  options.max_errors_reported = 1000;
  TextReaderTuning tuning;
  tuning.buffer_bytes = 64;
  for (int n = 1; n <= 7; ++n) {
    std::set<int64_t> reported;
    LogCapture capture;
    for (int s = 0; s < n; ++s) {
      auto reader = open_text_reader(options, path, s, n, tuning);
      testing::drain(*reader, 7, 13, 26);
    }
    for (const std::string& line : capture.lines()) {
      const size_t at = line.find(path + ":");
      if (at == std::string::npos) continue;
      reported.insert(std::stoll(line.substr(at + path.size() + 1)));
    }
    EXPECT_EQ(reported, bad) << n << " shards";
  }
  // Strict mode on a later shard names the true line too.
  options.strict = true;
  auto reader = open_text_reader(options, path, 3, 4, tuning);
  try {
    testing::drain(*reader, 7, 13, 26);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    const int64_t line = std::stoll(what.substr(what.find(path + ":") + path.size() + 1));
    EXPECT_TRUE(bad.count(line)) << what;
    EXPECT_GT(line, 80);
  }
}

TEST(Sharding, EmptyShardsOfASmallFile) {
  ScratchDir dir;
  const std::string path = dir.file("one.tsv", id_line(0, false) + "\n");
  int total = 0;
  for (int s = 0; s < 7; ++s) {
    auto reader = open_text_reader(criteo_options(), path, s, 7);
    Batch batch;
    batch.reset(13, 26);
    total += reader->read(100, batch);
  }
  EXPECT_EQ(total, 1);
}

TEST(Sharding, SeekResumesExactly) {
  ScratchDir dir;
  std::string content = make_file(150, false, 5);
  content.insert(content.find('\n', 2000) + 1, "bad line\n");  // a malformed line mid-file
  const std::string path = dir.file("resume.tsv", content);
  TextReaderTuning tuning;
  tuning.buffer_bytes = 128;
  for (int n : {1, 3}) {
    for (int s = 0; s < n; ++s) {
      auto whole = open_text_reader(criteo_options(), path, s, n, tuning);
      const Drained uninterrupted = testing::drain(*whole, 4, 13, 26);
      const int64_t samples = whole->stats().samples;
      for (int32_t k : {0, 1, 7, 30, int32_t(samples)}) {
        if (k > samples) continue;
        auto first = open_text_reader(criteo_options(), path, s, n, tuning);
        Drained resumed;
        Batch batch;
        batch.reset(13, 26);
        first->read(k, batch);
        testing::append(resumed, batch);
        const ReaderPosition at = first->position();
        auto second = open_text_reader(criteo_options(), path, s, n, tuning);
        second->seek(at);
        EXPECT_EQ(second->position().byte_offset, at.byte_offset);
        EXPECT_EQ(second->position().line, at.line);
        const Drained rest = testing::drain(*second, 9, 13, 26);
        for (size_t t = 0; t < 26; ++t) {
          resumed.keys[t].insert(resumed.keys[t].end(), rest.keys[t].begin(), rest.keys[t].end());
        }
        resumed.labels.insert(resumed.labels.end(), rest.labels.begin(), rest.labels.end());
        resumed.dense.insert(resumed.dense.end(), rest.dense.begin(), rest.dense.end());
        EXPECT_EQ(resumed.labels, uninterrupted.labels)
            << "shard " << s << "/" << n << " resumed after " << k;
        EXPECT_EQ(resumed.dense, uninterrupted.dense);
        EXPECT_EQ(resumed.keys, uninterrupted.keys);
        EXPECT_EQ(second->position().line, whole->position().line);
        EXPECT_EQ(second->position().byte_offset, whole->position().byte_offset);
      }
    }
  }
  auto reader = open_text_reader(criteo_options(), path, 0, 1, tuning);
  EXPECT_THROW(reader->seek({5, 1}), Error);  // not a line start
  EXPECT_THROW(reader->seek({int64_t(content.size()) + 10, 1}), Error);
}

TEST(Sharding, RewindReplaysTheEpoch) {
  ScratchDir dir;
  const std::string path = dir.file("epochs.tsv", make_file(40, true, 3));
  for (int s = 0; s < 3; ++s) {
    auto reader = open_text_reader(criteo_options(), path, s, 3);
    const ReaderPosition start = reader->position();
    const Drained first = testing::drain(*reader, 6, 13, 26);
    reader->rewind();
    EXPECT_EQ(reader->position().byte_offset, start.byte_offset);
    EXPECT_EQ(reader->position().line, start.line);
    const Drained second = testing::drain(*reader, 6, 13, 26);
    EXPECT_EQ(first.labels, second.labels);
    EXPECT_EQ(first.keys, second.keys);
    EXPECT_EQ(reader->stats().samples, 2 * int64_t(first.labels.size()));
  }
}

}  // namespace
}  // namespace strata::data
