"""One rank of the stall test (tests/python/launch/check_stall.py): GossipOptimizer over the
launcher's network with mpi_timeout TIMEOUT; the last rank stalls (sleeps far past the timeout,
alive, never stepping), the others step and must raise TransportError naming it. A rank that
raises prints "raised <seconds since its start> <wall clock, time.time()> <message>" and exits; what ends the job is the
library (mpirun: MPI_Abort at exit) or the launcher (torchrun stops the other workers).

    stall.py TIMEOUT
"""
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import sparsepush  # noqa: E402
import sparsepush.torch as spt  # noqa: E402


def main():
    start = time.monotonic()
    timeout = float(sys.argv[1])
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    opt = spt.GossipOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), algorithm="sgp", mpi_timeout=timeout)
    info = spt.launch_info()
    if info["rank"] == info["nodes"] - 1:
        time.sleep(600)  # stalled: alive, never steps
        return
    x = torch.randn(8, 4)
    try:
        for _ in range(3):
            opt.zero_grad()
            F.cross_entropy(model(x), (x[:, 0] > 0).long()).backward()
            opt.step()
    except sparsepush.TransportError as e:
        print(f"raised {time.monotonic() - start:.2f} {time.time():.3f} {e}", flush=True)
        raise
    print("no error", flush=True)


if __name__ == "__main__":
    main()
