// Helpers shared by the built-in tuner plugins (grid, random, optuna): an owning
// copy of the search space the engine declared, setting lookup, error reporting
// through the C ABI's message buffer. Header-only and internal to plugins/: a
// plugin must not depend on the engine's libraries, only on strata_tuner_plugin.h.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "strata_tuner_plugin.h"

namespace strata_plugin {

// Thrown inside a plugin and turned into the ABI's error message at the C boundary.
struct PluginError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One knob, owning its strings (the engine's pointers die after create()).
struct OwnedKnob {
  std::string name;
  strata_knob_type type = STRATA_KNOB_FLOAT;
  double low = 0;
  double high = 0;
  bool log_scale = false;
  std::vector<std::string> candidates;
};

struct OwnedSpace {
  std::vector<OwnedKnob> knobs;
  std::string objective_name;
  strata_direction direction = STRATA_MAXIMIZE;
};

// Copies and checks the engine's declaration; a malformed knob is a PluginError.
inline OwnedSpace copy_space(const strata_search_space* space) {
  if (space == nullptr) throw PluginError("no search space given");
  OwnedSpace owned;
  owned.objective_name = space->objective_name ? space->objective_name : "objective";
  owned.direction = space->direction;
  for (size_t i = 0; i < space->num_knobs; ++i) {
    const strata_knob& in = space->knobs[i];
    OwnedKnob knob;
    knob.name = in.name ? in.name : "knob" + std::to_string(i);
    knob.type = in.type;
    knob.low = in.low;
    knob.high = in.high;
    knob.log_scale = in.log_scale != 0;
    if (knob.type == STRATA_KNOB_CATEGORICAL) {
      if (in.num_candidates == 0) throw PluginError("knob " + knob.name + " has no candidates");
      for (size_t c = 0; c < in.num_candidates; ++c) knob.candidates.emplace_back(in.candidates[c]);
    } else if (knob.type == STRATA_KNOB_INTEGER || knob.type == STRATA_KNOB_FLOAT) {
      if (!(knob.low <= knob.high)) throw PluginError("knob " + knob.name + " has low > high");
      if (knob.log_scale && !(knob.low > 0)) {
        throw PluginError("knob " + knob.name + " is log-scaled but its low bound is not > 0");
      }
    } else {
      throw PluginError("knob " + knob.name + " has an unknown type " + std::to_string(int(in.type)));
    }
    owned.knobs.push_back(std::move(knob));
  }
  return owned;
}

// The value of setting `key`, or `fallback` when the engine did not pass it.
inline std::string setting(const strata_setting* settings, size_t count, const std::string& key,
                           const std::string& fallback) {
  for (size_t i = 0; i < count; ++i) {
    if (settings[i].key && key == settings[i].key) return settings[i].value ? settings[i].value : "";
  }
  return fallback;
}

// A whole-number setting; a malformed one is a PluginError naming it.
inline long long integer_setting(const strata_setting* settings, size_t count, const std::string& key,
                                 long long fallback) {
  const std::string text = setting(settings, count, key, "");
  if (text.empty()) return fallback;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0') {
    throw PluginError("setting " + key + " = '" + text + "' is not a whole number");
  }
  return value;
}

// An unsigned 64-bit setting such as a seed.
inline unsigned long long unsigned_setting(const strata_setting* settings, size_t count,
                                           const std::string& key, unsigned long long fallback) {
  const std::string text = setting(settings, count, key, "");
  if (text.empty()) return fallback;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || text[0] == '-') {
    throw PluginError("setting " + key + " = '" + text + "' is not an unsigned whole number");
  }
  return value;
}

inline void write_error(char* error, size_t error_size, const std::string& message) {
  if (error != nullptr && error_size > 0) std::snprintf(error, error_size, "%s", message.c_str());
}

}  // namespace strata_plugin
