"""One run of the launch tests (tests/python/launch/check_launch.py): a small MLP trained on
synthetic non-IID data (node i's inputs shifted by 0.3 i) with GossipOptimizer over the launcher's
network (mpirun, torchrun) or, with --loopback N, N threads over a Loopback; `steps` steps, then
finish(). Writes each node's final flat model to OUT/node<i>.npy and its stats to OUT/node<i>.json,
and, before finish(), its model to OUT/before<i>.npy and the averaged model average() gives it to
OUT/average<i>.npy.

    worker.py OUT STEPS OPTIONS_JSON [--loopback N]
"""
import json
import os
import sys
import threading

os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import sparsepush.torch as spt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/python
from threads_helper import in_threads  # noqa: E402

torch.set_num_threads(1)


_seeding = threading.Lock()  # torch.manual_seed is global: Loopback threads take turns


def train(out, steps, options, network=None, node=None):
    with _seeding:
        torch.manual_seed(0)  # the same initial model at every node
        model = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
    opt = spt.GossipOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), network=network, node=node,
                              **options)
    i = opt.node
    for t in range(steps):
        g = torch.Generator().manual_seed(1000 * i + t)
        x = torch.randn(16, 10, generator=g) + 0.3 * i
        y = (x[:, :5].sum(1) > x[:, 5:].sum(1)).long()
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    before = torch.nn.utils.parameters_to_vector(model.parameters()).detach().numpy().copy()
    avg = opt.average()  # every node's model as it stands, averaged (collective)
    opt.finish()
    flat = torch.nn.utils.parameters_to_vector(model.parameters()).detach().numpy()
    np.save(os.path.join(out, f"node{i}.npy"), flat)
    np.save(os.path.join(out, f"average{i}.npy"), avg.numpy())
    np.save(os.path.join(out, f"before{i}.npy"), before)
    with open(os.path.join(out, f"node{i}.json"), "w") as f:
        json.dump(opt.stats(), f)


def main():
    out, steps, options = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
    os.makedirs(out, exist_ok=True)
    if len(sys.argv) > 4 and sys.argv[4] == "--loopback":
        n = int(sys.argv[5])
        net = spt.Loopback(n, timeout=120)
        in_threads(n, lambda i: train(out, steps, options, net, i))
    else:
        train(out, steps, options)


if __name__ == "__main__":
    main()
