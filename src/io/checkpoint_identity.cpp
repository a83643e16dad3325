// Run ids, the resume rules of the deck keys, and the deck comparison.
#include "io/checkpoint_identity.hpp"

#include <unistd.h>
#include <xxhash.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <sstream>

namespace strata::io {

namespace {

// The keys that may differ between a checkpoint's deck and the deck that
// resumes it, and why. Exact keys, or "section." for a whole section.
// Everything else must match: the model, the optimizer, the seeds, the data
// and its order, the store's mode and admission.
struct KeyRule {
  const char* key;
  ResumeRule rule;
  const char* why;
};
constexpr KeyRule kRules[] = {
    {"layout.producers", ResumeRule::kMayDiffer, "resharding: reader positions move to the new producers"},
    {"layout.trainers", ResumeRule::kMayDiffer, "resharding (the global batch must stay: train.batch_size)"},
    {"layout.servers", ResumeRule::kMayDiffer, "resharding: rows re-hash to the new servers"},
    {"layout.dp", ResumeRule::kMayDiffer, "parallel layout: the dense weights are whole in every checkpoint"},
    {"layout.sp", ResumeRule::kMayDiffer, "parallel layout: the dense weights are whole in every checkpoint"},
    {"layout.ep", ResumeRule::kMayDiffer, "parallel layout: the experts are whole in every checkpoint"},
    {"train.batch_size", ResumeRule::kGlobalBatch, "per trainer: batch_size x layout.trainers must match"},
    {"train.steps", ResumeRule::kMayDiffer, "run length"},
    {"train.epochs", ResumeRule::kMayDiffer, "run length"},
    {"train.eval", ResumeRule::kMayDiffer, "evaluation after training"},
    {"train.eval_batch_size", ResumeRule::kMayDiffer, "evaluation after training"},
    {"data.strict", ResumeRule::kMayDiffer, "whether a malformed line stops the run"},
    {"data.max_errors_reported", ResumeRule::kMayDiffer, "logging"},
    // The caches and their policies: tiered trains ps's numbers bit for bit
    // whatever they are (tests/e2e tiered_exact_*), and the online controller
    // changes them during a run.
    {"store.prefetch_depth", ResumeRule::kMayDiffer, "cache"},
    {"store.l1_mb", ResumeRule::kMayDiffer, "cache"},
    {"store.l2_mb", ResumeRule::kMayDiffer, "cache"},
    {"store.policy", ResumeRule::kMayDiffer, "cache"},
    {"store.decay", ResumeRule::kMayDiffer, "cache"},
    {"store.horizon", ResumeRule::kMayDiffer, "cache"},
    {"store.fallback_late_rounds", ResumeRule::kMayDiffer, "cache (falls back to ps, same numbers)"},
    {"store.fault_l2_every", ResumeRule::kMayDiffer, "fault injection into the cache"},
    {"store.fault_staging_delay_ms", ResumeRule::kMayDiffer, "fault injection: timing"},
    {"links.", ResumeRule::kMayDiffer, "modelled links: timing only"},
    {"output.", ResumeRule::kMayDiffer, "outputs and logging"},
    {"checkpoint.", ResumeRule::kMayDiffer, "where and how often checkpoints go"},
    {"runtime.stall_timeout_s", ResumeRule::kMayDiffer, "the stall watchdog: timing only"},
    {"tune.", ResumeRule::kMayDiffer, "strata tune only"},
    {"autotune.", ResumeRule::kMayDiffer, "the online controller moves cache budget and prefetch depth only"},
};

using Deck = std::map<std::string, std::string>;  // "section.key" -> value text

std::string trim(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return {};
  return text.substr(begin, text.find_last_not_of(" \t\r") - begin + 1);
}

// The INI text of to_ini(): "[section]" lines, then "key = value" lines.
Deck parse_deck(const std::string& ini) {
  Deck deck;
  std::istringstream lines(ini);
  std::string line, section;
  while (std::getline(lines, line)) {
    const std::string text = trim(line);
    if (text.empty() || text[0] == '#' || text[0] == ';') continue;
    if (text.front() == '[' && text.back() == ']') {
      section = trim(text.substr(1, text.size() - 2));
      continue;
    }
    const size_t equals = text.find('=');
    if (equals == std::string::npos) continue;
    deck[section + "." + trim(text.substr(0, equals))] = trim(text.substr(equals + 1));
  }
  return deck;
}

// `key` of `deck`, or of `defaults` when the deck predates the key.
std::string value_of(const Deck& deck, const Deck& defaults, const std::string& key) {
  const auto found = deck.find(key);
  if (found != deck.end()) return found->second;
  const auto fallback = defaults.find(key);
  return fallback != defaults.end() ? fallback->second : std::string();
}

// batch_size x trainers as text ("" when either is not a number).
std::string global_batch(const Deck& deck, const Deck& defaults) {
  const std::string batch = value_of(deck, defaults, "train.batch_size");
  const std::string trainers = value_of(deck, defaults, "layout.trainers");
  char* end_batch = nullptr;
  char* end_trainers = nullptr;
  const long long b = std::strtoll(batch.c_str(), &end_batch, 10);
  const long long t = std::strtoll(trainers.c_str(), &end_trainers, 10);
  if (batch.empty() || trainers.empty() || *end_batch != '\0' || *end_trainers != '\0') return {};
  return std::to_string(b * t);
}

}  // namespace

std::string new_run_id() {
  // random_device may be a fixed sequence on some platforms: the clock and the
  // process id make two runs' ids differ there too.
  std::random_device device;
  uint64_t bits = (uint64_t(device()) << 32) ^ uint64_t(device());
  const uint64_t clock = uint64_t(std::chrono::high_resolution_clock::now().time_since_epoch().count());
  const uint64_t salt[2] = {clock, uint64_t(::getpid())};
  bits ^= XXH3_64bits(salt, sizeof(salt));
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(bits));
  return text;
}

ResumeRule resume_rule(const std::string& key) {
  for (const KeyRule& rule : kRules) {
    const std::string pattern = rule.key;
    const bool section = pattern.back() == '.';
    if (section ? key.compare(0, pattern.size(), pattern) == 0 : key == pattern) return rule.rule;
  }
  return ResumeRule::kMustMatch;
}

std::vector<DeckConflict> resume_deck_conflicts(const std::string& checkpoint_ini, const std::string& run_ini,
                                                const std::string& defaults_ini) {
  const Deck stored = parse_deck(checkpoint_ini), run = parse_deck(run_ini), defaults = parse_deck(defaults_ini);
  std::vector<DeckConflict> conflicts;
  for (const auto& [key, run_value] : run) {
    const ResumeRule rule = resume_rule(key);
    if (rule == ResumeRule::kMayDiffer) continue;
    const std::string stored_value = value_of(stored, defaults, key);
    if (rule == ResumeRule::kMustMatch) {
      if (stored_value != run_value) conflicts.push_back({key, stored_value, run_value, {}});
      continue;
    }
    const std::string stored_batch = global_batch(stored, defaults), run_batch = global_batch(run, defaults);
    if (stored_batch != run_batch || (stored_batch.empty() && stored_value != run_value)) {
      conflicts.push_back({key, stored_value, run_value,
                           "the global batch (train.batch_size x layout.trainers) is " + stored_batch +
                               " in the checkpoint, " + run_batch + " in this run"});
    }
  }
  return conflicts;
}

std::string describe_conflicts(const std::vector<DeckConflict>& conflicts) {
  std::string text;
  for (const DeckConflict& c : conflicts) {
    text += "\n  " + c.key + ": '" + c.checkpoint_value + "' in the checkpoint, '" + c.run_value + "' in this run";
    if (!c.note.empty()) text += " (" + c.note + ")";
  }
  return text;
}

std::string deck_fingerprint(const std::string& ini, const std::string& defaults_ini) {
  const Deck deck = parse_deck(ini), defaults = parse_deck(defaults_ini);
  std::string canonical;
  for (const auto& [key, unused] : defaults) {
    const ResumeRule rule = resume_rule(key);
    if (rule == ResumeRule::kMustMatch) canonical += key + "=" + value_of(deck, defaults, key) + "\n";
  }
  canonical += "global_batch=" + global_batch(deck, defaults) + "\n";
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(canonical.data(), canonical.size())));
  return text;
}

}  // namespace strata::io
