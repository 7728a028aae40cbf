# Gossip averaging over an encoded loopback, in float64: every de-biased model reaches the mean of
# the initial vectors to 1e-12, and push-sum's invariants (sum x, sum u = n) hold at every round.
import threading

import numpy as np
import pytest

import sparsepush
from conftest import run_threads


@pytest.mark.parametrize("spec", ["exponential", "directed-ring", "time-varying-ring"])
def test_averaging_to_1e12_over_an_encoded_loopback(spec, rng):
    n, d = 8, 257
    xs = [rng.standard_normal(d) * (i + 1) for i in range(n)]
    mean = np.mean(np.stack(xs), axis=0)  # independent: numpy's mean of the inputs
    nodes = [sparsepush.PushSumNode(x, i) for i, x in enumerate(xs)]
    net = sparsepush.LoopbackNetwork(n, encoded=True)
    sched = sparsepush.parse_schedule(spec, n)
    comp = sparsepush.parse_compressor("identity")
    rounds = 0
    while rounds < 400:
        run_threads(nodes, net, sched, comp, 10, start=rounds)
        rounds += 10
        # invariants after every batch of rounds
        np.testing.assert_allclose(np.sum([nd.x for nd in nodes], axis=0), n * mean, rtol=0, atol=1e-10)
        assert sum(nd.weight for nd in nodes) == pytest.approx(n, abs=1e-12)
        if max(np.max(np.abs(nd.model() - mean)) for nd in nodes) < 1e-12:
            break
    assert max(np.max(np.abs(nd.model() - mean)) for nd in nodes) < 1e-12, f"{spec}: not averaged after {rounds} rounds"
    assert net.total_messages() > 0 and net.total_bytes() > 0


def test_sparse_push_with_feedback_keeps_the_mass(rng):
    # top-k with error feedback at eta < 1: column-stochastic mixing keeps sum_i x_i and
    # sum_i u_i = n (docs/design/algorithms.md, Sparse-Push invariants), whatever C dropped
    n, d, eta = 6, 500, 0.5
    xs = [rng.standard_normal(d) for _ in range(n)]
    total = np.sum(xs, axis=0)
    nodes = [sparsepush.PushSumNode(x, i, seed=3) for i, x in enumerate(xs)]
    net = sparsepush.LoopbackNetwork(n)
    run_threads(nodes, net, sparsepush.parse_schedule("exponential", n), sparsepush.parse_compressor("top-k:0.1"), 20,
                eta=eta)
    np.testing.assert_allclose(np.sum([nd.x for nd in nodes], axis=0), total, rtol=0, atol=1e-11)
    assert sum(nd.weight for nd in nodes) == pytest.approx(n, abs=1e-12)
    assert any(np.any(nd.residual != 0) for nd in nodes)  # top-k did drop something


def test_fresh_residual_starts_from_zero(rng):
    # after a compressed round (residual e != 0), a round with fresh_residual=True must give the
    # bits of the same round at nodes whose residual is 0 (complete graph of 2: u stays 1)
    d = 300
    sched, comp = sparsepush.parse_schedule("complete", 2), sparsepush.parse_compressor("top-k:0.1")
    a = [rng.standard_normal(d) for _ in range(2)]
    na = [sparsepush.PushSumNode(x, i, seed=2) for i, x in enumerate(a)]
    run_threads(na, sparsepush.LoopbackNetwork(2), sched, comp, 1)
    assert all(np.any(nd.residual != 0) for nd in na)
    b = [x.copy() for x in a]
    nb = [sparsepush.PushSumNode(x, i, seed=2) for i, x in enumerate(b)]
    assert all(nd.weight == 1.0 for nd in na)
    errors = []

    def fresh(i, net):
        try:
            na[i].round(1, sched, comp, net.endpoint(i), fresh_residual=True)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    net = sparsepush.LoopbackNetwork(2)
    ths = [threading.Thread(target=fresh, args=(i, net)) for i in range(2)]
    [th.start() for th in ths]
    [th.join() for th in ths]
    assert not errors
    run_threads(nb, sparsepush.LoopbackNetwork(2), sched, comp, 1, start=1)
    for i in range(2):
        assert a[i].tobytes() == b[i].tobytes()
        assert na[i].residual.tobytes() == nb[i].residual.tobytes()
