#!/usr/bin/env bash
# The papers' table (bench/paper/): two checks.
#   check_paper.sh table BIN_DIR WORK_DIR   sparsepush-paper-table on hand-made summaries (a missing
#     key, a missing run, a malformed file, a label with no run): its means, spreads and claims
#     against the ones computed here by awk from the same numbers
#   check_paper.sh smoke BIN_DIR WORK_DIR   bench/paper/run.sh briefly (SGP and SP top-1%, skew 0
#     and 0.8, one seed): table.md has both labels' rows with numeric accuracies, and the PNG exists
set -euo pipefail
mode="${1:?usage: check_paper.sh table|smoke BIN_DIR WORK_DIR}"
bin="${2:?usage: check_paper.sh table|smoke BIN_DIR WORK_DIR}"
work="${3:?usage: check_paper.sh table|smoke BIN_DIR WORK_DIR}"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
fail() {
  echo "check_paper.sh $mode: $*" >&2
  [ -f "$work/table.md" ] && { echo "--- table.md:" >&2; cat "$work/table.md" >&2; }
  exit 1
}
# Lines of table.md that must be there, word for word.
expect_line() { grep -qxF -- "$1" "$work/table.md" || fail "table.md lacks the line: $1"; }
expect_text() { grep -qF -- "$1" "$work/table.md" || fail "table.md lacks: $1"; }

if [ "$mode" = smoke ]; then
  rm -rf "$work"
  bash "$root/bench/paper/run.sh" --bin "$bin" --epochs 0.05 --only "SGP,SP top-1%" --seeds 1 --eval-samples 500 \
    --out "$work"
  [ -f "$work/table.md" ] || fail "no table.md"
  num='[0-9]+\.[0-9]{2}'
  for label in "SGP" "SP top-1%"; do
    for skew in 0 0.8; do
      grep -qE "^\| ${label//%/\\%} \| $skew \| 1 \| $num \| $num \| " "$work/table.md" ||
        fail "no row for $label at skew $skew with numeric accuracies"
    done
  done
  expect_text "(a) Compression costs more under skew"
  expect_text "(b) SCSP recovers most of SP's loss at skew 0.8, (SCSP - SP) / (SGP - SP) >= 0.5: — (runs missing)"
  [ -s "$work/accuracy_vs_mb.png" ] || fail "accuracy_vs_mb.png is missing or empty"
  [ "$(head -c 4 "$work/accuracy_vs_mb.png" | tail -c 3)" = PNG ] || fail "accuracy_vs_mb.png is not a PNG"
  echo "paper smoke: ok"
  exit 0
fi
[ "$mode" = table ] || { echo "check_paper.sh: unknown mode $mode" >&2; exit 2; }

rm -rf "$work"
mkdir -p "$work/runs"
# summary FILE ACC MODEL_ACC DIVERGENCE BYTES COMM TRAIN_S ENERGY_COMPUTE ENERGY_COMM FINAL_ROUNDS:
# an empty value leaves its key out
summary() {
  local file=$1 keys=(avg_test_accuracy averaged_model_test_accuracy param_divergence bytes_per_node comm_ratio train_seconds)
  shift
  local body="\"algorithm\": \"x\""
  for k in "${keys[@]}"; do
    [ -z "${1:-}" ] || body+=", \"$k\": $1"
    shift
  done
  [ -z "${3:-}" ] || body+=", \"final_rounds\": $3"
  if [ -n "${1:-}" ] && [ -n "${2:-}" ]; then
    body+=", \"device_profile\": {\"compute_energy_joules_total\": $1, \"communication_energy_joules\": $2}"
  else
    body+=", \"device_profile\": {\"per_device\": {\"batch\": 32}}"
  fi
  printf '{%s}\n' "$body" > "$work/runs/$file"
}
#       file       acc    model  div   bytes     comm  train  energy      final
summary sgp0-1     0.8123 0.8300 0.50  12345678  1.0   30.5   100 20      ""
summary sgp0-2     0.7991 0.8250 0.30  12345678  1.0   29.5   110 30      ""
summary sgp8-1     0.7000 0.7400 0.90  12345678  1.0   31.25  ""  ""      ""
summary sgp8-2     0.7200 0.7500 1.10  12345678  1.0   30.75  ""  ""      ""
summary sp0-1      0.8000 0.8100 2.00  160000    75.5  33     ""  ""      ""
summary sp8-1      0.5500 ""     3.00  160000    75.5  33     ""  ""      ""  # no averaged-model key
summary sp8-2      0.6100 0.6500 5.00  170000    74.5  35     ""  ""      ""
printf '{"avg_test_accuracy": 0.5' > "$work/runs/scsp8-1"  # malformed: counted as missing
summary scsp8-2    0.6900 0.7000 0.01  180000    70    36     ""  ""      4
summary re0-1      0.8500 0.8600 0.10  12345678  1.0   40     ""  ""      ""
summary re8bit0-1  0.8450 0.8500 0.10  12345678  1.0   40     ""  ""      ""
summary sp8bit0-1  0.8200 0.8300 0.10  160000    75.5  40     ""  ""      ""
printf '# label\tskew\tseed\tsummary\n' > "$work/runs/runs.tsv"
for line in "SGP 0 1 sgp0-1" "SGP 0 2 sgp0-2" "SGP 0.8 1 sgp8-1" "SGP 0.8 2 sgp8-2" \
            "SP_top-1% 0 1 sp0-1" "SP_top-1% 0 2 sp0-2-missing" "SP_top-1% 0.8 1 sp8-1" "SP_top-1% 0.8 2 sp8-2" \
            "SCSP_top-1% 0.8 1 scsp8-1" "SCSP_top-1% 0.8 2 scsp8-2" "CHOCO 0 1 none" "CHOCO 0 2 none2" \
            "SGP_range-evonorm 0 1 re0-1" "8-bit_SGP 0 1 re8bit0-1" "8-bit_SP_top-1% 0 1 sp8bit0-1"; do
  read -r label skew seed file <<< "$line"
  printf '%s\t%s\t%s\t%s\n' "${label//_/ }" "$skew" "$seed" "$file" >> "$work/runs/runs.tsv"
done
"$bin/sparsepush-paper-table" "$work/runs/runs.tsv" "$work" --note "test note" > "$work/stdout" 2>&1 ||
  fail "sparsepush-paper-table failed: $(cat "$work/stdout")"

# The cell of one column: mean over the values given ± half their range, each scaled and printed
# in FORMAT; the mean alone for one value, — for none.
cell() {
  local fmt=$1 scale=$2
  shift 2
  [ $# -gt 0 ] || { printf '—'; return; }
  awk -v fmt="$fmt" -v scale="$scale" 'BEGIN {
    n = ARGC - 1; lo = hi = ARGV[1] + 0; sum = 0
    for (i = 1; i <= n; ++i) { v = ARGV[i] + 0; sum += v; if (v < lo) lo = v; if (v > hi) hi = v }
    out = sprintf(fmt, sum / n * scale)
    if (n > 1) out = out " ± " sprintf(fmt, (hi - lo) / 2 * scale)
    printf "%s", out
    exit }' "$@"
}
row() { printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |' "$@"; }
expect_line "$(row SGP 0 2 "$(cell %.2f 100 0.8123 0.7991)" "$(cell %.2f 100 0.8300 0.8250)" "$(cell %.3g 1 0.5 0.3)" \
  "$(cell %.3g 1e-6 12345678 12345678)" "$(cell %.1f 1 1 1)" "$(cell %.1f 1 30.5 29.5)" "$(cell %.3g 1 120 140)" —)"
expect_line "$(row SGP 0.8 2 "$(cell %.2f 100 0.70 0.72)" "$(cell %.2f 100 0.74 0.75)" "$(cell %.3g 1 0.9 1.1)" \
  "$(cell %.3g 1e-6 12345678 12345678)" "$(cell %.1f 1 1 1)" "$(cell %.1f 1 31.25 30.75)" — —)"
expect_line "$(row "SP top-1%" 0 1 "$(cell %.2f 100 0.80)" "$(cell %.2f 100 0.81)" "$(cell %.3g 1 2)" \
  "$(cell %.3g 1e-6 160000)" "$(cell %.1f 1 75.5)" "$(cell %.1f 1 33)" — —)"
expect_line "$(row "SP top-1%" 0.8 2 "$(cell %.2f 100 0.55 0.61)" "$(cell %.2f 100 0.65)" "$(cell %.3g 1 3 5)" \
  "$(cell %.3g 1e-6 160000 170000)" "$(cell %.1f 1 75.5 74.5)" "$(cell %.1f 1 33 35)" — —)"
expect_line "$(row "SCSP top-1%" 0.8 1 "$(cell %.2f 100 0.69)" "$(cell %.2f 100 0.70)" "$(cell %.3g 1 0.01)" \
  "$(cell %.3g 1e-6 180000)" "$(cell %.1f 1 70)" "$(cell %.1f 1 36)" — "$(cell %g 1 4)")"
expect_line "$(row CHOCO 0 0 — — — — — — — —)"
expect_text "test note"
grep -q "does not parse" "$work/stdout" || fail "the malformed summary was not reported: $(cat "$work/stdout")"

# The claims, from the node-average means (percentage points)
claims=$(awk 'BEGIN {
  g0 = (0.8123 + 0.7991) / 2 * 100; s0 = 0.80 * 100; g8 = (0.70 + 0.72) / 2 * 100; s8 = (0.55 + 0.61) / 2 * 100
  c8 = 0.69 * 100; d0 = g0 - s0; d8 = g8 - s8; r = (c8 - s8) / (g8 - s8)
  printf "%.2f\n%.2f\n%s\n%.2f\n%s\n", d8, d0, (d8 > d0 ? "holds" : "does not hold"), r, (r >= 0.5 ? "holds" : "does not hold")
  base = 0.85 * 100; q = 0.845 * 100; qs = 0.82 * 100
  printf "%.2f\n%.2f\n%.2f\n%s\n", q, base, base - q, (base - q < 1 ? "holds" : "does not hold")
  printf "%.2f\n%.2f\n%.2f\n%s\n", qs, base, base - qs, (base - qs <= 2 ? "holds" : "does not hold") }')
mapfile -t c <<< "$claims"
d8=${c[0]} d0=${c[1]} va=${c[2]} r=${c[3]} vb=${c[4]}
expect_text "drop $d8 at skew 0.8 against $d0 at skew 0: **$va**"
expect_text "recovered $r: **$vb**"
expect_text "(8-bit SGP against fp32 SGP range-evonorm): skew 0: ${c[5]} against ${c[6]}, drop ${c[7]}: **${c[8]}**"
expect_text "SGP range-evonorm): skew 0: ${c[9]} against ${c[10]}, drop ${c[11]}: **${c[12]}**"
[ -s "$work/accuracy_vs_mb.png" ] || fail "accuracy_vs_mb.png is missing or empty"
# one point a run read: 4 SGP, 3 SP, 1 SCSP, 3 range-evonorm (no CHOCO, no malformed file)
points=$(grep -cE '^[0-9]' "$work/accuracy_vs_mb.dat")
[ "$points" = 11 ] || fail "accuracy_vs_mb.dat has $points points, expected 11"
echo "paper table: ok"
