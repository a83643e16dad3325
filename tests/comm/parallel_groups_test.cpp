// ParallelGroups on 1, 2 and 4 ranks: every layout the rank count allows gives each
// rank coordinates (d, s, e) with t = (d sp + s) ep + e, and each axis' communicator
// holds exactly the ranks that differ from it in that coordinate only.
#include <gtest/gtest.h>
#include <mpi.h>

#include <vector>

#include "comm/parallel_groups.hpp"

namespace strata::comm {
namespace {

std::vector<int> members(MPI_Comm comm) {
  int size = 0, me = 0;
  MPI_Comm_size(comm, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  std::vector<int> all(size);
  MPI_Allgather(&me, 1, MPI_INT, all.data(), 1, MPI_INT, comm);
  return all;
}

TEST(ParallelGroups, EveryLayoutOfTheRankCount) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int ep = 1; ep <= size; ++ep) {
    if (size % ep != 0) continue;
    const ParallelLayout layout{size / ep, 1, ep};
    ParallelGroups groups(MPI_COMM_WORLD, layout);
    EXPECT_EQ(groups.ep_rank(), rank % ep);
    EXPECT_EQ(groups.dp_rank(), rank / ep);
    EXPECT_EQ(groups.sp_rank(), 0);
    std::vector<int> expect_ep, expect_dp;
    for (int e = 0; e < ep; ++e) expect_ep.push_back(groups.dp_rank() * ep + e);
    for (int d = 0; d < size / ep; ++d) expect_dp.push_back(d * ep + groups.ep_rank());
    EXPECT_EQ(members(groups.ep_comm()), expect_ep) << "ep " << ep;
    EXPECT_EQ(members(groups.dp_comm()), expect_dp) << "ep " << ep;
    EXPECT_EQ(members(groups.sp_comm()), std::vector<int>{rank}) << "ep " << ep;
  }
}

TEST(ParallelGroups, ALayoutThatDoesNotCoverTheRanksIsAnError) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_THROW(ParallelGroups(MPI_COMM_WORLD, ParallelLayout{size + 1, 1, 1}), std::exception);
}

}  // namespace
}  // namespace strata::comm
