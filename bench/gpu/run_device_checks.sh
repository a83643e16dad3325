#!/usr/bin/env bash
# The device half of issue 16, on a machine with a GPU (an H200 here, 16 cores):
#   1. build with -DSTRATA_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 (only what the checks need),
#   2. run the GPU tests (ctest label gpu: every CUDA kernel vs its host reference, bit for bit)
#      and the host interface test,
#   3. run a tiered DLRM job with runtime.device = cuda and compare its params_digest with
#      the same job on the host in ps mode (the staged CUDA kernels are bit-identical),
#   4. time gather / scatter-add / Adagrad step GB/s against a measured D2D cudaMemcpy and the
#      hash table's find / insert rates (bench_gpu_device), printing each ratio last.
# Budget: under 8 minutes including the build. Usage: bench/gpu/run_device_checks.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build-gpu-check}
JOBS=${JOBS:-$(nproc)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
start=$SECONDS
stage() { echo "== [$((SECONDS - start)) s] $*"; }

mkdir -p "$BUILD"
stage "configure (CUDA ON, sm_90)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSTRATA_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  > "$BUILD/device_checks.configure.log" 2>&1 || { tail -30 "$BUILD/device_checks.configure.log"; exit 1; }
stage "build (strata, the backend tests, bench_gpu_device; -j$JOBS)"
cmake --build "$BUILD" -j"$JOBS" --target strata backend_kernels_test backend_cuda_kernels_test bench_gpu_device \
  > "$BUILD/device_checks.build.log" 2>&1 || { grep -m20 -E "error|Error" "$BUILD/device_checks.build.log"; exit 1; }

stage "GPU tests"
status=0
# SKIP (77) here would mean no usable GPU: treat it as a failure on the device machine.
"$BUILD/tests/backend/backend_cuda_kernels_test" || { echo "backend_cuda_kernels_test: exit $?"; status=1; }
"$BUILD/tests/backend/backend_kernels_test" --gtest_brief=1 || status=1

stage "a tiered job on the CUDA kernels: params_digest vs ps on the host"
work=$(mktemp -d)
run_job() {  # name, extra args...
  local name=$1; shift
  mpiexec -n 4 "$BUILD/bin/strata" train --config inputs/default.ini --layout.trainers=2 --train.steps=40 \
    --output.dir="$work/$name" "$@" > "$work/$name.log" 2>&1 || { tail -20 "$work/$name.log" >&2; return 1; }
  python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['params_digest'])" "$work/$name/summary.json"
}
host_ps=$(run_job host_ps --store.mode=ps --runtime.device=host) || status=1
cuda_tiered=$(run_job cuda_tiered --store.mode=tiered --runtime.device=cuda) || status=1
echo "host ps     $host_ps"
echo "cuda tiered $cuda_tiered"
if [[ -n "$host_ps" && "$host_ps" == "$cuda_tiered" ]]; then echo "digests equal"; else echo "DIGESTS DIFFER"; status=1; fi
rm -rf "$work"

stage "device figures"
"$BUILD/bin/bench_gpu_device" | tee "$BUILD/device_checks.figures.txt" || status=1
stage "done (exit $status)"
grep '^ratio' "$BUILD/device_checks.figures.txt" || true
exit $status
