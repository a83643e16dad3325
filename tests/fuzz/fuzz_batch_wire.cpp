// Fuzz target: a batch message as it arrives from a producer (data::deserialize).
// What decodes must encode to a message that decodes to the same batch and encodes
// to the same bytes again (the reader skips alignment padding without reading it, so
// the first encoding may differ from the input only there).
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/error.hpp"
#include "data/batch.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  strata::data::Batch batch;
  try {
    strata::data::deserialize(reinterpret_cast<const char*>(data), size, batch);
  } catch (const strata::Error&) {
    return 0;
  }
  const std::vector<char> once = strata::data::serialize(batch);
  if (once.size() != size) __builtin_trap();  // only padding may differ, never a length
  strata::data::Batch decoded;
  strata::data::deserialize(once.data(), once.size(), decoded);  // must not throw
  const std::vector<char> twice = strata::data::serialize(decoded);
  if (twice != once) __builtin_trap();
  return 0;
}
