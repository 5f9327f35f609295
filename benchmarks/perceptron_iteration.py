"""Cost of one linear-kernel SNKP iteration (Ramdas & Peña, ICML 2014) against two scipy CSR
matvecs.

    MARGINKIT_DATA=<data folder> OMP_NUM_THREADS=1 python benchmarks/perceptron_iteration.py [--reps 1000]

Side by side in one process, interleaved, medians over ``reps``:
  * ``state.step()`` of the state ``mk.solve(X, y, solver="snkp")`` runs (one G v, the
    softmax, the O(n) updates),
  * ``G a`` alone (the Gram operator's product),
  * scipy ``X @ v`` followed by ``X.T @ u``;
and the per-iteration cost of the whole ``mk.solve`` loop (Python between iterations
included): the median gap between consecutive callbacks.
"""
import argparse
import lzma
import os
import time

import numpy as np

import marginkit as mk
from marginkit._api import Problem
from marginkit._validation import check_random_state


def load_a9a():
    folder = os.environ.get("MARGINKIT_DATA")
    if not folder:
        raise SystemExit("set MARGINKIT_DATA to the folder holding a9a.xz")
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(lzma.open(os.path.join(folder, "a9a.xz")))
    return X.tocsr(), np.where(y > 0, 1.0, -1.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1000)
    args = ap.parse_args()
    X, y = load_a9a()
    cfg = mk.Config(solver="snkp")
    problem = Problem(X=X, y=y, classes_=np.array([-1.0, 1.0]),
                      kernel=mk.get_plugin("kernel", "linear")(),
                      smoother=mk.get_plugin("smoother", "entropy")(), params={},
                      rng=check_random_state(0), config=cfg)
    state = mk.get_plugin("solver", "snkp")().start(problem)
    rng = np.random.default_rng(0)
    v, u, a = rng.random(X.shape[1]), rng.random(X.shape[0]), rng.random(X.shape[0])
    XT = X.T
    t_step, t_scipy, t_op = [], [], []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        state.step()
        t1 = time.perf_counter()
        X @ v
        XT @ u
        t2 = time.perf_counter()
        state.op.dot(a)
        t3 = time.perf_counter()
        t_step.append(t1 - t0)
        t_scipy.append(t2 - t1)
        t_op.append(t3 - t2)
    s, m, o = np.median(t_step), np.median(t_scipy), np.median(t_op)
    print(f"a9a {X.shape}, nnz {X.nnz}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}")
    print(f"SNKP step        {s * 1e3:8.3f} ms   ratio {s / m:.3f}")
    print(f"G a alone        {o * 1e3:8.3f} ms   ratio {o / m:.3f}")
    print(f"X@v + X.T@u      {m * 1e3:8.3f} ms")
    # the whole solve loop (snapshot, stopping rules, Python between iterations): median gap
    # between consecutive callbacks (medians, since a shared machine preempts some iterations)
    stamps = []
    mk.solve(X, y, solver="snkp", stop=[("max_iter", {"n": min(args.reps, 500)})],
             callback=lambda st: stamps.append(time.perf_counter()) and False)
    per = np.median(np.diff(stamps))
    print(f"mk.solve loop    {per * 1e3:8.3f} ms per iteration (ratio {per / m:.3f}, not interleaved)")


if __name__ == "__main__":
    main()
