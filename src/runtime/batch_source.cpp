#include "runtime/batch_source.hpp"

#include <algorithm>
#include <spdlog/spdlog.h>

#include "common/error.hpp"
#include "data/hdf5_dataset.hpp"
#include "data/synthetic.hpp"

namespace strata::runtime {
namespace {

// Text files shard by bytes (aligned to lines), converted HDF5 files by rows.
std::unique_ptr<data::SampleReader> open_file_reader(const DataOptions& options, const std::string& path, int shard,
                                                     int num_shards) {
  if (options.source == "hdf5") return data::open_hdf5_reader(options, path, shard, num_shards);
  return data::open_text_reader(options, path, shard, num_shards);
}

class SyntheticBatchSource : public BatchSource {
 public:
  SyntheticBatchSource(const RunOptions& options, std::vector<int> trainers, int total_trainers)
      : dataset_(options.data),
        trainers_(std::move(trainers)),
        total_trainers_(total_trainers),
        batch_size_(options.train.batch_size),
        eval_batch_size_(options.train.eval_batch_size) {}

  void start_phase(Phase phase) override {
    phase_ = phase;
    next_step_.assign(total_trainers_, 0);
  }

  bool next(int trainer, data::Batch& batch) override {
    const bool train = phase_ == Phase::kTrain;
    const int64_t per_batch = train ? batch_size_ : eval_batch_size_;
    const data::Stream stream = train ? data::Stream::kTrain : data::Stream::kEval;
    const int64_t size = dataset_.size(stream);
    const int64_t step = next_step_[trainer]++;
    const int64_t first = (step * total_trainers_ + trainer) * per_batch;
    const int64_t count = std::min<int64_t>(per_batch, size - first);
    if (count <= 0 || (train && count < per_batch)) return false;
    batch.reset(dataset_.num_dense(), dataset_.num_tables());
    dataset_.generate(stream, first, static_cast<int32_t>(count), batch);
    batch.first_sample = first;
    return true;
  }

  data::ParseStats stats() const override { return {}; }
  bool has_eval() const override { return dataset_.size(data::Stream::kEval) > 0; }

 private:
  data::SyntheticDataset dataset_;
  std::vector<int> trainers_;
  int total_trainers_;
  int64_t batch_size_;
  int64_t eval_batch_size_;
  Phase phase_ = Phase::kTrain;
  std::vector<int64_t> next_step_;
};

class TextBatchSource : public BatchSource {
 public:
  TextBatchSource(const RunOptions& options, int producer, int producers)
      : options_(options.data),
        shape_(data_shape(options.data)),
        batch_size_(options.train.batch_size),
        eval_batch_size_(options.train.eval_batch_size) {
    train_ = open_file_reader(options_, options_.train, producer, producers);
    if (!options_.eval.empty()) eval_ = open_file_reader(options_, options_.eval, producer, producers);
  }

  void start_phase(Phase phase) override {
    phase_ = phase;
    reader().rewind();
  }

  bool next(int /*trainer*/, data::Batch& batch) override {
    const bool train = phase_ == Phase::kTrain;
    const int32_t want = train ? batch_size_ : eval_batch_size_;
    batch.reset(shape_.num_dense, shape_.num_tables);
    batch.first_sample = -1;
    const int32_t got = reader().read(want, batch);
    return got > 0 && (!train || got == want);
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

  DataOptions options_;
  DataShape shape_;
  int32_t batch_size_;
  int32_t eval_batch_size_;
  Phase phase_ = Phase::kTrain;
  std::unique_ptr<data::SampleReader> train_;
  std::unique_ptr<data::SampleReader> eval_;
};

}  // namespace

DataShape data_shape(const DataOptions& options) {
  if (options.source == "synthetic") {
    data::SyntheticDataset dataset(options);
    return {dataset.num_dense(), dataset.num_tables()};
  }
  if (options.source == "hdf5") {
    const auto shape = data::read_hdf5_shape(options.train);
    return {shape.num_dense, shape.num_tables};
  }
  return {data::text_num_dense(options), data::text_num_tables(options)};
}

std::unique_ptr<BatchSource> make_batch_source(const RunOptions& options, int producer, int producers,
                                               std::vector<int> trainers, int total_trainers) {
  if (options.data.source == "synthetic") {
    return std::make_unique<SyntheticBatchSource>(options, std::move(trainers), total_trainers);
  }
  return std::make_unique<TextBatchSource>(options, producer, producers);
}

}  // namespace strata::runtime
