#!/usr/bin/env bash
# The default job: 1 server, 1 producer and 2 trainers on built-in synthetic data.
# Usage: jobs/train_default.sh [--section.key=value ...]
# A demo (`make run`): each run replaces the previous one in runs/default
# (--output.overwrite=true). A folder you name with --output.dir is protected as
# everywhere else: strata refuses it if it holds an earlier run's outputs.
set -euo pipefail
cd "$(dirname "$0")/.."
source jobs/mpirun_env.sh
OVERWRITE=(--output.overwrite=true)
for arg in "$@"; do
  case "$arg" in --output.dir*|--output.overwrite*) OVERWRITE=() ;; esac
done
exec jobs/strata_mpirun.sh -n 4 "${MPIRUN_FLAGS[@]}" "$STRATA_BIN" train --config inputs/default.ini "${OVERWRITE[@]}" "$@"
