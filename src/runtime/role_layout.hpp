// RoleLayout: which world rank plays which role. Trainers come first (so world
// rank 0 is trainer 0, the rank that prints and writes outputs), then producers,
// then servers. Trainer t is fed by producer t mod P.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "config/options.hpp"

namespace strata::runtime {

enum class Role { kTrainer = 0, kProducer = 1, kServer = 2 };
const char* role_name(Role role);

class RoleLayout {
 public:
  explicit RoleLayout(const LayoutOptions& layout);

  int trainers() const { return trainers_; }
  int producers() const { return producers_; }
  int servers() const { return servers_; }
  int world_size() const { return trainers_ + producers_ + servers_; }

  int world_rank(Role role, int index) const;
  Role role_of(int world_rank) const;
  int index_of(int world_rank) const;

  int producer_of_trainer(int trainer) const { return trainer % producers_; }
  std::vector<int> trainers_of_producer(int producer) const;

  // Throws strata::Error when the MPI world does not match the layout.
  void check_world_size(int world_size) const;

 private:
  int trainers_;
  int producers_;
  int servers_;
};

// This rank's role and the communicator of all ranks with the same role; ranks
// are numbered within `world`, which becomes the context's job communicator.
struct RankContext {
  RoleLayout layout;
  int world_rank = 0;
  Role role = Role::kTrainer;
  int index = 0;                       // rank within the role
  MPI_Comm role_comm = MPI_COMM_NULL;  // MPI_Comm_split by role
  // The ranks of this job, which world_rank numbers: MPI_COMM_WORLD, or one
  // model's ranks when a deck co-trains several models (runtime/model_set.hpp).
  MPI_Comm job = MPI_COMM_WORLD;
};

RankContext split_roles(const LayoutOptions& layout, MPI_Comm world);

}  // namespace strata::runtime
