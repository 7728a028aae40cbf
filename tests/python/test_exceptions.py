# The C++ error family as Python exceptions of the same names, all derived from sparsepush.Error,
# each raised where it belongs with a message that names what and where; a refused round changes
# nothing.
import threading
import time

import numpy as np
import pytest

import sparsepush
from conftest import run_threads

NAMES = ["ConfigError", "SizeError", "NonFiniteError", "DecodeError", "MessageError", "WeightUnderflowError",
         "ScheduleError", "TransportError", "CheckpointError"]


def snake(name):
    out = ""
    for c in name:
        out += ("_" + c.lower()) if c.isupper() and out else c.lower()
    return out


@pytest.mark.parametrize("name", NAMES)
def test_hierarchy_and_cpp_names(name):
    cls = getattr(sparsepush, name)
    assert issubclass(cls, sparsepush.Error)
    assert getattr(sparsepush, snake(name)) is cls  # the C++ spelling is the same class
    assert issubclass(sparsepush.Error, Exception) and sparsepush.error is sparsepush.Error
    if sparsepush.has_mpi:
        assert issubclass(sparsepush.MpiError, sparsepush.TransportError)


def one_node(x):
    """Node 0 of a pair (the checks below refuse before any wait)."""
    nd = sparsepush.PushSumNode(x, 0)
    net = sparsepush.LoopbackNetwork(2)
    return nd, net, sparsepush.parse_schedule("complete", 2), sparsepush.parse_compressor("identity")


def test_bad_specs():
    with pytest.raises(sparsepush.ScheduleError, match="unknown schedule 'ring'"):
        sparsepush.parse_schedule("ring", 4)
    with pytest.raises(sparsepush.ScheduleError, match="torus"):
        sparsepush.parse_schedule("torus:3x3", 4)
    with pytest.raises(sparsepush.ConfigError, match="top-k"):
        sparsepush.parse_compressor("top-k:2.5")
    with pytest.raises(sparsepush.ConfigError, match="wait policy 'sometimes'"):
        sparsepush.check_policy("sometimes")
    assert sparsepush.check_policy("inf") == "asynchronous"
    assert sparsepush.check_policy("staleness:0") == "lockstep"


def test_refused_rounds_change_nothing():
    x = np.linspace(1, 2, 20)
    x0 = x.copy()
    nd, net, sched, comp = one_node(x)
    ep = net.endpoint(0)
    with pytest.raises(sparsepush.ConfigError, match=r"eta must be in \(0, 1\]"):
        nd.round(0, sched, comp, ep, eta=1.5)
    with pytest.raises(sparsepush.SizeError, match="direction has 19 elements, the model has 20"):
        nd.round(0, sched, comp, ep, direction=np.ones(19), gamma=0.1)
    p = np.ones(20)
    p[7] = np.nan
    with pytest.raises(sparsepush.NonFiniteError) as e:
        nd.round(0, sched, comp, ep, direction=p, gamma=0.1)
    assert e.value.index == 7
    with pytest.raises(sparsepush.ConfigError, match="node 3 is outside the schedule's 2 nodes"):
        sparsepush.PushSumNode(np.ones(20), 3).round(0, sched, comp, ep)
    with pytest.raises(sparsepush.ConfigError, match="was given node 1's endpoint"):
        sparsepush.PushSumNode(np.ones(20), 0).round(0, sched, comp, net.endpoint(1))
    with pytest.raises(sparsepush.ConfigError, match="the network has 3 nodes, the schedule 2"):
        sparsepush.PushSumNode(np.ones(20), 0).round(0, sched, comp, sparsepush.LoopbackNetwork(3).endpoint(0))
    with pytest.raises(sparsepush.ConfigError, match="outside"):
        net.endpoint(2)
    np.testing.assert_array_equal(x, x0)
    assert nd.weight == 1.0
    # and the node still works: a local step, then the average with its peer (x1 = x0)
    peer = sparsepush.PushSumNode(x0.copy(), 1)
    run_threads([nd, peer], net, sched, comp, 1, directions=[[np.ones(20), np.zeros(20)]], gamma=0.5)
    np.testing.assert_array_equal(x, x0 - 0.25)


def test_missing_envelope_is_a_transport_error_naming_the_peer():
    nd = sparsepush.PushSumNode(np.ones(8), 0)
    net = sparsepush.LoopbackNetwork(2, timeout=0.2)
    with pytest.raises(sparsepush.TransportError, match=r"node 0 waited 200 ms for the envelopes of node\(s\) 1"):
        nd.round(0, sparsepush.parse_schedule("complete", 2), sparsepush.parse_compressor("identity"), net.endpoint(0))


def test_decode_errors():
    q = sparsepush.compress_with_feedback(sparsepush.parse_compressor("top-k:0.5"), np.arange(8.0), np.zeros(8), 0, 0, 0)
    b = bytearray(sparsepush.encode(q))
    with pytest.raises(sparsepush.DecodeError, match="announces dim 8"):
        sparsepush.decode(bytes(b), 9)
    b[-1] ^= 0xFF
    with pytest.raises(sparsepush.DecodeError) as e:
        sparsepush.decode(bytes(b), 8)
    assert isinstance(e.value.offset, int)
    with pytest.raises(sparsepush.DecodeError):
        sparsepush.decode(b"SPSH", 8)


def test_checkpoint_errors(tmp_path):
    nd, *_ = one_node(np.ones(5))
    with pytest.raises(sparsepush.CheckpointError):
        nd.restore(str(tmp_path / "missing"))
    path = tmp_path / "n.ckpt"
    nd.save(str(path))
    other = sparsepush.PushSumNode(np.ones(6), 0)
    with pytest.raises(sparsepush.CheckpointError, match="6"):
        other.restore(str(path))
    raw = bytearray(path.read_bytes())
    raw[30] ^= 1
    path.write_bytes(bytes(raw))
    with pytest.raises(sparsepush.CheckpointError, match="CRC"):
        nd.restore(str(path))


def test_a_busy_node_refuses_a_second_thread():
    nd = sparsepush.PushSumNode(np.ones(8), 0)
    net = sparsepush.LoopbackNetwork(2, timeout=2.0)
    sched, comp = sparsepush.parse_schedule("complete", 2), sparsepush.parse_compressor("identity")
    th = threading.Thread(target=lambda: pytest.raises(sparsepush.TransportError, nd.round, 0, sched, comp,
                                                       net.endpoint(0)))
    th.start()
    time.sleep(0.3)
    with pytest.raises(sparsepush.ConfigError, match="node 0 is in a call on another thread"):
        nd.model()
    th.join()


def test_weight_underflow_names_the_node():
    # node 0 keeps a tiny share of its mass and gives the rest away to a node that never posts back
    # (a directed ring whose envelopes to node 0 are all lost): its u halves every round
    n = 2
    nodes = [sparsepush.PushSumNode(np.ones(4, dtype=np.float32), i) for i in range(n)]
    net = sparsepush.LoopbackNetwork(n, drop_probability=0.999999, seed=1)
    with pytest.raises(sparsepush.WeightUnderflowError, match="push-sum weight u"):
        run_threads(nodes, net, sparsepush.parse_schedule("complete", n), sparsepush.parse_compressor("identity"), 200)


def test_constructor_and_accessor_arguments_are_checked():
    with pytest.raises(sparsepush.ConfigError, match="at least one node"):
        sparsepush.LoopbackNetwork(0)
    with pytest.raises(sparsepush.ConfigError, match="loopback timeout must be positive seconds, got -1"):
        sparsepush.LoopbackNetwork(2, timeout=-1.0)
    with pytest.raises(sparsepush.ConfigError, match=r"drop_probability must be in \[0, 1\), got 1"):
        sparsepush.LoopbackNetwork(2, drop_probability=1.0)
    with pytest.raises(sparsepush.ConfigError, match="policy 'staleness:x': 'x' is not a whole number"):
        sparsepush.check_policy("staleness:x")
    with pytest.raises(sparsepush.ConfigError, match=r"node 5 outside \[0, 3\)"):
        sparsepush.parse_schedule("directed-ring", 3).out_edges(0, 5)
    with pytest.raises(sparsepush.ConfigError, match=r"node 3 outside \[0, 3\)"):
        sparsepush.parse_schedule("directed-ring", 3).in_edges(0, 3)
    nd = sparsepush.PushSumNode(np.ones(4), 0)
    with pytest.raises(sparsepush.SizeError, match="debiased: out has 3 elements, node 0's model has 4"):
        nd.debiased(np.empty(3))
    g = sparsepush.PushSumGroup([np.ones(4), np.ones(4)])
    with pytest.raises(sparsepush.SizeError, match="debiased: out has 5 elements, the model has 4"):
        g.debiased(0, np.empty(5))


@pytest.mark.skipif(sparsepush.has_mpi, reason="this module has MPI")
def test_mpi_network_without_mpi_is_a_config_error():
    with pytest.raises(sparsepush.ConfigError, match="built without MPI"):
        sparsepush.MpiNetwork(2)
