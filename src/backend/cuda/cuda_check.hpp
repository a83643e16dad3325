// Error checks and RAII device buffers shared by the CUDA backend's .cu files.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>

#include "common/error.hpp"

namespace strata::cuda {

inline void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw Error(std::string("CUDA: ") + what + ": " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) +
                ")");
}

// One launch macro where checks attach (every kernel launch goes through it).
#define STRATA_CUDA_LAUNCH(kernel, grid, block, shared, stream, ...)            \
  do {                                                                           \
    kernel<<<(grid), (block), (shared), (stream)>>>(__VA_ARGS__);                \
    ::strata::cuda::check(cudaGetLastError(), "launching " #kernel);             \
  } while (0)

// Device memory that grows on demand and is reused (scratch of the kernels).
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) { reserve(n); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  ~DeviceBuffer() {
    if (data_) cudaFree(data_);
  }
  // Grows (contents not kept) to at least n elements.
  T* reserve(size_t n) {
    if (n > size_) {
      if (data_) cudaFree(data_);
      data_ = nullptr;
      size_ = 0;
      check(cudaMalloc(reinterpret_cast<void**>(&data_), std::max<size_t>(n, 1) * sizeof(T)), "cudaMalloc");
      size_ = n;
    }
    return data_;
  }
  T* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace strata::cuda
