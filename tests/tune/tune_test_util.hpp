// Helpers shared by the tuner tests: scratch folders and checks on strata::Error.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace strata::test {

// Folders made by scratch_dir, removed when the test program ends (kept when
// STRATA_KEEP_TEST_DIRS is set, for looking at them).
struct ScratchDirs {
  std::vector<std::string> paths;
  ~ScratchDirs() {
    if (std::getenv("STRATA_KEEP_TEST_DIRS") != nullptr) return;
    std::error_code ignored;
    for (const auto& path : paths) std::filesystem::remove_all(path, ignored);
  }
};

// A fresh folder under the test's temporary directory.
inline std::string scratch_dir(const std::string& name) {
  static ScratchDirs made;
  std::string pattern = testing::TempDir() + "strata_tune_" + name + "_XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed for " << pattern;
  made.paths.push_back(pattern);
  return pattern;
}

// Runs `body`, expects a strata::Error, and returns it for further checks.
inline Error expect_error(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected a strata::Error";
  return Error("no error was thrown");
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace strata::test
