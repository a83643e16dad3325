// Din: the Deep Interest Network's target attention (Zhou et al., KDD 2018) over a
// user's behaviour history, on the host.
//
// The history table's bag of a sample holds the user's history items followed by
// the candidate item as its last key ("target-last bag"), so history and candidate
// share one embedding table and are de-duplicated together. For every history item
// h of a sample with candidate c, the activation unit (an MLP with ReLU between its
// layers and a width-1 linear output) scores [e_h, e_c, e_h - e_c, e_h * e_c]; the
// user interest is sum_h a_h e_h, weights not normalised by a softmax (DIN's choice,
// which keeps the intensity of interest). The top MLP reads
// [bottom_mlp(dense), pooled bag of every other table, interest, e_c] and ends in one
// logit for sigmoid + BCE. A bag of one key has no history (interest 0); an empty
// bag has neither history nor candidate (both 0). With model.din_tower = moe a
// MoeTower (top-k gated experts, each a top MLP) reads that input instead of the
// one top MLP: expert parallel over layout.ep, as model.kind = moe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "data/batch.hpp"
#include "model/dense_parameters.hpp"
#include "model/model.hpp"
#include "model/moe_tower.hpp"

namespace strata::model {

struct DinShape {
  int num_dense = 0;
  int num_tables = 0;
  int dim = 0;
  int history_table = 0;           // the table of target-last bags
  std::vector<int> bottom;         // bottom MLP widths; the last is dim
  std::vector<int> attention;      // activation unit widths; the last is 1
  std::vector<int> top;            // top MLP widths; the last is 1
  bool moe_tower = false;          // model.din_tower = moe: experts of the top MLP's widths instead of it
  MoeTowerShape tower;             // (moe_tower) on the top MLP's input
  int top_input_width() const { return (num_tables + 2) * dim; }
};

// Checks the options for a batch of num_dense dense features and num_tables tables:
// strata::Error naming model.din_history_table, model.din_attention_mlp or the
// keys dlrm_shape checks.
DinShape din_shape(const ModelOptions& options, int num_dense, int num_tables);

class Din final : public Model {
 public:
  Din(const ModelOptions& options, int num_dense, int num_tables, uint64_t seed);
  ~Din() override;
  Din(const Din&) = delete;
  Din& operator=(const Din&) = delete;

  const std::string& kind() const override;
  DenseParameters& parameters() override;
  const DenseParameters& parameters() const override;
  int embedding_dim() const override;
  int num_tables() const override;
  const DinShape& shape() const;

  double forward_backward(const data::Batch& batch, const std::vector<const float*>& rows,
                          const std::vector<float*>& row_grads, float loss_scale) override;
  void predict(const data::Batch& batch, const std::vector<const float*>& rows, float* probs) override;

  // layout.sp > 1: the activation unit's events are shared with the group (DinActivationUnit).
  void set_sequence_group(SequenceGroup* group, const SequenceParallelOptions& options) override;
  SequenceParallelStats take_sequence_parallel_stats() override;

  // model.din_tower = moe only (else the defaults: no experts).
  void set_expert_group(ExpertGroup* group) override;
  const DenseSharding* dense_sharding() const override;
  bool sums_gradients_in_trainer_order() const override;
  RoutingStats take_routing_stats() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::model
