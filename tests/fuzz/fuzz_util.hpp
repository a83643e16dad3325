// What the fuzz targets share: writing an input to a private scratch file (for the
// parsers that read files), and the rule that a parser may reject an input only
// with strata::Error. Any other exception, a crash, or a sanitizer report is a bug.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

namespace strata::fuzz {

// One scratch file per process, rewritten for every input.
inline const std::string& scratch_file(const char* suffix) {
  static const std::string path = "/tmp/strata-fuzz-" + std::to_string(getpid()) + suffix;
  return path;
}

inline const std::string& write_input(const uint8_t* data, size_t size, const char* suffix) {
  const std::string& path = scratch_file(suffix);
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), long(size));
  return path;
}

}  // namespace strata::fuzz
