// Behaviour sequences in HDF5 (issue 12): `strata convert --from sequences |
// synthetic_sequences` writes the corpus as jagged datasets, data.source = hdf5 reads
// back the identical corpus (and so identical next-item and click batches), with or
// without timestamps and side columns, cut by data.max_seq_len as the event reader
// cuts; the deck-time resolution of a sequence file; and clear errors naming the file
// and the dataset for truncated, incomplete or damaged files.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <random>

#include "app/convert_command.hpp"
#include "common/error.hpp"
#include "data/hdf5_handle.hpp"
#include "data/sequence_hdf5.hpp"
#include "data/sequence_next_item.hpp"
#include "data/sequence_samples.hpp"
#include "data_test_util.hpp"

namespace strata::data {
namespace {

using testing::ScratchDir;
namespace fs = std::filesystem;

// A SASRec-layout event file: users interleaved, lines shuffled (the reader orders
// them by timestamp), ties, a side column, and one malformed line.
std::string event_text(int users, bool timestamps, bool side, uint32_t seed = 3) {
  std::mt19937 rng(seed);
  std::vector<std::string> lines;
  for (int u = 0; u < users; ++u) {
    const int n = 1 + int(rng() % 23);
    for (int t = 0; t < n; ++t) {
      const int item = int(rng() % 97);
      std::string line = "u" + std::to_string(u) + "\ti" + std::to_string(item);
      if (timestamps) line += "\t" + std::to_string(1000 + 10 * (t / 2));  // pairs tie
      if (side) line += "\tc" + std::to_string(item % 5);
      lines.push_back(line);
    }
  }
  if (timestamps) std::shuffle(lines.begin(), lines.end(), rng);
  lines.insert(lines.begin() + ptrdiff_t(lines.size() / 2), timestamps ? "u1\ti3\tnoon" : "u1");
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

void expect_same(const SequenceCorpus& a, const SequenceCorpus& b) {
  EXPECT_EQ(a.first_user, b.first_user);
  EXPECT_EQ(a.side_names, b.side_names);
  EXPECT_EQ(a.user_keys, b.user_keys);
  EXPECT_EQ(a.offsets, b.offsets);
  EXPECT_EQ(a.items, b.items);
  EXPECT_EQ(a.timestamps, b.timestamps);
  EXPECT_EQ(a.side, b.side);
}

std::string convert(const std::vector<std::string>& args) {
  ::testing::internal::CaptureStdout();
  int code = 1;
  try {
    code = run_convert_command(args);
  } catch (...) {
    ::testing::internal::GetCapturedStdout();
    throw;
  }
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.find(" events, "), std::string::npos) << out;
  return out;
}

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

DataOptions event_options(const std::string& path, bool timestamps, bool side) {
  DataOptions options;
  options.source = "sequences";
  options.train = path;
  options.sequence_timestamps = timestamps;
  options.sequence_side_columns = side ? "category" : "";
  return options;
}

DataOptions hdf5_options(const std::string& path) {
  DataOptions options;
  options.source = "hdf5";
  options.train = path;
  return options;
}

std::vector<std::string> deck_flags(const DataOptions& options) {
  std::vector<std::string> flags = {"--data.sequence_timestamps=" +
                                    std::string(options.sequence_timestamps ? "true" : "false")};
  if (!options.sequence_side_columns.empty()) {
    flags.push_back("--data.sequence_side_columns=" + options.sequence_side_columns);
  }
  return flags;
}

// Every key of every bag, and the labels, of a batch: what a model sees.
void expect_same_batch(const Batch& a, const Batch& b) {
  EXPECT_EQ(a.size, b.size);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.dense, b.dense);
  ASSERT_EQ(a.tables.size(), b.tables.size());
  for (size_t t = 0; t < a.tables.size(); ++t) {
    EXPECT_EQ(a.tables[t].keys, b.tables[t].keys) << "table " << t;
    EXPECT_EQ(a.tables[t].offsets, b.tables[t].offsets) << "table " << t;
  }
}

class SequenceHdf5Test : public ::testing::Test {
 protected:
  // Converts an event file of 60 users; returns {events path, h5 path}.
  std::pair<std::string, std::string> converted(bool timestamps, bool side, const std::string& name,
                                                std::vector<std::string> extra = {}) {
    const std::string events = dir_.file(name + ".txt", event_text(60, timestamps, side));
    const std::string h5 = dir_.path() + "/" + name + ".h5";
    std::vector<std::string> args = {"--from", "sequences", "--to", h5, "--input", events, "--chunk-rows", "16"};
    for (const std::string& flag : deck_flags(event_options(events, timestamps, side))) args.push_back(flag);
    args.insert(args.end(), extra.begin(), extra.end());
    convert(args);
    return {events, h5};
  }
  ScratchDir dir_;
};

TEST_F(SequenceHdf5Test, RoundTripGivesTheEventFilesCorpus) {
  for (const bool timestamps : {true, false}) {
    for (const bool side : {true, false}) {
      SCOPED_TRACE(std::string("timestamps ") + (timestamps ? "on" : "off") + ", side " + (side ? "on" : "off"));
      const auto [events, h5] = converted(timestamps, side, "ev" + std::to_string(timestamps) + std::to_string(side));
      ParseStats text_stats, hdf5_stats;
      const auto text = load_sequence_corpus(event_options(events, timestamps, side), &text_stats);
      const auto hdf5 = load_sequence_corpus(hdf5_options(h5), &hdf5_stats);
      ASSERT_GT(text->num_events(), 100);
      expect_same(*text, *hdf5);
      EXPECT_EQ(text->timestamps.empty(), !timestamps);
      EXPECT_EQ(text->num_side(), side ? 1 : 0);
      EXPECT_EQ(text_stats.malformed, 1);
      EXPECT_EQ(hdf5_stats.malformed, 0);
      EXPECT_EQ(hdf5_stats.samples, text->num_events());
      const SequenceHdf5Info info = read_sequence_hdf5_info(h5);
      EXPECT_EQ(info.source, "sequences");
      EXPECT_EQ(info.num_users, text->num_users());
      EXPECT_EQ(info.num_events, text->num_events());
      EXPECT_EQ(info.timestamps, timestamps);
      EXPECT_EQ(info.side_names, text->side_names);
      EXPECT_EQ(info.input, events);
      EXPECT_EQ(info.input_lines, text_stats.lines);
      EXPECT_EQ(info.malformed_lines, 1);
      EXPECT_TRUE(is_sequence_hdf5(h5));
      // The click-sample tables a deck implies come from the file's side columns.
      EXPECT_EQ(sequence_sample_tables(hdf5_options(h5)), sequence_sample_tables(event_options(events, timestamps, side)));
    }
  }
}

TEST_F(SequenceHdf5Test, MaxSeqLenCutsAsTheEventReaderDoes) {
  const auto [events, h5] = converted(true, true, "cut");
  for (const int64_t max_len : {1, 3, 7}) {
    DataOptions text = event_options(events, true, true);
    DataOptions hdf5 = hdf5_options(h5);
    text.max_seq_len = hdf5.max_seq_len = max_len;
    expect_same(*load_sequence_corpus(text), *load_sequence_corpus(hdf5));
  }
  // A corpus converted with a cut records it and keeps only those events.
  const auto [events4, h5_4] = converted(true, true, "cut4", {"--data.max_seq_len=4"});
  EXPECT_EQ(read_sequence_hdf5_info(h5_4).max_seq_len, 4);
  DataOptions text = event_options(events4, true, true);
  text.max_seq_len = 4;
  expect_same(*load_sequence_corpus(text), *load_sequence_corpus(hdf5_options(h5_4)));
}

TEST_F(SequenceHdf5Test, NextItemAndClickBatchesEqualTheEventFiles) {
  const auto [events, h5] = converted(true, true, "batches");
  DataOptions text = event_options(events, true, true);
  DataOptions hdf5 = hdf5_options(h5);
  text.max_seq_len = hdf5.max_seq_len = 8;
  NextItemOptions next;
  next.max_history = 8;
  next.eval_negatives = 20;
  const NextItemSamples a(load_sequence_corpus(text), next), b(load_sequence_corpus(hdf5), next);
  for (const Stream stream : {Stream::kTrain, Stream::kEval}) {
    ASSERT_EQ(a.size(stream), b.size(stream));
    ASSERT_GT(a.size(stream), 10);
    expect_same_batch(testing::make_batch(a, stream, 3, 9), testing::make_batch(b, stream, 3, 9));
  }
  const SequenceSampleOptions ctr = sequence_sample_options(text);
  const SequenceSamples c(load_sequence_corpus(text), ctr), d(load_sequence_corpus(hdf5), ctr);
  for (const Stream stream : {Stream::kTrain, Stream::kEval}) {
    ASSERT_EQ(c.size(stream), d.size(stream));
    expect_same_batch(testing::make_batch(c, stream, 5, 17), testing::make_batch(d, stream, 5, 17));
  }
}

TEST_F(SequenceHdf5Test, SyntheticSequencesConvertWithoutAnInput) {
  const std::string h5 = dir_.path() + "/synthetic.h5";
  const std::vector<std::string> deck = {"--data.sequence_users=50", "--data.sequence_items=300",
                                         "--data.sequence_length=zipf:3:40"};
  std::vector<std::string> args = {"--from", "synthetic_sequences", "--to", h5};
  args.insert(args.end(), deck.begin(), deck.end());
  convert(args);
  DataOptions synthetic;
  synthetic.source = "synthetic_sequences";
  synthetic.sequence_users = 50;
  synthetic.sequence_items = 300;
  synthetic.sequence_length = "zipf:3:40";
  expect_same(*load_sequence_corpus(synthetic), *load_sequence_corpus(hdf5_options(h5)));
  EXPECT_EQ(read_sequence_hdf5_info(h5).source, "synthetic_sequences");
  // The same deck gives a byte-identical file.
  const std::string again = dir_.path() + "/again.h5";
  args[3] = again;
  convert(args);
  std::ifstream x(h5, std::ios::binary), y(again, std::ios::binary);
  EXPECT_TRUE(std::equal(std::istreambuf_iterator<char>(x), {}, std::istreambuf_iterator<char>(y)));
  expect_error([&] { run_convert_command({"--from", "synthetic_sequences", "--to", h5, "--force", "--input", h5}); },
               {"--input"});
}

TEST_F(SequenceHdf5Test, DeckResolution) {
  const auto files = converted(true, true, "deck");
  const std::string events = files.first, h5 = files.second;
  DataOptions data = hdf5_options(h5);
  data.sequence_task = "next_item";
  resolve_sequence_hdf5(data, "sasrec");
  EXPECT_EQ(data.eval, h5) << "the held-out events of the file itself are evaluated";
  DataOptions ctr = hdf5_options(h5);
  resolve_sequence_hdf5(ctr, "din");
  EXPECT_EQ(ctr.eval, h5);
  DataOptions other = hdf5_options(h5);
  other.eval = events;
  expect_error([&] { resolve_sequence_hdf5(other, "din"); }, {"data.eval", h5});
  DataOptions side = hdf5_options(h5);
  side.sequence_side_columns = "action";
  expect_error([&] { resolve_sequence_hdf5(side, "din"); }, {"data.sequence_side_columns", "category"});
  DataOptions task = hdf5_options(h5);
  expect_error([&] { resolve_sequence_hdf5(task, "sasrec"); }, {"data.sequence_task"});
  // Click samples are not sequences: a next-item model is refused, a click model passes.
  const std::string tsv = dir_.file("ctr.tsv", testing::numbered_criteo_line(1) + "\n" +
                                                   testing::numbered_criteo_line(2) + "\n");
  const std::string ctr_h5 = dir_.path() + "/ctr.h5";
  ::testing::internal::CaptureStdout();
  run_convert_command({"--from", "criteo", "--to", ctr_h5, "--input", tsv});
  ::testing::internal::GetCapturedStdout();
  EXPECT_FALSE(is_sequence_hdf5(ctr_h5));
  EXPECT_FALSE(is_sequence_hdf5(tsv));
  EXPECT_FALSE(is_sequence_hdf5(dir_.path() + "/missing.h5"));
  DataOptions click = hdf5_options(ctr_h5);
  click.sequence_task = "next_item";
  expect_error([&] { resolve_sequence_hdf5(click, "sasrec"); }, {"model.kind = sasrec", ctr_h5});
  DataOptions dlrm = hdf5_options(ctr_h5);
  resolve_sequence_hdf5(dlrm, "dlrm");
  EXPECT_TRUE(dlrm.eval.empty());
}

// Damages the copy of a file with HDF5 itself.
void edit(const std::string& path, const std::function<void(hid_t)>& change) {
  Hdf5Handle file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
  ASSERT_TRUE(file.valid());
  change(file.get());
}

TEST_F(SequenceHdf5Test, DamagedFilesAreClearErrorsNamingFileAndDataset) {
  const std::string h5 = converted(true, true, "damaged").second;
  auto copy = [&](const std::string& name) {
    const std::string path = dir_.path() + "/" + name + ".h5";
    fs::copy_file(h5, path, fs::copy_options::overwrite_existing);
    return path;
  };
  const std::string truncated = copy("truncated");
  fs::resize_file(truncated, fs::file_size(truncated) / 2);
  expect_error([&] { read_sequence_hdf5(truncated); }, {truncated, "truncated"});
  EXPECT_FALSE(is_sequence_hdf5(truncated));

  const std::string no_items = copy("no_items");
  edit(no_items, [](hid_t f) { H5Ldelete(f, "events/items", H5P_DEFAULT); });
  expect_error([&] { read_sequence_hdf5_info(no_items); }, {no_items, "events/items", "missing"});

  const std::string no_side = copy("no_side");
  edit(no_side, [](hid_t f) { H5Ldelete(f, "events/side", H5P_DEFAULT); });
  expect_error([&] { read_sequence_hdf5(no_side); }, {no_side, "events/side", "missing"});

  const std::string incomplete = copy("incomplete");
  edit(incomplete, [](hid_t f) { H5Adelete(f, "num_users"); });
  expect_error([&] { read_sequence_hdf5(incomplete); }, {incomplete, "incomplete", "num_users"});

  const std::string longer = copy("longer");  // num_events no longer matches the datasets
  edit(longer, [](hid_t f) {
    const int64_t events = 100000;
    Hdf5Handle attribute(H5Aopen(f, "num_events", H5P_DEFAULT), H5Aclose);
    H5Awrite(attribute.get(), H5T_NATIVE_INT64, &events);
  });
  expect_error([&] { read_sequence_hdf5(longer); }, {longer, "events/items", "shape"});

  const std::string decreasing = copy("decreasing");
  edit(decreasing, [](hid_t f) {
    Hdf5Handle dataset(H5Dopen2(f, "users/offsets", H5P_DEFAULT), H5Dclose);
    std::vector<int64_t> offsets(61);
    H5Dread(dataset.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, offsets.data());
    std::swap(offsets[10], offsets[11]);
    if (offsets[10] == offsets[11]) offsets[10] += 1;
    H5Dwrite(dataset.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, offsets.data());
  });
  expect_error([&] { read_sequence_hdf5(decreasing); }, {decreasing, "users/offsets", "decreases"});

  const std::string foreign = copy("foreign");
  edit(foreign, [](hid_t f) { hdf5_write_string_attribute(f, "source", "parquet"); });
  expect_error([&] { read_sequence_hdf5(foreign); }, {foreign, "parquet"});
  EXPECT_FALSE(is_sequence_hdf5(foreign));

  const std::string text = dir_.file("not.h5", "u1 i1 1\n");
  expect_error([&] { read_sequence_hdf5(text); }, {text, "not an HDF5 file"});
  expect_error([&] { read_sequence_hdf5(dir_.path() + "/missing.h5"); }, {"missing.h5", "does not exist"});
}

}  // namespace
}  // namespace strata::data
