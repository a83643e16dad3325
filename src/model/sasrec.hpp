// Sasrec: self-attentive sequential recommendation (Kang & McAuley, ICDM 2018) on the
// host: a causal transformer over a user's item history that, at every position,
// scores the next item by a dot product with the item's embedding.
//
// Tables of a batch (one item key space, each table de-duplicated on its own):
//   0 history     bag b: the context items, oldest first, L_b <= sasrec_max_len keys
//   1 candidates  training: [pos_0, neg_0, pos_1, neg_1, ...] (2 L_b keys), pos_i the
//                 item that followed history position i, neg_i a sampled negative;
//                 scoring: [target, negatives...] ranked at the last position
// Dense features, if any, are ignored.
//
// Network. Token i of sample b enters as sqrt(dim) e(item_i) + P[L_b - 1 - i]: positions
// count back from the most recent event, so the latest item always has position 0
// (that is the one scored at evaluation) and P (sasrec_max_len, dim) needs no
// padding. Then sasrec_blocks pre-LN blocks x += MHA(LN1(x)) (causal, sasrec_heads
// heads, Q/K/V/O projections with biases), x += W2 relu(W1 LN2(x) + b1) + b2, and a
// final LN give h_i. s(h, item) = h . e(item) with the same (unscaled) item row as
// output embedding. Training loss of a sample: sum_i softplus(-s(h_i, pos_i)) +
// softplus(s(h_i, neg_i)) (SASRec's BCE with one negative per position). No dropout,
// so a step is deterministic.
//
// The batch runs as one jagged (total_tokens, dim) activation: every projection is one
// GEMM over all tokens, attention is backend::causal_attention_*.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "data/batch.hpp"
#include "model/dense_parameters.hpp"
#include "model/model.hpp"

namespace strata::model {

struct SasrecShape {
  int dim = 0;        // embedding width, also the width of every activation
  int heads = 1;      // attention heads; each head is dim / heads wide
  int blocks = 2;     // self-attention blocks
  int max_len = 200;  // longest history (rows of the positional embedding)
  int head_dim() const { return dim / heads; }
};

inline constexpr int kSasrecHistoryTable = 0;
inline constexpr int kSasrecCandidateTable = 1;
inline constexpr int kSasrecTables = 2;

// Checks the options for a batch of num_tables tables: strata::Error naming
// model.embedding_dim, model.sasrec_heads, model.sasrec_blocks or
// model.sasrec_max_len, or saying that the data must have the two tables.
SasrecShape sasrec_shape(const ModelOptions& options, int num_tables);

class Sasrec final : public Model {
 public:
  Sasrec(const ModelOptions& options, int num_dense, int num_tables, uint64_t seed);
  ~Sasrec() override;
  Sasrec(const Sasrec&) = delete;
  Sasrec& operator=(const Sasrec&) = delete;

  const std::string& kind() const override;
  DenseParameters& parameters() override;
  const DenseParameters& parameters() const override;
  int embedding_dim() const override;
  int num_tables() const override;
  const SasrecShape& shape() const;

  // Training batches: the candidates bag of sample b must hold 2 L_b keys.
  double forward_backward(const data::Batch& batch, const std::vector<const float*>& rows,
                          const std::vector<float*>& row_grads, float loss_scale) override;
  // probs[b] = sigmoid(score of the first candidate of sample b); every candidates bag
  // must hold at least one key.
  void predict(const data::Batch& batch, const std::vector<const float*>& rows, float* probs) override;

  // layout.sp > 1: training steps share the attention with the group (model/sequence_parallel.hpp).
  void set_sequence_group(SequenceGroup* group, const SequenceParallelOptions& options) override;
  SequenceParallelStats take_sequence_parallel_stats() override;

  bool ranks_items() const override { return true; }
  // h_{L_b - 1} . e(candidate) for every candidate of sample b, in bag order; 0 for
  // every candidate of a sample without history.
  void score_candidates(const data::Batch& batch, const std::vector<const float*>& rows,
                        std::vector<float>& scores) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::model
