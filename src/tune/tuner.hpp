// The tuner facade the engine drives: one search with one plugin.
//
//   strata::Tuner tuner(options.tune, strata::SearchSpace::from_options(options.tune));
//   strata::TrialLog log(options.output.dir, tuner.space(), tuner.objective());
//   while (auto trial = tuner.ask()) {
//     auto outcome = run_trial(base_args + strata::overrides(*trial));   // engine side
//     tuner.tell(*trial, outcome);
//     log.record(*trial, outcome, seconds);
//   }
//   log.write_best_deck(deck_text_of);
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "tune/objective.hpp"
#include "tune/search_space.hpp"
#include "tune/trial.hpp"
#include "tune/trial_outcome.hpp"
#include "tune/tuner_plugin.hpp"

struct strata_tuner_session;

namespace strata {

class Tuner {
 public:
  // Loads options.plugin and starts a search over `space`. The plugin receives
  // the settings seed, grid_points, study, sampler and trials from `options`.
  // Throws strata::Error when the space is empty or the plugin cannot start
  // (e.g. a bad study file or sampler for optuna).
  Tuner(const TuneOptions& options, SearchSpace space, Objective objective = {});
  ~Tuner();
  Tuner(const Tuner&) = delete;
  Tuner& operator=(const Tuner&) = delete;

  // The next trial, or nullopt when the plugin's search is exhausted (grid) or
  // options.trials trials were asked already.
  std::optional<Trial> ask();

  // Reports a trial's outcome. A complete trial with a non-finite value is told
  // as failed. Throws strata::Error when the plugin refuses it.
  void tell(const Trial& trial, const TrialOutcome& outcome);

  const SearchSpace& space() const { return space_; }
  const Objective& objective() const { return objective_; }
  const TunerPlugin& plugin() const { return plugin_; }
  int asked() const { return asked_; }

 private:
  TunerPlugin plugin_;
  SearchSpace space_;
  Objective objective_;
  int trial_budget_ = 0;
  int asked_ = 0;
  strata_tuner_session* session_ = nullptr;
};

}  // namespace strata
