// Helpers of the data tests: a scratch directory that removes itself, files written
// from strings, a Criteo line builder, and a capture of spdlog's warnings.
#pragma once

#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "data/batch.hpp"
#include "data/sample_reader.hpp"
#include "data/synthetic.hpp"  // Stream

namespace strata::data::testing {

class ScratchDir {
 public:
  ScratchDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/strata_data_test_XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name, const std::string& content) const {
    const std::string path = path_ + "/" + name;
    std::ofstream out(path, std::ios::binary);
    out << content;
    return path;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// One Criteo line from its fields; unset fields are empty.
inline std::string criteo_line(const std::string& label, const std::vector<std::string>& dense,
                               const std::vector<std::string>& cats) {
  std::string line = label;
  for (int j = 0; j < 13; ++j) line += "\t" + (j < int(dense.size()) ? dense[size_t(j)] : std::string());
  for (int t = 0; t < 26; ++t) line += "\t" + (t < int(cats.size()) ? cats[size_t(t)] : std::string());
  return line;
}

// A valid Criteo line whose fields depend on i (distinct lines are distinguishable).
inline std::string numbered_criteo_line(int i) {
  std::vector<std::string> dense, cats;
  for (int j = 0; j < 13; ++j) dense.push_back(std::to_string((i * 7 + j) % 50));
  for (int t = 0; t < 26; ++t) {
    char hex[9];
    std::snprintf(hex, sizeof(hex), "%08x", unsigned(i * 2654435761u + unsigned(t)));
    cats.push_back(hex);
  }
  return criteo_line(i % 3 == 0 ? "1" : "0", dense, cats);
}

inline DataOptions criteo_options() {
  DataOptions options;
  options.source = "criteo";
  return options;
}

// Reads a whole shard in batches of `batch_size`, concatenating labels, dense and keys.
struct Drained {
  std::vector<float> labels;
  std::vector<float> dense;
  std::vector<std::vector<uint64_t>> keys;    // per table, bag order
  std::vector<std::vector<int32_t>> lengths;  // per table, bag lengths
};

inline void append(Drained& all, const Batch& batch) {
  all.labels.insert(all.labels.end(), batch.labels.begin(), batch.labels.end());
  all.dense.insert(all.dense.end(), batch.dense.begin(), batch.dense.end());
  all.keys.resize(batch.tables.size());
  all.lengths.resize(batch.tables.size());
  for (size_t t = 0; t < batch.tables.size(); ++t) {
    const SparseBags& bags = batch.tables[t];
    all.keys[t].insert(all.keys[t].end(), bags.keys.begin(), bags.keys.end());
    for (int32_t b = 0; b < batch.size; ++b) {
      all.lengths[t].push_back(bags.offsets[size_t(b) + 1] - bags.offsets[size_t(b)]);
    }
  }
}

inline Drained drain(SampleReader& reader, int32_t batch_size, int num_dense, int num_tables) {
  Drained all;
  all.keys.resize(size_t(num_tables));
  all.lengths.resize(size_t(num_tables));
  Batch batch;
  while (true) {
    batch.reset(num_dense, num_tables);
    if (reader.read(batch_size, batch) == 0) break;
    append(all, batch);
  }
  return all;
}

// Collects what spdlog logs while it lives (the default logger's other sinks stay).
class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1000)) {
    spdlog::default_logger()->sinks().push_back(sink_);
  }
  ~LogCapture() {
    auto& sinks = spdlog::default_logger()->sinks();
    for (auto it = sinks.begin(); it != sinks.end(); ++it) {
      if (*it == sink_) {
        sinks.erase(it);
        break;
      }
    }
  }
  std::vector<std::string> lines() const { return sink_->last_formatted(); }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
};

// Samples [first, first + count) of a random-access dataset (synthetic, sequence
// samples) as one batch.
template <class Dataset>
Batch make_batch(const Dataset& samples, Stream stream, int64_t first, int32_t count) {
  Batch batch;
  batch.reset(samples.num_dense(), samples.num_tables());
  samples.generate(stream, first, count, batch);
  return batch;
}

// The keys of sample b's bag in `table` of a batch that is not de-duplicated.
inline std::vector<uint64_t> bag_keys(const Batch& batch, int table, int b) {
  const SparseBags& t = batch.tables[size_t(table)];
  return {t.keys.begin() + t.offsets[size_t(b)], t.keys.begin() + t.offsets[size_t(b) + 1]};
}

}  // namespace strata::data::testing
