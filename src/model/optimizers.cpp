// Dense and sparse optimizers: the dense ones are plain element-wise loops (they run
// on the host over a few tens of thousands of dense weights); the sparse ones hand
// their rows to the backend's sparse-optimizer kernels.
#include "model/optimizers.hpp"

#include <algorithm>
#include <cmath>

#include "backend/sparse_optimizer_kernels.hpp"
#include "common/error.hpp"

namespace strata::model {

namespace {

void check_state_size(const char* name, size_t got, size_t want) {
  if (got != want)
    throw Error(std::string(name) + " optimizer state has " + std::to_string(got) + " values, expected " +
                    std::to_string(want),
                "restore the state saved by an optimizer of the same kind and model size");
}

class DenseSgd final : public DenseOptimizer {
 public:
  DenseSgd(float lr, size_t n) : lr_(lr), n_(n) {}
  void step(float* w, const float* g, size_t n) override {
    check_state_size("sgd", n, n_);
    for (size_t i = 0; i < n; ++i) w[i] -= lr_ * g[i];
    ++steps_;
  }
  std::vector<float> state() const override { return {}; }
  void set_state(const std::vector<float>& s) override { check_state_size("sgd", s.size(), 0); }
  int64_t steps_taken() const override { return steps_; }
  void set_steps_taken(int64_t steps) override { steps_ = steps; }
  const char* name() const override { return "sgd"; }

 private:
  float lr_;
  size_t n_;
  int64_t steps_ = 0;
};

class DenseAdagrad final : public DenseOptimizer {
 public:
  DenseAdagrad(float lr, float eps, float init, size_t n) : lr_(lr), eps_(eps), acc_(n, init) {}
  void step(float* w, const float* g, size_t n) override {
    check_state_size("adagrad", n, acc_.size());
    float* a = acc_.data();
    for (size_t i = 0; i < n; ++i) {
      a[i] += g[i] * g[i];
      w[i] -= lr_ * g[i] / (std::sqrt(a[i]) + eps_);
    }
    ++steps_;
  }
  std::vector<float> state() const override { return acc_; }
  void set_state(const std::vector<float>& s) override {
    check_state_size("adagrad", s.size(), acc_.size());
    acc_ = s;
  }
  int64_t steps_taken() const override { return steps_; }
  void set_steps_taken(int64_t steps) override { steps_ = steps; }
  const char* name() const override { return "adagrad"; }

 private:
  float lr_, eps_;
  std::vector<float> acc_;  // (n)
  int64_t steps_ = 0;
};

class DenseAdam final : public DenseOptimizer {
 public:
  DenseAdam(const OptimizerOptions& o, size_t n)
      : lr_(o.dense_lr), beta1_(o.beta1), beta2_(o.beta2), eps_(o.eps), m_(n, 0.0f), v_(n, 0.0f) {}
  void step(float* w, const float* g, size_t n) override {
    check_state_size("adam", n, m_.size());
    ++steps_;
    const double t = double(steps_);
    const float step_size = float(double(lr_) / (1.0 - std::pow(double(beta1_), t)));
    const float sqrt_bc2 = float(std::sqrt(1.0 - std::pow(double(beta2_), t)));
    const float b1 = beta1_, b2 = beta2_, c1 = 1.0f - beta1_, c2 = 1.0f - beta2_;
    float* m = m_.data();
    float* v = v_.data();
    for (size_t i = 0; i < n; ++i) {
      m[i] = b1 * m[i] + c1 * g[i];
      v[i] = b2 * v[i] + c2 * g[i] * g[i];
      const float denom = std::sqrt(v[i]) / sqrt_bc2 + eps_;
      w[i] -= step_size * m[i] / denom;
    }
  }
  std::vector<float> state() const override {
    std::vector<float> s(m_);
    s.insert(s.end(), v_.begin(), v_.end());
    return s;
  }
  void set_state(const std::vector<float>& s) override {
    check_state_size("adam", s.size(), 2 * m_.size());
    std::copy(s.begin(), s.begin() + m_.size(), m_.begin());
    std::copy(s.begin() + m_.size(), s.end(), v_.begin());
  }
  int64_t steps_taken() const override { return steps_; }
  void set_steps_taken(int64_t steps) override { steps_ = steps; }
  const char* name() const override { return "adam"; }

 private:
  float lr_, beta1_, beta2_, eps_;
  std::vector<float> m_, v_;  // (n) each
  int64_t steps_ = 0;
};

// The sparse optimizers' arithmetic is the backend's (backend/sparse_optimizer_kernels.hpp),
// so that the host and CUDA kernels share one definition of each step.
class SparseSgd final : public SparseOptimizer {
 public:
  explicit SparseSgd(float lr) : params_{backend::SparseOptimizerKind::kSgd, lr, 0.0f} {}
  int state_width(int) const override { return 0; }
  void init_state(float*, int) const override {}
  void apply(float* w, float* a, const float* g, int dim) const override {
    backend::sparse_optimizer_apply_row(params_, w, a, g, dim);
  }
  const backend::SparseOptimizerParams& params() const override { return params_; }
  const char* name() const override { return "sgd"; }

 private:
  backend::SparseOptimizerParams params_;
};

// Element-wise Adagrad: one accumulator per component (state width = dim).
class SparseAdagrad final : public SparseOptimizer {
 public:
  SparseAdagrad(float lr, float eps, float init) : params_{backend::SparseOptimizerKind::kAdagrad, lr, eps}, init_(init) {}
  int state_width(int dim) const override { return dim; }
  void init_state(float* s, int dim) const override {
    for (int i = 0; i < dim; ++i) s[i] = init_;
  }
  void apply(float* w, float* a, const float* g, int dim) const override {
    backend::sparse_optimizer_apply_row(params_, w, a, g, dim);
  }
  const backend::SparseOptimizerParams& params() const override { return params_; }
  const char* name() const override { return "adagrad"; }

 private:
  backend::SparseOptimizerParams params_;
  float init_;
};

// Lazy row-wise Adam: a row steps when it has a gradient, with its own step count
// (kept as b1^t, b2^t at the end of its state; see backend::SparseOptimizerKind).
class SparseAdam final : public SparseOptimizer {
 public:
  SparseAdam(float lr, float eps, float beta1, float beta2)
      : params_{backend::SparseOptimizerKind::kAdam, lr, eps, beta1, beta2} {}
  int state_width(int dim) const override { return backend::sparse_optimizer_state_width(params_.kind, dim); }
  void init_state(float* s, int dim) const override {
    std::fill_n(s, 2 * dim, 0.0f);  // m, v
    s[2 * dim] = 1.0f;              // b1^0
    s[2 * dim + 1] = 1.0f;          // b2^0
  }
  void apply(float* w, float* s, const float* g, int dim) const override {
    backend::sparse_optimizer_apply_row(params_, w, s, g, dim);
  }
  const backend::SparseOptimizerParams& params() const override { return params_; }
  const char* name() const override { return "adam"; }

 private:
  backend::SparseOptimizerParams params_;
};

}  // namespace

std::unique_ptr<DenseOptimizer> make_dense_optimizer(const OptimizerOptions& o, size_t n) {
  if (o.dense == "adam") return std::make_unique<DenseAdam>(o, n);
  if (o.dense == "adagrad") return std::make_unique<DenseAdagrad>(o.dense_lr, o.eps, o.adagrad_init, n);
  if (o.dense == "sgd") return std::make_unique<DenseSgd>(o.dense_lr, n);
  throw Error("unknown optim.dense '" + o.dense + "'", "set optim.dense to one of: adam, adagrad, sgd");
}

std::unique_ptr<SparseOptimizer> make_sparse_optimizer(const OptimizerOptions& o) {
  if (o.sparse == "adagrad") return std::make_unique<SparseAdagrad>(o.sparse_lr, o.eps, o.adagrad_init);
  if (o.sparse == "sgd") return std::make_unique<SparseSgd>(o.sparse_lr);
  if (o.sparse == "adam") return std::make_unique<SparseAdam>(o.sparse_lr, o.eps, o.beta1, o.beta2);
  throw Error("unknown optim.sparse '" + o.sparse + "'", "set optim.sparse to one of: adagrad, sgd, adam");
}

}  // namespace strata::model
