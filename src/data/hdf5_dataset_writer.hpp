// Hdf5DatasetWriter: appends batches (as the text readers deliver them: labels,
// transformed dense values, hashed keys in bag order) to a new columnar HDF5
// dataset file, chunk by chunk. The layout is in data/hdf5_dataset_format.hpp
// and docs/DATA_HDF5.md; `strata convert` drives it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/batch.hpp"

namespace strata::data {

struct Hdf5WriterOptions {
  int64_t chunk_rows = 65536;  // rows per chunk of every per-row dataset (keys per chunk of multi-hot keys)
  int deflate_level = 1;       // zlib level, 0 = uncompressed .. 9
  double deflate_below = 0.2;  // deflate a dataset only if its first chunk shrinks below this fraction (1 = all)
  bool shuffle = true;         // byte-shuffle labels, dense values and offsets before deflate
  bool checksum = false;       // Fletcher-32 per chunk (deflated chunks have zlib's Adler-32 anyway); halves read speed
};

// What the file describes about its rows (written once, at creation).
struct Hdf5DatasetHeader {
  std::string source;           // criteo | csv
  int num_dense = 0;            // dense features per sample
  int num_tasks = 1;            // labels per sample (multi-task csv: one per label column)
  std::vector<bool> multi_hot;  // (num_tables) tables whose bags hold 0..n keys
  std::string csv_columns;      // csv: data.csv_columns
  std::string csv_delimiter;    // csv: data.csv_delimiter
  std::string input;            // the text file converted
};

class Hdf5DatasetWriter {
 public:
  // Creates (truncates) `path`. Throws strata::Error naming it if that fails.
  Hdf5DatasetWriter(const std::string& path, const Hdf5DatasetHeader& header, const Hdf5WriterOptions& options);
  ~Hdf5DatasetWriter();
  Hdf5DatasetWriter(const Hdf5DatasetWriter&) = delete;
  Hdf5DatasetWriter& operator=(const Hdf5DatasetWriter&) = delete;

  // Appends every sample of `batch` (keys form: call before deduplicate()).
  void append(const Batch& batch);
  // Writes the buffered rows and the counts of the conversion, then closes the file.
  void finish(int64_t input_lines, int64_t malformed_lines);

  int64_t rows() const;
  int64_t chunk_rows() const;  // options.chunk_rows, capped to keep chunks small (a file shorter
                               // than one chunk gets chunks of its length)

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::data
