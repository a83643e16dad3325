// Column plumbing shared by strata's HDF5 datasets (private to strata_core: it
// includes hdf5.h): the click-sample rows of hdf5_dataset.* and the behaviour
// sequences of sequence_hdf5.*. Reading: open an input file with errors that say
// what is wrong with it, open a column checking its element type and shape, read a
// range of its rows. Writing: an extendible, chunked column written in whole chunks
// that deflates only where its first chunk shows it pays (docs/DATA_HDF5.md).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data/hdf5_dataset_writer.hpp"
#include "data/hdf5_handle.hpp"

namespace strata::data::hdf5_columns {

inline constexpr const char* kRewriteFix =
    "convert the input again: strata convert --from criteo|csv|sequences|synthetic_sequences --to FILE.h5 "
    "[--input FILE]";
inline constexpr const char* kPathFix = "check the path given in data.train / data.eval";

inline std::string in_quotes(const std::string& path) { return "'" + path + "'"; }

// ---- reading --------------------------------------------------------------------

// A dataset of the file with its validated length (its first dimension).
struct Column {
  Hdf5Handle dataset;
  int64_t length = 0;
};

enum class Element { kFloat32, kUint64, kInt64 };
const char* element_name(Element element);
hid_t memory_type(Element element);

// How a column is read, which decides what HDF5's chunk cache is good for.
enum class Reads {
  kWholeChunks,  // per-row columns: blocks are chunks, each read once; a cache would only add a copy
  kAcrossChunks  // jagged values and offsets (N + 1: a block's last offset opens the next chunk):
                 // blocks straddle chunks; cache them so that each is inflated once
};

// Opens an existing HDF5 file read-only; strata::Error naming it when it is missing,
// not a regular file, not HDF5 or truncated.
Hdf5Handle open_file(const std::string& path);

// Opens dataset `name` of `parent` and checks its element type and dimensions
// (-1 in `expected_dims` accepts any extent).
Column open_column(const std::string& path, hid_t parent, const std::string& name, Element element,
                   const std::vector<int64_t>& expected_dims, Reads reads = Reads::kWholeChunks);

// Reads rows [first, first + count) of a (length, width) column into `out`.
void read_rows(const std::string& path, const char* name, const Column& column, Element element,
               int64_t first, int64_t count, int64_t width, void* out);

// An integer root attribute in [lo, hi]; strata::Error naming it otherwise.
int64_t checked_attribute(hid_t file, const std::string& path, const char* name, int64_t lo, int64_t hi);

// The chunk length of a per-row dataset (0 when it is not chunked).
int64_t chunk_rows_of(const Column& column);

// ---- writing --------------------------------------------------------------------

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
double deflated_fraction(const char* bytes, size_t size, size_t element, bool shuffle, int level);

// The root attribute `compression`: what the writer options do, for people.
std::string compression_text(const Hdf5WriterOptions& options);

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

}  // namespace strata::data::hdf5_columns
