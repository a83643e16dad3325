// Helpers shared by the tuner tests: scratch folders and checks on strata::Error.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <functional>
#include <string>

#include "common/error.hpp"

namespace strata::test {

// A fresh folder under the test's temporary directory.
inline std::string scratch_dir(const std::string& name) {
  std::string pattern = testing::TempDir() + "strata_tune_" + name + "_XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed for " << pattern;
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
