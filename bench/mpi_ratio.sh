#!/usr/bin/env bash
# The MPI round against the in-process round, measured back to back: 16 nodes, d in {1e5, 1e6},
# top-1% and identity. Prints a markdown table of ms per round and ratios, and where the MPI
# round's time went. Usage: bash bench/mpi_ratio.sh [build-dir] [ranks]
set -euo pipefail
build="${1:-build}"
ranks="${2:-4}"
exe="$build/bench/bench_mpi"
flags=""
if mpirun --version 2>&1 | grep -q "Open MPI"; then flags="--allow-run-as-root --oversubscribe"; fi
out="$(mktemp)"
"$exe" inprocess 1 >> "$out"
"$exe" inprocess 2 >> "$out"
# shellcheck disable=SC2086
mpirun $flags -np "$ranks" "$exe" mpi >> "$out"
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
key = lambda r: (r["d"], r["compressor"])
inp1 = {key(r): r for r in rows if r["mode"] == "inprocess" and r["threads"] == 1}
inp2 = {key(r): r for r in rows if r["mode"] == "inprocess" and r["threads"] == 2}
print("| d | compressor | in-process 1 thread ms | in-process 2 threads ms | MPI %d ranks ms | MPI / in-process (1 thread) | MPI / in-process (2 threads) | encode ms | wait ms | receive ms | decode ms |" % next(r["ranks"] for r in rows if r["mode"] == "mpi"))
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    if r["mode"] != "mpi": continue
    a, b = inp1[key(r)], inp2[key(r)]
    print(f"| {r['d']} | {r['compressor']} | {a['ms_per_round']:.2f} | {b['ms_per_round']:.2f} | {r['ms_per_round']:.2f} | "
          f"{r['ms_per_round']/a['ms_per_round']:.2f} | {r['ms_per_round']/b['ms_per_round']:.2f} | {r['encode_ms']:.2f} | "
          f"{r['wait_ms']:.2f} | {r['receive_ms']:.2f} | {r['decode_ms']:.2f} |")
PY
rm -f "$out"
