// Linear layer: GEMMs for all three products, bias + activation fused in one pass.
#include "model/linear.hpp"

#include <cmath>

#include "common/error.hpp"
#include "common/rng.hpp"

namespace strata::model {


namespace {
constexpr uint64_t kDenseInitStream = 0x64656e7365696e69ULL;  // "denseini"
}

Linear::Linear(DenseParameters& params, const std::string& name, int in, int out, Activation act)
    : in_(in), out_(out), act_(act) {
  if (in <= 0 || out <= 0)
    throw Error("layer '" + name + "' has width " + std::to_string(in) + " -> " + std::to_string(out),
                "every layer width must be positive");
  weight_ = params.add(name + ".weight", {out, in});
  bias_ = params.add(name + ".bias", {out});
}

void Linear::init(DenseParameters& params, uint64_t seed) const {
  const float limit = float(std::sqrt(6.0 / double(in_ + out_)));
  float* w = params.values(weight_);
  const size_t n = size_t(in_) * out_;
  for (size_t i = 0; i < n; ++i) {
    const float u = to_unit_float(mix64(seed, kDenseInitStream, uint64_t(weight_ + i)));
    w[i] = (2.0f * u - 1.0f) * limit;
  }
  float* b = params.values(bias_);
  for (int i = 0; i < out_; ++i) b[i] = 0.0f;
}

void Linear::forward(const DenseParameters& params, const float* x, int batch, float* y) const {
  const float* w = params.values().data() + weight_;
  const float* b = params.values().data() + bias_;
  backend::gemm(false, true, batch, out_, in_, 1.0f, x, w, 0.0f, y);  // (B, in) (out, in)^T
  backend::bias_activation_forward(batch, out_, b, act_, y);
}

void Linear::backward(DenseParameters& params, const float* x, const float* y, float* dy,
                      int batch, float* dx) const {
  backend::bias_activation_backward(batch, out_, y, act_, dy, params.grads(bias_));
  backend::gemm(true, false, out_, in_, batch, 1.0f, dy, x, 0.0f, params.grads(weight_));  // dY^T X
  if (dx != nullptr) {
    const float* w = params.values().data() + weight_;
    backend::gemm(false, false, batch, in_, out_, 1.0f, dy, w, 0.0f, dx);  // dY W
  }
}

}  // namespace strata::model
