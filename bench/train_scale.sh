#!/usr/bin/env bash
# Time per round and peak memory of sparsepush-train at large node counts (MLP, top-1% SP on the
# exponential graph). Usage: bench/train_scale.sh BUILD_DIR [ROUNDS] [THREADS] [NODES...]
# For each node count (default 256 1024 4096) it runs ROUNDS (default 5) training rounds with one
# evaluation at the end on 100 test images, and prints the training time per round (the
# summary's train_seconds / rounds: gradients, compression, gossip; no loading, no evaluation)
# and the peak resident set (GNU time) beside the state the algorithm cannot do without
# (x, e and momentum: 3 d floats a node).
set -euo pipefail
build="${1:?usage: train_scale.sh BUILD_DIR [ROUNDS] [THREADS] [NODES...]}"
rounds="${2:-5}"
threads="${3:-2}"
shift $(( $# >= 3 ? 3 : $# ))
nodes=("$@")
[ ${#nodes[@]} -gt 0 ] || nodes=(256 1024 4096)
[ -x /usr/bin/time ] || { echo "train_scale.sh needs GNU time (Debian package time)" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "machine: $(nproc) cpus, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), threads $threads"
printf '| nodes | d | rounds | train s | ms per round | ms per node-round | peak RSS MB | floor MB | ratio |\n'
printf '|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n'
for n in "${nodes[@]}"; do
  # rounds = epochs x (60000 / n) / 32 (the CLI's rule), so this many epochs gives `rounds`
  epochs=$(awk -v r="$rounds" -v n="$n" 'BEGIN { printf "%.6f", r * 32 / int(60000 / n) }')
  /usr/bin/time -v "$build/examples/sparsepush-train" --nodes "$n" --model mlp --algorithm sp --schedule exponential \
    --epochs "$epochs" --eval-every 1000000 --eval-samples 100 --final-eval-samples 100 --threads "$threads" \
    --summary "$out/s.json" > "$out/stdout" 2> "$out/time"
  python3 - "$out/s.json" "$out/time" "$n" <<'PY'
import json, re, sys
s = json.load(open(sys.argv[1]))
rss_kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(sys.argv[2]).read()).group(1))
n, d, r, ts = int(sys.argv[3]), s["parameters"], s["rounds"], s["train_seconds"]
floor = 3 * 4 * d * n
print(f"| {n} | {d:,} | {r} | {ts:.2f} | {1000 * ts / r:,.1f} | {1000 * ts / r / n:.3f} | "
      f"{rss_kib * 1024 / 1e6:,.0f} | {floor / 1e6:,.0f} | {rss_kib * 1024 / floor:.2f} |")
PY
done
