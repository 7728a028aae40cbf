"""sparsepush.torch: decentralized training of any torch model, one optimizer wrapper away.

    import sparsepush.torch as spt
    opt = spt.GossipOptimizer(torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9),
                              algorithm="scsp", compressor="top-k:0.01")
    for images, labels in my_shard:
        opt.zero_grad()
        F.cross_entropy(model(images), labels).backward()
        opt.step()          # the optimizer's step, then one gossip round
    opt.finish()            # SCSP's final rounds; the model is the node's final model

Launch it as torch users do: `mpirun -np N python3 train.py` (one node per rank over the
library's MPI transport) or `torchrun --nproc_per_node N train.py` (one node per process; the
encoded messages travel over torch.distributed's point-to-point, gloo). In a notebook or a test,
N nodes are N threads of one process: `net = spt.Loopback(N)`, then in thread i
`GossipOptimizer(optimizer_i, network=net, node=i)`.

The model's trainable parameters become views of one flat float32 tensor (no copy per step).
step() runs the wrapped optimizer's step (its learning rate, momentum, weight decay: the change
lands on the push-sum numerator, x <- x + (model after - model before)), then the round of the
chosen algorithm (compress with error feedback, push, mix), and leaves the de-biased model x / u
in the parameters for the next forward pass. The options are sparsepush-train's gossip settings
under the same names (sparsepush.run_options(), those with "gossip": True), checked by the
library's rules.
"""
import contextlib
import warnings

import torch

from . import _core
from ._torch_data import ShardSampler
from ._torch_networks import Loopback, _launcher, _TorchFrames, chain_bytes, launch_info

__all__ = ["GossipOptimizer", "Loopback", "ShardSampler", "gossip_options", "launch_info"]


def gossip_options():
    """The settings GossipOptimizer takes: {keyword: run_options() entry} of the gossip's fields."""
    return {k: v for k, v in _core.run_options().items() if v.get("gossip")}


# what the refusal of a training-loop setting says
_LOOP_OWNS = {"lr": "the wrapped optimizer's", "momentum": "the wrapped optimizer's",
              "nesterov": "the wrapped optimizer's", "weight_decay": "the wrapped optimizer's",
              "lr_schedule": "a torch.optim.lr_scheduler's", "warmup": "a torch.optim.lr_scheduler's",
              "nodes": "the launcher's (mpirun -np / torchrun --nproc_per_node) or Loopback(n)'s",
              "transport": "the network= argument's"}


def _settings_diff(was, now):
    """What differs between two fingerprints, as the library says it; a text that is none (a state
    of another program) is shown whole."""
    try:
        return _core.settings_diff(was, now)
    except _core.ConfigError:
        return f"{was!r} (now {now})"


def _storage_ptr(t):
    """Where the storage under tensor t starts (torch >= 2: untyped_storage(); 1.13: storage())."""
    return t.untyped_storage().data_ptr() if hasattr(t, "untyped_storage") else t.storage().data_ptr()


class GossipOptimizer(torch.optim.Optimizer):
    """Wraps a torch optimizer: its step, then a round of Sparse-Push (or SCSP, SGP, D-PSGD,
    DeepSqueeze, CHOCO-SGD, CHOCO-Push, centralized) with this node's peers.

    GossipOptimizer(optimizer, *, network=None, node=None, model=None, buffers="gossip", host_staged=None,
                    **options)

    optimizer: any torch.optim.Optimizer over float32 parameters on one device; those with
    requires_grad False are left alone. On the CPU the parameters are views of the buffer the
    gossip mixes (no copy); on another device (a GPU) they are views of one flat tensor there, and
    each step copies it to a host mirror, runs the round there and copies the model back
    (host_staged=True takes that path on the CPU too). network: None (the launcher: mpirun or
    torchrun), "mpi", "torch", or a Loopback (then node= says which node this is). model: the module (optional): it names
    parameters in errors, and its buffers are what `buffers` acts on. buffers="gossip" (the
    default): the model's float32 buffers (BatchNorm's running mean and variance) join the flat
    tensor and are mixed like the parameters, so finish() leaves them at the nodes' average;
    "local": each node keeps its own. Integer buffers (num_batches_tracked) are always local.
    options: algorithm="scsp", compressor="top-k:0.01", schedule=..., eta=..., final_rounds=...,
    staleness=..., overlap=..., drop_probability=..., seed=..., threads=..., tracking=..., ... as
    sparsepush-train's options (gossip_options() lists them; defaults are the CLI's). Every node
    must pass the same options and start from a model of the same size.

    tracking=True (sgp, sp, choco-push; lockstep): step() first swaps each parameter's gradient
    for the node's tracker y + g(t) - g(t-1), which follows the nodes' average gradient, and the
    wrapped optimizer steps along it; the round then also mixes the trackers (a second message per
    link). The loop does not change: backward() before step(), no closure. After step() the
    parameters' .grad hold the tracker (views of one flat buffer); zero_grad() as usual.
    """

    def __init__(self, optimizer, *, network=None, node=None, model=None, buffers="gossip", host_staged=None,
                 **options):
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"GossipOptimizer wraps a torch.optim.Optimizer, got {type(optimizer).__name__}")
        self.optimizer = optimizer
        self._mpi = None
        self._net = network
        self._average_bytes = 0
        names = {id(p): n for n, p in model.named_parameters()} if model is not None else {}
        params = self._trained_parameters(names)
        mixed = self._mixed_buffers(model, buffers, params[0].device)
        kind = self._network_kind(network)
        n, self.node = self._placement(kind, network, node)
        self._spec = self._make_spec(options, n, kind)  # every check before the parameters move
        if host_staged not in (None, True, False):
            raise _core.ConfigError(f"GossipOptimizer: host_staged must be None, True or False, got {host_staged!r}")
        self._bind(params, mixed, params[0].device.type != "cpu" if host_staged is None else host_staged)
        # gradient tracking: the gradients gathered into one flat buffer, which track() turns into
        # the trackers the wrapped optimizer steps along (the parameters' .grad then view it)
        self._grads = self._host_grads = None
        if self._spec["tracking"]:
            self._grads = torch.zeros_like(self._flat)
            self._host_grads = torch.zeros_like(self._host) if self._staged else self._grads
        if kind == "loopback":
            self._initial = self._host.clone()
            self._run = network._join(self)  # its own run, or None: the Loopback steps every node at once
            if self._run is not None:
                self._initial = None
        else:
            self._initial = None
            self._run = self._make_run(kind, n)

    # --- set-up ----------------------------------------------------------------------------------
    def _trained_parameters(self, names):
        params, seen, zero_size, spans, device = [], set(), 0, [], None
        for g, group in enumerate(self.optimizer.param_groups):
            for k, p in enumerate(group["params"]):
                name = names.get(id(p), f"param_groups[{g}]['params'][{k}]")
                what = f"parameter {name} (shape {tuple(p.shape)})"
                if not p.requires_grad or id(p) in seen:
                    continue
                if p.numel() == 0:  # nothing to train or send: left as it is
                    zero_size += 1
                    continue
                if p.device.type == "meta":
                    raise _core.ConfigError(f"{what} is on meta: it holds no values to train (materialize the model "
                                            "first, e.g. with to_empty() and an initialization)")
                if device is None:
                    device, device_name = p.device, name
                elif p.device != device:
                    raise _core.ConfigError(f"{what} is on {p.device}, parameter {device_name} on {device}: "
                                            "GossipOptimizer trains parameters on one device (model.to(device))")
                if p.dtype != torch.float32:
                    raise _core.ConfigError(f"{what} is {p.dtype}: GossipOptimizer trains float32 parameters "
                                            "(model.float())")
                if p.is_sparse:
                    raise _core.ConfigError(f"{what} is sparse: GossipOptimizer trains dense parameters")
                # a parameter whose storage overlaps another's (a view of it): each gets a slot of its
                # own in the flat buffer, which would silently untie them
                lo = p.data_ptr()
                hi = lo + p.numel() * p.element_size()
                for other, other_name, olo, ohi in spans:
                    if _storage_ptr(p) == _storage_ptr(other) and lo < ohi and olo < hi:
                        raise _core.ConfigError(
                            f"{what} shares storage with parameter {other_name} (a view of it, or tied through a "
                            "slice): GossipOptimizer gives every parameter a slot of its own in one flat buffer, "
                            "which would untie them; tie weights by using one Parameter object")
                spans.append((p, name, lo, hi))
                seen.add(id(p))
                params.append(p)
        if not params:
            raise _core.ConfigError("GossipOptimizer: the optimizer has no parameter to train (none given, every one "
                                    "has requires_grad=False" + (f", or has no element: {zero_size} of them" if zero_size
                                                                 else "") + ")")
        return params

    @staticmethod
    def _mixed_buffers(model, buffers, device):
        """The model's buffers the gossip mixes: its float32 ones under buffers="gossip"."""
        if buffers not in ("gossip", "local"):
            raise _core.ConfigError(f"GossipOptimizer: buffers must be 'gossip' or 'local', got {buffers!r}")
        if model is None or buffers == "local":
            return []
        out = []
        for name, b in model.named_buffers():
            if not b.is_floating_point() or b.numel() == 0:
                continue  # integer counters (num_batches_tracked) stay each node's own
            what = f"buffer {name} (shape {tuple(b.shape)})"
            if b.dtype != torch.float32:
                raise _core.ConfigError(f"{what} is {b.dtype}: buffers='gossip' mixes float32 buffers (model.float(), "
                                        "or buffers='local')")
            if b.device != device:
                raise _core.ConfigError(f"{what} is on {b.device}, the parameters on {device} (model.to(device))")
            out.append(b)
        return out

    def _bind(self, params, mixed_buffers, staged):
        """One flat float32 tensor on the parameters' device holds every trained parameter, then
        the buffers the gossip mixes; they become its views. The gossip runs on _host: that tensor
        itself, or (staged) a CPU mirror that _to_host() and _to_device() copy to and from,
        blocking."""
        self._params, self._buffers = params, mixed_buffers
        self._param_elements = sum(p.numel() for p in params)  # the buffers' slots come after
        total = self._param_elements + sum(b.numel() for b in mixed_buffers)
        self._flat = torch.empty(total, dtype=torch.float32, device=params[0].device)
        self._staged = staged
        self._offsets, at = [], 0
        with torch.no_grad():
            for p in params + mixed_buffers:
                self._offsets.append(at)
                view = self._flat[at:at + p.numel()]
                view.copy_(p.detach().reshape(-1))
                p.data = view.view_as(p)
                at += p.numel()
        self._host = self._flat.to("cpu", copy=True) if staged else self._flat

    def _to_host(self):
        if self._staged:
            self._host.copy_(self._flat)

    def _to_device(self):
        if self._staged:
            self._flat.copy_(self._host)

    @staticmethod
    def _network_kind(network):
        if isinstance(network, Loopback):
            return "loopback"
        if network is None:
            kind = _launcher()
            if kind is None:
                raise _core.ConfigError("GossipOptimizer: network=None takes the nodes from the launcher, and none was "
                                        "found (mpirun, torchrun): launch with `mpirun -np N python3 ...` or "
                                        "`torchrun --nproc_per_node N ...`, or pass network=sparsepush.torch.Loopback(N)")
            return kind
        if network in ("mpi", "torch"):
            return network
        raise _core.ConfigError(f"GossipOptimizer: network must be None, 'mpi', 'torch' or a Loopback, got {network!r}")

    @staticmethod
    def _placement(kind, network, node):
        if kind == "loopback":
            if not isinstance(node, int) or isinstance(node, bool) or not 0 <= node < network.num_nodes:
                raise _core.ConfigError(f"GossipOptimizer over a Loopback of {network.num_nodes} nodes needs "
                                        f"node= in [0, {network.num_nodes}), got {node!r}")
            return network.num_nodes, node
        if node is not None:
            raise _core.ConfigError(f"GossipOptimizer: node= is for a Loopback; under {kind} the node is the rank")
        if kind == "mpi":
            if not _core.has_mpi:
                raise _core.ConfigError("GossipOptimizer: this sparsepush module was built without MPI (sparsepush."
                                        "has_mpi is False); use torchrun")
            info = launch_info()
            if info is None:
                raise _core.ConfigError("GossipOptimizer: network='mpi', but no MPI launcher started this process "
                                        "(launch with `mpirun -np N python3 ...`)")
            return info["nodes"], info["rank"]
        import torch.distributed as dist
        if not dist.is_initialized():
            dist.init_process_group(backend="gloo")
        return dist.get_world_size(), dist.get_rank()

    def _make_spec(self, options, n, kind):
        gossip = gossip_options()
        for k in options:
            if k in _LOOP_OWNS or (k in _core.run_options() and k not in gossip):
                owner = _LOOP_OWNS.get(k, "your training loop's")
                raise TypeError(f"GossipOptimizer: {k}= is {owner}, not the gossip's (gossip_options() lists what "
                                "GossipOptimizer takes)")
        spec = _core.RunSpec(**options)  # unknown keywords: TypeError with the closest one
        processes = 1 if kind == "loopback" else n
        spec.set(nodes=n, transport="mpi" if processes > 1 else "inprocess")
        if kind == "torch":
            if not spec.lockstep:
                raise _core.ConfigError(f"GossipOptimizer under torchrun runs lockstep rounds only, got policy "
                                        f"{spec.policy}: launch with mpirun for --staleness or --overlap")
            if spec.drop_value > 0:
                raise _core.ConfigError("GossipOptimizer under torchrun injects no message loss (drop_probability); "
                                        "launch with mpirun or use a Loopback")
        for w in spec.validate(processes):
            warnings.warn(w, stacklevel=3)
        return spec

    def _make_run(self, kind, n):
        if kind == "mpi":
            self._mpi = _core.MpiNetwork.from_spec(self._spec)  # its timeout, loss, seed and policy
            if self._mpi.ranks != n:
                raise _core.ConfigError(f"GossipOptimizer under mpirun runs one node per rank: {self._mpi.ranks} ranks")
            self.node = self._mpi.first_node
            self._mpi.agree(self._spec.fingerprint(self._flat.numel(), every_rank=True))
            return _core.GossipRun(self._spec, [self._host], self._mpi, self._offsets)
        self._exchange_frames = _TorchFrames(self.node, self._spec["mpi_timeout"])
        self._exchange = _core.ExchangeNetwork(n, self.node, self._exchange_frames)
        return _core.GossipRun(self._spec, [self._host], self._exchange, self._offsets)

    # --- the optimizer: its groups, state and defaults are the wrapped one's (lr schedulers work) ---
    param_groups = property(lambda self: self.optimizer.param_groups)
    state = property(lambda self: self.optimizer.state)
    defaults = property(lambda self: self.optimizer.defaults)

    def zero_grad(self, set_to_none=None):
        """The wrapped optimizer's zero_grad (with its own default where set_to_none is not given)."""
        if set_to_none is None:
            self.optimizer.zero_grad()
        else:
            self.optimizer.zero_grad(set_to_none=set_to_none)

    def add_param_group(self, param_group):
        raise _core.ConfigError("GossipOptimizer: parameters are fixed when it is made (their flat buffer is "
                                "gossiped); add the group to the optimizer before wrapping it")

    def step(self, closure=None):
        """The wrapped optimizer's step, then one gossip round; returns the closure's loss."""
        self._check_bound()
        run = self._current()
        if run is not None and run.finished:
            raise _core.ConfigError(f"GossipOptimizer.step: node {self.node} ran finish() at round {run.round}; a run "
                                    "that trains on needs a new GossipOptimizer")
        if self._grads is not None:
            if closure is not None:
                raise _core.ConfigError("GossipOptimizer(tracking=True).step: a closure would compute the gradients "
                                        "after the tracker replaced them; call backward() before step(), and step() "
                                        "without a closure")
            self._track()
        loss = self.optimizer.step(closure)
        self._gossip("step")
        return loss

    def _track(self):
        """Gradient tracking: this step's gradients (None: zero) into the flat buffer, the tracker
        y + g(t) - g(t-1) in their place, and each parameter's .grad a view of it, which the
        wrapped optimizer steps along."""
        g = self._grads
        with torch.no_grad():
            g[self._param_elements:].zero_()  # a buffer has no gradient
            for p, at in zip(self._params, self._offsets):
                view = g[at:at + p.numel()]
                if p.grad is None:
                    view.zero_()
                elif p.grad.data_ptr() != view.data_ptr():  # a view of it already after the last step
                    view.copy_((p.grad.to_dense() if p.grad.is_sparse else p.grad).reshape(-1))
        # a tracking run is lockstep and gossips over a graph: every node has a run of its own
        if self._staged:
            self._host_grads.copy_(g)
        self._run.track([self._host_grads])
        if self._staged:
            g.copy_(self._host_grads)
        for p, at in zip(self._params, self._offsets):
            view = g[at:at + p.numel()].view_as(p)
            if p.grad is None or p.grad.data_ptr() != view.data_ptr():
                p.grad = view

    def finish(self):
        """The final rounds (SCSP's, or choco-push's given final_rounds; no local step) and every
        message in flight mixed; the parameters hold the node's final model. Every node calls it.
        Returns the final rounds run."""
        self._gossip("finish")
        if self._mpi is not None:
            self._mpi.finish()
        return self._current().final_rounds

    def _gossip(self, op):
        self._to_host()
        try:
            if self._run is None:  # a Loopback that steps every node at once
                self._net._arrive(self.node, op)
            elif op == "step":
                self._run.step([self._host])
            else:
                self._run.finish([self._host])
        finally:  # a refused round changed nothing: the device keeps the optimizer's step
            self._to_device()

    def _current(self):
        return self._run if self._run is not None else self._net._run

    def _check_bound(self):
        for p in self._params + self._buffers:
            if p.data.data_ptr() < self._flat.data_ptr() or p.data.data_ptr() >= self._flat.data_ptr() + 4 * self._flat.numel():
                raise _core.ConfigError("GossipOptimizer: a parameter or buffer no longer lives in the flat buffer (was "
                                        "the model moved with .to(), .cuda() or load_state_dict(assign)?); wrap a new "
                                        "optimizer")

    def average(self):
        """The averaged model: the mean of every node's de-biased model as it stands (no round),
        sum_i (xh_i / n) in float32 added in node order, as a flat CPU tensor (the trained
        parameters, then the mixed buffers, in the order of the model's), summed as sparsepush-train
        sums the averaged model it evaluates, and the same bits under a Loopback, mpirun and torchrun.
        Collective: every node calls it at the same step. stats()["average_bytes"] counts what it
        sent (none over a Loopback, in one process; over mpirun and torchrun each node but the last
        sends the model's d float32 once and the last sends the average to every other node)."""
        self._check_bound()
        self._to_host()
        if isinstance(self._net, Loopback):
            return self._net._average(self.node)
        if self._mpi is not None:
            avg = torch.from_numpy(self._mpi.ordered_average([self._host]))
            self._average_bytes += chain_bytes(avg.numel(), self.node, self._spec["nodes"])
            return avg
        avg, sent = self._exchange_frames.ordered_average(self._host, self._spec["nodes"])
        self._average_bytes += sent
        return avg

    @contextlib.contextmanager
    def averaged(self):
        """with opt.averaged(): ... runs its body with the averaged model (average()) in this node's
        parameters and mixed buffers, for evaluation, and puts the node's own model back after.
        Collective, as average(). The optimizer must not step inside."""
        avg = self.average()
        own = self._flat.clone()
        with torch.no_grad():
            self._flat.copy_(avg)
        try:
            yield self
        finally:
            with torch.no_grad():
                self._flat.copy_(own)

    def stats(self):
        """{"node", "nodes", "rounds", "weight", "bytes_sent", "messages_sent", "messages_dropped",
        "max_staleness", "final_rounds", "process_bytes_sent", "average_bytes"}: bytes_sent and
        messages_sent are this node's gossip; messages_dropped, max_staleness and
        process_bytes_sent its run's (all nodes when a Loopback steps every node at once);
        average_bytes what this node's average() calls sent; state_bytes what the gossip keeps for
        this node beside its parameters (numerator, residuals or link references, trackers, a
        scratch copy; the host mirror when staged)."""
        run = self._current()
        k = 0 if self._run is not None else self.node
        if run is None:
            out = {"node": self.node, "nodes": self._spec["nodes"], "rounds": 0, "weight": 1.0, "bytes_sent": 0,
                   "messages_sent": 0, "messages_dropped": 0, "max_staleness": 0, "final_rounds": 0,
                   "process_bytes_sent": 0}
        else:
            out = {"node": self.node, "nodes": self._spec["nodes"], "rounds": run.round, "weight": run.weight(k),
                   "bytes_sent": run.node_bytes_sent(k), "messages_sent": run.node_messages_sent(k),
                   "messages_dropped": run.messages_dropped, "max_staleness": run.max_staleness,
                   "final_rounds": run.final_rounds, "process_bytes_sent": run.bytes_sent}
        out["average_bytes"] = self._average_bytes
        staged = 4 * self._host.numel() * (2 if self._grads is not None else 1) if self._staged else 0
        out["state_bytes"] = (run.node_state_bytes(k) if run is not None else 0) + staged
        return out

    # --- state -----------------------------------------------------------------------------------
    def state_dict(self):
        """The wrapped optimizer's state_dict plus "sparsepush": the gossip's state (round, x, u,
        error-feedback residuals, the policy's expectations, the byte ledger), this node's model and
        the settings. Every node calls it at the same step, as a step: a waiting policy mixes what
        is in flight first (over a Loopback the state holds every node's)."""
        self._to_host()
        if self._run is None:
            state = self._net._state(self.node)  # every node calls it: a round of its own
        else:
            state = self._run.save()
            self._run.write_models([self._host])  # a waiting policy's drain may have changed them
        self._to_device()
        sd = self.optimizer.state_dict()
        sd["sparsepush"] = {"gossip": state, "model": self._host.clone(), "node": self.node,
                            "nodes": self._spec["nodes"], "settings": self._settings()}
        return sd

    def _settings(self):
        """The settings a state is saved with and restored under: the library's fingerprint (the
        numbers the gossip computes with; local settings such as threads are not among them)."""
        return self._spec.fingerprint(self._flat.numel())

    def load_state_dict(self, state_dict):
        sd = dict(state_dict)
        mine = sd.pop("sparsepush", None)
        if mine is None:
            raise _core.ConfigError("GossipOptimizer.load_state_dict: the state has no 'sparsepush' entry (it is a "
                                    "plain optimizer's, not a GossipOptimizer's)")
        if mine["model"].numel() != self._flat.numel():
            raise _core.SizeError(f"GossipOptimizer.load_state_dict: the state's model has {mine['model'].numel()} "
                                  f"parameters, this one {self._flat.numel()}")
        if mine["settings"] != self._settings():
            raise _core.ConfigError("GossipOptimizer.load_state_dict: the state was saved with other settings: "
                                    + _settings_diff(mine["settings"], self._settings()))
        if mine["node"] != self.node:
            raise _core.ConfigError(f"GossipOptimizer.load_state_dict: the state is node {mine['node']}'s, this is node "
                                    f"{self.node}")
        if self._run is None:
            self._net._load(mine["gossip"])
        else:
            self._run.restore(mine["gossip"])
        self.optimizer.load_state_dict(sd)
        with torch.no_grad():
            self._host.copy_(mine["model"])
            self._to_device()

    def __getstate__(self):
        raise TypeError("GossipOptimizer cannot be pickled or deep-copied: it holds this node's live network and "
                        "gossip state; save and load its state_dict() instead (torch.save works on it)")

    def __repr__(self):
        return f"GossipOptimizer(node {self.node} of {self._spec['nodes']}, {self._spec!r}, {self.optimizer!r})"
