// The next-item models' shared LayerNorm and scoring head (see the header).
#include "model/next_item_head.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"

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

double next_item_pair_loss(const data::Batch& batch, const float* h_all, int D, const float* out_rows,
                           float* out_grads, float loss_scale, std::vector<float>& dh_all) {
  const data::SparseBags& candidates = batch.tables[kNextItemCandidateTable];
  const auto& history = batch.tables[kNextItemHistoryTable].offsets;
  if (!candidates.unique_keys.empty()) std::fill_n(out_grads, candidates.unique_keys.size() * D, 0.0f);
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
