// Moe: the DLRM front (bottom MLP, pooled bags, dot interaction) and a MoeTower
// on its output (model/moe_tower.hpp: the gate, the experts, expert parallel).
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
#include "model/linear.hpp"
#include "model/mlp.hpp"
#include "model/moe_tower.hpp"

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

MoeTowerShape moe_tower_shape(const ModelOptions& options, int width, const std::vector<int>& expert) {
  check_moe_options(options);
  MoeTowerShape tower;
  tower.width = width;
  tower.expert = expert;
  tower.num_experts = options.num_experts;
  tower.top_k = options.top_k;
  tower.capacity_factor = options.capacity_factor;
  tower.eval_capacity_factor = options.eval_capacity_factor;
  tower.aux_loss_weight = float(options.aux_loss_weight);
  return tower;
}

MoeShape moe_shape(const ModelOptions& options, int num_dense, int num_tables) {
  MoeShape shape;
  shape.dlrm = dlrm_shape(options, num_dense, num_tables);
  shape.tower = moe_tower_shape(options, shape.dlrm.interaction_width(), shape.dlrm.top);
  return shape;
}

struct Moe::Impl {
  MoeShape shape;
  int width;  // W: the interaction output, the tower's input
  DenseParameters params;
  Mlp bottom;
  MoeTower tower;
  DotInteraction interaction;
  std::vector<EmbeddingBagPooling> pooling;
  BceLoss loss;

  // The front, sample-major.
  std::vector<float> pooled, dpooled;  // T x (B, dim)
  std::vector<float> z, dz;            // (B, W)
  std::vector<float> dx0;              // (B, dim)
  std::vector<float> dlogits;          // (B)
  std::vector<const float*> features;
  std::vector<float*> dfeatures;
  int front_capacity = 0;

  Impl(const MoeShape& s, uint64_t seed)
      : shape(s),
        width(s.dlrm.interaction_width()),
        bottom(params, "bottom", s.dlrm.num_dense, s.dlrm.bottom, /*relu_last=*/true),
        tower(params, s.tower),
        interaction(s.dlrm.num_tables + 1, s.dlrm.dim),
        pooling(size_t(s.dlrm.num_tables), EmbeddingBagPooling(s.dlrm.dim, s.dlrm.pooling)),
        features(size_t(s.dlrm.num_tables) + 1),
        dfeatures(size_t(s.dlrm.num_tables) + 1) {
    params.finalize();
    bottom.init(params, seed);
    tower.init(params, seed);
  }

  void reserve_front(int batch) {
    bottom.reserve(batch);
    interaction.reserve(batch);
    if (batch <= front_capacity) return;
    const size_t d = size_t(shape.dlrm.dim), T = size_t(shape.dlrm.num_tables), W = size_t(width);
    pooled.resize(T * batch * d);
    dpooled.resize(T * batch * d);
    z.resize(size_t(batch) * W);
    dz.resize(size_t(batch) * W);
    dx0.resize(size_t(batch) * d);
    dlogits.resize(size_t(batch));
    front_capacity = batch;
  }

  float* pooled_table(std::vector<float>& buffer, int t) {
    return buffer.data() + size_t(t) * front_capacity * shape.dlrm.dim;
  }

  // Forward to the logits (B): the front, then the tower.
  const float* forward(const data::Batch& batch, const std::vector<const float*>& rows, bool training) {
    const int B = batch.size;
    reserve_front(B);
    features[0] = bottom.forward(params, batch.dense.data(), B);
    for (int t = 0; t < shape.dlrm.num_tables; ++t) {
      float* out = pooled_table(pooled, t);
      pooling[size_t(t)].forward(batch.tables[size_t(t)], B, rows[size_t(t)], out);
      features[size_t(t) + 1] = out;
    }
    interaction.forward(B, features.data(), z.data());
    return tower.forward(params, z.data(), B, training);
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
std::pair<size_t, size_t> Moe::expert_range(int e) const { return impl_->tower.expert_range(e); }
const DenseSharding* Moe::dense_sharding() const { return impl_->tower.sharding(); }
void Moe::set_expert_group(ExpertGroup* group) { impl_->tower.set_group(group, impl_->params); }

double Moe::forward_backward(const data::Batch& batch, const std::vector<const float*>& rows,
                             const std::vector<float*>& row_grads, float loss_scale) {
  Impl& m = *impl_;
  check_dlrm_batch(m.shape.dlrm, batch, rows, &row_grads, "Moe");
  const int B = batch.size;
  const float* logits = m.forward(batch, rows, /*training=*/true);
  const double total = m.loss.forward_backward(B, logits, batch.labels.data(), loss_scale, m.dlogits.data());
  m.tower.backward(m.params, m.z.data(), m.dlogits.data(), m.shape.tower.aux_loss_weight * loss_scale, B, m.dz.data());
  // The front.
  m.dfeatures[0] = m.dx0.data();
  for (int t = 0; t < m.shape.dlrm.num_tables; ++t) m.dfeatures[size_t(t) + 1] = m.pooled_table(m.dpooled, t);
  m.interaction.backward(B, m.dz.data(), m.dfeatures.data());
  for (int t = 0; t < m.shape.dlrm.num_tables; ++t) {
    m.pooling[size_t(t)].backward(batch.tables[size_t(t)], B, m.dfeatures[size_t(t) + 1], row_grads[size_t(t)]);
  }
  m.bottom.backward(m.params, batch.dense.data(), m.dx0.data(), B, nullptr);
  return total;
}

void Moe::predict(const data::Batch& batch, const std::vector<const float*>& rows, float* probs) {
  Impl& m = *impl_;
  check_dlrm_batch(m.shape.dlrm, batch, rows, nullptr, "Moe");
  const float* logits = m.forward(batch, rows, /*training=*/false);
  backend::sigmoid(batch.size, logits, probs);
}

RoutingStats Moe::take_routing_stats() { return impl_->tower.take_stats(); }

}  // namespace strata::model
