// Turns a trial into the command-line overrides the engine appends to its own
// arguments (the command line wins over the deck), e.g. --store.l1_mb=12.5.
#pragma once

#include <string>
#include <vector>

#include "tune/trial.hpp"

namespace strata {

// The producer/trainer/server split of a "P/T/S" layout candidate.
struct LayoutSplit {
  int producers = 0;
  int trainers = 0;
  int servers = 0;
};

// Parses "1/2/1"; throws strata::Error on anything else.
LayoutSplit parse_layout_split(const std::string& text);

// One "--key=value" per knob; the layout knob becomes --layout.producers=P
// --layout.trainers=T --layout.servers=S.
std::vector<std::string> overrides(const Trial& trial);

}  // namespace strata
