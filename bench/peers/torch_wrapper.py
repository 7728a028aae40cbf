#!/usr/bin/env python3
"""Time sparsepush.torch.GossipOptimizer's step against a baseline: N nodes on N threads of one
process (one torch thread each), momentum SGD (weight decay 1e-4), Sparse-Push top-1% over the
time-varying ring. Images per second of each, timed alternately (baseline, wrapper, baseline, ...)
in one process; the median of the repeats; the ratio wrapper / baseline. The target: the wrapper
costs at most 5% more (ratio >= 0.95).

--baseline loop (the default): the hand-written loop of examples/python/train_torch.py, a
PushSumNode per thread on a LoopbackNetwork (parameters and gradients views of flat tensors,
momentum by hand), on the reference CNN (20,586 parameters): what the wrapper adds to the gossip.
--baseline bare: the same torch loop with the bare torch.optim.SGD and no gossip at all: what
decentralized training costs a model (--model resnet18: torchvision's ResNet-18, one input
channel, 11.2 M parameters; --model cnn). It prints the state the gossip keeps per node beside
the model (GossipOptimizer.stats()["state_bytes"]); --memory also measures the peak resident
memory of each variant in a process of its own (which the overlap of the threads' backward passes
sets as much as the state does).

    PYTHONPATH=build/python /usr/bin/python3 bench/peers/torch_wrapper.py [--nodes 4] [--rounds 150]
        [--repeats 5] [--model cnn|resnet18] [--baseline loop|bare] [--memory] [--json out.json]
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


def resnet18():
    import torchvision
    model = torchvision.models.resnet18(num_classes=10)
    model.conv1 = torch.nn.Conv2d(1, 64, kernel_size=7, stride=2, padding=3, bias=False)
    return model


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


MODELS = {"cnn": cnn, "resnet18": resnet18}
STATE = {}  # node: the gossip's state beside the model (GossipOptimizer.stats()["state_bytes"])
make = cnn  # main() sets the model


def bare(n, rounds, batch, init):
    """The same torch loop with the bare optimizer: every node trains alone."""
    def node(i):
        model, (x_in, y) = make(), data(i, batch)
        torch.nn.utils.vector_to_parameters(init, model.parameters())
        sgd = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WD)
        for _ in range(rounds):
            sgd.zero_grad()
            F.cross_entropy(model(x_in), y).backward()
            sgd.step()
    return timed_in_threads(n, node)


def loop(n, rounds, batch, init):
    """train_torch.py's loop: PushSumNode.round with the momentum buffer as the direction."""
    sched, comp, net = sp.parse_schedule(SCHEDULE, n), sp.parse_compressor(COMPRESSOR), sp.LoopbackNetwork(n)

    def node(i):
        model, (x_in, y) = make(), data(i, batch)
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
        model, (x_in, y) = make(), data(i, batch)
        torch.nn.utils.vector_to_parameters(init, model.parameters())
        sgd = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WD)
        opt = spt.GossipOptimizer(sgd, network=net, node=i, model=model, algorithm="sp", compressor=COMPRESSOR, eta=ETA,
                                  schedule=SCHEDULE, seed=1, threads=1)
        for _ in range(rounds):
            opt.zero_grad()
            F.cross_entropy(model(x_in), y).backward()
            opt.step()
        STATE[i] = opt.stats()["state_bytes"]
    return timed_in_threads(n, node)


def peak_memory(variant, a):
    """The peak resident memory (ru_maxrss, bytes) of a process that runs `variant` once."""
    import subprocess
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", variant, "--model", a.model, "--baseline", a.baseline, "--nodes",
                          str(a.nodes), "--rounds", str(min(a.rounds, 20)), "--batch", str(a.batch)],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    return int(out.split()[-1])


def main():
    global make
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=150)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--model", choices=sorted(MODELS), default="cnn")
    ap.add_argument("--baseline", choices=["loop", "bare"], default="loop")
    ap.add_argument("--memory", action="store_true", help="also the peak memory of each, in processes of their own")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--json", help="write the results to this file")
    a = ap.parse_args()
    make = MODELS[a.model]
    if a.baseline == "loop" and a.model != "cnn":
        ap.error("--baseline loop is the hand-written loop of the reference CNN: use --model cnn or --baseline bare")
    init = torch.nn.utils.parameters_to_vector(make().parameters()).detach()
    variants = {"loop": loop, "bare": bare, "wrapper": wrapper}
    if a.child:
        import resource
        variants[a.child](a.nodes, a.rounds, a.batch, init)
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
        return
    base = variants[a.baseline]
    images = a.nodes * a.rounds * a.batch
    wrapper(a.nodes, 10, a.batch, init)  # warm-up (first-touch allocations, thread start)
    times = {"baseline": [], "wrapper": []}
    for _ in range(a.repeats):
        times["baseline"].append(base(a.nodes, a.rounds, a.batch, init))
        times["wrapper"].append(wrapper(a.nodes, a.rounds, a.batch, init))
    ips = {k: images / statistics.median(v) for k, v in times.items()}
    ratio = ips["wrapper"] / ips["baseline"]
    machine = machine_line()
    what = {"loop": "hand-written loop", "bare": "bare optimizer"}[a.baseline]
    print(f"{machine}\n{a.model} ({init.numel():,} parameters), {a.nodes} nodes on {a.nodes} threads, {a.rounds} rounds "
          f"of batch {a.batch}, median of {a.repeats}: {what} {ips['baseline']:.0f} images/s, GossipOptimizer "
          f"{ips['wrapper']:.0f} images/s, ratio {ratio:.3f} (goal >= 0.95)")
    model_bytes = 4 * init.numel()
    print(f"the gossip's state per node (stats()['state_bytes']): {STATE[0] / 1e6:.1f} MB, "
          f"{STATE[0] / model_bytes:.2f} times the model's own {model_bytes / 1e6:.1f} MB of parameters")
    memory = None
    if a.memory:
        memory = {v: peak_memory(v, a) for v in (a.baseline, "wrapper")}
        added = (memory["wrapper"] - memory[a.baseline]) / a.nodes
        print(f"peak resident memory: {what} {memory[a.baseline] / 1e6:.0f} MB, GossipOptimizer "
              f"{memory['wrapper'] / 1e6:.0f} MB; the wrapper adds {added / 1e6:.1f} MB per node, "
              f"{added / model_bytes:.2f} times the model's own {model_bytes / 1e6:.1f} MB of parameters")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"context": {"machine": machine, "model": a.model, "parameters": init.numel(), "nodes": a.nodes,
                                   "rounds": a.rounds, "batch": a.batch, "repeats": a.repeats,
                                   "baseline": a.baseline, "compressor": COMPRESSOR, "schedule": SCHEDULE},
                       "benchmarks": [{"name": k, "seconds": v, "images_per_second": ips[k]} for k, v in times.items()],
                       "ratio": ratio, "goal": ">= 0.95", "state_bytes_per_node": STATE[0],
                       "peak_memory_bytes": memory}, f, indent=1)


if __name__ == "__main__":
    main()
