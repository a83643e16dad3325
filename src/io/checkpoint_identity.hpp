// Which run a checkpoint belongs to, and whether a deck may continue it.
//
// Every checkpoint carries a run id (made once, at the run's fresh start, and
// kept by every resume) and the fingerprint of the deck keys that change the
// trained numbers. A fresh run refuses a checkpoint.dir that already holds
// checkpoints, so that it cannot overwrite another run's files; a resume
// compares the checkpoint's deck with its own key by key, under the rules of
// resume_rule() (the one list of keys that may differ: README, "Checkpoints").
#pragma once

#include <string>
#include <vector>

namespace strata::io {

// 16 lowercase hex digits of a fresh random 64-bit number.
std::string new_run_id();

enum class ResumeRule {
  kMustMatch,    // changes the numbers: the checkpoint's value and this run's must be equal
  kMayDiffer,    // resharding, run length, caches, outputs, logging: free to change
  kGlobalBatch,  // train.batch_size: per trainer, so batch_size x layout.trainers must match
};
// The rule of deck key `key` ("section.name"). Keys not listed are kMustMatch,
// so a key added later is protected until someone decides otherwise.
ResumeRule resume_rule(const std::string& key);

// A deck key whose value in the checkpoint's deck differs from this run's in a
// way resume_rule() does not allow.
struct DeckConflict {
  std::string key;
  std::string checkpoint_value;
  std::string run_value;
  std::string note;  // e.g. the global batch behind a train.batch_size conflict; may be empty
};

// Key by key over this run's deck. `checkpoint_ini` and `run_ini` are decks as
// to_ini() writes them; a key missing from the checkpoint's deck (written by
// an older strata) takes its value from `defaults_ini` (to_ini of the defaults);
// keys this build does not know are ignored.
std::vector<DeckConflict> resume_deck_conflicts(const std::string& checkpoint_ini, const std::string& run_ini,
                                                const std::string& defaults_ini);

// "key: A in the checkpoint, B in this run" lines, one per conflict.
std::string describe_conflicts(const std::vector<DeckConflict>& conflicts);

// 16 hex digits: XXH3-64 of the kMustMatch keys of `ini` and its global batch
// (keys missing from `ini` take their value from `defaults_ini`). Equal for two
// decks exactly when resume_deck_conflicts finds none between them.
std::string deck_fingerprint(const std::string& ini, const std::string& defaults_ini);

}  // namespace strata::io
