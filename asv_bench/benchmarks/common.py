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


# -- synthetic problems (seeded) shared by perceptron.py, feasibility.py, memory.py ------
def require_solver(name):
    """Skip (``NotImplementedError`` in ``setup``) when ``name`` is not registered yet."""
    import marginkit as mk

    if name not in mk.list_plugins()["solver"]:
        raise NotImplementedError(f"solver {name!r} is not registered")


def separable(n, d, margin=0.05, seed=0):
    """Dense (X, y): Gaussian X, y = sign(X w + b) with every point at distance
    >= ``margin`` * ||(w, b)|| from the hyperplane (so [X, 1] is strictly separable)."""
    g = rng(seed)
    w = g.standard_normal(d)
    b = 0.5 * g.standard_normal()
    X = np.empty((0, d))
    while X.shape[0] < n:
        Z = g.standard_normal((2 * n, d))
        s = (Z @ w + b) / np.sqrt(w @ w + b * b)
        X = np.vstack([X, Z[np.abs(s) >= margin]])
    X = X[:n]
    y = np.where(X @ w + b > 0, 1.0, -1.0)
    return X, y


def noisy(n, d, flip=0.05, seed=0):
    """Dense (X, y): ``separable`` with a fraction ``flip`` of labels flipped (not separable)."""
    X, y = separable(n, d, margin=0.0, seed=seed)
    idx = rng(seed + 1).choice(n, size=max(1, int(flip * n)), replace=False)
    y = y.copy()
    y[idx] = -y[idx]
    return X, y


@functools.lru_cache(maxsize=8)
def random_csr(n, d, nnz_per_row, seed=0, dtype=np.float64):
    """CSR (X, y) with ``nnz_per_row`` nonzeros per row (like a9a/rcv1) and 5% label noise."""
    g = rng(seed)
    indptr = np.arange(0, (n + 1) * nnz_per_row, nnz_per_row, dtype=np.int32)
    cols = np.empty(n * nnz_per_row, dtype=np.int32)
    for start in range(0, n, 4096):
        stop = min(n, start + 4096)
        block = np.argpartition(g.random((stop - start, d), dtype=np.float32), nnz_per_row,
                                axis=1)[:, :nnz_per_row]
        cols[start * nnz_per_row:stop * nnz_per_row] = np.sort(block, axis=1).ravel()
    data = g.standard_normal(n * nnz_per_row).astype(dtype)
    X = sp.csr_matrix((data, cols, indptr), shape=(n, d))
    w = g.standard_normal(d)
    y = np.where(X @ w > 0, 1.0, -1.0)
    flip = g.random(n) < 0.05
    y[flip] = -y[flip]
    return X, y


def split(X, y, test=0.3, seed=0):
    """Seeded (X_train, y_train, X_test, y_test)."""
    perm = rng(seed).permutation(X.shape[0])
    k = int(round((1 - test) * X.shape[0]))
    tr, te = np.sort(perm[:k]), np.sort(perm[k:])
    return X[tr], y[tr], X[te], y[te]
