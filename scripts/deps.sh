#!/usr/bin/env bash
# Installs every Debian package strata builds, tests and benchmarks with.
# Idempotent: packages already present are skipped, apt-get runs only when needed.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libopenmpi-dev openmpi-bin
  libhdf5-openmpi-dev hdf5-tools
  libboost-program-options-dev
  libtrilinos-kokkos-dev libtrilinos-kokkos-kernels-dev
  libopenblas-dev libopenblas0-pthread
  libgtest-dev
  libxxhash-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libssl-dev
  python3-dev python3-venv python3-optuna pybind11-dev
  python3-torch python3-matplotlib python3-h5py python3-numpy
  slurm-wlm munge
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
