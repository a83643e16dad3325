// Input decks: INI files whose [section] key = value lines map onto the option
// structs of config/options.hpp. Every key can be overridden on the command line
// as --section.key=value; the command line wins over the deck.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "config/options.hpp"

namespace strata {

// Parses `args` (the words after the subcommand) into a RunOptions. Reads
// --config FILE if given. Throws strata::Error naming the bad key, value or file.
RunOptions parse_run_options(const std::vector<std::string>& args);

// One model of a deck that co-trains several (config/model_set.hpp): the keys of
// its [model.NAME] section as full deck keys, each with its line in the deck.
struct DeckOverlay {
  struct Entry {
    std::string key;  // e.g. "optim.sparse_lr" (a bare "kind" in the section is "model.kind")
    std::string value;
    int line = 0;
  };
  std::vector<Entry> entries;
  // The deck text with [models] and [model.*] hidden and these entries in
  // place of the shared keys they replace; key_lines gets the entries' lines.
  std::string apply(const std::string& text, std::map<std::string, std::vector<int>>& key_lines) const;
};
RunOptions parse_run_options(const std::vector<std::string>& args, const DeckOverlay* overlay);

// Every deck key ("section.key"), in --help order.
std::vector<std::string> deck_keys();

// Physical memory of this machine in MiB (0 when it cannot be read).
double physical_memory_mib();

// Checks values that cannot be checked one key at a time (choices, ranges, shapes).
void validate(const RunOptions& options);

// "Keys (default)" help text for every deck key, grouped by section.
std::string deck_help();

// The options as an INI deck that parse_run_options accepts unchanged.
std::string to_ini(const RunOptions& options);

}  // namespace strata
