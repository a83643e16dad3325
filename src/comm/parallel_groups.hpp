// ParallelGroups: the trainers' sub-communicators of a dp x sp x ep layout, made
// with MPI_Comm_split over the trainers' communicator. Trainer t sits at
//   t = (d * sp + s) * ep + e,
// so an expert-parallel group (the heaviest traffic: tokens every layer) is ep
// consecutive trainers, and a data-parallel group holds the trainers with the same
// (s, e): the replicas of the same expert shard.
#pragma once

#include <mpi.h>

#include "config/parallel_layout.hpp"

namespace strata::comm {

class ParallelGroups {
 public:
  ParallelGroups() = default;
  // Collective over `trainers` (every trainer calls it with the same layout).
  ParallelGroups(MPI_Comm trainers, const ParallelLayout& layout);
  ~ParallelGroups();
  ParallelGroups(const ParallelGroups&) = delete;
  ParallelGroups& operator=(const ParallelGroups&) = delete;
  ParallelGroups(ParallelGroups&& other) noexcept;
  ParallelGroups& operator=(ParallelGroups&& other) noexcept;

  const ParallelLayout& layout() const { return layout_; }
  // This trainer's coordinates: its rank in each axis' communicator.
  int dp_rank() const { return dp_rank_; }
  int sp_rank() const { return sp_rank_; }
  int ep_rank() const { return ep_rank_; }
  MPI_Comm dp_comm() const { return dp_; }  // same (s, e): size dp
  MPI_Comm sp_comm() const { return sp_; }  // same (d, e): size sp
  MPI_Comm ep_comm() const { return ep_; }  // same (d, s): size ep

 private:
  void release();

  ParallelLayout layout_;
  int dp_rank_ = 0, sp_rank_ = 0, ep_rank_ = 0;
  MPI_Comm dp_ = MPI_COMM_NULL, sp_ = MPI_COMM_NULL, ep_ = MPI_COMM_NULL;
};

}  // namespace strata::comm
