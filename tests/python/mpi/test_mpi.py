# The module over MPI (run under mpiexec -np 2 or more, with mpi4py): the same nodes give the same
# bits over MpiNetwork as over the loopback, one node per rank (PushSumNode) or a block per rank
# (PushSumGroup, lockstep and overlap), on COMM_WORLD, on a communicator from mpi4py and on
# COMM_SELF; MPI calls from another thread and differing settings are refused.
import threading

import numpy as np
import pytest

MPI = pytest.importorskip("mpi4py.MPI")
import sparsepush  # noqa: E402  (after mpi4py: MPI is initialized by mpi4py and stays its own)
from conftest import run_threads  # noqa: E402

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()


def inputs(n, d, rounds, seed=3):
    rng = np.random.default_rng(seed)  # the same on every rank
    return [rng.standard_normal(d) for _ in range(n)], rng.standard_normal((rounds, n, d))


def blocks(n, ranks):
    b, e = divmod(n, ranks)
    first = [r * b + min(r, e) for r in range(ranks + 1)]
    return first


def test_node_per_rank_equals_loopback():
    n, d, rounds = size, 300, 6
    xs0, dirs = inputs(n, d, rounds)
    sched, comp = sparsepush.parse_schedule("exponential" if n > 1 else "complete", max(n, 2)), None
    if n < 2:
        pytest.skip("needs two ranks")
    comp = sparsepush.parse_compressor("top-k:0.1")
    net = sparsepush.MpiNetwork(n, comm=comm, timeout=60.0)
    assert (net.first_node, net.local_nodes, net.rank, net.ranks) == (rank, 1, rank, size)
    x = xs0[rank].copy()
    node = sparsepush.PushSumNode(x, rank, seed=5)
    ep = net.endpoint(rank)
    for t in range(rounds):
        node.round(t, sched, comp, ep, eta=0.5, direction=dirs[t][rank], gamma=0.01)
    net.finish()
    ref = [v.copy() for v in xs0]
    ref_nodes = [sparsepush.PushSumNode(v, i, seed=5) for i, v in enumerate(ref)]
    loop = sparsepush.LoopbackNetwork(n)
    run_threads(ref_nodes, loop, sched, comp, rounds, eta=0.5, directions=dirs, gamma=0.01)
    assert x.tobytes() == ref[rank].tobytes()
    assert node.weight == ref_nodes[rank].weight
    assert net.total_bytes() == loop.bytes_sent(rank)  # the same frames


@pytest.mark.parametrize("policy", ["lockstep", "overlap"])
def test_group_blocks_equal_loopback(policy):
    n, d, rounds = 2 * size + 1, 200, 8
    xs0, dirs = inputs(n, d, rounds, seed=11)
    sched, comp = sparsepush.parse_schedule("exponential", n), sparsepush.parse_compressor("top-k:0.2")
    first = blocks(n, size)
    lo, hi = first[rank], first[rank + 1]
    xs = [xs0[i].copy() for i in range(lo, hi)]
    net = sparsepush.MpiNetwork(n, comm=comm, policy=policy, timeout=60.0)
    assert (net.first_node, net.local_nodes) == (lo, hi - lo)
    g = sparsepush.PushSumGroup(xs, first_node=lo, total_nodes=n, seed=2, policy=policy)
    for t in range(rounds):
        g.round(t, sched, comp, net, eta=0.4, directions=list(dirs[t][lo:hi]), gamma=0.02)
    g.drain(sched, net)
    net.finish()
    ref = [v.copy() for v in xs0]
    rg = sparsepush.PushSumGroup(ref, seed=2, policy=policy)
    loop = sparsepush.LoopbackNetwork(n)
    for t in range(rounds):
        rg.round(t, sched, comp, loop, eta=0.4, directions=list(dirs[t]), gamma=0.02)
    rg.drain(sched, loop)
    for k, i in enumerate(range(lo, hi)):
        assert xs[k].tobytes() == ref[i].tobytes(), f"node {i} ({policy})"
        assert g.weight(k) == rg.weight(i)


def test_comm_self_and_a_split_communicator():
    n, d = 3, 50
    xs0, _ = inputs(n, d, 1)
    sched, comp = sparsepush.parse_schedule("directed-ring", n), sparsepush.parse_compressor("identity")
    for c in (MPI.COMM_SELF, comm.Split(rank % 2, rank)):
        xs = [v.copy() for v in xs0]
        net = sparsepush.MpiNetwork(n, comm=c)
        lo = blocks(n, c.Get_size())[c.Get_rank()]
        mine = xs[lo:lo + net.local_nodes]
        g = sparsepush.PushSumGroup(mine, first_node=lo, total_nodes=n)
        for t in range(4):
            g.round(t, sched, comp, net)
        ref = [v.copy() for v in xs0]
        rg = sparsepush.PushSumGroup(ref)
        loop = sparsepush.LoopbackNetwork(n)
        for t in range(4):
            rg.round(t, sched, comp, loop)
        for k in range(net.local_nodes):
            assert mine[k].tobytes() == ref[lo + k].tobytes()
        net.finish()


def test_other_thread_and_bad_arguments_are_refused():
    net = sparsepush.MpiNetwork(size, comm=comm)
    errors = []

    def other():
        try:
            net.endpoint(rank)
        except sparsepush.ConfigError as e:
            errors.append(str(e))

    th = threading.Thread(target=other)
    th.start()
    th.join()
    assert errors and "the thread that built it" in errors[0]
    with pytest.raises(sparsepush.ConfigError, match="hosts nodes"):
        net.endpoint((rank + 1) % size if size > 1 else 5)
    with pytest.raises(TypeError, match="mpi4py communicator"):
        sparsepush.MpiNetwork(size, comm="world")
    with pytest.raises(sparsepush.ConfigError, match="every rank needs at least one node"):
        sparsepush.MpiNetwork(size - 1 if size > 1 else 0, comm=comm)
    g = sparsepush.PushSumGroup([np.ones(4)], first_node=rank, total_nodes=size, policy="overlap")
    with pytest.raises(sparsepush.ConfigError, match="the group's policy is overlap, the MpiNetwork's lockstep"):
        g.round(0, sparsepush.parse_schedule("complete", max(size, 2)), sparsepush.parse_compressor("identity"), net)
    net.finish()


def test_differing_settings_are_named_on_every_rank():
    if size < 2:
        pytest.skip("needs two ranks")
    net = sparsepush.MpiNetwork(size, comm=comm)
    net.agree("same")
    with pytest.raises(sparsepush.ConfigError, match="rank"):
        net.agree("settings of rank 0" if rank == 0 else "other settings")
