#!/usr/bin/env python3
"""train_torch.py: decentralized training on Fashion-MNIST with PyTorch as the local backend and the
sparsepush module as the gossip: Sparse-Push (sp), Skew-Compensated Sparse-Push (scsp: sp, then
uncompressed gossip rounds) and SGP (sgp). It is sparsepush-train (examples/train.cpp) with torch's
autograd in place of the reference backend: the same CNN, initial weights (bit for bit), data
partition and minibatch order (bit for bit), optimizer, learning-rate schedule, options, defaults
and JSON summary keys. Only torch's floating-point kernels differ.

All nodes in one process, one Python thread per node, each driving a PushSumNode on a
LoopbackNetwork:
    /usr/bin/python3 examples/python/train_torch.py --algorithm sp --nodes 16 --epochs 2 --summary run.json
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
import argparse, gzip, json, math, sys, threading, time
import numpy as np
import torch
import torch.nn.functional as F
import sparsepush as sp

M64 = (1 << 64) - 1


class Node:
    """One node's torch model over flat buffers, its optimizer state and its data."""
    def __init__(self, i, x0, shard, args):
        self.id, self.args, self.shard = i, args, shard
        self.x = x0.clone()                      # the push-sum numerator x_i: PushSumNode works in it
        self.xh, self.grad = torch.empty_like(x0), torch.zeros_like(x0)   # x_i / u_i and its gradient
        self.velocity = torch.zeros_like(x0)     # heavy-ball momentum: the direction p_i
        self.direction = torch.zeros_like(x0) if args.nesterov else self.velocity
        self.net = bind(cnn(), self.xh, self.grad)
        self.debias = self.push = None           # set by the transport
        self.loss = self.first_loss = None
        self.cpu = {"local_step": 0.0, "round": 0.0, "eval": 0.0}


# ============================ the core loop (quoted in the README) ============================
def local_step(nd, data):
    """Node nd's direction p_i at its de-biased model; returns the minibatch loss."""
    nd.debias(nd.xh)                                  # xh_i = x_i / u_i: the torch parameters
    idx = nd.shard.next_batch(nd.args.batch)
    nd.grad.zero_()                                   # the parameters' .grad are views of nd.grad
    loss = F.cross_entropy(nd.net(data.train_x[idx]), data.train_y[idx])
    loss.backward()
    nd.grad.add_(nd.xh, alpha=nd.args.weight_decay)   # g + wd xh
    nd.velocity.mul_(nd.args.momentum).add_(nd.grad)  # v = m v + g + wd xh
    if nd.args.nesterov: torch.add(nd.grad, nd.velocity, alpha=nd.args.momentum, out=nd.direction)
    return loss.item()

def node_round(nd, t, lr, ph, sched, endpoint, data):
    """Round t at node nd (loopback): x_i -= lr p_i; q = C(x_i + e_i); push q; mix (GIL released)."""
    if ph.trains: nd.loss = local_step(nd, data)
    nd.push.round(t, sched, ph.compressor, endpoint, eta=ph.eta, gamma=lr,
                  direction=nd.direction if ph.trains else None, feedback=ph.feedback)
# ===============================================================================================


def cnn():
    """The reference backend's "cnn" (sparsepush/nn/model.hpp), 20,586 parameters; parameters()
    yields them in its flat layout: conv [out][in][k][k] then bias, GroupNorm gamma then beta, dense."""
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.GroupNorm(4, 16), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.GroupNorm(4, 32), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 7 * 7, 10))

def bind(net, flat, grad):
    """Make net's parameters views of flat and their gradients views of grad (in place, no copy)."""
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
    """nn::model::init bit for bit: He-normal weights (sd sqrt(2 / fan_in)) drawn layer by layer from
    std::mt19937_64(seed) with Box-Muller, zero biases, GroupNorm gamma 1 and beta 0."""
    gen = mt19937_64(seed)
    def normals():
        while True:
            u = ((next(gen) >> 11) + 0.5) * 2.0 ** -53
            r, a = math.sqrt(-2.0 * math.log(u)), 2.0 * math.pi * (((next(gen) >> 11) + 0.5) * 2.0 ** -53)
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
    (seed * 1000003 + node) at the start of every epoch, batches crossing epochs."""
    def __init__(self, samples, seed):
        self.samples, self.gen, self.order, self.at = [int(s) for s in samples], mt19937_64(seed), [], 0

    def reshuffle(self):
        a, n, i = list(self.samples), len(self.samples), 1
        if n % 2 == 0:
            j = uniform_below(self.gen, 2)
            a[1], a[j], i = a[j], a[1], 2
        while i < n:  # two swap positions from one draw
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
        return torch.tensor(out, dtype=torch.int64)


class Data:
    """Fashion-MNIST from the four .gz files: pixels scaled to [0, 1] as float32, as idx.hpp."""
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
            raise ValueError(f"{d}: image and label files disagree in count")

def accuracy(net, data, samples):
    """Share of the first `samples` test images net classifies right (argmax: the lowest class on ties)."""
    with torch.no_grad():
        right = sum(int((net(data.test_x[a:min(a + 500, samples)]).argmax(1) == data.test_y[a:min(a + 500, samples)]).sum())
                    for a in range(0, samples, 500))
    return right / samples


class Phase:
    def __init__(self, compressor, eta, trains, feedback):
        self.compressor, self.eta, self.trains, self.feedback = compressor, eta, trains, feedback

def exact(spec):
    """Identity in float32: the phase sends x itself, and the residual is left alone (no feedback)."""
    return spec in ("identity", "identity+fp32")

def default_eta(spec):
    """train/defaults.hpp's default eta of a compressor spec."""
    name, _, arg = spec.split("+")[0].partition(":")
    if name == "identity": return 1.0
    if name == "qsgd": return 0.2
    if name == "sign": return 0.05
    f = float(arg) if any(c in arg for c in ".eE") else 0.01  # a count k: as 1%
    return 0.1 if f >= 0.1 else 0.02 if f >= 0.01 else 0.01

def lr_at(args, t, total):
    """nn::lr_schedule: linear warm-up from lr / 10, then step (x0.1 from round(0.75 total)), cosine or constant."""
    if t < args.warmup: return args.lr / 10 + (args.lr - args.lr / 10) * t / args.warmup
    if args.lr_schedule == "step": return args.lr * (0.1 if t >= math.floor(0.75 * total + 0.5) else 1.0)
    if args.lr_schedule == "cosine":
        return args.lr * 0.5 * (1 + math.cos(math.pi * min(1.0, (t - args.warmup) / max(1, total - args.warmup))))
    return args.lr

def final_rounds_for(sched, first, tolerance, eta, max_rounds=100000, work_limit=2.0 ** 34):
    """algorithm/final_rounds.hpp: the fewest exact rounds from `first` after which every de-biased
    model is within `tolerance` of its distance to the average, from the product of the W(t)."""
    n = sched.num_nodes
    p, work = np.eye(n), 0.0
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
    raise ValueError(f"final rounds: the schedule mixes too slowly to bring the models within {tolerance} "
                     f"of the average: give --final-rounds N")


def options(argv):
    def number(lo, hi, lo_open=False, hi_open=False, whole=False):
        def check(text):
            try: v = int(text) if whole else float(text)
            except ValueError: raise argparse.ArgumentTypeError(f"{text!r} is not a {'whole ' if whole else ''}number")
            if not (math.isfinite(v) and (v > lo if lo_open else v >= lo) and (v < hi if hi_open else v <= hi)):
                raise argparse.ArgumentTypeError(f"{text} is outside {'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}")
            return v
        return check
    inf = float("inf")
    ap = argparse.ArgumentParser(description="Decentralized training on Fashion-MNIST with PyTorch and sparsepush "
                                 "(Sparse-Push, SCSP, SGP): sparsepush-train's options where they apply.")
    add = ap.add_argument
    add("--nodes", type=number(2, 4096, whole=True), default=16, help="number of nodes, 2 to 4096")
    add("--schedule", default="time-varying-ring", help="communication schedule (as sparsepush-train)")
    add("--algorithm", choices=["sp", "scsp", "sgp"], default="scsp")
    add("--compressor", default=None, help="compressor spec (default top-k:0.01; identity for sgp)")
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
    add("--lr-schedule", choices=["step", "cosine", "constant"], default="step")
    add("--warmup", type=number(0, 2 ** 32 - 1, whole=True), default=0, help="rounds of linear warm-up")
    add("--nesterov", action="store_true")
    add("--momentum", type=number(0, 0.999), default=0.9)
    add("--weight-decay", type=number(0, inf), default=1e-4)
    add("--seed", type=number(0, M64, whole=True), default=1)
    add("--eval-every", type=number(0, 2 ** 32 - 1, whole=True), default=0, help="rounds between evaluations (0: ~10)")
    add("--eval-samples", type=number(1, 10000, whole=True), default=2000)
    add("--final-eval-samples", type=number(0, 10000, whole=True), default=0, help="0: the whole test set")
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
    a.compressor = "identity" if a.algorithm == "sgp" else a.compressor or "top-k:0.01"
    if a.algorithm == "scsp" and not exact(a.final_compressor):
        ap.error(f"--final-compressor {a.final_compressor}: only identity here (a compressed final phase needs "
                 "a fresh residual, which the module's round does not take)")
    if a.final_rounds != "auto":
        if not (a.final_rounds.isdigit() and 1 <= int(a.final_rounds) < 2 ** 32):
            ap.error(f"--final-rounds must be auto or a count in [1, 4294967295], got {a.final_rounds}")
        if "--final-tolerance" in given: ap.error("--final-tolerance sets the target of --final-rounds auto")
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
    """What the run is made of: the shards, the round counts, the phases (as plan_run in train.cpp)."""
    def __init__(self, args, data):
        n = args.nodes
        self.parts = sp.partition(data.train_labels, n, skew=0.0 if args.dirichlet else args.skew,
                                  seed=args.seed, dirichlet=args.dirichlet)
        for i, part in enumerate(self.parts):
            if len(part) == 0: raise ValueError(f"node {i} received no training samples; raise --dirichlet alpha or use fewer nodes")
        self.per_node = len(data.train_labels) // n
        self.train_rounds = max(1, math.floor(args.epochs * self.per_node / args.batch + 0.5))
        if self.train_rounds >= 2 ** 32: raise ValueError(f"--epochs {args.epochs} gives more than 4294967295 rounds")
        if args.warmup > self.train_rounds: raise ValueError(f"--warmup {args.warmup} is longer than the {self.train_rounds} training rounds")
        self.final_rounds, self.bound = 0, None
        if args.algorithm == "scsp" and args.final_rounds == "auto":
            self.final_rounds, self.bound = final_rounds_for(args.sched, self.train_rounds, args.final_tolerance, args.final_eta)
        elif args.algorithm == "scsp":
            self.final_rounds = int(args.final_rounds)
        self.rounds = self.train_rounds + self.final_rounds
        self.eval_every = args.eval_every or max(1, self.rounds // 10)
        self.epochs = self.train_rounds * args.batch / self.per_node
        self.feedback = not exact(args.compressor)  # SGP keeps no residual; SCSP's final phase leaves it alone
        self.train = Phase(args.comp, args.eta, True, self.feedback)
        self.final = Phase(sp.parse_compressor("identity"), args.final_eta, False, False)
        self.started, self.eval_seconds, self.last, self.stop = time.perf_counter(), 0.0, None, None
        self.bytes_at_training_end = None

    def phase(self, t): return self.train if t < self.train_rounds else self.final
    def lr(self, args, t): return lr_at(args, min(t, self.train_rounds - 1), self.train_rounds)
    def evaluates(self, t): return (t + 1) % self.eval_every == 0 or t + 1 == self.rounds


def evaluate_node(nd, data, args, final):
    """Node nd's part of an evaluation: its test accuracy and its de-biased model."""
    c0 = time.thread_time()
    samples = (args.final_eval_samples or len(data.test_y)) if final else args.eval_samples
    nd.debias(nd.xh)
    nd.result = (accuracy(nd.net, data, samples), nd.xh.numpy().copy(), nd.loss, nd.first_loss)
    nd.cpu["eval"] += time.thread_time() - c0
    return nd.result

def report(args, p, t, results, bytes_sent, data):
    """Rank 0, every node's result in node order: the metrics of evaluate.hpp, a progress line and
    the divergence guard (p.stop gets the reason to stop)."""
    n, final = args.nodes, t + 1 == p.rounds
    accs, xhs, losses, firsts = zip(*results)
    ev = {"avg_test_accuracy": 0.0, "min_node_test_accuracy": min(accs), "max_node_test_accuracy": max(accs)}
    avg, mean = np.zeros_like(xhs[0]), np.zeros(len(xhs[0]))
    for a, xh in zip(accs, xhs):  # in node order: the bits do not depend on the transport
        ev["avg_test_accuracy"] += a / n
        avg += xh / np.float32(n)
        mean += xh
    mean /= n
    ev["param_divergence"] = sum(float(np.sqrt(np.sum((xh - mean) ** 2))) for xh in xhs) / n
    samples = (args.final_eval_samples or len(data.test_y)) if final else args.eval_samples
    ev["averaged_model_test_accuracy"] = accuracy(bind(cnn(), torch.from_numpy(avg), torch.zeros(len(avg))), data, samples)
    known = [l for l in losses if l is not None]
    ev["loss"] = sum(l / n for l in known) if len(known) == n else 0.0
    ev["first_loss"] = sum(l / n for l in firsts) if None not in firsts else 0.0
    p.last = ev
    epoch = min(t + 1, p.train_rounds) * args.batch / p.per_node
    wall = time.perf_counter() - p.started
    print(f"round {t + 1}/{p.rounds}  epoch {epoch:.2f}  loss {ev['loss']:.4f}  acc {100 * ev['avg_test_accuracy']:.2f}% "
          f"(avg model {100 * ev['averaged_model_test_accuracy']:.2f}%)  div {ev['param_divergence']:.3g}  "
          f"{bytes_sent / 1e6:.1f} MB  ETA {wall / (t + 1) * (p.rounds - t - 1):.0f}s", flush=True)
    if not math.isfinite(ev["loss"]) or ev["loss"] > 10 * ev["first_loss"] + 10:
        p.stop = f"training diverged at round {t} (mean loss {ev['loss']:g}, started at {ev['first_loss']:g})"
    elif not ev["param_divergence"] <= 1e6:
        p.stop = f"node models drifted apart at round {t} (divergence {ev['param_divergence']:g})"
    if p.stop: p.stop += f": lower --eta (now {args.eta:g}) or --lr (now {args.lr:g})"


class TimedRound:
    """A PushSumNode whose round() counts its thread's CPU seconds (the time split of the summary)."""
    def __init__(self, push, cpu): self.push, self.cpu = push, cpu
    def round(self, *a, **k):
        c0 = time.thread_time()
        self.push.round(*a, **k)
        self.cpu["round"] += time.thread_time() - c0

def run_loopback(args, p, data, x0):
    """Every node in this process, one Python thread each, lockstep over a LoopbackNetwork; the
    threads meet at evaluations (two barriers: the rounds done, the node accuracies done)."""
    n, net, errors = args.nodes, sp.LoopbackNetwork(args.nodes), []
    nodes = [Node(i, x0, Shard(p.parts[i], (args.seed * 1000003 + i) & M64), args) for i in range(n)]
    for nd in nodes:
        push = sp.PushSumNode(nd.x, nd.id, seed=args.seed, feedback=p.feedback)  # zero copy: push works in nd.x
        nd.push, nd.debias, nd.weight = TimedRound(push, nd.cpu), push.debiased, lambda push=push: push.weight
    mark = {}
    def rounds_done():
        mark["eval"] = time.perf_counter()
        if p.bytes_at_training_end is None and mark["t"] + 1 >= p.train_rounds: p.bytes_at_training_end = net.total_bytes()
    def evals_done():
        report(args, p, mark["t"], [nd.result for nd in nodes], net.total_bytes(), data)
        p.eval_seconds += time.perf_counter() - mark["eval"]
    after_rounds, after_evals = threading.Barrier(n, rounds_done), threading.Barrier(n, evals_done)

    def worker(nd):
        endpoint = net.endpoint(nd.id)
        try:
            for t in range(p.rounds):
                c0 = time.thread_time()
                node_round(nd, t, p.lr(args, t), p.phase(t), args.sched, endpoint, data)
                if nd.first_loss is None: nd.first_loss = nd.loss
                nd.cpu["local_step"] += time.thread_time() - c0
                if p.evaluates(t):
                    mark["t"] = t
                    after_rounds.wait()
                    evaluate_node(nd, data, args, t + 1 == p.rounds)
                    after_evals.wait()
                    if p.stop: return
        except threading.BrokenBarrierError:
            pass
        except BaseException as e:  # stop the others at their next barrier
            errors.append(e)
            after_rounds.abort(), after_evals.abort()

    threads = [threading.Thread(target=worker, args=(nd,)) for nd in nodes]
    loop = time.perf_counter()
    for th in threads: th.start()
    for th in threads: th.join()
    if errors: raise errors[0]
    for nd in nodes: nd.cpu["local_step"] -= nd.cpu["round"]  # node_round's time less its round's
    train_seconds = time.perf_counter() - loop - p.eval_seconds
    return dict(bytes=net.total_bytes(), messages=net.total_messages(), weights=[nd.weight() for nd in nodes],
                train_seconds=train_seconds, ranks=1, cpu=[nd.cpu for nd in nodes])

def run_mpi(args, p, data, x0, comm):
    """This rank's contiguous block of nodes (as train.cpp cuts them), driven by one PushSumGroup on
    an MpiNetwork from this thread; rank 0 gathers the evaluations."""
    n, ranks, rank = args.nodes, comm.Get_size(), comm.Get_rank()
    b, e = divmod(n, ranks)
    first, count = rank * b + min(rank, e), b + (rank < e)
    net = sp.MpiNetwork(n, comm=comm, timeout=args.mpi_timeout)
    if (net.first_node, net.local_nodes) != (first, count):
        raise RuntimeError(f"rank {rank}: the network places nodes {net.first_node}+{net.local_nodes}, not {first}+{count}")
    nodes = [Node(i, x0, Shard(p.parts[i], (args.seed * 1000003 + i) & M64), args) for i in range(first, first + count)]
    group = sp.PushSumGroup([nd.x for nd in nodes], first_node=first, total_nodes=n, seed=args.seed, feedback=p.feedback)
    for li, nd in enumerate(nodes): nd.debias = lambda out, li=li: group.debiased(li, out)
    train_seconds = 0.0
    for t in range(p.rounds):
        w0, ph = time.perf_counter(), p.phase(t)
        if ph.trains:
            for nd in nodes:
                c0 = time.thread_time()
                nd.loss = local_step(nd, data)
                nd.first_loss = nd.loss if nd.first_loss is None else nd.first_loss
                nd.cpu["local_step"] += time.thread_time() - c0
        c0 = time.thread_time()
        group.round(t, args.sched, ph.compressor, net, eta=ph.eta, gamma=p.lr(args, t), feedback=ph.feedback,
                    directions=[nd.direction for nd in nodes] if ph.trains else None)
        nodes[0].cpu["round"] += time.thread_time() - c0
        train_seconds += time.perf_counter() - w0
        if t + 1 == p.train_rounds: p.bytes_at_training_end = comm.allreduce(net.total_bytes())
        if p.evaluates(t):
            e0 = time.perf_counter()
            results = comm.gather([evaluate_node(nd, data, args, t + 1 == p.rounds) for nd in nodes])
            bytes_sent = comm.allreduce(net.total_bytes())
            if rank == 0: report(args, p, t, [r for block in results for r in block], bytes_sent, data)
            p.stop = comm.bcast(p.stop)
            p.eval_seconds += time.perf_counter() - e0
            if p.stop: break
    weights = comm.gather([group.weight(li) for li in range(count)])
    out = dict(bytes=comm.allreduce(net.total_bytes()), messages=comm.allreduce(net.total_messages()),
               weights=[w for block in weights for w in block] if rank == 0 else None,
               train_seconds=train_seconds, ranks=ranks, cpu=comm.gather([nd.cpu for nd in nodes]))
    net.finish()
    out["cpu"] = [c for block in out["cpu"] for c in block] if rank == 0 else None
    return out


# Keys of sparsepush-train's summary left out, as they have no meaning here: device_profile (the
# reference backend's own FLOP and activation count), state_bytes_per_node (the module does not
# report a node's buffers), wait_seconds_per_rank (the module does not time receiving),
# drop_probability, loss_recovery, messages_dropped, straggler, jitter, max_delay (no loss
# injection, stragglers or delay model here). Added: min_/max_node_test_accuracy, backend and
# cpu_seconds (thread CPU seconds of every node, summed: local steps, rounds, evaluations).
def summary(args, p, res):
    n, d, ev = args.nodes, 20586, p.last
    scsp = args.algorithm == "scsp"
    return {
        "algorithm": args.algorithm, "nodes": n, "schedule": args.schedule, "compressor": args.compressor,
        "eta": args.eta, "final_rounds": p.final_rounds, "final_rounds_setting": args.final_rounds if scsp else None,
        "final_compressor": args.final_compressor if scsp else None, "final_eta": args.final_eta if scsp else None,
        "final_rounds_bound": p.bound, "bytes_final_phase": res["bytes"] - p.bytes_at_training_end if scsp else None,
        "skew": None if args.dirichlet else args.skew, "dirichlet_alpha": args.dirichlet or None,
        "model": args.model, "precision": "fp32", "bits": 32, "parameters": d, "rounds": p.rounds, "epochs": p.epochs,
        **{k: ev[k] for k in ("avg_test_accuracy", "averaged_model_test_accuracy", "param_divergence", "first_loss", "loss",
                              "min_node_test_accuracy", "max_node_test_accuracy")},
        "bytes_sent_total": res["bytes"], "bytes_per_node": res["bytes"] // n,
        "bytes_full_precision_equivalent": 4 * d * res["messages"],
        "comm_ratio": 4 * d * res["messages"] / res["bytes"] if res["bytes"] else 0.0,
        "messages_sent": res["messages"], "weight_mass": sum(res["weights"]), "transport": args.transport,
        "ranks": res["ranks"], "policy": "lockstep", "max_staleness": 0, "eval_reduce": "ordered",
        "steps_per_node": {"min": p.train_rounds, "max": p.train_rounds, "histogram": [{"steps": p.train_rounds, "nodes": n}]},
        "wall_seconds": time.perf_counter() - p.started, "train_seconds": res["train_seconds"],
        "eval_seconds": p.eval_seconds, "train_images_per_second": p.train_rounds * args.batch * n / res["train_seconds"],
        "backend": f"torch {torch.__version__}, sparsepush {sp.__version__}",
        "cpu_seconds": {k: sum(c[k] for c in res["cpu"]) for k in ("local_step", "round", "eval")},
    }


def main(argv):
    started = time.perf_counter()
    torch.set_num_threads(1)
    if int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))) > 0:
        sys.stderr = open(os.devnull, "w")  # one copy of an option error under mpirun (rank 0's)
    args, ap = options(argv)
    sys.stderr = sys.__stderr__
    launched = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("PMI_SIZE", "1")))
    if args.transport == "loopback" and launched > 1:
        ap.error(f"started as {launched} MPI processes, but --transport is loopback: add --transport mpi")
    comm = None
    if args.transport == "mpi":
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        if comm.Get_size() > args.nodes:
            ap.error(f"--nodes {args.nodes} on {comm.Get_size()} MPI ranks: more ranks than nodes")
    root = comm is None or comm.Get_rank() == 0
    try:
        data = Data(args.data)
        p = Plan(args, data)
    except (OSError, ValueError, sp.Error) as e:
        ap.error(str(e))
    p.started = started
    if root:
        print(f"train_torch: {args.algorithm} on {args.nodes} nodes, schedule {args.schedule}, compressor {args.compressor}, "
              f"eta {args.eta:g}, {p.rounds} rounds ({p.epochs:.2f} epochs) of batch {args.batch}, {args.transport}"
              + (f"; SCSP's last {p.final_rounds} rounds gossip with {args.final_compressor}, eta {args.final_eta:g}"
                 if args.algorithm == "scsp" else ""), flush=True)
    try:
        x0 = reference_init(args.seed)
        res = run_mpi(args, p, data, x0, comm) if comm else run_loopback(args, p, data, x0)
    except Exception as e:
        print(f"train_torch: {e}", file=sys.stderr, flush=True)
        if comm is not None and comm.Get_size() > 1: comm.Abort(2)
        return 2
    if p.stop:
        if root: print(f"train_torch: {p.stop}", file=sys.stderr)
        return 3
    if not root: return 0
    s = summary(args, p, res)
    print(json.dumps(s, indent=2, sort_keys=True))
    if args.summary:
        with open(args.summary, "w") as f: f.write(json.dumps(s, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
