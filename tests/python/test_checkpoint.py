# save/restore: a node restored from its checkpoint continues bit for bit like one that never
# stopped, and restore writes into the caller's buffer.
import numpy as np

import sparsepush
from conftest import run_threads


def make(xs0, seed=4):
    xs = [x.copy() for x in xs0]
    return xs, [sparsepush.PushSumNode(x, i, seed=seed) for i, x in enumerate(xs)]


def test_restore_continues_bit_for_bit(tmp_path, rng):
    n, d = 4, 300
    xs0 = [rng.standard_normal(d).astype(np.float32) for _ in range(n)]
    sched, comp = sparsepush.parse_schedule("exponential", n), sparsepush.parse_compressor("top-k:0.05")
    # straight through: 10 rounds
    ref_xs, ref = make(xs0)
    run_threads(ref, sparsepush.LoopbackNetwork(n), sched, comp, 10, eta=0.5)
    # 5 rounds, save, scribble over the nodes, restore, 5 more
    xs, nodes = make(xs0)
    net = sparsepush.LoopbackNetwork(n)
    run_threads(nodes, net, sched, comp, 5, eta=0.5)
    for i, nd in enumerate(nodes):
        nd.save(str(tmp_path / f"node{i}.ckpt"))
    run_threads(nodes, net, sched, comp, 3, start=5, eta=0.9)  # state the restore must undo
    addrs = [x.ctypes.data for x in xs]
    for i, nd in enumerate(nodes):
        nd.restore(str(tmp_path / f"node{i}.ckpt"))
    assert [x.ctypes.data for x in xs] == addrs
    run_threads(nodes, sparsepush.LoopbackNetwork(n), sched, comp, 5, start=5, eta=0.5)
    for i in range(n):
        assert xs[i].tobytes() == ref_xs[i].tobytes()
        assert nodes[i].weight == ref[i].weight
        assert nodes[i].residual.tobytes() == ref[i].residual.tobytes()
