#!/usr/bin/env bash
# Nodes that agree, measured (docs/results/consensus.md): rounds, samples and bytes until the
# node-mean test accuracy (each node's own de-biased model on its share of the evaluation images,
# --eval-split) first reaches TARGET, and the gap between the averaged model and the node mean at
# the end, for SGP, SP, SCSP, CHOCO (undirected ring) and CHOCO-Push with and without gradient
# tracking, with final rounds (-final), with quasi-global momentum (-qg) and under a waiting policy
# (-overlap, -staleness2: the in-process delay model, up to 2 rounds). 16 nodes in one
# process, seed 3, 3 epochs, an evaluation every 5 rounds (every node's model and the averaged
# model), label skew 0, 0.5 and 0.8; the time-varying ring except for CHOCO.
# Every summary and log is kept under OUT; a run whose summary exists is not run again.
# Usage: bash bench/consensus/run.sh [build-dir] [out-dir] [models] [target]
#   models: mlp (default), or "mlp cnn"
set -euo pipefail
build="${1:-build}"
out="${2:-bench/consensus/out}"
models="${3:-mlp}"
target="${4:-0.8}"
exe="$build/examples/sparsepush-train"
[ -x "$exe" ] || { echo "run.sh: $exe not found (build the project first)" >&2; exit 2; }
mkdir -p "$out"
machine="$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%F)"

# name|options: the configurations compared (top-1% unless the name says otherwise; CHOCO-Push's
# consensus step is its default unless the name gives one)
configs=(
  "sgp|--algorithm sgp"
  "sp|--algorithm sp"
  "scsp|--algorithm scsp"
  "choco|--algorithm choco --consensus-step 0.2"
  "choco-push|--algorithm choco-push"
  "choco-push-0.5|--algorithm choco-push --consensus-step 0.5"
  "choco-push-int8-0.5|--algorithm choco-push --compressor top-k:0.01+int8 --consensus-step 0.5"
  "choco-push-top10-int8|--algorithm choco-push --compressor top-k:0.1+int8"
  "sgp-tracking|--algorithm sgp --tracking"
  "choco-push-tracking|--algorithm choco-push --tracking"
  "choco-push-top10-int8-tracking|--algorithm choco-push --compressor top-k:0.1+int8 --tracking"
  "choco-push-top10-int8-final|--algorithm choco-push --compressor top-k:0.1+int8 --final-rounds auto"
  "sgp-qg|--algorithm sgp --momentum-kind quasi-global"
  # sp-qg and the choco-push -qg runs are refused since --momentum-kind quasi-global is refused for
  # compressing algorithms (docs/results/consensus.md keeps the rows measured before the rule)
  "sp-qg|--algorithm sp --momentum-kind quasi-global"
  "choco-push-qg|--algorithm choco-push --momentum-kind quasi-global"
  "choco-push-top10-int8-qg|--algorithm choco-push --compressor top-k:0.1+int8 --momentum-kind quasi-global"
  "sgp-staleness2|--algorithm sgp --staleness 2"
  "choco-push-int8-0.5-overlap|--algorithm choco-push --compressor top-k:0.01+int8 --consensus-step 0.5 --overlap"
  "choco-push-int8-0.5-staleness2|--algorithm choco-push --compressor top-k:0.01+int8 --consensus-step 0.5 --staleness 2"
  "choco-push-int8-0.2-staleness2|--algorithm choco-push --compressor top-k:0.01+int8 --consensus-step 0.2 --staleness 2"
  "choco-push-top10-int8-overlap|--algorithm choco-push --compressor top-k:0.1+int8 --overlap"
  "choco-push-top10-int8-1-staleness2|--algorithm choco-push --compressor top-k:0.1+int8 --consensus-step 1 --staleness 2"
  "choco-push-top10-int8-0.5-staleness2|--algorithm choco-push --compressor top-k:0.1+int8 --consensus-step 0.5 --staleness 2"
)
for model in $models; do
  for skew in 0 0.5 0.8; do
    for c in "${configs[@]}"; do
      name="${c%%|*}"; opts="${c#*|}"
      f="$out/$model-skew$skew-$name"
      [ -s "$f.json" ] && continue
      # shellcheck disable=SC2086
      "$exe" --model "$model" --nodes 16 --seed 3 --epochs 3 --skew "$skew" --eval-every 5 --eval-split \
        --eval-average-every 5 --threads 2 $opts --log "$f.csv" --summary "$f.json" > "$f.out" 2>&1 ||
        echo "run.sh: $name at skew $skew ($model) failed: see $f.out" >&2
    done
  done
done
python3 "$(dirname "$0")/table.py" --out "$out" --models $models --target "$target" --machine "$machine"
