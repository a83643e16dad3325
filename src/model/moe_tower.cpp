#include "model/moe_tower.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "common/error.hpp"
#include "model/exchange_payload.hpp"
#include "model/expert_router.hpp"
#include "model/linear.hpp"

namespace strata::model {
namespace {

// One expert: a stack of Linear layers whose activations the caller keeps, so that
// blocks of samples from several members can run one after the other and keep
// their activations for the backward.
struct Expert {
  std::vector<Linear> layers;
  size_t begin = 0, end = 0;  // its weights in the flat buffer
};

std::string expert_layer_name(int e, size_t l) { return "expert." + std::to_string(e) + "." + std::to_string(l); }

}  // namespace

struct MoeTower::Impl {
  MoeTowerShape shape;
  int width;
  Linear gate;
  std::vector<Expert> experts;
  ExpertRouter router;       // training: capacity_factor
  ExpertRouter eval_router;  // predictions: eval_capacity_factor
  ExpertRouter* routing = &router;  // the one forward uses
  ExpertGroup* group = nullptr;
  RoutingStats stats;
  bool sharded = false;  // the storage holds this member's experts only
  DenseSharding sharding;

  std::vector<float> gate_logits;      // (B, E)
  std::vector<float> dgate;            // (B, E)
  std::vector<float> logits;           // (B)
  std::vector<float> outs;             // (B, k) each choice's expert output (0 when dropped)
  std::vector<float> dweights;         // (B, k)
  std::vector<float> dslot;            // (B * k, W) input gradient of each choice, from its expert
  int capacity = 0;

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

  std::vector<char> send, receive;
  std::vector<int> send_bytes, receive_bytes;

  Impl(DenseParameters& params, const MoeTowerShape& s)
      : shape(s),
        width(s.width),
        gate(params, "gate", s.width, s.num_experts, backend::Activation::kNone),
        router(s.num_experts, s.top_k, s.capacity_factor),
        eval_router(s.num_experts, s.top_k, s.eval_capacity_factor),
        slots(size_t(s.num_experts)) {
    experts.resize(size_t(s.num_experts));
    for (int e = 0; e < s.num_experts; ++e) {
      Expert& expert = experts[size_t(e)];
      int in = width;
      for (size_t l = 0; l < s.expert.size(); ++l) {
        const bool last = l + 1 == s.expert.size();
        const auto act = last ? backend::Activation::kNone : backend::Activation::kRelu;
        expert.layers.emplace_back(params, expert_layer_name(e, l), in, s.expert[l], act);
        in = s.expert[l];
        max_width = std::max(max_width, in);
      }
      expert.begin = expert.layers.front().weight_offset();
      const Linear& last = expert.layers.back();
      expert.end = last.bias_offset() + size_t(last.out());
    }
    max_width = std::max(max_width, width);
    set_members(nullptr);
  }

  void set_members(ExpertGroup* g) {
    group = g != nullptr && g->size() > 1 ? g : nullptr;
    members = group != nullptr ? group->size() : 1;
    member = group != nullptr ? group->rank() : 0;
    if (shape.num_experts % members != 0) {
      throw Error("layout.ep = " + std::to_string(members) + " does not divide model.num_experts = " +
                      std::to_string(shape.num_experts),
                  "choose model.num_experts as a multiple of layout.ep");
    }
    local = shape.num_experts / members;
    inputs.assign(size_t(local), {});
    acts.assign(size_t(local), std::vector<std::vector<float>>(shape.expert.size()));
    dys.assign(size_t(local), {});
    dxs.assign(size_t(local), {});
  }

  // Keeps the replicated slices (everything before the experts, at the same
  // offsets) and this member's experts after them; the others' weights go.
  void shard_storage(DenseParameters& params) {
    if (sharded) throw Error("MoeTower: the expert group was set twice (bug)");
    sharded = true;
    const size_t replicated = experts.front().begin;
    const size_t lo = experts[size_t(first_local())].begin;
    const size_t hi = experts[size_t(first_local() + local - 1)].end;
    // The experts are the layout's last weights: one sharded segment after the replicated ones.
    sharding = DenseSharding::of(params.slices(), params.size(),
                                 {{0, replicated, false}, {replicated, params.size() - replicated, true}}, member,
                                 members);
    if (sharding.shard_size != hi - lo) throw Error("MoeTower: the experts are not the layout's last weights (bug)");
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
    if (kept.size() != sharding.local_size()) throw Error("MoeTower: sharded dense layout mismatch (bug)");
    kept.values() = sharding.local_of(params.values(), 1);
    params = std::move(kept);
  }
  int first_local() const { return member * local; }

  void reserve(int batch) {
    if (batch <= capacity) return;
    const size_t W = size_t(width), E = size_t(shape.num_experts), K = size_t(shape.top_k);
    gate_logits.resize(size_t(batch) * E);
    dgate.resize(size_t(batch) * E);
    logits.resize(size_t(batch));
    outs.resize(size_t(batch) * K);
    dweights.resize(size_t(batch) * K);
    dslot.resize(size_t(batch) * K * W);
    capacity = batch;
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
        throw Error("MoeTower: member " + std::to_string(r) + " sent a malformed block of samples");
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

  void run_experts_forward(const DenseParameters& params) {
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
  void run_experts_backward(DenseParameters& params) {
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

MoeTower::MoeTower(DenseParameters& params, const MoeTowerShape& shape)
    : impl_(std::make_unique<Impl>(params, shape)) {}

MoeTower::~MoeTower() = default;

const MoeTowerShape& MoeTower::shape() const { return impl_->shape; }

void MoeTower::init(DenseParameters& params, uint64_t seed) const {
  impl_->gate.init(params, seed);
  for (const Expert& expert : impl_->experts) {
    for (const Linear& layer : expert.layers) layer.init(params, seed);
  }
}

std::pair<size_t, size_t> MoeTower::expert_range(int e) const {
  const auto& expert = impl_->experts.at(size_t(e));
  if (expert.layers.empty()) {
    throw Error("expert " + std::to_string(e) + " is stored by another member of the expert group");
  }
  return {expert.begin, expert.end};
}

void MoeTower::set_group(ExpertGroup* group, DenseParameters& params) {
  impl_->set_members(group);
  if (impl_->group != nullptr) impl_->shard_storage(params);
}

const DenseSharding* MoeTower::sharding() const { return impl_->sharded ? &impl_->sharding : nullptr; }

const float* MoeTower::forward(DenseParameters& params, const float* z, int B, bool training) {
  Impl& m = *impl_;
  const size_t W = size_t(m.width), K = size_t(m.shape.top_k);
  const int members = m.members, local = m.local;
  m.reserve(B);
  // Evaluation routes with its own capacity (dropless by default): drops are a
  // training-time trade of compute for quality, not part of the model.
  m.routing = training ? &m.router : &m.eval_router;
  m.gate.forward(params, z, B, m.gate_logits.data());
  ExpertRouter& router = *m.routing;
  router.route(B, m.gate_logits.data());
  for (auto& s : m.slots) s.clear();
  for (int b = 0; b < B; ++b) {
    for (int j = 0; j < m.shape.top_k; ++j) {
      if (router.kept(b, j)) m.slots[size_t(router.expert(b, j))].push_back(int32_t(size_t(b) * K + j));
    }
  }

  // Samples out: to each owner, its experts' sample counts, then the samples.
  pack_parts(m.send, m.send_bytes, members, [&](int o) {
    for (int l = 0; l < local; ++l) {
      const int32_t n = int32_t(m.slots[size_t(o * local + l)].size());
      append(m.send, &n, 1);
    }
    for (int l = 0; l < local; ++l) {
      for (int32_t slot : m.slots[size_t(o * local + l)]) append(m.send, z + size_t(slot) / K * W, W);
    }
  });
  m.exchange();
  m.unpack_blocks();
  m.run_experts_forward(params);

  // Outputs back: each member's blocks, local expert by local expert.
  pack_parts(m.send, m.send_bytes, members, [&](int r) {
    for (int l = 0; l < local; ++l) {
      const auto& out = m.acts[size_t(l)].back();
      append(m.send, out.data() + m.block_at[size_t(l) * members + r], size_t(m.counts[size_t(r) * local + l]));
    }
  });
  m.exchange();
  std::fill(m.outs.begin(), m.outs.begin() + size_t(B) * K, 0.0f);
  const char* at = m.receive.data();
  for (int o = 0; o < members; ++o) {
    for (int l = 0; l < local; ++l) {
      for (int32_t slot : m.slots[size_t(o * local + l)]) {
        std::memcpy(&m.outs[size_t(slot)], at, sizeof(float));
        at += sizeof(float);
      }
    }
  }
  for (int b = 0; b < B; ++b) {
    float logit = 0.0f;
    for (int j = 0; j < m.shape.top_k; ++j) {
      if (router.kept(b, j)) logit += router.weight(b, j) * m.outs[size_t(b) * K + j];
    }
    m.logits[size_t(b)] = logit;
  }
  m.routing = &m.router;
  return m.logits.data();
}

void MoeTower::backward(DenseParameters& params, const float* z, const float* dlogits, float aux_scale, int B,
                        float* dz) {
  Impl& m = *impl_;
  const size_t W = size_t(m.width), K = size_t(m.shape.top_k);
  const int members = m.members, local = m.local;
  // The combine: logit = sum_j w_j out_j over the kept choices.
  for (int b = 0; b < B; ++b) {
    for (size_t j = 0; j < K; ++j) {
      const bool kept = m.router.kept(b, int(j));
      m.dweights[size_t(b) * K + j] = kept ? dlogits[size_t(b)] * m.outs[size_t(b) * K + j] : 0.0f;
    }
  }
  m.router.backward(m.dweights.data(), aux_scale, m.dgate.data());
  m.gate.backward(params, z, m.gate_logits.data(), m.dgate.data(), B, dz);

  // Output gradients out, to the owners, in the order the samples went.
  pack_parts(m.send, m.send_bytes, members, [&](int o) {
    for (int l = 0; l < local; ++l) {
      for (int32_t slot : m.slots[size_t(o * local + l)]) {
        const float dy = dlogits[size_t(slot) / K] * m.router.weight(int(size_t(slot) / K), int(size_t(slot) % K));
        append(m.send, &dy, 1);
      }
    }
  });
  m.exchange();
  const char* at = m.receive.data();
  for (int l = 0; l < local; ++l) m.dys[size_t(l)].resize(m.rows_of[size_t(l)]);
  for (int r = 0; r < members; ++r) {
    for (int l = 0; l < local; ++l) {
      const size_t n = size_t(m.counts[size_t(r) * local + l]);
      if (n > 0) std::memcpy(m.dys[size_t(l)].data() + m.block_at[size_t(l) * members + r], at, n * sizeof(float));
      at += n * sizeof(float);
    }
  }
  m.run_experts_backward(params);

  // Input gradients back to the members the samples came from.
  pack_parts(m.send, m.send_bytes, members, [&](int r) {
    for (int l = 0; l < local; ++l) {
      append(m.send, m.dxs[size_t(l)].data() + m.block_at[size_t(l) * members + r] * W,
             size_t(m.counts[size_t(r) * local + l]) * W);
    }
  });
  m.exchange();
  at = m.receive.data();
  for (int o = 0; o < members; ++o) {
    for (int l = 0; l < local; ++l) {
      for (int32_t slot : m.slots[size_t(o * local + l)]) {
        std::memcpy(m.dslot.data() + size_t(slot) * W, at, W * sizeof(float));
        at += W * sizeof(float);
      }
    }
  }
  for (int b = 0; b < B; ++b) {
    float* d = dz + size_t(b) * W;
    for (size_t j = 0; j < K; ++j) {
      if (!m.router.kept(b, int(j))) continue;
      const float* from = m.dslot.data() + (size_t(b) * K + j) * W;
      for (size_t i = 0; i < W; ++i) d[i] += from[i];
    }
  }

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
}

RoutingStats MoeTower::take_stats() {
  RoutingStats out = std::move(impl_->stats);
  impl_->stats = RoutingStats{};
  return out;
}

}  // namespace strata::model
