// Hstu: item + positional embedding, HSTU layers (LN, one SiLU projection into U, V,
// Q, K, pointwise attention with a relative-position bias, LN(AV) gated by U, output
// projection, residual), final LN, dot-product scores against the candidates' rows.
// Every activation is a jagged (total_tokens, width) buffer in sample order then
// history position; buffers grow with the batch and are then reused. Every sum over
// tokens runs in token order, so a step is bit-reproducible.
#include "model/hstu.hpp"

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

constexpr uint64_t kPositionInitStream = 0x68737475706f7369ULL;  // "hstuposi"
constexpr uint64_t kBiasInitStream = 0x6873747562696173ULL;      // "hstubias"
// HSTU's reference initialises the relative-position bias N(0, 0.02); uniform with
// the same standard deviation keeps every value a pure function of (seed, index).
constexpr float kBiasInitLimit = 0.0346410162f;  // 0.02 sqrt(3)

// Without overflow for large |x| (SiLU's gate).
float sigmoid(float x) {
  if (x >= 0.0f) return 1.0f / (1.0f + std::exp(-x));
  const float e = std::exp(x);
  return e / (1.0f + e);
}

// The layers of one HSTU layer, registered as "block.<l>.*".
struct HstuBlock {
  LayerNorm input_ln;
  Linear uvqk;          // (4 dim, dim): U, V, Q, K before SiLU, in that order
  size_t relative_bias;  // (buckets) attention bias by distance i - j, last bucket for the rest
  LayerNorm attention_ln;
  Linear output;        // (dim, dim)

  HstuBlock(DenseParameters& params, const std::string& name, const HstuShape& s)
      : input_ln(params, name + ".input_ln", s.dim),
        uvqk(params, name + ".uvqk", s.dim, 4 * s.dim, Activation::kNone),
        relative_bias(params.add(name + ".relative_bias", {s.buckets})),
        attention_ln(params, name + ".attention_ln", s.dim),
        output(params, name + ".output", s.dim, s.dim, Activation::kNone) {}

  void init(DenseParameters& params, const HstuShape& s, uint64_t seed) const {
    input_ln.init(params);
    uvqk.init(params, seed);
    float* rab = params.values(relative_bias);
    for (int i = 0; i < s.buckets; ++i)
      rab[i] = (2.0f * to_unit_float(mix64(seed, kBiasInitStream, uint64_t(relative_bias + size_t(i)))) - 1.0f) *
               kBiasInitLimit;
    attention_ln.init(params);
    output.init(params, seed);
  }
};

// What one layer keeps from forward to backward, each (tokens, dim) unless noted.
struct BlockActivations {
  std::vector<float> ln_in, in_mean, in_rstd;  // LN(x); (tokens) statistics
  std::vector<float> pre;                      // (tokens, 4 dim) W1 y + b1, before SiLU
  std::vector<float> u, v, q, k;               // SiLU(pre) split in four
  std::vector<float> av;                       // attention output A(X) V(X)
  std::vector<float> ln_av, av_mean, av_rstd;  // LN(AV); (tokens) statistics
  std::vector<float> gated;                    // LN(AV) . U, the output projection's input
};

}  // namespace

HstuShape hstu_shape(const ModelOptions& options, int num_tables) {
  HstuShape shape;
  shape.dim = options.embedding_dim;
  shape.heads = options.hstu_heads;
  shape.blocks = options.hstu_blocks;
  shape.max_len = options.hstu_max_len;
  shape.buckets = options.hstu_buckets;
  check_next_item_options("hstu", shape.dim, shape.heads, shape.blocks, shape.max_len, num_tables);
  if (shape.buckets <= 0)
    throw Error("model.hstu_buckets = " + std::to_string(shape.buckets) + " is not positive",
                "set model.hstu_buckets >= 1, the relative-position bias buckets per layer (64 by default)");
  return shape;
}

struct Hstu::Impl {
  HstuShape shape;
  DenseParameters params;
  size_t position;  // (max_len, dim) positional embedding, row p for p events back
  std::vector<HstuBlock> blocks;
  LayerNorm final_ln;
  backend::AttentionScratch attention_scratch;
  // layout.sp > 1: the attention of a training step is shared with the SP group.
  std::unique_ptr<SequenceParallelAttention> sequence_parallel;
  bool training_step = false;  // forward_backward sets it: evaluation stays local
  std::vector<float> tied_grads;  // tied item rows: the candidates' part of their gradients

  static std::vector<HstuBlock> make_blocks(DenseParameters& params, const HstuShape& s) {
    std::vector<HstuBlock> out;
    out.reserve(size_t(s.blocks));
    for (int l = 0; l < s.blocks; ++l) out.emplace_back(params, "block." + std::to_string(l), s);
    return out;
  }

  // Per token (N, dim) unless noted, in sample order then history position.
  std::vector<int32_t> token_position;        // (N) index into the positional embedding
  std::vector<std::vector<float>> stream;     // blocks + 1 residual streams; [0] is the input
  std::vector<BlockActivations> acts;         // per layer
  std::vector<float> final_mean, final_rstd;  // (N)
  std::vector<float> h;                       // final LN output: the user state at each token
  // Backward scratch; dpre is (N, 4 dim).
  std::vector<float> dstream, dh, dy, dx, dn, dav, dq, dk, dv, dpre;

  // Layout of the dense buffer: position, block.0.*, block.1.*, ..., final_ln.*.
  Impl(const HstuShape& s, uint64_t seed)
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
    for (const HstuBlock& block : blocks) block.init(params, s, seed);
    final_ln.init(params);
    stream.resize(size_t(s.blocks) + 1);
    acts.resize(size_t(s.blocks));
  }

  void check(const data::Batch& batch, const std::vector<const float*>& rows,
             const std::vector<float*>* row_grads, bool training) const {
    check_next_item_batch(batch, rows, row_grads, training, shape.max_len, "Hstu", "hstu");
  }

  // Runs the network; leaves the user states in h (N, dim). Returns N.
  int forward(const data::Batch& batch, const std::vector<const float*>& rows) {
    const int B = batch.size, D = shape.dim;
    const data::SparseBags& history = batch.tables[kHstuHistoryTable];
    const int N = history.offsets[B];
    const size_t ND = size_t(N) * D;
    const float* items = rows[kHstuHistoryTable];
    const float* pos = params.values().data() + position;
    embed_history(history, B, items, pos, D, token_position, stream[0]);
    const backend::JaggedAttentionShape attention_shape{B, shape.heads, shape.head_dim(), history.offsets.data()};
    dy.resize(ND);  // the output projection before it joins the stream
    SequenceParallelAttention* sp = training_step ? sequence_parallel.get() : nullptr;
    if (sp != nullptr) sp->plan(B, history.offsets.data());
    for (int l = 0; l < shape.blocks; ++l) {
      const HstuBlock& block = blocks[l];
      BlockActivations& a = acts[l];
      const float* x = stream[l].data();
      for (auto* buffer : {&a.ln_in, &a.u, &a.v, &a.q, &a.k, &a.av, &a.ln_av, &a.gated}) buffer->resize(ND);
      for (auto* buffer : {&a.in_mean, &a.in_rstd, &a.av_mean, &a.av_rstd}) buffer->resize(size_t(N));
      a.pre.resize(4 * ND);
      stream[l + 1].resize(ND);
      const float* rab = params.values().data() + block.relative_bias;
      if (N == 0) {
        if (sp != nullptr) sp->forward(nullptr, nullptr, nullptr, rab, shape.buckets, nullptr, nullptr);
        continue;
      }

      block.input_ln.forward(params, x, N, a.ln_in.data(), a.in_mean.data(), a.in_rstd.data());
      block.uvqk.forward(params, a.ln_in.data(), N, a.pre.data());
      for (int t = 0; t < N; ++t) {
        const float* pre = &a.pre[size_t(t) * 4 * D];
        float* parts[4] = {&a.u[size_t(t) * D], &a.v[size_t(t) * D], &a.q[size_t(t) * D], &a.k[size_t(t) * D]};
        for (int c = 0; c < 4; ++c)
          for (int d = 0; d < D; ++d) {
            const float z = pre[c * D + d];
            parts[c][d] = z * sigmoid(z);
          }
      }
      if (sp != nullptr)
        sp->forward(a.q.data(), a.k.data(), a.v.data(), rab, shape.buckets, a.av.data(), nullptr);
      else
        backend::hstu_attention_forward(attention_shape, a.q.data(), a.k.data(), a.v.data(), rab, shape.buckets,
                                     a.av.data(), attention_scratch);
      block.attention_ln.forward(params, a.av.data(), N, a.ln_av.data(), a.av_mean.data(), a.av_rstd.data());
      for (size_t i = 0; i < ND; ++i) a.gated[i] = a.ln_av[i] * a.u[i];
      block.output.forward(params, a.gated.data(), N, dy.data());
      float* out = stream[l + 1].data();
      for (size_t i = 0; i < ND; ++i) out[i] = x[i] + dy[i];
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
    const data::SparseBags& history = batch.tables[kHstuHistoryTable];
    const backend::JaggedAttentionShape attention_shape{B, shape.heads, shape.head_dim(), history.offsets.data()};
    for (auto* buffer : {&dstream, &dy, &dx, &dn, &dav, &dq, &dk, &dv}) buffer->resize(ND);
    dpre.resize(4 * ND);

    std::fill(dstream.begin(), dstream.end(), 0.0f);
    final_ln.backward(params, stream[size_t(shape.blocks)].data(), final_mean.data(), final_rstd.data(), dh.data(),
                      N, dstream.data());
    for (int l = shape.blocks - 1; l >= 0; --l) {
      const HstuBlock& block = blocks[l];
      BlockActivations& a = acts[l];
      // out = x + W2 (LN(AV) . U) + b2. output is linear: its backward does not read y.
      std::copy(dstream.begin(), dstream.end(), dy.begin());
      block.output.backward(params, a.gated.data(), dy.data(), dy.data(), N, dx.data());  // dx: d gated
      // d U = d gated . LN(AV), kept in dy; d LN(AV) = d gated . U.
      for (size_t i = 0; i < ND; ++i) {
        dn[i] = dx[i] * a.u[i];
        dy[i] = dx[i] * a.ln_av[i];
      }
      std::fill(dav.begin(), dav.end(), 0.0f);
      block.attention_ln.backward(params, a.av.data(), a.av_mean.data(), a.av_rstd.data(), dn.data(), N, dav.data());
      if (sequence_parallel != nullptr && training_step)
        sequence_parallel->backward(a.q.data(), a.k.data(), a.v.data(), nullptr, nullptr,
                                    params.values().data() + block.relative_bias, shape.buckets, dav.data(),
                                    dq.data(), dk.data(), dv.data(), params.grads(block.relative_bias));
      else
        backend::hstu_attention_backward(attention_shape, a.q.data(), a.k.data(), a.v.data(),
                                      params.values().data() + block.relative_bias, shape.buckets, dav.data(),
                                      dq.data(), dk.data(), dv.data(), params.grads(block.relative_bias),
                                      attention_scratch);
      // U, V, Q, K = SiLU(pre); SiLU'(z) = sigmoid(z) (1 + z (1 - sigmoid(z))).
      for (int t = 0; t < N; ++t) {
        const float* pre = &a.pre[size_t(t) * 4 * D];
        float* dp = &dpre[size_t(t) * 4 * D];
        const float* parts[4] = {&dy[size_t(t) * D], &dv[size_t(t) * D], &dq[size_t(t) * D], &dk[size_t(t) * D]};
        for (int c = 0; c < 4; ++c)
          for (int d = 0; d < D; ++d) {
            const float z = pre[c * D + d], s = sigmoid(z);
            dp[c * D + d] = parts[c][d] * (s * (1.0f + z * (1.0f - s)));
          }
      }
      block.uvqk.backward(params, a.ln_in.data(), a.pre.data(), dpre.data(), N, dx.data());
      // x feeds the residual (dstream already holds it) and LN(x).
      block.input_ln.backward(params, stream[l].data(), a.in_mean.data(), a.in_rstd.data(), dx.data(), N,
                              dstream.data());
    }

    // x_t = sqrt(dim) e(item_t) + P[position_t], summed in token order.
    embed_history_backward(history, token_position, dstream.data(), D, shape.max_len, params.grads(position),
                           history_grads);
  }
};

Hstu::Hstu(const ModelOptions& options, int /*num_dense: ignored*/, int num_tables, uint64_t seed)
    : impl_(std::make_unique<Impl>(hstu_shape(options, num_tables), seed)) {}

Hstu::~Hstu() = default;

const std::string& Hstu::kind() const {
  static const std::string name = "hstu";
  return name;
}
DenseParameters& Hstu::parameters() { return impl_->params; }
const DenseParameters& Hstu::parameters() const { return impl_->params; }
int Hstu::embedding_dim() const { return impl_->shape.dim; }
int Hstu::num_tables() const { return kHstuTables; }
const HstuShape& Hstu::shape() const { return impl_->shape; }

double Hstu::forward_backward(const data::Batch& batch, const std::vector<const float*>& rows,
                              const std::vector<float*>& row_grads, float loss_scale) {
  return next_item_forward_backward(*impl_, batch, rows, row_grads, loss_scale);
}

void Hstu::set_sequence_group(SequenceGroup* group, const SequenceParallelOptions& options) {
  attach_sequence_group(*impl_, group, options, backend::AttentionKind::kHstu);
}

SequenceParallelStats Hstu::take_sequence_parallel_stats() { return model::take_sequence_parallel_stats(*impl_); }

void Hstu::score_candidates(const data::Batch& batch, const std::vector<const float*>& rows,
                            std::vector<float>& scores) {
  next_item_score_candidates(*impl_, batch, rows, scores);
}

void Hstu::predict(const data::Batch& batch, const std::vector<const float*>& rows, float* probs) {
  Impl& m = *impl_;
  score_candidates(batch, rows, m.dh);  // dh as scratch: predict leaves gradients alone
  next_item_first_probabilities(batch, m.dh, "Hstu", probs);
}

}  // namespace strata::model
