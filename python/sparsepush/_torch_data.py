"""sparsepush.torch.ShardSampler: a torch.utils.data.Sampler that gives node i of n exactly
sparsepush-train's shard (the library's label partition: skew or Dirichlet, keyed by the run's
seed) in sparsepush-train's order (the node's own generator reshuffles the shard every epoch).
sparsepush.torch re-exports it."""
import numpy as np
import torch

from . import _core


def _labels_of(labels):
    """One uint8 class per sample from a tensor, an array, a list or a dataset's targets."""
    if isinstance(labels, torch.Tensor):
        labels = labels.detach().cpu().numpy()
    a = np.asarray(labels)
    if a.ndim != 1 or a.size == 0:
        raise _core.ConfigError(f"ShardSampler: labels must be one class per sample (a 1-d sequence), got shape "
                                f"{a.shape}")
    if not np.issubdtype(a.dtype, np.integer):
        raise _core.ConfigError(f"ShardSampler: labels must be integer classes, got {a.dtype}")
    if a.min() < 0 or a.max() > 255:
        raise _core.ConfigError(f"ShardSampler: labels must be classes in [0, 255], got {a.min()} to {a.max()}")
    return a.astype(np.uint8)


class ShardSampler(torch.utils.data.Sampler):
    """ShardSampler(labels, node, nodes, *, skew=None, dirichlet=None, seed=None)

    Node `node`'s shard of `nodes` nodes, dealt from `labels` (one class per sample: a dataset's
    `targets`) exactly as sparsepush-train deals it with --skew, --dirichlet and --seed (None:
    sparsepush-train's default, sparsepush.run_options() gives it), and the
    order sparsepush-train draws it in: each iteration is one epoch, a fresh shuffle by the node's
    own generator (shard_seed(seed, node)). len() is the shard's size. With
    DataLoader(dataset, batch_size=B, sampler=...) the batches are sparsepush-train's where they do
    not cross an epoch's end (sparsepush-train's cross into the next epoch; a DataLoader's last
    batch of an epoch is short, or dropped with drop_last=True). `indices` is the shard, ascending
    within each class as the partition deals it."""

    def __init__(self, labels, node, nodes, *, skew=None, dirichlet=None, seed=None):
        if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1:
            raise _core.ConfigError(f"ShardSampler: nodes must be a positive int, got {nodes!r}")
        if not isinstance(node, int) or isinstance(node, bool) or not 0 <= node < nodes:
            raise _core.ConfigError(f"ShardSampler: node must be an int in [0, {nodes}), got {node!r}")
        # the run description's defaults and checks, as sparsepush-train's --skew, --dirichlet, --seed
        given = {k: v for k, v in (("skew", skew), ("dirichlet", dirichlet), ("seed", seed)) if v is not None}
        spec = _core.RunSpec(nodes=nodes, **given)
        spec.validate(1)  # --dirichlet excludes --skew, the ranges
        self.node, self.nodes, self.seed = node, nodes, spec["seed"]
        self.skew, self.dirichlet = spec.skew_value, spec.dirichlet_value
        parts = _core.partition(_labels_of(labels), nodes, self.skew, self.seed, self.dirichlet or 0.0)
        self.indices = np.asarray(parts[node], dtype=np.int64)
        if self.indices.size == 0:
            raise _core.ConfigError(f"ShardSampler: node {node} of {nodes} gets no sample: the Dirichlet draw "
                                    "left it none (another seed or a larger dirichlet)")
        self._order = _core.ShardSampler(parts[node], _core.shard_seed(self.seed, node))

    def __len__(self):
        return int(self.indices.size)

    def __iter__(self):
        # one whole epoch: the library's sampler starts every epoch with a shuffle
        return iter(self._order.next_batch(len(self)).astype(np.int64).tolist())

    @property
    def epoch(self):
        """Epochs begun."""
        return self._order.epoch
