#!/usr/bin/env bash
# Install the Debian bookworm packages sparsepush needs, with apt-get (directly as root, through
# sudo otherwise). Idempotent: packages already present are skipped without touching the network.
# Usage: bash cmake/install-deps.sh [main|all]
#   main  only what the main job needs: a compiler, CMake, Eigen, zlib, CLI11, nlohmann-json,
#         gnuplot and the Fashion-MNIST data (cmake/quickstart.sh main)
#   all   everything the tests, benchmarks, examples, the Python module and the API reference
#         build and run with (the default; cmake/quickstart.sh test)
set -euo pipefail
what="${1:-all}"
main=(
  g++ cmake make pkg-config
  libeigen3-dev zlib1g-dev                          # sparsepush-train's reference backend, its IDX reader
  libcli11-dev nlohmann-json3-dev gnuplot-nox       # sparsepush-train: options, summary, plot
  dataset-fashion-mnist                             # the data the training examples use
)
rest=(
  xtensor-dev xtl-dev libxsimd-dev                  # adapters (optional for users, tested here)
  catch2 librandom123-dev                           # tests
  libbenchmark-dev                                  # microbenchmarks
  libboost-graph-dev                                # Boost.Graph adapter
  openmpi-bin libopenmpi-dev                        # MPI transport (optional for users, tested here)
  libsimgrid-dev                                    # SimGrid's SMPI: smpicxx, smpirun (SPARSEPUSH_SMPI, bench/net/simulate.sh)
  iproute2 python3                                  # bench/net/testbed.sh: namespaces, tc, its probe
  python3-dev pybind11-dev libdlpack-dev            # the Python module (python/)
  python3-numpy python3-pytest python3-mpi4py python3-torch  # its tests and the PyTorch examples
  python3-torchvision                               # examples/python/resnet_fashion_mnist.py, bench/peers/torch_wrapper.py --model resnet18
  python3-venv python3-pip python3-setuptools python3-wheel  # pip install . (setup.py) into a virtual environment
  doxygen                                           # the API reference (cmake --build build --target docs) and its test
)
case "$what" in
  main) packages=("${main[@]}") ;;
  all) packages=("${main[@]}" "${rest[@]}") ;;
  *) echo "usage: $0 [main|all]" >&2; exit 2 ;;
esac
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present ($what)"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
