#include "data/shared_chunk_cache.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <new>
#include <thread>

#include "common/error.hpp"
#include "common/futex.hpp"

namespace strata::data {
namespace {

constexpr uint64_t kMagic = 0x5354524154414348ull;  // "STRATACH"
constexpr int64_t kRetired = std::numeric_limits<int64_t>::max();
// A consumer that has not begun may take this long to start (model set-up,
// reading a corpus) before the others stop waiting for it.
constexpr double kStartGraceS = 60.0;
// A chunk another consumer is making is waited for this long at most.
constexpr double kMakingWaitS = 0.1;
// The longest sleep while a slower consumer holds a slot: its move wakes the
// waiter, so the timeout only bounds how late a consumer that went stale is noticed.
constexpr int kSlowerConsumerTimeoutUs = 50000;
constexpr int kMakingPollUs = 250;  // the longest sleep while another consumer makes the chunk

static_assert(std::atomic<int64_t>::is_always_lock_free && std::atomic<uint64_t>::is_always_lock_free,
              "the cache's atomics live in memory shared between processes");

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

size_t align8(size_t n) { return (n + 7) & ~size_t(7); }
size_t align64(size_t n) { return (n + 63) & ~size_t(63); }

// A chunk in its slot: this head, each table's byte offset, labels, dense
// features, then per table its bag offsets (from 0) and keys.
struct ChunkHead {
  int32_t size;
  int32_t num_dense;
  int32_t num_tasks;
  int32_t num_tables;
  int64_t extra_at;     // the maker's extra bytes, after the tables
  int64_t extra_bytes;
};

size_t table_bytes(const Batch& chunk) {
  size_t bytes = sizeof(ChunkHead) + sizeof(int64_t) * chunk.tables.size();
  bytes = align8(bytes + sizeof(float) * (chunk.labels.size() + chunk.dense.size()));
  for (const SparseBags& bags : chunk.tables) {
    bytes = align8(bytes + sizeof(int32_t) * bags.offsets.size());
    bytes += sizeof(uint64_t) * bags.keys.size();
  }
  return bytes;
}

size_t flat_bytes(const Batch& chunk, size_t extra = 0) { return table_bytes(chunk) + extra; }

void write_flat(const Batch& chunk, const std::vector<char>& extra, char* out) {
  const size_t extra_at = table_bytes(chunk);
  ChunkHead head{chunk.size, chunk.num_dense, chunk.num_tasks, int32_t(chunk.tables.size()), int64_t(extra_at),
                 int64_t(extra.size())};
  std::memcpy(out, &head, sizeof(head));
  if (!extra.empty()) std::memcpy(out + extra_at, extra.data(), extra.size());
  int64_t* table_at = reinterpret_cast<int64_t*>(out + sizeof(head));
  size_t at = sizeof(head) + sizeof(int64_t) * chunk.tables.size();
  std::memcpy(out + at, chunk.labels.data(), sizeof(float) * chunk.labels.size());
  at += sizeof(float) * chunk.labels.size();
  std::memcpy(out + at, chunk.dense.data(), sizeof(float) * chunk.dense.size());
  at = align8(at + sizeof(float) * chunk.dense.size());
  for (size_t t = 0; t < chunk.tables.size(); ++t) {
    const SparseBags& bags = chunk.tables[t];
    table_at[t] = int64_t(at);
    const int32_t base = bags.offsets.front();
    int32_t* offsets = reinterpret_cast<int32_t*>(out + at);
    for (size_t i = 0; i < bags.offsets.size(); ++i) offsets[i] = bags.offsets[i] - base;
    at = align8(at + sizeof(int32_t) * bags.offsets.size());
    std::memcpy(out + at, bags.keys.data() + base, sizeof(uint64_t) * (bags.keys.size() - size_t(base)));
    at += sizeof(uint64_t) * (bags.keys.size() - size_t(base));
  }
}

// What a batch holds before an append, to undo it.
struct BatchMark {
  size_t labels, dense;
  std::vector<std::pair<size_t, size_t>> tables;  // offsets, keys
  explicit BatchMark(const Batch& b) : labels(b.labels.size()), dense(b.dense.size()) {
    for (const SparseBags& bags : b.tables) tables.emplace_back(bags.offsets.size(), bags.keys.size());
  }
  void restore(Batch& b) const {
    b.labels.resize(labels), b.dense.resize(dense);
    for (size_t t = 0; t < tables.size(); ++t) {
      b.tables[t].offsets.resize(tables[t].first);
      b.tables[t].keys.resize(tables[t].second);
    }
  }
};

}  // namespace

struct SharedChunkCache::Header {
  uint64_t magic;
  int32_t slots;
  int32_t consumers;
  uint64_t slot_bytes;
  int32_t chunk_samples;
  int32_t unused;
  int64_t created_ns;
  // Bumped whenever a slot is filled: consumers waiting for a chunk that
  // another one makes sleep on this word (a futex).
  std::atomic<uint32_t> changes;
  std::atomic<uint32_t> sleepers;
};

struct alignas(64) SharedChunkCache::Consumer {
  std::atomic<int64_t> cursor;     // kRetired when it needs nothing more
  std::atomic<int64_t> heartbeat;  // ns of its last report; 0: not begun
  std::atomic<int64_t> stream;     // the stream its cursor is on
  // Bumped whenever its cursor moves or it retires: consumers that wait for
  // it to pass a chunk sleep on this word (a futex), not on every change.
  std::atomic<uint32_t> moves;
  std::atomic<uint32_t> sleepers;
};

// seq is even when the slot is stable, odd while one consumer writes it; 0: never written.
struct alignas(64) SharedChunkCache::Slot {
  std::atomic<uint64_t> seq;
  std::atomic<int64_t> stream;
  std::atomic<int64_t> epoch;
  std::atomic<int64_t> chunk;
  std::atomic<int64_t> end_position;
  std::atomic<uint64_t> bytes;
};

size_t SharedChunkCache::bytes_needed(const SharedChunkGeometry& g) {
  return align64(sizeof(Header)) + sizeof(Consumer) * size_t(g.consumers) +
         size_t(g.slots) * (sizeof(Slot) + align64(g.slot_bytes));
}

void SharedChunkCache::initialize(void* memory, const SharedChunkGeometry& g) {
  if (g.slots < 1 || g.consumers < 1 || g.chunk_samples < 1 || g.slot_bytes < 1024) {
    throw Error("a shared chunk cache needs at least one slot of 1 KiB, one consumer and one sample per chunk");
  }
  std::memset(memory, 0, bytes_needed(g));
  auto* header = new (memory) Header{};
  header->slots = g.slots;
  header->consumers = g.consumers;
  header->slot_bytes = align64(g.slot_bytes);
  header->chunk_samples = g.chunk_samples;
  header->created_ns = now_ns();
  char* base = static_cast<char*>(memory) + align64(sizeof(Header));
  for (int c = 0; c < g.consumers; ++c) {
    auto* consumer = new (base + sizeof(Consumer) * size_t(c)) Consumer{};
    consumer->cursor.store(0, std::memory_order_relaxed);
    consumer->heartbeat.store(0, std::memory_order_relaxed);
    consumer->stream.store(0, std::memory_order_relaxed);
  }
  base += sizeof(Consumer) * size_t(g.consumers);
  for (int s = 0; s < g.slots; ++s) new (base + size_t(s) * (sizeof(Slot) + align64(g.slot_bytes))) Slot{};
  std::atomic_thread_fence(std::memory_order_release);
  header->magic = kMagic;
}

SharedChunkCache::SharedChunkCache(void* memory, const SharedChunkGeometry& geometry, int me)
    : geometry_(geometry), me_(me) {
  header_ = static_cast<Header*>(memory);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (header_->magic != kMagic || header_->slots != geometry.slots || header_->consumers != geometry.consumers ||
      header_->chunk_samples != geometry.chunk_samples || me < 0 || me >= geometry.consumers) {
    throw Error("the shared chunk cache in this node's shared memory does not have the geometry this rank expects",
                "every producer of the node must attach to the cache its node created");
  }
  geometry_.slot_bytes = header_->slot_bytes;
  char* base = static_cast<char*>(memory) + align64(sizeof(Header));
  consumers_ = reinterpret_cast<Consumer*>(base);
  slots_ = base + sizeof(Consumer) * size_t(geometry.consumers);
}

SharedChunkCache::~SharedChunkCache() { retire(); }

SharedChunkCache::Slot& SharedChunkCache::slot_of(const ChunkKey& key) {
  // Consecutive chunks of an epoch take consecutive slots.
  const uint64_t index = uint64_t(key.chunk) + uint64_t(key.epoch) * 131u + uint64_t(key.stream) * 7919u;
  return *reinterpret_cast<Slot*>(slots_ + (index % uint64_t(geometry_.slots)) * (sizeof(Slot) + geometry_.slot_bytes));
}

char* SharedChunkCache::slot_data(const Slot& slot) {
  return const_cast<char*>(reinterpret_cast<const char*>(&slot)) + sizeof(Slot);
}

void SharedChunkCache::set_cursor(int64_t position, int32_t stream) {
  Consumer& mine = consumers_[me_];
  if (mine.cursor.load(std::memory_order_relaxed) == kRetired) return;
  mine.stream.store(stream, std::memory_order_relaxed);
  mine.cursor.store(position, std::memory_order_release);
  mine.heartbeat.store(now_ns(), std::memory_order_release);
  announce(mine.moves, mine.sleepers);
}

void SharedChunkCache::announce(std::atomic<uint32_t>& word, std::atomic<uint32_t>& sleepers) {
  word.fetch_add(1);  // seq_cst: ordered before the load of sleepers
  if (sleepers.load() > 0) futex_wake_all(word);
}

void SharedChunkCache::sleep_on(std::atomic<uint32_t>& word, std::atomic<uint32_t>& sleepers, uint32_t seen,
                                int timeout_us) {
  sleepers.fetch_add(1);
  futex_wait(word, seen, timeout_us);
  sleepers.fetch_sub(1);
}

void SharedChunkCache::expect(int64_t position, int32_t stream) {
  Consumer& mine = consumers_[me_];
  if (mine.heartbeat.load(std::memory_order_relaxed) != 0 || mine.cursor.load(std::memory_order_relaxed) == kRetired) {
    return;  // already reading
  }
  mine.stream.store(stream, std::memory_order_relaxed);
  mine.cursor.store(position, std::memory_order_release);
}

void SharedChunkCache::retire() {
  consumers_[me_].cursor.store(kRetired, std::memory_order_release);
  consumers_[me_].heartbeat.store(now_ns(), std::memory_order_release);
  announce(consumers_[me_].moves, consumers_[me_].sleepers);
}

int SharedChunkCache::needed_by(int64_t held_end, int64_t held_stream) const {
  const int64_t now = now_ns();
  const int64_t stale = int64_t(geometry_.stale_after_s * 1e9);
  const int64_t window = int64_t(geometry_.slots) * geometry_.chunk_samples;
  for (int c = 0; c < geometry_.consumers; ++c) {
    if (c == me_) continue;
    const int64_t cursor = consumers_[c].cursor.load(std::memory_order_acquire);
    if (cursor == kRetired || consumers_[c].stream.load(std::memory_order_relaxed) != held_stream) continue;
    const int64_t heartbeat = consumers_[c].heartbeat.load(std::memory_order_acquire);
    if (heartbeat == 0 ? now - header_->created_ns > int64_t(kStartGraceS * 1e9) : now - heartbeat > stale) continue;
    // A consumer far behind the held chunk would not reach it before it is overwritten anyway.
    if (cursor < held_end && cursor >= held_end - window) return c;
  }
  return -1;
}

bool SharedChunkCache::holds(const Slot& slot, const ChunkKey& key) const {
  return slot.stream.load(std::memory_order_relaxed) == key.stream &&
         slot.epoch.load(std::memory_order_relaxed) == key.epoch &&
         slot.chunk.load(std::memory_order_relaxed) == key.chunk;
}

// Another consumer is making this very chunk: its generation takes about a
// millisecond, so waiting (until its fill wakes us) beats making it twice.
void SharedChunkCache::wait_while_made(const Slot& slot, const ChunkKey& key) {
  if (!((slot.seq.load(std::memory_order_acquire) & 1) && holds(slot, key))) return;
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    const uint32_t seen = header_->changes.load();
    if (!((slot.seq.load(std::memory_order_acquire) & 1) && holds(slot, key)) ||
        std::chrono::steady_clock::now() - start >= std::chrono::duration<double>(kMakingWaitS)) {
      break;
    }
    sleep_on(header_->changes, header_->sleepers, seen, kMakingPollUs);
  }
  stats_.making_wait_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

bool SharedChunkCache::copy_blob(const ChunkKey& key, std::vector<char>& out) {
  Slot& slot = slot_of(key);
  wait_while_made(slot, key);
  const uint64_t seq = slot.seq.load(std::memory_order_acquire);
  if (seq == 0 || (seq & 1) || !holds(slot, key)) return false;
  const char* data = slot_data(slot);
  const size_t bytes = std::min<uint64_t>(slot.bytes.load(std::memory_order_relaxed), geometry_.slot_bytes);
  ChunkHead head{};
  if (bytes < sizeof(head)) return false;
  std::memcpy(&head, data, sizeof(head));
  if (head.size != 0 || head.extra_at < 0 || head.extra_bytes <= 0 || size_t(head.extra_at + head.extra_bytes) > bytes) {
    return false;
  }
  out.assign(data + head.extra_at, data + head.extra_at + head.extra_bytes);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (slot.seq.load(std::memory_order_relaxed) != seq) return false;
  stats_.hits += 1;
  return true;
}

void SharedChunkCache::fill_blob(const ChunkKey& key, const std::vector<char>& bytes) {
  Batch empty;
  empty.reset(0, 0);
  fill(key, empty, bytes);
}

bool SharedChunkCache::append(const ChunkKey& key, int32_t from, int32_t to, Batch& batch,
                              std::vector<char>* extra) {
  wait_while_made(slot_of(key), key);
  const int32_t before = batch.size;
  if (copy_from_slot(key, from, to, batch, extra)) {
    stats_.hits += 1;
    stats_.samples_copied += int64_t(batch.size - before);
    return true;
  }
  return false;
}

bool SharedChunkCache::copy_from_slot(const ChunkKey& key, int32_t from, int32_t to, Batch& batch,
                                      std::vector<char>* extra) {
  Slot& slot = slot_of(key);
  const uint64_t seq = slot.seq.load(std::memory_order_acquire);
  if (seq == 0 || (seq & 1) || !holds(slot, key)) return false;
  const char* data = slot_data(slot);
  const size_t bytes = std::min<uint64_t>(slot.bytes.load(std::memory_order_relaxed), geometry_.slot_bytes);
  ChunkHead head{};
  std::memcpy(&head, data, sizeof(head));
  to = std::min(to, head.size);
  if (head.num_dense != batch.num_dense || head.num_tasks != batch.num_tasks ||
      head.num_tables != int32_t(batch.tables.size()) || from < 0 || from >= to || head.extra_at < 0 ||
      head.extra_bytes < 0 || size_t(head.extra_at + head.extra_bytes) > bytes) {
    return false;
  }
  const BatchMark mark(batch);
  const size_t n = size_t(to - from);
  const size_t K = size_t(head.num_tasks), D = size_t(head.num_dense);
  size_t at = sizeof(head) + sizeof(int64_t) * size_t(head.num_tables);
  const float* labels = reinterpret_cast<const float*>(data + at);
  batch.labels.insert(batch.labels.end(), labels + size_t(from) * K, labels + size_t(to) * K);
  at += sizeof(float) * size_t(head.size) * K;
  const float* dense = reinterpret_cast<const float*>(data + at);
  batch.dense.insert(batch.dense.end(), dense + size_t(from) * D, dense + size_t(to) * D);
  bool consistent = true;
  for (int t = 0; t < head.num_tables && consistent; ++t) {
    int64_t table_at = 0;
    std::memcpy(&table_at, data + sizeof(head) + sizeof(int64_t) * size_t(t), sizeof(table_at));
    const size_t offsets_bytes = sizeof(int32_t) * (size_t(head.size) + 1);
    if (table_at < 0 || size_t(table_at) + offsets_bytes > bytes) {
      consistent = false;
      break;
    }
    const int32_t* offsets = reinterpret_cast<const int32_t*>(data + table_at);
    const size_t keys_at = align8(size_t(table_at) + offsets_bytes);
    const int32_t first = offsets[from], last = offsets[to];
    if (first < 0 || last < first || keys_at + sizeof(uint64_t) * size_t(last) > bytes) {
      consistent = false;
      break;
    }
    SparseBags& bags = batch.tables[size_t(t)];
    const int32_t base = bags.offsets.back() - first;
    for (int32_t i = from + 1; i <= to; ++i) bags.offsets.push_back(base + offsets[i]);
    const uint64_t* keys = reinterpret_cast<const uint64_t*>(data + keys_at);
    bags.keys.insert(bags.keys.end(), keys + first, keys + last);
  }
  // The slot may have been rewritten while this copied it (a consumer that
  // was thought stale): then the copy is discarded.
  if (extra) extra->assign(data + head.extra_at, data + head.extra_at + head.extra_bytes);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (!consistent || slot.seq.load(std::memory_order_relaxed) != seq) {
    mark.restore(batch);
    return false;
  }
  batch.size += int32_t(n);
  return true;
}

SharedChunkCache::Reservation SharedChunkCache::reserve(const ChunkKey& key, int64_t end_position) {
  Slot& slot = slot_of(key);
  std::chrono::steady_clock::time_point waiting_since{};
  Reservation result = Reservation::kNone;
  while (true) {
    uint64_t seq = slot.seq.load(std::memory_order_acquire);
    if (seq != 0 && holds(slot, key)) {
      result = Reservation::kTheirs;  // being made, or made, by another consumer
      break;
    }
    if (seq & 1) break;  // another consumer is making another chunk here
    const int64_t held_end = slot.end_position.load(std::memory_order_relaxed);
    if (seq != 0 && held_end >= end_position) break;  // it holds a later chunk, which someone ahead needs
    const int64_t held_stream = slot.stream.load(std::memory_order_relaxed);
    const int blocker = seq == 0 ? -1 : needed_by(held_end, held_stream);
    if (blocker < 0) {
      if (!slot.seq.compare_exchange_strong(seq, seq + 1, std::memory_order_acq_rel)) continue;
      slot.stream.store(key.stream, std::memory_order_relaxed);
      slot.epoch.store(key.epoch, std::memory_order_relaxed);
      slot.chunk.store(key.chunk, std::memory_order_relaxed);
      slot.end_position.store(end_position, std::memory_order_relaxed);
      slot.bytes.store(0, std::memory_order_relaxed);
      result = Reservation::kMine;
      break;
    }
    // A slower consumer still needs the held chunk: wait for it (saying that
    // this one is alive, so that it does not stop waiting for us in turn).
    if (waiting_since == std::chrono::steady_clock::time_point{}) waiting_since = std::chrono::steady_clock::now();
    // This consumer is a whole cache window ahead of that one: it sleeps until
    // that one moves (a consumer going stale, or one that takes the slot, is
    // caught by the timeout). The check after reading the word closes the race.
    consumers_[me_].heartbeat.store(now_ns(), std::memory_order_release);
    Consumer& slower = consumers_[blocker];
    const uint32_t seen = slower.moves.load();
    if (needed_by(held_end, held_stream) == blocker) {
      sleep_on(slower.moves, slower.sleepers, seen, kSlowerConsumerTimeoutUs);
    }
  }
  if (waiting_since != std::chrono::steady_clock::time_point{}) {
    stats_.wait_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - waiting_since).count();
  }
  if (result == Reservation::kNone) stats_.not_published += 1;
  return result;
}

void SharedChunkCache::fill(const ChunkKey& key, const Batch& chunk, const std::vector<char>& extra) {
  Slot& slot = slot_of(key);
  const uint64_t seq = slot.seq.load(std::memory_order_relaxed);
  if (!(seq & 1) || !holds(slot, key)) {
    throw Error("SharedChunkCache::fill of a chunk this consumer has not reserved",
                "call fill() only after reserve() returned kMine");
  }
  const size_t bytes = flat_bytes(chunk, extra.size());
  if (bytes > geometry_.slot_bytes) {
    // Too large for a slot: the slot is left empty (its old chunk was no longer needed).
    slot.chunk.store(-1, std::memory_order_relaxed);
    slot.end_position.store(0, std::memory_order_relaxed);
    stats_.not_published += 1;
  } else {
    write_flat(chunk, extra, slot_data(slot));
    slot.bytes.store(bytes, std::memory_order_relaxed);
    stats_.published += 1;
  }
  slot.seq.store(seq + 1, std::memory_order_release);
  announce(header_->changes, header_->sleepers);
}

void SharedChunkCache::publish(const ChunkKey& key, int64_t end_position, const Batch& chunk) {
  if (flat_bytes(chunk) > geometry_.slot_bytes) {
    stats_.not_published += 1;
    return;
  }
  if (reserve(key, end_position) == Reservation::kMine) fill(key, chunk);
}

void SharedChunkCache::append_samples(const Batch& from, int32_t first, int32_t count, Batch& to) {
  if (count <= 0) return;
  const size_t K = size_t(from.num_tasks), D = size_t(from.num_dense);
  to.labels.insert(to.labels.end(), from.labels.begin() + ptrdiff_t(size_t(first) * K),
                   from.labels.begin() + ptrdiff_t(size_t(first + count) * K));
  to.dense.insert(to.dense.end(), from.dense.begin() + ptrdiff_t(size_t(first) * D),
                  from.dense.begin() + ptrdiff_t(size_t(first + count) * D));
  for (size_t t = 0; t < from.tables.size(); ++t) {
    const SparseBags& src = from.tables[t];
    SparseBags& dst = to.tables[t];
    const int32_t lo = src.offsets[size_t(first)], hi = src.offsets[size_t(first + count)];
    const int32_t base = dst.offsets.back() - lo;
    for (int32_t i = first + 1; i <= first + count; ++i) dst.offsets.push_back(base + src.offsets[size_t(i)]);
    dst.keys.insert(dst.keys.end(), src.keys.begin() + lo, src.keys.begin() + hi);
  }
  to.size += count;
}

}  // namespace strata::data
