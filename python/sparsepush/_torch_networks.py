"""The networks sparsepush.torch.GossipOptimizer runs over besides MPI's: Loopback (n nodes as
threads of one process) and the frames of a torchrun launch over torch.distributed's point-to-point
(gloo); and what a launcher says (launch_info). sparsepush.torch re-exports Loopback and
launch_info."""
import threading

import torch

from . import _core


class Loopback:
    """n nodes in this process, one thread each: every node's GossipOptimizer(..., network=this,
    node=i) steps on its own thread; a round runs when all n have called step() (the last one to
    arrive runs it for all, on the run's worker threads, the GIL released). A node that waits
    longer than `timeout` seconds for the others raises TransportError (and so do the others)."""

    def __init__(self, n, timeout=600.0):
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise _core.ConfigError(f"Loopback(n): n must be a positive int, got {n!r}")
        if not (isinstance(timeout, (int, float)) and 0 < timeout < 1e7):
            raise _core.ConfigError(f"Loopback: timeout must be positive seconds, got {timeout!r}")
        self.num_nodes, self.timeout = n, float(timeout)
        self._lock = threading.Lock()
        self._members = [None] * n
        self._ops = [None] * n
        self._barrier = threading.Barrier(n, action=self._round)
        self._run = self._spec = self._error = self._pending = self._saved = self._shared = self._network = None
        self._averaged = None

    def _join(self, member):
        """Register a node; returns its own GossipRun over the shared LoopbackNetwork (lockstep rounds
        of a graph algorithm: each thread steps its node, waiting only for its in-neighbours), or
        None: the Loopback runs every node's round at once (a waiting policy's drains, centralized)."""
        i = member.node
        with self._lock:
            if self._members[i] is not None:
                raise _core.ConfigError(f"Loopback: node {i} has a GossipOptimizer already")
            first = next((m for m in self._members if m is not None), None)
            if first is not None:
                if member._spec.as_dict() != first._spec.as_dict():
                    raise _core.ConfigError(f"Loopback: node {i}'s options {member._spec!r} differ from node "
                                            f"{first.node}'s {first._spec!r}")
                if member._flat.numel() != first._flat.numel():
                    raise _core.SizeError(f"Loopback: node {i}'s model has {member._flat.numel()} parameters, node "
                                          f"{first.node}'s {first._flat.numel()}")
            self._members[i] = member
            spec = member._spec
            if self._shared is None:
                self._shared = spec.lockstep and spec.algorithm_info["graph"]
                if self._shared:
                    self._network = _core.LoopbackNetwork(self.num_nodes, encoded=False,
                                                          drop_probability=spec.drop_value, seed=spec["seed"],
                                                          timeout=self.timeout)
            if not self._shared:
                return None
        return _core.GossipRun(spec, [member._host], self._network, member._offsets, node=i)

    def _round(self):  # the barrier's action: in one thread, while the others wait
        self._error = None
        try:
            ops = set(self._ops)
            if len(ops) != 1:
                raise _core.ConfigError("Loopback: in one round the nodes called " + ", ".join(
                    f"node {i}: {op}()" for i, op in enumerate(self._ops)) + "; every node must call the same")
            flats = [m._host for m in self._members]  # each member copied its model there (staged)
            if self._ops[0] == "average":  # no round: the models as they stand
                self._averaged = ordered_average(flats)
                return
            if self._run is None:
                self._run = _core.GossipRun(self._members[0]._spec, [m._initial for m in self._members], None,
                                            self._members[0]._offsets)
                for m in self._members:
                    m._initial = None
            with self._lock:
                pending, self._pending = self._pending, None
            if pending is not None:  # load_state_dict() gave the models already (the optimizer stepped them since)
                self._run.restore(pending)
            op = ops.pop()
            if op == "step":
                self._run.step(flats)
            elif op == "finish":
                self._run.finish(flats)
            else:  # "save": a waiting policy mixes what is in flight first, which changes the models
                self._saved = self._run.save()
                self._run.write_models(flats)
        except BaseException as e:  # noqa: BLE001 - every node's call raises it
            self._error = e

    def _arrive(self, node, op):
        self._ops[node] = op
        try:
            self._barrier.wait(self.timeout)
        except threading.BrokenBarrierError:
            raise _core.TransportError(f"Loopback: node {node}'s {op}() waited {self.timeout:g} s for the other "
                                       "nodes' calls (a node failed, stopped, or called fewer steps)") from None
        if self._error is not None:
            raise self._error

    def _average(self, node):
        self._arrive(node, "average")
        return torch.from_numpy(self._averaged.copy())  # each node its own tensor

    def _state(self, node):
        self._arrive(node, "save")
        return self._saved

    def _load(self, state):
        with self._lock:
            if self._run is None:
                self._pending = state
            else:
                self._run.restore(state)


def launch_info():
    """{"kind": "mpi" or "torch", "nodes": N, "rank": r} under mpirun or torchrun (one node per
    process: node r of N), else None. An initialized torch.distributed says it; else the launcher's
    environment, as the library reads it (sparsepush.launched(), whose variables
    sparsepush.launcher_environment() lists)."""
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return {"kind": "torch", "nodes": dist.get_world_size(), "rank": dist.get_rank()}
    launched = _core.launched()
    if launched is None:
        return None
    return {"kind": launched["kind"], "nodes": launched["ranks"], "rank": launched["rank"]}


def _launcher():
    """'torch' under torchrun or an initialized torch.distributed, 'mpi' under mpirun, else None."""
    info = launch_info()
    return None if info is None else info["kind"]


class _TorchFrames:
    """Moves a round's frames over torch.distributed point-to-point: sizes first, then the bytes.
    Every wait is bounded by `timeout` seconds in all (the run's mpi_timeout): a peer that does not
    send or receive in time is a TransportError naming it, never a silent wait."""

    def __init__(self, node, timeout):
        import torch.distributed as dist
        if not dist.is_initialized():
            dist.init_process_group(backend="gloo")
        self.dist, self.node, self.timeout = dist, node, float(timeout)

    def _wait(self, where, reqs, peers, what, deadline):
        import datetime
        import time
        for r, (peer, direction) in zip(reqs, peers):
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise RuntimeError("Timed out")
                r.wait(timeout=datetime.timedelta(seconds=left))
            except RuntimeError as e:
                if "Timed out" not in str(e):
                    raise
                raise _core.TransportError(
                    f"{where}: node {self.node} waited {self.timeout:g} s (mpi_timeout) for node {peer} to "
                    f"{direction} {what} (torch.distributed, gloo): that rank stalled, failed or stepped fewer "
                    "times") from None

    def __call__(self, round, sends, sources):
        import time
        dist = self.dist
        deadline = time.monotonic() + self.timeout
        out_sizes = [torch.tensor([len(frame)], dtype=torch.int64) for _, frame in sends]
        in_sizes = [torch.zeros(1, dtype=torch.int64) for _ in sources]
        reqs = [dist.isend(s, to) for (to, _), s in zip(sends, out_sizes)]
        reqs += [dist.irecv(s, src) for src, s in zip(sources, in_sizes)]
        peers = [(to, "receive") for to, _ in sends] + [(src, "send") for src in sources]
        self._wait(f"round {round}", reqs, peers, "its frame's size", deadline)
        payloads = [torch.frombuffer(bytearray(frame), dtype=torch.uint8) for _, frame in sends]
        frames = [torch.empty(int(s[0]), dtype=torch.uint8) for s in in_sizes]
        reqs, peers = [], []
        for (to, _), p in zip(sends, payloads):
            if p.numel():
                reqs.append(dist.isend(p, to))
                peers.append((to, "receive"))
        for src, f in zip(sources, frames):
            if f.numel():
                reqs.append(dist.irecv(f, src))
                peers.append((src, "send"))
        self._wait(f"round {round}", reqs, peers, "its frame", deadline)
        return [f.numpy() for f in frames]

    def ordered_average(self, model, nodes):
        """ordered_average() over the ranks, one node each: rank r adds its model to rank r - 1's
        sum and passes it on; the last rank's sum reaches every rank. Returns the average and the
        bytes this rank sent (chain_bytes)."""
        import time
        dist, r, last = self.dist, self.node, nodes - 1
        deadline = time.monotonic() + self.timeout
        acc = torch.zeros_like(model)
        if r > 0:
            self._wait("the averaged model", [dist.irecv(acc, r - 1)], [(r - 1, "send")], "its partial sum", deadline)
        acc = torch.from_numpy(ordered_average([model], nodes, start=acc.numpy()))
        if r < last:
            self._wait("the averaged model", [dist.isend(acc, r + 1)], [(r + 1, "receive")], "the partial sum",
                       deadline)
            self._wait("the averaged model", [dist.irecv(acc, last)], [(last, "send")], "the average", deadline)
        else:
            reqs = [dist.isend(acc, q) for q in range(last)]
            self._wait("the averaged model", reqs, [(q, "receive") for q in range(last)], "the average", deadline)
        return acc, chain_bytes(acc.numel(), r, nodes)


def chain_bytes(d, node, nodes):
    """What node `node` of `nodes` sends for an ordered average of d float32 values: its partial sum
    to the next node, or, the last node, the average to every other one (MpiNetwork's chain too)."""
    return 4 * d * (nodes - 1 if node == nodes - 1 else 1) if nodes > 1 else 0


def ordered_average(models, nodes=None, start=None):
    """sum_i (models[i] / nodes) in float32, added in order to `start` (zeros): the averaged model
    as sparsepush-train and MpiNetwork.ordered_average add it, the same bits."""
    import numpy as np
    nodes = len(models) if nodes is None else nodes
    acc = np.zeros(models[0].numel(), dtype=np.float32) if start is None else start.copy()
    for m in models:
        acc += m.numpy() / np.float32(nodes)
    return acc
