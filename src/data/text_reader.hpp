// LineSource: buffered reading of one shard of a text file, line by line, with true
// line numbers; and the tuning knobs of the text SampleReader (tests shrink them).
//
// Shard s of n is the byte range [s * size / n, (s + 1) * size / n), each end moved
// forward to the start of a line: a line belongs to the shard in which it starts, so
// the shards cover every line exactly once whatever the line lengths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "config/options.hpp"
#include "data/sample_reader.hpp"

namespace strata::data {

struct TextReaderTuning {
  size_t buffer_bytes = size_t(4) << 20;     // one read() of the file; grows for longer lines
  size_t max_line_bytes = size_t(64) << 20;  // longer lines are malformed (binary junk)
};

class LineSource {
 public:
  enum class Status { kLine, kTooLong, kEnd };

  // Opens `path` and finds shard `shard` of `num_shards`; with skip_header the first
  // line of the file belongs to no shard. Throws strata::Error naming the path if it
  // is missing, not a regular file, unreadable, empty or only a header.
  LineSource(const std::string& path, int shard, int num_shards, bool skip_header,
             const TextReaderTuning& tuning);
  ~LineSource();
  LineSource(const LineSource&) = delete;
  LineSource& operator=(const LineSource&) = delete;

  // The next line of the shard without its '\n' (a trailing '\r' is kept); valid
  // until the next call. kTooLong: a line over max_line_bytes was consumed and dropped.
  Status next(std::string_view& line);

  int64_t offset() const { return file_pos_ - int64_t(len_ - pos_); }  // next line's first byte
  int64_t line_number() const { return line_; }  // 1-based number of the last line consumed
  int64_t begin() const { return begin_; }
  int64_t end() const { return end_; }
  int64_t begin_line() const { return begin_line_; }
  const std::string& path() const { return path_; }

  // Continues at a line start inside the shard, `line` lines having been consumed before it.
  void seek(int64_t offset, int64_t line);

 private:
  size_t read_some(size_t at, size_t max_bytes);
  int64_t align_to_line_start(int64_t at, int64_t floor);

  std::string path_;
  int fd_ = -1;
  TextReaderTuning tuning_;
  int64_t file_size_ = 0;
  int64_t begin_ = 0, end_ = 0, begin_line_ = 0;
  std::vector<char> buffer_;
  size_t pos_ = 0, len_ = 0, scanned_ = 0;  // buffer_[pos_, len_) unread; no '\n' in [pos_, scanned_)
  int64_t file_pos_ = 0;                    // file offset of buffer_[len_]
  int64_t line_ = 0;
};

// open_text_reader with explicit tuning (the public one uses the defaults).
std::unique_ptr<SampleReader> open_text_reader(const DataOptions& options, const std::string& path, int shard,
                                               int num_shards, const TextReaderTuning& tuning);

}  // namespace strata::data
