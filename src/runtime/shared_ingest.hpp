// Shared ingestion of a co-training job (docs/MULTI_MODEL.md): the producers
// of every model on a node attach to one data::SharedChunkCache in memory
// they share, so that each training sample is generated (or cut from its
// sequences) once for all the models instead of once per model.
#pragma once

#include <mpi.h>

#include <memory>

#include "comm/node_shared_memory.hpp"
#include "data/shared_chunk_cache.hpp"
#include "store/l2_pool.hpp"

namespace strata::runtime {

struct SharedIngestOptions {
  bool share_samples = true;  // the chunk and batch caches ([models] shared_ingest)
  double mb = 64;             // their shared memory per node (half for chunks, half for batches)
  int chunk_samples = 256;    // samples per chunk
  double l2_pool_mb = 0;      // [models] l2_pool_mb: one L2 pool per node (0 = off)
  store::L2PoolMember member; // this rank's share of it (a producer's)
};

class SharedIngest {
 public:
  // Collective over `world`: every rank calls it, and the producers
  // (`is_producer`) of each node set up their node's cache together.
  SharedIngest(MPI_Comm world, bool is_producer, const SharedIngestOptions& options);
  // Collective over the node's producers, once each has finished training
  // (waiting politely); without it the memory is left to the process's end.
  void finish();
  ~SharedIngest();
  SharedIngest(const SharedIngest&) = delete;
  SharedIngest& operator=(const SharedIngest&) = delete;

 private:
  MPI_Comm producers_ = MPI_COMM_NULL;
  std::unique_ptr<comm::NodeSharedMemory> memory_;
  std::unique_ptr<data::SharedChunkCache> cache_;
  std::unique_ptr<data::SharedChunkCache> batches_;
  std::unique_ptr<store::L2Pool> pool_;
};

// This process's caches while a SharedIngest is set up (a producer of a
// co-training job), else null: chunks of samples as read, and whole training
// batches already de-duplicated (models with the same batch size share them).
data::SharedChunkCache* shared_ingest_cache();
data::SharedChunkCache* shared_batch_cache();
// This producer's share of the node's L2 pool ([models] l2_pool_mb), else null.
store::L2Pool* shared_l2_pool();

}  // namespace strata::runtime
