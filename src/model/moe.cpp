// Moe: the DLRM front, the gate, and the experts, with the samples moved to the
// members that own their experts and the results moved back (four all-to-alls a
// training step: samples out, outputs back, output gradients out, input gradients
// back). Within one member's block an expert sees the samples in batch order, and
// a sample's combined logit and input gradient add its choices in choice order.
#include "model/moe.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/dense_kernels.hpp"
#include "backend/embedding_kernels.hpp"
#include "common/error.hpp"
#include "model/bce_loss.hpp"
#include "model/dot_interaction.hpp"
#include "model/embedding_bag_pooling.hpp"
#include "model/expert_router.hpp"
#include "model/linear.hpp"
#include "model/mlp.hpp"

namespace strata::model {

void check_moe_options(const ModelOptions& options) {
  if (options.num_experts < 1 || options.num_experts > 4096) {
    throw Error("model.num_experts = " + std::to_string(options.num_experts) + " is out of range",
                "set model.num_experts to the number of expert towers, 1 to 4096");
  }
  if (options.top_k != 1 && options.top_k != 2) {
    throw Error("model.top_k = " + std::to_string(options.top_k) + " is not supported",
                "set model.top_k = 1 (Switch) or 2 (GShard)");
  }
  if (options.top_k > options.num_experts) {
    throw Error("model.top_k = " + std::to_string(options.top_k) + " exceeds model.num_experts = " +
                    std::to_string(options.num_experts),
                "use at least as many experts as model.top_k");
  }
  if (!(std::isfinite(options.capacity_factor) && options.capacity_factor >= 0)) {
    throw Error("model.capacity_factor = " + std::to_string(options.capacity_factor) + " is not a number >= 0",
                "set model.capacity_factor = 0 (dropless) or a factor such as 1.25");
  }
  if (!(std::isfinite(options.eval_capacity_factor) && options.eval_capacity_factor >= 0)) {
    throw Error("model.eval_capacity_factor = " + std::to_string(options.eval_capacity_factor) +
                    " is not a number >= 0",
                "set model.eval_capacity_factor = 0 (dropless evaluation, the default) or a factor such as 2");
  }
  if (!(std::isfinite(options.aux_loss_weight) && options.aux_loss_weight >= 0)) {
    throw Error("model.aux_loss_weight = " + std::to_string(options.aux_loss_weight) + " is not a number >= 0",
                "set model.aux_loss_weight >= 0, e.g. 0.01 (0 = no load-balancing loss)");
  }
}

MoeShape moe_shape(const ModelOptions& options, int num_dense, int num_tables) {
  check_moe_options(options);
  MoeShape shape;
  shape.dlrm = dlrm_shape(options, num_dense, num_tables);
  shape.num_experts = options.num_experts;
  shape.top_k = options.top_k;
  shape.capacity_factor = options.capacity_factor;
  shape.eval_capacity_factor = options.eval_capacity_factor;
  shape.aux_loss_weight = float(options.aux_loss_weight);
  return shape;
}

namespace {

// One expert: a stack of Linear layers whose activations the caller keeps, so that
// blocks of samples from several members can run one after the other and keep
// their activations for the backward.
struct Expert {
  std::vector<Linear> layers;
  size_t begin = 0, end = 0;  // its weights in the flat buffer
};

template <class T>
void append(std::vector<char>& out, const T* data, size_t n) {
  const size_t at = out.size();
  out.resize(at + n * sizeof(T));
  if (n > 0) std::memcpy(out.data() + at, data, n * sizeof(T));
}

}  // namespace

struct Moe::Impl {
  MoeShape shape;
  int width;  // W: the interaction output, every expert's input
  DenseParameters params;
  Mlp bottom;
  Linear gate;
  std::vector<Expert> experts;
  DotInteraction interaction;
  std::vector<EmbeddingBagPooling> pooling;
  ExpertRouter router;       // training: model.capacity_factor
  ExpertRouter eval_router;  // predict: model.eval_capacity_factor
  ExpertRouter* routing = &router;  // the one forward uses
  BceLoss loss;
  ExpertGroup* group = nullptr;
  RoutingStats stats;

  // The front, sample-major.
  std::vector<float> pooled, dpooled;  // T x (B, dim)
  std::vector<float> z, dz;            // (B, W)
  std::vector<float> dx0;              // (B, dim)
  std::vector<float> gate_logits;      // (B, E)
  std::vector<float> dgate;            // (B, E)
  std::vector<float> logits, dlogits;  // (B)
  std::vector<float> outs;             // (B, k) each choice's expert output (0 when dropped)
  std::vector<float> dweights;         // (B, k)
  std::vector<float> dslot;            // (B * k, W) input gradient of each choice, from its expert
  std::vector<const float*> features;
  std::vector<float*> dfeatures;
  int front_capacity = 0;

  // Routing: the choices (slot b * k + j) each expert takes, in batch order.
  std::vector<std::vector<int32_t>> slots;  // (E)

  // The owner's side: its local experts' blocks, from member r for local expert l.
  int members = 1, member = 0, local = 0;  // G, g, E / G
  std::vector<int32_t> counts;             // (G, local) samples in block (r, l)
  std::vector<size_t> block_at;            // (local, G) first row of block (r, l) in expert l's rows
  std::vector<size_t> rows_of;             // (local) rows of local expert l
  std::vector<std::vector<float>> inputs;  // (local) (rows, W)
  std::vector<std::vector<std::vector<float>>> acts;  // (local, layers) (rows, width)
  std::vector<std::vector<float>> dys;     // (local) (rows, 1)
  std::vector<std::vector<float>> dxs;     // (local) (rows, W)
  std::vector<float> spare_a, spare_b;     // ping-pong layer gradients
  std::vector<float> folded;               // the local experts' weight gradients, folded over blocks
  int max_width = 1;
  bool sharded = false;   // the storage holds this member's experts only
  DenseSharding sharding;

  std::vector<char> send, receive;
  std::vector<int> send_bytes, receive_bytes;

  Impl(const MoeShape& s, uint64_t seed)
      : shape(s),
        width(s.dlrm.interaction_width()),
        bottom(params, "bottom", s.dlrm.num_dense, s.dlrm.bottom, /*relu_last=*/true),
        gate(params, "gate", width, s.num_experts, backend::Activation::kNone),
        interaction(s.dlrm.num_tables + 1, s.dlrm.dim),
        pooling(size_t(s.dlrm.num_tables), EmbeddingBagPooling(s.dlrm.dim, s.dlrm.pooling)),
        router(s.num_experts, s.top_k, s.capacity_factor),
        eval_router(s.num_experts, s.top_k, s.eval_capacity_factor),
        features(size_t(s.dlrm.num_tables) + 1),
        dfeatures(size_t(s.dlrm.num_tables) + 1),
        slots(size_t(s.num_experts)) {
    experts.resize(size_t(s.num_experts));
    for (int e = 0; e < s.num_experts; ++e) {
      Expert& expert = experts[size_t(e)];
      int in = width;
      for (size_t l = 0; l < s.dlrm.top.size(); ++l) {
        const bool last = l + 1 == s.dlrm.top.size();
        const auto act = last ? backend::Activation::kNone : backend::Activation::kRelu;
        expert.layers.emplace_back(params, expert_layer_name(e, l), in, s.dlrm.top[l], act);
        in = s.dlrm.top[l];
        max_width = std::max(max_width, in);
      }
      expert.begin = expert.layers.front().weight_offset();
      const Linear& last = expert.layers.back();
      expert.end = last.bias_offset() + size_t(last.out());
    }
    max_width = std::max(max_width, width);
    params.finalize();
    bottom.init(params, seed);
    gate.init(params, seed);
    for (const Expert& expert : experts) {
      for (const Linear& layer : expert.layers) layer.init(params, seed);
    }
    set_group(nullptr);
  }

  void set_group(ExpertGroup* g) {
    group = g != nullptr && g->size() > 1 ? g : nullptr;
    members = group != nullptr ? group->size() : 1;
    member = group != nullptr ? group->rank() : 0;
    if (shape.num_experts % members != 0) {
      throw Error("layout.ep = " + std::to_string(members) + " does not divide model.num_experts = " +
                      std::to_string(shape.num_experts),
                  "choose model.num_experts as a multiple of layout.ep");
    }
    local = shape.num_experts / members;
    if (group != nullptr) shard_storage();
    inputs.assign(size_t(local), {});
    acts.assign(size_t(local), std::vector<std::vector<float>>(shape.dlrm.top.size()));
    dys.assign(size_t(local), {});
    dxs.assign(size_t(local), {});
  }

  // Keeps the replicated slices (everything before the experts, at the same
  // offsets) and this member's experts after them; the others' weights go.
  void shard_storage() {
    if (sharded) throw Error("Moe: the expert group was set twice (bug)");
    sharded = true;
    const size_t replicated = experts.front().begin;
    const size_t lo = experts[size_t(first_local())].begin;
    const size_t hi = experts[size_t(first_local() + local - 1)].end;
    sharding.full_slices = params.slices();
    sharding.full_size = params.size();
    sharding.replicated = replicated;
    sharding.shard_size = hi - lo;
    sharding.member = member;
    sharding.members = members;
    DenseParameters kept;
    for (const ParameterSlice& slice : params.slices()) {
      if (slice.offset < replicated) kept.add(slice.name, slice.shape);
    }
    for (int e = 0; e < shape.num_experts; ++e) {
      Expert& expert = experts[size_t(e)];
      std::vector<Linear> layers;
      if (e >= first_local() && e < first_local() + local) {
        for (size_t l = 0; l < expert.layers.size(); ++l) {
          const Linear& was = expert.layers[l];
          layers.emplace_back(kept, expert_layer_name(e, l), was.in(), was.out(), was.activation());
        }
      }
      expert.layers = std::move(layers);
      expert.begin = expert.layers.empty() ? 0 : expert.layers.front().weight_offset();
      expert.end = expert.layers.empty() ? 0 : expert.layers.back().bias_offset() + size_t(expert.layers.back().out());
    }
    kept.finalize();
    if (kept.size() != sharding.local_size()) throw Error("Moe: sharded dense layout mismatch (bug)");
    kept.values() = sharding.local_of(params.values(), 1);
    params = std::move(kept);
  }
  static std::string expert_layer_name(int e, size_t l) { return "expert." + std::to_string(e) + "." + std::to_string(l); }

  int first_local() const { return member * local; }
  int owner(int e) const { return e / local; }

  void reserve_front(int batch) {
    bottom.reserve(batch);
    interaction.reserve(batch);
    if (batch <= front_capacity) return;
    const size_t d = size_t(shape.dlrm.dim), T = size_t(shape.dlrm.num_tables), W = size_t(width);
    const size_t E = size_t(shape.num_experts), K = size_t(shape.top_k);
    pooled.resize(T * batch * d);
    dpooled.resize(T * batch * d);
    z.resize(size_t(batch) * W);
    dz.resize(size_t(batch) * W);
    dx0.resize(size_t(batch) * d);
    gate_logits.resize(size_t(batch) * E);
    dgate.resize(size_t(batch) * E);
    logits.resize(size_t(batch));
    dlogits.resize(size_t(batch));
    outs.resize(size_t(batch) * K);
    dweights.resize(size_t(batch) * K);
    dslot.resize(size_t(batch) * K * W);
    front_capacity = batch;
  }

  float* pooled_table(std::vector<float>& buffer, int t) {
    return buffer.data() + size_t(t) * front_capacity * shape.dlrm.dim;
  }

  // All-to-all within the group; alone, what is sent is what is received.
  void exchange() {
    if (group == nullptr) {
      receive.swap(send);
      receive_bytes = send_bytes;
      return;
    }
    group->exchange(send, send_bytes, receive, receive_bytes);
  }

  // Forward to the logits (B): front, gate, routing, experts, combine.
  const float* forward(const data::Batch& batch, const std::vector<const float*>& rows) {
    const int B = batch.size;
    const size_t W = size_t(width), K = size_t(shape.top_k);
    reserve_front(B);
    features[0] = bottom.forward(params, batch.dense.data(), B);
    for (int t = 0; t < shape.dlrm.num_tables; ++t) {
      float* out = pooled_table(pooled, t);
      pooling[size_t(t)].forward(batch.tables[size_t(t)], B, rows[size_t(t)], out);
      features[size_t(t) + 1] = out;
    }
    interaction.forward(B, features.data(), z.data());
    gate.forward(params, z.data(), B, gate_logits.data());
    ExpertRouter& router = *routing;
    router.route(B, gate_logits.data());
    for (auto& s : slots) s.clear();
    for (int b = 0; b < B; ++b) {
      for (int j = 0; j < shape.top_k; ++j) {
        if (router.kept(b, j)) slots[size_t(router.expert(b, j))].push_back(int32_t(size_t(b) * K + j));
      }
    }

    // Samples out: to each owner, its experts' sample counts, then the samples.
    send.clear();
    send_bytes.assign(size_t(members), 0);
    for (int o = 0; o < members; ++o) {
      const size_t start = send.size();
      for (int l = 0; l < local; ++l) {
        const int32_t n = int32_t(slots[size_t(o * local + l)].size());
        append(send, &n, 1);
      }
      for (int l = 0; l < local; ++l) {
        for (int32_t slot : slots[size_t(o * local + l)]) append(send, z.data() + size_t(slot) / K * W, W);
      }
      send_bytes[size_t(o)] = int(send.size() - start);
    }
    exchange();
    unpack_blocks();
    run_experts_forward();

    // Outputs back: each member's blocks, local expert by local expert.
    send.clear();
    send_bytes.assign(size_t(members), 0);
    for (int r = 0; r < members; ++r) {
      const size_t start = send.size();
      for (int l = 0; l < local; ++l) {
        const auto& out = acts[size_t(l)].back();
        append(send, out.data() + block_at[size_t(l) * members + r], size_t(counts[size_t(r) * local + l]));
      }
      send_bytes[size_t(r)] = int(send.size() - start);
    }
    exchange();
    std::fill(outs.begin(), outs.begin() + size_t(B) * K, 0.0f);
    const char* at = receive.data();
    for (int o = 0; o < members; ++o) {
      for (int l = 0; l < local; ++l) {
        for (int32_t slot : slots[size_t(o * local + l)]) {
          std::memcpy(&outs[size_t(slot)], at, sizeof(float));
          at += sizeof(float);
        }
      }
    }
    for (int b = 0; b < B; ++b) {
      float logit = 0.0f;
      for (int j = 0; j < shape.top_k; ++j) {
        if (routing->kept(b, j)) logit += routing->weight(b, j) * outs[size_t(b) * K + j];
      }
      logits[size_t(b)] = logit;
    }
    return logits.data();
  }

  // The received samples, as one row block per (member, local expert).
  void unpack_blocks() {
    const size_t W = size_t(width);
    counts.assign(size_t(members) * local, 0);
    block_at.assign(size_t(local) * members, 0);
    rows_of.assign(size_t(local), 0);
    std::vector<const char*> data_of(static_cast<size_t>(members));
    size_t at = 0;
    for (int r = 0; r < members; ++r) {
      const char* part = receive.data() + at;
      if (size_t(receive_bytes[size_t(r)]) < sizeof(int32_t) * local) {
        throw Error("Moe: member " + std::to_string(r) + " sent a malformed block of samples");
      }
      std::memcpy(&counts[size_t(r) * local], part, sizeof(int32_t) * local);
      data_of[size_t(r)] = part + sizeof(int32_t) * local;
      at += size_t(receive_bytes[size_t(r)]);
    }
    for (int l = 0; l < local; ++l) {
      for (int r = 0; r < members; ++r) {
        block_at[size_t(l) * members + r] = rows_of[size_t(l)];
        rows_of[size_t(l)] += size_t(counts[size_t(r) * local + l]);
      }
      inputs[size_t(l)].resize(rows_of[size_t(l)] * W);
    }
    for (int r = 0; r < members; ++r) {
      const char* p = data_of[size_t(r)];
      for (int l = 0; l < local; ++l) {
        const size_t n = size_t(counts[size_t(r) * local + l]);
        if (n > 0) std::memcpy(inputs[size_t(l)].data() + block_at[size_t(l) * members + r] * W, p, n * W * sizeof(float));
        p += n * W * sizeof(float);
      }
    }
  }

  void run_experts_forward() {
    const size_t W = size_t(width);
    for (int l = 0; l < local; ++l) {
      const Expert& expert = experts[size_t(first_local() + l)];
      for (size_t layer = 0; layer < expert.layers.size(); ++layer) {
        acts[size_t(l)][layer].resize(rows_of[size_t(l)] * size_t(expert.layers[layer].out()));
      }
      for (int r = 0; r < members; ++r) {
        const size_t first = block_at[size_t(l) * members + r];
        const int n = counts[size_t(r) * local + l];
        const float* in = inputs[size_t(l)].data() + first * W;
        for (size_t layer = 0; layer < expert.layers.size(); ++layer) {
          float* out = acts[size_t(l)][layer].data() + first * size_t(expert.layers[layer].out());
          expert.layers[layer].forward(params, in, n, out);
          in = out;
        }
      }
    }
  }

  // Backward of the experts on the owner: dys (their outputs' gradients) -> dxs,
  // and the local experts' weight gradients folded over the blocks in member order,
  // on from the previous replica and on to the next one.
  void run_experts_backward() {
    const size_t W = size_t(width);
    const size_t lo = experts[size_t(first_local())].begin;
    const size_t hi = experts[size_t(first_local() + local - 1)].end;
    folded.resize(hi - lo);
    bool have = false;
    if (group != nullptr && group->replica() > 0) {
      group->receive_from_previous_replica(folded.data(), folded.size());
      have = true;
    }
    for (int l = 0; l < local; ++l) {
      const Expert& expert = experts[size_t(first_local() + l)];
      dxs[size_t(l)].resize(rows_of[size_t(l)] * W);
      float* grads = params.grads(expert.begin);
      float* into = folded.data() + (expert.begin - lo);
      const size_t size = expert.end - expert.begin;
      for (int r = 0; r < members; ++r) {
        const size_t first = block_at[size_t(l) * members + r];
        const int n = counts[size_t(r) * local + l];
        spare_a.resize(size_t(std::max(n, 1)) * max_width);
        spare_b.resize(size_t(std::max(n, 1)) * max_width);
        float* grad = spare_a.data();
        std::copy(dys[size_t(l)].begin() + first, dys[size_t(l)].begin() + first + n, grad);
        for (size_t layer = expert.layers.size(); layer-- > 0;) {
          const float* in = layer == 0 ? inputs[size_t(l)].data() + first * W
                                       : acts[size_t(l)][layer - 1].data() +
                                             first * size_t(expert.layers[layer - 1].out());
          const float* out = acts[size_t(l)][layer].data() + first * size_t(expert.layers[layer].out());
          float* grad_in = layer == 0 ? dxs[size_t(l)].data() + first * W
                                      : (grad == spare_a.data() ? spare_b.data() : spare_a.data());
          expert.layers[layer].backward(params, in, out, grad, n, grad_in);
          grad = grad_in;
        }
        if (!have && r == 0) {
          std::copy(grads, grads + size, into);
        } else {
          for (size_t i = 0; i < size; ++i) into[i] += grads[i];
        }
      }
    }
    std::vector<float>& all = params.grads();
    // Every expert's gradient this member holds (its own when the storage is sharded).
    const size_t experts_begin = sharded ? sharding.replicated : experts.front().begin;
    std::fill(all.begin() + experts_begin, all.end(), 0.0f);
    if (group != nullptr && group->replica() + 1 < group->replicas()) {
      group->send_to_next_replica(folded.data(), folded.size());  // the last replica holds the sum
    } else {
      std::copy(folded.begin(), folded.end(), all.begin() + lo);
    }
  }
};

Moe::Moe(const ModelOptions& options, int num_dense, int num_tables, uint64_t seed)
    : impl_(std::make_unique<Impl>(moe_shape(options, num_dense, num_tables), seed)) {}

Moe::~Moe() = default;

const std::string& Moe::kind() const {
  static const std::string name = "moe";
  return name;
}
DenseParameters& Moe::parameters() { return impl_->params; }
const DenseParameters& Moe::parameters() const { return impl_->params; }
int Moe::embedding_dim() const { return impl_->shape.dlrm.dim; }
int Moe::num_tables() const { return impl_->shape.dlrm.num_tables; }
const MoeShape& Moe::shape() const { return impl_->shape; }
std::pair<size_t, size_t> Moe::expert_range(int e) const {
  const auto& expert = impl_->experts.at(size_t(e));
  if (expert.layers.empty()) {
    throw Error("expert " + std::to_string(e) + " is stored by another member of the expert group");
  }
  return {expert.begin, expert.end};
}

const DenseSharding* Moe::dense_sharding() const { return impl_->sharded ? &impl_->sharding : nullptr; }

void Moe::set_expert_group(ExpertGroup* group) { impl_->set_group(group); }

double Moe::forward_backward(const data::Batch& batch, const std::vector<const float*>& rows,
                             const std::vector<float*>& row_grads, float loss_scale) {
  Impl& m = *impl_;
  check_dlrm_batch(m.shape.dlrm, batch, rows, &row_grads, "Moe");
  const int B = batch.size;
  const size_t W = size_t(m.width), K = size_t(m.shape.top_k);
  const float* logits = m.forward(batch, rows);
  const double total = m.loss.forward_backward(B, logits, batch.labels.data(), loss_scale, m.dlogits.data());

  // The combine: logit = sum_j w_j out_j over the kept choices.
  for (int b = 0; b < B; ++b) {
    for (size_t j = 0; j < K; ++j) {
      const bool kept = m.router.kept(b, int(j));
      m.dweights[size_t(b) * K + j] = kept ? m.dlogits[size_t(b)] * m.outs[size_t(b) * K + j] : 0.0f;
    }
  }
  m.router.backward(m.dweights.data(), m.shape.aux_loss_weight * loss_scale, m.dgate.data());
  m.gate.backward(m.params, m.z.data(), m.gate_logits.data(), m.dgate.data(), B, m.dz.data());

  // Output gradients out, to the owners, in the order the samples went.
  m.send.clear();
  m.send_bytes.assign(size_t(m.members), 0);
  for (int o = 0; o < m.members; ++o) {
    const size_t start = m.send.size();
    for (int l = 0; l < m.local; ++l) {
      for (int32_t slot : m.slots[size_t(o * m.local + l)]) {
        const float dy = m.dlogits[size_t(slot) / K] * m.router.weight(int(size_t(slot) / K), int(size_t(slot) % K));
        append(m.send, &dy, 1);
      }
    }
    m.send_bytes[size_t(o)] = int(m.send.size() - start);
  }
  m.exchange();
  const char* at = m.receive.data();
  for (int l = 0; l < m.local; ++l) m.dys[size_t(l)].resize(m.rows_of[size_t(l)]);
  for (int r = 0; r < m.members; ++r) {
    for (int l = 0; l < m.local; ++l) {
      const size_t n = size_t(m.counts[size_t(r) * m.local + l]);
      if (n > 0) std::memcpy(m.dys[size_t(l)].data() + m.block_at[size_t(l) * m.members + r], at, n * sizeof(float));
      at += n * sizeof(float);
    }
  }
  m.run_experts_backward();

  // Input gradients back to the members the samples came from.
  m.send.clear();
  m.send_bytes.assign(size_t(m.members), 0);
  for (int r = 0; r < m.members; ++r) {
    const size_t start = m.send.size();
    for (int l = 0; l < m.local; ++l) {
      append(m.send, m.dxs[size_t(l)].data() + m.block_at[size_t(l) * m.members + r] * W,
             size_t(m.counts[size_t(r) * m.local + l]) * W);
    }
    m.send_bytes[size_t(r)] = int(m.send.size() - start);
  }
  m.exchange();
  at = m.receive.data();
  for (int o = 0; o < m.members; ++o) {
    for (int l = 0; l < m.local; ++l) {
      for (int32_t slot : m.slots[size_t(o * m.local + l)]) {
        std::memcpy(m.dslot.data() + size_t(slot) * W, at, W * sizeof(float));
        at += W * sizeof(float);
      }
    }
  }
  for (int b = 0; b < B; ++b) {
    float* d = m.dz.data() + size_t(b) * W;
    for (size_t j = 0; j < K; ++j) {
      if (!m.router.kept(b, int(j))) continue;
      const float* from = m.dslot.data() + (size_t(b) * K + j) * W;
      for (size_t i = 0; i < W; ++i) d[i] += from[i];
    }
  }

  // The front.
  m.dfeatures[0] = m.dx0.data();
  for (int t = 0; t < m.shape.dlrm.num_tables; ++t) m.dfeatures[size_t(t) + 1] = m.pooled_table(m.dpooled, t);
  m.interaction.backward(B, m.dz.data(), m.dfeatures.data());
  for (int t = 0; t < m.shape.dlrm.num_tables; ++t) {
    m.pooling[size_t(t)].backward(batch.tables[size_t(t)], B, m.dfeatures[size_t(t) + 1], row_grads[size_t(t)]);
  }
  m.bottom.backward(m.params, batch.dense.data(), m.dx0.data(), B, nullptr);

  // Counters of this trainer's routing (the sums over trainers do not depend on the layout).
  RoutingStats& s = m.stats;
  s.routed.resize(size_t(m.shape.num_experts), 0.0);
  s.accepted.resize(size_t(m.shape.num_experts), 0.0);
  for (int e = 0; e < m.shape.num_experts; ++e) {
    s.routed[size_t(e)] += double(m.router.routed()[size_t(e)]);
    s.accepted[size_t(e)] += double(m.router.accepted()[size_t(e)]);
  }
  s.balance_loss += m.router.balance_loss();
  s.steps += 1;
  return total;
}

void Moe::predict(const data::Batch& batch, const std::vector<const float*>& rows, float* probs) {
  Impl& m = *impl_;
  check_dlrm_batch(m.shape.dlrm, batch, rows, nullptr, "Moe");
  // Evaluation routes with its own capacity (dropless by default): drops are a
  // training-time trade of compute for quality, not part of the model.
  m.routing = &m.eval_router;
  const float* logits = nullptr;
  try {
    logits = m.forward(batch, rows);
  } catch (...) {
    m.routing = &m.router;
    throw;
  }
  m.routing = &m.router;
  backend::sigmoid(batch.size, logits, probs);
}

RoutingStats Moe::take_routing_stats() {
  RoutingStats out = std::move(impl_->stats);
  impl_->stats = RoutingStats{};
  return out;
}

}  // namespace strata::model
