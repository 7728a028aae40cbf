"""A rank that stalls forever ends the job: under `mpirun -np N` and `torchrun --nproc_per_node N`,
the last rank of stall.py sleeps; the others must raise TransportError naming its node, and the
launcher must return, with a failure, within the timeout plus 10 s of the start of training.

    check_stall.py NP TIMEOUT [--mpiexec "mpiexec args..."] [--torchrun PATH]
"""
import os
import re
import shlex
import subprocess
import sys
import time

import launchers

HERE = os.path.dirname(os.path.abspath(__file__))
STALL = os.path.join(HERE, "stall.py")


def check(cmd, what, np_, timeout):
    print("$", " ".join(shlex.quote(c) for c in cmd), flush=True)
    start = time.monotonic()
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout + 120)
    except subprocess.TimeoutExpired as e:
        sys.exit(f"{what}: still running {timeout + 120:g} s after the start (the stalled rank held the job):\n"
                 f"{e.stdout}")
    took, ended = time.monotonic() - start, time.time()
    out = r.stdout
    if r.returncode == 0:
        sys.exit(f"{what}: returned 0 although a rank stalled:\n{out}")
    raised = re.findall(r"raised ([0-9.]+) ([0-9.]+) (.*)", out)
    if not raised:
        sys.exit(f"{what}: no rank raised TransportError:\n{out}")
    stalled = np_ - 1
    for _, _, msg in raised:
        if f"node {stalled}" not in msg and f"node(s) {stalled}" not in msg:
            sys.exit(f"{what}: the TransportError does not name the stalled node {stalled}: {msg}")
    into = min(float(t) for t, _, _ in raised)
    after = ended - min(float(w) for _, w, _ in raised)
    print(f"{what}: TransportError {into:.1f} s into the run, the launcher returned {r.returncode} {after:.1f} s "
          f"later ({took:.1f} s in all)", flush=True)
    if into > timeout + 10:
        sys.exit(f"{what}: the TransportError came {into:.1f} s into the run, past the timeout {timeout:g} s + 10 s")
    if after > 10:
        sys.exit(f"{what}: the job ended {after:.1f} s after the TransportError (at most 10 s):\n{out}")


def main():
    a = launchers.arguments(__doc__, ("timeout", float))
    py = sys.executable
    if a.mpiexec:
        check(launchers.mpirun(a.mpiexec, a.np, py, STALL, str(a.timeout)), "mpirun", a.np, a.timeout)
    if a.torchrun:
        check(launchers.torchrun(a.torchrun, a.np, STALL, str(a.timeout)), "torchrun", a.np, a.timeout)


if __name__ == "__main__":
    main()
