// FrequencyAdmission (store.min_count): keys seen fewer than min_count times
// are not given rows of their own; they share their table's default row
// (key kDefaultRowKey), which trains like any other row. Counting happens in
// the producer, on the training stream, before de-duplication, in a count-min
// sketch (4 rows of `counters` saturating counters), so memory stays fixed
// whatever the vocabulary. The sketch can only over-count, so a rare key may
// be admitted a little early, never late. Both store modes see the same
// remapped batches, so admission never breaks tiered == ps.
#pragma once

#include <cstdint>
#include <vector>

#include "data/batch.hpp"
#include "store/count_min_sketch.hpp"

namespace strata::store {

// The key of a table's shared default row.
constexpr uint64_t kDefaultRowKey = ~uint64_t(0);

class FrequencyAdmission {
 public:
  static constexpr int kRows = CountMinSketch::kRows;

  FrequencyAdmission(int min_count, int64_t counters_per_row);

  // Training batch (keys not yet de-duplicated): counts every key, then
  // replaces each key still below min_count by kDefaultRowKey.
  void admit_training(data::Batch& batch);
  // Evaluation batch: replaces keys below min_count without counting them.
  void admit_eval(data::Batch& batch) const;

  // The sketch estimate of how often (table, key) was seen in training.
  uint32_t estimate(uint32_t table, uint64_t key) const;

  uint64_t keys_seen() const { return seen_; }
  uint64_t keys_defaulted() const { return defaulted_; }

  // Checkpoint state: the raw counters (kRows x counters_per_row) and the tallies.
  const std::vector<uint32_t>& counters() const { return sketch_.counters(); }
  void restore(std::vector<uint32_t> counters, uint64_t seen, uint64_t defaulted);

 private:
  uint32_t min_count_;
  CountMinSketch sketch_;
  uint64_t seen_ = 0;
  uint64_t defaulted_ = 0;
};

}  // namespace strata::store
