"""Cython core of iterated Tikhonov (Beugnot et al. 2021): per-sample loss derivatives and the
data passes of one Newton iteration (z = Phi theta, Phi^T g, Phi^T diag(h) Phi).

Every kernel accumulates in float64 whatever the dtype of the data (float32 or
float64, dense C-order or CSR with int32/int64 indices), so a float32 input gives the
same Newton iterates up to the rounding of the data itself. The dense Hessian goes
through BLAS ``dsyrk`` on row blocks scaled by sqrt(h) (memory O(block * d)).
"""
from libc.math cimport exp, log1p, sqrt, fabs
from scipy.linalg.cython_blas cimport dsyrk, dgemv

from marginkit.utils._rows cimport (DenseRows64, csr_rows_t, dense_rows_t, rows_t, row_axpy, row_dot,
                                    row_dot4)

# rows per block of the dense weighted Gram (bounded scratch memory)
cdef enum:
    BLOCK = 256


# ---------------------------------------------------------------- losses
# The loss sums are compensated (Neumaier): their rounding is about one unit of the sum
# whatever n, where a running sum's grows with n (sqrt(n) units in practice). The line
# search compares two such sums with a slack of 16 units: on 40,000 rows a running sum's
# noise passed or failed trial steps at random (steps of 1/2 to 1/64 on a squared loss
# whose Newton step is exact, found by review).
cdef inline void _add(double x, double* s, double* c) noexcept nogil:
    """s + c += x, Neumaier's compensated summation (c: the lost low-order parts)."""
    cdef double t = s[0] + x
    if fabs(s[0]) >= fabs(x):
        c[0] += (s[0] - t) + x
    else:
        c[0] += (x - t) + s[0]
    s[0] = t


cdef inline double _total(double s, double c) noexcept nogil:
    """The compensated sum s + c; s itself when it is not finite (an overflow: inf - inf
    in c would make the sum NaN, found by review)."""
    if s - s != 0.0:  # inf or NaN
        return s
    return s + c


def logistic_derivatives(const double[::1] z, const double[::1] y,
                         double[::1] grad, double[::1] hess):
    """Sum of log(1 + exp(-y z)) and, per sample, its first and second derivative in z.

    grad_i = -y_i sigma(-y_i z_i), hess_i = sigma(y_i z_i) sigma(-y_i z_i), in the
    stable forms (no exp of a positive number). Returns the loss sum (float64).
    """
    cdef Py_ssize_t i, n = z.shape[0]
    cdef double m, e, s, total = 0.0, comp = 0.0
    with nogil:
        for i in range(n):
            m = y[i] * z[i]
            if m > 0:
                e = exp(-m)
                _add(log1p(e), &total, &comp)
                s = e / (1.0 + e)            # sigma(-m)
            else:
                e = exp(m)
                _add(-m + log1p(e), &total, &comp)
                s = 1.0 / (1.0 + e)          # sigma(-m)
            grad[i] = -y[i] * s
            hess[i] = s * (1.0 - s)
    return _total(total, comp)


def logistic_loss_sum(const double[::1] z, const double[::1] y):
    """Sum of log(1 + exp(-y z)) (stable, compensated)."""
    cdef Py_ssize_t i, n = z.shape[0]
    cdef double m, total = 0.0, comp = 0.0
    with nogil:
        for i in range(n):
            m = y[i] * z[i]
            if m > 0:
                _add(log1p(exp(-m)), &total, &comp)
            else:
                _add(-m + log1p(exp(m)), &total, &comp)
    return _total(total, comp)


def squared_derivatives(const double[::1] z, const double[::1] y,
                        double[::1] grad, double[::1] hess):
    """Sum of (y - z)^2 / 2 (compensated) and its derivatives z - y and 1."""
    cdef Py_ssize_t i, n = z.shape[0]
    cdef double r, total = 0.0, comp = 0.0
    with nogil:
        for i in range(n):
            r = z[i] - y[i]
            _add(0.5 * r * r, &total, &comp)
            grad[i] = r
            hess[i] = 1.0
    return _total(total, comp)


def squared_loss_sum(const double[::1] z, const double[::1] y):
    """Sum of (y - z)^2 / 2 (compensated)."""
    cdef Py_ssize_t i, n = z.shape[0]
    cdef double r, total = 0.0, comp = 0.0
    with nogil:
        for i in range(n):
            r = z[i] - y[i]
            _add(0.5 * r * r, &total, &comp)
    return _total(total, comp)


# ---------------------------------------------------------------- data passes
def matvec(rows_t X, const double[::1] w, double[::1] out):
    """out = X @ w, accumulated in float64 (BLAS ``dgemv`` for dense float64 rows)."""
    cdef Py_ssize_t i
    cdef int one = 1, ni = <int> X.n, di = <int> X.d
    cdef double alpha = 1.0, beta = 0.0
    with nogil:
        if rows_t is DenseRows64:
            # out = X @ w  (row-major X is the Fortran d x n matrix X^T: use 'T')
            dgemv(b"T", &di, &ni, &alpha, <double*> X.data, &di, <double*> &w[0], &one,
                  &beta, &out[0], &one)
        else:
            for i in range(X.n):
                out[i] = row_dot(X, i, &w[0])


def rmatvec(rows_t X, const double[::1] g, double[::1] out):
    """out = X.T @ g, accumulated in float64 (out is overwritten; BLAS ``dgemv`` for dense
    float64 rows; no rows give zeros: BLAS returns at once on an empty product, leaving
    out as it was)."""
    cdef Py_ssize_t i, j
    cdef int one = 1, ni = <int> X.n, di = <int> X.d
    cdef double alpha = 1.0, beta = 0.0
    with nogil:
        if rows_t is DenseRows64 and ni > 0 and di > 0:
            # out = X.T @ g  (the Fortran d x n matrix X^T times g: 'N')
            dgemv(b"N", &di, &ni, &alpha, <double*> X.data, &di, <double*> &g[0], &one,
                  &beta, &out[0], &one)
        else:
            for j in range(X.d):
                out[j] = 0.0
            for i in range(X.n):
                if g[i] != 0.0:
                    row_axpy(X, i, g[i], &out[0])


def hessian_matvec(rows_t X, const double[::1] v, double b, const double[::1] h,
                   double[::1] out):
    """out = X.T @ (h * (X @ v + b)) in one pass over the rows (each row read once: its
    product with v, then out += h_i (x_i . v + b) x_i); returns sum_i h_i (x_i . v + b).

    The Hessian-vector product of the Newton systems solved by conjugate gradients: one
    read of X instead of the two of ``matvec`` then ``rmatvec``, which on data larger than
    the caches is what a product costs. The row products use four partial sums; dense
    float64 rows go by blocks of BLOCK rows through two BLAS ``dgemv`` (the block's
    products with v, then out += block.T @ c), the block still in cache for the second.
    """
    cdef Py_ssize_t i, j, start, stop
    cdef double c, total = 0.0
    cdef double cbuf[BLOCK]
    cdef int one = 1, di = <int> X.d, ki
    cdef double alpha = 1.0, zero = 0.0
    if v.shape[0] != X.d or out.shape[0] != X.d or h.shape[0] != X.n:
        raise ValueError(f"hessian_matvec: v ({v.shape[0]}) and out ({out.shape[0]}) need "
                         f"the rows' {X.d} entries, h ({h.shape[0]}) one per row ({X.n})")
    with nogil:
        for j in range(X.d):
            out[j] = 0.0
        if rows_t is DenseRows64 and X.d == 0:
            for i in range(X.n):
                total += h[i] * b
        elif rows_t is DenseRows64:
            start = 0
            while start < X.n:
                stop = start + BLOCK
                if stop > X.n:
                    stop = X.n
                ki = <int> (stop - start)
                # cbuf = block @ v  (the row-major block is the Fortran d x ki matrix: 'T')
                dgemv(b"T", &di, &ki, &alpha, <double*> X.data + start * X.d, &di,
                      <double*> &v[0], &one, &zero, &cbuf[0], &one)
                for i in range(ki):
                    c = h[start + i] * (cbuf[i] + b)
                    cbuf[i] = c
                    total += c
                # out += block.T @ cbuf  ('N')
                dgemv(b"N", &di, &ki, &alpha, <double*> X.data + start * X.d, &di,
                      &cbuf[0], &one, &alpha, &out[0], &one)
                start = stop
        else:
            for i in range(X.n):
                c = h[i] * (row_dot4(X, i, &v[0]) + b)
                total += c
                if c != 0.0:
                    row_axpy(X, i, c, &out[0])
    return total


def weighted_gram(rows_t X, const double[::1] h, double[:, ::1] H):
    """H = X.T @ diag(h) @ X (h >= 0), full symmetric matrix, float64.

    Dense rows: blocks of BLOCK rows are scaled by sqrt(h) into a float64 scratch and
    accumulated with ``dsyrk``; the scratch is BLOCK x d, never n x d. CSR rows (sorted
    indices): one pass over the rows, each adding h_i x_ij x_ik to the pairs of its
    non-zeros, O(sum_i nnz_i^2) work and no sparse temporaries; or, when the rows fill a
    quarter of their columns or more (sum_i nnz_i^2 >= n d^2 / 16, where ``dsyrk``'s
    O(n d^2) is the faster), scattered into the dense scratch like dense rows.
    """
    cdef Py_ssize_t i, j, k, p, q, start, stop, n = X.n, d = X.d
    cdef double[:, ::1] buf = None
    cdef int di = <int> d, ki
    cdef double alpha = 1.0, beta = 0.0, s, hi, v, pairs = 0.0
    cdef bint scratch = rows_t in dense_rows_t
    if rows_t in csr_rows_t:
        for i in range(n):
            pairs += <double>(X.indptr[i + 1] - X.indptr[i]) ** 2
        scratch = d > 0 and pairs * 16.0 >= <double>n * <double>d * <double>d
    if scratch:
        import numpy as np
        buf = np.empty((BLOCK, d), dtype=np.float64)
    with nogil:
        if scratch:
            start = 0
            while start < n:
                stop = start + BLOCK
                if stop > n:
                    stop = n
                for i in range(start, stop):
                    s = sqrt(h[i]) if h[i] > 0 else 0.0
                    if rows_t in dense_rows_t:
                        for j in range(d):
                            buf[i - start, j] = s * X.data[i * d + j]
                    else:
                        for j in range(d):
                            buf[i - start, j] = 0.0
                        for p in range(X.indptr[i], X.indptr[i + 1]):
                            buf[i - start, X.indices[p]] += s * X.data[p]
                ki = <int> (stop - start)
                # H += B.T @ B with B = buf[:ki] (row-major B is the Fortran d x ki matrix
                # B^T, so 'N' computes B^T B; Fortran 'U' is the lower triangle in C order)
                dsyrk(b"U", b"N", &di, &ki, &alpha, &buf[0, 0], &di, &beta, &H[0, 0], &di)
                beta = 1.0
                start = stop
            if n == 0:
                for j in range(d):
                    for k in range(d):
                        H[j, k] = 0.0
            # mirror the lower triangle (C order) into the upper one
            for j in range(d):
                for k in range(j + 1, d):
                    H[j, k] = H[k, j]
        elif rows_t in csr_rows_t:  # (compile-time: dense rows always take the scratch)
            for j in range(d):
                for k in range(d):
                    H[j, k] = 0.0
            for i in range(n):
                hi = h[i]
                if hi == 0.0:
                    continue
                for p in range(X.indptr[i], X.indptr[i + 1]):
                    v = hi * X.data[p]
                    j = X.indices[p]
                    for q in range(p, X.indptr[i + 1]):
                        # sorted indices: indices[q] >= j, fill the upper triangle
                        H[j, X.indices[q]] += v * X.data[q]
            for j in range(d):
                for k in range(j + 1, d):
                    H[k, j] = H[j, k]


# the per-layout kernels dispatch on the row block's class through a table (see
# ``marginkit.utils._rows.ByLayout``: Cython's dispatch costs microseconds per call)
from marginkit.utils._rows import dispatch_by_layout  # noqa: E402

dispatch_by_layout(globals())
