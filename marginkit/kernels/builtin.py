"""Built-in kernel plug-ins: ``linear``, ``rbf``, ``poly``, ``laplacian``, ``precomputed``,
``callable`` and ``spline``.

Every kernel is a ``marginkit.plugins.Kernel``: ``kernel(A, B)`` returns the dense Gram
block K(A, B) (float32 when both A and B are float32, else float64), ``kernel.diag(A)``
returns K(a_i, a_i). A and B may be dense arrays or CSR matrices; sparse input is never
densified. ``linear`` has a ``feature_map`` (X itself) so feature-space solvers never form
the n x n Gram. See ``docs/kernels.md`` for the formulas and the choice of defaults.
"""
import contextlib
import math
import numbers

import numpy as np
import scipy.sparse as sp

from .._registry import _register_builtin
from .._validation import Param, check_X, checked_block
from ..plugins import Kernel, _frozen, trusted_block
from . import _gram
from ..linalg._norms import row_sqnorms
from ..utils._rows import _from_arrays, row_block
from ..utils._threads import single_threaded_blas

__all__ = ["LinearKernel", "RBFKernel", "PolynomialKernel", "LaplacianKernel",
           "PrecomputedKernel", "CallableKernel", "SplineKernel", "prepare_pair"]


# ---------------------------------------------------------------------------------- helpers
def prepare_pair(A, B=None):
    """Validate a pair of row sets; return ``(A, B, dtype)`` with a common float dtype.

    ``B=None`` means ``B = A``. The common dtype is float32 only when both are float32;
    a float32 operand paired with a float64 one is converted (a private copy). Dense
    operands are returned C-contiguous (a private copy only for Fortran-ordered input).
    """
    A = check_X(A, name="A", allow_empty=True)
    same = B is None or B is A
    B = A if same else check_X(B, name="B", allow_empty=True)
    if A.shape[1] != B.shape[1]:
        raise ValueError(
            f"A has {A.shape[1]} features and B has {B.shape[1]}; K(A, B) needs the same "
            "number of columns in both"
        )
    dtype = np.float32 if (A.dtype == np.float32 and B.dtype == np.float32) else np.float64
    A = _as(A, dtype)
    B = A if same else _as(B, dtype)
    return A, B, np.dtype(dtype)


def _sparse_array(X):
    """A validated CSR matrix as a ``csr_array`` on the same arrays (elementwise ``*``,
    ``**``); dense input unchanged."""
    if sp.issparse(X) and not isinstance(X, sp.sparray):
        return sp.csr_array((X.data, X.indices, X.indptr), shape=X.shape, copy=False)
    return X


def _as(X, dtype):
    if sp.issparse(X):
        return X if X.dtype == dtype else X.astype(dtype)
    return np.ascontiguousarray(X, dtype=dtype)


def _single_threaded_blas():
    """Context limiting BLAS to one thread (the OpenMP threads each call gemm on a panel)."""
    return single_threaded_blas()


def _empty_block(A, B, dtype):
    return np.empty((A.shape[0], B.shape[0]), dtype=dtype)


def _csc_sorted(B):
    """B's stored entries in CSC order with sorted row indices (the form ``dot_csr_csc``
    reads; O(nnz) memory)."""
    Bt = B.tocsc()
    Bt.sort_indices()
    return Bt


def _transpose_block(Bt):
    """The CSR row block of B.T from B in CSC form (``_csc_sorted``): its arrays are the
    CSR arrays of B.T, read in place."""
    return _from_arrays(Bt.shape[1], Bt.shape[0], (Bt.data, Bt.indices, Bt.indptr))


#: the most bytes of the dense transposed float64 copy of a chunk of rows of A that
#: ``_dot_dense_rows`` makes (scratch, small enough to stay in cache while B's rows are
#: walked), and the most rows in a chunk
_DENSE_ROWS_BYTES = 256 << 10
_DENSE_ROWS_MAX = 1024
#: and the fewest: shorter chunks walk B's rows once per few rows of A, with inner loops
#: too short to vectorize (at 12,500 features, chunks of 10 rows were 2-3x slower)
_DENSE_ROWS_MIN = 64
#: CSR x CSR goes through ``dot_dense_t_csr`` (cost nnz(B) m, vectorized) instead of
#: ``dot_csr_csc`` (cost: the shared (feature, row) pairs, scattered) when the shared
#: pairs are at least this fraction of nnz(B) m. Measured: a9a's rows 0.45, 2-4x
#: faster; mushrooms 0.49, 3-4x; splice 1.0, 7-10x; but columns that every row fills
#: are walked in order, cheaply: rows of 4-8 such features among 10 sparse ones, at
#: 0.35-0.47, from 1.27x slower to 1.2x faster (the break-even of scattered columns is
#: about 0.1-0.15)
_DENSE_ROWS_SHARE = 0.4


def _dense_rows_step(d):
    """Rows of A per chunk of ``_dot_dense_rows`` for d features."""
    return min(_DENSE_ROWS_MAX, _DENSE_ROWS_BYTES // (8 * max(d, 1)))


def _dense_rows_pay(A, Bt, nnz_B):
    """Whether A @ B.T costs less through dense copies of chunks of A's rows
    (``_dot_dense_rows``) than through B's columns (``dot_csr_csc``): chunks of at least
    ``_DENSE_ROWS_MIN`` rows fit ``_DENSE_ROWS_BYTES``, and the (feature, row) pairs the
    columns would walk (the lengths of B's columns at A's stored features) are at least
    ``_DENSE_ROWS_SHARE`` of nnz(B) times A's rows."""
    m, d = A.shape
    if m == 0 or nnz_B == 0 or _dense_rows_step(d) < _DENSE_ROWS_MIN:
        return False
    per_feature = np.bincount(A.indices, minlength=d)[:d]  # stored entries of A per feature
    shared = float(per_feature @ np.diff(Bt.indptr).astype(np.float64))
    return shared >= _DENSE_ROWS_SHARE * nnz_B * m


def _dot_dense_rows(A, B, out):
    """out = A @ B.T for CSR A and B by ``dot_dense_t_csr``: A in chunks of rows whose
    dense transposed float64 copy is at most ``_DENSE_ROWS_BYTES`` (scratch; A itself is
    not densified), against B's rows as stored. The same entries as ``dot_csr_csc``."""
    m, d = A.shape
    step = max(1, _dense_rows_step(d))
    rows_B = row_block(B)
    tiles = np.empty((max(1, _gram.max_threads()), _gram.TILE_ROWS * min(step, m)))
    for lo in range(0, m, step):
        part = A[lo:lo + step]
        At = np.ascontiguousarray(part.astype(np.float64).toarray().T)
        _gram.dot_dense_t_csr(At, rows_B, out[lo:lo + step], tiles)


def _wide(d, nnz):
    """Whether d columns are so many against ``nnz`` stored entries that the sparse products
    are cheaper on the stored columns alone (``_stored_columns``) than through column
    pointers of all d."""
    return d > 4 * nnz + 4096


def _dot_block(A, B, upper_only=False, Bt=None):
    """A @ B.T as a new dense C-ordered array (exactly symmetric when B is A).

    ``upper_only=True`` (B is A): the lower triangle may be left unfilled for a caller
    that only reads the upper one.

    Sparse operands are never densified; CSR x CSR reads B through a CSC copy of its
    stored entries (O(nnz) memory), ``Bt`` when the caller has it (``_csc_sorted(B)``),
    or, when the rows of A share many features with B's (``_dense_rows_pay``), B's rows
    against dense copies of chunks of A's rows of at most 256 KiB (the same entries).
    """
    same = B is A
    out = _empty_block(A, B, A.dtype)
    if not sp.issparse(A) and not sp.issparse(B):
        with _single_threaded_blas():
            _gram.dot_dense_dense(A, B, out, same, not upper_only)
    elif sp.issparse(A) and not sp.issparse(B):
        _gram.dot_csr_dense(row_block(A), B, out)
    elif not sp.issparse(A):
        _gram.dot_dense_csr(A, row_block(B), out)
    else:
        if Bt is None and _wide(A.shape[1], A.nnz + (0 if same else B.nnz)):
            # columns far more than stored entries (hashed features): the products of the
            # columns either stores an entry in, renumbered in order (each row's entries,
            # and each column's, are then met in the same order: the same entries, bit for
            # bit), not O(n_features) column pointers (found by review: 16 GiB of them
            # for a block of 2 rows of 2^31 columns)
            A, B, _ = _stored_columns(A, B)
            return _dot_block(A, B, upper_only)
        if Bt is None:
            Bt = _csc_sorted(B)
        if not same and _dense_rows_pay(A, Bt, B.nnz):
            _dot_dense_rows(A, B, out)
            return out
        work = np.empty((max(1, _gram.max_threads()), B.shape[0]), dtype=np.float64)
        _gram.dot_csr_csc(row_block(A), _transpose_block(Bt), out, work, same,
                          not upper_only)
    return out


def _dist_block(A, B, power):
    """sum_f |a_if - b_jf|^power (power 1: L1, 2: squared Euclidean) as a new dense
    C-ordered array, from explicit differences (exact merges for CSR rows)."""
    same = B is A
    out = _empty_block(A, B, A.dtype)
    if not sp.issparse(A) and not sp.issparse(B):
        _gram.dist_dense_dense(A, B, out, power, same)
    elif sp.issparse(A) and not sp.issparse(B):
        _gram.dist_csr_dense(row_block(A), B, out, power)
    elif not sp.issparse(A):
        _gram.dist_dense_csr(A, row_block(B), out, power)
    else:
        _gram.dist_csr_csr(row_block(A), row_block(B), out, power, same)
    return out


class _Columns:
    """The column operand of many kernel blocks, prepared once (``RBFKernel.columns``)."""

    __slots__ = ("B", "c", "Bc", "Bt", "nb", "keep", "Bk")

    def __init__(self, B, c, Bc, Bt, nb, keep=None, Bk=None):
        self.B, self.c, self.Bc, self.Bt, self.nb = B, c, Bc, Bt, nb
        #: for a CSR B of far more columns than entries: the columns B stores an entry in
        #: (sorted) and B on them alone (``Bt`` is then its CSC form)
        self.keep, self.Bk = keep, Bk


def _restricted_to(A, keep):
    """The CSR block A on the sorted columns ``keep`` alone, renumbered in order (its
    entries in other columns dropped: they meet no entry of a B that stores none there)."""
    pos = np.searchsorted(keep, A.indices)
    pos_c = np.minimum(pos, max(keep.size - 1, 0))
    hit = (pos < keep.size) & (keep[pos_c] == A.indices) if keep.size else \
        np.zeros(A.indices.shape, dtype=bool)
    csum = np.concatenate([[0], np.cumsum(hit, dtype=np.int64)])
    indptr = csum[A.indptr]
    return sp.csr_matrix((A.data[hit], pos[hit], indptr), shape=(A.shape[0], keep.size))


def _as64(X):
    """X with float64 entries (exact for float32), dense ones C-ordered (a copy only when
    the dtype or the layout changes)."""
    if sp.issparse(X):
        return X if X.dtype == np.float64 else X.astype(np.float64)
    return np.ascontiguousarray(X, dtype=np.float64)


def _float32_quiet(dtype):
    """numpy's overflow warnings silenced for a float32 block (``_float32_finite``
    computes it again in float64 when one of its entries overflowed on the way)."""
    if dtype == np.float32:
        return np.errstate(over="ignore", invalid="ignore")
    return contextlib.nullcontext()


def _float32_finite(kernel, A, B, K, overflowed=False):
    """K = kernel(A, B) computed in float32 (A and B float32 and finite, validated), or,
    when some entry of it is not finite (or ``overflowed``: the caller saw an intermediate
    overflow that left the entries finite), the block computed in float64 and rounded to
    float32: an intermediate overflowed (poly's <a, b> before a tiny gamma, RBF's squared
    norms: NaN from inf - inf, laplacian's L1 distance) where the entry itself is
    representable; an entry beyond float32's range stays inf, as numpy's float32 products
    give (found by review: poly with gamma 1e-40 returned inf for entries of about 1.1)."""
    with np.errstate(invalid="ignore"):
        if K.dtype != np.float32 or (not overflowed and
                                     math.isfinite(float(np.sum(K, dtype=np.float64)))):
            return K
    with np.errstate(over="ignore"):
        A64 = _as64(A)
        return np.asarray(kernel(A64, A64 if B is A else _as64(B)), dtype=np.float64) \
            .astype(np.float32)


def _careful_pair(A, B):
    """The operands of a ``careful_block``: validated as the kernel's own blocks
    (``prepare_pair``: dense or canonical CSR with checked indices, finite), then float64
    (exact). Found by review: a COO or CSC operand with a row index out of range reached
    scipy's compiled routines unchecked and crashed the process."""
    A, B, _ = prepare_pair(A, B)
    A64 = _as64(A)
    return A64, (A64 if B is A else _as64(B))


def _row_nnz_max(X):
    """The most entries a row of X can have in a dot product (d for dense)."""
    if sp.issparse(X):
        return int(np.diff(X.indptr).max()) if X.shape[0] else 0
    return X.shape[1]


#: the kernels' own accuracy targets: an entry of an RBF block whose cancellation bound
#: exceeds this (after centering) is recomputed from explicit differences
_RBF_TOLERANCE = {np.dtype(np.float64): 2.0**-36, np.dtype(np.float32): 2.0**-12}
_U64 = np.finfo(np.float64).eps / 2
#: the absolute error of an exp that underflows to 0
_TINY = float(np.finfo(np.float64).smallest_subnormal)


def _gamma(k):
    """gamma_k = k u / (1 - k u) of float64 (Higham, Lemma 3.1)."""
    return k * _U64 / (1.0 - k * _U64)


def _cancellation_bound(k, u):
    """The factor c with |fl(D2) - D2| <= c (|a|^2 + |b|^2) for D2 = |a|^2 + |b|^2 - 2 <a, b>
    on centered rows, k terms per sum: the dot product is off by gamma_k |a| |b| <=
    (k + 2) u (|a|^2 + |b|^2) / 2, so 2 <a, b> by (k + 2) u (|a|^2 + |b|^2); the squared
    norms, sums of k squares, by gamma_k |a|^2 and gamma_k |b|^2, (k + 2) u (|a|^2 + |b|^2)
    together (found by review: the norms' part was counted as a constant, half the bound
    for wide rows; the factor 2 of the entries' bounds E covered it); the sum and the
    difference 3 u (|a|^2 + |b|^2) (|D2| <= 2 (|a|^2 + |b|^2)); the centering
    subtraction (each centered entry within u of its exact value: |a - b|^2 moves by at
    most 2 u |a - b| (|a| + |b|) <= 4 u (|a|^2 + |b|^2) to first order) 4 u
    (|a|^2 + |b|^2) more; and u of room for the second-order terms. gamma_k <= (k + 2) u
    holds for k u <= 2 / (k + 2), k below 10^7 terms by far."""
    return (2 * k + 12) * u


def _underflow_bound(k):
    """The absolute part of the error of D2 = |a|^2 + |b|^2 - 2 <a, b> (and of a dot
    product) over rows of at most k entries: a product or square that underflows is off
    by up to half the smallest subnormal, not by a relative u, and the squared norms that
    the relative bound multiplies may themselves have underflowed; (8k + 32) smallest
    subnormals cover the three sums, the centering and the norms (found by review: rows
    at 1e-163 with gamma 8e307 gave K = 1 with a bound of 0 where 1 - K was 5e-11)."""
    return (8.0 * k + 32.0) * _TINY


def _cancelled_rows(Ac, Bc, na, nb, g, dtype, tol, e_abs=0.0):
    """Rows i with g (_cancellation_bound (|a_i|^2 + max_j |b_j|^2) + e_abs) > tol: those
    whose entries the norm formula may have cancelled beyond ``tol``; and rows with
    s = |a_i|^2 + max_j |b_j|^2 >= a quarter of ``dtype``'s largest value, where
    |a|^2 + |b|^2 - 2 <a, b> (at most 2 s) may overflow while s does not (found by
    review: D2 = inf gave K~ = 0 with a bound of one subnormal at a tiny gamma, where K
    was 0.0016, and the referee certified separators false in exact arithmetic)."""
    u = np.finfo(dtype).eps / 2
    k = max(_row_nnz_max(Ac), _row_nnz_max(Bc))
    with np.errstate(over="ignore", invalid="ignore"):  # inf or NaN: such rows are sent
        s = np.asarray(na, dtype=np.float64) + float(np.max(nb, initial=0.0))
        worst = g * (_cancellation_bound(k, u) * s + e_abs)
    return np.flatnonzero((worst > tol) | ~(s < float(np.finfo(dtype).max) / 4))


def _centered(A, B):
    """Dense A, B translated by the mean of B's rows (distances are unchanged; the norms
    that |a|^2 + |b|^2 - 2<a, b> cancels become the data's spread, not its offset).
    Sparse operands are returned as they are (translating them would densify)."""
    if sp.issparse(A) or sp.issparse(B) or B.shape[0] == 0:
        return A, B  # (no rows in B: nothing to centre on, and no numpy warning)
    with np.errstate(over="ignore", invalid="ignore"):
        c = np.mean(B, axis=0, dtype=np.float64).astype(A.dtype)
    if not np.all(np.isfinite(c)):
        # a column sum overflowed (rows near +-1e308: inf - inf = NaN, which made every
        # centred norm NaN, no row recomputed and every entry 1; found by review): no
        # centring, the norms then overflow and those rows take explicit differences
        return A, B
    with np.errstate(over="ignore"):  # rows far from the mean: their norms overflow,
        Ac = A - c                    # and ``_cancelled_rows`` sends them to explicit rows
        Bc = Ac if B is A else B - c
    return Ac, Bc


def _resolve_gamma(gamma, n_features):
    # gamma=None -> 1 / n_features (scikit-learn's pairwise default): a fixed function of
    # the feature count, so K(A, B) never depends on which rows are passed.
    return 1.0 / max(n_features, 1) if gamma is None else float(gamma)


_GAMMA = Param(None, numbers.Real, low=0.0, low_open=True, allow_none=True,
               doc="kernel width; None means 1 / n_features")


# ---------------------------------------------------------------------------------- kernels
#: the methods that define the linear kernel: marginkit reads it as the identity map
#: wherever it meets one (solvers' fast paths, referees, ``predict`` by ``coef_``), so a
#: subclass may not redefine them
_LINEAR_DEFINING = ("feature_map", "__call__", "diag")


@_register_builtin("kernel", "linear")
class LinearKernel(Kernel):
    """K(a, b) = <a, b>.

    ``feature_map(X)`` returns X itself (validated, never copied when already float32/
    float64), so solvers that require ``feature_map`` work in the input space and never
    form the n x n Gram.
    """

    param_table = {}

    def __init_subclass__(cls, **kwargs):
        # before Kernel's guards, which set the methods on every plug-in class; the
        # methods as the class resolves them, a mixin's too (found by review)
        own = [name for name in _LINEAR_DEFINING
               if getattr(cls, name, None) is not getattr(LinearKernel, name)]
        if own:
            raise TypeError(
                f"{cls.__name__} subclasses LinearKernel and redefines {', '.join(own)}: "
                "marginkit reads the linear kernel as the identity map wherever it meets "
                "one (a redefined map was solved and checked as given and predicted as X "
                "@ coef_: found by review); subclass marginkit.plugins.Kernel for another "
                "kernel")
        super().__init_subclass__(**kwargs)

    def feature_map(self, X):
        """Phi(X) = X (K = X X^T)."""
        return check_X(X, name="X")

    def __call__(self, A, B=None):
        A, B, dtype = prepare_pair(A, B)
        with _float32_quiet(dtype):
            K = _dot_block(A, B)
        return _float32_finite(self, A, B, K)

    def diag(self, A):
        A, _, _ = prepare_pair(A)
        return row_sqnorms(A, dtype=A.dtype)


@_register_builtin("kernel", "rbf")
class RBFKernel(Kernel):
    """Gaussian kernel K(a, b) = exp(-gamma ||a - b||^2).

    Parameters
    ----------
    gamma : float > 0 or None
        None means ``1 / n_features`` (as ``sklearn.metrics.pairwise.rbf_kernel``).
    """

    param_table = {"gamma": _GAMMA}

    def __call__(self, A, B=None):
        A, B, dtype = prepare_pair(A, B)
        with _float32_quiet(dtype):
            g = _resolve_gamma(self.gamma, A.shape[1])
            same = B is A
            Ac, Bc = _centered(A, B)
            K = _dot_block(Ac, Bc, upper_only=True)  # rbf_exponent mirrors the upper triangle
            na = row_sqnorms(Ac, dtype=K.dtype)
            nb = na if same else row_sqnorms(Bc, dtype=K.dtype)
            # ||a - b||^2 = ||a||^2 + ||b||^2 - 2 <a, b>, clipped at 0 (round-off), then exp
            _gram.rbf_exponent(K, na, nb, g, same)
            np.exp(K, out=K)
            self._recompute_cancelled_rows(A, B, Ac, Bc, na, nb, g, K)
        return _float32_finite(self, A, B, K)

    def columns(self, B):
        """B prepared once for many blocks ``rows(A, cols)`` = K(A, B): validated, its
        centering, squared norms and (sparse B) CSC form computed once, not per block."""
        B = prepare_pair(B)[0]
        if sp.issparse(B):
            c, Bc = None, B
            if _wide(B.shape[1], B.nnz):
                # B's columns far more than its entries (hashed features): B on its
                # stored columns, once, and each block of rows on them (found by review:
                # compacting B again for every block made the kernel SVM's rows 100x
                # slower)
                keep = np.unique(B.indices)
                Bk = _stored_columns(B, B)[0]
                return _Columns(B, c, Bc, _csc_sorted(Bk), row_sqnorms(Bc, dtype=B.dtype),
                                keep, Bk)
            Bt = _csc_sorted(B)
        else:
            c = np.mean(B, axis=0, dtype=np.float64).astype(B.dtype)
            Bc, Bt = B - c, None
        return _Columns(B, c, Bc, Bt, row_sqnorms(Bc, dtype=B.dtype))

    def rows(self, A, cols):
        """K(A, B) for B = ``cols.B`` (``cols = self.columns(B)``): the same entries as
        ``self(A, B)`` (the same operations on the same operands), B's part done once."""
        B = cols.B
        A = check_X(A, name="A", allow_empty=True)
        if A.shape[1] != B.shape[1]:
            raise ValueError(f"A has {A.shape[1]} features and B has {B.shape[1]}; "
                             "K(A, B) needs the same number of columns in both")
        dtype = np.float32 if (A.dtype == np.float32 and B.dtype == np.float32) \
            else np.float64
        if dtype != B.dtype or sp.issparse(A) != sp.issparse(B) or \
                type(self).__call__ is not RBFKernel.__call__:
            return self(A, B)  # other layouts, or a subclass's own kernel function
        A = _as(A, dtype)
        g = _resolve_gamma(self.gamma, A.shape[1])
        Ac = A if cols.c is None else A - cols.c
        if cols.keep is not None:
            K = _dot_block(_restricted_to(Ac, cols.keep), cols.Bk, upper_only=True,
                           Bt=cols.Bt)
        else:
            K = _dot_block(Ac, cols.Bc, upper_only=True, Bt=cols.Bt)
        na = row_sqnorms(Ac, dtype=K.dtype)
        _gram.rbf_exponent(K, na, cols.nb, g, False)
        np.exp(K, out=K)
        self._recompute_cancelled_rows(A, B, Ac, cols.Bc, na, cols.nb, g, K)
        return K

    @staticmethod
    def _recompute_cancelled_rows(A, B, Ac, Bc, na, nb, g, K):
        """Rows of K whose entries the norm formula may have cancelled beyond the kernel's
        tolerance, recomputed from explicit differences (float64).

        The rounding of |a|^2 + |b|^2 - 2 <a, b> on the centered rows is at most
        (2k + 12) u (|a|^2 + |b|^2) (``_cancellation_bound``), so an entry exp(-g D2) is off
        by at most g (2k + 12) u (|a|^2 + |b|^2). Row i is recomputed when that exceeds the
        tolerance for some column (rows with norms far above the data's spread: sparse
        data with an offset, far outliers); on centered dense data no row is.
        """
        rows = _cancelled_rows(Ac, Bc, na, nb, g, K.dtype, _RBF_TOLERANCE[K.dtype])
        if rows.size == 0:
            return
        same = B is A
        B64 = _as64(B)
        step = max(1, (1 << 22) // max(B.shape[0], 1))
        for r0 in range(0, rows.size, step):
            idx = rows[r0:r0 + step]
            D2 = _dist_block(_as64(A[idx]), B64, 2)
            with np.errstate(over="ignore"):    # g D2 beyond the largest double: exp -> 0
                Ki = np.exp(D2 * -g)
            K[idx] = Ki
            if same:
                K[:, idx] = Ki.T

    def evaluation_slack(self, A, B):
        """``__call__`` on float64 rows keeps the norm formula on the rows whose
        exponent's rounding bound g c (|a|^2 + max |b|^2) is at most ``_RBF_TOLERANCE``
        (2^-36; ``_recompute_cancelled_rows``) and computes the others from explicit
        differences (within E: ``careful_block``'s bound on a row it serves either way
        is at least the explicit differences' one, (k + 4) u g D2 K, which does not
        depend on the layout). On a row it keeps, the exponent g D2 is off by at most
        2^-36 + g e_abs (the products that underflow, ``_underflow_bound``, which that
        row test leaves out) plus the rounding of g times it (u g D2 <= 746 u for an
        entry that does not underflow), and exp adds at most 8 u: the entry is within a
        factor exp(tau') of the exact one, so within tau K* of it,
        tau = expm1(tau') (1 + 2^-20) + 8 u, K* <= K + E. The slack is (tau, 2 tiny)
        (an entry that underflows), the same for every row: which rows ``__call__``
        keeps depends on the rows it is given (k, the centring of a dense B, CSR or
        dense), and predict may be given any of them, in any layout (found by review:
        a per-row slack taken from the check's rows certified a separator that predict
        on a subset of the same CSR rows, or on their dense form, misclassified). Found
        by review first: a separator of normalized margin 4e-14 verified while predict,
        through the norm formula (K(x_10, x_11) = 1 instead of 1 - 1.25e-13), scored
        both points of a close pair 0."""
        g = _resolve_gamma(self.gamma, A.shape[1])
        k = max(_row_nnz_max(A), _row_nnz_max(B))  # (the shapes only: no float64 copies)
        t = _RBF_TOLERANCE[np.dtype(np.float64)] + g * _underflow_bound(k) + 750.0 * _U64
        tau = math.expm1(t) * (1.0 + 2.0**-20) + 8.0 * _U64
        return tau, 2.0 * _TINY

    def careful_block(self, A, B):
        """K(A, B) in float64 and a bound on each entry's error.

        D2 = |a|^2 + |b|^2 - 2 <a, b> on rows centered by the mean of B's rows is off by at
        most e = (2k + 12) u (|a|^2 + |b|^2) (``_cancellation_bound``) plus (8k + 32)
        smallest subnormals (``_underflow_bound``: products and squares that underflow,
        added to e everywhere below); the rows where that
        bound is not small next to the entries are recomputed from explicit differences,
        whose terms are all non-negative (e = (k + 4) u D2). With D2 within e of the exact
        value, |K - fl(K)| <= exp(-g max(D2 - e, 0)) 2 g e + 8 u K (exp: 4 ulps) + the
        smallest subnormal (an exp that underflows): the mean value theorem on
        [D2 - e, D2 + e] gives g e exp(-g max(D2 - e, 0)) (>= g e K); the second g e
        covers the rounding of -g D2 (a relative u, moving K by K g D2 u <= K g e / 6 as
        D2 <= 2 (|a|^2 + |b|^2), K g e / 4 on a recomputed row) and the few roundings of
        the bound's own evaluation (a relative u each).
        Two n_A x n_B float64 arrays, formed by compiled passes over the dot block around
        numpy's exp (``_gram.rbf_careful_exponents``, ``_gram.rbf_careful_bound``).
        """
        A, B = _careful_pair(A, B)
        g = _resolve_gamma(self.gamma, A.shape[1])
        Ac, Bc = _centered(A, B)
        na = row_sqnorms(Ac)
        nb = na if Bc is Ac else row_sqnorms(Bc)
        k = max(_row_nnz_max(Ac), _row_nnz_max(Bc))
        c, c_explicit = _cancellation_bound(k, _U64), (k + 4) * _U64
        e_abs = _underflow_bound(k)
        K = _dot_block(Ac, Bc)
        rows = _cancelled_rows(Ac, Bc, na, nb, g, np.dtype(np.float64), 2.0**-40, e_abs)
        d2x = _dist_block(A[rows], B, 2) if rows.size else np.empty((0, K.shape[1]))
        which = np.full(K.shape[0], -1, dtype=np.int64)
        which[rows] = np.arange(rows.size)
        # K <- exp(-g D2) and E <- exp(-g max(D2 - e, 0)) (2 g e) + 8 u K + tiny: one
        # compiled pass for the exponents, numpy's exp, one compiled pass for the bound
        E = np.empty_like(K)
        _gram.rbf_careful_exponents(K, E, na, nb, g, c, d2x, which, c_explicit, e_abs)
        np.exp(K, out=K)
        np.exp(E, out=E)
        _gram.rbf_careful_bound(K, E, na, nb, g, c, d2x, which, c_explicit, e_abs)
        return K, E

    def careful_products(self, A, B, u, own=None):
        """The referee's products of ``careful_block``'s K~ = K(A, B) with a vector u, without
        forming its bound E: ``(f, a, b, d, ed)`` with f = K~ u, a = K~ |u| (float64
        products; K~ >= 0, so a is |K~| |u|), b >= E |u| (the exact sum, E a proven bound on
        the entries' errors), and, for ``own`` (one column index per row of A, or None),
        the entries d_i = K~[i, own_i] and bounds ed_i on their errors (None without it).

        On the rows that the norm formula serves (``careful_block``: all but the rows it
        recomputes from explicit differences), g e_ij <= 2^-40 (1 + 5u) <= tau = 2^-30 for
        e_ij = c (|a_i|^2 + |b_j|^2) (1 + u)^2, c = (2k + 12) u, and the error of K~_ij is at
        most E^_ij = K~_ij (2 g (1 + 4 tau) e_ij + 8 u (1 + 9 u)) + 5 tiny (docs/svm.md,
        section 6, "Exact kernels": the bound of ``careful_block`` with
        exp(-g max(D2 - e, 0)) <= exp(-g D2) exp(g e) and exp(-g D2) within 8 u of K~).
        E^ is linear in |a_i|^2 + |b_j|^2 times K~_ij, so

            sum_j E^_ij |u_j| = 2 g c' (|a_i|^2 (K~ |u|)_i + (K~ (nb |u|))_i)
                                + 8 u (1 + 9 u) (K~ |u|)_i + 5 tiny sum |u|,

        c' = c (1 + 4 tau)(1 + u)^2: one exp per entry and one product K~ [u, |u|, nb |u|]
        (K~ read once), the sums' rounding counted (b bounds the exact sum). The rows
        recomputed from explicit differences take ``careful_block``'s path (E formed).
        b dominates the E |u| of ``careful_block``'s own E (tests).
        """
        A, B = _careful_pair(A, B)
        u = np.ascontiguousarray(u, dtype=np.float64)
        m, n = A.shape[0], B.shape[0]
        if u.shape != (n,):
            raise ValueError(f"u must have one entry per row of B ({n}), got shape {u.shape}")
        g = _resolve_gamma(self.gamma, A.shape[1])
        Ac, Bc = _centered(A, B)
        na = row_sqnorms(Ac)
        nb = na if Bc is Ac else row_sqnorms(Bc)
        k = max(_row_nnz_max(Ac), _row_nnz_max(Bc))
        c = _cancellation_bound(k, _U64)
        e_abs = _underflow_bound(k)
        rows = _cancelled_rows(Ac, Bc, na, nb, g, np.dtype(np.float64), 2.0**-40, e_abs)
        # K~ <- exp(-g max(|a|^2 + |b|^2 - 2 <a, b>, 0)): careful_block's operations on its
        # norm-formula rows (the same entries, bit for bit)
        K = _dot_block(Ac, Bc)
        _gram.rbf_exponent(K, na, nb, g, False)
        np.exp(K, out=K)
        absu = np.abs(u)
        V = np.empty((n, 3))
        V[:, 0], V[:, 1] = u, absu
        np.multiply(nb, absu, out=V[:, 2])
        # P = K~ @ [u, |u|, nb |u|]: K~ read once
        P = K @ V
        f, a = P[:, 0].copy(), P[:, 1].copy()
        # (g times the small factor first: 2 g overflows for g near the largest double)
        ce = (g * c) * 2.0 * (1.0 + 2.0**-27)        # >= 2 g c' (the rounding included)
        u8 = 8.0 * _U64 * (1.0 + 2.0**-40)           # >= 8 u (1 + 9 u)
        # the exact sums are within gamma_n (+ n eta) of the float64 ones (non-negative
        # terms), nb |u| within u; h covers them and the few roundings of this line
        h = 1.0 + _gamma(2 * n + 16)
        tiny = (5.0 * float(np.sum(absu)) * h + n + 10.0) * _TINY
        # e_ij's absolute part e_abs (underflow): 2 g (1 + 4 tau) e_abs K~_ij more per entry
        cabs = (g * e_abs) * 2.0 * (1.0 + 2.0**-27)
        b = (ce * (na * a + P[:, 2]) + (u8 + cabs) * a) * h + tiny
        d = ed = None
        if own is not None:
            own = np.asarray(own, dtype=np.intp)
            d = K[np.arange(m), own]
            ed = (d * (ce * (na + nb[own]) + u8 + cabs)) * (1.0 + 8 * _U64) + 6.0 * _TINY
        if rows.size:
            Kx, Ex = self.careful_block(A[rows], B)
            f[rows] = Kx @ u
            a[rows] = Kx @ absu
            b[rows] = (Ex @ absu) * h + tiny
            if own is not None:
                d[rows] = Kx[np.arange(rows.size), own[rows]]
                ed[rows] = Ex[np.arange(rows.size), own[rows]]
        return f, a, b, d, ed

    def diag(self, A):
        A, _, dtype = prepare_pair(A)
        return np.ones(A.shape[0], dtype=dtype)


@_register_builtin("kernel", "poly")
class PolynomialKernel(Kernel):
    """Polynomial kernel K(a, b) = (gamma <a, b> + coef0)^degree.

    Parameters
    ----------
    degree : int >= 1
    gamma : float > 0 or None
        None means ``1 / n_features`` (as ``sklearn.metrics.pairwise.polynomial_kernel``).
    coef0 : float >= 0
        ``coef0 >= 0`` keeps the kernel positive semi-definite.
    """

    param_table = {
        "degree": Param(3, numbers.Integral, low=1, high=2**31 - 1,
                        doc="polynomial degree (a C int in the compiled passes)"),
        "gamma": _GAMMA,
        "coef0": Param(1.0, numbers.Real, low=0.0, doc="additive constant (>= 0 for a PSD kernel)"),
    }

    def __call__(self, A, B=None):
        A, B, dtype = prepare_pair(A, B)
        with _float32_quiet(dtype):
            g = _resolve_gamma(self.gamma, A.shape[1])
            K = _dot_block(A, B, upper_only=True)  # finish_poly mirrors the upper triangle
            _gram.finish_poly(K, g, float(self.coef0), int(self.degree), B is A)
        return _float32_finite(self, A, B, K)

    def careful_block(self, A, B):
        """K(A, B) in float64 and a bound on each entry's error.

        fl(<a, b>) is off by at most gamma_k |a| |b| (Cauchy-Schwarz on sum |a_f b_f|) plus
        (2k + 4) smallest subnormals (products and sums that underflow; |a|, |b| bounded
        from squared norms that may have underflowed too), so the base t = g <a, b> + c0 by
        D = g (gamma_k |a| |b| + that) + 2 u |t| + 2 tiny, and t^p by
        p (|t| + D)^(p - 1) D + 2 p (u |t^p| + tiny).
        """
        A, B = _careful_pair(A, B)
        g = _resolve_gamma(self.gamma, A.shape[1])
        p = int(self.degree)
        t = g * _dot_block(A, B) + float(self.coef0)
        k = max(_row_nnz_max(A), _row_nnz_max(B))
        # norms that bound the exact ones although squares may underflow (each square off
        # by at most half the smallest subnormal, the sum by gamma_k relatively)
        tiny = (2.0 * k + 4.0) * _TINY
        na = np.sqrt(row_sqnorms(A) * (1.0 + (k + 4) * _U64) + tiny) * (1.0 + 2 * _U64)
        nb = np.sqrt(row_sqnorms(B) * (1.0 + (k + 4) * _U64) + tiny) * (1.0 + 2 * _U64)
        # fl(<a, b>): gamma_k |a| |b| plus the products and sums that underflow (found by
        # review: rows at 1e-163 with gamma 8e307 gave K = 0 with a bound of 0 where the
        # exact K was -1.8e-16); g <a, b> + c0: 2 u |t| plus a subnormal result's error
        dt = g * ((k + 2) * _U64 * np.outer(na, nb) + tiny) + 2 * _U64 * np.abs(t) + 2 * _TINY
        K = t ** p
        err = p * (np.abs(t) + dt) ** (p - 1) * dt + 2 * p * (_U64 * np.abs(K) + _TINY)
        return K, err

    def diag(self, A):
        A, _, dtype = prepare_pair(A)
        g = _resolve_gamma(self.gamma, A.shape[1])
        sq = row_sqnorms(A, dtype=A.dtype)
        return ((g * sq + self.coef0) ** int(self.degree)).astype(dtype, copy=False)


@_register_builtin("kernel", "laplacian")
class LaplacianKernel(Kernel):
    """Laplacian kernel K(a, b) = exp(-gamma ||a - b||_1).

    Parameters
    ----------
    gamma : float > 0 or None
        None means ``1 / n_features`` (as ``sklearn.metrics.pairwise.laplacian_kernel``).
    """

    param_table = {"gamma": _GAMMA}

    def __call__(self, A, B=None):
        A, B, dtype = prepare_pair(A, B)
        g = _resolve_gamma(self.gamma, A.shape[1])
        with _float32_quiet(dtype):
            K = _dist_block(A, B, 1)
            # float32: a distance or a gamma beyond float32's range is computed in float64
            # (found by review: 3e38 apart, 0 instead of 0.94 at gamma 1e-40; gamma 1e39
            # gave NaN on the diagonal)
            overflowed = K.dtype == np.float32 and (
                g > float(np.finfo(np.float32).max) or bool(np.isinf(K).any()))
            if not overflowed:
                with np.errstate(over="ignore"):  # g D1 beyond the largest value: exp(-inf) = 0
                    np.multiply(K, -g, out=K)
                np.exp(K, out=K)
        return _float32_finite(self, A, B, K, overflowed)

    def careful_block(self, A, B):
        """K(A, B) in float64 and a bound on each entry's error.

        The L1 distance from explicit differences has relative error <= (k + 2) u, so the
        exponent x~ = fl(g D1) is within x~ d of the exact x, d = (k + 3) u, and
        |exp(-x) - exp(-x~)| <= exp(-x~ (1 - d)) x~ d (mean value theorem), plus 8 u K + the
        smallest subnormal for the exp's own rounding. Where r = x~ d <= 2^-20,
        exp(-x~ (1 - d)) = exp(-x~) exp(r) and the term is at most K r (1 + 2^-18) (+ a
        subnormal); elsewhere exp(-x~ (1 - d)) is formed itself, and where t = x~ (1 - d)
        >= 746 (exp(-t) underflows; x~ may be inf for g near the largest double) the term
        is at most t exp(-t) <= 2^-1050. Every bound is capped at 1: K and its float64
        value both lie in [0, 1] (found by review: at gamma = 1e308, 0 * inf made the
        bound NaN where the Gram matrix is the identity); an entry whose distance D1
        itself overflowed gets 1."""
        A, B = _careful_pair(A, B)
        g = _resolve_gamma(self.gamma, A.shape[1])
        d = (A.shape[1] + 3) * _U64
        with np.errstate(over="ignore", invalid="ignore"):
            x = _dist_block(A, B, 1)
            # where the distance itself overflowed, K~ = 0 says nothing about K (g 2e308 is
            # 0.02 at g = 1e-310): those entries get the bound 1 below
            lost = np.isinf(x)
            np.multiply(x, g, out=x)              # x~ (inf where g D1 overflows)
            K = np.exp(-x)
            r = x * d
            err = K * r * (1.0 + 2.0**-18) + 2.0 * _TINY
            far = ~(r <= 2.0**-20)
            if far.any():
                t = x[far] * (1.0 - d)
                term = np.exp(-t) * r[far] * (1.0 + 16 * _U64) + 16 * _TINY
                term[~(t < 746.0)] = 2.0**-1050
                err[far] = term
        err += K * (8 * _U64) + _TINY
        np.minimum(err, 1.0, out=err)
        err[lost] = 1.0
        return K, err

    def diag(self, A):
        A, _, dtype = prepare_pair(A)
        return np.ones(A.shape[0], dtype=dtype)


@_register_builtin("kernel", "precomputed")
class PrecomputedKernel(Kernel):
    """The user passes the Gram matrix itself as X.

    ``solve(K, y, kernel="precomputed")`` takes the (n, n) matrix K(X_train, X_train);
    prediction takes K(X_new, X_train) (one column per training sample). The kernel never
    sees the original features, so ``kernel(A)`` (or ``kernel(A, B)`` with ``B`` having as
    many rows as A has columns, e.g. the training Gram) returns the block ``A`` itself as a
    dense array, and ``diag(K)`` returns the diagonal of a square Gram matrix.
    """

    precomputed = True
    param_table = {}

    def __call__(self, A, B=None):
        A = check_X(A, name="A", allow_empty=True)
        if B is not None and B is not A and np.shape(B)[0] != A.shape[1]:
            raise ValueError(
                f"kernel='precomputed': A must be the Gram block K(rows, training samples); A has "
                f"{A.shape[1]} columns but B has {np.shape(B)[0]} rows"
            )
        return A.toarray() if sp.issparse(A) else np.array(A, copy=True)

    def diag(self, A):
        A = check_X(A, name="A", allow_empty=True)
        if A.shape[0] != A.shape[1]:
            raise ValueError(
                f"kernel='precomputed': diag needs the square Gram matrix K(X, X), got shape {A.shape}"
            )
        d = A.diagonal()
        return np.asarray(d).ravel().copy()


def _check_function(value, name, owner):
    if not callable(value):
        raise TypeError(f"{owner}: {name}={value!r} must be a callable k(A, B) -> ndarray")
    return value


@_register_builtin("kernel", "callable")
class CallableKernel(Kernel):
    """Any user function ``k(A, B) -> array`` of shape (len(A), len(B)).

    The blocks the function receives are validated row sets with a common dtype (float64,
    or float32 when both operands are float32): a dense C-ordered ``numpy.ndarray``, or,
    for sparse input, a ``scipy.sparse.csr_array`` sharing the caller's CSR arrays (never
    densified). Both follow numpy's operator semantics, so ``(A @ B.T) ** 2`` squares
    every entry of the block on dense and on sparse input alike (a ``csr_matrix`` would
    compute a matrix power). ``B`` is ``A`` itself for the square blocks ``k(X)``. Both
    are read-only views (writing into them raises ``ValueError``: the function must not
    modify the caller's data).

    The output may be any array-like, ``numpy.matrix`` or scipy.sparse block: it is
    converted to a dense ``numpy.ndarray`` (float64, or float32 when both operands are
    float32, as for the other kernels) and checked: a wrong shape or non-finite entries
    raise ``ValueError``, and so does a complex block (its imaginary part would be lost in
    the cast). The function must itself pickle (a module-level function, not a
    lambda) for the kernel to pickle. ``diag`` evaluates small diagonal blocks (256 rows
    at a time).

    Parameters
    ----------
    function : callable
        ``function(A, B)`` with A, B as described above.
    """

    param_table = {"function": Param(Param.REQUIRED, object, validator=_check_function,
                                     doc="a callable k(A, B) -> ndarray")}

    def __call__(self, A, B=None):
        A, B, dtype = prepare_pair(A, B)
        K = self._block(A, B)
        return K.astype(dtype, copy=False) if K.dtype != dtype else K

    def returned_gram(self, A):
        """K(A, A) on float64 rows A as the function gave it: float32 when it returned
        float32 (its values are float32 numbers; a float64 cast would hide that their
        rounding may leave K slightly indefinite), float64 otherwise."""
        A = prepare_pair(A)[0]
        return self._block(A, A)

    def careful_block(self, A, B):
        """``Kernel.careful_block``'s trust in the function's values, on the block as the
        function returned it: float32 values carry one float32 rounding more."""
        A, B = _careful_pair(A, B)
        return trusted_block(self._block(A, B), self.trusted_ulps)

    def _block(self, A, B):
        """The validated block K(A, B) of prepared operands (``checked_block``): float32
        when the function returned float32, else float64."""
        same = B is A
        # read-only views (the function must not modify the caller's data), as a
        # kernel plug-in's operands are
        A = _frozen(_sparse_array(A))
        K = self.function(A, A if same else _frozen(_sparse_array(B)))
        return checked_block(K, A, B, same, f"callable kernel {self._fname()}")

    def _fname(self):
        return getattr(self.function, "__name__", repr(self.function))

    def diag(self, A):
        A, _, dtype = prepare_pair(A)
        out = np.empty(A.shape[0], dtype=dtype)
        step = 256
        for i in range(0, A.shape[0], step):
            Ai = A[i:i + step]
            out[i:i + step] = np.diagonal(self(Ai, Ai))
        return out


@_register_builtin("kernel", "spline")
class SplineKernel(Kernel):
    """Periodic spline kernel of order q on [0, 1]^d (Beugnot et al. 2021, sec. 4 and app. E.1).

    In one dimension

        Lambda_q(x, z) = sum_{k in Z} exp(2 i pi k (x - z)) / |k|^q   (k = 0 term: 1)
                       = 1 + 2 sum_{k >= 1} cos(2 pi k (x - z)) / k^q,

    which for even q has the closed form
    ``1 + (-1)^(q/2 + 1) (2 pi)^q B_q({x - z}) / q!`` (B_q the Bernoulli polynomial;
    derivation in docs/kernels.md). In d dimensions the kernel is the product over the
    coordinates. The kernel is 1-periodic in every coordinate, so inputs outside [0, 1]
    are read modulo 1. Any real order q > 1 is supported (Beugnot et al. 2021 uses
    Lambda_{(r + 1/2) alpha + 1/2} for the target function); non-even orders go through a
    polylogarithm expansion accurate to about 1e-14 (``marginkit.kernels._periodic``).

    Parameters
    ----------
    order : float > 1
        The order q (the decay of the Fourier weights); the paper's alpha.
    normalization : {"series", "bernoulli"}
        ``"series"`` (default) is the Fourier series above, the paper's definition.
        ``"bernoulli"`` is the closed form printed in the paper's appendix E.1,
        ``1 + (-1)^(q/2 - 1) B_q(|x - z|) / q!``, which lacks the factor (2 pi)^q: it equals
        the series with weights |2 pi k|^-q instead of |k|^-q (same RKHS, rescaled
        non-constant part). Use it to reproduce the paper's numbers exactly.

    References
    ----------
    G. Beugnot, J. Mairal and A. Rudi, "Beyond Tikhonov: Faster Learning with
    Self-Concordant Losses via Iterative Regularization", Advances in Neural Information
    Processing Systems 34 (NeurIPS 2021).
    """

    param_table = {
        "order": Param(2.0, numbers.Real, low=1.0, low_open=True, high=1000.0,
                       doc="order q > 1 of the spline (decay |k|^-q of the Fourier weights)"),
        "normalization": Param("series", str, options=("series", "bernoulli"),
                               doc="Fourier weights |k|^-q ('series') or |2 pi k|^-q ('bernoulli')"),
    }

    def _weight(self):
        q = float(self.order)
        return 2.0 if self.normalization == "series" else 2.0 * (2.0 * np.pi) ** (-q)

    def __call__(self, A, B=None):
        from ._periodic import series_plan

        A, B, dtype = prepare_pair(A, B)
        A, B, zeros = _stored_columns(A, B)
        same = B is A
        mode, coef, scalars = series_plan(float(self.order))
        w = self._weight()
        Ac = A.tocsc() if sp.issparse(A) else A
        Bc = Ac if same else (B.tocsc() if sp.issparse(B) else B)
        K = np.ones((A.shape[0], B.shape[0]), dtype=np.float64)
        if zeros:  # first, as ``careful_block`` applies it
            with np.errstate(over="ignore"):
                K *= np.float64(_spline_zero_factor(mode, coef, scalars, w)) ** zeros
        for j in range(A.shape[1]):
            a = _unit_column(Ac, j)
            b = a if same else _unit_column(Bc, j)
            _gram.spline_factor(a, b, K, mode, coef, scalars, w, same)
        if same:
            _gram.mirror_upper(K)
        return K.astype(dtype, copy=False)

    #: bound on the absolute error of one coordinate's computed factor 1 + w C_q(t),
    #: relative to 1 + w S_q, S_q the size of the terms its evaluation adds
    #: (``_periodic.term_scale``, at least zeta(q) = C_q(0)): measured against 40-digit
    #: evaluations over q in [1.0001, 60] and both normalizations (docs/svm.md, "Spline";
    #: ``tests/test_kernels.py`` measures it again)
    factor_error = 1e-14

    def careful_block(self, A, B):
        """K(A, B) in float64 and a bound on each entry's error.

        Each coordinate's factor f_j = 1 + w C_q(a_j - b_j) is computed to within
        e = ``factor_error`` (1 + w S_q) absolute, S_q the size of the terms its
        evaluation adds (``_periodic.term_scale``: zeta(q), the factor's largest value, or
        more where the terms of an expansion cancel, near odd orders). The bound is
        absolute, not relative: the series normalization's
        factor changes sign (1 - pi^2 / 6 at q = 2, t = 1/2), and near its zeros the
        relative error is unbounded (a bound of d 1e-13 |K| was claimed before; 6e-12
        relative was measured there). With f~_j the computed factors, the exact product
        differs from prod f~_j by at most U - P, U = prod (|f~_j| + e), P = prod |f~_j|
        (expand prod (f~_j - delta_j), |delta_j| <= e), and the computed product and the
        bound's own products carry at most (d + 2) u relative rounding each, and a partial
        product of K or P that underflows at most u U more a column while U's stay normal:
        the bound is U - P + (4 d + 4) u U, computed with the same factors as K, and
        infinite where a partial product of U left the normal range."""
        from ._periodic import series_plan, term_scale

        A, B = _careful_pair(A, B)
        d = A.shape[1]
        A, B, zeros = _stored_columns(A, B)
        q = float(self.order)
        mode, coef, scalars = series_plan(q)
        w = self._weight()
        e = self.factor_error * (1.0 + w * term_scale(q))
        Ac = A.tocsc() if sp.issparse(A) else A
        Bc = B.tocsc() if sp.issparse(B) else B
        shape = (A.shape[0], B.shape[0])
        K, U, P = np.ones(shape), np.ones(shape), np.ones(shape)
        if zeros:
            # the columns where neither block stores an entry: the same factor f0 (an
            # exact difference 0) for every entry, ``zeros`` times, applied first
            f0 = np.float64(_spline_zero_factor(mode, coef, scalars, w))
            with np.errstate(over="ignore", invalid="ignore"):
                K *= f0 ** zeros
                P *= abs(f0) ** zeros
                U *= (abs(f0) + e) ** zeros
        # the smallest partial product of U: while every one is a normal number, a
        # partial product of K or P that underflows (rounded by up to tiny / 2, not a
        # relative u) errs by at most (tiny / 2) U_final / U_j <= u U_final a column, so
        # d u U more covers K and P each; otherwise no bound is claimed (found by review:
        # the stored columns' factors first underflowed K and U to 0, a bound of 0 for
        # an entry of 4.5e-114 that the empty columns' 4.29^390 would have raised)
        lowest = U.copy()
        F = np.empty(shape)
        subnormal = None
        for j in range(A.shape[1]):
            a, b = _unit_column(Ac, j), _unit_column(Bc, j)
            F.fill(1.0)
            _gram.spline_factor(a, b, F, mode, coef, scalars, w, False)
            K *= F
            np.abs(F, out=F)
            P *= F
            F += e
            F += _spline_input_error(a, b, q, w)
            U *= F
            np.minimum(lowest, U, out=lowest)
            # a difference below 2^-1020 puts 2 pi t in the subnormal range, where its
            # relative error is not u: no bound is claimed for those entries (found by
            # review: at q = 1.0001, t = 5e-324, the error was 4e8 times the bound)
            values = np.unique(np.concatenate([a, b]))
            if values.size > 1 and np.diff(values).min() < _SPLINE_TINY:
                gap = np.abs(a[:, None] - b[None, :])
                tiny = (gap > 0.0) & (gap < _SPLINE_TINY)
                subnormal = tiny if subnormal is None else subnormal | tiny
        with np.errstate(over="ignore", invalid="ignore"):
            bound = (U - P) + (4 * d + 4) * _U64 * U
        bound[~np.isfinite(bound)] = np.inf
        bound[lowest < np.finfo(np.float64).tiny] = np.inf
        if subnormal is not None:
            bound[subnormal] = np.inf
        return K, bound

    def diag(self, A):
        from ._periodic import periodic_cosine_series

        A, _, dtype = prepare_pair(A)
        c0 = float(periodic_cosine_series(0.0, float(self.order)))
        base, d = 1.0 + self._weight() * c0, A.shape[1]
        if d * math.log(base) > math.log(np.finfo(np.float64).max):
            # (Python's power raised a bare OverflowError: found by review)
            raise ValueError(
                f"kernel 'spline': K(x, x) = {base:.6g}^{d} overflows float64 (order="
                f"{self.order!r}, {d} features): the product over the features grows as "
                "(1 + w zeta(order))^d whatever the scale of X; raise the order or use fewer "
                "features")
        return np.full(A.shape[0], base ** d, dtype=dtype)


#: coordinate differences below which the spline's evaluation runs into the subnormal range
_SPLINE_TINY = 2.0 ** -1020


def _stored_columns(A, B):
    """For CSR blocks A and B: both restricted to the columns where either stores an
    entry (renumbered in order), and the number of the others, zero in both rows of every
    pair (each a factor K_1(0, 0) of every entry); ``(A, B, 0)`` otherwise. Found by
    review: the spline's loop over all columns took 8.6 s a block on 4 rows of 10^5
    columns and hours on 10^9, whatever the number of entries."""
    if not (sp.issparse(A) and sp.issparse(B)):
        return A, B, 0
    same = B is A
    cols = np.unique(A.indices) if same else np.union1d(A.indices, B.indices)

    def restrict(X):
        return sp.csr_matrix((X.data, np.searchsorted(cols, X.indices), X.indptr),
                             shape=(X.shape[0], cols.size))

    Ar = restrict(A)
    return Ar, (Ar if same else restrict(B)), A.shape[1] - cols.size


def _spline_zero_factor(mode, coef, scalars, w):
    """The factor 1 + w C_q(0) of a coordinate where both rows are 0, as the kernel's
    compiled pass computes it."""
    F = np.ones((1, 1))
    z = np.zeros(1)
    _gram.spline_factor(z, z, F, mode, coef, scalars, w, False)
    return float(F[0, 0])


def _unit_column(X, j):
    """Column j of ``_column`` reduced modulo 1 into [-1/2, 1/2], exactly: x - rint(x)
    has no rounding error for any finite x (Sterbenz's lemma for |x| >= 1/2, x itself
    below; x - floor(x) rounds for negative x: -1e-20 became 1.0, the distance 0 instead
    of 1e-20, found by review). The periodic kernel's value is unchanged, and the
    difference of two coordinates is then at most 1, its rounding bounded by
    ``_spline_input_error`` (``SplineKernel.careful_block``). Found by an earlier review:
    the difference of raw coordinates of 1e8 was rounded to 1e-8, and the factor's error
    was 4e5 times the bound."""
    x = _column(X, j)
    return x - np.rint(x)


def _spline_input_error(a, b, q, w):
    """Bound on |f(t) - f(t~)| for the factor f = 1 + w C_q of a coordinate, t~ the
    computed difference a_i - b_j (rounded) and t the exact one, entrywise (m, n).

    The error of fl(a - b) is computed exactly (TwoSum: e = (a - b) - fl(a - b)), and the
    periodic distance u in [0, 1/2], 1-Lipschitz in t, errs by at most |e|; across the
    wrap-around the kernel takes u = (1/2 - |a|) + (1/2 - |b|) (``_gram.spline_distance``),
    within 3 u (1 + 4 u) of itself. Two bounds,
    the smaller taken (C_q(u) = sum_k k^-q cos(2 pi k u), q > 1):

    * everywhere, sum_k k^-q min(2, 2 pi k |e|) <= 2 pi |e| S1(N) + 2 S2(N) for any N >= 1,
      S1(N) = sum_{k <= N} k^(1-q) <= 1 + int_1^N x^(1-q) dx and
      S2(N) = sum_{k > N} k^-q <= N^(1-q) / (q - 1), at the integer N = max(1,
      floor(1 / (pi |e|))) (capped): of
      order |e|^(q-1), the steepness of the kernel at u = 0;
    * where the interval [u~ - |e|, u~ + |e|] keeps off 0 (xi >= xi_lo = 2 pi (u~ - |e|)),
      the mean value theorem with |sum_k k^(1-q) sin(k xi)| <= S1(N) + (N + 1)^(1-q) pi /
      xi_lo (the tail by Abel summation: partial sums of sin(k xi) are at most
      1 / sin(xi / 2) <= pi / xi for xi <= pi, and k^(1-q) decreases), N = max(1,
      floor(1 / xi_lo)): 2 pi |e| times that.

    Exact differences (the common case: Sterbenz's lemma, equal exponents) add nothing.
    Found by review: q = 1.2, -0.3 against 0.7 (reduced to one double apart), an error of
    9e-3 against a bound of 3e-13."""
    A = a[:, None]
    c = -b[None, :]
    t = A + c
    z = t - A
    err = np.abs((A - (t - z)) + (c - z))
    dist = np.empty(t.shape)
    _gram.spline_distances(a, b, dist)  # the distance the kernel is evaluated at
    # across the wrap-around (|t| > 1/2) the distance is (1/2 - |a|) + (1/2 - |b|): three
    # roundings of non-negative terms, at most 3 u (1 + 4 u) of it
    wrap = np.abs(t) > 0.5
    err = np.where(wrap, 3.0 * _U64 * (1.0 + 4.0 * _U64) * dist, err)
    out = np.zeros(t.shape)
    rounded = err > 0.0
    if not rounded.any():
        return out
    e = err[rounded]
    u = dist[rounded]

    def s1(logN):
        x = (2.0 - q) * logN
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where(x != 0.0, np.expm1(x) / np.where(x != 0.0, x, 1.0), 1.0)
        return 1.0 + logN * ratio

    def split(x):
        # log of the integer split point max(1, floor(x)) (the sums' bounds need one)
        with np.errstate(over="ignore", divide="ignore"):
            return np.log(np.maximum(np.floor(np.minimum(x, 1e300)), 1.0))

    with np.errstate(over="ignore", divide="ignore"):  # 1 / (pi e) for a subnormal e
        logN = split(1.0 / (np.pi * e))
    everywhere = 2.0 * np.pi * e * s1(logN) + 2.0 * np.exp((1.0 - q) * logN) / (q - 1.0)
    xi = 2.0 * np.pi * (u - e) * (1.0 - 1e-12)
    off = xi > 0.0
    xi = np.where(off, xi, 1.0)
    logM = split(1.0 / xi)
    slope = s1(logM) + np.exp((1.0 - q) * np.log1p(np.exp(logM))) * np.pi / xi
    local = np.where(off, 2.0 * np.pi * e * slope, np.inf)
    out[rounded] = abs(w) * np.minimum(everywhere, local) * (1.0 + 1e-6)
    return out


def _column(X, j):
    """Column j as a dense float64 vector (X dense or CSC; never densifies the matrix)."""
    if sp.issparse(X):
        return np.ascontiguousarray(X[:, [j]].toarray(), dtype=np.float64).ravel()
    return np.ascontiguousarray(X[:, j], dtype=np.float64)
