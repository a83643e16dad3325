// What the CUDA backend sees: devices, their memory, and the NCCL version.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace strata::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  size_t memory_bytes = 0;
  int compute_capability = 0;  // e.g. 90 for sm_90
  int multiprocessors = 0;
  size_t free_bytes = 0;  // cudaMemGetInfo's free memory when queried
};

struct DeviceQuery {
  std::vector<DeviceInfo> devices;
  int nccl_version = 0;
  std::string error;  // empty when the query succeeded
};

DeviceQuery query_devices();

}  // namespace strata::cuda
