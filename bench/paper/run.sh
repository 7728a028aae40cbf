#!/usr/bin/env bash
# The papers' comparison on Fashion-MNIST: Sparse-Push / SCSP (Aketi, Singh, Rabaey, arXiv
# 2102.05715) and low-precision decentralized training (Aketi, Kodge, Roy, arXiv 2111.09389).
# Runs sparsepush-train for every algorithm below at skew 0 and 0.8 over the seeds, then
# sparsepush-paper-table writes OUT/table.md (mean ± spread over seeds and the papers' claims
# checked) and OUT/accuracy_vs_mb.png. Run with --help for the options.
set -euo pipefail

# The algorithms: "label|sparsepush-train arguments" (16 nodes, the model, epochs, skew, seed and
# threads are added to each). Everything else is the CLI's default: eta from the compressor
# (0.02 at top-1%, 0.01 at top-0.1%, 1 for identity), the time-varying ring for SGP/SP/SCSP and
# the undirected ring for CHOCO and DeepSqueeze. CHOCO's default consensus step (0.5, the sign
# compressor's) diverges at top-1% (16 nodes, 5 epochs, skew 0 and 0.8: loss 47 at epoch 2), so
# its row sets 0.02, SP's eta at top-1% (stable at both skews). The claims in
# table.md find their rows by these labels: SGP, SP top-1%, SCSP top-1%, SGP range-evonorm,
# 8-bit SGP and 8-bit SP top-1%.
algorithms=(
  "SGP|--algorithm sgp"
  "SP top-1%|--algorithm sp --compressor top-k:0.01"
  "SP top-0.1%+int8|--algorithm sp --compressor top-k:0.001+int8"
  "SCSP top-1%|--algorithm scsp --compressor top-k:0.01 --final-rounds 10"
  "SCSP auto+bf16|--algorithm scsp --compressor top-k:0.01 --final-rounds auto --final-compressor identity+bf16"
  "CHOCO top-1%|--algorithm choco --compressor top-k:0.01 --consensus-step 0.02"
  "DeepSqueeze top-1%|--algorithm deepsqueeze --compressor top-k:0.01"
  "SGP range-evonorm|--algorithm sgp --model cnn_range_evonorm"
  "8-bit SGP|--algorithm sgp --precision int8 --model cnn_range_evonorm"
  "SP top-1% range-evonorm|--algorithm sp --compressor top-k:0.01 --model cnn_range_evonorm"
  "8-bit SP top-1%|--algorithm sp --compressor top-k:0.01 --precision int8 --model cnn_range_evonorm"
)
skews=(0 0.8)
nodes=16

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
bin="$root/build/examples"
out="$root/bench/paper/out"
epochs=5
seeds="1 2"
threads=2
only=""
force=0
eval_samples=0

usage() {
  cat <<EOF
usage: bench/paper/run.sh [options]
Trains ${nodes} nodes (the CNN unless a row names another model) with each algorithm at skew
${skews[*]} over the seeds, then writes OUT/table.md and OUT/accuracy_vs_mb.png.
  --bin DIR       folder holding sparsepush-train and sparsepush-paper-table (default build/examples)
  --out DIR       output folder (default bench/paper/out): per run LABEL_skewS_seedN_eE.json (summary),
                  .csv (log) and .out (its output); runs.tsv, table.md, accuracy_vs_mb.{dat,gp,png}
  --epochs E      epochs per run, a positive number; 0.05 for a smoke run (default ${epochs})
  --seeds "S..."  seeds, non-negative integers (default "${seeds}")
  --threads T     worker threads per run (default ${threads}; results do not depend on it)
  --eval-samples N  test images of every evaluation, periodic and final (default 0: the CLI's
                  2000 periodic and the whole test set at the end); smoke runs use a few hundred
  --only L[,L]    run only these labels (the table still lists every label; missing runs show —)
                  table.md covers every label at this call's --epochs and --seeds
  --force         rerun runs whose summary exists (default: skip them, so a stopped run resumes)
  --help          this text
Labels:
EOF
  for a in "${algorithms[@]}"; do printf '  %-28s %s\n' "${a%%|*}" "${a#*|}"; done
}
die() {
  echo "run.sh: $*" >&2
  echo "run.sh: see bench/paper/run.sh --help" >&2
  exit 2
}

while [ $# -gt 0 ]; do
  case "$1" in
    --help|-h) usage; exit 0 ;;
    --force) force=1; shift ;;
    --bin|--out|--epochs|--seeds|--threads|--only|--eval-samples)
      [ $# -ge 2 ] || die "$1 needs a value"
      case "$1" in
        --bin) bin="$2" ;;
        --out) out="$2" ;;
        --epochs) epochs="$2" ;;
        --seeds) seeds="$2" ;;
        --threads) threads="$2" ;;
        --only) only="$2" ;;
        --eval-samples) eval_samples="$2" ;;
      esac
      shift 2 ;;
    *) die "unknown option '$1'" ;;
  esac
done

[[ "$epochs" =~ ^([0-9]+([.][0-9]*)?|[.][0-9]+)$ ]] && awk -v e="$epochs" 'BEGIN { exit !(e > 0) }' ||
  die "--epochs must be a positive number, got '$epochs'"
[[ "$eval_samples" =~ ^[0-9]+$ ]] && [ "$eval_samples" -le 10000 ] ||
  die "--eval-samples must be an integer from 0 to 10000, got '$eval_samples'"
eval_args=()
[ "$eval_samples" = 0 ] || eval_args=(--eval-samples "$eval_samples" --final-eval-samples "$eval_samples")
[[ "$threads" =~ ^[1-9][0-9]*$ ]] || die "--threads must be a positive integer, got '$threads'"
read -r -a seed_list <<< "$seeds"
[ ${#seed_list[@]} -gt 0 ] || die "--seeds needs at least one seed"
for s in "${seed_list[@]}"; do
  [[ "$s" =~ ^[0-9]+$ ]] || die "--seeds takes non-negative integers, got '$s'"
done
train="$bin/sparsepush-train"
table="$bin/sparsepush-paper-table"
for b in "$train" "$table"; do
  [ -x "$b" ] || die "$b is missing: build it (cmake --build build --target sparsepush-train sparsepush-paper-table) or pass --bin DIR"
done

# The labels to run: all, or those --only names (each must be one of the list).
declare -A selected=()
if [ -n "$only" ]; then
  IFS=',' read -r -a wanted <<< "$only"
  for w in "${wanted[@]}"; do
    w="${w#"${w%%[![:space:]]*}"}"  # "SGP, SP top-1%" works too
    w="${w%"${w##*[![:space:]]}"}"
    found=0
    for a in "${algorithms[@]}"; do [ "${a%%|*}" = "$w" ] && found=1; done
    [ $found = 1 ] || die "--only: no label '$w' (labels: $(for a in "${algorithms[@]}"; do printf '"%s" ' "${a%%|*}"; done))"
    selected["$w"]=1
  done
fi

mkdir -p "$out" || die "cannot create --out $out"
out=$(cd "$out" && pwd)
# A file name from a label: lower case, every run of other characters as one '-'.
slug() { printf '%s' "$1" | tr '[:upper:]' '[:lower:]' | sed -e 's/%/pct/g' -e 's/[^a-z0-9.]\{1,\}/-/g' -e 's/^-//' -e 's/-$//'; }

runs="$out/runs.tsv"
: > "$runs.part"
total=0
for a in "${algorithms[@]}"; do
  label="${a%%|*}"
  for k in "${skews[@]}"; do
    for s in "${seed_list[@]}"; do
      stem="$(slug "$label")_skew${k}_seed${s}_e${epochs}"
      printf '%s\t%s\t%s\t%s\n' "$label" "$k" "$s" "$stem.json" >> "$runs.part"
      if [ -z "$only" ] || [ -n "${selected[$label]:-}" ]; then total=$((total + 1)); fi
    done
  done
done
mv "$runs.part" "$runs"

echo "paper runs: $nodes nodes, $epochs epochs, seeds ${seed_list[*]}, skews ${skews[*]}, --threads $threads, into $out"
start=$SECONDS
done_runs=0
skipped=0
failed=()
for a in "${algorithms[@]}"; do
  label="${a%%|*}"
  read -r -a alg_args <<< "${a#*|}"
  [ -z "$only" ] || [ -n "${selected[$label]:-}" ] || continue
  # the model: the row's own --model, else the CNN
  model_args=(--model cnn)
  for x in "${alg_args[@]}"; do [ "$x" = "--model" ] && model_args=(); done
  for k in "${skews[@]}"; do
    for s in "${seed_list[@]}"; do
      done_runs=$((done_runs + 1))
      stem="$(slug "$label")_skew${k}_seed${s}_e${epochs}"
      what="[$done_runs/$total] $label, skew $k, seed $s"
      if [ -s "$out/$stem.json" ] && [ $force = 0 ]; then
        echo "$what: done before ($stem.json), skipped"
        skipped=$((skipped + 1))
        continue
      fi
      t0=$SECONDS
      printf '%s ... ' "$what"
      # the summary is written under another name and moved when the run succeeds, so a stopped
      # run leaves no summary behind (sparsepush-train writes it only at the end of a run)
      rc=0
      "$train" --nodes "$nodes" "${model_args[@]}" "${alg_args[@]}" --skew "$k" --seed "$s" --epochs "$epochs" \
        --threads "$threads" "${eval_args[@]}" --log "$out/$stem.csv" --summary "$out/$stem.json.part" > "$out/$stem.out" 2>&1 || rc=$?
      if [ $rc = 0 ]; then
        mv "$out/$stem.json.part" "$out/$stem.json"
        echo "$((SECONDS - t0)) s (elapsed $((SECONDS - start)) s)"
      else
        rm -f "$out/$stem.json.part"
        # the last line that says what went wrong (CLI11 ends with "Run with --help ...")
        echo "FAILED with exit code $rc after $((SECONDS - t0)) s: $(grep -v -e '^Run with --help' -e '^[[:space:]]*$' "$out/$stem.out" | tail -n 1)"
        failed+=("$what (see $out/$stem.out)")
      fi
    done
  done
done

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
"$table" "$runs" "$out" \
  --note "Settings: $nodes nodes, $epochs epochs, seeds ${seed_list[*]}, --threads $threads, final evaluation on $([ "$eval_samples" = 0 ] && echo "the whole test set" || echo "$eval_samples test images"); each row's other settings are sparsepush-train's defaults (bench/paper/run.sh lists the arguments)." \
  --note "Machine: $(nproc) cpus, ${cpu:-unknown CPU}; $(date -u '+%Y-%m-%d %H:%M UTC')."
echo
cat "$out/table.md"
echo
echo "paper runs: $((done_runs - skipped)) runs in $((SECONDS - start)) s, $skipped done before; table $out/table.md, plot $out/accuracy_vs_mb.png"
if [ ${#failed[@]} -gt 0 ]; then
  echo "run.sh: ${#failed[@]} runs failed:" >&2
  printf '  %s\n' "${failed[@]}" >&2
  exit 1
fi
