// SyntheticDataset: deterministic Criteo-shaped data. Sample i of a stream is a
// pure function of (data_seed, stream, i), so any rank can generate any range.
// Keys are Zipf-skewed per table; labels come from a hidden teacher model, whose
// own AUC on the held-out stream is the best reachable AUC.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "config/options.hpp"
#include "data/batch.hpp"
#include "data/sample_reader.hpp"

namespace strata::data {

enum class Stream : uint32_t { kTrain = 0, kEval = 1 };

class SyntheticDataset {
 public:
  explicit SyntheticDataset(const DataOptions& options);

  int num_dense() const;
  int num_tables() const;
  int num_tasks() const;  // labels per sample (data.synthetic_tasks)
  int64_t size(Stream stream) const;

  // Appends samples [first, first + count) of `stream` to `batch` (already reset).
  // `epoch` is ignored: a CTR dataset is the same click log every epoch.
  void generate(Stream stream, int64_t first, int32_t count, Batch& batch, int64_t epoch = 0) const;

  // The teacher's probability of task `task`'s label for a sample (what labels are
  // drawn from; task 0 is the click).
  double teacher_probability(Stream stream, int64_t index, int task = 0) const;
  // Exact AUC of the teacher's probabilities of task `task` against its drawn
  // labels of the first `max_samples` samples of the held-out stream.
  double teacher_auc(int64_t max_samples, int task = 0) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

// A SampleReader over shard `shard` of `num_shards` of a stream: the contiguous
// samples [s * N / n, (s + 1) * N / n). Its position's byte_offset is the next
// sample index and line the number of samples consumed in the shard.
std::unique_ptr<SampleReader> open_synthetic_reader(const SyntheticDataset& dataset, Stream stream,
                                                    int shard, int num_shards);

}  // namespace strata::data
