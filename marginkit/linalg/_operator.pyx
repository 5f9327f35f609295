"""Products with the normalized signed Gram matrix of Ramdas & Pena 2014 (sec. 3).

    G_ij = y_i y_j K(x_i, x_j) / sqrt(K(x_i, x_i) K(x_j, x_j))        (normalized)
    G_ij = y_i y_j K(x_i, x_j)                                          (unnormalized)

Every algorithm of the perceptron / von Neumann family only touches G through
``G a`` and ``G e_j``. Two implementations:

``FeatureOperator``
    Kernels with an explicit feature map Phi (the linear kernel: Phi = X). With
    S = diag(s), s_i = y_i / ||phi_i||, ``G a = S Phi (Phi^T (S a))`` costs two passes
    over the nonzeros of Phi through a d-vector; G is never formed and X is never
    copied or modified (dense C or F order, or CSR with int32/int64 indices;
    float32 or float64 data; accumulation in float64).
``DenseGramOperator``
    Any other kernel: a private n x n G built from the kernel's Gram block and
    normalized and signed in place. Refused when it would exceed
    ``config.memory_budget``.

``make_operator(problem)`` picks one.

The CSR and float32 products run on one thread: a row-parallel OpenMP version of the CSR
products was measured and did not pay (docs/perceptron.md). The float64 dense ones go
through BLAS ``dgemv`` and use as many threads as the BLAS library is allowed
(``threadpoolctl.threadpool_limits`` or ``OMP_NUM_THREADS`` control it).
``Phi^T S a`` skips the rows with a_i = 0: the CSR and float32 loops always, the float64
dense layouts when a has at most n/4 nonzeros (the l2 smoother's sparse projections),
instead of ``dgemv`` over all rows.
"""
import numpy as np
import scipy.sparse as sp

from .._validation import checked_csr
from ._norms import row_norms

from cython cimport floating
from libc.math cimport NAN, sqrt
from libc.stdlib cimport free, malloc
from libc.string cimport memset
from scipy.linalg.cython_blas cimport dgemv

from marginkit.utils._rows cimport (
    CSRRows32I32, CSRRows32I64, CSRRows64I32, CSRRows64I64, DenseRows32, DenseRows64, rows_t,
    row_axpy as rows_axpy, row_dot as rows_dot)
from marginkit.utils._rows import row_block

__all__ = ["GramOperator", "FeatureOperator", "DenseGramOperator", "make_operator"]

# layouts of FeatureOperator: a row block of each class (C order or CSR), or F order
cdef enum:
    C64 = 0
    C32 = 1
    F64 = 2
    F32 = 3
    CSR64_32 = 4
    CSR64_64 = 5
    CSR32_32 = 6
    CSR32_64 = 7

_ROW_LAYOUTS = {DenseRows64: C64, DenseRows32: C32, CSRRows64I32: CSR64_32,
                CSRRows64I64: CSR64_64, CSRRows32I32: CSR32_32, CSRRows32I64: CSR32_64}

_BUILTIN_FRESH_GRAM = ("rbf", "poly", "laplacian", "spline", "linear")


def _zero_rows_error(bad, what):
    bad = np.asarray(bad)
    return ValueError(
        f"row(s) {bad[:10].tolist()}{' ...' if bad.size > 10 else ''} of X have K(x, x) = 0"
        f" ({what}); the normalized Gram is undefined there: remove those rows or use a kernel "
        "with K(x, x) > 0"
    )


# --------------------------------------------------------------------------- base
cdef class GramOperator:
    """Abstract product with G. Subclasses implement ``matvec`` and ``column``."""

    cdef void matvec(self, const double* a, double* out) noexcept nogil:
        pass

    cdef void column(self, Py_ssize_t j, double* out) noexcept nogil:
        pass

    cdef void entries(self, Py_ssize_t j, const Py_ssize_t* rows, Py_ssize_t m,
                      double* out) noexcept nogil:
        """out[t] = G[rows[t], j] for t < m. Subclasses read the entries without forming
        column j; this fallback forms it (one ``column``)."""
        cdef Py_ssize_t t
        cdef double* buf = <double*>malloc(self.n * sizeof(double))
        if buf == NULL:
            for t in range(m):
                out[t] = NAN
            return
        self.column(j, buf)
        for t in range(m):
            out[t] = buf[rows[t]]
        free(buf)

    @property
    def scale(self):
        """s with G = diag(s) K diag(s): y_i / sqrt(K_ii), or y_i when unnormalized."""
        return np.asarray(self._scale).copy()

    @property
    def sqrt_diag(self):
        """sqrt(K(x_i, x_i))."""
        return np.asarray(self._sqrt_diag).copy()

    def dot(self, a):
        """G a as a float64 array (Python wrapper of ``matvec``)."""
        cdef double[::1] av = np.ascontiguousarray(a, dtype=np.float64).ravel()
        if av.shape[0] != self.n:
            raise ValueError(f"a has length {av.shape[0]}, expected n={self.n}")
        out = np.empty(self.n, dtype=np.float64)
        cdef double[::1] ov = out
        with nogil:
            self.matvec(&av[0], &ov[0])
        return out

    def col(self, Py_ssize_t j):
        """G e_j as a float64 array (Python wrapper of ``column``)."""
        if j < 0 or j >= self.n:
            raise IndexError(f"column index {j} out of range for n={self.n}")
        out = np.empty(self.n, dtype=np.float64)
        cdef double[::1] ov = out
        with nogil:
            self.column(j, &ov[0])
        return out

    def col_entries(self, Py_ssize_t j, rows):
        """G[rows, j] as a float64 array (Python wrapper of ``entries``)."""
        cdef Py_ssize_t[::1] rv = np.ascontiguousarray(rows, dtype=np.intp).ravel()
        cdef Py_ssize_t t, m = rv.shape[0]
        if j < 0 or j >= self.n:
            raise IndexError(f"column index {j} out of range for n={self.n}")
        for t in range(m):
            if rv[t] < 0 or rv[t] >= self.n:
                raise IndexError(f"row index {rv[t]} out of range for n={self.n}")
        out = np.empty(m, dtype=np.float64)
        cdef double[::1] ov = out
        if m:
            with nogil:
                self.entries(j, &rv[0], m, &ov[0])
        return out


# --------------------------------------------------------------------------- feature space
# The passes over C-order or CSR rows: one row block of marginkit.utils._rows, each pass
# compiled once per layout (dense float64 rows through BLAS dgemv).
cdef inline Py_ssize_t _scale_u(const double* s, const double* a, double* u,
                                Py_ssize_t n) noexcept nogil:
    # u = s * a (the BLAS paths' scratch); returns the number of nonzeros of u
    cdef Py_ssize_t i, nz = 0
    for i in range(n):
        u[i] = s[i] * a[i]
        nz += u[i] != 0.0
    return nz


cdef void _rows_rmatvec(rows_t X, const double* s, const double* a, double* u,
                        double* w) noexcept nogil:
    # w = Phi^T (s * a) over the rows with a_i != 0; dense float64 rows with more than n/4
    # of them: w = X^T u by dgemv, u = s * a (an n-vector scratch)
    cdef int inc = 1, m = <int>X.d, k = <int>X.n
    cdef double one = 1.0, zero = 0.0, ui
    cdef Py_ssize_t i
    if rows_t is DenseRows64:
        if _scale_u(s, a, u, X.n) * 4 > X.n:
            # C-order X is the Fortran d x n matrix X^T: 'N' gives X^T u
            dgemv(b"N", &m, &k, &one, <double*>X.data, &m, u, &inc, &zero, w, &inc)
            return
    memset(w, 0, X.d * sizeof(double))
    for i in range(X.n):
        ui = s[i] * a[i]
        if ui != 0.0:
            rows_axpy(X, i, ui, w)


cdef void _rows_fmatvec(rows_t X, const double* s, const double* w, double* out) noexcept nogil:
    # out = s * (Phi w)
    cdef int inc = 1, m = <int>X.d, k = <int>X.n
    cdef double one = 1.0, zero = 0.0
    cdef Py_ssize_t i
    if rows_t is DenseRows64:
        # C-order X is the Fortran d x n matrix X^T: 'T' gives X w
        dgemv(b"T", &m, &k, &one, <double*>X.data, &m, <double*>w, &inc, &zero, out, &inc)
        for i in range(X.n):
            out[i] *= s[i]
    else:
        for i in range(X.n):
            out[i] = s[i] * rows_dot(X, i, w)


# The passes over an F-order Phi (by columns).
cdef void _f_rmatvec_rows(const double[::1, :] X, const double* u, double* w,
                          Py_ssize_t n, Py_ssize_t d) noexcept nogil:
    # w = X^T u over the rows with u_i != 0 only
    cdef Py_ssize_t i, j
    cdef double ui
    memset(w, 0, d * sizeof(double))
    for i in range(n):
        ui = u[i]
        if ui != 0.0:
            for j in range(d):
                w[j] += X[i, j] * ui


cdef void _f_rmatvec(const floating[::1, :] X, const double* s, const double* a, double* w,
                     Py_ssize_t n, Py_ssize_t d) noexcept nogil:
    cdef Py_ssize_t i, j
    cdef double acc
    for j in range(d):
        acc = 0.0
        for i in range(n):
            acc += X[i, j] * (s[i] * a[i])
        w[j] = acc


cdef void _f_fmatvec(const floating[::1, :] X, const double* s, const double* w, double* out,
                     Py_ssize_t n, Py_ssize_t d) noexcept nogil:
    cdef Py_ssize_t i, j
    cdef double wj
    memset(out, 0, n * sizeof(double))
    for j in range(d):
        wj = w[j]
        if wj != 0.0:
            for i in range(n):
                out[i] += X[i, j] * wj
    for i in range(n):
        out[i] *= s[i]


cdef inline void _f_add_row(const floating[::1, :] X, Py_ssize_t j, double c, double* w,
                            Py_ssize_t d) noexcept nogil:
    cdef Py_ssize_t t
    for t in range(d):
        w[t] += c * X[j, t]


cdef inline double _f_row_dot(const floating[::1, :] X, Py_ssize_t i, const double* w,
                              Py_ssize_t d) noexcept nogil:
    cdef Py_ssize_t t
    cdef double acc = 0.0
    for t in range(d):
        acc += X[i, t] * w[t]
    return acc


#: row norms a Gram operator accepts: its products divide by them (normalized) or multiply
#: their squares (unnormalized), which must stay finite and nonzero in float64
_NORM_RANGE = {True: (2.0**-1000, 2.0**1000), False: (2.0**-500, 2.0**500)}


def _scale_error(sd, normalize):
    lo, hi = _NORM_RANGE[bool(normalize)]
    bad = np.flatnonzero((sd > 0) & ((sd < lo) | (sd > hi)))
    if not bad.size:
        return None
    what = ("the normalized Gram divides each row by its norm" if normalize else
            "the classic perceptron works with the raw Gram X X^T (squared norms)")
    return ValueError(
        f"X has rows with norms {float(sd[bad[0]]):.3g} (row {int(bad[0])}"
        f"{' and others' if bad.size > 1 else ''}) outside [{lo:.3g}, {hi:.3g}]: {what}, "
        "which overflows or underflows float64 there; rescale X (any positive factor gives "
        "the same iterates)"
    )


cdef class FeatureOperator(GramOperator):
    """G through an explicit feature map: ``G a = S Phi (Phi^T (S a))`` in O(nnz(Phi)).

    C-order and CSR rows are read through one row block (``marginkit.utils._rows``,
    ``rows``), F-order ones by columns.

    Parameters
    ----------
    Phi : ndarray (C or F order) or CSR matrix, float32 or float64, shape (n, d)
        Feature matrix (X itself for the linear kernel). Kept by reference, never
        copied or modified (a non-contiguous dense array is copied once).
    y : ndarray of +-1, shape (n,)
    normalize : bool, default True
        Use the normalized Gram (Ramdas & Pena 2014, sec. 3) or the unnormalized signed Gram
        ``Y K Y`` of the classic perceptron.
    """

    def __init__(self, Phi, y, bint normalize=True):
        y = np.asarray(y, dtype=np.float64).ravel()
        if sp.issparse(Phi):
            # a feature map may be any plug-in's: its structure is checked before the
            # kernels below read it (one index dtype, int32 or int64, canonical CSR)
            Phi = checked_csr(Phi, "feature_map(X)")
            if Phi.dtype not in (np.float32, np.float64):
                Phi = Phi.astype(np.float64)
        else:
            Phi = np.asarray(Phi)
            if Phi.dtype not in (np.float32, np.float64):
                Phi = Phi.astype(np.float64)
            if not (Phi.flags.c_contiguous or Phi.flags.f_contiguous):
                Phi = np.ascontiguousarray(Phi)
        if Phi.ndim != 2 or Phi.shape[0] != y.shape[0]:
            raise ValueError(f"feature matrix of shape {Phi.shape} does not match {y.shape[0]} labels")
        self.n, self.d = Phi.shape
        self.normalize = normalize
        self._phi = Phi
        sd = row_norms(Phi)
        bad = np.flatnonzero(~(sd > 0))
        if bad.size:
            raise _zero_rows_error(bad, "all-zero feature rows")
        err = _scale_error(sd, normalize)
        if err is not None:
            raise err
        self._sqrt_diag = sd
        self._scale = y / sd if normalize else y.copy()
        self._w = np.zeros(max(self.d, 1))
        self._u = np.zeros(max(self.n, 1))
        if sp.issparse(Phi) or Phi.flags.c_contiguous:
            self.rows = row_block(Phi)
            self.layout = _ROW_LAYOUTS[type(self.rows)]
        elif Phi.dtype == np.float64:
            self._f64 = Phi
            self.layout = F64
        else:
            self._f32 = Phi
            self.layout = F32

    @property
    def phi(self):
        """The feature matrix (the caller's object for the linear kernel)."""
        return self._phi

    cdef void rmatvec(self, const double* a, double* w) noexcept nogil:
        """w = Phi^T S a (a d-vector: the primal weights of a in feature space)."""
        cdef int inc = 1, m = <int>self.n, k = <int>self.d
        cdef double one = 1.0, zero = 0.0
        cdef const double* s = &self._scale[0]
        cdef double* u = &self._u[0]
        if self.layout == C64:
            _rows_rmatvec(<DenseRows64>self.rows, s, a, u, w)
        elif self.layout == C32:
            _rows_rmatvec(<DenseRows32>self.rows, s, a, u, w)
        elif self.layout == CSR64_32:
            _rows_rmatvec(<CSRRows64I32>self.rows, s, a, u, w)
        elif self.layout == CSR64_64:
            _rows_rmatvec(<CSRRows64I64>self.rows, s, a, u, w)
        elif self.layout == CSR32_32:
            _rows_rmatvec(<CSRRows32I32>self.rows, s, a, u, w)
        elif self.layout == CSR32_64:
            _rows_rmatvec(<CSRRows32I64>self.rows, s, a, u, w)
        elif self.layout == F64:
            if _scale_u(s, a, u, self.n) * 4 <= self.n:
                # a sparse a (the l2 smoother's projections): only its rows
                _f_rmatvec_rows(self._f64, u, w, self.n, self.d)
            else:
                # w = X.T @ u  (F-order X is the Fortran n x d matrix X)
                dgemv(b"T", &m, &k, &one, <double*>&self._f64[0, 0], &m, u, &inc, &zero, w,
                      &inc)
        else:
            _f_rmatvec(self._f32, s, a, w, self.n, self.d)

    cdef void fmatvec(self, const double* w, double* out) noexcept nogil:
        """out = S Phi w."""
        cdef int inc = 1, m = <int>self.n, k = <int>self.d
        cdef double one = 1.0, zero = 0.0
        cdef Py_ssize_t i
        cdef const double* s = &self._scale[0]
        if self.layout == C64:
            _rows_fmatvec(<DenseRows64>self.rows, s, w, out)
        elif self.layout == C32:
            _rows_fmatvec(<DenseRows32>self.rows, s, w, out)
        elif self.layout == CSR64_32:
            _rows_fmatvec(<CSRRows64I32>self.rows, s, w, out)
        elif self.layout == CSR64_64:
            _rows_fmatvec(<CSRRows64I64>self.rows, s, w, out)
        elif self.layout == CSR32_32:
            _rows_fmatvec(<CSRRows32I32>self.rows, s, w, out)
        elif self.layout == CSR32_64:
            _rows_fmatvec(<CSRRows32I64>self.rows, s, w, out)
        elif self.layout == F64:
            # out = X @ w  (F-order X is the Fortran n x d matrix X)
            dgemv(b"N", &m, &k, &one, <double*>&self._f64[0, 0], &m, <double*>w, &inc, &zero,
                  out, &inc)
            for i in range(self.n):
                out[i] *= s[i]
        else:
            _f_fmatvec(self._f32, s, w, out, self.n, self.d)

    cdef void add_row(self, Py_ssize_t j, double c, double* w) noexcept nogil:
        """w += c * s_j * phi_j."""
        cdef double cs = c * self._scale[j]
        if self.layout == C64:
            rows_axpy(<DenseRows64>self.rows, j, cs, w)
        elif self.layout == C32:
            rows_axpy(<DenseRows32>self.rows, j, cs, w)
        elif self.layout == CSR64_32:
            rows_axpy(<CSRRows64I32>self.rows, j, cs, w)
        elif self.layout == CSR64_64:
            rows_axpy(<CSRRows64I64>self.rows, j, cs, w)
        elif self.layout == CSR32_32:
            rows_axpy(<CSRRows32I32>self.rows, j, cs, w)
        elif self.layout == CSR32_64:
            rows_axpy(<CSRRows32I64>self.rows, j, cs, w)
        elif self.layout == F64:
            _f_add_row(self._f64, j, cs, w, self.d)
        else:
            _f_add_row(self._f32, j, cs, w, self.d)

    cdef double row_dot(self, Py_ssize_t i, const double* w) noexcept nogil:
        """phi_i . w (unscaled), accumulated in float64."""
        if self.layout == C64:
            return rows_dot(<DenseRows64>self.rows, i, w)
        elif self.layout == C32:
            return rows_dot(<DenseRows32>self.rows, i, w)
        elif self.layout == CSR64_32:
            return rows_dot(<CSRRows64I32>self.rows, i, w)
        elif self.layout == CSR64_64:
            return rows_dot(<CSRRows64I64>self.rows, i, w)
        elif self.layout == CSR32_32:
            return rows_dot(<CSRRows32I32>self.rows, i, w)
        elif self.layout == CSR32_64:
            return rows_dot(<CSRRows32I64>self.rows, i, w)
        elif self.layout == F64:
            return _f_row_dot(self._f64, i, w, self.d)
        else:
            return _f_row_dot(self._f32, i, w, self.d)

    cdef void matvec(self, const double* a, double* out) noexcept nogil:
        self.rmatvec(a, &self._w[0])
        self.fmatvec(&self._w[0], out)

    cdef void column(self, Py_ssize_t j, double* out) noexcept nogil:
        memset(&self._w[0], 0, self.d * sizeof(double))
        self.add_row(j, 1.0, &self._w[0])
        self.fmatvec(&self._w[0], out)

    cdef void entries(self, Py_ssize_t j, const Py_ssize_t* rows, Py_ssize_t m,
                      double* out) noexcept nogil:
        # w = s_j phi_j once, then s_r phi_r . w for each requested row r
        cdef Py_ssize_t t
        memset(&self._w[0], 0, self.d * sizeof(double))
        self.add_row(j, 1.0, &self._w[0])
        for t in range(m):
            out[t] = self._scale[rows[t]] * self.row_dot(rows[t], &self._w[0])

    def primal(self, a):
        """Phi^T S a: the weight vector sum_i a_i s_i phi_i in feature space (float64)."""
        cdef double[::1] av = np.ascontiguousarray(a, dtype=np.float64).ravel()
        if av.shape[0] != self.n:
            raise ValueError(f"a has length {av.shape[0]}, expected n={self.n}")
        out = np.zeros(max(self.d, 1))
        cdef double[::1] ov = out
        with nogil:
            self.rmatvec(&av[0], &ov[0])
        return out[: self.d]

    def features_dot(self, w):
        """S Phi w for a d-vector w (float64)."""
        cdef double[::1] wv = np.ascontiguousarray(w, dtype=np.float64).ravel()
        if wv.shape[0] != self.d:
            raise ValueError(f"w has length {wv.shape[0]}, expected d={self.d}")
        out = np.empty(self.n)
        cdef double[::1] ov = out
        with nogil:
            self.fmatvec(&wv[0], &ov[0])
        return out


# --------------------------------------------------------------------------- dense Gram
cdef void _scale_gram(floating[:, ::1] G, const double[::1] s) noexcept nogil:
    # G_ij <- s_i s_j G_ij, computed in float64
    cdef Py_ssize_t i, j, n = G.shape[0]
    cdef double si
    for i in range(n):
        si = s[i]
        for j in range(n):
            G[i, j] = <floating>(si * s[j] * G[i, j])


cdef inline double _row_dot32(const float[:, ::1] G, Py_ssize_t i, const double* a,
                              Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t j
    cdef double acc = 0.0
    for j in range(n):
        acc += G[i, j] * a[j]
    return acc


cdef void _gram_matvec32(const float[:, ::1] G, const double* a, double* out) noexcept nogil:
    # out = G @ a, accumulated in float64
    cdef Py_ssize_t i, n = G.shape[0]
    for i in range(n):
        out[i] = _row_dot32(G, i, a, n)


cdef class DenseGramOperator(GramOperator):
    """G held as a private dense n x n matrix (float32 input keeps a float32 G).

    Parameters
    ----------
    K : ndarray, shape (n, n)
        The kernel's Gram block K(X, X). Taken over and normalized in place when
        ``owned`` is True; otherwise copied first.
    y : ndarray of +-1
    normalize : bool
    dtype : float32 or float64
    owned : bool
        K is a fresh array nobody else holds (a built-in kernel's output).
    """

    def __init__(self, K, y, bint normalize=True, dtype=np.float64, owned=False):
        y = np.asarray(y, dtype=np.float64).ravel()
        dtype = np.dtype(dtype)
        if sp.issparse(K):
            K = K.toarray()
            owned = True
        K = np.asarray(K)
        if K.ndim != 2 or K.shape[0] != K.shape[1] or K.shape[0] != y.shape[0]:
            raise ValueError(f"Gram matrix of shape {K.shape} does not match {y.shape[0]} labels")
        if owned and K.dtype == dtype and K.flags.c_contiguous and K.flags.writeable:
            G = K
        else:
            G = np.array(K, dtype=dtype, order="C", copy=True)
        if not np.isfinite(G).all():
            raise ValueError(
                "the Gram matrix K(X, X) has non-finite entries (the kernel's values overflow "
                f"{G.dtype}): rescale X (e.g. to unit-norm rows) or change the kernel's "
                "parameters (degree, gamma, coef0)")
        diag = np.diag(G).astype(np.float64)
        bad = np.flatnonzero(~(diag > 0))
        if bad.size:
            raise _zero_rows_error(bad, "zero or negative kernel diagonal")
        self.n = G.shape[0]
        self.normalize = normalize
        sd = np.sqrt(diag)
        self._sqrt_diag = sd
        self._scale = y / sd if normalize else y.copy()
        self.single = dtype == np.float32
        self._G = G
        if self.single:
            self._g32 = G
            with nogil:
                _scale_gram(self._g32, self._scale)
        else:
            self._g64 = G
            with nogil:
                _scale_gram(self._g64, self._scale)

    @property
    def gram(self):
        """A copy of G (for tests)."""
        return np.array(self._G, dtype=np.float64)

    cdef void matvec(self, const double* a, double* out) noexcept nogil:
        cdef int inc = 1, m = <int>self.n
        cdef double one = 1.0, zero = 0.0
        cdef char trans = b'N'
        if self.single:
            _gram_matvec32(self._g32, a, out)
        else:
            # out = G @ a  (G symmetric, so its Fortran view is G itself)
            dgemv(&trans, &m, &m, &one, &self._g64[0, 0], &m, <double*>a, &inc, &zero, out, &inc)

    cdef void column(self, Py_ssize_t j, double* out) noexcept nogil:
        cdef Py_ssize_t i
        if self.single:
            for i in range(self.n):
                out[i] = self._g32[j, i]
        else:
            for i in range(self.n):
                out[i] = self._g64[j, i]

    cdef void entries(self, Py_ssize_t j, const Py_ssize_t* rows, Py_ssize_t m,
                      double* out) noexcept nogil:
        cdef Py_ssize_t t
        # row j, as ``column`` and the products read it (G is symmetric only to tolerance)
        if self.single:
            for t in range(m):
                out[t] = self._g32[j, rows[t]]
        else:
            for t in range(m):
                out[t] = self._g64[j, rows[t]]


# --------------------------------------------------------------------------- factory
def _gram_bytes(n, itemsize):
    return float(n) * float(n) * float(itemsize)


def check_gram_budget(n, dtype, budget):
    """Raise ValueError when an n x n Gram of ``dtype`` exceeds ``budget`` bytes."""
    need = _gram_bytes(n, np.dtype(dtype).itemsize)
    if need > budget:
        raise ValueError(
            f"n={n} needs {need / 2**30:.3g} GiB for the Gram matrix; raise memory_budget or "
            f"use a kernel approximation (memory_budget is {budget / 2**30:.3g} GiB)"
        )


def make_operator(problem, normalize=True):
    """The Gram operator of ``problem`` (a ``marginkit.plugins.Problem``).

    Kernels with a ``feature_map`` give a ``FeatureOperator`` (no n x n matrix); other
    kernels, and ``precomputed`` ones (X is the Gram), a ``DenseGramOperator`` within
    ``problem.config.memory_budget``.

    Parameters
    ----------
    problem : Problem
    normalize : bool, default True
        False gives the unnormalized signed Gram ``Y K Y`` (classic perceptron).
    """
    X, y, kernel = problem.X, problem.y, problem.kernel
    n = X.shape[0]
    budget = getattr(problem.config, "memory_budget", 2.0 * 2**30)
    dtype = np.float32 if X.dtype == np.float32 else np.float64
    if getattr(kernel, "precomputed", False):
        check_gram_budget(n, dtype, budget)
        return DenseGramOperator(X, y, normalize=normalize, dtype=dtype, owned=False)
    if getattr(kernel, "feature_map", None) is not None:
        from .._referee import feature_rows

        return FeatureOperator(feature_rows(kernel, X), y, normalize=normalize)
    check_gram_budget(n, dtype, budget)
    K = kernel(X, X)
    owned = (getattr(kernel, "name", None) in _BUILTIN_FRESH_GRAM
             and isinstance(K, np.ndarray) and not np.may_share_memory(K, X))
    return DenseGramOperator(K, y, normalize=normalize, dtype=dtype, owned=owned)
