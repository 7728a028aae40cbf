#!/usr/bin/env bash
# Asynchronous rounds measured (issue 22): 16 nodes on 4 MPI ranks, the CNN on Fashion-MNIST,
# sparsepush-train's default algorithm (SCSP, top-1%), one thread a rank, evaluated once at the end
# (on 2000 test images).
#   straggler: --straggler 12-15:3 (rank 3's four nodes three times slower: one slow machine);
#              lockstep without and with it, staleness 4 and asynchronous (global step budget)
#              with it; skew 0 and 0.8, seeds 1 and 2
#   jitter:    every local step x U[1, 2] (--jitter 2); lockstep against staleness 2
#   overlap:   dense SGP, lockstep against --overlap
# Prints markdown tables (wall and train seconds, accuracies, steps per node, largest staleness,
# waiting time per rank) and keeps every summary under OUT (default bench/async/out).
# Usage: bash bench/async/run.sh [build-dir] [epochs] [out-dir]
set -euo pipefail
build="${1:-build}"
epochs="${2:-1}"
out="${3:-bench/async/out}"
exe="$build/examples/sparsepush-train"
[ -x "$exe" ] || { echo "run.sh: $exe not found (build the project first)" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "run.sh: mpirun not found (apt-get install openmpi-bin)" >&2; exit 2; }
flags=""
if mpirun --version 2>&1 | grep -q "Open MPI"; then flags="--allow-run-as-root --oversubscribe"; fi
mkdir -p "$out"
echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%F)"

run() {  # name, then sparsepush-train options
  local name="$1"; shift
  if [ ! -s "$out/$name.json" ]; then
    # shellcheck disable=SC2086
    mpirun $flags -np 4 "$exe" --transport mpi --nodes 16 --model cnn --epochs "$epochs" --threads 1 \
      --eval-every 1000000 --final-eval-samples 2000 \
      --summary "$out/$name.json" "$@" > "$out/$name.log" 2>&1 || { echo "run.sh: $name failed, see $out/$name.log" >&2; exit 1; }
  fi
}

for skew in 0 0.8; do
  for seed in 1 2; do
    tag="skew${skew}-seed${seed}"
    run "lockstep-$tag" --skew "$skew" --seed "$seed"
    run "lockstep-straggler-$tag" --skew "$skew" --seed "$seed" --straggler 12-15:3
    run "staleness4-straggler-$tag" --skew "$skew" --seed "$seed" --straggler 12-15:3 --staleness 4
    run "async-straggler-$tag" --skew "$skew" --seed "$seed" --straggler 12-15:3 --staleness inf
  done
done
for seed in 1 2; do
  run "lockstep-jitter-seed$seed" --seed "$seed" --jitter 2
  run "staleness2-jitter-seed$seed" --seed "$seed" --jitter 2 --staleness 2
  run "sgp-lockstep-seed$seed" --seed "$seed" --algorithm sgp
  run "sgp-overlap-seed$seed" --seed "$seed" --algorithm sgp --overlap
done

python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
def load(name):
    return json.load(open(os.path.join(out, name + ".json")))
def row(label, s, base):
    st = s["steps_per_node"]
    wait = ", ".join("%.1f" % w for w in s["wait_seconds_per_rank"])
    return (f"| {label} | {s['wall_seconds']:.1f} | {s['wall_seconds'] / base['wall_seconds']:.2f} | "
            f"{100 * s['averaged_model_test_accuracy']:.2f} | {100 * s['avg_test_accuracy']:.2f} | "
            f"{st['min']}–{st['max']} | {s['max_staleness']} | {wait} |")
print("\n## Straggler: rank 3's nodes 12-15 three times slower\n")
print("| skew, seed, policy | wall s | wall / lockstep without straggler | averaged-model acc % | node-average acc % | local steps per node | largest staleness | waiting s per rank |")
print("|---|--:|--:|--:|--:|--:|--:|---|")
for skew in ("0", "0.8"):
    for seed in ("1", "2"):
        tag = f"skew{skew}-seed{seed}"
        base = load("lockstep-" + tag)
        print(row(f"{skew}, {seed}, lockstep, no straggler", base, base))
        for name, label in (("lockstep-straggler", "lockstep"), ("staleness4-straggler", "staleness 4"),
                            ("async-straggler", "asynchronous")):
            print(row(f"{skew}, {seed}, {label}", load(f"{name}-{tag}"), base))
print("\n## Jitter: every local step x U[1, 2]\n")
print("| seed, policy | wall s | wall / lockstep | averaged-model acc % | node-average acc % | local steps per node | largest staleness | waiting s per rank |")
print("|---|--:|--:|--:|--:|--:|--:|---|")
for seed in ("1", "2"):
    base = load(f"lockstep-jitter-seed{seed}")
    print(row(f"{seed}, lockstep", base, base))
    print(row(f"{seed}, staleness 2", load(f"staleness2-jitter-seed{seed}"), base))
print("\n## Overlap: dense SGP\n")
print("| seed, policy | wall s | train s | ms per round | averaged-model acc % | waiting s per rank |")
print("|---|--:|--:|--:|--:|---|")
for seed in ("1", "2"):
    for name, label in (("sgp-lockstep", "lockstep"), ("sgp-overlap", "overlap")):
        s = load(f"{name}-seed{seed}")
        wait = ", ".join("%.1f" % w for w in s["wait_seconds_per_rank"])
        print(f"| {seed}, {label} | {s['wall_seconds']:.1f} | {s['train_seconds']:.1f} | "
              f"{1000 * s['train_seconds'] / s['rounds']:.1f} | {100 * s['averaged_model_test_accuracy']:.2f} | {wait} |")
PY
