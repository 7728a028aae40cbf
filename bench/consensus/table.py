#!/usr/bin/env python3
"""The table of bench/consensus/run.sh: per model and skew, each configuration's round, samples
and megabytes when the node-mean accuracy (avg_test_accuracy in the CSV log) first reaches the
target, those as multiples of SGP's, and at the end the node mean, the averaged model's accuracy
and their gap in points. Standard library only."""
import argparse
import csv
import json
import os
import re

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--models", nargs="+", default=["mlp"])
p.add_argument("--target", type=float, default=0.8)
p.add_argument("--machine", default="")
a = p.parse_args()

names = ["sgp", "sp", "scsp", "choco", "choco-push", "choco-push-0.5", "choco-push-int8-0.5", "choco-push-top10-int8",
         "sgp-tracking",
         "choco-push-tracking", "choco-push-top10-int8-tracking", "choco-push-top10-int8-final",
         "sgp-qg", "sp-qg", "choco-push-qg", "choco-push-top10-int8-qg",
         "sgp-staleness2", "choco-push-int8-0.5-overlap", "choco-push-int8-0.5-staleness2",
         "choco-push-int8-0.2-staleness2", "choco-push-top10-int8-overlap", "choco-push-top10-int8-1-staleness2",
         "choco-push-top10-int8-0.5-staleness2"]
print(f"machine: {a.machine}\n")
for model in a.models:
    for skew in ["0", "0.5", "0.8"]:
        rows, base = [], None
        for name in names:
            f = os.path.join(a.out, f"{model}-skew{skew}-{name}")
            if not os.path.exists(f + ".json"):
                if os.path.exists(f + ".out"):  # a run that stopped: say where it diverged
                    why = re.search(r"training diverged at round (\d+)", open(f + ".out").read())
                    if why:
                        rows.append({"name": name, "diverged": int(why.group(1))})
                continue
            s = json.load(open(f + ".json"))
            log = [r for r in csv.DictReader(open(f + ".csv")) if r["phase"] == "train"]
            hit = next((r for r in log if float(r["avg_test_accuracy"]) >= a.target), None)
            per_round = 16 * s["local_steps"] * 32  # samples a round: nodes x local steps x batch
            end_gap = 100 * (s["averaged_model_test_accuracy"] - s["avg_test_accuracy"])
            r = {"name": name, "round": int(hit["round"]) if hit else None,
                 "mb": float(hit["mb_sent"]) if hit else None, "node": s["avg_test_accuracy"],
                 "avg": s["averaged_model_test_accuracy"], "gap": end_gap, "best": max(float(x["avg_test_accuracy"]) for x in log),
                 "gamma": s.get("consensus_step"), "per_round": per_round}
            if name == "sgp":
                base = r
            rows.append(r)
        if not rows:
            continue
        print(f"### {model}, skew {skew}: node-mean accuracy {a.target:.0%}\n")
        print("| run | gamma_c | round | samples | x SGP's samples | MB sent | SGP's MB / MB | node mean at end | averaged model | gap (points) |")
        print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
        for r in rows:
            if "diverged" in r:
                print(f"| {r['name']} |  | diverged at round {r['diverged']} |  |  |  |  |  |  |  |")
                continue
            if r["round"] is None:
                reach = f"not reached (best {r['best']:.1%})"
                cells = [reach, "", "", "", ""]
            else:
                samples = r["round"] * r["per_round"]
                xs = f"{samples / (base['round'] * base['per_round']):.2f}" if base and base["round"] else ""
                bx = f"{base['mb'] / r['mb']:.1f}" if base and base["mb"] and r["mb"] else ""
                cells = [str(r["round"]), f"{samples:,}", xs, f"{r['mb']:.1f}", bx]
            g = "" if r["gamma"] is None else f"{r['gamma']:g}"
            print(f"| {r['name']} | {g} | " + " | ".join(cells) +
                  f" | {r['node']:.2%} | {r['avg']:.2%} | {r['gap']:+.2f} |")
        print()
