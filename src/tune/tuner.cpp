// The Tuner facade: translates the search space, trials and outcomes between
// strata's types and the plugin C ABI, and plugin failures into strata::Error.
#include "tune/tuner.hpp"

#include <cmath>

#include "common/error.hpp"
#include "strata_tuner_plugin.h"

namespace strata {

namespace {

constexpr size_t kErrorSize = 4096;

// A plugin message is "what failed" optionally followed by "\nfix: how to fix it".
Error plugin_error(const TunerPlugin& plugin, const std::string& operation, const char* message,
                   const std::string& default_fix) {
  std::string what = message && *message ? message : "no message";
  std::string fix = default_fix;
  const auto at = what.find("\nfix: ");
  if (at != std::string::npos) {
    fix = what.substr(at + 6);
    what.erase(at);
  }
  return Error("tuner plugin " + plugin.name() + " (" + plugin.path() + "): " + operation + " failed: " + what, fix);
}

strata_knob_type abi_type(KnobType type) {
  switch (type) {
    case KnobType::integer: return STRATA_KNOB_INTEGER;
    case KnobType::real: return STRATA_KNOB_FLOAT;
    case KnobType::categorical: return STRATA_KNOB_CATEGORICAL;
  }
  return STRATA_KNOB_FLOAT;
}

strata_trial_state abi_state(TrialOutcome::State state) {
  switch (state) {
    case TrialOutcome::State::complete: return STRATA_TRIAL_COMPLETE;
    case TrialOutcome::State::pruned: return STRATA_TRIAL_PRUNED;
    case TrialOutcome::State::failed: return STRATA_TRIAL_FAILED;
  }
  return STRATA_TRIAL_FAILED;
}

// A plugin's proposal outside the declared space is a plugin bug; refuse it
// rather than run the engine with a value nobody asked for.
KnobSetting decode(const TunerPlugin& plugin, const Knob& knob, const strata_knob_value& value) {
  auto outside = [&](const std::string& shown) {
    return Error("tuner plugin " + plugin.name() + " (" + plugin.path() + ") proposed " + knob.name + " = " +
                     shown + ", outside the declared space",
                 "the plugin is faulty: fix it or use another tune.plugin");
  };
  switch (knob.type) {
    case KnobType::integer:
      if (double(value.integer) < knob.low || double(value.integer) > knob.high) {
        throw outside(std::to_string(value.integer));
      }
      return KnobSetting::integer(knob.name, value.integer);
    case KnobType::real:
      if (!(value.real >= knob.low && value.real <= knob.high)) throw outside(format_number(value.real));
      return KnobSetting::real(knob.name, value.real);
    case KnobType::categorical:
      if (value.category >= knob.candidates.size()) {
        throw outside("candidate #" + std::to_string(value.category));
      }
      return KnobSetting::categorical(knob.name, knob.candidates[value.category]);
  }
  throw outside("?");
}

}  // namespace

Tuner::Tuner(const TuneOptions& options, SearchSpace space, Objective objective)
    : plugin_(TunerPlugin::load(options.plugin)),
      space_(std::move(space)),
      objective_(std::move(objective)),
      trial_budget_(options.trials) {
  if (space_.empty()) {
    throw Error("the tuner's search space is empty: every tune.space_* key is empty",
                "set at least one, e.g. tune.space_l1_mb = 1:64:log or tune.space_policy = lru|lfu");
  }
  // The ABI structs point into these vectors; they only need to live through create().
  std::vector<std::vector<const char*>> candidate_pointers;
  std::vector<strata_knob> knobs;
  for (const Knob& knob : space_.knobs()) {
    candidate_pointers.emplace_back();
    for (const auto& candidate : knob.candidates) candidate_pointers.back().push_back(candidate.c_str());
    knobs.push_back({knob.name.c_str(), abi_type(knob.type), knob.low, knob.high, knob.log_scale ? 1 : 0,
                     candidate_pointers.back().data(), candidate_pointers.back().size()});
  }
  const strata_search_space abi_space{knobs.data(), knobs.size(), objective_.name.c_str(),
                                      objective_.direction == Direction::maximize ? STRATA_MAXIMIZE
                                                                                  : STRATA_MINIMIZE};
  const std::string seed = std::to_string(options.seed);
  const std::string grid_points = std::to_string(options.grid_points);
  const std::string trials = std::to_string(options.trials);
  const strata_setting settings[] = {{"seed", seed.c_str()},
                                     {"grid_points", grid_points.c_str()},
                                     {"study", options.study.c_str()},
                                     {"sampler", options.sampler.c_str()},
                                     {"trials", trials.c_str()}};
  char error[kErrorSize] = "";
  session_ = plugin_.api().create(&abi_space, settings, sizeof(settings) / sizeof(settings[0]), error, sizeof(error));
  if (session_ == nullptr) {
    throw plugin_error(plugin_, "starting the search", error,
                       "check the [tune] keys the message names (plugin, study, sampler, space_*)");
  }
}

Tuner::~Tuner() {
  if (session_ != nullptr) plugin_.api().destroy(session_);
}

std::optional<Trial> Tuner::ask() {
  if (asked_ >= trial_budget_) return std::nullopt;
  std::vector<strata_knob_value> values(space_.knobs().size());
  int64_t number = -1;
  char error[kErrorSize] = "";
  const int status = plugin_.api().ask(session_, &number, values.data(), error, sizeof(error));
  if (status < 0) throw plugin_error(plugin_, "asking for a trial", error, "see the message; the study may be damaged");
  if (status == 0) return std::nullopt;
  Trial trial;
  trial.number = number;
  for (size_t k = 0; k < values.size(); ++k) trial.settings.push_back(decode(plugin_, space_.knobs()[k], values[k]));
  ++asked_;
  return trial;
}

void Tuner::tell(const Trial& trial, const TrialOutcome& outcome) {
  TrialOutcome told = outcome;
  if (told.state == TrialOutcome::State::complete && !std::isfinite(told.value)) {
    told = TrialOutcome::failed("the objective " + objective_.name + " is not finite (" + format_number(told.value) + ")");
  }
  char error[kErrorSize] = "";
  const int status = plugin_.api().tell(session_, trial.number, abi_state(told.state), told.value,
                                        told.reason.c_str(), error, sizeof(error));
  if (status < 0) {
    throw plugin_error(plugin_, "telling trial " + std::to_string(trial.number), error,
                       "tell only trials this Tuner asked, once each");
  }
}

}  // namespace strata
