// Fuzz target: an input deck (INI) given with --config.
#include <cstdint>

#include "common/error.hpp"
#include "config/deck.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = strata::fuzz::write_input(data, size, ".ini");
  try {
    strata::parse_run_options({"--config", path});
  } catch (const strata::Error&) {
  }
  return 0;
}
