// Preemption: SIGTERM and SIGUSR1 (what Slurm sends before it preempts or
// times out a job, e.g. #SBATCH --signal=B:USR1@120, forwarded to the ranks
// by mpirun or srun) only raise a flag; the trainers see it at the next step
// boundary, write a checkpoint and stop, and the job exits with
// kExitPreempted so that a batch script knows to requeue it.
#pragma once

namespace strata::runtime {

constexpr int kExitPreempted = 85;

// Idempotent. The handlers only set a flag (async-signal-safe).
void install_preemption_handlers();
bool preemption_requested();
// Which signal raised the flag (0 if none), for the log.
int preemption_signal();

}  // namespace strata::runtime
