# Gradient tracking in sparsepush.torch.GossipOptimizer (tracking=True), N nodes as threads over a
# Loopback: on a heterogeneous least-squares problem (node i's own data, full-batch gradients) a
# plain torch SGD loop reaches the minimizer of the sum, which numpy's lstsq gives, with a constant
# step, where the same loop without tracking keeps each node near its own data; the parameters'
# .grad the optimizer steps along are trackers that sum to the nodes' gradients; a closure is
# refused and a NaN gradient named.
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import sparsepush  # noqa: E402
import sparsepush.torch as spt  # noqa: E402
from threads_helper import in_threads  # noqa: E402

torch.set_num_threads(1)

N, D, M = 4, 6, 20


def problem():
    """Node i's A_i (M x D) and b_i = A_i (1 + z_i) + noise, and argmin sum_i ||A_i w - b_i||^2."""
    rng = np.random.default_rng(7)
    a = [rng.standard_normal((M, D)) for _ in range(N)]
    b = [ai @ (1.0 + rng.standard_normal(D)) + 0.1 * rng.standard_normal(M) for ai in a]
    w, *_ = np.linalg.lstsq(np.vstack(a), np.concatenate(b), rcond=None)
    return a, b, w


def train(options, steps, lr=0.05):
    """Every node's final weights after `steps` steps of plain SGD on its own data (a Linear layer
    and a second parameter: the tracker crosses parameters), the gradients its backward() gave and
    the .grad the optimizer stepped along (the trackers), step by step, and its stats()."""
    a, b, _ = problem()
    net = spt.Loopback(N, timeout=60)

    def node(i):
        lin = torch.nn.Linear(D - 2, 1, bias=False)
        head = torch.nn.Parameter(torch.zeros(2))
        with torch.no_grad():
            lin.weight.zero_()
        opt = spt.GossipOptimizer(torch.optim.SGD([lin.weight, head], lr=lr), network=net, node=i, **options)
        x = torch.tensor(a[i], dtype=torch.float32)
        y = torch.tensor(b[i], dtype=torch.float32)
        weights = lambda: torch.cat([lin.weight.reshape(-1), head])  # noqa: E731
        grad = lambda: torch.cat([lin.weight.grad.reshape(-1), head.grad]).double().numpy().copy()  # noqa: E731
        gs, ys = [], []
        for _ in range(steps):
            opt.zero_grad()
            (((x @ weights()) - y) ** 2).mean().mul(0.5).backward()
            gs.append(grad())
            opt.step()
            ys.append(grad())
        return weights().detach().double().numpy(), gs, ys, opt.stats()
    return in_threads(N, node)


@pytest.mark.parametrize("options", [
    {"algorithm": "sgp", "schedule": "exponential"},
    {"algorithm": "choco-push", "compressor": "top-k:0.34", "consensus_step": 0.6, "schedule": "erdos-renyi:0.5"},
])
def test_tracking_reaches_the_minimizer_of_the_sum_where_the_plain_loop_keeps_a_bias(options):
    *_, w = problem()
    tracked = train(dict(options, tracking=True), 1500)
    plain = train(options, 1500)
    err = lambda out: max(np.linalg.norm(m - w) / np.linalg.norm(w) for m, *_ in out)  # noqa: E731
    assert err(tracked) < 1e-4, err(tracked)
    assert err(plain) > 1e-2, err(plain)
    # the trackers' messages are counted: more bytes than the plain run's
    assert all(t[3]["bytes_sent"] > p[3]["bytes_sent"] for t, p in zip(tracked, plain))


def test_the_optimizer_steps_along_trackers_that_sum_to_the_nodes_gradients():
    # column-stochastic mixing keeps sum_i y_i(t) == sum_i g_i(t), round after round, while each
    # node's tracker differs from its own gradient once the trackers have mixed
    out = train({"algorithm": "sgp", "schedule": "exponential", "tracking": True}, 30)
    for t in range(30):
        g = sum(o[1][t] for o in out)
        y = sum(o[2][t] for o in out)
        assert np.allclose(y, g, rtol=1e-5, atol=1e-5), (t, np.abs(y - g).max())
    assert np.array_equal(out[0][1][0], out[0][2][0])  # round 0: y_i = g_i
    assert np.abs(out[0][2][5] - out[0][1][5]).max() > 1e-3


def test_a_closure_is_refused_and_a_nan_gradient_is_named():
    net = spt.Loopback(2, timeout=5)

    def node(i):
        lin = torch.nn.Linear(3, 1)
        opt = spt.GossipOptimizer(torch.optim.SGD(lin.parameters(), lr=0.1), network=net, node=i, algorithm="sgp",
                                  tracking=True)
        with pytest.raises(sparsepush.ConfigError, match="call backward\\(\\) before step\\(\\), and step\\(\\) without a closure"):
            opt.step(lambda: 0.0)
        lin.weight.grad = torch.full_like(lin.weight, float("nan") if i == 1 else 0.0)
        lin.bias.grad = torch.zeros_like(lin.bias)
        before = lin.weight.detach().clone()
        if i == 1:
            with pytest.raises(sparsepush.NonFiniteError, match="node 1, round 0"):
                opt.step()
            assert torch.equal(lin.weight.detach(), before)  # the optimizer did not step
            return opt.stats()["rounds"]
        return None
    assert in_threads(2, node)[1] == 0
