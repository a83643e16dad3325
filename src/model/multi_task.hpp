// MultiTask: multi-task towers over DLRM's front (bottom MLP, pooled bags, dot
// interaction), one logit and one BCE loss per task, the tasks' labels from the
// data (data.synthetic_tasks, or several `label` columns of data.csv_columns).
//
//   mmoe (Ma et al., KDD 2018): model.num_experts shared experts on the
//        interaction output; each task's softmax gate mixes all of them, and the
//        mixture feeds the task's tower.
//   ple  (Tang et al., RecSys 2020, progressive layered extraction): each of
//        model.ple_levels levels has num_experts shared experts and
//        model.task_experts experts per task. Task k's gate mixes its own experts
//        and the shared ones into task k's input of the next level; below the last
//        level a shared gate mixes every expert into the shared experts' next input.
//        One level is CGC. mmoe is ple with one level and no task experts.
//
// Experts are MLPs with ReLU after every layer (model.expert_mlp); towers are
// model.tower_mlp hidden layers and a width-1 output. The loss of a sample is the
// sum of its tasks' losses. Every expert sees every sample (the gates are dense).
//
// Expert parallel (set_expert_group, layout.ep = G): member g runs experts
// [g n / G, (g + 1) n / G) of every level (n = shared + tasks x task experts,
// shared first), on every member's batch: the level's inputs go to every member by
// all-to-all, each member's rows run as a separate block (the GEMMs that member
// would run alone), the outputs come back, and backward returns each block's input
// gradient, which the home adds in the order one trainer would. Weight gradients
// fold over the blocks in member order and on through the replicas, and the
// trainers sum the dense gradients in trainer order, so any dp x ep ends
// bit-identical to ep = 1. A member stores only its own experts (their values,
// gradients and optimizer state) beside the replicated weights: dense_sharding().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "data/batch.hpp"
#include "model/dense_parameters.hpp"
#include "model/dlrm.hpp"
#include "model/model.hpp"

namespace strata::model {

struct MultiTaskShape {
  DlrmShape front;              // bottom, pooling, interaction (front.top unused)
  int tasks = 1;                // labels per sample
  int shared_experts = 1;       // per level
  int task_experts = 0;         // per task per level (0 for mmoe)
  int levels = 1;
  std::vector<int> expert;      // expert widths; the last is an expert's output width
  std::vector<int> tower;       // tower widths; the last is 1
};

// The multi-task keys alone (the deck checks them before any rank starts):
// strata::Error naming model.num_experts, model.task_experts, model.ple_levels,
// model.expert_mlp or model.tower_mlp.
void check_multi_task_options(const ModelOptions& options);

// dlrm_shape's front plus the checks above, for data of `tasks` labels per sample.
MultiTaskShape multi_task_shape(const ModelOptions& options, int num_dense, int num_tables, int tasks);

class MultiTask final : public Model {
 public:
  // options.kind is "mmoe" or "ple". Weights: "bottom.*", then per level l
  // "level.<l>.shared.<e>.*", "level.<l>.task.<k>.<e>.*", "level.<l>.gate.<k>.*",
  // "level.<l>.gate.shared.*" (below the last level), then "tower.<k>.*";
  // Glorot-uniform, zero biases, a pure function of (seed, index).
  MultiTask(const ModelOptions& options, int num_dense, int num_tables, int tasks, uint64_t seed);
  ~MultiTask() override;
  MultiTask(const MultiTask&) = delete;
  MultiTask& operator=(const MultiTask&) = delete;

  const std::string& kind() const override;
  DenseParameters& parameters() override;
  const DenseParameters& parameters() const override;
  int embedding_dim() const override;
  int num_tables() const override;
  int num_tasks() const override;
  const MultiTaskShape& shape() const;

  double forward_backward(const data::Batch& batch, const std::vector<const float*>& rows,
                          const std::vector<float*>& row_grads, float loss_scale) override;
  // probs (B, tasks), sample-major.
  void predict(const data::Batch& batch, const std::vector<const float*>& rows, float* probs) override;

  // Once, before the optimizer is made: with a group of G > 1 this trainer keeps
  // only its experts of every level (dense_sharding() says where they sit).
  void set_expert_group(ExpertGroup* group) override;
  const DenseSharding* dense_sharding() const override;
  // The gates' soft load since the last call: routed[x] = accepted[x] = the sum over
  // training samples and gates of expert x's gate weight, experts numbered level by
  // level, each level's shared experts first, then task 0's, task 1's, ... (a
  // collapsed gate shows as one expert taking most of the load: max_mean_load).
  RoutingStats take_routing_stats() override;
  // In trainer order (comm::ordered_allreduce_sum), so that the expert-parallel
  // fold of the expert gradients and ep = 1 add the same terms in the same order.
  bool sums_gradients_in_trainer_order() const override { return true; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::model
