// What the MPI tests ask of MPI_COMM_WORLD.
#pragma once

#include <mpi.h>

namespace strata::mpi_test {

inline int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

inline int world_size() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

}  // namespace strata::mpi_test
