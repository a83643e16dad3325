#include "runtime/shared_ingest.hpp"

#include <spdlog/spdlog.h>

#include "comm/collectives.hpp"
#include "comm/mpi_channel.hpp"
#include "common/error.hpp"

namespace strata::runtime {
namespace {
data::SharedChunkCache* g_cache = nullptr;  // one co-training job per process
data::SharedChunkCache* g_batches = nullptr;
store::L2Pool* g_pool = nullptr;
size_t round64(size_t n) { return (n + 63) & ~size_t(63); }
}  // namespace

data::SharedChunkCache* shared_ingest_cache() { return g_cache; }
data::SharedChunkCache* shared_batch_cache() { return g_batches; }
store::L2Pool* shared_l2_pool() { return g_pool; }

SharedIngest::SharedIngest(MPI_Comm world, bool is_producer, const SharedIngestOptions& options) {
  MPI_Comm node = MPI_COMM_NULL;
  comm::arrive_together(world);
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
  const size_t half = options.share_samples ? round64(data::SharedChunkCache::bytes_needed(geometry)) : 0;
  const size_t pool_bytes = options.l2_pool_mb > 0 ? round64(store::L2Pool::bytes_needed(consumers)) : 0;
  // Every producer's share of the pool, in the node's producer order.
  std::vector<store::L2PoolMember> members(static_cast<size_t>(consumers));
  if (pool_bytes > 0) {
    comm::allgather_bytes(&options.member, sizeof(store::L2PoolMember), members.data(), producers_);
    (void)store::initial_l2_grants(options.l2_pool_mb, members);  // throws alike on every producer
  }
  memory_ = std::make_unique<comm::NodeSharedMemory>(producers_, 2 * half + pool_bytes);
  char* base = static_cast<char*>(memory_->data());
  if (me == 0) {
    if (half > 0) {
      data::SharedChunkCache::initialize(base, geometry);
      data::SharedChunkCache::initialize(base + half, geometry);
    }
    if (pool_bytes > 0) store::L2Pool::initialize(base + 2 * half, options.l2_pool_mb, members);
  }
  comm::barrier(producers_);
  if (half > 0) {
    cache_ = std::make_unique<data::SharedChunkCache>(base, geometry, me);
    batches_ = std::make_unique<data::SharedChunkCache>(base + half, geometry, me);
    g_cache = cache_.get();
    g_batches = batches_.get();
  }
  if (pool_bytes > 0 && options.member.tiered) {
    pool_ = std::make_unique<store::L2Pool>(base + 2 * half, consumers, me);
    g_pool = pool_.get();
  }
  if (me == 0) {
    spdlog::debug("shared ingestion: {} producers on this node share {} slots of {:.0f} KiB ({} samples per chunk)",
                  consumers, geometry.slots, double(geometry.slot_bytes) / 1024.0, geometry.chunk_samples);
  }
}

void SharedIngest::finish() {
  if (producers_ == MPI_COMM_NULL) return;
  g_cache = g_batches = nullptr;
  g_pool = nullptr;
  cache_.reset();  // retires this consumer
  batches_.reset();
  pool_.reset();
  comm::barrier(producers_, comm::kFinishedPace);  // the others may still train
  memory_.reset();
  MPI_Comm_free(&producers_);
}

SharedIngest::~SharedIngest() {
  // Not finished (an error on the way out): no collective here; the memory
  // goes with the process.
  g_cache = g_batches = nullptr;
  g_pool = nullptr;
  if (cache_) cache_->retire();
  if (batches_) batches_->retire();
  (void)memory_.release();
  cache_.reset();
  batches_.reset();
  pool_.reset();
}

}  // namespace strata::runtime
