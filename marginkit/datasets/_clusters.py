"""Two clusters of well-classified points with noisy observations, at any size.

The geometric model of the SVM paper (Chen, ... "Data-Dependent Complexity of First-Order
Methods for Support Vector Machines", arXiv:2512.03947, section 3.1): the well-classified
points of class +1 lie in a ball of radius ``radius`` around ``separation * u``, those of
class -1 in the ball around ``-separation * u`` (u a random unit direction), and a fraction
``noise`` of the observations are noisy: drawn from the ball that encloses both clusters,
with a random label. ``offset`` translates every point by the same vector (real data are
not centred; a solver must handle the intercept). The generator writes X block by block
(``BLOCK_ROWS`` rows at a time) into its final storage, so no temporary the size of X
exists, and the data depend only on ``random_state``, not on the memory available.

``like=`` names the shape of a benchmark data set of the paper's Table 2 or of a sparse
text collection (``SHAPES``), so that a benchmark can run at the real sizes when the files
are not at hand.
"""
import contextlib
import numbers

import numpy as np
import scipy.sparse as sp

from .._validation import check_random_state

__all__ = ["make_clusters", "SHAPES"]

#: rows generated per block (the size of every temporary)
BLOCK_ROWS = 1 << 16

#: name -> (n_samples, n_features, nonzeros per row or None for dense): the training sets
#: of the SVM paper's Table 2 (SUSY, HEPMASS, HIGGS, epsilon) and two sparse text shapes
#: (rcv1.binary, url)
SHAPES = {
    "susy": (4_500_000, 18, None),
    "hepmass": (7_000_000, 27, None),
    "higgs": (10_500_000, 28, None),
    "epsilon": (400_000, 2_000, None),
    "rcv1": (20_242, 47_236, 74),
    "url": (2_396_130, 3_231_961, 116),
}


@contextlib.contextmanager
def refuse_beyond_memory(args, what, nbytes, fix):
    """Run a generator's allocations, turning a size no machine can allocate into a
    ValueError that names the arguments (``args``, e.g. ``"n_samples=10, n_features=3"``),
    the array (``what``, of ``nbytes`` bytes) and ``fix``: a size beyond numpy's largest
    array is refused before any work, numpy's MemoryError inside the block after it (found
    by review: the generators other than ``make_clusters`` gave numpy's raw MemoryError)."""
    message = (f"{args}: {what} takes {float(nbytes) / 2**30:.3g} GiB, more than this machine "
               f"can allocate; {fix}")
    if nbytes > np.iinfo(np.intp).max:
        raise ValueError(message)
    try:
        yield
    except MemoryError:
        raise ValueError(message) from None


def _check_count(value, name, low):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{name}={value!r} must be an integer >= {low}")
    return int(value)


def _check_real(value, name, low, high=np.inf, high_open=False):
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and np.isfinite(value)
    if ok:
        ok = low <= value and (value < high if high_open else value <= high)
    if not ok:
        upper = f" and {'<' if high_open else '<='} {high}" if np.isfinite(high) else ""
        raise ValueError(f"{name}={value!r} must be a finite number >= {low}{upper}")
    return float(value)


def _ball(rng, n, d, radius):
    """n points uniform in the d-ball of the given radius (float64)."""
    g = rng.standard_normal((n, d))
    norms = np.linalg.norm(g, axis=1)
    norms[norms == 0.0] = 1.0
    g *= (radius * rng.random(n) ** (1.0 / d) / norms)[:, None]
    return g


def make_clusters(n_samples=None, n_features=None, *, like=None, nnz_per_row=None,
                  separation=1.0, radius=0.6, noise=0.08, offset=1.0, dtype=np.float64,
                  random_state=None):
    """Two clusters of well-classified points with noisy observations (dense or CSR).

    Parameters
    ----------
    n_samples, n_features : int, optional
        The shape of X. Default: the shape named by ``like``, else 10,000 x 28.
    like : {"susy", "hepmass", "higgs", "epsilon", "rcv1", "url"}, optional
        Take the shape (and for "rcv1"/"url" the nonzeros per row) of that data set
        (``SHAPES``); explicit ``n_samples``, ``n_features``, ``nnz_per_row`` override it.
    nnz_per_row : int, optional
        Generate a CSR matrix with about this many nonzeros per row (at least 1 per row,
        Poisson-distributed around the value, columns drawn uniformly and a repeated
        draw dropped, so the mean falls short of the value when it is a large fraction of
        ``n_features``: 9.1 for 10 of 50 columns, 4.1 for 7 of 7). None:
        dense. On a sparse row the class signal is carried by the row's own features:
        x_ij = y_i * separation * u_j * sqrt(d / k) + radius * g_ij / sqrt(k) (k the
        row's count, g standard normal), so that rows have the dense model's scale.
    separation : float > 0
        Distance of each cluster centre from the origin (before ``offset``).
    radius : float >= 0
        Radius of each cluster. With ``radius < separation`` and ``noise=0`` the data are
        linearly separable (with an intercept when ``offset`` is nonzero).
    noise : float in [0, 1]
        Fraction of noisy observations (uniform in the ball of radius
        ``separation + radius``, random label).
    offset : float
        Every coordinate of a dense X is shifted by ``offset`` (uncentred data); a sparse
        X is not shifted (it would not stay sparse). Parameters whose points would not be
        finite in ``dtype`` (``abs(offset) + separation + radius`` above its largest value)
        raise ``ValueError``.
    dtype : {numpy.float64, numpy.float32}
        The dtype of X, written block by block (a float32 X never has a float64 copy).
    random_state : None, int or numpy Generator

    Returns
    -------
    X : ndarray (n_samples, n_features), C order, or scipy.sparse.csr_matrix
    y : ndarray of -1.0 / +1.0, float64

    Examples
    --------
    >>> import marginkit as mk
    >>> X, y = mk.datasets.make_clusters(1000, 5, random_state=0)
    >>> X.shape, y[:4].tolist()
    ((1000, 5), [1.0, 1.0, 1.0, 1.0])
    >>> X, y = mk.datasets.make_clusters(like="rcv1", n_samples=500, random_state=0)
    >>> X.shape, 70 < X.nnz / X.shape[0] < 80
    ((500, 47236), True)
    """
    if like is not None:
        if like not in SHAPES:
            raise ValueError(f"like={like!r} is not a known shape; use one of {sorted(SHAPES)}")
        n0, d0, k0 = SHAPES[like]
        n_samples = n0 if n_samples is None else n_samples
        n_features = d0 if n_features is None else n_features
        nnz_per_row = k0 if nnz_per_row is None else nnz_per_row
    n = _check_count(10_000 if n_samples is None else n_samples, "n_samples", 2)
    d = _check_count(28 if n_features is None else n_features, "n_features", 1)
    separation = _check_real(separation, "separation", 0.0)
    if separation == 0.0:
        raise ValueError("separation=0.0 must be > 0: the two clusters would coincide")
    radius = _check_real(radius, "radius", 0.0)
    noise = _check_real(noise, "noise", 0.0, 1.0)
    offset = _check_real(offset, "offset", -np.inf)
    dt = np.dtype(dtype)
    if dt not in (np.float32, np.float64):
        raise ValueError(f"dtype={dtype!r} must be numpy.float32 or numpy.float64")
    if nnz_per_row is not None:
        k = _check_count(nnz_per_row, "nnz_per_row", 1)
        if k > d:
            raise ValueError(f"nnz_per_row={k} must be at most n_features={d}")
    with np.errstate(over="ignore"):
        reach = abs(offset) + separation + radius if nnz_per_row is None else 0.0
    if not reach <= float(np.finfo(dt).max):
        # found by review: float32 with separation=1e300 gave rows of +-inf, offset=-1e308
        # with separation=1e308 non-finite entries, with only numpy's RuntimeWarning
        raise ValueError(_out_of_range(separation, radius, offset, dt, reach))
    rng = check_random_state(random_state)
    # the clusters' direction is a dense d-vector, also for CSR output (found by review:
    # n_features=2**40 died in numpy's allocator)
    with refuse_beyond_memory(f"n_features={d}", "the clusters' direction (a dense vector)",
                              8 * d, "ask for fewer features"):
        u = rng.standard_normal(d)
    u /= np.linalg.norm(u)
    if nnz_per_row is None:
        with refuse_beyond_memory(f"n_samples={n}, n_features={d}", "the dense X",
                                  n * d * dt.itemsize, "ask for fewer rows or features, or "
                                  "CSR output (nnz_per_row)"):
            y = np.empty(n)
            X = np.empty((n, d), dtype=dt)
        for lo in range(0, n, BLOCK_ROWS):
            hi = min(n, lo + BLOCK_ROWS)
            with np.errstate(over="ignore", invalid="ignore"):
                X[lo:hi] = _dense_block(rng, hi - lo, u, separation, radius, noise, offset,
                                        y[lo:hi])
            if not np.isfinite(X[lo:hi]).all():  # a rounding at the edge of the range
                raise ValueError(_out_of_range(separation, radius, offset, dt))
        return X, y
    with refuse_beyond_memory(f"n_samples={n}", "the label vector", 8 * n,
                              "ask for fewer rows"):
        y = np.empty(n)
    X = _sparse(rng, n, d, k, u, separation, radius, noise, dt, y)
    if X is None:
        raise ValueError(_out_of_range(separation, radius, offset, dt))
    return X, y


def _out_of_range(separation, radius, offset, dt, reach=None):
    """The refusal of parameters whose points are not finite in ``dt``."""
    where = "" if reach is None else f" (|offset| + separation + radius = {reach:.3g})"
    return (f"separation={separation!r}, radius={radius!r}, offset={offset!r}: the points "
            f"reach beyond the largest {dt.name}, {np.finfo(dt).max:.3g}{where}, and X would "
            "not be finite; choose smaller values"
            + (" or dtype=numpy.float64" if dt == np.float32 else ""))


def _labels(rng, m, noise, out):
    """Labels of a block (written into ``out``) and the mask of its noisy rows."""
    out[:] = np.where(rng.random(m) < 0.5, -1.0, 1.0)
    noisy = rng.random(m) < noise
    return noisy


def _dense_block(rng, m, u, separation, radius, noise, offset, y):
    d = u.shape[0]
    noisy = _labels(rng, m, noise, y)
    B = _ball(rng, m, d, radius)
    B += np.outer(y * separation, u)
    n_noisy = int(noisy.sum())
    if n_noisy:
        B[noisy] = _ball(rng, n_noisy, d, separation + radius)
    B += offset
    return B


def _sparse(rng, n, d, k, u, separation, radius, noise, dt, y):
    counts = np.minimum(d, 1 + rng.poisson(k - 1, size=n)) if k > 1 else np.ones(n, np.int64)
    cap = int(counts.sum())
    itype = np.int32 if max(d, cap) < 2**31 else np.int64
    data = np.empty(cap, dtype=dt)
    indices = np.empty(cap, dtype=itype)
    indptr = np.zeros(n + 1, dtype=itype)
    pos = 0
    for lo in range(0, n, BLOCK_ROWS):
        hi = min(n, lo + BLOCK_ROWS)
        m = hi - lo
        c = counts[lo:hi]
        noisy = _labels(rng, m, noise, y[lo:hi])
        rows = np.repeat(np.arange(m), c)
        cols = rng.integers(0, d, size=rows.size)
        # distinct sorted columns per row (a repeated draw is dropped)
        key = np.sort(rows.astype(np.int64) * d + cols)
        key = key[np.concatenate(([True], key[1:] != key[:-1]))]
        rows, cols = key // d, key % d
        per_row = np.bincount(rows, minlength=m)
        kk = per_row[rows].astype(np.float64)
        g = rng.standard_normal(rows.size)
        sign = np.where(noisy, rng.choice((-1.0, 1.0), size=m), y[lo:hi])
        scale = np.where(noisy, 0.0, separation)[rows]
        vals = sign[rows] * scale * u[cols] * np.sqrt(d / kk)
        vals += np.where(noisy, separation + radius, radius)[rows] * g / np.sqrt(kk)
        nnz = rows.size
        with np.errstate(over="ignore"):
            data[pos:pos + nnz] = vals
        if not np.isfinite(data[pos:pos + nnz]).all():
            return None  # the caller names the parameters
        indices[pos:pos + nnz] = cols
        indptr[lo + 1:hi + 1] = pos + np.cumsum(per_row)
        pos += nnz
    X = sp.csr_matrix((data[:pos], indices[:pos], indptr), shape=(n, d))
    X.has_sorted_indices = True
    return X
