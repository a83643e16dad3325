// The random tuner plugin: independent uniform draws per knob (log-uniform on
// log knobs), never exhausted. Seeded by the `seed` setting with its own
// splitmix64 generator, so a sequence is identical on every platform and
// compiler (std:: distributions are implementation-defined).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>

#include "support/plugin_support.hpp"

namespace {

using strata_plugin::OwnedKnob;

struct RandomSession {
  strata_plugin::OwnedSpace space;
  uint64_t state = 0;
  int64_t next_trial = 0;

  uint64_t next_bits() {  // splitmix64
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform01() { return double(next_bits() >> 11) * 0x1.0p-53; }  // [0, 1)
};

strata_knob_value draw(RandomSession& session, const OwnedKnob& knob) {
  const double u = session.uniform01();
  if (knob.type == STRATA_KNOB_CATEGORICAL) {
    const auto count = uint64_t(knob.candidates.size());
    return {0, 0.0, std::min<uint64_t>(uint64_t(u * double(count)), count - 1)};
  }
  if (knob.type == STRATA_KNOB_INTEGER) {
    const double lo = std::ceil(knob.low);
    const double hi = std::floor(knob.high);
    // Draw over [lo, hi + 1) and floor, so that every integer has its share.
    double x = knob.log_scale ? std::exp(std::log(lo) + u * (std::log(hi + 1) - std::log(lo)))
                              : lo + u * (hi + 1 - lo);
    const auto value = int64_t(std::clamp(std::floor(x), lo, hi));
    return {value, double(value), 0};
  }
  const double x = knob.log_scale ? std::exp(std::log(knob.low) + u * (std::log(knob.high) - std::log(knob.low)))
                                  : knob.low + u * (knob.high - knob.low);
  return {0, std::clamp(x, knob.low, knob.high), 0};
}

strata_tuner_session* random_create(const strata_search_space* space, const strata_setting* settings,
                                    size_t num_settings, char* error, size_t error_size) {
  try {
    auto session = std::make_unique<RandomSession>();
    session->space = strata_plugin::copy_space(space);
    for (const OwnedKnob& knob : session->space.knobs) {
      if (knob.type == STRATA_KNOB_INTEGER && std::ceil(knob.low) > std::floor(knob.high)) {
        throw strata_plugin::PluginError("integer knob " + knob.name + " has no whole number in its range");
      }
    }
    session->state = strata_plugin::unsigned_setting(settings, num_settings, "seed", 0);
    return reinterpret_cast<strata_tuner_session*>(session.release());
  } catch (const std::exception& e) {
    strata_plugin::write_error(error, error_size, e.what());
    return nullptr;
  }
}

int random_ask(strata_tuner_session* handle, int64_t* trial_number, strata_knob_value* values,
               char* error, size_t error_size) {
  auto* session = reinterpret_cast<RandomSession*>(handle);
  if (session == nullptr) {
    strata_plugin::write_error(error, error_size, "ask on a null session");
    return -1;
  }
  for (size_t k = 0; k < session->space.knobs.size(); ++k) values[k] = draw(*session, session->space.knobs[k]);
  *trial_number = session->next_trial++;
  return 1;
}

int random_tell(strata_tuner_session* handle, int64_t trial_number, strata_trial_state, double,
                const char*, char* error, size_t error_size) {
  auto* session = reinterpret_cast<RandomSession*>(handle);
  // Random search ignores results; it only checks that the trial was asked.
  if (session == nullptr || trial_number < 0 || trial_number >= session->next_trial) {
    strata_plugin::write_error(error, error_size,
                               "tell for trial " + std::to_string(trial_number) + ", which was never asked");
    return -1;
  }
  return 0;
}

void random_destroy(strata_tuner_session* handle) { delete reinterpret_cast<RandomSession*>(handle); }

const strata_tuner_plugin kRandomPlugin = {STRATA_TUNER_ABI_VERSION, "random", random_create, random_ask,
                                           random_tell, random_destroy};

}  // namespace

extern "C" __attribute__((visibility("default"))) const strata_tuner_plugin* strata_tuner_plugin_v1(void) {
  return &kRandomPlugin;
}
