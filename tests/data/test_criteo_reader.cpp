// Criteo TSV reader: field semantics, tolerated variations (CRLF, no final newline,
// stripped trailing fields, negative integers), every malformed case in skip and
// strict mode, their logging, and the file-level errors.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>

#include "common/error.hpp"
#include "data/criteo_format.hpp"
#include "data/feature_hash.hpp"
#include "data/text_reader.hpp"
#include "data_test_util.hpp"

namespace strata::data {
namespace {

using testing::criteo_line;
using testing::criteo_options;
using testing::Drained;
using testing::LogCapture;
using testing::numbered_criteo_line;
using testing::ScratchDir;

Drained read_all(const std::string& path, DataOptions options = criteo_options(),
                 const TextReaderTuning& tuning = {}) {
  auto reader = open_text_reader(options, path, 0, 1, tuning);
  return testing::drain(*reader, 64, 13, 26);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no strata::Error thrown>";
}

TEST(CriteoReader, ParsesFields) {
  ScratchDir dir;
  std::vector<std::string> dense = {"0", "-3", "5", "", "1000000"};
  std::vector<std::string> cats = {"68fd1e64", "", "ABCDEF01", "1", "0123456789abcdef"};
  const std::string path =
      dir.file("a.tsv", criteo_line("1", dense, cats) + "\n" + criteo_line("0", {}, {}) + "\n");
  const Drained all = read_all(path);
  ASSERT_EQ(all.labels, (std::vector<float>{1.0f, 0.0f}));
  ASSERT_EQ(all.dense.size(), 26u);
  EXPECT_EQ(all.dense[0], 0.0f);
  EXPECT_EQ(all.dense[1], 0.0f);  // negative -> log(1 + max(x, 0)) = 0
  EXPECT_EQ(all.dense[2], float(std::log1p(5.0)));
  EXPECT_EQ(all.dense[3], 0.0f);  // missing
  EXPECT_EQ(all.dense[4], float(std::log1p(1000000.0)));
  for (int j = 13; j < 26; ++j) EXPECT_EQ(all.dense[size_t(j)], 0.0f);
  for (uint32_t t = 0; t < 26; ++t) {
    ASSERT_EQ(all.keys[t].size(), 2u) << "one key per bag, missing or not";
    const std::string text = t < cats.size() ? cats[t] : "";
    EXPECT_EQ(all.keys[t][0], feature_key(t, std::string_view(text)));
    EXPECT_EQ(all.keys[t][1], feature_key(t, std::string_view()));
  }
}

TEST(CriteoReader, ToleratesCrlfMissingNewlineAndStrippedFields) {
  ScratchDir dir;
  std::string lf, crlf;
  for (int i = 0; i < 5; ++i) {
    lf += numbered_criteo_line(i) + "\n";
    crlf += numbered_criteo_line(i) + "\r\n";
  }
  const Drained a = read_all(dir.file("lf.tsv", lf));
  const Drained b = read_all(dir.file("crlf.tsv", crlf));
  const Drained c = read_all(dir.file("nofinal.tsv", lf.substr(0, lf.size() - 1)));
  const Drained d = read_all(dir.file("crlf_nofinal.tsv", crlf.substr(0, crlf.size() - 2)));
  ASSERT_EQ(a.labels.size(), 5u);
  for (const Drained* other : {&b, &c, &d}) {
    EXPECT_EQ(other->labels, a.labels);
    EXPECT_EQ(other->dense, a.dense);
    EXPECT_EQ(other->keys, a.keys);
  }
  // Trailing empty fields stripped: "1\t7" is "1\t7\t\t...\t" with 40 fields.
  const Drained stripped =
      read_all(dir.file("stripped.tsv", "1\t7\n0\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t11\t12\t13\tab\n"));
  const Drained padded = read_all(dir.file(
      "padded.tsv",
      criteo_line("1", {"7"}, {}) + "\n" +
          criteo_line("0", {"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13"}, {"ab"}) +
          "\n"));
  ASSERT_EQ(stripped.labels.size(), 2u);
  EXPECT_EQ(stripped.dense, padded.dense);
  EXPECT_EQ(stripped.keys, padded.keys);
}

struct BadLine {
  std::string text;
  std::string reason_part;  // expected in the message
  int column;               // expected 1-based column, 0 = whole line
};

std::vector<BadLine> bad_lines() {
  std::vector<std::string> cats26(26, "0a0b0c0d");
  std::string too_many = criteo_line("1", {}, cats26) + "\textra";
  return {
      {too_many, "41 fields, expected at most 40", 41},
      {criteo_line("1", {}, {"xyz"}), "not 1-16 hex digits", 15},
      {criteo_line("1", {}, {"", "", "0123456789abcdef0"}), "not 1-16 hex digits", 17},
      {criteo_line("0", {"1", "99999999999999999999"}, {}), "overflows a 64-bit integer", 3},
      {criteo_line("0", {"1.5"}, {}), "not an integer", 2},
      {criteo_line("0", {"", "", "12a"}, {}), "not an integer", 4},
      {criteo_line("0", {"+3"}, {}), "not an integer", 2},
      {criteo_line("2", {}, {}), "label '2' is not 0 or 1", 1},
      {criteo_line("", {}, {}), "label '' is not 0 or 1", 1},
      {criteo_line("1.0", {}, {}), "is not 0 or 1", 1},
      {"", "empty line", 0},
      {"\r", "empty line", 0},
      {std::string("1\t2\0\x7f\x80junk", 10), "NUL byte", 0},
      {"\x89PNG\x1a\x0b\xff\xfe binary", "label", 1},
  };
}

TEST(CriteoReader, SkipsEveryMalformedCaseAndKeepsTheRest) {
  ScratchDir dir;
  std::string content;
  std::vector<int> good;
  int line = 0;
  for (const BadLine& bad : bad_lines()) {
    content += numbered_criteo_line(line) + "\n";
    good.push_back(line++);
    content += bad.text + "\n";
    ++line;
  }
  content += numbered_criteo_line(line) + "\n";
  good.push_back(line++);
  const std::string path = dir.file("mixed.tsv", content);

  std::string expected_content;
  for (int i : good) expected_content += numbered_criteo_line(i) + "\n";
  const Drained expected = read_all(dir.file("clean.tsv", expected_content));

  auto reader = open_text_reader(criteo_options(), path, 0, 1);
  const Drained got = testing::drain(*reader, 3, 13, 26);  // small batches: failures mid-batch
  EXPECT_EQ(got.labels, expected.labels);
  EXPECT_EQ(got.dense, expected.dense);
  EXPECT_EQ(got.keys, expected.keys);
  EXPECT_EQ(reader->stats().malformed, int64_t(bad_lines().size()));
  EXPECT_EQ(reader->stats().samples, int64_t(good.size()));
  EXPECT_EQ(reader->stats().lines, int64_t(line));
}

TEST(CriteoReader, StrictModeNamesFileLineColumnAndFix) {
  ScratchDir dir;
  DataOptions options = criteo_options();
  options.strict = true;
  for (const BadLine& bad : bad_lines()) {
    const std::string path =
        dir.file("strict.tsv", numbered_criteo_line(0) + "\n" + numbered_criteo_line(1) + "\n" + bad.text +
                                   "\n" + numbered_criteo_line(3) + "\n");
    auto reader = open_text_reader(options, path, 0, 1);
    Batch batch;
    batch.reset(13, 26);
    try {
      reader->read(100, batch);
      ADD_FAILURE() << "no error for " << bad.reason_part;
    } catch (const Error& e) {
      const std::string what = e.what_failed();
      EXPECT_NE(what.find(path + ":3"), std::string::npos) << what;
      if (bad.column > 0) {
        EXPECT_NE(what.find("column " + std::to_string(bad.column)), std::string::npos) << what;
      }
      EXPECT_NE(what.find(bad.reason_part), std::string::npos) << what;
      EXPECT_NE(e.how_to_fix().find("--data.strict=false"), std::string::npos);
      EXPECT_NE(e.how_to_fix().find("fix or remove the line"), std::string::npos);
    }
    // The samples before the bad line are complete and nothing of it is left.
    EXPECT_EQ(batch.size, 2);
    EXPECT_EQ(batch.labels.size(), 2u);
    EXPECT_EQ(batch.dense.size(), 26u);
    for (const SparseBags& bags : batch.tables) EXPECT_EQ(bags.keys.size(), 2u);
  }
}

// Issue 15: with data.strict only the trailing categoricals may be stripped; a
// line that ends before I13 (a label alone, say) is an error naming the file, the
// line, the first missing column and what is missing. Without strict the README's
// tolerance holds: every stripped trailing field is read as missing.
TEST(CriteoReader, StrictModeAllowsOnlyStrippedCategoricals) {
  ScratchDir dir;
  DataOptions strict = criteo_options();
  strict.strict = true;
  const std::string ints = "\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t11\t12\t13";
  // Stripped categoricals, all or some: accepted, as their padded lines.
  const Drained stripped = read_all(dir.file("cats.tsv", "1" + ints + "\n0" + ints + "\tab\t\tcd\n"), strict);
  const Drained padded = read_all(
      dir.file("cats_padded.tsv",
               criteo_line("1", {"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13"}, {}) + "\n" +
                   criteo_line("0", {"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13"},
                               {"ab", "", "cd"}) +
                   "\n"),
      strict);
  ASSERT_EQ(stripped.labels.size(), 2u);
  EXPECT_EQ(stripped.dense, padded.dense);
  EXPECT_EQ(stripped.keys, padded.keys);

  const std::vector<std::pair<std::string, std::string>> cases = {
      {"1", ":2, column 2: the line ends after label: I1..I13 are missing"},
      {"0\t7", ":2, column 3: the line ends after I1: I2..I13 are missing"},
      {"1\t1\t2\t3\t4\t5\t6\t7\t8\t9\t10\t11\t12", ":2, column 14: the line ends after I12: I13 is missing"},
  };
  for (const auto& [line, part] : cases) {
    const std::string path = dir.file("short.tsv", numbered_criteo_line(0) + "\n" + line + "\n");
    auto reader = open_text_reader(strict, path, 0, 1);
    const std::string what = error_of([&] { testing::drain(*reader, 10, 13, 26); });
    EXPECT_NE(what.find(path + part), std::string::npos) << what;
    EXPECT_NE(what.find("C1..C26 may be stripped"), std::string::npos) << what;
    // Not strict: read as missing values, not malformed.
    auto lenient = open_text_reader(criteo_options(), path, 0, 1);
    EXPECT_EQ(testing::drain(*lenient, 10, 13, 26).labels.size(), 2u) << line;
    EXPECT_EQ(lenient->stats().malformed, 0) << line;
  }
}

TEST(CriteoReader, OverlongLineIsMalformed) {
  ScratchDir dir;
  TextReaderTuning tuning;
  tuning.buffer_bytes = 64;
  tuning.max_line_bytes = 1000;
  const std::string junk(5000, 'z');  // no newline for 5000 bytes
  for (const std::string& tail : {std::string("\n") + numbered_criteo_line(2) + "\n", std::string()}) {
    const std::string path = dir.file("long.tsv", numbered_criteo_line(0) + "\n" + junk + tail);
    auto reader = open_text_reader(criteo_options(), path, 0, 1, tuning);
    const Drained got = testing::drain(*reader, 10, 13, 26);
    EXPECT_EQ(reader->stats().malformed, 1);
    EXPECT_EQ(got.labels.size(), tail.empty() ? 1u : 2u);
    EXPECT_EQ(reader->position().line, tail.empty() ? 2 : 3);
  }
  DataOptions strict = criteo_options();
  strict.strict = true;
  const std::string path = dir.file("long2.tsv", numbered_criteo_line(0) + "\n" + junk + "\n");
  auto reader = open_text_reader(strict, path, 0, 1, tuning);
  const std::string what = error_of([&] { testing::drain(*reader, 10, 13, 26); });
  EXPECT_NE(what.find(path + ":2"), std::string::npos) << what;
  EXPECT_NE(what.find("longer than 1000 bytes"), std::string::npos) << what;
}

TEST(CriteoReader, LogsFirstErrorsThenCountsThenSummarises) {
  ScratchDir dir;
  std::string content;
  for (int i = 0; i < 6; ++i) content += numbered_criteo_line(i) + "\n" + criteo_line("7", {}, {}) + "\n";
  const std::string path = dir.file("log.tsv", content);
  DataOptions options = criteo_options();
  options.max_errors_reported = 2;
  LogCapture capture;
  auto reader = open_text_reader(options, path, 0, 1);
  testing::drain(*reader, 4, 13, 26);
  const std::vector<std::string> lines = capture.lines();
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NE(lines[0].find(path + ":2, column 1: label '7' is not 0 or 1"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find(path + ":4, column 1"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("more malformed lines"), std::string::npos) << lines[2];
  EXPECT_NE(lines[3].find("skipped 6 malformed of 12 lines"), std::string::npos) << lines[3];
  EXPECT_EQ(reader->stats().malformed, 6);
}

TEST(CriteoReader, FileErrorsNameThePath) {
  ScratchDir dir;
  const std::string missing = dir.path() + "/no_such_file.tsv";
  std::string what = error_of([&] { open_text_reader(criteo_options(), missing, 0, 1); });
  EXPECT_NE(what.find(missing), std::string::npos) << what;
  EXPECT_NE(what.find("does not exist"), std::string::npos) << what;

  what = error_of([&] { open_text_reader(criteo_options(), dir.path(), 0, 1); });
  EXPECT_NE(what.find(dir.path()), std::string::npos) << what;
  EXPECT_NE(what.find("is a directory"), std::string::npos) << what;

  const std::string empty = dir.file("empty.tsv", "");
  for (int shard = 0; shard < 3; ++shard) {
    what = error_of([&] { open_text_reader(criteo_options(), empty, shard, 3); });
    EXPECT_NE(what.find(empty), std::string::npos) << what;
    EXPECT_NE(what.find("contains no samples"), std::string::npos) << what;
  }

  what = error_of([&] { open_text_reader(criteo_options(), empty, 3, 3); });
  EXPECT_NE(what.find("shard 3 of 3"), std::string::npos) << what;

  DataOptions synthetic;
  what = error_of([&] { open_text_reader(synthetic, empty, 0, 1); });
  EXPECT_NE(what.find("data.source"), std::string::npos) << what;
}

TEST(CriteoReader, UnreadableFileNamesThePath) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads every file";
  ScratchDir dir;
  const std::string path = dir.file("locked.tsv", numbered_criteo_line(0) + "\n");
  ::chmod(path.c_str(), 0);
  const std::string what = error_of([&] { open_text_reader(criteo_options(), path, 0, 1); });
  EXPECT_NE(what.find(path), std::string::npos) << what;
  EXPECT_NE(what.find("cannot be read"), std::string::npos) << what;
}

TEST(CriteoReader, OnlyMalformedLinesGiveAnEmptyShardNotAnError) {
  ScratchDir dir;
  const std::string path = dir.file("blank.tsv", "\n\n\r\n");
  auto reader = open_text_reader(criteo_options(), path, 0, 1);
  Batch batch;
  batch.reset(13, 26);
  EXPECT_EQ(reader->read(10, batch), 0);
  EXPECT_EQ(reader->stats().malformed, 3);
}

TEST(CriteoReader, ShapesOfTextSources) {
  EXPECT_EQ(text_num_dense(criteo_options()), 13);
  EXPECT_EQ(text_num_tables(criteo_options()), 26);
  DataOptions synthetic;
  synthetic.num_dense = 4;
  synthetic.num_tables = 9;
  EXPECT_EQ(text_num_dense(synthetic), 4);
  EXPECT_EQ(text_num_tables(synthetic), 9);
  DataOptions unknown;
  unknown.source = "parquet";
  EXPECT_THROW(text_num_dense(unknown), Error);
}

}  // namespace
}  // namespace strata::data
