// What the config tests share: decks written to the test's temporary folder,
// and the message of the strata::Error a parse throws.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "common/error.hpp"

namespace strata::testing_util {

inline std::string write_deck(const std::string& name, const std::string& text) {
  const std::string path = testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

// parse() must throw strata::Error: its message; "" when it did not throw.
template <class Parse>
std::string error_message(Parse&& parse) {
  try {
    parse();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace strata::testing_util
