// SharedShardReader: a shard's reader whose parsed chunks are shared by the
// node's producers of every co-trained model (data/shared_chunk_cache.hpp).
// Text and converted HDF5 files are read in order, so chunk k of a pass over
// a shard is the same for every model that reads that shard with the same
// number of shards: the first producer that needs it parses it (with its own
// reader, moved to the chunk's start) and the others copy it, with the
// reader's position and line counts after each sample so that position(),
// stats() and checkpoints are those of a reader that parsed it itself.
#pragma once

#include <memory>
#include <vector>

#include "data/sample_reader.hpp"
#include "data/shared_chunk_cache.hpp"

namespace strata::data {

class SharedShardReader : public SampleReader {
 public:
  // `stream` names the file and shard among the cache's streams (≥ 2; 0 and 1
  // are the random-access streams).
  // `first_read`: this reader is the producer's first (its training file), so
  // the others keep the shard's first chunks until it begins.
  SharedShardReader(std::unique_ptr<SampleReader> own, SharedChunkCache& cache, int32_t stream, bool first_read);

  int32_t read(int32_t max_samples, Batch& batch) override;
  // A new pass: chunks are shared again from the shard's start.
  void rewind() override;
  ReaderPosition position() const override;
  // Somewhere inside the shard (a resumed epoch): this pass is read alone.
  void seek(const ReaderPosition& position) override;
  const ParseStats& stats() const override { return stats_; }

  // Where a shared pass stands, to hand a whole batch to another model's
  // reader (shared de-duplicated batches): its sample in the pass, and what
  // reading up to it consumed.
  struct State {
    int64_t pass = 0, chunk = 0;
    int32_t offset = 0, shard_done = 0;
    ReaderPosition chunk_start, position;
    ParseStats stats;
  };
  bool sharing() const { return sharing_; }
  State state() const;
  // Continues from `after`, a state another reader of this shard reached from
  // this reader's state (the samples in between come as a built batch).
  void skip_to(const State& after, const State& before);
  int32_t stream() const { return stream_; }

  // The cache stream of a file's shard: `file` 0 training, 1 evaluation.
  static int32_t stream_of(int file, int shard, int num_shards);

  // What the maker records after each sample of a chunk, and after the chunk.
  struct Mark {
    int64_t byte_offset = 0, line = 0;  // the reader's position after it
    int64_t lines = 0, malformed = 0;   // lines and malformed lines read since the chunk's start
  };

 private:
  // Chunk `chunk_` from the cache or parsed here; false at the shard's end.
  bool load_chunk(int32_t want, Batch& batch);
  void make_chunk();
  void take(int32_t first, int32_t count);
  void set_cursor();

  std::unique_ptr<SampleReader> own_;
  SharedChunkCache& cache_;
  int32_t stream_;
  bool sharing_ = true;
  int64_t pass_ = 0;
  int64_t chunk_ = 0;       // the chunk being read
  int32_t offset_ = 0;      // samples of it already delivered
  bool have_marks_ = false; // marks_ are chunk_'s
  bool shard_done_ = false;
  std::vector<Mark> marks_; // per sample of chunk_, then one for its end
  bool shard_end_after_ = false;  // chunk_ ended at the shard's end
  ReaderPosition chunk_start_;
  ReaderPosition position_;
  ParseStats stats_;
  Batch made_;             // a chunk parsed here
  std::vector<char> extra_;
};

}  // namespace strata::data
