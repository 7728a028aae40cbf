#!/usr/bin/env python3
"""torchvision's ResNet-18 (one input channel) trained on Fashion-MNIST by N nodes with
sparsepush.torch.GossipOptimizer: the usual torch loop over a DataLoader, each node's shard from
ShardSampler (sparsepush-train's label-skewed split), BatchNorm's statistics gossiped with the
parameters, and the averaged model evaluated with opt.averaged(). N threads of one process by
default; a node per rank under a launcher:

    python3 examples/python/resnet_fashion_mnist.py --nodes 4 --steps 200
    mpirun -np 4 python3 examples/python/resnet_fashion_mnist.py --steps 200
    torchrun --nproc_per_node 4 --redirects 2 --tee 2 examples/python/resnet_fashion_mnist.py --steps 200

Prints, at the end, node 0's test accuracy on its own model and on the averaged model, and fails
if any node's differs from the averaged model's by more than 0.5 points (SCSP's final rounds and
the gossiped BatchNorm statistics leave every node at the average). Needs Debian's
python3-torchvision and dataset-fashion-mnist. With the defaults (4 threads, 200 steps of batch
32, skew 0.8) it takes about a minute on 2 cores.
"""
import argparse
import concurrent.futures
import os
import threading

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one torch thread per node
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torchvision  # noqa: E402

import sparsepush  # noqa: E402
import sparsepush.torch as spt  # noqa: E402


def resnet18():
    model = torchvision.models.resnet18(num_classes=10)
    model.conv1 = torch.nn.Conv2d(1, 64, kernel_size=7, stride=2, padding=3, bias=False)  # one channel
    return model


def accuracy(model, images, labels):
    model.eval()
    with torch.no_grad():
        right = sum(int((model(x).argmax(1) == y).sum()) for x, y in zip(images.split(500), labels.split(500)))
    model.train()
    return right / len(labels)


def train(node, nodes, a, data, network=None):
    with _seeding:  # the same initial model at every node
        torch.manual_seed(a.seed)
        model = resnet18()
    train_set = torch.utils.data.TensorDataset(data["x"], data["y"])
    sampler = spt.ShardSampler(data["y"], node, nodes, skew=a.skew, seed=a.seed)
    loader = torch.utils.data.DataLoader(train_set, batch_size=a.batch, sampler=sampler, drop_last=True)
    sgd = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, weight_decay=5e-4)
    opt = spt.GossipOptimizer(sgd, network=network, node=node if network is not None else None, model=model,
                              algorithm=a.algorithm, compressor=a.compressor, seed=a.seed)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=a.steps)
    step = 0
    while step < a.steps:
        for images, labels in loader:
            opt.zero_grad()
            F.cross_entropy(model(images), labels).backward()
            opt.step()
            sched.step()
            step += 1
            if step == a.steps:
                break
    opt.finish()
    own = accuracy(model, data["tx"], data["ty"])
    with opt.averaged():
        averaged = accuracy(model, data["tx"], data["ty"])
    if opt.node == 0:
        st = opt.stats()
        print(f"{nodes} nodes, ResNet-18 ({sum(p.numel() for p in model.parameters()):,} parameters), {a.algorithm} "
              f"{a.compressor}, {a.steps} steps of batch {a.batch}, skew {a.skew}: node 0 test accuracy "
              f"{100 * own:.2f}%, averaged model {100 * averaged:.2f}%; node 0 sent {st['bytes_sent'] / 1e6:.1f} MB",
              flush=True)
    if abs(own - averaged) > 0.005:  # SCSP's final rounds and the gossiped BatchNorm statistics promise this
        raise SystemExit(f"node {opt.node}: its model ({100 * own:.2f}%) and the averaged model "
                         f"({100 * averaged:.2f}%) differ by more than 0.5 points after finish()")
    return own, averaged


_seeding = threading.Lock()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=4, help="threads of this process (ignored under a launcher)")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--skew", type=float, default=0.8)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--algorithm", default="scsp")
    ap.add_argument("--compressor", default="top-k:0.01")
    ap.add_argument("--test-images", type=int, default=2000)
    a = ap.parse_args()
    torch.set_num_threads(1)
    fm = sparsepush.load_fashion_mnist()
    data = {"x": torch.from_numpy(fm["train"]["images"]).unsqueeze(1), "y": torch.from_numpy(fm["train"]["labels"]).long(),
            "tx": torch.from_numpy(fm["test"]["images"][:a.test_images]).unsqueeze(1),
            "ty": torch.from_numpy(fm["test"]["labels"][:a.test_images]).long()}
    info = spt.launch_info()
    if info is not None:  # mpirun or torchrun: this process is one node
        train(info["rank"], info["nodes"], a, data)
        return
    net = spt.Loopback(a.nodes)
    with concurrent.futures.ThreadPoolExecutor(a.nodes) as pool:  # a node per thread; a node's error re-raised
        list(pool.map(lambda i: train(i, a.nodes, a, data, net), range(a.nodes)))

if __name__ == "__main__":
    main()
