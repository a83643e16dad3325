#include "runtime/role_layout.hpp"

#include "comm/collectives.hpp"
#include "comm/mpi_channel.hpp"
#include "common/error.hpp"

namespace strata::runtime {

const char* role_name(Role role) {
  switch (role) {
    case Role::kTrainer: return "trainer";
    case Role::kProducer: return "producer";
    case Role::kServer: return "server";
  }
  return "?";
}

RoleLayout::RoleLayout(const LayoutOptions& layout)
    : trainers_(layout.trainers), producers_(layout.producers), servers_(layout.servers) {
  if (trainers_ < 1 || producers_ < 1 || servers_ < 1) {
    throw Error("layout needs at least one rank of each role (trainers " + std::to_string(trainers_) +
                    ", producers " + std::to_string(producers_) + ", servers " + std::to_string(servers_) + ")",
                "set layout.trainers, layout.producers and layout.servers to >= 1");
  }
  if (producers_ > trainers_) {
    throw Error("layout.producers = " + std::to_string(producers_) + " exceeds layout.trainers = " +
                    std::to_string(trainers_) + ": a producer would have no trainer to feed",
                "use at most one producer per trainer");
  }
}

int RoleLayout::world_rank(Role role, int index) const {
  switch (role) {
    case Role::kTrainer: return index;
    case Role::kProducer: return trainers_ + index;
    case Role::kServer: return trainers_ + producers_ + index;
  }
  return -1;
}

Role RoleLayout::role_of(int rank) const {
  if (rank < trainers_) return Role::kTrainer;
  if (rank < trainers_ + producers_) return Role::kProducer;
  return Role::kServer;
}

int RoleLayout::index_of(int rank) const {
  switch (role_of(rank)) {
    case Role::kTrainer: return rank;
    case Role::kProducer: return rank - trainers_;
    case Role::kServer: return rank - trainers_ - producers_;
  }
  return -1;
}

std::vector<int> RoleLayout::trainers_of_producer(int producer) const {
  std::vector<int> result;
  for (int t = producer; t < trainers_; t += producers_) result.push_back(t);
  return result;
}

void RoleLayout::check_world_size(int size) const {
  if (size != world_size()) {
    throw Error("the MPI job has " + std::to_string(size) + " ranks but the layout needs " +
                    std::to_string(world_size()) + " (layout.producers " + std::to_string(producers_) +
                    " + layout.trainers " + std::to_string(trainers_) + " + layout.servers " +
                    std::to_string(servers_) + ")",
                "run mpirun -n " + std::to_string(world_size()) +
                    ", or change the layout keys so that they sum to " + std::to_string(size));
  }
}

RankContext split_roles(const LayoutOptions& options, MPI_Comm world) {
  RankContext context{RoleLayout(options)};
  context.job = world;
  int size = 0;
  MPI_Comm_size(world, &size);
  MPI_Comm_rank(world, &context.world_rank);
  context.layout.check_world_size(size);
  context.role = context.layout.role_of(context.world_rank);
  context.index = context.layout.index_of(context.world_rank);
  comm::arrive_together(world);
  comm::check_mpi(MPI_Comm_split(world, static_cast<int>(context.role), context.world_rank, &context.role_comm),
                  "MPI_Comm_split");
  return context;
}

}  // namespace strata::runtime
