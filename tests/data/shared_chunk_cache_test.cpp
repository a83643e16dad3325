// SharedChunkCache: a batch assembled from another consumer's chunks equals the
// one the dataset generates; a chunk the cache does not hold is a miss that
// leaves the batch as it was; a writer waits for a live consumer that still
// needs a slot's chunk, and not for one that is retired, stale or far behind.
#include "data/shared_chunk_cache.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <random>
#include <thread>

#include "data/synthetic.hpp"
#include "data_test_util.hpp"

namespace strata::data {
namespace {

using testing::Drained;

DataOptions history_options() {
  DataOptions options;
  options.num_tables = 4;
  options.vocab_sizes = "1000";
  options.hotness = "2";
  options.synthetic_history_length = 12;  // a ragged table beside the fixed-hotness ones
  options.synthetic_history_vocab = 5000;
  options.synthetic_tasks = 2;
  options.synthetic_train_samples = 4096;
  return options;
}

// Memory of one process stands in for the node's: two caches on it are two consumers.
struct SharedMemory {
  explicit SharedMemory(const SharedChunkGeometry& g)
      : data(static_cast<char*>(std::aligned_alloc(64, (SharedChunkCache::bytes_needed(g) + 63) / 64 * 64)),
             &std::free) {
    SharedChunkCache::initialize(data.get(), g);
  }
  std::unique_ptr<char, decltype(&std::free)> data;
};

SharedChunkGeometry geometry(int slots, int chunk_samples, int consumers, size_t slot_bytes,
                             double stale_after_s = 0.5) {
  SharedChunkGeometry g;
  g.slots = slots, g.chunk_samples = chunk_samples, g.consumers = consumers, g.slot_bytes = slot_bytes;
  g.stale_after_s = stale_after_s;
  return g;
}

Batch make_chunk(const SyntheticDataset& ds, int64_t chunk, int C) {
  Batch b;
  b.reset(ds.num_dense(), ds.num_tables());
  const int64_t first = chunk * C;
  ds.generate(Stream::kTrain, first, int32_t(std::min<int64_t>(C, ds.size(Stream::kTrain) - first)), b);
  return b;
}

Drained drain(const Batch& batch) {
  Drained all;
  testing::append(all, batch);
  return all;
}

TEST(SharedChunkCache, BatchesFromAnotherConsumersChunksEqualGenerated) {
  const SyntheticDataset ds(history_options());
  const SharedChunkGeometry g = geometry(8, 32, 2, 64 << 10);
  SharedMemory memory(g);
  SharedChunkCache maker(memory.data.get(), g, 0), reader(memory.data.get(), g, 1);
  for (int64_t k = 0; k < 8; ++k) {
    maker.publish({0, 0, k}, (k + 1) * 32, make_chunk(ds, k, 32));
  }
  EXPECT_EQ(maker.stats().published, 8);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const int64_t first = std::uniform_int_distribution<int64_t>(0, 200)(rng);
    const int32_t count = std::uniform_int_distribution<int32_t>(1, int32_t(256 - first))(rng);
    Batch expected;
    expected.reset(ds.num_dense(), ds.num_tables());
    ds.generate(Stream::kTrain, first, count, expected);
    Batch got;
    got.reset(ds.num_dense(), ds.num_tables());
    ds.generate(Stream::kTrain, first, 0, got);  // the shape
    for (int64_t at = first; at < first + count;) {
      const int64_t k = at / 32;
      const int32_t from = int32_t(at - k * 32), to = int32_t(std::min<int64_t>(first + count, (k + 1) * 32) - k * 32);
      ASSERT_TRUE(reader.append({0, 0, k}, from, to, got)) << "chunk " << k;
      at = k * 32 + to;
    }
    ASSERT_EQ(got.size, count);
    const Drained a = drain(expected), b = drain(got);
    EXPECT_EQ(a.labels, b.labels);
    EXPECT_EQ(a.dense, b.dense);
    EXPECT_EQ(a.keys, b.keys);
    EXPECT_EQ(a.lengths, b.lengths);
  }
  EXPECT_GT(reader.stats().hits, 50);
}

TEST(SharedChunkCache, AMissLeavesTheBatchAsItWas) {
  const SyntheticDataset ds(history_options());
  const SharedChunkGeometry g = geometry(4, 16, 1, 64 << 10);
  SharedMemory memory(g);
  SharedChunkCache cache(memory.data.get(), g, 0);
  cache.publish({0, 0, 1}, 32, make_chunk(ds, 1, 16));
  Batch batch = make_chunk(ds, 0, 16);
  const Drained before = drain(batch);
  EXPECT_FALSE(cache.append({0, 0, 5}, 0, 16, batch));  // same slot, another chunk
  EXPECT_FALSE(cache.append({0, 1, 1}, 0, 16, batch));  // another epoch
  EXPECT_FALSE(cache.append({0, 0, 2}, 0, 16, batch));  // never published
  EXPECT_EQ(batch.size, 16);
  const Drained after = drain(batch);
  EXPECT_EQ(before.keys, after.keys);
  EXPECT_EQ(before.labels, after.labels);
  EXPECT_EQ(cache.stats().hits, 0);
  EXPECT_TRUE(cache.append({0, 0, 1}, 3, 9, batch));
  EXPECT_EQ(batch.size, 22);
}

TEST(SharedChunkCache, AChunkTooLargeForItsSlotIsNotPublished) {
  const SyntheticDataset ds(history_options());
  const SharedChunkGeometry g = geometry(2, 512, 1, 1024);
  SharedMemory memory(g);
  SharedChunkCache cache(memory.data.get(), g, 0);
  cache.publish({0, 0, 0}, 512, make_chunk(ds, 0, 512));
  EXPECT_EQ(cache.stats().published, 0);
  EXPECT_EQ(cache.stats().not_published, 1);
  Batch batch;
  batch.reset(ds.num_dense(), ds.num_tables());
  EXPECT_FALSE(cache.append({0, 0, 0}, 0, 10, batch));
}

// Fills every slot with chunks 0..slots-1, then offers chunk `slots` (slot 0 again).
double time_overwrite(SharedChunkCache& writer, const SyntheticDataset& ds, const SharedChunkGeometry& g) {
  for (int64_t k = 0; k < g.slots; ++k) writer.publish({0, 0, k}, (k + 1) * g.chunk_samples, make_chunk(ds, k, g.chunk_samples));
  const auto start = std::chrono::steady_clock::now();
  writer.publish({0, 0, g.slots}, (g.slots + 1) * g.chunk_samples, make_chunk(ds, g.slots, g.chunk_samples));
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(SharedChunkCache, AWriterWaitsForALiveConsumerThatStillNeedsTheSlot) {
  const SyntheticDataset ds(history_options());
  const SharedChunkGeometry g = geometry(4, 16, 2, 64 << 10, 30);
  SharedMemory memory(g);
  SharedChunkCache writer(memory.data.get(), g, 0), slow(memory.data.get(), g, 1);
  slow.set_cursor(0);  // alive, needs chunk 0
  std::thread advance([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    slow.set_cursor(16);  // done with chunk 0
  });
  const double waited = time_overwrite(writer, ds, g);
  advance.join();
  EXPECT_GE(waited, 0.09);
  EXPECT_GE(writer.stats().wait_s, 0.09);
  EXPECT_EQ(writer.stats().published, 5);
  Batch batch;
  batch.reset(ds.num_dense(), ds.num_tables());
  ds.generate(Stream::kTrain, 0, 0, batch);
  EXPECT_TRUE(slow.append({0, 0, 4}, 0, 16, batch));   // the new chunk
  EXPECT_FALSE(slow.append({0, 0, 0}, 0, 16, batch));  // the old one is gone
}

TEST(SharedChunkCache, RetiredStaleOrFarBehindConsumersDoNotHoldAWriterUp) {
  const SyntheticDataset ds(history_options());
  const SharedChunkGeometry g = geometry(4, 16, 2, 64 << 10, 0.05);
  {
    SharedMemory memory(g);
    SharedChunkCache writer(memory.data.get(), g, 0), other(memory.data.get(), g, 1);
    other.retire();
    EXPECT_LT(time_overwrite(writer, ds, g), 0.04);
    EXPECT_EQ(writer.stats().wait_s, 0);
  }
  {
    SharedMemory memory(g);
    SharedChunkCache writer(memory.data.get(), g, 0), other(memory.data.get(), g, 1);
    other.set_cursor(0);  // alive now, then silent: stale after 50 ms
    const double waited = time_overwrite(writer, ds, g);
    EXPECT_GE(waited, 0.04);
    EXPECT_LT(waited, 5.0);
    EXPECT_EQ(writer.stats().published, 5);
  }
  {
    SharedMemory memory(g);
    SharedChunkCache writer(memory.data.get(), g, 0), other(memory.data.get(), g, 1);
    for (int64_t k = 0; k < 4; ++k) writer.publish({0, 0, 100 + k}, (101 + k) * 16, make_chunk(ds, 100 + k, 16));
    other.set_cursor(0);  // alive, but 100 chunks behind: it would never reach them in time
    const auto start = std::chrono::steady_clock::now();
    writer.publish({0, 0, 104}, 105 * 16, make_chunk(ds, 104, 16));
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 0.04);
    EXPECT_EQ(writer.stats().published, 5);
  }
}

TEST(SharedChunkCache, AChunkBeingMadeIsWaitedForNotMadeTwice) {
  const SyntheticDataset ds(history_options());
  const SharedChunkGeometry g = geometry(4, 16, 2, 64 << 10);
  SharedMemory memory(g);
  SharedChunkCache maker(memory.data.get(), g, 0), other(memory.data.get(), g, 1);
  using Reservation = SharedChunkCache::Reservation;
  ASSERT_EQ(maker.reserve({0, 0, 2}, 48), Reservation::kMine);
  EXPECT_EQ(other.reserve({0, 0, 2}, 48), Reservation::kTheirs);
  std::thread make([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    maker.fill({0, 0, 2}, make_chunk(ds, 2, 16));
  });
  Batch batch;
  batch.reset(ds.num_dense(), ds.num_tables());
  ds.generate(Stream::kTrain, 32, 0, batch);
  EXPECT_TRUE(other.append({0, 0, 2}, 0, 16, batch));  // waits for the fill
  make.join();
  EXPECT_GE(other.stats().making_wait_s, 0.02);
  const Drained expected = drain(make_chunk(ds, 2, 16)), got = drain(batch);
  EXPECT_EQ(expected.keys, got.keys);
  EXPECT_EQ(expected.dense, got.dense);
  // A chunk too large for its slot leaves the slot empty, not holding the reservation.
  const SharedChunkGeometry small = geometry(4, 16, 2, 1024);
  SharedMemory tight(small);
  SharedChunkCache a(tight.data.get(), small, 0), b(tight.data.get(), small, 1);
  ASSERT_EQ(a.reserve({0, 0, 0}, 16), Reservation::kMine);
  Batch big;
  big.reset(ds.num_dense(), ds.num_tables());
  ds.generate(Stream::kTrain, 0, 64, big);
  a.fill({0, 0, 0}, big);
  EXPECT_EQ(a.stats().not_published, 1);
  EXPECT_EQ(b.reserve({0, 0, 0}, 16), Reservation::kMine);
}

TEST(SharedChunkCache, BlobsTravelWholeAndMissCleanly) {
  const SharedChunkGeometry g = geometry(4, 16, 2, 4096);
  SharedMemory memory(g);
  SharedChunkCache maker(memory.data.get(), g, 0), other(memory.data.get(), g, 1);
  std::vector<char> bytes(3000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = char(i * 7);
  const ChunkKey key{0x10000001, 0, 9};
  std::vector<char> got;
  EXPECT_FALSE(other.copy_blob(key, got));
  ASSERT_EQ(maker.reserve(key, 160), SharedChunkCache::Reservation::kMine);
  maker.fill_blob(key, bytes);
  ASSERT_TRUE(other.copy_blob(key, got));
  EXPECT_EQ(got, bytes);
  EXPECT_FALSE(other.copy_blob({0x10000001, 1, 9}, got));  // another epoch
  // A blob is not a chunk of samples.
  const SyntheticDataset ds(history_options());
  Batch batch;
  batch.reset(ds.num_dense(), ds.num_tables());
  ds.generate(Stream::kTrain, 0, 0, batch);
  EXPECT_FALSE(other.append(key, 0, 4, batch));
  EXPECT_EQ(batch.size, 0);
  // Too large for the slot: not published, and the slot is free again.
  const ChunkKey big{0x10000001, 0, 10};
  ASSERT_EQ(maker.reserve(big, 176), SharedChunkCache::Reservation::kMine);
  maker.fill_blob(big, std::vector<char>(8192, 'x'));
  EXPECT_FALSE(other.copy_blob(big, got));
  EXPECT_EQ(other.reserve(big, 176), SharedChunkCache::Reservation::kMine);
}

}  // namespace
}  // namespace strata::data
