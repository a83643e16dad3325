// What the next-item models (sasrec, hstu) share around their sequence encoders: the
// LayerNorm their blocks use, and the head that turns the encoder's per-token states
// h (total_tokens, dim) into scores against item rows: the training loss over each
// position's (positive, negative) pair, and the scores of evaluation candidates at a
// sample's last position.
//
// Batch layout (data/sequence_next_item.hpp): table 0 the history bags, table 1 the
// candidates: in training 2 L_b keys [pos_0, neg_0, pos_1, neg_1, ...], in scoring
// any number [target, negatives...]. Every sum runs in token order, so results are
// bit-reproducible. With tied item rows (model.tie_item_rows, data::SparseBags::keys_of)
// the candidates index table 0's rows: an item's input and output embedding are one
// row, whose gradient is its history part (token order) plus its candidate part
// (token order), added in that order.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "data/batch.hpp"
#include "model/dense_parameters.hpp"
#include "model/sequence_parallel.hpp"

namespace strata::model {

inline constexpr int kNextItemHistoryTable = 0;
inline constexpr int kNextItemCandidateTable = 1;

// LayerNorm over the last axis, y = gain * (x - mean) / sqrt(var + eps) + bias, with
// the learned gain (dim) and bias (dim) as slices of the dense buffer; statistics in
// double.
class LayerNorm {
 public:
  static constexpr float kEps = 1e-6f;

  // Registers "<name>.gain" and "<name>.bias" (dim each) in params.
  LayerNorm(DenseParameters& params, const std::string& name, int dim);
  // Gain 1, bias 0. Call after params.finalize().
  void init(DenseParameters& params) const;
  // y (rows, dim) from x (rows, dim); mean and rstd (rows) kept for backward.
  void forward(const DenseParameters& params, const float* x, int rows, float* y, float* mean, float* rstd) const;
  // dx (rows, dim) += d/dx given dy (rows, dim); d gain, d bias written, summed over
  // rows in ascending order from zero.
  void backward(DenseParameters& params, const float* x, const float* mean, const float* rstd, const float* dy,
                int rows, float* dx) const;

 private:
  int dim_;
  size_t gain_;
  size_t bias_;
};

// Checks the options every next-item model has (model.embedding_dim, model.<kind>_heads
// dividing it, model.<kind>_blocks, model.<kind>_max_len) and that the data has the two
// next-item tables: strata::Error naming the key otherwise.
void check_next_item_options(const std::string& kind, int dim, int heads, int blocks, int max_len, int num_tables);

// Checks a next-item batch before a model reads it: two tables with consistent CSR
// bags and de-duplicated indices, rows (and row_grads when given) for every table
// with keys, histories of at most max_len items, and in training 2 L_b candidates per
// sample. `model` ("Sasrec") starts the messages; `kind` ("sasrec") names the keys
// model.<kind>_max_len and model.kind = <kind>.
void check_next_item_batch(const data::Batch& batch, const std::vector<const float*>& rows,
                           const std::vector<float*>* row_grads, bool training, int max_len,
                           const std::string& model, const std::string& kind);

// The models' input: x_t = sqrt(dim) e(item_t) + P[position_t] for every history token,
// positions counted back from the sample's most recent event (written to
// token_position). x (tokens, dim) is resized.
void embed_history(const data::SparseBags& history, int batch_size, const float* item_rows,
                   const float* positions, int dim, std::vector<int32_t>& token_position, std::vector<float>& x);

// Its backward given dx (tokens, dim): the position table's gradient (max_len, dim)
// and the history rows' gradients (U_0, dim) overwritten, summed in token order.
void embed_history_backward(const data::SparseBags& history, const std::vector<int32_t>& token_position,
                            const float* dx, int dim, int max_len, float* position_grads, float* history_grads);

// Sum over samples of softplus(-s(h_t, pos_t)) + softplus(s(h_t, neg_t)) over every
// history token t, s = h . e. dh (tokens, dim) is overwritten with loss_scale times the
// loss's gradient in h; out_grads, the gradients of the rows the candidates read (U_1
// rows, or U_0 when tied to the history table), is overwritten the same way (zero for
// rows no token scored).
double next_item_pair_loss(const data::Batch& batch, const float* h, int dim, const float* out_rows,
                           float* out_grads, float loss_scale, std::vector<float>& dh);

// scores (sum_b C_b): h at sample b's last history token dotted with each of its
// candidates' rows, in bag order; 0 for a sample without history.
void next_item_scores(const data::Batch& batch, const float* h, int dim, const float* out_rows,
                      std::vector<float>& scores);

// probs[b] = sigmoid(the first candidate's score); `model` names the model in the
// error for a sample without candidates.
void next_item_first_probabilities(const data::Batch& batch, const std::vector<float>& scores,
                                   const std::string& model, float* probs);

// The Model methods every next-item model implements alike, over its Impl: check(batch,
// rows, row_grads*, training), forward(batch, rows) -> tokens (leaving the user states
// in h), backward(batch, tokens, history_grads) from dh, and params, shape.dim, h, dh,
// and sequence_parallel (null unless layout.sp > 1; it must take part in every step's
// backward, even without tokens of its own) with training_step, true only inside a
// training step (evaluation never goes through the sequence-parallel group).
template <class Impl>
double next_item_forward_backward(Impl& m, const data::Batch& batch, const std::vector<const float*>& rows,
                                  const std::vector<float*>& row_grads, float loss_scale) {
  m.training_step = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{m.training_step};
  m.check(batch, rows, &row_grads, /*training=*/true);
  const int D = m.shape.dim;
  const int N = m.forward(batch, rows);
  const data::SparseBags& candidates = batch.tables[kNextItemCandidateTable];
  const int out_table = data::keys_table(batch, kNextItemCandidateTable);
  const bool tied = out_table != kNextItemCandidateTable;
  const size_t out_rows_count = batch.tables[size_t(out_table)].unique_keys.size();
  // Tied: the candidate part goes to scratch first, since the history part overwrites the rows' gradients.
  if (tied) m.tied_grads.resize(out_rows_count * size_t(D));
  float* out_grads = tied ? m.tied_grads.data() : row_grads[kNextItemCandidateTable];
  if (N == 0) {  // no history: nothing scored, every gradient zero
    const data::SparseBags& history = batch.tables[kNextItemHistoryTable];
    if (m.sequence_parallel != nullptr) {  // still runs the other members' attention
      m.dh.clear();
      m.backward(batch, 0, row_grads[kNextItemHistoryTable]);
    }
    m.params.zero_grads();
    if (!candidates.unique_keys.empty()) std::fill_n(out_grads, candidates.unique_keys.size() * D, 0.0f);
    if (!history.unique_keys.empty())
      std::fill_n(row_grads[kNextItemHistoryTable], history.unique_keys.size() * D, 0.0f);
    return 0.0;
  }
  const double loss = next_item_pair_loss(batch, m.h.data(), D, rows[size_t(out_table)], out_grads, loss_scale, m.dh);
  m.backward(batch, N, row_grads[kNextItemHistoryTable]);
  if (tied) {
    float* grads = row_grads[kNextItemHistoryTable];
    for (size_t i = 0; i < m.tied_grads.size(); ++i) grads[i] += m.tied_grads[i];
  }
  return loss;
}

// layout.sp > 1: the model's attention shares its work with the group (null or one member: alone).
template <class Impl>
void attach_sequence_group(Impl& m, SequenceGroup* group, const SequenceParallelOptions& options,
                           backend::AttentionKind kind) {
  m.sequence_parallel.reset();
  if (group != nullptr && group->size() > 1)
    m.sequence_parallel =
        std::make_unique<SequenceParallelAttention>(*group, kind, m.shape.heads, m.shape.head_dim(), options);
}

template <class Impl>
SequenceParallelStats take_sequence_parallel_stats(Impl& m) {
  return m.sequence_parallel ? m.sequence_parallel->take_stats() : SequenceParallelStats{};
}

template <class Impl>
void next_item_score_candidates(Impl& m, const data::Batch& batch, const std::vector<const float*>& rows,
                                std::vector<float>& scores) {
  m.check(batch, rows, nullptr, /*training=*/false);
  m.forward(batch, rows);
  next_item_scores(batch, m.h.data(), m.shape.dim, rows[size_t(data::keys_table(batch, kNextItemCandidateTable))],
                   scores);
}

}  // namespace strata::model
