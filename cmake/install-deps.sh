#!/usr/bin/env bash
# Install the Debian bookworm packages sparsepush builds, tests and benchmarks with.
# Idempotent: packages already present are skipped without touching the network.
# Runs apt-get directly as root, through sudo otherwise.
set -euo pipefail
packages=(
  g++ cmake make pkg-config
  libeigen3-dev xtensor-dev xtl-dev libxsimd-dev   # adapters (optional for users, tested here)
  catch2 librandom123-dev zlib1g-dev                # tests
  libbenchmark-dev                                  # microbenchmarks
  libboost-graph-dev                                # Boost.Graph adapter
  openmpi-bin libopenmpi-dev                        # MPI transport (optional for users, tested here)
  libsimgrid-dev                                    # SimGrid's SMPI: smpicxx, smpirun (SPARSEPUSH_SMPI, bench/net/simulate.sh)
  dataset-fashion-mnist                             # the data the training examples use
  libcli11-dev nlohmann-json3-dev gnuplot-nox        # sparsepush-train: options, summary, plot
  iproute2 python3                                  # bench/net/testbed.sh: namespaces, tc, its probe
  python3-dev pybind11-dev libdlpack-dev            # the Python module (python/)
  python3-numpy python3-pytest python3-mpi4py python3-torch  # its tests and examples/python/train_torch.py
  python3-venv python3-pip python3-setuptools python3-wheel  # pip install . (setup.py) into a virtual environment
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
