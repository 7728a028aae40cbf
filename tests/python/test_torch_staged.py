# sparsepush.torch.GossipOptimizer's host-staged path (parameters on a device other than the CPU:
# one flat tensor there, a host mirror the round runs on), forced on the CPU with
# host_staged=True: every node's model, bytes and state after training are the zero-copy path's,
# bit for bit, for a node's own run (SP, SCSP with finish(), tracking) and for the Loopback that
# steps every node at once (a waiting policy), and a state saved on one path resumes on the other.
import io

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import sparsepush  # noqa: E402
import sparsepush.torch as spt  # noqa: E402
from threads_helper import in_threads  # noqa: E402

torch.set_num_threads(1)
N = 3


def make():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))


def run(options, staged, steps=6, finish=False, state=None, start=0):
    """Every node's final parameters, stats and state_dict (saved through torch.save)."""
    models = [make() for _ in range(N)]
    net = spt.Loopback(N)

    def node(i):
        m = models[i]
        opt = spt.GossipOptimizer(torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.5), network=net, node=i,
                                  host_staged=staged, **options)
        assert opt._staged == bool(staged) and (opt._host is opt._flat) == (not staged)
        if state is not None:
            opt.load_state_dict(torch.load(io.BytesIO(state[i])))
        for t in range(start, start + steps):
            g = torch.Generator().manual_seed(10 * i + t)
            x = torch.randn(8, 6, generator=g) + 0.5 * i
            opt.zero_grad()
            F.cross_entropy(m(x), (x.sum(1) > 0).long()).backward()
            opt.step()
        if finish:
            opt.finish()
        buf = io.BytesIO()
        torch.save(opt.state_dict(), buf)
        return torch.nn.utils.parameters_to_vector(m.parameters()).detach().clone(), opt.stats(), buf.getvalue()
    return in_threads(N, node)


@pytest.mark.parametrize("options,finish", [
    ({"algorithm": "sp", "compressor": "top-k:0.2", "eta": 0.3}, False),
    ({"algorithm": "scsp", "compressor": "top-k:0.2", "eta": 0.3}, True),
    ({"algorithm": "choco-push", "compressor": "top-k:0.3", "tracking": True}, False),
    ({"algorithm": "sp", "compressor": "top-k:0.2", "eta": 0.3, "staleness": "2"}, True),  # one run of every node
])
def test_the_staged_path_gives_the_zero_copy_bits(options, finish):
    zero = run(options, False, finish=finish)
    staged = run(options, True, finish=finish)
    moved = False
    for i, ((a, sa, _), (b, sb, _)) in enumerate(zip(zero, staged)):
        assert torch.equal(a, b), f"node {i}: {float((a - b).abs().max())}"
        assert {k: v for k, v in sa.items() if k != "state_bytes"} == {k: v for k, v in sb.items() if k != "state_bytes"}
        moved |= not torch.equal(a, zero[0][0])
    assert moved  # the nodes trained on their own data: a comparison of something


def test_a_state_saved_on_one_path_resumes_on_the_other():
    options = {"algorithm": "choco-push", "compressor": "top-k:0.3", "tracking": True}
    whole = run(options, False, steps=8)
    first = run(options, True, steps=4)
    resumed = run(options, False, steps=4, state=[s for _, _, s in first], start=4)
    for i in range(N):
        assert torch.equal(whole[i][0], resumed[i][0]), f"node {i}"
    again = run(options, True, steps=4, state=[s for _, _, s in run(options, False, steps=4)], start=4)
    for i in range(N):
        assert torch.equal(whole[i][0], again[i][0]), f"node {i}"


def test_host_staged_takes_a_bool():
    with pytest.raises(sparsepush.ConfigError, match="host_staged must be None, True or False, got 'yes'"):
        spt.GossipOptimizer(torch.optim.SGD(make().parameters(), lr=0.1), network=spt.Loopback(2), node=0,
                            host_staged="yes")


def test_state_bytes_counts_what_the_gossip_keeps():
    def state(staged, **options):
        net = spt.Loopback(2)

        def node(i):
            m = make()
            opt = spt.GossipOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), network=net, node=i, host_staged=staged,
                                      **options)
            return opt.stats()["state_bytes"], opt._flat.numel()
        return in_threads(2, node)[0]
    sgp, d = state(False, algorithm="sgp")
    sp_, _ = state(False, algorithm="sp", compressor="top-k:0.2")
    tracked, _ = state(False, algorithm="sgp", tracking=True)
    staged, _ = state(True, algorithm="sgp")
    assert sgp >= 2 * 4 * d  # the numerator and the run's scratch copy
    assert sp_ >= sgp + 4 * d  # and SP's error-feedback residual
    assert tracked >= 2 * sgp  # the trackers' instance and the gradients kept
    assert staged == sgp + 4 * d  # and the host mirror
