# sparsepush.torch.GossipOptimizer over a Loopback (N nodes as threads): a model with two param
# groups and a frozen parameter against an independent computation (each node's own torch SGD step,
# then the average SGP takes on the complete graph); the flat buffer the parameters view; SCSP's
# finish(); stats(); a state_dict round trip through torch.save that continues bit for bit; an lr
# scheduler; and every refusal, with its message.
import io
import os
import threading

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import sparsepush  # noqa: E402
import sparsepush.torch as spt  # noqa: E402
from threads_helper import in_threads  # noqa: E402

torch.set_num_threads(1)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(6, 8)
        self.head = torch.nn.Linear(8, 3)
        self.scale = torch.nn.Parameter(torch.ones(3), requires_grad=False)  # frozen

    def forward(self, x):
        return self.head(torch.relu(self.body(x))) * self.scale


_seeding = threading.Lock()  # torch.manual_seed is global: threads take turns


def make(seed=0):
    with _seeding:
        torch.manual_seed(seed)
        return Net()


def optimizer_of(model, lr_head=0.05):
    return torch.optim.SGD([{"params": model.body.parameters()},
                            {"params": list(model.head.parameters()) + [model.scale], "lr": lr_head}],
                           lr=0.1, momentum=0.5)


def batch(i, t):
    g = torch.Generator().manual_seed(100 * i + t)
    x = torch.randn(8, 6, generator=g) + 0.5 * i
    return x, (x.sum(1) > 0).long() + (x[:, 0] > 1).long()


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters() if p.requires_grad])


def test_two_groups_and_a_frozen_parameter_against_torch_steps_and_an_average():
    n = 4
    net = spt.Loopback(n)
    # the reference: each node's own torch step from the same start, then their average
    expected = []
    for i in range(n):
        m = make(i)
        o = optimizer_of(m)
        x, y = batch(i, 0)
        F.cross_entropy(m(x), y).backward()
        o.step()
        expected.append(flat(m))
    mean = sum(expected) / n

    def node(i):
        m = make(i)  # different initial models: SGP on the complete graph averages them
        frozen = m.scale.detach().clone()
        opt = spt.GossipOptimizer(optimizer_of(m), network=net, node=i, model=m, algorithm="sgp", schedule="complete")
        base, size = opt._flat.data_ptr(), opt._flat.numel() * 4
        for p in m.parameters():  # trained parameters are views of the flat buffer, the frozen one is not
            inside = base <= p.data_ptr() < base + size
            assert inside == p.requires_grad
        x, y = batch(i, 0)
        opt.zero_grad()
        F.cross_entropy(m(x), y).backward()
        opt.step()
        assert torch.equal(m.scale, frozen)
        return flat(m), opt.stats()

    got = in_threads(n, node)
    for i, (f, st) in enumerate(got):
        assert torch.allclose(f, mean, atol=1e-6), f"node {i}: {float((f - mean).abs().max())}"
        assert st["rounds"] == 1 and st["node"] == i and st["nodes"] == n
        assert st["weight"] == pytest.approx(1.0) and st["bytes_sent"] > 0


def train_nodes(net, n, steps, options, states=None, start=0, finish=False, scheduler=False, save_after=None):
    """Each node's model after `steps` steps from `start` (after loading states[i] if given) and
    its state_dict (saved through torch.save). save_after: also take a state_dict after that many
    steps (a waiting policy mixes what is in flight there, as the resumed run's save did)."""
    def node(i):
        m = make(0)
        opt = spt.GossipOptimizer(optimizer_of(m), network=net, node=i, model=m, **options)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5) if scheduler else None
        if states is not None:
            opt.load_state_dict(torch.load(io.BytesIO(states[i])))
            if sched is not None:
                sched.last_epoch = start
        for t in range(start, start + steps):
            x, y = batch(i, t)
            opt.zero_grad()
            F.cross_entropy(m(x), y).backward()
            opt.step()
            if sched is not None:
                sched.step()
            if save_after is not None and t + 1 - start == save_after:
                opt.state_dict()
        rounds = opt.finish() if finish else None
        buf = io.BytesIO()
        torch.save(opt.state_dict(), buf)
        return flat(m), buf.getvalue(), opt.stats(), rounds
    return in_threads(n, node)


@pytest.mark.parametrize("options", [
    {"algorithm": "sp", "compressor": "top-k:0.1", "eta": 0.3, "schedule": "exponential"},
    {"algorithm": "scsp", "compressor": "top-k:0.1", "eta": 0.3},
    {"algorithm": "sp", "compressor": "top-k:0.1", "eta": 0.3, "staleness": "2"},
    {"algorithm": "choco", "compressor": "top-k:0.2"},
    {"algorithm": "choco-push", "compressor": "top-k:0.2", "schedule": "random:1"},  # a reference per link
    {"algorithm": "choco-push", "compressor": "top-k:0.2", "schedule": "random:1", "staleness": "2"},  # links in order
    {"algorithm": "choco-push", "compressor": "top-k:0.2", "tracking": True},  # the trackers and last gradients
])
def test_state_dict_round_trip_continues_bit_for_bit(options):
    n = 3
    whole = train_nodes(spt.Loopback(n), n, 8, options, scheduler=True, save_after=4)
    first = train_nodes(spt.Loopback(n), n, 4, options, scheduler=True)
    resumed = train_nodes(spt.Loopback(n), n, 4, options, states=[s for _, s, _, _ in first], start=4, scheduler=True)
    for i in range(n):
        assert torch.equal(whole[i][0], resumed[i][0]), f"node {i}"
        assert whole[i][2]["bytes_sent"] == resumed[i][2]["bytes_sent"]
        assert whole[i][2]["rounds"] == resumed[i][2]["rounds"] == 8


@pytest.mark.parametrize("options", [
    {"algorithm": "sp", "compressor": "top-k:0.1", "eta": 0.3},  # each node its own GossipRun
    {"algorithm": "sp", "compressor": "top-k:0.1", "eta": 0.3, "staleness": "2"},  # one run of every node
])
def test_a_state_saved_with_one_thread_count_restores_with_another(options):
    # a state is saved under the library's fingerprint, which leaves local settings (threads) out
    n = 3
    whole = train_nodes(spt.Loopback(n), n, 5, dict(options, threads=1), save_after=4)  # a save mixes what is in flight
    first = train_nodes(spt.Loopback(n), n, 4, dict(options, threads=1))
    resumed = train_nodes(spt.Loopback(n), n, 1, dict(options, threads=2), states=[s for _, s, _, _ in first], start=4)
    for i in range(n):
        assert torch.equal(whole[i][0], resumed[i][0]), f"node {i}"
        assert whole[i][2]["rounds"] == resumed[i][2]["rounds"] == 5


def test_scsp_finish_brings_the_nodes_together():
    n = 4
    out = train_nodes(spt.Loopback(n), n, 10, {"algorithm": "scsp", "compressor": "top-k:0.05", "eta": 0.2}, finish=True)
    models = torch.stack([f for f, _, _, _ in out])
    assert out[0][3] > 0 and out[0][2]["final_rounds"] == out[0][3]
    assert float((models - models.mean(0)).abs().max()) < 1e-4
    assert out[0][2]["rounds"] == 10 + out[0][3]


@pytest.mark.parametrize("final,policy", [(None, None), ("auto", None), ("auto", "2")])
def test_choco_push_finish_runs_final_rounds_only_when_given(final, policy):
    n = 4
    opts = {"algorithm": "choco-push", "compressor": "top-k:0.05"}
    if final:
        opts["final_rounds"] = final
    if policy:  # the drain before the final rounds' end leaves nothing in flight
        opts["staleness"] = policy
    out = train_nodes(spt.Loopback(n), n, 10, opts, finish=True)
    models = torch.stack([f for f, _, _, _ in out])
    spread = float((models - models.mean(0)).abs().max())
    if final:  # 4 nodes of the time-varying ring average exactly in 2 rounds of whole models
        assert out[0][3] == 2 and out[0][2]["final_rounds"] == 2
        assert spread < 1e-5
    else:
        assert out[0][3] == 0
        assert spread > 1e-3


def expect(exc, match, fn):
    with pytest.raises(exc, match=match):
        fn()


def test_refusals_name_what_was_wrong():
    m = make()
    net = spt.Loopback(2)
    sgd = lambda params: torch.optim.SGD(params, lr=0.1)  # noqa: E731
    # parameters of the wrong kind, named
    meta = torch.nn.Linear(2, 2).to("meta")
    expect(sparsepush.ConfigError, r"parameter weight \(shape \(2, 2\)\) is on meta: it holds no values to train",
           lambda: spt.GossipOptimizer(sgd(meta.parameters()), network=net, node=0, model=meta))
    dbl = torch.nn.Linear(2, 2).double()
    expect(sparsepush.ConfigError, r"parameter weight .* is torch.float64: GossipOptimizer trains float32",
           lambda: spt.GossipOptimizer(sgd(dbl.parameters()), network=net, node=0, model=dbl))
    half = torch.nn.Linear(2, 2).half()
    expect(sparsepush.ConfigError, r"param_groups\[0\]\['params'\]\[0\] \(shape \(2, 2\)\) is torch.float16",
           lambda: spt.GossipOptimizer(sgd(half.parameters()), network=net, node=0))
    frozen = torch.nn.Linear(2, 2).requires_grad_(False)
    expect(sparsepush.ConfigError, "no parameter to train",
           lambda: spt.GossipOptimizer(sgd(frozen.parameters()), network=net, node=0))
    expect(TypeError, "wraps a torch.optim.Optimizer", lambda: spt.GossipOptimizer(m, network=net, node=0))
    # options: the training loop's, unknown, bad values (the library's rules)
    expect(TypeError, "lr= is the wrapped optimizer's",
           lambda: spt.GossipOptimizer(sgd(make().parameters()), network=net, node=0, lr=0.1))
    expect(TypeError, "epochs= is your training loop's",
           lambda: spt.GossipOptimizer(sgd(make().parameters()), network=net, node=0, epochs=2))
    expect(TypeError, "did you mean 'compressor'",
           lambda: spt.GossipOptimizer(sgd(make().parameters()), network=net, node=0, compresor="top-k:0.1"))
    expect(sparsepush.ConfigError, r"top-k:1.5.*outside \(0, 1\]",
           lambda: spt.GossipOptimizer(sgd(make().parameters()), network=net, node=0, compressor="top-k:1.5"))
    expect(sparsepush.ConfigError, "eta",
           lambda: spt.GossipOptimizer(sgd(make().parameters()), network=net, node=0, eta=1.5))
    expect(sparsepush.ConfigError, "symmetric",
           lambda: spt.GossipOptimizer(sgd(make().parameters()), network=spt.Loopback(4), node=0, algorithm="dpsgd",
                                       schedule="directed-ring"))
    expect(sparsepush.ConfigError, "--tracking: runs lockstep rounds only",
           lambda: spt.GossipOptimizer(sgd(make().parameters()), network=spt.Loopback(2), node=0, algorithm="sgp",
                                       tracking=True, staleness=2))
    # the network and the node
    expect(sparsepush.ConfigError, r"node= in \[0, 2\), got 2",
           lambda: spt.GossipOptimizer(sgd(make().parameters()), network=net, node=2))
    expect(sparsepush.ConfigError, "network must be None, 'mpi', 'torch' or a Loopback",
           lambda: spt.GossipOptimizer(sgd(make().parameters()), network="tcp"))
    env = {k: os.environ.pop(k) for k in list(os.environ)
           if k in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "TORCHELASTIC_RUN_ID", "LOCAL_RANK")}
    try:
        expect(sparsepush.ConfigError, "none was found",
               lambda: spt.GossipOptimizer(sgd(make().parameters())))
    finally:
        os.environ.update(env)
    expect(sparsepush.ConfigError, "positive int", lambda: spt.Loopback(0))
    # a node joined twice, a node of other options or size
    a = make()
    spt.GossipOptimizer(sgd(a.parameters()), network=net, node=0)
    expect(sparsepush.ConfigError, "node 0 has a GossipOptimizer already",
           lambda: spt.GossipOptimizer(sgd(make().parameters()), network=net, node=0))
    expect(sparsepush.ConfigError, "differ from node 0",
           lambda: spt.GossipOptimizer(sgd(make().parameters()), network=net, node=1, compressor="top-k:0.5"))
    small = torch.nn.Linear(2, 2)
    expect(sparsepush.SizeError, "node 1's model has 6 parameters",
           lambda: spt.GossipOptimizer(sgd(small.parameters()), network=net, node=1))
    # state that is not ours
    def saved(i):
        m = make()
        o = spt.GossipOptimizer(sgd(m.parameters()), network=other_net, node=i, compressor="top-k:0.5")
        return o.state_dict()
    other_net = spt.Loopback(2)
    states = in_threads(2, saved)
    b = make()
    opt = spt.GossipOptimizer(sgd(b.parameters()), network=spt.Loopback(2), node=0)
    expect(sparsepush.ConfigError, "no 'sparsepush' entry", lambda: opt.load_state_dict(sgd(b.parameters()).state_dict()))
    expect(sparsepush.ConfigError, "was saved with", lambda: opt.load_state_dict(states[0]))
    expect(sparsepush.ConfigError, "add the group to the optimizer before",
           lambda: opt.add_param_group({"params": [torch.nn.Parameter(torch.zeros(2))]}))
    expect(sparsepush.ConfigError, "at least 2",
           lambda: spt.GossipOptimizer(sgd(make().parameters()), network=spt.Loopback(1), node=0))


@pytest.mark.parametrize("options,message", [
    ({}, r"round 0: node 0 waited 1000 ms for the envelopes of node\(s\) 1"),  # each node on its own
    ({"staleness": 2}, "node 0's step\\(\\) waited 1 s for the other nodes"),  # the Loopback's rounds
])
def test_a_node_that_stops_does_not_hang_the_others(options, message):
    net = spt.Loopback(2, timeout=1.0)
    m = make()
    opt = spt.GossipOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), network=net, node=0, **options)
    spt.GossipOptimizer(torch.optim.SGD(make().parameters(), lr=0.1), network=net, node=1, **options)  # never steps
    x, y = batch(0, 0)
    F.cross_entropy(m(x), y).backward()
    expect(sparsepush.TransportError, message, opt.step)


def test_a_nan_gradient_is_refused_naming_the_node_and_round_and_nothing_changes():
    n = 2
    net = spt.Loopback(n, timeout=2.0)

    def node(i):
        m = make()
        opt = spt.GossipOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), network=net, node=i)
        for p in m.parameters():
            p.grad = torch.full_like(p, float("nan") if i == 1 else 0.0)
        with pytest.raises(sparsepush.Error) as e:
            opt.step()
        return e.value, opt.stats()
    (e0, s0), (e1, s1) = in_threads(n, node)
    # node 1 refuses its NaN model before it sends; node 0, waiting for node 1's envelope, times out
    assert isinstance(e1, sparsepush.NonFiniteError) and "round 0" in str(e1) and "node 1" in str(e1), str(e1)
    assert isinstance(e0, sparsepush.TransportError) and "node(s) 1" in str(e0), str(e0)
    assert s1["rounds"] == 0 and s1["bytes_sent"] == 0


def test_gossip_options_are_the_librarys_gossip_fields():
    opts = spt.gossip_options()
    for k in ("algorithm", "compressor", "schedule", "eta", "final_rounds", "staleness", "overlap", "drop_probability"):
        assert k in opts and opts[k]["option"] == "--" + k.replace("_", "-")
    for k in ("lr", "batch", "epochs", "model", "data", "nodes"):
        assert k not in opts


def test_a_step_after_finish_is_refused_before_the_optimizer_moves():
    net = spt.Loopback(2)

    def node(i):
        m = make()
        opt = spt.GossipOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), network=net, node=i, algorithm="scsp")
        x, y = batch(i, 0)
        F.cross_entropy(m(x), y).backward()
        opt.step()
        opt.finish()
        before = flat(m).clone()
        F.cross_entropy(m(x), y).backward()
        with pytest.raises(sparsepush.ConfigError, match=f"node {i} ran finish\\(\\) at round"):
            opt.step()
        assert torch.equal(flat(m), before)
    in_threads(2, node)
