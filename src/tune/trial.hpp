// One trial of a tuning search: its number in the study and the value of every knob.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tune/search_space.hpp"

namespace strata {

// One knob's value. `text` is what the engine reads for the key (a number
// written without loss, or the categorical candidate).
struct KnobSetting {
  std::string name;
  KnobType type = KnobType::real;
  double number = 0;  // integer and real knobs
  std::string text;

  static KnobSetting integer(std::string name, int64_t value);
  static KnobSetting real(std::string name, double value);
  static KnobSetting categorical(std::string name, std::string candidate);
};

struct Trial {
  int64_t number = -1;                // assigned by the plugin; continues across runs of one study
  std::vector<KnobSetting> settings;  // in the search space's knob order

  const KnobSetting* find(const std::string& name) const;
};

// The shortest text that reads back as exactly `value` ("12.5", "0.1", "64").
std::string format_number(double value);

}  // namespace strata
