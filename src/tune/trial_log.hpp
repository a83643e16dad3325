// The record of a search in an output folder: trials.csv (one row per trial)
// and best.ini (the best trial as an input deck that strata train accepts).
//
// trials.csv columns: trial, one per knob, the objective (named after it,
// e.g. samples_per_s), direction, state, reason, seconds. Rows are appended with
// one write() on an O_APPEND file, so several processes sharing a study may
// share one folder; best() re-reads the file and so sees all of them.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tune/objective.hpp"
#include "tune/search_space.hpp"
#include "tune/trial.hpp"
#include "tune/trial_outcome.hpp"

namespace strata {

struct LoggedTrial {
  Trial trial;
  TrialOutcome outcome;
  double seconds = 0;
};

class TrialLog {
 public:
  // Creates `dir` and trials.csv with its header, or continues an existing
  // trials.csv whose columns match (a different search space is a strata::Error).
  TrialLog(std::string dir, const SearchSpace& space, Objective objective);

  void record(const Trial& trial, const TrialOutcome& outcome, double seconds);

  // Every row of trials.csv, in file order.
  std::vector<LoggedTrial> read() const;

  // The best complete trial so far (the first one on ties), if any.
  std::optional<LoggedTrial> best() const;

  // Writes best.ini: a comment naming the trial, then deck_text(best trial)
  // (the engine passes to_ini(parse_run_options(args + overrides(trial)))).
  // Returns the best trial, or nullopt (and writes nothing) when none completed.
  std::optional<LoggedTrial> write_best_deck(const std::function<std::string(const Trial&)>& deck_text) const;

  const std::string& csv_path() const { return csv_path_; }
  std::string best_deck_path() const { return dir_ + "/best.ini"; }

 private:
  std::vector<std::string> header() const;

  std::string dir_;
  std::string csv_path_;
  std::vector<Knob> knobs_;
  Objective objective_;
};

}  // namespace strata
