"""The cost of the certified-points referee (``CertifiedPointsCertificate.check``).

    MARGINKIT_DATA=<data folder> OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
        python benchmarks/svm_referee_cost.py [--data a9a,mushrooms,madelon,heart_scale]
        [--reps 7] [--against <another source tree>] [--rounds 25]

1. CPU time (``time.process_time``) of a default solve and of ``certificate.check(X, y)``
   (the check the run loop makes once, at the claim), medians over ``reps``, for fista and
   dcd (``random_state`` = repetition).
2. With ``--against``: whole solves alternated with a second source tree (an older
   checkout, its compiled extensions built in place) in two persistent processes, each
   data set and solver ``rounds`` times; median and min ratio of this tree to the other.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

_WORKER = r"""
import sys, time, json
sys.path.insert(0, sys.argv[1])
import marginkit as mk
from marginkit.datasets import load_libsvm
data = {n: load_libsvm(n) for n in sys.argv[2].split(",")}
for line in sys.stdin:
    name, solver, seed = line.split()
    X, y = data[name]
    t0 = time.process_time()
    mk.solve(X, y, solver=solver, random_state=int(seed))
    print(json.dumps(time.process_time() - t0), flush=True)
"""


def check_cost(names, reps):
    import marginkit as mk
    from marginkit.datasets import load_libsvm

    for name in names:
        X, y = load_libsvm(name)
        for solver in ("fista", "dcd"):
            ts, tc = [], []
            for k in range(reps):
                t0 = time.process_time()
                res = mk.solve(X, y, solver=solver, random_state=k)
                ts.append(time.process_time() - t0)
                t0 = time.process_time()
                res.certificate.check(X, y)
                tc.append(time.process_time() - t0)
            s, c = np.median(ts), np.median(tc)
            print(f"{name:12s} {solver:6s} solve {1e3 * s:8.2f} ms  check {1e3 * c:7.2f} ms "
                  f"({100 * c / s:.1f}%)", flush=True)


def alternate(names, other, rounds):
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    roots = [other, here]
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, root, ",".join(names)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for root in roots]
    times = {}
    for rnd in range(rounds):
        order = (0, 1) if rnd % 2 == 0 else (1, 0)
        for name in names:
            for solver in ("fista", "dcd"):
                for idx in order:
                    procs[idx].stdin.write(f"{name} {solver} {rnd}\n")
                    procs[idx].stdin.flush()
                    times.setdefault((name, solver, idx), []).append(
                        json.loads(procs[idx].stdout.readline()))
    for p in procs:
        p.stdin.close()
        p.wait()
    for name in names:
        for solver in ("fista", "dcd"):
            a, b = times[(name, solver, 0)], times[(name, solver, 1)]
            print(f"{name:12s} {solver:6s} this / other: median "
                  f"{statistics.median(b) / statistics.median(a):.3f}, min {min(b) / min(a):.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="a9a,mushrooms,madelon,heart_scale")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--against", default=None)
    ap.add_argument("--rounds", type=int, default=25)
    args = ap.parse_args()
    names = args.data.split(",")
    check_cost(names, args.reps)
    if args.against:
        alternate(names, args.against, args.rounds)


if __name__ == "__main__":
    main()
