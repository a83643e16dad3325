// HDF5 plumbing of the checkpoint file: typed attributes, packed records, row
// slabs and checksums (see the header).
#include "io/checkpoint_hdf5.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "common/error.hpp"

namespace strata::io::checkpoint_hdf5 {

namespace fmt = checkpoint_format;
using data::hdf5_check;
using data::hdf5_check_status;
using data::hdf5_has_attribute;

namespace {

constexpr const char* kWriteFix = "check the free space and permissions of checkpoint.dir";

// Opens attribute `name` and checks that it holds one value of class `type_class`.
Hdf5Handle open_scalar_attribute(hid_t object, const std::string& name, H5T_class_t type_class,
                                 const char* type_text, const std::string& what, const std::string& fix) {
  if (!hdf5_has_attribute(object, name)) throw Error(what + ": attribute '" + name + "' is missing", fix);
  Hdf5Handle attribute(hdf5_check(H5Aopen(object, name.c_str(), H5P_DEFAULT),
                                  what + ": attribute '" + name + "' cannot be opened", fix),
                       H5Aclose);
  Hdf5Handle space(hdf5_check(H5Aget_space(attribute.get()), what + ": attribute '" + name + "'", fix), H5Sclose);
  if (H5Sget_simple_extent_npoints(space.get()) != 1) {
    throw Error(what + ": attribute '" + name + "' holds more than one value", fix);
  }
  Hdf5Handle type(hdf5_check(H5Aget_type(attribute.get()), what + ": attribute '" + name + "'", fix), H5Tclose);
  if (H5Tget_class(type.get()) != type_class) {
    throw Error(what + ": attribute '" + name + "' is not " + type_text, fix);
  }
  return attribute;
}

void write_scalar_attribute(hid_t object, const std::string& name, hid_t file_type, hid_t memory_type,
                            const void* value) {
  const std::string what = "cannot write attribute '" + name + "'";
  Hdf5Handle space(hdf5_check(H5Screate(H5S_SCALAR), what, kWriteFix), H5Sclose);
  Hdf5Handle attribute(
      hdf5_check(H5Acreate2(object, name.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT), what,
                 kWriteFix),
      H5Aclose);
  hdf5_check_status(H5Awrite(attribute.get(), memory_type, value), what, kWriteFix);
}

template <class T>
void put(unsigned char* out, size_t offset, T value) {
  std::memcpy(out + offset, &value, sizeof(T));
}

template <class T>
T get(const unsigned char* in, size_t offset) {
  T value;
  std::memcpy(&value, in + offset, sizeof(T));
  return value;
}

// A compound type of `bytes` bytes; members are inserted by the callers.
Hdf5Handle compound(size_t bytes) {
  return Hdf5Handle(hdf5_check(H5Tcreate(H5T_COMPOUND, bytes), "cannot create an HDF5 compound type",
                               "this is a bug in strata"),
                    H5Tclose);
}

void member(const Hdf5Handle& type, const char* name, size_t offset, hid_t member_type) {
  hdf5_check_status(H5Tinsert(type.get(), name, offset, member_type),
                    std::string("cannot add member '") + name + "' to an HDF5 compound type", "this is a bug in strata");
}

constexpr const char* kProducerI64Fields[] = {"epoch",       "round_in_epoch", "byte_offset", "line",     "shard_begin",
                                              "shard_end",   "lines",          "samples",     "malformed"};
constexpr const char* kProducerU64Fields[] = {"admission_seen", "admission_defaulted", "admission_xxh3"};
constexpr const char* kBlockChecksumFields[fmt::kSparseColumns] = {"table", "key", "values", "optimizer_state",
                                                                   "access_count"};

}  // namespace

void write_double_attribute(hid_t object, const std::string& name, double value) {
  write_scalar_attribute(object, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
}

double read_double_attribute(hid_t object, const std::string& name, const std::string& what, const std::string& fix) {
  Hdf5Handle attribute = open_scalar_attribute(object, name, H5T_FLOAT, "a floating-point number", what, fix);
  double value = 0;
  hdf5_check_status(H5Aread(attribute.get(), H5T_NATIVE_DOUBLE, &value),
                    what + ": attribute '" + name + "' cannot be read", fix);
  return value;
}

void write_uint64_attribute(hid_t object, const std::string& name, uint64_t value) {
  write_scalar_attribute(object, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, &value);
}

uint64_t read_uint64_attribute(hid_t object, const std::string& name, const std::string& what,
                               const std::string& fix) {
  Hdf5Handle attribute = open_scalar_attribute(object, name, H5T_INTEGER, "an integer", what, fix);
  Hdf5Handle type(hdf5_check(H5Aget_type(attribute.get()), what + ": attribute '" + name + "'", fix), H5Tclose);
  if (H5Tget_sign(type.get()) != H5T_SGN_NONE || H5Tget_size(type.get()) > 8) {
    throw Error(what + ": attribute '" + name + "' is not an unsigned 64-bit integer", fix);
  }
  uint64_t value = 0;
  hdf5_check_status(H5Aread(attribute.get(), H5T_NATIVE_UINT64, &value),
                    what + ": attribute '" + name + "' cannot be read", fix);
  return value;
}

Hdf5Handle trainer_record_type() {
  Hdf5Handle type = compound(fmt::kTrainerRecordBytes);
  member(type, "window_loss", 0, H5T_IEEE_F64LE);
  member(type, "window_samples", 8, H5T_STD_I64LE);
  member(type, "window_steps", 16, H5T_STD_I64LE);
  member(type, "last_window_loss", 24, H5T_IEEE_F64LE);
  const hsize_t four = 4;
  Hdf5Handle levels(hdf5_check(H5Tarray_create2(H5T_IEEE_F64LE, 1, &four), "cannot create an HDF5 array type",
                               "this is a bug in strata"),
                    H5Tclose);
  member(type, "last_levels", 32, levels.get());
  return type;
}

Hdf5Handle producer_record_type() {
  Hdf5Handle type = compound(fmt::kProducerRecordBytes);
  member(type, "producer", 0, H5T_STD_I32LE);
  size_t offset = 4;
  for (const char* name : kProducerI64Fields) {
    member(type, name, offset, H5T_STD_I64LE);
    offset += 8;
  }
  for (const char* name : kProducerU64Fields) {
    member(type, name, offset, H5T_STD_U64LE);
    offset += 8;
  }
  return type;
}

Hdf5Handle block_record_type() {
  Hdf5Handle type = compound(fmt::kBlockRecordBytes);
  member(type, "first_row", 0, H5T_STD_I64LE);
  member(type, "rows", 8, H5T_STD_I64LE);
  for (int c = 0; c < fmt::kSparseColumns; ++c) member(type, kBlockChecksumFields[c], 16 + 8 * size_t(c), H5T_STD_U64LE);
  return type;
}

void pack_trainer(const TrainerState& state, unsigned char* out) {
  put(out, 0, state.window_loss);
  put(out, 8, state.window_samples);
  put(out, 16, state.window_steps);
  put(out, 24, state.last_window_loss);
  for (size_t i = 0; i < 4; ++i) put(out, 32 + 8 * i, state.last_levels[i]);
}

TrainerState unpack_trainer(const unsigned char* in) {
  TrainerState state;
  state.window_loss = get<double>(in, 0);
  state.window_samples = get<int64_t>(in, 8);
  state.window_steps = get<int64_t>(in, 16);
  state.last_window_loss = get<double>(in, 24);
  for (size_t i = 0; i < 4; ++i) state.last_levels[i] = get<double>(in, 32 + 8 * i);
  return state;
}

void pack_producer(const ProducerState& s, uint64_t admission_xxh3, unsigned char* out) {
  put(out, 0, s.producer);
  const int64_t fields[] = {s.epoch,     s.round_in_epoch, s.byte_offset, s.line,     s.shard_begin,
                            s.shard_end, s.lines,          s.samples,     s.malformed};
  size_t offset = 4;
  for (int64_t value : fields) {
    put(out, offset, value);
    offset += 8;
  }
  put(out, offset, s.admission_seen);
  put(out, offset + 8, s.admission_defaulted);
  put(out, offset + 16, admission_xxh3);
}

ProducerState unpack_producer(const unsigned char* in, uint64_t* admission_xxh3) {
  ProducerState s;
  s.producer = get<int32_t>(in, 0);
  int64_t* fields[] = {&s.epoch,     &s.round_in_epoch, &s.byte_offset, &s.line,     &s.shard_begin,
                       &s.shard_end, &s.lines,          &s.samples,     &s.malformed};
  size_t offset = 4;
  for (int64_t* field : fields) {
    *field = get<int64_t>(in, offset);
    offset += 8;
  }
  s.admission_seen = get<uint64_t>(in, offset);
  s.admission_defaulted = get<uint64_t>(in, offset + 8);
  if (admission_xxh3) *admission_xxh3 = get<uint64_t>(in, offset + 16);
  return s;
}

void pack_block(const BlockRecord& block, unsigned char* out) {
  put(out, 0, block.first_row);
  put(out, 8, block.rows);
  for (int c = 0; c < fmt::kSparseColumns; ++c) put(out, 16 + 8 * size_t(c), block.xxh3[c]);
}

BlockRecord unpack_block(const unsigned char* in) {
  BlockRecord block;
  block.first_row = get<int64_t>(in, 0);
  block.rows = get<int64_t>(in, 8);
  for (int c = 0; c < fmt::kSparseColumns; ++c) block.xxh3[c] = get<uint64_t>(in, 16 + 8 * size_t(c));
  return block;
}

Hdf5Handle create_dataset(hid_t parent, const std::string& name, hid_t file_type, const std::vector<hsize_t>& dims,
                          hsize_t chunk_rows, const std::string& what, const std::string& fix) {
  Hdf5Handle space(hdf5_check(H5Screate_simple(int(dims.size()), dims.data(), nullptr), what, fix), H5Sclose);
  Hdf5Handle create(hdf5_check(H5Pcreate(H5P_DATASET_CREATE), what, fix), H5Pclose);
  H5Pset_obj_track_times(create.get(), false);
  // Every element is written exactly once: filling with zeros first would write the file twice.
  hdf5_check_status(H5Pset_fill_time(create.get(), H5D_FILL_TIME_NEVER), what, fix);
  bool has_zero = false;
  for (hsize_t d : dims) has_zero = has_zero || d == 0;
  if (chunk_rows > 0 && !has_zero && !dims.empty()) {
    std::vector<hsize_t> chunk = dims;
    chunk[0] = std::min(chunk_rows, dims[0]);  // a short dataset gets one short chunk, not padding
    hdf5_check_status(H5Pset_chunk(create.get(), int(chunk.size()), chunk.data()), what, fix);
  }
  return Hdf5Handle(
      hdf5_check(H5Dcreate2(parent, name.c_str(), file_type, space.get(), H5P_DEFAULT, create.get(), H5P_DEFAULT),
                 what, fix),
      H5Dclose);
}

std::vector<hsize_t> dataset_dims(hid_t dataset, const std::string& what, const std::string& fix) {
  Hdf5Handle space(hdf5_check(H5Dget_space(dataset), what + ": no dataspace", fix), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0 || rank > 32) throw Error(what + ": unreadable dataspace", fix);
  std::vector<hsize_t> dims(size_t(rank), 0);
  if (rank > 0 && H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0) {
    throw Error(what + ": unreadable dataspace", fix);
  }
  return dims;
}

namespace {

// File and memory dataspaces selecting rows [first, first + rows) of `dataset`
// (nothing at all when that is no element).
struct Slab {
  Hdf5Handle file_space;
  Hdf5Handle memory_space;
  bool empty = true;
};

Slab select_rows(hid_t dataset, int64_t first, int64_t rows, const std::string& what, const std::string& fix) {
  Slab slab;
  std::vector<hsize_t> count = dataset_dims(dataset, what, fix);
  if (count.empty()) throw Error(what + ": a scalar dataset where rows were expected", fix);
  if (first < 0 || rows < 0 || hsize_t(first) + hsize_t(rows) > count[0]) {
    throw Error(what + ": rows [" + std::to_string(first) + ", " + std::to_string(first + rows) +
                    ") are outside the dataset's " + std::to_string(count[0]) + " rows",
                fix);
  }
  std::vector<hsize_t> start(count.size(), 0);
  start[0] = hsize_t(first);
  count[0] = hsize_t(rows);
  hsize_t elements = 1;
  for (hsize_t c : count) elements *= c;
  slab.file_space = Hdf5Handle(hdf5_check(H5Dget_space(dataset), what, fix), H5Sclose);
  slab.empty = elements == 0;
  if (slab.empty) {
    hdf5_check_status(H5Sselect_none(slab.file_space.get()), what, fix);
    const hsize_t one = 1;
    slab.memory_space = Hdf5Handle(hdf5_check(H5Screate_simple(1, &one, nullptr), what, fix), H5Sclose);
    hdf5_check_status(H5Sselect_none(slab.memory_space.get()), what, fix);
    return slab;
  }
  hdf5_check_status(
      H5Sselect_hyperslab(slab.file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr), what,
      fix);
  slab.memory_space =
      Hdf5Handle(hdf5_check(H5Screate_simple(int(count.size()), count.data(), nullptr), what, fix), H5Sclose);
  return slab;
}

}  // namespace

void write_slab(hid_t dataset, hid_t memory_type, hid_t transfer, int64_t first, int64_t rows, const void* data,
                const std::string& what, const std::string& fix) {
  // A dataset without elements has no storage to write to (not even nothing):
  // every rank sees the same extent, so all skip the collective call together.
  for (hsize_t extent : dataset_dims(dataset, what, fix)) {
    if (extent == 0) return;
  }
  const Slab slab = select_rows(dataset, first, rows, what, fix);
  static const char kNothing = 0;  // HDF5 wants a buffer even when nothing is selected
  hdf5_check_status(H5Dwrite(dataset, memory_type, slab.memory_space.get(), slab.file_space.get(), transfer,
                             slab.empty || data == nullptr ? &kNothing : data),
                    what, fix);
}

void read_slab(hid_t dataset, hid_t memory_type, int64_t first, int64_t rows, void* out, const std::string& what,
               const std::string& fix) {
  const Slab slab = select_rows(dataset, first, rows, what, fix);
  if (slab.empty) return;
  hdf5_check_status(
      H5Dread(dataset, memory_type, slab.memory_space.get(), slab.file_space.get(), H5P_DEFAULT, out), what, fix);
}

uint64_t xxh3(const void* data, size_t bytes) { return XXH3_64bits(bytes ? data : "", bytes); }

}  // namespace strata::io::checkpoint_hdf5
