#!/usr/bin/env python3
"""Time sparsepush.torch.GossipOptimizer under its three launchers on the same work: N threads of
one process over a Loopback, `mpirun -np N` (the library's MPI transport) and `torchrun
--nproc-per-node N` (frames over torch.distributed point-to-point, gloo). The work is
torch_wrapper.py's: the reference CNN, momentum SGD, Sparse-Push top-1% over the time-varying ring,
one torch thread per node, lockstep rounds. Each node takes `--warmup` steps, then times
`--rounds` steps; a launch's images/s is N * rounds * batch over its slowest node's time. The
launchers run alternately, `--repeats` times; the median is reported, with each launch's process
wall time (interpreter start, import, rendezvous included). Every launch must end with the same
bits at every node (sha256 of the flat model) and the same bytes sent: a launch that differs fails
the script.

    PYTHONPATH=build/python /usr/bin/python3 bench/peers/torch_launch.py [--nodes 4] [--rounds 150]
        [--repeats 3] [--mpiexec "mpirun --oversubscribe"] [--json out.json]
"""
import argparse
import hashlib
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # torch_wrapper.py, beside this file: imported where torch is wanted


def worker(out, rounds, warmup, batch, loopback):
    """One launch: this process's node (mpirun, torchrun) or `loopback` nodes as threads."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch
    import torch.nn.functional as F
    import sparsepush.torch as spt
    from torch_wrapper import COMPRESSOR, ETA, LR, MOMENTUM, SCHEDULE, WD, cnn, data, in_threads
    torch.set_num_threads(1)
    torch.manual_seed(0)
    init = torch.nn.utils.parameters_to_vector(cnn().parameters()).detach()

    def node(network, i):
        model = cnn()
        torch.nn.utils.vector_to_parameters(init, model.parameters())
        sgd = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WD)
        opt = spt.GossipOptimizer(sgd, network=network, node=i, algorithm="sp", compressor=COMPRESSOR, eta=ETA,
                                  schedule=SCHEDULE, seed=1, threads=1)
        x_in, y = data(opt.node, batch)
        for t in range(warmup + rounds):
            if t == warmup:
                start = time.perf_counter()
            opt.zero_grad()
            F.cross_entropy(model(x_in), y).backward()
            opt.step()
        seconds = time.perf_counter() - start
        opt.finish()
        flat = torch.nn.utils.parameters_to_vector(model.parameters()).detach().numpy()
        stats = opt.stats()
        with open(os.path.join(out, f"node{opt.node}.json"), "w") as f:
            json.dump({"seconds": seconds, "sha256": hashlib.sha256(flat.tobytes()).hexdigest(),
                       "bytes_sent": stats["bytes_sent"]}, f)

    if loopback:
        net = spt.Loopback(loopback)
        in_threads(loopback, lambda i: node(net, i))
    else:
        node(None, None)


def launch(cmd, out, n):
    os.makedirs(out)
    start = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1200)
    wall = time.perf_counter() - start
    if r.returncode != 0:
        sys.exit(f"torch_launch: {' '.join(map(shlex.quote, cmd))} failed ({r.returncode}):\n{r.stdout}")
    nodes = []
    for i in range(n):
        with open(os.path.join(out, f"node{i}.json")) as f:
            nodes.append(json.load(f))
    return wall, nodes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=150)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    root = ["--allow-run-as-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    ap.add_argument("--mpiexec", default=" ".join(["mpirun", "--oversubscribe"] + root),
                    help="the MPI launcher and its flags, without -np ('' leaves mpirun out)")
    ap.add_argument("--json", help="write the results to this file")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--loopback", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a.worker, a.rounds, a.warmup, a.batch, a.loopback)
    if a.nodes < 2 or a.rounds < 1 or a.warmup < 1 or a.batch < 1 or a.repeats < 1:
        sys.exit("torch_launch: --nodes must be >= 2 and --rounds, --warmup, --batch, --repeats >= 1")
    me = [sys.executable, os.path.abspath(__file__), "--rounds", str(a.rounds), "--warmup", str(a.warmup),
          "--batch", str(a.batch), "--worker"]
    launchers = {"loopback": lambda out: me + [out, "--loopback", str(a.nodes)],
                 "torchrun": lambda out: [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes",
                                          "1", "--nproc_per_node", str(a.nodes), "--redirects", "2", "--tee", "2"]
                 + me[1:] + [out]}  # torchrun runs the script with this interpreter
    if a.mpiexec and shutil.which(shlex.split(a.mpiexec)[0]):
        launchers["mpirun"] = lambda out: shlex.split(a.mpiexec) + ["-np", str(a.nodes)] + me + [out]
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    runs = {k: [] for k in launchers}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.repeats):
            for k, cmd in launchers.items():
                out = os.path.join(tmp, f"{k}{r}")
                runs[k].append(launch(cmd(out), out, a.nodes))
    want = runs["loopback"][0][1]
    for k, rs in runs.items():
        for wall, nodes in rs:
            for i, (got, ref) in enumerate(zip(nodes, want)):
                if (got["sha256"], got["bytes_sent"]) != (ref["sha256"], ref["bytes_sent"]):
                    sys.exit(f"torch_launch: node {i} under {k} ended with other bits or bytes than over the Loopback")
    images = a.nodes * a.rounds * a.batch
    slowest = {k: [max(n["seconds"] for n in nodes) for _, nodes in rs] for k, rs in runs.items()}  # a launch's time
    result = {k: {"images_per_second": statistics.median(images / s for s in slowest[k]),
                  "process_wall_seconds": statistics.median(w for w, _ in rs)} for k, rs in runs.items()}
    from torch_wrapper import machine_line
    machine = machine_line()
    print(f"{machine}\n{a.nodes} nodes, {a.rounds} timed rounds of batch {a.batch}, median of {a.repeats}; "
          "every launch ended with the same bits at every node")
    for k, v in result.items():
        print(f"  {k:9s} {v['images_per_second']:7.0f} images/s ({v['images_per_second'] / result['loopback']['images_per_second']:.2f}x "
              f"the Loopback's), process wall {v['process_wall_seconds']:.1f} s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"context": {"machine": machine, "nodes": a.nodes, "rounds": a.rounds, "warmup": a.warmup,
                                   "batch": a.batch, "repeats": a.repeats, "mpiexec": a.mpiexec},
                       "benchmarks": [{"name": k, **v, "seconds": slowest[k], "process_wall": [w for w, _ in runs[k]]}
                                      for k, v in result.items()],
                       "same_bits": True}, f, indent=1)


if __name__ == "__main__":
    main()
