// Generic CSV/TSV reader: the column spec grammar and its errors, delimiters,
// float dense values, single and multi-hot categoricals, behaviour sequences with
// their candidates, skipped columns, headers, short lines.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "common/error.hpp"
#include "data/csv_format.hpp"
#include "data/feature_hash.hpp"
#include "data/text_reader.hpp"
#include "data_test_util.hpp"

namespace strata::data {
namespace {

using testing::Drained;
using testing::ScratchDir;

DataOptions csv(const std::string& columns, const std::string& delimiter = ",", bool header = false) {
  DataOptions options;
  options.source = "csv";
  options.csv_columns = columns;
  options.csv_delimiter = delimiter;
  options.csv_header = header;
  return options;
}

Drained read_all(const DataOptions& options, const std::string& path) {
  auto reader = open_text_reader(options, path, 0, 1);
  return testing::drain(*reader, 16, text_num_dense(options), text_num_tables(options));
}

TEST(CsvSpec, ParsesGroupsInOrder) {
  const CsvSchema schema = parse_csv_schema(csv("skip:1,label,dense:2,cat:1,multi:2:|,skip:2,cat:1"));
  EXPECT_EQ(schema.delimiter, ',');
  EXPECT_EQ(schema.num_dense, 2);
  EXPECT_EQ(schema.num_tables, 4);
  ASSERT_EQ(schema.columns.size(), 10u);
  using Kind = CsvColumn::Kind;
  EXPECT_EQ(schema.columns[0].kind, Kind::kSkip);
  EXPECT_EQ(schema.columns[1].kind, Kind::kLabel);
  EXPECT_EQ(schema.columns[3].kind, Kind::kDense);
  EXPECT_EQ(schema.columns[3].target, 1);
  EXPECT_EQ(schema.columns[4].kind, Kind::kCategorical);
  EXPECT_EQ(schema.columns[4].target, 0);
  EXPECT_EQ(schema.columns[6].kind, Kind::kMultiHot);
  EXPECT_EQ(schema.columns[6].target, 2);
  EXPECT_EQ(schema.columns[6].separator, '|');
  EXPECT_EQ(schema.columns[9].target, 3);
  EXPECT_EQ(text_num_dense(csv("label,dense:13,cat:26")), 13);
  EXPECT_EQ(text_num_tables(csv("label,dense:13,cat:20,multi:3:;")), 23);
  EXPECT_EQ(parse_csv_schema(csv("label", "\\t")).delimiter, '\t');
  EXPECT_EQ(parse_csv_schema(csv("label", "\t")).delimiter, '\t');
  EXPECT_EQ(parse_csv_schema(csv("label", "tab")).delimiter, '\t');
  EXPECT_EQ(parse_csv_schema(csv("label", ";")).delimiter, ';');
}

TEST(CsvSpec, ErrorsNameTheKeyAndShowTheGrammar) {
  for (const std::string spec :
       {"", "dense:13", "label,dense", "label,dense:0", "label,dense:x", "label,cat:-1",
        "label,foo:3", "label,,cat:1", "label,multi:2", "label,multi:2:", "label,multi:2:||",
        "label,multi:1:,", "label:1", "label,multi:x:|"}) {
    try {
      parse_csv_schema(csv(spec));
      ADD_FAILURE() << "accepted '" << spec << "'";
    } catch (const Error& e) {
      EXPECT_NE(e.what_failed().find("data.csv_columns"), std::string::npos) << e.what();
      EXPECT_NE(e.how_to_fix().find("multi:N:SEP"), std::string::npos) << e.what();
    }
  }
  try {
    parse_csv_schema(csv("label,multi:1:;", ";"));
    ADD_FAILURE() << "accepted SEP equal to the delimiter";
  } catch (const Error& e) {
    EXPECT_NE(e.what_failed().find("data.csv_delimiter"), std::string::npos) << e.what();
  }
  for (const std::string delimiter : {"", ";;", "\n"}) {
    try {
      parse_csv_schema(csv("label", delimiter));
      ADD_FAILURE() << "accepted delimiter '" << delimiter << "'";
    } catch (const Error& e) {
      EXPECT_NE(e.what_failed().find("data.csv_delimiter"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(open_text_reader(csv("dense:2"), "/nonexistent", 0, 1), Error);
}

TEST(CsvReader, ParsesFloatsCategoricalsAndMultiHot) {
  ScratchDir dir;
  const DataOptions options = csv("label,dense:2,multi:1:|,skip:1,cat:1");
  const std::string path = dir.file("a.csv",
                                    "1,2.5,-4,a|b|c,ignored,x\n"
                                    "0,,1e3,,ignored,\n"
                                    "1.0, 7 ,0,a||b|,z,y\r\n"
                                    // Every column present, most of them empty. (This line was once
                                    // "0.0,1", read as if the four missing fields were empty; a short
                                    // line is malformed now, see ShortLinesAreMalformed.)
                                    "0.0,1,,,,\n");
  const Drained got = read_all(options, path);
  EXPECT_EQ(got.labels, (std::vector<float>{1, 0, 1, 0}));
  EXPECT_EQ(got.dense, (std::vector<float>{float(std::log1p(2.5)), 0.0f, 0.0f, float(std::log1p(1000.0)),
                                           float(std::log1p(7.0)), 0.0f, float(std::log1p(1.0)), 0.0f}));
  auto k0 = [](const char* s) { return feature_key(0, std::string_view(s)); };
  auto k1 = [](const char* s) { return feature_key(1, std::string_view(s)); };
  EXPECT_EQ(got.lengths[0], (std::vector<int32_t>{3, 0, 2, 0}));  // an empty field: an empty bag
  EXPECT_EQ(got.keys[0], (std::vector<uint64_t>{k0("a"), k0("b"), k0("c"), k0("a"), k0("b")}));
  EXPECT_EQ(got.lengths[1], (std::vector<int32_t>{1, 1, 1, 1}));  // single: always one key
  EXPECT_EQ(got.keys[1], (std::vector<uint64_t>{k1("x"), k1(""), k1("y"), k1("")}));
}

// Multi-task data: one label column per task, in file order; each must be 0 or 1.
TEST(CsvReader, SeveralLabelColumnsAreTasks) {
  ScratchDir dir;
  const DataOptions options = csv("label,dense:1,label,cat:1,label");
  EXPECT_EQ(parse_csv_schema(options).num_tasks, 3);
  EXPECT_EQ(text_num_tasks(options), 3);
  EXPECT_EQ(text_num_tasks(csv("label,dense:1")), 1);
  const std::string path = dir.file("t.csv",
                                    "1,2,0,a,1\n"
                                    "0,1,1,b,0\n"
                                    "0,1,2,b,0\n"  // a bad second label: skipped, the others kept
                                    "1,0,1,c,1\n");
  auto reader = open_text_reader(options, path, 0, 1);
  Batch batch;
  EXPECT_EQ(reader->read(16, batch), 3);
  EXPECT_EQ(batch.num_tasks, 3);
  EXPECT_EQ(batch.labels, (std::vector<float>{1, 0, 1, 0, 1, 0, 1, 1, 1}));
  EXPECT_EQ(batch.dense.size(), 3u);
  EXPECT_EQ(reader->stats().malformed, 1);
  std::string many = "label";
  for (int i = 0; i < 16; ++i) many += ",label";
  EXPECT_THROW(parse_csv_schema(csv(many)), Error);
}

TEST(CsvReader, MalformedLinesAreSkippedWithTheirColumn) {
  ScratchDir dir;
  DataOptions options = csv("label,dense:1,cat:1", "\t");
  const std::string path = dir.file("b.tsv",
                                    "1\t3\tq\n"
                                    "2\t3\tq\n"         // bad label
                                    "1\tabc\tq\n"       // bad dense
                                    "1\tnan\tq\n"       // not finite
                                    "1\t3\tq\textra\n"  // too many fields
                                    "0\t1e999\tq\n"     // overflows a double
                                    "0\t-2\tr\n");
  auto reader = open_text_reader(options, path, 0, 1);
  const Drained got = testing::drain(*reader, 16, 1, 1);
  EXPECT_EQ(got.labels, (std::vector<float>{1, 0}));
  EXPECT_EQ(got.dense, (std::vector<float>{float(std::log1p(3.0)), 0.0f}));
  EXPECT_EQ(reader->stats().malformed, 5);

  options.strict = true;
  const std::vector<std::pair<int, std::string>> expected = {
      {2, ":2, column 1: label '2'"}, {3, ":3, column 2: dense value 'abc'"}, {5, ":5, column 4: 4 fields"}};
  for (const auto& [line, part] : expected) {
    std::string content;
    for (int i = 1; i < line; ++i) content += "1\t3\tq\n";
    content += line == 2 ? "2\t3\tq\n" : line == 3 ? "1\tabc\tq\n" : "1\t3\tq\textra\n";
    const std::string strict_path = dir.file("strict.tsv", content);
    reader = open_text_reader(options, strict_path, 0, 1);
    try {
      testing::drain(*reader, 16, 1, 1);
      ADD_FAILURE() << "no error at line " << line;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(strict_path + part), std::string::npos) << e.what();
    }
  }
}

// Issue 15: fields stripped from the end of a CSV line are not read as empty ones
// (only Criteo documents that). Skipped and counted by default; with data.strict
// the error names the file, the line, the first missing column and what is missing.
TEST(CsvReader, ShortLinesAreMalformed) {
  ScratchDir dir;
  DataOptions options = csv("label,dense:2,multi:1:|,skip:1,cat:1");
  const std::string good = "1,2,3,a|b,x,c\n";
  const std::string path = dir.file("short.csv", good + "0,1\n" + good + "1\n" + "0,1,2,a,x\n" + good);
  auto reader = open_text_reader(options, path, 0, 1);
  const Drained got = testing::drain(*reader, 16, 2, 2);
  EXPECT_EQ(got.labels, (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(reader->stats().malformed, 3);
  EXPECT_EQ(reader->stats().samples, 3);

  options.strict = true;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"0,1", ":2, column 3: 2 fields, expected 6 (data.csv_columns): columns 3-6 (dense:1, multi:1, skip:1, "
              "cat:1) missing"},
      {"1", ":2, column 2: 1 field, expected 6 (data.csv_columns): columns 2-6 (dense:2, multi:1, skip:1, cat:1) "
            "missing"},
      {"0,1,2,a,x", ":2, column 6: 5 fields, expected 6 (data.csv_columns): column 6 (cat:1) missing"},
  };
  for (const auto& [line, part] : cases) {
    const std::string strict_path = dir.file("strict_short.csv", good + line + "\n" + good);
    reader = open_text_reader(options, strict_path, 0, 1);
    try {
      testing::drain(*reader, 16, 2, 2);
      ADD_FAILURE() << "no error for '" << line << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(strict_path + part), std::string::npos) << e.what();
    }
  }
  // A trailing delimiter is an empty last field, not a missing one.
  options.strict = true;
  reader = open_text_reader(options, dir.file("trailing.csv", "0,1,2,a,x,\n"), 0, 1);
  EXPECT_EQ(testing::drain(*reader, 16, 2, 2).labels.size(), 1u);
}

TEST(CsvReader, HeaderIsSkippedOnceAndLinesKeepTheirNumbers) {
  ScratchDir dir;
  DataOptions options = csv("label,cat:1", ",", true);
  std::string content = "label,item\n";
  for (int i = 0; i < 30; ++i)
    content +=
        (i == 20 ? std::string("bad") : std::string(i % 2 ? "1" : "0")) + ",v" + std::to_string(i) + "\n";
  const std::string path = dir.file("h.csv", content);
  for (int n = 1; n <= 5; ++n) {
    int64_t samples = 0;
    for (int s = 0; s < n; ++s) {
      auto reader = open_text_reader(options, path, s, n);
      testing::drain(*reader, 4, 0, 1);
      samples += reader->stats().samples;
      EXPECT_LE(reader->stats().malformed, 1);
    }
    EXPECT_EQ(samples, 29) << n << " shards";
  }
  options.strict = true;
  auto reader = open_text_reader(options, path, 0, 1);
  try {
    testing::drain(*reader, 4, 0, 1);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":22, column 1"), std::string::npos) << e.what();
  }
  // Header only, with or without its newline: no samples at all.
  for (const std::string header : {"label,item\n", "label,item"}) {
    const std::string only = dir.file("only_header.csv", header);
    try {
      open_text_reader(options, only, 0, 1);
      ADD_FAILURE() << "accepted a header-only file";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("contains no samples"), std::string::npos) << e.what();
    }
  }
  // Without csv_header the header line is a malformed sample.
  options.csv_header = false;
  options.strict = false;
  reader = open_text_reader(options, path, 0, 1);
  testing::drain(*reader, 4, 0, 1);
  EXPECT_EQ(reader->stats().malformed, 2);
}

TEST(CsvReader, SequencesBecomeTargetLastBagsOfTheirCandidate) {
  ScratchDir dir;
  // DIN's Amazon layout: hist_items;hist_cates;item;cate;label, and a dense column.
  DataOptions options = csv("seq:|,seq:|,cand,cand,label,dense:1", ";");
  const std::string path = dir.file("din.csv",
                                    "i1|i2|i3;c1|c1|c2;i9;c2;1;5\n"
                                    ";;i4;c3;0;\n"           // no history: the bag is the candidate alone
                                    "i5||i6|;c4;;c4;1;1\n"); // empty ids add nothing, an empty cand is "missing"
  const Drained got = read_all(options, path);
  ASSERT_EQ(got.keys.size(), 2u);
  auto k = [](uint32_t t, const char* s) { return feature_key(t, std::string_view(s)); };
  EXPECT_EQ(got.labels, (std::vector<float>{1, 0, 1}));
  EXPECT_EQ(got.lengths[0], (std::vector<int32_t>{4, 1, 3}));
  EXPECT_EQ(got.keys[0], (std::vector<uint64_t>{k(0, "i1"), k(0, "i2"), k(0, "i3"), k(0, "i9"), k(0, "i4"),
                                                k(0, "i5"), k(0, "i6"), k(0, "")}));
  EXPECT_EQ(got.lengths[1], (std::vector<int32_t>{4, 1, 2}));
  EXPECT_EQ(got.keys[1], (std::vector<uint64_t>{k(1, "c1"), k(1, "c1"), k(1, "c2"), k(1, "c2"), k(1, "c3"),
                                                k(1, "c4"), k(1, "c4")}));
  // The candidate may come before its sequence; data.max_seq_len keeps the most recent ids.
  DataOptions first = csv("label,cand,seq:|");
  first.max_seq_len = 2;
  const Drained cut = read_all(first, dir.file("cut.csv", "1,x,a|b|c|d\n0,y,e\n"));
  EXPECT_EQ(cut.lengths[0], (std::vector<int32_t>{3, 2}));
  EXPECT_EQ(cut.keys[0], (std::vector<uint64_t>{k(0, "c"), k(0, "d"), k(0, "x"), k(0, "e"), k(0, "y")}));
}

TEST(CsvSpec, SequenceColumnsNeedTheirCandidates) {
  for (const char* bad : {"label,seq:|", "label,cand", "label,seq:|,seq:;,cand", "label,seq,cand",
                          "label,seq:||,cand", "label,seq:|,cand:2"}) {
    try {
      parse_csv_schema(csv(bad));
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("data.csv_columns"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parse_csv_schema(csv("label,seq:;,cand", ";")), Error);  // SEP is the delimiter
  const CsvSchema schema = parse_csv_schema(csv("cat:2,cand,label,seq:|"));
  EXPECT_EQ(schema.num_tables, 3);
  ASSERT_EQ(schema.sequence_tables, (std::vector<int>{2}));
  EXPECT_EQ(schema.columns[2].target, 2) << "a candidate hashes into its sequence's table";
}

}  // namespace
}  // namespace strata::data
