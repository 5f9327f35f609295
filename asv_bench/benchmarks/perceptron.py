"""The perceptron / von Neumann family of Ramdas & Peña, ICML 2014 (``perceptron`` ...
``isnkpvn``).

One class per family, a small grid solver x data set x dtype (x kernel in the ``full``
profile). Data sets: ``separable`` (Gaussian points at normalized margin >= 0.05 from a
random hyperplane), ``noisy`` (the same with 5% flipped labels: not separable, the
dual solvers must return an infeasibility certificate) and ``heart_scale`` (real,
not linearly separable, needs ``MARGINKIT_DATA``). Every run is capped by ``max_iter``
so the primal-only methods (perceptron, nkp, snkp) end on ``noisy`` data too.

Tracked numbers: iterations, test accuracy (separable data), whether the run *decided*
(status ``separable`` or ``infeasible`` with a certificate that ``verify``s from the
data alone), and the lower bound on the normalized margin when the solver gives one.
"""
import numpy as np

import marginkit as mk

from . import common

SOLVERS = ["perceptron", "normalized_perceptron", "nkp", "snkp", "nvn", "snkpvn", "isnkpvn"]
DATASETS = ["separable", "noisy", "heart_scale"]
DTYPES = ["float64", "float32"]
KERNELS = ["linear", "rbf"] if common.FULL else ["linear"]

_cache = {}


def _data(name, dtype):
    key = (name, dtype)
    if key not in _cache:
        n = common.size(600, 10_000)
        if name == "separable":
            X, y = common.separable(n, 10, margin=0.05, seed=1)
        elif name == "noisy":
            X, y = common.noisy(n, 10, flip=0.05, seed=2)
        else:
            X, y = common.load("heart_scale")
            X = X.toarray()
        X = np.hstack([X, np.ones((X.shape[0], 1))])  # intercept as a constant feature
        Xtr, ytr, Xte, yte = common.split(X, y, seed=0)
        _cache[key] = (np.ascontiguousarray(Xtr, dtype=dtype), ytr,
                       np.ascontiguousarray(Xte, dtype=dtype), yte)
    return _cache[key]


class PerceptronFamily:
    """solve() of each paper-000 solver on small dense problems."""

    version = "perceptron-1"
    params = (SOLVERS, DATASETS, DTYPES, KERNELS)
    param_names = ["solver", "dataset", "dtype", "kernel"]
    timeout = 300

    def setup(self, solver, dataset, dtype, kernel):
        common.require_solver(solver)
        self.X, self.y, self.Xt, self.yt = _data(dataset, dtype)
        self.kwargs = dict(solver=solver, kernel=kernel, random_state=0,
                           max_iter=common.size(2_000, 50_000),
                           time_limit=common.size(5.0, 60.0))
        if kernel == "rbf":
            self.kwargs["kernel_params"] = {"gamma": 1.0 / self.X.shape[1]}
        self._res = None

    def _solve(self):
        if self._res is None:
            self._res = mk.solve(self.X, self.y, **self.kwargs)
        return self._res

    def time_solve(self, *params):
        mk.solve(self.X, self.y, **self.kwargs)

    def peakmem_solve(self, *params):
        mk.solve(self.X, self.y, **self.kwargs)

    def track_n_iter(self, *params):
        return int(self._solve().n_iter)

    track_n_iter.unit = "iterations"

    def track_test_accuracy(self, *params):
        return float(self._solve().score(self.Xt, self.yt))

    track_test_accuracy.unit = "fraction"

    def track_decided(self, *params):
        """1 when the run ended with a verified separator or infeasibility certificate."""
        res = self._solve()
        if res.status not in ("separable", "infeasible") or res.certificate is None:
            return 0.0
        return float(bool(res.certificate.verify(self.X, self.y)))

    track_decided.unit = "bool"

    def track_margin_lower_bound(self, *params):
        res = self._solve()
        low = float("nan") if res.margin_bounds is None else float(res.margin_bounds[0])
        return low if np.isfinite(low) else float("nan")  # -inf: no separator yet

    track_margin_lower_bound.unit = "rho"
