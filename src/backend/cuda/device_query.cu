// Device query of the CUDA backend: the first thing a GPU trainer calls. With no
// GPU (or no driver) it reports a clear error instead of failing later in a kernel.
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "backend/cuda/device_query.hpp"

namespace strata::cuda {

DeviceQuery query_devices() {
  DeviceQuery result;
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    result.error = std::string("no usable CUDA device: ") + cudaGetErrorName(status) + " (" +
                   cudaGetErrorString(status) + ")";
    return result;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    DeviceInfo info{i, prop.name, static_cast<size_t>(prop.totalGlobalMem), prop.major * 10 + prop.minor,
                    prop.multiProcessorCount, 0};
    size_t free = 0, total = 0;
    if (cudaSetDevice(i) == cudaSuccess && cudaMemGetInfo(&free, &total) == cudaSuccess) info.free_bytes = free;
    result.devices.push_back(info);
  }
  if (count > 0) cudaSetDevice(0);
  int nccl_version = 0;
  ncclGetVersion(&nccl_version);
  result.nccl_version = nccl_version;
  return result;
}

}  // namespace strata::cuda
