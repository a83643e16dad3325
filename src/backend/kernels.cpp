// The neutral kernel interface: device selection (runtime.device) and the
// forwarding of every kernel-family call to the selected backend's table.
#include <Kokkos_Core.hpp>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "backend/device.hpp"
#include "backend/host/attention.hpp"
#include "backend/host/blas_kernels.hpp"
#include "backend/host/host_kernels.hpp"
#include "backend/host/host_row_gather.hpp"
#include "backend/host/host_sparse_optimizer.hpp"
#include "backend/impl/kernel_table.hpp"
#include "common/error.hpp"
#include "strata/config.hpp"
#if STRATA_HAVE_CUDA
#include "backend/cuda/device_query.hpp"
#endif

namespace strata::backend {

namespace impl {

namespace {

void host_gather_i32(const float* arena, int width, const int32_t* slots, size_t n, int dim, float* out) {
  host::gather_rows(arena, width, slots, n, dim, out);
}
void host_gather_i64(const float* arena, int width, const int64_t* slots, size_t n, int dim, float* out) {
  host::gather_rows(arena, width, slots, n, dim, out);
}

const DenseKernelTable kHostDenseTable{
    &host::gemm,
    &host::bias_activation_forward,
    &host::bias_activation_backward,
    &host::dot_interaction_packed_size,
    &host::dot_interaction_scratch_size,
    &host::dot_interaction_forward,
    &host::dot_interaction_backward,
    &host::bce_with_logits,
    &host::sigmoid,
    &host::attention_scratch_bytes,
    &host::causal_attention_forward,
    &host::causal_attention_backward,
    &host::hstu_attention_forward,
    &host::hstu_attention_backward,
    &host::hstu_attention_bias_backward,
};

const KernelTable kHostTable{
    "host",
    &kHostDenseTable,
    &host::embedding_bag_forward,
    &host::embedding_bag_backward,
    &host_gather_i32,
    &host_gather_i64,
    &host::scatter_add_rows,
    &host::sparse_optimizer_step,
    &host::scatter_sparse_optimizer_step,
};

std::atomic<const KernelTable*> active_table{&kHostTable};
std::atomic<Device> active{Device::kHost};

}  // namespace

const KernelTable& host_kernel_table() { return kHostTable; }
const DenseKernelTable& host_dense_kernel_table() { return kHostDenseTable; }
const KernelTable& active_kernel_table() { return *active_table.load(std::memory_order_relaxed); }

}  // namespace impl

Device parse_device(const std::string& name) {
  if (name == "host") return Device::kHost;
  if (name == "cuda") return Device::kCuda;
  throw Error("bad value '" + name + "' for runtime.device", "set runtime.device to host or cuda");
}

const char* device_name(Device device) { return device == Device::kCuda ? "cuda" : "host"; }

bool cuda_built() { return STRATA_HAVE_CUDA != 0; }

std::string cuda_unavailable_reason() {
#if STRATA_HAVE_CUDA
  const auto query = cuda::query_devices();
  if (!query.error.empty()) return query.error;
  if (query.devices.empty()) return "no CUDA device found";
  return {};
#else
  return "this strata was built without the CUDA backend (STRATA_ENABLE_CUDA=OFF or no nvcc at configure time)";
#endif
}

void select_device(Device device) {
  if (device == Device::kCuda) {
    const std::string why = cuda_unavailable_reason();
    if (!why.empty())
      throw Error("runtime.device = cuda cannot run here: " + why,
                  cuda_built() ? "run on a machine with a GPU (strata device lists them), or set runtime.device = host"
                               : "rebuild with -DSTRATA_ENABLE_CUDA=ON where nvcc is installed, or set "
                                 "runtime.device = host");
#if STRATA_HAVE_CUDA
    impl::active_table.store(&impl::cuda_kernel_table());
#endif
  } else {
    impl::active_table.store(&impl::host_kernel_table());
  }
  impl::active.store(device);
}

Device active_device() { return impl::active.load(); }

std::vector<size_t> gpu_free_bytes() {
  std::vector<size_t> free;
#if STRATA_HAVE_CUDA
  for (const auto& device : cuda::query_devices().devices) free.push_back(device.free_bytes);
#endif
  return free;
}

std::string hbm_budget_problem(double l1_mb, int trainers_on_node, const std::vector<size_t>& free_bytes) {
  if (free_bytes.empty() || trainers_on_node < 1) return {};
  const size_t gpus = free_bytes.size();
  const int per_gpu = int((size_t(trainers_on_node) + gpus - 1) / gpus);
  const size_t smallest = *std::min_element(free_bytes.begin(), free_bytes.end());
  const double need_mib = double(per_gpu) * l1_mb, free_mib = double(smallest) / 1048576.0;
  if (need_mib <= free_mib) return {};
  char text[320];
  std::snprintf(text, sizeof(text),
                "store.l1_mb = %.6g MiB x %d trainer(s) per GPU (%d trainers on %zu GPU(s) of this node) is %.6g MiB "
                "of HBM, but a GPU has %.6g MiB free",
                l1_mb, per_gpu, trainers_on_node, gpus, need_mib, free_mib);
  return text;
}

void prepare_process(char** argv) { host::ensure_tuned_blas_kernels(argv); }

int choose_host_blas_threads(int requested, bool environment_sets_threads, int cores, int ranks_on_node) {
  if (requested > 0) return requested;
  if (environment_sets_threads) return 0;
  return std::max(1, std::max(cores, 1) / std::max(ranks_on_node, 1));
}

int configure_host_blas_threads(int requested, int ranks_on_node) {
  const auto set_in_environment = [](const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr && *value != '\0';
  };
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  const int cores = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  const int threads = choose_host_blas_threads(
      requested, set_in_environment("OPENBLAS_NUM_THREADS") || set_in_environment("OMP_NUM_THREADS"), cores,
      ranks_on_node);
  if (threads > 0) host::set_blas_threads(threads);
  return host::blas_threads();
}

int host_blas_threads() { return host::blas_threads(); }

void initialize_runtime(int& argc, char** argv) {
  Kokkos::InitArguments arguments;
  arguments.disable_warnings = true;
  (void)argc, (void)argv;  // Kokkos takes its settings from the environment (KOKKOS_*), not strata's flags
  Kokkos::initialize(arguments);
}

void finalize_runtime() { Kokkos::finalize(); }

// ---- forwarding ----------------------------------------------------------------------

void embedding_bag_forward(int batch, int dim, const int32_t* offsets, const int32_t* index, const float* rows,
                           PoolingMode mode, float* pooled, PooledLayout layout) {
  impl::active_kernel_table().embedding_bag_forward(batch, dim, offsets, index, rows, mode, pooled, layout);
}

void embedding_bag_backward(int batch, int dim, int num_unique, const int32_t* offsets, const int32_t* index,
                            const float* dpooled, PooledLayout layout, PoolingMode mode, float* row_grads,
                            RowGatherScratch& scratch, RowGradAlgorithm algorithm) {
  impl::active_kernel_table().embedding_bag_backward(batch, dim, num_unique, offsets, index, dpooled, layout, mode,
                                                     row_grads, scratch, algorithm);
}

namespace {
const impl::DenseKernelTable& dense() { return *impl::active_kernel_table().dense; }
}  // namespace

void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, const float* b, float beta,
          float* c) {
  dense().gemm(trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
}
void bias_activation_forward(int rows, int cols, const float* bias, Activation act, float* y) {
  dense().bias_activation_forward(rows, cols, bias, act, y);
}
void bias_activation_backward(int rows, int cols, const float* y, Activation act, float* dy, float* dbias) {
  dense().bias_activation_backward(rows, cols, y, act, dy, dbias);
}
size_t dot_interaction_packed_size(int batch, int num_features, int dim) {
  return dense().dot_interaction_packed_size(batch, num_features, dim);
}
size_t dot_interaction_scratch_size(int num_features, int dim) {
  return dense().dot_interaction_scratch_size(num_features, dim);
}
void dot_interaction_forward(int batch, int num_features, int dim, const float* const* features, float* packed,
                             float* out) {
  dense().dot_interaction_forward(batch, num_features, dim, features, packed, out);
}
void dot_interaction_backward(int batch, int num_features, int dim, const float* packed, const float* dout,
                              float* scratch, float* const* dfeatures) {
  dense().dot_interaction_backward(batch, num_features, dim, packed, dout, scratch, dfeatures);
}
void bce_with_logits(int batch, const float* logits, const float* labels, float scale, double* losses,
                     float* dlogits) {
  dense().bce_with_logits(batch, logits, labels, scale, losses, dlogits);
}
void sigmoid(int n, const float* logits, float* probs) { dense().sigmoid(n, logits, probs); }

size_t attention_scratch_bytes(AttentionKind kind, int dim, int max_len, const AttentionOptions& options) {
  return dense().attention_scratch_bytes(kind, dim, max_len, options);
}
void causal_attention_forward(const JaggedAttentionShape& shape, const float* q, const float* k, const float* v,
                              float* out, float* lse, AttentionScratch& scratch, const AttentionOptions& options) {
  dense().causal_attention_forward(shape, q, k, v, out, lse, scratch, options);
}
void causal_attention_backward(const JaggedAttentionShape& shape, const float* q, const float* k, const float* v,
                               const float* out, const float* lse, const float* dout, float* dq, float* dk,
                               float* dv, AttentionScratch& scratch, const AttentionOptions& options) {
  dense().causal_attention_backward(shape, q, k, v, out, lse, dout, dq, dk, dv, scratch, options);
}
void hstu_attention_forward(const JaggedAttentionShape& shape, const float* q, const float* k, const float* v,
                            const float* bias, int num_buckets, float* out, AttentionScratch& scratch,
                            const AttentionOptions& options) {
  dense().hstu_attention_forward(shape, q, k, v, bias, num_buckets, out, scratch, options);
}
void hstu_attention_backward(const JaggedAttentionShape& shape, const float* q, const float* k, const float* v,
                             const float* bias, int num_buckets, const float* dout, float* dq, float* dk, float* dv,
                             float* dbias, AttentionScratch& scratch, const AttentionOptions& options) {
  dense().hstu_attention_backward(shape, q, k, v, bias, num_buckets, dout, dq, dk, dv, dbias, scratch, options);
}
void hstu_attention_bias_backward(const JaggedAttentionShape& shape, const float* q, const float* k, const float* v,
                                  const float* bias, int num_buckets, const float* dout, float* dbias,
                                  AttentionScratch& scratch, const AttentionOptions& options) {
  dense().hstu_attention_bias_backward(shape, q, k, v, bias, num_buckets, dout, dbias, scratch, options);
}

void gather_rows(const float* arena, int width, const int32_t* slots, size_t n, int dim, float* out) {
  impl::active_kernel_table().gather_rows_i32(arena, width, slots, n, dim, out);
}
void gather_rows(const float* arena, int width, const int64_t* slots, size_t n, int dim, float* out) {
  impl::active_kernel_table().gather_rows_i64(arena, width, slots, n, dim, out);
}
void scatter_add_rows(float* arena, int width, const int64_t* slots, size_t n, int dim, const float* grads) {
  impl::active_kernel_table().scatter_add_rows(arena, width, slots, n, dim, grads);
}

int sparse_optimizer_state_width(SparseOptimizerKind kind, int dim) {
  switch (kind) {
    case SparseOptimizerKind::kAdagrad: return dim;
    case SparseOptimizerKind::kAdam: return 2 * dim + 2;
    default: return 0;
  }
}

void sparse_optimizer_apply_row(const SparseOptimizerParams& p, float* values, float* state, const float* grad,
                                int dim) {
  host::sparse_optimizer_apply_row(p, values, state, grad, dim);
}

void sparse_optimizer_step(const SparseOptimizerParams& p, float* arena, int width, const int32_t* slots, size_t n,
                           int dim, const float* grads) {
  impl::active_kernel_table().sparse_optimizer_step(p, arena, width, slots, n, dim, grads);
}

void scatter_sparse_optimizer_step(const SparseOptimizerParams& p, float* arena, int width, const int32_t* slots,
                                   size_t n, int dim, const float* grads, ScatterOptimizerScratch& scratch) {
  impl::active_kernel_table().scatter_sparse_optimizer_step(p, arena, width, slots, n, dim, grads, scratch);
}

}  // namespace strata::backend
