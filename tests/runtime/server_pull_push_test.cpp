// Server pull/push over MPI: trainers pull rows through RemotePsStore from real
// server ranks, push gradients, and see every update of step s at step s+1.
// Layout: 2 trainers, 1 idle producer, and the remaining ranks are servers.
#include <gtest/gtest.h>
#include <mpi.h>

#include "config/options.hpp"
#include "runtime/role_layout.hpp"
#include "runtime/server_role.hpp"
#include "store/remote_ps_store.hpp"
#include "store/row_init.hpp"

namespace strata::runtime {
namespace {

data::Batch batch_with_keys(const std::vector<std::vector<uint64_t>>& keys_per_table) {
  data::Batch batch;
  batch.reset(1, static_cast<int>(keys_per_table.size()));
  batch.size = 1;
  for (size_t t = 0; t < keys_per_table.size(); ++t) batch.tables[t].unique_keys = keys_per_table[t];
  return batch;
}

TEST(ServerPullPush, RowsUpdateSynchronously) {
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world < 4) GTEST_SKIP() << "needs 4 ranks";
  RunOptions options;
  options.layout.trainers = 2;
  options.layout.producers = 1;
  options.layout.servers = world - 3;
  options.model.embedding_dim = 4;
  options.optim.sparse = "sgd";
  options.optim.sparse_lr = 1.0f;
  options.train.seed = 5;
  // Only the servers run a role loop here: the stall watchdog's start barrier waits
  // for every rank of a whole job, so it stays off.
  options.runtime.stall_timeout_s = 0;
  RankContext context = split_roles(options.layout, MPI_COMM_WORLD);
  const int dim = 4;

  if (context.role == Role::kServer) {
    ServerReport report = run_server(options, context, ResumePoint{});
    EXPECT_EQ(report.rounds, 6);  // pull, push, pull(eval), pull, dump, stop
  } else if (context.role == Role::kTrainer) {
    std::vector<int> servers;
    for (int s = 0; s < options.layout.servers; ++s) servers.push_back(context.layout.world_rank(Role::kServer, s));
    store::RemotePsStore store(MPI_COMM_WORLD, servers, context.index, dim, 2);
    // Trainer 0 and 1 share key 10 of table 0; trainer 1 also touches 99 of table 1.
    data::Batch batch = context.index == 0 ? batch_with_keys({{10, 20}, {}}) : batch_with_keys({{10}, {99}});
    std::vector<std::vector<float>> rows, grads(2);
    store.pull(batch, rows, true);
    float expected[4];
    store::init_row_values(0, 10, 5, options.model.row_init_scale, expected, dim);
    for (int j = 0; j < dim; ++j) EXPECT_EQ(rows[0][j], expected[j]);
    for (int t = 0; t < 2; ++t) grads[t].assign(rows[t].size(), context.index == 0 ? 0.25f : 0.5f);
    store.push(batch, grads);

    data::Batch unseen = batch_with_keys({{777}, {}});
    store.pull(unseen, rows, false);  // evaluation: answered, not stored
    store::init_row_values(0, 777, 5, options.model.row_init_scale, expected, dim);
    for (int j = 0; j < dim; ++j) EXPECT_EQ(rows[0][j], expected[j]);

    store.pull(batch, rows, true);
    store::init_row_values(0, 10, 5, options.model.row_init_scale, expected, dim);
    for (int j = 0; j < dim; ++j) EXPECT_FLOAT_EQ(rows[0][j], expected[j] - (0.25f + 0.5f));

    store::RowDump dump = store.dump_rows();
    if (context.index == 0) {
      ASSERT_EQ(dump.ids.size(), 3u);  // (0,10), (0,20), (1,99); key 777 was never stored
      EXPECT_EQ(dump.ids[0].table, 0u);
      EXPECT_EQ(dump.ids[0].key, 10u);
      EXPECT_EQ(dump.ids[2].table, 1u);
      EXPECT_EQ(dump.counts[0], 4u);  // pulled by both trainers in two training pulls
    }
    store.shutdown();
  }
  MPI_Comm_free(&context.role_comm);
}

}  // namespace
}  // namespace strata::runtime
