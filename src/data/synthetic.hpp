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

namespace strata::data {

enum class Stream : uint32_t { kTrain = 0, kEval = 1 };

class SyntheticDataset {
 public:
  explicit SyntheticDataset(const DataOptions& options);

  int num_dense() const;
  int num_tables() const;
  int64_t size(Stream stream) const;

  // Appends samples [first, first + count) of `stream` to `batch` (already reset).
  void generate(Stream stream, int64_t first, int32_t count, Batch& batch) const;

  // The teacher's click probability for a sample (what labels are drawn from).
  double teacher_probability(Stream stream, int64_t index) const;
  // Exact AUC of the teacher's probabilities against the drawn labels of the
  // first `max_samples` samples of the held-out stream.
  double teacher_auc(int64_t max_samples) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace strata::data
