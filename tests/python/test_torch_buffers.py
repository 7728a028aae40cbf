# sparsepush.torch.GossipOptimizer and a model's buffers: with buffers="gossip" (the default)
# BatchNorm's running statistics are mixed like the parameters, so after SCSP's finish() every
# node's model gives the accuracy of the averaged model (the mean of the nodes' state_dicts,
# computed here) within 0.5 points; with "local" each node keeps statistics of its own data and
# the gap is measured. Integer buffers stay each node's own; bad values are refused. average() is
# the mean of the nodes' models (computed here in double), and averaged() swaps it in and back.
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import sparsepush  # noqa: E402
import sparsepush.torch as spt  # noqa: E402
from threads_helper import in_threads  # noqa: E402

torch.set_num_threads(1)
N = 4


def make():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.BatchNorm1d(32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 2))


def data(i, t, n=32):
    g = torch.Generator().manual_seed(1000 * i + t)
    x = torch.randn(n, 10, generator=g) * (1 + i) + 0.8 * i  # each node its own input statistics
    return x, (x[:, :5].sum(1) > x[:, 5:].sum(1)).long()


def accuracy(model, x, y):
    model.eval()
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def train(buffers, steps=60):
    net = spt.Loopback(N)

    def node(i):
        m = make()
        opt = spt.GossipOptimizer(torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9), network=net, node=i,
                                  model=m, buffers=buffers, algorithm="scsp", compressor="top-k:0.1")
        m.train()
        for t in range(steps):
            x, y = data(i, t)
            opt.zero_grad()
            F.cross_entropy(m(x), y).backward()
            opt.step()
        opt.finish()
        return m
    return in_threads(N, node)


def averaged(models):
    """A model whose float tensors are the mean of the nodes' (integer ones: node 0's)."""
    out = make()
    states = [m.state_dict() for m in models]
    out.load_state_dict({k: (sum(s[k] for s in states) / N if v.is_floating_point() else v)
                         for k, v in states[0].items()})
    return out


def test_gossiped_buffers_leave_every_node_at_the_averaged_models_accuracy():
    xs, ys = zip(*(data(i, 10_000, 500) for i in range(N)))
    x, y = torch.cat(xs), torch.cat(ys)
    gossip = train("gossip")
    avg = accuracy(averaged(gossip), x, y)
    bn = [m[1] for m in gossip]
    for i, m in enumerate(gossip):
        assert abs(accuracy(m, x, y) - avg) <= 0.005, (i, accuracy(m, x, y), avg)
        assert torch.allclose(bn[i].running_var, bn[0].running_var, rtol=1e-4, atol=1e-5)
        assert bn[i].num_batches_tracked.item() == 60  # an integer buffer: each node's own count
    assert avg > 0.7
    local = train("local")
    gaps = [accuracy(m, x, y) - accuracy(averaged(local), x, y) for m in local]
    print(f"averaged model {avg:.4f}; buffers='local': node minus averaged model {[round(g, 4) for g in gaps]}")
    spread = max(float((m[1].running_mean - local[0][1].running_mean).abs().max()) for m in local)
    assert spread > 0.1  # the local statistics stay apart: what "gossip" removes


def test_buffers_setting_is_checked():
    m = make()
    with pytest.raises(sparsepush.ConfigError, match="buffers must be 'gossip' or 'local', got 'all'"):
        spt.GossipOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), network=spt.Loopback(2), node=0, model=m,
                            buffers="all")
    m[1].running_mean = m[1].running_mean.double()
    with pytest.raises(sparsepush.ConfigError, match=r"buffer 1.running_mean \(shape \(32,\)\) is torch.float64"):
        spt.GossipOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), network=spt.Loopback(2), node=0, model=m)
    m = make()
    m.register_buffer("elsewhere", torch.zeros(3, device="meta"))
    with pytest.raises(sparsepush.ConfigError, match=r"buffer elsewhere \(shape \(3,\)\) is on meta, the parameters on "
                                                     r"cpu \(model.to\(device\)\)"):
        spt.GossipOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), network=spt.Loopback(2), node=0, model=m)
    # without model= the wrapper sees no buffer; with "local" the flat tensor holds the parameters alone
    n_params = sum(p.numel() for p in make().parameters())
    a = make()
    assert spt.GossipOptimizer(torch.optim.SGD(a.parameters(), lr=0.1), network=spt.Loopback(2), node=0,
                               model=a, buffers="local")._flat.numel() == n_params
    b = make()
    assert spt.GossipOptimizer(torch.optim.SGD(b.parameters(), lr=0.1), network=spt.Loopback(2), node=0,
                               model=b)._flat.numel() == n_params + 64


def test_average_is_the_mean_of_the_nodes_models_and_averaged_swaps_it_in():
    net = spt.Loopback(N)

    def node(i):
        m = make()
        opt = spt.GossipOptimizer(torch.optim.SGD(m.parameters(), lr=0.05), network=net, node=i, model=m,
                                  algorithm="sp", compressor="top-k:0.1")
        m.train()
        for t in range(5):
            x, y = data(i, t)
            opt.zero_grad()
            F.cross_entropy(m(x), y).backward()
            opt.step()
        own = {k: v.clone() for k, v in m.state_dict().items()}
        avg = opt.average()
        with opt.averaged():
            inside = {k: v.clone() for k, v in m.state_dict().items()}
        assert all(torch.equal(v, m.state_dict()[k]) for k, v in own.items())  # the node's own model is back
        return own, avg, inside, opt.stats()["average_bytes"]
    out = in_threads(N, node)
    keys = [k for k, v in out[0][0].items() if v.is_floating_point()]
    mean = {k: sum(o[0][k].double() for o in out) / N for k in keys}
    # the flat layout: the parameters, then the mixed buffers, each in the model's order
    order = [k for k in keys if "running" not in k] + [k for k in keys if "running" in k]
    want = torch.cat([mean[k].reshape(-1) for k in order])
    for own, avg, inside, sent in out:
        assert torch.equal(avg, out[0][1])  # the same bits at every node
        assert torch.allclose(avg.double(), want, atol=1e-6)
        for k in keys:
            assert torch.allclose(inside[k].double(), mean[k], atol=1e-6), k
        assert sent == 0  # one process: nothing sent
    assert max(float((o[0]["0.weight"] - out[0][0]["0.weight"]).abs().max()) for o in out) > 1e-3  # they differ
