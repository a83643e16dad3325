#include "runtime/shared_ingest.hpp"

#include <spdlog/spdlog.h>

#include "comm/collectives.hpp"
#include "comm/mpi_channel.hpp"
#include "common/error.hpp"

namespace strata::runtime {
namespace {
data::SharedChunkCache* g_cache = nullptr;  // one co-training job per process
data::SharedChunkCache* g_batches = nullptr;
size_t round64(size_t n) { return (n + 63) & ~size_t(63); }
}  // namespace

data::SharedChunkCache* shared_ingest_cache() { return g_cache; }
data::SharedChunkCache* shared_batch_cache() { return g_batches; }

SharedIngest::SharedIngest(MPI_Comm world, bool is_producer, const SharedIngestOptions& options) {
  MPI_Comm node = MPI_COMM_NULL;
  comm::check_mpi(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  comm::check_mpi(MPI_Comm_split(node, is_producer ? 0 : MPI_UNDEFINED, rank, &producers_), "MPI_Comm_split");
  MPI_Comm_free(&node);
  if (producers_ == MPI_COMM_NULL) return;
  int me = 0, consumers = 1;
  MPI_Comm_rank(producers_, &me);
  MPI_Comm_size(producers_, &consumers);
  data::SharedChunkGeometry geometry;
  geometry.consumers = consumers;
  geometry.chunk_samples = options.chunk_samples;
  geometry.slots = 64;
  geometry.slot_bytes = static_cast<size_t>(options.mb * 1048576.0 / 2 / geometry.slots);
  const size_t half = round64(data::SharedChunkCache::bytes_needed(geometry));
  memory_ = std::make_unique<comm::NodeSharedMemory>(producers_, 2 * half);
  char* base = static_cast<char*>(memory_->data());
  if (me == 0) {
    data::SharedChunkCache::initialize(base, geometry);
    data::SharedChunkCache::initialize(base + half, geometry);
  }
  comm::barrier(producers_);
  cache_ = std::make_unique<data::SharedChunkCache>(base, geometry, me);
  batches_ = std::make_unique<data::SharedChunkCache>(base + half, geometry, me);
  g_cache = cache_.get();
  g_batches = batches_.get();
  if (me == 0) {
    spdlog::debug("shared ingestion: {} producers on this node share {} slots of {:.0f} KiB ({} samples per chunk)",
                  consumers, geometry.slots, double(geometry.slot_bytes) / 1024.0, geometry.chunk_samples);
  }
}

void SharedIngest::finish() {
  if (producers_ == MPI_COMM_NULL) return;
  g_cache = g_batches = nullptr;
  cache_.reset();  // retires this consumer
  batches_.reset();
  comm::barrier(producers_);  // polite: the others may still train
  memory_.reset();
  MPI_Comm_free(&producers_);
}

SharedIngest::~SharedIngest() {
  // Not finished (an error on the way out): no collective here; the memory
  // goes with the process.
  g_cache = g_batches = nullptr;
  if (cache_) cache_->retire();
  if (batches_) batches_->retire();
  (void)memory_.release();
  cache_.reset();
  batches_.reset();
}

}  // namespace strata::runtime
