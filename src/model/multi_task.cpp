// MultiTask: the DLRM front, then the levels of experts and gates, then one tower
// per task. Every sum runs in a fixed order (tasks, then a gate's experts in gate
// order: the task's own experts, then the shared ones), so a step's numbers do
// not depend on anything but the batch.
#include "model/multi_task.hpp"

#include <algorithm>
#include <cmath>

#include "backend/dense_kernels.hpp"
#include "common/error.hpp"
#include "model/batch_checks.hpp"
#include "model/bce_loss.hpp"
#include "model/dot_interaction.hpp"
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
      const std::string name = "level." + std::to_string(l);
      for (int e = 0; e < S; ++e) {
        level.shared.emplace_back(params, name + ".shared." + std::to_string(e), level.in, s.expert, true);
      }
      level.own.resize(size_t(K));
      for (int t = 0; t < K; ++t) {
        for (int e = 0; e < P; ++e) {
          level.own[size_t(t)].emplace_back(params, name + ".task." + std::to_string(t) + "." + std::to_string(e),
                                            level.in, s.expert, true);
        }
      }
      for (int t = 0; t < K; ++t) level.gates.emplace_back(params, name + ".gate." + std::to_string(t), level.in, P + S);
      if (l + 1 < s.levels) level.shared_gate.emplace_back(params, name + ".gate.shared", level.in, K * P + S);
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
      for (size_t e = 0; e < level.shared.size(); ++e) {
        level.shared_out[e] = level.shared[e].forward(params, shared_input(l), B);
      }
      for (int t = 0; t < K; ++t) {
        for (size_t e = 0; e < level.own[size_t(t)].size(); ++e) {
          level.own_out[size_t(t)][e] = level.own[size_t(t)][e].forward(params, task_input(l, t), B);
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

void MultiTask::set_expert_group(ExpertGroup* group) {
  if (group != nullptr && group->size() > 1) {
    throw Error("layout.ep = " + std::to_string(group->size()) + ", but model.kind = " + kind() +
                    " gates every expert densely: each sample goes to every expert, so there is nothing to dispatch",
                "set layout.ep = 1 (data parallel over layout.dp), or model.kind = moe for top-k experts");
  }
}

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
