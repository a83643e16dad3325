// Role split under MPI: every rank gets the role the layout says, role
// communicators have the right sizes, and a wrong world size is a clear error.
#include <gtest/gtest.h>
#include <mpi.h>

#include "common/error.hpp"
#include "runtime/role_layout.hpp"

namespace strata::runtime {
namespace {

LayoutOptions layout_for(int world) {
  LayoutOptions o;
  o.servers = 1;
  o.producers = world >= 5 ? 2 : 1;
  o.trainers = world - o.servers - o.producers;
  return o;
}

TEST(RoleLayout, SplitMatchesLayout) {
  int world = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (world < 3) GTEST_SKIP() << "needs 3 ranks";
  LayoutOptions options = layout_for(world);
  RankContext context = split_roles(options, MPI_COMM_WORLD);
  int role_size = 0;
  MPI_Comm_size(context.role_comm, &role_size);
  const int expected_size = context.role == Role::kTrainer    ? options.trainers
                            : context.role == Role::kProducer ? options.producers
                                                              : options.servers;
  EXPECT_EQ(role_size, expected_size);
  int role_rank = -1;
  MPI_Comm_rank(context.role_comm, &role_rank);
  EXPECT_EQ(role_rank, context.index);
  EXPECT_EQ(context.layout.world_rank(context.role, context.index), rank);
  if (rank == 0) EXPECT_EQ(context.role, Role::kTrainer);
  if (rank == world - 1) EXPECT_EQ(context.role, Role::kServer);
  MPI_Comm_free(&context.role_comm);
}

TEST(RoleLayout, ProducersFeedDisjointTrainers) {
  LayoutOptions o;
  o.trainers = 5;
  o.producers = 2;
  RoleLayout layout(o);
  EXPECT_EQ(layout.trainers_of_producer(0), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(layout.trainers_of_producer(1), (std::vector<int>{1, 3}));
  for (int t = 0; t < 5; ++t) EXPECT_EQ(t % 2, layout.producer_of_trainer(t));
}

TEST(RoleLayout, WrongWorldSizeIsAClearError) {
  LayoutOptions o;
  o.trainers = 2;
  RoleLayout layout(o);
  try {
    layout.check_world_size(7);
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("7 ranks"), std::string::npos) << what;
    EXPECT_NE(what.find("needs 4"), std::string::npos) << what;
    EXPECT_NE(what.find("mpirun -n 4"), std::string::npos) << what;
  }
  o.producers = 3;
  EXPECT_THROW(RoleLayout{o}, Error);
  o.producers = 0;
  EXPECT_THROW(RoleLayout{o}, Error);
}

}  // namespace
}  // namespace strata::runtime
