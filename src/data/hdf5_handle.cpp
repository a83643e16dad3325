// HDF5 plumbing: quiet error handling, error stack -> strata::Error text, and the
// few typed attribute/dataset helpers the columnar dataset needs.
#include "data/hdf5_handle.hpp"

#include <algorithm>
#include <cstring>

#include "common/error.hpp"

namespace strata::data {

Hdf5QuietErrors::Hdf5QuietErrors() {
  H5open();  // the library must be initialised before its error settings exist
  H5Eget_auto2(H5E_DEFAULT, &saved_function_, &saved_data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

Hdf5QuietErrors::~Hdf5QuietErrors() { H5Eset_auto2(H5E_DEFAULT, saved_function_, saved_data_); }

namespace {

herr_t collect_error(unsigned depth, const H5E_error2_t* record, void* client) {
  auto* out = static_cast<std::string*>(client);
  if (depth >= 3) return 0;  // the innermost few say why; the rest are the call chain
  if (!out->empty()) out->append("; ");
  out->append(record->func_name ? record->func_name : "?");
  out->append(": ");
  out->append(record->desc ? record->desc : "unknown error");
  return 0;
}

}  // namespace

std::string hdf5_failure() {
  std::string text;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect_error, &text);
  H5Eclear2(H5E_DEFAULT);
  return text;
}

hid_t hdf5_check(hid_t id, const std::string& what, const std::string& fix) {
  if (id < 0) {
    const std::string why = hdf5_failure();
    throw Error(what + (why.empty() ? std::string() : " (HDF5: " + why + ")"), fix);
  }
  return id;
}

void hdf5_check_status(herr_t status, const std::string& what, const std::string& fix) {
  if (status < 0) hdf5_check(H5I_INVALID_HID, what, fix);
}

bool hdf5_has_link(hid_t parent, const std::string& name) {
  const htri_t exists = H5Lexists(parent, name.c_str(), H5P_DEFAULT);
  if (exists < 0) hdf5_failure();  // a broken path counts as missing
  return exists > 0;
}

Hdf5Handle hdf5_open_group(hid_t parent, const std::string& name, const std::string& what,
                           const std::string& fix) {
  if (!hdf5_has_link(parent, name)) throw Error(what + ": group '" + name + "' is missing", fix);
  return Hdf5Handle(hdf5_check(H5Gopen2(parent, name.c_str(), H5P_DEFAULT),
                               what + ": '" + name + "' is not a readable group", fix),
                    H5Gclose);
}

Hdf5Handle hdf5_open_dataset(hid_t parent, const std::string& name, const std::string& what,
                             const std::string& fix, hid_t access) {
  if (!hdf5_has_link(parent, name)) throw Error(what + ": dataset '" + name + "' is missing", fix);
  return Hdf5Handle(hdf5_check(H5Dopen2(parent, name.c_str(), access),
                               what + ": '" + name + "' is not a readable dataset", fix),
                    H5Dclose);
}

bool hdf5_has_attribute(hid_t object, const std::string& name) {
  const htri_t exists = H5Aexists(object, name.c_str());
  if (exists < 0) hdf5_failure();
  return exists > 0;
}

namespace {

// Opens attribute `name` and checks that it holds exactly one value.
Hdf5Handle open_scalar_attribute(hid_t object, const std::string& name, const std::string& what,
                                 const std::string& fix) {
  if (!hdf5_has_attribute(object, name)) throw Error(what + ": attribute '" + name + "' is missing", fix);
  Hdf5Handle attribute(hdf5_check(H5Aopen(object, name.c_str(), H5P_DEFAULT),
                                  what + ": attribute '" + name + "' cannot be opened", fix),
                       H5Aclose);
  Hdf5Handle space(hdf5_check(H5Aget_space(attribute.get()), what + ": attribute '" + name + "'", fix),
                   H5Sclose);
  if (H5Sget_simple_extent_npoints(space.get()) != 1) {
    throw Error(what + ": attribute '" + name + "' holds more than one value", fix);
  }
  return attribute;
}

}  // namespace

int64_t hdf5_read_int_attribute(hid_t object, const std::string& name, const std::string& what,
                                const std::string& fix) {
  Hdf5Handle attribute = open_scalar_attribute(object, name, what, fix);
  Hdf5Handle type(hdf5_check(H5Aget_type(attribute.get()), what + ": attribute '" + name + "'", fix),
                  H5Tclose);
  if (H5Tget_class(type.get()) != H5T_INTEGER) {
    throw Error(what + ": attribute '" + name + "' is not an integer", fix);
  }
  int64_t value = 0;
  hdf5_check_status(H5Aread(attribute.get(), H5T_NATIVE_INT64, &value),
                    what + ": attribute '" + name + "' cannot be read as a 64-bit integer", fix);
  return value;
}

std::string hdf5_read_string_attribute(hid_t object, const std::string& name, const std::string& what,
                                       const std::string& fix) {
  Hdf5Handle attribute = open_scalar_attribute(object, name, what, fix);
  Hdf5Handle type(hdf5_check(H5Aget_type(attribute.get()), what + ": attribute '" + name + "'", fix),
                  H5Tclose);
  if (H5Tget_class(type.get()) != H5T_STRING) {
    throw Error(what + ": attribute '" + name + "' is not a string", fix);
  }
  if (H5Tis_variable_str(type.get()) > 0) {  // as h5py writes str attributes
    Hdf5Handle memory(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(memory.get(), H5T_VARIABLE);
    char* text = nullptr;
    hdf5_check_status(H5Aread(attribute.get(), memory.get(), &text),
                      what + ": attribute '" + name + "' cannot be read", fix);
    std::string value = text ? text : "";
    H5free_memory(text);
    return value;
  }
  const size_t size = H5Tget_size(type.get());
  constexpr size_t kMaxString = size_t(1) << 20;  // attributes here are names and specs, not data
  if (size == 0 || size > kMaxString) {
    throw Error(what + ": attribute '" + name + "' has an implausible size of " + std::to_string(size) + " bytes",
                fix);
  }
  std::string value(size, '\0');
  Hdf5Handle memory(H5Tcopy(type.get()), H5Tclose);
  hdf5_check_status(H5Aread(attribute.get(), memory.get(), value.data()),
                    what + ": attribute '" + name + "' cannot be read", fix);
  value.resize(std::strlen(value.c_str()));  // null-padded or null-terminated on disk
  return value;
}

namespace {
constexpr const char* kWriteFix = "check the free space and permissions of the output's file system";
}  // namespace

void hdf5_write_int_attribute(hid_t object, const std::string& name, int64_t value) {
  const std::string what = "cannot write attribute '" + name + "'";
  Hdf5Handle space(hdf5_check(H5Screate(H5S_SCALAR), what, kWriteFix), H5Sclose);
  if (hdf5_has_attribute(object, name)) H5Adelete(object, name.c_str());
  Hdf5Handle attribute(hdf5_check(H5Acreate2(object, name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT,
                                             H5P_DEFAULT),
                                  what, kWriteFix),
                       H5Aclose);
  hdf5_check_status(H5Awrite(attribute.get(), H5T_NATIVE_INT64, &value), what, kWriteFix);
}

void hdf5_write_string_attribute(hid_t object, const std::string& name, const std::string& value) {
  const std::string what = "cannot write attribute '" + name + "'";
  Hdf5Handle space(hdf5_check(H5Screate(H5S_SCALAR), what, kWriteFix), H5Sclose);
  Hdf5Handle type(hdf5_check(H5Tcopy(H5T_C_S1), what, kWriteFix), H5Tclose);
  H5Tset_size(type.get(), std::max<size_t>(1, value.size()));
  H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
  if (hdf5_has_attribute(object, name)) H5Adelete(object, name.c_str());
  Hdf5Handle attribute(
      hdf5_check(H5Acreate2(object, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), what,
                 kWriteFix),
      H5Aclose);
  std::string padded = value;
  padded.resize(std::max<size_t>(1, value.size()), '\0');
  hdf5_check_status(H5Awrite(attribute.get(), type.get(), padded.data()), what, kWriteFix);
}

std::vector<hsize_t> hdf5_dims(hid_t dataset, const std::string& what) {
  const char* fix = "the file is damaged; convert the text file again";
  Hdf5Handle space(hdf5_check(H5Dget_space(dataset), what + ": no dataspace", fix), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0 || rank > 32) throw Error(what + ": unreadable dataspace", fix);
  std::vector<hsize_t> dims(size_t(rank), 0);
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return dims;
}

}  // namespace strata::data
