// CheckpointReader: opens a checkpoint file, checks its whole structure against
// itself before it sizes anything from it, and reads its parts, verifying each
// against its stored XXH3 checksum (docs/CHECKPOINT.md).
//
// With comm = MPI_COMM_SELF (or one rank) the file is opened serially; with more
// ranks it is opened with MPI-IO on `comm`, collectively: every rank of `comm`
// constructs and destroys the reader, but reads (any method) are independent and
// may differ between ranks.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/checkpoint_records.hpp"
#include "model/dense_parameters.hpp"

namespace strata::io {

class CheckpointReader {
 public:
  // strata::Error naming the file, what is wrong and what to do when the file
  // is missing, not HDF5, truncated, damaged, foreign, of a newer format version,
  // or inconsistent (a dataset whose size disagrees with the header or another).
  CheckpointReader(MPI_Comm comm, const std::string& path);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const std::string& path() const;
  const CheckpointHeader& header() const;
  uint64_t file_bytes() const;

  // The dense part: slices in DenseParameters order, values (n), optimizer state
  // (k * n) as DenseOptimizer::state() gives it.
  int64_t num_dense_values() const;  // n, without reading them
  std::vector<model::ParameterSlice> dense_slices() const;
  std::vector<float> dense_values() const;
  std::vector<float> dense_optimizer_state() const;

  TrainerState trainer_state() const;

  // Sparse rows: [begin, end) in file order (0 <= begin <= end <= num_rows()),
  // as ids (n), values (n, row_width), counts (n). Every checksum block the
  // range touches is read whole and verified: a damaged row is a strata::Error.
  int64_t num_rows() const;
  SparseRows read_rows(int64_t begin, int64_t end) const;

  // One record per producer, by producer index; the admission sketch of producer
  // `producer` (4 * admission_counters counters), empty when the file has none.
  std::vector<ProducerState> producers() const;
  std::vector<uint32_t> admission_counters(int producer) const;

  // Reads every dataset once and checks it against its checksum (the sparse rows
  // only with `rows`): what validate_checkpoint and `strata ckpt verify` run.
  void verify(bool rows) const;
  // Reads and checks share `part` of `parts` of the sparse rows' checksum
  // blocks (consecutive blocks, one at a time): the shares of parts = P ranks
  // cover every block once, so P ranks check a whole file in 1/P of the time.
  void verify_rows(int part, int parts) const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::io
