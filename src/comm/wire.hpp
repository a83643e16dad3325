// ByteWriter / ByteReader: packing of MPI messages into flat byte buffers. The
// reader checks every length against the buffer so a malformed message is an
// error, never an out-of-bounds read.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "common/error.hpp"

namespace strata::comm {

class ByteWriter {
 public:
  explicit ByteWriter(std::vector<char>& buffer) : buffer_(buffer) {}
  template <class T>
  void put(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    append(&value, sizeof(T));
  }
  template <class T>
  void put_array(const T* values, size_t count) {
    static_assert(std::is_trivially_copyable_v<T>);
    put<uint64_t>(count);
    append(values, count * sizeof(T));
  }
  template <class T>
  void put_vector(const std::vector<T>& values) { put_array(values.data(), values.size()); }
  void put_string(const std::string& text) { put_array(text.data(), text.size()); }
  void append(const void* data, size_t bytes) {
    size_t at = buffer_.size();
    buffer_.resize(at + bytes);
    if (bytes) std::memcpy(buffer_.data() + at, data, bytes);
  }

 private:
  std::vector<char>& buffer_;
};

class ByteReader {
 public:
  ByteReader(const char* data, size_t size, const char* what = "message")
      : data_(data), size_(size), what_(what) {}
  template <class T>
  T get() {
    T value;
    copy_out(&value, sizeof(T));
    return value;
  }
  template <class T>
  void get_vector(std::vector<T>& out) {
    uint64_t count = get<uint64_t>();
    if (count > (size_ - at_) / (sizeof(T) ? sizeof(T) : 1)) fail("array longer than the remaining bytes");
    out.resize(count);
    copy_out(out.data(), count * sizeof(T));
  }
  std::string get_string() {
    std::vector<char> chars;
    get_vector(chars);
    return std::string(chars.begin(), chars.end());
  }
  // Returns a pointer to `count` values of T inside the buffer (no copy).
  template <class T>
  const T* view_array(uint64_t& count) {
    count = get<uint64_t>();
    if (count > (size_ - at_) / sizeof(T)) fail("array longer than the remaining bytes");
    const T* p = reinterpret_cast<const T*>(data_ + at_);
    at_ += count * sizeof(T);
    return p;
  }
  size_t remaining() const { return size_ - at_; }
  void expect_end() const {
    if (at_ != size_) fail(std::to_string(size_ - at_) + " trailing bytes");
  }

 private:
  void copy_out(void* out, size_t bytes) {
    if (bytes > size_ - at_) fail("truncated");
    if (bytes) std::memcpy(out, data_ + at_, bytes);
    at_ += bytes;
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(std::string("malformed ") + what_ + " (" + std::to_string(size_) + " bytes): " + why,
                "this is a bug or a version mismatch between ranks; run every rank from the same build");
  }
  const char* data_;
  size_t size_;
  size_t at_ = 0;
  const char* what_;
};

}  // namespace strata::comm
