#!/usr/bin/env python3
"""bench/ratios.py's goal rows against hand-made benchmark results: each goal's value is computed
here from the same numbers (kernel time / (times x baseline time), the counters, the summary) and
the mark must say whether it meets the goal; rows whose benchmarks are missing say n/a."""
import json
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
ratios = os.path.join(here, "..", "bench", "ratios.py")


def bench(name, us, **extra):
    b = {"name": name, "run_name": name, "run_type": "iteration", "real_time": us, "time_unit": "us"}
    b.update(extra)
    return b


data = {"context": {"num_cpus": 2}, "benchmarks": [
    bench("BM_SparsePushRound/1000000/16", 11200.0), bench("BM_DenseScale/1000000", 100.0),   # 7.0: met
    bench("BM_ChocoPushRound/1000000/16", 15680.0),                                             # 1.4: not
    bench("BM_ErrorFeedback/10000000/10000", 5700.0), bench("BM_ErrorFeedbackPass/10000000", 3000.0),  # 1.9: not
    bench("BM_ErrorFeedback/10000000/100000", 6600.0),                                          # 2.2: met
    bench("BM_QSGD/1000000", 210.0), bench("BM_ReadPass/1000000", 50.0),                         # 4.2: not
    bench("BM_TrainStep_cnn/32", 4000.0, items_per_second=8000.0, peak=0.55),                # met
    bench("BM_RoundStreams/1000000/16/2", 14400.0), bench("BM_RoundStreams/1000000/16/1", 8000.0),  # 9.0, 5.0
    bench("BM_ReadPair/10000000", 2100.0),                                                      # 1.7: within 1.8
    bench("BM_ReadPair/100000000", 30000.0), bench("BM_ErrorFeedbackPass/100000000", 25000.0),  # 2.2: beyond
]}
summary = {"train_seconds": 39.0, "wall_seconds": 50.0, "eval_seconds": 4.0}  # met, not (48), met (0.08)
want = {
    "SparsePushRound/1000000/16": ("7", "✓"),
    "ChocoPushRound / SP's round": ("1.4", "✗"),
    "d = 1e7, k = 0.1%": ("1.9", "✗"),
    "d = 1e7, k = 1%": ("2.2", "✓"),
    "d = 1e8, k = 0.1%": ("n/a", "n/a"),
    "QSGD": ("4.2", "✗"),
    "fraction of one core's FMA peak": ("0.55", "✓"),
    "over PyTorch": ("n/a", "n/a"),
    "training seconds": ("39", "✓"),
    "wall seconds": ("50", "✗"),
    "evaluation's share": ("0.08", "✓"),
}
want_bounds = {  # bound rows: value and whether the row's goal is within it
    "RoundStreams/1000000/16/2": ("9", "no"),
    "RoundStreams/1000000/16/1": ("5", "yes"),
    "d = 1e7, goal of k = 0.1%": ("1.7", "yes"),
    "... d = 1e8": ("2.2", "no"),
}
with tempfile.TemporaryDirectory() as tmp:
    bj, sj = os.path.join(tmp, "b.json"), os.path.join(tmp, "s.json")
    json.dump(data, open(bj, "w"))
    json.dump(summary, open(sj, "w"))
    out = subprocess.run([sys.executable, ratios, "--json", bj, "--no-torch", "--train-summary", sj],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
goals = out[out.index("goals of the speed work, measured"):out.index("bounds of the goal rows")].splitlines()
bounds = out[out.index("bounds of the goal rows"):].splitlines()
bad = []
for key, (value, mark) in list(want.items()) + list(want_bounds.items()):
    rows = [r for r in (goals if key in want else bounds) if key in r]
    if len(rows) != 1:
        bad.append(f"{key}: {len(rows)} rows")
        continue
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    if cells[1] != value or cells[3] != mark:
        bad.append(f"{key}: got {cells[1]} {cells[3]}, want {value} {mark}")
if bad:
    print(out)
    print("\n".join(bad))
    sys.exit(1)
print(f"{len(want)} goal rows and {len(want_bounds)} bound rows as expected")
