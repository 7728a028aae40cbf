# The GIL is released for the whole of every call that computes or waits: a round blocked on its
# in-neighbour lets other Python threads run, and two threads driving one node each run their
# d = 1e6 rounds in parallel.
import hashlib
import os
import threading
import time

import numpy as np
import pytest

import sparsepush


def test_a_waiting_round_lets_python_run():
    n, d = 2, 1000
    xs = [np.full(d, float(i)) for i in range(n)]
    nodes = [sparsepush.PushSumNode(x, i) for i, x in enumerate(xs)]
    net = sparsepush.LoopbackNetwork(n, timeout=20.0)
    sched, comp = sparsepush.parse_schedule("complete", n), sparsepush.parse_compressor("identity")
    entered, errors = threading.Event(), []

    def node0():
        try:
            entered.set()
            nodes[0].round(0, sched, comp, net.endpoint(0))  # waits for node 1's envelope
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    th = threading.Thread(target=node0)
    th.start()
    entered.wait()
    # node 0 is inside its round (or about to be) and can only finish after node 1 posts, below:
    # this thread must be able to run Python meanwhile
    spins, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < 0.3:
        spins += 1
    assert th.is_alive(), "node 0's round finished without node 1's envelope"
    nodes[1].round(0, sched, comp, net.endpoint(1))
    th.join(20)
    assert not th.is_alive() and not errors
    assert spins > 1000
    np.testing.assert_array_equal(xs[0], np.full(d, 0.5))
    np.testing.assert_array_equal(xs[1], np.full(d, 0.5))


def _rounds(node, ep, sched, comp, p, rounds):
    for t in range(rounds):
        node.round(t, sched, comp, ep, eta=1.0, direction=p, gamma=1e-3)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two cores")
def test_two_threads_run_d1e6_rounds_faster_than_one():
    # the same work, two nodes' rounds at d = 1e6 (local step, QSGD with 16 levels and feedback,
    # mix): one thread drives both (a PushSumGroup, whose lockstep rounds give the nodes' bits), or
    # two Python threads drive one PushSumNode each. QSGD's rounds (about 40 ms) are compute-bound:
    # top-1%'s (about 3 ms) measured ratios from 0.46 to 0.92 here, their lockstep waits and the
    # memory bandwidth weighing as much as the GIL. The philox10 stream keeps them as
    # compute-bound as when these ratios were measured (the default philox7 is about 1.6x faster)
    d, rounds = 1_000_000, 4
    rng = np.random.default_rng(5)
    sched, comp = sparsepush.parse_schedule("complete", 2), sparsepush.parse_compressor("qsgd:16:philox10")
    p = rng.standard_normal(d).astype(np.float32)
    x0 = [rng.standard_normal(d).astype(np.float32) for _ in range(2)]

    def one_thread():
        xs = [x.copy() for x in x0]
        g, net = sparsepush.PushSumGroup(xs, threads=1), sparsepush.LoopbackNetwork(2, encoded=False)
        t0 = time.perf_counter()
        for t in range(rounds):
            g.round(t, sched, comp, net, eta=1.0, directions=[p, p], gamma=1e-3)
        return time.perf_counter() - t0, xs

    def two_threads():
        xs = [x.copy() for x in x0]
        nodes, net = [sparsepush.PushSumNode(x, i) for i, x in enumerate(xs)], sparsepush.LoopbackNetwork(2, encoded=False)
        ths = [threading.Thread(target=_rounds, args=(nodes[i], net.endpoint(i), sched, comp, p, rounds)) for i in range(2)]
        t0 = time.perf_counter()
        for th in ths:
            th.start()
        for th in ths:
            th.join()
        return time.perf_counter() - t0, xs

    a, b = one_thread()[1], two_threads()[1]  # warm-up, and the same bits both ways
    assert all(u.tobytes() == v.tobytes() for u, v in zip(a, b))
    serial = min(one_thread()[0] for _ in range(5))
    parallel = min(two_threads()[0] for _ in range(5))
    # what two threads gain on this machine now, from a call known to release the GIL (hashlib
    # on large buffers): on a machine busy with other work nothing can run in parallel
    capacity = machine_parallel_ratio()
    print(f"\nGIL: 2 nodes x {rounds} rounds at d = {d}: one thread {serial * 1e3:.1f} ms, two threads "
          f"{parallel * 1e3:.1f} ms, ratio {parallel / serial:.2f} (hashlib's ratio on this machine now: {capacity:.2f})")
    if capacity > 0.8:
        pytest.skip(f"the machine runs no two threads in parallel now (hashlib's two-thread ratio {capacity:.2f})")
    # with the GIL held the two threads could not overlap: the serial time or more
    assert parallel < max(0.8, capacity + 0.15) * serial, f"two threads {parallel:.3f} s vs one {serial:.3f} s"


def machine_parallel_ratio():
    data = [os.urandom(1 << 20) * 24 for _ in range(2)]

    def work(b):
        hashlib.sha256(b).digest()

    def serial():
        t0 = time.perf_counter()
        for b in data:
            work(b)
        return time.perf_counter() - t0

    def parallel():
        ths = [threading.Thread(target=work, args=(b,)) for b in data]
        t0 = time.perf_counter()
        for th in ths:
            th.start()
        for th in ths:
            th.join()
        return time.perf_counter() - t0

    return min(parallel() for _ in range(3)) / min(serial() for _ in range(3))
