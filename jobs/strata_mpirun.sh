#!/usr/bin/env bash
# mpirun with a graceful stop: the supported way to start strata on one node.
# Usage: jobs/strata_mpirun.sh MPIRUN-ARGUMENTS...   (exactly what you would give mpirun)
#
# SIGTERM (what schedulers and `kill` send), SIGINT (Ctrl-C) or SIGHUP to this
# script becomes SIGUSR1 to mpirun, which forwards it to every rank: the ranks
# write a checkpoint at the next step boundary (with checkpoint.dir set) and
# the job exits with code 85. A second such signal stops the job at once.
# mpirun itself cannot do this: Open MPI 4.1's mpirun answers SIGTERM and
# SIGINT by killing every rank within about 2 s (SIGCONT, SIGTERM, then
# SIGKILL odls_base_sigkill_timeout = 1 s later), too soon for a checkpoint,
# and exits with 1; it forwards SIGUSR1 and SIGUSR2 untouched.
#
# mpirun runs in a session of its own so that a Ctrl-C on the terminal reaches
# this script only; it gets SIGTERM (and ends the job) if this script dies.
# The exit code is mpirun's. MPIRUN names another mpirun (default: mpirun).
set -uo pipefail
MPIRUN=${MPIRUN:-mpirun}
if command -v setpriv > /dev/null; then
  setpriv --pdeathsig TERM setsid "$MPIRUN" "$@" &
else
  setsid "$MPIRUN" "$@" &
fi
job=$!
stops=0
stop() {
  stops=$((stops + 1))
  if ((stops == 1)); then
    echo "strata_mpirun: $1: the ranks checkpoint at the next step and stop (exit 85); $1 again stops at once" >&2
    kill -USR1 "$job" 2> /dev/null
  else
    kill -TERM "$job" 2> /dev/null
  fi
}
trap 'stop SIGTERM' TERM
trap 'stop SIGINT' INT
trap 'stop SIGHUP' HUP
# `wait` returns early when a trapped signal arrives: wait again until mpirun is gone.
while true; do
  wait "$job"
  rc=$?
  if ! kill -0 "$job" 2> /dev/null; then
    wait "$job" 2> /dev/null
    rc2=$?
    # bash keeps the status of a child it reaped; 127 means it had none to give.
    if ((rc2 != 127)); then rc=$rc2; fi
    break
  fi
done
exit "$rc"
