#!/usr/bin/env python3
"""A torch CNN trained on Fashion-MNIST by N nodes with sparsepush.torch.GossipOptimizer: each node
has its own label-skewed shard, takes torch SGD steps, and gossips with SCSP (top-1%) by default.
The data partition, minibatch order, initial weights and learning-rate schedule are
sparsepush-train's (RunSpec.plan, ShardSampler, init_model, RunSpec.lr), so its accuracy compares
with `sparsepush-train --nodes N --epochs E ...` of the same options.

    python3 examples/python/gossip_fashion_mnist.py --nodes 16 --epochs 5      # 16 threads
    mpirun -np 8 python3 examples/python/gossip_fashion_mnist.py --epochs 1    # a node per rank
    torchrun --nproc_per_node 8 --redirects 2 --tee 2 examples/python/gossip_fashion_mnist.py --epochs 1

(torch 1.13, Debian's, takes --nproc_per_node and needs --redirects 2 --tee 2 under Python 3.11;
torch >= 2 also accepts --nproc-per-node.)
"""
import argparse
import json
import os
import threading

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one torch thread per node
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import sparsepush as sp  # noqa: E402
import sparsepush.torch as spt  # noqa: E402

torch.set_num_threads(1)
default = sp.RunSpec()  # sparsepush-train's defaults
ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
for key, kind in [("nodes", int), ("epochs", float), ("batch", int), ("lr", float), ("skew", float), ("seed", int),
                  ("algorithm", str), ("compressor", str)]:
    ap.add_argument("--" + key, type=kind, default=default[key] if default[key] is not None else None)
ap.add_argument("--summary", help="write the accuracies as JSON to this file")
a = ap.parse_args()
launched = spt.launch_info()  # {"kind", "nodes", "rank"} under mpirun or torchrun, else None
n = launched["nodes"] if launched else a.nodes
spec = sp.RunSpec(nodes=n, epochs=a.epochs, batch=a.batch, lr=a.lr, skew=a.skew, seed=a.seed, algorithm=a.algorithm,
                  compressor=a.compressor)
fm = sp.load_fashion_mnist()
train_x, test_x = (torch.from_numpy(fm[s]["images"]).unsqueeze(1) for s in ("train", "test"))
train_y, test_y = (torch.from_numpy(fm[s]["labels"].astype(np.int64)) for s in ("train", "test"))
plan = spec.plan(fm["train"]["labels"])  # each node's shard (label skew) and the round count
init = torch.from_numpy(sp.init_model("cnn", a.seed))  # the reference CNN's initial weights


def cnn():  # sparsepush-train's "cnn", its parameters in the same flat order
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.GroupNorm(4, 32), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 7 * 7, 10))


def accuracy(model):
    with torch.inference_mode():
        return sum(int((model(test_x[i:i + 100]).argmax(1) == test_y[i:i + 100]).sum())
                   for i in range(0, len(test_y), 100)) / len(test_y)


def node(i=None, network=None):
    model = cnn()
    torch.nn.utils.vector_to_parameters(init, model.parameters())
    sgd = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=spec["momentum"], weight_decay=spec["weight_decay"])
    opt = spt.GossipOptimizer(sgd, network=network, node=i, algorithm=a.algorithm, compressor=a.compressor,
                              seed=a.seed)
    i = opt.node
    shard = sp.ShardSampler(plan.parts[i], sp.shard_seed(a.seed, i))
    for t in range(plan.train_rounds):
        for group in sgd.param_groups:
            group["lr"] = spec.lr(t, plan.train_rounds)
        idx = torch.from_numpy(shard.next_batch(a.batch).astype(np.int64))
        opt.zero_grad()
        F.cross_entropy(model(train_x[idx]), train_y[idx]).backward()
        opt.step()
    opt.finish()  # SCSP's final rounds
    return {"node": i, "accuracy": accuracy(model), **opt.stats()}, model


if launched:  # one node in this process
    result, _ = node()
    print(json.dumps(result))
    results = [result]
else:  # n nodes as threads
    net, out = spt.Loopback(n), [None] * n

    def run(i):
        out[i] = node(i, net)
    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if any(o is None for o in out):
        raise SystemExit("a node failed (its traceback is above)")
    results = [r for r, _ in out]
    averaged = cnn()
    torch.nn.utils.vector_to_parameters(
        sum(torch.nn.utils.parameters_to_vector(m.parameters()) for _, m in out) / n, averaged.parameters())
    mean = sum(r["accuracy"] for r in results) / n
    print(f"{n} nodes, {a.algorithm} {spec.compressor_spec}, {plan.train_rounds} rounds + {results[0]['final_rounds']} final: "
          f"node-average test accuracy {100 * mean:.2f}%, averaged model {100 * accuracy(averaged):.2f}%, "
          f"{sum(r['bytes_sent'] for r in results) / 1e6:.2f} MB sent")
    results = {"avg_test_accuracy": mean, "averaged_model_test_accuracy": accuracy(averaged), "nodes": results}
if a.summary:  # under a launcher each node writes its own: SUMMARY.node<i>
    with open(a.summary + (f".node{results[0]['node']}" if launched else ""), "w") as f:
        json.dump(results, f, indent=1)
