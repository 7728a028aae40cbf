# sparsepush.torch.GossipOptimizer on the inputs a torch user meets: a zero-size parameter (skipped:
# the others train and agree as SGP's average says), only zero-size parameters (refused), parameters
# that share storage (refused by name), pickling and deep copies (refused at dumps, naming
# state_dict()).
import copy
import pickle

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import sparsepush  # noqa: E402
import sparsepush.torch as spt  # noqa: E402
from threads_helper import in_threads  # noqa: E402

torch.set_num_threads(1)


def sgd(params):
    return torch.optim.SGD(params, lr=0.1)


def test_a_zero_size_parameter_is_skipped_and_the_others_train():
    n = 2
    net = spt.Loopback(n)
    starts = []
    for i in range(n):
        torch.manual_seed(i)
        starts.append(torch.nn.Linear(3, 2))

    def node(i):
        m = starts[i]
        empty = torch.nn.Parameter(torch.zeros(0, 3))
        opt = spt.GossipOptimizer(sgd([m.weight, empty, m.bias]), network=net, node=i, algorithm="sgp",
                                  schedule="complete")
        assert opt._flat.numel() == 8  # the zero-size parameter has no slot
        x = torch.full((4, 3), float(i + 1))
        opt.zero_grad()
        F.cross_entropy(m(x), torch.zeros(4, dtype=torch.long)).backward()
        opt.step()
        return torch.cat([m.weight.detach().reshape(-1), m.bias.detach()]), empty.numel()
    # the reference: each node's own SGD step, then the average (SGP on the complete graph)
    want = []
    for i in range(n):
        torch.manual_seed(i)
        m = torch.nn.Linear(3, 2)
        o = sgd(m.parameters())
        F.cross_entropy(m(torch.full((4, 3), float(i + 1))), torch.zeros(4, dtype=torch.long)).backward()
        o.step()
        want.append(torch.cat([m.weight.detach().reshape(-1), m.bias.detach()]))
    mean = sum(want) / n
    for got, size in in_threads(n, node):
        assert size == 0
        assert torch.allclose(got, mean, atol=1e-6)


def test_only_zero_size_parameters_are_no_parameter_to_train():
    with pytest.raises(sparsepush.ConfigError, match="no parameter to train .*has no element: 2 of them"):
        spt.GossipOptimizer(sgd([torch.nn.Parameter(torch.zeros(0)), torch.nn.Parameter(torch.zeros(2, 0))]),
                            network=spt.Loopback(2), node=0)


def test_parameters_that_share_storage_are_refused_by_name():
    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.table = torch.nn.Parameter(torch.randn(4, 3))
            self.row = torch.nn.Parameter(self.table.data[1])  # a view of the table's second row
    m = Tied()
    before = m.table.detach().clone()
    with pytest.raises(sparsepush.ConfigError, match=r"parameter row \(shape \(3,\)\) shares storage with parameter "
                                                     r"table.*one Parameter object"):
        spt.GossipOptimizer(sgd(m.parameters()), network=spt.Loopback(2), node=0, model=m)
    assert m.row.data_ptr() == m.table.data_ptr() + 3 * 4  # still tied: nothing moved
    assert torch.equal(m.table, before)
    # disjoint slices of one storage are not shared values: accepted
    base = torch.randn(6)
    a, b = torch.nn.Parameter(base[:3]), torch.nn.Parameter(base[3:])
    spt.GossipOptimizer(sgd([a, b]), network=spt.Loopback(2), node=0)


def test_pickling_and_deep_copies_are_refused_naming_state_dict():
    opt = spt.GossipOptimizer(sgd(torch.nn.Linear(2, 2).parameters()), network=spt.Loopback(2), node=0)
    for what in (lambda: pickle.dumps(opt), lambda: copy.deepcopy(opt)):
        with pytest.raises(TypeError, match="cannot be pickled or deep-copied.*state_dict"):
            what()
    # the state_dict itself pickles
    assert isinstance(pickle.loads(pickle.dumps(opt.state_dict()))["sparsepush"]["gossip"], bytes)
