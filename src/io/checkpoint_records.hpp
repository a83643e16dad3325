// The records a checkpoint file holds (docs/CHECKPOINT.md): the header written
// as root attributes, the trainer's metrics window, one record per producer, and
// the sparse rows. Plain data, shared by the writer, the reader and the runtime.
#pragma once

#include <cstdint>
#include <string>

#include "store/parameter_store.hpp"

namespace strata::io {

// Bumped whenever a reader of the previous version could misread a new file.
// A reader refuses files with a newer version (and reads every older one it knows).
constexpr int kCheckpointFormatVersion = 1;

// Root attributes. The writer takes them from rank 0 of its communicator.
struct CheckpointHeader {
  int format_version = kCheckpointFormatVersion;  // on read: the file's version
  int64_t step = 0;                   // steps completed
  int64_t epoch = 0;                  // epoch of the next step
  int64_t step_in_epoch = 0;          // steps of that epoch completed
  int64_t samples = 0;                // samples consumed in total
  int64_t epoch_samples = 0;          // samples consumed in the current epoch
  double train_seconds = 0;           // training time before this checkpoint
  std::string config_ini;             // the resolved deck (strata deck output)
  std::string strata_version;         // STRATA_VERSION of the writer
  int producers = 0, trainers = 0, servers = 0;  // layout of the run that wrote it
  std::string store_mode;             // ps | tiered
  int num_dense = 0;                  // dense input features per sample
  int num_tables = 0;                 // embedding tables
  int embedding_dim = 0;              // floats of a row's values
  int row_width = 0;                  // floats of a row: values, then sparse optimizer state
  std::string dense_optimizer, sparse_optimizer;
  int64_t dense_optimizer_steps = 0;  // DenseOptimizer::steps_taken()
  uint64_t train_seed = 0, data_seed = 0;  // all randomness derives from these and the step
  int64_t admission_counters = 0;     // counters per sketch row (4 rows); 0 = no admission state
  // Which run wrote it (io/checkpoint_identity.hpp); "" in files of a strata
  // older than run ids (the attributes are optional: format version 1 still).
  std::string run_id;                 // 16 hex digits, made at the run's fresh start, kept across resumes
  std::string deck_fingerprint;       // 16 hex digits: XXH3-64 of the deck keys that change the numbers
};

// The trainer's open metrics window, so that a resumed run logs the same losses.
struct TrainerState {
  double window_loss = 0;
  int64_t window_samples = 0;
  int64_t window_steps = 0;
  double last_window_loss = 0;
  double last_levels[4] = {0, 0, 0, 0};
};

// Where one producer's reader stands.
struct ProducerState {
  int32_t producer = 0;          // producer index (0 .. producers - 1)
  int64_t epoch = 0;
  int64_t round_in_epoch = 0;
  int64_t byte_offset = 0;       // ReaderPosition::byte_offset
  int64_t line = 0;              // ReaderPosition::line
  int64_t shard_begin = 0, shard_end = 0;
  int64_t lines = 0, samples = 0, malformed = 0;  // ParseStats
  uint64_t admission_seen = 0;      // FrequencyAdmission::keys_seen()
  uint64_t admission_defaulted = 0; // FrequencyAdmission::keys_defaulted()
};

// Sparse rows exactly as ParameterStore::dump_rows() gives them:
// width floats per row (embedding_dim values, then optimizer state),
// ids (n), values (n, width), counts (n).
using SparseRows = store::RowDump;

// What a resuming run needs a checkpoint to match; -1 / "" = not checked.
struct ExpectedShape {
  int64_t dense_values = -1;   // floats of /dense/values
  int num_dense = -1;          // dense input features
  int embedding_dim = -1;
  int row_width = -1;
  int num_tables = -1;
  std::string dense_optimizer;
  std::string sparse_optimizer;
};

// Why `header` cannot be a checkpoint's header ("" when its numbers are
// plausible): negative counters, a row narrower than its values, sizes beyond
// checkpoint_format's limits, strings too long for an attribute.
std::string header_problem(const CheckpointHeader& header);

}  // namespace strata::io
