// Turns a trial into the command-line overrides the engine appends to its own
// arguments (the command line wins over the deck), e.g. --store.l1_mb=12.5.
#pragma once

#include <string>
#include <vector>

#include "tune/trial.hpp"

namespace strata {

// A layout candidate: the producer/trainer/server split "P/T/S", and
// optionally how the trainers divide the work, "P/T/S,sp=2,ep=1,dp=2,sp_mode=ring".
struct LayoutSplit {
  int producers = 0;
  int trainers = 0;
  int servers = 0;
  bool parallel = false;  // the candidate names dp, sp, ep or sp_mode
  int dp = 0, sp = 1, ep = 1;  // unnamed: dp from the others (0), sp and ep 1
  std::string sp_mode;         // empty: the deck's
};

// Parses "1/2/1" and "1/4/1,sp=2,sp_mode=alltoall"; throws strata::Error
// (naming the accepted forms) on anything else.
LayoutSplit parse_layout_split(const std::string& text);

// One "--key=value" per knob; the layout knob becomes --layout.producers=P
// --layout.trainers=T --layout.servers=S, and when the candidate names any of
// dp, sp, ep, sp_mode also --layout.dp, --layout.sp and --layout.ep (and
// --layout.sp_mode if named), so that no layout inherits another's axes.
std::vector<std::string> overrides(const Trial& trial);

}  // namespace strata
