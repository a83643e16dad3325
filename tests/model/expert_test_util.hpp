// Helpers of the expert-parallel model tests: the dense gradients summed as the
// trainers sum them (runtime/trainer_role.cpp).
#pragma once

#include <mpi.h>

#include "comm/collectives.hpp"
#include "comm/parallel_groups.hpp"
#include "model/dense_parameters.hpp"

namespace strata::model::testing {

// Without sharding, every gradient over every rank in rank order. With it, the
// replicated part that way, and the experts' part from their last replica (it
// holds the chain's sum) to the other replicas.
inline void sum_dense_gradients_as_trainers(DenseParameters& p, const DenseSharding* sharding,
                                            const strata::comm::ParallelGroups* groups) {
  if (sharding == nullptr) {
    strata::comm::ordered_allreduce_sum(p.grads().data(), int(p.size()), MPI_COMM_WORLD);
    return;
  }
  strata::comm::ordered_allreduce_sum(p.grads().data(), int(sharding->replicated), MPI_COMM_WORLD);
  if (groups->layout().dp > 1) {
    strata::comm::broadcast(p.grads().data() + sharding->replicated, int(sharding->shard_size), MPI_FLOAT,
                            groups->layout().dp - 1, groups->dp_comm());
  }
}

}  // namespace strata::model::testing
