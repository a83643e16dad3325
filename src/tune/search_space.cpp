// tune.space_* specs -> knobs. Every value a knob can take at its edges is run
// through the engine's own deck parser, so a range the engine would refuse
// (store.l1_mb = 0, policy "lfru") fails here, naming the tune key, instead of
// failing every trial later.
#include "tune/search_space.hpp"

#include <cmath>
#include <cstdlib>

#include "common/error.hpp"
#include "config/deck.hpp"
#include "tune/trial.hpp"
#include "tune/trial_overrides.hpp"

namespace strata {

namespace {

const char* const kAcceptedForms =
    "write lo:hi, lo:hi:log (lo > 0; integers when both bounds are whole numbers) or candidates a|b|c, "
    "e.g. 1:64:log or lru|lfu; leave it empty to keep the deck's value";

std::string trim(const std::string& text) {
  const auto begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  const auto end = text.find_last_not_of(" \t");
  return text.substr(begin, end - begin + 1);
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string::size_type start = 0;
  while (true) {
    const auto at = text.find(separator, start);
    parts.push_back(trim(text.substr(start, at == std::string::npos ? std::string::npos : at - start)));
    if (at == std::string::npos) return parts;
    start = at + 1;
  }
}

bool parse_double(const std::string& text, double& value) {
  if (text.empty()) return false;
  char* end = nullptr;
  value = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && std::isfinite(value);
}

// "64", "-3": written as an integer (no point, no exponent).
bool is_whole_number_text(const std::string& text) {
  double value = 0;
  return parse_double(text, value) && text.find_first_of(".eEnN") == std::string::npos;
}

Error spec_error(const std::string& deck_key, const std::string& spec, const std::string& detail,
                 const std::string& fix = kAcceptedForms) {
  return Error("bad value '" + spec + "' for " + deck_key + ": " + detail, fix);
}

// A one-knob trial at `value`, for probing the engine's deck parser.
KnobSetting probe_setting(const Knob& knob, double value) {
  if (knob.type == KnobType::integer) return KnobSetting::integer(knob.name, int64_t(value));
  return KnobSetting::real(knob.name, value);
}

// Throws when the engine's deck parser refuses a value the knob can take.
void check_engine_accepts(const Knob& knob, const std::string& spec) {
  std::vector<KnobSetting> probes;
  if (knob.type == KnobType::categorical) {
    for (const auto& candidate : knob.candidates) probes.push_back(KnobSetting::categorical(knob.name, candidate));
  } else {
    probes.push_back(probe_setting(knob, knob.low));
    probes.push_back(probe_setting(knob, knob.high));
  }
  for (const auto& probe : probes) {
    try {
      // A layout that sets the trainers' axes is valid or not with the deck's
      // model (sp needs sasrec, hstu or din; ep needs experts: moe, mmoe, ple, or din
      // with din_tower = moe): its grammar is checked here, the rest per trial,
      // which is pruned with the engine's reason.
      if (knob.name == "layout" && parse_layout_split(probe.text).parallel) continue;
      parse_run_options(overrides(Trial{0, {probe}}));
    } catch (const Error& e) {
      throw spec_error(knob.deck_key, spec,
                       "the engine refuses " + knob.name + " = " + probe.text + " (" + e.what_failed() + ")",
                       e.how_to_fix().empty() ? kAcceptedForms : e.how_to_fix());
    }
  }
}

}  // namespace

const char* to_string(KnobType type) {
  switch (type) {
    case KnobType::integer: return "integer";
    case KnobType::real: return "float";
    case KnobType::categorical: return "categorical";
  }
  return "?";
}

Knob SearchSpace::parse_knob(const std::string& name, const std::string& deck_key, const std::string& spec_text,
                             bool whole_numbers) {
  const std::string spec = trim(spec_text);
  Knob knob;
  knob.name = name;
  knob.deck_key = deck_key;
  if (spec.empty()) throw spec_error(deck_key, spec, "the spec is empty");

  if (spec.find(':') == std::string::npos) {
    knob.type = KnobType::categorical;
    for (const auto& candidate : split(spec, '|')) {
      if (candidate.empty()) throw spec_error(deck_key, spec, "an empty candidate");
      if (whole_numbers && !is_whole_number_text(candidate)) {
        throw spec_error(deck_key, spec, "candidate '" + candidate + "' is not a whole number (" + name +
                                             " takes whole numbers)");
      }
      for (const auto& seen : knob.candidates) {
        if (seen == candidate) throw spec_error(deck_key, spec, "candidate '" + candidate + "' appears twice");
      }
      knob.candidates.push_back(candidate);
    }
    return knob;
  }

  if (spec.find('|') != std::string::npos) throw spec_error(deck_key, spec, "mixes a range (:) and candidates (|)");
  const auto parts = split(spec, ':');
  if (parts.size() > 3 || (parts.size() == 3 && parts[2] != "log")) {
    throw spec_error(deck_key, spec, "a range is lo:hi or lo:hi:log");
  }
  if (!parse_double(parts[0], knob.low) || !parse_double(parts[1], knob.high)) {
    throw spec_error(deck_key, spec, "the bounds must be numbers");
  }
  if (knob.low > knob.high) throw spec_error(deck_key, spec, "lo > hi");
  knob.log_scale = parts.size() == 3;
  if (knob.log_scale && !(knob.low > 0)) throw spec_error(deck_key, spec, "a log range needs lo > 0");
  const bool whole = is_whole_number_text(parts[0]) && is_whole_number_text(parts[1]);
  if (whole_numbers && !whole) {
    throw spec_error(deck_key, spec, name + " takes whole numbers, so both bounds must be whole numbers");
  }
  knob.type = whole ? KnobType::integer : KnobType::real;
  return knob;
}

SearchSpace SearchSpace::from_options(const TuneOptions& options) {
  struct Entry {
    const char* name;
    const char* deck_key;
    const std::string& spec;
    bool whole_numbers;
    bool candidates_only;
  };
  const Entry entries[] = {
      {"store.l1_mb", "tune.space_l1_mb", options.space_l1_mb, false, false},
      {"store.l2_mb", "tune.space_l2_mb", options.space_l2_mb, false, false},
      {"store.prefetch_depth", "tune.space_prefetch_depth", options.space_prefetch_depth, true, false},
      {"store.horizon", "tune.space_horizon", options.space_horizon, true, false},
      {"store.policy", "tune.space_policy", options.space_policy, false, true},
      {"layout", "tune.space_layout", options.space_layout, false, true},
      {"train.batch_size", "tune.space_batch_size", options.space_batch_size, true, false},
      {"optim.sparse_lr", "tune.space_sparse_lr", options.space_sparse_lr, false, false},
      {"optim.dense_lr", "tune.space_dense_lr", options.space_dense_lr, false, false},
  };
  SearchSpace space;
  for (const Entry& entry : entries) {
    if (trim(entry.spec).empty()) continue;
    if (entry.candidates_only && entry.spec.find(':') != std::string::npos) {
      throw spec_error(entry.deck_key, entry.spec, std::string(entry.name) + " takes candidates only",
                       std::string("write candidates a|b|c, e.g. ") +
                           (std::string(entry.name) == "layout" ? "1/2/1|2/1/1" : "lru|lfu|lookahead"));
    }
    Knob knob = parse_knob(entry.name, entry.deck_key, entry.spec, entry.whole_numbers);
    check_engine_accepts(knob, entry.spec);
    space.add(std::move(knob));
  }
  return space;
}

void SearchSpace::add(Knob knob) {
  if (find(knob.name) != nullptr) {
    throw Error("knob " + knob.name + " is declared twice in the search space", "declare each knob once");
  }
  knobs_.push_back(std::move(knob));
}

const Knob* SearchSpace::find(const std::string& name) const {
  for (const auto& knob : knobs_) {
    if (knob.name == name) return &knob;
  }
  return nullptr;
}

}  // namespace strata
