"""Shared set-up for the benchmarks: seeded data, cached loading, a size profile.

``MARGINKIT_BENCH_PROFILE=fast`` (default) keeps every case CI-sized;
``MARGINKIT_BENCH_PROFILE=full`` uses the real sizes. Real data comes from the folder
named by ``MARGINKIT_DATA``; benchmarks that need it are skipped (``NotImplementedError``
in ``setup``) when it is not set.
"""
import functools
import lzma
import os

import numpy as np
import scipy.sparse as sp

PROFILE = os.environ.get("MARGINKIT_BENCH_PROFILE", "fast")
FULL = PROFILE == "full"


def size(fast, full):
    """Pick the size for the current profile."""
    return full if FULL else fast


def rng(seed=0):
    return np.random.default_rng(seed)


@functools.lru_cache(maxsize=None)
def load(name, n_features=None):
    """(X CSR float64, y in {-1, +1}) for a LIBSVM file of ``MARGINKIT_DATA``."""
    folder = os.environ.get("MARGINKIT_DATA")
    if not folder:
        raise NotImplementedError("MARGINKIT_DATA is not set")
    path = os.path.join(folder, name + ".xz")
    if not os.path.exists(path):
        raise NotImplementedError(f"{name} not found in MARGINKIT_DATA")
    from sklearn.datasets import load_svmlight_file

    with lzma.open(path) as fh:
        X, y = load_svmlight_file(fh, n_features=n_features)
    classes = np.unique(y)
    return sp.csr_matrix(X), np.where(y == classes[-1], 1.0, -1.0)


def as_format(X, fmt, dtype):
    """X converted to ``fmt`` ("dense" or "csr") and ``dtype``."""
    if fmt == "dense":
        X = X.toarray() if sp.issparse(X) else X
        return np.ascontiguousarray(X, dtype=dtype)
    return sp.csr_matrix(X, dtype=dtype)
