#!/usr/bin/env bash
# The testbed's smoke test: 2 emulated hosts (bench/net/testbed.sh) with 10 Mbit/s uplinks, whose
# measured bandwidth must be 5 to 10.5 Mbit/s; 0.02 epochs of SP (MLP, 4 nodes) over MPI, one
# rank per host, whose summary must equal the in-process run's (every key but the times and
# the transport's); then the testbed comes down and nothing of it may be left: no namespace, no
# /etc/netns entry, no state directory. It runs on a testbed of its own (prefix spci, network
# 10.213.78.0/24) beside any other. Exit 77 (skipped, with the reason) where namespaces or tbf
# cannot be made: not root, no iproute2, or a container that refuses them.
# Usage: testbed_smoke.sh SPARSEPUSH-TRAIN WORK-DIR
set -uo pipefail
train="$1"
work="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
testbed="$here/../../bench/net/testbed.sh"
export SPARSEPUSH_TESTBED_PREFIX=spci SPARSEPUSH_TESTBED_NET=10.213.78
export SPARSEPUSH_TESTBED_STATE="$work/state"
skip() { echo "testbed smoke test skipped: $*"; exit 77; }
fail() { echo "testbed smoke test FAILED: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || skip "not root (network namespaces need it)"
for t in ip tc unshare python3 mpirun; do command -v "$t" >/dev/null || skip "'$t' is missing"; done
rm -rf "$work"
mkdir -p "$work"
trap 'bash "$testbed" down >/dev/null 2>&1' EXIT
bash "$testbed" up 2 > "$work/up.txt" 2>&1 || skip "the testbed could not be made here: $(tail -3 "$work/up.txt")"
bash "$testbed" shape 10mbit > "$work/shape.txt" 2>&1 || skip "tc tbf is refused here: $(tail -3 "$work/shape.txt")"
bash "$testbed" measure > "$work/measure.txt" 2>&1 || fail "measure: $(cat "$work/measure.txt")"
cat "$work/measure.txt"
python3 - "$work/measure.txt" <<'PY' || fail "the shaped uplinks did not measure 5 to 10.5 Mbit/s"
import re, sys
rates = [float(m) for m in re.findall(r": ([0-9.]+) Mbit/s", open(sys.argv[1]).read())]
sys.exit(0 if len(rates) == 2 and all(5 <= r <= 10.5 for r in rates) else 1)
PY
common=(--algorithm sp --compressor top-k:0.01 --model mlp --nodes 4 --epochs 0.02 --eval-samples 100
        --final-eval-samples 200)
timeout 300 bash "$testbed" mpirun -np 2 --map-by node --bind-to none "$train" --transport mpi "${common[@]}" \
  --summary "$work/mpi.json" > "$work/mpi.out" 2>&1 || fail "the MPI run over the testbed: $(tail -20 "$work/mpi.out")"
"$train" "${common[@]}" --summary "$work/inprocess.json" > "$work/inprocess.out" 2>&1 ||
  fail "the in-process run: $(tail -20 "$work/inprocess.out")"
python3 - "$work/mpi.json" "$work/inprocess.json" <<'PY' || fail "the MPI run's summary differs from the in-process run's"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
if a.get("ranks") != 2 or a.get("transport") != "mpi":
    sys.exit(f"the MPI summary says ranks {a.get('ranks')}, transport {a.get('transport')}")
skip = {"wall_seconds", "train_seconds", "eval_seconds", "final_eval_seconds", "startup_seconds", "time_to_target_seconds",
        "train_seconds_to_target", "eval_seconds_to_target", "train_images_per_second", "wait_seconds_per_rank",
        "eval_bytes", "final_eval_bytes",
        "transport", "ranks", "state_bytes_per_node"}  # the MPI buffers count in the state
diff = [k for k in sorted(set(a) | set(b)) if k not in skip and a.get(k) != b.get(k)]
if diff:
    sys.exit("keys that differ: " + ", ".join(f"{k}: {a.get(k)} vs {b.get(k)}" for k in diff))
acc = a["averaged_model_test_accuracy"]
print(f"testbed smoke test: summaries equal, averaged-model accuracy {acc}")
if not 0.2 < acc <= 1:
    sys.exit(f"accuracy {acc} is not above chance")
PY
bash "$testbed" down > /dev/null || fail "down failed"
trap - EXIT
left="$(ip netns list | grep -E '^spci-' || true)"
[ -z "$left" ] || fail "namespaces left behind: $left"
[ ! -e "$SPARSEPUSH_TESTBED_STATE" ] || fail "the state directory $SPARSEPUSH_TESTBED_STATE is left"
ls -d /etc/netns/spci-* >/dev/null 2>&1 && fail "/etc/netns entries left behind"
echo "testbed smoke test: ok (2 hosts at 10 Mbit/s, MPI over them equals in-process, nothing left behind)"
