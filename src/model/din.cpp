// Din: bottom MLP, pooled bags, target attention over the history table, top MLP,
// BCE. Buffers grow with the batch (and its history length) and are then reused.
#include "model/din.hpp"

#include <algorithm>
#include <cstring>

#include "backend/dense_kernels.hpp"
#include "backend/embedding_kernels.hpp"
#include "common/error.hpp"
#include "model/batch_checks.hpp"
#include "model/bce_loss.hpp"
#include "model/din_activation_unit.hpp"
#include "model/dlrm.hpp"
#include "model/embedding_bag_pooling.hpp"
#include "model/mlp.hpp"
#include "model/moe.hpp"

namespace strata::model {

DinShape din_shape(const ModelOptions& options, int num_dense, int num_tables) {
  const DlrmShape base = dlrm_shape(options, num_dense, num_tables);  // checks dim, bottom, top
  DinShape shape;
  shape.num_dense = num_dense;
  shape.num_tables = num_tables;
  shape.dim = base.dim;
  shape.bottom = base.bottom;
  shape.top = base.top;
  if (num_tables < 1) {
    throw Error("model.kind = din needs a table of history bags, but the data has no tables",
                "give the data a sequence column (data.csv_columns seq:SEP + cand, or "
                "data.synthetic_history_length > 0)");
  }
  shape.history_table = options.din_history_table < 0 ? num_tables - 1 : options.din_history_table;
  if (shape.history_table >= num_tables) {
    throw Error("model.din_history_table = " + std::to_string(options.din_history_table) + " but the data has " +
                    std::to_string(num_tables) + " tables",
                "set model.din_history_table to a table index in [0, " + std::to_string(num_tables - 1) +
                    "], or -1 for the last table");
  }
  shape.attention = parse_layer_widths(options.din_attention_mlp, "model.din_attention_mlp");
  shape.attention.push_back(1);
  if (options.din_tower == "moe") {
    shape.moe_tower = true;
    shape.tower = moe_tower_shape(options, shape.top_input_width(), shape.top);
  } else if (options.din_tower != "mlp") {
    throw Error("model.din_tower = " + options.din_tower + " is not a tower", "set model.din_tower = mlp or moe");
  }
  return shape;
}

struct Din::Impl {
  DinShape shape;
  DenseParameters params;
  Mlp bottom;
  Mlp attention;  // the activation unit's layers: (4 dim) -> ... -> 1
  std::unique_ptr<DinActivationUnit> unit;  // computes them in tiles, alone or over the SP group
  std::unique_ptr<Mlp> top;         // model.din_tower = mlp
  std::unique_ptr<MoeTower> tower;  // model.din_tower = moe
  std::vector<EmbeddingBagPooling> pooling;  // one per table; the history table's is unused
  BceLoss loss;

  // Per sample (B, ...), sample-major.
  std::vector<float> pooled, dpooled;  // T x (B, dim)
  std::vector<float> interest, candidate, dinterest, dcandidate;  // (B, dim)
  std::vector<float> top_in, dtop_in;  // (B, (T + 2) dim)
  std::vector<float> dx0, dlogits;
  std::vector<int32_t> candidate_row;  // (B) unique row of the candidate, -1 for an empty bag
  // Per history event (N, ...), in sample order then position.
  std::vector<int32_t> event_row, event_sample;
  std::vector<int32_t> event_offsets;    // (B + 1) sample b's events
  std::vector<float> scores, dscores;    // (N)
  std::vector<float> devent;             // (N, dim)
  std::vector<float> dcandidate_events;  // (B, dim) the candidate's gradient through the activation unit

  Impl(const DinShape& s, uint64_t seed)
      : shape(s),
        bottom(params, "bottom", s.num_dense, s.bottom, /*relu_last=*/true),
        attention(params, "attention", 4 * s.dim, s.attention, /*relu_last=*/false),
        pooling(size_t(s.num_tables), EmbeddingBagPooling(s.dim, backend::PoolingMode::kSum)) {
    // The tower registers last: expert parallel keeps the slices before it and a member's own experts.
    if (s.moe_tower) {
      tower = std::make_unique<MoeTower>(params, s.tower);
    } else {
      top = std::make_unique<Mlp>(params, "top", s.top_input_width(), s.top, /*relu_last=*/false);
    }
    params.finalize();
    unit = std::make_unique<DinActivationUnit>(attention, s.dim);
    bottom.init(params, seed);
    attention.init(params, seed);
    if (top) top->init(params, seed);
    if (tower) tower->init(params, seed);
  }

  void check(const data::Batch& batch, const std::vector<const float*>& rows,
             const std::vector<float*>* row_grads) const {
    const int B = batch.size, T = shape.num_tables;
    const auto fail = [](const std::string& what) {
      return Error("Din: malformed batch: " + what,
                   "the batch must match the model (data.num_dense, data.num_tables) and be de-duplicated");
    };
    if (B < 0) throw fail("negative size");
    if (batch.num_dense != shape.num_dense || batch.dense.size() != size_t(B) * shape.num_dense)
      throw fail("dense features do not match the model's " + std::to_string(shape.num_dense));
    if (batch.labels.size() != size_t(B)) throw fail("labels has the wrong size");
    if (batch.tables.size() != size_t(T) || rows.size() != size_t(T) ||
        (row_grads != nullptr && row_grads->size() != size_t(T)))
      throw fail("tables, rows and row_grads must hold " + std::to_string(T) + " entries");
    check_sparse_tables(batch, rows, row_grads, fail);
  }

  float* table_block(std::vector<float>& buffer, int t, int B) { return buffer.data() + size_t(t) * B * shape.dim; }

  // Runs the network up to the logits; returns them (B).
  const float* forward(const data::Batch& batch, const std::vector<const float*>& rows, bool training) {
    const int B = batch.size, T = shape.num_tables, D = shape.dim, h = shape.history_table;
    const size_t W = size_t(shape.top_input_width());
    pooled.resize(size_t(T) * B * D);
    interest.assign(size_t(B) * D, 0.0f);
    candidate.assign(size_t(B) * D, 0.0f);
    top_in.resize(size_t(B) * W);
    candidate_row.assign(B, -1);
    bottom.reserve(B);
    if (top) top->reserve(B);
    const float* x0 = bottom.forward(params, batch.dense.data(), B);
    for (int t = 0; t < T; ++t) {
      if (t != h) pooling[t].forward(batch.tables[t], B, rows[t], table_block(pooled, t, B));
    }

    // The activation unit's input, one row per history event.
    const data::SparseBags& bags = batch.tables[h];
    const float* item_rows = rows[h];
    event_row.clear();
    event_sample.clear();
    event_offsets.assign(size_t(B) + 1, 0);
    for (int b = 0; b < B; ++b) {
      const int32_t first = bags.offsets[b], last = bags.offsets[b + 1];
      event_offsets[size_t(b) + 1] = event_offsets[size_t(b)];
      if (last == first) continue;
      candidate_row[b] = bags.index[last - 1];
      std::memcpy(&candidate[size_t(b) * D], item_rows + size_t(candidate_row[b]) * D, sizeof(float) * D);
      for (int32_t p = first; p < last - 1; ++p) {
        event_row.push_back(bags.index[p]);
        event_sample.push_back(b);
      }
      event_offsets[size_t(b) + 1] += last - 1 - first;
    }
    const int N = int(event_row.size());
    scores.assign(N, 0.0f);
    unit->forward(params, B, event_offsets.data(), item_rows, event_row.data(), candidate.data(), training,
                  scores.data());
    for (int j = 0; j < N; ++j) {
      const float* e = item_rows + size_t(event_row[j]) * D;
      float* u = &interest[size_t(event_sample[j]) * D];
      for (int d = 0; d < D; ++d) u[d] += scores[j] * e[d];
    }

    for (int b = 0; b < B; ++b) {
      float* x = &top_in[size_t(b) * W];
      std::memcpy(x, x0 + size_t(b) * D, sizeof(float) * D);
      x += D;
      for (int t = 0; t < T; ++t) {
        if (t == h) continue;
        std::memcpy(x, table_block(pooled, t, B) + size_t(b) * D, sizeof(float) * D);
        x += D;
      }
      std::memcpy(x, &interest[size_t(b) * D], sizeof(float) * D);
      std::memcpy(x + D, &candidate[size_t(b) * D], sizeof(float) * D);
    }
    return tower ? tower->forward(params, top_in.data(), B, training) : top->forward(params, top_in.data(), B);
  }

  void backward(const data::Batch& batch, const std::vector<const float*>& rows,
                const std::vector<float*>& row_grads, float loss_scale) {
    const int B = batch.size, T = shape.num_tables, D = shape.dim, h = shape.history_table;
    const size_t W = size_t(shape.top_input_width());
    dtop_in.resize(size_t(B) * W);
    if (tower) {
      tower->backward(params, top_in.data(), dlogits.data(), shape.tower.aux_loss_weight * loss_scale, B,
                      dtop_in.data());
    } else {
      top->backward(params, top_in.data(), dlogits.data(), B, dtop_in.data());
    }

    dx0.resize(size_t(B) * D);
    dpooled.resize(size_t(T) * B * D);
    dinterest.resize(size_t(B) * D);
    dcandidate.resize(size_t(B) * D);
    for (int b = 0; b < B; ++b) {
      const float* g = &dtop_in[size_t(b) * W];
      std::memcpy(&dx0[size_t(b) * D], g, sizeof(float) * D);
      g += D;
      for (int t = 0; t < T; ++t) {
        if (t == h) continue;
        std::memcpy(table_block(dpooled, t, B) + size_t(b) * D, g, sizeof(float) * D);
        g += D;
      }
      std::memcpy(&dinterest[size_t(b) * D], g, sizeof(float) * D);
      std::memcpy(&dcandidate[size_t(b) * D], g + D, sizeof(float) * D);
    }
    for (int t = 0; t < T; ++t) {
      if (t != h) pooling[t].backward(batch.tables[t], B, table_block(dpooled, t, B), row_grads[t]);
    }

    // interest_b = sum_j a_j e_j: d a_j = <d interest_b, e_j>, d e_j = a_j d interest_b.
    const float* item_rows = rows[h];
    const int N = int(event_row.size());
    dscores.resize(N);
    devent.resize(size_t(N) * D);
    for (int j = 0; j < N; ++j) {
      const float* e = item_rows + size_t(event_row[j]) * D;
      const float* du = &dinterest[size_t(event_sample[j]) * D];
      float dot = 0.0f;
      for (int d = 0; d < D; ++d) dot += du[d] * e[d];
      dscores[j] = dot;
    }
    // The unit gives each event's gradient through z = [e, c, e - c, e * c], and the candidate's per sample.
    dcandidate_events.resize(size_t(B) * D);
    unit->backward(params, dscores.data(), devent.data(), dcandidate_events.data());
    for (int j = 0; j < N; ++j) {
      const float* du = &dinterest[size_t(event_sample[j]) * D];
      for (int d = 0; d < D; ++d) devent[size_t(j) * D + d] += scores[j] * du[d];
    }
    for (size_t i = 0; i < size_t(B) * D; ++i) dcandidate[i] += dcandidate_events[i];

    // Row gradients of the history table, in sample order then position (the
    // candidate is its bag's last position).
    const data::SparseBags& bags = batch.tables[h];
    float* grads = row_grads[h];
    std::fill_n(grads, bags.unique_keys.size() * D, 0.0f);
    int j = 0;
    for (int b = 0; b < B; ++b) {
      const int32_t first = bags.offsets[b], last = bags.offsets[b + 1];
      for (int32_t p = first; p < last; ++p) {
        const float* g = p == last - 1 ? &dcandidate[size_t(b) * D] : &devent[size_t(j++) * D];
        float* row = grads + size_t(bags.index[p]) * D;
        for (int d = 0; d < D; ++d) row[d] += g[d];
      }
    }
    bottom.backward(params, batch.dense.data(), dx0.data(), B, nullptr);
  }
};

Din::Din(const ModelOptions& options, int num_dense, int num_tables, uint64_t seed)
    : impl_(std::make_unique<Impl>(din_shape(options, num_dense, num_tables), seed)) {}

Din::~Din() = default;

const std::string& Din::kind() const {
  static const std::string name = "din";
  return name;
}
DenseParameters& Din::parameters() { return impl_->params; }
const DenseParameters& Din::parameters() const { return impl_->params; }
int Din::embedding_dim() const { return impl_->shape.dim; }
int Din::num_tables() const { return impl_->shape.num_tables; }
const DinShape& Din::shape() const { return impl_->shape; }

double Din::forward_backward(const data::Batch& batch, const std::vector<const float*>& rows,
                             const std::vector<float*>& row_grads, float loss_scale) {
  Impl& m = *impl_;
  m.check(batch, rows, &row_grads);
  const int B = batch.size;
  const float* logits = m.forward(batch, rows, /*training=*/true);
  m.dlogits.resize(B);
  const double loss = m.loss.forward_backward(B, logits, batch.labels.data(), loss_scale, m.dlogits.data());
  m.backward(batch, rows, row_grads, loss_scale);
  return loss;
}

void Din::predict(const data::Batch& batch, const std::vector<const float*>& rows, float* probs) {
  Impl& m = *impl_;
  m.check(batch, rows, nullptr);
  const float* logits = m.forward(batch, rows, /*training=*/false);
  backend::sigmoid(batch.size, logits, probs);
}

void Din::set_expert_group(ExpertGroup* group) {
  if (impl_->tower) {
    impl_->tower->set_group(group, impl_->params);
  } else {
    Model::set_expert_group(group);  // refuses a group of more than one: no experts
  }
}

void Din::set_sequence_group(SequenceGroup* group, const SequenceParallelOptions& options) {
  impl_->unit->set_group(group, options);
}

SequenceParallelStats Din::take_sequence_parallel_stats() { return impl_->unit->take_stats(); }

const DenseSharding* Din::dense_sharding() const { return impl_->tower ? impl_->tower->sharding() : nullptr; }

bool Din::sums_gradients_in_trainer_order() const { return impl_->tower != nullptr; }

RoutingStats Din::take_routing_stats() { return impl_->tower ? impl_->tower->take_stats() : RoutingStats{}; }

}  // namespace strata::model
