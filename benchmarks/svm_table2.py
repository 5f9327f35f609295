"""The SVM paper's Table 2 at the real sizes, on generated stand-ins: time vs n.

The large data sets of the paper's Table 2 (SUSY, HEPMASS, HIGGS, epsilon) are generated
from its own geometric model (``marginkit.datasets.make_clusters``, the data set's number
of features, 8% noisy observations, uncentred), for n = 10^4, 10^5, ... below ``--max-n`` and ``--max-n`` itself (default: the
shape's real n, e.g. HIGGS's 10.5M) training rows
and a test set of ``--n-test`` rows from the same model. Each method is timed on the same
data in one process, side by side:

* marginkit ``dcd`` and ``fista`` (certified stop, the paper's gamma = 64/n), float64 and,
  with ``--float32``, float32 storage;
* LIBLINEAR (liblinear-official, ``-s 3 -B 1 -c 64/n``) on the standardized matrix (its
  best case, as in the paper);
* scikit-learn ``LinearSVC`` (C = 64/n, the same problem) and ``SGDClassifier(loss="hinge")``;
* skglm, cyanure and snapml where installed (their hinge-loss SVMs at the same C).

A method is skipped at the sizes after the one where it took longer than ``--cap``
seconds. Writes a markdown table and a JSON file, and with matplotlib a log-log plot of
time vs n with the fitted slope of each method (``--out`` prefix)::

    python benchmarks/svm_table2.py [--like higgs] [--max-n 10000000] [--float32] \
        [--cap 300] [--out svm_table2]
"""
import argparse
import json
import time

import numpy as np

import marginkit as mk


def _split(like, n, n_test, dtype, seed):
    X, y = mk.datasets.make_clusters(n + n_test, like=like, dtype=dtype, random_state=seed)
    return X[:n], y[:n], X[n:], y[n:]


def _standardized(Xtr, Xte):
    s = Xtr.std(axis=0, dtype=np.float64)
    s[s == 0] = 1.0
    return Xtr / s.astype(Xtr.dtype), Xte / s.astype(Xte.dtype)


def _marginkit(solver, Xtr, ytr, Xte, yte):
    t0 = time.perf_counter()
    res = mk.solve(Xtr, ytr, solver=solver, random_state=0)
    el = time.perf_counter() - t0
    return el, float(np.mean(res.predict(Xte) == yte)), f"{res.status}, {res.n_iter} it."


def _liblinear(Xtr, ytr, Xte, yte):
    from svm_common import liblinear_predict, liblinear_train

    Xs, Xts = _standardized(Xtr, Xte)
    model, el, it, hit = liblinear_train(np.ascontiguousarray(Xs, dtype=np.float64), ytr,
                                         64.0 / Xtr.shape[0], extra="-q", seed=1)
    acc = float(np.mean(liblinear_predict(model, np.asarray(Xts, dtype=np.float64)) == yte))
    return el, acc, f"{it} it." + (" (limit)" if hit else "")


def _sklearn(est):
    def run(Xtr, ytr, Xte, yte):
        t0 = time.perf_counter()
        est.fit(Xtr, ytr)
        el = time.perf_counter() - t0
        return el, float(est.score(Xte, yte)), f"{getattr(est, 'n_iter_', '?')} it."
    return run


def _methods(n, float32):
    from sklearn.linear_model import SGDClassifier
    from sklearn.svm import LinearSVC

    C = 64.0 / n
    out = [("dcd", lambda *a: _marginkit("dcd", *a)),
           ("fista", lambda *a: _marginkit("fista", *a))]
    if float32:
        out += [("dcd float32", lambda *a: _marginkit("dcd", *a)),
                ("fista float32", lambda *a: _marginkit("fista", *a))]
    out += [("LIBLINEAR", _liblinear),
            ("LinearSVC", _sklearn(LinearSVC(C=C, dual="auto", max_iter=1000))),
            ("SGDClassifier hinge", _sklearn(SGDClassifier(loss="hinge", alpha=1.0 / (C * n),
                                                           random_state=0)))]
    try:
        from skglm import GeneralizedLinearEstimator  # noqa: F401
        from skglm.estimators import LinearSVC as SkglmSVC

        out.append(("skglm LinearSVC", _sklearn(SkglmSVC(C=C))))
    except ImportError:
        pass
    try:
        from cyanure.estimators import LinearSVC as CyanureSVC

        out.append(("cyanure LinearSVC", _sklearn(CyanureSVC(C=C, verbose=False))))
    except ImportError:
        pass
    try:
        from snapml import SupportVectorMachine

        out.append(("snapml SVM", _sklearn(SupportVectorMachine(regularizer=C * n,
                                                                 n_jobs=2))))
    except ImportError:
        pass
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--like", default="higgs", choices=sorted(mk.datasets.SHAPES))
    ap.add_argument("--min-n", type=int, default=10_000)
    ap.add_argument("--max-n", type=int, default=None,
                    help="largest n, the last rung of the ladder (default: the shape's own n)")
    ap.add_argument("--n-test", type=int, default=100_000)
    ap.add_argument("--float32", action="store_true")
    ap.add_argument("--cap", type=float, default=300.0,
                    help="skip a method at larger n once it took longer than this (s)")
    ap.add_argument("--out", default="svm_table2")
    args = ap.parse_args(argv)
    max_n = mk.datasets.SHAPES[args.like][0] if args.max_n is None else args.max_n
    # powers of ten from --min-n below max_n, then max_n itself (e.g. HIGGS's 10.5M)
    sizes = []
    n = args.min_n
    while n < max_n:
        sizes.append(n)
        n *= 10
    sizes.append(max_n)
    rows, over = [], set()
    for n in sizes:
        data = {np.float64: _split(args.like, n, args.n_test, np.float64, 0)}
        if args.float32:
            data[np.float32] = _split(args.like, n, args.n_test, np.float32, 0)
        for label, fn in _methods(n, args.float32):
            if label in over:
                continue
            Xtr, ytr, Xte, yte = data[np.float32 if "float32" in label else np.float64]
            el, acc, note = fn(Xtr, ytr, Xte, yte)
            rows.append({"n": n, "method": label, "seconds": el, "test_accuracy": acc,
                         "note": note})
            print(f"| {n} | {label} | {el:.3f} | {acc:.4f} | {note} |", flush=True)
            if el > args.cap:
                over.add(label)
        del data
    slopes = {}
    for label in dict.fromkeys(r["method"] for r in rows):
        pts = [(r["n"], r["seconds"]) for r in rows if r["method"] == label]
        if len(pts) >= 2:
            x, t = np.log10([p[0] for p in pts]), np.log10([p[1] for p in pts])
            slopes[label] = float(np.polyfit(x, t, 1)[0])
    print("\nfitted log-log slopes (time ~ n^slope):")
    for label, s in slopes.items():
        print(f"  {label}: {s:.2f}")
    with open(args.out + ".json", "w") as fh:
        json.dump({"like": args.like, "rows": rows, "slopes": slopes}, fh, indent=1)
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
        pts = [(r["n"], r["seconds"]) for r in rows if r["method"] == label]
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
