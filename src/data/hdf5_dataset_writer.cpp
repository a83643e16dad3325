// Hdf5DatasetWriter: every column is an extendible, chunked dataset written in
// whole chunks (rows are buffered until a chunk is complete), so each chunk is
// compressed at most once and readers find chunk-aligned blocks; deflate is used
// where the first chunk shows it pays.
#include "data/hdf5_dataset_writer.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "data/hdf5_columns.hpp"
#include "data/hdf5_dataset_format.hpp"

namespace strata::data {

namespace format = hdf5_format;

namespace {

using namespace hdf5_columns;

// Chunks of the dense dataset stay below this (very wide decks get fewer rows per chunk).
constexpr int64_t kMaxChunkBytes = int64_t(16) << 20;

}  // namespace

class Hdf5DatasetWriter::Impl {
 public:
  Impl(const std::string& path, const Hdf5DatasetHeader& header, const Hdf5WriterOptions& options)
      : path_(path), header_(header) {
    const Hdf5QuietErrors quiet;
    if (options.chunk_rows < 1 || options.chunk_rows > format::kMaxChunkRows) {
      throw Error("chunk of " + std::to_string(options.chunk_rows) + " rows is out of range",
                  "use 1 .. " + std::to_string(format::kMaxChunkRows) + " rows per chunk (e.g. 65536)");
    }
    if (!(options.deflate_below >= 0.0 && options.deflate_below <= 1.0)) {
      throw Error("deflate threshold " + std::to_string(options.deflate_below) + " is out of range",
                  "use a fraction in [0, 1] (1 = deflate every dataset)");
    }
    if (options.deflate_level < 0 || options.deflate_level > 9) {
      throw Error("deflate level " + std::to_string(options.deflate_level) + " is out of range",
                  "use 0 (uncompressed) .. 9");
    }
    const int num_tables = int(header.multi_hot.size());
    if (header.num_dense < 0 || header.num_dense > format::kMaxColumns || num_tables > format::kMaxColumns) {
      throw Error("dataset shape of " + std::to_string(header.num_dense) + " dense features and " +
                      std::to_string(num_tables) + " tables is out of range",
                  "at most " + std::to_string(format::kMaxColumns) + " of each");
    }
    chunk_rows_ = std::min<int64_t>(options.chunk_rows,
                                    std::max<int64_t>(1, kMaxChunkBytes / (4 * std::max(1, header.num_dense))));

    const std::string create_fix = "check that the directory of '" + path + "' exists and is writable";
    Hdf5Handle access(hdf5_check(H5Pcreate(H5P_FILE_ACCESS), "cannot create '" + path + "'", create_fix),
                      H5Pclose);
    // The 1.8 format: readable by every HDF5 since 2008, and it stores large attributes.
    hdf5_check_status(H5Pset_libver_bounds(access.get(), H5F_LIBVER_V18, H5F_LIBVER_LATEST),
                      "cannot create '" + path + "'", create_fix);
    Hdf5Handle create(hdf5_check(H5Pcreate(H5P_FILE_CREATE), "cannot create '" + path + "'", create_fix),
                      H5Pclose);
    H5Pset_obj_track_times(create.get(), false);  // no timestamps: equal inputs give equal files
    file_ = Hdf5Handle(hdf5_check(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, create.get(), access.get()),
                                  "cannot create HDF5 file '" + path + "'", create_fix),
                       H5Fclose);
    const hid_t root = file_.get();
    hdf5_write_string_attribute(root, format::kFormatAttr, format::kFormatName);
    hdf5_write_int_attribute(root, format::kVersionAttr, format::kVersion);
    hdf5_write_string_attribute(root, format::kSourceAttr, header.source);
    hdf5_write_int_attribute(root, format::kNumDenseAttr, header.num_dense);
    hdf5_write_int_attribute(root, format::kNumTablesAttr, num_tables);
    if (header.num_tasks > 1) hdf5_write_int_attribute(root, format::kNumTasksAttr, header.num_tasks);
    num_tasks_ = header.num_tasks;
    if (header.source == "csv") {
      hdf5_write_string_attribute(root, format::kCsvColumnsAttr, header.csv_columns);
      hdf5_write_string_attribute(root, format::kCsvDelimiterAttr, header.csv_delimiter);
    }
    hdf5_write_string_attribute(root, format::kInputAttr, header.input);
    hdf5_write_string_attribute(root, format::kKeyHashAttr,
                                "XXH3-64 of the field's bytes, seeded per table (strata feature_key)");
    hdf5_write_string_attribute(root, format::kDenseTransformAttr, "log(1 + max(x, 0)) as float32");
    hdf5_write_string_attribute(root, format::kCompressionAttr, compression_text(options));

    const bool shuffle = options.shuffle;
    labels_ = std::make_unique<ChunkedColumn>(
        root,
        ColumnLayout{format::kLabels, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, header.num_tasks > 1 ? 2 : 1,
                     header.num_tasks, shuffle},
        chunk_rows_, options, path);
    dense_ = std::make_unique<ChunkedColumn>(
        root, ColumnLayout{format::kDense, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, header.num_dense, shuffle},
        chunk_rows_, options, path);
    Hdf5Handle group_create(hdf5_check(H5Pcreate(H5P_GROUP_CREATE), "cannot create groups in " + path, create_fix),
                            H5Pclose);
    H5Pset_obj_track_times(group_create.get(), false);
    Hdf5Handle tables(hdf5_check(H5Gcreate2(root, format::kTables, H5P_DEFAULT, group_create.get(), H5P_DEFAULT),
                                 "cannot create group 'tables' in " + path, create_fix),
                      H5Gclose);
    tables_.resize(size_t(num_tables));
    for (int t = 0; t < num_tables; ++t) {
      Table& table = tables_[size_t(t)];
      table.multi_hot = header.multi_hot[size_t(t)];
      table.group = Hdf5Handle(hdf5_check(H5Gcreate2(tables.get(), format::table_group(t).c_str(), H5P_DEFAULT,
                                             group_create.get(), H5P_DEFAULT),
                                  "cannot create group 'tables/" + format::table_group(t) + "' in " + path,
                                  create_fix),
                       H5Gclose);
      const hid_t group = table.group.get();
      hdf5_write_int_attribute(group, format::kMultiHotAttr, table.multi_hot ? 1 : 0);
      // Keys are hashes: shuffling their bytes does not help deflate find the repeats.
      table.keys = std::make_unique<ChunkedColumn>(
          group, ColumnLayout{format::kKeys, H5T_STD_U64LE, H5T_NATIVE_UINT64, 1, 1, false}, chunk_rows_,
          options, path);
      if (table.multi_hot) {
        table.offsets = std::make_unique<ChunkedColumn>(
            group, ColumnLayout{format::kOffsets, H5T_STD_I64LE, H5T_NATIVE_INT64, 1, 1, shuffle},
            chunk_rows_, options, path);
        const int64_t zero = 0;
        table.offsets->append(&zero, 1);
      }
    }
  }

  void append(const Batch& batch) {
    const Hdf5QuietErrors quiet;
    const size_t b = size_t(batch.size);
    if (batch.num_dense != header_.num_dense || batch.tables.size() != tables_.size() ||
        batch.num_tasks != num_tasks_ || batch.labels.size() != b * size_t(num_tasks_) ||
        batch.dense.size() != b * size_t(batch.num_dense)) {
      throw Error("batch of " + std::to_string(batch.num_dense) + " dense and " +
                      std::to_string(batch.tables.size()) + " tables does not fit '" + path_ + "' (" +
                      std::to_string(header_.num_dense) + " and " + std::to_string(tables_.size()) + ")",
                  "this is a bug in the converter: the reader and writer disagree on the shape");
    }
    for (size_t t = 0; t < tables_.size(); ++t) {
      const SparseBags& bags = batch.tables[t];
      Table& table = tables_[t];
      if (bags.offsets.size() != b + 1 || size_t(bags.offsets.back()) != bags.keys.size()) {
        throw Error("table " + std::to_string(t) + " of a batch has inconsistent bags",
                    "append batches before deduplicate()");
      }
      if (table.multi_hot) {
        table.absolute_offsets.clear();
        for (size_t r = 1; r <= b; ++r) table.absolute_offsets.push_back(table.num_keys + bags.offsets[r]);
        table.offsets->append(table.absolute_offsets.data(), int64_t(b));
        table.num_keys += int64_t(bags.keys.size());
      } else if (bags.keys.size() != b) {
        throw Error("table " + std::to_string(t) + " is one-hot but a batch holds " +
                        std::to_string(bags.keys.size()) + " keys for " + std::to_string(b) + " samples",
                    "declare the table's column as multi:N:SEP in data.csv_columns");
      }
      table.keys->append(bags.keys.data(), int64_t(bags.keys.size()));
    }
    labels_->append(batch.labels.data(), int64_t(b));
    dense_->append(batch.dense.data(), int64_t(b));
  }

  void finish(int64_t input_lines, int64_t malformed_lines) {
    const Hdf5QuietErrors quiet;
    labels_->finish();
    dense_->finish();
    for (Table& table : tables_) {
      table.keys->finish();
      if (table.offsets) table.offsets->finish();
    }
    const hid_t root = file_.get();
    hdf5_write_int_attribute(root, format::kNumRowsAttr, labels_->rows());
    hdf5_write_int_attribute(root, format::kChunkRowsAttr, labels_->chunk_rows());
    hdf5_write_int_attribute(root, format::kInputLinesAttr, input_lines);
    hdf5_write_int_attribute(root, format::kMalformedLinesAttr, malformed_lines);
    labels_.reset();
    dense_.reset();
    tables_.clear();
    // Closing flushes everything: only a clean close means a complete file.
    const herr_t closed = H5Fclose(file_.get());
    file_ = Hdf5Handle();
    hdf5_check_status(closed, "cannot close '" + path_ + "' after writing it",
                      "check that the output's file system has space");
  }

  int64_t rows() const { return labels_ ? labels_->rows() : 0; }
  int64_t chunk_rows() const { return chunk_rows_; }

 private:
  struct Table {
    bool multi_hot = false;
    Hdf5Handle group;                        // tables/<t>, open while its columns are written
    std::unique_ptr<ChunkedColumn> keys;     // (rows) one-hot or (nnz) multi-hot
    std::unique_ptr<ChunkedColumn> offsets;  // (rows + 1) multi-hot only
    int64_t num_keys = 0;                    // keys appended so far (multi-hot)
    std::vector<int64_t> absolute_offsets;   // (batch rows) scratch
  };

  std::string path_;
  Hdf5DatasetHeader header_;
  int64_t chunk_rows_ = 0;
  Hdf5Handle file_;
  std::unique_ptr<ChunkedColumn> labels_;  // (rows) or (rows, num_tasks)
  int num_tasks_ = 1;
  std::unique_ptr<ChunkedColumn> dense_;   // (rows, num_dense)
  std::vector<Table> tables_;
};

Hdf5DatasetWriter::Hdf5DatasetWriter(const std::string& path, const Hdf5DatasetHeader& header,
                                     const Hdf5WriterOptions& options)
    : impl_(std::make_unique<Impl>(path, header, options)) {}

Hdf5DatasetWriter::~Hdf5DatasetWriter() = default;

void Hdf5DatasetWriter::append(const Batch& batch) { impl_->append(batch); }

void Hdf5DatasetWriter::finish(int64_t input_lines, int64_t malformed_lines) {
  impl_->finish(input_lines, malformed_lines);
}

int64_t Hdf5DatasetWriter::rows() const { return impl_->rows(); }

int64_t Hdf5DatasetWriter::chunk_rows() const { return impl_->chunk_rows(); }

}  // namespace strata::data
