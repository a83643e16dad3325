// Dlrm: the DLRM model on the host. Bottom MLP on the dense features, one pooled
// embedding bag per table, pairwise dot interaction, top MLP, sigmoid + BCE.
// Embedding rows are not owned here: the caller pulls them from the parameter
// store and receives the row gradients to push back.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "data/batch.hpp"
#include "model/dense_parameters.hpp"
#include "model/embedding_bag_pooling.hpp"
#include "model/model.hpp"

namespace strata::model {

// "64, 16" -> {64, 16}; every entry a positive integer, blank text no entry;
// strata::Error naming `key` otherwise.
std::vector<int> parse_layer_widths(const std::string& text, const std::string& key);

// The layer widths a ModelOptions describes, checked.
struct DlrmShape {
  int num_dense = 0;
  int num_tables = 0;
  int dim = 0;                         // embedding_dim
  std::vector<int> bottom;             // bottom MLP output widths; the last is dim
  std::vector<int> top;                // top MLP output widths; the last is 1
  PoolingMode pooling = PoolingMode::kSum;
  int interaction_width() const;       // dim + (T + 1) T / 2, the top MLP's input
};

// Parses and checks the options: strata::Error naming model.embedding_dim,
// model.bottom_mlp (bad list, or last width != embedding_dim), model.top_mlp or
// model.pooling.
DlrmShape dlrm_shape(const ModelOptions& options, int num_dense, int num_tables);

// strata::Error "<who>: malformed batch: ..." when the batch, its rows or (when not
// null) its row gradients do not fit the shape (dense width, tables, offsets, index)
// or the batch does not hold `tasks` labels per sample.
void check_dlrm_batch(const DlrmShape& shape, const data::Batch& batch, const std::vector<const float*>& rows,
                      const std::vector<float*>* row_grads, const char* who, int tasks = 1);

class Dlrm final : public Model {
 public:
  // Weights are initialised as a pure function of (seed, index in the flat buffer):
  // Glorot-uniform weights, zero biases. Not thread-safe: one model per thread.
  Dlrm(const ModelOptions& options, int num_dense, int num_tables, uint64_t seed);
  ~Dlrm() override;
  Dlrm(const Dlrm&) = delete;
  Dlrm& operator=(const Dlrm&) = delete;

  const std::string& kind() const override;
  DenseParameters& parameters() override;
  const DenseParameters& parameters() const override;
  int embedding_dim() const override;
  int num_tables() const override;
  const DlrmShape& shape() const;

  double forward_backward(const data::Batch& batch, const std::vector<const float*>& rows,
                          const std::vector<float*>& row_grads, float loss_scale) override;
  void predict(const data::Batch& batch, const std::vector<const float*>& rows, float* probs) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::model
