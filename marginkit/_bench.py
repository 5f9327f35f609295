"""Side-by-side comparison behind ``marginkit bench``.

One process, the same data in memory, the same preprocessing, medians of several
runs (interleaved: one run of every method per round, so load drift hits all alike, in
an order that rotates from round to round): marginkit's solvers against LIBLINEAR
(``liblinear-official``, ``-s 3 -B 1``,
C = 64/n_tr as in arXiv:2512.03947, sec. 5.1), LIBSVM / scikit-learn ``SVC`` and
scikit-learn's ``LinearSVC``, ``Perceptron`` and ``LogisticRegression``.

What each method sees (arXiv:2512.03947, sec. 5.1)
-------------------------------------------
* Train/test split: the official one for ``a9a`` and ``madelon``; otherwise a
  stratified 70/30 split with a fixed seed (``--seed``, default 0).
* Labels: the larger original label is +1, the other -1.
* ``sigma`` = training-set standard deviation of each feature (``ddof=0``; a
  constant feature gets ``sigma = 1``), computed once on the training set and applied
  unchanged to the test set.
* Reference tools (LIBLINEAR, LIBSVM, scikit-learn) get ``X Diag(sigma)^-1``: scaled,
  not centred (centring would destroy sparsity), CSR when the training matrix has
  density below 1/2, dense C-ordered float64 otherwise.
* marginkit solvers with a ``scale`` parameter (``fista``, ``fista_svm``, ``dcd``,
  ``pegasos``) get
  the *unscaled* matrix in the same format and ``scale="std"``: they centre and
  scale implicitly, ``Z = (X - e mu^T) Diag(sigma)^-1``, without forming Z, and
  report ``coef_`` in the original feature space (``mk:dcd[scale]`` passes
  ``scale="scale"``: scaled, not centred, the model LIBLINEAR fits). marginkit solvers without a
  ``scale`` parameter get ``X Diag(sigma)^-1`` like the references.
* Timed: the fit call only (``mk.solve``, ``liblinearutil.train`` on a ``problem``
  built once, ``estimator.fit``); data loading, scaling and prediction are not timed.

The reference tools are optional: a missing one is a skipped column with a note;
a solver that is not (yet) registered is skipped with a note.
"""
import argparse
import contextlib
import json
import math
import os
import platform
import statistics
import sys
import time
import warnings

import numpy as np
import scipy.sparse as sp

from .datasets import load_libsvm, load_mnist_idx

__all__ = ["main", "load_dataset", "std_scale", "stratified_split", "run_bench",
           "DATASETS", "METHODS"]

#: data set name -> (train file, test file or None, n_features or None)
DATASETS = {
    "a9a": ("a9a", "a9a.t", 123),
    "madelon": ("madelon", "madelon.t", 500),
    "mushrooms": ("mushrooms", None, None),
    "splice": ("splice.combined", None, None),
    "svmguide1": ("svmguide1", None, None),
    "german.numer_scale": ("german.numer_scale", None, None),
    "australian_scale": ("australian_scale", None, None),
    "breast-cancer_scale": ("breast-cancer_scale", None, None),
    "diabetes_scale": ("diabetes_scale", None, None),
    "fourclass_scale": ("fourclass_scale", None, None),
    "heart_scale": ("heart_scale", None, None),
    "ionosphere_scale": ("ionosphere_scale", None, None),
}
# MNIST digit pairs of arXiv:2512.03947, sec. 5.2 (original and inverted 1 - x), from the
# 10,000 test images (the only MNIST images in the data folder), split 70/30.
for _a, _b in ((3, 5), (1, 9), (2, 7)):
    DATASETS[f"mnist{_a}v{_b}"] = ("mnist", (_a, _b, False), None)
    DATASETS[f"mnist{_a}v{_b}_inv"] = ("mnist", (_a, _b, True), None)

#: tiny data for ``--quick`` (seconds): a seeded synthetic problem, plus heart_scale
QUICK_DATASETS = ("synthetic", "heart_scale")


# ----------------------------------------------------------------------------- data
class Dataset:
    """A train/test pair with its preprocessing (see the module docstring)."""

    def __init__(self, name, X_train, y_train, X_test, y_test, split):
        self.name = name
        self.split = split
        dense = _density(X_train) >= 0.5
        self.format = "dense" if dense else "csr"
        self.X_train = _as_format(X_train, dense)
        self.X_test = _as_format(X_test, dense)
        self.y_train = np.asarray(y_train, dtype=np.float64)
        self.y_test = np.asarray(y_test, dtype=np.float64)
        self.sigma = train_std(self.X_train)
        self.Xs_train = std_scale(self.X_train, self.sigma)
        self.Xs_test = std_scale(self.X_test, self.sigma)

    @property
    def n_train(self):
        return self.X_train.shape[0]

    def describe(self):
        X = self.X_train
        nnz = X.nnz if sp.issparse(X) else int(np.count_nonzero(X))
        return {"name": self.name, "n_train": int(X.shape[0]), "n_test": int(self.X_test.shape[0]),
                "n_features": int(X.shape[1]), "nnz_per_row": nnz / max(X.shape[0], 1),
                "format": self.format, "split": self.split}


def _density(X):
    nnz = X.nnz if sp.issparse(X) else np.count_nonzero(X)
    return nnz / max(X.shape[0] * X.shape[1], 1)


def _as_format(X, dense):
    if dense:
        X = X.toarray() if sp.issparse(X) else X
        return np.ascontiguousarray(X, dtype=np.float64)
    X = sp.csr_matrix(X, dtype=np.float64)
    X.sort_indices()
    return X


def train_std(X):
    """Per-feature standard deviation (``ddof=0``) of X; constant features get 1."""
    if sp.issparse(X):
        mean = np.asarray(X.mean(axis=0)).ravel()
        sq = np.asarray(X.multiply(X).mean(axis=0)).ravel()
        var = np.maximum(sq - mean * mean, 0.0)
    else:
        var = X.var(axis=0)
    sigma = np.sqrt(var)
    sigma[sigma <= 1e-12 * max(1.0, float(sigma.max(initial=0.0)))] = 1.0
    return sigma


def std_scale(X, sigma):
    """``X Diag(sigma)^-1`` (no centring), keeping the format of X; X is not modified."""
    if sp.issparse(X):
        return sp.csr_matrix(X @ sp.diags(1.0 / sigma))
    return np.ascontiguousarray(X / sigma)


def stratified_split(y, test_fraction=0.3, seed=0):
    """(train indices, test indices): a stratified split with a fixed seed."""
    rng = np.random.default_rng(seed)
    y = np.asarray(y)
    train, test = [], []
    for label in np.unique(y):
        idx = np.flatnonzero(y == label)
        rng.shuffle(idx)
        n_test = int(round(test_fraction * idx.size))
        test.append(idx[:n_test])
        train.append(idx[n_test:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


def _pm(y):
    y = np.asarray(y).ravel()
    classes = np.unique(y)
    if classes.size != 2:
        raise ValueError(f"expected two classes, found {classes.size}")
    return np.where(y == classes[1], 1.0, -1.0)


def _data_folder():
    folder = os.environ.get("MARGINKIT_DATA")
    if not folder or not os.path.isdir(folder):
        return None
    return folder


def _find(folder, name):
    for suffix in ("", ".xz", ".gz"):
        path = os.path.join(folder, name + suffix)
        if os.path.isfile(path):
            return path
    return None


def synthetic(n=300, d=8, noise=0.05, seed=0):
    """A tiny seeded two-class problem (Gaussian clusters, a few flipped labels)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(d)
    X = rng.standard_normal((n, d)) * rng.uniform(0.5, 3.0, d) + rng.uniform(-1, 1, d)
    y = np.where(X @ w > np.median(X @ w), 1.0, -1.0)
    flip = rng.random(n) < noise
    y[flip] = -y[flip]
    return X, y


def _input_paths(name, folder):
    """Every path ``load_dataset(name, folder)`` may read (each suffix ``_find`` tries,
    whether or not the file exists yet: a report written to a missing ``heart_scale``
    would be read in place of ``heart_scale.xz``)."""
    if name == "synthetic" or name not in DATASETS:
        return []
    train_name, test_spec, _ = DATASETS[name]
    if train_name == "mnist":
        stems = ["mnist/t10k-images-idx3-ubyte", "mnist/t10k-labels-idx1-ubyte"]
    else:
        stems = [train_name] + ([test_spec] if test_spec is not None else [])
    return [os.path.join(folder, stem + suffix) for stem in stems
            for suffix in ("", ".xz", ".gz")]


def load_dataset(name, folder=None, seed=0):
    """A ``Dataset`` by name (see ``DATASETS``; ``"synthetic"`` needs no data folder).

    Raises ``FileNotFoundError`` when the files are not in ``folder`` / ``MARGINKIT_DATA``.
    """
    if name == "synthetic":
        X, y = synthetic(seed=seed)
        tr, te = stratified_split(y, seed=seed)
        return Dataset(name, X[tr], y[tr], X[te], y[te], f"stratified 70/30 seed={seed}")
    if name not in DATASETS:
        raise ValueError(f"unknown data set {name!r}; choose from {['synthetic', *DATASETS]}")
    folder = folder or _data_folder()
    if folder is None:
        raise FileNotFoundError("MARGINKIT_DATA is not set")
    train_name, test_spec, n_features = DATASETS[name]
    if train_name == "mnist":
        a, b, inverted = test_spec
        img = _find(folder, "mnist/t10k-images-idx3-ubyte")
        lab = _find(folder, "mnist/t10k-labels-idx1-ubyte")
        if img is None or lab is None:
            raise FileNotFoundError(f"{name}: mnist/t10k-*-ubyte.gz not found in {folder}")
        images, labels = load_mnist_idx(img, lab)  # pixels / 255, float64
        keep = (labels == a) | (labels == b)
        X = images[keep]
        if inverted:
            X = 1.0 - X
        y = np.where(labels[keep] == a, 1.0, -1.0)
        tr, te = stratified_split(y, seed=seed)
        split = f"MNIST t10k {a} (+1) vs {b} (-1){' inverted 1-x' if inverted else ''}, " \
                f"stratified 70/30 seed={seed}"
        return Dataset(name, X[tr], y[tr], X[te], y[te], split)
    path = _find(folder, train_name)
    if path is None:
        raise FileNotFoundError(f"{name}: {train_name}.xz not found in {folder}")
    X, y = load_libsvm(path, n_features=n_features)
    if test_spec is not None:
        tpath = _find(folder, test_spec)
        if tpath is None:
            raise FileNotFoundError(f"{name}: {test_spec}.xz not found in {folder}")
        Xt, yt = load_libsvm(tpath, n_features=X.shape[1])
        classes = np.unique(y)
        return Dataset(name, X, _pm(y), Xt, np.where(yt == classes[1], 1.0, -1.0),
                       "official train/test")
    ypm = _pm(y)
    tr, te = stratified_split(ypm, seed=seed)
    return Dataset(name, X[tr], ypm[tr], X[te], ypm[te], f"stratified 70/30 seed={seed}")


# -------------------------------------------------------------------------- methods
class Skip(Exception):
    """A method cannot run here (tool not installed, solver not registered, too big)."""


class Fit:
    """What one fit returned: a decision function on the test data and a status."""

    def __init__(self, decision, status, n_iter=None, certificate=None, extra=None):
        self.decision = decision
        self.status = status
        self.n_iter = n_iter
        self.certificate = certificate
        self.extra = extra or {}


def _accuracy(scores, y):
    return float(np.mean(np.where(np.asarray(scores).ravel() > 0, 1.0, -1.0) == y))


class Method:
    """A named competitor: ``prepare(ds)`` (untimed), ``fit(prepared)`` (timed),
    ``finish(ds, prepared, model)`` (untimed, returns a ``Fit``)."""

    name = None
    family = None
    reference = False
    #: what data it sees, for the table's notes
    sees = "X Diag(sigma)^-1"
    max_train = None

    def check(self, ds):
        """Raise ``Skip`` when the method cannot run on ``ds``."""
        if self.max_train is not None and ds.n_train > self.max_train:
            raise Skip(f"n_train={ds.n_train} > {self.max_train} (too slow; --all-sizes to force)")

    def prepare(self, ds):
        return None

    def fit(self, ds, prepared):  # pragma: no cover - abstract
        raise NotImplementedError

    def finish(self, ds, prepared, model):  # pragma: no cover - abstract
        raise NotImplementedError


class MarginkitMethod(Method):
    family = "marginkit"

    def __init__(self, name, solver, label=None, kernel=None, **params):
        self.name = name
        self.solver = solver
        self.kernel = kernel
        self.params = params
        self.label = label

    def _plugin(self):
        import marginkit as mk

        if self.solver not in mk.list_plugins()["solver"]:
            raise Skip(f"solver {self.solver!r} is not registered (yet)")
        return mk.get_plugin("solver", self.solver)

    def _uses_scale(self):
        return "scale" in (getattr(self._plugin(), "param_table", {}) or {})

    def check(self, ds):
        super().check(ds)
        self._plugin()
        stop = self.params.get("stop")
        if isinstance(stop, str):
            import marginkit as mk

            if stop not in mk.list_plugins()["stopping"]:
                raise Skip(f"stopping rule {stop!r} is not registered (yet)")

    @property
    def sees(self):
        try:
            if self._uses_scale():
                return f"X (unscaled) + scale={self.params.get('scale', 'std')!r}"
            return "X Diag(sigma)^-1"
        except Skip:
            return "-"

    def prepare(self, ds):
        kw = dict(self.params)
        if self.kernel is not None:
            kw["kernel"] = self.kernel
        if self._uses_scale():
            kw.setdefault("scale", "std")
            return ds.X_train, ds.X_test, kw
        return ds.Xs_train, ds.Xs_test, kw

    def fit(self, ds, prepared):
        import marginkit as mk

        X, _, kw = prepared
        return mk.solve(X, ds.y_train, solver=self.solver, **kw)

    def finish(self, ds, prepared, res):
        _, Xt, _ = prepared
        cert = None
        if res.certificate is not None:
            cert = {"kind": res.certificate.kind, "value": _float(res.certificate.value)}
            try:
                cert["verified"] = bool(res.certificate.verify(prepared[0], ds.y_train))
            except Exception as exc:  # noqa: BLE001 - reported, never fatal for a benchmark
                cert["verified"] = f"error: {type(exc).__name__}: {exc}"
        extra = {}
        if res.certified_mask is not None:
            extra["certified_fraction"] = float(np.mean(res.certified_mask))
        return Fit(res.decision_function(Xt), res.status, res.n_iter, cert, extra)


class KernelMarginkitMethod(MarginkitMethod):
    """A marginkit solver on the exact RBF kernel, on the input the kernel references see
    (``X Diag(sigma)^-1``, gamma = 1/d, C = 64/n_tr: the columns ``libsvm[rbf]`` and
    ``SVC[rbf]``). Skipped with the solver's reason while it refuses exact kernels."""

    sees = "X Diag(sigma)^-1, exact rbf kernel"

    def __init__(self, name, solver, **params):
        super().__init__(name, solver, kernel="rbf", **params)

    def check(self, ds):
        super().check(ds)
        import marginkit as mk

        X, y = ds.Xs_train[:8], np.array([1.0, -1.0] * 4)
        try:
            mk.solve(X, y, solver=self.solver, kernel="rbf", max_iter=1)
        except (TypeError, ValueError) as exc:
            if "kernel" in str(exc):
                raise Skip(f"{self.solver} refuses the exact kernel: {exc}") from None

    def prepare(self, ds):
        kw = dict(self.params, kernel="rbf",
                  kernel_params={"gamma": 1.0 / ds.X_train.shape[1]}, C=64.0 / ds.n_train)
        return ds.Xs_train, ds.Xs_test, kw


def _float(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


class LiblinearOfficial(Method):
    """``liblinearutil.train`` with ``-s 3 -B 1 -c C -q``, C = 64/n_tr (arXiv:2512.03947, sec. 5.1).

    The library's messages are routed to a collector instead of being discarded, which
    tells "optimization finished, #iter = k" from "reaching max number of iterations".
    """

    name = "liblinear"
    family = "reference"
    reference = True

    def check(self, ds):
        try:
            from liblinear import liblinearutil  # noqa: F401
        except ImportError:
            raise Skip("liblinear-official is not installed (pip install liblinear-official)")

    def prepare(self, ds):
        from liblinear import liblinear, liblinearutil

        C = 64.0 / ds.n_train
        prob = liblinearutil.problem(ds.y_train, ds.Xs_train)
        messages = []
        param = liblinearutil.parameter(f"-s 3 -B 1 -c {C!r} -q")
        param.print_func = liblinear.PRINT_STRING_FUN(lambda s: messages.append(s.decode()))
        param._messages_cb = param.print_func  # keep the ctypes callback alive
        return prob, param, messages

    def fit(self, ds, prepared):
        from liblinear import liblinearutil

        prob, param, messages = prepared
        messages.clear()
        return liblinearutil.train(prob, param)

    def finish(self, ds, prepared, model):
        text = "".join(prepared[2])
        n_iter = None
        if "#iter = " in text:
            n_iter = int(text.split("#iter = ")[-1].split()[0])
        status = "max_iter" if "reaching max number of iterations" in text else "converged"
        nf = ds.X_train.shape[1]
        w = np.array([model.w[i] for i in range(nf + 1)])
        label0 = model.get_labels()[0]
        sign = 1.0 if label0 == 1 else -1.0
        Xt = ds.Xs_test
        scores = sign * (np.asarray(Xt @ w[:nf]).ravel() + w[nf])
        return Fit(scores, status, n_iter)


class LibsvmOfficial(Method):
    """``svmutil.svm_train`` with ``-s 0 -t <kernel> -c C -q`` (C = 64/n_tr)."""

    family = "reference"
    max_train = 5000

    def __init__(self, kernel="linear"):
        self.kernel = kernel
        self.name = f"libsvm[{kernel}]"

    def check(self, ds):
        super().check(ds)
        try:
            from libsvm import svmutil  # noqa: F401
        except ImportError:
            raise Skip("libsvm-official is not installed (pip install libsvm-official)")

    def prepare(self, ds):
        from libsvm import svmutil

        C = 64.0 / ds.n_train
        d = ds.X_train.shape[1]
        t = {"linear": 0, "rbf": 2}[self.kernel]
        prob = svmutil.svm_problem(ds.y_train, ds.Xs_train)
        param = svmutil.svm_parameter(f"-s 0 -t {t} -g {1.0 / d!r} -c {C!r} -q")
        return prob, param

    def fit(self, ds, prepared):
        from libsvm import svmutil

        return svmutil.svm_train(*prepared)

    def finish(self, ds, prepared, model):
        from libsvm import svmutil

        with _quiet_stdout():
            _, _, vals = svmutil.svm_predict(ds.y_test, ds.Xs_test, model, "-q")
        sign = 1.0 if model.get_labels()[0] == 1 else -1.0
        scores = sign * np.asarray(vals).ravel()
        return Fit(scores, "converged", None, extra={"n_support": int(model.get_nr_sv())})


@contextlib.contextmanager
def _quiet_stdout():
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
        yield


class SklearnMethod(Method):
    family = "reference"

    def __init__(self, name, make, max_train=None):
        self.name = name
        self.make = make
        self.max_train = max_train

    def check(self, ds):
        super().check(ds)
        try:
            import sklearn  # noqa: F401
        except ImportError:
            raise Skip("scikit-learn is not installed")

    def prepare(self, ds):
        return self.make(ds)

    def fit(self, ds, est):
        from sklearn.exceptions import ConvergenceWarning

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            est.fit(ds.Xs_train, ds.y_train)
        est._bench_converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
        return est

    def finish(self, ds, est, model):
        n_iter = getattr(model, "n_iter_", None)
        if n_iter is not None:
            n_iter = int(np.max(n_iter))
        status = "converged" if model._bench_converged else "max_iter"
        return Fit(model.decision_function(ds.Xs_test), status, n_iter)


def _linear_svc(ds):
    from sklearn.svm import LinearSVC

    return LinearSVC(loss="hinge", C=64.0 / ds.n_train, dual=True, max_iter=1000, random_state=0)


def _perceptron(ds):
    from sklearn.linear_model import Perceptron

    return Perceptron(random_state=0)


def _logreg(ds):
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=64.0 / ds.n_train, max_iter=1000)


def _svc_rbf(ds):
    from sklearn.svm import SVC

    return SVC(kernel="rbf", C=64.0 / ds.n_train, gamma=1.0 / ds.X_train.shape[1])


def default_methods():
    """The competitors, in table order (marginkit first, then the references)."""
    return [
        MarginkitMethod("mk:fista", "fista"),
        MarginkitMethod("mk:fista_svm", "fista_svm"),
        MarginkitMethod("mk:dcd", "dcd"),
        MarginkitMethod("mk:dcd[liblinear-stop]", "dcd", stop="liblinear"),
        MarginkitMethod("mk:dcd[scale]", "dcd", scale="scale"),
        MarginkitMethod("mk:pegasos", "pegasos", random_state=0),
        LiblinearOfficial(),
        SklearnMethod("LinearSVC", _linear_svc),
        SklearnMethod("Perceptron", _perceptron),
        SklearnMethod("LogisticRegression", _logreg),
        LibsvmOfficial("linear"),
        SklearnMethod("SVC[rbf]", _svc_rbf, max_train=5000),
        KernelMarginkitMethod("mk:fista_svm[rbf]", "fista_svm"),
        KernelMarginkitMethod("mk:fista[rbf]", "fista"),
        KernelMarginkitMethod("mk:dcd[rbf]", "dcd", random_state=0),
        LibsvmOfficial("rbf"),
    ]


METHODS = [m.name for m in default_methods()]


# ---------------------------------------------------------------------------- runner
def _timed_fit(method, ds):
    """One run: (wall seconds, process CPU seconds, (prepared, model))."""
    prepared = method.prepare(ds)
    c0, t0 = time.process_time(), time.perf_counter()
    model = method.fit(ds, prepared)
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    return dt, dc, (prepared, model)


def time_methods(methods, ds, repeat, budget, progress=None):
    """Time ``methods`` on ``ds``, ``repeat`` rounds, one run of each method per round.

    Interleaving the rounds spreads any drift of the machine's load evenly over the
    methods, so their ratios stay comparable; the order rotates from round to round
    (A B C, B C A, C A B, ...) so that no method always runs right after the same other
    one (a run leaves the caches and branch predictors in its own state, which costs the
    next method tens of microseconds on sub-millisecond fits). A method stops repeating
    once its runs took more than ``budget`` seconds in total (it always runs once).
    Returns ``{name: (wall times, cpu times, Fit of the last run)}`` and
    ``{name: error text}`` for methods that raised.
    """
    out, errors = {}, {}
    for rnd in range(repeat):
        shift = rnd % max(len(methods), 1)
        for method in methods[shift:] + methods[:shift]:
            name = method.name
            if name in errors or (name in out and sum(out[name][0]) > budget):
                continue
            if progress:
                progress(f"{ds.name}: {name} (run {rnd + 1}/{repeat}) ...")
            try:
                dt, dc, last = _timed_fit(method, ds)
            except Exception as exc:  # noqa: BLE001 - a failing competitor is a row, not a crash
                errors[name] = f"{type(exc).__name__}: {exc}"
                out.pop(name, None)
                continue
            walls, cpus, _ = out.get(name, ([], [], None))
            out[name] = (walls + [dt], cpus + [dc], last)
    for method in methods:
        if method.name in out:
            walls, cpus, (prepared, model) = out[method.name]
            try:
                out[method.name] = (walls, cpus, method.finish(ds, prepared, model))
            except Exception as exc:  # noqa: BLE001
                errors[method.name] = f"{type(exc).__name__}: {exc}"
                del out[method.name]
    return out, errors


def _status_text(row):
    if row.get("skipped"):
        return "skipped: " + row["skipped"]
    if row.get("error"):
        return "error: " + row["error"]
    parts = [str(row["status"])]
    if row.get("n_iter") is not None:
        parts.append(f"it={row['n_iter']}")
    cert = row.get("certificate")
    if cert:
        ok = cert.get("verified")
        parts.append(f"cert={cert['kind']}" + ("" if ok is True else f" (verify: {ok})"))
    if row.get("certified_fraction") is not None:
        parts.append(f"certified={100 * row['certified_fraction']:.1f}%")
    return " ".join(parts)


def run_bench(datasets, methods=None, repeat=5, budget=120.0, seed=0, folder=None,
              all_sizes=False, progress=None, checkpoint=None):
    """Run every method on every data set; returns the report dict (also for JSON).

    ``checkpoint(report)``, when given, is called with the partial report after each
    data set (``main`` uses it to keep the JSON file current during long runs).
    """
    methods = default_methods() if methods is None else methods
    rows, notes, described = [], [], []
    meta = _meta(repeat, budget, seed)
    for name in datasets:
        try:
            ds = load_dataset(name, folder=folder, seed=seed)
        except (FileNotFoundError, ValueError) as exc:
            notes.append(f"{name}: skipped ({exc})")
            continue
        described.append(ds.describe())
        ds_rows, runnable = [], []
        for method in methods:
            row = {"dataset": name, "method": method.name, "family": method.family}
            if all_sizes:
                method.max_train = None
            try:
                method.check(ds)
                row["input"] = method.sees
                runnable.append(method)
            except Skip as exc:
                row["skipped"] = str(exc)
            ds_rows.append(row)
        timed, errors = time_methods(runnable, ds, repeat, budget, progress)
        for row in ds_rows:
            if row["method"] in errors:
                row["error"] = errors[row["method"]]
            if row["method"] not in timed:
                continue
            times, cpu, fit = timed[row["method"]]
            row.update(times=times, median_s=statistics.median(times), min_s=min(times),
                       max_s=max(times), cpu_times=cpu, cpu_median_s=statistics.median(cpu),
                       test_accuracy=_accuracy(fit.decision, ds.y_test),
                       status=fit.status, n_iter=fit.n_iter, certificate=fit.certificate)
            row.update(fit.extra)
        ref = _reference_row(ds_rows)
        for row in ds_rows:
            if ref is not None and "median_s" in row:
                row["reference"] = ref["method"]
                row["ratio"] = row["median_s"] / ref["median_s"]
                row["cpu_ratio"] = row["cpu_median_s"] / max(ref["cpu_median_s"], 1e-9)
                row["accuracy_delta_points"] = 100 * (row["test_accuracy"] - ref["test_accuracy"])
            row["status_text"] = _status_text(row)
        rows.extend(ds_rows)
        if checkpoint is not None:
            checkpoint({"meta": meta, "datasets": described, "rows": rows, "notes": notes})
    return {"meta": meta, "datasets": described, "rows": rows, "notes": notes}


def _reference_row(rows):
    for name in ("liblinear", "LinearSVC"):
        for row in rows:
            if row["method"] == name and "median_s" in row:
                return row
    return None


def _meta(repeat, budget, seed):
    import marginkit as mk

    meta = {"date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
            "marginkit": mk.__version__, "python": platform.python_version(),
            "numpy": np.__version__, "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
            "loadavg_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
            "repeat": repeat, "budget_s": budget, "seed": seed,
            "registered_solvers": mk.list_plugins()["solver"]}
    for mod, key in (("scipy", "scipy"), ("sklearn", "scikit-learn")):
        try:
            meta[key] = __import__(mod).__version__
        except ImportError:
            meta[key] = None
    try:
        from importlib.metadata import version

        meta["liblinear-official"] = version("liblinear-official")
        meta["libsvm-official"] = version("libsvm-official")
    except Exception:  # noqa: BLE001 - versions are informative only
        pass
    return meta


def format_table(report):
    """The report as a Markdown table (one row per data set x method).

    ``ratio`` is the median wall time over the reference's (LIBLINEAR, else LinearSVC);
    ``cpu ratio`` the same with process CPU time, steadier on a loaded machine but
    charging multi-threaded methods for every thread.
    """
    head = ("| data set | method | time median [min-max] (s) | ratio | cpu ratio | test acc | status |\n"
            "|---|---|---|---|---|---|---|")
    lines = [head]
    for row in report["rows"]:
        if "median_s" in row:
            t = f"{row['median_s']:.4g} [{row['min_s']:.4g}-{row['max_s']:.4g}] x{len(row['times'])}"
            ratio = f"{row['ratio']:.2f}" if row.get("ratio") is not None else "-"
            cpu = f"{row['cpu_ratio']:.2f}" if row.get("cpu_ratio") is not None else "-"
            acc = f"{row['test_accuracy']:.4f}"
        else:
            t, ratio, cpu, acc = "-", "-", "-", "-"
        lines.append(f"| {row['dataset']} | {row['method']} | {t} | {ratio} | {cpu} | {acc} | "
                     f"{row['status_text']} |")
    out = "\n".join(lines)
    info = [f"{d['name']}: n_train={d['n_train']} n_test={d['n_test']} d={d['n_features']} "
            f"nnz/row={d['nnz_per_row']:.1f} {d['format']}; {d['split']}" for d in report["datasets"]]
    if info:
        out += "\n\nData: " + "\n      ".join(info)
    if report["notes"]:
        out += "\n\nNotes: " + "\n       ".join(report["notes"])
    return out


def build_parser(parser=None):
    parser = parser or argparse.ArgumentParser(
        prog="marginkit bench",
        description="Side-by-side comparison of marginkit solvers with LIBLINEAR, LIBSVM and "
                    "scikit-learn on the LIBSVM data sets of MARGINKIT_DATA.")
    parser.add_argument("--data", default=None,
                        help="comma-separated data set names (default: every data set found; "
                             f"known: synthetic,{','.join(DATASETS)})")
    parser.add_argument("--methods", default=None,
                        help=f"comma-separated methods (default: all; known: {','.join(METHODS)})")
    parser.add_argument("--repeat", type=int, default=None,
                        help="runs per method (median reported; default 5, 2 with --quick)")
    parser.add_argument("--budget", type=float, default=120.0,
                        help="stop repeating a method once its runs took this many seconds")
    parser.add_argument("--quick", action="store_true",
                        help="tiny data only (synthetic, heart_scale), for smoke tests")
    parser.add_argument("--all-sizes", action="store_true",
                        help="also run the slow kernel references (LIBSVM, SVC) on n_train > 5000")
    parser.add_argument("--seed", type=int, default=0, help="seed of the 70/30 splits")
    parser.add_argument("--json", default=None, metavar="OUT.json", help="write the report here")
    return parser


def main(argv=None):
    """Entry point of ``marginkit bench``; returns the exit code."""
    args = build_parser().parse_args(argv)
    if args.repeat is not None and args.repeat < 1:
        print("marginkit bench: --repeat must be >= 1", file=sys.stderr)
        return 2
    # found by review: --seed -1 gave an empty table (every data set "skipped"), --budget
    # nan was taken, and --json naming a FIFO blocked (a directory: a traceback after the
    # whole run); each is a usage error before any work
    if args.seed < 0:
        print("marginkit bench: --seed must be >= 0", file=sys.stderr)
        return 2
    if not (math.isfinite(args.budget) and args.budget > 0):
        print(f"marginkit bench: --budget must be a positive number of seconds, got "
              f"{args.budget}", file=sys.stderr)
        return 2
    if args.json is not None:
        import stat

        try:
            mode = os.stat(args.json).st_mode
        except FileNotFoundError:
            mode = None
        except OSError as exc:
            print(f"marginkit bench: --json {args.json}: {exc.strerror}", file=sys.stderr)
            return 2
        if mode is not None and not stat.S_ISREG(mode):
            print(f"marginkit bench: --json {args.json} is not a regular file (a directory, "
                  "a device or a FIFO); name a file to write the report to", file=sys.stderr)
            return 2
        folder = os.path.dirname(os.path.abspath(args.json))
        if not os.access(folder, os.W_OK | os.X_OK) or (mode is not None
                                                        and not os.access(args.json, os.W_OK)):
            # found by review: a missing folder failed after the whole run
            print(f"marginkit bench: --json {args.json} cannot be written (no such folder, or "
                  "no permission); name a file in a folder you can write to", file=sys.stderr)
            return 2
    repeat = args.repeat or (2 if args.quick else 5)
    if args.data:
        names = [s.strip() for s in args.data.split(",") if s.strip()]
        if not names:
            # found by review: "--data ," gave an empty table and exit code 0
            print(f"marginkit bench: --data {args.data!r} names no data set; give "
                  f"comma-separated names (known: synthetic, {', '.join(DATASETS)})",
                  file=sys.stderr)
            return 2
        unknown = [n for n in names if n != "synthetic" and n not in DATASETS]
        if unknown:
            print(f"marginkit bench: unknown data set(s) {unknown}; known: synthetic, "
                  f"{', '.join(DATASETS)}", file=sys.stderr)
            return 2
    elif args.quick:
        names = list(QUICK_DATASETS)
    else:
        names = list(DATASETS)
    methods = default_methods()
    if args.methods:
        wanted = [s.strip() for s in args.methods.split(",") if s.strip()]
        if not wanted:
            print(f"marginkit bench: --methods {args.methods!r} names no method; give "
                  f"comma-separated names (known: {', '.join(METHODS)})", file=sys.stderr)
            return 2
        unknown = [m for m in wanted if m not in METHODS]
        if unknown:
            print(f"marginkit bench: unknown method(s) {unknown}; known: {', '.join(METHODS)}",
                  file=sys.stderr)
            return 2
        methods = [m for m in methods if m.name in wanted]
    elif args.quick:  # LIBSVM's linear kernel takes seconds even on 200 rows at C = 64/n
        methods = [m for m in methods
                   if not (isinstance(m, LibsvmOfficial) and m.kernel == "linear")]
    if _data_folder() is None:
        names = [n for n in names if n == "synthetic"] or ["synthetic"]
        print("marginkit bench: MARGINKIT_DATA is not set; running on synthetic data only",
              file=sys.stderr)
    elif args.json is not None:
        # found by review: --json $MARGINKIT_DATA/fourclass_scale.xz replaced the data set
        # with the report's checkpoint (the set was then "skipped", exit code 0); fit -m
        # and predict -o refuse their inputs the same way
        out = os.path.realpath(args.json)
        for name in names:
            for path in _input_paths(name, _data_folder()):
                same = os.path.realpath(path) == out
                try:
                    same = same or os.path.samefile(path, args.json)
                except OSError:
                    pass
                if same:
                    print(f"marginkit bench: --json {args.json} is an input file of data set "
                          f"{name}; writing the report there would overwrite it; name another "
                          "file", file=sys.stderr)
                    return 2

    def progress(msg):
        print(msg, file=sys.stderr, flush=True)

    command = "marginkit bench " + " ".join(argv if argv is not None else sys.argv[1:])

    def write_json(report):
        report["meta"]["command"] = command
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(report, fh, indent=1, default=_json_default)

    report = run_bench(names, methods, repeat=repeat, budget=args.budget, seed=args.seed,
                       all_sizes=args.all_sizes, progress=progress, checkpoint=write_json)
    write_json(report)
    print(format_table(report))
    return 0


def _json_default(obj):
    if isinstance(obj, (np.floating, np.integer)):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return str(obj)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
