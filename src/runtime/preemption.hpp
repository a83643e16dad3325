// How a job stops before its end.
//
// Preemption: SIGTERM, SIGINT and SIGUSR1 (what Slurm sends before it preempts
// or times out a job, e.g. #SBATCH --signal=B:USR1@120, forwarded to the ranks
// by srun, by mpirun for SIGUSR1, or by jobs/strata_mpirun.sh for all three)
// only raise a flag; the trainers see it at the next step boundary, write a
// checkpoint and stop, and the job exits with kExitPreempted so that a batch
// script knows to requeue it. From the signal on, a rank's log writes to a
// pipe never block (a launcher that is shutting down may stop reading them).
//
// Stalls: the stall watchdog (runtime.stall_timeout_s, comm/stall_watchdog.hpp)
// watches every wait of training and evaluation; a rank whose wait sees no
// progress for that long reports which rank and phase it waits for and exits
// with kExitStalled.
#pragma once

#include <string>

#include "common/exit_codes.hpp"
#include "common/stall_error.hpp"
#include "config/options.hpp"
#include "runtime/role_layout.hpp"

namespace strata::runtime {

using strata::kExitPreempted;
using strata::kExitStalled;

// Idempotent. The handlers only set a flag (async-signal-safe); a second
// SIGINT (an impatient Ctrl-C) ends the process at once.
void install_preemption_handlers();
bool preemption_requested();
// Which signal raised the flag (0 if none), for the log.
int preemption_signal();

// Makes this rank's stdout and stderr non-blocking when they are pipes: a log
// line that does not fit is dropped rather than stalling the rank.
void stop_blocking_on_log_output();

// Called by each role once it is ready to run (constructed, resumed): all
// ranks meet, then this rank's stall watchdog is armed (when
// runtime.stall_timeout_s > 0), naming every rank by role in its reports.
void start_stall_watchdog(const RunOptions& options, const RankContext& context);
// The role's watched part is over (the final dump and summary are not watched).
void stop_stall_watchdog();

// Prints this rank's one-line stall report, gives the other ranks a moment to
// print theirs, and exits the process with kExitStalled (without MPI_Finalize,
// which would wait for the stalled rank).
[[noreturn]] void exit_stalled(const StallError& error, int world_rank);

// An error ended this rank's part: tells every other rank, prints the job's
// one message (comm::announce_job_failure picks the rank that speaks when
// several fail at once) and exits the process with that rank's code
// (kExitBadInput for a strata::InputError, kExitFailed otherwise), without
// MPI_Abort and its banner.
[[noreturn]] void exit_failed(int exit_code, const std::string& message, int world_rank);
// Another rank failed (comm::PeerFailure): exit quietly with its exit code,
// a moment after that rank (whose exit mpirun reports).
[[noreturn]] void exit_after_peer_failure(int exit_code);

}  // namespace strata::runtime
