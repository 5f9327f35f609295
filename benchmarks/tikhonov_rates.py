"""Reproduce Table 1 and Figure 1 of Beugnot, Mairal and Rudi (NeurIPS 2021): learning rates
of iterated Tikhonov.

Synthetic task of section 4 (``mk.datasets.make_source_capacity``): alpha = 2,
r in {0.25, 3.25, 10.25}, logistic loss, target theta* = Lambda_q(0, .) (the Fourier
series of the paper's definition, q = (r + 1/2) alpha + 1/2), kernel ``spline`` of order
alpha in the chosen normalization (``--normalization``: the series of the definition by
default, or the closed form printed in app. E.1). For every sample size n and repetition,
IT(8) is run once per lambda of the paper's grid (50 log-spaced values in [1e-4, 1]) with
``keep_path=True``: by Definition 1 its proximal iterates 1 and 3 are IT(1) and IT(3).
For each t the lowest excess risk over the grid (Monte Carlo, 10^4 points, app. E.3) is
kept, averaged over repetitions, and the exponent gamma of excess risk ~ n^-gamma is
fitted by least squares in log-log scale. Its standard error is the bootstrap one over
repetitions (a repetition is one draw of ``max(n)`` points whose first n serve every n:
the unit that is independent).

Sizes up to ``--exact-upto`` use the exact kernel (representer theorem, beta in R^n);
larger ones the Nystroem approximation with ``--centres`` centres.

Usage::

    PYTHONPATH=. python benchmarks/tikhonov_rates.py              # defaults below, ~minutes
    PYTHONPATH=. python benchmarks/tikhonov_rates.py --n 200 400 800 --reps 2 --out rates_quick

Writes ``<out>.json`` (the fitted table and one record per run) and ``<out>.png`` (the
log-log plot), and prints the table in Markdown.
"""
import argparse
import json
import multiprocessing as mp
import os
import time

import numpy as np

ALPHA = 2.0
RS = (0.25, 3.25, 10.25)
TS = (1, 3, 8)
#: the paper's grid (app. E.1): 50 log-spaced values in [1e-4, 1]
N_LAMS = 50


def lambda_grid(n_lams=N_LAMS):
    return np.logspace(-4, 0, n_lams)


def one_run(args):
    """Min-over-lambda excess risk of IT(1), IT(3), IT(8) for one (r, n, repetition)."""
    r, n, rep, exact_upto, centres, tol, n_max, norm, n_lams = args
    lams = lambda_grid(n_lams)
    from threadpoolctl import threadpool_limits

    import marginkit as mk
    from marginkit.datasets._source_capacity import source_capacity_target
    from marginkit.kernels.approximation import NystroemMap

    with threadpool_limits(1):
        if n_max:
            # nested samples: the n points of repetition rep are the first n of one draw of
            # n_max points (common random numbers across n: steadier slopes)
            seed = int(1_000_003 * rep + int(100 * r))
            X, y = mk.datasets.make_source_capacity(n_max, r, ALPHA, random_state=seed)
            X, y = X[:n], y[:n]
        else:
            seed = int(1_000_003 * rep + 7919 * n + int(100 * r))
            X, y = mk.datasets.make_source_capacity(n, r, ALPHA, random_state=seed)
        kernel = mk.get_plugin("kernel", "spline")(order=ALPHA, normalization=norm)
        x_mc = np.random.default_rng(12345).random(10_000).reshape(-1, 1)
        star = source_capacity_target(x_mc[:, 0], r, ALPHA)
        p = 0.5 * (1.0 + np.tanh(0.5 * star))
        base = p * np.logaddexp(0.0, -star) + (1 - p) * np.logaddexp(0.0, star)
        t0 = time.perf_counter()
        if n <= exact_upto:
            # exact kernel: the Gram matrix once, beta in R^n (representer theorem)
            data, kname = kernel(X, X), "precomputed"
            features_mc = kernel(x_mc, X)
        else:
            # Nystroem features once (the same map for every lambda), theta in R^m
            nys = NystroemMap(kernel, centres, random_state=seed).fit(X)
            data, kname = nys.transform(X), "linear"
            features_mc = nys.transform(x_mc)
        risks = np.full((len(lams), len(TS)), np.nan)
        n_newton, statuses = 0, []
        for i, lam in enumerate(lams):
            res = mk.solve(data, y, solver="iterated_tikhonov", kernel=kname, t=max(TS),
                           lam=float(lam), tol=tol, keep_path=True)
            statuses.append(res.status)
            n_newton += int(res.n_iter)
            for j, t in enumerate(TS):
                theta = features_mc @ res.extra["path"][t - 1]
                risk = p * np.logaddexp(0.0, -theta) + (1 - p) * np.logaddexp(0.0, theta) - base
                risks[i, j] = float(np.mean(risk))
        elapsed = time.perf_counter() - t0
    best = np.nanargmin(risks, axis=0)
    return {"r": r, "n": n, "rep": rep, "risk": risks.min(axis=0).tolist(),
            "lam": lams[best].tolist(), "curves": risks.tolist(), "newton_iter": n_newton, "seconds": elapsed,
            "converged": statuses.count("converged"), "fits": len(statuses),
            "nystroem": n > exact_upto}


def _slope(ns, risk):
    """gamma (minus the least-squares slope of log risk on log n) and the intercept."""
    slope, icpt = np.polyfit(np.log(ns), np.log(risk), 1)
    return -slope, icpt


def fit_rates(records, ns, nested=True, n_boot=2000, seed=0):
    """The table: per (r, t) gamma of the mean (over repetitions) of the per-run best
    risk, its bootstrap standard error over repetitions, and the variant with one lambda
    per n (the minimizer of the mean risk curve, when the records keep their curves).

    With nested samples the repetitions are resampled as a whole (one draw serves every
    n); with independent samples each n is resampled on its own."""
    from marginkit.datasets._source_capacity import theoretical_rate

    rng = np.random.default_rng(seed)
    table = {}
    for r in RS:
        reps = sorted({rec["rep"] for rec in records if rec["r"] == r})
        by = {(rec["n"], rec["rep"]): rec for rec in records if rec["r"] == r}
        risk = np.array([[by[(n, rep)]["risk"] for n in ns] for rep in reps])  # rep, n, t
        m = len(reps)
        if nested:
            draws = rng.integers(0, m, size=(n_boot, m))
            boot = risk[draws].mean(axis=1)                           # boot, n, t
        else:
            draws = rng.integers(0, m, size=(n_boot, m, len(ns)))
            boot = np.take_along_axis(risk[None, :, :, :],
                                      draws[..., None], axis=1).mean(axis=1)
        curves = all("curves" in by[(n, rep)] for n in ns for rep in reps)
        for j, t in enumerate(TS):
            mean = risk[:, :, j].mean(axis=0)
            gamma, icpt = _slope(ns, mean)
            se = float(np.std([_slope(ns, b)[0] for b in boot[:, :, j]], ddof=1))
            row = {"r": r, "t": t, "gamma": gamma, "gamma_se": se, "intercept": icpt,
                   "theory": theoretical_rate(r, ALPHA, t), "mean_risk": mean.tolist(),
                   "risk_se": (risk[:, :, j].std(axis=0, ddof=1) / np.sqrt(m)).tolist(),
                   "reps": m}
            if curves:
                curve = [float(np.min(np.mean([np.asarray(by[(n, rep)]["curves"])[:, j]
                                               for rep in reps], axis=0))) for n in ns]
                row["gamma_mean_curve"] = _slope(ns, curve)[0]
                row["mean_curve_risk"] = curve
            table[f"{r}/{t}"] = row
    return table


def plot(table, ns, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(RS), figsize=(5 * len(RS), 4), sharey=False)
    colors = {1: "tab:blue", 3: "tab:green", 8: "tab:orange"}
    for ax, r in zip(axes, RS):
        for t in TS:
            row = table[f"{r}/{t}"]
            ax.loglog(ns, row["mean_risk"], "o-", color=colors[t],
                      label=f"IT({t}): gamma={row['gamma']:.2f} (theory {row['theory']:.2f})")
            # theory slope through the first point
            ref = row["mean_risk"][0] * (np.asarray(ns) / ns[0]) ** (-row["theory"])
            ax.loglog(ns, ref, "--", color=colors[t], alpha=0.5)
        ax.set_title(f"r = {r}, alpha = {ALPHA:g}")
        ax.set_xlabel("n")
        ax.set_ylabel("excess risk (min over lambda)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def compute(ns, reps, exact_upto=400, centres=150, tol=1e-8, normalization="series",
            independent=False, jobs=1, n_lams=N_LAMS, log=print):
    """Run every (r, n, repetition) on ``jobs`` processes; (records, table, wall seconds)."""
    n_max = 0 if independent else max(ns)
    tasks = [(r, n, rep, exact_upto, centres, tol, n_max, normalization, n_lams)
             for n in sorted(ns, reverse=True) for r in RS for rep in range(reps)]
    t0 = time.perf_counter()
    records = []
    if jobs == 1:
        results = map(one_run, tasks)
    else:
        pool = mp.get_context("spawn").Pool(jobs)
        results = pool.imap_unordered(one_run, tasks)
    try:
        for rec in results:
            records.append(rec)
            if log:
                log(f"  r={rec['r']:<5} n={rec['n']:<5} rep={rec['rep']} {rec['seconds']:6.1f}s "
                    f"newton={rec['newton_iter']} converged={rec['converged']}/{rec['fits']} "
                    f"risk={np.round(rec['risk'], 6).tolist()}")
    finally:
        if jobs != 1:
            pool.close()
            pool.join()
    wall = time.perf_counter() - t0
    return records, fit_rates(records, sorted(ns), nested=not independent), wall


def write(records, table, ns, args, wall, out):
    """``<out>.json`` (arguments, table, one compact record per run) and ``<out>.png``."""
    # per-run records without their lambda risk curves (the table keeps what is fitted
    # from them), one record per line: a 100-repetition run stays a few hundred KB
    slim = [{k: v for k, v in rec.items() if k != "curves"} for rec in records]
    with open(out + ".json", "w") as fh:
        head = {"args": args, "wall_seconds": wall, "table": table}
        fh.write(json.dumps(head, indent=1)[:-2] + ',\n "records": [\n')
        fh.write(",\n".join(json.dumps(rec, separators=(",", ":")) for rec in slim))
        fh.write("\n ]\n}\n")
    plot(table, sorted(ns), out + ".png")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[100, 200, 400, 800, 1600, 3200])
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--exact-upto", type=int, default=400)
    ap.add_argument("--centres", type=int, default=150)
    ap.add_argument("--tol", type=float, default=1e-8)
    ap.add_argument("--normalization", choices=("series", "bernoulli"), default="series",
                    help="normalization of the fitted spline kernel: the Fourier series of "
                         "the paper's definition (default) or the closed form printed in "
                         "app. E.1 (the same RKHS; its non-constant eigenvalues are (2 pi)^-2 "
                         "smaller, so the best lambda is ~40x smaller); the target is the same")
    ap.add_argument("--independent", action="store_true",
                    help="independent samples per n (default: nested samples within a repetition)")
    ap.add_argument("--lambdas", type=int, default=N_LAMS,
                    help="size of the log-spaced lambda grid on [1e-4, 1] (paper: 50)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "docs",
                                                  "tikhonov_rates"))
    a = ap.parse_args(argv)
    records, table, wall = compute(a.n, a.reps, a.exact_upto, a.centres, a.tol,
                                   a.normalization, a.independent, a.jobs, a.lambdas,
                                   log=lambda m: print(m, flush=True))
    ns = sorted(a.n)
    out = os.path.abspath(a.out)
    write(records, table, ns, {k: v for k, v in vars(a).items() if k != "out"}, wall, out)
    print(f"\nwall time {wall:.0f}s on {a.jobs} processes; n = {ns}, {a.reps} repetitions")
    print("gamma +- bootstrap standard error: mean over repetitions of the per-run best "
          "lambda (in brackets: lambda minimizing the mean risk curve)")
    print("| r | " + " | ".join(f"t={t} theory | t={t} estimate" for t in TS) + " |")
    print("|---" * (1 + 2 * len(TS)) + "|")
    for r in RS:
        cells = []
        for t in TS:
            row = table[f"{r}/{t}"]
            cells += [f"{row['theory']:.2f}",
                      f"{row['gamma']:.2f} +- {row['gamma_se']:.2f} "
                      f"({row['gamma_mean_curve']:.2f})"]
        print(f"| {r} | " + " | ".join(cells) + " |")
    print(f"\nwrote {out}.json and {out}.png")


if __name__ == "__main__":
    main()
