# Shared helpers of the Python module's tests: nodes driven by one thread each over a loopback.
import numpy as np
import pytest

import sparsepush
from threads_helper import in_threads


def run_threads(nodes, net, schedule, compressor, rounds, start=0, eta=1.0, directions=None, gamma=0.0):
    """Every node's rounds [start, start + rounds) on its own thread; directions[t][i] or None.
    Re-raises the first error of a thread."""
    def drive(i):
        ep = net.endpoint(nodes[i].id)
        for t in range(start, start + rounds):
            d = None if directions is None else directions[t - start][i]
            nodes[i].round(t, schedule, compressor, ep, eta=eta, direction=d, gamma=gamma)

    in_threads(len(nodes), drive)


@pytest.fixture
def rng():
    return np.random.default_rng(20261202)
