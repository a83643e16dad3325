// SharedChunkCache: samples made once and read by every producer of a node
// (issue 14, docs/MULTI_MODEL.md "Shared ingestion"). When several models
// co-train on the same data, each model's producers would generate, parse and
// hash the same samples again. Instead the stream is cut into chunks of
// `chunk_samples` consecutive samples; the first producer that needs a chunk
// makes it and publishes it in a slot of memory shared by the node's producers
// (comm::NodeSharedMemory), and the others copy it from there.
//
// A chunk's content is a pure function of its key (stream, epoch, chunk), so a
// reader that finds another chunk in the slot, or one being overwritten (a
// sequence lock), simply makes the chunk itself: sharing can save work but can
// never change a batch. A writer waits while a live consumer still needs the
// chunk its slot holds (its cursor is before the chunk's end and within the
// cache's window), so the models move through the data together and each chunk
// is made once; a consumer that has retired, or has not reported for
// `stale_after_s` (an evaluation, a checkpoint), does not hold anyone up.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "data/batch.hpp"

namespace strata::data {

struct ChunkKey {
  int32_t stream = 0;  // 0 training, 1 evaluation
  int64_t epoch = 0;
  int64_t chunk = 0;   // samples [chunk * chunk_samples, +chunk_samples)
};

struct SharedChunkStats {
  int64_t hits = 0;          // chunk reads served by the cache
  int64_t made = 0;          // chunks this consumer made itself (count_made)
  int64_t published = 0;     // chunks it made and published
  int64_t not_published = 0; // made but not published: too large for a slot, or the slot was taken
  int64_t samples_copied = 0;
  double wait_s = 0;         // waiting for a slot that a slower consumer still needed
  double making_wait_s = 0;  // waiting for a chunk another consumer was making
};

struct SharedChunkGeometry {
  int slots = 64;
  size_t slot_bytes = 1 << 20;
  int consumers = 1;
  int chunk_samples = 256;
  double stale_after_s = 0.5;
};

class SharedChunkCache {
 public:
  // Bytes of shared memory a cache of this geometry needs.
  static size_t bytes_needed(const SharedChunkGeometry& geometry);
  // Lays the cache out in `memory` (zeroed, bytes_needed() long): one process
  // of the node does this before any consumer attaches.
  static void initialize(void* memory, const SharedChunkGeometry& geometry);
  // Consumer `me` (0 .. consumers-1) of an initialized cache.
  SharedChunkCache(void* memory, const SharedChunkGeometry& geometry, int me);
  ~SharedChunkCache();
  SharedChunkCache(const SharedChunkCache&) = delete;
  SharedChunkCache& operator=(const SharedChunkCache&) = delete;

  int chunk_samples() const { return geometry_.chunk_samples; }

  // Appends samples [from, to) of chunk `key` to `batch` (which has the chunk's
  // shape) and returns true, or returns false with `batch` unchanged when the
  // cache does not hold that chunk. A chunk another consumer is making is
  // waited for (briefly: past kMakingWaitS it is a miss).
  // `to` past the chunk's end is clamped to it (batch.size says what came);
  // `extra`, if given, receives the bytes the maker attached (fill).
  bool append(const ChunkKey& key, int32_t from, int32_t to, Batch& batch, std::vector<char>* extra = nullptr);

  // Blobs: a slot may hold bytes instead of samples (a de-duplicated batch in
  // its wire format). Copies the bytes of `key` into `out`; false on a miss.
  bool copy_blob(const ChunkKey& key, std::vector<char>& out);
  // Publishes a blob reserved with kMine.
  void fill_blob(const ChunkKey& key, const std::vector<char>& bytes);

  // After a miss: who makes the chunk. kMine: this consumer holds the chunk's
  // slot, makes the chunk and hands it to fill(). kTheirs: another consumer
  // holds it or has filled it (append again). kNone: make it without
  // publishing. `end_position` is the chunk's end on the consumers' cursor
  // scale. Waits while a live consumer still needs the chunk the slot holds.
  enum class Reservation { kMine, kTheirs, kNone };
  Reservation reserve(const ChunkKey& key, int64_t end_position);
  // Publishes the chunk reserved with kMine (keys in bag order, not de-duplicated).
  // `extra` travels with it (a reader's positions per sample, for instance).
  void fill(const ChunkKey& key, const Batch& chunk, const std::vector<char>& extra = {});
  // reserve() and fill() in one: offers a chunk this consumer has made.
  void publish(const ChunkKey& key, int64_t end_position, const Batch& chunk);
  // This consumer will never again ask for a chunk that ends at or before
  // `position`; also says that it is alive.
  // Cursors are per stream: a consumer blocks only slots of the stream it reads.
  void set_cursor(int64_t position, int32_t stream = 0);
  // Before its first read: where this consumer will begin. Until it reads (or
  // for a minute at most) the others keep the chunks from there for it.
  void expect(int64_t position, int32_t stream);
  // This consumer needs nothing more (the end of its training).
  void retire();

  // The caller made a chunk itself (for the statistics).
  void count_made() { stats_.made += 1; }
  const SharedChunkStats& stats() const { return stats_; }
  static void append_samples(const Batch& from, int32_t first, int32_t count, Batch& to);

 private:
  struct Header;
  struct Consumer;
  struct Slot;
  bool copy_from_slot(const ChunkKey& key, int32_t from, int32_t to, Batch& batch, std::vector<char>* extra);
  bool holds(const Slot& slot, const ChunkKey& key) const;
  // Waits (briefly) while another consumer is making `key` in `slot`.
  void wait_while_made(const Slot& slot, const ChunkKey& key);
  Slot& slot_of(const ChunkKey& key);
  char* slot_data(const Slot& slot);
  // Bumps `word` and wakes the consumers sleeping on it.
  static void announce(std::atomic<uint32_t>& word, std::atomic<uint32_t>& sleepers);
  // Sleeps until `word` moves on from `seen` (read before the caller's check), at most timeout_us.
  static void sleep_on(std::atomic<uint32_t>& word, std::atomic<uint32_t>& sleepers, uint32_t seen, int timeout_us);
  // The first other live consumer that still needs the chunk that ends at `held_end`, else -1.
  int needed_by(int64_t held_end, int64_t held_stream) const;

  SharedChunkGeometry geometry_;
  int me_;
  Header* header_;
  Consumer* consumers_;
  char* slots_;
  SharedChunkStats stats_;
};

}  // namespace strata::data
