// BatchSource: where a producer's batches come from, phase by phase. The
// synthetic source is random-access (trainer t of T at step s gets samples
// [(s*T + t)*B, +B) whatever the number of producers); file sources read the
// producer's shard (byte ranges of text, row ranges of converted HDF5) and deal
// batches to its trainers in turn.
#pragma once

#include <memory>
#include <vector>

#include "config/options.hpp"
#include "data/batch.hpp"
#include "data/sample_reader.hpp"
#include "data/shared_chunk_cache.hpp"

namespace strata::runtime {

enum class Phase { kTrain, kEval };

// Where a producer's training stream stands (file sources; synthetic data is
// placed by sample index instead), enough to continue it exactly.
struct SourcePosition {
  int64_t byte_offset = 0;  // next row (HDF5) or byte (text) of the shard
  int64_t line = 0;         // lines (rows) consumed before it
};

// How an interrupted epoch continues (from a checkpoint).
struct EpochResume {
  int64_t epoch = 0;          // the interrupted epoch (next-item samples differ per epoch)
  int64_t epoch_samples = 0;  // synthetic: samples of the epoch already trained (all trainers)
  // File sources: the writing run's producers' positions, indexed by their
  // producer number, and how many producers it had. This producer continues
  // the shards q with q % producers == its index (its own when the count is unchanged).
  std::vector<SourcePosition> positions;
  int old_producers = 0;
};

// Shapes every role must agree on, derived from the deck alone.
struct DataShape {
  int num_dense = 0;
  int num_tables = 0;
  int num_tasks = 1;  // labels per sample
};
DataShape data_shape(const DataOptions& options);

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual void start_phase(Phase phase) = 0;
  // Fills `batch` with the next batch of trainer `trainer`; false when the phase has none left.
  // Training batches are always full (the remainder of an epoch is dropped).
  virtual bool next(int trainer, data::Batch& batch) = 0;
  // next() and data::deduplicate(batch, keys_of). Co-trained models with the
  // same training batch size share the de-duplicated batch (random-access
  // sources), so that it is made once per node.
  virtual bool next_deduplicated(int trainer, data::Batch& batch, const std::vector<int32_t>& keys_of);
  // Wire-only mode (a producer that only forwards training batches): a batch
  // that next_deduplicated takes from the node's shared batches is left
  // undecoded, only its `size` set, and last_wire() holds its bytes.
  void set_wire_only(bool on) { wire_only_ = on; }
  // The wire format (data::serialize) of the batch the last next_deduplicated
  // returned, when it passed through the shared batches; else null.
  virtual const std::vector<char>* last_wire() const { return nullptr; }
  // What the shared de-duplicated batches saved (zero when not shared).
  virtual data::SharedChunkStats shared_batch_stats() const { return {}; }
  // Parse statistics so far (zero for synthetic data).
  virtual data::ParseStats stats() const = 0;
  // What the node's shared chunks saved this producer (co-trained models; zero otherwise).
  virtual data::SharedChunkStats shared_stats() const { return {}; }
  // The training stream's position before the next batch.
  virtual SourcePosition position() const { return {}; }
  // The next training phase continues an interrupted epoch instead of starting one.
  virtual void resume_epoch(const EpochResume& resume) = 0;
  virtual bool has_eval() const = 0;

 protected:
  bool wire_only_ = false;
};

// Source of producer `producer` feeding `trainers` of `total_trainers` trainers.
std::unique_ptr<BatchSource> make_batch_source(const RunOptions& options, int producer, int producers,
                                               std::vector<int> trainers, int total_trainers);

}  // namespace strata::runtime
