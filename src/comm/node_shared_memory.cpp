#include "comm/node_shared_memory.hpp"

#include <cstdint>

#include "comm/mpi_channel.hpp"

namespace strata::comm {

NodeSharedMemory::NodeSharedMemory(MPI_Comm node_comm, size_t bytes) : bytes_(bytes) {
  int rank = 0;
  MPI_Comm_rank(node_comm, &rank);
  void* mine = nullptr;
  // MPI promises no alignment of the segment: 64 bytes more, and the block
  // starts at the first cache line (its users place alignas(64) structures).
  check_mpi(MPI_Win_allocate_shared(rank == 0 ? MPI_Aint(bytes + 64) : 0, 1, MPI_INFO_NULL, node_comm, &mine,
                                    &window_),
            "MPI_Win_allocate_shared");
  MPI_Aint size = 0;
  int unit = 0;
  void* segment = nullptr;
  check_mpi(MPI_Win_shared_query(window_, 0, &size, &unit, &segment), "MPI_Win_shared_query");
  const uintptr_t at = (reinterpret_cast<uintptr_t>(segment) + 63) & ~uintptr_t(63);
  data_ = reinterpret_cast<void*>(at);
}

NodeSharedMemory::~NodeSharedMemory() {
  if (window_ != MPI_WIN_NULL) MPI_Win_free(&window_);
}

}  // namespace strata::comm
