"""Cython core of iterated Tikhonov (Beugnot et al. 2021): per-sample loss derivatives and the
data passes of one Newton iteration (z = Phi theta, Phi^T g, Phi^T diag(h) Phi).

Every kernel accumulates in float64 whatever the dtype of the data (float32 or
float64, dense C-order or CSR with int32/int64 indices), so a float32 input gives the
same Newton iterates up to the rounding of the data itself. The dense Hessian goes
through BLAS ``dsyrk`` on row blocks scaled by sqrt(h) (memory O(block * d)).
"""
from cython cimport floating, integral
from libc.math cimport exp, log1p, sqrt, fabs
from scipy.linalg.cython_blas cimport dsyrk, dgemv

# rows per block of the dense weighted Gram (bounded scratch memory)
cdef enum:
    BLOCK = 256


# ---------------------------------------------------------------- losses
def logistic_derivatives(const double[::1] z, const double[::1] y,
                         double[::1] grad, double[::1] hess):
    """Sum of log(1 + exp(-y z)) and, per sample, its first and second derivative in z.

    grad_i = -y_i sigma(-y_i z_i), hess_i = sigma(y_i z_i) sigma(-y_i z_i), in the
    stable forms (no exp of a positive number). Returns the loss sum (float64).
    """
    cdef Py_ssize_t i, n = z.shape[0]
    cdef double m, e, s, total = 0.0
    with nogil:
        for i in range(n):
            m = y[i] * z[i]
            if m > 0:
                e = exp(-m)
                total += log1p(e)
                s = e / (1.0 + e)            # sigma(-m)
            else:
                e = exp(m)
                total += -m + log1p(e)
                s = 1.0 / (1.0 + e)          # sigma(-m)
            grad[i] = -y[i] * s
            hess[i] = s * (1.0 - s)
    return total


def logistic_loss_sum(const double[::1] z, const double[::1] y):
    """Sum of log(1 + exp(-y z)) (stable)."""
    cdef Py_ssize_t i, n = z.shape[0]
    cdef double m, total = 0.0
    with nogil:
        for i in range(n):
            m = y[i] * z[i]
            if m > 0:
                total += log1p(exp(-m))
            else:
                total += -m + log1p(exp(m))
    return total


def squared_derivatives(const double[::1] z, const double[::1] y,
                        double[::1] grad, double[::1] hess):
    """Sum of (y - z)^2 / 2 and its derivatives z - y and 1."""
    cdef Py_ssize_t i, n = z.shape[0]
    cdef double r, total = 0.0
    with nogil:
        for i in range(n):
            r = z[i] - y[i]
            total += 0.5 * r * r
            grad[i] = r
            hess[i] = 1.0
    return total


def squared_loss_sum(const double[::1] z, const double[::1] y):
    """Sum of (y - z)^2 / 2."""
    cdef Py_ssize_t i, n = z.shape[0]
    cdef double r, total = 0.0
    with nogil:
        for i in range(n):
            r = z[i] - y[i]
            total += 0.5 * r * r
    return total


# ---------------------------------------------------------------- dense passes
def dense_matvec(const floating[:, ::1] X, const double[::1] w, double[::1] out):
    """out = X @ w, accumulated in float64."""
    cdef Py_ssize_t i, j, n = X.shape[0], d = X.shape[1]
    cdef int one = 1, ni = <int> n, di = <int> d
    cdef double alpha = 1.0, beta = 0.0, acc
    with nogil:
        if floating is double:
            # out = X @ w  (row-major X is the Fortran d x n matrix X^T: use 'T')
            dgemv(b"T", &di, &ni, &alpha, <double*> &X[0, 0], &di, <double*> &w[0], &one,
                  &beta, &out[0], &one)
        else:
            for i in range(n):
                acc = 0.0
                for j in range(d):
                    acc += X[i, j] * w[j]
                out[i] = acc


def dense_rmatvec(const floating[:, ::1] X, const double[::1] g, double[::1] out):
    """out = X.T @ g, accumulated in float64."""
    cdef Py_ssize_t i, j, n = X.shape[0], d = X.shape[1]
    cdef int one = 1, ni = <int> n, di = <int> d
    cdef double alpha = 1.0, beta = 0.0, gi
    with nogil:
        if floating is double:
            # out = X.T @ g  (the Fortran d x n matrix X^T times g: 'N')
            dgemv(b"N", &di, &ni, &alpha, <double*> &X[0, 0], &di, <double*> &g[0], &one,
                  &beta, &out[0], &one)
        else:
            for j in range(d):
                out[j] = 0.0
            for i in range(n):
                gi = g[i]
                if gi != 0.0:
                    for j in range(d):
                        out[j] += gi * X[i, j]


def dense_weighted_gram(const floating[:, ::1] X, const double[::1] h, double[:, ::1] H):
    """H = X.T @ diag(h) @ X (h >= 0), full symmetric matrix, float64.

    Blocks of BLOCK rows are scaled by sqrt(h) into a float64 scratch and accumulated
    with ``dsyrk``; the scratch is BLOCK x d, never n x d.
    """
    cdef Py_ssize_t i, j, k, start, stop, n = X.shape[0], d = X.shape[1]
    cdef double[:, ::1] buf = None
    cdef int di = <int> d, ki
    cdef double alpha = 1.0, beta = 0.0, s
    import numpy as np
    buf = np.empty((BLOCK, d), dtype=np.float64)
    with nogil:
        start = 0
        while start < n:
            stop = start + BLOCK
            if stop > n:
                stop = n
            for i in range(start, stop):
                s = sqrt(h[i]) if h[i] > 0 else 0.0
                for j in range(d):
                    buf[i - start, j] = s * X[i, j]
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


# ---------------------------------------------------------------- CSR passes
def csr_matvec(const floating[::1] data, const integral[::1] indices,
               const integral[::1] indptr, const double[::1] w, double[::1] out):
    """out = X @ w for CSR X, accumulated in float64."""
    cdef Py_ssize_t i, p, n = indptr.shape[0] - 1
    cdef double acc
    with nogil:
        for i in range(n):
            acc = 0.0
            for p in range(indptr[i], indptr[i + 1]):
                acc += data[p] * w[indices[p]]
            out[i] = acc


def csr_rmatvec(const floating[::1] data, const integral[::1] indices,
                const integral[::1] indptr, const double[::1] g, double[::1] out):
    """out = X.T @ g for CSR X, accumulated in float64 (out is overwritten)."""
    cdef Py_ssize_t i, p, n = indptr.shape[0] - 1, d = out.shape[0]
    cdef double gi
    with nogil:
        for p in range(d):
            out[p] = 0.0
        for i in range(n):
            gi = g[i]
            if gi != 0.0:
                for p in range(indptr[i], indptr[i + 1]):
                    out[indices[p]] += gi * data[p]


def csr_weighted_gram(const floating[::1] data, const integral[::1] indices,
                      const integral[::1] indptr, const double[::1] h, double[:, ::1] H):
    """H = X.T @ diag(h) @ X for CSR X with sorted indices (full symmetric, float64).

    One pass over the rows: each row adds h_i x_ij x_ik to the pairs of its non-zeros,
    O(sum_i nnz_i^2) work and no sparse temporaries.
    """
    cdef Py_ssize_t i, p, q, j, k, n = indptr.shape[0] - 1, d = H.shape[0]
    cdef double hi, v
    with nogil:
        for j in range(d):
            for k in range(d):
                H[j, k] = 0.0
        for i in range(n):
            hi = h[i]
            if hi == 0.0:
                continue
            for p in range(indptr[i], indptr[i + 1]):
                v = hi * data[p]
                j = indices[p]
                for q in range(p, indptr[i + 1]):
                    # sorted indices: indices[q] >= j, fill the upper triangle
                    H[j, indices[q]] += v * data[q]
        for j in range(d):
            for k in range(j + 1, d):
                H[k, j] = H[j, k]
