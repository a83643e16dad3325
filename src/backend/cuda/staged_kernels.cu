// The CUDA backend behind the neutral interface (runtime.device = cuda). The
// engine's buffers are still host memory (the L1 arena included), so each call
// here stages its operands: host -> device, the kernel of kernels.hpp, device ->
// host, on one stream, synchronously. That is slow (three copies per call) and
// exists to run a whole job on the CUDA kernels and compare its digests with the
// host's; moving the arena and the batch buffers to HBM removes the copies.
// Rows of an arena are packed on the host first (only the touched rows travel),
// so the staged gather is the host's gather.
#include <cublas_v2.h>
#include <dlfcn.h>

#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/kernels.hpp"
#include "backend/host/host_row_gather.hpp"
#include "backend/impl/kernel_table.hpp"

namespace strata::backend::impl {

namespace {

// cuBLAS, opened on the first GEMM: linked, it would cost every process (GPU
// or not) about 200 MiB of resident memory and 70 ms at start.
struct Cublas {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
};

const Cublas& cublas() {
  static const Cublas api = [] {
    void* lib = nullptr;
    for (const char* name : {"libcublas.so", "libcublas.so.13", "libcublas.so.12"}) {
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    }
    if (!lib) {
      throw Error("runtime.device = cuda needs cuBLAS for the dense network, and libcublas.so cannot be opened",
                  "install the CUDA toolkit's cuBLAS (or add its folder to LD_LIBRARY_PATH), or set "
                  "runtime.device = host");
    }
    Cublas c;
    auto symbol = [lib](const char* name) {
      void* f = dlsym(lib, name);
      if (!f) throw Error(std::string("libcublas.so lacks ") + name, "install a CUDA 12 or newer cuBLAS");
      return f;
    };
    c.create = reinterpret_cast<decltype(c.create)>(symbol("cublasCreate_v2"));
    c.destroy = reinterpret_cast<decltype(c.destroy)>(symbol("cublasDestroy_v2"));
    c.set_stream = reinterpret_cast<decltype(c.set_stream)>(symbol("cublasSetStream_v2"));
    c.set_math_mode = reinterpret_cast<decltype(c.set_math_mode)>(symbol("cublasSetMathMode"));
    c.sgemm = reinterpret_cast<decltype(c.sgemm)>(symbol("cublasSgemm_v2"));
    return c;
  }();
  return api;
}

// Per thread: each role runs its kernels from one thread.
struct Staging {
  cudaStream_t stream = nullptr;
  cuda::DeviceBuffer<int32_t> i32a, i32b;
  cuda::DeviceBuffer<float> fa, fb;
  cuda::EmbeddingBagBackwardScratch backward;
  cuda::ScatterOptimizerDeviceScratch scatter;
  cuda::DeviceBuffer<float> fc;  // the GEMM's third operand
  cublasHandle_t blas = nullptr;
  std::vector<float> packed;   // (rows, width) host
  std::vector<int32_t> local;  // (n) slots into the packed rows
  Staging() { cuda::check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"); }
  ~Staging() {
    if (blas) cublas().destroy(blas);
    cudaStreamDestroy(stream);
  }
  // Created on the first GEMM: the other kernels need no cuBLAS context.
  cublasHandle_t gemm_handle() {
    if (!blas) {
      check_blas(cublas().create(&blas), "cublasCreate");
      check_blas(cublas().set_stream(blas, stream), "cublasSetStream");
      // No TF32 and no reduced-precision reductions: full FP32 products, so the
      // result differs from the host's BLAS only in summation order.
      check_blas(cublas().set_math_mode(blas, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
    }
    return blas;
  }
  static void check_blas(cublasStatus_t status, const char* what) {
    if (status != CUBLAS_STATUS_SUCCESS) {
      throw Error(std::string(what) + " failed: cuBLAS status " + std::to_string(int(status)),
                  "check the GPU and the CUDA installation (strata device), or set runtime.device = host");
    }
  }
};

Staging& staging() {
  thread_local Staging s;
  return s;
}

template <class T>
T* to_device(cuda::DeviceBuffer<T>& d, const T* host, size_t n, cudaStream_t stream) {
  T* p = d.reserve(n);
  if (n) cuda::check(cudaMemcpyAsync(p, host, n * sizeof(T), cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync H2D");
  return p;
}
template <class T>
void to_host(T* host, const T* device, size_t n, cudaStream_t stream) {
  if (n) cuda::check(cudaMemcpyAsync(host, device, n * sizeof(T), cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync D2H");
  cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

// Only the samples' extent of a pooled layout travels: the layouts the engine uses
// are dense (sample- or feature-major), (batch * dim) floats.
size_t pooled_floats(int batch, int dim) { return size_t(batch) * size_t(dim); }

void staged_forward(int batch, int dim, const int32_t* offsets, const int32_t* index, const float* rows,
                    PoolingMode mode, float* pooled, PooledLayout layout) {
  if (batch <= 0 || dim <= 0) return;
  Staging& s = staging();
  const int32_t nnz = offsets[batch];
  int32_t num_rows = 0;
  for (int32_t k = 0; k < nnz; ++k) num_rows = std::max(num_rows, index[k] + 1);
  const int32_t* d_off = to_device(s.i32a, offsets, size_t(batch) + 1, s.stream);
  const int32_t* d_idx = to_device(s.i32b, index, nnz, s.stream);
  const float* d_rows = to_device(s.fa, rows, size_t(num_rows) * dim, s.stream);
  float* d_pooled = s.fb.reserve(pooled_floats(batch, dim));
  cuda::embedding_bag_forward(s.stream, batch, dim, d_off, d_idx, d_rows, mode, d_pooled, layout);
  to_host(pooled, d_pooled, pooled_floats(batch, dim), s.stream);
}

void staged_backward(int batch, int dim, int num_unique, const int32_t* offsets, const int32_t* index,
                     const float* dpooled, PooledLayout layout, PoolingMode mode, float* row_grads,
                     RowGatherScratch&, RowGradAlgorithm) {
  if (num_unique <= 0 || dim <= 0) return;
  Staging& s = staging();
  const int32_t nnz = batch > 0 ? offsets[batch] : 0;
  const int32_t* d_off = to_device(s.i32a, offsets, size_t(std::max(batch, 0)) + 1, s.stream);
  const int32_t* d_idx = to_device(s.i32b, index, nnz, s.stream);
  const float* d_dp = to_device(s.fa, dpooled, pooled_floats(std::max(batch, 0), dim), s.stream);
  float* d_grads = s.fb.reserve(size_t(num_unique) * dim);
  cuda::embedding_bag_backward(s.stream, batch, dim, num_unique, nnz, d_off, d_idx, d_dp, layout, mode, d_grads,
                               s.backward);
  to_host(row_grads, d_grads, size_t(num_unique) * dim, s.stream);
}

// Row-major c (m, n) = alpha op(a) op(b) + beta c through cuBLAS (column-major):
// the same memory read column-major is c^T = op(b)^T op(a)^T. Not bit-identical
// to the host's BLAS (another summation order); within FP32 rounding of it.
void staged_gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, const float* b,
                 float beta, float* c) {
  if (m <= 0 || n <= 0) return;
  const size_t c_floats = size_t(m) * size_t(n);
  if (k <= 0) {  // the host's contract: c = beta * c (BLAS would leave c alone)
    for (size_t i = 0; i < c_floats; ++i) c[i] = beta == 0.0f ? 0.0f : beta * c[i];
    return;
  }
  Staging& s = staging();
  const float* d_a = to_device(s.fa, a, size_t(m) * size_t(k), s.stream);
  const float* d_b = to_device(s.fb, b, size_t(k) * size_t(n), s.stream);
  float* d_c = beta == 0.0f ? s.fc.reserve(c_floats) : to_device(s.fc, c, c_floats, s.stream);
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int lda = trans_a ? m : k;  // a is (m, k) row-major, or (k, m) when trans_a
  const int ldb = trans_b ? k : n;  // b is (k, n) row-major, or (n, k) when trans_b
  Staging::check_blas(cublas().sgemm(s.gemm_handle(), op_b, op_a, n, m, k, &alpha, d_b, ldb, d_a, lda, &beta, d_c, n),
                      "cublasSgemm");
  to_host(c, d_c, c_floats, s.stream);
}

// The CUDA table's dense network: cuBLAS for GEMM, the host for the rest until
// its kernels land (issue 16).
DenseKernelTable cuda_dense_table() {
  DenseKernelTable table = host_dense_kernel_table();
  table.gemm = &staged_gemm;
  return table;
}
const DenseKernelTable kCudaDenseTable = cuda_dense_table();

void staged_gather_i32(const float* arena, int width, const int32_t* slots, size_t n, int dim, float* out) {
  host::gather_rows(arena, width, slots, n, dim, out);
}
void staged_gather_i64(const float* arena, int width, const int64_t* slots, size_t n, int dim, float* out) {
  host::gather_rows(arena, width, slots, n, dim, out);
}

// The rows of `slots` packed (n, width), their local slots 0..n-1.
void pack_rows(Staging& s, const float* arena, int width, const int32_t* slots, size_t n) {
  s.packed.resize(n * width);
  s.local.resize(n);
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(s.packed.data() + i * width, arena + size_t(slots[i]) * width, sizeof(float) * width);
    s.local[i] = int32_t(i);
  }
}
void unpack_rows(const Staging& s, float* arena, int width, const int32_t* slots, size_t n) {
  for (size_t i = 0; i < n; ++i)
    std::memcpy(arena + size_t(slots[i]) * width, s.packed.data() + i * width, sizeof(float) * width);
}

void staged_scatter_add(float* arena, int width, const int64_t* slots, size_t n, int dim, const float* grads) {
  if (n == 0) return;
  Staging& s = staging();
  std::vector<int32_t> slots32(slots, slots + n);
  pack_rows(s, arena, width, slots32.data(), n);
  float* d_rows = to_device(s.fa, s.packed.data(), n * width, s.stream);
  const int32_t* d_local = to_device(s.i32a, s.local.data(), n, s.stream);
  const float* d_grads = to_device(s.fb, grads, n * dim, s.stream);
  cuda::scatter_add_rows(s.stream, d_rows, width, d_local, n, dim, d_grads);
  to_host(s.packed.data(), d_rows, n * width, s.stream);
  unpack_rows(s, arena, width, slots32.data(), n);
}

void staged_step(const SparseOptimizerParams& p, float* arena, int width, const int32_t* slots, size_t n, int dim,
                 const float* grads) {
  if (n == 0) return;
  Staging& s = staging();
  pack_rows(s, arena, width, slots, n);
  float* d_rows = to_device(s.fa, s.packed.data(), n * width, s.stream);
  const int32_t* d_local = to_device(s.i32a, s.local.data(), n, s.stream);
  const float* d_grads = to_device(s.fb, grads, n * dim, s.stream);
  cuda::sparse_optimizer_step(s.stream, p, d_rows, width, d_local, n, dim, d_grads);
  to_host(s.packed.data(), d_rows, n * width, s.stream);
  unpack_rows(s, arena, width, slots, n);
}

void staged_scatter_step(const SparseOptimizerParams& p, float* arena, int width, const int32_t* slots, size_t n,
                         int dim, const float* grads, ScatterOptimizerScratch& scratch) {
  if (n == 0) return;
  Staging& s = staging();
  // Distinct slots in first-occurrence order, and each occurrence's place among them.
  scratch.slots.clear();
  std::vector<int32_t> occurrence_local(n);
  for (size_t k = 0; k < n; ++k) {
    const int32_t slot = slots[k];
    if (size_t(slot) >= scratch.index_of_slot.size()) scratch.index_of_slot.resize(size_t(slot) + 1, -1);
    int32_t& at = scratch.index_of_slot[slot];
    if (at < 0) {
      at = int32_t(scratch.slots.size());
      scratch.slots.push_back(slot);
    }
    occurrence_local[k] = at;
  }
  for (int32_t slot : scratch.slots) scratch.index_of_slot[slot] = -1;
  const size_t distinct = scratch.slots.size();
  pack_rows(s, arena, width, scratch.slots.data(), distinct);
  float* d_rows = to_device(s.fa, s.packed.data(), distinct * width, s.stream);
  const int32_t* d_local = to_device(s.i32a, occurrence_local.data(), n, s.stream);
  const float* d_grads = to_device(s.fb, grads, n * dim, s.stream);
  cuda::scatter_sparse_optimizer_step(s.stream, p, d_rows, width, d_local, n, dim, d_grads, s.scatter);
  to_host(s.packed.data(), d_rows, distinct * width, s.stream);
  unpack_rows(s, arena, width, scratch.slots.data(), distinct);
}

const KernelTable kCudaTable{
    "cuda", &kCudaDenseTable, &staged_forward, &staged_backward, &staged_gather_i32, &staged_gather_i64,
    &staged_scatter_add, &staged_step, &staged_scatter_step,
};

}  // namespace

const KernelTable& cuda_kernel_table() { return kCudaTable; }

}  // namespace strata::backend::impl
