// Names, packed record layouts and plausibility limits of the checkpoint file
// (docs/CHECKPOINT.md is the prose version). The writer, the reader and the
// validation all take them from here, so the three cannot drift apart.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::io::checkpoint_format {

// Root attribute "format" holds this; any other HDF5 file is foreign.
constexpr const char* kFormatName = "strata-checkpoint";

// ---- root attributes (the CheckpointHeader) ---------------------------------------
constexpr const char* kFormatAttr = "format";
constexpr const char* kVersionAttr = "format_version";
constexpr const char* kStepAttr = "step";
constexpr const char* kEpochAttr = "epoch";
constexpr const char* kStepInEpochAttr = "step_in_epoch";
constexpr const char* kSamplesAttr = "samples";
constexpr const char* kEpochSamplesAttr = "epoch_samples";
constexpr const char* kTrainSecondsAttr = "train_seconds";
constexpr const char* kConfigAttr = "config_ini";
constexpr const char* kStrataVersionAttr = "strata_version";
constexpr const char* kProducersAttr = "producers";
constexpr const char* kTrainersAttr = "trainers";
constexpr const char* kServersAttr = "servers";
constexpr const char* kStoreModeAttr = "store_mode";
constexpr const char* kNumDenseAttr = "num_dense";
constexpr const char* kNumTablesAttr = "num_tables";
constexpr const char* kEmbeddingDimAttr = "embedding_dim";
constexpr const char* kRowWidthAttr = "row_width";
constexpr const char* kDenseOptimizerAttr = "dense_optimizer";
constexpr const char* kSparseOptimizerAttr = "sparse_optimizer";
constexpr const char* kDenseOptimizerStepsAttr = "dense_optimizer_steps";
constexpr const char* kAdmissionCountersAttr = "admission_counters";
constexpr const char* kChecksumNoteAttr = "checksums";
// Optional (absent in files written before run ids): which run wrote the file.
constexpr const char* kRunIdAttr = "run_id";
constexpr const char* kDeckFingerprintAttr = "deck_fingerprint";

// ---- groups and datasets ---------------------------------------------------------
constexpr const char* kDense = "dense";
constexpr const char* kDenseLayers = "layers";            // /dense/layers/<slice name>
constexpr const char* kDenseValues = "values";            // /dense/values (n) float32
constexpr const char* kDenseOptimizerState = "optimizer_state";  // /dense/optimizer_state (k * n) float32
constexpr const char* kTrainer = "trainer";
constexpr const char* kTrainerState = "state";            // /trainer/state (1) compound
constexpr const char* kSparse = "sparse";
constexpr const char* kSparseTable = "table";             // (rows) uint32
constexpr const char* kSparseKey = "key";                 // (rows) uint64
constexpr const char* kSparseValues = "values";           // (rows, embedding_dim) float32
constexpr const char* kSparseOptimizerState = "optimizer_state";  // (rows, row_width - embedding_dim) float32
constexpr const char* kSparseAccessCount = "access_count";  // (rows) uint64
constexpr const char* kSparseChecksums = "checksums";     // (blocks) compound
constexpr const char* kProducers = "producers";
constexpr const char* kProducerState = "state";           // (producers) compound
constexpr const char* kProducerAdmission = "admission";   // (producers, 4 * admission_counters) uint32
constexpr const char* kRng = "rng";

// ---- dataset attributes ----------------------------------------------------------
constexpr const char* kXxh3Attr = "xxh3_64";        // XXH3-64 of the dataset's bytes (little-endian, row-major)
constexpr const char* kIndexAttr = "index";         // a layer's position in the slice list
constexpr const char* kOffsetAttr = "offset";       // a layer's first value in /dense/values
constexpr const char* kOptimizerAttr = "optimizer";
constexpr const char* kStepsAttr = "steps";
constexpr const char* kVectorsAttr = "vectors";      // /dense/optimizer_state holds this many vectors of n floats
constexpr const char* kBlockRowsAttr = "block_rows";   // /sparse: rows per checksum block (at most)
constexpr const char* kSketchRowsAttr = "sketch_rows";
constexpr const char* kCountersPerRowAttr = "counters_per_row";
constexpr const char* kTrainSeedAttr = "train_seed";
constexpr const char* kDataSeedAttr = "data_seed";
constexpr const char* kNoteAttr = "note";

// Rows of the admission count-min sketch (store::CountMinSketch::kRows).
constexpr int kSketchRows = 4;

// ---- packed compound records (byte offsets; all little-endian) ---------------------
// /trainer/state: window_loss f64, window_samples i64, window_steps i64,
// last_window_loss f64, last_levels f64[4].
constexpr size_t kTrainerRecordBytes = 64;
// /producers/state: producer i32, then epoch, round_in_epoch, byte_offset, line,
// shard_begin, shard_end, lines, samples, malformed (i64), admission_seen,
// admission_defaulted, admission_xxh3 (u64).
constexpr size_t kProducerRecordBytes = 4 + 9 * 8 + 3 * 8;
// /sparse/checksums: first_row i64, rows i64, then the XXH3-64 of those rows of
// table, key, values, optimizer_state, access_count (u64 each).
constexpr size_t kBlockRecordBytes = 7 * 8;
constexpr int kSparseColumns = 5;

// ---- sizes ---------------------------------------------------------------------
// A checksum block (and an HDF5 chunk of the sparse datasets) holds at most this
// many rows and aims at this many bytes.
constexpr int64_t kMaxBlockRows = 65536;
constexpr int64_t kTargetBlockBytes = int64_t(16) << 20;

// Plausibility bounds for numbers read from a file, checked before they size anything.
constexpr int64_t kMaxRows = int64_t(1) << 40;
constexpr int64_t kMaxRanks = int64_t(1) << 24;
constexpr int64_t kMaxTables = int64_t(1) << 20;
constexpr int64_t kMaxNumDense = int64_t(1) << 20;
constexpr int64_t kMaxEmbeddingDim = int64_t(1) << 16;
constexpr int64_t kMaxRowWidth = int64_t(1) << 20;
constexpr int64_t kMaxDenseValues = int64_t(1) << 36;
constexpr int64_t kMaxOptimizerMoments = 8;      // rows of /dense/optimizer_state
constexpr int64_t kMaxLayers = int64_t(1) << 16;
constexpr int64_t kMaxLayerRank = 8;
constexpr size_t kMaxLayerName = 255;
constexpr int64_t kMaxAdmissionCounters = int64_t(1) << 26;  // per sketch row (a producer's row: 1 GiB)
constexpr size_t kMaxStringAttribute = size_t(1) << 20;     // config text, names

// Rows per checksum block and sparse chunk for rows of `row_width` floats.
inline int64_t block_rows_for(int64_t row_width) {
  const int64_t row_bytes = 4 + 8 + 8 + 4 * row_width;  // table, key, count, values + state
  const int64_t rows = kTargetBlockBytes / row_bytes;
  return rows < 1 ? 1 : rows > kMaxBlockRows ? kMaxBlockRows : rows;
}

}  // namespace strata::io::checkpoint_format
