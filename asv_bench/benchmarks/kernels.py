"""Gram blocks: marginkit's rbf kernel against ``sklearn.metrics.pairwise.rbf_kernel``.

Self-contained (imports only marginkit, numpy, scipy and scikit-learn). The performance goal
is the rbf Gram of n = 5000 rows with d = 100 features within 1.2x scikit-learn's time
(float64 dense); float32 and CSR (10% density) are tracked too. ``track_ratio`` reports
marginkit / scikit-learn timed side by side in the same process (median of 5).
``MARGINKIT_BENCH_PROFILE=fast`` (the default) uses n = 1500 so CI stays quick.
"""
import os
import time

import numpy as np
import scipy.sparse as sp

N = 5000 if os.environ.get("MARGINKIT_BENCH_PROFILE", "fast") == "full" else 1500
D = 100


def _data(fmt, dtype):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, D))
    if fmt == "csr":
        X[rng.random((N, D)) > 0.1] = 0.0
        return sp.csr_matrix(X, dtype=dtype)
    return np.ascontiguousarray(X, dtype=dtype)


class RBFGram:
    params = (["marginkit", "sklearn"], ["dense", "csr"], ["float64", "float32"])
    param_names = ["implementation", "format", "dtype"]
    timeout = 300

    def setup(self, implementation, fmt, dtype):
        import marginkit as mk

        try:
            from sklearn.metrics.pairwise import rbf_kernel
        except ImportError:
            raise NotImplementedError("scikit-learn is not installed") from None
        self.X = _data(fmt, np.dtype(dtype))
        gamma = 1.0 / D
        kernel = mk.get_plugin("kernel", "rbf")(gamma=gamma)
        self.fn = {"marginkit": lambda: kernel(self.X),
                   "sklearn": lambda: rbf_kernel(self.X, gamma=gamma)}[implementation]
        self.fn()  # warm-up (page faults of the output, lazy imports)

    def time_gram(self, implementation, fmt, dtype):
        self.fn()

    def peakmem_gram(self, implementation, fmt, dtype):
        self.fn()


class RBFGramRatio:
    """marginkit / scikit-learn time for the same Gram, measured side by side."""

    params = (["dense", "csr"], ["float64", "float32"])
    param_names = ["format", "dtype"]
    timeout = 600

    def setup(self, fmt, dtype):
        import marginkit as mk

        try:
            from sklearn.metrics.pairwise import rbf_kernel
        except ImportError:
            raise NotImplementedError("scikit-learn is not installed") from None
        self.X = _data(fmt, np.dtype(dtype))
        gamma = 1.0 / D
        self.ours = lambda: mk.get_plugin("kernel", "rbf")(gamma=gamma)(self.X)
        self.ref = lambda: rbf_kernel(self.X, gamma=gamma)

    def track_ratio(self, fmt, dtype):
        self.ours()
        self.ref()
        t_ours, t_ref = [], []
        for _ in range(5):  # interleaved, so both see the same machine load
            t0 = time.perf_counter()
            self.ours()
            t_ours.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            self.ref()
            t_ref.append(time.perf_counter() - t0)
        return float(np.median(t_ours) / np.median(t_ref))

    track_ratio.unit = "ratio"
