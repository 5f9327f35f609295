"""Reproduce Table 1 and Figure 1 of paper 002: learning rates of iterated Tikhonov.

Synthetic task of section 4 (``mk.datasets.make_source_capacity``): alpha = 2,
r in {0.25, 3.25, 10.25}, logistic loss, kernel ``spline`` of order alpha. For every
sample size n and repetition, IT(8) is run once per lambda of the paper's grid (50
log-spaced values in [1e-4, 1]) with ``keep_path=True``: by Definition 1 its proximal
iterates 1 and 3 are IT(1) and IT(3). For each t the lowest excess risk over the grid
(Monte Carlo, 10^4 points, app. E.3) is kept, averaged over repetitions, and the
exponent gamma of excess risk ~ n^-gamma is fitted by least squares in log-log scale.

Sizes up to ``--exact-upto`` use the exact kernel (representer theorem, beta in R^n);
larger ones the Nystroem approximation with ``--centres`` centres.

Usage::

    python benchmarks/tikhonov_rates.py                       # defaults below, ~minutes
    python benchmarks/tikhonov_rates.py --n 200 400 800 --reps 2 --out rates_quick

Writes ``<out>.json`` (the fitted table and one record per run) and ``<out>.png`` (the log-log plot), and prints the
table in Markdown.
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
LAMS = np.logspace(-4, 0, 50)


def one_run(args):
    """Min-over-lambda excess risk of IT(1), IT(3), IT(8) for one (r, n, repetition)."""
    r, n, rep, exact_upto, centres, tol, n_max, norm = args
    from threadpoolctl import threadpool_limits

    import marginkit as mk
    from marginkit.datasets._source_capacity import source_capacity_target
    from marginkit.solvers.tikhonov import NystroemMap

    with threadpool_limits(1):
        if n_max:
            # nested samples: the n points of repetition rep are the first n of one draw of
            # n_max points (common random numbers across n: steadier slopes)
            seed = int(1_000_003 * rep + int(100 * r))
            X, y = mk.datasets.make_source_capacity(n_max, r, ALPHA, random_state=seed,
                                                    normalization=norm)
            X, y = X[:n], y[:n]
        else:
            seed = int(1_000_003 * rep + 7919 * n + int(100 * r))
            X, y = mk.datasets.make_source_capacity(n, r, ALPHA, random_state=seed,
                                                    normalization=norm)
        kernel = mk.get_plugin("kernel", "spline")(order=ALPHA, normalization=norm)
        x_mc = np.random.default_rng(12345).random(10_000).reshape(-1, 1)
        star = source_capacity_target(x_mc[:, 0], r, ALPHA, norm)
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
        risks = np.full((len(LAMS), len(TS)), np.nan)
        n_newton, statuses = 0, []
        for i, lam in enumerate(LAMS):
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
            "lam": LAMS[best].tolist(), "curves": risks.tolist(), "newton_iter": n_newton, "seconds": elapsed,
            "converged": statuses.count("converged"), "fits": len(statuses),
            "nystroem": n > exact_upto}


def fit_rates(records, ns):
    from marginkit.datasets._source_capacity import theoretical_rate

    table = {}
    for r in RS:
        for j, t in enumerate(TS):
            mean = [np.mean([rec["risk"][j] for rec in records if rec["r"] == r and rec["n"] == n])
                    for n in ns]
            slope, icpt = np.polyfit(np.log(ns), np.log(mean), 1)
            # variant: one lambda per n, the minimizer of the risk curve averaged over reps
            curve = [np.min(np.mean([np.asarray(rec["curves"])[:, j] for rec in records
                                     if rec["r"] == r and rec["n"] == n], axis=0)) for n in ns]
            slope2 = np.polyfit(np.log(ns), np.log(curve), 1)[0]
            table[f"{r}/{t}"] = {"r": r, "t": t, "gamma": -slope, "intercept": icpt,
                                 "gamma_mean_curve": -slope2,
                                 "theory": theoretical_rate(r, ALPHA, t), "mean_risk": mean,
                                 "mean_curve_risk": curve}
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[100, 200, 400, 800, 1600, 3200])
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--exact-upto", type=int, default=400)
    ap.add_argument("--centres", type=int, default=150)
    ap.add_argument("--tol", type=float, default=1e-8)
    ap.add_argument("--normalization", choices=("series", "bernoulli"), default="series",
                    help="spline normalization: Fourier series (paper's definition) or the "
                         "closed form printed in app. E.1")
    ap.add_argument("--independent", action="store_true",
                    help="independent samples per n (default: nested samples within a repetition)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "docs",
                                                  "tikhonov_rates"))
    a = ap.parse_args(argv)
    n_max = 0 if a.independent else max(a.n)
    tasks = [(r, n, rep, a.exact_upto, a.centres, a.tol, n_max, a.normalization)
             for n in sorted(a.n, reverse=True) for r in RS for rep in range(a.reps)]
    t0 = time.perf_counter()
    with mp.get_context("spawn").Pool(a.jobs) as pool:
        records = []
        for rec in pool.imap_unordered(one_run, tasks):
            records.append(rec)
            print(f"  r={rec['r']:<5} n={rec['n']:<5} rep={rec['rep']} {rec['seconds']:6.1f}s "
                  f"newton={rec['newton_iter']} converged={rec['converged']}/{rec['fits']} "
                  f"risk={np.round(rec['risk'], 6).tolist()}", flush=True)
    wall = time.perf_counter() - t0
    ns = sorted(a.n)
    table = fit_rates(records, ns)
    out = os.path.abspath(a.out)
    # per-run records without their 50-lambda risk curves (the table keeps what is fitted
    # from them), one record per line: a 100-repetition run stays a few hundred KB
    slim = [{k: v for k, v in rec.items() if k != "curves"} for rec in records]
    with open(out + ".json", "w") as fh:
        head = {"args": {k: v for k, v in vars(a).items() if k != "out"},
                "wall_seconds": wall, "table": table}
        fh.write(json.dumps(head, indent=1)[:-2] + ',\n "records": [\n')
        fh.write(",\n".join(json.dumps(rec, separators=(",", ":")) for rec in slim))
        fh.write("\n ]\n}\n")
    plot(table, ns, out + ".png")
    print(f"\nwall time {wall:.0f}s on {a.jobs} processes; n = {ns}, {a.reps} repetitions")
    print("gamma: mean over repetitions of the per-run best lambda (in brackets: lambda "
          "minimizing the mean risk curve)")
    print("| r | " + " | ".join(f"t={t} theory | t={t} estimate" for t in TS) + " |")
    print("|---" * (1 + 2 * len(TS)) + "|")
    for r in RS:
        cells = []
        for t in TS:
            row = table[f"{r}/{t}"]
            cells += [f"{row['theory']:.2f}",
                      f"{row['gamma']:.2f} ({row['gamma_mean_curve']:.2f})"]
        print(f"| {r} | " + " | ".join(cells) + " |")
    print(f"\nwrote {out}.json and {out}.png")


if __name__ == "__main__":
    main()
