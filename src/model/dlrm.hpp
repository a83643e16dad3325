// Dlrm: the DLRM model on the host. Bottom MLP on the dense features, one pooled
// embedding bag per table, pairwise dot interaction, top MLP, sigmoid + BCE.
// Embedding rows are not owned here: the caller pulls them from the parameter
// store and receives the row gradients to push back.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "config/options.hpp"
#include "data/batch.hpp"
#include "model/dense_parameters.hpp"

namespace strata::model {

class Dlrm {
 public:
  Dlrm(const ModelOptions& options, int num_dense, int num_tables, uint64_t seed);
  ~Dlrm();
  Dlrm(const Dlrm&) = delete;
  Dlrm& operator=(const Dlrm&) = delete;

  DenseParameters& parameters();
  const DenseParameters& parameters() const;
  int embedding_dim() const;
  int num_tables() const;

  // One forward + backward pass.
  //   rows[t]      (U_t, dim) values of batch.tables[t].unique_keys
  //   row_grads[t] (U_t, dim) written: d(loss_scale * sum of sample losses)/d row
  // Dense gradients are written (not accumulated) into parameters().grads(),
  // scaled the same way. Returns the sum of the sample losses (unscaled).
  double forward_backward(const data::Batch& batch, const std::vector<const float*>& rows,
                          const std::vector<float*>& row_grads, float loss_scale);

  // Click probabilities of a batch: probs (B).
  void predict(const data::Batch& batch, const std::vector<const float*>& rows, float* probs);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::model
