#!/usr/bin/env bash
# Asynchronous rounds measured: 16 nodes on 4 MPI ranks, the CNN on Fashion-MNIST,
# sparsepush-train's default algorithm (SCSP, top-1%), one thread a rank, evaluated once at the end
# (on 2000 test images).
#   straggler: --straggler 12-15:3 (rank 3's four nodes three times slower: one slow machine);
#              lockstep without and with it, staleness 4 and asynchronous (global step budget)
#              with it; skew 0 and 0.8, seeds 1 and 2
#   jitter:    every local step x U[1, 2] (--jitter 2); lockstep against staleness 2
#   overlap:   dense SGP, lockstep against --overlap
#   overlap on a slow link (only when RATE is given, as root): dense SGP on bench/net/testbed.sh's
#              emulated cluster, every uplink shaped to RATE (e.g. 12mbit), where sending a round
#              takes about as long as computing it: 2 hosts, one rank each (a core each on this
#              2-core machine kind), 8 nodes a rank, the directed ring (one frame crosses each
#              uplink every round), Open MPI's TCP eager limit raised to 256 KiB (an 82 KB frame
#              above the default 64 KiB moves only while its sender calls MPI). Compute per round
#              is lockstep's round less its waiting time; communication is the link's time for
#              one frame at the uplink's measured rate (testbed.sh measure). The goal is overlap's
#              round <= 1.15 x their maximum. The testbed is taken down at exit.
# Prints markdown tables (wall and train seconds, accuracies, steps per node, largest staleness,
# waiting time per rank) and keeps every summary under OUT (default bench/async/out).
# Usage: bash bench/async/run.sh [build-dir] [epochs] [out-dir] [RATE]
set -euo pipefail
build="${1:-build}"
epochs="${2:-1}"
out="${3:-bench/async/out}"
rate="${4:-}"
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

if [ -n "$rate" ]; then
  [ "$(id -u)" -eq 0 ] || { echo "run.sh: RATE needs root (the testbed's network namespaces)" >&2; exit 2; }
  testbed="$(cd "$(dirname "${BASH_SOURCE[0]}")/../net" && pwd)/testbed.sh"
  abs_exe="$(realpath "$exe")" abs_out="$(realpath "$out")"
  trap 'bash "$testbed" down >/dev/null 2>&1 || true' EXIT
  bash "$testbed" up 2 > /dev/null
  bash "$testbed" shape "$rate" > /dev/null
  bash "$testbed" measure > "$out/bandwidth-$rate.txt"
  for seed in 1 2; do
    for policy in lockstep overlap; do
      name="sgp-$policy-$rate-seed$seed"
      [ ! -s "$out/$name.json" ] || continue
      more=()
      [ "$policy" = lockstep ] || more=(--overlap)
      bash "$testbed" mpirun -np 2 --map-by node --bind-to none --mca btl_tcp_eager_limit 262144 \
        "$abs_exe" --transport mpi --nodes 16 --schedule directed-ring --model cnn --epochs "$epochs" \
        --threads 1 --eval-every 1000000 --final-eval-samples 2000 --seed "$seed" --algorithm sgp "${more[@]}" --summary "$abs_out/$name.json" > "$out/$name.log" 2>&1 ||
        { echo "run.sh: $name failed, see $out/$name.log" >&2; exit 1; }
    done
  done
  bash "$testbed" down > /dev/null
  trap - EXIT
fi

python3 - "$out" "$rate" <<'PY'
import json, os, sys
out, rate = sys.argv[1], sys.argv[2]
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
if rate:
    import re
    mbits = [float(m) for m in re.findall(r"([0-9.]+) Mbit/s", open(os.path.join(out, f"bandwidth-{rate}.txt")).read())]
    link_rate = sum(mbits) / len(mbits)
    print(f"\n## Overlap on the testbed: dense SGP, 2 hosts, the directed ring, every uplink shaped to {rate} "
          f"(measured {link_rate:.1f} Mbit/s)\n")
    print("| seed | lockstep ms per round | compute ms | lockstep waiting ms | link ms per frame | overlap ms per round | overlap / max(compute, link) | overlap / lockstep |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    for seed in ("1", "2"):
        lock, over = load(f"sgp-lockstep-{rate}-seed{seed}"), load(f"sgp-overlap-{rate}-seed{seed}")
        per_round = lambda s: 1000 * s["train_seconds"] / s["rounds"]
        wait = 1000 * sum(lock["wait_seconds_per_rank"]) / len(lock["wait_seconds_per_rank"]) / lock["rounds"]
        comp = per_round(lock) - wait
        frame = lock["bytes_sent_total"] / lock["messages_sent"]  # SGP: every message is one size
        link = 1000 * frame * 8 / (link_rate * 1e6)
        print(f"| {seed} | {per_round(lock):.1f} | {comp:.1f} | {wait:.1f} | {link:.1f} | {per_round(over):.1f} | "
              f"{per_round(over) / max(comp, link):.2f} | {per_round(over) / per_round(lock):.2f} |")
PY
