// The next-item models' shared LayerNorm and scoring head (see the header).
#include "model/next_item_head.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "model/batch_checks.hpp"

namespace strata::model {

namespace {

// softplus(x) = log(1 + e^x) without overflow.
double softplus(double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x))); }

float sigmoid(float x) {
  if (x >= 0.0f) return 1.0f / (1.0f + std::exp(-x));
  const float e = std::exp(x);
  return e / (1.0f + e);
}

float dot(const float* a, const float* b, int n) {
  float s = 0.0f;
  for (int d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

}  // namespace

LayerNorm::LayerNorm(DenseParameters& params, const std::string& name, int dim)
    : dim_(dim), gain_(params.add(name + ".gain", {dim})), bias_(params.add(name + ".bias", {dim})) {}

void LayerNorm::init(DenseParameters& params) const {
  std::fill_n(params.values(gain_), dim_, 1.0f);
  std::fill_n(params.values(bias_), dim_, 0.0f);
}

void LayerNorm::forward(const DenseParameters& params, const float* x, int rows, float* y, float* mean,
                        float* rstd) const {
  const float* g = params.values().data() + gain_;
  const float* b = params.values().data() + bias_;
  const int D = dim_;
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + size_t(r) * D;
    double sum = 0.0;
    for (int d = 0; d < D; ++d) sum += xr[d];
    const double mu = sum / D;
    double var = 0.0;
    for (int d = 0; d < D; ++d) var += (xr[d] - mu) * (xr[d] - mu);
    const float m = float(mu), s = float(1.0 / std::sqrt(var / D + double(kEps)));
    mean[r] = m;
    rstd[r] = s;
    float* yr = y + size_t(r) * D;
    for (int d = 0; d < D; ++d) yr[d] = g[d] * ((xr[d] - m) * s) + b[d];
  }
}

void LayerNorm::backward(DenseParameters& params, const float* x, const float* mean, const float* rstd,
                         const float* dy, int rows, float* dx) const {
  const float* g = params.values().data() + gain_;
  float* dg = params.grads(gain_);
  float* db = params.grads(bias_);
  const int D = dim_;
  std::fill_n(dg, D, 0.0f);
  std::fill_n(db, D, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + size_t(r) * D;
    const float* dyr = dy + size_t(r) * D;
    const float m = mean[r], s = rstd[r];
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (int d = 0; d < D; ++d) {
      const float xhat = (xr[d] - m) * s, gd = dyr[d] * g[d];
      sum_g += gd;
      sum_gx += gd * xhat;
      dg[d] += dyr[d] * xhat;
      db[d] += dyr[d];
    }
    const float mean_g = sum_g / float(D), mean_gx = sum_gx / float(D);
    float* dxr = dx + size_t(r) * D;
    for (int d = 0; d < D; ++d) {
      const float xhat = (xr[d] - m) * s;
      dxr[d] += s * (dyr[d] * g[d] - mean_g - xhat * mean_gx);
    }
  }
}

void check_next_item_options(const std::string& kind, int dim, int heads, int blocks, int max_len, int num_tables) {
  const std::string key = "model." + kind + "_";
  if (dim <= 0)
    throw Error("model.embedding_dim = " + std::to_string(dim) + " is not positive",
                "set model.embedding_dim to the width of the item rows, e.g. 64");
  if (heads <= 0 || dim % heads != 0)
    throw Error(key + "heads = " + std::to_string(heads) + " does not divide model.embedding_dim = " +
                    std::to_string(dim),
                "set " + key + "heads to a positive divisor of model.embedding_dim (1 by default)");
  if (blocks <= 0)
    throw Error(key + "blocks = " + std::to_string(blocks) + " is not positive",
                "set " + key + "blocks >= 1 (2 by default)");
  if (max_len <= 0)
    throw Error(key + "max_len = " + std::to_string(max_len) + " is not positive",
                "set " + key + "max_len to the longest history, at least data.max_seq_len (e.g. 200)");
  if (num_tables != 2)
    throw Error("model.kind = " + kind + " needs 2 tables (history, candidates) but the data has " +
                    std::to_string(num_tables),
                "use next-item samples: data.source = sequences or synthetic_sequences with "
                "data.sequence_task = next_item");
}

void check_next_item_batch(const data::Batch& batch, const std::vector<const float*>& rows,
                           const std::vector<float*>* row_grads, bool training, int max_len,
                           const std::string& model, const std::string& kind) {
  constexpr int kTables = 2;
  const int B = batch.size;
  const auto fail = [&](const std::string& what) {
    return Error(model + ": malformed batch: " + what,
                 "the batch must hold next-item samples (history, candidates tables) and be de-duplicated");
  };
  if (B < 0) throw fail("negative size");
  if (batch.tables.size() != size_t(kTables) || rows.size() != size_t(kTables) ||
      (row_grads != nullptr && row_grads->size() != size_t(kTables)))
    throw Error("model.kind = " + kind + " needs 2 tables (history, candidates) but the batch has " +
                    std::to_string(batch.tables.size()) + " (rows " + std::to_string(rows.size()) + ")",
                "use next-item samples: data.sequence_task = next_item");
  check_sparse_tables(batch, rows, row_grads, fail, /*reads_tied_tables=*/true);
  const auto& history = batch.tables[kNextItemHistoryTable].offsets;
  const auto& candidates = batch.tables[kNextItemCandidateTable].offsets;
  const std::string max_len_key = "model." + kind + "_max_len";
  for (int b = 0; b < B; ++b) {
    const int32_t L = history[b + 1] - history[b], C = candidates[b + 1] - candidates[b];
    if (L > max_len)
      throw Error(model + ": sample " + std::to_string(b) + " has a history of " + std::to_string(L) +
                      " items, more than " + max_len_key + " = " + std::to_string(max_len),
                  "set " + max_len_key + " >= data.max_seq_len, or data.max_seq_len (> 0) to at most " +
                      std::to_string(max_len));
    if (training && C != 2 * L)
      throw Error(model + ": training sample " + std::to_string(b) + " has " + std::to_string(C) +
                      " candidates for a history of " + std::to_string(L) + " items; training needs 2 * " +
                      std::to_string(L) + " = " + std::to_string(2 * L),
                  "give the candidates table [pos_0, neg_0, pos_1, neg_1, ...], a positive and a negative "
                  "per history position (data.sequence_task = next_item)");
  }
}

void embed_history(const data::SparseBags& history, int batch_size, const float* item_rows,
                   const float* positions, int D, std::vector<int32_t>& token_position, std::vector<float>& x) {
  const int N = history.offsets[size_t(batch_size)];
  const float item_scale = std::sqrt(float(D));
  token_position.resize(size_t(N));
  x.resize(size_t(N) * D);
  for (int b = 0; b < batch_size; ++b) {
    const int32_t first = history.offsets[b], last = history.offsets[b + 1];
    for (int32_t t = first; t < last; ++t) {
      token_position[t] = last - 1 - t;
      const float* e = item_rows + size_t(history.index[t]) * D;
      const float* p = positions + size_t(token_position[t]) * D;
      float* xt = &x[size_t(t) * D];
      for (int d = 0; d < D; ++d) xt[d] = item_scale * e[d] + p[d];
    }
  }
}

void embed_history_backward(const data::SparseBags& history, const std::vector<int32_t>& token_position,
                            const float* dx, int D, int max_len, float* position_grads, float* history_grads) {
  std::fill_n(position_grads, size_t(max_len) * D, 0.0f);
  std::fill_n(history_grads, history.unique_keys.size() * D, 0.0f);
  const float item_scale = std::sqrt(float(D));
  for (size_t t = 0; t < token_position.size(); ++t) {
    const float* g = dx + t * D;
    float* row = history_grads + size_t(history.index[t]) * D;
    float* p = position_grads + size_t(token_position[t]) * D;
    for (int d = 0; d < D; ++d) {
      row[d] += item_scale * g[d];
      p[d] += g[d];
    }
  }
}

double next_item_pair_loss(const data::Batch& batch, const float* h_all, int D, const float* out_rows,
                           float* out_grads, float loss_scale, std::vector<float>& dh_all) {
  const data::SparseBags& candidates = batch.tables[kNextItemCandidateTable];
  const auto& history = batch.tables[kNextItemHistoryTable].offsets;
  const size_t out_rows_count = batch.tables[size_t(data::keys_table(batch, kNextItemCandidateTable))].unique_keys.size();
  if (out_rows_count != 0) std::fill_n(out_grads, out_rows_count * D, 0.0f);
  // Token t of sample b scores its (pos, neg) pair at candidates[2 (t - first_b)].
  dh_all.assign(size_t(history[size_t(batch.size)]) * D, 0.0f);
  double loss = 0.0;
  for (int b = 0; b < batch.size; ++b) {
    double sample_loss = 0.0;
    for (int32_t t = history[b]; t < history[b + 1]; ++t) {
      const float* h = h_all + size_t(t) * D;
      float* dh = &dh_all[size_t(t) * D];
      const int32_t c = candidates.offsets[b] + 2 * (t - history[b]);
      for (int k = 0; k < 2; ++k) {
        const bool positive = k == 0;
        const int32_t row = candidates.index[c + k];
        const float* e = out_rows + size_t(row) * D;
        const float s = dot(h, e, D);
        sample_loss += softplus(positive ? -double(s) : double(s));
        // d softplus(-s)/ds = -sigmoid(-s); d softplus(s)/ds = sigmoid(s).
        const float ds = loss_scale * (positive ? -sigmoid(-s) : sigmoid(s));
        float* de = out_grads + size_t(row) * D;
        for (int d = 0; d < D; ++d) {
          dh[d] += ds * e[d];
          de[d] += ds * h[d];
        }
      }
    }
    loss += sample_loss;
  }
  return loss;
}

void next_item_scores(const data::Batch& batch, const float* h, int D, const float* out_rows,
                      std::vector<float>& scores) {
  const auto& history = batch.tables[kNextItemHistoryTable].offsets;
  const data::SparseBags& candidates = batch.tables[kNextItemCandidateTable];
  scores.resize(candidates.index.size());
  for (int b = 0; b < batch.size; ++b) {
    const int32_t first = candidates.offsets[b], last = candidates.offsets[b + 1];
    if (history[b + 1] == history[b]) {
      std::fill(scores.begin() + first, scores.begin() + last, 0.0f);
      continue;
    }
    const float* last_state = h + size_t(history[b + 1] - 1) * D;
    for (int32_t c = first; c < last; ++c) scores[c] = dot(last_state, out_rows + size_t(candidates.index[c]) * D, D);
  }
}

void next_item_first_probabilities(const data::Batch& batch, const std::vector<float>& scores,
                                   const std::string& model, float* probs) {
  const auto& offsets = batch.tables[kNextItemCandidateTable].offsets;
  for (int b = 0; b < batch.size; ++b) {
    if (offsets[b + 1] == offsets[b])
      throw Error(model + ": sample " + std::to_string(b) + " has no candidates to score",
                  "give every evaluation sample its target item first in the candidates table");
    probs[b] = sigmoid(scores[size_t(offsets[b])]);
  }
}

}  // namespace strata::model
