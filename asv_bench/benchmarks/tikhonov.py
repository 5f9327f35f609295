"""asv benchmarks of iterated Tikhonov (Beugnot et al., NeurIPS 2021). Self-contained: seeded
synthetic data.

``MARGINKIT_BENCH_PROFILE=full`` enlarges the problems; invalid combinations raise
``NotImplementedError`` in ``setup`` (asv skips them).
"""
import os

import numpy as np
import scipy.sparse as sp

FULL = os.environ.get("MARGINKIT_BENCH_PROFILE", "fast") == "full"


def _linear_data(n, d, fmt, dtype, loss, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    if fmt == "csr":
        X[rng.random((n, d)) > 0.1] = 0.0
    w = rng.standard_normal(d)
    z = X @ w
    y = np.where(z + rng.standard_normal(n) > 0, 1.0, -1.0) if loss == "logistic" \
        else z + 0.1 * rng.standard_normal(n)
    X = sp.csr_matrix(X, dtype=dtype) if fmt == "csr" else np.ascontiguousarray(X, dtype=dtype)
    return X, y


class TikhonovLinear:
    """Primal Newton path (kernel="linear"): one (d, d) Newton system per iteration."""

    params = (["logistic", "squared"], ["dense", "csr"], [1, 4], ["float64", "float32"])
    param_names = ["loss", "format", "t", "dtype"]
    timeout = 120

    def setup(self, loss, fmt, t, dtype):
        import marginkit as mk

        n, d = (100_000, 200) if FULL else (20_000, 50)
        self.X, self.y = _linear_data(n, d, fmt, getattr(np, dtype), loss)
        self.kw = dict(solver="iterated_tikhonov", kernel="linear", loss=loss, t=t,
                       lam=1.0 / n, tol=1e-8)
        self.mk = mk
        self.res = mk.solve(self.X, self.y, **self.kw)

    def time_solve(self, loss, fmt, t, dtype):
        self.mk.solve(self.X, self.y, **self.kw)

    def peakmem_solve(self, loss, fmt, t, dtype):
        self.mk.solve(self.X, self.y, **self.kw)

    def track_newton_iterations(self, loss, fmt, t, dtype):
        return int(self.res.n_iter)

    def track_final_decrement(self, loss, fmt, t, dtype):
        return float(self.res.certificate.value)


class TikhonovKernel:
    """Synthetic task of section 4 (spline kernel): exact Gram path vs Nystroem."""

    params = ([1, 3, 8], ["exact", "nystroem"])
    param_names = ["t", "representation"]
    timeout = 300

    def setup(self, t, representation):
        import marginkit as mk

        n = 2000 if FULL else 500
        self.X, self.y = mk.datasets.make_source_capacity(n, 3.25, 2.0, random_state=0)
        self.kw = dict(solver="iterated_tikhonov", kernel="spline",
                       kernel_params={"order": 2.0}, t=t, lam=0.05, tol=1e-8, random_state=0)
        if representation == "nystroem":
            self.kw["n_components"] = 100
        self.mk = mk
        self.res = mk.solve(self.X, self.y, **self.kw)

    def time_solve(self, t, representation):
        self.mk.solve(self.X, self.y, **self.kw)

    def peakmem_solve(self, t, representation):
        self.mk.solve(self.X, self.y, **self.kw)

    def track_newton_iterations(self, t, representation):
        return int(self.res.n_iter)

    def track_excess_risk(self, t, representation):
        return self.mk.datasets.source_capacity_excess_risk(self.res, 3.25, 2.0)


class TikhonovFilter:
    """Squared loss: Newton path vs the closed-form spectral filter (Eq. 8)."""

    params = (["newton", "spectral_filter"], [1, 8])
    param_names = ["method", "t"]
    timeout = 120

    def setup(self, method, t):
        import marginkit as mk

        n = 1500 if FULL else 400
        self.X, self.y = mk.datasets.make_source_capacity(n, 3.25, 2.0, loss="squared",
                                                          random_state=0)
        self.kw = dict(solver="iterated_tikhonov", kernel="spline", kernel_params={"order": 2.0},
                       loss="squared", t=t, lam=0.01, method=method)
        self.mk = mk

    def time_solve(self, method, t):
        self.mk.solve(self.X, self.y, **self.kw)
