// The columnar HDF5 dataset: `strata convert` (run_convert_command) of Criteo and
// CSV text, batches equal to the text reader's, sharding, exact resume, and clear
// errors for missing, foreign, truncated, newer or inconsistent files.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "app/convert_command.hpp"
#include "common/error.hpp"
#include "data/hdf5_dataset.hpp"
#include "data/hdf5_dataset_format.hpp"
#include "data/hdf5_handle.hpp"
#include "data/text_reader.hpp"
#include "data_test_util.hpp"

namespace strata::data {
namespace {

using testing::Drained;
using testing::ScratchDir;
namespace fs = std::filesystem;

// Bit-for-bit equality (== would let -0.0 pass for 0.0).
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

void expect_same(const Drained& text, const Drained& hdf5) {
  EXPECT_TRUE(same_bits(text.labels, hdf5.labels)) << "labels differ";
  EXPECT_TRUE(same_bits(text.dense, hdf5.dense)) << "dense values differ";
  EXPECT_EQ(text.keys, hdf5.keys);
  EXPECT_EQ(text.lengths, hdf5.lengths);
}

Drained concat(const std::vector<Drained>& parts) {
  Drained all;
  for (const Drained& part : parts) {
    all.labels.insert(all.labels.end(), part.labels.begin(), part.labels.end());
    all.dense.insert(all.dense.end(), part.dense.begin(), part.dense.end());
    all.keys.resize(part.keys.size());
    all.lengths.resize(part.lengths.size());
    for (size_t t = 0; t < part.keys.size(); ++t) {
      all.keys[t].insert(all.keys[t].end(), part.keys[t].begin(), part.keys[t].end());
      all.lengths[t].insert(all.lengths[t].end(), part.lengths[t].begin(), part.lengths[t].end());
    }
  }
  return all;
}

// A Criteo file with what real files contain: CRLF, stripped trailing fields,
// empty values, negative counts, large counts, a malformed line, no final newline.
std::string criteo_text(int valid_lines) {
  std::string text;
  for (int i = 0; i < valid_lines; ++i) {
    std::string line = testing::numbered_criteo_line(i);
    if (i % 5 == 1) line = testing::criteo_line("1", {"", "-3", "123456789"}, {"", "abcdef01"});
    if (i % 7 == 2) line = line.substr(0, line.find('\t', 40));  // trailing fields stripped
    if (i % 4 == 3) line += "\r";
    text += line + "\n";
    if (i == valid_lines / 2) text += "x\t1\t2\n";  // malformed: label
  }
  text.pop_back();  // no final newline
  return text;
}

DataOptions csv_options() {
  DataOptions options;
  options.source = "csv";
  options.csv_columns = "label,dense:2,cat:1,multi:2:|,skip:1";
  options.csv_header = true;
  return options;
}

std::string csv_text(int valid_lines) {
  std::string text = "label,a,b,c,m1,m2,ignored\n";
  for (int i = 0; i < valid_lines; ++i) {
    const std::string m1 = i % 3 == 0 ? "" : i % 3 == 1 ? "x|y" : "y||z" + std::to_string(i % 11) + "|";
    const std::string m2 = std::to_string(i % 13) + "|" + std::to_string(i % 17) + "|" + std::to_string(i % 19);
    text += std::to_string(i % 2) + "," + std::to_string(i * 0.25 - 3) + "," + (i % 6 ? "7" : "") + "," +
            (i % 9 ? "c" + std::to_string(i % 23) : "") + "," + m1 + "," + m2 + ",zz\n";
    if (i == 10) text += "2,1,1,c,x,y,z\n";  // malformed: label 2
  }
  return text;
}

std::string write_deck(const ScratchDir& dir, const DataOptions& options) {
  return dir.file("deck.ini", "[data]\ncsv_columns = " + options.csv_columns + "\ncsv_header = " +
                                  (options.csv_header ? "true" : "false") + "\n");
}

void convert(const std::vector<std::string>& args) {
  ::testing::internal::CaptureStdout();
  int code = 1;
  try {
    code = run_convert_command(args);
  } catch (...) {
    ::testing::internal::GetCapturedStdout();
    throw;
  }
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(code, 0);
  EXPECT_NE(out.find(" rows, "), std::string::npos) << out;
}

Drained read_text(const DataOptions& options, const std::string& path, int32_t batch) {
  auto reader = open_text_reader(options, path, 0, 1);
  return testing::drain(*reader, batch, text_num_dense(options), text_num_tables(options));
}

Drained read_hdf5(const std::string& path, int shard, int shards, int32_t batch, int64_t block_rows = 0) {
  auto reader = open_hdf5_reader(DataOptions(), path, shard, shards, Hdf5ReaderTuning{block_rows});
  return testing::drain(*reader, batch, hdf5_num_dense(path), hdf5_num_tables(path));
}

// The filter pipeline of dataset `name` (what h5dump lists under FILTERS).
std::vector<H5Z_filter_t> filters_of(const std::string& path, const std::string& name) {
  Hdf5Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  Hdf5Handle dataset(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT), H5Dclose);
  Hdf5Handle plist(H5Dget_create_plist(dataset.get()), H5Pclose);
  std::vector<H5Z_filter_t> filters;
  for (int i = 0; i < H5Pget_nfilters(plist.get()); ++i) {
    unsigned flags = 0, config = 0;
    size_t elements = 0;
    filters.push_back(H5Pget_filter2(plist.get(), unsigned(i), &flags, &elements, nullptr, 0, nullptr, &config));
  }
  return filters;
}

// Expects `action` to throw strata::Error whose text contains every one of `needles`.
template <class Action>
void expect_error(Action&& action, const std::vector<std::string>& needles) {
  try {
    action();
    ADD_FAILURE() << "no error; expected one mentioning '" << needles.front() << "'";
  } catch (const Error& e) {
    for (const std::string& needle : needles) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "missing '" << needle << "' in: " << e.what();
    }
    EXPECT_FALSE(e.how_to_fix().empty()) << e.what();
  }
}

class Hdf5DatasetTest : public ::testing::Test {
 protected:
  // A converted Criteo file of 200 valid lines in chunks of 16 rows.
  std::string criteo_h5() {
    if (criteo_h5_.empty()) {
      criteo_tsv_ = dir_.file("train.tsv", criteo_text(200));
      criteo_h5_ = dir_.path() + "/train.h5";
      convert({"--from", "criteo", "--to", criteo_h5_, "--input", criteo_tsv_, "--chunk-rows", "16"});
    }
    return criteo_h5_;
  }
  std::string copy_of(const std::string& path, const std::string& name) {
    const std::string copy = dir_.path() + "/" + name;
    fs::copy_file(path, copy, fs::copy_options::overwrite_existing);
    return copy;
  }

  ScratchDir dir_;
  std::string criteo_tsv_, criteo_h5_;
};

TEST_F(Hdf5DatasetTest, CriteoBatchesEqualTheTextReaders) {
  const std::string h5 = criteo_h5();
  const Drained text = read_text(testing::criteo_options(), criteo_tsv_, 32);
  ASSERT_EQ(text.labels.size(), 200u);
  for (const int64_t block_rows : {0, 1, 5, 16, 1000}) {
    for (const int32_t batch : {1, 7, 64, 256}) {
      SCOPED_TRACE("block_rows " + std::to_string(block_rows) + ", batch " + std::to_string(batch));
      expect_same(text, read_hdf5(h5, 0, 1, batch, block_rows));
    }
  }
  const Hdf5DatasetShape shape = read_hdf5_shape(h5);
  EXPECT_EQ(shape.source, "criteo");
  EXPECT_EQ(shape.num_rows, 200);
  EXPECT_EQ(shape.num_dense, 13);
  EXPECT_EQ(shape.num_tables, 26);
  EXPECT_EQ(shape.multi_hot, std::vector<bool>(26, false));
  EXPECT_EQ(shape.chunk_rows, 16);
  EXPECT_EQ(shape.input_lines, 201);
  EXPECT_EQ(shape.malformed_lines, 1);
  EXPECT_EQ(hdf5_num_dense(h5), 13);
  EXPECT_EQ(hdf5_num_tables(h5), 26);
  // By default only datasets that deflate well are deflated: 16 random hash keys do not.
  EXPECT_EQ(filters_of(h5, "tables/0/keys"), std::vector<H5Z_filter_t>{});
}

TEST_F(Hdf5DatasetTest, CsvMultiHotBatchesEqualTheTextReaders) {
  const DataOptions options = csv_options();
  const std::string text_path = dir_.file("train.csv", csv_text(150));
  const std::string h5 = dir_.path() + "/train_csv.h5";
  // Every filter on: deflate on every dataset, shuffle, checksums.
  convert({"--from=csv", "--to=" + h5, "--input", text_path, "--config", write_deck(dir_, options), "--chunk-rows",
           "8", "--deflate", "6", "--deflate-below=1", "--checksum"});
  EXPECT_EQ(filters_of(h5, "tables/1/keys"), (std::vector<H5Z_filter_t>{H5Z_FILTER_DEFLATE, H5Z_FILTER_FLETCHER32}));
  EXPECT_EQ(filters_of(h5, "tables/1/offsets"),
            (std::vector<H5Z_filter_t>{H5Z_FILTER_SHUFFLE, H5Z_FILTER_DEFLATE, H5Z_FILTER_FLETCHER32}));
  const Drained text = read_text(options, text_path, 16);
  ASSERT_EQ(text.labels.size(), 150u);
  for (const int64_t block_rows : {0, 3, 8, 64}) {
    SCOPED_TRACE("block_rows " + std::to_string(block_rows));
    expect_same(text, read_hdf5(h5, 0, 1, 5, block_rows));
  }
  const Hdf5DatasetShape shape = read_hdf5_shape(h5);
  EXPECT_EQ(shape.source, "csv");
  EXPECT_EQ(shape.num_dense, 2);
  EXPECT_EQ(shape.multi_hot, (std::vector<bool>{false, true, true}));
  EXPECT_EQ(shape.csv_columns, options.csv_columns);
  EXPECT_EQ(shape.malformed_lines, 1);
  // Empty multi-hot fields give empty bags, and they survive the round trip.
  EXPECT_EQ(text.lengths[1][0], 0);
}

TEST_F(Hdf5DatasetTest, CsvWithoutDenseOrOneHotColumns) {
  DataOptions options;
  options.source = "csv";
  options.csv_columns = "multi:1:;,label";
  options.csv_delimiter = "tab";
  const std::string text_path = dir_.file("narrow.tsv", "a;b\t1\n\t0\nc\t1\n");
  const std::string h5 = dir_.path() + "/narrow.h5";
  convert({"--from", "csv", "--to", h5, "--input", text_path, "--data.csv_columns=" + options.csv_columns,
           "--data.csv_delimiter=tab"});
  EXPECT_EQ(hdf5_num_dense(h5), 0);
  expect_same(read_text(options, text_path, 2), read_hdf5(h5, 0, 1, 2));
}

// Multi-task CSV (one label column per task): labels (N, num_tasks) and the
// num_tasks attribute; the file reads back as the text does, every task's label.
TEST_F(Hdf5DatasetTest, MultiTaskLabelsRoundTrip) {
  DataOptions options;
  options.source = "csv";
  options.csv_columns = "label,dense:1,label,cat:1,label";
  std::string text;
  for (int i = 0; i < 40; ++i) {
    text += std::to_string(i % 2) + "," + std::to_string(i) + "," + std::to_string((i / 3) % 2) + ",c" +
            std::to_string(i % 5) + "," + std::to_string((i / 7) % 2) + "\n";
  }
  const std::string text_path = dir_.file("tasks.csv", text);
  const std::string h5 = dir_.path() + "/tasks.h5";
  convert({"--from", "csv", "--to", h5, "--input", text_path, "--data.csv_columns=" + options.csv_columns,
           "--chunk-rows", "8"});
  EXPECT_EQ(read_hdf5_shape(h5).num_tasks, 3);
  const Drained from_text = read_text(options, text_path, 6);
  ASSERT_EQ(from_text.labels.size(), 120u);
  for (const int64_t block_rows : {0, 5, 64}) expect_same(from_text, read_hdf5(h5, 0, 1, 6, block_rows));
  // A single-task file has no num_tasks attribute and reads as one label per sample.
  const std::string single = dir_.path() + "/single.h5";
  DataOptions one = options;
  one.csv_columns = "label,dense:1,skip:1,cat:1,skip:1";
  convert({"--from", "csv", "--to", single, "--input", text_path, "--data.csv_columns=" + one.csv_columns});
  EXPECT_EQ(read_hdf5_shape(single).num_tasks, 1);
  EXPECT_EQ(read_hdf5(single, 0, 1, 6).labels.size(), 40u);
}

TEST_F(Hdf5DatasetTest, DeflatesOnlyTheDatasetsThatShrinkALot) {
  std::string text;
  for (int i = 0; i < 300; ++i) {
    char hex[9];
    std::snprintf(hex, sizeof(hex), "%08x", unsigned(i) * 2654435761u);
    text += testing::criteo_line("0", {std::to_string(i % 2)}, {hex}) + "\n";  // C2..C26 empty
  }
  const std::string tsv = dir_.file("sparse.tsv", text);
  const std::string h5 = dir_.path() + "/sparse.h5";
  convert({"--from", "criteo", "--to", h5, "--input", tsv, "--chunk-rows", "256"});
  EXPECT_EQ(filters_of(h5, "labels"), (std::vector<H5Z_filter_t>{H5Z_FILTER_SHUFFLE, H5Z_FILTER_DEFLATE}));
  EXPECT_EQ(filters_of(h5, "tables/1/keys"), std::vector<H5Z_filter_t>{H5Z_FILTER_DEFLATE});
  EXPECT_EQ(filters_of(h5, "tables/0/keys"), std::vector<H5Z_filter_t>{});
  expect_same(read_text(testing::criteo_options(), tsv, 100), read_hdf5(h5, 0, 1, 100));
}

TEST_F(Hdf5DatasetTest, ShardsCoverEveryRowOnce) {
  const std::string h5 = criteo_h5();
  const Drained all = read_hdf5(h5, 0, 1, 64);
  for (int shards = 1; shards <= 4; ++shards) {
    std::vector<Drained> parts;
    size_t rows = 0;
    for (int s = 0; s < shards; ++s) {
      parts.push_back(read_hdf5(h5, s, shards, 10, 7));
      const size_t expected = size_t((s + 1) * 200 / shards - s * 200 / shards);
      EXPECT_EQ(parts.back().labels.size(), expected) << "shard " << s << " of " << shards;
      rows += parts.back().labels.size();
    }
    EXPECT_EQ(rows, 200u);
    SCOPED_TRACE(std::to_string(shards) + " shards");
    expect_same(all, concat(parts));
  }
  expect_error([&] { open_hdf5_reader(DataOptions(), h5, 4, 4); }, {"shard 4 of 4"});
}

TEST_F(Hdf5DatasetTest, SeekResumesExactlyAndRewindRestarts) {
  const std::string h5 = criteo_h5();
  for (const int shard : {0, 1}) {
    auto reader = open_hdf5_reader(DataOptions(), h5, shard, 2, Hdf5ReaderTuning{16});
    Batch batch;
    batch.reset(13, 26);
    ASSERT_EQ(reader->read(37, batch), 37);  // into the middle of the third chunk
    const ReaderPosition position = reader->position();
    EXPECT_EQ(position.byte_offset, shard * 100 + 37);
    EXPECT_EQ(position.line, position.byte_offset);
    const Drained rest = testing::drain(*reader, 9, 13, 26);
    EXPECT_EQ(rest.labels.size(), 63u);

    // A fresh reader (other block size) continues from the position with the same rows.
    auto resumed = open_hdf5_reader(DataOptions(), h5, shard, 2, Hdf5ReaderTuning{5});
    resumed->seek(position);
    expect_same(rest, testing::drain(*resumed, 4, 13, 26));

    // Seeking back on the first reader, and rewinding, replay the same rows.
    reader->seek(position);
    expect_same(rest, testing::drain(*reader, 50, 13, 26));
    reader->rewind();
    const Drained again = testing::drain(*reader, 100, 13, 26);
    expect_same(read_hdf5(h5, shard, 2, 100), again);
    EXPECT_EQ(reader->stats().samples, 37 + 63 + 63 + 100);
    EXPECT_EQ(reader->stats().malformed, 0);

    expect_error([&] { reader->seek({shard * 100 + 101, shard * 100 + 101}); }, {"not a row in", h5});
    expect_error([&] { reader->seek({shard * 100 + 5, 3}); }, {"not a row in"});
  }
}

TEST_F(Hdf5DatasetTest, ConvertingTwiceGivesTheSameBytes) {
  const std::string h5 = criteo_h5();
  const std::string again = dir_.path() + "/again.h5";
  convert({"--from", "criteo", "--to", again, "--input", criteo_tsv_, "--chunk-rows", "16"});
  auto bytes = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  EXPECT_EQ(bytes(h5), bytes(again));
}

TEST_F(Hdf5DatasetTest, ConvertRejectsBadArgumentsAndLeavesNoFile) {
  const std::string tsv = dir_.file("in.tsv", criteo_text(20));
  const std::string out = dir_.path() + "/out.h5";
  expect_error([&] { run_convert_command({"--to", out, "--input", tsv}); }, {"--from"});
  expect_error([&] { run_convert_command({"--from", "parquet", "--to", out, "--input", tsv}); }, {"parquet"});
  expect_error([&] { run_convert_command({"--from", "criteo", "--input", tsv}); }, {"--to"});
  expect_error([&] { run_convert_command({"--from", "criteo", "--to", out}); }, {"--input"});
  expect_error([&] { run_convert_command({"--from", "criteo", "--to", out, "--input", dir_.path() + "/no.tsv"}); },
               {"no.tsv", "does not exist"});
  expect_error([&] { run_convert_command({"--from", "criteo", "--to", dir_.path() + "/no/out.h5", "--input", tsv}); },
               {"does not exist"});
  expect_error([&] { run_convert_command({"--from", "criteo", "--to", tsv, "--input", tsv, "--force"}); },
               {"is the input file"});
  expect_error([&] { run_convert_command({"--from", "criteo", "--to", out, "--input", tsv, "--data.source=csv"}); },
               {"--data.source"});
  expect_error([&] { run_convert_command({"--from", "criteo", "--to", out, "--input", tsv, "--deflate", "12"}); },
               {"--deflate"});
  expect_error([&] { run_convert_command({"--from", "criteo", "--to", out, "--input", tsv, "--data.bogus=1"}); },
               {"data.bogus"});
  expect_error([&] { run_convert_command({"--from", "csv", "--to", out, "--input", tsv}); }, {"csv_columns"});
  // data.strict: the malformed line is fatal, and neither the output nor a temporary file remains.
  expect_error([&] { run_convert_command({"--from", "criteo", "--to", out, "--input", tsv, "--data.strict=true"}); },
               {"malformed line", "in.tsv:12"});
  // Only malformed lines: nothing to write.
  const std::string junk = dir_.file("junk.tsv", "x\ny\n");
  expect_error([&] { run_convert_command({"--from", "criteo", "--to", out, "--input", junk}); },
               {"no valid sample", "2 malformed of 2"});
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_.path()), fs::directory_iterator()), 2);

  convert({"--from", "criteo", "--to", out, "--input", tsv});
  expect_error([&] { run_convert_command({"--from", "criteo", "--to", out, "--input", tsv}); },
               {"already exists"});
  convert({"--from", "criteo", "--to", out, "--input", tsv, "--force"});
  EXPECT_EQ(read_hdf5_shape(out).num_rows, 20);
  // Shorter than one chunk (65536 rows): chunks of 20 rows, not 20 rows padded to 65536.
  EXPECT_EQ(read_hdf5_shape(out).chunk_rows, 20);
  EXPECT_LT(fs::file_size(out), 256u * 1024u);  // HDF5 metadata, not 26 x 512 KiB of key chunks
}

TEST_F(Hdf5DatasetTest, MissingForeignAndTruncatedFilesAreClearErrors) {
  const std::string h5 = criteo_h5();
  expect_error([&] { read_hdf5_shape(dir_.path() + "/missing.h5"); }, {"missing.h5", "does not exist"});
  const std::string text_as_h5 = copy_of(criteo_tsv_, "renamed.h5");
  expect_error([&] { open_hdf5_reader(DataOptions(), text_as_h5, 0, 1); }, {"renamed.h5", "not an HDF5 file"});
  expect_error([&] { read_hdf5_shape(dir_.path()); }, {"not a regular file"});

  const auto size = fs::file_size(h5);
  for (const double keep : {0.95, 0.5, 0.1}) {
    const std::string cut = copy_of(h5, "cut.h5");
    fs::resize_file(cut, uintmax_t(double(size) * keep));
    SCOPED_TRACE("kept " + std::to_string(keep));
    expect_error([&] { open_hdf5_reader(DataOptions(), cut, 0, 1); }, {"cut.h5", "truncated"});
  }

  // An HDF5 file that is not a strata dataset.
  const std::string foreign = dir_.path() + "/foreign.h5";
  {
    Hdf5Handle file(H5Fcreate(foreign.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    ASSERT_TRUE(file.valid());
  }
  expect_error([&] { read_hdf5_shape(foreign); }, {"foreign.h5", "not a strata dataset"});
}

// Opens a copy of the dataset for writing, lets `edit` change it, and returns the copy.
template <class Edit>
std::string edited_copy(const std::string& path, const std::string& copy, Edit&& edit) {
  fs::copy_file(path, copy, fs::copy_options::overwrite_existing);
  Hdf5Handle file(H5Fopen(copy.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
  if (!file.valid()) throw std::runtime_error("cannot open " + copy);
  edit(file.get());
  return copy;
}

TEST_F(Hdf5DatasetTest, NewerVersionsAndInconsistentFilesAreClearErrors) {
  const std::string h5 = criteo_h5();
  const std::string dir = dir_.path() + "/";
  namespace format = hdf5_format;

  const std::string newer = edited_copy(h5, dir + "newer.h5", [](hid_t file) {
    hdf5_write_int_attribute(file, format::kVersionAttr, format::kVersion + 1);
  });
  expect_error([&] { open_hdf5_reader(DataOptions(), newer, 0, 1); },
               {"newer.h5", "format version " + std::to_string(format::kVersion + 1)});

  const std::string longer = edited_copy(h5, dir + "longer.h5", [](hid_t file) {
    hdf5_write_int_attribute(file, format::kNumRowsAttr, 201);
  });
  expect_error([&] { read_hdf5_shape(longer); }, {"longer.h5", "'labels' has shape (200)", "expected (201)"});

  const std::string wider = edited_copy(h5, dir + "wider.h5", [](hid_t file) {
    hdf5_write_int_attribute(file, format::kNumDenseAttr, 14);
  });
  expect_error([&] { read_hdf5_shape(wider); }, {"'dense' has shape (200, 13)", "expected (200, 14)"});

  const std::string fewer = edited_copy(h5, dir + "fewer.h5", [](hid_t file) {
    H5Ldelete(file, "tables/25", H5P_DEFAULT);
  });
  expect_error([&] { read_hdf5_shape(fewer); }, {"holds 25 tables", "num_tables says 26"});

  const std::string retyped = edited_copy(h5, dir + "retyped.h5", [](hid_t file) {
    H5Ldelete(file, "labels", H5P_DEFAULT);
    const hsize_t n = 200;
    Hdf5Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
    Hdf5Handle labels(H5Dcreate2(file, "labels", H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                      H5Dclose);
  });
  expect_error([&] { read_hdf5_shape(retyped); }, {"'labels' is not float32"});
}

TEST_F(Hdf5DatasetTest, ShapeThatDiffersFromTheDeckIsAnError) {
  const std::string criteo = criteo_h5();
  DataOptions options = csv_options();
  const std::string csv_h5 = dir_.path() + "/train_csv.h5";
  convert({"--from", "csv", "--to", csv_h5, "--input", dir_.file("t.csv", csv_text(30)), "--config",
           write_deck(dir_, options)});

  // The deck's data.csv_columns describes other columns than the file was converted with.
  options.source = "hdf5";
  EXPECT_NO_THROW(open_hdf5_reader(options, csv_h5, 0, 1));
  options.csv_columns = "label,dense:2,cat:3";
  expect_error([&] { open_hdf5_reader(options, csv_h5, 0, 1); },
               {"train_csv.h5", "data.csv_columns = 'label,dense:2,cat:3'",
                "2 dense features and 3 tables (0 multi-hot)", "(2 multi-hot)"});

  // A held-out file whose shape differs from data.train's.
  DataOptions hdf5;
  hdf5.source = "hdf5";
  hdf5.train = criteo;
  hdf5.eval = csv_h5;
  EXPECT_NO_THROW(open_hdf5_reader(hdf5, criteo, 0, 1));
  expect_error([&] { open_hdf5_reader(hdf5, csv_h5, 0, 1); },
               {"train_csv.h5", "data.train", "13 dense features and 26 tables"});

  // A batch of another shape is refused rather than mixed.
  auto reader = open_hdf5_reader(DataOptions(), csv_h5, 0, 1);
  Batch batch;
  batch.reset(13, 26);
  batch.size = 1;
  expect_error([&] { reader->read(4, batch); }, {"batch has 13 dense and 26 tables"});
}

}  // namespace
}  // namespace strata::data
