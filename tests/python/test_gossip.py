# Gossip averaging over an encoded loopback, in float64: every de-biased model reaches the mean of
# the initial vectors to 1e-12, and push-sum's invariants (sum x, sum u = n) hold at every round.
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
    # sum_i u_i = n (ALGORITHMS.md, Sparse-Push invariants), whatever C dropped
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
