#!/usr/bin/env python3
"""Time sparsepush.torch.GossipOptimizer's step against the hand-written loop of
examples/python/train_torch.py: the same reference CNN (20,586 parameters), batch, momentum SGD
(weight decay 1e-4), Sparse-Push top-1% over the time-varying ring, N nodes on N threads of one
process (one torch thread each). The hand-written loop drives a PushSumNode per thread on a
LoopbackNetwork, its parameters and gradients views of flat tensors, momentum computed by hand;
the wrapper wraps torch.optim.SGD over a Loopback. Images per second of each, timed alternately
(baseline, wrapper, baseline, ...) in one process; the median of the repeats; the ratio
wrapper / baseline. The target: the wrapper costs at most 5% more (ratio >= 0.95).

    PYTHONPATH=build/python /usr/bin/python3 bench/peers/torch_wrapper.py [--nodes 4] [--rounds 150]
        [--repeats 5] [--json out.json]
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import sparsepush as sp  # noqa: E402
import sparsepush.torch as spt  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "python"))
from threads_helper import in_threads  # noqa: E402  (torch_launch.py takes it from here too)

torch.set_num_threads(1)
LR, MOMENTUM, WD, ETA, COMPRESSOR, SCHEDULE = 0.02, 0.9, 1e-4, 0.02, "top-k:0.01", "time-varying-ring"


def cnn():
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.GroupNorm(4, 32), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 7 * 7, 10))


def data(i, batch):
    g = torch.Generator().manual_seed(i)
    return torch.randn(batch, 1, 28, 28, generator=g), torch.randint(0, 10, (batch,), generator=g)


def machine_line():
    """The machine the figures were measured on, as the benchmarks of bench/peers/ print it."""
    return f"{platform.machine()} {os.cpu_count()} cores, {platform.platform()}, torch {torch.__version__}"


def timed_in_threads(n, body):
    """body(i) on thread i for i < n (tests/python/threads_helper.py); the wall seconds."""
    start = time.perf_counter()
    in_threads(n, body)
    return time.perf_counter() - start


def baseline(n, rounds, batch, init):
    """train_torch.py's loop: PushSumNode.round with the momentum buffer as the direction."""
    sched, comp, net = sp.parse_schedule(SCHEDULE, n), sp.parse_compressor(COMPRESSOR), sp.LoopbackNetwork(n)

    def node(i):
        model, (x_in, y) = cnn(), data(i, batch)
        x = init.clone()
        xh, grad, velocity = torch.empty_like(x), torch.zeros_like(x), torch.zeros_like(x)
        at = 0
        for p in model.parameters():
            p.data, p.grad = xh[at:at + p.numel()].view_as(p), grad[at:at + p.numel()].view_as(p)
            at += p.numel()
        push, ep = sp.PushSumNode(x, i, seed=1), net.endpoint(i)
        for t in range(rounds):
            push.debiased(xh)
            grad.zero_()
            F.cross_entropy(model(x_in), y).backward()
            grad.add_(xh, alpha=WD)
            velocity.mul_(MOMENTUM).add_(grad)
            push.round(t, sched, comp, ep, eta=ETA, gamma=LR, direction=velocity)
    return timed_in_threads(n, node)


def wrapper(n, rounds, batch, init):
    """The same with GossipOptimizer(torch.optim.SGD)."""
    net = spt.Loopback(n)

    def node(i):
        model, (x_in, y) = cnn(), data(i, batch)
        torch.nn.utils.vector_to_parameters(init, model.parameters())
        sgd = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WD)
        opt = spt.GossipOptimizer(sgd, network=net, node=i, algorithm="sp", compressor=COMPRESSOR, eta=ETA,
                                  schedule=SCHEDULE, seed=1, threads=1)
        for _ in range(rounds):
            opt.zero_grad()
            F.cross_entropy(model(x_in), y).backward()
            opt.step()
    return timed_in_threads(n, node)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=150)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", help="write the results to this file")
    a = ap.parse_args()
    init = torch.nn.utils.parameters_to_vector(cnn().parameters()).detach()
    images = a.nodes * a.rounds * a.batch
    wrapper(a.nodes, 10, a.batch, init)  # warm-up (first-touch allocations, thread start)
    times = {"baseline": [], "wrapper": []}
    for _ in range(a.repeats):
        times["baseline"].append(baseline(a.nodes, a.rounds, a.batch, init))
        times["wrapper"].append(wrapper(a.nodes, a.rounds, a.batch, init))
    ips = {k: images / statistics.median(v) for k, v in times.items()}
    ratio = ips["wrapper"] / ips["baseline"]
    machine = machine_line()
    print(f"{machine}\n{a.nodes} nodes on {a.nodes} threads, {a.rounds} rounds of batch {a.batch}, median of "
          f"{a.repeats}: hand-written loop {ips['baseline']:.0f} images/s, GossipOptimizer {ips['wrapper']:.0f} images/s, "
          f"ratio {ratio:.3f} (goal >= 0.95)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"context": {"machine": machine, "nodes": a.nodes, "rounds": a.rounds, "batch": a.batch,
                                   "repeats": a.repeats, "compressor": COMPRESSOR, "schedule": SCHEDULE},
                       "benchmarks": [{"name": k, "seconds": v, "images_per_second": ips[k]} for k, v in times.items()],
                       "ratio": ratio, "goal": ">= 0.95"}, f, indent=1)


if __name__ == "__main__":
    main()
