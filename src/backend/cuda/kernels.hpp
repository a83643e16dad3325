// The CUDA backend's kernels on device memory (every pointer below is a device
// pointer), one .cu per family: embedding_bag.cu, row_gather.cu,
// sparse_optimizer.cu, hash_table.cu. Each has the host kernel of the same
// family as its reference (tests/backend/cuda_kernels_test.cu):
//   bit-identical:  gather/scatter-add of rows, embedding-bag forward and
//                   backward (sum and mean), SGD and Adagrad steps, the fused
//                   scatter + optimizer step. Every sum runs in the host's order
//                   from zero, one thread per output element, with __fadd_rn /
//                   __fmul_rn / __fdiv_rn / __fsqrt_rn so that nvcc contracts
//                   nothing into a fused multiply-add.
//   within a tolerance: none yet (the dense network stays on the host).
// staged_kernels.cu puts them behind the neutral interface for host pointers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/cuda_check.hpp"
#include "backend/embedding_kernels.hpp"
#include "backend/sparse_optimizer_kernels.hpp"

namespace strata::cuda {

using backend::PooledLayout;
using backend::PoolingMode;
using backend::SparseOptimizerParams;

// ---- embedding-bag pooling (embedding_bag.cu) ----------------------------------------
// As backend::embedding_bag_forward; offsets (batch + 1), index (nnz), rows (num_unique, dim).
void embedding_bag_forward(cudaStream_t stream, int batch, int dim, const int32_t* offsets, const int32_t* index,
                           const float* rows, PoolingMode mode, float* pooled, PooledLayout layout);

// Scratch of the backward: occurrences sorted by row (a stable radix sort keeps
// them in sample order within a row), their bags and the rows' CSR starts.
struct EmbeddingBagBackwardScratch {
  DeviceBuffer<int32_t> iota, keys_sorted, occurrence, bag_of, row_start;  // (nnz) ... (num_unique + 1)
  DeviceBuffer<unsigned char> sort_temp;
};

// As backend::embedding_bag_backward; nnz = offsets[batch] (known to the caller).
void embedding_bag_backward(cudaStream_t stream, int batch, int dim, int num_unique, int nnz, const int32_t* offsets,
                            const int32_t* index, const float* dpooled, PooledLayout layout, PoolingMode mode,
                            float* row_grads, EmbeddingBagBackwardScratch& scratch);

// ---- rows of an arena (row_gather.cu) ----------------------------------------------
// out (n, dim) <- arena rows slots[i] (width floats apart); scatter: arena rows += grads (n, dim), slots distinct.
void gather_rows(cudaStream_t stream, const float* arena, int width, const int32_t* slots, size_t n, int dim,
                 float* out);
void gather_rows(cudaStream_t stream, const float* arena, int width, const int64_t* slots, size_t n, int dim,
                 float* out);
void scatter_add_rows(cudaStream_t stream, float* arena, int width, const int64_t* slots, size_t n, int dim,
                      const float* grads);
void scatter_add_rows(cudaStream_t stream, float* arena, int width, const int32_t* slots, size_t n, int dim,
                      const float* grads);
// Staged rows into their slots: arena rows slots[i] (all width floats) <- rows (n, width).
void scatter_copy_rows(cudaStream_t stream, float* arena, int width, const int32_t* slots, size_t n,
                       const float* rows);

// ---- sparse optimizers (sparse_optimizer.cu) -----------------------------------------
// As backend::sparse_optimizer_step: slots (n) distinct, grads (n, dim).
void sparse_optimizer_step(cudaStream_t stream, const SparseOptimizerParams& p, float* arena, int width,
                           const int32_t* slots, size_t n, int dim, const float* grads);

struct ScatterOptimizerDeviceScratch {
  DeviceBuffer<int32_t> iota, keys_sorted, order, unique_slots, counts, starts, num_unique;
  DeviceBuffer<unsigned char> temp;
};
// As backend::scatter_sparse_optimizer_step: slots (n) may repeat; each distinct
// slot sums its occurrences in occurrence order from zero, then takes one step.
void scatter_sparse_optimizer_step(cudaStream_t stream, const SparseOptimizerParams& p, float* arena, int width,
                                   const int32_t* slots, size_t n, int dim, const float* grads,
                                   ScatterOptimizerDeviceScratch& scratch);

// ---- L1 on the device: key -> slot (hash_table.cu) -----------------------------------
// Open addressing over buckets of kBucketSlots keys: a warp reads one bucket per
// probe (one 256-byte load of keys), probing bucket after bucket until a bucket
// with an empty entry. The values are slots of an HBM row arena that the
// producer assigns (its L1Directory plans them), so the table never chooses a
// slot or a victim itself: insert puts the planned (key, slot) pairs, evict
// removes the planned keys (tombstones, reused by later inserts).
class DeviceHashTable {
 public:
  static constexpr int kBucketSlots = 32;
  static constexpr uint64_t kEmptyKey = ~uint64_t{0};
  static constexpr uint64_t kTombstoneKey = ~uint64_t{0} - 1;  // two keys no RowId hash takes

  // Room for at least `capacity` keys (rounded up to whole buckets).
  explicit DeviceHashTable(int64_t capacity);
  int64_t capacity() const { return int64_t(num_buckets_) * kBucketSlots; }

  void clear(cudaStream_t stream);
  // slots_out (n) <- the slot of keys (n), or -1 where absent. Keys may repeat.
  void find(cudaStream_t stream, const uint64_t* keys, size_t n, int32_t* slots_out) const;
  // Inserts (or reassigns) keys (n) -> slots (n); keys of one call distinct.
  // Returns how many found no room (a full table; synchronises the stream).
  int64_t insert(cudaStream_t stream, const uint64_t* keys, const int32_t* slots, size_t n);
  // Removes keys (n) where present (absent ones are ignored).
  void evict(cudaStream_t stream, const uint64_t* keys, size_t n);

 private:
  uint32_t num_buckets_;
  DeviceBuffer<uint64_t> keys_;   // (num_buckets, kBucketSlots)
  DeviceBuffer<int32_t> slots_;   // (num_buckets, kBucketSlots)
  DeviceBuffer<unsigned long long> failed_;  // (1)
};

}  // namespace strata::cuda
