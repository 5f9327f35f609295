"""Exact-kernel SVM on a9a: marginkit's certified solvers against scikit-learn's SVC
(LIBSVM inside), one script run, the same training rows and test set.

    MARGINKIT_DATA=/path/to/data PYTHONPATH=. python benchmarks/kernel_svm_a9a.py \
        [--n 10000] [--gamma 0.05] [--C 1] [--solvers dcd,fista_svm] [--mu 0.001,0.01] \
        [--fraction 0.5]

Prints, per run: time, status, iterations, certified fraction, test accuracy, and for
SVC its time, iterations and accuracy; then the ratio of times and the accuracy gap.
"""
import argparse
import time

import numpy as np

import marginkit as mk
from marginkit.datasets import load_libsvm


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--gamma", type=float, default=0.05)
    ap.add_argument("--C", type=float, default=1.0)
    ap.add_argument("--solvers", default="dcd,fista_svm")
    ap.add_argument("--mu", default="default")
    ap.add_argument("--fraction", default="default")
    ap.add_argument("--no-svc", action="store_true")
    a = ap.parse_args()
    X, y = load_libsvm("a9a", n_features=123)
    Xt, yt = load_libsvm("a9a.t", n_features=123)
    X, y = X[:a.n], y[:a.n]
    kp = {"gamma": a.gamma}
    svc_t = svc_acc = None
    if not a.no_svc:
        from sklearn.svm import SVC

        t0 = time.perf_counter()
        svc = SVC(C=a.C, gamma=a.gamma, kernel="rbf", cache_size=2000).fit(X, y)
        svc_t = time.perf_counter() - t0
        svc_acc = 100.0 * svc.score(Xt, yt)
        print(f"SVC (libsvm)      time {svc_t:7.2f}s  iters {int(svc.n_iter_[0]):6d}  "
              f"SV {svc.support_.size}  test acc {svc_acc:.2f}%")
    mus = [None if m == "default" else float(m) for m in a.mu.split(",")]
    fracs = [None if f == "default" else float(f) for f in a.fraction.split(",")]
    for solver in a.solvers.split(","):
        for mu in mus:
            for frac in fracs:
                kw = {} if mu is None else {"mu": mu}
                if frac is not None:
                    kw["stop"] = [("certified_points", {"fraction": frac})]
                t0 = time.perf_counter()
                res = mk.solve(X, y, solver=solver, kernel="rbf", kernel_params=kp, C=a.C,
                               max_iter=100_000, **kw)
                el = time.perf_counter() - t0
                acc = 100.0 * float(np.mean(res.predict(Xt) == yt))
                cert = 0.0 if res.certified_mask is None else float(np.mean(res.certified_mask))
                line = (f"{solver:9s} mu={res.extra['mu']:<8.3g} frac={frac}  time {el:7.2f}s "
                        f"(solve {res.time_s:.2f}s) status {res.status:9s} iters {res.n_iter:6d} "
                        f"certified {100 * cert:5.1f}%  SV {res.extra['support_indices'].size} "
                        f"test acc {acc:.2f}%")
                if svc_t:
                    line += f"  time/SVC {el / svc_t:.2f}  acc-SVC {acc - svc_acc:+.2f}"
                print(line, flush=True)


if __name__ == "__main__":
    main()
