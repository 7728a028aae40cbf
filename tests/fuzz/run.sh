#!/usr/bin/env bash
# Build the libFuzzer targets with clang (-fsanitize=fuzzer,address,undefined) in BUILD_DIR and
# run each for SECONDS, JOBS at a time, on a scratch copy of its seeds and crashes (the
# repository is never written). Prints each target's final stats line; fails if any target
# finds something (its reproducer is left in BUILD_DIR/fuzz-run/<name>/, named crash-*, leak-*,
# timeout-* or oom-*). Usage: bash tests/fuzz/run.sh [BUILD_DIR [SECONDS [JOBS]]]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build-fuzz}"
seconds="${2:-60}"
jobs="${3:-${CMAKE_BUILD_PARALLEL_LEVEL:-2}}"
cxx="${SPARSEPUSH_FUZZ_CXX:-clang++}"
if ! command -v "$cxx" >/dev/null; then
  echo "fuzz: $cxx not found (Debian: apt-get install clang libclang-rt-14-dev)" >&2
  exit 2
fi
cmake -S "$root" -B "$build" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSPARSEPUSH_BUILD_FUZZ=ON -DSPARSEPUSH_BUILD_TESTS=OFF -DSPARSEPUSH_BUILD_BENCH=OFF \
  -DSPARSEPUSH_BUILD_EXAMPLES=OFF >/dev/null
targets=$(sed -n 's/^set(SPARSEPUSH_FUZZ_TARGETS \(.*\))$/\1/p' "$root/tests/fuzz/CMakeLists.txt")
[ -n "$targets" ] || { echo "fuzz: no target list in tests/fuzz/CMakeLists.txt" >&2; exit 2; }
# shellcheck disable=SC2086
cmake --build "$build" -j"$jobs" --target $(printf 'fuzz_%s ' $targets)

run="$build/fuzz-run"
rm -rf "$run"
for name in $targets; do
  mkdir -p "$run/$name/corpus"
  # the seeds and every crash ever found (either may be missing), so that a regression fails at once
  for from in corpus crashes; do
    if [ -d "$root/tests/fuzz/$from/$name" ]; then
      find "$root/tests/fuzz/$from/$name" -type f ! -name '.*' -exec cp {} "$run/$name/corpus/" \;
    fi
  done
done

fuzz_one() {  # name: run one target, its log and artifacts under $run/$name
  local name="$1" dir="$run/$1"
  ( cd "$dir" && "$build/tests/fuzz/fuzz_$name" corpus -max_total_time="$seconds" -timeout=30 \
      -rss_limit_mb=4096 -artifact_prefix="$dir/" -print_final_stats=1 >"$dir/log" 2>&1 )
}
export -f fuzz_one
export run build seconds
status=0
# shellcheck disable=SC2086
printf '%s\n' $targets | xargs -P "$jobs" -I{} bash -c 'fuzz_one {} || touch "$run/{}/FAILED"' || status=1

for name in $targets; do
  dir="$run/$name"
  if [ -e "$dir/FAILED" ]; then
    status=1
    echo "fuzz_$name: FAILED; reproducer(s): $(ls "$dir" | grep -E '^(crash|leak|timeout|oom|slow-unit)-' | sed "s|^|$dir/|" | tr '\n' ' ')"
    grep -m1 -E 'ERROR: |fuzz check failed|runtime error' "$dir/log" || true
    tail -n 40 "$dir/log"
  else
    echo "fuzz_$name: $(grep -E '^#[0-9]+[[:space:]]+DONE' "$dir/log" | tail -n1)"
  fi
done
exit $status
