// CheckpointWriter: writes one checkpoint file with parallel HDF5 (MPI-IO).
// Layout: docs/CHECKPOINT.md.
//
// Every method is collective over `comm`: every rank calls every method, in the
// same order, exactly once (write_dense, write_trainer_state, write_rows,
// write_producers in any order, then close). A bad argument on any rank makes
// every rank throw the same strata::Error, so ranks never part ways inside a
// collective call.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/checkpoint_records.hpp"
#include "model/dense_parameters.hpp"

namespace strata::io {

// How the sparse rows are cut; the defaults suit every run (tests and benchmarks
// set smaller values to exercise many blocks and rounds on little data).
struct CheckpointWriterOptions {
  int64_t block_rows = 0;    // rows per checksum block and HDF5 chunk; 0 = about 16 MiB of rows (<= 65536)
  int64_t round_blocks = 0;  // blocks one rank writes per collective round; 0 = about 64 MiB
};

class CheckpointWriter {
 public:
  // Creates `path` (replacing any file there) and writes the header. The header
  // of rank 0 of `comm` is the one written (the others' are ignored);
  // header.format_version is always kCheckpointFormatVersion. `options` must be
  // the same on every rank.
  CheckpointWriter(MPI_Comm comm, const std::string& path, const CheckpointHeader& header,
                   const CheckpointWriterOptions& options = {});
  // Closes the file if close() was not reached (an error path), without reporting
  // failures. Closing is collective: every rank must destroy its writer.
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // The dense weights: exactly one rank passes mine = true with the slices (in
  // DenseParameters order, non-overlapping, inside `values`), the values (n) and
  // DenseOptimizer::state() (k * n, k = 0 for sgd, 1 adagrad, 2 adam); the
  // others pass empty vectors and false.
  void write_dense(const std::vector<model::ParameterSlice>& slices, const std::vector<float>& values,
                   const std::vector<float>& optimizer_state, bool mine);

  // The trainer's metrics window: exactly one rank passes mine = true.
  void write_trainer_state(const TrainerState& state, bool mine);

  // Every rank passes its own rows (servers; empty elsewhere): ids (n),
  // values (n, header.row_width), counts (n). Each row must appear on exactly one
  // rank. Rows land in rank order; each rank's rows keep their order.
  void write_rows(const SparseRows& mine);

  // Every producer passes its record (nullptr elsewhere); with
  // header.admission_counters > 0 each producer also passes its count-min
  // sketch counters (4 * admission_counters), otherwise nullptr. There must be
  // one record per producer of the header's layout (producer = 0 .. producers - 1).
  void write_producers(const ProducerState* mine, const std::vector<uint32_t>* admission);

  // Flushes (MPI_File_sync) and closes the file: when it returns, every rank's
  // data are in the file. strata::Error if a part was never written.
  void close();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::io
