// Shared ingestion of a co-training job (docs/MULTI_MODEL.md): the producers
// of every model on a node attach to one data::SharedChunkCache in memory
// they share, so that each training sample is generated (or cut from its
// sequences) once for all the models instead of once per model.
#pragma once

#include <mpi.h>

#include <memory>

#include "comm/node_shared_memory.hpp"
#include "data/shared_chunk_cache.hpp"

namespace strata::runtime {

struct SharedIngestOptions {
  double mb = 64;           // shared memory per node (half for chunks, half for batches)
  int chunk_samples = 256;  // samples per chunk
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
};

// This process's caches while a SharedIngest is set up (a producer of a
// co-training job), else null: chunks of samples as read, and whole training
// batches already de-duplicated (models with the same batch size share them).
data::SharedChunkCache* shared_ingest_cache();
data::SharedChunkCache* shared_batch_cache();

}  // namespace strata::runtime
