"""The cost of the Newton-decrement referee (``NewtonDecrementCertificate.check``).

    MARGINKIT_DATA=<data folder> OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
        python benchmarks/tikhonov_referee_cost.py [--reps 3] [--t 3,8] [--no-a9a]

CPU time (``time.process_time``) of an ``iterated_tikhonov`` solve and of
``certificate.check(X, y)`` (the check the run loop makes once, at the claim), medians
over ``reps``, for a 5000 x 50 synthetic logistic problem with the linear kernel and an
rbf Nystroem map (200 centres), and for a9a (linear kernel, CSR). The referee re-solves
one Newton decrement per proximal step of the certified chain. Run it from the root of
the source tree to measure (it imports ``marginkit`` from there).
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.getcwd())


def synthetic(n=5000, d=50, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w = rng.standard_normal(d)
    y = np.where(X @ w + rng.standard_normal(n) > 0, 1, -1)
    return X, y


def cases(with_a9a):
    X, y = synthetic()
    yield "synthetic", "linear", X, y, {}
    yield "synthetic", "rbf-nystroem", X, y, dict(kernel="rbf", kernel_params={"gamma": 0.02},
                                                  n_components=200, random_state=0)
    if with_a9a:
        from marginkit.datasets import load_libsvm

        Xa, ya = load_libsvm("a9a")
        yield "a9a", "linear", Xa, ya, {}


def main():
    import marginkit as mk

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--t", default="3,8")
    ap.add_argument("--no-a9a", action="store_true")
    args = ap.parse_args()
    for data, kname, X, y, kw in cases(not args.no_a9a):
        for t in [int(s) for s in args.t.split(",")]:
            ts, tc = [], []
            for _ in range(args.reps):
                t0 = time.process_time()
                res = mk.solve(X, y, solver="iterated_tikhonov", t=t, lam=1e-3, **kw)
                ts.append(time.process_time() - t0)
                if res.status != "converged":
                    raise SystemExit(f"{data} {kname} t={t}: status {res.status}")
                t0 = time.process_time()
                ok = res.certificate.check(X, y)
                tc.append(time.process_time() - t0)
                if not ok:
                    raise SystemExit(f"{data} {kname} t={t}: the certificate does not verify")
            s, c = np.median(ts), np.median(tc)
            print(f"{data:10s} {kname:13s} t={t}  solve {1e3 * s:9.1f} ms  check "
                  f"{1e3 * c:8.1f} ms ({100 * c / s:.1f}% of the solve)", flush=True)


if __name__ == "__main__":
    main()
