# Shared helpers of the Python module's tests: nodes driven by one thread each over a loopback.
import threading

import numpy as np
import pytest

import sparsepush


def run_threads(nodes, net, schedule, compressor, rounds, start=0, eta=1.0, directions=None, gamma=0.0):
    """Every node's rounds [start, start + rounds) on its own thread; directions[t][i] or None.
    Re-raises the first error of a thread."""
    errors = []

    def drive(i):
        try:
            ep = net.endpoint(nodes[i].id)
            for t in range(start, start + rounds):
                d = None if directions is None else directions[t - start][i]
                nodes[i].round(t, schedule, compressor, ep, eta=eta, direction=d, gamma=gamma)
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            errors.append(e)

    threads = [threading.Thread(target=drive, args=(i,)) for i in range(len(nodes))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]


@pytest.fixture
def rng():
    return np.random.default_rng(20261202)
