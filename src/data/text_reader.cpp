// The text SampleReader: LineSource (sharding, buffered reads, line numbers) plus a
// LineParser per format, and the malformed-line policy: count, log the first
// data.max_errors_reported with file:line and reason, skip; or throw with data.strict.
#include "data/text_reader.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "data/criteo_format.hpp"
#include "data/csv_format.hpp"

namespace strata::data {

// ---- helpers shared by the formats ---------------------------------------------

std::string quote_field(std::string_view text) {
  constexpr size_t kMax = 40;
  std::string out;
  for (size_t i = 0; i < text.size() && i < kMax; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(char(c));
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (text.size() > kMax) out += "...";
  return out;
}

std::unique_ptr<LineParser> make_line_parser(const DataOptions& options) {
  if (options.source == "criteo") return std::make_unique<CriteoParser>(options.strict);
  if (options.source == "csv") return std::make_unique<CsvParser>(parse_csv_schema(options));
  throw Error("data.source = '" + options.source + "' has no text reader",
              "use data.source=criteo or csv for files (synthetic data comes from SyntheticDataset)");
}

int text_num_dense(const DataOptions& options) {
  if (options.source == "criteo") return CriteoParser::kNumDense;
  if (options.source == "csv") return parse_csv_schema(options).num_dense;
  if (options.source == "synthetic") return options.num_dense;
  throw Error("data.source = '" + options.source + "' is unknown", "use criteo, csv or synthetic");
}

int text_num_tables(const DataOptions& options) {
  if (options.source == "criteo") return CriteoParser::kNumTables;
  if (options.source == "csv") return parse_csv_schema(options).num_tables;
  if (options.source == "synthetic") return options.num_tables + (options.synthetic_history_length > 0 ? 1 : 0);
  throw Error("data.source = '" + options.source + "' is unknown", "use criteo, csv or synthetic");
}

int text_num_tasks(const DataOptions& options) {
  if (options.source == "csv") return parse_csv_schema(options).num_tasks;
  if (options.source == "synthetic") return options.synthetic_tasks;
  return 1;
}

// ---- LineSource ----------------------------------------------------------------

namespace {

Error file_error(const std::string& path, const std::string& problem, const std::string& fix) {
  return Error("data file '" + path + "' " + problem, fix);
}

constexpr const char* kPathFix = "check the path given in data.train / data.eval";

}  // namespace

LineSource::LineSource(const std::string& path, int shard, int num_shards, bool skip_header,
                       const TextReaderTuning& tuning)
    : path_(path), tuning_(tuning) {
  if (num_shards < 1 || shard < 0 || shard >= num_shards) {
    throw Error("shard " + std::to_string(shard) + " of " + std::to_string(num_shards) + " of '" + path +
                    "' does not exist",
                "shards are numbered 0 .. num_shards - 1");
  }
  tuning_.buffer_bytes = std::max<size_t>(tuning_.buffer_bytes, 16);
  tuning_.max_line_bytes = std::max<size_t>(tuning_.max_line_bytes, 1);
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    const int err = errno;
    if (err == ENOENT) throw file_error(path, "does not exist", kPathFix);
    if (err == EACCES)
      throw file_error(path, "cannot be read (permission denied)", "make it readable: chmod a+r");
    throw file_error(path, std::string("cannot be opened: ") + std::strerror(err), kPathFix);
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || S_ISDIR(st.st_mode) || !S_ISREG(st.st_mode)) {
    const bool dir = S_ISDIR(st.st_mode);
    ::close(fd_);
    fd_ = -1;
    throw file_error(path, dir ? "is a directory, not a file" : "is not a regular file",
                     dir ? "name the data file inside it" : "copy the data into a regular file");
  }
  file_size_ = int64_t(st.st_size);
  try {
    if (file_size_ == 0) {
      throw file_error(path, "contains no samples (the file is empty)",
                       "point data.train / data.eval at a data file");
    }
    buffer_.resize(tuning_.buffer_bytes);
    int64_t data_start = 0;
    if (skip_header) {
      data_start = align_to_line_start(1, 0);  // just past the first '\n'
      if (data_start >= file_size_) {
        throw file_error(path, "contains no samples (only a header line)",
                         "add data lines, or set data.csv_header=false if the first line is data");
      }
    }
    __extension__ using u128 = unsigned __int128;
    const auto cut = [&](int s) { return int64_t(u128(file_size_) * u128(s) / u128(num_shards)); };
    begin_ = align_to_line_start(cut(shard), data_start);
    end_ = align_to_line_start(cut(shard + 1), data_start);
    // True line numbers: count the newlines before the shard once.
    for (int64_t at = 0; at < begin_;) {
      file_pos_ = at;
      const size_t n = read_some(0, size_t(std::min<int64_t>(int64_t(buffer_.size()), begin_ - at)));
      begin_line_ += std::count(buffer_.data(), buffer_.data() + n, '\n');
      at += int64_t(n);
    }
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
  seek(begin_, begin_line_);
}

LineSource::~LineSource() {
  if (fd_ >= 0) ::close(fd_);
}

size_t LineSource::read_some(size_t at, size_t max_bytes) {
  const size_t want = size_t(std::min<int64_t>(int64_t(max_bytes), file_size_ - file_pos_));
  while (true) {
    const ssize_t n = ::pread(fd_, buffer_.data() + at, want, off_t(file_pos_));
    if (n > 0) {
      file_pos_ += n;
      return size_t(n);
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      throw file_error(path_, "ended early at byte " + std::to_string(file_pos_),
                       "do not modify data files while strata reads them");
    }
    throw file_error(path_, std::string("read failed: ") + std::strerror(errno), "check the file system");
  }
}

// The first line start at or after `at` (a line starts at 0 or after a '\n'),
// never before `floor`; file_size_ if no line starts there.
int64_t LineSource::align_to_line_start(int64_t at, int64_t floor) {
  if (at <= floor) return floor;
  if (at >= file_size_) return file_size_;
  file_pos_ = at - 1;
  while (file_pos_ < file_size_) {
    const int64_t chunk_start = file_pos_;
    const size_t n = read_some(0, buffer_.size());
    const void* nl = std::memchr(buffer_.data(), '\n', n);
    if (nl) return chunk_start + (static_cast<const char*>(nl) - buffer_.data()) + 1;
  }
  return file_size_;
}

void LineSource::seek(int64_t offset, int64_t line) {
  bool at_line_start = offset == begin_ || offset == end_;
  if (!at_line_start && offset > begin_ && offset < end_) {
    char before = 0;
    at_line_start = ::pread(fd_, &before, 1, off_t(offset - 1)) == 1 && before == '\n';
  }
  if (!at_line_start || line < 0) {
    throw Error("reader position (byte " + std::to_string(offset) + ", line " + std::to_string(line) +
                    ") is not a line start in bytes [" + std::to_string(begin_) + ", " +
                    std::to_string(end_) + ") of '" + path_ + "'",
                "resume with a position() taken from a reader of the same file, shard and shard count");
  }
  pos_ = len_ = scanned_ = 0;
  file_pos_ = offset;
  line_ = line;
}

LineSource::Status LineSource::next(std::string_view& line) {
  while (true) {
    if (scanned_ < len_) {
      const char* data = buffer_.data();
      const void* nl = std::memchr(data + scanned_, '\n', len_ - scanned_);
      if (nl) {
        const size_t at = size_t(static_cast<const char*>(nl) - data);
        line = std::string_view(data + pos_, at - pos_);
        pos_ = scanned_ = at + 1;
        ++line_;
        return line.size() > tuning_.max_line_bytes ? Status::kTooLong : Status::kLine;
      }
      scanned_ = len_;
    }
    if (file_pos_ >= end_) {
      if (pos_ == len_) return Status::kEnd;
      // The last line of the file, without a final newline.
      line = std::string_view(buffer_.data() + pos_, len_ - pos_);
      pos_ = scanned_ = len_;
      ++line_;
      return line.size() > tuning_.max_line_bytes ? Status::kTooLong : Status::kLine;
    }
    if (len_ - pos_ >= tuning_.max_line_bytes) {
      // Drop the overlong line up to its newline without buffering it.
      while (true) {
        pos_ = len_ = scanned_ = 0;
        if (file_pos_ >= end_) {
          ++line_;
          return Status::kTooLong;
        }
        len_ = read_some(0, size_t(std::min<int64_t>(int64_t(buffer_.size()), end_ - file_pos_)));
        const void* nl = std::memchr(buffer_.data(), '\n', len_);
        if (nl) {
          pos_ = scanned_ = size_t(static_cast<const char*>(nl) - buffer_.data()) + 1;
          ++line_;
          return Status::kTooLong;
        }
      }
    }
    if (pos_ > 0) {  // keep the partial line, make room behind it
      std::memmove(buffer_.data(), buffer_.data() + pos_, len_ - pos_);
      len_ -= pos_;
      scanned_ -= pos_;
      pos_ = 0;
    }
    if (len_ == buffer_.size()) {  // a line longer than the buffer
      buffer_.resize(std::max(len_ + 1, std::min(2 * buffer_.size(), tuning_.max_line_bytes)));
    }
    len_ += read_some(len_, size_t(std::min<int64_t>(int64_t(buffer_.size() - len_), end_ - file_pos_)));
  }
}

// ---- TextSampleReader ----------------------------------------------------------

namespace {

class TextSampleReader final : public SampleReader {
 public:
  TextSampleReader(const DataOptions& options, const std::string& path, int shard, int num_shards,
                   const TextReaderTuning& tuning)
      : parser_(make_line_parser(options)),
        source_(path, shard, num_shards, options.source == "csv" && options.csv_header, tuning),
        strict_(options.strict),
        max_reported_(std::max(0, options.max_errors_reported)),
        max_line_bytes_(tuning.max_line_bytes),
        shard_(shard),
        num_shards_(num_shards) {}

  int32_t read(int32_t max_samples, Batch& batch) override {
    const int num_dense = parser_->num_dense();
    const int num_tables = parser_->num_tables();
    const int num_tasks = parser_->num_tasks();
    if (batch.num_dense != num_dense || batch.tables.size() != size_t(num_tables) || batch.num_tasks != num_tasks) {
      if (batch.size != 0) {
        throw Error("batch has " + std::to_string(batch.num_dense) + " dense and " +
                        std::to_string(batch.tables.size()) + " tables, '" + source_.path() + "' gives " +
                        std::to_string(num_dense) + " and " + std::to_string(num_tables),
                    "reset the batch with text_num_dense() and text_num_tables()");
      }
      batch.reset(num_dense, num_tables, num_tasks);
    }
    int32_t delivered = 0;
    LineError error;
    while (delivered < max_samples) {
      std::string_view line;
      const LineSource::Status status = source_.next(line);
      if (status == LineSource::Status::kEnd) {
        finish_epoch();
        break;
      }
      ++stats_.lines;
      ++epoch_lines_;
      bool ok = false;
      if (status == LineSource::Status::kTooLong) {
        error = {0, "line longer than " + std::to_string(max_line_bytes_) + " bytes (binary data?)"};
      } else {
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // CRLF files
        if (line.empty()) {
          error = {0, "empty line"};
        } else if (std::memchr(line.data(), '\0', line.size()) != nullptr) {
          error = {0, "NUL byte in the line (binary data?)"};
        } else {
          ok = parser_->parse(line, batch, error);
        }
      }
      if (ok) {
        for (SparseBags& bags : batch.tables) bags.offsets.push_back(int32_t(bags.keys.size()));
        ++batch.size;
        ++delivered;
        ++stats_.samples;
      } else {
        roll_back(batch);
        malformed(error);
      }
    }
    return delivered;
  }

  void rewind() override { seek({source_.begin(), source_.begin_line()}); }

  ReaderPosition position() const override { return {source_.offset(), source_.line_number()}; }

  void seek(const ReaderPosition& position) override {
    source_.seek(position.byte_offset, position.line);
    epoch_lines_ = epoch_malformed_ = 0;
    epoch_finished_ = false;
  }

  const ParseStats& stats() const override { return stats_; }

 private:
  // Drops what a failed parse appended after the last complete sample.
  static void roll_back(Batch& batch) {
    const size_t b = size_t(batch.size);
    batch.labels.resize(b * size_t(batch.num_tasks));
    batch.dense.resize(b * size_t(batch.num_dense));
    for (SparseBags& bags : batch.tables) bags.keys.resize(size_t(bags.offsets.back()));
  }

  void malformed(const LineError& error) {
    ++stats_.malformed;
    ++epoch_malformed_;
    const std::string where = fmt::format("{}:{}", source_.path(), source_.line_number()) +
                              (error.column > 0 ? fmt::format(", column {}", error.column) : std::string());
    if (strict_) {
      throw Error("malformed line " + where + ": " + error.reason,
                  "fix or remove the line, or run with --data.strict=false to skip malformed lines");
    }
    if (reported_ < max_reported_) {
      ++reported_;
      spdlog::warn("malformed line {}: {}; skipped", where, error.reason);
    } else if (!announced_more_) {
      announced_more_ = true;
      spdlog::warn(
          "{}: more malformed lines; counting them without logging each (data.max_errors_reported = {})",
          source_.path(), max_reported_);
    }
  }

  void finish_epoch() {
    if (epoch_finished_) return;
    epoch_finished_ = true;
    if (epoch_malformed_ > 0) {
      spdlog::warn("{} (shard {} of {}): skipped {} malformed of {} lines", source_.path(), shard_,
                   num_shards_, epoch_malformed_, epoch_lines_);
    }
  }

  std::unique_ptr<LineParser> parser_;
  LineSource source_;
  bool strict_;
  int max_reported_;
  size_t max_line_bytes_;
  int shard_, num_shards_;
  ParseStats stats_;
  int reported_ = 0;
  bool announced_more_ = false;
  int64_t epoch_lines_ = 0, epoch_malformed_ = 0;
  bool epoch_finished_ = false;
};

}  // namespace

std::unique_ptr<SampleReader> open_text_reader(const DataOptions& options, const std::string& path, int shard,
                                               int num_shards, const TextReaderTuning& tuning) {
  return std::make_unique<TextSampleReader>(options, path, shard, num_shards, tuning);
}

std::unique_ptr<SampleReader> open_text_reader(const DataOptions& options, const std::string& path, int shard,
                                               int num_shards) {
  return open_text_reader(options, path, shard, num_shards, TextReaderTuning{});
}

}  // namespace strata::data
