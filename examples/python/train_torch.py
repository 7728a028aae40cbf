#!/usr/bin/env python3
"""train_torch.py: decentralized training on Fashion-MNIST with PyTorch as the local backend and the
sparsepush module as the gossip: Sparse-Push (sp), Skew-Compensated Sparse-Push (scsp: sp, then
exact gossip rounds) and SGP (sgp). It is sparsepush-train (examples/train.cpp) with torch's
autograd in place of the reference backend: the same CNN, initial weights and minibatch order (bit
for bit), data partition, optimizer, learning-rate schedule, options, defaults and summary keys.
Only torch's floating-point kernels differ.

All nodes in one process, one Python thread per node driving a PushSumNode on a LoopbackNetwork:
    /usr/bin/python3 examples/python/train_torch.py --algorithm sp --epochs 2 --summary run.json
Over MPI, each rank driving its contiguous block of nodes with a PushSumGroup on an MpiNetwork:
    mpirun -np 4 /usr/bin/python3 examples/python/train_torch.py --transport mpi --summary run.json
Both give the same accuracies for the same settings (torch runs on one thread per node).

Zero-copy: node i's push-sum numerator x_i is a float32 torch tensor that PushSumNode (or
PushSumGroup) updates in place: the C++ round reads and writes that memory. The torch model's
parameters and their .grad are views of two more flat float32 tensors (xh and grad), so
debiased(xh) refreshes the model in place, backward() writes one flat gradient, and the momentum
buffer handed to the round as the direction is one flat tensor. Nothing is copied between torch
and sparsepush.
"""
import os
os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch: one thread per node, reproducible
import argparse, collections, gzip, json, math, sys, threading, time


def find_dependencies():
    """Where `python3` lacks Debian's torch and numpy (a pyenv or virtual environment first on PATH),
    run again under /usr/bin/python3, which has them (python3-torch, python3-numpy); where sparsepush
    is not importable, look in the quick start's build tree (build/python beside examples/)."""
    try:
        import numpy, torch  # noqa: F401
    except ImportError:
        deb = "/usr/bin/python3"
        if os.path.exists(deb) and os.path.realpath(sys.executable) != os.path.realpath(deb):
            os.execv(deb, [deb] + sys.argv)
        raise
    try:
        import sparsepush  # noqa: F401
    except ImportError:
        build = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "python"))
        if not os.path.isdir(build):
            raise
        sys.path.insert(0, build)


find_dependencies()
import numpy as np
import torch
import torch.nn.functional as F
import sparsepush as sp

M64 = (1 << 64) - 1


class Node:
    """One node: its torch model over flat buffers, its optimizer state and its data."""
    def __init__(self, i, x0, args, parts):
        self.id, self.args, self.shard = i, args, Shard(parts[i], (args.seed * 1000003 + i) & M64)
        self.x = x0.clone()                  # the push-sum numerator x_i: the round works in it
        self.xh, self.grad = torch.empty_like(x0), torch.zeros_like(x0)  # x_i / u_i and its gradient
        self.velocity = torch.zeros_like(x0)  # heavy-ball momentum, the direction p_i
        self.direction = torch.zeros_like(x0) if args.nesterov else self.velocity
        self.net = bind(cnn(), self.xh, self.grad)
        self.push = self.debias = self.loss = self.first_loss = None
        self.bytes_trained = 0               # loopback: what it sent in the training rounds
        self.cpu = {"local_step": 0.0, "round": 0.0, "eval": 0.0}  # thread CPU seconds


# ================ the core loop (the README quotes the shorter one of torch_loop.py) ================
def local_step(nd, data):
    """Node nd's direction p_i at its de-biased model; returns the minibatch loss."""
    nd.debias(nd.xh)                                   # xh_i = x_i / u_i: the torch parameters
    idx = nd.shard.next_batch(nd.args.batch)
    nd.grad.zero_()                                    # the parameters' .grad are views of nd.grad
    loss = F.cross_entropy(nd.net(data.train_x[idx]), data.train_y[idx])
    loss.backward()
    nd.grad.add_(nd.xh, alpha=nd.args.weight_decay)    # g + wd xh
    nd.velocity.mul_(nd.args.momentum).add_(nd.grad)   # v = m v + g + wd xh
    if nd.args.nesterov: torch.add(nd.grad, nd.velocity, alpha=nd.args.momentum, out=nd.direction)
    return loss.item()

def node_round(nd, t, lr, ph, sched, endpoint, data):
    """Round t at node nd: x_i -= lr p_i; q = C(x_i + e_i); push q; mix (the GIL released)."""
    if ph.trains: nd.loss = local_step(nd, data)
    nd.push.round(t, sched, ph.compressor, endpoint, eta=ph.eta, gamma=lr,
                  direction=nd.direction if ph.trains else None, feedback=ph.feedback)
# ===============================================================================================


def cnn():
    """The reference backend's "cnn" (nn/model.hpp, 20,586 parameters); parameters() yields them in
    its flat layout: conv [out][in][k][k] then bias, GroupNorm gamma then beta, dense [out][in], bias."""
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.GroupNorm(4, 32), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 7 * 7, 10))

def bind(net, flat, grad):
    """Make net's parameters views of flat and their gradients views of grad (no copy)."""
    at = 0
    for p in net.parameters():
        p.data, p.grad = flat[at:at + p.numel()].view_as(p), grad[at:at + p.numel()].view_as(p)
        at += p.numel()
    return net

def mt19937_64(seed):
    """std::mt19937_64(seed)'s outputs."""
    mt = [seed & M64]
    for i in range(1, 312): mt.append((6364136223846793005 * (mt[-1] ^ (mt[-1] >> 62)) + i) & M64)
    while True:
        for k in range(312):
            y = (mt[k] & 0xFFFFFFFF80000000) | (mt[(k + 1) % 312] & 0x7FFFFFFF)
            mt[k] = mt[(k + 156) % 312] ^ (y >> 1) ^ (0xB5026F5AA96619E9 if y & 1 else 0)
        for y in mt:
            y ^= (y >> 29) & 0x5555555555555555
            y ^= (y << 17) & 0x71D67FFFEDA60000
            y ^= (y << 37) & 0xFFF7EEE000000000
            yield y ^ (y >> 43)

def reference_init(seed):
    """nn::model::init bit for bit: He-normal weights (sd sqrt(2 / fan_in)), drawn layer by layer
    from std::mt19937_64(seed) with Box-Muller; zero biases; GroupNorm gamma 1, beta 0."""
    gen = mt19937_64(seed)
    uniform = lambda: ((next(gen) >> 11) + 0.5) * 2.0 ** -53
    def normals():
        while True:
            r = math.sqrt(-2.0 * math.log(uniform()))
            a = 2.0 * math.pi * uniform()
            yield r * math.cos(a)
            yield r * math.sin(a)
    draw, parts = normals(), []
    for layer in cnn():
        if isinstance(layer, (torch.nn.Conv2d, torch.nn.Linear)):
            w = layer.weight
            sd = math.sqrt(2.0 / (w.numel() // w.shape[0]))
            parts += [np.array([sd * next(draw) for _ in range(w.numel())]), np.zeros(w.shape[0])]
        elif isinstance(layer, torch.nn.GroupNorm):
            parts += [np.ones(layer.num_channels), np.zeros(layer.num_channels)]
    return torch.from_numpy(np.concatenate(parts).astype(np.float32))

def uniform_below(gen, r):
    """libstdc++'s uniform_int_distribution{0, r - 1} over a 64-bit engine (Lemire's method)."""
    prod = next(gen) * r
    if prod & M64 < r:
        while prod & M64 < (-r & M64) % r: prod = next(gen) * r
    return prod >> 64

class Shard:
    """A node's samples in shard_sampler's order: libstdc++'s std::shuffle with std::mt19937_64
    (seed * 1000003 + node) at the start of every epoch; a batch may cross into the next epoch."""
    def __init__(self, samples, seed):
        self.samples, self.gen, self.order, self.at = [int(s) for s in samples], mt19937_64(seed), [], 0

    def reshuffle(self):
        a, i = list(self.samples), 1
        if len(a) % 2 == 0:
            j = uniform_below(self.gen, 2)
            a[1], a[j], i = a[j], a[1], 2
        while i < len(a):  # two swap positions from one draw
            p, q = divmod(uniform_below(self.gen, (i + 1) * (i + 2)), i + 2)
            a[i], a[p] = a[p], a[i]
            a[i + 1], a[q] = a[q], a[i + 1]
            i += 2
        self.order, self.at = a, 0

    def next_batch(self, b):
        out = []
        while len(out) < b:
            if self.at == len(self.order): self.reshuffle()
            take = self.order[self.at:self.at + b - len(out)]
            out, self.at = out + take, self.at + len(take)
        return torch.tensor(out)


class Data:
    """Fashion-MNIST from its four .gz files, pixels scaled to [0, 1] in float32 (as data/idx.hpp)."""
    def __init__(self, d):
        def idx(name, header):
            with gzip.open(os.path.join(d, name), "rb") as f: return np.frombuffer(f.read(), np.uint8, offset=header)
        images = lambda s: torch.from_numpy((idx(f"{s}-images-idx3-ubyte.gz", 16).astype(np.float32)
                                             * np.float32(1 / 255)).reshape(-1, 1, 28, 28))
        self.train_x, self.test_x = images("train"), images("t10k")
        self.train_labels = idx("train-labels-idx1-ubyte.gz", 8)
        self.train_y = torch.from_numpy(self.train_labels.astype(np.int64))
        self.test_y = torch.from_numpy(idx("t10k-labels-idx1-ubyte.gz", 8).astype(np.int64))
        if len(self.train_x) != len(self.train_y) or len(self.test_x) != len(self.test_y):
            raise ValueError(f"{d}: the image and label files disagree in count")

def accuracy(net, data, samples):
    """The share of the first `samples` test images net gets right (argmax: the lowest class on ties)."""
    right = 0
    with torch.inference_mode():  # in chunks of 100 images: twice as fast as 2000 at once (cache)
        for a in range(0, samples, 100):
            b = min(a + 100, samples)
            right += int((net(data.test_x[a:b]).argmax(1) == data.test_y[a:b]).sum())
    return right / samples


Phase = collections.namedtuple("Phase", "compressor eta trains feedback")

def exact(spec):
    """Identity in float32: the phase sends x itself and leaves the residual alone (no feedback)."""
    return spec in ("identity", "identity+fp32")

def default_eta(spec):
    """train/defaults.hpp: the default eta of a compressor."""
    name, _, arg = spec.split("+")[0].partition(":")
    if name in ("identity", "qsgd", "sign"): return {"identity": 1.0, "qsgd": 0.2, "sign": 0.05}[name]
    f = float(arg) if any(c in arg for c in ".eE") else 0.01  # a count k counts as 1%
    return 0.1 if f >= 0.1 else 0.02 if f >= 0.01 else 0.01

def lr_at(a, t, total):
    """nn::lr_schedule: linear warm-up from lr / 10, then step (x0.1 from round(0.75 total)), cosine or constant."""
    if t < a.warmup: return a.lr / 10 + (a.lr - a.lr / 10) * t / a.warmup
    if a.lr_schedule == "step": return a.lr * (0.1 if t >= math.floor(0.75 * total + 0.5) else 1.0)
    if a.lr_schedule == "cosine": return a.lr * 0.5 * (1 + math.cos(math.pi * min(1.0, (t - a.warmup) / max(1, total - a.warmup))))
    return a.lr

def final_rounds_for(sched, first, tolerance, eta, max_rounds=100000, work_limit=2.0 ** 34):
    """algorithm/final_rounds.hpp: the fewest exact rounds from round `first` after which every
    de-biased model is within `tolerance` of its distance to the average (rho, from the product of
    the relaxed W(t)); returns (rounds, rho)."""
    n, work = sched.num_nodes, 0.0
    p = np.eye(n)
    for k in range(1, max_rounds + 1):
        nxt = np.zeros((n, n)) if eta == 1 else (1 - eta) * p
        for j in range(n):
            col = sched.out_edges(first + k - 1, j)
            for to, share in col: nxt[to] += (eta * share) * p[j]
            work += (len(col) + 1) * n
        p, delta = nxt, 0.0
        for row in p:
            mean = np.cumsum(row)[-1] / n
            delta = max(delta, float(np.max(np.abs(row / mean - 1)))) if mean > 0 else 1.0
            if delta >= 1: break
        if delta < 1 and 2 * delta / (1 - delta) <= tolerance: return k, 2 * delta / (1 - delta)
        if work >= work_limit: break
    raise ValueError(f"final rounds: the schedule mixes too slowly to bring the models within {tolerance} of the "
                     "average: give --final-rounds N")


def options(argv):
    def number(lo, hi, lo_open=False, whole=False):
        def check(text):
            try: v = int(text) if whole else float(text)
            except ValueError: raise argparse.ArgumentTypeError(f"{text!r} is not a {'whole ' if whole else ''}number")
            if not (math.isfinite(v) and (v > lo if lo_open else v >= lo) and v <= hi):
                raise argparse.ArgumentTypeError(f"{text} is not {'>' if lo_open else '>='} {lo}" if hi == math.inf else
                                                 f"{text} is outside {'(' if lo_open else '['}{lo}, {hi}]")
            return v
        return check
    inf, u32 = math.inf, 2 ** 32 - 1
    ap = argparse.ArgumentParser(description="Decentralized training on Fashion-MNIST with PyTorch and sparsepush "
                                 "(Sparse-Push, SCSP, SGP), with sparsepush-train's options where they apply.")
    add = ap.add_argument
    add("--nodes", type=number(2, 4096, whole=True), default=16, help="number of nodes, 2 to 4096")
    add("--schedule", default="time-varying-ring", help="communication schedule, as sparsepush-train's")
    add("--algorithm", choices=["sp", "scsp", "sgp"], default="scsp")
    add("--compressor", help="compressor spec (default top-k:0.01)")
    add("--final-rounds", default="auto", help="SCSP: gossip rounds at the end, a count or auto")
    add("--final-compressor", default="identity", help="SCSP: compressor of the final rounds (identity only here)")
    add("--final-eta", type=number(0, 1, lo_open=True), help="SCSP: consensus step of the final rounds")
    add("--final-tolerance", type=number(1e-12, 0.5), default=1e-3, help="SCSP with --final-rounds auto")
    add("--eta", type=number(0, 1, lo_open=True), help="consensus step (default from the compressor)")
    skew = ap.add_mutually_exclusive_group()
    skew.add_argument("--skew", type=number(0, 1), default=0.8, help="label skew in [0, 1]")
    skew.add_argument("--dirichlet", type=number(0, inf, lo_open=True), default=0.0, help="Dirichlet(alpha) partition")
    add("--model", choices=["cnn"], default="cnn")
    add("--epochs", type=number(0, inf, lo_open=True), default=5.0, help="epochs over each node's shard")
    add("--batch", type=number(1, 4096, whole=True), default=32, help="minibatch per node")
    add("--lr", type=number(0, inf, lo_open=True), default=0.02, help="learning rate")
    add("--lr-schedule", choices=["step", "cosine", "constant"], default="step", help="step: x0.1 for the last quarter")
    add("--warmup", type=number(0, u32, whole=True), default=0, help="rounds of linear learning-rate warm-up")
    add("--nesterov", action="store_true")
    add("--momentum", type=number(0, 0.999), default=0.9)
    add("--weight-decay", type=number(0, inf), default=1e-4)
    add("--seed", type=number(0, M64, whole=True), default=1)
    add("--eval-every", type=number(0, u32, whole=True), default=0, help="rounds between evaluations (0: about 10 a run)")
    add("--eval-samples", type=number(1, 10000, whole=True), default=2000, help="test images of periodic evaluations")
    add("--final-eval-samples", type=number(0, 10000, whole=True), default=0, help="test images of the last (0: all)")
    add("--summary", help="JSON summary file")
    add("--data", default="/usr/share/datasets/fashion-mnist")
    add("--transport", choices=["loopback", "mpi"], default="loopback")
    add("--mpi-timeout", type=number(0.001, 2147483), default=60.0)
    a = ap.parse_args(argv)
    given = {s.split("=")[0] for s in argv if s.startswith("--")}
    if a.algorithm == "sgp" and a.compressor is not None:
        ap.error("--compressor: --algorithm sgp sends whole models (the identity compressor); use sp or scsp")
    for o in ("--final-compressor", "--final-eta", "--final-tolerance"):
        if o in given and a.algorithm != "scsp": ap.error(f"{o} sets SCSP's final rounds; --algorithm {a.algorithm} has none")
    if a.algorithm == "scsp" and not exact(a.final_compressor):
        ap.error(f"--final-compressor {a.final_compressor}: only identity here (a compressed final phase starts from "
                 "a fresh residual: PushSumNode.round(fresh_residual=True); not wired into this example)")
    if a.final_rounds != "auto" and not (a.final_rounds.isdigit() and 1 <= int(a.final_rounds) <= u32):
        ap.error(f"--final-rounds must be auto or a count in [1, 4294967295], got {a.final_rounds}")
    if a.final_rounds != "auto" and "--final-tolerance" in given:
        ap.error(f"--final-tolerance sets the target of --final-rounds auto; --final-rounds {a.final_rounds} is the count")
    a.compressor = "identity" if a.algorithm == "sgp" else a.compressor or "top-k:0.01"
    try:
        a.comp, a.sched = sp.parse_compressor(a.compressor), sp.parse_schedule(a.schedule, a.nodes, a.seed)
    except (sp.Error, ValueError) as e:
        ap.error(str(e))
    a.eta = a.eta if a.eta is not None else 1.0 if a.algorithm == "sgp" else default_eta(a.compressor)
    a.final_eta = a.final_eta if a.final_eta is not None else default_eta(a.final_compressor)
    if a.summary and not os.access(os.path.dirname(os.path.abspath(a.summary)), os.W_OK):
        ap.error(f"--summary {a.summary}: its directory is not writable")
    return a, ap


class Plan:
    """What the run is made of (plan_run in train.cpp): the shards, the round counts, the phases;
    and, on rank 0, the last evaluation."""
    def __init__(self, a, data, started):
        n = a.nodes
        self.parts = sp.partition(data.train_labels, n, skew=0.0 if a.dirichlet else a.skew, seed=a.seed, dirichlet=a.dirichlet)
        if any(len(part) == 0 for part in self.parts):
            raise ValueError("a node received no training samples; raise --dirichlet alpha or use fewer nodes")
        self.per_node = len(data.train_labels) // n
        self.train_rounds = max(1, math.floor(a.epochs * self.per_node / a.batch + 0.5))  # std::round
        if self.train_rounds > 2 ** 32 - 1: raise ValueError(f"--epochs {a.epochs} gives more than 4294967295 rounds")
        if a.warmup > self.train_rounds: raise ValueError(f"--warmup {a.warmup} is longer than the {self.train_rounds} training rounds")
        self.final_rounds, self.bound = 0, None
        if a.algorithm == "scsp" and a.final_rounds == "auto":
            self.final_rounds, self.bound = final_rounds_for(a.sched, self.train_rounds, a.final_tolerance, a.final_eta)
        elif a.algorithm == "scsp":
            self.final_rounds = int(a.final_rounds)
        self.rounds = self.train_rounds + self.final_rounds
        self.eval_every = a.eval_every or max(1, self.rounds // 10)
        self.epochs = self.train_rounds * a.batch / self.per_node
        self.feedback = not exact(a.compressor)  # SGP keeps no residual; SCSP's final rounds leave it alone
        self.train = Phase(a.comp, a.eta, True, self.feedback)
        self.final = Phase(sp.parse_compressor("identity"), a.final_eta, False, False)
        self.started, self.eval_seconds, self.last, self.stop, self.bytes_trained = started, 0.0, None, None, None

    def phase(self, t): return self.train if t < self.train_rounds else self.final
    def lr(self, a, t): return lr_at(a, min(t, self.train_rounds - 1), self.train_rounds)
    def evaluates(self, t): return (t + 1) % self.eval_every == 0 or t + 1 == self.rounds


def evaluate_node(nd, data, a, final):
    """Node nd's part of an evaluation: its test accuracy and its de-biased model."""
    c0 = time.thread_time()
    nd.debias(nd.xh)
    nd.result = (accuracy(nd.net, data, (a.final_eval_samples or len(data.test_y)) if final else a.eval_samples),
                 nd.xh.numpy().copy(), nd.loss, nd.first_loss)
    nd.cpu["eval"] += time.thread_time() - c0
    return nd.result

def report(a, p, t, results, bytes_sent, data):
    """Rank 0, with every node's result in node order: evaluate.hpp's metrics (summed in node order,
    so the bits do not depend on the transport), a progress line and the divergence guard."""
    n, final = a.nodes, t + 1 == p.rounds
    accs, xhs, losses, firsts = zip(*results)
    ev = {"avg_test_accuracy": 0.0, "min_node_test_accuracy": min(accs), "max_node_test_accuracy": max(accs)}
    avg, mean = np.zeros_like(xhs[0]), np.zeros(len(xhs[0]))
    for acc, xh in zip(accs, xhs):
        ev["avg_test_accuracy"] += acc / n
        avg += xh / np.float32(n)  # in float32, as the reference
        mean += xh
    mean /= n
    ev["param_divergence"] = sum(float(np.sqrt(np.sum((xh - mean) ** 2))) for xh in xhs) / n
    samples = (a.final_eval_samples or len(data.test_y)) if final else a.eval_samples
    ev["averaged_model_test_accuracy"] = accuracy(bind(cnn(), torch.from_numpy(avg), torch.zeros(len(avg))), data, samples)
    ev["loss"], ev["first_loss"] = sum(l / n for l in losses), sum(l / n for l in firsts)
    p.last, wall = ev, time.perf_counter() - p.started
    print(f"round {t + 1}/{p.rounds}  epoch {min(t + 1, p.train_rounds) * a.batch / p.per_node:.2f}  loss {ev['loss']:.4f}  "
          f"acc {100 * ev['avg_test_accuracy']:.2f}% (avg model {100 * ev['averaged_model_test_accuracy']:.2f}%)  "
          f"div {ev['param_divergence']:.3g}  {bytes_sent / 1e6:.1f} MB  ETA {wall / (t + 1) * (p.rounds - t - 1):.0f}s", flush=True)
    if not math.isfinite(ev["loss"]) or ev["loss"] > 10 * ev["first_loss"] + 10:
        p.stop = f"training diverged at round {t} (mean loss {ev['loss']:g}, started at {ev['first_loss']:g})"
    elif not ev["param_divergence"] <= 1e6:
        p.stop = f"node models drifted apart at round {t} (divergence {ev['param_divergence']:g})"
    if p.stop: p.stop += f": lower --eta (now {a.eta:g}) or --lr (now {a.lr:g})"


class Timed:
    """A PushSumNode whose round() adds its thread CPU seconds to cpu["round"]."""
    def __init__(self, node, cpu): self.node, self.cpu = node, cpu
    def round(self, *args, **kw):
        c0 = time.thread_time()
        self.node.round(*args, **kw)
        self.cpu["round"] += time.thread_time() - c0

def run_loopback(a, p, data, x0):
    """Every node in this process, one Python thread each, in lockstep over a LoopbackNetwork; the
    threads meet at evaluations (two barriers: after the round, after the node accuracies)."""
    n, net, errors, marks = a.nodes, sp.LoopbackNetwork(a.nodes), [], {}
    nodes = [Node(i, x0, a, p.parts) for i in range(n)]
    for nd in nodes:
        node = sp.PushSumNode(nd.x, nd.id, seed=a.seed, feedback=p.feedback)  # zero copy: it works in nd.x
        nd.push, nd.debias = Timed(node, nd.cpu), node.debiased
    def evals_done():
        report(a, p, marks["t"], [nd.result for nd in nodes], net.total_bytes(), data)
        p.eval_seconds += time.perf_counter() - marks["eval"]
    after_rounds = threading.Barrier(n, lambda: marks.update(eval=time.perf_counter()))
    after_evals = threading.Barrier(n, evals_done)

    def worker(nd):
        endpoint = net.endpoint(nd.id)
        try:
            for t in range(p.rounds):
                c0 = time.thread_time()
                node_round(nd, t, p.lr(a, t), p.phase(t), a.sched, endpoint, data)
                nd.first_loss = nd.loss if nd.first_loss is None else nd.first_loss
                nd.cpu["local_step"] += time.thread_time() - c0  # less the round's, below
                if t + 1 == p.train_rounds: nd.bytes_trained = net.bytes_sent(nd.id)  # before its next send
                if p.evaluates(t):
                    marks["t"] = t
                    after_rounds.wait()
                    evaluate_node(nd, data, a, t + 1 == p.rounds)
                    after_evals.wait()
                    if p.stop: return
        except threading.BrokenBarrierError:
            pass
        except BaseException as e:  # the others stop at their next barrier
            errors.append(e)
            after_rounds.abort(), after_evals.abort()

    threads = [threading.Thread(target=worker, args=(nd,), daemon=True) for nd in nodes]
    loop = time.perf_counter()
    for th in threads: th.start()
    for th in threads: th.join()
    if errors: raise errors[0]
    for nd in nodes: nd.cpu["local_step"] -= nd.cpu["round"]
    p.bytes_trained = sum(nd.bytes_trained for nd in nodes)
    return dict(bytes=net.total_bytes(), messages=net.total_messages(), weights=[nd.push.node.weight for nd in nodes],
                train_seconds=time.perf_counter() - loop - p.eval_seconds, ranks=1, cpu=[nd.cpu for nd in nodes])

def run_mpi(a, p, data, x0, comm):
    """This rank's contiguous block of nodes (cut as train.cpp cuts them), driven from this thread by
    one PushSumGroup on an MpiNetwork; rank 0 gathers the evaluations."""
    n, ranks, rank = a.nodes, comm.Get_size(), comm.Get_rank()
    b, e = divmod(n, ranks)
    first, count = rank * b + min(rank, e), b + (rank < e)
    net = sp.MpiNetwork(n, comm=comm, timeout=a.mpi_timeout)
    if (net.first_node, net.local_nodes) != (first, count):
        raise RuntimeError(f"rank {rank}: the network places nodes {net.first_node}+{net.local_nodes}, not {first}+{count}")
    nodes = [Node(i, x0, a, p.parts) for i in range(first, first + count)]
    group = sp.PushSumGroup([nd.x for nd in nodes], first_node=first, total_nodes=n, seed=a.seed, feedback=p.feedback)
    for li, nd in enumerate(nodes): nd.debias = lambda out, li=li: group.debiased(li, out)
    train_seconds = 0.0
    for t in range(p.rounds):
        w0, ph = time.perf_counter(), p.phase(t)
        for nd in nodes if ph.trains else []:
            c0 = time.thread_time()
            nd.loss = local_step(nd, data)
            nd.first_loss = nd.loss if nd.first_loss is None else nd.first_loss
            nd.cpu["local_step"] += time.thread_time() - c0
        c0 = time.thread_time()
        group.round(t, a.sched, ph.compressor, net, eta=ph.eta, gamma=p.lr(a, t), feedback=ph.feedback,
                    directions=[nd.direction for nd in nodes] if ph.trains else None)
        nodes[0].cpu["round"] += time.thread_time() - c0
        train_seconds += time.perf_counter() - w0
        if t + 1 == p.train_rounds: p.bytes_trained = comm.allreduce(net.total_bytes())
        if p.evaluates(t):
            e0 = time.perf_counter()
            results = comm.gather([evaluate_node(nd, data, a, t + 1 == p.rounds) for nd in nodes])
            bytes_sent = comm.allreduce(net.total_bytes())
            if rank == 0: report(a, p, t, [r for block in results for r in block], bytes_sent, data)
            p.stop = comm.bcast(p.stop)
            p.eval_seconds += time.perf_counter() - e0
            if p.stop: break
    flat = lambda blocks: [v for block in blocks for v in block] if rank == 0 else None
    out = dict(bytes=comm.allreduce(net.total_bytes()), messages=comm.allreduce(net.total_messages()),
               weights=flat(comm.gather([group.weight(li) for li in range(count)])), train_seconds=train_seconds,
               ranks=ranks, cpu=flat(comm.gather([nd.cpu for nd in nodes])))
    net.finish()
    return out


# sparsepush-train's summary keys left out, as they have no meaning here: device_profile (the
# reference backend's own FLOP and activation counts), state_bytes_per_node (the module does not
# report a node's buffers), wait_seconds_per_rank (it does not time receiving), drop_probability,
# loss_recovery, messages_dropped, straggler, jitter, max_delay (no loss injection, stragglers or
# delay model here). Added: min_/max_node_test_accuracy, backend, and cpu_seconds: the thread CPU
# seconds of every node, summed (local steps, rounds, evaluations).
def summary(a, p, res):
    n, d, ev, scsp = a.nodes, 20586, p.last, a.algorithm == "scsp"
    return {
        "algorithm": a.algorithm, "nodes": n, "schedule": a.schedule, "compressor": a.compressor, "eta": a.eta,
        "final_rounds": p.final_rounds, "final_rounds_setting": a.final_rounds if scsp else None,
        "final_compressor": a.final_compressor if scsp else None, "final_eta": a.final_eta if scsp else None,
        "final_rounds_bound": p.bound, "bytes_final_phase": res["bytes"] - p.bytes_trained if scsp else None,
        "skew": None if a.dirichlet else a.skew, "dirichlet_alpha": a.dirichlet or None, "model": a.model,
        "precision": "fp32", "bits": 32, "parameters": d, "rounds": p.rounds, "epochs": p.epochs, **ev,
        "bytes_sent_total": res["bytes"], "bytes_per_node": res["bytes"] // n,
        "bytes_full_precision_equivalent": 4 * d * res["messages"],
        "comm_ratio": 4 * d * res["messages"] / res["bytes"] if res["bytes"] else 0.0,
        "messages_sent": res["messages"], "weight_mass": sum(res["weights"]), "transport": a.transport,
        "ranks": res["ranks"], "policy": "lockstep", "max_staleness": 0, "eval_reduce": "ordered",
        "steps_per_node": {"min": p.train_rounds, "max": p.train_rounds, "histogram": [{"steps": p.train_rounds, "nodes": n}]},
        "wall_seconds": time.perf_counter() - p.started, "train_seconds": res["train_seconds"],
        "eval_seconds": p.eval_seconds, "train_images_per_second": p.train_rounds * a.batch * n / res["train_seconds"],
        "backend": f"torch {torch.__version__}, sparsepush {sp.__version__}",
        "cpu_seconds": {k: sum(c[k] for c in res["cpu"]) for k in ("local_step", "round", "eval")},
    }


def main(argv):
    started = time.perf_counter()
    torch.set_num_threads(1)
    if int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))) > 0:
        sys.stderr = open(os.devnull, "w")  # under mpirun a refused option is reported once, by rank 0
    a, ap = options(argv)
    launched = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("PMI_SIZE", "1")))
    if a.transport == "loopback" and launched > 1:
        ap.error(f"started as {launched} MPI processes, but --transport is loopback: each would run the whole job; "
                 "add --transport mpi")
    comm = None
    if a.transport == "mpi":
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        if comm.Get_size() > a.nodes: ap.error(f"--nodes {a.nodes} on {comm.Get_size()} MPI ranks: more ranks than nodes")
    root = comm is None or comm.Get_rank() == 0
    try:
        data = Data(a.data)
        p = Plan(a, data, started)
    except (OSError, ValueError, sp.Error) as e:
        ap.error(str(e))
    if root:
        print(f"train_torch: {a.algorithm} on {a.nodes} nodes, schedule {a.schedule}, compressor {a.compressor}, eta {a.eta:g}, "
              f"{p.rounds} rounds ({p.epochs:.2f} epochs) of batch {a.batch}, {a.transport}"
              + (f"; SCSP's last {p.final_rounds} rounds gossip with {a.final_compressor}, eta {a.final_eta:g}"
                 if a.algorithm == "scsp" else ""), flush=True)
    sys.stderr = sys.__stderr__
    try:
        x0 = reference_init(a.seed)
        res = run_mpi(a, p, data, x0, comm) if comm else run_loopback(a, p, data, x0)
    except Exception as e:
        print(f"train_torch: {e}", file=sys.stderr, flush=True)
        if comm is not None and comm.Get_size() > 1: comm.Abort(2)
        return 2
    if p.stop:
        if root: print(f"train_torch: {p.stop}", file=sys.stderr)
        return 3
    if not root: return 0
    text = json.dumps(summary(a, p, res), indent=2, sort_keys=True)
    print(text)
    if a.summary:
        with open(a.summary, "w") as f: f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
