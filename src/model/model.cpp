// make_model: the one place that maps model.kind to a concrete network.
#include "model/model.hpp"

#include "common/error.hpp"
#include "model/din.hpp"
#include "model/dlrm.hpp"
#include "model/hstu.hpp"
#include "model/moe.hpp"
#include "model/multi_task.hpp"
#include "model/sasrec.hpp"

namespace strata::model {

void Model::score_candidates(const data::Batch&, const std::vector<const float*>&, std::vector<float>&) {
  throw Error("model.kind " + kind() + " does not rank items",
              "use a next-item model (model.kind = sasrec or hstu) for ranked evaluation");
}

void Model::set_expert_group(ExpertGroup* group) {
  if (group != nullptr && group->size() > 1) {
    throw Error("layout.ep = " + std::to_string(group->size()) + " shards experts, but model.kind " + kind() +
                    " has none",
                "set model.kind = moe, or layout.ep = 1");
  }
}

void Model::set_sequence_group(SequenceGroup* group, const SequenceParallelOptions&) {
  if (group != nullptr && group->size() > 1) {
    throw Error("layout.sp = " + std::to_string(group->size()) + " shares attention over a sequence, but model.kind " +
                    kind() + " has none that can be split exactly",
                "set layout.sp = 1, or model.kind = sasrec, hstu or din (see docs/PARALLEL.md)");
  }
}

const std::vector<std::string>& model_kinds() {
  static const std::vector<std::string> kinds = {"dlrm", "din", "sasrec", "hstu", "moe", "mmoe", "ple"};
  return kinds;
}

std::vector<int32_t> tied_tables(const ModelOptions& options, int num_tables) {
  const bool next_item = options.kind == "sasrec" || options.kind == "hstu";
  if (!next_item || !options.tie_item_rows || num_tables != 2) return {};
  return {-1, 0};  // candidates (table 1) read the history table's (table 0) rows
}

std::unique_ptr<Model> make_model(const ModelOptions& options, int num_dense, int num_tables, uint64_t seed,
                                  int num_tasks) {
  const bool multi_task = options.kind == "mmoe" || options.kind == "ple";
  if (multi_task) return std::make_unique<MultiTask>(options, num_dense, num_tables, num_tasks, seed);
  if (num_tasks != 1) {
    throw Error("model.kind = " + options.kind + " predicts one label, but the data gives " +
                    std::to_string(num_tasks) + " per sample (data.synthetic_tasks, or the label columns of "
                    "data.csv_columns)",
                "set model.kind = mmoe or ple for multi-task data, or give one label per sample");
  }
  if (options.kind == "dlrm") return std::make_unique<Dlrm>(options, num_dense, num_tables, seed);
  if (options.kind == "din") return std::make_unique<Din>(options, num_dense, num_tables, seed);
  if (options.kind == "sasrec") return std::make_unique<Sasrec>(options, num_dense, num_tables, seed);
  if (options.kind == "hstu") return std::make_unique<Hstu>(options, num_dense, num_tables, seed);
  if (options.kind == "moe") return std::make_unique<Moe>(options, num_dense, num_tables, seed);
  std::string known;
  for (const auto& kind : model_kinds()) known += (known.empty() ? "" : " | ") + kind;
  throw Error("unknown model.kind '" + options.kind + "'", "set model.kind to one of " + known);
}

}  // namespace strata::model
