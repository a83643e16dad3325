#include "comm/parallel_groups.hpp"

#include <string>
#include <utility>

#include "comm/mpi_channel.hpp"
#include "common/error.hpp"

namespace strata::comm {

ParallelGroups::ParallelGroups(MPI_Comm trainers, const ParallelLayout& layout) : layout_(layout) {
  int rank = 0, size = 0;
  MPI_Comm_rank(trainers, &rank);
  MPI_Comm_size(trainers, &size);
  if (layout.dp * layout.sp * layout.ep != size) {
    throw Error("parallel layout dp " + std::to_string(layout.dp) + " x sp " + std::to_string(layout.sp) + " x ep " +
                    std::to_string(layout.ep) + " does not cover the " + std::to_string(size) + " trainers",
                "make layout.dp x layout.sp x layout.ep equal layout.trainers");
  }
  ep_rank_ = rank % layout.ep;
  sp_rank_ = (rank / layout.ep) % layout.sp;
  dp_rank_ = rank / (layout.ep * layout.sp);
  check_mpi(MPI_Comm_split(trainers, dp_rank_ * layout.sp + sp_rank_, ep_rank_, &ep_), "MPI_Comm_split");
  check_mpi(MPI_Comm_split(trainers, dp_rank_ * layout.ep + ep_rank_, sp_rank_, &sp_), "MPI_Comm_split");
  check_mpi(MPI_Comm_split(trainers, sp_rank_ * layout.ep + ep_rank_, dp_rank_, &dp_), "MPI_Comm_split");
}

ParallelGroups::~ParallelGroups() { release(); }

ParallelGroups::ParallelGroups(ParallelGroups&& other) noexcept { *this = std::move(other); }

ParallelGroups& ParallelGroups::operator=(ParallelGroups&& other) noexcept {
  if (this == &other) return *this;
  release();
  layout_ = other.layout_;
  dp_rank_ = other.dp_rank_, sp_rank_ = other.sp_rank_, ep_rank_ = other.ep_rank_;
  dp_ = std::exchange(other.dp_, MPI_COMM_NULL);
  sp_ = std::exchange(other.sp_, MPI_COMM_NULL);
  ep_ = std::exchange(other.ep_, MPI_COMM_NULL);
  return *this;
}

void ParallelGroups::release() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  for (MPI_Comm* c : {&dp_, &sp_, &ep_}) {
    if (*c != MPI_COMM_NULL && !finalized) MPI_Comm_free(c);
    *c = MPI_COMM_NULL;
  }
}

}  // namespace strata::comm
