// Sasrec: item + positional embedding, pre-LN causal transformer blocks, final LN,
// dot-product scores against the candidates' rows. Every activation is a jagged
// (total_tokens, dim) buffer in sample order then history position; buffers grow with
// the batch and are then reused. Every sum over tokens runs in token order, so a step
// is bit-reproducible.
#include "model/sasrec.hpp"

#include <algorithm>
#include <cmath>

#include "backend/attention_kernels.hpp"
#include "backend/dense_kernels.hpp"
#include "backend/embedding_kernels.hpp"
#include "common/error.hpp"
#include "common/rng.hpp"
#include "model/linear.hpp"
#include "model/next_item_head.hpp"

namespace strata::model {


namespace {

constexpr uint64_t kPositionInitStream = 0x736173726563706fULL;  // "sasrecpo"

// The layers of one block, registered as "block.<l>.*".
struct SasrecBlock {
  LayerNorm ln1;
  Linear query, key, value, output;
  LayerNorm ln2;
  Linear ffn_in, ffn_out;

  SasrecBlock(DenseParameters& params, const std::string& name, int dim)
      : ln1(params, name + ".ln1", dim),
        query(params, name + ".query", dim, dim, Activation::kNone),
        key(params, name + ".key", dim, dim, Activation::kNone),
        value(params, name + ".value", dim, dim, Activation::kNone),
        output(params, name + ".output", dim, dim, Activation::kNone),
        ln2(params, name + ".ln2", dim),
        ffn_in(params, name + ".ffn.0", dim, dim, Activation::kRelu),
        ffn_out(params, name + ".ffn.1", dim, dim, Activation::kNone) {}

  void init(DenseParameters& params, uint64_t seed) const {
    ln1.init(params);
    for (const Linear* l : {&query, &key, &value, &output, &ffn_in, &ffn_out}) l->init(params, seed);
    ln2.init(params);
  }
};

// What one block keeps from forward to backward, each (tokens, dim) unless noted.
struct BlockActivations {
  std::vector<float> ln1, ln1_mean, ln1_rstd;  // LN1 output; (tokens) statistics
  std::vector<float> q, k, v, attention;       // projections and attention output
  std::vector<float> lse;                      // (tokens, heads) attention logsumexp
  std::vector<float> mid;                      // x + MHA(LN1(x))
  std::vector<float> ln2, ln2_mean, ln2_rstd;  // LN2 output; (tokens) statistics
  std::vector<float> hidden;                   // relu(W1 LN2 + b1)
};

}  // namespace

SasrecShape sasrec_shape(const ModelOptions& options, int num_tables) {
  SasrecShape shape;
  shape.dim = options.embedding_dim;
  shape.heads = options.sasrec_heads;
  shape.blocks = options.sasrec_blocks;
  shape.max_len = options.sasrec_max_len;
  check_next_item_options("sasrec", shape.dim, shape.heads, shape.blocks, shape.max_len, num_tables);
  return shape;
}

struct Sasrec::Impl {
  SasrecShape shape;
  DenseParameters params;
  size_t position;  // (max_len, dim) positional embedding, row p for p events back
  std::vector<SasrecBlock> blocks;
  LayerNorm final_ln;
  backend::AttentionScratch attention_scratch;
  // layout.sp > 1: the attention of a training step is shared with the SP group.
  std::unique_ptr<SequenceParallelAttention> sequence_parallel;
  bool training_step = false;  // forward_backward sets it: evaluation stays local
  std::vector<float> tied_grads;  // tied item rows: the candidates' part of their gradients

  static std::vector<SasrecBlock> make_blocks(DenseParameters& params, const SasrecShape& s) {
    std::vector<SasrecBlock> out;
    out.reserve(size_t(s.blocks));
    for (int l = 0; l < s.blocks; ++l) out.emplace_back(params, "block." + std::to_string(l), s.dim);
    return out;
  }

  // Per token (N, dim) unless noted, in sample order then history position.
  std::vector<int32_t> token_position;      // (N) index into the positional embedding
  std::vector<std::vector<float>> stream;   // blocks + 1 residual streams; [0] is the input
  std::vector<BlockActivations> acts;       // per block
  std::vector<float> final_mean, final_rstd;  // (N)
  std::vector<float> h;                     // final LN output: the user state at each token
  // Backward scratch.
  std::vector<float> dstream, dh, dy, dx, dtmp, dq, dk, dv;

  // Layout of the dense buffer: position, block.0.*, block.1.*, ..., final_ln.*.
  Impl(const SasrecShape& s, uint64_t seed)
      : shape(s),
        position(params.add("position", {s.max_len, s.dim})),
        blocks(make_blocks(params, s)),
        final_ln(params, "final_ln", s.dim) {
    params.finalize();
    // Glorot-uniform like Linear, each value a pure function of (seed, its index).
    const float limit = float(std::sqrt(6.0 / double(s.max_len + s.dim)));
    float* p = params.values(position);
    for (size_t i = 0; i < size_t(s.max_len) * s.dim; ++i)
      p[i] = (2.0f * to_unit_float(mix64(seed, kPositionInitStream, uint64_t(position + i))) - 1.0f) * limit;
    for (const SasrecBlock& block : blocks) block.init(params, seed);
    final_ln.init(params);
    stream.resize(size_t(s.blocks) + 1);
    acts.resize(size_t(s.blocks));
  }

  void check(const data::Batch& batch, const std::vector<const float*>& rows,
             const std::vector<float*>* row_grads, bool training) const {
    check_next_item_batch(batch, rows, row_grads, training, shape.max_len, "Sasrec", "sasrec");
  }

  // Runs the network; leaves the user states in h (N, dim). Returns N.
  int forward(const data::Batch& batch, const std::vector<const float*>& rows) {
    const int B = batch.size, D = shape.dim;
    const data::SparseBags& history = batch.tables[kSasrecHistoryTable];
    const int N = history.offsets[B];
    const size_t ND = size_t(N) * D;
    const float* items = rows[kSasrecHistoryTable];
    const float* pos = params.values().data() + position;
    embed_history(history, B, items, pos, D, token_position, stream[0]);
    const backend::JaggedAttentionShape attention_shape{B, shape.heads, shape.head_dim(), history.offsets.data()};
    dy.resize(ND);  // the projection outputs before they join the stream
    SequenceParallelAttention* sp = training_step ? sequence_parallel.get() : nullptr;
    if (sp != nullptr) sp->plan(B, history.offsets.data());
    for (int l = 0; l < shape.blocks; ++l) {
      const SasrecBlock& block = blocks[l];
      BlockActivations& a = acts[l];
      const float* x = stream[l].data();
      for (auto* buffer : {&a.ln1, &a.q, &a.k, &a.v, &a.attention, &a.mid, &a.ln2, &a.hidden}) buffer->resize(ND);
      for (auto* buffer : {&a.ln1_mean, &a.ln1_rstd, &a.ln2_mean, &a.ln2_rstd}) buffer->resize(size_t(N));
      a.lse.resize(size_t(N) * shape.heads);
      stream[l + 1].resize(ND);
      if (N == 0) {
        if (sp != nullptr) sp->forward(nullptr, nullptr, nullptr, nullptr, 0, nullptr, nullptr);
        continue;
      }

      block.ln1.forward(params, x, N, a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data());
      block.query.forward(params, a.ln1.data(), N, a.q.data());
      block.key.forward(params, a.ln1.data(), N, a.k.data());
      block.value.forward(params, a.ln1.data(), N, a.v.data());
      if (sp != nullptr)
        sp->forward(a.q.data(), a.k.data(), a.v.data(), nullptr, 0, a.attention.data(), a.lse.data());
      else
        backend::causal_attention_forward(attention_shape, a.q.data(), a.k.data(), a.v.data(), a.attention.data(),
                                       a.lse.data(), attention_scratch);
      block.output.forward(params, a.attention.data(), N, dy.data());
      for (size_t i = 0; i < ND; ++i) a.mid[i] = x[i] + dy[i];

      block.ln2.forward(params, a.mid.data(), N, a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data());
      block.ffn_in.forward(params, a.ln2.data(), N, a.hidden.data());
      block.ffn_out.forward(params, a.hidden.data(), N, dy.data());
      float* out = stream[l + 1].data();
      for (size_t i = 0; i < ND; ++i) out[i] = a.mid[i] + dy[i];
    }
    h.resize(ND);
    final_mean.resize(size_t(N));
    final_rstd.resize(size_t(N));
    if (N > 0)
      final_ln.forward(params, stream[size_t(shape.blocks)].data(), N, h.data(), final_mean.data(), final_rstd.data());
    return N;
  }

  // Given dh (N, dim) = d loss / d h: every dense gradient written, the history rows'
  // gradients written into row_grads (U_0, dim).
  void backward(const data::Batch& batch, int N, float* history_grads) {
    const int B = batch.size, D = shape.dim;
    const size_t ND = size_t(N) * D;
    const data::SparseBags& history = batch.tables[kSasrecHistoryTable];
    const backend::JaggedAttentionShape attention_shape{B, shape.heads, shape.head_dim(), history.offsets.data()};
    for (auto* buffer : {&dstream, &dy, &dx, &dtmp, &dq, &dk, &dv}) buffer->resize(ND);

    std::fill(dstream.begin(), dstream.end(), 0.0f);
    final_ln.backward(params, stream[size_t(shape.blocks)].data(), final_mean.data(), final_rstd.data(), dh.data(),
                      N, dstream.data());
    for (int l = shape.blocks - 1; l >= 0; --l) {
      const SasrecBlock& block = blocks[l];
      BlockActivations& a = acts[l];
      // out = mid + FFN(LN2(mid)). ffn_out is linear: its backward does not read y.
      std::copy(dstream.begin(), dstream.end(), dy.begin());
      block.ffn_out.backward(params, a.hidden.data(), dy.data(), dy.data(), N, dx.data());
      block.ffn_in.backward(params, a.ln2.data(), a.hidden.data(), dx.data(), N, dtmp.data());
      block.ln2.backward(params, a.mid.data(), a.ln2_mean.data(), a.ln2_rstd.data(), dtmp.data(), N, dstream.data());
      // mid = x + O(attention(Q, K, V)), Q, K, V of LN1(x).
      std::copy(dstream.begin(), dstream.end(), dy.begin());
      block.output.backward(params, a.attention.data(), dy.data(), dy.data(), N, dx.data());
      if (sequence_parallel != nullptr && training_step)
        sequence_parallel->backward(a.q.data(), a.k.data(), a.v.data(), a.attention.data(), a.lse.data(), nullptr, 0,
                                    dx.data(), dq.data(), dk.data(), dv.data(), nullptr);
      else
        backend::causal_attention_backward(attention_shape, a.q.data(), a.k.data(), a.v.data(), a.attention.data(),
                                        a.lse.data(), dx.data(), dq.data(), dk.data(), dv.data(), attention_scratch);
      block.query.backward(params, a.ln1.data(), a.q.data(), dq.data(), N, dx.data());
      block.key.backward(params, a.ln1.data(), a.k.data(), dk.data(), N, dtmp.data());
      for (size_t i = 0; i < ND; ++i) dx[i] += dtmp[i];
      block.value.backward(params, a.ln1.data(), a.v.data(), dv.data(), N, dtmp.data());
      for (size_t i = 0; i < ND; ++i) dx[i] += dtmp[i];
      block.ln1.backward(params, stream[l].data(), a.ln1_mean.data(), a.ln1_rstd.data(), dx.data(), N,
                         dstream.data());
    }

    // x_t = sqrt(dim) e(item_t) + P[position_t], summed in token order.
    embed_history_backward(history, token_position, dstream.data(), D, shape.max_len, params.grads(position),
                           history_grads);
  }
};

Sasrec::Sasrec(const ModelOptions& options, int /*num_dense: ignored*/, int num_tables, uint64_t seed)
    : impl_(std::make_unique<Impl>(sasrec_shape(options, num_tables), seed)) {}

Sasrec::~Sasrec() = default;

const std::string& Sasrec::kind() const {
  static const std::string name = "sasrec";
  return name;
}
DenseParameters& Sasrec::parameters() { return impl_->params; }
const DenseParameters& Sasrec::parameters() const { return impl_->params; }
int Sasrec::embedding_dim() const { return impl_->shape.dim; }
int Sasrec::num_tables() const { return kSasrecTables; }
const SasrecShape& Sasrec::shape() const { return impl_->shape; }

double Sasrec::forward_backward(const data::Batch& batch, const std::vector<const float*>& rows,
                              const std::vector<float*>& row_grads, float loss_scale) {
  return next_item_forward_backward(*impl_, batch, rows, row_grads, loss_scale);
}

void Sasrec::set_sequence_group(SequenceGroup* group, const SequenceParallelOptions& options) {
  attach_sequence_group(*impl_, group, options, backend::AttentionKind::kCausalSoftmax);
}

SequenceParallelStats Sasrec::take_sequence_parallel_stats() { return model::take_sequence_parallel_stats(*impl_); }

void Sasrec::score_candidates(const data::Batch& batch, const std::vector<const float*>& rows,
                            std::vector<float>& scores) {
  next_item_score_candidates(*impl_, batch, rows, scores);
}

void Sasrec::predict(const data::Batch& batch, const std::vector<const float*>& rows, float* probs) {
  Impl& m = *impl_;
  score_candidates(batch, rows, m.dh);  // dh as scratch: predict leaves gradients alone
  next_item_first_probabilities(batch, m.dh, "Sasrec", probs);
}

}  // namespace strata::model
