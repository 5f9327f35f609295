"""fista / fista_svm on 1 vs 2 OpenMP threads, interleaved in one process (threadpoolctl).

    MARGINKIT_DATA=<data folder> python benchmarks/svm_threads.py [--reps 9] [--data a9a]

Each repetition solves the same problem (defaults, certified stop) once with
``threadpool_limits(1)`` and once with ``threadpool_limits(2)`` and ``threads=2`` (the
team on every iteration; the default ``"auto"`` would choose between one thread and the
team, see ``benchmarks/threads_busy.py``). Reported: the median over
repetitions of the per-iteration time (median of the iterations of one run, which is
robust to a run being preempted on a shared machine), of the whole wall time, the median
ratio 1-thread / 2-thread with its range over repetitions, and whether the two runs
returned bitwise-identical coefficients (the row blocks do not depend on the thread count).

With ``--liblinear`` each repetition also trains LIBLINEAR (-s 3 -B 1 -c 64/n on the
std-scaled data, single-threaded by design) and the wall times of the 1- and 2-thread
solves are reported as ratios to its median (the target "fista within 2x LIBLINEAR",
with marginkit on its default thread count of a 2-core machine).
"""
import argparse
import time

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from svm_common import liblinear_train, load_split, std_scaled
import marginkit as mk
from marginkit.solvers import svm


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--data", default="a9a")
    ap.add_argument("--solvers", default="fista,fista_svm")
    ap.add_argument("--liblinear", action="store_true",
                    help="also time LIBLINEAR in every repetition and print the ratios")
    args = ap.parse_args()
    X, y, Xt, _ = load_split(args.data)
    X = sp.csr_matrix(X)
    Xs = std_scaled(X, Xt)[0] if args.liblinear else None
    steps = []
    plain_step = svm._FistaState.step

    def timed_step(state):
        t = time.perf_counter()
        plain_step(state)
        steps.append(time.perf_counter() - t)

    svm._FistaState.step = timed_step
    for solver in args.solvers.split(","):
        it = {1: [], 2: []}
        wall = {1: [], 2: []}
        res = {}
        lib = []
        same = True
        for _ in range(args.reps):
            if Xs is not None:
                lib.append(liblinear_train(Xs, y, 64.0 / X.shape[0])[1])
            for nt in (1, 2):
                with threadpool_limits(nt):
                    steps.clear()
                    t = time.perf_counter()
                    # the team itself (``threads=nt``), not the run's own choice
                    res[nt] = mk.solve(X, y, solver=solver, solver_params={"threads": nt})
                    wall[nt].append(time.perf_counter() - t)
                    it[nt].append(np.median(steps))
            same &= res[1].coef_.tobytes() == res[2].coef_.tobytes()
        i1, i2, w1, w2 = (np.asarray(v) for v in (it[1], it[2], wall[1], wall[2]))
        print(f"{args.data} {solver} ({res[1].n_iter} iterations): per iteration "
              f"{np.median(i1) * 1e3:.3f} ms (1 thread) vs {np.median(i2) * 1e3:.3f} ms (2), "
              f"speedup {np.median(i1 / i2):.2f} [{np.min(i1 / i2):.2f}, {np.max(i1 / i2):.2f}]; "
              f"wall {np.median(w1):.3f} s vs {np.median(w2):.3f} s, speedup "
              f"{np.median(w1 / w2):.2f} [{np.min(w1 / w2):.2f}, {np.max(w1 / w2):.2f}]; "
              f"bitwise identical: {same}", flush=True)
        if lib:
            t = np.median(lib)
            print(f"  LIBLINEAR {t:.3f} s (median of {len(lib)}): {solver} / LIBLINEAR "
                  f"{np.median(w1) / t:.2f} (1 thread), {np.median(w2) / t:.2f} (2 threads)",
                  flush=True)


if __name__ == "__main__":
    main()
