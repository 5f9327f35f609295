"""SVM family (arXiv:2512.03947): fista, fista_svm, dcd (certified and LIBLINEAR rules), pegasos.

Self-contained (no import of common.py). ``MARGINKIT_BENCH_PROFILE=full`` uses larger
synthetic problems; the a9a cases need ``MARGINKIT_DATA`` and are skipped otherwise.
Per case: ``time_solve``, ``peakmem_solve``, ``track_iterations``, ``track_train_accuracy``,
``track_error_bound`` (the certified bound at the stop).
"""
import functools
import lzma
import os

import numpy as np
import scipy.sparse as sp

FULL = os.environ.get("MARGINKIT_BENCH_PROFILE", "fast") == "full"


@functools.lru_cache(maxsize=None)
def _synthetic(n, d, density, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) + 1.0
    X[rng.random((n, d)) > density] = 0.0
    w = rng.standard_normal(d)
    y = np.where(X @ w + 0.5 * rng.standard_normal(n) > np.median(X @ w), 1.0, -1.0)
    return X, y


@functools.lru_cache(maxsize=None)
def _a9a():
    folder = os.environ.get("MARGINKIT_DATA")
    path = os.path.join(folder or "", "a9a.xz")
    if not folder or not os.path.exists(path):
        raise NotImplementedError("a9a needs MARGINKIT_DATA")
    from sklearn.datasets import load_svmlight_file

    with lzma.open(path) as fh:
        X, y = load_svmlight_file(fh, n_features=123)
    return sp.csr_matrix(X), y


_CASES = {
    "fista": dict(solver="fista"),
    "fista_svm": dict(solver="fista_svm"),
    "dcd_certified": dict(solver="dcd", random_state=0),
    "dcd_liblinear": dict(solver="dcd", stop="liblinear", random_state=0),
    "pegasos": dict(solver="pegasos", epochs=20, random_state=0),
}


class SVMSolve:
    params = (list(_CASES), ["synthetic_dense", "synthetic_csr", "a9a"], ["float64", "float32"])
    param_names = ["case", "data", "dtype"]
    timeout = 300

    def setup(self, case, data, dtype):
        import marginkit as mk

        name = _CASES[case]["solver"]
        if name not in mk.list_plugins()["solver"]:
            raise NotImplementedError(f"solver {name!r} is not registered")
        if data == "a9a":
            X, y = _a9a()
            X = X.astype(dtype)
        else:
            n, d = (20_000, 200) if FULL else (3_000, 50)
            X, y = _synthetic(n, d, 0.3)
            X = X.astype(dtype)
            if data == "synthetic_csr":
                X = sp.csr_matrix(X)
        self.X, self.y = X, y
        self.kw = _CASES[case]
        self.mk = mk
        self.res = mk.solve(X, y, **self.kw)

    def time_solve(self, case, data, dtype):
        self.mk.solve(self.X, self.y, **self.kw)

    def peakmem_solve(self, case, data, dtype):
        self.mk.solve(self.X, self.y, **self.kw)

    def track_iterations(self, case, data, dtype):
        return int(self.res.n_iter)

    def track_train_accuracy(self, case, data, dtype):
        return float(self.res.score(self.X, self.y))

    def track_error_bound(self, case, data, dtype):
        eb = self.res.history.get("error_bound")
        if eb is None or not np.isfinite(eb[-1]):
            return float("nan")
        return float(eb[-1])


class FistaIteration:
    """One FISTA iteration against two scipy CSR matvecs (X @ v and X.T @ u)."""

    params = ["synthetic_csr", "a9a"]
    param_names = ["data"]

    def setup(self, data):
        import marginkit as mk
        from marginkit.solvers import svm

        if "fista" not in mk.list_plugins()["solver"]:
            raise NotImplementedError("fista is not registered")
        if data == "a9a":
            X, y = _a9a()
        else:
            n, d = (50_000, 300) if FULL else (10_000, 100)
            X, y = _synthetic(n, d, 0.1)
            X = sp.csr_matrix(X)
        n = X.shape[0]
        problem = mk._api.Problem(X=mk._validation.check_X(X), y=np.where(y > 0, 1.0, -1.0),
                                  classes_=None, kernel=mk.get_plugin("kernel", "linear")(),
                                  smoother=None, params={}, rng=np.random.default_rng(0),
                                  config=mk.Config(solver="fista"))
        self.state = svm.Fista().start(problem)
        for _ in range(5):
            self.state.step()
        rng = np.random.default_rng(0)
        self.X, self.v, self.u = X, rng.standard_normal(X.shape[1]), rng.standard_normal(n)

    def time_fista_step(self, data):
        self.state.step()

    def time_two_scipy_matvecs(self, data):
        self.X @ self.v
        self.X.T @ self.u
