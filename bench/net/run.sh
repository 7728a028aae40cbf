#!/usr/bin/env bash
# Time to accuracy on the emulated cluster of testbed.sh: sparsepush-train over MPI (one rank per
# host, the nodes in blocks), every algorithm and waiting policy asked for, at every uplink rate
# asked for. Writes each run's log and summary, a markdown table (table.md: ms per training
# round, the wall time until the averaged model first reaches the target accuracy, final
# accuracies, the time outside training) and a plot of accuracy against wall time, one panel
# per rate (accuracy-vs-time.png). Brings the testbed up (or uses the one that is up with as
# many hosts) and always takes it down at exit: no namespace, veth or qdisc is left behind.
#
# Usage (as root): bench/net/run.sh [--quick] [options]
#   --quick            2 hosts, 4 nodes, unshaped and 10mbit, SGP and SP top-1%, lockstep, the
#                      MLP for 0.05 epochs (about a minute): checks the whole chain
#   --build DIR        where sparsepush-train is (default build; built there if it is missing)
#   --out DIR          results (default bench/net/out)
#   --hosts H          emulated hosts, one MPI rank each (default 4)
#   --nodes N          nodes in all (default 16)
#   --rates "R..."     uplink rates after the unshaped run (default "1gbit 100mbit 10mbit")
#   --configs "C..."   sgp sp-top1 sp-top0.1-int8 scsp-auto-bf16 choco-top1 (default: these five),
#                      sp-top1-hH (SP top-1% with H local steps, e.g. sp-top1-h4),
#                      sp-top0.1-int8-hH, choco-push-top1, choco-push-top1-int8 (consensus step
#                      0.5), choco-push-top10-int8, choco-push-top1-hH
#   --target A         stop each run at the first evaluation whose node-mean accuracy reaches A
#                      (--target-accuracy; the table then reports the summary's time to it)
#   --policies "P..."  lockstep overlap async (default: all three; CHOCO runs lockstep only)
#   --skews "S..."     label skews (default "0 0.8"; target 80% at skew 0, 75% otherwise)
#   --model M --epochs E --eval-every R   (defaults cnn, 1, 0: about ten evaluations a run)
#   --eval-reduce ordered|allreduce       how evaluations sum the models (default allreduce: one
#                      allreduce of d doubles; ordered keeps the bits of one process, a chain)
#   --extra "ARGS"     more sparsepush-train options for every run
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$root/build"
out="$here/out"
hosts=4 nodes=16 rates="1gbit 100mbit 10mbit"
configs="sgp sp-top1 sp-top0.1-int8 scsp-auto-bf16 choco-top1"
policies="lockstep overlap async" skews="0 0.8" model=cnn epochs=1 eval_every=0 extra="" eval_reduce=allreduce target=""
die() { echo "run.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) hosts=2 nodes=4 rates="10mbit" configs="sgp sp-top1" policies="lockstep" skews="0" model=mlp epochs=0.05 ;;
    --build) build="$2"; shift ;;
    --out) out="$2"; shift ;;
    --hosts) hosts="$2"; shift ;;
    --nodes) nodes="$2"; shift ;;
    --rates) rates="$2"; shift ;;
    --configs) configs="$2"; shift ;;
    --policies) policies="$2"; shift ;;
    --skews) skews="$2"; shift ;;
    --model) model="$2"; shift ;;
    --epochs) epochs="$2"; shift ;;
    --eval-every) eval_every="$2"; shift ;;
    --extra) extra="$2"; shift ;;
    --target) target="$2"; shift ;;
    --eval-reduce) eval_reduce="$2"; shift ;;
    -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (--help lists them)" ;;
  esac
  shift
done
[ "$(id -u)" -eq 0 ] || die "needs root (the testbed's network namespaces); run it as root or with sudo"
[[ "$hosts" =~ ^[0-9]+$ ]] && [ "$hosts" -ge 2 ] || die "--hosts must be 2 or more, not '$hosts'"
[[ "$nodes" =~ ^[0-9]+$ ]] && [ "$nodes" -ge "$hosts" ] || die "--nodes must be at least --hosts ($hosts), not '$nodes'"

config_args() {
  case "$1" in
    sgp) echo "--algorithm sgp" ;;
    sp-top1) echo "--algorithm sp --compressor top-k:0.01" ;;
    sp-top0.1-int8) echo "--algorithm sp --compressor top-k:0.001+int8" ;;
    scsp-auto-bf16) echo "--algorithm scsp --compressor top-k:0.01 --final-rounds auto --final-compressor identity+bf16" ;;
    choco-top1) echo "--algorithm choco --compressor top-k:0.01" ;;
    choco-push-top1) echo "--algorithm choco-push --compressor top-k:0.01" ;;
    choco-push-top1-int8) echo "--algorithm choco-push --compressor top-k:0.01+int8 --consensus-step 0.5" ;;
    choco-push-top10-int8) echo "--algorithm choco-push --compressor top-k:0.1+int8" ;;
    choco-push-top1-h[1-9]*) [[ "${1#choco-push-top1-h}" =~ ^[1-9][0-9]{0,3}$ ]] || return 1
                             echo "--algorithm choco-push --compressor top-k:0.01 --local-steps ${1#choco-push-top1-h}" ;;
    sp-top1-h[1-9]*) [[ "${1#sp-top1-h}" =~ ^[1-9][0-9]{0,3}$ ]] || return 1
                     echo "--algorithm sp --compressor top-k:0.01 --local-steps ${1#sp-top1-h}" ;;
    sp-top0.1-int8-h[1-9]*) [[ "${1#sp-top0.1-int8-h}" =~ ^[1-9][0-9]{0,3}$ ]] || return 1
                            echo "--algorithm sp --compressor top-k:0.001+int8 --local-steps ${1#sp-top0.1-int8-h}" ;;
    *) return 1 ;;
  esac
}
policy_args() {
  case "$1" in
    lockstep) echo "" ;;
    overlap) echo "--overlap" ;;
    async) echo "--staleness inf" ;;
    *) return 1 ;;
  esac
}
for c in $configs; do
  config_args "$c" >/dev/null || die "unknown config '$c' (sgp sp-top1 sp-top0.1-int8 scsp-auto-bf16 choco-top1 sp-top1-hH sp-top0.1-int8-hH choco-push-top1 choco-push-top1-int8 choco-push-top10-int8 choco-push-top1-hH)"
done
if [ -n "$target" ]; then
  python3 -c "import sys; a = float(sys.argv[1]); sys.exit(0 if 0 < a <= 1 else 1)" "$target" 2>/dev/null ||
    die "--target must be a fraction in (0, 1], not '$target'"
  extra="$extra --target-accuracy $target"
fi
for p in $policies; do policy_args "$p" >/dev/null || die "unknown policy '$p' (lockstep overlap async)"; done

exe="$build/examples/sparsepush-train"
if [ ! -x "$exe" ]; then
  echo "run.sh: building sparsepush-train in $build"
  bash "$root/cmake/install-deps.sh"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPARSEPUSH_BUILD_EXAMPLES=ON >/dev/null
  cmake --build "$build" -j"$(nproc)" --target sparsepush-train
fi
exe="$(cd "$(dirname "$exe")" && pwd)/$(basename "$exe")"
command -v python3 >/dev/null || die "needs python3 (the table)"

testbed="$here/testbed.sh"
trap 'bash "$testbed" down >/dev/null 2>&1 || true' EXIT
trap 'exit 130' INT TERM
bash "$testbed" up "$hosts"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
: > "$out/runs.txt"
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')" > "$out/machine.txt"

for rate in none $rates; do
  bash "$testbed" shape "$rate"
  bash "$testbed" measure | tee "$out/bandwidth-$rate.txt"
  for skew in $skews; do
    for c in $configs; do
      for p in $policies; do
        [[ "$c" == choco* ]] && [ "$p" != lockstep ] && continue  # CHOCO and CHOCO-Push refuse the policies
        name="$rate-$c-$p-skew$skew"
        # shellcheck disable=SC2046,SC2086
        args=(--transport mpi --nodes "$nodes" --model "$model" --epochs "$epochs" --skew "$skew"
              --eval-every "$eval_every" --eval-reduce "$eval_reduce" $(config_args "$c") $(policy_args "$p") $extra
              --log "$out/$name.csv" --summary "$out/$name.json")
        echo "run.sh: $name"
        t0=$(date +%s.%N)
        status=ok
        if ! bash "$testbed" mpirun -np "$hosts" --map-by node --bind-to none "$exe" "${args[@]}" > "$out/$name.out" 2>&1; then
          # a run that fails (a diverged model, a timeout) is a result too: the table names its error
          echo "run.sh: $name failed (the table names its error); the last lines of its output:" >&2
          tail -5 "$out/$name.out" >&2
          status=failed
        fi
        t1=$(date +%s.%N)
        echo "$rate $skew $c $p $(python3 -c "print(f'{$t1 - $t0:.2f}')") $name $status" >> "$out/runs.txt"
      done
    done
  done
done
bash "$testbed" down

python3 "$here/table.py" "$out" "$hosts" "$nodes" "$model" "$epochs" | tee "$out/table.md"
if command -v gnuplot >/dev/null; then
  gnuplot -c "$here/plot.gp" "$out" "none $rates" "$skews" > /dev/null 2>&1 && echo "run.sh: $out/accuracy-vs-time.png" ||
    echo "run.sh: the plot failed (gnuplot); the table is complete"
fi
