// `strata convert`: command-line parsing, the read (text reader) -> write
// (Hdf5DatasetWriter) loop for click samples, the corpus -> write_sequence_hdf5 path
// for behaviour sequences, and the temporary-name-then-rename discipline that
// leaves either the complete file or nothing at the target path.
#include "app/convert_command.hpp"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "common/error.hpp"
#include "config/deck.hpp"
#include "data/csv_format.hpp"
#include "data/hdf5_dataset_writer.hpp"
#include "data/sample_reader.hpp"
#include "data/sequence_hdf5.hpp"
#include "data/sequence_samples.hpp"

namespace strata {

const char* const kConvertUsage =
    "usage: strata convert --from criteo|csv|sequences|synthetic_sequences --to FILE.h5 [--input TEXTFILE]\n"
    "                      [options] [--config DECK]\n"
    "                      [--section.key=value ...]\n"
    "\n"
    "Writes TEXTFILE as a columnar HDF5 dataset (labels, transformed dense values, hashed keys)\n"
    "that producers read with data.source = hdf5 (docs/DATA_HDF5.md). Behaviour sequences (an event\n"
    "file, or the synthetic_sequences generator without --input) become per-user jagged events.\n"
    "\n"
    "  --from FORMAT        criteo | csv (data.csv_columns etc. from the deck) | sequences (an event\n"
    "                       file: data.sequence_timestamps, sequence_side_columns, sequence_header,\n"
    "                       max_seq_len) | synthetic_sequences (data.sequence_users, ..., data_seed)\n"
    "  --to FILE.h5         output; written under a temporary name, renamed when complete\n"
    "  --input TEXTFILE     text file to convert (every line, one shard); none for synthetic_sequences\n"
    "  --force              replace FILE.h5 if it exists\n"
    "  --chunk-rows N       rows per HDF5 chunk (default 65536)\n"
    "  --deflate L          zlib level 0 (off) .. 9 (default 1)\n"
    "  --deflate-below F    deflate only the datasets whose first chunk shrinks below fraction F\n"
    "                       (default 0.2; 1 = every dataset): inflating costs more than it saves otherwise\n"
    "  --checksum           add a Fletcher-32 checksum to every chunk (reads at about half the speed)\n"
    "  --config DECK, --data.key=value   how to read the text: data.csv_columns, csv_delimiter,\n"
    "                       csv_header, strict (first malformed line fatal), max_errors_reported\n";

namespace {

namespace fs = std::filesystem;

constexpr const char* kExample = "e.g. strata convert --from criteo --to train.h5 --input train.tsv";

struct ConvertArgs {
  std::string from;                    // criteo | csv | sequences | synthetic_sequences
  std::string to;                      // the HDF5 file to write
  std::string input;                   // the text file to read
  bool force = false;                  // replace an existing output
  bool help = false;
  data::Hdf5WriterOptions writer;      // chunking and compression
  std::vector<std::string> deck_args;  // everything else, for parse_run_options
};

int64_t parse_integer(const std::string& flag, const std::string& text, int64_t lo, int64_t hi) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < lo || value > hi) {
    throw Error("strata convert: " + flag + " '" + text + "' is not an integer in [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "]",
                std::string("e.g. ") + (flag == "--deflate" ? "--deflate 1" : "--chunk-rows 65536"));
  }
  return value;
}

double parse_fraction(const std::string& flag, const std::string& text) {
  double value = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !(value >= 0.0 && value <= 1.0)) {
    throw Error("strata convert: " + flag + " '" + text + "' is not a fraction in [0, 1]",
                "e.g. " + flag + " 0.2 (1 deflates every dataset)");
  }
  return value;
}

ConvertArgs parse_convert_args(const std::vector<std::string>& args) {
  ConvertArgs parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    const size_t equals = word.find('=');
    const std::string flag = word.substr(0, equals);
    if (flag == "--help" || flag == "-h") {
      parsed.help = true;
      continue;
    }
    if (flag == "--force" || flag == "--checksum") {
      if (equals != std::string::npos) throw Error("strata convert: " + flag + " takes no value", "write just " + flag);
      (flag == "--force" ? parsed.force : parsed.writer.checksum) = true;
      continue;
    }
    if (flag == "--data.source" || flag == "--data.train") {
      throw Error("strata convert: " + flag + " cannot be set here",
                  "give the format with --from criteo|csv|sequences|synthetic_sequences and the text file "
                  "with --input");
    }
    const bool ours = flag == "--from" || flag == "--to" || flag == "--input" || flag == "--chunk-rows" ||
                      flag == "--deflate" || flag == "--deflate-below";
    if (!ours) {
      parsed.deck_args.push_back(word);  // --config DECK and --section.key=value go to the deck parser
      continue;
    }
    std::string value;
    if (equals != std::string::npos) {
      value = word.substr(equals + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      throw Error("strata convert: " + flag + " needs a value", kExample);
    }
    if (flag == "--from") parsed.from = value;
    if (flag == "--to") parsed.to = value;
    if (flag == "--input") parsed.input = value;
    if (flag == "--chunk-rows") parsed.writer.chunk_rows = parse_integer(flag, value, 1, int64_t(1) << 24);
    if (flag == "--deflate") parsed.writer.deflate_level = int(parse_integer(flag, value, 0, 9));
    if (flag == "--deflate-below") parsed.writer.deflate_below = parse_fraction(flag, value);
  }
  if (parsed.help) return parsed;
  if (parsed.from.empty()) throw Error("strata convert needs --from criteo|csv|sequences|synthetic_sequences", kExample);
  if (parsed.from != "criteo" && parsed.from != "csv" && parsed.from != "sequences" &&
      parsed.from != "synthetic_sequences") {
    throw Error("strata convert: --from '" + parsed.from + "' is not a format it converts",
                "use --from criteo (Criteo TSV), csv (with data.csv_columns in the deck), sequences (an event "
                "file) or synthetic_sequences (generated, no --input)");
  }
  if (parsed.to.empty()) throw Error("strata convert needs --to FILE.h5", kExample);
  const bool generated = parsed.from == "synthetic_sequences";
  if (parsed.input.empty() && !generated) throw Error("strata convert needs --input TEXTFILE", kExample);
  if (!parsed.input.empty() && generated) {
    throw Error("strata convert --from synthetic_sequences generates its data: --input is not used",
                "drop --input; data.sequence_users, sequence_items, sequence_length and data_seed shape the data");
  }
  return parsed;
}

void check_paths(const ConvertArgs& args) {
  std::error_code ec;
  if (!args.input.empty() && !fs::exists(args.input, ec)) {
    throw Error("strata convert: input '" + args.input + "' does not exist", "check the path given to --input");
  }
  if (!args.input.empty() && !fs::is_regular_file(args.input, ec)) {
    throw Error("strata convert: input '" + args.input + "' is not a regular file", "name the text file itself");
  }
  const fs::path target(args.to);
  const fs::path directory = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (!fs::is_directory(directory, ec)) {
    throw Error("strata convert: directory '" + directory.string() + "' of --to does not exist",
                "create it first, or choose another --to");
  }
  if (fs::exists(target, ec)) {
    if (!args.input.empty() && fs::equivalent(target, args.input, ec)) {
      throw Error("strata convert: --to '" + args.to + "' is the input file", "choose another --to");
    }
    if (fs::is_directory(target, ec)) {
      throw Error("strata convert: --to '" + args.to + "' is a directory", "name the .h5 file to write");
    }
    if (!args.force) {
      throw Error("strata convert: '" + args.to + "' already exists",
                  "add --force to replace it, or choose another --to");
    }
  }
}

void require_single_process() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 1) {
    throw Error("strata convert runs on one process, not " + std::to_string(size),
                "run it without mpirun, or with mpirun -n 1");
  }
}

data::Hdf5DatasetHeader make_header(const DataOptions& options, const std::string& input) {
  data::Hdf5DatasetHeader header;
  header.source = options.source;
  header.input = input;
  header.num_dense = data::text_num_dense(options);
  header.num_tasks = data::text_num_tasks(options);
  header.multi_hot.assign(size_t(data::text_num_tables(options)), false);
  if (options.source == "csv") {
    const data::CsvSchema schema = data::parse_csv_schema(options);
    for (const data::CsvColumn& column : schema.columns) {
      // Multi-hot and sequence tables are jagged: values + offsets.
      if (column.kind == data::CsvColumn::Kind::kMultiHot || column.kind == data::CsvColumn::Kind::kSequence) {
        header.multi_hot[size_t(column.target)] = true;
      }
    }
    header.csv_columns = options.csv_columns;
    header.csv_delimiter = options.csv_delimiter;
  }
  return header;
}

struct Conversion {
  data::ParseStats stats;
  int64_t rows = 0;   // samples, or events of a sequence corpus
  int64_t users = 0;  // sequence corpora only
};

Conversion convert(const DataOptions& options, const ConvertArgs& args, const std::string& temporary) {
  auto reader = data::open_text_reader(options, args.input, 0, 1);
  const data::Hdf5DatasetHeader header = make_header(options, args.input);
  data::Hdf5DatasetWriter writer(temporary, header, args.writer);
  data::Batch batch;
  // At most a chunk per read: the writer then never buffers more than a chunk and a read.
  const auto rows_per_read = int32_t(std::min<int64_t>(writer.chunk_rows(), 65536));
  while (true) {
    batch.reset(header.num_dense, int32_t(header.multi_hot.size()));
    if (reader->read(rows_per_read, batch) == 0) break;
    writer.append(batch);
  }
  Conversion result{reader->stats(), writer.rows()};
  if (result.rows == 0) {
    throw Error("strata convert: '" + args.input + "' holds no valid sample (" +
                    std::to_string(result.stats.malformed) + " malformed of " + std::to_string(result.stats.lines) +
                    " lines)",
                "check --from" + std::string(args.from == "csv" ? " and data.csv_columns / csv_delimiter" : "") +
                    " against the file");
  }
  writer.finish(result.stats.lines, result.stats.malformed);
  return result;
}

// Behaviour sequences: the corpus training would build (grouped, ordered, hashed, cut
// to data.max_seq_len), written whole; rows are events.
Conversion convert_sequences(const DataOptions& options, const ConvertArgs& args, const std::string& temporary) {
  Conversion result;
  const auto corpus = data::load_sequence_corpus(options, &result.stats);
  data::SequenceHdf5Header header;
  header.source = options.source;
  header.input = args.input;
  header.max_seq_len = options.max_seq_len;
  header.input_lines = result.stats.lines;
  header.malformed_lines = result.stats.malformed;
  data::write_sequence_hdf5(temporary, *corpus, header, args.writer);
  result.rows = corpus->num_events();
  result.users = corpus->num_users();
  return result;
}

}  // namespace

int run_convert_command(const std::vector<std::string>& words) {
  const ConvertArgs args = parse_convert_args(words);
  if (args.help) {
    std::printf("%s", kConvertUsage);
    return 0;
  }
  std::vector<std::string> deck_args = args.deck_args;
  deck_args.push_back("--data.source=" + args.from);
  if (!args.input.empty()) deck_args.push_back("--data.train=" + args.input);
  const RunOptions options = parse_run_options(deck_args);
  check_paths(args);
  require_single_process();

  const auto start = std::chrono::steady_clock::now();
  const std::string temporary = args.to + ".tmp-" + std::to_string(::getpid());
  Conversion result;
  try {
    const bool sequences = args.from == "sequences" || args.from == "synthetic_sequences";
    result = sequences ? convert_sequences(options.data, args, temporary) : convert(options.data, args, temporary);
    std::error_code renamed;
    fs::rename(temporary, args.to, renamed);
    if (renamed) {
      throw Error("strata convert: cannot rename '" + temporary + "' to '" + args.to + "': " + renamed.message(),
                  "check the permissions of the directory of --to");
    }
  } catch (...) {
    std::error_code ec;
    fs::remove(temporary, ec);
    throw;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::error_code ec;
  const auto bytes = int64_t(fs::file_size(args.to, ec));
  const auto text_bytes = args.input.empty() ? int64_t(0) : int64_t(fs::file_size(args.input, ec));
  const std::string from = args.input.empty() ? args.from : args.input;
  const std::string what = result.users > 0 ? std::to_string(result.users) + " users, " +
                                                  std::to_string(result.rows) + " events"
                                            : std::to_string(result.rows) + " rows";
  std::printf(
      "strata convert: %s -> %s: %s, %lld malformed lines skipped, %lld bytes (%.1f per %s, text %lld), %.2f s\n",
      from.c_str(), args.to.c_str(), what.c_str(), static_cast<long long>(result.stats.malformed),
      static_cast<long long>(bytes), double(bytes) / double(result.rows), result.users > 0 ? "event" : "row",
      static_cast<long long>(text_bytes), seconds);
  std::fflush(stdout);
  return 0;
}

}  // namespace strata
