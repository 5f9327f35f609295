"""Speed of iterated Tikhonov on a9a, side by side with scikit-learn.

1. Linear logistic Tikhonov (t = 1), lam = 1/n, no intercept, on all of a9a (32561 x 123,
   CSR): wall time of ``mk.solve(..., solver="iterated_tikhonov")`` and of scikit-learn's
   ``LogisticRegression(solver="newton-cholesky", fit_intercept=False, C=1/(n lam))`` to
   reach the same objective F(theta) = 1/n sum log(1 + exp(-y x.theta)) + lam/2 ||theta||^2
   within relative 1e-8 of F* (computed with a tolerance far below it). For each solver
   the tolerance is lowered decade by decade until a run meets the target; the time of
   that run (median of ``--repeat``) is reported with the ratio.
2. Kernel logistic regression, RBF kernel, Nystroem with m = 1000 centres on all of a9a
   (PCG Newton steps): time and accuracy on a9a.t, against ``SVC(kernel="rbf")`` trained on
   the largest subset (doubling sizes) whose fit takes no longer than ours.

Data come from the folder named by ``MARGINKIT_DATA`` (a9a.xz, a9a.t.xz).

Usage::

    MARGINKIT_DATA=... python benchmarks/tikhonov_speed.py [--part linear|kernel|all]
"""
import argparse
import json
import time

import numpy as np

from svm_common import a9a_int32


def objective(X, y, coef, lam):
    z = X @ coef
    return float(np.mean(np.logaddexp(0.0, -y * z)) + 0.5 * lam * coef @ coef)


def timed(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def linear_part(repeat):
    import marginkit as mk
    from sklearn.linear_model import LogisticRegression

    X, y, _, _ = a9a_int32()
    n = X.shape[0]
    lam = 1.0 / n
    ref = mk.solve(X, y, solver="iterated_tikhonov", kernel="linear", lam=lam, t=1, tol=1e-13)
    f_star = objective(X, y, ref.coef_, lam)
    ref_sk = LogisticRegression(solver="newton-cholesky", fit_intercept=False, C=1 / (n * lam),
                                tol=1e-14, max_iter=1000).fit(X, y)
    f_star = min(f_star, objective(X, y, ref_sk.coef_.ravel(), lam))
    target = f_star * (1 + 1e-8)
    rows = {}

    def ours(tol):
        return mk.solve(X, y, solver="iterated_tikhonov", kernel="linear", lam=lam, t=1,
                        tol=tol).coef_

    def sklearn(tol):
        return LogisticRegression(solver="newton-cholesky", fit_intercept=False,
                                  C=1 / (n * lam), tol=tol, max_iter=1000).fit(X, y).coef_.ravel()

    for name, fn in (("marginkit iterated_tikhonov (t=1)", ours),
                     ("sklearn LogisticRegression(newton-cholesky)", sklearn)):
        for tol in 10.0 ** -np.arange(2, 15):
            fn(tol)  # warm-up (imports, caches)
            sec, coef = timed(lambda: fn(tol), repeat)
            f = objective(X, y, coef, lam)
            if f <= target:
                rows[name] = {"seconds": sec, "tol": float(tol), "rel_gap": f / f_star - 1}
                break
    names = list(rows)
    ratio = rows[names[0]]["seconds"] / rows[names[1]]["seconds"]
    print(f"\n## Linear logistic Tikhonov on a9a (n={n}, d={X.shape[1]}, lam=1/n), "
          f"target F <= F* (1 + 1e-8), F* = {f_star:.12f}")
    print("| solver | tol reaching the target | relative gap | time (s) |")
    print("|---|---|---|---|")
    for name, row in rows.items():
        print(f"| {name} | {row['tol']:.0e} | {row['rel_gap']:.1e} | {row['seconds']:.4f} |")
    print(f"ratio marginkit / scikit-learn: {ratio:.2f}x")
    return {"f_star": f_star, "rows": rows, "ratio": ratio}


def kernel_part(m, lam, t, gamma, budget_factor, newton_solvers=("cg", "cholesky")):
    import marginkit as mk
    from sklearn.svm import SVC

    X, y, Xt, yt = a9a_int32()
    n = X.shape[0]
    out = {"m": m, "lam": lam, "t": t, "gamma": gamma}
    for solver in newton_solvers:
        t0 = time.perf_counter()
        res = mk.solve(X, y, solver="iterated_tikhonov", kernel="rbf",
                       kernel_params={"gamma": gamma}, n_components=m, lam=lam, t=t,
                       newton_solver=solver, random_state=0, tol=1e-6)
        sec = time.perf_counter() - t0
        acc = res.score(Xt, yt)
        out[solver] = {"seconds": sec, "test_accuracy": acc, "status": res.status,
                       "newton_iter": int(res.n_iter)}
    ours = out[newton_solvers[0]]["seconds"]
    budget = budget_factor * ours
    rng = np.random.default_rng(0)
    perm = rng.permutation(n)
    svc = []
    size = 1000
    while size <= n:
        idx = perm[:size]
        t0 = time.perf_counter()
        clf = SVC(kernel="rbf", gamma=gamma, C=1.0).fit(X[idx], y[idx])
        sec = time.perf_counter() - t0
        acc = float(np.mean(clf.predict(Xt) == yt))
        svc.append({"n": size, "seconds": sec, "test_accuracy": acc})
        if sec > budget:
            break
        size = min(2 * size, n) if size < n else n + 1
    fit = [row for row in svc if row["seconds"] <= budget]
    out["svc"] = svc
    out["svc_within_budget"] = fit[-1] if fit else None
    print(f"\n## Kernel logistic (RBF gamma={gamma}, Nystroem m={m}, lam={lam}, t={t}) on all of "
          f"a9a (n={n}), test on a9a.t (n={Xt.shape[0]})")
    print("| method | training points | time (s) | test accuracy |")
    print("|---|---|---|---|")
    for solver in newton_solvers:
        row = out[solver]
        print(f"| marginkit iterated_tikhonov, Newton by {solver} | {n} | {row['seconds']:.2f} | "
              f"{row['test_accuracy']:.4f} |")
    for row in svc:
        mark = "" if row["seconds"] <= budget else " (over budget)"
        print(f"| sklearn SVC(rbf){mark} | {row['n']} | {row['seconds']:.2f} | "
              f"{row['test_accuracy']:.4f} |")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("linear", "kernel", "all"), default="all")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--m", type=int, default=1000)
    ap.add_argument("--lam", type=float, default=1e-5)
    ap.add_argument("--t", type=int, default=1)
    ap.add_argument("--gamma", type=float, default=1.0 / 123)
    ap.add_argument("--budget-factor", type=float, default=1.0)
    ap.add_argument("--newton-solvers", nargs="+", default=["cg", "cholesky"],
                    help="Newton linear solvers to time (the first sets the SVC budget)")
    ap.add_argument("--json", default=None, help="write the numbers to this file")
    a = ap.parse_args(argv)
    results = {}
    if a.part in ("linear", "all"):
        results["linear"] = linear_part(a.repeat)
    if a.part in ("kernel", "all"):
        results["kernel"] = kernel_part(a.m, a.lam, a.t, a.gamma, a.budget_factor,
                                        tuple(a.newton_solvers))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(results, fh, indent=1, default=float)


if __name__ == "__main__":
    main()
