#include "store/frequency_admission.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "common/error.hpp"

namespace strata::store {

FrequencyAdmission::FrequencyAdmission(int min_count, int64_t counters_per_row)
    : min_count_(static_cast<uint32_t>(std::max(min_count, 0))),
      sketch_(static_cast<uint64_t>(std::max<int64_t>(counters_per_row, 1))) {
  if (counters_per_row < 1) throw Error("store.admission_counters must be >= 1", "e.g. store.admission_counters = 4194304");
}

uint32_t FrequencyAdmission::estimate(uint32_t table, uint64_t key) const { return sketch_.estimate(table, key); }

void FrequencyAdmission::admit_training(data::Batch& batch) {
  if (min_count_ <= 1) return;
  for (size_t t = 0; t < batch.tables.size(); ++t) {
    for (uint64_t& key : batch.tables[t].keys) {
      ++seen_;
      if (sketch_.increment(static_cast<uint32_t>(t), key) < min_count_) {
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
  if (counters.size() != sketch_.counters().size()) {
    throw Error("admission sketch of " + std::to_string(counters.size()) + " counters, expected " +
                    std::to_string(sketch_.counters().size()),
                "resume with the store.admission_counters the checkpoint was written with");
  }
  sketch_.counters() = std::move(counters);
  seen_ = seen;
  defaulted_ = defaulted;
}

}  // namespace strata::store
