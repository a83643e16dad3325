// Deterministic checkpoint contents for the checkpoint tests: every rank can
// rebuild what every other rank wrote (rows, dense part, producer records), so
// a test compares what it reads back with exactly what was written.
#pragma once

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/rng.hpp"
#include "io/checkpoint_file.hpp"

namespace strata::io::testing {

// The state of a small job: `world` ranks, `producers` of them producers (the
// last ones), `dim` values and `width - dim` optimizer floats per row.
struct CheckpointCase {
  int world = 1;
  int producers = 1;
  int num_tables = 5;
  int dim = 4;
  int width = 12;
  int64_t admission_counters = 16;  // per sketch row; 0 = none
  std::string dense_optimizer = "adam";
  bool rows = true;                 // false: no rank has rows
  std::string run_id = "0123456789abcdef";  // "": a file written before run ids

  CheckpointHeader header() const {
    CheckpointHeader h;
    h.step = 500;
    h.epoch = 2;
    h.step_in_epoch = 17;
    h.samples = 128000;
    h.epoch_samples = 4352;
    h.train_seconds = 12.75;
    h.config_ini = "[model]\nembedding_dim = " + std::to_string(dim) + "\n[train]\nsteps = 900\n";
    h.strata_version = "0.1.0-test";
    h.producers = producers;
    h.trainers = 2;
    h.servers = world;
    h.store_mode = "tiered";
    h.num_dense = 13;
    h.num_tables = num_tables;
    h.embedding_dim = dim;
    h.row_width = width;
    h.dense_optimizer = dense_optimizer;
    h.sparse_optimizer = width > dim ? "adagrad" : "sgd";
    h.dense_optimizer_steps = 500;
    h.train_seed = 0xfedcba9876543210ULL;  // above 2^63: must survive as unsigned
    h.data_seed = 2024;
    h.admission_counters = admission_counters;
    h.run_id = run_id;
    h.deck_fingerprint = run_id.empty() ? "" : "fedcba9876543210";
    return h;
  }

  // Rank 1 has no rows; the others different counts, crossing block boundaries.
  int64_t rows_of(int rank) const {
    if (!rows || rank == 1) return 0;
    return 100 + 53 * rank;
  }

  SparseRows rows_on(int rank) const {
    SparseRows r;
    const int64_t n = rows_of(rank);
    r.width = n > 0 ? width : 0;
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t h = mix64(uint64_t(rank), uint64_t(i));
      // Unique keys per rank; tables interleaved so that the file is not sorted.
      r.ids.push_back({uint32_t(h % uint64_t(num_tables)), (uint64_t(rank) << 48) ^ (h >> 16)});
      r.counts.push_back(h >> 7);
      for (int k = 0; k < width; ++k) r.values.push_back(value(rank, i, k));
    }
    return r;
  }

  // Every row in file order: rank 0's, then rank 1's, ...
  SparseRows all_rows() const {
    SparseRows all;
    all.width = width;
    for (int r = 0; r < world; ++r) {
      const SparseRows part = rows_on(r);
      all.ids.insert(all.ids.end(), part.ids.begin(), part.ids.end());
      all.values.insert(all.values.end(), part.values.begin(), part.values.end());
      all.counts.insert(all.counts.end(), part.counts.begin(), part.counts.end());
    }
    return all;
  }

  // Values with awkward bit patterns too: -0, a NaN payload, denormals.
  static float value(int rank, int64_t row, int k) {
    const uint64_t h = mix64(uint64_t(rank) * 1000003 + uint64_t(row), uint64_t(k) + 77);
    if (h % 97 == 0) return -0.0f;
    if (h % 89 == 0) {
      uint32_t bits = 0x7fc00000u | uint32_t(h & 0xffff);
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    if (h % 83 == 0) return std::numeric_limits<float>::denorm_min() * float(h % 7 + 1);
    return to_unit_float(h) * 2.0f - 1.0f;
  }

  std::vector<model::ParameterSlice> slices() const {
    std::vector<model::ParameterSlice> s;
    const auto add = [&](const std::string& name, std::vector<int64_t> shape) {
      model::ParameterSlice slice;
      slice.name = name;
      slice.offset = s.empty() ? 0 : s.back().offset + s.back().size();
      slice.shape = std::move(shape);
      s.push_back(slice);
    };
    add("bottom.0.weight", {8, 13});
    add("bottom.0.bias", {8});
    add("top.0.weight", {3, 2, 5});
    add("top.0.bias", {0});  // empty slices are legal
    add("top.1.weight", {1, 3});
    return s;
  }

  std::vector<float> dense_values() const {
    std::vector<float> v;
    const auto s = slices();
    for (size_t i = 0; i < s.back().offset + s.back().size(); ++i) v.push_back(value(-1, int64_t(i), 0));
    return v;
  }

  std::vector<float> dense_state() const {
    const size_t vectors = dense_optimizer == "adam" ? 2 : dense_optimizer == "adagrad" ? 1 : 0;
    std::vector<float> v;
    for (size_t i = 0; i < vectors * dense_values().size(); ++i) v.push_back(value(-2, int64_t(i), 1));
    return v;
  }

  TrainerState trainer_state() const { return TrainerState{3.25, 1024, 4, 0.6931, {0.5, 0.25, 0.125, -1}}; }

  bool is_producer(int rank) const { return rank >= world - producers; }
  int producer_index(int rank) const { return rank - (world - producers); }

  ProducerState producer_state(int producer) const {
    ProducerState p;
    p.producer = producer;
    p.epoch = 2;
    p.round_in_epoch = 17 + producer;
    p.byte_offset = 123456789012LL + producer;
    p.line = 4242 + producer;
    p.shard_begin = 1000 * producer;
    p.shard_end = 1000 * (producer + 1);
    p.lines = 555 + producer;
    p.samples = 550 + producer;
    p.malformed = 5;
    p.admission_seen = 0xffffffffffffff00ULL + uint64_t(producer);
    p.admission_defaulted = 77;
    return p;
  }

  std::vector<uint32_t> admission(int producer) const {
    std::vector<uint32_t> c;
    for (int64_t i = 0; i < 4 * admission_counters; ++i) c.push_back(uint32_t(mix64(uint64_t(producer), uint64_t(i))));
    return c;
  }

  // Writes the whole case collectively over `comm` (whose size is `world`):
  // rank world - 1 the dense part, rank 0 the trainer state, every rank its rows,
  // the last `producers` ranks their records.
  void write(MPI_Comm comm, const std::string& path, const CheckpointWriterOptions& options = {}) const {
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    CheckpointWriter writer(comm, path, header(), options);
    const bool dense_owner = rank == world - 1;
    if (dense_owner) {
      writer.write_dense(slices(), dense_values(), dense_state(), true);
    } else {
      writer.write_dense({}, {}, {}, false);
    }
    writer.write_trainer_state(rank == 0 ? trainer_state() : TrainerState{}, rank == 0);
    writer.write_rows(rows_on(rank));
    if (is_producer(rank)) {
      const ProducerState state = producer_state(producer_index(rank));
      const std::vector<uint32_t> counters = admission(producer_index(rank));
      writer.write_producers(&state, admission_counters > 0 ? &counters : nullptr);
    } else {
      writer.write_producers(nullptr, nullptr);
    }
    writer.close();
  }
};

// The rows a params_digest covers: every row sorted by (table, key).
inline SparseRows sorted_rows(const SparseRows& rows) {
  std::vector<size_t> order(rows.ids.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rows.ids[a] < rows.ids[b]; });
  SparseRows sorted;
  sorted.width = rows.width;
  for (size_t i : order) {
    sorted.ids.push_back(rows.ids[i]);
    sorted.counts.push_back(rows.counts[i]);
    sorted.values.insert(sorted.values.end(), rows.values.begin() + ptrdiff_t(i * size_t(rows.width)),
                         rows.values.begin() + ptrdiff_t((i + 1) * size_t(rows.width)));
  }
  return sorted;
}

// Bit-for-bit equality of float buffers (NaN payloads and -0 included).
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// A scratch directory made by rank 0 of `comm` and known to every rank; removed
// by the destructor (STRATA_KEEP_TEST_DIRS=1 keeps it).
class ScratchDirectory {
 public:
  explicit ScratchDirectory(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    char name[4096] = {};
    if (rank_ == 0) {
      std::string pattern = (std::filesystem::temp_directory_path() / "strata-ckpt-XXXXXX").string();
      if (mkdtemp(pattern.data()) == nullptr) std::abort();
      std::strncpy(name, pattern.c_str(), sizeof(name) - 1);
    }
    MPI_Bcast(name, sizeof(name), MPI_CHAR, 0, comm_);
    path_ = name;
  }
  ~ScratchDirectory() {
    MPI_Barrier(comm_);
    const char* keep = std::getenv("STRATA_KEEP_TEST_DIRS");
    if (rank_ == 0 && !(keep && std::string(keep) == "1")) {
      std::error_code ec;
      std::filesystem::remove_all(path_, ec);
    }
  }
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  MPI_Comm comm_;
  int rank_ = 0;
  std::string path_;
};

}  // namespace strata::io::testing
