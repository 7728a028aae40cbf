"""The README's PyTorch example, runnable: 4 nodes, one Python thread each, train a small torch
model with sparsepush.torch.GossipOptimizer (SCSP, top-10%) over an in-process Loopback, so no
mpirun is needed. Each node has its own, shifted (non-IID) data from one random linear teacher.
At the end it checks that the loss of the nodes' common model fell and that the nodes agree after
finish() (SCSP's exact final rounds), and prints both.

    PYTHONPATH=build/python python3 examples/python/readme_torch.py
"""
import sys
import threading

import torch
import torch.nn.functional as F

torch.set_num_threads(1)
n, rounds, dim, classes, batch = 4, 200, 16, 3, 32
teacher = torch.randn(dim, classes, generator=torch.Generator().manual_seed(0))


def make_model():
    torch.manual_seed(1)  # the same initial model at every node
    return torch.nn.Sequential(torch.nn.Linear(dim, 32), torch.nn.ReLU(), torch.nn.Linear(32, classes))


def batches(i):
    g = torch.Generator().manual_seed(100 + i)  # node i's own data
    for _ in range(rounds):
        inputs = torch.randn(batch, dim, generator=g) + 0.5 * i  # shifted per node: non-IID
        yield inputs, (inputs @ teacher).argmax(1)


models = [None] * n

# // [readme-torch-begin]
import sparsepush.torch as spt

def train(i, net):                                   # node i, on its own thread
    model = make_model()
    sgd = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    opt = spt.GossipOptimizer(sgd, network=net, node=i, algorithm="scsp", compressor="top-k:0.1")
    for inputs, labels in batches(i):
        opt.zero_grad()
        F.cross_entropy(model(inputs), labels).backward()
        opt.step()                                   # the optimizer's step, then compress, push, mix
    opt.finish()                                     # SCSP's exact final rounds: the nodes agree
    models[i] = model

net = spt.Loopback(n)                                # n threads; under mpirun or torchrun: network=None
threads = [threading.Thread(target=train, args=(i, net)) for i in range(n)]
for th in threads: th.start()
for th in threads: th.join()
# // [readme-torch-end]

if any(m is None for m in models):
    sys.exit("readme_torch: a node's thread failed (see its traceback above)")


def loss_of(model):
    g = torch.Generator().manual_seed(999)
    inputs = torch.cat([torch.randn(256, dim, generator=g) + 0.5 * i for i in range(n)])
    with torch.no_grad():
        return F.cross_entropy(model(inputs), (inputs @ teacher).argmax(1)).item()


flat = [torch.nn.utils.parameters_to_vector(m.parameters()).detach() for m in models]
spread = max(float((f - flat[0]).abs().max()) for f in flat)
before, after = loss_of(make_model()), loss_of(models[0])
print(f"readme_torch: {n} nodes, {rounds} steps: loss {before:.3f} -> {after:.3f}, "
      f"largest difference between two nodes' models {spread:.2e}")
if not (after < 0.7 * before and spread < 1e-4):
    sys.exit("readme_torch: training did not work (the loss did not fall by 30%, or the nodes disagree)")
