// `strata ckpt`: looks inside a checkpoint file (docs/CHECKPOINT.md) without
// resuming it: what it holds, its params_digest, a full checksum pass, its deck.
#pragma once

#include <string>
#include <vector>

namespace strata {

// The usage text of `strata ckpt --help`.
extern const char* const kCkptUsage;

// Runs `strata ckpt` with the words after "ckpt":
//   info FILE     the header (step, epoch, layout, mode, shapes), rows, dense size,
//                 producers' positions and the file size
//   digest FILE   the params_digest of the state it holds (64 hex digits, as in summary.json)
//   verify FILE   reads every dataset and checks every checksum
//   config FILE   the resolved deck the run used (INI, usable as --config)
// Prints to stdout and returns 0; throws strata::Error (what failed + how to fix
// it) otherwise. Runs on one process (MPI initialised; uses MPI_COMM_SELF).
int run_ckpt_command(const std::vector<std::string>& args);

}  // namespace strata
