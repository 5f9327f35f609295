"""The training data of the linear SVM solvers, as their Cython kernels take it.

* ``scaling_statistics``: the column means and inverse standard deviations of
  ``scale="std"`` / ``"scale"`` (paper section 5.1), computed over row blocks without
  densifying sparse input;
* ``_Data``: one row block (dense or CSR) with the scaling constants and its per-row
  constants; ``_Blocked``: the row blocks of a run (one in-memory block or a dask array's
  chunks) with the global constants reduced in block order;
* ``_prepare``: the kernel's feature map applied (the identity for the linear kernel,
  Phi(X) for ``nystroem``/``rff``) and the run's data built; ``_feature_fields``: a
  linear model on those features mapped back to the input space.

The implicit centering (z_i = s * (x_i - m), never formed) is derived in docs/svm.md.
"""
import numpy as np
import scipy.sparse as sp

from ... import _referee
from ..._executors import Block, Executor, ExecutorRows, local_executor
from ..._validation import check_X
from ...kernels.builtin import LinearKernel
from . import _fast as _f
from ...utils._rows import row_block
from ._rounding import _RoundingConstants

_U = np.finfo(np.float64).eps / 2

_FLOAT_DTYPES = frozenset((np.dtype(np.float32), np.dtype(np.float64)))


# The data of a run are row blocks (``marginkit._executors``): one in-memory block, or the
# chunks of a dask array. Each block keeps its ``_Data`` in ``block.v["svm"]`` (the matrix
# as the Cython kernels take it and its per-row constants); the statistics and sums
# below (and the Gram matrices of ``_lipschitz``) are block kernels reduced in block order.
def _block_data(block):
    data = block.v.get("svm")
    if data is None:
        data = block.v["svm"] = _Data(block.X, rows=False)
    return data


def _k_column_max_sums(block, inv=None, threads=0):
    # inv None: the unscaled sums (ones of the block's own width: see scaling_statistics)
    data = _block_data(block)
    inv = np.ones(data.d) if inv is None else inv
    cm, sums = np.zeros(data.d), np.zeros(data.d)
    cnt = np.zeros(data.d, dtype=np.int64)
    _f.column_max_sums(data.rows, inv, cm, sums, cnt, threads)
    return cm, sums, cnt


def _k_sqdev(block, inv, means, threads=0):
    data = _block_data(block)
    ss = np.zeros(data.d)
    _f.scaled_sqdev(data.rows, inv, means, ss, threads)
    return ss


#: a column is constant for scale="std"/"scale" when all its values lie within this
#: fraction of its largest magnitude (max - min <= 2^-40 max |x|: about 4,096 units in
#: the last place, 9.1e-13, the size of the relative rule before it), tested exactly
#: (``scaling_statistics``). Kept above it, a column's implicit centring leaves little to
#: certify (measured by review: heart_scale with a column 1 + 2^-44 b certified 145
#: points when it was dropped, none when kept)
_CONSTANT_RANGE = 2.0 ** -40


def _k_column_range(block, cols):
    """(min, max) over the block's rows of its columns ``cols``, the implicit zeros of
    CSR rows included (``scaling_statistics``' exact test of constant columns): by
    slices of the block of at most 2^16 entries (bounded temporaries, as the other
    statistics' passes)."""
    data = _block_data(block)
    k = cols.size
    lo, hi = np.full(k, np.inf), np.full(k, -np.inf)
    if data.n == 0 or k == 0:
        return lo, hi
    if data.Xd is not None:
        step = max(1, (1 << 16) // k)
        for r0 in range(0, data.n, step):
            sub = data.Xd[r0:r0 + step, cols]
            np.minimum(lo, sub.min(axis=0), out=lo)
            np.maximum(hi, sub.max(axis=0), out=hi)
        return lo, hi
    end = int(data.indptr[-1])
    pos = np.full(data.d, -1, dtype=np.int64)
    pos[cols] = np.arange(k)
    count = np.zeros(k, dtype=np.int64)
    for e0 in range(0, end, 1 << 16):
        which = pos[data.indices[e0:min(end, e0 + (1 << 16))]]
        keep = which >= 0
        which = which[keep]
        vals = data.data[e0:min(end, e0 + (1 << 16))][keep].astype(np.float64)
        np.minimum.at(lo, which, vals)
        np.maximum.at(hi, which, vals)
        count += np.bincount(which, minlength=k)
    gaps = count < data.n  # a row without an entry: a 0 (canonical CSR: no duplicates)
    lo[gaps] = np.minimum(lo[gaps], 0.0)
    hi[gaps] = np.maximum(hi[gaps], 0.0)
    return lo, hi


def _in_order(parts):
    """The sum of the blocks' arrays, added in block order (the first one itself when
    there is one block)."""
    out = parts[0]
    if len(parts) > 1:
        out = out.copy()
        for q in parts[1:]:
            out += q
    return out


def scaling_statistics(X, scale, threads=0):
    """Training means and inverse standard deviations (float64) for ``scale``.

    ``scale="std"``: m = column means, s = 1/sigma (population standard deviation), so
    that z_i = s * (x_i - m) (paper section 5.1). ``scale="scale"``: m = 0, s = 1/sigma
    (the paper's input to LIBLINEAR, LIBSVM and Pegasos: X Diag(sigma)^-1, no centering).
    ``scale=None``: m = 0, s = 1. Zero-variance columns get s = 0 (their centered values
    are all zero; with ``scale="scale"`` they are dropped): nothing is divided by zero.
    A column counts as constant when all its values lie within 2^-40 of its largest
    magnitude (``_CONSTANT_RANGE``, about 4,096 units in the last place), tested exactly
    by a min/max pass over the columns whose computed spread could allow it: the same
    answer for every layout and every order of the sums; the
    statistics are computed on the column divided by the power of two at or above its
    largest magnitude (exact), so they neither overflow nor underflow.

    ``X`` is a matrix or an ``Executor`` (the row blocks of a run): passes over the
    blocks' stored entries (column maxima with the unscaled sums; sums of x / safe_j
    only when an unscaled sum overflows; squared deviations, the implicit zeros of CSR
    blocks included), each a block kernel reduced in block order, O(d) memory per block;
    sparse input is never densified. ``threads`` >= 1 caps the OpenMP threads of a large
    block's passes (a solver's ``threads``; 0: the OpenMP limit).
    """
    ex = X if isinstance(X, Executor) else local_executor(_as_float_matrix(X), None)
    n, d = ex.shape
    if scale is None:
        return np.zeros(d), np.ones(d)
    parts = ex.map(_k_column_max_sums, None, threads)
    cm = parts[0][0]
    for q in parts[1:]:
        cm = np.maximum(cm, q[0])  # NaN propagates
    # sized by the blocks' width, as m and s (an executor's stated width may be another:
    # the referee's streamed blocks carry the certificate's, and it refuses the mismatch)
    safe, inv = np.empty(cm.shape[0]), np.empty(cm.shape[0])
    _f.pow2_safe(cm, safe, inv)
    cnt = _in_order([q[2] for q in parts])
    raw = _in_order([q[1] for q in parts])
    if np.all(np.isfinite(raw)):
        sums = raw * inv  # exact: the sums of x / safe_j (``column_max_sums``)
    else:  # an overflow (or a NaN): the sums of the scaled entries, a pass of their own
        sums = _in_order([q[1] for q in ex.map(_k_column_max_sums, inv, threads)])
    means = sums / n
    ss = _in_order(ex.map(_k_sqdev, inv, means, threads))
    m, s = np.zeros(cm.shape[0]), np.zeros(cm.shape[0])
    _f.scaling_tail(n, cm, safe, sums, ss, cnt, scale == "std", m, s)
    # the tail's rule is a rounding-level test, which depends on n and on the blocks'
    # order of summation (found by review: it dropped a column of 500-ulp spread at
    # n > 520, and dask chunks of 7 rows dropped a column that in-memory X kept). A
    # column is constant when its exact range is within _CONSTANT_RANGE of its largest
    # magnitude: a min/max pass over the columns whose computed spread could allow it
    # (in units of x / safe_j, |x| <= 1: sd <= range / 2, and the two-pass sd within
    # about 2 n u of the exact one), whatever the layout and the blocks
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        sd = np.sqrt(ss / n)
    cand = np.flatnonzero((cm > 0.0) & ((s == 0.0) | ~(sd > _CONSTANT_RANGE + 4.0 * n * _U)))
    if cand.size:
        parts = ex.map(_k_column_range, cand)
        lo = np.min([q[0] for q in parts], axis=0)
        hi = np.max([q[1] for q in parts], axis=0)
        constant = (hi - lo) <= _CONSTANT_RANGE * np.maximum(np.abs(lo), np.abs(hi))
        s[cand[constant]] = 0.0
        varies = cand[~constant]
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            sigma = sd[varies] * safe[varies]  # as the tail computes it
            # a spread that underflows to 0 gives inf, which the solvers refuse by name
            # (check_inverse_spread: found by review, a column of 0 and 5e-324 was
            # dropped while one of 0 and 1e-322 was refused)
            s[varies] = np.where(sigma > 0.0, 1.0 / sigma, np.inf)
    return m, s


def _as_float_matrix(X):
    """X as a CSR matrix or a dense array of float32/float64 (other types as float64)."""
    if sp.issparse(X):
        X = X if X.format == "csr" else sp.csr_matrix(X)
        return X if X.dtype in _FLOAT_DTYPES else X.astype(np.float64)
    X = np.asarray(X)
    return X if X.dtype in _FLOAT_DTYPES else X.astype(np.float64)


class _Original:
    """The map from the solvers' scaled space back to the input space (needs m, s)."""

    # w_bar = s * (a - m b) for a = X^T u, b = e^T u
    def w_bar(self, a, b):
        return self.s * (a - self.m * b)

    def original(self, w_bar, t_bar, coef=None):
        """(coef, intercept) in the original feature space: w = s w_bar (or the given
        ``coef``, already that product), t = t_bar - m^T w.

        m^T w is numpy's pairwise sum, not BLAS's dot: the BLAS splits a long dot among
        its threads, whose number ``BlasChoice`` may change between two calls, so the
        intercept of the claim's check and of the result differed in the last bit (found
        by a test run on a busy machine: "r.intercept_ is not the intercept its
        certificate checks", on 3.2 million columns)."""
        if coef is None:
            coef = self.s * w_bar
        return coef, float(t_bar - np.sum(self.m * coef))


class _Data(_Original):
    """One row block of the training matrix as the Cython kernels take it, plus the
    scaling constants and its per-row constants.

    ``stats=(m, s)`` uses given column means and inverse deviations (those of all the
    blocks of the run) instead of the block's own; ``rows=False`` only prepares the
    matrix (``set_rows`` computes the per-row constants later).
    """

    def __init__(self, X, scale=None, stats=None, diag_shift=None, rows=True):
        n, d = X.shape
        self.n, self.d = n, d
        self.sparse = sparse = not isinstance(X, np.ndarray) and sp.issparse(X)
        self.dtype = X.dtype
        if sparse:
            self.Xd = None
            self.data, self.indices, self.indptr = X.data, X.indices, X.indptr
        else:
            Xc = X if X.flags.c_contiguous else np.ascontiguousarray(X)  # private C copy
            self.Xd = Xc
            self.data = self.indices = self.indptr = None
        #: the block as the kernels take it (``marginkit.utils._rows``)
        self.rows = row_block(X if sparse else Xc)
        self.scale = scale
        self._rounding = None
        self._xi = None
        if rows:
            own = stats is None
            if own:
                stats = scaling_statistics(_executor_of(self), scale)
            self.set_rows(scale, stats[0], stats[1], diag_shift)
            if own:  # (a centring that overflows is refused by set_rows, not warned of)
                warn_heavy_centring(stats[0], stats[1], scale)

    def set_rows(self, scale, m, s, diag_shift=None, threads=0):
        """The scaling constants (m, s, M) and the per-row constants of the block (on at
        most ``threads`` OpenMP threads when >= 1)."""
        n = self.n
        self.scale, self.m, self.s = scale, m, s
        self.check_inverse_spread(s, scale)
        with np.errstate(over="ignore", invalid="ignore"):  # refused below when not finite
            sm = s * m
            s2m = s * sm        # s^2 m without forming s^2 (range: see _fast)
            self.M = float(sm.dot(sm))
        self.c = np.empty(n)
        self.xsq = np.empty(n)
        # ||z_i||^2 = max(x_i^T S2 x_i - 2 c_i + M, 0) in the same pass, and with
        # ``diag_shift`` the diagonal qd = ||z_i||^2 + 1 + diag_shift of dcd's Q
        self.zsq = np.empty(n)
        self.qd = None if diag_shift is None else np.empty(n)
        _f.row_statistics(self.rows, s, s2m, self.c, self.xsq, self.M, self.zsq,
                          self.qd, 0.0 if diag_shift is None else diag_shift, threads)
        if not (np.isfinite(self.M) and np.all(np.isfinite(self.xsq))
                and np.all(np.isfinite(self.c))):
            if scale == "std":
                # standardized entries are O(1): what overflows is the implicit centring
                # of a column whose mean is large against its spread
                ratio = float(np.max(np.abs(sm), initial=0.0))
                raise ValueError(
                    f"scale='std': the implicit centring overflows float64 (its constants "
                    f"m / std^2, with |mean| / std up to {ratio:.3g} and 1/std up to "
                    f"{float(np.max(s, initial=0.0)):.3g}: a column's mean is large against "
                    "a tiny spread); centre X first (X - X.mean(axis=0)), multiply X by a "
                    "power of ten, or use scale=None")
            raise ValueError(
                f"scale={scale!r}: the squared norms of the (scaled) rows of X overflow "
                "float64 (entries too large for this scaling); rescale X or use "
                "scale='std'")

    @property
    def xi(self):
        """xi_i = ||s * x_i|| (the rounding bounds' row norms), computed once."""
        if self._xi is None:
            self._xi = np.sqrt(self.xsq)
        return self._xi

    @property
    def zsq_sum(self):
        return float(np.sum(self.zsq))

    def longest_row(self):
        return int(np.diff(self.indptr).max(initial=0)) if self.sparse else self.d

    def rounding_constants(self, gamma):
        """The constants of the rounding bounds for box bound ``gamma``
        (``_RoundingConstants``), computed once."""
        if self._rounding is None or self._rounding.gamma != gamma:
            self._rounding = _RoundingConstants(self, gamma)
        return self._rounding

    @staticmethod
    def check_inverse_spread(s, scale):
        """Refuse statistics whose 1/sigma overflowed (ValueError naming the scale)."""
        bad = ~np.isfinite(s)
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"scale={scale!r}: column {j} of X has a standard deviation below 5.6e-309, "
                "whose inverse overflows float64, so the standardized problem and coef_ "
                "cannot be represented; multiply X by a power of ten (e.g. 1e300) or pass "
                "scale=None")


#: s_j |m_j| above which ``warn_heavy_centring`` warns: the implicit centring's rounding,
#: about (s_j |m_j|)^2 u, is then 2^-9 of the standardized entries (measured: two
#: columns, 400 rows, fista and dcd certified at 8.3e5 and no point at 1.3e7)
_HEAVY_CENTRING = 2.0 ** 22


def warn_heavy_centring(m, s, scale):
    """Warn when scale='std' keeps a column whose mean is so large against its spread
    that the solvers' implicit centring (x^T S^2 x - 2 c + M, no centred copy of X) loses
    the standardized values to rounding: the run then certifies little or nothing (found
    by review: a rule on the computed spread depended on n and on the order of the sums;
    a column is constant when its values lie within 2^-40 of its magnitude,
    ``_CONSTANT_RANGE``, tested exactly, and one kept above that may draw this
    warning)."""
    if scale != "std":
        return
    with np.errstate(over="ignore", invalid="ignore"):
        ratio = np.abs(np.asarray(s) * np.asarray(m))
    if ratio.size and float(np.max(ratio)) > _HEAVY_CENTRING:
        import warnings

        j = int(np.argmax(ratio))
        warnings.warn(
            f"scale='std': column {j} of X has a mean {ratio[j]:.3g} times its standard "
            "deviation; the solvers centre it implicitly, with a rounding that grows as the "
            "square of that ratio, so few points or none may be certified: centre X first "
            "(X - X.mean(axis=0)) or pass scale=None", UserWarning, stacklevel=2)


def _executor_of(data, y=None):
    """A one-block ``Executor`` around a prepared ``_Data`` (and labels ``y``)."""
    block = Block(None, y)
    block.v["svm"] = data
    return Executor([block], [data.n], data.d, data.dtype, data.sparse)


def _k_rows(block, scale, m, s, diag_shift, threads=0):
    """The block's per-row constants with the run's statistics; returns the block's sums
    for the rounding constants and the bounds (``_Blocked``)."""
    data = _block_data(block)
    data.set_rows(scale, m, s, diag_shift, threads)
    return (float(np.sum(data.xsq)), float(np.sum(data.xi)), float(data.xi.max(initial=0.0)),
            data.longest_row(), data.zsq_sum)


class _Blocked(_Original):
    """The training data of a blocked solver: the row blocks of ``executor`` (each with
    its ``_Data`` in ``block.v["svm"]``) and the global constants: n, d, m, s, M = ||s m||^2
    and the sums over the blocks of ||s * x_i||^2, ||s * x_i||, max ||s * x_i||, the
    longest row and sum ||z_i||^2 (``zsq_sum``), each reduced in block order."""

    def __init__(self, executor, scale, m, s, sums):
        self.executor = executor
        self.n, self.d = executor.shape
        self.sparse, self.dtype = executor.sparse, executor.dtype
        self.n_blocks = executor.n_chunks
        self.scale, self.m, self.s = scale, m, s
        sm = s * m
        self.M = float(sm.dot(sm))  # as _Data
        self.xsq_sum = float(sum(q[0] for q in sums))
        self.xi_sum = float(sum(q[1] for q in sums))
        self.xi_max = float(max(q[2] for q in sums))
        self.longest = int(max(q[3] for q in sums))
        self.zsq_sum = float(sum(q[4] for q in sums))
        self._rounding = None

    @classmethod
    def build(cls, executor, scale, diag_shift=None, threads=0):
        m, s = scaling_statistics(executor, scale, threads)
        _Data.check_inverse_spread(s, scale)
        out = cls(executor, scale, m, s,
                  executor.map(_k_rows, scale, m, s, diag_shift, threads))
        warn_heavy_centring(m, s, scale)
        return out

    @classmethod
    def of(cls, data):
        """A prepared one-block ``_Data`` as a ``_Blocked``."""
        sums = [(float(np.sum(data.xsq)), float(np.sum(data.xi)),
                 float(data.xi.max(initial=0.0)), data.longest_row(), data.zsq_sum)]
        return cls(_executor_of(data), data.scale, data.m, data.s, sums)

    def local(self):
        """The one in-memory block's ``_Data`` (a run whose data are one block in this
        process), else None."""
        ex = self.executor
        if ex.client is None and ex.n_chunks == 1:
            return ex.workers[0].v["svm"]
        return None

    def rounding_constants(self, gamma):
        if self._rounding is None or self._rounding.gamma != gamma:
            self._rounding = _RoundingConstants(
                self, gamma, sums=(self.xsq_sum, self.xi_sum, self.xi_max, self.longest),
                n_blocks=self.n_blocks)
        return self._rounding


def _k_features(block, kernel):
    """Phi of one row block (``_referee.feature_rows``, float64), or None for a map that
    returns the rows themselves."""
    Phi = _referee.feature_rows(kernel, block.X)
    if Phi is block.X:
        return None
    return check_X(Phi, name="feature_map(X)")


def feature_map_refusal(kernel):
    """Why an SVM solver cannot run ``kernel`` on row blocks held by workers (the chunks
    of a dask array), or None: the linear kernel and kernel approximations (a fitted
    ``feature_map``, evaluated on each chunk where it is held) run there; an exact
    kernel's Gram matrix couples all rows."""
    if getattr(kernel, "feature_map", None) is None:
        name = getattr(kernel, "name", None) or type(kernel).__name__
        return (f"kernel {name!r} has no explicit feature map (its Gram matrix couples all "
                "rows, which row chunks cannot hold); use a kernel approximation "
                "(kernel='nystroem' or 'rff') or compute X into memory (X.compute())")
    return None


def _prepare(problem, scale, diag_shift=None, threads=0):
    """Apply the kernel's feature map and build the kernel-side data.

    Returns ``(data, identity)``, ``data`` a ``_Blocked``. With the linear kernel (identity
    map) the solvers run on X itself. With a kernel approximation (``nystroem``, ``rff``,
    any non-identity ``feature_map``) they run on Phi = feature_map(X), the map being fixed
    (fitted) on the training rows, and evaluated block by block where the blocks are held
    (``Executor.derived``: in memory one block, on a dask array each chunk on its worker);
    ``scale`` then acts on the columns of Phi: ``"std"`` centres each feature of Phi and
    divides it by its training standard deviation, ``"scale"`` only divides, None uses Phi
    as is (the approximated kernel K~ = Phi Phi^T exactly). ``threads`` >= 1 caps the
    OpenMP threads of the passes over the rows (a solver's ``threads``).
    """
    kernel = problem.kernel
    ex = problem.executor
    identity = True
    if not isinstance(kernel, LinearKernel) and getattr(kernel, "feature_map", None) is not None:
        # the map is fitted on the training rows before any block is mapped (the Nystroem
        # centres are drawn among all rows, not a chunk's)
        fit_on_rows(kernel, ex)
        features = ex.derived("features", _k_features, kernel)
        if features is not None:
            ex, identity = features, False
    return _Blocked.build(ex, scale, diag_shift, threads), identity


def fit_on_rows(kernel, executor):
    """Fit an unfitted kernel approximation (``fitted`` False) on the rows of
    ``executor``: in memory on X itself, on a dask array on the rows its fit draws,
    gathered from the chunks (``ExecutorRows``)."""
    if getattr(kernel, "fitted", True) is not False:
        return
    if executor.client is None and executor.n_chunks == 1:
        kernel.fit(executor.workers[0].X)  # the fit copies only the rows it draws
    else:
        kernel.fit(ExecutorRows(executor))


def _feature_fields(data, identity, w_bar, t_bar, coef=None):
    """The model fields of a linear model on the solver's features.

    ``identity``: coef_/intercept_ in the input space. Otherwise (kernel approximation)
    coef_ is None and the model is linear in Phi(x): decision(x) = Phi(x) . f + intercept_
    with f = ``extra["feature_space_coef"]`` (the centering/scaling of ``scale`` folded
    into f and intercept_), which ``Result.decision_function`` evaluates through the
    result's kernel (the same fitted feature map).
    """
    coef, intercept = data.original(w_bar, t_bar, coef)
    if identity:
        return {"coef_": coef, "intercept_": intercept}
    return {"coef_": None, "intercept_": intercept, "extra": {"feature_space_coef": coef}}
