// MoeTower: a top-k gated mixture of expert towers on a model's interaction
// output (B, W): the gate (a linear layer, W -> E) picks model.top_k experts per
// sample (model/expert_router.hpp: capacity, the load-balancing loss), each expert
// is a top MLP (widths, then width 1), and a sample's logit is the sum of its
// chosen experts' outputs times their gate weights. moe is DLRM's front with this
// tower; din takes it instead of its top MLP with model.tower = moe.
//
// Expert parallel (set_group): member g of a group of G runs only experts
// [g E / G, (g + 1) E / G), on the samples every member routes to them, moved by
// all-to-all (four a training step: samples out, outputs back, output gradients
// out, input gradients back). Each expert runs every member's samples as a
// separate block, in member order, the same block that member would run alone, and
// folds the blocks' weight gradients in member order (then on through the replicas
// in other groups): so a dropless run ends bit-identical to layout.ep = 1 on the
// same global batch once the trainers sum the gradients in trainer order. A member
// stores only its own experts' weights: the tower's slices are the last of the
// model's buffer, and set_group keeps the ones before them and its own experts.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "model/dense_parameters.hpp"
#include "model/expert_group.hpp"
#include "model/model.hpp"

namespace strata::model {

struct MoeTowerShape {
  int width = 0;                // W: the input, every expert's and the gate's
  std::vector<int> expert;      // an expert's layer widths, the last 1
  int num_experts = 1;
  int top_k = 1;
  double capacity_factor = 0;       // 0 = dropless
  double eval_capacity_factor = 0;  // the predictions' capacity; 0 = dropless
  float aux_loss_weight = 0;
};

class MoeTower {
 public:
  // Registers "gate" (W -> E) and "expert.<e>.<l>" in params, after what is there.
  MoeTower(DenseParameters& params, const MoeTowerShape& shape);
  ~MoeTower();
  MoeTower(const MoeTower&) = delete;
  MoeTower& operator=(const MoeTower&) = delete;

  const MoeTowerShape& shape() const;
  // Glorot-uniform weights, each a pure function of (seed, its index); zero biases.
  void init(DenseParameters& params, uint64_t seed) const;
  // Expert e's weights in the buffer: [first, second); another member's is refused
  // (strata::Error) once the storage is sharded.
  std::pair<size_t, size_t> expert_range(int e) const;

  // A group of more than one member shards the storage too: params keeps the
  // slices before the tower's and this member's experts (values kept). Once,
  // before training.
  void set_group(ExpertGroup* group, DenseParameters& params);
  const DenseSharding* sharding() const;

  // z (B, W) -> the logits (B). training: the training router (capacity_factor)
  // and the state backward needs; otherwise the evaluation router. While the group
  // has more than one member every member calls it together.
  const float* forward(DenseParameters& params, const float* z, int batch, bool training);
  // After forward(training): dlogits (B) -> dz (B, W) (written), every weight's
  // gradient written; aux_scale weighs the load-balancing loss (its weight times
  // the loss scale).
  void backward(DenseParameters& params, const float* z, const float* dlogits, float aux_scale, int batch,
                float* dz);
  // The routing counters since the last call (backward counts), then reset.
  RoutingStats take_stats();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::model
