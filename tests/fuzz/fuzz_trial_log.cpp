// Fuzz target: trials.csv as strata tune reads it back when it continues a
// search in an existing output folder (TrialLog: header check, read, best).
// A damaged file may only be refused with strata::Error.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/error.hpp"
#include "config/options.hpp"
#include "tune/search_space.hpp"
#include "tune/trial_log.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = "/tmp/strata-fuzz-" + std::to_string(getpid()) + "-tune";
  static const strata::SearchSpace space = strata::SearchSpace::from_options(strata::TuneOptions{});
  if (size == 0) return 0;  // an empty trials.csv is taken as a fresh search (after a 200 ms wait)
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/trials.csv", std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), long(size));
  try {
    const strata::TrialLog log(dir, space, strata::Objective{});
    for (const strata::LoggedTrial& logged : log.read()) {
      if (logged.trial.settings.size() != space.knobs().size()) __builtin_trap();
    }
    log.best();
  } catch (const strata::Error&) {
  }
  return 0;
}
