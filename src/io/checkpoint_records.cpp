// Plausibility of a checkpoint header: the same rules guard what the writer
// accepts and what the reader believes before it sizes anything from a file.
#include "io/checkpoint_records.hpp"

#include "io/checkpoint_format.hpp"

namespace strata::io {

namespace fmt = checkpoint_format;

namespace {

std::string out_of_range(const char* name, int64_t value, int64_t lo, int64_t hi) {
  if (value >= lo && value <= hi) return {};
  return std::string(name) + " = " + std::to_string(value) + " is outside [" + std::to_string(lo) + ", " +
         std::to_string(hi) + "]";
}

std::string bad_string(const char* name, const std::string& value, bool may_be_empty) {
  if (!may_be_empty && value.empty()) return std::string(name) + " is empty";
  if (value.size() > fmt::kMaxStringAttribute) {
    return std::string(name) + " holds " + std::to_string(value.size()) + " bytes, more than the " +
           std::to_string(fmt::kMaxStringAttribute) + " an attribute may hold";
  }
  if (value.find('\0') != std::string::npos) return std::string(name) + " contains a NUL byte";
  return {};
}

}  // namespace

std::string header_problem(const CheckpointHeader& h) {
  constexpr int64_t kMaxCounter = int64_t(1) << 62;
  const std::string problems[] = {
      out_of_range(fmt::kStepAttr, h.step, 0, kMaxCounter),
      out_of_range(fmt::kEpochAttr, h.epoch, 0, kMaxCounter),
      out_of_range(fmt::kStepInEpochAttr, h.step_in_epoch, 0, kMaxCounter),
      out_of_range(fmt::kSamplesAttr, h.samples, 0, kMaxCounter),
      out_of_range(fmt::kEpochSamplesAttr, h.epoch_samples, 0, kMaxCounter),
      h.train_seconds >= 0 && h.train_seconds < 1e12 ? std::string()
                                                     : std::string(fmt::kTrainSecondsAttr) + " is not a duration",
      out_of_range(fmt::kProducersAttr, h.producers, 0, fmt::kMaxRanks),
      out_of_range(fmt::kTrainersAttr, h.trainers, 1, fmt::kMaxRanks),
      out_of_range(fmt::kServersAttr, h.servers, 1, fmt::kMaxRanks),
      out_of_range(fmt::kNumDenseAttr, h.num_dense, 0, fmt::kMaxNumDense),
      out_of_range(fmt::kNumTablesAttr, h.num_tables, 0, fmt::kMaxTables),
      out_of_range(fmt::kEmbeddingDimAttr, h.embedding_dim, 1, fmt::kMaxEmbeddingDim),
      out_of_range(fmt::kRowWidthAttr, h.row_width, h.embedding_dim, fmt::kMaxRowWidth),
      out_of_range(fmt::kDenseOptimizerStepsAttr, h.dense_optimizer_steps, 0, kMaxCounter),
      out_of_range(fmt::kAdmissionCountersAttr, h.admission_counters, 0, fmt::kMaxAdmissionCounters),
      bad_string(fmt::kConfigAttr, h.config_ini, true),
      bad_string(fmt::kStrataVersionAttr, h.strata_version, true),
      bad_string(fmt::kStoreModeAttr, h.store_mode, false),
      bad_string(fmt::kDenseOptimizerAttr, h.dense_optimizer, false),
      bad_string(fmt::kSparseOptimizerAttr, h.sparse_optimizer, false),
      bad_string(fmt::kRunIdAttr, h.run_id, true),
      bad_string(fmt::kDeckFingerprintAttr, h.deck_fingerprint, true),
  };
  std::string text;
  for (const std::string& problem : problems) {
    if (!problem.empty()) text += (text.empty() ? "" : "; ") + problem;
  }
  return text;
}

}  // namespace strata::io
