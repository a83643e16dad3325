// Input decks: INI files whose [section] key = value lines map onto the option
// structs of config/options.hpp. Every key can be overridden on the command line
// as --section.key=value; the command line wins over the deck.
#pragma once

#include <string>
#include <vector>

#include "config/options.hpp"

namespace strata {

// Parses `args` (the words after the subcommand) into a RunOptions. Reads
// --config FILE if given. Throws strata::Error naming the bad key, value or file.
RunOptions parse_run_options(const std::vector<std::string>& args);

// Checks values that cannot be checked one key at a time (choices, ranges, shapes).
void validate(const RunOptions& options);

// "Keys (default)" help text for every deck key, grouped by section.
std::string deck_help();

// The options as an INI deck that parse_run_options accepts unchanged.
std::string to_ini(const RunOptions& options);

}  // namespace strata
