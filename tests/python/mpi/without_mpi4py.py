# MpiNetwork where nothing initialized MPI before it (no mpi4py): the module initializes MPI
# itself, runs one exact round on the complete graph of one node per rank, checks it against
# numpy, and finalizes MPI at exit. Run under mpiexec -np 2 (ctest python_mpi_without_mpi4py).
import sys

import numpy as np

import sparsepush

assert "mpi4py" not in sys.modules
n = int(sys.argv[1]) if len(sys.argv) > 1 else 2
net = sparsepush.MpiNetwork(n, timeout=60.0)
assert net.ranks == n, f"run with mpiexec -np {n}"
r = net.rank
xs = [np.arange(100.0) * (i + 1) + 0.25 for i in range(n)]
x = xs[r].copy()
node = sparsepush.PushSumNode(x, r)
node.round(0, sparsepush.parse_schedule("complete", n), sparsepush.parse_compressor("identity"), net.endpoint(r))
net.finish()
want = np.mean(np.stack(xs), axis=0)
np.testing.assert_allclose(x, want, rtol=1e-15, atol=0)
assert node.weight == 1.0
print(f"rank {r}: ok")
