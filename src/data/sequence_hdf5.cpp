// Sequence corpora in HDF5: the writer (whole chunks through ChunkedColumn), the
// validating reader (everything is checked before a corpus is handed out), and the
// deck-time resolution of data.source = hdf5 for a sequence file.
#include "data/sequence_hdf5.hpp"

#include <algorithm>
#include <filesystem>
#include <limits>

#include "common/error.hpp"
#include "data/hdf5_columns.hpp"
#include "data/hdf5_dataset_format.hpp"

namespace strata::data {

namespace format = hdf5_format;
using namespace hdf5_columns;

namespace {

constexpr int64_t kMaxSideColumns = 1024;
// Deflate shrinks data at most ~1032:1: a dataset stored in fewer bytes than this
// fraction of what its shape needs was not written by strata convert (or was cut).
constexpr double kMinStoredFraction = 1.0 / 1100.0;

std::string join(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ",") + name;
  return text;
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> names;
  if (text.empty()) return names;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    names.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return names;
}

Hdf5Handle create_group(hid_t parent, const char* name, const std::string& path) {
  const std::string what = "cannot create group '" + std::string(name) + "' in " + in_quotes(path);
  const std::string fix = "check that the output's file system has space";
  Hdf5Handle create(hdf5_check(H5Pcreate(H5P_GROUP_CREATE), what, fix), H5Pclose);
  H5Pset_obj_track_times(create.get(), false);  // no timestamps: equal inputs give equal files
  return Hdf5Handle(hdf5_check(H5Gcreate2(parent, name, H5P_DEFAULT, create.get(), H5P_DEFAULT), what, fix),
                    H5Gclose);
}

std::string users_dataset(const char* name) { return std::string(format::kUsers) + "/" + name; }
std::string events_dataset(const char* name) { return std::string(format::kEvents) + "/" + name; }

// An open sequence file whose layout has been checked against itself.
struct OpenSequences {
  std::string path;
  SequenceHdf5Info info;
  Hdf5Handle file;
  Column user_keys;   // (U)
  Column offsets;     // (U + 1)
  Column items;       // (E)
  Column timestamps;  // (E) when info.timestamps
  Column side;        // (E, S) when S > 0
};

// Refuses a dataset that holds far fewer bytes than its shape needs (a file cut
// short inside HDF5's own bookkeeping, or forged dimensions), before its length
// sizes any allocation.
void check_stored(const std::string& path, const std::string& name, const Column& column, int64_t width) {
  const double needed = double(column.length) * double(width) * 8.0;
  const double stored = double(H5Dget_storage_size(column.dataset.get()));
  if (needed > 0 && stored < needed * kMinStoredFraction) {
    throw Error("HDF5 dataset " + in_quotes(path) + ": '" + name + "' stores " + std::to_string(int64_t(stored)) +
                    " bytes, too few for its " + std::to_string(column.length) + " x " + std::to_string(width) +
                    " values (the file is damaged or truncated)",
                kRewriteFix);
  }
}

OpenSequences open_sequences(const std::string& path) {
  OpenSequences ds;
  ds.path = path;
  ds.file = open_file(path);
  const hid_t file = ds.file.get();
  const std::string what = "HDF5 dataset " + in_quotes(path);
  SequenceHdf5Info& info = ds.info;
  if (!hdf5_has_attribute(file, format::kFormatAttr) ||
      hdf5_read_string_attribute(file, format::kFormatAttr, what, kRewriteFix) != format::kFormatName) {
    throw Error(what + " is not a strata dataset (no '" + std::string(format::kFormatAttr) + "' attribute of '" +
                    format::kFormatName + "')",
                "data.train must name a file written by 'strata convert'");
  }
  const int64_t version = hdf5_read_int_attribute(file, format::kVersionAttr, what, kRewriteFix);
  if (version > format::kVersion || version < 1) {
    throw Error(what + " has format version " + std::to_string(version) + "; this strata reads versions 1 to " +
                    std::to_string(format::kVersion),
                "use the strata build that wrote it (or a newer one), or convert the input again with this one");
  }
  info.source = hdf5_read_string_attribute(file, format::kSourceAttr, what, kRewriteFix);
  if (!format::is_sequence_source(info.source)) {
    throw Error(what + ": source '" + info.source + "' is not behaviour sequences (sequences | synthetic_sequences)",
                "convert an event file with strata convert --from sequences");
  }
  if (!hdf5_has_attribute(file, format::kNumUsersAttr)) {
    throw Error(what + " is incomplete: it has no '" + std::string(format::kNumUsersAttr) +
                    "' attribute (written last; the conversion did not finish)",
                kRewriteFix);
  }
  constexpr int64_t kMaxLength = std::numeric_limits<int64_t>::max() / 16;
  info.num_users = checked_attribute(file, path, format::kNumUsersAttr, 1, kMaxLength);
  info.num_events = checked_attribute(file, path, format::kNumEventsAttr, 1, kMaxLength);
  info.timestamps = checked_attribute(file, path, format::kTimestampsAttr, 0, 1) == 1;
  info.max_seq_len = checked_attribute(file, path, format::kMaxSeqLenAttr, 0, kMaxLength);
  info.side_names = split_commas(hdf5_read_string_attribute(file, format::kSideColumnsAttr, what, kRewriteFix));
  if (int64_t(info.side_names.size()) > kMaxSideColumns) {
    throw Error(what + ": " + std::to_string(info.side_names.size()) + " side columns, more than " +
                    std::to_string(kMaxSideColumns),
                kRewriteFix);
  }
  if (hdf5_has_attribute(file, format::kInputAttr)) {
    info.input = hdf5_read_string_attribute(file, format::kInputAttr, what, kRewriteFix);
  }
  if (hdf5_has_attribute(file, format::kInputLinesAttr)) {
    info.input_lines = hdf5_read_int_attribute(file, format::kInputLinesAttr, what, kRewriteFix);
  }
  if (hdf5_has_attribute(file, format::kMalformedLinesAttr)) {
    info.malformed_lines = hdf5_read_int_attribute(file, format::kMalformedLinesAttr, what, kRewriteFix);
  }

  const int64_t users = info.num_users, events = info.num_events;
  const int64_t side = int64_t(info.side_names.size());
  // The groups first (a missing one is named as such), then every dataset by its path.
  hdf5_open_group(file, format::kUsers, what, kRewriteFix);
  hdf5_open_group(file, format::kEvents, what, kRewriteFix);
  const std::string user_keys = users_dataset(format::kKeys), offsets = users_dataset(format::kOffsets);
  const std::string items = events_dataset(format::kItems);
  ds.user_keys = open_column(path, file, user_keys, Element::kUint64, {users});
  ds.offsets = open_column(path, file, offsets, Element::kInt64, {users + 1});
  ds.items = open_column(path, file, items, Element::kUint64, {events});
  check_stored(path, user_keys, ds.user_keys, 1);
  check_stored(path, offsets, ds.offsets, 1);
  check_stored(path, items, ds.items, 1);
  if (info.timestamps) {
    const std::string timestamps = events_dataset(format::kTimestamps);
    ds.timestamps = open_column(path, file, timestamps, Element::kInt64, {events});
    check_stored(path, timestamps, ds.timestamps, 1);
  }
  if (side > 0) {
    const std::string values = events_dataset(format::kSide);
    ds.side = open_column(path, file, values, Element::kUint64, {events, side});
    check_stored(path, values, ds.side, side);
  }
  return ds;
}

}  // namespace

SequenceCorpus keep_most_recent(SequenceCorpus corpus, int64_t max_len) {
  if (max_len <= 0) return corpus;
  bool longer = false;
  for (int64_t u = 0; u < corpus.num_users() && !longer; ++u) longer = corpus.length(u) > max_len;
  if (!longer) return corpus;
  const int side = corpus.num_side();
  const bool timestamps = !corpus.timestamps.empty();
  SequenceCorpus cut;
  cut.first_user = corpus.first_user;
  cut.side_names = corpus.side_names;
  cut.user_keys = std::move(corpus.user_keys);
  for (int64_t u = 0; u < cut.num_users(); ++u) {
    const int64_t end = corpus.offsets[size_t(u) + 1];
    const int64_t begin = std::max(corpus.offsets[size_t(u)], end - max_len);
    cut.items.insert(cut.items.end(), corpus.items.begin() + begin, corpus.items.begin() + end);
    if (timestamps) {
      cut.timestamps.insert(cut.timestamps.end(), corpus.timestamps.begin() + begin, corpus.timestamps.begin() + end);
    }
    cut.side.insert(cut.side.end(), corpus.side.begin() + begin * side, corpus.side.begin() + end * side);
    cut.offsets.push_back(int64_t(cut.items.size()));
  }
  return cut;
}

void write_sequence_hdf5(const std::string& path, const SequenceCorpus& corpus, const SequenceHdf5Header& header,
                         const Hdf5WriterOptions& options) {
  const Hdf5QuietErrors quiet;
  const int64_t users = corpus.num_users(), events = corpus.num_events();
  const int side = corpus.num_side();
  if (corpus.first_user != 0 || users < 1 || events < 1 || corpus.offsets.size() != size_t(users + 1) ||
      corpus.offsets.front() != 0 || corpus.offsets.back() != events ||
      (!corpus.timestamps.empty() && corpus.timestamps.size() != size_t(events)) ||
      corpus.side.size() != size_t(events) * size_t(side)) {
    throw Error("cannot write " + in_quotes(path) + ": the corpus of " + std::to_string(users) + " users and " +
                    std::to_string(events) + " events is not a whole, consistent corpus",
                "this is a bug in the converter: write the corpus load_sequence_corpus returns");
  }
  if (!format::is_sequence_source(header.source)) {
    throw Error("cannot write " + in_quotes(path) + " as source '" + header.source + "'",
                "the source of a sequence file is sequences or synthetic_sequences");
  }
  if (options.chunk_rows < 1 || options.chunk_rows > format::kMaxChunkRows || options.deflate_level < 0 ||
      options.deflate_level > 9 || !(options.deflate_below >= 0.0 && options.deflate_below <= 1.0)) {
    throw Error("writer options out of range (chunk rows " + std::to_string(options.chunk_rows) + ", deflate " +
                    std::to_string(options.deflate_level) + ")",
                "use 1 .. " + std::to_string(format::kMaxChunkRows) + " rows per chunk and deflate 0 .. 9");
  }
  const std::string create_fix = "check that the directory of '" + path + "' exists and is writable";
  Hdf5Handle access(hdf5_check(H5Pcreate(H5P_FILE_ACCESS), "cannot create '" + path + "'", create_fix), H5Pclose);
  hdf5_check_status(H5Pset_libver_bounds(access.get(), H5F_LIBVER_V18, H5F_LIBVER_LATEST),
                    "cannot create '" + path + "'", create_fix);
  Hdf5Handle create(hdf5_check(H5Pcreate(H5P_FILE_CREATE), "cannot create '" + path + "'", create_fix), H5Pclose);
  H5Pset_obj_track_times(create.get(), false);
  Hdf5Handle file(hdf5_check(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, create.get(), access.get()),
                             "cannot create HDF5 file '" + path + "'", create_fix),
                  H5Fclose);
  const hid_t root = file.get();
  hdf5_write_string_attribute(root, format::kFormatAttr, format::kFormatName);
  hdf5_write_int_attribute(root, format::kVersionAttr, format::kVersion);
  hdf5_write_string_attribute(root, format::kSourceAttr, header.source);
  hdf5_write_int_attribute(root, format::kNumEventsAttr, events);
  hdf5_write_string_attribute(root, format::kSideColumnsAttr, join(corpus.side_names));
  hdf5_write_int_attribute(root, format::kTimestampsAttr, corpus.timestamps.empty() ? 0 : 1);
  hdf5_write_int_attribute(root, format::kMaxSeqLenAttr, header.max_seq_len);
  hdf5_write_int_attribute(root, format::kUserTableAttr, header.hashing.user_table);
  hdf5_write_int_attribute(root, format::kItemTableAttr, header.hashing.item_table);
  hdf5_write_int_attribute(root, format::kFirstSideTableAttr, header.hashing.first_side_table);
  hdf5_write_string_attribute(root, format::kInputAttr, header.input);
  hdf5_write_string_attribute(root, format::kKeyHashAttr,
                              "XXH3-64 of the token's bytes, seeded per table (strata feature_key)");
  hdf5_write_string_attribute(root, format::kCompressionAttr, compression_text(options));

  // Values are hashes (no byte shuffle); offsets and timestamps grow slowly (shuffle helps deflate).
  const bool shuffle = options.shuffle;
  const int64_t chunk = std::min<int64_t>(options.chunk_rows, std::max<int64_t>(1, (int64_t(16) << 20) /
                                                                                       (8 * std::max(1, side))));
  {
    Hdf5Handle group = create_group(root, format::kUsers, path);
    ChunkedColumn keys(group.get(), {format::kKeys, H5T_STD_U64LE, H5T_NATIVE_UINT64, 1, 1, false}, chunk,
                       options, path);
    keys.append(corpus.user_keys.data(), users);
    keys.finish();
    ChunkedColumn offsets(group.get(), {format::kOffsets, H5T_STD_I64LE, H5T_NATIVE_INT64, 1, 1, shuffle}, chunk,
                          options, path);
    offsets.append(corpus.offsets.data(), users + 1);
    offsets.finish();
  }
  {
    Hdf5Handle group = create_group(root, format::kEvents, path);
    ChunkedColumn items(group.get(), {format::kItems, H5T_STD_U64LE, H5T_NATIVE_UINT64, 1, 1, false}, chunk,
                        options, path);
    items.append(corpus.items.data(), events);
    items.finish();
    if (!corpus.timestamps.empty()) {
      ChunkedColumn times(group.get(), {format::kTimestamps, H5T_STD_I64LE, H5T_NATIVE_INT64, 1, 1, shuffle}, chunk,
                          options, path);
      times.append(corpus.timestamps.data(), events);
      times.finish();
    }
    if (side > 0) {
      ChunkedColumn values(group.get(), {format::kSide, H5T_STD_U64LE, H5T_NATIVE_UINT64, 2, side, false}, chunk,
                           options, path);
      values.append(corpus.side.data(), events);
      values.finish();
    }
  }
  hdf5_write_int_attribute(root, format::kChunkRowsAttr, chunk);
  hdf5_write_int_attribute(root, format::kInputLinesAttr, header.input_lines);
  hdf5_write_int_attribute(root, format::kMalformedLinesAttr, header.malformed_lines);
  hdf5_write_int_attribute(root, format::kNumUsersAttr, users);  // last: the file is complete
  // Closing flushes everything: only a clean close means a complete file.
  const herr_t closed = H5Fclose(file.get());
  file = Hdf5Handle();
  hdf5_check_status(closed, "cannot close '" + path + "' after writing it",
                    "check that the output's file system has space");
}

bool is_sequence_hdf5(const std::string& path) {
  const Hdf5QuietErrors quiet;
  std::error_code ec;
  if (path.empty() || !std::filesystem::is_regular_file(path, ec)) return false;
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    hdf5_failure();
    return false;
  }
  Hdf5Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.valid()) {
    hdf5_failure();
    return false;
  }
  try {
    return hdf5_has_attribute(file.get(), format::kSourceAttr) &&
           format::is_sequence_source(hdf5_read_string_attribute(file.get(), format::kSourceAttr, path, ""));
  } catch (const Error&) {
    return false;
  }
}

SequenceHdf5Info read_sequence_hdf5_info(const std::string& path) {
  const Hdf5QuietErrors quiet;
  return open_sequences(path).info;
}

SequenceCorpus read_sequence_hdf5(const std::string& path, ParseStats* stats) {
  const Hdf5QuietErrors quiet;
  const OpenSequences ds = open_sequences(path);
  const SequenceHdf5Info& info = ds.info;
  const int64_t users = info.num_users, events = info.num_events;
  const int64_t side = int64_t(info.side_names.size());
  const std::string offsets = users_dataset(format::kOffsets);
  SequenceCorpus corpus;
  corpus.side_names = info.side_names;
  corpus.user_keys.resize(size_t(users));
  corpus.offsets.resize(size_t(users + 1));
  read_rows(path, users_dataset(format::kKeys).c_str(), ds.user_keys, Element::kUint64, 0, users, 1,
            corpus.user_keys.data());
  read_rows(path, offsets.c_str(), ds.offsets, Element::kInt64, 0, users + 1, 1, corpus.offsets.data());
  // Offsets bound everything read through them: check them all before any use.
  if (corpus.offsets.front() != 0 || corpus.offsets.back() != events) {
    throw Error("HDF5 dataset " + in_quotes(path) + ": '" + offsets + "' runs from " +
                    std::to_string(corpus.offsets.front()) + " to " + std::to_string(corpus.offsets.back()) +
                    ", expected 0 to " + std::to_string(events) + " (num_events)",
                kRewriteFix);
  }
  for (int64_t u = 0; u < users; ++u) {
    if (corpus.offsets[size_t(u) + 1] < corpus.offsets[size_t(u)]) {
      throw Error("HDF5 dataset " + in_quotes(path) + ": '" + offsets + "' decreases at user " + std::to_string(u),
                  kRewriteFix);
    }
  }
  corpus.items.resize(size_t(events));
  read_rows(path, events_dataset(format::kItems).c_str(), ds.items, Element::kUint64, 0, events, 1,
            corpus.items.data());
  if (info.timestamps) {
    corpus.timestamps.resize(size_t(events));
    read_rows(path, events_dataset(format::kTimestamps).c_str(), ds.timestamps, Element::kInt64, 0, events, 1,
              corpus.timestamps.data());
  }
  if (side > 0) {
    corpus.side.resize(size_t(events * side));
    read_rows(path, events_dataset(format::kSide).c_str(), ds.side, Element::kUint64, 0, events, side,
              corpus.side.data());
  }
  if (stats) {
    stats->lines += events;
    stats->samples += events;
  }
  return corpus;
}

void resolve_sequence_hdf5(DataOptions& data, const std::string& model_kind) {
  if (data.source != "hdf5" || data.train.empty()) return;
  const bool ranks = model_kind == "sasrec" || model_kind == "hstu";
  if (!is_sequence_hdf5(data.train)) {
    std::error_code ec;
    if (ranks && std::filesystem::is_regular_file(data.train, ec)) {
      throw Error("model.kind = " + model_kind + " reads behaviour sequences, but data.train '" + data.train +
                      "' is not a sequence file (data.source = hdf5 takes files of strata convert --from sequences)",
                  "convert the event file with strata convert --from sequences --input EVENTS --to FILE.h5, or "
                  "set data.source = sequences (an event file) or synthetic_sequences");
    }
    return;  // click samples, or a file the input checks report
  }
  const SequenceHdf5Info info = read_sequence_hdf5_info(data.train);
  if (data.eval.empty()) {
    data.eval = data.train;  // the held-out events of the file itself, as data.source = sequences evaluates
  } else {
    std::error_code ec;
    if (data.eval != data.train && !std::filesystem::equivalent(data.eval, data.train, ec)) {
      throw Error("data.eval = '" + data.eval + "', but data.train '" + data.train +
                      "' holds behaviour sequences, which evaluate on each user's held-out last events (the "
                      "SASRec split)",
                  "remove data.eval; data.sequence_eval chooses the validation or the test event");
    }
  }
  if (!data.sequence_side_columns.empty() && data.sequence_side_columns != join(info.side_names)) {
    throw Error("data.sequence_side_columns = '" + data.sequence_side_columns + "', but '" + data.train +
                    "' holds the side columns '" + join(info.side_names) + "'",
                "remove data.sequence_side_columns (the file says which it holds), or convert the event file "
                "again with these columns");
  }
  if (data.max_seq_len < 0) {
    throw Error("data.max_seq_len = " + std::to_string(data.max_seq_len) + " is negative",
                "use 0 (every event) or the number of most recent events to keep");
  }
  if (data.sequence_negatives < 1 || data.sequence_eval_negatives < 1) {
    throw Error("data.sequence_negatives and data.sequence_eval_negatives must be >= 1",
                "set both to a positive number of negatives");
  }
  const bool next_item = data.sequence_task == "next_item";
  if (next_item != ranks) {
    throw Error("model.kind = " + model_kind + " does not train on data.sequence_task = " + data.sequence_task +
                    " samples",
                ranks ? "set data.sequence_task = next_item (one sample per user, ranked candidates)"
                      : "set data.sequence_task = ctr, or model.kind = sasrec | hstu for next_item samples");
  }
}

}  // namespace strata::data
