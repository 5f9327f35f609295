"""The SVM paper's Table 2 at the real sizes, on generated stand-ins: time vs n.

The large data sets of the paper's Table 2 (SUSY, HEPMASS, HIGGS, epsilon) are generated
from its own geometric model (``marginkit.datasets.make_clusters``, the data set's number
of features, 8% noisy observations, uncentred), for n = 10^4, 10^5, ... below ``--max-n`` and ``--max-n`` itself (default: the
shape's real n, e.g. HIGGS's 10.5M) training rows
and a test set of ``--n-test`` rows from the same model; ``--like rcv1`` and ``--like url``
give sparse (CSR) data of those text collections' shapes. Each method is timed on the same
data in one process, side by side:

* marginkit ``dcd`` and ``fista`` (certified stop, the paper's gamma = 64/n) on X as
  generated (``--dtype``) and, with ``--float32`` (for ``--dtype float64``), also on a
  float32 X;
* LIBLINEAR (liblinear-official, ``-s 3 -B 1 -c 64/n``) on X Diag(sigma)^-1, the columns
  divided by their standard deviation without centering (its best case, as in the paper;
  sparse X stays sparse);
* scikit-learn ``LinearSVC`` (C = 64/n, the same problem) and ``SGDClassifier(loss="hinge")``;
* skglm, cyanure and snapml where installed (their hinge-loss SVMs at the same C).

Memory: X is generated once per size, block by block, in the dtype it is used in. With
``--float32`` the float32 X is generated first, the marginkit float32 methods run, it is
freed, and then the ``--dtype`` X is generated for the others, so two copies of X never
coexist. LIBLINEAR's input (float64, its own node array) is written from X in row blocks
right before it trains and freed right after; sigma is computed in row blocks with float64
accumulators (``scaling_statistics``), so no float64 temporary the size of X exists.

Recorded per size and method (table, JSON): the time to generate the data (once per size
and dtype), the solve time (LIBLINEAR: its ``train`` call only), iterations, status, test
accuracy, the process peak RSS after the method (``getrusage`` ``ru_maxrss``, which only
rises) and the method's RSS increase: the largest resident set seen while it ran, minus
the resident set before it. The resident set is sampled from ``/proc/self/statm`` every
5 ms by a thread (so it counts every allocation, numpy's or a C library's, but a spike
shorter than the interval can be missed); when the method raised the process peak,
``ru_maxrss`` gives its exact peak. A method that raises is recorded with status
``failed: ...`` and not run at larger n.

A method is skipped at the sizes after the one where it took longer than ``--cap``
seconds. Writes a markdown table (``--out``.md, also printed), a JSON file, and with
matplotlib a log-log plot of time vs n with the fitted slope of each method (``--out``
prefix). Linux only (``/proc``)::

    python benchmarks/svm_table2.py [--like higgs] [--max-n 10000000] [--dtype float64] \
        [--float32] [--methods dcd,LIBLINEAR] [--cap 300] [--out svm_table2]
"""
import argparse
import json
import os
import resource
import threading
import time

import numpy as np
import scipy.sparse as sp

import marginkit as mk
from marginkit.solvers.svm import scaling_statistics

_MIB = 1 << 20
_PAGE = os.sysconf("SC_PAGE_SIZE")
_COLUMNS = ("n", "method", "dtype", "data_seconds", "seconds", "n_iter", "status",
            "test_accuracy", "rss_increase_mib", "peak_rss_mib")
_HEADER = ("| n | method | dtype | data s | solve s | iterations | status | test acc. "
           "| RSS increase MiB | peak RSS MiB |\n|---:|---|---|---:|---:|---:|---|---:|---:|---:|")


def _rows(X, lo, hi):
    """Rows lo:hi of a dense or CSR X, sharing X's arrays (scipy copies a CSR part that
    is less than half of its arrays, so at most the smaller of train and test is copied)."""
    if not sp.issparse(X):
        return X[lo:hi]
    a, b = X.indptr[lo], X.indptr[hi]
    return sp.csr_matrix((X.data[a:b], X.indices[a:b], X.indptr[lo:hi + 1] - a),
                         shape=(hi - lo, X.shape[1]), copy=False)


def _split(like, n, n_test, dtype, seed):
    X, y = mk.datasets.make_clusters(n + n_test, like=like, dtype=dtype, random_state=seed)
    return _rows(X, 0, n), y[:n], _rows(X, n, n + n_test), y[n:]


def _rss():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * _PAGE


def _maxrss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


class _PeakRSS:
    """The largest resident set while the block runs, minus the one before it (bytes)."""

    def __init__(self, interval=0.005):
        self.interval = interval

    def __enter__(self):
        self.before, self._maxrss_before = _rss(), _maxrss()
        self.peak = self.before
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, _rss())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss())
        after = _maxrss()
        if after > self._maxrss_before:  # the process peak was set inside the block
            self.peak = max(self.peak, after)
        self.increase = self.peak - self.before
        return False


def _marginkit(solver, Xtr, ytr, Xte, yte):
    t0 = time.perf_counter()
    res = mk.solve(Xtr, ytr, solver=solver, random_state=0)
    el = time.perf_counter() - t0
    return el, float(np.mean(res.predict(Xte) == yte)), res.n_iter, res.status


def _liblinear(Xtr, ytr, Xte, yte):
    from svm_common import liblinear_decision, liblinear_problem, liblinear_train

    _, s = scaling_statistics(Xtr, "scale")  # 1/sigma, 0 for a constant column
    prob = liblinear_problem(Xtr, ytr, s)
    model, el, it, hit = liblinear_train(prob, ytr, 64.0 / Xtr.shape[0], extra="-q", seed=1)
    del prob
    first, second = model.get_labels()
    pred = np.where(liblinear_decision(model, Xte, s) > 0, first, second)
    return el, float(np.mean(pred == yte)), it, "max_iter" if hit else "converged"


def _sklearn(est):
    def run(Xtr, ytr, Xte, yte):
        t0 = time.perf_counter()
        est.fit(Xtr, ytr)
        el = time.perf_counter() - t0
        it = getattr(est, "n_iter_", None)
        it = None if it is None else int(np.max(it))
        limit = getattr(est, "max_iter", None)
        status = "max_iter" if it is not None and limit is not None and it >= limit else (
            "converged" if it is not None else "?")
        return el, float(est.score(Xte, yte)), it, status
    return run


def _methods(n, dtype, float32):
    """(label, dtype of X it runs on, run) for every method at training size n."""
    from sklearn.linear_model import SGDClassifier
    from sklearn.svm import LinearSVC

    C = 64.0 / n
    suffix = " float32" if dtype == np.float32 else ""
    out = []
    if float32:
        out += [("dcd float32", np.float32, lambda *a: _marginkit("dcd", *a)),
                ("fista float32", np.float32, lambda *a: _marginkit("fista", *a))]
    out += [("dcd" + suffix, dtype, lambda *a: _marginkit("dcd", *a)),
            ("fista" + suffix, dtype, lambda *a: _marginkit("fista", *a)),
            ("LIBLINEAR", dtype, _liblinear),
            ("LinearSVC", dtype, _sklearn(LinearSVC(C=C, dual="auto", max_iter=1000,
                                                    random_state=0))),
            ("SGDClassifier hinge", dtype,
             _sklearn(SGDClassifier(loss="hinge", alpha=1.0 / (C * n), random_state=0)))]
    try:
        from skglm import GeneralizedLinearEstimator  # noqa: F401
        from skglm.estimators import LinearSVC as SkglmSVC

        out.append(("skglm LinearSVC", dtype, _sklearn(SkglmSVC(C=C))))
    except ImportError:
        pass
    try:
        from cyanure.estimators import LinearSVC as CyanureSVC

        out.append(("cyanure LinearSVC", dtype, _sklearn(CyanureSVC(C=C, verbose=False))))
    except ImportError:
        pass
    try:
        from snapml import SupportVectorMachine

        out.append(("snapml SVM", dtype, _sklearn(SupportVectorMachine(regularizer=C * n,
                                                                        n_jobs=2))))
    except ImportError:
        pass
    return out


def _run(fn, Xtr, ytr, Xte, yte):
    """One method, measured: (seconds, accuracy, iterations, status, RSS increase)."""
    with _PeakRSS() as mem:
        try:
            out = fn(Xtr, ytr, Xte, yte)
        except Exception as exc:  # recorded in the table (e.g. MemoryError at a large n)
            out = None, None, None, f"failed: {type(exc).__name__}: {exc}"[:120]
    el, acc, it, status = out
    return el, acc, None if it is None else int(it), status, mem.increase


def _fmt(value, spec):
    return "-" if value is None else format(value, spec)


def _line(r):
    return (f"| {r['n']} | {r['method']} | {r['dtype']} | {_fmt(r['data_seconds'], '.2f')} "
            f"| {_fmt(r['seconds'], '.3f')} | {_fmt(r['n_iter'], 'd')} | {r['status']} "
            f"| {_fmt(r['test_accuracy'], '.4f')} | {_fmt(r['rss_increase_mib'], '.0f')} "
            f"| {_fmt(r['peak_rss_mib'], '.0f')} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--like", default="higgs", choices=sorted(mk.datasets.SHAPES))
    ap.add_argument("--min-n", type=int, default=10_000)
    ap.add_argument("--max-n", type=int, default=None,
                    help="largest n, the last rung of the ladder (default: the shape's own n)")
    ap.add_argument("--n-test", type=int, default=100_000)
    ap.add_argument("--dtype", default="float64", choices=("float32", "float64"),
                    help="the dtype X is generated in, for every method")
    ap.add_argument("--float32", action="store_true",
                    help="also run marginkit on a float32 X (with --dtype float64)")
    ap.add_argument("--methods", default=None,
                    help="comma-separated labels of the methods to run (default: all)")
    ap.add_argument("--cap", type=float, default=300.0,
                    help="skip a method at larger n once it took longer than this (s)")
    ap.add_argument("--out", default="svm_table2")
    args = ap.parse_args(argv)
    dtype = np.dtype(args.dtype).type
    if args.float32 and dtype == np.float32:
        ap.error("--float32 adds float32 marginkit runs to --dtype float64; with "
                 "--dtype float32 every method already runs on float32 data: drop --float32")
    known = [m[0] for m in _methods(args.min_n, dtype, args.float32)]
    chosen = known if args.methods is None else [m.strip() for m in args.methods.split(",")]
    if set(chosen) - set(known):
        ap.error(f"--methods: unknown {sorted(set(chosen) - set(known))}; the methods of "
                 f"these options are {known}")
    max_n = mk.datasets.SHAPES[args.like][0] if args.max_n is None else args.max_n
    # powers of ten from --min-n below max_n, then max_n itself (e.g. HIGGS's 10.5M)
    sizes = []
    n = args.min_n
    while n < max_n:
        sizes.append(n)
        n *= 10
    sizes.append(max_n)
    rows, data_runs, over = [], [], set()
    print(_HEADER, flush=True)
    for n in sizes:
        methods = [m for m in _methods(n, dtype, args.float32)
                   if m[0] in chosen and m[0] not in over]
        # one X at a time: the float32 group (--float32) first, freed before the next
        for dt in dict.fromkeys(m[1] for m in methods):
            t0 = time.perf_counter()
            Xtr, ytr, Xte, yte = _split(args.like, n, args.n_test, dt, 0)
            gen = time.perf_counter() - t0
            data_runs.append({"n": n, "dtype": np.dtype(dt).name, "seconds": gen,
                              "sparse": sp.issparse(Xtr)})
            for label, _, fn in (m for m in methods if m[1] == dt):
                el, acc, it, status, inc = _run(fn, Xtr, ytr, Xte, yte)
                r = dict(zip(_COLUMNS, (n, label, np.dtype(dt).name, gen, el, it, status, acc,
                                        inc / _MIB, _maxrss() / _MIB)))
                rows.append(r)
                print(_line(r), flush=True)
                if el is None or el > args.cap:
                    over.add(label)
            del Xtr, ytr, Xte, yte
    slopes = {}
    for label in dict.fromkeys(r["method"] for r in rows):
        pts = [(r["n"], r["seconds"]) for r in rows
               if r["method"] == label and r["seconds"] is not None]
        if len(pts) >= 2:
            x, t = np.log10([p[0] for p in pts]), np.log10([p[1] for p in pts])
            slopes[label] = float(np.polyfit(x, t, 1)[0])
    print("\nfitted log-log slopes (time ~ n^slope):")
    for label, s in slopes.items():
        print(f"  {label}: {s:.2f}")
    with open(args.out + ".md", "w") as fh:
        fh.write("\n".join([_HEADER] + [_line(r) for r in rows]) + "\n")
    with open(args.out + ".json", "w") as fh:
        json.dump({"like": args.like, "n_test": args.n_test, "columns": list(_COLUMNS),
                   "data": data_runs, "rows": rows, "slopes": slopes}, fh, indent=1)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    if not slopes:
        print("one size per method: no slope fitted (the plot shows the points)")
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for label in dict.fromkeys(r["method"] for r in rows):
        pts = [(r["n"], r["seconds"]) for r in rows
               if r["method"] == label and r["seconds"] is not None]
        if pts:
            text = f"{label} (slope {slopes[label]:.2f})" if label in slopes else label
            ax.loglog(*zip(*pts), marker="o", label=text)
    ax.set_xlabel("training rows n")
    ax.set_ylabel("seconds")
    ax.set_title(f"{args.like}-shaped two-cluster data, d = {mk.datasets.SHAPES[args.like][1]}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out + ".png", dpi=120)


if __name__ == "__main__":
    main()
