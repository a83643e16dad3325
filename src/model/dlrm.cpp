// Dlrm: bottom MLP -> (x0, pooled bags) -> dot interaction -> top MLP -> BCE.
// Every buffer is sized for the largest batch seen and reused, so a step allocates
// nothing once the batch size is stable.
#include "model/dlrm.hpp"

#include <algorithm>
#include <cctype>

#include "backend/dense_kernels.hpp"
#include "backend/embedding_kernels.hpp"
#include "common/error.hpp"
#include "model/batch_checks.hpp"
#include "model/bce_loss.hpp"
#include "model/dot_interaction.hpp"
#include "model/mlp.hpp"

namespace strata::model {

// Here rather than in the deck parser so that the models do not depend on it.
std::vector<int> parse_layer_widths(const std::string& text, const std::string& key) {
  std::vector<int> widths;
  size_t pos = 0;
  const auto bad = [&](const std::string& why) {
    return Error(key + " = '" + text + "': " + why,
                 "give " + key + " as comma-separated positive integers, e.g. 64,16");
  };
  bool all_blank = std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c); });
  if (all_blank) return widths;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(pos, comma - pos);
    const size_t first = item.find_first_not_of(" \t");
    const size_t last = item.find_last_not_of(" \t");
    item = first == std::string::npos ? "" : item.substr(first, last - first + 1);
    if (item.empty()) throw bad("empty entry");
    size_t used = 0;
    long value = 0;
    try {
      value = std::stol(item, &used);
    } catch (const std::exception&) {
      throw bad("'" + item + "' is not an integer");
    }
    if (used != item.size()) throw bad("'" + item + "' is not an integer");
    if (value <= 0 || value > (1 << 24)) throw bad("width " + item + " is not positive (or absurdly large)");
    widths.push_back(int(value));
    pos = comma + 1;
  }
  return widths;
}

int DlrmShape::interaction_width() const {
  return backend::dot_interaction_width(num_tables + 1, dim);
}

DlrmShape dlrm_shape(const ModelOptions& options, int num_dense, int num_tables) {
  DlrmShape shape;
  shape.num_dense = num_dense;
  shape.num_tables = num_tables;
  shape.dim = options.embedding_dim;
  if (num_dense < 1)
    throw Error("the DLRM model needs at least one dense feature (got " + std::to_string(num_dense) + ")",
                "set data.num_dense >= 1");
  if (num_tables < 0) throw Error("negative number of embedding tables", "set data.num_tables >= 0");
  if (shape.dim < 1)
    throw Error("model.embedding_dim = " + std::to_string(shape.dim) + " is not positive",
                "set model.embedding_dim to a positive width, e.g. 16");
  shape.bottom = parse_layer_widths(options.bottom_mlp, "model.bottom_mlp");
  if (shape.bottom.empty())
    throw Error("model.bottom_mlp is empty", "give at least one bottom-MLP width; the last must equal "
                                             "model.embedding_dim (" + std::to_string(shape.dim) + ")");
  if (shape.bottom.back() != shape.dim)
    throw Error("model.bottom_mlp = '" + options.bottom_mlp + "' ends in " +
                    std::to_string(shape.bottom.back()) + ", but model.embedding_dim = " +
                    std::to_string(shape.dim),
                "make the last width of model.bottom_mlp equal model.embedding_dim: the bottom "
                "MLP output is dotted with the embeddings");
  shape.top = parse_layer_widths(options.top_mlp, "model.top_mlp");
  shape.top.push_back(1);
  shape.pooling = parse_pooling(options.pooling);
  return shape;
}

void check_dlrm_batch(const DlrmShape& shape, const data::Batch& batch, const std::vector<const float*>& rows,
                      const std::vector<float*>* row_grads, const char* who, int tasks) {
  const int B = batch.size;
  const int T = shape.num_tables;
  const auto fail = [who](const std::string& what) {
    return Error(std::string(who) + ": malformed batch: " + what,
                 "the batch must match the model (data.num_dense, data.num_tables) and be "
                 "de-duplicated");
  };
  if (B < 0) throw fail("negative size");
  if (batch.num_dense != shape.num_dense)
    throw fail(std::to_string(batch.num_dense) + " dense features, model has " +
               std::to_string(shape.num_dense));
  if (batch.dense.size() != size_t(B) * shape.num_dense) throw fail("dense has the wrong size");
  if (batch.num_tasks != tasks)
    throw fail(std::to_string(batch.num_tasks) + " labels per sample, model has " + std::to_string(tasks) + " tasks");
  if (batch.labels.size() != size_t(B) * size_t(tasks)) throw fail("labels has the wrong size");
  if (batch.tables.size() != size_t(T))
    throw fail(std::to_string(batch.tables.size()) + " tables, model has " + std::to_string(T));
  if (rows.size() != size_t(T)) throw fail("rows must hold one pointer per table");
  if (row_grads != nullptr && row_grads->size() != size_t(T))
    throw fail("row_grads must hold one pointer per table");
  check_sparse_tables(batch, rows, row_grads, fail);
}

struct Dlrm::Impl {
  DlrmShape shape;
  DenseParameters params;
  Mlp bottom;
  Mlp top;
  DotInteraction interaction;
  std::vector<EmbeddingBagPooling> pooling;  // one per table (each keeps its own scratch)
  BceLoss loss;

  int capacity = 0;
  // Sample-major activations, sized for `capacity` samples.
  std::vector<float> pooled;        // T x (B, dim)
  std::vector<float> dpooled;       // T x (B, dim)
  std::vector<float> interactions;  // (B, W) top MLP input
  std::vector<float> dinteractions; // (B, W)
  std::vector<float> dx0;           // (B, dim)
  std::vector<float> dlogits;       // (B)
  std::vector<const float*> features;  // (T + 1) x0, then pooled table t
  std::vector<float*> dfeatures;       // (T + 1)

  Impl(const DlrmShape& s, uint64_t seed)
      : shape(s),
        bottom(params, "bottom", s.num_dense, s.bottom, /*relu_last=*/true),
        top(params, "top", s.interaction_width(), s.top, /*relu_last=*/false),
        interaction(s.num_tables + 1, s.dim),
        pooling(size_t(s.num_tables), EmbeddingBagPooling(s.dim, s.pooling)),
        features(size_t(s.num_tables) + 1),
        dfeatures(size_t(s.num_tables) + 1) {
    params.finalize();
    bottom.init(params, seed);
    top.init(params, seed);
  }

  void reserve(int batch) {
    bottom.reserve(batch);
    top.reserve(batch);
    interaction.reserve(batch);
    if (batch <= capacity) return;
    const size_t d = size_t(shape.dim), T = size_t(shape.num_tables), W = shape.interaction_width();
    pooled.resize(T * batch * d);
    dpooled.resize(T * batch * d);
    interactions.resize(size_t(batch) * W);
    dinteractions.resize(size_t(batch) * W);
    dx0.resize(size_t(batch) * d);
    dlogits.resize(batch);
    capacity = batch;
  }

  float* pooled_table(std::vector<float>& buffer, int t) {
    return buffer.data() + size_t(t) * capacity * shape.dim;
  }

  // Runs the network up to the logits; returns them (B).
  const float* forward(const data::Batch& batch, const std::vector<const float*>& rows) {
    const int B = batch.size;
    reserve(B);
    features[0] = bottom.forward(params, batch.dense.data(), B);
    for (int t = 0; t < shape.num_tables; ++t) {
      float* out = pooled_table(pooled, t);
      pooling[t].forward(batch.tables[t], B, rows[t], out);
      features[t + 1] = out;
    }
    interaction.forward(B, features.data(), interactions.data());
    return top.forward(params, interactions.data(), B);
  }
};

Dlrm::Dlrm(const ModelOptions& options, int num_dense, int num_tables, uint64_t seed)
    : impl_(std::make_unique<Impl>(dlrm_shape(options, num_dense, num_tables), seed)) {}

Dlrm::~Dlrm() = default;

const std::string& Dlrm::kind() const {
  static const std::string name = "dlrm";
  return name;
}
DenseParameters& Dlrm::parameters() { return impl_->params; }
const DenseParameters& Dlrm::parameters() const { return impl_->params; }
int Dlrm::embedding_dim() const { return impl_->shape.dim; }
int Dlrm::num_tables() const { return impl_->shape.num_tables; }
const DlrmShape& Dlrm::shape() const { return impl_->shape; }

double Dlrm::forward_backward(const data::Batch& batch, const std::vector<const float*>& rows,
                              const std::vector<float*>& row_grads, float loss_scale) {
  Impl& m = *impl_;
  check_dlrm_batch(m.shape, batch, rows, &row_grads, "Dlrm");
  const int B = batch.size;
  const float* logits = m.forward(batch, rows);
  const double loss = m.loss.forward_backward(B, logits, batch.labels.data(), loss_scale, m.dlogits.data());

  m.top.backward(m.params, m.interactions.data(), m.dlogits.data(), B, m.dinteractions.data());
  m.dfeatures[0] = m.dx0.data();
  for (int t = 0; t < m.shape.num_tables; ++t) m.dfeatures[t + 1] = m.pooled_table(m.dpooled, t);
  m.interaction.backward(B, m.dinteractions.data(), m.dfeatures.data());
  for (int t = 0; t < m.shape.num_tables; ++t)
    m.pooling[t].backward(batch.tables[t], B, m.dfeatures[t + 1], row_grads[t]);
  m.bottom.backward(m.params, batch.dense.data(), m.dx0.data(), B, nullptr);
  return loss;
}

void Dlrm::predict(const data::Batch& batch, const std::vector<const float*>& rows, float* probs) {
  Impl& m = *impl_;
  check_dlrm_batch(m.shape, batch, rows, nullptr, "Dlrm");
  const float* logits = m.forward(batch, rows);
  backend::sigmoid(batch.size, logits, probs);
}

}  // namespace strata::model
