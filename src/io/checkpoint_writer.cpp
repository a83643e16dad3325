// CheckpointWriter: the collective write of one checkpoint file.
//
// HDF5's structural calls (creating datasets, writing attributes) must be made by
// every rank with the same arguments, but each part has its data on one rank or
// spread over several. So the owner of a part first checks and broadcasts what
// every rank needs to create its datasets (names, shapes, checksums); then every
// rank creates them; then the owners write the bytes (the sparse rows with
// collective MPI-IO, in rounds of bounded size; the one-rank parts independently).
// A failure on any rank is agreed on before the next collective call, and every
// rank throws the same strata::Error.
#include "io/checkpoint_writer.hpp"

#include <algorithm>
#include <cstring>
#include <set>

#include "comm/wire.hpp"
#include "common/error.hpp"
#include "io/checkpoint_format.hpp"
#include "io/checkpoint_hdf5.hpp"

namespace strata::io {

namespace fmt = checkpoint_format;
using checkpoint_hdf5::BlockRecord;
using checkpoint_hdf5::create_dataset;
using checkpoint_hdf5::write_slab;
using checkpoint_hdf5::write_uint64_attribute;
using checkpoint_hdf5::xxh3;
using data::Hdf5Handle;
using data::hdf5_check;
using data::hdf5_check_status;
using data::hdf5_write_int_attribute;
using data::hdf5_write_string_attribute;
using data::Hdf5QuietErrors;

namespace {

constexpr const char* kWriteFix = "check that checkpoint.dir exists, is writable and has free space";
constexpr const char* kCallerFix = "this is a bug in the caller of CheckpointWriter (see io/checkpoint_writer.hpp)";
// Bytes one rank stages per collective round of row writes.
constexpr int64_t kRoundBytes = int64_t(64) << 20;
// Bytes per independent write call: MPI-IO counts are ints.
constexpr int64_t kPieceBytes = int64_t(256) << 20;

void mpi_check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw Error(std::string(call) + " failed while writing a checkpoint: " + std::string(text, size_t(length)),
              "check that every rank of the job is alive");
}

std::vector<char> pack_header(const CheckpointHeader& h) {
  std::vector<char> packed;
  comm::ByteWriter p(packed);  // broadcasts: the same build on both sides
  p.put(h.step), p.put(h.epoch), p.put(h.step_in_epoch), p.put(h.samples), p.put(h.epoch_samples);
  p.put(h.train_seconds);
  p.put_string(h.config_ini), p.put_string(h.strata_version);
  p.put(h.producers), p.put(h.trainers), p.put(h.servers);
  p.put_string(h.store_mode);
  p.put(h.num_dense), p.put(h.num_tables), p.put(h.embedding_dim), p.put(h.row_width);
  p.put_string(h.dense_optimizer), p.put_string(h.sparse_optimizer);
  p.put(h.dense_optimizer_steps), p.put(h.train_seed), p.put(h.data_seed), p.put(h.admission_counters);
  p.put_string(h.run_id), p.put_string(h.deck_fingerprint);
  return packed;
}

CheckpointHeader unpack_header(const std::vector<char>& bytes) {
  comm::ByteReader u(bytes.data(), bytes.size(), "checkpoint writer broadcast");
  CheckpointHeader h;
  h.step = u.get<int64_t>(), h.epoch = u.get<int64_t>(), h.step_in_epoch = u.get<int64_t>();
  h.samples = u.get<int64_t>(), h.epoch_samples = u.get<int64_t>();
  h.train_seconds = u.get<double>();
  h.config_ini = u.get_string(), h.strata_version = u.get_string();
  h.producers = u.get<int>(), h.trainers = u.get<int>(), h.servers = u.get<int>();
  h.store_mode = u.get_string();
  h.num_dense = u.get<int>(), h.num_tables = u.get<int>(), h.embedding_dim = u.get<int>(), h.row_width = u.get<int>();
  h.dense_optimizer = u.get_string(), h.sparse_optimizer = u.get_string();
  h.dense_optimizer_steps = u.get<int64_t>(), h.train_seed = u.get<uint64_t>(), h.data_seed = u.get<uint64_t>();
  h.admission_counters = u.get<int64_t>();
  h.run_id = u.get_string(), h.deck_fingerprint = u.get_string();
  return h;
}

// What every rank needs to create the dense datasets (the owner's data, described).
struct DenseLayout {
  int64_t values = 0;   // n
  int64_t vectors = 0;  // optimizer state = vectors * n floats
  uint64_t values_xxh3 = 0, state_xxh3 = 0;
  struct Layer {
    std::string name;
    int64_t offset = 0;
    std::vector<int64_t> shape;
    uint64_t xxh3 = 0;
  };
  std::vector<Layer> layers;
};

std::vector<char> pack_dense(const DenseLayout& d) {
  std::vector<char> packed;
  comm::ByteWriter p(packed);  // broadcasts: the same build on both sides
  p.put(d.values), p.put(d.vectors), p.put(d.values_xxh3), p.put(d.state_xxh3);
  p.put(uint64_t(d.layers.size()));
  for (const auto& layer : d.layers) {
    p.put_string(layer.name), p.put(layer.offset), p.put(layer.xxh3);
    p.put(uint64_t(layer.shape.size()));
    for (int64_t extent : layer.shape) p.put(extent);
  }
  return packed;
}

DenseLayout unpack_dense(const std::vector<char>& bytes) {
  comm::ByteReader u(bytes.data(), bytes.size(), "checkpoint writer broadcast");
  DenseLayout d;
  d.values = u.get<int64_t>(), d.vectors = u.get<int64_t>();
  d.values_xxh3 = u.get<uint64_t>(), d.state_xxh3 = u.get<uint64_t>();
  d.layers.resize(size_t(u.get<uint64_t>()));
  for (auto& layer : d.layers) {
    layer.name = u.get_string(), layer.offset = u.get<int64_t>(), layer.xxh3 = u.get<uint64_t>();
    layer.shape.resize(size_t(u.get<uint64_t>()));
    for (int64_t& extent : layer.shape) extent = u.get<int64_t>();
  }
  return d;
}

// Why the owner's dense part cannot be written ("" when it can).
std::string dense_problem(const std::vector<model::ParameterSlice>& slices, const std::vector<float>& values,
                          const std::vector<float>& state) {
  const int64_t n = int64_t(values.size());
  if (n > fmt::kMaxDenseValues) return "write_dense: " + std::to_string(n) + " dense values is more than a checkpoint holds";
  if (n == 0 ? !state.empty() : state.size() % values.size() != 0 ||
                                    int64_t(state.size() / values.size()) > fmt::kMaxOptimizerMoments) {
    return "write_dense: optimizer state of " + std::to_string(state.size()) + " floats is not k x " +
           std::to_string(n) + " values (k = 0 .. " + std::to_string(fmt::kMaxOptimizerMoments) + ")";
  }
  if (int64_t(slices.size()) > fmt::kMaxLayers) return "write_dense: more than " + std::to_string(fmt::kMaxLayers) + " slices";
  std::set<std::string> names;
  int64_t end = 0;
  for (const model::ParameterSlice& slice : slices) {
    const std::string what = "write_dense: slice '" + slice.name + "'";
    if (slice.name.empty() || slice.name.size() > fmt::kMaxLayerName || slice.name == "." ||
        slice.name.find('/') != std::string::npos || slice.name.find('\0') != std::string::npos) {
      return what + ": a name must be 1 .. " + std::to_string(fmt::kMaxLayerName) + " bytes without '/'";
    }
    if (!names.insert(slice.name).second) return what + " appears twice";
    if (slice.shape.empty() || int64_t(slice.shape.size()) > fmt::kMaxLayerRank) {
      return what + " has " + std::to_string(slice.shape.size()) + " dimensions (1 .. " +
             std::to_string(fmt::kMaxLayerRank) + " are stored)";
    }
    int64_t size = 1;
    for (int64_t extent : slice.shape) {
      if (extent < 0 || extent > n) return what + " has an extent of " + std::to_string(extent);
      size = extent == 0 ? 0 : size > n / extent ? n + 1 : size * extent;
    }
    const auto offset = int64_t(slice.offset);
    if (offset < end || offset > n || size > n - offset) {
      return what + " at offset " + std::to_string(offset) + " overlaps another slice or ends past the " +
             std::to_string(n) + " values";
    }
    end = offset + size;
  }
  return {};
}

// Why this rank's rows cannot be written ("" when they can).
std::string rows_problem(const SparseRows& rows, const CheckpointHeader& header) {
  const size_t n = rows.ids.size();
  if (int64_t(n) > fmt::kMaxRows) return "write_rows: " + std::to_string(n) + " rows is more than a checkpoint holds";
  if (n > 0 && rows.width != header.row_width) {
    return "write_rows: rows of width " + std::to_string(rows.width) + ", the header's row_width is " +
           std::to_string(header.row_width);
  }
  if (rows.values.size() != n * size_t(n > 0 ? rows.width : 0) || rows.counts.size() != n) {
    return "write_rows: " + std::to_string(n) + " ids but " + std::to_string(rows.values.size()) + " values and " +
           std::to_string(rows.counts.size()) + " counts (expected n x width and n)";
  }
  for (size_t i = 0; i < n; ++i) {
    if (int64_t(rows.ids[i].table) >= header.num_tables) {
      return "write_rows: row " + std::to_string(i) + " is in table " + std::to_string(rows.ids[i].table) +
             ", the header has " + std::to_string(header.num_tables) + " tables";
    }
  }
  return {};
}

}  // namespace

class CheckpointWriter::Impl {
 public:
  Impl(MPI_Comm comm, const std::string& path, const CheckpointHeader& header, const CheckpointWriterOptions& options)
      : comm_(comm), path_(path), options_(options) {
    const Hdf5QuietErrors quiet;
    mpi_check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    mpi_check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
    std::vector<char> bytes;
    std::string problem;
    if (rank_ == 0) {
      problem = header_problem(header);
      if (options.block_rows < 0 || options.block_rows > fmt::kMaxBlockRows || options.round_blocks < 0) {
        problem += (problem.empty() ? "" : "; ") + std::string("CheckpointWriterOptions out of range (block_rows 0 .. ") +
                   std::to_string(fmt::kMaxBlockRows) + ", round_blocks >= 0)";
      }
      if (problem.empty()) bytes = pack_header(header);
    }
    agree(problem.empty() ? problem : where() + "the header is not valid: " + problem, kCallerFix);
    broadcast(bytes, 0);
    header_ = unpack_header(bytes);
    header_.format_version = kCheckpointFormatVersion;
    together([&] { create_file(); });
  }

  ~Impl() {
    if (file_ < 0) return;
    const Hdf5QuietErrors quiet;
    H5Fclose(file_);  // an error path: the failure that brought us here is the one reported
  }

  void write_dense(const std::vector<model::ParameterSlice>& slices, const std::vector<float>& values,
                   const std::vector<float>& state, bool mine) {
    const Hdf5QuietErrors quiet;
    begin_part(dense_written_, "write_dense");
    const int owner = owner_of(mine, "write_dense");
    std::vector<char> bytes;
    std::string problem;
    if (rank_ == owner) {
      problem = dense_problem(slices, values, state);
      if (problem.empty()) {
        DenseLayout d;
        d.values = int64_t(values.size());
        d.vectors = values.empty() ? 0 : int64_t(state.size() / values.size());
        d.values_xxh3 = xxh3(values.data(), values.size() * sizeof(float));
        d.state_xxh3 = xxh3(state.data(), state.size() * sizeof(float));
        for (const model::ParameterSlice& slice : slices) {
          d.layers.push_back({slice.name, int64_t(slice.offset), slice.shape,
                              xxh3(values.data() + slice.offset, slice.size() * sizeof(float))});
        }
        bytes = pack_dense(d);
      }
    }
    agree(problem.empty() ? problem : where() + problem, kCallerFix);
    broadcast(bytes, owner);
    const DenseLayout layout = unpack_dense(bytes);

    Hdf5Handle values_set, state_set;
    std::vector<Hdf5Handle> layer_sets;
    together([&] {
      const std::string what = where() + "cannot create the dense datasets";
      values_set = create_dataset(file_, path_of(fmt::kDense, fmt::kDenseValues), H5T_IEEE_F32LE,
                                  {hsize_t(layout.values)}, 0, what, kWriteFix);
      write_uint64_attribute(values_set.get(), fmt::kXxh3Attr, layout.values_xxh3);
      state_set = create_dataset(file_, path_of(fmt::kDense, fmt::kDenseOptimizerState), H5T_IEEE_F32LE,
                                 {hsize_t(layout.vectors * layout.values)}, 0, what, kWriteFix);
      hdf5_write_string_attribute(state_set.get(), fmt::kOptimizerAttr, header_.dense_optimizer);
      hdf5_write_int_attribute(state_set.get(), fmt::kStepsAttr, header_.dense_optimizer_steps);
      hdf5_write_int_attribute(state_set.get(), fmt::kVectorsAttr, layout.vectors);
      write_uint64_attribute(state_set.get(), fmt::kXxh3Attr, layout.state_xxh3);
      const std::string layers = path_of(fmt::kDense, fmt::kDenseLayers);
      for (size_t i = 0; i < layout.layers.size(); ++i) {
        const DenseLayout::Layer& layer = layout.layers[i];
        const std::vector<hsize_t> dims(layer.shape.begin(), layer.shape.end());
        layer_sets.push_back(create_dataset(file_, layers + "/" + layer.name, H5T_IEEE_F32LE, dims, 0,
                                            what + " ('" + layer.name + "')", kWriteFix));
        hdf5_write_int_attribute(layer_sets.back().get(), fmt::kIndexAttr, int64_t(i));
        hdf5_write_int_attribute(layer_sets.back().get(), fmt::kOffsetAttr, layer.offset);
        write_uint64_attribute(layer_sets.back().get(), fmt::kXxh3Attr, layer.xxh3);
      }
    });
    together([&] {
      if (rank_ != owner) return;
      const std::string what = where() + "cannot write the dense values";
      write_in_pieces(values_set.get(), values.data(), layout.values, 1, what);
      write_in_pieces(state_set.get(), state.data(), layout.vectors * layout.values, 1, what);
      for (size_t i = 0; i < layout.layers.size(); ++i) {
        const DenseLayout::Layer& layer = layout.layers[i];
        int64_t row = 1;
        for (size_t d = 1; d < layer.shape.size(); ++d) row *= layer.shape[d];
        write_in_pieces(layer_sets[i].get(), values.data() + layer.offset, layer.shape[0], row, what);
      }
    });
  }

  void write_trainer_state(const TrainerState& state, bool mine) {
    const Hdf5QuietErrors quiet;
    begin_part(trainer_written_, "write_trainer_state");
    const int owner = owner_of(mine, "write_trainer_state");
    unsigned char record[fmt::kTrainerRecordBytes] = {};
    uint64_t hash = 0;
    if (rank_ == owner) {
      checkpoint_hdf5::pack_trainer(state, record);
      hash = xxh3(record, sizeof(record));
    }
    mpi_check(MPI_Bcast(&hash, 1, MPI_UINT64_T, owner, comm_), "MPI_Bcast");
    Hdf5Handle type = checkpoint_hdf5::trainer_record_type();
    Hdf5Handle set;
    together([&] {
      set = create_dataset(file_, path_of(fmt::kTrainer, fmt::kTrainerState), type.get(), {1}, 0,
                           where() + "cannot create the trainer state", kWriteFix);
      write_uint64_attribute(set.get(), fmt::kXxh3Attr, hash);
    });
    together([&] {
      if (rank_ == owner) {
        write_slab(set.get(), type.get(), H5P_DEFAULT, 0, 1, record, where() + "cannot write the trainer state",
                   kWriteFix);
      }
    });
  }

  void write_rows(const SparseRows& mine) {
    const Hdf5QuietErrors quiet;
    begin_part(rows_written_, "write_rows");
    const std::string problem = rows_problem(mine, header_);
    agree(problem.empty() ? problem : where() + problem, kCallerFix);
    const int64_t n = int64_t(mine.ids.size());
    const int64_t width = header_.row_width, dim = header_.embedding_dim, state_width = width - dim;

    // This rank's rows go to [first_row, first_row + n), its checksum blocks to
    // [first_block, first_block + my_blocks); rows are written in rounds of whole blocks.
    const int64_t first_row = exclusive_sum(n), total_rows = sum(n);
    if (total_rows > fmt::kMaxRows) {
      throw Error(where() + std::to_string(total_rows) + " rows is more than a checkpoint holds", kCallerFix);
    }
    const int64_t block_rows = options_.block_rows > 0 ? options_.block_rows : fmt::block_rows_for(width);
    const int64_t my_blocks = (n + block_rows - 1) / block_rows;
    const int64_t first_block = exclusive_sum(my_blocks), total_blocks = sum(my_blocks);
    const int64_t row_bytes = 4 + 8 + 8 + 4 * width;
    const int64_t blocks_per_round = options_.round_blocks > 0
                                         ? options_.round_blocks
                                         : std::max<int64_t>(1, kRoundBytes / (block_rows * row_bytes));
    const int64_t rounds = maximum((my_blocks + blocks_per_round - 1) / blocks_per_round);

    Hdf5Handle table, key, values, state, counts, checksums;
    Hdf5Handle block_type = checkpoint_hdf5::block_record_type();
    together([&] {
      const std::string what = where() + "cannot create the sparse datasets";
      const auto rows = hsize_t(total_rows), chunk = hsize_t(block_rows);
      table = create_dataset(file_, path_of(fmt::kSparse, fmt::kSparseTable), H5T_STD_U32LE, {rows}, chunk, what,
                             kWriteFix);
      key = create_dataset(file_, path_of(fmt::kSparse, fmt::kSparseKey), H5T_STD_U64LE, {rows}, chunk, what,
                           kWriteFix);
      values = create_dataset(file_, path_of(fmt::kSparse, fmt::kSparseValues), H5T_IEEE_F32LE,
                              {rows, hsize_t(dim)}, chunk, what, kWriteFix);
      state = create_dataset(file_, path_of(fmt::kSparse, fmt::kSparseOptimizerState), H5T_IEEE_F32LE,
                             {rows, hsize_t(state_width)}, chunk, what, kWriteFix);
      counts = create_dataset(file_, path_of(fmt::kSparse, fmt::kSparseAccessCount), H5T_STD_U64LE, {rows}, chunk,
                              what, kWriteFix);
      checksums = create_dataset(file_, path_of(fmt::kSparse, fmt::kSparseChecksums), block_type.get(),
                                 {hsize_t(total_blocks)}, 0, what, kWriteFix);
      Hdf5Handle group(hdf5_check(H5Gopen2(file_, fmt::kSparse, H5P_DEFAULT), what, kWriteFix), H5Gclose);
      hdf5_write_int_attribute(group.get(), fmt::kBlockRowsAttr, block_rows);
      hdf5_write_string_attribute(group.get(), fmt::kOptimizerAttr, header_.sparse_optimizer);
    });

    // Staging buffers of one round: the columns as the file holds them.
    const int64_t round_rows = std::min(n, blocks_per_round * block_rows);
    std::vector<uint32_t> tables(static_cast<size_t>(round_rows));             // (round rows)
    std::vector<uint64_t> keys(static_cast<size_t>(round_rows));               // (round rows)
    std::vector<float> row_values(static_cast<size_t>(round_rows * dim));      // (round rows, dim)
    std::vector<float> row_state(static_cast<size_t>(round_rows * state_width));  // (round rows, width - dim)
    std::vector<unsigned char> blocks(size_t(my_blocks) * fmt::kBlockRecordBytes);  // (my blocks) records
    std::string failure, fix;  // the first local failure: from then on this rank writes nothing
    const auto attempt = [&](auto&& step) {
      if (!failure.empty()) return;
      try {
        step();
      } catch (const Error& e) {
        failure = e.what_failed(), fix = e.how_to_fix();
      } catch (const std::exception& e) {
        failure = where() + e.what(), fix = kWriteFix;
      }
    };
    for (int64_t round = 0; round < rounds; ++round) {
      const int64_t lo = std::min(n, round * blocks_per_round * block_rows);
      const int64_t hi = std::min(n, lo + blocks_per_round * block_rows);
      attempt([&] { stage_round(mine, lo, hi, first_row, block_rows, tables, keys, row_values, row_state, blocks); });
      const std::string what = where() + "cannot write rows [" + std::to_string(first_row + lo) + ", " +
                               std::to_string(first_row + hi) + ")";
      // Every rank takes part in every collective write; one that failed writes nothing.
      const auto collective_write = [&](hid_t set, hid_t type, const void* data) {
        const int64_t rows = failure.empty() ? hi - lo : 0;
        try {
          write_slab(set, type, collective_.get(), first_row + lo, rows, data, what, kWriteFix);
        } catch (const Error& e) {
          if (failure.empty()) failure = e.what_failed(), fix = e.how_to_fix();
        }
      };
      collective_write(table.get(), H5T_NATIVE_UINT32, tables.data());
      collective_write(key.get(), H5T_NATIVE_UINT64, keys.data());
      collective_write(values.get(), H5T_NATIVE_FLOAT, row_values.data());
      if (state_width > 0) collective_write(state.get(), H5T_NATIVE_FLOAT, row_state.data());
      collective_write(counts.get(), H5T_NATIVE_UINT64, mine.counts.data() + lo);
    }
    try {
      write_slab(checksums.get(), block_type.get(), collective_.get(), first_block, failure.empty() ? my_blocks : 0,
                 blocks.data(), where() + "cannot write the row checksums", kWriteFix);
    } catch (const Error& e) {
      if (failure.empty()) failure = e.what_failed(), fix = e.how_to_fix();
    }
    agree(failure, fix);
  }

  void write_producers(const ProducerState* mine, const std::vector<uint32_t>* admission) {
    const Hdf5QuietErrors quiet;
    begin_part(producers_written_, "write_producers");
    const int64_t counters = fmt::kSketchRows * header_.admission_counters;  // per producer
    std::string problem;
    if (mine) {
      const std::string who = "write_producers: producer " + std::to_string(mine->producer);
      if (mine->producer < 0 || mine->producer >= header_.producers) {
        problem = who + " is not one of the header's " + std::to_string(header_.producers) + " producers";
      } else if (counters > 0 && (!admission || int64_t(admission->size()) != counters)) {
        problem = who + " passed " + std::to_string(admission ? admission->size() : 0) +
                  " admission counters, the header says " + std::to_string(fmt::kSketchRows) + " x " +
                  std::to_string(header_.admission_counters);
      } else if (counters == 0 && admission && !admission->empty()) {
        problem = who + " passed admission counters but the header's admission_counters is 0";
      }
    } else if (admission && !admission->empty()) {
      problem = "write_producers: admission counters without a producer record";
    }
    agree(problem.empty() ? problem : where() + problem, kCallerFix);

    // Every rank learns every record, so that all create the same datasets.
    unsigned char record[fmt::kProducerRecordBytes] = {};
    if (mine) {
      checkpoint_hdf5::pack_producer(*mine, counters > 0 ? xxh3(admission->data(), size_t(counters) * 4) : 0, record);
    }
    const int has = mine ? 1 : 0;
    std::vector<int> has_record(size_t(size_), 0);
    mpi_check(MPI_Allgather(&has, 1, MPI_INT, has_record.data(), 1, MPI_INT, comm_), "MPI_Allgather");
    std::vector<int> bytes(static_cast<size_t>(size_)), displacements(static_cast<size_t>(size_));
    int total = 0;
    for (int r = 0; r < size_; ++r) {
      bytes[size_t(r)] = has_record[size_t(r)] * int(fmt::kProducerRecordBytes);
      displacements[size_t(r)] = total;
      total += bytes[size_t(r)];
    }
    std::vector<unsigned char> gathered(static_cast<size_t>(std::max(total, 1)));
    mpi_check(MPI_Allgatherv(record, bytes[size_t(rank_)], MPI_BYTE, gathered.data(), bytes.data(),
                             displacements.data(), MPI_BYTE, comm_),
              "MPI_Allgatherv");
    struct Entry {
      int32_t producer;
      int rank;
      const unsigned char* bytes;
    };
    std::vector<Entry> entries;
    for (int r = 0; r < size_; ++r) {
      if (!has_record[size_t(r)]) continue;
      const unsigned char* at = gathered.data() + displacements[size_t(r)];
      entries.push_back({checkpoint_hdf5::unpack_producer(at, nullptr).producer, r, at});
    }
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.producer < b.producer; });
    // The same records on every rank: every rank reaches the same verdict.
    for (size_t i = 0; i < entries.size(); ++i) {
      if (entries[i].producer != int32_t(i)) {
        throw Error(where() + "write_producers: got records of " + std::to_string(entries.size()) +
                        " producers, expected one each from producers 0 .. " + std::to_string(header_.producers - 1) +
                        " (producer " + std::to_string(i) + " is " +
                        (entries[i].producer > int32_t(i) ? "missing)" : "duplicated)"),
                    kCallerFix);
      }
    }
    if (int64_t(entries.size()) != header_.producers) {
      throw Error(where() + "write_producers: got " + std::to_string(entries.size()) + " producer records, the header's layout has " +
                      std::to_string(header_.producers) + " producers",
                  kCallerFix);
    }
    std::vector<unsigned char> sorted;  // (producers) packed records by producer
    int64_t my_index = -1;
    for (size_t i = 0; i < entries.size(); ++i) {
      sorted.insert(sorted.end(), entries[i].bytes, entries[i].bytes + fmt::kProducerRecordBytes);
      if (entries[i].rank == rank_) my_index = int64_t(i);
    }
    const auto producers = hsize_t(entries.size());
    const bool with_admission = counters > 0 && producers > 0;

    Hdf5Handle type = checkpoint_hdf5::producer_record_type();
    Hdf5Handle state_set, admission_set;
    together([&] {
      const std::string what = where() + "cannot create the producer datasets";
      state_set = create_dataset(file_, path_of(fmt::kProducers, fmt::kProducerState), type.get(), {producers}, 0,
                                 what, kWriteFix);
      write_uint64_attribute(state_set.get(), fmt::kXxh3Attr, xxh3(sorted.data(), sorted.size()));
      if (with_admission) {
        admission_set = create_dataset(file_, path_of(fmt::kProducers, fmt::kProducerAdmission), H5T_STD_U32LE,
                                       {producers, hsize_t(counters)}, 0, what, kWriteFix);
        hdf5_write_int_attribute(admission_set.get(), fmt::kSketchRowsAttr, fmt::kSketchRows);
        hdf5_write_int_attribute(admission_set.get(), fmt::kCountersPerRowAttr, header_.admission_counters);
      }
    });
    together([&] {
      const std::string what = where() + "cannot write the producer records";
      if (rank_ == 0 && producers > 0) {
        write_slab(state_set.get(), type.get(), H5P_DEFAULT, 0, int64_t(producers), sorted.data(), what, kWriteFix);
      }
      if (with_admission && mine) {
        write_slab(admission_set.get(), H5T_NATIVE_UINT32, H5P_DEFAULT, my_index, 1, admission->data(), what,
                   kWriteFix);
      }
    });
  }

  void close() {
    const Hdf5QuietErrors quiet;
    if (file_ < 0) throw Error(where() + "close() called twice", kCallerFix);
    std::string missing;
    if (!dense_written_) missing += " write_dense";
    if (!trainer_written_) missing += " write_trainer_state";
    if (!rows_written_) missing += " write_rows";
    if (!producers_written_) missing += " write_producers";
    if (!missing.empty()) {
      H5Fclose(file_);
      file_ = H5I_INVALID_HID;
      throw Error(where() + "the checkpoint is incomplete; never called:" + missing, kCallerFix);
    }
    collective_.reset();
    // H5Fflush makes every rank MPI_File_sync its data, so the file is complete on
    // disk before world rank 0 renames it into place.
    together([&] {
      hdf5_check_status(H5Fflush(file_, H5F_SCOPE_GLOBAL), where() + "cannot flush the file", kWriteFix);
    });
    const herr_t closed = H5Fclose(file_);
    file_ = H5I_INVALID_HID;
    together([&] { hdf5_check_status(closed, where() + "cannot close the file", kWriteFix); });
  }

 private:
  std::string where() const { return "checkpoint '" + path_ + "': "; }

  static std::string path_of(const char* group, const char* name) { return std::string(group) + "/" + name; }

  void create_file() {
    const std::string what = "cannot create checkpoint '" + path_ + "'";
    Hdf5Handle access(hdf5_check(H5Pcreate(H5P_FILE_ACCESS), what, kWriteFix), H5Pclose);
    hdf5_check_status(H5Pset_fapl_mpio(access.get(), comm_, MPI_INFO_NULL), what, kWriteFix);
    // The 1.8 file format: readable by every HDF5 (and h5py) since 2008, with
    // checksummed metadata and attributes larger than 64 KiB (the deck).
    hdf5_check_status(H5Pset_libver_bounds(access.get(), H5F_LIBVER_V18, H5F_LIBVER_V18), what, kWriteFix);
    hdf5_check_status(H5Pset_coll_metadata_write(access.get(), true), what, kWriteFix);
    Hdf5Handle create(hdf5_check(H5Pcreate(H5P_FILE_CREATE), what, kWriteFix), H5Pclose);
    H5Pset_obj_track_times(create.get(), false);
    file_ = hdf5_check(H5Fcreate(path_.c_str(), H5F_ACC_TRUNC, create.get(), access.get()), what, kWriteFix);
    collective_ = Hdf5Handle(hdf5_check(H5Pcreate(H5P_DATASET_XFER), what, kWriteFix), H5Pclose);
    hdf5_check_status(H5Pset_dxpl_mpio(collective_.get(), H5FD_MPIO_COLLECTIVE), what, kWriteFix);

    const CheckpointHeader& h = header_;
    const hid_t root = file_;
    hdf5_write_string_attribute(root, fmt::kFormatAttr, fmt::kFormatName);
    hdf5_write_int_attribute(root, fmt::kVersionAttr, h.format_version);
    hdf5_write_int_attribute(root, fmt::kStepAttr, h.step);
    hdf5_write_int_attribute(root, fmt::kEpochAttr, h.epoch);
    hdf5_write_int_attribute(root, fmt::kStepInEpochAttr, h.step_in_epoch);
    hdf5_write_int_attribute(root, fmt::kSamplesAttr, h.samples);
    hdf5_write_int_attribute(root, fmt::kEpochSamplesAttr, h.epoch_samples);
    checkpoint_hdf5::write_double_attribute(root, fmt::kTrainSecondsAttr, h.train_seconds);
    hdf5_write_string_attribute(root, fmt::kConfigAttr, h.config_ini);
    hdf5_write_string_attribute(root, fmt::kStrataVersionAttr, h.strata_version);
    hdf5_write_int_attribute(root, fmt::kProducersAttr, h.producers);
    hdf5_write_int_attribute(root, fmt::kTrainersAttr, h.trainers);
    hdf5_write_int_attribute(root, fmt::kServersAttr, h.servers);
    hdf5_write_string_attribute(root, fmt::kStoreModeAttr, h.store_mode);
    hdf5_write_int_attribute(root, fmt::kNumDenseAttr, h.num_dense);
    hdf5_write_int_attribute(root, fmt::kNumTablesAttr, h.num_tables);
    hdf5_write_int_attribute(root, fmt::kEmbeddingDimAttr, h.embedding_dim);
    hdf5_write_int_attribute(root, fmt::kRowWidthAttr, h.row_width);
    hdf5_write_string_attribute(root, fmt::kDenseOptimizerAttr, h.dense_optimizer);
    hdf5_write_string_attribute(root, fmt::kSparseOptimizerAttr, h.sparse_optimizer);
    hdf5_write_int_attribute(root, fmt::kDenseOptimizerStepsAttr, h.dense_optimizer_steps);
    hdf5_write_int_attribute(root, fmt::kAdmissionCountersAttr, h.admission_counters);
    if (!h.run_id.empty()) hdf5_write_string_attribute(root, fmt::kRunIdAttr, h.run_id);
    if (!h.deck_fingerprint.empty()) hdf5_write_string_attribute(root, fmt::kDeckFingerprintAttr, h.deck_fingerprint);
    hdf5_write_string_attribute(
        root, fmt::kChecksumNoteAttr,
        "xxh3_64 attributes: XXH3-64 (seed 0) of a dataset's bytes, little-endian, row-major; "
        "/sparse/checksums: the same per block of rows of each sparse dataset");

    Hdf5Handle group_create(hdf5_check(H5Pcreate(H5P_GROUP_CREATE), what, kWriteFix), H5Pclose);
    H5Pset_obj_track_times(group_create.get(), false);
    for (const std::string& group : {std::string(fmt::kDense), path_of(fmt::kDense, fmt::kDenseLayers),
                                    std::string(fmt::kTrainer), std::string(fmt::kSparse),
                                    std::string(fmt::kProducers), std::string(fmt::kRng)}) {
      Hdf5Handle created(hdf5_check(H5Gcreate2(root, group.c_str(), H5P_DEFAULT, group_create.get(), H5P_DEFAULT),
                                    what + ": group '" + group + "'", kWriteFix),
                         H5Gclose);
      if (group != fmt::kRng) continue;
      write_uint64_attribute(created.get(), fmt::kTrainSeedAttr, h.train_seed);
      write_uint64_attribute(created.get(), fmt::kDataSeedAttr, h.data_seed);
      hdf5_write_string_attribute(
          created.get(), fmt::kNoteAttr,
          "strata's random numbers are counter-based: each is a pure function of train_seed or data_seed and "
          "counters (step, sample, table, key), so no generator state exists to save; a run resumed at step s "
          "draws the same numbers as one that never stopped");
    }
  }

  // Stages rows [lo, hi) of `mine` as file columns and records their checksum blocks.
  void stage_round(const SparseRows& mine, int64_t lo, int64_t hi, int64_t first_row, int64_t block_rows,
                   std::vector<uint32_t>& tables, std::vector<uint64_t>& keys, std::vector<float>& row_values,
                   std::vector<float>& row_state, std::vector<unsigned char>& blocks) const {
    const int64_t width = header_.row_width, dim = header_.embedding_dim, state_width = width - dim;
    for (int64_t i = lo; i < hi; ++i) {
      const size_t at = size_t(i - lo);
      tables[at] = mine.ids[size_t(i)].table;
      keys[at] = mine.ids[size_t(i)].key;
      const float* row = mine.values.data() + i * width;
      std::copy(row, row + dim, row_values.data() + at * size_t(dim));
      std::copy(row + dim, row + width, row_state.data() + at * size_t(state_width));
    }
    for (int64_t b = lo; b < hi; b += block_rows) {
      const int64_t rows = std::min(block_rows, hi - b);
      const size_t at = size_t(b - lo);
      BlockRecord block;
      block.first_row = first_row + b;
      block.rows = rows;
      block.xxh3[0] = xxh3(tables.data() + at, size_t(rows) * sizeof(uint32_t));
      block.xxh3[1] = xxh3(keys.data() + at, size_t(rows) * sizeof(uint64_t));
      block.xxh3[2] = xxh3(row_values.data() + at * size_t(dim), size_t(rows * dim) * sizeof(float));
      block.xxh3[3] = xxh3(row_state.data() + at * size_t(state_width), size_t(rows * state_width) * sizeof(float));
      block.xxh3[4] = xxh3(mine.counts.data() + b, size_t(rows) * sizeof(uint64_t));
      checkpoint_hdf5::pack_block(block, blocks.data() + size_t(b / block_rows) * fmt::kBlockRecordBytes);
    }
  }

  // Independent write of `rows` rows of `row` floats from one rank, in calls MPI-IO can count.
  void write_in_pieces(hid_t set, const float* data, int64_t rows, int64_t row, const std::string& what) const {
    const int64_t per_piece = std::max<int64_t>(1, kPieceBytes / std::max<int64_t>(1, row * 4));
    for (int64_t first = 0; first < rows; first += per_piece) {
      write_slab(set, H5T_NATIVE_FLOAT, H5P_DEFAULT, first, std::min(per_piece, rows - first), data + first * row,
                 what, kWriteFix);
    }
  }

  void begin_part(bool& written, const char* part) {
    if (file_ < 0) throw Error(where() + part + " called after close() or a failed write", kCallerFix);
    if (written) throw Error(where() + part + " called twice", kCallerFix);
    written = true;
  }

  // The one rank that passed mine = true (every rank throws unless there is exactly one).
  int owner_of(bool mine, const char* part) const {
    const int candidate = mine ? rank_ : -1, one = mine ? 1 : 0;
    int owner = -1, owners = 0;
    mpi_check(MPI_Allreduce(&candidate, &owner, 1, MPI_INT, MPI_MAX, comm_), "MPI_Allreduce");
    mpi_check(MPI_Allreduce(&one, &owners, 1, MPI_INT, MPI_SUM, comm_), "MPI_Allreduce");
    if (owners != 1) {
      throw Error(where() + part + ": " + std::to_string(owners) + " ranks passed mine = true, exactly one must",
                  kCallerFix);
    }
    return owner;
  }

  // If any rank has a failure, every rank throws the one of the lowest such rank.
  void agree(const std::string& failure, const std::string& fix) const {
    const int mine = failure.empty() ? size_ : rank_;
    int first = size_;
    mpi_check(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm_), "MPI_Allreduce");
    if (first == size_) return;
    std::vector<char> bytes;
    if (rank_ == first) {
      comm::ByteWriter p(bytes);
      p.put_string(failure), p.put_string(fix);
    }
    broadcast(bytes, first);
    comm::ByteReader u(bytes.data(), bytes.size(), "checkpoint writer broadcast");
    const std::string what = u.get_string();
    throw Error(what, u.get_string());
  }

  // Runs `step` on every rank and agrees on its failure.
  template <class Step>
  void together(Step&& step) {
    std::string failure, fix;
    try {
      step();
    } catch (const Error& e) {
      failure = e.what_failed().empty() ? where() + "failed" : e.what_failed(), fix = e.how_to_fix();
    } catch (const std::exception& e) {
      failure = where() + e.what(), fix = kWriteFix;
    }
    agree(failure, fix);
  }

  void broadcast(std::vector<char>& bytes, int root) const {
    uint64_t size = bytes.size();
    mpi_check(MPI_Bcast(&size, 1, MPI_UINT64_T, root, comm_), "MPI_Bcast");
    if (size > uint64_t(1) << 30) throw Error(where() + "a broadcast of " + std::to_string(size) + " bytes", kCallerFix);
    bytes.resize(size_t(size));
    mpi_check(MPI_Bcast(bytes.data(), int(size), MPI_BYTE, root, comm_), "MPI_Bcast");
  }

  int64_t exclusive_sum(int64_t value) const {
    int64_t before = 0;
    mpi_check(MPI_Exscan(&value, &before, 1, MPI_INT64_T, MPI_SUM, comm_), "MPI_Exscan");
    return rank_ == 0 ? 0 : before;  // MPI leaves rank 0's result undefined
  }

  int64_t sum(int64_t value) const {
    int64_t total = 0;
    mpi_check(MPI_Allreduce(&value, &total, 1, MPI_INT64_T, MPI_SUM, comm_), "MPI_Allreduce");
    return total;
  }

  int64_t maximum(int64_t value) const {
    int64_t most = 0;
    mpi_check(MPI_Allreduce(&value, &most, 1, MPI_INT64_T, MPI_MAX, comm_), "MPI_Allreduce");
    return most;
  }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  std::string path_;
  CheckpointWriterOptions options_;
  CheckpointHeader header_;           // rank 0's, on every rank
  hid_t file_ = H5I_INVALID_HID;      // closed by close() (status checked) or the destructor
  Hdf5Handle collective_;             // transfer list for collective MPI-IO
  bool dense_written_ = false, trainer_written_ = false, rows_written_ = false, producers_written_ = false;
};

CheckpointWriter::CheckpointWriter(MPI_Comm comm, const std::string& path, const CheckpointHeader& header,
                                   const CheckpointWriterOptions& options)
    : impl_(std::make_unique<Impl>(comm, path, header, options)) {}

CheckpointWriter::~CheckpointWriter() = default;

void CheckpointWriter::write_dense(const std::vector<model::ParameterSlice>& slices, const std::vector<float>& values,
                                   const std::vector<float>& optimizer_state, bool mine) {
  impl_->write_dense(slices, values, optimizer_state, mine);
}

void CheckpointWriter::write_trainer_state(const TrainerState& state, bool mine) {
  impl_->write_trainer_state(state, mine);
}

void CheckpointWriter::write_rows(const SparseRows& mine) { impl_->write_rows(mine); }

void CheckpointWriter::write_producers(const ProducerState* mine, const std::vector<uint32_t>* admission) {
  impl_->write_producers(mine, admission);
}

void CheckpointWriter::close() { impl_->close(); }

}  // namespace strata::io
