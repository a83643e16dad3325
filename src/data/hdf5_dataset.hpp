// Reading strata's columnar HDF5 datasets (data.source = hdf5), written by
// `strata convert` from a Criteo or CSV text file (docs/DATA_HDF5.md). The file
// holds what the text reader would deliver, already transformed and hashed, so a
// batch read from it equals the batch the text reader gives for the same lines.
//
// Shard s of n holds rows [s * N / n, (s + 1) * N / n). A reader's position is a
// row: ReaderPosition.byte_offset is the next row of the file to read (0-based),
// and ReaderPosition.line the number of rows of the file before it (the 1-based
// number of the last row consumed, as line numbers are for text): the two are equal.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "data/sample_reader.hpp"

namespace strata::data {

// What a dataset file holds, validated against itself (datasets, types, lengths).
struct Hdf5DatasetShape {
  std::string source;                 // criteo | csv: the format it was converted from
  int64_t num_rows = 0;               // N samples
  int num_dense = 0;                  // dense features per sample
  int num_tables = 0;                 // categorical features (embedding tables)
  int num_tasks = 1;                  // labels per sample (attribute num_tasks, absent = 1)
  std::vector<bool> multi_hot;        // (num_tables) true: 0..n keys per bag; false: exactly 1
  int64_t chunk_rows = 0;             // rows per HDF5 chunk of the per-row datasets
  std::string csv_columns;            // data.csv_columns of a csv source ("" for criteo)
  int64_t input_lines = 0;            // lines of the text file, malformed ones included
  int64_t malformed_lines = 0;        // lines skipped as malformed when it was written
};

// Opens `path` and validates its layout; throws strata::Error naming the file and
// what is wrong (missing, not HDF5, truncated, not a strata dataset, a newer
// format version, datasets of inconsistent types or lengths).
Hdf5DatasetShape read_hdf5_shape(const std::string& path);
int hdf5_num_dense(const std::string& path);
int hdf5_num_tables(const std::string& path);

struct Hdf5ReaderTuning {
  int64_t block_rows = 0;  // rows read per HDF5 call (0 = one chunk of the file); tests shrink it
};

// Opens shard `shard` of `num_shards` of the dataset at `path`. Besides
// read_hdf5_shape's checks, the file must agree with the deck: with data.source =
// hdf5 and a data.train other than `path` (an eval file) both files must have the
// same shape, and a file converted from csv must match data.csv_columns when the
// deck sets it.
// ParseStats count rows (lines = samples, malformed = 0: conversion dropped them).
std::unique_ptr<SampleReader> open_hdf5_reader(const DataOptions& options, const std::string& path,
                                               int shard, int num_shards);
std::unique_ptr<SampleReader> open_hdf5_reader(const DataOptions& options, const std::string& path,
                                               int shard, int num_shards, const Hdf5ReaderTuning& tuning);

}  // namespace strata::data
