# Sourced by the job scripts: how to call mpirun on this machine. The scripts
# start it through jobs/strata_mpirun.sh, so that SIGTERM or Ctrl-C ends the
# job with a checkpoint (exit 85) instead of mpirun killing the ranks.
# Root needs --allow-run-as-root; more ranks than cores need --oversubscribe.
# One BLAS thread per rank: ranks already share the cores.
STRATA_BUILD_DIR=${STRATA_BUILD_DIR:-build}
STRATA_BIN=${STRATA_BIN:-$STRATA_BUILD_DIR/bin/strata}
# One node: shared memory only (btl self,vader), so no rank listens on a TCP port.
MPIRUN_FLAGS=(--oversubscribe --bind-to none -x OPENBLAS_NUM_THREADS=1 --mca btl self,vader)
if [[ $(id -u) -eq 0 ]]; then MPIRUN_FLAGS+=(--allow-run-as-root); fi
export OPENBLAS_NUM_THREADS=1
