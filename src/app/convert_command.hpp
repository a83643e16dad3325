// `strata convert`: turns a Criteo or CSV text file into strata's columnar HDF5
// dataset (docs/DATA_HDF5.md), which producers then read with data.source = hdf5.
#pragma once

#include <string>
#include <vector>

namespace strata {

// The usage text of `strata convert --help`.
extern const char* const kConvertUsage;

// Runs `strata convert` with the words after "convert":
//   --from criteo|csv --to FILE.h5 --input TEXTFILE [--force] [--chunk-rows N]
//   [--deflate L] [--deflate-below F] [--checksum] [--config DECK] [--section.key=value ...]
// The deck (data.csv_columns, csv_delimiter, csv_header, strict,
// max_errors_reported) says how to read the text; data.source and data.train come
// from --from and --input. Malformed lines are skipped and counted (data.strict
// makes the first one fatal). The file is written under a temporary name in the
// target's directory and renamed only when complete. Prints one summary line and
// returns 0; throws strata::Error (what failed + how to fix it) otherwise. Runs on
// a single process (one MPI rank).
int run_convert_command(const std::vector<std::string>& args);

}  // namespace strata
