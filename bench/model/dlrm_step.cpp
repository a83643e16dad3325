// bench_dlrm_step: the trainer's compute on its own. Runs strata's DLRM
// forward + backward + dense Adam on the default deck's model (13-64-16
// bottom, 26 tables x dim 16, dot interaction, 367-64-32-1 top) over batches
// of the default synthetic data, with rows already in place (no store, no
// MPI), and reports microseconds per sample and the MLP's FLOP rate. That is
// the floor of a trainer's CPU per sample: everything a training step adds
// (rows, messages, collectives) comes on top.
//
// Usage: bench_dlrm_step [--batches=256,512,1024] [--seconds=2]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "data/batch.hpp"
#include "data/synthetic.hpp"
#include "model/dlrm.hpp"
#include "model/optimizers.hpp"

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<int> parse_list(const char* text) {
  std::vector<int> out;
  for (const char* p = text; *p;) {
    out.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> batches = {256, 512, 1024};
  double seconds = 2.0;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--batches=", 10) == 0) batches = parse_list(argv[i] + 10);
    if (std::strncmp(argv[i], "--seconds=", 10) == 0) seconds = std::atof(argv[i] + 10);
  }
  strata::RunOptions options;  // the defaults are inputs/default.ini's model
  options.data.num_tables = 26;
  options.data.num_dense = 13;
  options.data.vocab_sizes = "100000";
  options.data.zipf_exponent = 1.05;
  strata::data::SyntheticDataset dataset(options.data);
  const int dim = options.model.embedding_dim;
  // MLP FLOPs per sample: 3 GEMMs of 2*in*out per layer (forward, dX, dW).
  const int layers[][2] = {{13, 64}, {64, 16}, {367, 64}, {64, 32}, {32, 1}};
  double mlp_flops = 0;
  for (const auto& l : layers) mlp_flops += 3.0 * 2.0 * l[0] * l[1];
  std::printf("# DLRM forward + backward + Adam on one core, rows in place; MLP %.0f FLOP/sample\n", mlp_flops);
  for (int batch_size : batches) {
    strata::model::Dlrm model(options.model, 13, 26, 1);
    auto optimizer = strata::model::make_dense_optimizer(options.optim, model.parameters().size());
    std::vector<strata::data::Batch> pool(8);
    for (size_t b = 0; b < pool.size(); ++b) {
      pool[b].reset(13, 26);
      dataset.generate(strata::data::Stream::kTrain, int64_t(b) * batch_size, batch_size, pool[b]);
      strata::data::deduplicate(pool[b]);
    }
    std::vector<std::vector<float>> rows(26), grads(26);
    std::vector<const float*> row_ptrs(26);
    std::vector<float*> grad_ptrs(26);
    double loss = 0;
    int64_t steps = 0;
    double start = 0;
    for (int64_t s = 0;; ++s) {
      if (s == 5) start = now_s(), steps = 0;  // warm-up: buffers sized, caches warm
      const strata::data::Batch& batch = pool[s % pool.size()];
      for (int t = 0; t < 26; ++t) {
        rows[t].assign(batch.tables[t].unique_keys.size() * dim, 0.01f);
        grads[t].resize(rows[t].size());
        row_ptrs[t] = rows[t].data();
        grad_ptrs[t] = grads[t].data();
      }
      loss += model.forward_backward(batch, row_ptrs, grad_ptrs, 1.0f / batch_size);
      auto& p = model.parameters();
      optimizer->step(p.values().data(), p.grads().data(), p.size());
      ++steps;
      if (s >= 5 && now_s() - start > seconds) break;
    }
    const double elapsed = now_s() - start;
    const double us_per_sample = 1e6 * elapsed / (double(steps) * batch_size);
    std::printf("batch %5d: %7.3f us/sample (%.0f samples/s on one core), MLP at %.1f GFLOP/s (loss %.3f)\n",
                batch_size, us_per_sample, 1e6 / us_per_sample, mlp_flops / us_per_sample * 1e-3,
                loss / double(steps + 5));
  }
  return 0;
}
