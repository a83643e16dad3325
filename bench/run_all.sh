#!/usr/bin/env bash
# Runs strata's benchmarks (make bench): DLRM throughput against PyTorch, then the
# SGEMM limit of the machine with the MLP FLOP rate strata reached. Logs and JSON go
# to $STRATA_BUILD_DIR/bench/. The cores must be otherwise idle (see bench_dlrm.py).
# Usage: STRATA_BUILD_DIR=build bash bench/run_all.sh [bench_dlrm.py options]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${STRATA_BUILD_DIR:-build}
OUT="$BUILD_DIR/bench"
mkdir -p "$OUT"

# strata restarts itself with OPENBLAS_CORETYPE when OpenBLAS falls back to its
# generic kernels (backend/host/blas_kernels.hpp); give every peer the same kernels.
if [[ -z "${OPENBLAS_CORETYPE:-}" && -x "$BUILD_DIR/bin/bench_gemm_peak" ]] && \
   "$BUILD_DIR/bin/bench_gemm_peak" --threads=1 --batches=128 --square=64 | head -1 | grep -qw Prescott; then
  if grep -qw avx512bw /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell; fi
fi

if [[ ! -x "$BUILD_DIR/bin/bench_gemm_peak" || ! -x "$BUILD_DIR/bin/strata" ]]; then
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target strata bench_gemm_peak
fi

# Debian's interpreter: it has python3-torch; the python3 first on PATH does not.
/usr/bin/python3 bench/bench_dlrm.py --build-dir "$BUILD_DIR" --json "$OUT/dlrm.json" "$@" | tee "$OUT/dlrm.txt"

# Every strata run's per-trainer batch (the GEMMs' M) and samples/s, for the GEMM report.
mapfile -t STRATA_RUNS < <(/usr/bin/python3 - "$OUT/dlrm.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for x in r["results"]:
    if x["peer"].startswith("strata"):
        trainers = int(x["peer"].split()[1][0])
        print(f"--strata={x['global_batch'] // trainers}:{x['samples_per_s']:.0f}:{trainers}t@{x['global_batch']}")
PY
)
echo
/usr/bin/python3 bench/bench_dlrm.py --wait-quiet-only
"$BUILD_DIR/bin/bench_gemm_peak" --threads=1,2 --batches=128,256,512,1024 --square=1024 "${STRATA_RUNS[@]}" \
  | tee "$OUT/gemm_peak.txt"

echo
grep '^ratio strata/' "$OUT/dlrm.txt"

# Scheme B (the tiered store): L3 bytes, hit rates against Belady, link-model
# throughput, row gather/scatter against memcpy.
echo
cmake --build "$BUILD_DIR" -j "$(nproc)" --target bench_cache_simulator bench_gather_scatter
/usr/bin/python3 bench/tiered/bench_tiered.py --build "$BUILD_DIR" | tee "$OUT/tiered.txt"
# Does Scheme B pay off: tiered against ps on bench_dlrm.py's work, staging CPU, the physical limit.
echo
/usr/bin/python3 bench/tiered/bench_scheme_b.py --build "$BUILD_DIR" | tee "$OUT/scheme_b.txt"

# Several models in one job against separate jobs (issue 14): producer CPU, wall time, memory.
echo
/usr/bin/python3 bench/multi_model/bench_co_training.py --build "$BUILD_DIR" | tee "$OUT/co_training.txt"
/usr/bin/python3 bench/multi_model/bench_co_training.py --build "$BUILD_DIR" --store-mode ps | tee -a "$OUT/co_training.txt"
/usr/bin/python3 bench/multi_model/bench_l2_pool.py --build "$BUILD_DIR" | tee -a "$OUT/co_training.txt"
/usr/bin/python3 bench/multi_model/bench_tune_co_train.py --build "$BUILD_DIR" | tee -a "$OUT/co_training.txt"
/usr/bin/python3 bench/multi_model/bench_tune_co_train.py --build "$BUILD_DIR" --store-mode ps | tee -a "$OUT/co_training.txt"

# Parallel layouts (issue 13): expert and sequence parallel, capacity against dropless;
# multi-task MMoE against PyTorch on the same data.
echo
/usr/bin/python3 bench/parallel/bench_layouts.py --build "$BUILD_DIR" | tee "$OUT/layouts.txt"
/usr/bin/python3 bench/model/bench_mmoe.py --build "$BUILD_DIR" | tee -a "$OUT/layouts.txt"

# Checkpoints (pause, bytes, GB/s against the disk) and text vs HDF5 reading.
echo
cmake --build "$BUILD_DIR" -j "$(nproc)" --target strata bench_read_speed
/usr/bin/python3 bench/checkpoint/bench_checkpoint.py --build "$BUILD_DIR" | tee "$OUT/checkpoint.txt"

# The tuner: tuned vs default, Optuna vs the exhaustive grid.
echo
/usr/bin/python3 bench/tune/bench_tune.py --build "$BUILD_DIR" | tee "$OUT/tune.txt"
/usr/bin/python3 bench/tune/bench_tune.py --build "$BUILD_DIR" --scenario layouts | tee -a "$OUT/tune.txt"
/usr/bin/python3 bench/tune/bench_tune.py --build "$BUILD_DIR" --scenario din_moe_long | tee -a "$OUT/tune.txt"

# Every benchmark's ratios together, last.
echo
grep -h '^ratio' "$OUT/dlrm.txt" "$OUT/tiered.txt" "$OUT/scheme_b.txt" "$OUT/co_training.txt" "$OUT/layouts.txt" \
  "$OUT/checkpoint.txt" "$OUT/tune.txt"
