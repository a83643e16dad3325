#include "runtime/window_estimate.hpp"

#include <algorithm>
#include <memory>
#include <unordered_map>
#include <vector>

#include "model/model.hpp"
#include "runtime/batch_source.hpp"
#include "runtime/role_layout.hpp"
#include "store/frequency_admission.hpp"
#include "store/row_cache.hpp"
#include "store/row_key.hpp"

namespace strata::runtime {

int64_t largest_window_rows(const RunOptions& options, int64_t rounds) {
  const RoleLayout layout(options.layout);
  const int trainers = layout.trainers();
  // rows[r][owner]: the unique rows trainer `owner` owns in round r, from every producer's batches.
  std::vector<std::vector<std::vector<store::RowId>>> rows;
  for (int p = 0; p < layout.producers(); ++p) {
    const std::vector<int> fed = layout.trainers_of_producer(p);
    auto source = make_batch_source(options, p, layout.producers(), fed, trainers);
    source->start_phase(Phase::kTrain);
    std::unique_ptr<store::FrequencyAdmission> admission;
    if (options.store.min_count > 1) {
      admission = std::make_unique<store::FrequencyAdmission>(options.store.min_count, options.store.admission_counters);
    }
    data::Batch batch;
    for (int64_t r = 0; r < rounds; ++r) {
      bool complete = true;
      for (int t : fed) {
        if (!source->next(t, batch)) {
          complete = false;
          break;
        }
        if (admission) admission->admit_training(batch);
        data::deduplicate(batch, model::tied_tables(options.model, static_cast<int>(batch.tables.size())));
        if (static_cast<int64_t>(rows.size()) <= r) rows.resize(r + 1, std::vector<std::vector<store::RowId>>(trainers));
        for (size_t table = 0; table < batch.tables.size(); ++table) {
          for (uint64_t key : batch.tables[table].unique_keys) {
            const auto t32 = static_cast<uint32_t>(table);
            rows[r][store::owner_of(t32, key, trainers)].push_back({t32, key});
          }
        }
      }
      if (!complete) {
        rounds = r;  // the epoch ends here for every trainer
        break;
      }
    }
  }
  rounds = std::min<int64_t>(rounds, static_cast<int64_t>(rows.size()));
  const int64_t span = options.store.prefetch_depth + 1;
  int64_t largest = 0;
  for (int owner = 0; owner < trainers; ++owner) {
    std::unordered_map<store::RowId, int, store::RowIdHash> in_window;  // row -> rounds of the window using it
    auto add = [&](int64_t r, int delta) {
      std::vector<store::RowId> unique = rows[r][owner];
      std::sort(unique.begin(), unique.end());
      unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
      for (const auto& id : unique) {
        int& n = in_window[id];
        n += delta;
        if (n == 0) in_window.erase(id);
      }
    };
    for (int64_t r = 0; r < rounds; ++r) {
      add(r, +1);
      if (r >= span) add(r - span, -1);
      largest = std::max<int64_t>(largest, static_cast<int64_t>(in_window.size()));
    }
  }
  return largest;
}

}  // namespace strata::runtime
