// MultiTask: the DLRM front, then the levels of experts and gates, then one tower
// per task. Every sum runs in a fixed order (tasks, then a gate's experts in gate
// order: the task's own experts, then the shared ones), so a step's numbers do
// not depend on anything but the batch.
#include "model/multi_task.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/dense_kernels.hpp"
#include "common/error.hpp"
#include "model/batch_checks.hpp"
#include "model/bce_loss.hpp"
#include "model/dot_interaction.hpp"
#include "model/exchange_payload.hpp"
#include "model/expert_group.hpp"
#include "model/embedding_bag_pooling.hpp"
#include "model/linear.hpp"
#include "model/mlp.hpp"

namespace strata::model {

namespace {

constexpr int kMaxExperts = 256;
constexpr int kMaxLevels = 8;

}  // namespace

void check_multi_task_options(const ModelOptions& options) {
  const bool ple = options.kind == "ple";
  if (options.num_experts < 1 || options.num_experts > kMaxExperts) {
    throw Error("model.num_experts = " + std::to_string(options.num_experts) + " is out of range for model.kind = " +
                    options.kind,
                "set model.num_experts to the shared experts (of each level), 1 to " + std::to_string(kMaxExperts));
  }
  if (ple && (options.task_experts < 0 || options.task_experts > kMaxExperts)) {
    throw Error("model.task_experts = " + std::to_string(options.task_experts) + " is out of range",
                "set model.task_experts to each task's own experts per level, 0 to " + std::to_string(kMaxExperts));
  }
  if (ple && (options.ple_levels < 1 || options.ple_levels > kMaxLevels)) {
    throw Error("model.ple_levels = " + std::to_string(options.ple_levels) + " is out of range",
                "set model.ple_levels to 1 (CGC) .. " + std::to_string(kMaxLevels));
  }
  if (parse_layer_widths(options.expert_mlp, "model.expert_mlp").empty()) {
    throw Error("model.expert_mlp is empty", "give every expert's layer widths, e.g. 64,32");
  }
  parse_layer_widths(options.tower_mlp, "model.tower_mlp");
}

MultiTaskShape multi_task_shape(const ModelOptions& options, int num_dense, int num_tables, int tasks) {
  check_multi_task_options(options);
  if (tasks < 1) throw Error("multi-task model for " + std::to_string(tasks) + " tasks");
  MultiTaskShape shape;
  shape.front = dlrm_shape(options, num_dense, num_tables);
  shape.tasks = tasks;
  const bool ple = options.kind == "ple";
  shape.shared_experts = options.num_experts;
  shape.task_experts = ple ? options.task_experts : 0;
  shape.levels = ple ? options.ple_levels : 1;
  shape.expert = parse_layer_widths(options.expert_mlp, "model.expert_mlp");
  shape.tower = parse_layer_widths(options.tower_mlp, "model.tower_mlp");
  shape.tower.push_back(1);
  return shape;
}

namespace {

// Row-wise softmax of (B, n) logits into weights, in float with the row maximum
// subtracted.
void softmax_rows(int batch, int n, const float* logits, float* weights) {
  for (int b = 0; b < batch; ++b) {
    const float* l = logits + size_t(b) * n;
    float* w = weights + size_t(b) * n;
    float top = l[0];
    for (int j = 1; j < n; ++j) top = std::max(top, l[j]);
    float sum = 0.0f;
    for (int j = 0; j < n; ++j) {
      w[j] = std::exp(l[j] - top);
      sum += w[j];
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j < n; ++j) w[j] *= inv;
  }
}

// One gate: softmax(x G^T + g) over `sources` expert outputs (B, H each), their mix
// out (B, H) = sum_j w_j E_j; backward from d out to every d E_j (accumulated) and
// the gate's input gradient.
struct Gate {
  Linear linear;
  std::vector<float> logits, weights, dweights;  // (B, n)

  Gate(DenseParameters& params, const std::string& name, int in, int n)
      : linear(params, name, in, n, backend::Activation::kNone) {}

  int n() const { return linear.out(); }

  void forward(const DenseParameters& params, const float* x, int batch, const std::vector<const float*>& sources,
               int width, float* out) {
    logits.resize(size_t(batch) * n());
    weights.resize(size_t(batch) * n());
    linear.forward(params, x, batch, logits.data());
    softmax_rows(batch, n(), logits.data(), weights.data());
    for (int b = 0; b < batch; ++b) {
      float* o = out + size_t(b) * width;
      std::fill(o, o + width, 0.0f);
      for (int j = 0; j < n(); ++j) {
        const float w = weights[size_t(b) * n() + j];
        const float* e = sources[size_t(j)] + size_t(b) * width;
        for (int i = 0; i < width; ++i) o[i] += w * e[i];
      }
    }
  }

  // dout (B, H): adds w_j dout to dsources[j] and writes the gate input's gradient to dx.
  void backward(DenseParameters& params, const float* x, int batch, const std::vector<const float*>& sources,
                const std::vector<float*>& dsources, int width, const float* dout, float* dx) {
    dweights.resize(size_t(batch) * n());
    for (int b = 0; b < batch; ++b) {
      const float* d = dout + size_t(b) * width;
      const float* w = weights.data() + size_t(b) * n();
      float* dw = dweights.data() + size_t(b) * n();
      float dot_sum = 0.0f;
      for (int j = 0; j < n(); ++j) {
        const float* e = sources[size_t(j)] + size_t(b) * width;
        float* de = dsources[size_t(j)] + size_t(b) * width;
        float dot = 0.0f;
        for (int i = 0; i < width; ++i) {
          dot += d[i] * e[i];
          de[i] += w[j] * d[i];
        }
        dw[j] = dot;
        dot_sum += w[j] * dot;
      }
      for (int j = 0; j < n(); ++j) dw[j] = w[j] * (dw[j] - dot_sum);  // softmax backward
    }
    linear.backward(params, x, logits.data(), dweights.data(), batch, dx);
  }
};

// One extraction level: shared experts, each task's experts, each task's gate and
// (below the last level) the shared gate.
struct Level {
  int in = 0;
  std::vector<Mlp> shared;              // (S)
  std::vector<std::vector<Mlp>> own;    // (K, P)
  std::vector<Gate> gates;              // (K) over own[k] then shared
  std::vector<Gate> shared_gate;        // (0 or 1) over own[0..K) then shared
  std::vector<const float*> shared_out; // (S) valid until the next forward
  std::vector<std::vector<const float*>> own_out;  // (K, P)
  std::vector<std::vector<float>> out;  // (K) (B, H) each task's mix, the next level's input
  std::vector<float> shared_next;       // (B, H)
  // Backward buffers.
  std::vector<std::vector<float>> dshared;           // (S) (B, H)
  std::vector<std::vector<std::vector<float>>> down; // (K, P) (B, H)
};

void add_into(std::vector<float>& into, const std::vector<float>& from) {
  for (size_t i = 0; i < into.size(); ++i) into[i] += from[i];
}

// Expert parallel: what the owner of some of a level's experts keeps of one step.
struct LevelShards {
  std::vector<int> rows;                     // (G) each member's batch size
  std::vector<std::vector<float>> inputs;    // (G) the member's level inputs, (arrays, B_r, in)
  std::vector<std::vector<Mlp>> blocks;      // (local, G) a copy of each local expert per member block
  std::vector<std::vector<float>> out;       // (n) every expert's output for this trainer's batch (B, H)
  std::vector<std::vector<float>> dx;        // (n) every expert's input gradient for this trainer's batch
  std::vector<float> folded;                 // the local experts' weight gradients, over blocks and replicas
};

}  // namespace

struct MultiTask::Impl {
  std::string kind;
  MultiTaskShape shape;
  int width;  // W: the interaction output
  int hidden; // H: an expert's output
  DenseParameters params;
  Mlp bottom;
  std::vector<Level> levels;
  std::vector<Mlp> towers;  // (K)
  DotInteraction interaction;
  std::vector<EmbeddingBagPooling> pooling;
  std::vector<BceLoss> losses;  // (K)

  std::vector<float> pooled, dpooled;  // T x (B, dim)
  std::vector<float> z, dz;            // (B, W)
  std::vector<float> dx0;              // (B, dim)
  std::vector<std::vector<float>> logits, dlogits, labels;  // (K) (B)
  std::vector<const float*> features;
  std::vector<float*> dfeatures;
  int front_capacity = 0;
  RoutingStats stats;  // the gates' soft load (take_routing_stats)

  // Expert parallel (set_group): member g of G runs experts [g n / G, (g + 1) n / G)
  // of every level (n = S + K P, numbered shared first, then each task's), on every
  // member's batch, each member's rows as a separate block in member order: the
  // GEMMs each member would run alone. Weight gradients fold over the blocks in
  // member order, then on through the replicas (as moe's do).
  ExpertGroup* group = nullptr;
  int members = 1, member = 0;
  std::vector<LevelShards> shards;  // (levels)
  // With a group, params holds the replicated weights and this member's experts
  // only (shard_storage); the other members' experts are placeholders never run.
  bool sharded = false;
  DenseSharding sharding;
  std::vector<char> send, receive;
  std::vector<int> send_bytes, receive_bytes;

  Impl(const std::string& k, const MultiTaskShape& s, uint64_t seed)
      : kind(k),
        shape(s),
        width(s.front.interaction_width()),
        hidden(s.expert.back()),
        bottom(params, "bottom", s.front.num_dense, s.front.bottom, /*relu_last=*/true),
        interaction(s.front.num_tables + 1, s.front.dim),
        pooling(size_t(s.front.num_tables), EmbeddingBagPooling(s.front.dim, s.front.pooling)),
        losses(size_t(s.tasks)),
        logits(size_t(s.tasks)),
        dlogits(size_t(s.tasks)),
        labels(size_t(s.tasks)),
        features(size_t(s.front.num_tables) + 1),
        dfeatures(size_t(s.front.num_tables) + 1) {
    const int K = s.tasks, S = s.shared_experts, P = s.task_experts;
    levels.resize(size_t(s.levels));
    for (int l = 0; l < s.levels; ++l) {
      Level& level = levels[size_t(l)];
      level.in = l == 0 ? width : hidden;
      for (int e = 0; e < S; ++e) level.shared.emplace_back(params, expert_name(l, e), level.in, s.expert, true);
      level.own.resize(size_t(K));
      for (int t = 0; t < K; ++t) {
        for (int e = 0; e < P; ++e) {
          level.own[size_t(t)].emplace_back(params, expert_name(l, S + t * P + e), level.in, s.expert, true);
        }
      }
      for (int t = 0; t < K; ++t) level.gates.emplace_back(params, gate_name(l, t), level.in, P + S);
      if (l + 1 < s.levels) level.shared_gate.emplace_back(params, gate_name(l, -1), level.in, K * P + S);
      level.out.resize(size_t(K));
      level.own_out.assign(size_t(K), std::vector<const float*>(size_t(P)));
      level.shared_out.resize(size_t(S));
      level.dshared.resize(size_t(S));
      level.down.assign(size_t(K), std::vector<std::vector<float>>(size_t(P)));
    }
    for (int t = 0; t < K; ++t) towers.emplace_back(params, "tower." + std::to_string(t), hidden, s.tower, false);
    params.finalize();
    bottom.init(params, seed);
    for (const Level& level : levels) {
      for (const Mlp& e : level.shared) e.init(params, seed);
      for (const auto& task : level.own) {
        for (const Mlp& e : task) e.init(params, seed);
      }
      for (const Gate& g : level.gates) g.linear.init(params, seed);
      for (const Gate& g : level.shared_gate) g.linear.init(params, seed);
    }
    for (const Mlp& tower : towers) tower.init(params, seed);
  }

  // Expert i of level l (shared first, then each task's own) and gate t's (-1: the shared gate's) weights.
  std::string expert_name(int l, int i) const {
    const int S = shape.shared_experts, P = shape.task_experts;
    const std::string level = "level." + std::to_string(l);
    if (i < S) return level + ".shared." + std::to_string(i);
    return level + ".task." + std::to_string((i - S) / P) + "." + std::to_string((i - S) % P);
  }
  static std::string gate_name(int l, int t) {
    return "level." + std::to_string(l) + (t < 0 ? ".gate.shared" : ".gate." + std::to_string(t));
  }

  void reserve_front(int batch) {
    bottom.reserve(batch);
    interaction.reserve(batch);
    if (batch <= front_capacity) return;
    const size_t d = size_t(shape.front.dim), T = size_t(shape.front.num_tables), W = size_t(width);
    pooled.resize(T * batch * d);
    dpooled.resize(T * batch * d);
    z.resize(size_t(batch) * W);
    dz.resize(size_t(batch) * W);
    dx0.resize(size_t(batch) * d);
    front_capacity = batch;
  }

  float* pooled_table(std::vector<float>& buffer, int t) {
    return buffer.data() + size_t(t) * front_capacity * shape.front.dim;
  }

  // The sources of task t's gate: its own experts, then the shared ones.
  static std::vector<const float*> task_sources(const Level& level, int t) {
    std::vector<const float*> sources(level.own_out[size_t(t)]);
    sources.insert(sources.end(), level.shared_out.begin(), level.shared_out.end());
    return sources;
  }
  static std::vector<const float*> all_sources(const Level& level) {
    std::vector<const float*> sources;
    for (const auto& task : level.own_out) sources.insert(sources.end(), task.begin(), task.end());
    sources.insert(sources.end(), level.shared_out.begin(), level.shared_out.end());
    return sources;
  }

  // Level l's inputs: the interaction output at level 0, else the level below's mixes.
  const float* task_input(int l, int t) const {
    return l == 0 ? z.data() : levels[size_t(l - 1)].out[size_t(t)].data();
  }
  const float* shared_input(int l) const { return l == 0 ? z.data() : levels[size_t(l - 1)].shared_next.data(); }

  // Forward to every task's logits.
  int experts_per_level() const { return shape.shared_experts + shape.tasks * shape.task_experts; }
  int local_experts() const { return experts_per_level() / members; }
  // Expert i of a level (shared first, then task t's own in order) and its input:
  // -1 the shared input, else task t's.
  Mlp& expert(Level& level, int i) {
    if (sharded && (i < member * local_experts() || i >= (member + 1) * local_experts())) {
      throw Error("MultiTask: expert " + std::to_string(i) + " is another member's (bug)");
    }
    return expert_slot(level, i);
  }
  Mlp& expert_slot(Level& level, int i) {
    const int S = shape.shared_experts, P = shape.task_experts;
    return i < S ? level.shared[size_t(i)] : level.own[size_t((i - S) / P)][size_t((i - S) % P)];
  }
  int input_of(int i) const { return i < shape.shared_experts ? -1 : (i - shape.shared_experts) / shape.task_experts; }
  // A level's distinct inputs: level 0 reads z everywhere; above it, the shared input and each task's.
  int input_arrays(int l) const { return l == 0 ? 1 : 1 + shape.tasks; }
  int input_slot(int l, int which) const { return l == 0 ? 0 : which + 1; }
  const float* input_at(int l, int slot) const { return slot == 0 ? shared_input(l) : task_input(l, slot - 1); }

  void set_group(ExpertGroup* g) {
    if (sharded) throw Error("MultiTask: the expert group was set twice (bug)");
    group = g != nullptr && g->size() > 1 ? g : nullptr;
    members = group != nullptr ? group->size() : 1;
    member = group != nullptr ? group->rank() : 0;
    if (experts_per_level() % members != 0) {
      throw Error("layout.ep = " + std::to_string(members) + " does not divide the " +
                      std::to_string(experts_per_level()) + " experts of each level of model.kind = " + kind +
                      " (model.num_experts = " + std::to_string(shape.shared_experts) +
                      " shared + model.task_experts = " + std::to_string(shape.task_experts) + " x " +
                      std::to_string(shape.tasks) + " tasks)",
                  "choose the experts per level as a multiple of layout.ep");
    }
    shards.assign(levels.size(), LevelShards{});
    if (group == nullptr) return;
    shard_storage();
    for (size_t l = 0; l < levels.size(); ++l) {
      shards[l].blocks.resize(size_t(local_experts()));
      for (int j = 0; j < local_experts(); ++j) {
        shards[l].blocks[size_t(j)].assign(size_t(members), expert(levels[l], member * local_experts() + j));
      }
    }
  }

  // Keeps the replicated weights (the bottom MLP, the gates, the towers: every
  // weight but the levels' experts, in the whole layout's order) and then this
  // member's experts of each level; the others' go. Each level's experts are one
  // run of the whole layout (registered consecutively), so one sharded segment.
  void shard_storage() {
    const int S = shape.shared_experts, P = shape.task_experts, K = shape.tasks, local = local_experts();
    std::vector<DenseSharding::Segment> segments;
    size_t at = 0;
    for (Level& level : levels) {
      const size_t lo = expert_slot(level, 0).layers().front().weight_offset();
      const Linear& last = expert_slot(level, experts_per_level() - 1).layers().back();
      const size_t hi = last.bias_offset() + size_t(last.out());
      segments.push_back({at, lo - at, false});
      segments.push_back({lo, hi - lo, true});
      at = hi;
    }
    segments.push_back({at, params.size() - at, false});
    sharding = DenseSharding::of(params.slices(), params.size(), std::move(segments), member, members);
    // Registered in the local layout's order: the replicated weights as they come, then the experts.
    DenseParameters kept, placeholders;
    bottom = Mlp(kept, "bottom", shape.front.num_dense, shape.front.bottom, /*relu_last=*/true);
    for (int l = 0; l < shape.levels; ++l) {
      Level& level = levels[size_t(l)];
      for (int t = 0; t < K; ++t) level.gates[size_t(t)] = Gate(kept, gate_name(l, t), level.in, P + S);
      if (!level.shared_gate.empty()) level.shared_gate[0] = Gate(kept, gate_name(l, -1), level.in, K * P + S);
    }
    for (int t = 0; t < K; ++t) towers[size_t(t)] = Mlp(kept, "tower." + std::to_string(t), hidden, shape.tower, false);
    for (int l = 0; l < shape.levels; ++l) {
      Level& level = levels[size_t(l)];
      for (int i = 0; i < experts_per_level(); ++i) {
        const bool own = i >= member * local && i < (member + 1) * local;
        expert_slot(level, i) = Mlp(own ? kept : placeholders, expert_name(l, i), level.in, shape.expert, true);
      }
    }
    kept.finalize();
    if (kept.size() != sharding.local_size()) throw Error("MultiTask: sharded dense layout mismatch (bug)");
    kept.values() = sharding.local_of(params.values(), 1);
    // Every kept weight must hold what the whole model holds under its name.
    for (const ParameterSlice& slice : kept.slices()) {
      const ParameterSlice& whole = params.slice(slice.name);
      if (!std::equal(kept.values().begin() + std::ptrdiff_t(slice.offset),
                      kept.values().begin() + std::ptrdiff_t(slice.offset + slice.size()),
                      params.values().begin() + std::ptrdiff_t(whole.offset))) {
        throw Error("MultiTask: sharded weight '" + slice.name + "' misplaced (bug)");
      }
    }
    params = std::move(kept);
    sharded = true;
  }

  // fn(r, j, i, rows, x) for every member r's block (rows > 0) of every local
  // expert j (level index i, input x), in member order; what fn appends to `send`
  // goes back to member r.
  template <class F>
  void over_blocks(int l, F&& fn) {
    const LevelShards& sh = shards[size_t(l)];
    const int local = local_experts();
    const size_t in = size_t(levels[size_t(l)].in);
    pack_parts(send, send_bytes, members, [&](int r) {
      const size_t rows = size_t(sh.rows[size_t(r)]);
      for (int j = 0; j < local && rows > 0; ++j) {
        const int i = member * local + j;
        fn(r, j, i, rows, sh.inputs[size_t(r)].data() + size_t(input_slot(l, input_of(i))) * rows * in);
      }
    });
  }

  // Level l's experts for this trainer's batch of B, through their owners: the
  // inputs go to every member, each owner runs its experts over every member's
  // block, and the outputs come back.
  void forward_experts_shared(int l, int B) {
    Level& level = levels[size_t(l)];
    LevelShards& sh = shards[size_t(l)];
    const int n = experts_per_level(), arrays = input_arrays(l);
    const size_t in = size_t(level.in), H = size_t(hidden);
    pack_parts(send, send_bytes, members, [&](int) {
      append(send, &B, 1);
      for (int a = 0; a < arrays; ++a) append(send, input_at(l, a), size_t(B) * in);
    });
    group->exchange(send, send_bytes, receive, receive_bytes);
    sh.rows.resize(size_t(members));
    sh.inputs.resize(size_t(members));
    size_t at = 0;
    for (int r = 0; r < members; ++r) {
      int rows = 0;
      std::memcpy(&rows, receive.data() + at, sizeof(int));
      sh.rows[size_t(r)] = rows;
      const float* x = reinterpret_cast<const float*>(receive.data() + at + sizeof(int));
      sh.inputs[size_t(r)].assign(x, x + size_t(arrays) * size_t(rows) * in);
      at += size_t(receive_bytes[size_t(r)]);
    }
    // The owner's side: each local expert over each member's block, in member order.
    over_blocks(l, [&](int r, int j, int, size_t rows, const float* x) {
      const float* y = sh.blocks[size_t(j)][size_t(r)].forward(params, x, int(rows));
      append(send, y, rows * H);
    });
    group->exchange(send, send_bytes, receive, receive_bytes);
    sh.out.resize(size_t(n));
    const float* y = reinterpret_cast<const float*>(receive.data());
    for (int i = 0; i < n; ++i) {
      sh.out[size_t(i)].assign(y, y + size_t(B) * H);  // owners' parts arrive in member (so expert) order
      y += size_t(B) * H;
    }
    const int S = shape.shared_experts, P = shape.task_experts;
    for (int i = 0; i < n; ++i) {
      const float* out = sh.out[size_t(i)].data();
      if (i < S) {
        level.shared_out[size_t(i)] = out;
      } else {
        level.own_out[size_t((i - S) / P)][size_t((i - S) % P)] = out;
      }
    }
  }

  // Backward of level l's experts through their owners: the output gradients go
  // to the owners, who run each block's backward in member order, fold the
  // weight gradients and return each block's input gradient; the home adds them
  // in the order one trainer alone would (each task's experts, then the shared).
  void backward_experts_shared(int l, int B, std::vector<std::vector<float>>& dtask_in, std::vector<float>& dshared_in) {
    Level& level = levels[size_t(l)];
    LevelShards& sh = shards[size_t(l)];
    const int n = experts_per_level(), local = local_experts(), S = shape.shared_experts, P = shape.task_experts;
    const size_t in = size_t(level.in), H = size_t(hidden);
    auto dout_of = [&](int i) -> std::vector<float>& {
      return i < S ? level.dshared[size_t(i)] : level.down[size_t((i - S) / P)][size_t((i - S) % P)];
    };
    pack_parts(send, send_bytes, members, [&](int m) {
      if (B == 0) return;
      for (int j = 0; j < local; ++j) append(send, dout_of(m * local + j).data(), size_t(B) * H);
    });
    group->exchange(send, send_bytes, receive, receive_bytes);
    // The owner's side. Its local experts' weights are one range of the buffer
    // (a level registers its experts consecutively, shared then each task's).
    const size_t lo = expert(level, member * local).layers().front().weight_offset();
    const Linear& last = expert(level, member * local + local - 1).layers().back();
    const size_t hi = last.bias_offset() + size_t(last.out());
    sh.folded.assign(hi - lo, 0.0f);
    bool have = false;
    if (group->replica() > 0) {
      group->receive_from_previous_replica(sh.folded.data(), sh.folded.size());
      have = true;
    }
    std::vector<float> dx, dy;
    size_t at = 0;
    over_blocks(l, [&](int r, int j, int, size_t rows, const float* x) {
      Mlp& block = sh.blocks[size_t(j)][size_t(r)];
      const float* received = reinterpret_cast<const float*>(receive.data() + at);
      dy.assign(received, received + rows * H);
      at += rows * H * sizeof(float);
      dx.resize(rows * in);
      block.backward(params, x, dy.data(), int(rows), dx.data());
      append(send, dx.data(), rows * in);
      const size_t begin = block.layers().front().weight_offset();
      const Linear& end_layer = block.layers().back();
      const size_t end = end_layer.bias_offset() + size_t(end_layer.out());
      const float* grads = params.grads(begin);
      float* into = sh.folded.data() + (begin - lo);
      if (!have && r == 0) {
        std::copy(grads, grads + (end - begin), into);
      } else {
        for (size_t k = 0; k < end - begin; ++k) into[k] += grads[k];
      }
    });
    group->exchange(send, send_bytes, receive, receive_bytes);
    sh.dx.resize(size_t(n));
    const float* d = reinterpret_cast<const float*>(receive.data());
    for (int i = 0; i < n; ++i) {
      sh.dx[size_t(i)].assign(d, d + size_t(B) * in);
      d += size_t(B) * in;
    }
    for (int t = 0; t < shape.tasks; ++t) {
      for (int e = 0; e < P; ++e) add_into(dtask_in[size_t(t)], sh.dx[size_t(S + t * P + e)]);
    }
    for (int e = 0; e < S; ++e) add_into(dshared_in, sh.dx[size_t(e)]);
    // Weight gradients: the local experts' hold, on the last replica, the sum over
    // all blocks of all replicas (zero on the others); the trainers pass it from
    // there to the other replicas (the shard's broadcast).
    std::vector<float>& all = params.grads();
    if (group->replica() + 1 < group->replicas()) {
      group->send_to_next_replica(sh.folded.data(), sh.folded.size());
      std::fill(all.begin() + std::ptrdiff_t(lo), all.begin() + std::ptrdiff_t(hi), 0.0f);
    } else {
      std::copy(sh.folded.begin(), sh.folded.end(), all.begin() + std::ptrdiff_t(lo));
    }
  }

  void forward(const data::Batch& batch, const std::vector<const float*>& rows) {
    const int B = batch.size, K = shape.tasks;
    reserve_front(B);
    features[0] = bottom.forward(params, batch.dense.data(), B);
    for (int t = 0; t < shape.front.num_tables; ++t) {
      float* out = pooled_table(pooled, t);
      pooling[size_t(t)].forward(batch.tables[size_t(t)], B, rows[size_t(t)], out);
      features[size_t(t) + 1] = out;
    }
    interaction.forward(B, features.data(), z.data());
    for (int l = 0; l < shape.levels; ++l) {
      Level& level = levels[size_t(l)];
      if (group != nullptr) {
        forward_experts_shared(l, B);
      } else {
        for (size_t e = 0; e < level.shared.size(); ++e) {
          level.shared_out[e] = level.shared[e].forward(params, shared_input(l), B);
        }
        for (int t = 0; t < K; ++t) {
          for (size_t e = 0; e < level.own[size_t(t)].size(); ++e) {
            level.own_out[size_t(t)][e] = level.own[size_t(t)][e].forward(params, task_input(l, t), B);
          }
        }
      }
      for (int t = 0; t < K; ++t) {
        level.out[size_t(t)].resize(size_t(B) * hidden);
        level.gates[size_t(t)].forward(params, task_input(l, t), B, task_sources(level, t), hidden,
                                       level.out[size_t(t)].data());
      }
      if (!level.shared_gate.empty()) {
        level.shared_next.resize(size_t(B) * hidden);
        level.shared_gate[0].forward(params, shared_input(l), B, all_sources(level), hidden, level.shared_next.data());
      }
    }
    const Level& top = levels.back();
    for (int t = 0; t < K; ++t) {
      const float* y = towers[size_t(t)].forward(params, top.out[size_t(t)].data(), B);
      logits[size_t(t)].assign(y, y + B);
    }
  }

  // Adds this batch's gate weights to each expert's soft load (numbering: see take_routing_stats).
  void count_gate_load(int B) {
    const int K = shape.tasks, S = shape.shared_experts, P = shape.task_experts;
    const size_t per_level = size_t(S + K * P);
    stats.routed.resize(per_level * levels.size(), 0.0);
    for (size_t l = 0; l < levels.size(); ++l) {
      const size_t base = l * per_level;
      const auto add = [&](const Gate& gate, const std::vector<size_t>& expert_of) {
        for (int b = 0; b < B; ++b) {
          const float* w = gate.weights.data() + size_t(b) * gate.n();
          for (int j = 0; j < gate.n(); ++j) stats.routed[base + expert_of[size_t(j)]] += double(w[j]);
        }
      };
      // Task t's gate: its own experts, then the shared ones.
      for (int t = 0; t < K; ++t) {
        std::vector<size_t> expert_of;
        for (int e = 0; e < P; ++e) expert_of.push_back(size_t(S + t * P + e));
        for (int e = 0; e < S; ++e) expert_of.push_back(size_t(e));
        add(levels[l].gates[size_t(t)], expert_of);
      }
      // The shared gate: every task's experts in task order, then the shared ones.
      if (!levels[l].shared_gate.empty()) {
        std::vector<size_t> expert_of;
        for (int i = 0; i < K * P; ++i) expert_of.push_back(size_t(S + i));
        for (int e = 0; e < S; ++e) expert_of.push_back(size_t(e));
        add(levels[l].shared_gate[0], expert_of);
      }
    }
    stats.accepted = stats.routed;
    stats.steps += 1;
  }

  // Backward from dlogits to dz (the front's gradient), every weight's gradient written.
  void backward(int B) {
    const int K = shape.tasks;
    const size_t BH = size_t(B) * hidden;
    // d(task t's mix) of the level being walked, and d(shared mix) below the last level.
    std::vector<std::vector<float>> dmix(static_cast<size_t>(K), std::vector<float>(BH));
    std::vector<float> dshared_mix;
    for (int t = 0; t < K; ++t) {
      towers[size_t(t)].backward(params, levels.back().out[size_t(t)].data(), dlogits[size_t(t)].data(), B,
                                 dmix[size_t(t)].data());
    }
    std::vector<float> scratch;
    for (int l = shape.levels; l-- > 0;) {
      Level& level = levels[size_t(l)];
      const size_t in_size = size_t(B) * level.in;
      for (auto& d : level.dshared) d.assign(BH, 0.0f);
      for (auto& task : level.down) {
        for (auto& d : task) d.assign(BH, 0.0f);
      }
      // Gradients of this level's inputs.
      std::vector<std::vector<float>> dtask_in(static_cast<size_t>(K), std::vector<float>(in_size));
      std::vector<float> dshared_in(in_size, 0.0f);
      scratch.resize(in_size);
      for (int t = 0; t < K; ++t) {
        std::vector<float*> dsources;
        for (auto& d : level.down[size_t(t)]) dsources.push_back(d.data());
        for (auto& d : level.dshared) dsources.push_back(d.data());
        level.gates[size_t(t)].backward(params, task_input(l, t), B, task_sources(level, t), dsources, hidden,
                                        dmix[size_t(t)].data(), dtask_in[size_t(t)].data());
      }
      if (!level.shared_gate.empty()) {
        std::vector<float*> dsources;
        for (auto& task : level.down) {
          for (auto& d : task) dsources.push_back(d.data());
        }
        for (auto& d : level.dshared) dsources.push_back(d.data());
        level.shared_gate[0].backward(params, shared_input(l), B, all_sources(level), dsources, hidden,
                                      dshared_mix.data(), dshared_in.data());
      }
      if (group != nullptr) {
        backward_experts_shared(l, B, dtask_in, dshared_in);
      } else {
        for (int t = 0; t < K; ++t) {
          for (size_t e = 0; e < level.own[size_t(t)].size(); ++e) {
            level.own[size_t(t)][e].backward(params, task_input(l, t), level.down[size_t(t)][e].data(), B,
                                             scratch.data());
            add_into(dtask_in[size_t(t)], scratch);
          }
        }
        for (size_t e = 0; e < level.shared.size(); ++e) {
          level.shared[e].backward(params, shared_input(l), level.dshared[e].data(), B, scratch.data());
          add_into(dshared_in, scratch);
        }
      }
      if (l > 0) {
        dmix = std::move(dtask_in);
        dshared_mix = std::move(dshared_in);
        continue;
      }
      // Level 0 reads z everywhere: dz is the sum of its tasks' and the shared input's.
      std::copy(dshared_in.begin(), dshared_in.end(), dz.begin());
      for (int t = 0; t < K; ++t) {
        for (size_t i = 0; i < in_size; ++i) dz[i] += dtask_in[size_t(t)][i];
      }
    }
  }
};

MultiTask::MultiTask(const ModelOptions& options, int num_dense, int num_tables, int tasks, uint64_t seed)
    : impl_(std::make_unique<Impl>(options.kind, multi_task_shape(options, num_dense, num_tables, tasks), seed)) {}

MultiTask::~MultiTask() = default;

const std::string& MultiTask::kind() const { return impl_->kind; }
DenseParameters& MultiTask::parameters() { return impl_->params; }
const DenseParameters& MultiTask::parameters() const { return impl_->params; }
int MultiTask::embedding_dim() const { return impl_->shape.front.dim; }
int MultiTask::num_tables() const { return impl_->shape.front.num_tables; }
int MultiTask::num_tasks() const { return impl_->shape.tasks; }
const MultiTaskShape& MultiTask::shape() const { return impl_->shape; }

void MultiTask::set_expert_group(ExpertGroup* group) { impl_->set_group(group); }
const DenseSharding* MultiTask::dense_sharding() const { return impl_->sharded ? &impl_->sharding : nullptr; }

RoutingStats MultiTask::take_routing_stats() {
  RoutingStats out = std::move(impl_->stats);
  impl_->stats = RoutingStats{};
  return out;
}

double MultiTask::forward_backward(const data::Batch& batch, const std::vector<const float*>& rows,
                                   const std::vector<float*>& row_grads, float loss_scale) {
  Impl& m = *impl_;
  check_dlrm_batch(m.shape.front, batch, rows, &row_grads, m.kind.c_str(), m.shape.tasks);
  const int B = batch.size, K = m.shape.tasks;
  m.forward(batch, rows);
  double total = 0.0;
  for (int t = 0; t < K; ++t) {
    std::vector<float>& y = m.labels[size_t(t)];
    y.resize(size_t(B));
    for (int b = 0; b < B; ++b) y[size_t(b)] = batch.labels[size_t(b) * K + t];
    m.dlogits[size_t(t)].resize(size_t(B));
    total += m.losses[size_t(t)].forward_backward(B, m.logits[size_t(t)].data(), y.data(), loss_scale,
                                                  m.dlogits[size_t(t)].data());
  }
  m.backward(B);
  m.count_gate_load(B);
  m.dfeatures[0] = m.dx0.data();
  for (int t = 0; t < m.shape.front.num_tables; ++t) m.dfeatures[size_t(t) + 1] = m.pooled_table(m.dpooled, t);
  m.interaction.backward(B, m.dz.data(), m.dfeatures.data());
  for (int t = 0; t < m.shape.front.num_tables; ++t) {
    m.pooling[size_t(t)].backward(batch.tables[size_t(t)], B, m.dfeatures[size_t(t) + 1], row_grads[size_t(t)]);
  }
  m.bottom.backward(m.params, batch.dense.data(), m.dx0.data(), B, nullptr);
  return total;
}

void MultiTask::predict(const data::Batch& batch, const std::vector<const float*>& rows, float* probs) {
  Impl& m = *impl_;
  check_dlrm_batch(m.shape.front, batch, rows, nullptr, m.kind.c_str(), m.shape.tasks);
  const int B = batch.size, K = m.shape.tasks;
  m.forward(batch, rows);
  std::vector<float> p(static_cast<size_t>(B));
  for (int t = 0; t < K; ++t) {
    backend::sigmoid(B, m.logits[size_t(t)].data(), p.data());
    for (int b = 0; b < B; ++b) probs[size_t(b) * K + t] = p[size_t(b)];
  }
}

}  // namespace strata::model
