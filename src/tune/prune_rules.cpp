// Memory-limit and placement rules applied to a trial before it runs.
#include "tune/prune_rules.hpp"

#include <cstdlib>

#include "tune/trial_overrides.hpp"

namespace strata {

std::string prune_reason(const Trial& trial, const TuneOptions& options, int world_size) {
  std::string reasons;
  auto add = [&reasons](const std::string& reason) { reasons += (reasons.empty() ? "" : "; ") + reason; };
  auto check_limit = [&](const char* knob, double limit, const char* limit_key) {
    const KnobSetting* setting = trial.find(knob);
    // Numeric candidates ("8|16") are categorical knobs whose text is a number.
    if (setting == nullptr) return;
    const double value = setting->type == KnobType::categorical ? std::strtod(setting->text.c_str(), nullptr) : setting->number;
    if (value > limit) {
      add(std::string(knob) + " = " + setting->text + " MiB exceeds " + limit_key + " = " + format_number(limit));
    }
  };
  check_limit("store.l1_mb", options.l1_limit_mb, "tune.l1_limit_mb");
  check_limit("store.l2_mb", options.l2_limit_mb, "tune.l2_limit_mb");
  if (world_size > 0) {
    if (const KnobSetting* layout = trial.find("layout")) {
      const LayoutSplit split = parse_layout_split(layout->text);
      const int ranks = split.producers + split.trainers + split.servers;
      if (ranks != world_size) {
        add("layout " + layout->text + " needs " + std::to_string(ranks) + " ranks, the job has " +
            std::to_string(world_size));
      }
    }
  }
  return reasons;
}

}  // namespace strata
