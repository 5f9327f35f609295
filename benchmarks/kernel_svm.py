"""Kernel SVMs (RBF) side by side: LIBSVM, scikit-learn SVC, scikit-learn-intelex SVC,
ThunderSVM (CPU) and marginkit's certified solvers, in one process on the same data.

    MARGINKIT_DATA=<data folder> python benchmarks/kernel_svm.py \
        [--data a9a10k] [--gamma 0.05] [--C 1] [--reps 3] [--out kernel_svm]

Data (``--data``, comma-separated): ``a9a10k`` (default: the first 10,000 rows of a9a,
tested on a9a.t), ``a9a`` (all 32,561 rows), ``mnist3v5``, ``mnist1v9``, ``mnist2v7``
(the full 60,000 training images of the two digits against the t10k images of the same
digits, pixels / 255), the shared sets with n >= 2,000 (``mushrooms``, ``madelon``
(official test split), ``splice``, ``svmguide1``: stratified 70/30 split, seed 0),
``heart`` (small, for a quick look) and ``synthetic`` (no data folder needed). Every tool
sees X as given (LIBSVM's ``-t 2`` on the raw features, the issue's setting); RBF
K(a, b) = exp(-g ||a - b||^2) with the same g and the same C for everybody: ``--gamma``
(default per data set: 0.05 for a9a, 0.02 for MNIST, else 1 / (d var(X)),
scikit-learn's "scale"), ``--C`` (default 1).

Methods (``--methods``, comma-separated; default all):

* ``libsvm``: libsvm-official ``svm_train`` with ``-s 0 -t 2 -c C -g g -q`` (the problem
  is built once, untimed; the default 100 MB kernel cache and tolerance 1e-3);
* ``sklearn``: ``sklearn.svm.SVC(kernel="rbf", C, gamma)`` (LIBSVM inside, 200 MB cache);
* ``sklearnex``: ``sklearnex.svm.SVC`` (scikit-learn-intelex) when installed;
* ``thundersvm``: ``thundersvm.SVC`` (the CPU build, ``n_jobs`` = ``--threads``) when
  installed;
* ``mk:fista_svm``, ``mk:fista``, ``mk:dcd``: ``mk.solve(X, y, solver=...,
  kernel="rbf", kernel_params={"gamma": g}, C=C)`` (``mu=`` with ``--mu``; a name
  ``mk:<solver>@<mu>``, e.g. ``mk:dcd@0.01``, runs that solver with that mu, so several
  perturbations run side by side); the run's status, iterations (passes for ``dcd``),
  coordinate moves and Gram rows computed (``dcd``), the certified fraction, and
  ``certificate.verify(X, y)`` (its result and its time, reported separately from the
  solve time, which includes the run loop's own re-check of the claim). A marginkit
  solver that refuses the exact kernel is skipped with the reason.

Timed: the fit call only (medians over ``--reps`` rounds, every method once per round in
a rotating order, so load drift hits all alike); prediction on the test set is untimed.
BLAS/OpenMP threads are limited to ``--threads`` (default 1) for every method that
honours threadpoolctl (scikit-learn-intelex uses its own TBB pool: noted in the table).
Writes ``<out>.md`` (a markdown table per data set) and ``<out>.json``.
"""
import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import time

import numpy as np
import scipy.sparse as sp

MK_SOLVERS = ("fista_svm", "fista", "dcd")
PEERS = ("libsvm", "sklearn", "sklearnex", "thundersvm")
ALL_METHODS = PEERS + tuple(f"mk:{s}" for s in MK_SOLVERS)
MNIST_PAIRS = {"mnist3v5": (3, 5), "mnist1v9": (1, 9), "mnist2v7": (2, 7)}
LIBSVM_SETS = {"mushrooms": "mushrooms", "splice": "splice.combined",
               "svmguide1": "svmguide1", "heart": "heart_scale"}
DEFAULT_GAMMA = {"a9a10k": 0.05, "a9a": 0.05, **{k: 0.02 for k in MNIST_PAIRS}}


class Skip(Exception):
    """A method cannot run here (not installed, or the solver refuses the kernel)."""


# ------------------------------------------------------------------------------ data
def _pm(y, positive=None):
    y = np.asarray(y)
    positive = np.max(y) if positive is None else positive
    return np.where(y == positive, 1.0, -1.0)


def _split(X, y, seed=0):
    from sklearn.model_selection import train_test_split

    idx = np.arange(y.shape[0])
    tr, te = train_test_split(idx, test_size=0.3, stratify=y, random_state=seed)
    return X[tr], y[tr], X[te], y[te]


def synthetic(n=1200, d=6, seed=0):
    """Two interleaved rings (a problem where RBF beats linear), split 70/30."""
    rng = np.random.default_rng(seed)
    radius = np.where(rng.random(n) < 0.5, 1.0, 2.0)
    angle = rng.uniform(0, 2 * np.pi, n)
    X = rng.normal(scale=0.25, size=(n, d))
    X[:, 0] += radius * np.cos(angle)
    X[:, 1] += radius * np.sin(angle)
    return _split(X, np.where(radius > 1.5, 1.0, -1.0), seed)


def load(name):
    """(X_train, y_train, X_test, y_test, description) with labels +-1."""
    from marginkit.datasets import load_libsvm, load_mnist_idx

    if name == "synthetic":
        return (*synthetic(), "two rings in 6-D, n = 1200, stratified 70/30 seed 0")
    if not os.environ.get("MARGINKIT_DATA"):
        raise FileNotFoundError("set MARGINKIT_DATA to the folder with the data files")
    if name in ("a9a10k", "a9a"):
        X, y = load_libsvm("a9a", n_features=123)
        Xt, yt = load_libsvm("a9a.t", n_features=123)
        if name == "a9a10k":
            X, y = X[:10_000], y[:10_000]
        return X, _pm(y, 1), Xt, _pm(yt, 1), f"a9a ({X.shape[0]} training rows), test a9a.t"
    if name in MNIST_PAIRS:
        a, b = MNIST_PAIRS[name]
        X, lab = load_mnist_idx("mnist/train-images-idx3-ubyte.xz",
                                "mnist/train-labels-idx1-ubyte.xz")
        Xt, labt = load_mnist_idx("mnist/t10k-images-idx3-ubyte.gz",
                                  "mnist/t10k-labels-idx1-ubyte.gz")
        keep, keept = (lab == a) | (lab == b), (labt == a) | (labt == b)
        return (X[keep], _pm(lab[keep], a), Xt[keept], _pm(labt[keept], a),
                f"MNIST {a} (+1) vs {b} (-1): 60k training images, t10k test, pixels / 255")
    if name == "madelon":
        X, y = load_libsvm("madelon", n_features=500)
        Xt, yt = load_libsvm("madelon.t", n_features=500)
        return X, _pm(y, 1), Xt, _pm(yt, 1), "madelon, official test split"
    if name in LIBSVM_SETS:
        X, y = load_libsvm(LIBSVM_SETS[name])
        return (*_split(X.tocsr(), _pm(y)), f"{LIBSVM_SETS[name]}, stratified 70/30 seed 0")
    raise ValueError(f"unknown data set {name!r}; choose from "
                     f"{['a9a10k', 'a9a', *MNIST_PAIRS, 'madelon', *LIBSVM_SETS, 'synthetic']}")


def default_gamma(name, X):
    """The data set's default RBF gamma (scikit-learn's "scale" where none is set)."""
    if name in DEFAULT_GAMMA:
        return DEFAULT_GAMMA[name]
    if sp.issparse(X):
        mean = np.asarray(X.mean(axis=0)).ravel()
        var = float(np.asarray(X.multiply(X).mean(axis=0)).ravel().mean() - (mean ** 2).mean())
    else:
        var = float(np.asarray(X).var())
    return 1.0 / (X.shape[1] * var) if var > 0 else 1.0


def _accuracy(scores, y):
    return float(np.mean(np.where(np.asarray(scores).ravel() > 0, 1.0, -1.0) == y))


@contextlib.contextmanager
def _quiet():
    """Silence C-level stdout (LIBSVM and ThunderSVM print from C)."""
    sys.stdout.flush()
    fd = os.dup(1)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
            yield
    finally:
        sys.stdout.flush()
        os.dup2(fd, 1)
        os.close(fd)


# ---------------------------------------------------------------------------- methods
class Method:
    """``prepare`` (untimed), ``fit`` (timed), ``finish`` (untimed: a dict of results)."""

    note = ""

    def __init__(self, name):
        self.name = name

    def prepare(self, data, g, C, threads):
        return None

    def fit(self, data, prepared):  # pragma: no cover - abstract
        raise NotImplementedError

    def finish(self, data, prepared, model):  # pragma: no cover - abstract
        raise NotImplementedError


class Libsvm(Method):
    note = "-s 0 -t 2 -c C -g g (cache 100 MB, eps 1e-3)"

    def prepare(self, data, g, C, threads):
        try:
            from libsvm import svmutil
        except ImportError:
            raise Skip("libsvm-official is not installed") from None
        X, y = data["X"], data["y"]
        prob = svmutil.svm_problem(y, sp.csr_matrix(X) if sp.issparse(X) else np.asarray(X))
        return prob, svmutil.svm_parameter(f"-s 0 -t 2 -c {C!r} -g {g!r} -q")

    def fit(self, data, prepared):
        from libsvm import svmutil

        return svmutil.svm_train(*prepared)

    def finish(self, data, prepared, model):
        from libsvm import svmutil

        Xt = data["Xt"]
        with _quiet():
            _, _, vals = svmutil.svm_predict(data["yt"], sp.csr_matrix(Xt) if sp.issparse(Xt)
                                             else np.asarray(Xt), model, "-q")
        sign = 1.0 if model.get_labels()[0] == 1 else -1.0
        return {"accuracy": _accuracy(sign * np.asarray(vals).ravel(), data["yt"]),
                "n_support": int(model.get_nr_sv()), "status": "converged"}


class SklearnSVC(Method):
    module = "sklearn.svm"
    note = "SVC(kernel='rbf'), cache 200 MB, tol 1e-3"

    def _cls(self):
        import importlib

        try:
            return importlib.import_module(self.module).SVC
        except ImportError:
            raise Skip(f"{self.module.split('.')[0]} is not installed") from None

    def prepare(self, data, g, C, threads):
        return self._cls()(kernel="rbf", C=C, gamma=g)

    def fit(self, data, est):
        return est.fit(data["X"], data["y"])

    def finish(self, data, est, model):
        n_iter = getattr(model, "n_iter_", None)
        return {"accuracy": _accuracy(model.decision_function(data["Xt"]), data["yt"]),
                "n_support": int(np.sum(model.n_support_)),
                "n_iter": None if n_iter is None else int(np.max(n_iter)),
                "status": "converged"}


class SklearnexSVC(SklearnSVC):
    module = "sklearnex.svm"
    note = "scikit-learn-intelex SVC (oneDAL; its own TBB threads)"


class ThunderSVC(Method):
    note = ("ThunderSVM CPU build, n_jobs = --threads, dense input (0.3.3 mis-reads "
            "scipy CSR: 0% on heart_scale)")

    @staticmethod
    def _dense(X):
        return np.ascontiguousarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64)

    def prepare(self, data, g, C, threads):
        try:
            from thundersvm import SVC
        except (ImportError, OSError) as exc:
            raise Skip(f"thundersvm is not installed ({exc})") from None
        data.setdefault("X_dense", self._dense(data["X"]))
        data.setdefault("Xt_dense", self._dense(data["Xt"]))
        return SVC(kernel="rbf", C=C, gamma=g, n_jobs=threads)

    def fit(self, data, est):
        with _quiet():
            return est.fit(data["X_dense"], data["y"])

    def finish(self, data, est, model):
        # accuracy from predict: ThunderSVM's decision_function on CSR input returns a
        # vector of the wrong length (0.3.3)
        with _quiet():
            pred = np.asarray(model.predict(data["Xt_dense"])).ravel()
        n_sv = getattr(model, "n_sv", None)
        return {"accuracy": float(np.mean(np.where(pred > 0, 1.0, -1.0) == data["yt"])),
                "n_support": None if n_sv is None else int(np.sum(n_sv)),
                "status": "converged"}


class Marginkit(Method):
    note = "mk.solve(kernel='rbf', kernel_params={'gamma': g}, C=C)"

    def __init__(self, name, solver, mu=None):
        super().__init__(name)
        self.solver = solver
        self.mu = mu  # None: the solver's default (1/(2C) with an exact kernel and a C)

    def kwargs(self, g, C):
        kw = dict(solver=self.solver, kernel="rbf", kernel_params={"gamma": g}, C=C)
        if self.mu is not None:
            kw["mu"] = self.mu
        return kw

    def prepare(self, data, g, C, threads):
        import marginkit as mk

        kw = self.kwargs(g, C)
        probe_X = data["X"][:8]
        probe_y = np.array([1.0, -1.0] * 4)
        try:
            mk.solve(probe_X, probe_y, **{**kw, "max_iter": 1})
        except (ValueError, TypeError) as exc:
            if "kernel" in str(exc):
                raise Skip(f"mk.solve refuses the exact kernel: {exc}") from None
        return kw

    def fit(self, data, kw):
        import marginkit as mk

        return mk.solve(data["X"], data["y"], **kw)

    def finish(self, data, kw, res):
        out = {"accuracy": _accuracy(res.decision_function(data["Xt"]), data["yt"]),
               "status": res.status, "n_iter": int(res.n_iter), "mu": res.extra.get("mu")}
        for key in ("moves", "kernel_rows"):
            if key in res.extra:
                out[key] = res.extra[key]
        mask = res.certified_mask
        out["certified_fraction"] = None if mask is None else float(np.mean(mask))
        cert = res.certificate
        if cert is not None:
            t0 = time.perf_counter()
            try:
                out["verified"] = bool(cert.verify(data["X"], data["y"]))
            except Exception as exc:  # noqa: BLE001 - reported, never fatal for a benchmark
                out["verified"] = f"error: {type(exc).__name__}: {exc}"
            out["verify_s"] = time.perf_counter() - t0
        sup = getattr(res, "support_", None)
        if sup is not None:
            out["n_support"] = int(sup.shape[0])
        return out


def methods(names=None, mu=None):
    table = {"libsvm": Libsvm("libsvm"), "sklearn": SklearnSVC("sklearn"),
             "sklearnex": SklearnexSVC("sklearnex"), "thundersvm": ThunderSVC("thundersvm")}
    for s in MK_SOLVERS:
        table[f"mk:{s}"] = Marginkit(f"mk:{s}", s, mu)
    names = list(ALL_METHODS) if names is None else names
    for name in names:
        solver, _, value = name.partition("@")
        if value and f"{solver}" in table and solver.startswith("mk:"):
            try:
                table[name] = Marginkit(name, solver[3:], float(value))
            except ValueError:
                raise ValueError(f"method {name!r}: the mu after '@' must be a number") from None
    unknown = [n for n in names if n not in table]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; choose from {list(table)}")
    return [table[n] for n in names]


# ----------------------------------------------------------------------------- runner
def run_one(name, g=None, C=1.0, reps=3, method_names=None, threads=1, progress=print,
            mu=None):
    """Every method on one data set: a dict with the data, the parameters and one row per
    method (median fit time, all times, accuracy, status, ...; ``skipped`` with the
    reason for a method that cannot run)."""
    from threadpoolctl import threadpool_limits

    X, y, Xt, yt, about = load(name)
    g = default_gamma(name, X) if g is None else float(g)
    data = {"X": X, "y": y, "Xt": Xt, "yt": yt}
    rows, prepared = {}, {}
    chosen = methods(method_names, mu)
    for m in chosen:
        try:
            prepared[m.name] = m.prepare(data, g, C, threads)
        except Skip as exc:
            rows[m.name] = {"method": m.name, "skipped": str(exc), "note": m.note}
    live = [m for m in chosen if m.name in prepared]
    times = {m.name: [] for m in live}
    models = {}
    with threadpool_limits(threads):
        for rep in range(reps):
            order = live[rep % max(len(live), 1):] + live[:rep % max(len(live), 1)]
            for m in order:
                t0 = time.perf_counter()
                model = m.fit(data, prepared[m.name])
                times[m.name].append(time.perf_counter() - t0)
                models[m.name] = model
                progress(f"  {name} {m.name} rep {rep}: {times[m.name][-1]:.3f} s")
        for m in live:
            row = {"method": m.name, "note": m.note, "time_s": statistics.median(times[m.name]),
                   "times_s": times[m.name]}
            row.update(m.finish(data, prepared[m.name], models[m.name]))
            rows[m.name] = row
    ref = rows.get("libsvm", {}).get("time_s")
    for row in rows.values():
        if ref and "time_s" in row:
            row["time_vs_libsvm"] = row["time_s"] / ref
    n = X.shape[0]
    return {"data": name, "about": about, "n_train": int(n), "n_test": int(Xt.shape[0]),
            "n_features": int(X.shape[1]), "format": "csr" if sp.issparse(X) else "dense",
            "gamma": g, "C": C, "reps": reps, "threads": threads,
            "rows": [rows[m.name] for m in chosen]}


def _fmt(v, spec):
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, str):
        return v
    return format(v, spec)


def format_table(report):
    head = (f"### {report['data']}: {report['about']}\n\n"
            f"n_train = {report['n_train']}, n_test = {report['n_test']}, d = "
            f"{report['n_features']} ({report['format']}), RBF gamma = {report['gamma']:.6g}, "
            f"C = {report['C']:.6g}; median of {report['reps']} fits, {report['threads']} "
            "thread(s)\n\n"
            "| method | fit time (s) | / libsvm | test acc. (%) | status | iters | SVs | "
            "certified | verified | verify (s) |\n"
            "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- | ---: |\n")
    lines = []
    for row in report["rows"]:
        if "skipped" in row:
            lines.append(f"| {row['method']} | skipped: {row['skipped']} | | | | | | | | |")
            continue
        cf = row.get("certified_fraction")
        lines.append(
            f"| {row['method']} | {row['time_s']:.3f} | {_fmt(row.get('time_vs_libsvm'), '.2f')} "
            f"| {100 * row['accuracy']:.2f} | {row.get('status', '-')} "
            f"| {_fmt(row.get('n_iter'), 'd')} | {_fmt(row.get('n_support'), 'd')} "
            f"| {_fmt(None if cf is None else 100 * cf, '.1f')} "
            f"| {_fmt(row.get('verified'), '')} | {_fmt(row.get('verify_s'), '.3f')} |")
    notes = "\n".join(f"* {row['method']}: {row['note']}" for row in report["rows"] if row.get("note"))
    return head + "\n".join(lines) + "\n\n" + notes + "\n"


def meta(threads):
    import sklearn

    versions = {"python": platform.python_version(), "numpy": np.__version__,
                "scikit-learn": sklearn.__version__}
    for dist in ("libsvm-official", "scikit-learn-intelex", "thundersvm-cpu"):
        try:
            from importlib.metadata import version

            versions[dist] = version(dist)
        except Exception:  # noqa: BLE001 - not installed
            versions[dist] = None
    return {"machine": platform.machine(), "cpu_count": os.cpu_count(), "threads": threads,
            "versions": versions}


def main(argv=None):
    p = argparse.ArgumentParser(description=(__doc__ or "").strip().splitlines()[0])
    p.add_argument("--data", default="a9a10k", help="comma-separated data sets")
    p.add_argument("--gamma", type=float, default=None, help="RBF gamma (default per data set)")
    p.add_argument("--C", type=float, default=1.0, help="box bound C (LIBSVM's -c)")
    p.add_argument("--reps", type=int, default=3, help="fits per method (median)")
    p.add_argument("--methods", default=None, help=f"comma-separated, from {list(ALL_METHODS)}")
    p.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP threads of every method")
    p.add_argument("--mu", type=float, default=None,
                   help="marginkit's perturbation mu (default: the solvers' own, 1/(2C) "
                        "with an exact kernel and a given C)")
    p.add_argument("--out", default="kernel_svm", help="output prefix (<out>.md, <out>.json)")
    args = p.parse_args(argv)
    names = None if args.methods is None else [s.strip() for s in args.methods.split(",")]
    reports = []
    for name in [s.strip() for s in args.data.split(",") if s.strip()]:
        print(f"{name}:", flush=True)
        reports.append(run_one(name, args.gamma, args.C, args.reps, names, args.threads,
                               mu=args.mu))
    text = "\n".join(format_table(r) for r in reports)
    with open(args.out + ".md", "w") as fh:
        fh.write(text)
    with open(args.out + ".json", "w") as fh:
        json.dump({"meta": meta(args.threads), "reports": reports}, fh, indent=1)
    print(text)
    return reports


if __name__ == "__main__":
    main()
