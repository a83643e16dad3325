// Hdf5DatasetWriter: every column is an extendible, chunked dataset written in
// whole chunks (rows are buffered until a chunk is complete), so each chunk is
// compressed at most once and readers find chunk-aligned blocks; deflate is used
// where the first chunk shows it pays.
#include "data/hdf5_dataset_writer.hpp"

#include <zlib.h>  // linked with HDF5 (its deflate filter): to try deflate on a first chunk

#include <algorithm>

#include "common/error.hpp"
#include "data/hdf5_dataset_format.hpp"
#include "data/hdf5_handle.hpp"

namespace strata::data {

namespace format = hdf5_format;

namespace {

// Chunks of the dense dataset stay below this (very wide decks get fewer rows per chunk).
constexpr int64_t kMaxChunkBytes = int64_t(16) << 20;

// How one column is stored.
struct ColumnLayout {
  const char* name;
  hid_t file_type;
  hid_t memory_type;
  int rank;              // 1: (rows); 2: (rows, width)
  int64_t width;         // elements per row (rank 2; may be 0)
  bool shuffle;          // byte shuffle before deflate
};

// The size deflate leaves of `size` bytes of `element`-byte values (as a fraction),
// after HDF5's byte shuffle when `shuffle`: what the column's chunks would shrink to.
double deflated_fraction(const char* bytes, size_t size, size_t element, bool shuffle, int level) {
  if (size == 0) return 0.0;
  std::vector<Bytef> input(bytes, bytes + size);
  if (shuffle && element > 1) {  // byte k of every value, then byte k + 1, ...
    const size_t n = size / element;
    for (size_t i = 0; i < n; ++i) {
      for (size_t k = 0; k < element; ++k) input[k * n + i] = Bytef(bytes[i * element + k]);
    }
  }
  uLongf compressed = compressBound(uLong(size));
  std::vector<Bytef> out(compressed);
  if (compress2(out.data(), &compressed, input.data(), uLong(size), level) != Z_OK) return 1.0;
  return double(compressed) / double(size);
}

// One extendible dataset written in whole chunks. It is created at the first
// write, when the first chunk can tell whether deflate is worth it.
class ChunkedColumn {
 public:
  ChunkedColumn(hid_t parent, const ColumnLayout& layout, int64_t chunk_rows, const Hdf5WriterOptions& options,
                const std::string& path)
      : parent_(parent),
        layout_(layout),
        options_(options),
        path_(path),
        width_(layout.rank == 1 ? 1 : layout.width),
        chunk_rows_(chunk_rows),
        row_bytes_(H5Tget_size(layout.memory_type) * size_t(width_)) {}

  // Appends `rows` rows of `width` elements of the column's memory type.
  void append(const void* values, int64_t rows) {
    if (rows == 0 || row_bytes_ == 0) {
      pending_rows_ += rows;
      if (row_bytes_ == 0) flush_full_chunks();
      return;
    }
    const char* bytes = static_cast<const char*>(values);
    pending_.insert(pending_.end(), bytes, bytes + size_t(rows) * row_bytes_);
    pending_rows_ += rows;
    flush_full_chunks();
  }

  void finish() {
    // A column shorter than one chunk gets a chunk of its own length: HDF5 stores
    // a partly filled chunk whole, which would make small files mostly padding.
    if (!dataset_.valid() && pending_rows_ < chunk_rows_) chunk_rows_ = std::max<int64_t>(1, pending_rows_);
    if (pending_rows_ > 0) write(pending_rows_);
    if (!dataset_.valid()) create();  // a column that never got a row
  }

  int64_t rows() const { return written_ + pending_rows_; }
  int64_t chunk_rows() const { return chunk_rows_; }

 private:
  void flush_full_chunks() {
    const int64_t full = pending_rows_ / chunk_rows_ * chunk_rows_;
    if (full > 0) write(full);
  }

  void create() {
    const std::string what = "cannot create dataset '" + std::string(layout_.name) + "' in " + path_;
    const std::string fix = "check that the output's file system has space";
    const int rank = layout_.rank;
    const hsize_t dims[2] = {0, hsize_t(width_)};
    // An empty second dimension cannot be chunked unless it may grow.
    const hsize_t max_dims[2] = {H5S_UNLIMITED, width_ == 0 ? H5S_UNLIMITED : hsize_t(width_)};
    const hsize_t chunk[2] = {hsize_t(chunk_rows_), hsize_t(std::max<int64_t>(1, width_))};
    Hdf5Handle space(hdf5_check(H5Screate_simple(rank, dims, max_dims), what, fix), H5Sclose);
    Hdf5Handle create(hdf5_check(H5Pcreate(H5P_DATASET_CREATE), what, fix), H5Pclose);
    hdf5_check_status(H5Pset_chunk(create.get(), rank, chunk), what, fix);
    H5Pset_obj_track_times(create.get(), false);  // no timestamps: equal inputs give equal files
    // Inflating costs more CPU than reading the bytes unless they shrink a lot
    // (docs/DATA_HDF5.md): the first chunk decides for the whole column.
    bool deflate = options_.deflate_level > 0;
    if (deflate && options_.deflate_below < 1.0) {
      const size_t first_chunk = std::min(pending_.size(), size_t(chunk_rows_) * row_bytes_);
      deflate = deflated_fraction(pending_.data(), first_chunk, H5Tget_size(layout_.memory_type), layout_.shuffle,
                                  options_.deflate_level) < options_.deflate_below;
    }
    if (deflate && layout_.shuffle) hdf5_check_status(H5Pset_shuffle(create.get()), what, fix);
    if (deflate) hdf5_check_status(H5Pset_deflate(create.get(), unsigned(options_.deflate_level)), what, fix);
    if (options_.checksum) hdf5_check_status(H5Pset_fletcher32(create.get()), what, fix);
    dataset_ = Hdf5Handle(hdf5_check(H5Dcreate2(parent_, layout_.name, layout_.file_type, space.get(), H5P_DEFAULT,
                                                create.get(), H5P_DEFAULT),
                                     what, fix),
                          H5Dclose);
  }

  // Writes the first `rows` pending rows at the end of the dataset.
  void write(int64_t rows) {
    if (!dataset_.valid()) create();
    const std::string what = "cannot write rows [" + std::to_string(written_) + ", " +
                             std::to_string(written_ + rows) + ") of '" + layout_.name + "' to " + path_;
    const std::string fix = "check that the output's file system has space";
    const hsize_t new_dims[2] = {hsize_t(written_ + rows), hsize_t(width_)};
    hdf5_check_status(H5Dset_extent(dataset_.get(), new_dims), what, fix);
    if (row_bytes_ > 0) {
      Hdf5Handle file_space(hdf5_check(H5Dget_space(dataset_.get()), what, fix), H5Sclose);
      const hsize_t start[2] = {hsize_t(written_), 0};
      const hsize_t count[2] = {hsize_t(rows), hsize_t(width_)};
      hdf5_check_status(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr),
                        what, fix);
      Hdf5Handle memory_space(hdf5_check(H5Screate_simple(layout_.rank, count, nullptr), what, fix), H5Sclose);
      hdf5_check_status(
          H5Dwrite(dataset_.get(), layout_.memory_type, memory_space.get(), file_space.get(), H5P_DEFAULT,
                   pending_.data()),
          what, fix);
      pending_.erase(pending_.begin(), pending_.begin() + ptrdiff_t(size_t(rows) * row_bytes_));
    }
    written_ += rows;
    pending_rows_ -= rows;
  }

  hid_t parent_;  // the group the dataset goes in (kept open by the writer)
  ColumnLayout layout_;
  Hdf5WriterOptions options_;
  std::string path_;
  Hdf5Handle dataset_;
  int64_t width_;
  int64_t chunk_rows_;
  size_t row_bytes_;
  std::vector<char> pending_;  // (pending_rows_, width_) not yet written
  int64_t pending_rows_ = 0;
  int64_t written_ = 0;
};

std::string compression_text(const Hdf5WriterOptions& options) {
  std::string text = options.deflate_level > 0 ? "deflate " + std::to_string(options.deflate_level) : "none";
  if (options.deflate_level > 0 && options.deflate_below < 1.0) {
    text += " of the datasets whose first chunk deflates below " +
            std::to_string(int(options.deflate_below * 100 + 0.5)) + "% (see each dataset's filters)";
  }
  if (options.deflate_level > 0 && options.shuffle) text += ", shuffle (labels, dense, offsets)";
  if (options.checksum) text += ", fletcher32";
  return text;
}

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
        root, ColumnLayout{format::kLabels, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 1, 1, shuffle}, chunk_rows_,
        options, path);
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
    if (batch.num_dense != header_.num_dense || batch.tables.size() != tables_.size() || batch.labels.size() != b ||
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
  std::unique_ptr<ChunkedColumn> labels_;  // (rows)
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
