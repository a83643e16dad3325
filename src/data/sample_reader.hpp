// SampleReader: a producer's view of its shard of the input. Readers parse,
// transform and hash; malformed lines are counted, reported with file and line,
// and skipped (or fatal with data.strict).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "config/options.hpp"
#include "data/batch.hpp"

namespace strata::data {

struct ParseStats {
  int64_t lines = 0;       // lines read (including malformed ones)
  int64_t samples = 0;     // samples delivered
  int64_t malformed = 0;   // lines skipped as malformed
};

// Where a reader stands, enough to resume it exactly (checkpoints).
struct ReaderPosition {
  int64_t byte_offset = 0;  // next byte to read in the file (files) or next sample index (synthetic)
  int64_t line = 0;         // 1-based number of the last line consumed
};

class SampleReader {
 public:
  virtual ~SampleReader() = default;
  // Appends up to max_samples samples to `batch` (already reset); returns how many.
  // 0 means the shard is exhausted (call rewind() for the next epoch).
  virtual int32_t read(int32_t max_samples, Batch& batch) = 0;
  virtual void rewind() = 0;
  virtual ReaderPosition position() const = 0;
  virtual void seek(const ReaderPosition& position) = 0;
  virtual const ParseStats& stats() const = 0;
};

// Opens shard `shard` of `num_shards` of a text file (criteo or csv source).
// Shards are byte ranges aligned to line starts; together they cover every line once.
// Throws strata::Error at open for a missing, unreadable or empty file (an empty
// shard of a non-empty file is fine: its reader returns 0 at once). ParseStats
// accumulate over rewinds.
std::unique_ptr<SampleReader> open_text_reader(const DataOptions& options, const std::string& path,
                                               int shard, int num_shards);

// Shapes of what a text source delivers: criteo 13 / 26; csv from data.csv_columns
// (dense:N summed, cat:N and multi:N:SEP summed); synthetic: data.num_dense / num_tables.
int text_num_dense(const DataOptions& options);
int text_num_tables(const DataOptions& options);
// Labels per sample: csv one per label column, synthetic data.synthetic_tasks, criteo 1.
int text_num_tasks(const DataOptions& options);

}  // namespace strata::data
