"""Cython loops of the exact-kernel SVM solvers (``marginkit.solvers._kernel_svm``).

The dual variables r, the box gamma (an n-vector, the scalar broadcast when unweighted)
and the labels y are float64 n-vectors; the kernel products K (y * r) are computed by the
caller (BLAS on a held Gram, or blocks of the kernel) and passed in. The Gram matrix, when
these loops read it, is the float64 n x n matrix held by the caller (row i = column i: it
is symmetric) or a column handed over by the caller's column cache.

Formulations (docs/svm.md, "Exact kernels"): ``augmented`` (H-SVM, intercept
regularized) has Q = Y (K + 1 1^T) Y + mu I, i.e. the margin theta_i = y_i (f_i + t) with
f = K (y * r) and t = y^T r; otherwise (classical SVM) Q = Y K Y + mu I.
"""
import numpy as np
from libc.math cimport sqrt, fabs, INFINITY


cdef inline double _clip(double v, double hi) noexcept nogil:
    if v < 0.0:
        return 0.0
    if v > hi:
        return hi
    return v


def fista_point(const double[::1] r, const double[::1] r_prev, const double[::1] f,
                const double[::1] f_prev, const double[::1] y, const double[::1] gamma,
                double t, double t_prev, double beta, double L, double mu, bint augmented,
                double[::1] yk, double[::1] out):
    """The extrapolated point y_k = r + beta (r - r_prev) and the gradient step from it.

    ``f`` = K (y * r), ``f_prev`` = K (y * r_prev): K (y * y_k) = (1 + beta) f - beta f_prev
    by linearity (exact up to rounding, no product). ``t``, ``t_prev`` are y^T r and
    y^T r_prev (H-SVM; ignored otherwise). Writes y_k into ``yk`` and
    y_k + grad g(y_k) / L into ``out``; with ``augmented`` ``out`` is then clipped to the box
    [0, gamma_i] (the classical SVM projects onto the box and the hyperplane afterwards).
    Returns ||y_k - out||^2 (meaningful for ``augmented``; 0 otherwise).
    """
    cdef Py_ssize_t i, n = r.shape[0]
    cdef double b1 = 1.0 + beta, ti = 0.0, g, v, dsq = 0.0, dd
    if augmented:
        ti = b1 * t - beta * t_prev
    with nogil:
        for i in range(n):
            v = b1 * r[i] - beta * r_prev[i]
            yk[i] = v
            g = 1.0 - mu * v - y[i] * (b1 * f[i] - beta * f_prev[i] + ti)
            v = v + g / L
            if augmented:
                v = _clip(v, gamma[i])
                dd = yk[i] - v
                dsq += dd * dd
            out[i] = v
    return dsq


def diff_sq(const double[::1] a, const double[::1] b):
    """||a - b||^2."""
    cdef Py_ssize_t i, n = a.shape[0]
    cdef double acc = 0.0, d
    with nogil:
        for i in range(n):
            d = a[i] - b[i]
            acc += d * d
    return acc


def projected_gradient_sq(const double[::1] G, const double[::1] r, const double[::1] gamma):
    """||p(r)||^2 for the minimization gradient G = Q r - e of the dual (p_i = min(G_i, 0)
    at r_i = 0, max(G_i, 0) at r_i = gamma_i, G_i between; 0 for a box [0, 0], a point of
    weight 0, where both bounds hold)."""
    cdef Py_ssize_t i, n = r.shape[0]
    cdef double acc = 0.0, g
    with nogil:
        for i in range(n):
            g = G[i]
            if gamma[i] <= 0.0:
                g = 0.0
            elif r[i] <= 0.0:
                if g > 0.0:
                    g = 0.0
            elif r[i] >= gamma[i]:
                if g < 0.0:
                    g = 0.0
            acc += g * g
    return acc


cdef inline void _move(Py_ssize_t i, double d, const double* col, const double* y,
                       double* G, Py_ssize_t n, double mu, double aug) noexcept nogil:
    # G <- G + d Q[:, i], Q[j, i] = y_j y_i (K_ji + aug) + mu [j == i]
    cdef Py_ssize_t j
    cdef double c = d * y[i]
    for j in range(n):
        G[j] += c * y[j] * (col[j] + aug)
    G[i] += d * mu


cdef inline double _pg(double g, double r, double gam) noexcept nogil:
    if gam <= 0.0:
        return 0.0  # a box [0, 0] (weight 0): both bounds hold
    if r <= 0.0:
        return g if g < 0.0 else 0.0
    if r >= gam:
        return g if g > 0.0 else 0.0
    return g


def dcd_working_set(const long[::1] ws, const long[::1] ri, const double[:, ::1] rows,
                    double[::1] r, double[::1] G, const double[::1] y,
                    const double[::1] gamma, const double[::1] qd, double mu, bint augmented,
                    Py_ssize_t max_moves, double tol):
    """Greedy coordinate descent restricted to the working set ``ws`` (the exact
    coordinate step of Hsieh et al. 2008, the gradient kept and the coordinate chosen by
    its violation as in LIBSVM, Chang and Lin 2011): repeatedly the coordinate of ws with
    the largest p_i^2 / Q_ii is minimized exactly, r_i <- proj_[0, gamma_i](r_i - G_i /
    Q_ii), and G += (change) Q[:, i] from row ri[k] of ``rows`` (= K[ws[k], :], the Gram
    matrix being symmetric: the held matrix with ri = ws, or a block of cached rows).
    Stops after ``max_moves`` moves or when the largest |projected gradient| over ws is
    <= ``tol``. Returns the number of moves."""
    cdef Py_ssize_t n = r.shape[0], q = ws.shape[0], k, i, best, mv
    cdef double g, pg, old, new, d, sc, top, aug = 1.0 if augmented else 0.0
    cdef Py_ssize_t moves = 0
    if ri.shape[0] != q or (q > 0 and rows.shape[1] != n):
        raise ValueError("rows[ri] must be K[ws, :]")
    for k in range(q):
        if not (0 <= ri[k] < rows.shape[0] and 0 <= ws[k] < n):
            raise ValueError("ws and ri must index r and rows")
    with nogil:
        for mv in range(max_moves):
            best = -1
            top = 0.0
            for k in range(q):
                i = ws[k]
                pg = _pg(G[i], r[i], gamma[i])
                sc = pg * pg / qd[i]
                if sc > top and fabs(pg) > tol:
                    top = sc
                    best = k
            if best < 0:
                break
            i = ws[best]
            old = r[i]
            new = _clip(old - G[i] / qd[i], gamma[i])
            d = new - old
            if d == 0.0:
                break
            r[i] = new
            moves += 1
            _move(i, d, &rows[ri[best], 0], &y[0], &G[0], n, mu, aug)
    return moves


def violations(const double[::1] G, const double[::1] r, const double[::1] gamma,
               const double[::1] qd, double[::1] score):
    """score_i = p_i^2 / Q_ii (the decrease of the dual objective of an exact step on
    coordinate i, up to the clip); returns (||p||^2, max p, min p)."""
    cdef Py_ssize_t i, n = r.shape[0]
    cdef double acc = 0.0, pg, hi = -INFINITY, lo = INFINITY
    with nogil:
        for i in range(n):
            pg = _pg(G[i], r[i], gamma[i])
            acc += pg * pg
            score[i] = pg * pg / qd[i]
            if pg > hi:
                hi = pg
            if pg < lo:
                lo = pg
    return acc, hi, lo
