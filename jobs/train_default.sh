#!/usr/bin/env bash
# The default job: 1 server, 1 producer and 2 trainers on built-in synthetic data.
# Usage: jobs/train_default.sh [--section.key=value ...]
set -euo pipefail
cd "$(dirname "$0")/.."
source jobs/mpirun_env.sh
exec mpirun -n 4 "${MPIRUN_FLAGS[@]}" "$STRATA_BIN" train --config inputs/default.ini "$@"
