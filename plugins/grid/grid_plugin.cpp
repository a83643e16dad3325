// The grid tuner plugin: every combination of a discretised search space, once,
// then exhausted. Numeric knobs get `grid_points` points between their bounds
// (log-spaced on log knobs; integers rounded and de-duplicated); categorical
// knobs get all their candidates. The last knob varies fastest.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "support/plugin_support.hpp"

namespace {

using strata_plugin::OwnedKnob;
using strata_plugin::PluginError;

// Beyond this the engine could never run the grid anyway; refuse early.
constexpr double kMaxCombinations = 1e9;

struct GridSession {
  strata_plugin::OwnedSpace space;
  std::vector<std::vector<strata_knob_value>> axes;  // (knob, point)
  uint64_t combinations = 1;
  uint64_t next = 0;  // the next combination's index, also its trial number
};

// The points of one numeric knob: `points` values from low to high, log-spaced if asked.
std::vector<double> numeric_points(const OwnedKnob& knob, int points) {
  if (knob.low == knob.high) return {knob.low};
  std::vector<double> values;
  const bool log = knob.log_scale;
  const double lo = log ? std::log(knob.low) : knob.low;
  const double hi = log ? std::log(knob.high) : knob.high;
  for (int i = 0; i < points; ++i) {
    // A single point sits in the middle of the range, not on one edge.
    // (hi - lo) * i / (points - 1) keeps even splits exact: 0.5:2 -> 0.5, 1, 1.5, 2.
    const double offset = points == 1 ? (hi - lo) / 2 : (hi - lo) * double(i) / double(points - 1);
    values.push_back(log ? std::exp(lo + offset) : lo + offset);
  }
  // exp(log(x)) drifts by an ulp; pin the ends to the declared bounds.
  if (points > 1) {
    values.front() = knob.low;
    values.back() = knob.high;
  }
  return values;
}

std::vector<strata_knob_value> axis_of(const OwnedKnob& knob, int points) {
  std::vector<strata_knob_value> axis;
  if (knob.type == STRATA_KNOB_CATEGORICAL) {
    for (uint64_t c = 0; c < knob.candidates.size(); ++c) axis.push_back({0, 0.0, c});
    return axis;
  }
  for (double x : numeric_points(knob, points)) {
    if (knob.type == STRATA_KNOB_INTEGER) {
      const int64_t rounded = std::clamp<int64_t>(std::llround(x), int64_t(std::ceil(knob.low)),
                                                  int64_t(std::floor(knob.high)));
      // Rounding may map neighbours onto one integer (e.g. 1..4 with 8 points).
      if (!axis.empty() && axis.back().integer == rounded) continue;
      axis.push_back({rounded, double(rounded), 0});
    } else {
      axis.push_back({0, x, 0});
    }
  }
  return axis;
}

strata_tuner_session* grid_create(const strata_search_space* space, const strata_setting* settings,
                                  size_t num_settings, char* error, size_t error_size) {
  try {
    auto session = std::make_unique<GridSession>();
    session->space = strata_plugin::copy_space(space);
    const long long points = strata_plugin::integer_setting(settings, num_settings, "grid_points", 3);
    if (points < 1) throw PluginError("grid_points must be >= 1, got " + std::to_string(points));
    double combinations = 1;
    for (const OwnedKnob& knob : session->space.knobs) {
      if (knob.type == STRATA_KNOB_INTEGER && std::ceil(knob.low) > std::floor(knob.high)) {
        throw PluginError("integer knob " + knob.name + " has no whole number in its range");
      }
      session->axes.push_back(axis_of(knob, int(points)));
      combinations *= double(session->axes.back().size());
    }
    if (combinations > kMaxCombinations) {
      throw PluginError("the grid has " + std::to_string(combinations) +
                        " combinations\nfix: lower tune.grid_points or search fewer knobs");
    }
    session->combinations = uint64_t(combinations);
    return reinterpret_cast<strata_tuner_session*>(session.release());
  } catch (const std::exception& e) {
    strata_plugin::write_error(error, error_size, e.what());
    return nullptr;
  }
}

int grid_ask(strata_tuner_session* handle, int64_t* trial_number, strata_knob_value* values,
             char* error, size_t error_size) {
  auto* session = reinterpret_cast<GridSession*>(handle);
  if (session == nullptr) {
    strata_plugin::write_error(error, error_size, "ask on a null session");
    return -1;
  }
  if (session->next >= session->combinations) return 0;
  // Mixed-radix decoding of the combination index; the last knob is the lowest digit.
  uint64_t rest = session->next;
  for (size_t k = session->axes.size(); k-- > 0;) {
    const auto& axis = session->axes[k];
    values[k] = axis[rest % axis.size()];
    rest /= axis.size();
  }
  *trial_number = int64_t(session->next++);
  return 1;
}

int grid_tell(strata_tuner_session* handle, int64_t trial_number, strata_trial_state, double,
              const char*, char* error, size_t error_size) {
  auto* session = reinterpret_cast<GridSession*>(handle);
  // The grid does not adapt; it only checks that the engine told a trial it asked.
  if (session == nullptr || trial_number < 0 || uint64_t(trial_number) >= session->next) {
    strata_plugin::write_error(error, error_size,
                               "tell for trial " + std::to_string(trial_number) + ", which was never asked");
    return -1;
  }
  return 0;
}

void grid_destroy(strata_tuner_session* handle) { delete reinterpret_cast<GridSession*>(handle); }

const strata_tuner_plugin kGridPlugin = {STRATA_TUNER_ABI_VERSION, "grid", grid_create, grid_ask,
                                         grid_tell, grid_destroy};

}  // namespace

extern "C" __attribute__((visibility("default"))) const strata_tuner_plugin* strata_tuner_plugin_v1(void) {
  return &kGridPlugin;
}
