// The knobs a tuning search varies: their engine names, types and ranges or
// candidate sets, read from the deck's tune.space_* keys.
//
// Spec syntax of a tune.space_* key (see docs/TUNER.md):
//   ""            not searched (the deck's value is used)
//   "lo:hi"       a numeric range; integers when both bounds are whole numbers
//   "lo:hi:log"   the same, sampled log-uniformly (lo > 0)
//   "a|b|c"       candidates (one alone fixes the knob); layouts as "P/T/S[,sp=N,ep=N,dp=N,sp_mode=M]"
#pragma once

#include <string>
#include <vector>

#include "config/options.hpp"

namespace strata {

enum class KnobType { integer, real, categorical };

const char* to_string(KnobType type);

struct Knob {
  std::string name;      // the engine key it sets, e.g. "store.l1_mb", or "layout"
  std::string deck_key;  // where it was declared, e.g. "tune.space_l1_mb" (for errors)
  KnobType type = KnobType::real;
  double low = 0;        // integer and real knobs: inclusive bounds
  double high = 0;
  bool log_scale = false;
  std::vector<std::string> candidates;  // categorical knobs: values as the engine reads them
};

class SearchSpace {
 public:
  // The knobs of every non-empty tune.space_* key, in a fixed order: store.l1_mb,
  // store.l2_mb, store.prefetch_depth, store.horizon, store.policy, layout, train.batch_size,
  // optim.sparse_lr, optim.dense_lr.
  // A malformed spec, or a value the engine would reject, is a strata::Error
  // naming the deck key and the accepted forms.
  static SearchSpace from_options(const TuneOptions& options);

  // Parses one spec into a knob. `whole_numbers` refuses fractional values
  // (for keys such as store.prefetch_depth).
  static Knob parse_knob(const std::string& name, const std::string& deck_key, const std::string& spec,
                         bool whole_numbers);

  // Adds a knob declared in code (tests, other front ends); names must be unique.
  void add(Knob knob);

  const std::vector<Knob>& knobs() const { return knobs_; }
  const Knob* find(const std::string& name) const;
  bool empty() const { return knobs_.empty(); }

 private:
  std::vector<Knob> knobs_;
};

}  // namespace strata
