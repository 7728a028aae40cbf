#!/usr/bin/env bash
# The Quick start of README.md: install what is missing, build, then run the main job ("main")
# or the whole test suite ("test"). Usage: bash cmake/quickstart.sh main|test [build-dir]
#   main  installs only the main job's packages (cmake/install-deps.sh main) and builds only
#         sparsepush-train, for one process: no tests, benchmarks, Python module, MPI or SimGrid
#         (MPI is left out even where it is installed: the main job runs in one process)
#   test  installs everything (cmake/install-deps.sh all), builds every target, runs ctest
set -euo pipefail
what="${1:-}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${2:-$root/build}"
case "$what" in
  main|test) ;;
  *) echo "usage: $0 main|test [build-dir]" >&2; exit 2 ;;
esac
# CMAKE_BUILD_PARALLEL_LEVEL and CTEST_PARALLEL_LEVEL, when set, limit the jobs (a shared machine).
jobs="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}"
if [ "$what" = main ]; then
  bash "$root/cmake/install-deps.sh" main
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPARSEPUSH_BUILD_TESTS=OFF \
    -DSPARSEPUSH_BUILD_BENCH=OFF -DSPARSEPUSH_BUILD_EXAMPLES=ON -DSPARSEPUSH_BUILD_PYTHON=OFF \
    -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON
  cmake --build "$build" -j"$jobs" --target sparsepush-train
  # The main job: 16 nodes train the reference CNN on Fashion-MNIST with SCSP (top-1%) over the
  # time-varying directed ring, labels skewed 0.8; prints the summary, writes log, JSON and plot.
  "$build/examples/sparsepush-train" --log "$build/train.csv" --summary "$build/train-summary.json" \
    --plot "$build/train.png"
else
  bash "$root/cmake/install-deps.sh" all
  # A tree that `main` configured gets MPI and the Python module's default back (ON where found)
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -USPARSEPUSH_BUILD_PYTHON -DCMAKE_DISABLE_FIND_PACKAGE_MPI=OFF \
    -DSPARSEPUSH_BUILD_TESTS=ON -DSPARSEPUSH_BUILD_BENCH=ON -DSPARSEPUSH_BUILD_EXAMPLES=ON
  cmake --build "$build" -j"$jobs"
  ctest --test-dir "$build" --output-on-failure -j"${CTEST_PARALLEL_LEVEL:-$jobs}"
fi
