#include "runtime/batch_source.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <spdlog/spdlog.h>

#include "common/error.hpp"
#include "data/hdf5_dataset.hpp"
#include "data/shared_chunk_cache.hpp"
#include "data/shared_shard_reader.hpp"
#include "data/sequence_hdf5.hpp"
#include "data/sequence_next_item.hpp"
#include "data/sequence_samples.hpp"
#include "data/synthetic.hpp"
#include "model/model.hpp"
#include "runtime/shared_ingest.hpp"

namespace strata::runtime {
namespace {

// After a miss in the shared de-duplicated batches: builds the batch here
// (next() and de-duplication) and, when this producer holds the batch's slot,
// publishes it, `prefix` (if any) writing what precedes its wire format. A
// batch that does not come frees the slot. *published says whether `blob` now
// holds the batch (after the prefix).
bool make_shared_batch(BatchSource& source, int trainer, data::Batch& batch, const std::vector<int32_t>& keys_of,
                       data::SharedChunkCache& batches, const data::ChunkKey& key,
                       data::SharedChunkCache::Reservation reservation, std::vector<char>& blob,
                       const std::function<void(std::vector<char>&)>& prefix, bool* published = nullptr) {
  const bool mine = reservation == data::SharedChunkCache::Reservation::kMine;
  if (published) *published = false;
  if (!source.next(trainer, batch)) {
    if (mine) batches.fill_blob(key, {});
    return false;
  }
  data::deduplicate(batch, keys_of);
  batches.count_made();
  if (mine) {
    blob.clear();
    if (prefix) prefix(blob);
    data::serialize(batch, blob);
    batches.fill_blob(key, blob);
    if (published) *published = true;
  }
  return true;
}

// Behaviour sequences: an event file, the generator, or their HDF5 conversion.
bool sequence_source(const DataOptions& options) {
  return options.source == "sequences" || options.source == "synthetic_sequences" ||
         (options.source == "hdf5" && data::is_sequence_hdf5(options.train));
}

// Text files shard by bytes (aligned to lines), converted HDF5 files by rows.
std::unique_ptr<data::SampleReader> open_file_reader(const DataOptions& options, const std::string& path, int shard,
                                                     int num_shards) {
  if (options.source == "hdf5") return data::open_hdf5_reader(options, path, shard, num_shards);
  return data::open_text_reader(options, path, shard, num_shards);
}

// Random-access sources: sample i of a stream is a pure function of i (synthetic CTR
// data, and click-through samples cut from behaviour sequences).
template <class Dataset>
class IndexedBatchSource : public BatchSource {
 public:
  IndexedBatchSource(Dataset dataset, const RunOptions& options, std::vector<int> trainers, int total_trainers,
                     data::ParseStats stats = {}, data::SharedChunkCache* shared = nullptr,
                     data::SharedChunkCache* shared_batches = nullptr)
      : dataset_(std::move(dataset)),
        stats_(stats),
        trainers_(std::move(trainers)),
        total_trainers_(total_trainers),
        batch_size_(options.train.batch_size),
        eval_batch_size_(options.train.eval_batch_size),
        shared_(shared),
        shared_batches_(shared_batches) {
    if (shared_batches_) {
      batch_stream_ = batch_stream_of(batch_size_, model::tied_tables(options.model, dataset_.num_tables()));
      shared_batches_->expect(0, batch_stream_);
    }
  }

  bool next_deduplicated(int trainer, data::Batch& batch, const std::vector<int32_t>& keys_of) override {
    wire_valid_ = false;
    const bool train = phase_ == Phase::kTrain;
    const int64_t first = base_ + (next_step_[size_t(trainer)] * total_trainers_ + trainer) * batch_size_;
    if (!shared_batches_ || !train || first % batch_size_ != 0 ||
        batch_stream_ != batch_stream_of(batch_size_, keys_of)) {
      return BatchSource::next_deduplicated(trainer, batch, keys_of);
    }
    const int64_t size = dataset_.size(data::Stream::kTrain);
    const data::ChunkKey key{batch_stream_, epoch_, first / batch_size_};
    const auto taken = [&] {
      ++next_step_[size_t(trainer)];
      if (wire_only_) {
        batch.size = batch_size_;  // forwarded as it is: full, as every shared batch
      } else {
        data::deserialize(blob_.data(), blob_.size(), batch);
      }
      wire_valid_ = true;
      note_progress(size);
      return true;
    };
    if (first + batch_size_ <= size && shared_batches_->copy_blob(key, blob_)) return taken();
    using Reservation = data::SharedChunkCache::Reservation;
    Reservation reservation = Reservation::kNone;
    if (first + batch_size_ <= size) {
      reservation = shared_batches_->reserve(key, epoch_ * size + first + batch_size_);
      if (reservation == Reservation::kTheirs && shared_batches_->copy_blob(key, blob_)) return taken();
    }
    return make_shared_batch(*this, trainer, batch, keys_of, *shared_batches_, key, reservation, blob_, {},
                             &wire_valid_);
  }

  const std::vector<char>* last_wire() const override { return wire_valid_ ? &blob_ : nullptr; }

  data::SharedChunkStats shared_batch_stats() const override {
    return shared_batches_ ? shared_batches_->stats() : data::SharedChunkStats{};
  }

  void start_phase(Phase phase) override {
    if (phase_ == Phase::kTrain && started_training_) {  // past this epoch
      if (shared_) shared_->set_cursor((epoch_ + 1) * dataset_.size(data::Stream::kTrain));
      if (shared_batches_) shared_batches_->set_cursor((epoch_ + 1) * dataset_.size(data::Stream::kTrain), batch_stream_);
    }
    phase_ = phase;
    next_step_.assign(total_trainers_, 0);
    // The stream is a pure function of the sample index: an interrupted epoch
    // continues at the first sample not trained, whatever the new layout.
    base_ = 0;
    if (phase == Phase::kTrain) {
      // Training phases are the epochs, in order; a resumed one continues its own.
      epoch_ = started_training_ ? epoch_ + 1 : 0;
      started_training_ = true;
      if (pending_resume_) {
        base_ = *pending_resume_;
        epoch_ = pending_epoch_;
        pending_resume_.reset();
      }
    }
  }

  void resume_epoch(const EpochResume& resume) override {
    pending_resume_ = resume.epoch_samples;
    pending_epoch_ = resume.epoch;
  }

  bool next(int trainer, data::Batch& batch) override {
    const bool train = phase_ == Phase::kTrain;
    const int64_t per_batch = train ? batch_size_ : eval_batch_size_;
    const data::Stream stream = train ? data::Stream::kTrain : data::Stream::kEval;
    const int64_t size = dataset_.size(stream);
    const int64_t step = next_step_[trainer]++;
    const int64_t first = base_ + (step * total_trainers_ + trainer) * per_batch;
    const int64_t count = std::min<int64_t>(per_batch, size - first);
    if (count <= 0 || (train && count < per_batch)) {
      if (train) {  // this epoch needs nothing more
        if (shared_) shared_->set_cursor((epoch_ + 1) * size);
        if (shared_batches_) shared_batches_->set_cursor((epoch_ + 1) * size, batch_stream_);
      }
      return false;
    }
    batch.reset(dataset_.num_dense(), dataset_.num_tables());
    if (shared_ && train) {
      assemble_from_chunks(first, static_cast<int32_t>(count), batch);
      note_progress(size);
    } else {
      dataset_.generate(stream, first, static_cast<int32_t>(count), batch, epoch_);
    }
    batch.first_sample = first;
    return true;
  }

  data::ParseStats stats() const override { return stats_; }
  data::SharedChunkStats shared_stats() const override { return shared_ ? shared_->stats() : data::SharedChunkStats{}; }
  bool has_eval() const override { return dataset_.size(data::Stream::kEval) > 0; }

 private:
  // Training samples [first, first + count) from the node's shared chunks,
  // making (and publishing) the chunks no other producer has made yet. Every
  // sample is a pure function of its index, so the batch is the one
  // generate() would give.
  void assemble_from_chunks(int64_t first, int32_t count, data::Batch& batch) {
    const data::Stream stream = data::Stream::kTrain;
    const int64_t size = dataset_.size(stream);
    const int64_t C = shared_->chunk_samples();
    dataset_.generate(stream, first, 0, batch, epoch_);  // the batch's shape (labels per sample)
    for (int64_t at = first; at < first + count;) {
      const int64_t chunk = at / C;
      const int64_t chunk_first = chunk * C, chunk_end = std::min(chunk_first + C, size);
      const int32_t from = static_cast<int32_t>(at - chunk_first);
      const int32_t to = static_cast<int32_t>(std::min<int64_t>(first + count, chunk_end) - chunk_first);
      const data::ChunkKey key{0, epoch_, chunk};
      bool copied = shared_->append(key, from, to, batch);
      if (!copied) {
        using Reservation = data::SharedChunkCache::Reservation;
        const Reservation reservation = shared_->reserve(key, epoch_ * size + chunk_end);
        // Another producer is making it: take it once it is there, else make it here too.
        if (reservation == Reservation::kTheirs) copied = shared_->append(key, from, to, batch);
        if (!copied) {
          shared_->count_made();
          chunk_.reset(dataset_.num_dense(), dataset_.num_tables());
          dataset_.generate(stream, chunk_first, static_cast<int32_t>(chunk_end - chunk_first), chunk_, epoch_);
          if (reservation == Reservation::kMine) shared_->fill(key, chunk_);
          data::SharedChunkCache::append_samples(chunk_, from, to - from, batch);
        }
      }
      at = chunk_first + to;
    }
  }

  // Tells the shared caches how far this producer has come.
  void note_progress(int64_t size) {
    const int64_t cursor = epoch_ * size + next_needed();
    if (shared_) shared_->set_cursor(cursor);
    if (shared_batches_) shared_batches_->set_cursor(cursor, batch_stream_);
  }

  // The shared batches' stream of a batch size and table ties.
  static int32_t batch_stream_of(int64_t batch_size, const std::vector<int32_t>& keys_of) {
    uint64_t h = 1469598103934665603ull ^ uint64_t(batch_size);
    for (int32_t k : keys_of) h = (h ^ uint64_t(uint32_t(k))) * 1099511628211ull;
    return int32_t(0x10000000u | (h & 0x0fffffffu));
  }

  // The first training sample any of this producer's trainers will still ask for in this phase.
  int64_t next_needed() const {
    int64_t lowest = std::numeric_limits<int64_t>::max();
    for (int t : trainers_) {
      lowest = std::min(lowest, base_ + (next_step_[size_t(t)] * total_trainers_ + t) * batch_size_);
    }
    return lowest;
  }

  Dataset dataset_;
  data::ParseStats stats_;  // of the event file a sequence corpus was read from
  std::vector<int> trainers_;
  int total_trainers_;
  int64_t batch_size_;
  int64_t eval_batch_size_;
  Phase phase_ = Phase::kTrain;
  std::vector<int64_t> next_step_;
  int64_t base_ = 0;                      // first sample of this phase
  std::optional<int64_t> pending_resume_;  // base of the next training phase
  int64_t pending_epoch_ = 0;              // and its epoch
  int64_t epoch_ = 0;                      // of the training phase now
  bool started_training_ = false;
  data::SharedChunkCache* shared_;  // the node's shared chunks (co-trained models), or null
  data::SharedChunkCache* shared_batches_;  // and its shared de-duplicated batches
  int32_t batch_stream_ = 0;
  data::Batch chunk_;               // scratch: a chunk this producer makes
  std::vector<char> blob_;          // scratch: a batch in its wire format
  bool wire_valid_ = false;         // blob_ holds the batch next_deduplicated returned last
};

class TextBatchSource : public BatchSource {
 public:
  TextBatchSource(const RunOptions& options, int producer, int producers)
      : producer_(producer),
        producers_(producers),
        options_(options.data),
        shape_(data_shape(options.data)),
        batch_size_(options.train.batch_size),
        eval_batch_size_(options.train.eval_batch_size) {
    train_ = open_file_reader(options_, options_.train, producer, producers);
    if (!options_.eval.empty()) eval_ = open_file_reader(options_, options_.eval, producer, producers);
    if (data::SharedChunkCache* cache = shared_ingest_cache()) {
      // Co-trained models: the node's producers parse each chunk of a shard once.
      using data::SharedShardReader;
      train_ = std::make_unique<SharedShardReader>(std::move(train_), *cache,
                                                   SharedShardReader::stream_of(0, producer, producers), true);
      if (eval_) {
        eval_ = std::make_unique<SharedShardReader>(std::move(eval_), *cache,
                                                    SharedShardReader::stream_of(1, producer, producers), false);
      }
      shared_ = cache;
      shared_batches_ = shared_batch_cache();
      // Until its first batch, the others keep the shard's first batches for it.
      if (shared_batches_) {
        shared_batches_->expect(int64_t(1) << 40,
                                text_batch_stream(SharedShardReader::stream_of(0, producer, producers),
                                                  options.train.batch_size,
                                                  model::tied_tables(options.model, shape_.num_tables)));
      }
    }
  }

  void start_phase(Phase phase) override {
    phase_ = phase;
    reader().rewind();
    resumed_.clear();
    finishing_old_shards_ = false;
    if (phase == Phase::kTrain && pending_resume_) {
      open_resumed(*pending_resume_);
      pending_resume_.reset();
    }
  }

  void resume_epoch(const EpochResume& resume) override { pending_resume_ = resume; }

  bool next(int /*trainer*/, data::Batch& batch) override {
    const bool train = phase_ == Phase::kTrain;
    const int32_t want = train ? batch_size_ : eval_batch_size_;
    batch.reset(shape_.num_dense, shape_.num_tables, shape_.num_tasks);
    batch.first_sample = -1;
    int32_t got = 0;
    if (train && finishing_old_shards_) {
      // The rest of an interrupted epoch: the old shards this producer took
      // over, one after the other (a batch may straddle two of them).
      while (got < want && !resumed_.empty()) {
        const int32_t n = resumed_.front()->read(want - got, batch);
        got += n;
        if (n == 0) resumed_.erase(resumed_.begin());
      }
    } else {
      got = reader().read(want, batch);
    }
    return got > 0 && (!train || got == want);
  }

  SourcePosition position() const override {
    if (phase_ == Phase::kTrain && finishing_old_shards_) {
      throw Error("a checkpoint inside an epoch that was itself resumed with a different producer count",
                  "checkpoint after this epoch ends, or resume with the producer count the checkpoint was written with");
    }
    const auto p = train_->position();
    return {p.byte_offset, p.line};
  }

  data::SharedChunkStats shared_stats() const override { return shared_ ? shared_->stats() : data::SharedChunkStats{}; }
  data::SharedChunkStats shared_batch_stats() const override {
    return shared_batches_ ? shared_batches_->stats() : data::SharedChunkStats{};
  }

  // Co-trained models with the same training batch size read the same
  // batches of a shard in turn: the first builds and de-duplicates each, with
  // its reader's state before and after, and the others take it and move
  // their readers past it.
  bool next_deduplicated(int trainer, data::Batch& batch, const std::vector<int32_t>& keys_of) override {
    auto* reader = dynamic_cast<data::SharedShardReader*>(train_.get());
    if (!shared_batches_ || phase_ != Phase::kTrain || finishing_old_shards_ || !reader || !reader->sharing()) {
      return BatchSource::next_deduplicated(trainer, batch, keys_of);
    }
    using State = data::SharedShardReader::State;
    const State before = reader->state();
    if (before.shard_done) return BatchSource::next_deduplicated(trainer, batch, keys_of);
    const int64_t first = before.chunk * shared_->chunk_samples() + before.offset;  // in the pass
    const int32_t stream = text_batch_stream(reader->stream(), batch_size_, keys_of);
    const data::ChunkKey key{stream, before.pass, first / batch_size_};
    if (first % batch_size_ != 0) return BatchSource::next_deduplicated(trainer, batch, keys_of);
    const int64_t cursor = before.pass * (int64_t(1) << 40) + first;
    shared_batches_->set_cursor(cursor, key.stream);
    if (shared_batches_->copy_blob(key, blob_) && take_blob(*reader, before, stream, batch)) return true;
    using Reservation = data::SharedChunkCache::Reservation;
    const Reservation reservation = shared_batches_->reserve(key, cursor + batch_size_);
    if (reservation == Reservation::kTheirs && shared_batches_->copy_blob(key, blob_) &&
        take_blob(*reader, before, stream, batch)) {
      return true;
    }
    // The blob starts with the reader's state before and after the batch.
    const bool made = make_shared_batch(*this, trainer, batch, keys_of, *shared_batches_, key, reservation, blob_,
                                        [&](std::vector<char>& blob) {
                                          const State after = reader->state();
                                          blob.resize(2 * sizeof(State));
                                          std::memcpy(blob.data(), &before, sizeof(State));
                                          std::memcpy(blob.data() + sizeof(State), &after, sizeof(State));
                                        });
    if (made) shared_batches_->set_cursor(cursor + batch_size_, key.stream);
    return made;
  }

  data::ParseStats stats() const override {
    data::ParseStats total = train_->stats();
    if (eval_) {
      total.lines += eval_->stats().lines;
      total.samples += eval_->stats().samples;
      total.malformed += eval_->stats().malformed;
    }
    return total;
  }
  bool has_eval() const override { return eval_ != nullptr; }

 private:
  data::SampleReader& reader() { return phase_ == Phase::kTrain ? *train_ : *eval_; }

  static int32_t text_batch_stream(int32_t shard_stream, int64_t batch_size, const std::vector<int32_t>& keys_of) {
    uint64_t h = (0x9e3779b97f4a7c15ull ^ uint64_t(uint32_t(shard_stream))) * 1099511628211ull ^ uint64_t(batch_size);
    for (int32_t k : keys_of) h = (h ^ uint64_t(uint32_t(k))) * 1099511628211ull;
    return int32_t(0x20000000u | (h & 0x0fffffffu));
  }

  // A shared batch: the maker's reader state before and after it, then the batch.
  bool take_blob(data::SharedShardReader& reader, const data::SharedShardReader::State& before, int32_t stream,
                 data::Batch& batch) {
    using State = data::SharedShardReader::State;
    if (blob_.size() <= 2 * sizeof(State)) return false;
    State made_from, after;
    std::memcpy(&made_from, blob_.data(), sizeof(State));
    std::memcpy(&after, blob_.data() + sizeof(State), sizeof(State));
    if (made_from.pass != before.pass || made_from.chunk != before.chunk || made_from.offset != before.offset) {
      return false;
    }
    data::deserialize(blob_.data() + 2 * sizeof(State), blob_.size() - 2 * sizeof(State), batch);
    reader.skip_to(after, made_from);
    shared_batches_->set_cursor(before.pass * (int64_t(1) << 40) + after.chunk * shared_->chunk_samples() + after.offset,
                                stream);
    return true;
  }

  void open_resumed(const EpochResume& resume) {
    if (resume.old_producers == producers_) {
      train_->seek({resume.positions.at(producer_).byte_offset, resume.positions.at(producer_).line});
      return;
    }
    // A different producer count: take over whole old shards, so every line
    // that was not trained is read exactly once.
    for (int q = producer_; q < resume.old_producers; q += producers_) {
      auto r = open_file_reader(options_, options_.train, q, resume.old_producers);
      r->seek({resume.positions.at(q).byte_offset, resume.positions.at(q).line});
      resumed_.push_back(std::move(r));
    }
    // This producer's own shard of the new layout starts with the next epoch.
    finishing_old_shards_ = true;
  }

  int producer_;
  int producers_;
  std::optional<EpochResume> pending_resume_;
  std::vector<std::unique_ptr<data::SampleReader>> resumed_;  // old shards being finished
  bool finishing_old_shards_ = false;  // this epoch reads only resumed_
  DataOptions options_;
  DataShape shape_;
  int32_t batch_size_;
  int32_t eval_batch_size_;
  Phase phase_ = Phase::kTrain;
  std::unique_ptr<data::SampleReader> train_;
  std::unique_ptr<data::SampleReader> eval_;
  data::SharedChunkCache* shared_ = nullptr;
  data::SharedChunkCache* shared_batches_ = nullptr;  // de-duplicated batches of co-trained models
  std::vector<char> blob_;
};

}  // namespace

bool BatchSource::next_deduplicated(int trainer, data::Batch& batch, const std::vector<int32_t>& keys_of) {
  if (!next(trainer, batch)) return false;
  data::deduplicate(batch, keys_of);
  return true;
}

DataShape data_shape(const DataOptions& options) {
  if (options.source == "synthetic") {
    data::SyntheticDataset dataset(options);
    return {dataset.num_dense(), dataset.num_tables(), dataset.num_tasks()};
  }
  if (sequence_source(options)) {
    if (options.sequence_task == "next_item") return {0, data::kNextItemTables};
    return {data::kSequenceSampleDense, data::sequence_sample_tables(options)};
  }
  if (options.source == "hdf5") {
    const auto shape = data::read_hdf5_shape(options.train);
    return {shape.num_dense, shape.num_tables, shape.num_tasks};
  }
  return {data::text_num_dense(options), data::text_num_tables(options), data::text_num_tasks(options)};
}

std::unique_ptr<BatchSource> make_batch_source(const RunOptions& options, int producer, int producers,
                                               std::vector<int> trainers, int total_trainers) {
  if (options.data.source == "synthetic") {
    return std::make_unique<IndexedBatchSource<data::SyntheticDataset>>(
        data::SyntheticDataset(options.data), options, std::move(trainers), total_trainers, data::ParseStats{},
        shared_ingest_cache(), shared_batch_cache());
  }
  if (sequence_source(options.data)) {
    // Every producer reads the whole event file (grouping by user needs all of it);
    // one of them reports its parse counts so the job's sum counts each line once.
    data::ParseStats stats;
    auto corpus = data::load_sequence_corpus(options.data, &stats);
    if (producer != 0) stats = {};
    const data::SequenceSampleOptions ctr = data::sequence_sample_options(options.data);
    if (options.data.sequence_task == "next_item") {
      data::NextItemOptions next;
      next.max_history = ctr.max_history;
      next.eval_negatives = options.data.sequence_eval_negatives;
      next.eval_on_test = ctr.eval_on_test;
      next.seed = ctr.seed;
      return std::make_unique<IndexedBatchSource<data::NextItemSamples>>(
          data::NextItemSamples(std::move(corpus), next), options, std::move(trainers), total_trainers, stats,
          shared_ingest_cache(), shared_batch_cache());
    }
    return std::make_unique<IndexedBatchSource<data::SequenceSamples>>(
        data::SequenceSamples(std::move(corpus), ctr), options, std::move(trainers), total_trainers, stats,
        shared_ingest_cache(), shared_batch_cache());
  }
  return std::make_unique<TextBatchSource>(options, producer, producers);
}

}  // namespace strata::runtime
