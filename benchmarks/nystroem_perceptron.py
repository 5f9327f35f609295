"""SNKP and ISNKPVN with an RBF-Nystroem kernel on all of a9a, next to LIBSVM's SVC.

marginkit: ``kernel="nystroem"`` (base rbf, gamma = 1/123, m = 1000 centres drawn uniformly
with ``random_state=0``), so G a = Phi (Phi^T a) costs O(n m) and no n x n Gram is formed;
each solver runs under a wall-clock ``time_limit`` and reports its status, certificate
(verified from the data against the approximated Gram), iterations and test accuracy on
a9a.t. Reference: ``sklearn.svm.SVC(kernel="rbf", gamma=1/123, C=1)`` (LIBSVM) trained on
doubling random subsets until a fit takes longer than the slower marginkit run.

Usage::

    MARGINKIT_DATA=... python benchmarks/nystroem_perceptron.py [--m 1000] [--time-limit 240]
"""
import argparse
import time

import numpy as np

from svm_common import a9a_int32


def main(argv=None):
    import marginkit as mk
    from sklearn.svm import SVC

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=1000)
    ap.add_argument("--gamma", type=float, default=1.0 / 123)
    ap.add_argument("--time-limit", type=float, default=240.0)
    ap.add_argument("--solvers", default="snkp,isnkpvn")
    args = ap.parse_args(argv)

    X, y, Xt, yt = a9a_int32()
    n = X.shape[0]
    kp = {"base": "rbf", "base_params": {"gamma": args.gamma}, "n_components": args.m,
          "random_state": 0}
    rows = []
    for solver in args.solvers.split(","):
        t0 = time.perf_counter()
        res = mk.solve(X, y, solver=solver, kernel="nystroem", kernel_params=kp,
                       time_limit=args.time_limit, max_iter=10**7)
        sec = time.perf_counter() - t0
        verified = None if res.certificate is None else res.certificate.verify(X, y)
        rows.append({"method": f"marginkit {solver} (Nystroem m={args.m})", "n": n,
                     "seconds": sec, "test_accuracy": res.score(Xt, yt),
                     "status": res.status, "n_iter": int(res.n_iter), "verified": verified,
                     "margin_bounds": res.margin_bounds})
    budget = max(r["seconds"] for r in rows)
    perm = np.random.default_rng(0).permutation(n)
    size = 1000
    while True:
        idx = np.sort(perm[:size])
        t0 = time.perf_counter()
        clf = SVC(kernel="rbf", gamma=args.gamma, C=1.0).fit(X[idx], y[idx])
        sec = time.perf_counter() - t0
        rows.append({"method": "LIBSVM SVC(rbf)" + ("" if sec <= budget else " (over budget)"),
                     "n": size, "seconds": sec, "test_accuracy": float(clf.score(Xt, yt)),
                     "status": "-", "n_iter": None, "verified": None, "margin_bounds": None})
        if sec > budget or size == n:
            break
        size = min(2 * size, n)
    print(f"a9a (n={n}) -> a9a.t (n={Xt.shape[0]}), RBF gamma={args.gamma:.5g}")
    print("| method | training points | time (s) | test accuracy | status | iterations | "
          "certificate verified | margin bounds |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        mb = "-" if r["margin_bounds"] is None else \
            f"[{r['margin_bounds'][0]:.3g}, {r['margin_bounds'][1]:.3g}]"
        print(f"| {r['method']} | {r['n']} | {r['seconds']:.1f} | {r['test_accuracy']:.4f} | "
              f"{r['status']} | {r['n_iter'] if r['n_iter'] is not None else '-'} | "
              f"{'-' if r['verified'] is None else ('yes' if r['verified'] else 'NO')} | {mb} |")


if __name__ == "__main__":
    main()
