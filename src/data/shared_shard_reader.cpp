#include "data/shared_shard_reader.hpp"

#include <cstring>

#include "common/error.hpp"

namespace strata::data {
namespace {

// Cursor positions: passes far apart, so a later pass is always ahead.
constexpr int64_t kPassStride = int64_t(1) << 40;

struct Tail {
  int64_t samples;
  int64_t shard_end;  // 1: the shard ended inside (after) this chunk
};

}  // namespace

SharedShardReader::SharedShardReader(std::unique_ptr<SampleReader> own, SharedChunkCache& cache, int32_t stream,
                                     bool first_read)
    : own_(std::move(own)), cache_(cache), stream_(stream) {
  chunk_start_ = position_ = own_->position();
  if (first_read) cache_.expect(kPassStride, stream_);  // the first rewind starts pass 1
}

int32_t SharedShardReader::stream_of(int file, int shard, int num_shards) {
  return 2 + 2 * (num_shards * 4096 + shard) + file;
}

void SharedShardReader::rewind() {
  own_->rewind();
  sharing_ = true;
  ++pass_;
  chunk_ = 0, offset_ = 0;
  have_marks_ = shard_done_ = false;
  chunk_start_ = position_ = own_->position();
}

void SharedShardReader::seek(const ReaderPosition& position) {
  own_->seek(position);
  sharing_ = false;
  position_ = position;
}

SharedShardReader::State SharedShardReader::state() const {
  return {pass_, chunk_, offset_, shard_done_ ? 1 : 0, chunk_start_, position_, stats_};
}

void SharedShardReader::skip_to(const State& after, const State& before) {
  if (!sharing_ || before.pass != pass_ || before.chunk != chunk_ || before.offset != offset_) {
    throw Error("SharedShardReader::skip_to from another place of the shard",
                "skip only from the state the batch was made from");
  }
  chunk_ = after.chunk, offset_ = after.offset, shard_done_ = after.shard_done != 0;
  chunk_start_ = after.chunk_start, position_ = after.position;
  stats_.lines += after.stats.lines - before.stats.lines;
  stats_.samples += after.stats.samples - before.stats.samples;
  stats_.malformed += after.stats.malformed - before.stats.malformed;
  have_marks_ = false;  // chunk_ is loaded again (from the cache) when it is read
  set_cursor();
}

ReaderPosition SharedShardReader::position() const { return sharing_ ? position_ : own_->position(); }

void SharedShardReader::set_cursor() {
  cache_.set_cursor(pass_ * kPassStride + chunk_ * cache_.chunk_samples() + offset_, stream_);
}

int32_t SharedShardReader::read(int32_t max_samples, Batch& batch) {
  if (!sharing_) {
    const ParseStats before = own_->stats();
    const int32_t n = own_->read(max_samples, batch);
    const ParseStats& after = own_->stats();
    stats_.lines += after.lines - before.lines;
    stats_.samples += after.samples - before.samples;
    stats_.malformed += after.malformed - before.malformed;
    return n;
  }
  int32_t delivered = 0;
  while (delivered < max_samples && !shard_done_) {
    const int32_t before = batch.size;
    if (!load_chunk(max_samples - delivered, batch)) break;
    const int32_t n = batch.size - before;
    take(offset_, n);
    offset_ += n;
    delivered += n;
    const int32_t size = int32_t(marks_.size()) - 1;
    if (offset_ >= size) {
      const Mark& end = marks_.back();
      const Mark last = size > 0 ? marks_[size_t(size - 1)] : Mark{};
      // Lines after the chunk's last sample (malformed ones before the shard's end).
      stats_.lines += end.lines - last.lines;
      stats_.malformed += end.malformed - last.malformed;
      position_ = {end.byte_offset, end.line};
      chunk_start_ = position_;
      if (shard_end_after_) shard_done_ = true;
      ++chunk_;
      offset_ = 0;
      have_marks_ = false;
    }
  }
  set_cursor();
  return delivered;
}

// The statistics and position of samples [first, first + count) of chunk_.
void SharedShardReader::take(int32_t first, int32_t count) {
  if (count <= 0) return;
  const Mark before = first > 0 ? marks_[size_t(first - 1)] : Mark{};
  const Mark& after = marks_[size_t(first + count - 1)];
  stats_.lines += after.lines - before.lines;
  stats_.malformed += after.malformed - before.malformed;
  stats_.samples += count;
  position_ = {after.byte_offset, after.line};
}

bool SharedShardReader::load_chunk(int32_t want, Batch& batch) {
  const ChunkKey key{stream_, pass_, chunk_};
  const int32_t C = cache_.chunk_samples();
  auto unpack = [this](const std::vector<char>& extra) {
    Tail tail{};
    std::memcpy(&tail, extra.data(), sizeof(tail));
    marks_.resize(size_t(tail.samples) + 1);
    std::memcpy(marks_.data(), extra.data() + sizeof(tail), sizeof(Mark) * marks_.size());
    shard_end_after_ = tail.shard_end != 0;
    have_marks_ = true;
  };
  if (cache_.append(key, offset_, offset_ + want, batch, &extra_)) {
    unpack(extra_);
    return true;
  }
  using Reservation = SharedChunkCache::Reservation;
  const Reservation reservation =
      cache_.reserve(key, pass_ * kPassStride + (chunk_ + 1) * int64_t(C));
  if (reservation == Reservation::kTheirs && cache_.append(key, offset_, offset_ + want, batch, &extra_)) {
    unpack(extra_);
    return true;
  }
  make_chunk();
  if (reservation == Reservation::kMine) cache_.fill(key, made_, extra_);
  unpack(extra_);
  const int32_t size = made_.size;
  if (offset_ >= size) {
    // Nothing left of the shard: this chunk's lines (malformed, at the end) still count.
    const Mark& end = marks_.back();
    stats_.lines += end.lines, stats_.malformed += end.malformed;
    position_ = {end.byte_offset, end.line};
    shard_done_ = true;
    return false;
  }
  SharedChunkCache::append_samples(made_, offset_, std::min(want, size - offset_), batch);
  return true;
}

// Parses chunk_ with this producer's own reader, one sample at a time so that
// every sample's position is known.
void SharedShardReader::make_chunk() {
  cache_.count_made();
  const ReaderPosition at = own_->position();
  if (at.byte_offset != chunk_start_.byte_offset || at.line != chunk_start_.line) own_->seek(chunk_start_);
  made_.reset(0, 0);
  made_.tables.clear();
  const ParseStats start = own_->stats();
  std::vector<Mark> marks;
  const int32_t C = cache_.chunk_samples();
  bool ended = false;
  while (int32_t(marks.size()) < C) {
    if (own_->read(1, made_) == 0) {
      ended = true;
      break;
    }
    const ReaderPosition p = own_->position();
    const ParseStats& s = own_->stats();
    marks.push_back({p.byte_offset, p.line, s.lines - start.lines, s.malformed - start.malformed});
  }
  const ReaderPosition p = own_->position();
  const ParseStats& s = own_->stats();
  marks.push_back({p.byte_offset, p.line, s.lines - start.lines, s.malformed - start.malformed});
  const Tail tail{int64_t(marks.size()) - 1, ended ? 1 : 0};
  extra_.resize(sizeof(tail) + sizeof(Mark) * marks.size());
  std::memcpy(extra_.data(), &tail, sizeof(tail));
  std::memcpy(extra_.data() + sizeof(tail), marks.data(), sizeof(Mark) * marks.size());
}

}  // namespace strata::data
