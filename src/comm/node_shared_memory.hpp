// NodeSharedMemory: one block of memory shared by the ranks of a communicator
// that all sit on one node (MPI_Win_allocate_shared). Rank 0 of the
// communicator allocates it; every rank maps the same bytes, starting on a
// 64-byte boundary.
#pragma once

#include <mpi.h>

#include <cstddef>

namespace strata::comm {

class NodeSharedMemory {
 public:
  // Collective over `node_comm` (from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)).
  NodeSharedMemory(MPI_Comm node_comm, size_t bytes);
  // Collective too: every rank of the communicator frees it together.
  ~NodeSharedMemory();
  NodeSharedMemory(const NodeSharedMemory&) = delete;
  NodeSharedMemory& operator=(const NodeSharedMemory&) = delete;

  void* data() const { return data_; }
  size_t size() const { return bytes_; }

 private:
  MPI_Win window_ = MPI_WIN_NULL;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace strata::comm
