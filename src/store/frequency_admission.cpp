#include "store/frequency_admission.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "common/error.hpp"
#include "common/rng.hpp"

namespace strata::store {

FrequencyAdmission::FrequencyAdmission(int min_count, int64_t counters_per_row)
    : min_count_(static_cast<uint32_t>(std::max(min_count, 0))), width_(static_cast<uint64_t>(counters_per_row)) {
  if (counters_per_row < 1) throw Error("store.admission_counters must be >= 1", "e.g. store.admission_counters = 4194304");
  counters_.assign(static_cast<size_t>(kRows) * width_, 0);
}

size_t FrequencyAdmission::cell(int row, uint32_t table, uint64_t key) const {
  // One independent hash per sketch row: mix the key with (table, row).
  const uint64_t h = mix64(key, (uint64_t(table) << 8) | uint64_t(row + 1));
  return static_cast<size_t>(row) * width_ + static_cast<size_t>(h % width_);
}

uint32_t FrequencyAdmission::estimate(uint32_t table, uint64_t key) const {
  uint32_t best = std::numeric_limits<uint32_t>::max();
  for (int r = 0; r < kRows; ++r) best = std::min(best, counters_[cell(r, table, key)]);
  return best;
}

// Conservative update: only the smallest counters grow, which keeps the
// over-count of a rare key that shares cells with hot ones low.
uint32_t FrequencyAdmission::count_and_estimate(uint32_t table, uint64_t key) {
  size_t cells[kRows];
  uint32_t current = std::numeric_limits<uint32_t>::max();
  for (int r = 0; r < kRows; ++r) {
    cells[r] = cell(r, table, key);
    current = std::min(current, counters_[cells[r]]);
  }
  if (current == std::numeric_limits<uint32_t>::max()) return current;
  const uint32_t next = current + 1;
  for (int r = 0; r < kRows; ++r) counters_[cells[r]] = std::max(counters_[cells[r]], next);
  return next;
}

void FrequencyAdmission::admit_training(data::Batch& batch) {
  if (min_count_ <= 1) return;
  for (size_t t = 0; t < batch.tables.size(); ++t) {
    for (uint64_t& key : batch.tables[t].keys) {
      ++seen_;
      if (count_and_estimate(static_cast<uint32_t>(t), key) < min_count_) {
        key = kDefaultRowKey;
        ++defaulted_;
      }
    }
  }
}

void FrequencyAdmission::admit_eval(data::Batch& batch) const {
  if (min_count_ <= 1) return;
  for (size_t t = 0; t < batch.tables.size(); ++t) {
    for (uint64_t& key : batch.tables[t].keys) {
      if (estimate(static_cast<uint32_t>(t), key) < min_count_) key = kDefaultRowKey;
    }
  }
}

void FrequencyAdmission::restore(std::vector<uint32_t> counters, uint64_t seen, uint64_t defaulted) {
  if (counters.size() != counters_.size()) {
    throw Error("admission sketch of " + std::to_string(counters.size()) + " counters, expected " +
                    std::to_string(counters_.size()),
                "resume with the store.admission_counters the checkpoint was written with");
  }
  counters_ = std::move(counters);
  seen_ = seen;
  defaulted_ = defaulted;
}

}  // namespace strata::store
