// Hstu: Hierarchical Sequential Transduction Units (Zhai et al., ICML 2024, "Actions
// Speak Louder than Words") on the host as a next-item model: a causal stack of HSTU
// layers (pointwise SiLU attention with a relative-position bias, gated by a learned
// U) over a user's item history that, at every position, scores the next item by a
// dot product with the item's embedding.
//
// Tables of a batch: those of Sasrec (model/sasrec.hpp), one item key space, each table
// de-duplicated on its own:
//   0 history     bag b: the context items, oldest first, L_b <= hstu_max_len keys
//   1 candidates  training: [pos_0, neg_0, pos_1, neg_1, ...] (2 L_b keys), pos_i the
//                 item that followed history position i, neg_i a sampled negative;
//                 scoring: [target, negatives...] ranked at the last position
// Dense features, if any, are ignored.
//
// Network. Token i of sample b enters as sqrt(dim) e(item_i) + P[L_b - 1 - i] (as in
// Sasrec, and as HSTU's reference input preprocessor scales the item rows): positions
// count back from the most recent event, P (hstu_max_len, dim). Then hstu_blocks
// layers, each
//   y = LN(x);  U, V, Q, K = split(SiLU(W1 y + b1))      W1 (4 dim, dim), each dim wide
//   AV = hstu_attention(Q, K, V; rab)                     hstu_heads heads, causal,
//        SiLU(q.k / sqrt(head_dim) + rab[min(i - j, hstu_buckets - 1)]) / L_b, no softmax
//   x += W2 (LN(AV) . U) + b2                              W2 (dim, dim)
// with a learned bias table rab (hstu_buckets) per layer, shared by the heads; a final
// LN gives h_i. Every LN has a learned gain and bias. s(h, item) = h . e(item) with the
// same (unscaled) item row as output embedding. Training loss of a sample: sum_i
// softplus(-s(h_i, pos_i)) + softplus(s(h_i, neg_i)), Sasrec's. No dropout, so a step
// is deterministic.
//
// The batch runs as one jagged (total_tokens, dim) activation: every projection is one
// GEMM over all tokens, attention is backend::hstu_attention_*.
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

struct HstuShape {
  int dim = 0;        // embedding width, also the width of every activation and of U, V, Q, K
  int heads = 1;      // attention heads; each head is dim / heads wide
  int blocks = 2;     // HSTU layers
  int max_len = 200;  // longest history (rows of the positional embedding)
  int buckets = 64;   // relative-position bias buckets per layer; distances >= buckets - 1 share the last
  int head_dim() const { return dim / heads; }
};

inline constexpr int kHstuHistoryTable = 0;
inline constexpr int kHstuCandidateTable = 1;
inline constexpr int kHstuTables = 2;

// Checks the options for a batch of num_tables tables: strata::Error naming
// model.embedding_dim, model.hstu_heads, model.hstu_blocks, model.hstu_max_len or
// model.hstu_buckets, or saying that the data must have the two tables.
HstuShape hstu_shape(const ModelOptions& options, int num_tables);

class Hstu final : public Model {
 public:
  Hstu(const ModelOptions& options, int num_dense, int num_tables, uint64_t seed);
  ~Hstu() override;
  Hstu(const Hstu&) = delete;
  Hstu& operator=(const Hstu&) = delete;

  const std::string& kind() const override;
  DenseParameters& parameters() override;
  const DenseParameters& parameters() const override;
  int embedding_dim() const override;
  int num_tables() const override;
  const HstuShape& shape() const;

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
