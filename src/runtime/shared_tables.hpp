// Shared embedding tables of co-trained models ([models] share_tables,
// docs/MULTI_MODEL.md): the first sharing model's servers hold the tables, and
// the other sharing models' trainers pull and push their rows there over the
// co-training job's communicator, in step with the first model's trainers.
// Each server round takes one request of every sharing trainer (the first
// model's trainers in rank order, then each other model's), sums the rows'
// gradients in that order and applies one sparse-optimizer step.
#pragma once

#include <mpi.h>

#include <vector>

namespace strata::runtime {

// What one rank of a co-training job does about shared tables.
struct SharedTablesPlan {
  MPI_Comm world = MPI_COMM_NULL;  // the co-training job's communicator (guests and owner servers meet on it)
  // A trainer of a model that borrows the tables: the owner's servers, in
  // server-index order (world ranks).
  bool borrower = false;
  std::vector<int> owner_servers;
  // A server of the owning model: the other models' trainers it also serves
  // (world ranks, model by model in share_tables order, each model's in rank
  // order), and which of them are their model's trainer 0 (they take the final dump).
  std::vector<int> guest_trainers;
  std::vector<bool> guest_takes_dump;
  // A trainer of any sharing model: all of their trainers, which decide each
  // step together (take it, stop for a preemption or a non-finite loss), so
  // that the servers' rounds stay in step.
  MPI_Comm sharing_trainers = MPI_COMM_NULL;
  // A server of a borrowing model: it holds no rows and hears from its
  // trainers only at checkpoints and at the end, so no stall watchdog watches
  // its waits (the trainers' watchdogs and the job-failure notice still end it).
  bool idle_server = false;
};

// This process's plan while a co-training job with shared tables runs, else null.
const SharedTablesPlan* shared_tables();

// Sets the plan for the life of the object (model_set_job, around the model's run).
class SharedTablesScope {
 public:
  explicit SharedTablesScope(SharedTablesPlan plan);
  ~SharedTablesScope();
  SharedTablesScope(const SharedTablesScope&) = delete;
  SharedTablesScope& operator=(const SharedTablesScope&) = delete;
};

}  // namespace strata::runtime
