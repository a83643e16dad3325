// HDF5 plumbing of the columnar dataset (private to strata_core: it includes
// hdf5.h). Hdf5Handle owns one identifier; Hdf5QuietErrors keeps HDF5 from
// printing its error stack to stderr while strata code runs, and hdf5_failure
// turns that stack into the text of a strata::Error.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace strata::data {

// One HDF5 identifier (file, group, dataset, dataspace, datatype, attribute or
// property list), closed by the matching H5?close when the handle goes.
class Hdf5Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Hdf5Handle() = default;
  Hdf5Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  ~Hdf5Handle() { reset(); }
  Hdf5Handle(Hdf5Handle&& other) noexcept
      : id_(std::exchange(other.id_, H5I_INVALID_HID)), closer_(other.closer_) {}
  Hdf5Handle& operator=(Hdf5Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
      closer_ = other.closer_;
    }
    return *this;
  }
  Hdf5Handle(const Hdf5Handle&) = delete;
  Hdf5Handle& operator=(const Hdf5Handle&) = delete;

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset() {
    if (id_ >= 0 && closer_ != nullptr) closer_(id_);
    id_ = H5I_INVALID_HID;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

// Silences HDF5's automatic error printing for the lifetime of the object and
// restores whatever handler was installed before (other subsystems use HDF5 too).
class Hdf5QuietErrors {
 public:
  Hdf5QuietErrors();
  ~Hdf5QuietErrors();
  Hdf5QuietErrors(const Hdf5QuietErrors&) = delete;
  Hdf5QuietErrors& operator=(const Hdf5QuietErrors&) = delete;

 private:
  H5E_auto2_t saved_function_ = nullptr;
  void* saved_data_ = nullptr;
};

// The messages of HDF5's current error stack, innermost first ("" when empty),
// and clears the stack. Call it right after the failing HDF5 call.
std::string hdf5_failure();

// Returns `id` if it is valid; otherwise throws strata::Error "`what`: <HDF5's reason>"
// with `fix`.
hid_t hdf5_check(hid_t id, const std::string& what, const std::string& fix);
void hdf5_check_status(herr_t status, const std::string& what, const std::string& fix);

// ---- typed helpers: every one throws strata::Error naming `what` ------------------

Hdf5Handle hdf5_open_group(hid_t parent, const std::string& name, const std::string& what,
                           const std::string& fix);
Hdf5Handle hdf5_open_dataset(hid_t parent, const std::string& name, const std::string& what,
                             const std::string& fix, hid_t access = H5P_DEFAULT);
bool hdf5_has_link(hid_t parent, const std::string& name);

// Attributes: integers as int64 (any integer type on disk), strings fixed-length ASCII.
bool hdf5_has_attribute(hid_t object, const std::string& name);
int64_t hdf5_read_int_attribute(hid_t object, const std::string& name, const std::string& what,
                                const std::string& fix);
std::string hdf5_read_string_attribute(hid_t object, const std::string& name, const std::string& what,
                                       const std::string& fix);
void hdf5_write_int_attribute(hid_t object, const std::string& name, int64_t value);
void hdf5_write_string_attribute(hid_t object, const std::string& name, const std::string& value);

// Dimensions of a dataset's dataspace (rank = size of the result).
std::vector<hsize_t> hdf5_dims(hid_t dataset, const std::string& what);

}  // namespace strata::data
