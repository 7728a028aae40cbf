#!/usr/bin/env bash
# Peak memory of sparsepush-train against the state the algorithm cannot do without.
# Usage: bench/train_memory.sh BUILD_DIR [NODES] [extra sparsepush-train options]
# Runs NODES (default 1024) MLP nodes for one round of training plus the final evaluation
# (--epochs 0.01) and prints the peak resident set (GNU time's "Maximum resident set size")
# beside the floor: x, e and the momentum buffer of every node, 3 d floats each.
set -euo pipefail
build="${1:?usage: train_memory.sh BUILD_DIR [NODES] [options]}"
nodes="${2:-1024}"
shift $(( $# >= 2 ? 2 : 1 ))
[ -x /usr/bin/time ] || { echo "train_memory.sh needs GNU time (Debian package time)" >&2; exit 2; }
out=$(mktemp -d)
/usr/bin/time -v "$build/examples/sparsepush-train" --nodes "$nodes" --model mlp --epochs 0.01 --eval-samples 200 \
  --summary "$out/summary.json" "$@" > "$out/stdout" 2> "$out/time"
rss_kib=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$out/time")
d=$(sed -n 's/^  "parameters": \([0-9]*\),*/\1/p' "$out/summary.json")
floor=$(( 3 * 4 * d * nodes ))
echo "nodes $nodes, d $d: peak RSS $(( rss_kib * 1024 / 1000000 )) MB; floor 3 d floats per node = $(( floor / 1000000 )) MB;" \
     "ratio $(awk -v a="$rss_kib" -v b="$floor" 'BEGIN { printf "%.2f", a * 1024 / b }')"
rm -rf "$out"
