#!/usr/bin/env bash
# ctest smpi_train_smoke: the SMPI build of sparsepush-train on 4 simulated hosts (bench/net/simulate.sh,
# star profile), a few MLP rounds. Checks that the summary is written and its times are simulated: a
# lockstep round waits for an envelope that crosses two links of 20 ms, so a round takes >= 0.04
# simulated seconds, far more than these rounds take on the host. Also that a second thread is
# refused. Exit 77 (skipped) with the reason where there is no SMPI to run.
# Usage: smoke.sh TRAIN WORK_DIR SIMULATE_SH
set -euo pipefail
train="$1" work="$2" simulate="$3"
if ! command -v smpirun > /dev/null || ! command -v smpicxx > /dev/null; then
  echo "SKIP: smpicxx/smpirun not found (Debian package libsimgrid-dev): no SMPI build to run"
  exit 77
fi
if [ -z "$train" ]; then
  echo "SKIP: this build tree has no SMPI build of sparsepush-train: configure one with -DSPARSEPUSH_SMPI=ON and run"
  echo "      ctest -L smpi there, or give this tree -DSPARSEPUSH_SMPI_TRAIN=<that sparsepush-train>"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

bash "$simulate" --train "$train" --profile star --hosts 4 --latency 20ms --out "$work/star" -- \
  --model mlp --epochs 0.02 --eval-every 4 --eval-samples 100 --final-eval-samples 200
python3 - "$work/star/summary.json" <<'PY' || fail "the summary above is not plausible"
import json, sys
s = json.load(open(sys.argv[1]))
checks = {
    "clock is simulated": s.get("clock") == "simulated (SMPI)",
    "4 ranks": s["ranks"] == 4,
    "accuracy in (0.1, 1]": 0.1 < s["avg_test_accuracy"] <= 1,
    "rounds > 0": s["rounds"] > 0,
    "a round >= 0.04 simulated s (two 20 ms links)": s["train_seconds"] / s["rounds"] >= 0.04,
    "wall >= train + eval": s["wall_seconds"] >= s["train_seconds"] + s["eval_seconds"],
    "host seconds > 0": s["host_seconds"] > 0,
}
for what, ok in checks.items():
    print(("ok   " if ok else "FAIL ") + what)
sys.exit(0 if all(checks.values()) else 1)
PY

# --threads 2 is refused on every rank, exit 2, with the reason
set +e
smpirun -np 2 -platform "$work/star/platform.xml" -hostfile "$work/star/hostfile" --log=root.thres:critical \
  "$train" --transport mpi --nodes 2 --model mlp --threads 2 > "$work/threads.out" 2>&1
rc=$?
set -e
grep -q -- "--threads 2: under SMPI each rank computes on one thread" "$work/threads.out" ||
  { cat "$work/threads.out"; fail "--threads 2 was not refused with its reason"; }
[ $rc -ne 0 ] || fail "--threads 2: smpirun exited 0"
echo "ok   --threads 2 refused (exit $rc)"
