// What became of a trial: its objective value, or why it was pruned or failed.
#pragma once

#include <string>

namespace strata {

struct TrialOutcome {
  enum class State { complete, pruned, failed };

  State state = State::complete;
  double value = 0;    // the objective; meaningful when complete
  std::string reason;  // why it was pruned or failed; empty when complete

  static TrialOutcome completed(double value) { return {State::complete, value, {}}; }
  static TrialOutcome pruned(std::string reason) { return {State::pruned, 0, std::move(reason)}; }
  static TrialOutcome failed(std::string reason) { return {State::failed, 0, std::move(reason)}; }
};

inline const char* to_string(TrialOutcome::State state) {
  switch (state) {
    case TrialOutcome::State::complete: return "complete";
    case TrialOutcome::State::pruned: return "pruned";
    case TrialOutcome::State::failed: return "failed";
  }
  return "?";
}

}  // namespace strata
