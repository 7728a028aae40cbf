#!/usr/bin/env bash
# The README's Quick start: install what is missing, build, then run the main job ("main") or
# the whole test suite ("test"). Usage: bash cmake/quickstart.sh main|test [build-dir]
set -euo pipefail
what="${1:-}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${2:-$root/build}"
case "$what" in
  main|test) ;;
  *) echo "usage: $0 main|test [build-dir]" >&2; exit 2 ;;
esac
bash "$root/cmake/install-deps.sh"
# CMAKE_BUILD_PARALLEL_LEVEL and CTEST_PARALLEL_LEVEL, when set, limit the jobs (a shared machine).
jobs="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DSPARSEPUSH_BUILD_TESTS=ON -DSPARSEPUSH_BUILD_BENCH=ON -DSPARSEPUSH_BUILD_EXAMPLES=ON
cmake --build "$build" -j"$jobs"
if [ "$what" = main ]; then
  # The main job: 16 nodes train the reference CNN on Fashion-MNIST with SCSP (top-1%) over the
  # time-varying directed ring, labels skewed 0.8; prints the summary, writes log, JSON and plot.
  "$build/examples/sparsepush-train" --log "$build/train.csv" --summary "$build/train-summary.json" \
    --plot "$build/train.png"
else
  ctest --test-dir "$build" --output-on-failure -j"${CTEST_PARALLEL_LEVEL:-$jobs}"
fi
