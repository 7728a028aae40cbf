"""The torch loop of docs/guide/python.md, runnable: n nodes, one Python thread each,
train a small torch model with Sparse-Push (top-1%, error feedback, push-sum over the exponential
graph) on a synthetic task whose labels come from a random linear teacher. Each node's push-sum
numerator x_i is a flat torch tensor given to sparsepush.PushSumNode without a copy; the model's
parameters and gradients are views of two more flat tensors. At the end it checks that the nodes
agree and that the loss fell, and prints both.

    PYTHONPATH=build/python python3 examples/python/torch_loop.py
"""
import sys
import threading

import torch
import torch.nn.functional as F

import sparsepush

torch.set_num_threads(1)
n, rounds, dim, classes, batch = 4, 400, 32, 4, 64
teacher = torch.randn(dim, classes, generator=torch.Generator().manual_seed(0))


def make_batches(i):
    g = torch.Generator().manual_seed(100 + i)  # node i's own data
    for _ in range(rounds):
        images = torch.randn(batch, dim, generator=g) + 0.5 * i  # shifted per node: non-IID
        yield images, (images @ teacher).argmax(1)


def make_model():
    torch.manual_seed(1)  # the same initial model at every node
    return torch.nn.Sequential(torch.nn.Linear(dim, 64), torch.nn.ReLU(), torch.nn.Linear(64, classes))


def bind(model, flat, grad):
    """Make model's parameters and their .grad consecutive views of flat and grad (no copy)."""
    at = 0
    for p in model.parameters():
        p.data, p.grad = flat[at:at + p.numel()].view_as(p), grad[at:at + p.numel()].view_as(p)
        at += p.numel()


# // [readme-torch-loop-begin]
sched, top_k = sparsepush.parse_schedule("exponential", n), sparsepush.parse_compressor("top-k:0.01")
net = sparsepush.LoopbackNetwork(n)                  # or sparsepush.MpiNetwork(n) under mpirun

def run_node(i, model, batches):                     # one Python thread per node
    x = torch.nn.utils.parameters_to_vector(model.parameters()).detach()   # the node's x_i
    xh, grad = torch.empty_like(x), torch.zeros_like(x)
    bind(model, xh, grad)                            # parameters and .grad become views of xh and grad
    node, ep = sparsepush.PushSumNode(x, i, seed=1), net.endpoint(i)   # x is not copied
    for t, (images, labels) in enumerate(batches):
        node.debiased(xh)                            # the model to train is x / u, written in place
        grad.zero_()
        F.cross_entropy(model(images), labels).backward()
        node.round(t, sched, top_k, ep, eta=0.02, direction=grad, gamma=0.02)  # GIL released
    models[i] = node.model()
# // [readme-torch-loop-end]


def loss_of(flat):
    model = make_model()
    torch.nn.utils.vector_to_parameters(torch.as_tensor(flat), model.parameters())
    g = torch.Generator().manual_seed(999)
    images = torch.cat([torch.randn(256, dim, generator=g) + 0.5 * i for i in range(n)])
    with torch.no_grad():
        return F.cross_entropy(model(images), (images @ teacher).argmax(1)).item()


models = [None] * n
before = loss_of(torch.nn.utils.parameters_to_vector(make_model().parameters()).detach())
threads = [threading.Thread(target=run_node, args=(i, make_model(), make_batches(i))) for i in range(n)]
for th in threads:
    th.start()
for th in threads:
    th.join()
if any(m is None for m in models):
    sys.exit("a node's thread failed (see its traceback above)")
mean = sum(torch.as_tensor(m) for m in models) / n
spread = max(float((torch.as_tensor(m) - mean).abs().max()) for m in models)
after = loss_of(mean)
print(f"torch_loop: {n} nodes, {rounds} rounds: loss of the averaged model {before:.3f} -> {after:.3f}, "
      f"largest distance of a node's model from the average {spread:.2e}, {net.total_bytes()} bytes sent")
if not (after < 0.7 * before and spread < 0.5):
    sys.exit("torch_loop: training did not work (the loss did not fall by 30%, or the nodes disagree)")
