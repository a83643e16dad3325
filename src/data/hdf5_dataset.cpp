// The HDF5 SampleReader: validates a columnar dataset file completely at open,
// then reads its shard block by block (one HDF5 chunk of rows per block, one
// hyperslab read per column) and deals rows out of the block buffers into batches.
#include "data/hdf5_dataset.hpp"

#include <algorithm>
#include <filesystem>
#include <limits>

#include "common/error.hpp"
#include "data/csv_format.hpp"
#include "data/hdf5_columns.hpp"
#include "data/hdf5_dataset_format.hpp"

namespace strata::data {

namespace format = hdf5_format;

namespace {

using namespace hdf5_columns;

// Bounds what one block may allocate, whatever the file claims (shapes are validated,
// but a valid file can still have huge chunks or very hot rows).
constexpr int64_t kMaxBlockBytes = int64_t(64) << 20;
constexpr int64_t kMaxBlockKeys = int64_t(1) << 26;

struct TableColumns {
  bool multi_hot = false;
  Column keys;     // (N) one-hot, (nnz) multi-hot
  Column offsets;  // (N + 1) multi-hot only
};

// An open dataset file whose layout has been checked against itself.
struct OpenDataset {
  std::string path;
  Hdf5DatasetShape shape;
  Hdf5Handle file;
  Column labels;  // (N)
  Column dense;   // (N, num_dense)
  std::vector<TableColumns> tables;
};

OpenDataset open_dataset(const std::string& path) {
  OpenDataset ds;
  ds.path = path;
  ds.file = open_file(path);
  const hid_t file = ds.file.get();
  const std::string what = "HDF5 dataset " + in_quotes(path);
  Hdf5DatasetShape& shape = ds.shape;

  if (!hdf5_has_attribute(file, format::kFormatAttr)) {
    throw Error(what + " is an HDF5 file but not a strata dataset (its root has no '" +
                    std::string(format::kFormatAttr) + "' attribute)",
                "data.train / data.eval must name a file written by 'strata convert'");
  }
  const std::string format_name = hdf5_read_string_attribute(file, format::kFormatAttr, what, kRewriteFix);
  if (format_name != format::kFormatName) {
    throw Error(what + " holds '" + format_name + "', not a '" + format::kFormatName + "'",
                "data.train / data.eval must name a file written by 'strata convert'");
  }
  const int64_t version = hdf5_read_int_attribute(file, format::kVersionAttr, what, kRewriteFix);
  if (version > format::kVersion) {
    throw Error(what + " has format version " + std::to_string(version) + "; this strata reads versions up to " +
                    std::to_string(format::kVersion),
                "use the strata build that wrote it (or a newer one), or convert the text file again with this one");
  }
  if (version < 1) throw Error(what + " has an invalid format version " + std::to_string(version), kRewriteFix);
  shape.source = hdf5_read_string_attribute(file, format::kSourceAttr, what, kRewriteFix);
  if (format::is_sequence_source(shape.source)) {
    throw Error(what + " holds behaviour sequences (source '" + shape.source + "'), not click samples",
                "name it in data.train with data.source = hdf5 (without data.eval: it evaluates on its own "
                "held-out events), as a sequence file trains");
  }
  if (shape.source != "criteo" && shape.source != "csv") {
    throw Error(what + ": source '" + shape.source + "' is neither criteo nor csv", kRewriteFix);
  }
  shape.num_rows = checked_attribute(file, path, format::kNumRowsAttr, 1, std::numeric_limits<int64_t>::max() / 4);
  shape.num_dense = int(checked_attribute(file, path, format::kNumDenseAttr, 0, format::kMaxColumns));
  shape.num_tables = int(checked_attribute(file, path, format::kNumTablesAttr, 0, format::kMaxColumns));
  if (hdf5_has_attribute(file, format::kNumTasksAttr)) {
    shape.num_tasks = int(checked_attribute(file, path, format::kNumTasksAttr, 2, format::kMaxTasks));
  }
  if (shape.source == "csv" && hdf5_has_attribute(file, format::kCsvColumnsAttr)) {
    shape.csv_columns = hdf5_read_string_attribute(file, format::kCsvColumnsAttr, what, kRewriteFix);
  }
  if (hdf5_has_attribute(file, format::kInputLinesAttr)) {
    shape.input_lines = hdf5_read_int_attribute(file, format::kInputLinesAttr, what, kRewriteFix);
  }
  if (hdf5_has_attribute(file, format::kMalformedLinesAttr)) {
    shape.malformed_lines = hdf5_read_int_attribute(file, format::kMalformedLinesAttr, what, kRewriteFix);
  }

  const int64_t n = shape.num_rows;
  ds.labels = shape.num_tasks > 1 ? open_column(path, file, format::kLabels, Element::kFloat32, {n, shape.num_tasks})
                                  : open_column(path, file, format::kLabels, Element::kFloat32, {n});
  ds.dense = open_column(path, file, format::kDense, Element::kFloat32, {n, shape.num_dense});
  shape.chunk_rows = chunk_rows_of(ds.labels);

  Hdf5Handle tables = hdf5_open_group(file, format::kTables, what, kRewriteFix);
  H5G_info_t info{};
  hdf5_check_status(H5Gget_info(tables.get(), &info), what + ": group 'tables' is unreadable", kRewriteFix);
  if (info.nlinks != hsize_t(shape.num_tables)) {
    throw Error(what + ": group 'tables' holds " + std::to_string(info.nlinks) + " tables, attribute num_tables says " +
                    std::to_string(shape.num_tables),
                kRewriteFix);
  }
  ds.tables.resize(size_t(shape.num_tables));
  shape.multi_hot.assign(size_t(shape.num_tables), false);
  for (int t = 0; t < shape.num_tables; ++t) {
    const std::string name = std::string(format::kTables) + "/" + format::table_group(t);
    Hdf5Handle group = hdf5_open_group(tables.get(), format::table_group(t), what, kRewriteFix);
    const int64_t multi = hdf5_read_int_attribute(group.get(), format::kMultiHotAttr, what + ": '" + name + "'",
                                                  kRewriteFix);
    if (multi != 0 && multi != 1) throw Error(what + ": '" + name + "' multi_hot is not 0 or 1", kRewriteFix);
    TableColumns& table = ds.tables[size_t(t)];
    table.multi_hot = multi == 1;
    shape.multi_hot[size_t(t)] = table.multi_hot;
    if (!table.multi_hot) {
      table.keys = open_column(path, group.get(), format::kKeys, Element::kUint64, {n});
      continue;
    }
    table.keys = open_column(path, group.get(), format::kKeys, Element::kUint64, {-1}, Reads::kAcrossChunks);
    table.offsets =
        open_column(path, group.get(), format::kOffsets, Element::kInt64, {n + 1}, Reads::kAcrossChunks);
    // The ends of the offsets bound every key range; blocks check the rest as they read them.
    int64_t first = -1, last = -1;
    read_rows(path, (name + "/offsets").c_str(), table.offsets, Element::kInt64, 0, 1, 1, &first);
    read_rows(path, (name + "/offsets").c_str(), table.offsets, Element::kInt64, n, 1, 1, &last);
    if (first != 0 || last != table.keys.length) {
      throw Error(what + ": '" + name + "/offsets' runs from " + std::to_string(first) + " to " +
                      std::to_string(last) + ", expected 0 to " + std::to_string(table.keys.length) +
                      " (the length of its keys)",
                  kRewriteFix);
    }
  }
  return ds;
}

std::string shape_text(const Hdf5DatasetShape& shape) {
  int multi = 0;
  for (bool m : shape.multi_hot) multi += m ? 1 : 0;
  return std::to_string(shape.num_dense) + " dense features and " + std::to_string(shape.num_tables) +
         " tables (" + std::to_string(multi) + " multi-hot)";
}

bool same_shape(const Hdf5DatasetShape& a, const Hdf5DatasetShape& b) {
  return a.num_dense == b.num_dense && a.num_tables == b.num_tables && a.multi_hot == b.multi_hot;
}

// The file must agree with what the rest of the deck implies (see the header).
void check_against_deck(const DataOptions& options, const OpenDataset& ds) {
  const Hdf5DatasetShape& shape = ds.shape;
  if (shape.source == "csv" && !options.csv_columns.empty()) {
    const CsvSchema schema = parse_csv_schema(options);
    Hdf5DatasetShape deck;
    deck.num_dense = schema.num_dense;
    deck.num_tables = schema.num_tables;
    deck.multi_hot.assign(size_t(schema.num_tables), false);
    for (const CsvColumn& column : schema.columns) {
      if (column.kind == CsvColumn::Kind::kMultiHot) deck.multi_hot[size_t(column.target)] = true;
    }
    if (!same_shape(shape, deck)) {
      throw Error("HDF5 dataset " + in_quotes(ds.path) + " holds " + shape_text(shape) + " (converted with " +
                      "data.csv_columns = '" + shape.csv_columns + "'), but the deck's data.csv_columns = '" +
                      options.csv_columns + "' gives " + shape_text(deck),
                  "use the deck the file was converted with, or convert the text file again with this deck");
    }
  }
  if (options.source == "hdf5" && !options.train.empty() && options.train != ds.path) {
    std::error_code ec;
    if (std::filesystem::equivalent(options.train, ds.path, ec)) return;
    const Hdf5DatasetShape train = read_hdf5_shape(options.train);
    if (!same_shape(shape, train)) {
      throw Error("HDF5 dataset " + in_quotes(ds.path) + " holds " + shape_text(shape) + ", but data.train " +
                      in_quotes(options.train) + " holds " + shape_text(train),
                  "convert the training and held-out files from the same format and deck");
    }
  }
}

class Hdf5SampleReader final : public SampleReader {
 public:
  Hdf5SampleReader(OpenDataset dataset, int shard, int num_shards, const Hdf5ReaderTuning& tuning)
      : ds_(std::move(dataset)) {
    const Hdf5DatasetShape& shape = ds_.shape;
    __extension__ using u128 = unsigned __int128;
    const auto cut = [&](int s) { return int64_t(u128(shape.num_rows) * u128(s) / u128(num_shards)); };
    begin_ = cut(shard);
    end_ = cut(shard + 1);
    // A block is one chunk of the file (each chunk is then decompressed once), as
    // long as its buffers stay small.
    int64_t rows = tuning.block_rows > 0 ? tuning.block_rows
                   : shape.chunk_rows > 0 ? std::min(shape.chunk_rows, format::kMaxChunkRows)
                                          : int64_t(65536);
    const int64_t bytes_per_row = 4 + 4 * int64_t(shape.num_dense) + 8 * int64_t(shape.num_tables);
    block_rows_ = std::max<int64_t>(1, std::min(rows, kMaxBlockBytes / bytes_per_row));
    table_keys_.resize(size_t(shape.num_tables));
    table_offsets_.resize(size_t(shape.num_tables));
    next_ = begin_;
  }

  int32_t read(int32_t max_samples, Batch& batch) override {
    const Hdf5QuietErrors quiet;
    const int num_dense = ds_.shape.num_dense;
    const int num_tables = ds_.shape.num_tables;
    const int num_tasks = ds_.shape.num_tasks;
    if (batch.num_dense != num_dense || batch.tables.size() != size_t(num_tables) || batch.num_tasks != num_tasks) {
      if (batch.size != 0) {
        throw Error("batch has " + std::to_string(batch.num_dense) + " dense and " +
                        std::to_string(batch.tables.size()) + " tables, " + in_quotes(ds_.path) + " gives " +
                        std::to_string(num_dense) + " and " + std::to_string(num_tables),
                    "reset the batch with hdf5_num_dense() and hdf5_num_tables()");
      }
      batch.reset(num_dense, num_tables, num_tasks);
    }
    int32_t delivered = 0;
    while (delivered < max_samples && next_ < end_) {
      if (next_ < block_first_ || next_ >= block_end_) load_block(next_);
      const int64_t n = std::min<int64_t>(max_samples - delivered, block_end_ - next_);
      append_rows(next_ - block_first_, n, batch);
      next_ += n;
      delivered += int32_t(n);
    }
    stats_.lines += delivered;
    stats_.samples += delivered;
    return delivered;
  }

  void rewind() override { next_ = begin_; }

  ReaderPosition position() const override { return {next_, next_}; }

  void seek(const ReaderPosition& position) override {
    if (position.byte_offset < begin_ || position.byte_offset > end_ || position.line != position.byte_offset) {
      throw Error("reader position (row " + std::to_string(position.byte_offset) + ", line " +
                      std::to_string(position.line) + ") is not a row in [" + std::to_string(begin_) + ", " +
                      std::to_string(end_) + "] of " + in_quotes(ds_.path),
                  "resume with a position() taken from an HDF5 reader of the same file, shard and shard count");
    }
    next_ = position.byte_offset;
  }

  const ParseStats& stats() const override { return stats_; }

 private:
  // Reads rows [first, end of first's block) of every column into the block buffers.
  void load_block(int64_t first) {
    const int64_t last = std::min(end_, (first / block_rows_ + 1) * block_rows_);
    const int64_t rows = last - first;
    const Hdf5DatasetShape& shape = ds_.shape;
    block_first_ = block_end_ = first;  // empty until every column is read
    labels_.resize(size_t(rows * shape.num_tasks));
    dense_.resize(size_t(rows * shape.num_dense));
    read_rows(ds_.path, format::kLabels, ds_.labels, Element::kFloat32, first, rows, shape.num_tasks, labels_.data());
    read_rows(ds_.path, format::kDense, ds_.dense, Element::kFloat32, first, rows, shape.num_dense, dense_.data());
    for (int t = 0; t < shape.num_tables; ++t) {
      const TableColumns& table = ds_.tables[size_t(t)];
      std::vector<uint64_t>& keys = table_keys_[size_t(t)];
      const std::string name = std::string(format::kTables) + "/" + format::table_group(t);
      if (!table.multi_hot) {
        keys.resize(size_t(rows));
        read_rows(ds_.path, (name + "/keys").c_str(), table.keys, Element::kUint64, first, rows, 1, keys.data());
        continue;
      }
      std::vector<int64_t>& offsets = table_offsets_[size_t(t)];  // (rows + 1) absolute
      offsets.resize(size_t(rows + 1));
      read_rows(ds_.path, (name + "/offsets").c_str(), table.offsets, Element::kInt64, first, rows + 1, 1,
                offsets.data());
      for (int64_t r = 0; r < rows; ++r) {
        if (offsets[size_t(r)] < 0 || offsets[size_t(r + 1)] < offsets[size_t(r)] ||
            offsets[size_t(r + 1)] > table.keys.length) {
          throw Error("HDF5 dataset " + in_quotes(ds_.path) + ": '" + name + "/offsets' is damaged at row " +
                          std::to_string(first + r) + " (decreasing or past the end of the keys)",
                      kRewriteFix);
        }
      }
      const int64_t nnz = offsets[size_t(rows)] - offsets[0];
      if (nnz > kMaxBlockKeys) {
        throw Error("HDF5 dataset " + in_quotes(ds_.path) + ": rows [" + std::to_string(first) + ", " +
                        std::to_string(last) + ") of '" + name + "' hold " + std::to_string(nnz) +
                        " keys, more than the " + std::to_string(kMaxBlockKeys) + " a block may hold",
                    "convert with smaller chunks (strata convert --chunk-rows)");
      }
      keys.resize(size_t(nnz));
      read_rows(ds_.path, (name + "/keys").c_str(), table.keys, Element::kUint64, offsets[0], nnz, 1, keys.data());
    }
    block_first_ = first;
    block_end_ = last;
  }

  // Appends rows [at, at + n) of the block to the batch, in the text reader's form.
  void append_rows(int64_t at, int64_t n, Batch& batch) {
    const int num_dense = ds_.shape.num_dense;
    const int tasks = ds_.shape.num_tasks;
    batch.labels.insert(batch.labels.end(), labels_.begin() + at * tasks, labels_.begin() + (at + n) * tasks);
    batch.dense.insert(batch.dense.end(), dense_.begin() + at * num_dense, dense_.begin() + (at + n) * num_dense);
    for (size_t t = 0; t < batch.tables.size(); ++t) {
      SparseBags& bags = batch.tables[t];
      const std::vector<uint64_t>& keys = table_keys_[t];
      const int64_t base = int64_t(bags.keys.size());
      const size_t first_offset = bags.offsets.size();
      bags.offsets.resize(first_offset + size_t(n));
      int32_t* offsets_out = bags.offsets.data() + first_offset;  // (n) ends of the new bags
      if (!ds_.tables[t].multi_hot) {
        bags.keys.insert(bags.keys.end(), keys.begin() + at, keys.begin() + at + n);
        for (int64_t r = 0; r < n; ++r) offsets_out[r] = int32_t(base + r + 1);
        continue;
      }
      const std::vector<int64_t>& offsets = table_offsets_[t];
      const int64_t key_begin = offsets[size_t(at)] - offsets[0];
      const int64_t key_end = offsets[size_t(at + n)] - offsets[0];
      if (base + (key_end - key_begin) > std::numeric_limits<int32_t>::max()) {
        throw Error("a batch from " + in_quotes(ds_.path) + " would hold more than 2^31 keys in table " +
                        std::to_string(t),
                    "use a smaller train.batch_size");
      }
      bags.keys.insert(bags.keys.end(), keys.begin() + key_begin, keys.begin() + key_end);
      for (int64_t r = 0; r < n; ++r) {
        offsets_out[r] = int32_t(base + offsets[size_t(at + r + 1)] - offsets[size_t(at)]);
      }
    }
    batch.size += int32_t(n);
  }

  OpenDataset ds_;
  int64_t begin_ = 0, end_ = 0;  // the shard's rows [begin_, end_)
  int64_t next_ = 0;             // next row to deliver
  int64_t block_rows_ = 1;
  int64_t block_first_ = 0, block_end_ = 0;  // rows held by the block buffers
  std::vector<float> labels_;                // (block rows, num_tasks)
  std::vector<float> dense_;                 // (block rows, num_dense)
  std::vector<std::vector<uint64_t>> table_keys_;    // (num_tables) (block rows) or (block nnz)
  std::vector<std::vector<int64_t>> table_offsets_;  // (num_tables) (block rows + 1), multi-hot only
  ParseStats stats_;
};

}  // namespace

Hdf5DatasetShape read_hdf5_shape(const std::string& path) {
  const Hdf5QuietErrors quiet;
  return open_dataset(path).shape;
}

int hdf5_num_dense(const std::string& path) { return read_hdf5_shape(path).num_dense; }

int hdf5_num_tables(const std::string& path) { return read_hdf5_shape(path).num_tables; }

std::unique_ptr<SampleReader> open_hdf5_reader(const DataOptions& options, const std::string& path, int shard,
                                               int num_shards, const Hdf5ReaderTuning& tuning) {
  if (num_shards < 1 || shard < 0 || shard >= num_shards) {
    throw Error("shard " + std::to_string(shard) + " of " + std::to_string(num_shards) + " of " + in_quotes(path) +
                    " does not exist",
                "shards are numbered 0 .. num_shards - 1");
  }
  const Hdf5QuietErrors quiet;
  OpenDataset dataset = open_dataset(path);
  check_against_deck(options, dataset);
  return std::make_unique<Hdf5SampleReader>(std::move(dataset), shard, num_shards, tuning);
}

std::unique_ptr<SampleReader> open_hdf5_reader(const DataOptions& options, const std::string& path, int shard,
                                               int num_shards) {
  return open_hdf5_reader(options, path, shard, num_shards, Hdf5ReaderTuning{});
}

}  // namespace strata::data
