# PushSumGroup: in lockstep it gives the bits of per-node rounds on threads; with a wait policy
# (overlap, bounded staleness, asynchronous) a drain leaves push-sum's invariants exact.
import numpy as np
import pytest

import sparsepush
from conftest import run_threads


def inputs(rng, n, d, rounds):
    return [rng.standard_normal(d) for _ in range(n)], rng.standard_normal((rounds, n, d))


def test_lockstep_group_equals_threaded_nodes(rng):
    n, d, rounds = 5, 400, 6
    xs0, dirs = inputs(rng, n, d, rounds)
    sched, comp = sparsepush.parse_schedule("exponential", n), sparsepush.parse_compressor("top-k:0.1")
    a = [x.copy() for x in xs0]
    nodes = [sparsepush.PushSumNode(x, i, seed=9) for i, x in enumerate(a)]
    run_threads(nodes, sparsepush.LoopbackNetwork(n), sched, comp, rounds, eta=0.3, directions=dirs, gamma=0.01)
    b = [x.copy() for x in xs0]
    g = sparsepush.PushSumGroup(b, seed=9, threads=2)
    net = sparsepush.LoopbackNetwork(n, encoded=False)
    for t in range(rounds):
        g.round(t, sched, comp, net, eta=0.3, directions=list(dirs[t]), gamma=0.01)
    for i in range(n):
        assert a[i].tobytes() == b[i].tobytes()
        assert nodes[i].weight == g.weight(i)
        np.testing.assert_array_equal(g.x(i), b[i])


@pytest.mark.parametrize("policy", ["overlap", "staleness:2", "asynchronous"])
def test_deferred_group_drains_to_exact_mass(policy, rng):
    n, d, rounds = 6, 200, 12
    xs0, dirs = inputs(rng, n, d, rounds)
    xs = [x.copy() for x in xs0]
    g = sparsepush.PushSumGroup(xs, seed=1, policy=policy)
    assert g.policy == sparsepush.check_policy(policy)
    net = sparsepush.LoopbackNetwork(n, max_delay=2 if policy != "overlap" else 0, seed=3)
    sched, comp = sparsepush.parse_schedule("exponential", n), sparsepush.parse_compressor("identity")
    for t in range(rounds):
        g.round(t, sched, comp, net, eta=1.0)
    g.drain(sched, net)
    np.testing.assert_allclose(np.sum(xs, axis=0), np.sum(xs0, axis=0), rtol=0, atol=1e-11)
    assert sum(g.weight(i) for i in range(n)) == pytest.approx(n, abs=1e-12)
    if policy != "lockstep":
        assert g.max_staleness >= 1


def test_group_checks():
    with pytest.raises(sparsepush.ConfigError, match="threads"):
        sparsepush.PushSumGroup([np.ones(3)], threads=0)
    with pytest.raises(sparsepush.ConfigError, match="does not fit"):
        sparsepush.PushSumGroup([np.ones(3)] * 2, first_node=3, total_nodes=4)
    g = sparsepush.PushSumGroup([np.ones(3), np.ones(3)])
    with pytest.raises(TypeError, match="LoopbackNetwork or an MpiNetwork"):
        g.round(0, sparsepush.parse_schedule("complete", 2), sparsepush.parse_compressor("identity"), object())
    with pytest.raises(sparsepush.SizeError, match="1 local directions for 2 nodes"):
        g.round(0, sparsepush.parse_schedule("complete", 2), sparsepush.parse_compressor("identity"),
                sparsepush.LoopbackNetwork(2), directions=[np.ones(3)])
