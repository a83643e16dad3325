// The one quantity a tuning search optimises, and in which direction.
#pragma once

#include <string>

namespace strata {

enum class Direction { maximize, minimize };

struct Objective {
  std::string name = "samples_per_s";       // the column name in trials.csv
  Direction direction = Direction::maximize;

  // tune.objective: samples_per_s and eval_auc are maximised, eval_logloss minimised.
  static Objective named(const std::string& name) {
    return {name, name == "eval_logloss" ? Direction::minimize : Direction::maximize};
  }

  // True when `candidate` is strictly better than `incumbent`.
  bool better(double candidate, double incumbent) const {
    return direction == Direction::maximize ? candidate > incumbent : candidate < incumbent;
  }
};

inline const char* to_string(Direction direction) {
  return direction == Direction::maximize ? "maximize" : "minimize";
}

}  // namespace strata
