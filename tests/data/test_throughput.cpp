// Throughput of the synthetic generator, the Criteo parser and de-duplication
// (label slow): prints samples/s per core (thread CPU time, so that other load on
// the machine matters less) and checks only a floor far below the targets.
#include <gtest/gtest.h>
#include <time.h>

#include <cstdio>

#include "data/synthetic.hpp"
#include "data/text_reader.hpp"
#include "data_test_util.hpp"

namespace strata::data {
namespace {

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

TEST(Throughput, SyntheticGenerate) {
  const SyntheticDataset ds{DataOptions()};  // 13 dense, 26 tables, hotness 1, Zipf 1.05
  Batch batch;
  int64_t samples = 0;
  const double start = cpu_seconds();
  for (int64_t first = 0; first + 256 <= ds.size(Stream::kTrain); first += 256) {
    batch.reset(ds.num_dense(), ds.num_tables());
    ds.generate(Stream::kTrain, first, 256, batch);
    samples += 256;
  }
  const double rate = double(samples) / (cpu_seconds() - start);
  std::printf("synthetic generate: %.3g samples/s (%.1f us per batch of 256)\n", rate, 256e6 / rate);
  EXPECT_GT(rate, 1e5);
}

TEST(Throughput, CriteoParse) {
  testing::ScratchDir dir;
  std::string content;
  for (int i = 0; i < 200000; ++i) content += testing::numbered_criteo_line(i) + "\n";
  const std::string path = dir.file("bench.tsv", content);
  auto reader = open_text_reader(testing::criteo_options(), path, 0, 1);
  Batch batch;
  int64_t samples = 0;
  const double start = cpu_seconds();
  for (int epoch = 0; epoch < 3; ++epoch) {
    while (true) {
      batch.reset(13, 26);
      const int32_t n = reader->read(4096, batch);
      if (n == 0) break;
      samples += n;
    }
    reader->rewind();
  }
  const double elapsed = (cpu_seconds() - start);
  const double rate = double(samples) / elapsed;
  std::printf("criteo parse: %.3g samples/s, %.0f MB/s\n", rate,
              3.0 * double(content.size()) / elapsed / 1e6);
  EXPECT_EQ(samples, 600000);
  EXPECT_GT(rate, 1e5);
}

TEST(Throughput, Deduplicate) {
  const SyntheticDataset ds{DataOptions()};
  Batch batch;
  batch.reset(ds.num_dense(), ds.num_tables());
  ds.generate(Stream::kTrain, 0, 4096, batch);
  const Batch original = batch;
  const int reps = 50;
  const double start = cpu_seconds();
  for (int r = 0; r < reps; ++r) {
    batch = original;
    deduplicate(batch);
  }
  const double per_batch = (cpu_seconds() - start) / reps;
  std::printf("deduplicate: %.0f us per batch of 4096 samples x 26 tables (incl. a copy)\n", per_batch * 1e6);
}

}  // namespace
}  // namespace strata::data
