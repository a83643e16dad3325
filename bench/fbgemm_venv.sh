#!/usr/bin/env bash
# Creates, once, the virtual environment of bench/dlrm_fbgemm.py (the FBGEMM peer
# of bench_dlrm.py) and prints its python's path, last, on stdout; progress goes
# to stderr. Idempotent: a complete environment (its stamp file names the wanted
# versions and the import check passes) is left as it is; an incomplete or
# different one is removed and made again.
#
#   venv : ${STRATA_BUILD_DIR:-build}/bench/venv-fbgemm (relative to the repository)
#   base : Debian's /usr/bin/python3 (3.11) -m venv; it needs python3-venv
#          (scripts/deps.sh installs it)
#   pip  : torch==2.14.1 torchrec==1.9.2 fbgemm-gpu-cpu==1.9.0 from PyPI, then
#          pip uninstall -y fbgemm-gpu and fbgemm-gpu-cpu reinstalled (see below)
#
# Why these steps:
# - torchrec requires fbgemm-gpu (the CUDA build), which installs into the same
#   fbgemm_gpu/ package folder as fbgemm-gpu-cpu and overwrites its libraries; on
#   a machine without CUDA it fails to load with an undefined symbol. Uninstalling
#   it deletes those shared files too (fbgemm_gpu is then missing), so
#   fbgemm-gpu-cpu is reinstalled afterwards (--force-reinstall --no-deps).
# - torch 2.15 does not load fbgemm-gpu-cpu 1.9.0 (it is built against 2.14), so
#   torch is pinned to 2.14.1.
# - PyPI's torch 2.14.1 for Linux is the CUDA 13 build and pulls ~4 GB of nvidia-*
#   wheels (the venv is ~5.5 GB); its CPU kernels are those of the CPU-only build,
#   and it cannot be installed without them (torch._C links libcufile and others).
#   Where download.pytorch.org is reachable, FBGEMM_TORCH_INDEX=
#   https://download.pytorch.org/whl/cpu takes torch from there instead (the
#   CPU-only wheel, ~1 GB); that index was not reachable where this was written.
#
# Usage: bash bench/fbgemm_venv.sh            # -> .../venv-fbgemm/bin/python
#        FBGEMM_VENV=DIR bash bench/fbgemm_venv.sh
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${STRATA_BUILD_DIR:-build}
VENV=${FBGEMM_VENV:-$BUILD_DIR/bench/venv-fbgemm}
BASE_PYTHON=${FBGEMM_BASE_PYTHON:-/usr/bin/python3}
TORCH_VERSION=2.14.1
TORCHREC_VERSION=1.9.2
FBGEMM_VERSION=1.9.0
WANT="torch==$TORCH_VERSION torchrec==$TORCHREC_VERSION fbgemm-gpu-cpu==$FBGEMM_VERSION index=${FBGEMM_TORCH_INDEX:-pypi}"
STAMP="$VENV/.strata-fbgemm-stamp"

check() {
  "$VENV/bin/python" - <<'PY'
import torch
import fbgemm_gpu  # noqa: F401
from fbgemm_gpu.split_table_batched_embeddings_ops_training import SplitTableBatchedEmbeddingBagsCodegen  # noqa: F401
import torchrec  # noqa: F401
PY
}

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]] && check 2>/dev/null; then
  echo "$(cd "$VENV" && pwd)/bin/python"
  exit 0
fi

echo "fbgemm_venv: creating $VENV ($WANT)" >&2
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
if ! "$BASE_PYTHON" -m venv "$VENV" >&2; then
  rm -rf "$VENV"
  echo "fbgemm_venv: '$BASE_PYTHON -m venv' failed; install python3-venv (bash scripts/deps.sh)" >&2
  exit 1
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)
index=()
if [[ -n "${FBGEMM_TORCH_INDEX:-}" ]]; then
  index=(--index-url "$FBGEMM_TORCH_INDEX" --extra-index-url https://pypi.org/simple)
fi
"${PIP[@]}" install "${index[@]}" "torch==$TORCH_VERSION" "torchrec==$TORCHREC_VERSION" \
  "fbgemm-gpu-cpu==$FBGEMM_VERSION" >&2
"${PIP[@]}" uninstall -y fbgemm-gpu >&2
"${PIP[@]}" install --force-reinstall --no-deps "fbgemm-gpu-cpu==$FBGEMM_VERSION" >&2
if ! check >&2; then
  echo "fbgemm_venv: the import check failed in $VENV" >&2
  exit 1
fi
"${PIP[@]}" list 2>/dev/null | grep -iE '^(torch|torchrec|fbgemm[-_]gpu[-_]cpu|fbgemm[-_]gpu|numpy) ' >&2 || true
echo "$WANT" >"$STAMP"
echo "$(cd "$VENV" && pwd)/bin/python"
