// ByteWriter / ByteReader: the one packer of MPI messages into flat byte
// buffers. Arrays are preceded by their count and start at an offset aligned
// for their element type (relative to the start of the buffer), so a reader
// can hand out views into a received buffer without copying. The reader checks
// every length against the buffer: a malformed message is an error, never an
// out-of-bounds read.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "common/error.hpp"

namespace strata::comm {

// A read-only view of `size` values of T inside a buffer.
template <class T>
struct Span {
  const T* data = nullptr;
  size_t size = 0;
  const T& operator[](size_t i) const { return data[i]; }
  const T* begin() const { return data; }
  const T* end() const { return data + size; }
  bool empty() const { return size == 0; }
};

class ByteWriter {
 public:
  explicit ByteWriter(std::vector<char>& buffer) : buffer_(buffer) {}
  template <class T>
  void put(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    append(&value, sizeof(T));
  }
  // Count, padding to alignof(T), then the values.
  template <class T>
  void put_array(const T* values, size_t count) {
    static_assert(std::is_trivially_copyable_v<T>);
    put<uint64_t>(count);
    align(alignof(T));
    append(values, count * sizeof(T));
  }
  template <class T>
  void put_vector(const std::vector<T>& values) { put_array(values.data(), values.size()); }
  void put_string(const std::string& text) { put_array(text.data(), text.size()); }
  // Reserves room for `count` values of T written later through the pointer
  // (valid until the buffer grows again).
  template <class T>
  T* put_array_uninitialized(size_t count) {
    put<uint64_t>(count);
    align(alignof(T));
    const size_t at = buffer_.size();
    buffer_.resize(at + count * sizeof(T));
    return reinterpret_cast<T*>(buffer_.data() + at);
  }
  void append(const void* data, size_t bytes) {
    const size_t at = buffer_.size();
    buffer_.resize(at + bytes);
    if (bytes) std::memcpy(buffer_.data() + at, data, bytes);
  }
  // Pads with zeros to a multiple of `alignment` (a power of two) bytes.
  void align(size_t alignment) {
    const size_t at = buffer_.size();
    const size_t padded = (at + alignment - 1) & ~(alignment - 1);
    if (padded != at) buffer_.resize(padded, 0);
  }
  size_t size() const { return buffer_.size(); }

 private:
  std::vector<char>& buffer_;
};

class ByteReader {
 public:
  // `data` must be the start of the buffer the writer filled (or an offset of
  // it aligned to 8 bytes), as received: alignment is counted from there.
  ByteReader(const char* data, size_t size, const char* what = "message")
      : data_(data), size_(size), what_(what) {}
  template <class T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    T value;
    copy_out(&value, sizeof(T));
    return value;
  }
  template <class T>
  void get_vector(std::vector<T>& out) {
    const Span<T> view = view_array<T>();
    out.assign(view.begin(), view.end());
  }
  std::string get_string() {
    const Span<char> view = view_array<char>();
    return std::string(view.begin(), view.end());
  }
  // `count` values of T inside the buffer (no copy).
  template <class T>
  Span<T> view_array() {
    const uint64_t count = get<uint64_t>();
    skip_padding(alignof(T));
    if (count > (size_ - at_) / (sizeof(T) ? sizeof(T) : 1)) fail("array longer than the remaining bytes");
    const T* p = reinterpret_cast<const T*>(data_ + at_);
    at_ += count * sizeof(T);
    return {p, static_cast<size_t>(count)};
  }
  void skip_padding(size_t alignment) {
    const size_t padded = (at_ + alignment - 1) & ~(alignment - 1);
    if (padded > size_) fail("truncated");
    at_ = padded;
  }
  size_t position() const { return at_; }
  size_t remaining() const { return size_ - at_; }
  void expect_end() const {
    if (at_ != size_) fail(std::to_string(size_ - at_) + " trailing bytes");
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(std::string("malformed ") + what_ + " (" + std::to_string(size_) + " bytes): " + why,
                "this is a bug or a version mismatch between ranks; run every rank from the same build");
  }

 private:
  void copy_out(void* out, size_t bytes) {
    if (bytes > size_ - at_) fail("truncated");
    if (bytes) std::memcpy(out, data_ + at_, bytes);
    at_ += bytes;
  }
  const char* data_;
  size_t size_;
  size_t at_ = 0;
  const char* what_;
};

}  // namespace strata::comm
