#!/usr/bin/env python3
"""Time PyTorch training steps of sparsepush's reference "cnn" (the peer of BM_TrainStep_cnn).

The same net as nn::model::make("cnn"): conv3x3 (pad 1) 1 -> 16, GroupNorm(4 groups, eps 1e-5),
ReLU, 2x2 max pool, conv3x3 16 -> 32, GroupNorm(4), ReLU, 2x2 max pool, flatten, dense 1568 -> 10
(20,586 parameters); mean softmax cross-entropy; one SGD step (momentum 0.9, Nesterov, weight
decay 1e-4, as bench_nn.cpp). Batch 32 and one thread by default (torch.set_num_threads(1)), so
the number compares with BM_TrainStep_cnn/32. Data: N(0, 1) images (as bench_nn.cpp) or the
first images of Fashion-MNIST.

PyTorch is optional and never a dependency of sparsepush (Debian: apt-get install python3-torch).
Exit status 2 when it cannot be imported.

Usage:
  python3 bench/peers/torch_cnn.py [--batch 32] [--threads 1] [--steps 300] [--repeats 5]
                                   [--data random|fashion-mnist] [--fashion-mnist DIR] [--json]
"""

import argparse
import gzip
import json
import os
import platform
import statistics
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    p.add_argument("--steps", type=int, default=300, help="training steps per timed repeat")
    p.add_argument("--warmup", type=int, default=30, help="untimed steps first")
    p.add_argument("--repeats", type=int, default=5, help="timed repeats; the median is reported")
    p.add_argument("--data", choices=["random", "fashion-mnist"], default="random")
    p.add_argument("--fashion-mnist", default="/usr/share/datasets/fashion-mnist",
                   help="folder of the IDX files (with --data fashion-mnist)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    return p.parse_args()


def read_idx(path):
    """The payload of a (gzipped) IDX file and its dimensions."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 8:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes")
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return raw[4 + 4 * ndim:], dims


def cpu_capability(torch):
    """The SIMD level ATen dispatches to (torch >= 2.0 names it; 1.13 shows it in its config)."""
    cpu = getattr(torch.backends, "cpu", None)
    if cpu is not None and hasattr(cpu, "get_cpu_capability"):
        return cpu.get_cpu_capability()
    for line in torch.__config__.show().splitlines():
        if "CPU capability usage" in line:
            return line.split(":", 1)[1].strip()
    return "unknown"


def make_net(torch, classes=10):
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.GroupNorm(4, 16, eps=1e-5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.GroupNorm(4, 32, eps=1e-5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, classes))


def main():
    args = parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"torch_cnn.py: PyTorch is not installed ({e})", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass  # already set
    torch.manual_seed(1)
    b = args.batch
    if args.data == "random":
        images = torch.randn(b, 1, 28, 28)
        labels = torch.arange(b) % 10
    else:
        pix, dims = read_idx(os.path.join(args.fashion_mnist, "train-images-idx3-ubyte.gz"))
        lab, _ = read_idx(os.path.join(args.fashion_mnist, "train-labels-idx1-ubyte.gz"))
        images = torch.tensor(list(pix[: b * dims[1] * dims[2]]), dtype=torch.float32).reshape(b, 1, dims[1], dims[2])
        images = images / 255.0
        labels = torch.tensor(list(lab[:b]), dtype=torch.long)
    net = make_net(torch)
    params = sum(p.numel() for p in net.parameters())
    if params != 20586:
        raise SystemExit(f"torch_cnn.py: the net has {params} parameters, sparsepush's cnn has 20586")
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, nesterov=True, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(images), labels)
        loss.backward()
        opt.step()
        return loss

    for _ in range(args.warmup):
        step()
    rates = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        rates.append(args.steps * b / (time.perf_counter() - t0))
    rate = statistics.median(rates)
    result = {
        "name": f"torch_cnn/{b}",
        "images_per_second": rate,
        "images_per_second_all": rates,
        "batch": b,
        "threads": torch.get_num_threads(),
        "parameters": params,
        "data": args.data,
        "torch_version": torch.__version__,
        "mkldnn": bool(torch.backends.mkldnn.is_available()),
        "cpu_capability": cpu_capability(torch),
        "python": platform.python_version(),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"torch {torch.__version__} cnn, batch {b}, {result['threads']} thread(s), {args.data} data: "
              f"{rate:,.0f} images/s (median of {args.repeats} x {args.steps} steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
