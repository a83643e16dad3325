// Moe: DLRM's bottom MLP, pooled bags and dot interaction followed by a MoeTower
// (model/moe_tower.hpp): a top-k gated mixture of expert towers instead of the one
// top MLP, each expert a top MLP (model.top_mlp widths, then width 1), with the
// gate's routing (model/expert_router.hpp: top_k, capacity_factor, the
// load-balancing loss) and expert parallel over set_expert_group's members, each
// storing its own experts only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/options.hpp"
#include "data/batch.hpp"
#include "model/dense_parameters.hpp"
#include "model/dlrm.hpp"
#include "model/model.hpp"
#include "model/moe_tower.hpp"

namespace strata::model {

struct MoeShape {
  DlrmShape dlrm;       // bottom, pooling, interaction; dlrm.top is one expert's widths (last 1)
  MoeTowerShape tower;  // on the interaction output
};

// The expert keys alone (the deck checks them before any rank starts): strata::Error
// naming model.num_experts, model.top_k, model.capacity_factor, model.eval_capacity_factor
// or model.aux_loss_weight.
void check_moe_options(const ModelOptions& options);

// dlrm_shape plus check_moe_options.
MoeShape moe_shape(const ModelOptions& options, int num_dense, int num_tables);

// A MoeTower's shape from the model.* expert keys (check_moe_options), on an input of
// `width` with experts of the given layer widths (the last 1): din's model.tower = moe.
MoeTowerShape moe_tower_shape(const ModelOptions& options, int width, const std::vector<int>& expert);

class Moe final : public Model {
 public:
  // Weights: "bottom.*", "gate" (interaction width -> E), then "expert.<e>.<l>",
  // each expert's layers contiguous in the flat buffer; Glorot-uniform, zero biases,
  // a pure function of (seed, index).
  Moe(const ModelOptions& options, int num_dense, int num_tables, uint64_t seed);
  ~Moe() override;
  Moe(const Moe&) = delete;
  Moe& operator=(const Moe&) = delete;

  const std::string& kind() const override;
  DenseParameters& parameters() override;
  const DenseParameters& parameters() const override;
  int embedding_dim() const override;
  int num_tables() const override;
  const MoeShape& shape() const;
  // Expert e's weights in the flat buffer: [first, second). Under an expert group
  // of more than one member the buffer holds only this member's experts
  // (dense_sharding()); another's is refused (strata::Error).
  std::pair<size_t, size_t> expert_range(int e) const;

  double forward_backward(const data::Batch& batch, const std::vector<const float*>& rows,
                          const std::vector<float*>& row_grads, float loss_scale) override;
  void predict(const data::Batch& batch, const std::vector<const float*>& rows, float* probs) override;

  // A group of more than one member also shards the storage: the model keeps the
  // replicated weights and its own experts only. Call before training (and before
  // restoring a checkpoint), once.
  void set_expert_group(ExpertGroup* group) override;
  const DenseSharding* dense_sharding() const override;
  bool sums_gradients_in_trainer_order() const override { return true; }
  RoutingStats take_routing_stats() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::model
