"""What the launch checks share: their command line (NP, then the launchers to run) and the
commands that start N ranks under mpirun and under torchrun (the flags Debian's torch 1.13 needs)."""
import argparse
import os
import shlex


def arguments(doc, *positional):
    """NP, the extra positional arguments (name, type), --mpiexec "mpiexec args..." and --torchrun
    PATH; also selects the loopback interface for gloo."""
    ap = argparse.ArgumentParser(description=doc)
    ap.add_argument("np", type=int)
    for name, kind in positional:
        ap.add_argument(name, type=kind)
    ap.add_argument("--mpiexec")
    ap.add_argument("--torchrun")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    return ap.parse_args()


def mpirun(mpiexec, np_, *argv):
    return shlex.split(mpiexec) + ["-np", str(np_), *argv]


def torchrun(path, np_, *argv):
    # --redirects 2 --tee 2: Debian's torch 1.13 under Python 3.11 loses torchrun's default (0)
    return [path, "--standalone", "--nnodes", "1", "--nproc_per_node", str(np_), "--redirects", "2", "--tee", "2",
            *argv]
