#!/usr/bin/env python3
"""Tabulate sparsepush-bench results as ratios of each kernel to its baseline.

Runs the benchmark binary with --benchmark_format=json (or reads a saved JSON file) and prints
a markdown table: each kernel's time beside its baseline's at the same d (and k), with the
ratio kernel / baseline (below 1: the kernel is faster). The gossip kernels are compared with one
dense scale pass over d (DenseScale): PushSumCombine (args d, k per mille, messages) with one pass,
SparsePushGossipRound (args d, nodes) with nodes passes, i.e. its ratio is time / (nodes x
DenseScale): the cost of a Sparse-Push round in units of one pass over every node's model.
Standard library only.

After the tables, the goals of the speed work are printed one row each, with the goal
and a check mark (or n/a where the run lacks the benchmarks a row needs); --train-summary adds the
rows of a sparsepush-train run (the 16-node, exponential, 6-epoch, --threads 1 run: training
seconds, wall seconds and the evaluation's share of the wall time). Then the bounds: kernels that
move only the bytes a goal row's kernel cannot avoid (RoundStreams, ReadPair), as the same ratio,
beside that row's goal.

Usage:
  python3 bench/ratios.py --bench build/bench/sparsepush-bench [--filter REGEX] [--min-time S]
  python3 bench/ratios.py --json results.json [--torch-json torch.json] [--train-summary s.json]
"""

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys

# (kernel, baseline, whether the baseline is matched on k as well as d)
PAIRS = [
    ("TopK", "TopKNthElement", True),
    ("TopK", "TopKPartialSort", True),
    ("TopK", "ReadPass", False),
    ("ErrorFeedback", "ErrorFeedbackPass", False),
    ("ReadPair", "ErrorFeedbackPass", False),
    ("RandomK", "ReadPass", False),
    ("QSGD", "ReadPass", False),
    ("QSGDPhilox10", "ReadPass", False),
    ("Sign", "ReadPass", False),
    ("Threshold", "ReadPass", False),
    ("Encode", "ReadPass", False),
    ("Decode", "ReadPass", False),
    ("PushSumCombine", "DenseScale", False),
    ("SparsePushGossipRound", "DenseScale", False),
    ("SparsePushRound", "DenseScale", False),
    ("ChocoPushRound", "SparsePushRound", True),
    ("RoundStreams", "DenseScale", False),
]

# Baseline multiplier per kernel, from the kernel's args (default 1): a gossip round over `nodes`
# nodes is compared with nodes x DenseScale at the same d.
BASE_TIMES = {"SparsePushGossipRound": lambda a: a[1], "SparsePushRound": lambda a: a[1],
              "RoundStreams": lambda a: a[1]}


def combine_label(a):
    d, pm, msgs = a[0], a[1], a[2]
    what = "dense fp32" if pm >= 1000 else f"k={d * pm // 1000:,} ({pm / 10:g}%)"
    return f"{what} x {msgs} msg"


# How the args after d show in the k column (default: the second arg is k).
ARGS_LABEL = {
    "PushSumCombine": combine_label,
    "SparsePushGossipRound": lambda a: f"{a[1]} nodes, top-k 1%",
    "SparsePushRound": lambda a: f"{a[1]} nodes, top-k 1%, no-op step",
    "RoundStreams": lambda a: f"{a[1]} nodes, {a[2]} pass{'es' if a[2] > 1 else ''} over x, p, e",
}

TO_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--bench", help="path to the sparsepush-bench binary to run")
    src.add_argument("--json", help="read results from this --benchmark_format=json file")
    p.add_argument("--filter", help="passed as --benchmark_filter")
    p.add_argument("--min-time", type=float, help="passed as --benchmark_min_time (seconds)")
    p.add_argument("--save", help="also write the raw JSON to this file (with --bench)")
    p.add_argument("--torch-json", help="read the PyTorch peer's result (torch_cnn.py --json) from this file")
    p.add_argument("--no-torch", action="store_true", help="do not run the PyTorch peer")
    p.add_argument("--train-summary", help="a sparsepush-train --summary JSON file of the goal's run "
                   "(--schedule exponential --epochs 6 --threads 1, the other settings default)")
    return p.parse_args()


# The goals of the speed work: (label, function of the results giving the measured value or
# None, comparison, goal). Ratios are kernel time over baseline time measured in one run.
def _ratio(results, kernel, kargs, base, bargs, times=1):
    a, b = results.get((kernel, kargs)), results.get((base, bargs))
    if a is None or b is None or not b["us"]:
        return None
    return a["us"] / (times * b["us"])


def _counter(results, key, name):
    r = results.get(key)
    return None if r is None else r.get("counters", {}).get(name)


GOALS = [
    ("SparsePushRound/1000000/16 / (16 x DenseScale/1000000)",
     lambda r, a: _ratio(r, "SparsePushRound", (1000000, 16), "DenseScale", (1000000,), 16), "<=", 8.0),
    ("ChocoPushRound / SP's round, d = 1e6, 16 nodes, top-1% (the same compressor)",
     lambda r, a: _ratio(r, "ChocoPushRound", (1000000, 16), "SparsePushRound", (1000000, 16)), "<=", 1.3),
    ("error feedback + top-K / error-feedback pass, d = 1e7, k = 0.1%",
     lambda r, a: _ratio(r, "ErrorFeedback", (10000000, 10000), "ErrorFeedbackPass", (10000000,)), "<=", 1.8),
    ("error feedback + top-K / error-feedback pass, d = 1e7, k = 1%",
     lambda r, a: _ratio(r, "ErrorFeedback", (10000000, 100000), "ErrorFeedbackPass", (10000000,)), "<=", 2.3),
    ("error feedback + top-K / error-feedback pass, d = 1e8, k = 0.1%",
     lambda r, a: _ratio(r, "ErrorFeedback", (100000000, 100000), "ErrorFeedbackPass", (100000000,)), "<=", 1.8),
    ("error feedback + top-K / error-feedback pass, d = 1e8, k = 1%",
     lambda r, a: _ratio(r, "ErrorFeedback", (100000000, 1000000), "ErrorFeedbackPass", (100000000,)), "<=", 2.3),
    ("QSGD / read pass, d = 1e6",
     lambda r, a: _ratio(r, "QSGD", (1000000,), "ReadPass", (1000000,)), "<=", 4.0),
    ("CNN train step, batch 32: fraction of one core's FMA peak",
     lambda r, a: _counter(r, ("TrainStep_cnn", (32,)), "peak"), ">=", 0.5),
    ("CNN train step, batch 32: images/s over PyTorch's (1 thread)",
     lambda r, a: _torch_ratio(r, a), ">=", 3.0),
    ("sparsepush-train 16 nodes, exponential, 6 epochs, --threads 1: training seconds",
     lambda r, a: _summary(a, lambda s: s["train_seconds"]), "<=", 40.0),
    ("... wall seconds", lambda r, a: _summary(a, lambda s: s["wall_seconds"]), "<=", 48.0),
    ("... evaluation's share of the wall time",
     lambda r, a: _summary(a, lambda s: s["eval_seconds"] / s["wall_seconds"]), "<=", 0.10),
]


def _sum_ratio(results, kernels, base):
    """(sum of the kernels' times) / base's time, or None when one is missing."""
    b = results.get(base)
    if b is None or not b["us"] or any(k not in results for k in kernels):
        return None
    return sum(results[k]["us"] for k in kernels) / b["us"]


# What bounds a goal row, measured in the same run: (label, function of the results, the row's
# comparison and goal). A bound on the wrong side of its row's goal says the goal needs what the
# bound's label names to change (the guarantee, the machine), not faster code.
BOUNDS = [
    ("round's streams under the guarantee (plan reads x, p, e; apply reads them, writes x, e): "
     "RoundStreams/1000000/16/2 / (16 x DenseScale/1000000)",
     lambda r: _ratio(r, "RoundStreams", (1000000, 16, 2), "DenseScale", (1000000,), 16), "<=", 8.0),
    ("... the apply's pass alone (no guarantee): RoundStreams/1000000/16/1 / (16 x DenseScale/1000000)",
     lambda r: _ratio(r, "RoundStreams", (1000000, 16, 1), "DenseScale", (1000000,), 16), "<=", 8.0),
    ("error feedback's reads under the guarantee (the scan reads x, e; the write pass reads them again), "
     "d = 1e7, goal of k = 0.1%: (ReadPair + ErrorFeedbackPass) / ErrorFeedbackPass",
     lambda r: _sum_ratio(r, [("ReadPair", (10000000,)), ("ErrorFeedbackPass", (10000000,))],
                          ("ErrorFeedbackPass", (10000000,))), "<=", 1.8),
    ("... d = 1e8",
     lambda r: _sum_ratio(r, [("ReadPair", (100000000,)), ("ErrorFeedbackPass", (100000000,))],
                          ("ErrorFeedbackPass", (100000000,))), "<=", 1.8),
]


def _marked_rows(table, measure_of, yes, no):
    """One markdown row per (label, measure, op, goal) of table: the value measure_of(measure)
    gives (n/a when None), the goal, and `yes` or `no` as the value meets it."""
    rows = []
    for label, measure, op, goal in table:
        value = measure_of(measure)
        if value is None:
            rows.append(f"| {label} | n/a | {op} {goal:g} | n/a |")
            continue
        met = value <= goal if op == "<=" else value >= goal
        rows.append(f"| {label} | {value:.3g} | {op} {goal:g} | {yes if met else no} |")
    return rows


def bound_rows(results):
    """One row per bound: its value, its row's goal, and whether the goal lies within it."""
    return _marked_rows(BOUNDS, lambda measure: measure(results), "yes", "no")


def _torch_ratio(results, args):
    r = results.get(("TrainStep_cnn", (32,)))
    if r is None or not r.get("ips"):
        return None
    peer = torch_result(args, 32)
    return None if peer is None else r["ips"] / peer["images_per_second"]


def _summary(args, f):
    if not args.train_summary:
        return None
    with open(args.train_summary, encoding="utf-8") as fh:
        return f(json.load(fh))


def goal_rows(args, results):
    """One row per goal: what was measured, the goal and whether it is met."""
    return _marked_rows(GOALS, lambda measure: measure(results, args), "✓", "✗")


TORCH_PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers", "torch_cnn.py")


_TORCH_CACHE = {}


def torch_result(args, batch):
    """The PyTorch peer's result at this batch (a dict), or None when torch is not importable;
    run once per batch."""
    if batch not in _TORCH_CACHE:
        _TORCH_CACHE[batch] = _torch_result(args, batch)
    return _TORCH_CACHE[batch]


def _torch_result(args, batch):
    if args.torch_json:
        with open(args.torch_json, encoding="utf-8") as f:
            return json.load(f)
    if args.no_torch or importlib.util.find_spec("torch") is None:
        return None
    cmd = [sys.executable, TORCH_PEER, "--json", "--batch", str(batch), "--threads", "1"]
    print("running: " + " ".join(cmd), file=sys.stderr)
    run = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)
    if run.returncode != 0:
        return None
    return json.loads(run.stdout)


def nn_rows(args, results):
    """Rows of the training backend's table: images/s of ours, of the peer, and the ratio."""
    rows = []
    ips = {key: r["ips"] for key, r in results.items() if r.get("ips")}
    for (name, a), rate in sorted(ips.items()):
        if name == "TrainStep_cnn" and a == (32,):
            peer = torch_result(args, 32)
            if peer is not None:
                what = f"torch {peer.get('torch_version', '?')} ({peer.get('cpu_capability', '?')}), 1 thread"
                rows.append(f"| train step, cnn, batch 32 | {rate:,.0f} | {what} | "
                            f"{peer['images_per_second']:,.0f} | {rate / peer['images_per_second']:.2f} |")
        if name == "Inference_cnn":
            base = [(k, v) for k, v in ips.items() if k[0] == "TrainForward_cnn"]
            for (bname, bargs), brate in base:
                rows.append(f"| inference, cnn, batch {a[0]} | {rate:,.0f} | training forward, batch {bargs[0]} | "
                            f"{brate:,.0f} | {rate / brate:.2f} |")
    return rows


def load(args):
    if args.json:
        with open(args.json, encoding="utf-8") as f:
            return json.load(f)
    cmd = [args.bench, "--benchmark_format=json"]
    if args.filter:
        cmd.append(f"--benchmark_filter={args.filter}")
    if args.min_time is not None:
        cmd.append(f"--benchmark_min_time={args.min_time:g}")
    print("running: " + " ".join(cmd), file=sys.stderr)
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    if args.save:
        with open(args.save, "w", encoding="utf-8") as f:
            f.write(out)
    return json.loads(out)


def collect(data):
    """{(kernel, args tuple): {"us": median real time, "bps": bytes/s, "wire": wire bytes}}."""
    runs = {}
    for b in data.get("benchmarks", []):
        if b.get("run_type") == "aggregate" or b.get("error_occurred"):
            continue
        parts = b["run_name"].split("/") if "run_name" in b else b["name"].split("/")
        kernel = parts[0].removeprefix("BM_")
        key = (kernel, tuple(int(x) for x in parts[1:] if x.isdigit()))
        runs.setdefault(key, []).append(b)
    results = {}
    for key, bs in runs.items():  # several repetitions: take the median
        results[key] = {
            "us": statistics.median(b["real_time"] * TO_US[b.get("time_unit", "ns")] for b in bs),
            "bps": statistics.median(b.get("bytes_per_second", 0.0) for b in bs),
            "wire": bs[-1].get("wire_bytes"),
            "ips": statistics.median(b.get("items_per_second", 0.0) for b in bs),
            "label": bs[-1].get("label", ""),
            "counters": {name: statistics.median(b[name] for b in bs)
                         for name in ("peak", "GFLOP") if all(name in b for b in bs)},
        }
    return results


def fmt_us(us):
    return f"{us:,.1f}" if us < 1e4 else f"{us:,.0f}"


def main():
    args = parse_args()
    data = load(args)
    ctx = data.get("context", {})
    print(
        "machine: num_cpus={} mhz_per_cpu={} library_build_type={} cpu_scaling_enabled={} "
        "host={} date={}".format(
            ctx.get("num_cpus"), ctx.get("mhz_per_cpu"), ctx.get("library_build_type"),
            ctx.get("cpu_scaling_enabled"), ctx.get("host_name"), ctx.get("date")))
    print()

    results = collect(data)
    rows, slower = [], []
    for kernel, base, by_k in PAIRS:
        for (name, kargs), r in sorted(results.items(), key=lambda kv: kv[0][1]):
            if name != kernel:
                continue
            d = kargs[0]
            k = kargs[1] if len(kargs) > 1 else None
            b = results.get((base, kargs if by_k else (d,)))
            if b is None:
                continue
            times = BASE_TIMES.get(kernel, lambda a: 1)(kargs)
            base_us = b["us"] * times
            ratio = r["us"] / base_us
            wire = f"{r['wire']:,.0f}" if r["wire"] is not None else ""
            if kernel in ARGS_LABEL:
                klabel = ARGS_LABEL[kernel](kargs)
            else:
                klabel = "" if k is None else f"{k:,}"
            blabel = base if times == 1 else f"{times} x {base}"
            rows.append(f"| {kernel} | {d:,} | {klabel} | {fmt_us(r['us'])} | "
                        f"{r['bps'] / 1e9:.2f} | {wire} | {blabel} | {fmt_us(base_us)} | {ratio:.2f} |")
            if kernel == "TopK" and by_k and ratio > 1.0:
                slower.append(f"TopK/{d}/{k} is {ratio:.2f}x slower than {base}")

    nn = nn_rows(args, results)
    if not rows and not nn:
        print("no kernel/baseline pairs in the results (check --filter)")
        return 1
    if rows:
        print("| kernel | d | k (or args) | time (us) | GB/s of x | wire bytes | baseline | baseline (us) "
              "| ratio (kernel / baseline) |")
        print("|---|--:|--:|--:|--:|--:|---|--:|--:|")
        print("\n".join(rows))
    if nn:
        label = next((r["label"] for (k, _), r in results.items() if k == "TrainStep_cnn" and r["label"]), "")
        if rows:
            print()
        print(f"training backend (sparsepush products: {label or 'unknown'}), images/s:")
        print("| what | sparsepush | peer | peer images/s | ratio (sparsepush / peer) |")
        print("|---|--:|---|--:|--:|")
        print("\n".join(nn))
    print("\ngoals of the speed work, measured in this run:")
    print("| row | measured | goal | met |")
    print("|---|--:|--:|:-:|")
    print("\n".join(goal_rows(args, results)))
    print("\nbounds of the goal rows, measured in this run (no: the goal lies beyond the bound):")
    print("| bound | measured | its row's goal | goal within the bound |")
    print("|---|--:|--:|:-:|")
    print("\n".join(bound_rows(results)))
    for line in slower:
        print(f"\nWARNING: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
