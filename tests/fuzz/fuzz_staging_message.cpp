// Fuzz target: the producer -> trainer staging plan and the row blocks of
// write-backs and L3 replies (store::read_staging, store::read_row_block), as
// a trainer or producer decodes them from the wire. A malformed message may
// only be refused with strata::Error; every view it returns must lie inside
// the message.
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/error.hpp"
#include "store/staging_message.hpp"

namespace {
template <class T>
void check_inside(const strata::comm::Span<T>& span, const char* begin, const char* end) {
  if (span.size == 0) return;
  const char* first = reinterpret_cast<const char*>(span.data);
  const char* last = reinterpret_cast<const char*>(span.data + span.size);
  if (first < begin || last > end) __builtin_trap();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The wire hands the decoders 8-aligned buffers (MPI receive buffers).
  std::vector<uint64_t> aligned((size + 7) / 8 + 1);
  std::memcpy(aligned.data(), data, size);
  const char* begin = reinterpret_cast<const char*>(aligned.data());
  const char* end = begin + size;
  try {
    const strata::store::StagingView view = strata::store::read_staging(begin, size);
    check_inside(view.evict_slots, begin, end);
    check_inside(view.insert_slots, begin, end);
    check_inside(view.insert_ids, begin, end);
    check_inside(view.insert_dirty, begin, end);
    check_inside(view.insert_values, begin, end);
    check_inside(view.serve_offsets, begin, end);
    check_inside(view.serve_slots, begin, end);
    const size_t n = view.insert_slots.size;
    if (view.insert_ids.size != n || view.insert_dirty.size != n ||
        view.insert_values.size != n * static_cast<size_t>(view.width)) {
      __builtin_trap();  // the decoder promised (n) and (n, width) arrays
    }
  } catch (const strata::Error&) {
  }
  try {
    size_t consumed = 0;
    const strata::store::RowBlock block = strata::store::read_row_block(begin, size, &consumed);
    if (consumed > size) __builtin_trap();
    std::vector<char> again;
    strata::store::append_row_block(block, again);
    const strata::store::RowBlock decoded = strata::store::read_row_block(again.data(), again.size());
    // Bytes, not floats: a mutated value may be a NaN, unequal to itself.
    if (decoded.ids.size() != block.ids.size() || decoded.values.size() != block.values.size() ||
        (!block.values.empty() &&
         std::memcmp(decoded.values.data(), block.values.data(), block.values.size() * sizeof(float)) != 0)) {
      __builtin_trap();
    }
  } catch (const strata::Error&) {
  }
  return 0;
}
