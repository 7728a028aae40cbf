# Zero copy: the node's x is the caller's memory, by address and by value, for numpy arrays and
# torch CPU tensors (DLPack and tensor.numpy()).
import numpy as np
import pytest

import sparsepush
from conftest import run_threads


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_numpy_x_is_the_callers_memory(dtype, rng):
    n, d = 4, 300
    xs = [rng.standard_normal(d).astype(dtype) for _ in range(n)]
    before = [x.copy() for x in xs]
    nodes = [sparsepush.PushSumNode(x, i) for i, x in enumerate(xs)]
    for x, nd in zip(xs, nodes):
        assert nd.x.ctypes.data == x.ctypes.data  # by address
        assert nd.buffer is x
    net = sparsepush.LoopbackNetwork(n)
    run_threads(nodes, net, sparsepush.parse_schedule("complete", n), sparsepush.parse_compressor("identity"), 1)
    # by value: one complete-graph round of exact push-sum leaves every x at the mean, in the caller's arrays
    mean = np.mean(np.stack(before).astype(np.float64), axis=0)
    tol = 1e-6 if dtype == np.float32 else 1e-14
    for x, b, nd in zip(xs, before, nodes):
        assert not np.array_equal(x, b)
        np.testing.assert_allclose(x, mean, rtol=0, atol=tol)
        assert nd.weight == pytest.approx(1.0, abs=1e-15)


def test_multidimensional_array_is_read_flat(rng):
    x = rng.standard_normal((3, 5, 7))
    nd = sparsepush.PushSumNode(x, 0)
    assert nd.dim == x.size
    assert nd.x.ctypes.data == x.ctypes.data


def test_local_step_writes_the_callers_buffer(rng):
    xs = [rng.standard_normal(64) for _ in range(2)]
    ps = [rng.standard_normal(64) for _ in range(2)]
    want = ((xs[0] - 0.25 * ps[0]) + (xs[1] - 0.25 * ps[1])) / 2  # local steps, then one exact average
    nodes = [sparsepush.PushSumNode(x, i) for i, x in enumerate(xs)]
    run_threads(nodes, sparsepush.LoopbackNetwork(2), sparsepush.parse_schedule("complete", 2),
                sparsepush.parse_compressor("identity"), 1, directions=[ps], gamma=0.25)
    for x in xs:
        np.testing.assert_allclose(x, want, rtol=0, atol=1e-15)


def test_torch_tensor_through_dlpack_and_numpy():
    torch = pytest.importorskip("torch")
    n, d = 3, 200
    g = torch.Generator().manual_seed(7)
    ts = [torch.randn(d, generator=g, dtype=torch.float32) for _ in range(n)]
    mean = torch.stack(ts).double().mean(0)
    # node 0 takes the tensor itself (DLPack), node 1 its .numpy() view (buffer protocol), node 2 a
    # parameter's detached data
    param = torch.nn.Parameter(ts[2])
    srcs = [ts[0], ts[1].numpy(), param.detach()]
    nodes = [sparsepush.PushSumNode(s, i) for i, s in enumerate(srcs)]
    assert nodes[0].x.ctypes.data == ts[0].data_ptr()
    assert nodes[1].x.ctypes.data == ts[1].data_ptr()
    assert nodes[2].x.ctypes.data == param.data_ptr()
    net = sparsepush.LoopbackNetwork(n)
    run_threads(nodes, net, sparsepush.parse_schedule("complete", n), sparsepush.parse_compressor("identity"), 1)
    for t in (ts[0], ts[1], param.detach()):
        assert torch.allclose(t.double(), mean, atol=1e-6, rtol=0)


def test_debiased_writes_out_in_place_and_model_copies(rng):
    x = rng.standard_normal(50)
    nd = sparsepush.PushSumNode(x, 0)
    out = np.empty(50)
    assert nd.debiased(out) is out
    np.testing.assert_array_equal(out, x)  # u = 1
    m = nd.model()
    assert m.ctypes.data != x.ctypes.data
    np.testing.assert_array_equal(m, x)
