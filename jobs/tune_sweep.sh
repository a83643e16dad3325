#!/usr/bin/env bash
# A tuning sweep with the optuna plugin on the default deck (4 ranks, as
# jobs/train_default.sh): every trial runs TRIAL_STEPS measured steps. The study
# persists in runs/tune/study.journal, so running this again continues it;
# trials.csv, best.ini and the plots go to runs/tune.
# Usage: [TRIALS=N] [TRIAL_STEPS=K] jobs/tune_sweep.sh [--section.key=value ...]
set -euo pipefail
cd "$(dirname "$0")/.."
source jobs/mpirun_env.sh
TRIALS=${TRIALS:-16}
TRIAL_STEPS=${TRIAL_STEPS:-100}
exec jobs/strata_mpirun.sh -n 4 "${MPIRUN_FLAGS[@]}" "$STRATA_BIN" tune --config inputs/default.ini \
  --tune.plugin=optuna --tune.study=runs/tune/study.journal \
  --tune.trials="$TRIALS" --tune.trial_steps="$TRIAL_STEPS" --output.dir=runs/tune "$@"
