// Column plumbing of strata's HDF5 datasets: opening and checking files and
// columns, reading row ranges, and the writer's deflate probe.
#include "data/hdf5_columns.hpp"

#include <zlib.h>  // linked with HDF5 (its deflate filter): to try deflate on a first chunk

#include <filesystem>
#include <limits>

#include "common/error.hpp"

namespace strata::data::hdf5_columns {

const char* element_name(Element element) {
  switch (element) {
    case Element::kFloat32: return "float32";
    case Element::kUint64: return "uint64";
    case Element::kInt64: return "int64";
  }
  return "?";
}

hid_t memory_type(Element element) {
  switch (element) {
    case Element::kFloat32: return H5T_NATIVE_FLOAT;
    case Element::kUint64: return H5T_NATIVE_UINT64;
    case Element::kInt64: return H5T_NATIVE_INT64;
  }
  return H5T_NATIVE_FLOAT;
}

// Opens dataset `name` of `parent` and checks its element type and dimensions
// (-1 in `expected_dims` accepts any extent).
Column open_column(const std::string& path, hid_t parent, const std::string& name, Element element,
                   const std::vector<int64_t>& expected_dims, Reads reads) {
  const std::string what = "HDF5 dataset " + in_quotes(path) + ": '" + name + "'";
  Column column;
  Hdf5Handle access(hdf5_check(H5Pcreate(H5P_DATASET_ACCESS), what, kRewriteFix), H5Pclose);
  const size_t cache_bytes = reads == Reads::kWholeChunks ? 0 : size_t(16) << 20;
  H5Pset_chunk_cache(access.get(), H5D_CHUNK_CACHE_NSLOTS_DEFAULT, cache_bytes, H5D_CHUNK_CACHE_W0_DEFAULT);
  column.dataset = hdf5_open_dataset(parent, name, "HDF5 dataset " + in_quotes(path), kRewriteFix, access.get());
  Hdf5Handle type(hdf5_check(H5Dget_type(column.dataset.get()), what + " has no datatype", kRewriteFix),
                  H5Tclose);
  const H5T_class_t type_class = H5Tget_class(type.get());
  const size_t size = H5Tget_size(type.get());
  bool ok = false;
  if (element == Element::kFloat32) {
    ok = type_class == H5T_FLOAT && size == 4;
  } else {
    const H5T_sign_t sign = H5Tget_sign(type.get());
    ok = type_class == H5T_INTEGER && size == 8 &&
         sign == (element == Element::kUint64 ? H5T_SGN_NONE : H5T_SGN_2);
  }
  if (!ok) throw Error(what + " is not " + element_name(element), kRewriteFix);
  const std::vector<hsize_t> dims = hdf5_dims(column.dataset.get(), what);
  bool shape_ok = dims.size() == expected_dims.size();
  for (size_t d = 0; shape_ok && d < dims.size(); ++d) {
    shape_ok = expected_dims[d] < 0 || dims[d] == hsize_t(expected_dims[d]);
  }
  if (!shape_ok) {
    auto text = [](const auto& list) {
      std::string out = "(";
      for (size_t d = 0; d < list.size(); ++d) {
        out += (d ? ", " : "") + (int64_t(list[d]) < 0 ? std::string("any") : std::to_string(list[d]));
      }
      return out + ")";
    };
    throw Error(what + " has shape " + text(dims) + ", expected " + text(expected_dims) +
                    " from the file's attributes",
                kRewriteFix);
  }
  if (!dims.empty() && dims[0] > hsize_t(std::numeric_limits<int64_t>::max() / 2)) {
    throw Error(what + " is implausibly long", kRewriteFix);
  }
  column.length = dims.empty() ? 0 : int64_t(dims[0]);
  return column;
}

// Reads rows [first, first + count) of a (length, width) column into `out`.
void read_rows(const std::string& path, const char* name, const Column& column, Element element,
               int64_t first, int64_t count, int64_t width, void* out) {
  if (count == 0 || width == 0) return;
  const std::string what = "cannot read rows [" + std::to_string(first) + ", " + std::to_string(first + count) +
                           ") of '" + name + "' in HDF5 dataset " + in_quotes(path);
  const std::string fix = "the file is damaged; " + std::string(kRewriteFix);
  Hdf5Handle file_space(hdf5_check(H5Dget_space(column.dataset.get()), what, fix), H5Sclose);
  const hsize_t start[2] = {hsize_t(first), 0};
  const hsize_t extent[2] = {hsize_t(count), hsize_t(width)};
  const int rank = H5Sget_simple_extent_ndims(file_space.get());
  hdf5_check_status(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, extent, nullptr), what,
                    fix);
  Hdf5Handle memory_space(hdf5_check(H5Screate_simple(rank, extent, nullptr), what, fix), H5Sclose);
  hdf5_check_status(H5Dread(column.dataset.get(), memory_type(element), memory_space.get(), file_space.get(),
                            H5P_DEFAULT, out),
                    what, fix);
}

int64_t checked_attribute(hid_t file, const std::string& path, const char* name, int64_t lo, int64_t hi) {
  const int64_t value = hdf5_read_int_attribute(file, name, "HDF5 dataset " + in_quotes(path), kRewriteFix);
  if (value < lo || value > hi) {
    throw Error("HDF5 dataset " + in_quotes(path) + ": attribute '" + name + "' = " + std::to_string(value) +
                    " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]",
                kRewriteFix);
  }
  return value;
}

Hdf5Handle open_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) throw Error("HDF5 dataset " + in_quotes(path) + " does not exist", kPathFix);
  if (!fs::is_regular_file(status)) {
    throw Error("HDF5 dataset " + in_quotes(path) + " is not a regular file", "name the .h5 file itself");
  }
  const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  if (is_hdf5 <= 0) {
    const std::string why = hdf5_failure();
    throw Error("'" + path + "' is not an HDF5 file (no HDF5 signature" +
                    (is_hdf5 < 0 && !why.empty() ? "; HDF5: " + why : std::string()) + ")",
                "data.source = hdf5 reads files written by 'strata convert'; read a text file with "
                "data.source = criteo, csv or sequences, or convert it first");
  }
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) {
    const std::string why = hdf5_failure();
    if (why.find("truncated") != std::string::npos) {
      throw Error("HDF5 dataset " + in_quotes(path) + " is truncated: it is shorter than its header says (HDF5: " +
                      why + ")",
                  "the file was cut short (full disk, interrupted copy); copy it again or " +
                      std::string(kRewriteFix));
    }
    throw Error("HDF5 dataset " + in_quotes(path) + " cannot be opened (HDF5: " + why + ")",
                "check that the file is complete and readable; " + std::string(kRewriteFix));
  }
  return Hdf5Handle(file, H5Fclose);
}

// The chunk length of a per-row dataset (0 when it is not chunked).
int64_t chunk_rows_of(const Column& column) {
  Hdf5Handle plist(H5Dget_create_plist(column.dataset.get()), H5Pclose);
  if (!plist.valid()) {
    hdf5_failure();  // unknown chunking only costs speed: read default-sized blocks
    return 0;
  }
  if (H5Pget_layout(plist.get()) != H5D_CHUNKED) return 0;
  hsize_t dims[32] = {};
  const int rank = H5Pget_chunk(plist.get(), 32, dims);
  return rank >= 1 ? int64_t(dims[0]) : 0;
}


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


}  // namespace strata::data::hdf5_columns
