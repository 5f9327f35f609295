"""Kernel SVMs (exact RBF kernel): marginkit's fista_svm, fista and dcd against scikit-learn's
``SVC`` (LIBSVM inside) on one small fixed problem.

Self-contained (imports only marginkit, numpy and scikit-learn). Two interleaved rings in
6-D (RBF beats linear there), n = 2000 (``MARGINKIT_BENCH_PROFILE=full``: 8000), RBF
gamma = 0.5, C = 1. A marginkit solver that refuses the exact kernel is skipped
(``NotImplementedError`` in ``setup``). Per case: ``time_solve``, ``peakmem_solve``,
``track_train_accuracy``, ``track_certified_fraction`` (marginkit only) and
``time_verify`` (the certificate's referee, marginkit only).
"""
import functools
import os

import numpy as np

N = 8000 if os.environ.get("MARGINKIT_BENCH_PROFILE", "fast") == "full" else 2000
GAMMA, C = 0.5, 1.0


@functools.lru_cache(maxsize=None)
def _rings(n, d=6, seed=0):
    rng = np.random.default_rng(seed)
    radius = np.where(rng.random(n) < 0.5, 1.0, 2.0)
    angle = rng.uniform(0, 2 * np.pi, n)
    X = rng.normal(scale=0.25, size=(n, d))
    X[:, 0] += radius * np.cos(angle)
    X[:, 1] += radius * np.sin(angle)
    return X, np.where(radius > 1.5, 1.0, -1.0)


class KernelSVMSolve:
    params = ["mk:fista_svm", "mk:fista", "mk:dcd", "sklearn:SVC"]
    param_names = ["method"]
    timeout = 600

    def setup(self, method):
        self.X, self.y = _rings(N)
        if method == "sklearn:SVC":
            try:
                from sklearn.svm import SVC
            except ImportError:
                raise NotImplementedError("scikit-learn is not installed") from None
            self.fit = lambda: SVC(kernel="rbf", C=C, gamma=GAMMA).fit(self.X, self.y)
        else:
            import marginkit as mk

            solver = method.split(":")[1]
            kw = dict(solver=solver, kernel="rbf", kernel_params={"gamma": GAMMA}, C=C)
            try:
                mk.solve(self.X[:8], self.y[:8], **{**kw, "max_iter": 1})
            except (ValueError, TypeError) as exc:
                if "kernel" in str(exc):
                    raise NotImplementedError(f"{solver} refuses the exact kernel: {exc}") from None
                raise
            self.fit = lambda: mk.solve(self.X, self.y, **kw)
        self.model = self.fit()

    def time_solve(self, method):
        self.fit()

    def peakmem_solve(self, method):
        self.fit()

    def track_train_accuracy(self, method):
        return float(np.mean(np.where(self.model.decision_function(self.X) > 0, 1.0, -1.0)
                             == self.y))

    def track_certified_fraction(self, method):
        mask = getattr(self.model, "certified_mask", None)
        if mask is None:
            return float("nan")
        return float(np.mean(mask))

    def time_verify(self, method):
        cert = getattr(self.model, "certificate", None)
        if cert is not None:
            cert.verify(self.X, self.y)
