// The exit codes of strata, one place for scripts and tests to read them from
// (README "Exit codes"). Every rank that can exits with the same code.
#pragma once

namespace strata {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;      // an error during the run (MPI_Abort)
constexpr int kExitBadInput = 2;    // bad command line, deck, input file or checkpoint.dir
constexpr int kExitNoDevice = 77;   // strata device: no CUDA device
constexpr int kExitPreempted = 85;  // stopped by SIGTERM, SIGINT or SIGUSR1 after writing a checkpoint
constexpr int kExitStalled = 86;    // no progress for runtime.stall_timeout_s: a rank stopped or hung

}  // namespace strata
