// A separate process for the optuna concurrency test: runs TRIALS trials of a
// synthetic objective on a shared study and prints each trial number on a line.
// Usage: tune_study_worker STUDY TRIALS SEED
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "common/error.hpp"
#include "tune/tuner.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s STUDY TRIALS SEED\n", argv[0]);
    return 2;
  }
  try {
    strata::TuneOptions options;
    options.plugin = "optuna";
    options.study = argv[1];
    options.trials = std::atoi(argv[2]);
    options.seed = std::strtoull(argv[3], nullptr, 10);
    strata::SearchSpace space;
    space.add(strata::Knob{"x", "test", strata::KnobType::real, 0, 10, false, {}});
    strata::Tuner tuner(options, space);
    while (auto trial = tuner.ask()) {
      const double x = trial->find("x")->number;
      tuner.tell(*trial, strata::TrialOutcome::completed(-(x - 3) * (x - 3)));
      std::printf("%lld\n", static_cast<long long>(trial->number));
      std::fflush(stdout);
    }
  } catch (const strata::Error& e) {
    std::fprintf(stderr, "tune_study_worker: %s\n", e.what());
    return 1;
  }
  return 0;
}
