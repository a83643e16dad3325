// Model: what the trainer and the stores know of a network. A model reads a
// batch's de-duplicated keys of each table, receives those rows from the
// parameter store, and hands back the rows' gradients; its dense weights live in
// one flat DenseParameters buffer that the trainer all-reduces and updates.
// Concrete models (model.kind) are made by make_model and are known only here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "data/batch.hpp"
#include "model/dense_parameters.hpp"
#include "model/expert_group.hpp"
#include "model/sequence_group.hpp"
#include "model/sequence_parallel.hpp"

namespace strata::model {

// What a mixture-of-experts model routed in its training steps since the last
// take_routing_stats (empty for models without experts).
struct RoutingStats {
  std::vector<double> routed;    // (E) samples each expert's gate chose (every choice of top-k)
  std::vector<double> accepted;  // (E) of those, within the expert's capacity
  double balance_loss = 0;       // sum over the steps of the load-balancing loss (unweighted)
  double steps = 0;              // steps counted
};

class Model {
 public:
  virtual ~Model() = default;

  virtual const std::string& kind() const = 0;
  virtual DenseParameters& parameters() = 0;
  virtual const DenseParameters& parameters() const = 0;
  // Every table's rows are embedding_dim() wide; the model reads num_tables() tables.
  virtual int embedding_dim() const = 0;
  virtual int num_tables() const = 0;
  // Labels per sample the model predicts (multi-task models: one per task).
  virtual int num_tasks() const { return 1; }

  // One forward + backward pass.
  //   rows[t]      (U_t, dim) values of batch.tables[t].unique_keys
  //   row_grads[t] (U_t, dim) written: d(loss_scale * sum of sample losses)/d row,
  //                summed over the row's occurrences in sample order (b ascending, then
  //                position in the bag) so that every store mode adds the same numbers
  // Dense gradients are written (not accumulated) into parameters().grads(),
  // scaled the same way. Returns the sum of the sample losses (unscaled).
  virtual double forward_backward(const data::Batch& batch, const std::vector<const float*>& rows,
                                  const std::vector<float*>& row_grads, float loss_scale) = 0;

  // Click probabilities of a batch: probs (B, num_tasks()) sample-major. Gradients
  // are left untouched.
  virtual void predict(const data::Batch& batch, const std::vector<const float*>& rows, float* probs) = 0;

  // Next-item models rank candidates rather than predict clicks.
  virtual bool ranks_items() const { return false; }
  // scores: for each sample b, one score per key of its candidates bag (table 1), in
  // bag order, concatenated (sum_b C_b entries). Gradients are left untouched. The
  // default throws strata::Error "model.kind X does not rank items".
  virtual void score_candidates(const data::Batch& batch, const std::vector<const float*>& rows,
                                std::vector<float>& scores);

  // Expert parallel: the trainers this one shares its experts with, or null (it runs
  // every expert itself). The group must outlive the model's use of it; while it has
  // more than one member every member calls forward_backward and predict together
  // (with empty batches when it has none). The default throws strata::Error naming
  // layout.ep for a group of more than one member: the model has no experts.
  virtual void set_expert_group(ExpertGroup* group);

  // Sequence parallel: the trainers this one shares its attention with, or null. The
  // group must outlive the model's use of it; while it has more than one member every
  // member calls forward_backward together (predict and score_candidates stay local).
  // The default throws strata::Error naming layout.sp for a group of more than one
  // member: the model has no attention that can be split exactly.
  virtual void set_sequence_group(SequenceGroup* group, const SequenceParallelOptions& options);
  // What the sequence-parallel plans looked like since the last call, then reset.
  virtual SequenceParallelStats take_sequence_parallel_stats() { return {}; }

  // True when the trainers must sum the dense gradients in trainer order
  // (comm::ordered_allreduce_sum) rather than in MPI's order: the expert gradients
  // are folded in that order whatever the expert-parallel layout.
  virtual bool sums_gradients_in_trainer_order() const { return false; }

  // Expert-parallel storage: null while parameters() is the whole model. Otherwise
  // parameters() holds the replicated slices and this trainer's experts only (their
  // gradients summed over its replicas, the trainers holding the same experts), and
  // this says where they sit in the whole model, which checkpoints and the digest
  // store whole.
  virtual const DenseSharding* dense_sharding() const { return nullptr; }

  // The routing counters since the last call, then reset.
  virtual RoutingStats take_routing_stats() { return {}; }
};

// The model.kind values make_model accepts.
const std::vector<std::string>& model_kinds();

// Which of a batch's num_tables tables read one row space (data::deduplicate's
// keys_of): empty when every table keeps rows of its own; for sasrec and hstu with
// model.tie_item_rows, the candidates table reads the history table's rows, so an
// item is one store row, its input and its output embedding. Producers de-duplicate
// with it, so the stores see one key list and get one summed gradient per row.
std::vector<int32_t> tied_tables(const ModelOptions& options, int num_tables);

// The model options.kind names, for a batch of num_dense dense features,
// num_tables tables and num_tasks labels per sample. Weights are a pure function
// of (seed, index in the flat buffer). strata::Error naming the model.* key for
// options that do not fit, or the kind when it predicts one label and the data
// gives several.
std::unique_ptr<Model> make_model(const ModelOptions& options, int num_dense, int num_tables, uint64_t seed,
                                  int num_tasks = 1);

}  // namespace strata::model
