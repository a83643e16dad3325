// L1 on the device: key -> arena slot, open addressing over 32-key buckets, one
// warp per key. Reference: a std::unordered_map (tests/backend); the host's L1
// needs no table (its producer's L1Directory plans every slot), the device one
// serves lookups where the plan is not shipped.
//
// Probing: bucket h(key), h + 1, ... A warp loads a bucket's 32 keys at once and
// votes: a match ends a find; an empty entry ends the chain (a key is never
// stored past the first bucket with an empty entry, because insert takes the
// first free entry of the chain and evict leaves tombstones, not holes).
#include "backend/cuda/kernels.hpp"

namespace strata::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kB = DeviceHashTable::kBucketSlots;
constexpr uint64_t kEmpty = DeviceHashTable::kEmptyKey;
constexpr uint64_t kTomb = DeviceHashTable::kTombstoneKey;

__device__ __forceinline__ uint32_t bucket_of(uint64_t key, uint32_t num_buckets) {
  key ^= key >> 33;  // murmur3 finaliser: row ids are already hashes, but tests use small integers
  key *= 0xff51afd7ed558ccdULL;
  key ^= key >> 33;
  key *= 0xc4ceb9fe1a85ec53ULL;
  key ^= key >> 33;
  return uint32_t(key % num_buckets);
}

__global__ void find_kernel(const uint64_t* __restrict__ table_keys, const int32_t* __restrict__ table_slots,
                            uint32_t num_buckets, const uint64_t* __restrict__ keys, size_t n,
                            int32_t* __restrict__ out) {
  const size_t i = size_t(blockIdx.x) * kWarpsPerBlock + threadIdx.y;
  if (i >= n) return;
  const int lane = threadIdx.x;
  const uint64_t key = keys[i];
  uint32_t b = bucket_of(key, num_buckets);
  int32_t found = -1;
  for (uint32_t probe = 0; probe < num_buckets; ++probe) {
    const size_t at = size_t(b) * kB + lane;
    const uint64_t k = table_keys[at];
    const unsigned match = __ballot_sync(0xffffffffu, k == key);
    if (match) {
      const int src = __ffs(match) - 1;
      found = __shfl_sync(0xffffffffu, table_slots[at], src);
      break;
    }
    if (__ballot_sync(0xffffffffu, k == kEmpty)) break;
    b = b + 1 == num_buckets ? 0 : b + 1;
  }
  if (lane == 0) out[i] = found;
}

// Keys of one call are distinct, so two warps never race for the same key, only
// for the same free entry (the CAS decides; the loser rescans).
__global__ void insert_kernel(uint64_t* __restrict__ table_keys, int32_t* __restrict__ table_slots,
                              uint32_t num_buckets, const uint64_t* __restrict__ keys,
                              const int32_t* __restrict__ slots, size_t n, unsigned long long* __restrict__ failed) {
  const size_t i = size_t(blockIdx.x) * kWarpsPerBlock + threadIdx.y;
  if (i >= n) return;
  const int lane = threadIdx.x;
  const uint64_t key = keys[i];
  const int32_t slot = slots[i];
  for (;;) {
    // Scan the chain: a match is reassigned; else remember the first free entry.
    uint32_t b = bucket_of(key, num_buckets);
    int64_t free_at = -1;
    uint64_t free_was = 0;
    bool done = false, chain_end = false;
    for (uint32_t probe = 0; probe < num_buckets && !done && !chain_end; ++probe) {
      const size_t base = size_t(b) * kB;
      const uint64_t k = table_keys[base + lane];
      const unsigned match = __ballot_sync(0xffffffffu, k == key);
      if (match) {
        if (lane == __ffs(match) - 1) table_slots[base + lane] = slot;
        done = true;
        break;
      }
      const unsigned free_lanes = __ballot_sync(0xffffffffu, k == kEmpty || k == kTomb);
      if (free_lanes && free_at < 0) {
        const int src = __ffs(free_lanes) - 1;
        free_at = int64_t(base) + src;
        free_was = __shfl_sync(0xffffffffu, k, src);
      }
      if (__ballot_sync(0xffffffffu, k == kEmpty)) chain_end = true;
      b = b + 1 == num_buckets ? 0 : b + 1;
    }
    if (done) return;
    if (free_at < 0) {  // every entry holds another key: the table is full
      if (lane == 0) atomicAdd(failed, 1ull);
      return;
    }
    int won = 0;
    if (lane == 0) {
      auto* word = reinterpret_cast<unsigned long long*>(table_keys + free_at);
      won = atomicCAS(word, (unsigned long long)free_was, (unsigned long long)key) == free_was;
      if (won) table_slots[free_at] = slot;
    }
    if (__shfl_sync(0xffffffffu, won, 0)) return;
  }
}

__global__ void evict_kernel(uint64_t* __restrict__ table_keys, uint32_t num_buckets,
                             const uint64_t* __restrict__ keys, size_t n) {
  const size_t i = size_t(blockIdx.x) * kWarpsPerBlock + threadIdx.y;
  if (i >= n) return;
  const int lane = threadIdx.x;
  const uint64_t key = keys[i];
  uint32_t b = bucket_of(key, num_buckets);
  for (uint32_t probe = 0; probe < num_buckets; ++probe) {
    const size_t at = size_t(b) * kB + lane;
    const uint64_t k = table_keys[at];
    const unsigned match = __ballot_sync(0xffffffffu, k == key);
    if (match) {
      if (lane == __ffs(match) - 1) table_keys[at] = kTomb;
      return;
    }
    if (__ballot_sync(0xffffffffu, k == kEmpty)) return;
    b = b + 1 == num_buckets ? 0 : b + 1;
  }
}

size_t grid_for(size_t n) { return (n + kWarpsPerBlock - 1) / kWarpsPerBlock; }

}  // namespace

DeviceHashTable::DeviceHashTable(int64_t capacity)
    : num_buckets_(uint32_t(std::max<int64_t>(1, (capacity + kBucketSlots - 1) / kBucketSlots))),
      keys_(size_t(num_buckets_) * kBucketSlots),
      slots_(size_t(num_buckets_) * kBucketSlots),
      failed_(1) {
  clear(nullptr);
  check(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");
}

void DeviceHashTable::clear(cudaStream_t stream) {
  // 0xff bytes: every key kEmptyKey.
  check(cudaMemsetAsync(keys_.data(), 0xff, sizeof(uint64_t) * keys_.size(), stream), "cudaMemsetAsync");
}

void DeviceHashTable::find(cudaStream_t stream, const uint64_t* keys, size_t n, int32_t* slots_out) const {
  if (n == 0) return;
  STRATA_CUDA_LAUNCH(find_kernel, grid_for(n), dim3(32, kWarpsPerBlock), 0, stream, keys_.data(), slots_.data(),
                     num_buckets_, keys, n, slots_out);
}

int64_t DeviceHashTable::insert(cudaStream_t stream, const uint64_t* keys, const int32_t* slots, size_t n) {
  if (n == 0) return 0;
  check(cudaMemsetAsync(failed_.data(), 0, sizeof(unsigned long long), stream), "cudaMemsetAsync");
  STRATA_CUDA_LAUNCH(insert_kernel, grid_for(n), dim3(32, kWarpsPerBlock), 0, stream, keys_.data(), slots_.data(),
                     num_buckets_, keys, slots, n, failed_.data());
  unsigned long long failed = 0;
  check(cudaMemcpyAsync(&failed, failed_.data(), sizeof(failed), cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  return int64_t(failed);
}

void DeviceHashTable::evict(cudaStream_t stream, const uint64_t* keys, size_t n) {
  if (n == 0) return;
  STRATA_CUDA_LAUNCH(evict_kernel, grid_for(n), dim3(32, kWarpsPerBlock), 0, stream, keys_.data(), num_buckets_,
                     keys, n);
}

}  // namespace strata::cuda
