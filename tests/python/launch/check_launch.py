"""The launch tests of sparsepush.torch: the same training (worker.py) as N threads over a
Loopback, under `mpirun -np N` and under `torchrun --nproc_per_node N`; every node's final model
must be the same bits in all of them, and every node's bytes_sent the same; so must every node's
average() (taken before finish()), which must also be the mean of the nodes' models.

    check_launch.py NP [--mpiexec "mpiexec -np-flag-free args..."] [--torchrun PATH]

Configurations: SCSP with top-10% (lockstep; every launcher), SP with --overlap (deferred rounds;
Loopback and mpirun: torchrun runs lockstep rounds only) and CHOCO-Push top-10% with gradient
tracking (lockstep; every launcher).
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile

import numpy as np

import launchers

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "worker.py")
CONFIGS = {
    "scsp": ({"algorithm": "scsp", "compressor": "top-k:0.1", "eta": 0.2, "schedule": "exponential", "seed": 3}, True),
    "overlap": ({"algorithm": "sp", "compressor": "top-k:0.1", "eta": 0.2, "overlap": True}, False),
    # the trackers over a second network: MPI's communicator, the torch frames' calls, the Loopback's companion
    "tracking": ({"algorithm": "choco-push", "compressor": "top-k:0.1", "tracking": True, "seed": 3}, True),
}
STEPS = 25


def run(cmd, what):
    print("$", " ".join(shlex.quote(c) for c in cmd), flush=True)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"{what} failed ({r.returncode}):\n{r.stdout}")


def load(out, n):
    return [(np.load(os.path.join(out, f"node{i}.npy")), json.load(open(os.path.join(out, f"node{i}.json"))),
             np.load(os.path.join(out, f"average{i}.npy"))) for i in range(n)]


def check_average(out, n, what, launched=True):
    """Every node's average() is the same bits, and the mean of the nodes' models (in double, here);
    its bytes: none in one process, else each node's partial sum and the last node's result to
    every other node."""
    before = np.stack([np.load(os.path.join(out, f"before{i}.npy")) for i in range(n)]).astype(np.float64)
    avgs = [np.load(os.path.join(out, f"average{i}.npy")) for i in range(n)]
    for i in range(n):
        sent = json.load(open(os.path.join(out, f"node{i}.json")))["average_bytes"]
        want = 4 * avgs[0].size * ((n - 1) if i == n - 1 else 1) if launched else 0
        if sent != want:
            sys.exit(f"{what}: node {i}'s average() sent {sent} bytes, {want} were due")
    mean = before.mean(0)
    for i, a in enumerate(avgs):
        if a.tobytes() != avgs[0].tobytes():
            sys.exit(f"{what}: node {i}'s average() differs from node 0's")
        if np.abs(a - mean).max() > 1e-6 * max(1.0, np.abs(mean).max()):
            sys.exit(f"{what}: average() is {np.abs(a - mean).max():.3g} from the mean of the nodes' models")


def same(a, b, what_a, what_b):
    for i, ((ma, sa, aa), (mb, sb, ab)) in enumerate(zip(a, b)):
        if aa.tobytes() != ab.tobytes():
            sys.exit(f"node {i}: the averaged model of {what_a} differs from {what_b}'s")
        if ma.tobytes() != mb.tobytes():
            sys.exit(f"node {i}: the model of {what_a} differs from {what_b}'s (largest difference "
                     f"{np.abs(ma - mb).max():.3g})")
        if sa["bytes_sent"] != sb["bytes_sent"] or sa["rounds"] != sb["rounds"]:
            sys.exit(f"node {i}: {what_a} sent {sa['bytes_sent']} bytes in {sa['rounds']} rounds, {what_b} "
                     f"{sb['bytes_sent']} in {sb['rounds']}")


def main():
    a = launchers.arguments(__doc__)
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        for name, (options, lockstep) in CONFIGS.items():
            opts = json.dumps(options)
            ref = os.path.join(tmp, name + "-loopback")
            run([py, WORKER, ref, str(STEPS), opts, "--loopback", str(a.np)], f"{name} over a Loopback")
            want = load(ref, a.np)
            check_average(ref, a.np, f"{name} over a Loopback", launched=False)
            spread = max(np.abs(m - want[0][0]).max() for m, _, _ in want)
            print(f"{name}: {a.np} nodes over a Loopback, largest distance between nodes {spread:.3g}")
            if a.mpiexec:
                out = os.path.join(tmp, name + "-mpi")
                run(launchers.mpirun(a.mpiexec, a.np, py, WORKER, out, str(STEPS), opts), f"{name} under mpirun")
                check_average(out, a.np, f"{name} under mpirun")
                same(load(out, a.np), want, "mpirun", "the Loopback")
                print(f"{name}: mpirun -np {a.np}: the Loopback's bits")
            if a.torchrun and lockstep:
                out = os.path.join(tmp, name + "-torchrun")
                run(launchers.torchrun(a.torchrun, a.np, WORKER, out, str(STEPS), opts), f"{name} under torchrun")
                check_average(out, a.np, f"{name} under torchrun")
                same(load(out, a.np), want, "torchrun", "the Loopback (and mpirun)" if a.mpiexec else "the Loopback")
                print(f"{name}: torchrun --nproc_per_node {a.np}: the Loopback's bits")


if __name__ == "__main__":
    main()
