#!/usr/bin/env python3
"""train_torch.py: decentralized training on Fashion-MNIST with PyTorch as the local backend and the
sparsepush module as the gossip: Sparse-Push (sp), Skew-Compensated Sparse-Push (scsp: sp, then
exact gossip rounds) and SGP (sgp). It is sparsepush-train (examples/train.cpp) with torch's
autograd in place of the reference backend: the same CNN, initial weights and minibatch order (bit
for bit), data partition, optimizer, learning-rate schedule, options, defaults and summary keys:
the settings are a sparsepush.RunSpec, checked by the library's rules, and the shards, minibatch
order, initial weights, round counts and learning rates come from the module (RunSpec.plan,
ShardSampler, init_model, RunSpec.lr). Only torch's floating-point kernels differ.

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
import argparse, collections, json, math, sys, threading, time


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


class Node:
    """One node: its torch model over flat buffers, its optimizer state and its data."""
    def __init__(self, i, x0, args, parts):
        self.id, self.args, self.shard = i, args, sp.ShardSampler(parts[i], sp.shard_seed(args.seed, i))
        self.x = x0.clone()                  # the push-sum numerator x_i: the round works in it
        self.xh, self.grad = torch.empty_like(x0), torch.zeros_like(x0)  # x_i / u_i and its gradient
        self.velocity = torch.zeros_like(x0)  # heavy-ball momentum, the direction p_i
        self.direction = torch.zeros_like(x0) if args.nesterov else self.velocity
        self.net = bind(cnn(), self.xh, self.grad)
        self.push = self.debias = self.loss = self.first_loss = None
        self.bytes_trained = 0               # loopback: what it sent in the training rounds
        self.cpu = {"local_step": 0.0, "round": 0.0, "eval": 0.0}  # thread CPU seconds


# ========= the core loop (docs/guide/python.md quotes the shorter one of torch_loop.py) =========
def local_step(nd, data):
    """Node nd's direction p_i at its de-biased model; returns the minibatch loss."""
    nd.debias(nd.xh)                                   # xh_i = x_i / u_i: the torch parameters
    idx = torch.from_numpy(nd.shard.next_batch(nd.args.batch).astype(np.int64))
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

class Data:
    """Fashion-MNIST as sparsepush-train reads it (sparsepush.load_fashion_mnist), as torch tensors."""
    def __init__(self, d):
        fm = sp.load_fashion_mnist(d)
        self.train_x, self.test_x = (torch.from_numpy(fm[s]["images"]).unsqueeze(1) for s in ("train", "test"))
        self.train_labels = fm["train"]["labels"]
        self.train_y = torch.from_numpy(self.train_labels.astype(np.int64))
        self.test_y = torch.from_numpy(fm["test"]["labels"].astype(np.int64))

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

# sparsepush-train's options that apply here: help, defaults and checks are the library's (RunSpec)
OFFERED = ["nodes", "schedule", "algorithm", "compressor", "eta", "final_rounds", "final_compressor", "final_eta",
           "final_tolerance", "seed", "model", "epochs", "batch", "lr", "lr_schedule", "warmup", "skew", "dirichlet",
           "momentum", "nesterov", "weight_decay", "eval_every", "eval_samples", "final_eval_samples", "summary", "data",
           "transport", "mpi_timeout"]
ONLY = {"algorithm": ["sp", "scsp", "sgp"], "model": ["cnn"]}  # what this program implements

def message(e):
    """An error's text without the library's "sparsepush: " (the program names itself)."""
    return str(e).removeprefix("sparsepush: ")

def options(argv):
    """The RunSpec of the command line: each value is given to the library as text, which it
    parses and checks as sparsepush-train does (validate() follows, once the ranks are known)."""
    ap = argparse.ArgumentParser(description="Decentralized training on Fashion-MNIST with PyTorch and sparsepush "
                                 "(Sparse-Push, SCSP, SGP), with sparsepush-train's options where they apply.")
    table = sp.run_options()
    for k in OFFERED:
        o = table[k]
        text = o["help"].replace("%", "%%") + (f" (default: {o['default_text']})" if o["default_text"] else "")
        if o["type"] == "bool":
            ap.add_argument(o["option"], action="store_true", help=text)
        else:
            ap.add_argument(o["option"], choices=ONLY.get(k, o["choices"]), help=text)
    given = {k: v for k, v in vars(ap.parse_args(argv)).items() if v not in (None, False)}
    try:
        spec = sp.RunSpec(**given)
    except sp.Error as e:
        ap.error(message(e))
    if spec.algorithm_info["final_rounds"] and not exact(spec.final_compressor_spec):
        ap.error(f"--final-compressor {spec.final_compressor_spec}: only identity here (a compressed final phase starts "
                 "from a fresh residual: PushSumNode.round(fresh_residual=True); not wired into this example)")
    return spec, ap

def settings(spec):
    """The values the run uses, defaults resolved (a.eta, a.schedule, ...), and its parts."""
    a = argparse.Namespace(**spec.as_dict())
    a.spec, a.schedule, a.compressor, a.eta = spec, spec.schedule_spec, spec.compressor_spec, spec.eta_value
    a.final_rounds, a.final_compressor, a.final_eta = spec.final_rounds_spec, spec.final_compressor_spec, spec.final_eta_value
    a.skew, a.scsp = spec.skew_value, spec.algorithm_info["final_rounds"]
    a.comp, a.sched = sp.parse_compressor(a.compressor), sp.parse_schedule(a.schedule, a.nodes, a.seed)
    return a


class Plan:
    """What the run is made of: sparsepush-train's shards and round counts (RunSpec.plan), the
    phases; and, on rank 0, the last evaluation."""
    def __init__(self, a, data, started):
        run = a.spec.plan(data.train_labels)
        self.parts, self.per_node, self.train_rounds = run.parts, run.per_node, run.train_rounds
        self.final_rounds, self.bound, self.rounds = run.final_rounds, run.final_rounds_bound, run.rounds
        self.eval_every = a.eval_every or max(1, self.rounds // 10)
        self.epochs = self.train_rounds * a.batch / self.per_node
        self.feedback = not exact(a.compressor)  # SGP keeps no residual; SCSP's final rounds leave it alone
        self.train = Phase(a.comp, a.eta, True, self.feedback)
        self.final = Phase(sp.parse_compressor(a.final_compressor), a.final_eta, False, False)
        self.started, self.eval_seconds, self.last, self.stop, self.bytes_trained = started, 0.0, None, None, None

    def phase(self, t): return self.train if t < self.train_rounds else self.final
    def lr(self, a, t): return a.spec.lr(min(t, self.train_rounds - 1), self.train_rounds)
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
    net = sp.MpiNetwork.from_spec(a.spec, comm=comm)  # sparsepush-train's network of these settings
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
    n, d, ev, scsp = a.nodes, a.dim, p.last, a.scsp
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
    mpirun = sp.launched()  # the launcher's word, read by the library (sp.launcher_environment() lists it)
    mpirun = mpirun if mpirun and mpirun["kind"] == "mpi" else {"ranks": 1, "rank": 0}
    if mpirun["rank"] > 0:
        sys.stderr = open(os.devnull, "w")  # under mpirun a refused option is reported once, by rank 0
    spec, ap = options(argv)
    launched = mpirun["ranks"]
    if not spec.mpi and launched > 1:
        ap.error(f"started as {launched} MPI processes, but --transport is {spec['transport']}: each would run the whole "
                 "job; add --transport mpi")
    comm = None
    if spec.mpi:
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
    root = comm is None or comm.Get_rank() == 0
    try:
        for w in spec.validate(comm.Get_size() if comm else 1):
            print(f"train_torch: warning: {w}", file=sys.stderr)
        spec.check_files(0 if root else 1)
        a = settings(spec)
        data = Data(a.data)
        p = Plan(a, data, started)
    except (OSError, ValueError, sp.Error) as e:
        ap.error(message(e))
    if root:
        print(f"train_torch: {a.algorithm} on {a.nodes} nodes, schedule {a.schedule}, compressor {a.compressor}, eta {a.eta:g}, "
              f"{p.rounds} rounds ({p.epochs:.2f} epochs) of batch {a.batch}, {a.transport}"
              + (f"; SCSP's last {p.final_rounds} rounds gossip with {a.final_compressor}, eta {a.final_eta:g}"
                 if a.scsp else ""), flush=True)
    sys.stderr = sys.__stderr__
    try:
        x0 = torch.from_numpy(sp.init_model(a.model, a.seed))  # nn::model::init's weights, bit for bit
        a.dim = len(x0)
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
