# Bit identity with the C++ node: tests/python/node_reference.cpp runs push_sum_node's over an
# encoded loopback and writes its inputs and results; the same inputs through sparsepush.PushSumNode
# must give the same bits (x, u and the residual e).
import os
import subprocess

import numpy as np
import pytest

import sparsepush
from conftest import run_threads


def read_reference(path):
    with open(path, "rb") as f:
        b = f.read()
    assert b[:8] == b"SPREF001"
    n, d, rounds, size = np.frombuffer(b, np.uint32, 4, 8)
    eta, gamma = np.frombuffer(b, np.float64, 2, 24)
    seed = int(np.frombuffer(b, np.uint64, 1, 40)[0])
    off = 48
    specs = []
    for _ in range(2):
        k = int(np.frombuffer(b, np.uint32, 1, off)[0])
        specs.append(b[off + 4:off + 4 + k].decode())
        off += 4 + k
    dt = np.float32 if size == 4 else np.float64

    def take(count, dtype=dt):
        nonlocal off
        a = np.frombuffer(b, dtype, count, off).copy()
        off += a.nbytes
        return a

    x0 = take(n * d).reshape(n, d)
    dirs = take(rounds * n * d).reshape(rounds, n, d)
    x = take(n * d).reshape(n, d)
    u = take(n, np.float64)
    e = take(n * d).reshape(n, d)
    assert off == len(b)
    return dict(n=int(n), d=int(d), rounds=int(rounds), eta=float(eta), gamma=float(gamma), seed=seed,
                schedule=specs[0], compressor=specs[1], x0=x0, dirs=dirs, x=x, u=u, e=e)


@pytest.mark.parametrize("kind", ["f32", "f64"])
def test_bits_equal_the_cpp_node(kind, tmp_path):
    exe = os.environ.get("SPARSEPUSH_NODE_REFERENCE")
    if not exe:
        pytest.skip("SPARSEPUSH_NODE_REFERENCE (the node_reference program) not set: run through ctest")
    out = tmp_path / f"ref-{kind}.bin"
    subprocess.run([exe, str(out), kind], check=True)
    r = read_reference(out)
    xs = [r["x0"][i].copy() for i in range(r["n"])]
    nodes = [sparsepush.PushSumNode(x, i, seed=r["seed"]) for i, x in enumerate(xs)]
    net = sparsepush.LoopbackNetwork(r["n"], encoded=True)
    run_threads(nodes, net, sparsepush.parse_schedule(r["schedule"], r["n"]), sparsepush.parse_compressor(r["compressor"]),
                r["rounds"], eta=r["eta"], directions=r["dirs"], gamma=r["gamma"])
    for i, nd in enumerate(nodes):
        assert xs[i].tobytes() == r["x"][i].tobytes(), f"node {i}: x differs from the C++ node's"
        assert nd.weight == r["u"][i]
        assert nd.residual.tobytes() == r["e"][i].tobytes(), f"node {i}: e differs"
    assert not np.array_equal(r["x"], r["x0"])  # the rounds did something
