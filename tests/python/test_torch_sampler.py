# sparsepush.torch.ShardSampler: node i's indices are the shards sparsepush-train deals
# (RunSpec.plan, the run description the CLI runs) for Fashion-MNIST's training labels at skew 0,
# 0.8 and a Dirichlet split; the shards cover every sample once; each epoch's order is the
# library's minibatch order (ShardSampler.next_batch), a new shuffle per epoch; a DataLoader takes
# it; bad arguments are refused by name.
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import sparsepush  # noqa: E402
import sparsepush.torch as spt  # noqa: E402

N = 8


@pytest.fixture(scope="module")
def labels():
    try:
        return sparsepush.load_fashion_mnist()["train"]["labels"]
    except sparsepush.DataError:
        pytest.skip("Fashion-MNIST is not installed (Debian package dataset-fashion-mnist)")


@pytest.mark.parametrize("split", [{"skew": 0.0}, {"skew": 0.8}, {"dirichlet": 0.5}])
def test_the_shards_are_sparsepush_trains(labels, split):
    spec = sparsepush.RunSpec(nodes=N, seed=5, **split)
    spec.validate(1)
    want = spec.plan(labels).parts
    seen = np.zeros(len(labels), dtype=np.int64)
    for i in range(N):
        s = spt.ShardSampler(torch.tensor(labels.astype(np.int64)), i, N, seed=5, **split)
        assert np.array_equal(s.indices, np.asarray(want[i])), f"node {i}"
        assert len(s) == len(want[i])
        seen[s.indices] += 1
    assert (seen == 1).all()  # every sample in exactly one shard
    if split.get("skew") == 0.8:  # skewed: a node's shard is dominated by a few classes
        counts = np.bincount(labels[spt.ShardSampler(labels, 0, N, seed=5, **split).indices], minlength=10)
        assert counts.max() > 3 * np.sort(counts)[len(counts) // 2]


def test_each_epoch_is_the_librarys_order_and_a_new_shuffle(labels):
    s = spt.ShardSampler(labels, 3, N, seed=7)
    ref = sparsepush.ShardSampler(sparsepush.RunSpec(nodes=N, seed=7).plan(labels).parts[3],
                                  sparsepush.shard_seed(7, 3))
    first, second = list(s), list(s)
    assert first == ref.next_batch(len(s)).tolist()
    assert second == ref.next_batch(len(s)).tolist()
    assert first != second and sorted(first) == sorted(second) == sorted(s.indices.tolist())
    assert s.epoch == 2
    # a DataLoader over the sampler gives the samples in that order
    data = torch.utils.data.TensorDataset(torch.arange(len(labels)))
    s2 = spt.ShardSampler(labels, 3, N, seed=7)
    got = torch.cat([b[0] for b in torch.utils.data.DataLoader(data, batch_size=32, sampler=s2)]).tolist()
    assert got == first


def test_bad_arguments_are_refused_by_name(labels):
    for kw, match in [(dict(node=8, nodes=8), r"node must be an int in \[0, 8\)"),
                      (dict(node=0, nodes=0), "nodes must be a positive int"),
                      (dict(node=0, nodes=8, skew=1.5), "--skew: must be in"),
                      (dict(node=0, nodes=8, skew=0.5, dirichlet=0.3), "--dirichlet excludes --skew")]:
        with pytest.raises(sparsepush.ConfigError, match=match):
            spt.ShardSampler(labels, **kw)
    with pytest.raises(sparsepush.ConfigError, match=r"classes in \[0, 255\]"):
        spt.ShardSampler(np.array([0, 1, 300]), 0, 2)
    with pytest.raises(sparsepush.ConfigError, match="integer classes"):
        spt.ShardSampler(np.array([0.5, 1.0]), 0, 2)
    with pytest.raises(sparsepush.ConfigError, match="cannot split 2 samples across 3 nodes"):
        spt.ShardSampler(np.array([0, 1]), 2, 3)
    # a Dirichlet draw may leave a node nothing (here node 1 of 4, alpha 0.01)
    with pytest.raises(sparsepush.ConfigError, match="node 1 of 4 gets no sample"):
        spt.ShardSampler(np.array([0, 1, 2, 3] * 2), 1, 4, dirichlet=0.01, seed=1)
