#!/usr/bin/env python3
"""run.sh's table: one row per run of OUT/runs.txt, from its summary (JSON) and log (CSV).
Usage: table.py OUT HOSTS NODES MODEL EPOCHS"""
import csv
import json
import os
import sys

out, hosts, nodes, model, epochs = sys.argv[1:6]


def targets(skew):
    """The default target (80% at skew 0, 75% otherwise) and a lower one that short runs reach."""
    return (0.80, 0.75) if float(skew) == 0 else (0.75, 0.70)


def fmt(v, spec):
    return "–" if v is None else format(v, spec)


rows = []
failed = []
for line in open(os.path.join(out, "runs.txt")):
    rate, skew, config, policy, host_s, name, *rest = line.split()
    status = rest[0] if rest else "ok"
    if status != "ok":  # the first line of sparsepush-train's own error, else the output's last line
        text = open(os.path.join(out, name + ".out"), errors="replace").read().splitlines()
        why = next((t for t in text if t.startswith("sparsepush-train: rank") or "NaN" in t), text[-1] if text else "?")
        failed.append((rate, skew, config, policy, why.strip()))
        continue
    s = json.load(open(os.path.join(out, name + ".json")))
    log = list(csv.DictReader(open(os.path.join(out, name + ".csv"))))
    goals = targets(skew)
    # every round of the run (SCSP's final rounds included: train_seconds covers them)
    ms_round = 1000 * s["train_seconds"] / max(1, s["rounds"])
    # the first evaluation whose node-mean accuracy is at or above the goal (the averaged model is
    # measured at the end only, unless --eval-average-every asks): its wall time, and the training
    # time alone (its round times the mean round: evaluations and start-up left out)
    first = [next((r for r in log if float(r["avg_test_accuracy"]) >= g), None) for g in goals]
    reached = [None if r is None else float(r["wall_seconds"]) for r in first]
    reached_train = [None if r is None else int(r["round"]) * ms_round / 1000 for r in first]
    rows.append(dict(rate=rate, skew=skew, config=config, policy=policy, goals=goals, reached=reached,
                     reached_train=reached_train, ms=ms_round, acc=s["averaged_model_test_accuracy"],
                     node_acc=s["avg_test_accuracy"], wall=s["wall_seconds"], train=s["train_seconds"],
                     eval=s["eval_seconds"], reduce=s.get("eval_reduce", "ordered"),
                     outside=(s["wall_seconds"] - s["train_seconds"]) / s["train_seconds"],
                     rounds=s["rounds"], final_rounds=s["final_rounds"] if config.startswith("scsp") else 0, mb=s["bytes_per_node"] / 1e6, host=float(host_s),
                     summary=s))

machine = open(os.path.join(out, "machine.txt")).read().strip().lstrip("# ")
# SCSP's final rounds, priced: its training seconds less its training rounds at the SP top-1%
# run's mean round (same rate, skew and policy), when that run is in the table
sp_ms = {(r["rate"], r["skew"], r["policy"]): r["ms"] for r in rows if r["config"] == "sp-top1"}
for r in rows:
    r["final_phase"] = None
    key = (r["rate"], r["skew"], r["policy"])
    if r["final_rounds"] and key in sp_ms:
        r["final_phase"] = r["train"] - (r["rounds"] - r["final_rounds"]) * sp_ms[key] / 1000

reduces = sorted({r["reduce"] for r in rows})
print(f"Testbed: {hosts} hosts (network namespaces, tbf on each uplink), {nodes} nodes, {model}, "
      f"{epochs} epochs, evaluations summed with {'/'.join(reduces)}; {machine}.\n")
print("SCSP final rounds s: SCSP's training seconds less its training rounds at SP top-1%'s mean round.")
print("Time to a target: the wall seconds of the first evaluation at or above it (training seconds alone in "
      "brackets: its round times the mean training round); \"–\": not reached.\n")
print("| uplink | skew | algorithm | policy | ms / training round | s to higher target | s to lower target | "
      "averaged-model acc | node acc | wall s | eval s | outside training / training | SCSP final rounds s | MB sent / node | "
      "mpirun s |")
print("|---|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")


def reach(r, k):
    if r["reached"][k] is None:
        return f"– ({r['goals'][k]:.0%})"
    return f"{r['reached'][k]:.1f} ({r['reached_train'][k]:.1f}) ({r['goals'][k]:.0%})"


for r in rows:
    print(f"| {r['rate']} | {r['skew']} | {r['config']} | {r['policy']} | {r['ms']:.1f} | {reach(r, 0)} | "
          f"{reach(r, 1)} | {r['acc']:.4f} | "
          f"{r['node_acc']:.4f} | {r['wall']:.1f} | {r['eval']:.1f} | {r['outside']:.2f} | {fmt(r['final_phase'], '.2f')} | "
          f"{r['mb']:.2f} | {r['host']:.1f} |")

if failed:
    print("\nRuns that failed:\n")
    for rate, skew, config, policy, why in failed:
        print(f"- {rate}, skew {skew}, {config}, {policy}: `{why}`")

# SGP's time against each other run's, at the same rate, skew and policy
base = {(r["rate"], r["skew"], r["policy"]): r for r in rows if r["config"] == "sgp"}
ratios = [r for r in rows if r["config"] != "sgp" and (r["rate"], r["skew"], r["policy"]) in base]
if ratios:
    print("\n| uplink | skew | policy | algorithm | SGP / it, ms per round | SGP / it, wall s to higher target | "
          "SGP / it, wall s to lower target | SGP / it, training s to lower target |")
    print("|---|--:|---|---|--:|--:|--:|--:|")

    def ratio(b, r, key, k):
        return f"{b[key][k] / r[key][k]:.2f}" if b[key][k] is not None and r[key][k] is not None else "–"

    for r in ratios:
        b = base[(r["rate"], r["skew"], r["policy"])]
        print(f"| {r['rate']} | {r['skew']} | {r['policy']} | {r['config']} | {b['ms'] / r['ms']:.2f} | "
              f"{ratio(b, r, 'reached', 0)} | {ratio(b, r, 'reached', 1)} | {ratio(b, r, 'reached_train', 1)} |")

# --target: what each run's summary says about its target (the run stopped there)
with_target = [r for r in rows if r["summary"].get("target_accuracy") is not None]
if with_target:
    print("\nTo the target (--target-accuracy: node-mean accuracy on the evaluation slice; the run stopped there). "
          "s: wall seconds from the first round to the end of the evaluation that reached it; off-training: "
          "its evaluation seconds over it; start-up and the final evaluation are outside it.\n")
    print("| uplink | skew | algorithm | policy | target | s to target | training s | off-training share | rounds | "
          "MB sent (all nodes) | samples | start-up s | final evaluation s |")
    print("|---|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for r in with_target:
        t = r["summary"]
        if not t.get("target_reached"):
            print(f"| {r['rate']} | {r['skew']} | {r['config']} | {r['policy']} | {t['target_accuracy']:.0%} | not reached "
                  f"(ended at {t['avg_test_accuracy']:.2%}) | | | {t['rounds']} | {t['bytes_sent_total'] / 1e6:.1f} | | "
                  f"{t['startup_seconds']:.1f} | {t['final_eval_seconds']:.1f} |")
            continue
        sec = t["time_to_target_seconds"]
        print(f"| {r['rate']} | {r['skew']} | {r['config']} | {r['policy']} | {t['target_accuracy']:.0%} | {sec:.1f} | "
              f"{t['train_seconds_to_target']:.1f} | {t['eval_seconds_to_target'] / sec:.3f} | {t['rounds_to_target']} | "
              f"{t['bytes_to_target'] / 1e6:.1f} | {t['samples_to_target']} | {t['startup_seconds']:.1f} | "
              f"{t['final_eval_seconds']:.1f} |")
    base_t = {(r["rate"], r["skew"], r["policy"]): r["summary"] for r in with_target
              if r["config"] == "sgp" and r["summary"].get("target_reached")}
    print("\n| uplink | skew | policy | algorithm | SGP's time to target / its |")
    print("|---|--:|---|---|--:|")
    for r in with_target:
        b = base_t.get((r["rate"], r["skew"], r["policy"]))
        if r["config"] == "sgp" or b is None:
            continue
        it = r["summary"]
        ratio = f"{b['time_to_target_seconds'] / it['time_to_target_seconds']:.1f}" if it.get("target_reached") else "–"
        print(f"| {r['rate']} | {r['skew']} | {r['policy']} | {r['config']} | {ratio} |")
