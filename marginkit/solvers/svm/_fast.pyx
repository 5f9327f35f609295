"""Cython kernels of the SVM family (arXiv:2512.03947): FISTA on the perturbed (H-)SVM dual,
dual coordinate descent, Pegasos, and the exact projection onto {0 <= r <= gamma, y^T r = 0}.

Data abstraction
----------------
Every kernel that reads X takes one row block ``X`` (``marginkit.utils._rows``: dense
C-order or CSR, float32/float64 values, int32/int64 indices; built by ``row_block``)
and is compiled once per layout.

Implicit centering and scaling (paper section 5.1)
--------------------------------------------------
Z = (X - e m^T) Diag(s) with s = 1/sigma (0 for zero-variance columns) is never formed.
The solvers keep ``a = X^T u`` (u = y * r, an O(nnz) scatter) and ``b = e^T u``; then
``w_bar = Z^T u = s * (a - m b)`` and, for a row i,

    z_i . w_bar = x_i . (s2 * a) - b c_i - m . (s2 * a) + b M,

with s2 = s * s, c_i = x_i . (s2 * m) and M = m . (s2 * m) precomputed once. The kernels
take s and form s2 * x as s * (s * x), so that columns of magnitude 1e-160 or 1e160 stay
in floating-point range. With ``scale=None`` the caller passes s = 1, m = 0 (c = 0, M = 0).

All vectors the solvers update (r, a, w) are float64 whatever the dtype of X; the
products with X accumulate in float64.
"""
import numpy as np
from cython.parallel cimport prange
from libc.float cimport DBL_EPSILON
from libc.math cimport sqrt, fabs, frexp, ldexp, INFINITY

cdef extern from "math.h" nogil:
    long double sqrtl(long double x)
from libc.stdint cimport int64_t, uint64_t, uintptr_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy, memset

from marginkit.utils._rows cimport (
    DenseRows64, MK_PREFETCH, csr_rows_t, dense_rows_t, rows_t, col, row_axpy,
    row_axpy_scaled, row_axpy_scaled_pairs, row_dot, row_dot4, row_dot4_pairs,
    row_prefetch, row_prefetch_offsets,
    row_scaled_axpy, row_scaled_dot, row_sqnorm_scaled4, row_start, row_stop, stored)

cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    static int mk_svm_max_threads(void) { return omp_get_max_threads(); }
    #else
    static int mk_svm_max_threads(void) { return 1; }
    #endif
    """
    int mk_svm_max_threads() noexcept nogil

cdef extern from *:
    """
    /* the dense pass of column_max: cm_j <- max(cm_j, |x_ij|) with NaN kept (as
       np.maximum: a NaN entry makes cm_j NaN, and nothing is larger than a NaN cm_j);
       branch-free, so the compiler vectorizes the pass over a row's columns (a running
       "any NaN" flag in the loop would serialize it, 2x slower) */
    #define MK_COLMAX_DENSE(NAME, T) \
    static void NAME(const T* restrict x, Py_ssize_t n, Py_ssize_t d, double* restrict cm) { \
        for (Py_ssize_t i = 0; i < n; i++) { \
            const T* restrict row = x + i * d; \
            for (Py_ssize_t j = 0; j < d; j++) { \
                double v = fabs((double)row[j]); \
                double m = cm[j]; \
                cm[j] = (v > m || v != v) ? v : m; \
            } \
        } \
    }
    MK_COLMAX_DENSE(mk_colmax_dense64, double)
    """
    void mk_colmax_dense64(const double* x, Py_ssize_t n, Py_ssize_t d, double* cm) noexcept nogil

cdef extern from *:
    """
    /* the dense passes of column_max_sums and scaled_sqdev four rows at a time: a
       column's running sum stays in a register over the four rows and is stored once
       (instead of a store and a reload per row, whose latency serialized the pass); the
       additions are those of the row-by-row loop, in the same order (the same results
       bit for bit); returns the number of rows done (a multiple of 4) */
    #define MK_SQDEV4(NAME, T) \
    static Py_ssize_t NAME(const T* restrict x, Py_ssize_t n, Py_ssize_t d, \
                           const double* inv, const double* means, double* ss) { \
        Py_ssize_t i = 0, j; \
        for (; i + 4 <= n; i += 4) { \
            const T* r0 = x + i * d; \
            for (j = 0; j < d; j++) { \
                double q = ss[j], w = inv[j], mj = means[j], e0, e1, e2, e3; \
                e0 = (double)r0[j] * w - mj; \
                e1 = (double)r0[j + d] * w - mj; \
                e2 = (double)r0[j + 2 * d] * w - mj; \
                e3 = (double)r0[j + 3 * d] * w - mj; \
                q += e0 * e0; \
                q += e1 * e1; \
                q += e2 * e2; \
                q += e3 * e3; \
                ss[j] = q; \
            } \
        } \
        return i; \
    }
    /* column_max_sums four rows at a time: cm_j <- max(cm_j, |x_ij|) (NaN kept, as
       MK_COLMAX_DENSE) and sums_j += x_ij * inv_j */
    #define MK_COLMAXSUMS4(NAME, T) \
    static Py_ssize_t NAME(const T* restrict x, Py_ssize_t n, Py_ssize_t d, \
                           const double* restrict inv, double* restrict cm, \
                           double* restrict sums) { \
        Py_ssize_t i = 0, j; \
        for (; i + 4 <= n; i += 4) { \
            const T* r0 = x + i * d; \
            for (j = 0; j < d; j++) { \
                double q = sums[j], m = cm[j], a, w = inv[j]; \
                double v0 = (double)r0[j], v1 = (double)r0[j + d]; \
                double v2 = (double)r0[j + 2 * d], v3 = (double)r0[j + 3 * d]; \
                q += v0 * w; \
                q += v1 * w; \
                q += v2 * w; \
                q += v3 * w; \
                a = fabs(v0); m = (a > m || a != a) ? a : m; \
                a = fabs(v1); m = (a > m || a != a) ? a : m; \
                a = fabs(v2); m = (a > m || a != a) ? a : m; \
                a = fabs(v3); m = (a > m || a != a) ? a : m; \
                sums[j] = q; \
                cm[j] = m; \
            } \
        } \
        return i; \
    }
    MK_COLMAXSUMS4(mk_colmaxsums4_64, double)
    MK_COLMAXSUMS4(mk_colmaxsums4_32, float)
    MK_SQDEV4(mk_sqdev4_64, double)
    MK_SQDEV4(mk_sqdev4_32, float)
    """
    Py_ssize_t mk_colmaxsums4_64(const double* x, Py_ssize_t n, Py_ssize_t d,
                                 const double* inv, double* cm, double* sums) noexcept nogil
    Py_ssize_t mk_colmaxsums4_32(const float* x, Py_ssize_t n, Py_ssize_t d,
                                 const double* inv, double* cm, double* sums) noexcept nogil
    Py_ssize_t mk_sqdev4_64(const double* x, Py_ssize_t n, Py_ssize_t d, const double* inv,
                            const double* means, double* ss) noexcept nogil
    Py_ssize_t mk_sqdev4_32(const float* x, Py_ssize_t n, Py_ssize_t d, const double* inv,
                            const double* means, double* ss) noexcept nogil

cdef extern from *:
    """
    /* the dense rows of ref_matvec four at a time: each row's four sums run over its
       columns in order, with the float64 operations of the one-row loop (so the results
       are the same bit for bit), but four rows' chains are interleaved (16 independent
       additions instead of 4: the loop is no longer bound by the latency of an addition);
       returns the number of rows done (a multiple of 4) */
    #define MK_REF_MATVEC4(NAME, T) \
    static Py_ssize_t NAME(const T* restrict x, Py_ssize_t n, Py_ssize_t d, \
                           const double* restrict m, const double* restrict v, \
                           const double* restrict Mv, const double* restrict coef, \
                           const double* restrict acoef, double* restrict th, \
                           double* restrict Mth, double* restrict dec, double* restrict Md) { \
        Py_ssize_t i = 0, j; \
        for (; i + 4 <= n; i += 4) { \
            const T* r0 = x + i * d; \
            const T* r1 = r0 + d; \
            const T* r2 = r1 + d; \
            const T* r3 = r2 + d; \
            double t0 = 0.0, t1 = 0.0, t2 = 0.0, t3 = 0.0, e0 = 0.0, e1 = 0.0, e2 = 0.0, \
                e3 = 0.0, q0 = 0.0, q1 = 0.0, q2 = 0.0, q3 = 0.0, a0 = 0.0, a1 = 0.0, \
                a2 = 0.0, a3 = 0.0; \
            for (j = 0; j < d; j++) { \
                double mj = m[j], vj = v[j], cj = coef[j], Mj = Mv[j], Aj = acoef[j]; \
                double c0 = (double)r0[j] - mj, c1 = (double)r1[j] - mj; \
                double c2 = (double)r2[j] - mj, c3 = (double)r3[j] - mj; \
                double b0 = fabs(c0), b1 = fabs(c1), b2 = fabs(c2), b3 = fabs(c3); \
                t0 += c0 * vj; t1 += c1 * vj; t2 += c2 * vj; t3 += c3 * vj; \
                e0 += c0 * cj; e1 += c1 * cj; e2 += c2 * cj; e3 += c3 * cj; \
                q0 += b0 * Mj; q1 += b1 * Mj; q2 += b2 * Mj; q3 += b3 * Mj; \
                a0 += b0 * Aj; a1 += b1 * Aj; a2 += b2 * Aj; a3 += b3 * Aj; \
            } \
            th[i] += t0; th[i + 1] += t1; th[i + 2] += t2; th[i + 3] += t3; \
            dec[i] += e0; dec[i + 1] += e1; dec[i + 2] += e2; dec[i + 3] += e3; \
            Mth[i] += q0; Mth[i + 1] += q1; Mth[i + 2] += q2; Mth[i + 3] += q3; \
            Md[i] += a0; Md[i + 1] += a1; Md[i + 2] += a2; Md[i + 3] += a3; \
        } \
        return i; \
    }
    MK_REF_MATVEC4(mk_ref_matvec4_64, double)
    MK_REF_MATVEC4(mk_ref_matvec4_32, float)
    """
    Py_ssize_t mk_ref_matvec4_64(const double* x, Py_ssize_t n, Py_ssize_t d, const double* m,
                                 const double* v, const double* Mv, const double* coef,
                                 const double* acoef, double* th, double* Mth, double* dec,
                                 double* Md) noexcept nogil
    Py_ssize_t mk_ref_matvec4_32(const float* x, Py_ssize_t n, Py_ssize_t d, const double* m,
                                 const double* v, const double* Mv, const double* coef,
                                 const double* acoef, double* th, double* Mth, double* dec,
                                 double* Md) noexcept nogil

# ----------------------------------------------------------------------------- rows
cdef inline double _projected(double G, double r, double gamma) noexcept nogil:
    """The projected-gradient component of coordinate r in the box [0, gamma]: G, or its
    part that points out of the box at an active bound (0 <= r <= gamma); 0 for a box
    [0, 0] (a point of weight 0: the coordinate is fixed)."""
    if r <= 0.0:
        return G if G < 0.0 and gamma > 0.0 else 0.0
    if r >= gamma:
        return G if G > 0.0 else 0.0
    return G


cdef inline double _clip(double v, double lo, double hi) noexcept nogil:
    if v < lo:
        return lo
    if v > hi:
        return hi
    return v


cdef inline double _clamp(double v, double lo, double hi) noexcept nogil:
    # the value of _clip for every number but NaN (a NaN v gives lo, _clip keeps NaN),
    # written as two selects the compiler turns into max/min instructions: no
    # data-dependent branch in the O(n) loops of the projection
    v = v if v > lo else lo
    return v if v < hi else hi


# ----------------------------------------------------------------------- row statistics
cdef void _row_statistics_rows(rows_t X, Py_ssize_t lo, Py_ssize_t hi, const double* sc,
                               const double* s2m, double* c, double* xsq, double M,
                               double* zv, double* qv, double shift) noexcept nogil:
    # rows lo..hi of row_statistics (zv, qv NULL when not asked for)
    cdef Py_ssize_t i
    cdef double acc, t
    for i in range(lo, hi):
        c[i] = row_dot4(X, i, s2m)
        acc = row_sqnorm_scaled4(X, i, sc)
        xsq[i] = acc
        if zv != NULL:
            # the value of np.maximum(xsq - 2.0 * c + M, 0.0) (NaN kept)
            t = acc - 2.0 * c[i] + M
            t = 0.0 if t < 0.0 else t
            zv[i] = t
            if qv != NULL:
                qv[i] = t + 1.0 + shift


def row_statistics(rows_t X, const double[::1] sc not None, const double[::1] s2m not None,
                   double[::1] c not None, double[::1] xsq not None, double M=0.0, zsq=None,
                   qd=None, double shift=0.0, int threads=0):
    """c_i = x_i . (s2 * m) and xsq_i = ||sc * x_i||^2 (s2 = sc^2) for every row (one pass,
    each with four partial sums: on rows of a few dozen entries one chain of additions
    would bound the pass); with ``zsq`` (a float64 array of length n) also
    ||z_i||^2 = max(xsq_i - 2 c_i + M, 0), and with ``qd`` besides the diagonal
    ||z_i||^2 + 1 + ``shift`` (dcd's Q_ii). A large block's rows are split into parts
    (``stat_parts``) run on the OpenMP threads (at most ``threads`` when >= 1); each row's
    numbers are one thread's, the same whatever the split."""
    cdef Py_ssize_t q, P, n = X.n, d = X.d
    cdef double[::1] zv, qv
    cdef double* zp = NULL
    cdef double* qp = NULL
    cdef int nt
    for name, got in (("sc", sc.shape[0]), ("s2m", s2m.shape[0])):
        _check_width(d, name, got)
    for name, arr in (("c", c), ("xsq", xsq), ("zsq", zsq), ("qd", qd)):
        if arr is not None and len(arr) != n:
            raise ValueError(f"{name} has {len(arr)} entries for a block of {n} rows")
    if zsq is not None:
        zv = zsq
        zp = &zv[0] if n > 0 else NULL
        if qd is not None:
            qv = qd
            qp = &qv[0] if n > 0 else NULL
    if n == 0:
        return
    cdef double nnz = stored(X)
    P = _n_parts(n, d, nnz)
    with nogil:
        if P == 1:
            _row_statistics_rows(X, 0, n, &sc[0] if d > 0 else NULL,
                                 &s2m[0] if d > 0 else NULL, &c[0], &xsq[0], M, zp, qp, shift)
        else:
            nt = _threads(nnz, P, threads)
            for q in prange(P, schedule="dynamic", num_threads=nt):
                _row_statistics_rows(X, q * n // P, (q + 1) * n // P, &sc[0], &s2m[0], &c[0],
                                     &xsq[0], M, zp, qp, shift)


cdef inline double _pow2_at_least(double cm) noexcept nogil:
    # the power of two 2^e >= cm (1 for cm = 0 or not finite), e clipped to [-1021, 1023]
    # so that both 2^e and 2^-e are finite: dividing by it is exact (a multiplication by
    # 2^-e), and |x| / 2^e <= 2 for every entry of a column with largest magnitude cm
    cdef int e
    if not (cm > 0.0) or cm - cm != 0.0:
        return 1.0
    frexp(cm, &e)
    if e > 1023:
        e = 1023
    if e < -1021:
        e = -1021
    return ldexp(1.0, e)


cdef void _scaling_tail(Py_ssize_t d, double dn, const double* colmax, const double* safe,
                        const double* sums, const double* var_sum, bint center, double* m,
                        double* s) noexcept nogil:
    # m_j = mean_j (0 unless center), s_j = 1/sigma_j or 0 for a constant column: the
    # statistics of x / safe_j scaled back by safe_j
    cdef Py_ssize_t j
    cdef double mean, var, sd, sigma
    cdef bint ok
    for j in range(d):
        mean = sums[j] / dn
        var = var_sum[j] / dn
        sd = sqrt(var if var > 0.0 else 0.0)
        if var != var:
            sd = var
        # constant: a variance within the error bound of its two-pass computation,
        # var <= n eps var + (n eps mean)^2 (Chan, Golub and LeVeque; scikit-learn's
        # StandardScaler rule), on the normalized column (the rule is scale-free). A fixed
        # 1e-12 |mean| dropped columns of spread 500 ulps of their mean (found by review)
        ok = (colmax[j] > 0) and (sd > 0) and \
            (var > dn * DBL_EPSILON * var + (dn * DBL_EPSILON * mean) ** 2)
        sigma = sd * safe[j]
        mean = mean * safe[j]
        ok = ok and (sigma - sigma == 0.0) and (sigma > 0)  # finite and positive
        s[j] = 1.0 / sigma if ok else 0.0
        m[j] = mean if center else 0.0



def _same_lengths(str what, Py_ssize_t n, **arrays):
    # vectors a loop below reads at 0..n-1 (the compiled loops do not check bounds)
    for name, a in arrays.items():
        if a is None or a.shape[0] != n:
            raise ValueError(f"{what}: {name} has "
                             f"{'no' if a is None else a.shape[0]} entries, {n} expected")



def _check_blocks(str what, Py_ssize_t d, bufs, parts, Py_ssize_t ns, Py_ssize_t width):
    # the row blocks' scratch a FISTA call writes: ns >= 1 blocks of d-vectors (``bufs``)
    # and ns rows of ``width`` partial sums (``parts``)
    if ns < 1 or (bufs is not None and (bufs.shape[0] < ns or bufs.shape[1] < d)) or \
            parts.shape[0] < ns or parts.shape[1] < width:
        raise ValueError(f"{what}: bufs must be (ns >= 1, >= {d}) and parts (ns, >= {width})")


def _box_of(str what, Py_ssize_t n, box):
    # a per-point bound read at 0..n-1 (``_at``): n entries, contiguous or a one-value
    # view of stride 0 (np.broadcast_to(gamma, n))
    if box is None or box.shape[0] != n:
        raise ValueError(f"{what}: box has {'no' if box is None else box.shape[0]} "
                         f"entries, {n} expected (np.broadcast_to(gamma, n) for one value)")


cdef _check_width(Py_ssize_t d, str name, Py_ssize_t got):
    # the scaling passes index their vectors by column: one entry per column of the block
    if got != d:
        raise ValueError(f"{name} has {got} entries for a block of {d} columns")


def column_max(rows_t X, double[::1] colmax):
    """First pass of the scaling statistics over a row block: colmax_j <- max(colmax_j,
    largest |x_ij| of the block's stored entries) (NaN propagates, as np.maximum would).
    Dense float64 rows: one branch-free, NaN-keeping pass into a local copy of colmax
    (vectorized over the columns). Dense float32 rows: a branch-free pass that notes NaN
    (the faster form for float32), and only if it saw one the entry-by-entry pass below,
    whose result it then is (a column's maximum is not changed by a second look at its
    entries). CSR rows: entry by entry."""
    cdef Py_ssize_t i, j, k
    cdef double x, m
    cdef bint nan = True
    cdef double* loc = NULL
    _check_width(X.d, "colmax", colmax.shape[0])
    if rows_t is DenseRows64:
        loc = <double*>malloc((X.d + 1) * sizeof(double))
        if loc == NULL:
            raise MemoryError()
    with nogil:
        if rows_t is DenseRows64:
            # into a local array (no aliasing with X: the pass over a row is vectorized)
            nan = False
            for j in range(X.d):
                loc[j] = colmax[j]
            mk_colmax_dense64(X.data, X.n, X.d, loc)
            for j in range(X.d):
                colmax[j] = loc[j]
        elif rows_t in dense_rows_t:
            nan = False
            for i in range(X.n):
                for j in range(X.d):
                    x = fabs(<double>X.data[i * X.d + j])
                    m = colmax[j]
                    colmax[j] = x if x > m else m
                    nan = nan | (x != x)
        if nan:
            for i in range(X.n):
                for k in range(row_start(X, i), row_stop(X, i)):
                    j = col(X, i, k)
                    x = fabs(<double>X.data[k])
                    if x > colmax[j] or x != x:
                        colmax[j] = x
    free(loc)


#: the passes a run makes once (the scaling passes, the row constants, the fresh scatter
#: and dcd's fresh bound) split the rows of a large block into parts (``stat_parts``: a
#: count that depends on the data only, never on the threads), each with its own
#: d-vectors, added into the outputs in part order; the parts run on the OpenMP threads
#: with a dynamic schedule (a part per free thread: a busy core delays only the part it
#: holds). Below _PARALLEL_NNZ stored entries one part: the outputs are those of the
#: row-by-row loop.
def stat_parts(Py_ssize_t n, Py_ssize_t d, double nnz):
    """The number of row parts of the once-per-run passes (``column_max_sums``,
    ``scaled_sqdev``, ``row_statistics``, ``fresh_scatter``, dcd's fresh bound) on a
    block of n rows, d columns and nnz stored entries: 1 below 2e5 entries, else
    ``fista_blocks``'s count (at most 16, each part's d-vectors at most 1/32 of the
    pass)."""
    return _n_parts(n, d, nnz)


cdef Py_ssize_t _n_parts(Py_ssize_t n, Py_ssize_t d, double nnz) noexcept nogil:
    # stat_parts: 1 below _PARALLEL_NNZ, else fista_blocks's count
    if nnz < _PARALLEL_NNZ:
        return 1
    return _blocks(n, d, nnz)


# A CSR pass reaches a row's columns at scattered places: each column's accumulators sit
# together in one record (a 32-byte record, two to a cache line), so that an entry
# touches one line where separate d-vectors of them took one each (a wide sparse X,
# 3.2 million columns: 3x faster a pass). The records are the pass's own scratch, filled
# from the caller's vectors and read back, the same operations in the same order.
cdef struct _MaxSumRec:
    double mx
    double sm
    double inv
    int64_t ct


cdef struct _SqdevRec:
    double inv
    double mean
    double ss
    double unused


cdef void* _records(Py_ssize_t count, size_t size, void** raw) noexcept nogil:
    # count records of ``size`` bytes (32) at a 32-byte boundary, from malloc (``raw``
    # gets the pointer to free); NULL when the memory cannot be had
    raw[0] = malloc(count * size + 32)
    if raw[0] == NULL:
        return NULL
    return <void*>((<uintptr_t>raw[0] + 31) & ~(<uintptr_t>31))


cdef void _colmax_sums_rows(rows_t X, Py_ssize_t lo, Py_ssize_t hi, const double* inv,
                            double* colmax, double* sums, _MaxSumRec* rec) noexcept nogil:
    # rows lo..hi of column_max_sums: dense rows into colmax and sums (four rows at a
    # time, the rest one by one; the counts are the caller's), CSR rows into the records
    cdef Py_ssize_t i, j, k, i0 = lo
    cdef double x, ax
    cdef _MaxSumRec* p
    if rows_t in dense_rows_t:
        if hi > lo and X.d > 0:
            if rows_t is DenseRows64:
                i0 = lo + mk_colmaxsums4_64(X.data + lo * X.d, hi - lo, X.d, inv, colmax, sums)
            else:
                i0 = lo + mk_colmaxsums4_32(X.data + lo * X.d, hi - lo, X.d, inv, colmax, sums)
        for i in range(i0, hi):
            for k in range(row_start(X, i), row_stop(X, i)):
                j = col(X, i, k)
                x = <double>X.data[k]
                sums[j] += x * inv[j]
                ax = fabs(x)
                if ax > colmax[j] or ax != ax:
                    colmax[j] = ax
    else:
        for i in range(lo, hi):
            for k in range(X.indptr[i], X.indptr[i + 1]):
                p = rec + X.indices[k]
                x = <double>X.data[k]
                p.sm += x * p.inv
                ax = fabs(x)
                if ax > p.mx or ax != ax:
                    p.mx = ax
                p.ct += 1


def column_max_sums(rows_t X, const double[::1] inv, double[::1] colmax,
                    double[::1] sums, int64_t[::1] cnt, int threads=0):
    """A pass of the scaling statistics over a row block: colmax as ``column_max``,
    sums_j += the block's stored x_ij * inv_j, cnt_j += stored entries (four dense rows
    at a time, the additions in the order of the row-by-row loop; on a large block, per
    row part (``stat_parts``), the parts' sums added in part order).

    The first pass takes inv = 1: the unscaled sums. Once every one is finite, sums * inv
    (``pow2_safe``: an exact power of two) is the sum of the scaled entries bit for bit,
    the same additions in the same order, unless a term x_ij * inv_j underflows (a
    column spanning more than 2^1021, where the unscaled sum is the more exact one); a
    sum that overflows is not finite, and a second pass with inv takes the scaled one.
    ``threads`` >= 1 caps the OpenMP threads of the parts (a solver's ``threads``). CSR
    rows accumulate into per-column records (``_MaxSumRec``: the same operations in the
    same order, one cache line an entry)."""
    cdef Py_ssize_t j, q, P, d = X.d, n = X.n
    cdef double m, a
    cdef double* buf = NULL
    cdef void* raw = NULL
    cdef _MaxSumRec* rec = NULL
    cdef _MaxSumRec* p
    cdef int nt
    _check_width(d, "inv", inv.shape[0])
    _check_width(d, "colmax", colmax.shape[0])
    _check_width(d, "sums", sums.shape[0])
    _check_width(d, "cnt", cnt.shape[0])
    if d == 0:
        return
    cdef double nnz = stored(X)
    P = _n_parts(n, d, nnz)
    if rows_t in csr_rows_t:
        # one record a column and part: a part's maxima start below every magnitude;
        # one part continues from the caller's numbers
        rec = <_MaxSumRec*>_records(P * d, sizeof(_MaxSumRec), &raw)
        if rec == NULL:
            raise MemoryError()
        for q in range(P):
            for j in range(d):
                p = rec + q * d + j
                p.inv = inv[j]
                if P == 1:
                    p.mx, p.sm, p.ct = colmax[j], sums[j], cnt[j]
                else:
                    p.mx, p.sm, p.ct = -INFINITY, 0.0, 0
    elif P > 1:
        buf = <double*>calloc(2 * P * d, sizeof(double))
        if buf == NULL:
            raise MemoryError()
        for q in range(P):  # a part's maxima start below every magnitude
            for j in range(d):
                buf[2 * q * d + j] = -INFINITY
    with nogil:
        if P == 1:
            _colmax_sums_rows(X, 0, n, &inv[0], &colmax[0], &sums[0], rec)
            if rows_t in csr_rows_t:
                for j in range(d):
                    colmax[j], sums[j], cnt[j] = rec[j].mx, rec[j].sm, rec[j].ct
        else:
            nt = _threads(nnz, P, threads)
            for q in prange(P, schedule="dynamic", num_threads=nt):
                if rows_t in csr_rows_t:
                    _colmax_sums_rows(X, q * n // P, (q + 1) * n // P, &inv[0], NULL, NULL,
                                      rec + q * d)
                else:
                    _colmax_sums_rows(X, q * n // P, (q + 1) * n // P, &inv[0],
                                      buf + 2 * q * d, buf + (2 * q + 1) * d, NULL)
            for q in range(P):
                for j in range(d):
                    if rows_t in csr_rows_t:
                        p = rec + q * d + j
                        a = p.mx
                        sums[j] += p.sm
                        cnt[j] += p.ct
                    else:
                        a = buf[2 * q * d + j]
                        sums[j] += buf[(2 * q + 1) * d + j]
                    m = colmax[j]
                    colmax[j] = a if (a > m or a != a) else m
        if rows_t in dense_rows_t:
            for j in range(d):
                cnt[j] += n
    free(buf)
    free(raw)


def pow2_safe(const double[::1] colmax, double[::1] safe, double[::1] inv):
    """safe_j = the power of two at or above colmax_j (``_pow2_at_least``), inv = 1/safe."""
    cdef Py_ssize_t j
    if safe.shape[0] != colmax.shape[0] or inv.shape[0] != colmax.shape[0]:
        raise ValueError(f"safe and inv need {colmax.shape[0]} entries (one per column), "
                         f"got {safe.shape[0]} and {inv.shape[0]}")
    for j in range(colmax.shape[0]):
        safe[j] = _pow2_at_least(colmax[j])
        inv[j] = 1.0 / safe[j]


cdef void _sqdev_rows(rows_t X, Py_ssize_t lo, Py_ssize_t hi, const double* inv,
                     const double* means, double* ss, _SqdevRec* rec) noexcept nogil:
    # rows lo..hi of scaled_sqdev: dense rows into ss (four at a time, the same
    # additions, the rest one by one), CSR rows into the records
    cdef Py_ssize_t i, j, k, i0 = lo
    cdef double dev
    cdef _SqdevRec* p
    if rows_t in dense_rows_t:
        if hi > lo and X.d > 0:
            if rows_t is DenseRows64:
                i0 = lo + mk_sqdev4_64(X.data + lo * X.d, hi - lo, X.d, inv, means, ss)
            else:
                i0 = lo + mk_sqdev4_32(X.data + lo * X.d, hi - lo, X.d, inv, means, ss)
        for i in range(i0, hi):
            for k in range(row_start(X, i), row_stop(X, i)):
                j = col(X, i, k)
                dev = (<double>X.data[k]) * inv[j] - means[j]
                ss[j] += dev * dev
    else:
        for i in range(lo, hi):
            for k in range(X.indptr[i], X.indptr[i + 1]):
                p = rec + X.indices[k]
                dev = (<double>X.data[k]) * p.inv - p.mean
                p.ss += dev * dev


def scaled_sqdev(rows_t X, const double[::1] inv, const double[::1] means, double[::1] ss,
                 int threads=0):
    """Third pass: ss_j += sum of the block's stored (x_ij * inv_j - means_j)^2 (the
    implicit zeros of a CSR block are added by ``scaling_tail``); on a large block per
    row part (``stat_parts``), the parts' sums added in part order (``threads`` as in
    ``column_max_sums``; CSR rows through per-column records, as there)."""
    cdef Py_ssize_t j, q, P, d = X.d, n = X.n
    cdef double* buf = NULL
    cdef void* raw = NULL
    cdef _SqdevRec* rec = NULL
    cdef _SqdevRec* p
    cdef int nt
    _check_width(d, "inv", inv.shape[0])
    _check_width(d, "means", means.shape[0])
    _check_width(d, "ss", ss.shape[0])
    if d == 0:
        return
    cdef double nnz = stored(X)
    P = _n_parts(n, d, nnz)
    if rows_t in csr_rows_t:
        rec = <_SqdevRec*>_records(P * d, sizeof(_SqdevRec), &raw)
        if rec == NULL:
            raise MemoryError()
        for q in range(P):
            for j in range(d):
                p = rec + q * d + j
                p.inv, p.mean, p.unused = inv[j], means[j], 0.0
                p.ss = ss[j] if P == 1 else 0.0
    elif P > 1:
        buf = <double*>calloc(P * d, sizeof(double))
        if buf == NULL:
            raise MemoryError()
    with nogil:
        if P == 1:
            _sqdev_rows(X, 0, n, &inv[0], &means[0], &ss[0], rec)
            if rows_t in csr_rows_t:
                for j in range(d):
                    ss[j] = rec[j].ss
        else:
            nt = _threads(nnz, P, threads)
            for q in prange(P, schedule="dynamic", num_threads=nt):
                if rows_t in csr_rows_t:
                    _sqdev_rows(X, q * n // P, (q + 1) * n // P, &inv[0], &means[0], NULL,
                                rec + q * d)
                else:
                    _sqdev_rows(X, q * n // P, (q + 1) * n // P, &inv[0], &means[0],
                                buf + q * d, NULL)
            for q in range(P):
                for j in range(d):
                    if rows_t in csr_rows_t:
                        ss[j] += rec[q * d + j].ss
                    else:
                        ss[j] += buf[q * d + j]
    free(buf)
    free(raw)


def scaling_tail(Py_ssize_t n, const double[::1] colmax, const double[::1] safe,
                 const double[::1] sums, double[::1] ss, const int64_t[::1] cnt,
                 bint center, double[::1] m, double[::1] s):
    """The statistics from the three passes: the implicit zeros (n - cnt_j of them, each
    contributing mean_j^2 to ss_j), then m_j = mean_j (0 unless ``center``) and
    s_j = 1/sigma_j, 0 for a constant column: zero spread, or a spread at round-off level
    of its (normalized) mean, or a sigma that is not a positive finite number."""
    cdef Py_ssize_t d = m.shape[0]
    cdef Py_ssize_t j
    cdef double dn = <double>n
    cdef double mean
    for name, got in (("colmax", colmax.shape[0]), ("safe", safe.shape[0]),
                      ("sums", sums.shape[0]), ("ss", ss.shape[0]), ("cnt", cnt.shape[0]),
                      ("s", s.shape[0])):
        _check_width(d, name, got)
    for j in range(d):
        mean = sums[j] / dn
        ss[j] += (<double>(n - cnt[j]) * mean) * mean
    _scaling_tail(d, dn, &colmax[0], &safe[0], &sums[0], &ss[0], center, &m[0], &s[0])


def gram_power_matvec(rows_t X, const double[::1] v_s, double offset, double[::1] acc,
                      double[::1] t_buf):
    """One pass: t = X v_s + offset (per row), acc = X^T t; returns e^T t and ||t||^2.

    With v_s = s * v and offset = t_v - m . (s * v) this is Z~ [v; t_v] = t, and
    Z~^T t = [s * (acc - m e^T t); e^T t] (assembled by the caller).
    """
    cdef Py_ssize_t i
    cdef double t, tsum = 0.0, tsq = 0.0
    with nogil:
        for i in range(X.d):
            acc[i] = 0.0
        for i in range(X.n):  # products in their own loop (see fista_iteration)
            t_buf[i] = row_dot(X, i, &v_s[0]) + offset
        for i in range(X.n):
            t = t_buf[i]
            tsum += t
            tsq += t * t
            row_axpy(X, i, t, &acc[0])
    return tsum, tsq


def csr_scaled_gram(csr_rows_t X, const double[::1] sc, double[:, ::1] P,
                    double[::1] diag, double[::1] colsum, double[::1] xs):
    """Pieces of the Gram matrix G1 = (X S)^T (X S) of a CSR matrix in one pass, O(d^2) memory.

    With x~_k = sc[j_k] x_k the scaled stored entries of a row, accumulates (``P``, ``diag``,
    ``colsum`` are added to, not overwritten)

        P[j1, j2]  += x~_k1 x~_k2   for each pair k1 < k2 of entries of the same row,
        diag[j]    += x~_k^2,        colsum[j] += x~_k,

    so that G1 = P + P^T + Diag(diag) whatever the order of the indices in a row (duplicates
    included) and colsum = S X^T e. Cost sum_i nnz_i (nnz_i + 1) / 2. ``xs`` is scratch
    of length >= the longest row (the row's scaled values).
    """
    cdef Py_ssize_t d = X.d
    cdef Py_ssize_t i, k1, k2, st, en, j1
    cdef double x1
    cdef double* row
    cdef double* Pp = &P[0, 0]
    with nogil:
        for i in range(X.n):
            st = X.indptr[i]
            en = X.indptr[i + 1]
            for k1 in range(st, en):
                xs[k1 - st] = sc[X.indices[k1]] * X.data[k1]
            for k1 in range(st, en):
                j1 = X.indices[k1]
                x1 = xs[k1 - st]
                diag[j1] += x1 * x1
                colsum[j1] += x1
                row = Pp + j1 * d
                for k2 in range(k1 + 1, en):
                    row[X.indices[k2]] += x1 * xs[k2 - st]


# ------------------------------------------------------------------------------ FISTA
# ------------------------------------------------------- FISTA, blocked and row-parallel
# The rows are cut into blocks that depend on the data only (never on the thread count,
# ``fista_blocks``); each block has its own partial sums and its own d-vector for the
# scatter, summed in block order. A run is then bitwise the same on any number of OpenMP
# threads; the threads follow OMP_NUM_THREADS / threadpoolctl (omp_get_max_threads at
# each call), lowered to the ``threads`` argument when given (>= 1; the caller's choice
# between one thread and the team, ``utils._threads.ThreadChoice``), static schedule, one
# parallel region per call.

#: at most this many blocks (d-vectors), each allowed when it costs <= 1/32 of a pass
cdef Py_ssize_t _MAX_BLOCKS = 16
#: below this many stored entries one thread does the pass (a parallel region costs more)
cdef double _PARALLEL_NNZ = 2e5


def fista_blocks(Py_ssize_t n, Py_ssize_t d, double nnz):
    """The number of row blocks of ``fista_iteration`` for n rows, d columns, nnz entries.

    Each block owns a d-vector that is zeroed and summed once per iteration, so there
    are at most nnz / (32 d) of them (and at most 16, at most n). The count depends on
    the data only, never on the number of threads.
    """
    return _blocks(n, d, nnz)


cdef inline Py_ssize_t _blocks(Py_ssize_t n, Py_ssize_t d, double nnz) noexcept nogil:
    cdef Py_ssize_t ns = <Py_ssize_t>(nnz / (32.0 * (d if d > 0 else 1)))
    return max(1, min(ns, _MAX_BLOCKS, n))


cdef inline int _threads(double nnz, Py_ssize_t blocks, int requested) noexcept nogil:
    """Threads of a pass: 1 on small data, else the OpenMP limit (OMP_NUM_THREADS /
    threadpoolctl), lowered to ``requested`` when that is >= 1 (0: no request)."""
    cdef int cap
    if nnz < _PARALLEL_NNZ or blocks < 2:
        return 1
    cap = mk_svm_max_threads()
    if 0 < requested < cap:
        return requested
    return cap


def fista_threads(Py_ssize_t n, Py_ssize_t d, double nnz):
    """The most threads the FISTA passes use on n rows, d columns, nnz entries: 1 below
    the work of a parallel region or with one row block, else the OpenMP limit of the
    calling thread (read now: ``threadpoolctl.threadpool_limits`` applies)."""
    return _threads(nnz, fista_blocks(n, d, nnz), 0)


cdef double _extrapolate_v(const double* a, const double* a_prev, const double* sc,
                           const double* m, double beta, double* v, Py_ssize_t d) noexcept nogil:
    """v = sc^2 * ((1 + beta) a - beta a_prev) (as sc (sc t), in range); returns m . v."""
    cdef Py_ssize_t j
    cdef double acc = 0.0, t
    for j in range(d):
        t = sc[j] * (sc[j] * ((1.0 + beta) * a[j] - beta * a_prev[j]))
        v[j] = t
        acc += m[j] * t
    return acc


cdef void _gather_block(rows_t X, Py_ssize_t lo, Py_ssize_t hi, const double* v,
                        double* out) noexcept nogil:
    """out_i = x_i . v for the rows lo..hi-1 (four partial sums per row)."""
    cdef Py_ssize_t i
    for i in range(lo, hi):
        out[i] = row_dot4(X, i, v)


cdef Py_ssize_t _bound_step(const double[:] a, str name) except -1:
    # the step ``_at`` reads a per-point bound with: 1 (contiguous) or 0 (one value); any
    # other stride would be read as contiguous
    if a.strides[0] == 0:
        return 0
    if a.strides[0] == <Py_ssize_t>sizeof(double) or a.shape[0] <= 1:
        return 1  # (one entry or none: read at a[0] whatever its stride)
    raise ValueError(f"{name} must be a contiguous float64 vector or a one-value view "
                     f"(stride 0), got a stride of {a.strides[0]} bytes: pass "
                     f"np.ascontiguousarray({name})")


cdef inline double _at(const double* a, Py_ssize_t step, Py_ssize_t i) noexcept nogil:
    # a per-point value: a[i], or a[0] for the one-value view of an unweighted run
    # (step 0); the test is loop-invariant, so the compiler splits the loops on it and
    # each version stays vectorizable
    return a[i] if step else a[0]


cdef void _hsvm_update_block(Py_ssize_t lo, Py_ssize_t hi, const double* y, const double* r_prev,
                             const double* r, const double* c, double by, double offset,
                             double beta, double invL, double mu, const double* box, Py_ssize_t bs,
                             double inv_unit, double* r_new, double* part) noexcept nogil:
    """r_new (holding the row products on entry) <- the FISTA update; part = [||y_k - r_new||^2
    (in units of 1 / inv_unit), sum r_new, ||r_new||^2] over the block."""
    cdef Py_ssize_t i
    cdef double yk, hw, rn, diff, dsq = 0.0, rsum = 0.0, rsq = 0.0
    for i in range(lo, hi):
        yk = r[i] + beta * (r[i] - r_prev[i])
        hw = y[i] * (r_new[i] - by * c[i] + offset)
        rn = _clamp(yk + (1.0 - hw - mu * yk) * invL, 0.0, _at(box, bs, i))
        r_new[i] = rn
        diff = (yk - rn) * inv_unit
        dsq += diff * diff
        rsum += rn
        rsq += rn * rn
    part[0] = dsq
    part[1] = rsum
    part[2] = rsq


cdef double _scatter_block(rows_t X, Py_ssize_t lo, Py_ssize_t hi, const double* y,
                           const double* r, double* out, Py_ssize_t* active) noexcept nogil:
    """out = sum over rows lo..hi-1 of y_i r_i x_i (zeroed first); returns the sum of y_i r_i.

    The rows with r_i != 0 are listed first (``active[lo:hi]`` as scratch) without a
    branch, then scattered: a data-dependent branch per row mispredicts about as often
    as r_i is 0 or not, which cost more than the rows it skipped (a9a)."""
    cdef Py_ssize_t i, j, t, cnt = lo
    cdef double u, b = 0.0
    for j in range(X.d):
        out[j] = 0.0
    for i in range(lo, hi):
        active[cnt] = i
        cnt += r[i] != 0.0
    for t in range(lo, cnt):
        i = active[t]
        u = y[i] * r[i]
        b += u
        row_axpy(X, i, u, out)
    return b


cdef double _w_bar_sq(const double* a, double b, const double* sc, const double* m,
                      Py_ssize_t d) noexcept nogil:
    cdef Py_ssize_t j
    cdef double acc = 0.0, t
    for j in range(d):
        t = sc[j] * (a[j] - m[j] * b)
        acc += t * t
    return acc


cdef void _reduce_buffers(const double* bufs, Py_ssize_t ns, Py_ssize_t d,
                            double* a_new) noexcept nogil:
    """a_new = sum of the ns rows of ``bufs`` (ns x d), added in block order."""
    cdef Py_ssize_t j, k
    cdef double t
    for j in range(d):
        t = bufs[j]
        for k in range(1, ns):
            t = t + bufs[k * d + j]
        a_new[j] = t


cdef double _combine_blocks(double* bufs, const double* parts, Py_ssize_t ns, Py_ssize_t d,
                           double* a_new, const double* r_new, Py_ssize_t n, double kappa,
                           const double* level, Py_ssize_t ls, double* sums, Py_ssize_t* ncert, double unit,
                           double rounding, double feas, double gamma_n) noexcept nogil:
    """End of a blocked FISTA iteration: a_new = sum of the blocks' d-vectors (``bufs``,
    ns x d; with one block the scatter wrote a_new itself), sums[j] = sum over blocks of
    parts[k, j] (||y_k - r_new||^2 in units of ``unit``, sum r_new, ||r_new||^2, b_new),
    both in block order; returns eps = kappa ||y_k - r_new|| + rounding
    + feas (|b_new| + gamma_n sum r_new) (the last term: the residual of y^T r = 0 of the
    classical SVM, docs/svm.md section 3) and sets ``ncert`` = #{i: level_i - r_new_i > eps}
    (``level_i`` = min(gamma_i, 1/mu), ``svm.certify_level``)."""
    cdef Py_ssize_t k, i, j, count = 0
    cdef double eps
    if ns > 1:
        _reduce_buffers(bufs, ns, d, a_new)
    for j in range(4):
        sums[j] = 0.0
    for k in range(ns):
        for j in range(4):
            sums[j] = sums[j] + parts[4 * k + j]
    eps = kappa * (sqrt(sums[0]) * unit) + rounding
    if feas != 0.0:
        eps = eps + feas * (fabs(sums[3]) + gamma_n * sums[1])
    for i in range(n):
        count += (_at(level, ls, i) - r_new[i]) > eps
    ncert[0] = count
    return eps


def fista_iteration(rows_t X, const double[::1] y, const double[::1] r_prev,
                    const double[::1] r,
                    const double[::1] a_prev, const double[::1] a, double b_prev, double b,
                    const double[::1] sc, const double[::1] m, double M, const double[::1] c,
                    double beta, double L, double mu, const double[:] box, double kappa,
                    const double[:] level, double[::1] r_new, double[::1] a_new, double[::1] v,
                    double[:, ::1] bufs,
                    double[:, ::1] parts, Py_ssize_t[::1] active, double unit=1.0,
                    double rounding=0.0, int threads=0):
    """One whole FISTA iteration on the perturbed H-SVM dual (arXiv:2512.03947, Algorithm 1).

    The O(d) work first: the extrapolated a(y_k) = (1 + beta) a - beta a_prev (a is
    linear in r), v = s2 * a(y_k), b(y_k) and the offset -m . v + b(y_k) M + b(y_k), so
    that (H~ w~(y_k))_i = y_i (x_i . v - b(y_k) c_i + offset); then, block by block of
    rows, the gather x_i . v (the row products in a loop of their own: measured about 3x
    faster than computing the update in the same loop body, a9a, CSR), the update

        y_k,i   = r_i + beta (r_i - r_prev,i)
        r_new,i = proj_[0, gamma_i](y_k,i + (1 - (H~ H~^T y_k)_i - mu y_k,i) / L)

    (``box`` holds the per-point bounds gamma_i = C w_i, ``level`` the levels
    min(gamma_i, 1/mu); both n-vectors, constant for an unweighted run) and the scatter
    of y_i r_new,i x_i into the block's own d-vector (row i needs nothing
    from other rows: one parallel region per iteration); then the d-vectors are summed in
    block order, a_new = X^T (y * r_new), and the error bound, the certified count and
    ||w~(r_new)||^2 (objective) follow. The ns = bufs.shape[0] blocks (``bufs``, ns x d;
    partial sums in ``parts``, ns x 4) come from ``fista_blocks``: the result does not
    depend on the thread count. ``active`` (length n) is scratch. ``threads`` >= 1 caps
    the OpenMP threads of the call (0: the OpenMP limit), without effect on the result.

    Returns (b_new, eps, n_certified, sum r_new, ||r_new||^2, ||w~(r_new)||^2, dsq) with
    dsq = ||y_k - r_new||^2 / unit^2 (what a caller that reduces several row blocks of X
    needs), eps = kappa ||y_k - r_new|| + ``rounding`` (paper section 2.3; the rounding term of
    docs/svm.md section 2, computed by the caller) and n_certified the number of points
    with level_i - r_new,i > eps (``svm.certify_level``). The
    norm is summed in units of the power of two ``unit`` (the scale of r): no underflow.
    """
    cdef Py_ssize_t bs = _bound_step(box, "box")  # 0: one bound for all points
    cdef Py_ssize_t ls = _bound_step(level, "level")
    cdef Py_ssize_t n = y.shape[0]
    cdef Py_ssize_t d = a_new.shape[0]
    cdef Py_ssize_t ns = bufs.shape[0]
    cdef Py_ssize_t k, i, lo, hi, ncert = 0
    cdef int nt = _threads(stored(X), ns, threads)
    cdef double by, offset, mv, b_new = 0.0, eps, dsq = 0.0, rsum = 0.0, rsq = 0.0, wsq, sums[4]
    cdef double invL = 1.0 / L
    cdef double inv_unit = 1.0 / unit
    cdef double* out
    # X's rows and columns against every vector the loops read (found by review: a
    # feature map's matrix of other rows than y was read and written out of bounds)
    _same_lengths("fista_iteration", X.n, y=y, r_prev=r_prev, r=r, c=c, box=box,
                  level=level, r_new=r_new, active=active)
    _same_lengths("fista_iteration", X.d, a_prev=a_prev, a=a, sc=sc, m=m, v=v, a_new=a_new)
    _check_blocks("fista_iteration", d, bufs, parts, ns, 4)
    with nogil:
        mv = _extrapolate_v(&a[0], &a_prev[0], &sc[0], &m[0], beta, &v[0], d)
        by = (1.0 + beta) * b - beta * b_prev
        offset = -mv + by * M + by
        for k in prange(ns, schedule="static", num_threads=nt):
            lo = k * n // ns
            hi = (k + 1) * n // ns
            _gather_block(X, lo, hi, &v[0], &r_new[0])
            _hsvm_update_block(lo, hi, &y[0], &r_prev[0], &r[0], &c[0], by, offset, beta,
                               invL, mu, &box[0], bs, inv_unit, &r_new[0], &parts[k, 0])
            # one block: scatter straight into a_new
            out = &a_new[0] if ns == 1 else &bufs[k, 0]
            parts[k, 3] = _scatter_block(X, lo, hi, &y[0], &r_new[0], out, &active[0])
        eps = _combine_blocks(&bufs[0, 0], &parts[0, 0], ns, d, &a_new[0], &r_new[0], n,
                              kappa, &level[0], ls, sums, &ncert, unit, rounding, 0.0, 0.0)
        dsq, rsum, rsq, b_new = sums[0], sums[1], sums[2], sums[3]
        wsq = _w_bar_sq(&a_new[0], b_new, &sc[0], &m[0], d) + b_new * b_new
    return b_new, eps, ncert, rsum, rsq, wsq, dsq


cdef void _svm_gradient_block(Py_ssize_t lo, Py_ssize_t hi, const double* y,
                              const double* r_prev, const double* r, const double* c,
                              double by, double offset, double beta, double invL, double mu,
                              double lam0, const double* box, Py_ssize_t bs,
                              double* yk_out, double* vproj, double* part) noexcept nogil:
    """vproj (holding the row products on entry) <- y_k + grad g(y_k) / L; yk_out <- y_k;
    part[0:2] <- the block's share of (phi(lam0), n_free(lam0)) of the projection's search
    (as ``_phi_slope``, in the same pass)."""
    cdef Py_ssize_t i, nf = 0
    cdef double yk, hw, vp, t, acc = 0.0
    for i in range(lo, hi):
        yk = r[i] + beta * (r[i] - r_prev[i])
        hw = y[i] * (vproj[i] - by * c[i] + offset)
        yk_out[i] = yk
        vp = yk + (1.0 - hw - mu * yk) * invL
        vproj[i] = vp
        t = vp - lam0 * y[i]
        acc += y[i] * _clamp(t, 0.0, _at(box, bs, i))
        nf += (t > 0.0) & (t < _at(box, bs, i))
    part[0] = acc
    part[1] = <double>nf


def fista_svm_gradient(rows_t X, const double[::1] y, const double[::1] r_prev,
                       const double[::1] r,
                       const double[::1] a_prev, const double[::1] a, double b_prev, double b,
                       const double[::1] sc, const double[::1] m, double M,
                       const double[::1] c, double beta, double L, double mu,
                       double[::1] v, double[::1] yk_out, double[::1] vproj,
                       double lam0, const double[:] box, double[:, ::1] parts,
                       int threads=0):
    """First half of a FISTA iteration for the classical SVM, with the extrapolation of
    a and b in the same call (as ``fista_iteration``): y_k and the point to project,
    vproj = y_k + grad g(y_k) / L, grad_i = 1 - (H H^T y_k)_i - mu y_k,i, over the
    ``parts.shape[0]`` row blocks (``fista_blocks``) in one parallel region; every entry
    is computed by one thread, so the result does not depend on the thread count
    (``threads`` as in ``fista_iteration``). Returns (phi(lam0), n_free(lam0)), the first
    evaluation of the projection's multiplier search (``_projection.multiplier``) at its
    warm start, from the same pass (the blocks' shares added in block order)."""
    cdef Py_ssize_t n = y.shape[0]
    cdef Py_ssize_t d = v.shape[0]
    cdef Py_ssize_t ns = parts.shape[0]
    cdef Py_ssize_t bs = _bound_step(box, "box")  # 0: one bound for all points
    cdef Py_ssize_t k, lo, hi
    cdef int nt = _threads(stored(X), ns, threads)
    cdef double by, offset, mv, ph = 0.0, nf = 0.0
    cdef double invL = 1.0 / L
    _same_lengths("fista_svm_gradient", X.n, y=y, r_prev=r_prev, r=r, c=c, box=box,
                  yk_out=yk_out, vproj=vproj)
    _same_lengths("fista_svm_gradient", X.d, a_prev=a_prev, a=a, sc=sc, m=m, v=v)
    _check_blocks("fista_svm_gradient", d, None, parts, ns, 2)
    with nogil:
        mv = _extrapolate_v(&a[0], &a_prev[0], &sc[0], &m[0], beta, &v[0], d)
        by = (1.0 + beta) * b - beta * b_prev
        offset = -mv + by * M
        for k in prange(ns, schedule="static", num_threads=nt):
            lo = k * n // ns
            hi = (k + 1) * n // ns
            _gather_block(X, lo, hi, &v[0], &vproj[0])
            _svm_gradient_block(lo, hi, &y[0], &r_prev[0], &r[0], &c[0], by, offset, beta,
                                invL, mu, lam0, &box[0], bs, &yk_out[0], &vproj[0],
                                &parts[k, 0])
        for k in range(ns):
            ph += parts[k, 0]
            nf += parts[k, 1]
    return ph, <Py_ssize_t>nf


cdef void _svm_finish_block(Py_ssize_t lo, Py_ssize_t hi, const double* y, const double* yk,
                            const double* vproj, double lam, const double* box, Py_ssize_t bs, double inv_unit,
                            double* r_new, double* part) noexcept nogil:
    cdef Py_ssize_t i
    cdef double rn, diff, dsq = 0.0, rsum = 0.0, rsq = 0.0
    for i in range(lo, hi):
        rn = _clamp(vproj[i] - lam * y[i], 0.0, _at(box, bs, i))
        r_new[i] = rn
        diff = (yk[i] - rn) * inv_unit
        dsq += diff * diff
        rsum += rn
        rsq += rn * rn
    part[0] = dsq
    part[1] = rsum
    part[2] = rsq


def fista_svm_finish(rows_t X, const double[::1] y, const double[::1] yk,
                     const double[::1] vproj,
                     double lam, const double[:] box, double kappa,
                     const double[:] level, const double[::1] sc,
                     const double[::1] m, double[::1] r_new, double[::1] a_new,
                     double[:, ::1] bufs, double[:, ::1] parts, Py_ssize_t[::1] active,
                     double unit=1.0, double rounding=0.0, double feas=0.0,
                     double gamma_n=0.0, int threads=0):
    """Second half of a FISTA iteration for the classical SVM, given the multiplier lam of
    ``_projection.multiplier``: r_new = proj_[0, gamma_i](vproj - lam y) (``box``: the
    n-vector of the gamma_i, ``level``: of min(gamma_i, 1/mu)), a_new = X^T (y * r_new)
    (block d-vectors ``bufs`` summed in block order, as in ``fista_iteration``), the error
    bound eps = kappa ||y_k - r_new|| + rounding + feas (|y^T r_new| + gamma_n sum r_new)
    (docs/svm.md section 3: the rounding term, and the residual of y^T r = 0), the
    certified count (level - r_new,i > eps) and ||w(r_new)||^2 (no column of ones).
    Returns (b_new, eps, n_certified, sum r_new, ||r_new||^2, ||w(r_new)||^2, dsq), dsq as
    in ``fista_iteration``; ``threads`` as there."""
    cdef Py_ssize_t bs = _bound_step(box, "box")  # 0: one bound for all points
    cdef Py_ssize_t ls = _bound_step(level, "level")
    cdef Py_ssize_t n = y.shape[0]
    cdef Py_ssize_t d = a_new.shape[0]
    cdef Py_ssize_t ns = bufs.shape[0]
    cdef Py_ssize_t k, i, lo, hi, ncert = 0
    cdef int nt = _threads(stored(X), ns, threads)
    cdef double b_new = 0.0, eps, dsq = 0.0, rsum = 0.0, rsq = 0.0, wsq, sums[4]
    cdef double inv_unit = 1.0 / unit
    cdef double* out
    _same_lengths("fista_svm_finish", X.n, y=y, yk=yk, vproj=vproj, box=box, level=level,
                  r_new=r_new, active=active)
    _same_lengths("fista_svm_finish", X.d, sc=sc, m=m, a_new=a_new)
    _check_blocks("fista_svm_finish", d, bufs, parts, ns, 4)
    with nogil:
        for k in prange(ns, schedule="static", num_threads=nt):
            lo = k * n // ns
            hi = (k + 1) * n // ns
            _svm_finish_block(lo, hi, &y[0], &yk[0], &vproj[0], lam, &box[0], bs, inv_unit,
                              &r_new[0], &parts[k, 0])
            out = &a_new[0] if ns == 1 else &bufs[k, 0]
            parts[k, 3] = _scatter_block(X, lo, hi, &y[0], &r_new[0], out, &active[0])
        eps = _combine_blocks(&bufs[0, 0], &parts[0, 0], ns, d, &a_new[0], &r_new[0], n,
                              kappa, &level[0], ls, sums, &ncert, unit, rounding, feas, gamma_n)
        dsq, rsum, rsq, b_new = sums[0], sums[1], sums[2], sums[3]
        wsq = _w_bar_sq(&a_new[0], b_new, &sc[0], &m[0], d)
    return b_new, eps, ncert, rsum, rsq, wsq, dsq


# ------------------------------------------------------ projection onto box and hyperplane
cdef double _phi_slope(const double* v, const double* y, Py_ssize_t n, const double* box, Py_ssize_t bs,
                       double lam, Py_ssize_t* n_free) noexcept nogil:
    """phi(lam) = y^T proj_[0, gamma_i](v - lam y) and the number of free coordinates
    (0 < v_i - lam y_i < gamma_i): phi'(lam) = -n_free between breakpoints. Branch-free
    (about half of the coordinates sit at a bound, in no predictable order)."""
    cdef Py_ssize_t i, nf = 0
    cdef double acc = 0.0, t
    for i in range(n):
        t = v[i] - lam * y[i]
        acc += y[i] * _clamp(t, 0.0, _at(box, bs, i))
        nf += (t > 0.0) & (t < _at(box, bs, i))
    n_free[0] = nf
    return acc


cdef double _next_breakpoint(const double* v, const double* y, Py_ssize_t n, const double* box, Py_ssize_t bs,
                             double lam, bint upward) noexcept nogil:
    """The nearest breakpoint (y_i v_i or y_i (v_i - gamma_i)) strictly above (below) lam."""
    cdef Py_ssize_t i
    cdef double best = INFINITY if upward else -INFINITY, b1, b2
    for i in range(n):
        b1 = y[i] * v[i]
        b2 = y[i] * (v[i] - _at(box, bs, i))
        if upward:
            if b1 > lam and b1 < best:
                best = b1
            if b2 > lam and b2 < best:
                best = b2
        else:
            if b1 < lam and b1 > best:
                best = b1
            if b2 < lam and b2 > best:
                best = b2
    return best


def phi_slope(const double[::1] v, const double[::1] y, const double[:] box, double lam):
    """(phi, n_free) of the projection's multiplier search (``_projection.multiplier``) on
    a row block's share of v, y and the bounds ``box``."""
    cdef Py_ssize_t bs = _bound_step(box, "box")  # 0: one bound for all points
    cdef Py_ssize_t nf = 0
    cdef double ph = 0.0
    if v.shape[0]:
        ph = _phi_slope(&v[0], &y[0], v.shape[0], &box[0], bs, lam, &nf)
    return ph, nf


def next_breakpoint(const double[::1] v, const double[::1] y, const double[:] box,
                    double lam, bint upward):
    """The row block's nearest breakpoint strictly above (``upward``) or below lam."""
    cdef Py_ssize_t bs = _bound_step(box, "box")  # 0: one bound for all points
    if v.shape[0] == 0:
        return INFINITY if upward else -INFINITY
    return _next_breakpoint(&v[0], &y[0], v.shape[0], &box[0], bs, lam, upward)


# ------------------------------------------------------------------ dual coordinate descent
# prefetch distances of the dcd pass, tunable (docs/svm.md): cache hints only, results
# do not depend on them; set on x86_64 (64-byte cache lines)
cdef enum:
    _PF_FAR = 24   # coordinates ahead: row offsets and per-coordinate scalars
    _PF_NEAR = 12  # coordinates ahead: the row itself (its offsets have arrived)


cdef inline uint64_t _splitmix64(uint64_t* state) noexcept nogil:
    # SplitMix64 (Steele, Lea and Flood 2014): the generator of the epoch permutations
    cdef uint64_t z
    state[0] += <uint64_t>0x9E3779B97F4A7C15ULL
    z = state[0]
    z = (z ^ (z >> 30)) * <uint64_t>0xBF58476D1CE4E5B9ULL
    z = (z ^ (z >> 27)) * <uint64_t>0x94D049BB133111EBULL
    return z ^ (z >> 31)


cdef void _shuffle(int64_t* index, Py_ssize_t k, uint64_t* state) noexcept nogil:
    # Fisher-Yates: position i (from the end) takes a uniform draw among 0..i, from 53
    # random bits (bias of order 2^-53 per draw)
    cdef Py_ssize_t i, j
    cdef int64_t tmp
    cdef double u
    i = k - 1
    while i > 0:
        u = <double>(_splitmix64(state) >> 11) * (1.0 / 9007199254740992.0)
        j = <Py_ssize_t>(u * <double>(i + 1))
        if j > i:
            j = i
        tmp = index[i]
        index[i] = index[j]
        index[j] = tmp
        i -= 1


# the epoch order of dcd on more than ORDER_RUNS_ABOVE points (``_run_shuffle``): runs of
# ORDER_RUN coordinates adjacent in memory, in random order, each window of ORDER_WINDOW
# consecutive places of that sequence shuffled. Beyond that size the per-point arrays
# alone (r, y, c, Q_ii: 32 bytes a point, 4 MiB here) outgrow the caches, and in a
# uniform order every coordinate fetches a cache line of each of them and of its row for
# itself; in runs of 16 the lines are shared (4M x 28 float64: 6.0-6.5 -> 3.8-4.0 s a
# solve). Runs alone, always visited together, took up to 35% more epochs on
# ill-conditioned problems (C = 1, mu = 1e-2); shuffling windows of 64 runs keeps the
# epochs within the seeds' spread of the uniform order at the same speed (docs/svm.md
# section 4).
cdef enum:
    ORDER_RUN = 16
    ORDER_WINDOW = 1024
    ORDER_RUNS_ABOVE = 131072

#: the order's constants, readable from Python (docs/svm.md section 4)
ORDER = {"run": ORDER_RUN, "window": ORDER_WINDOW, "runs_above": ORDER_RUNS_ABOVE}


def order_scratch_sizes(Py_ssize_t n):
    """(int64 entries, bytes) of the scratch ``dcd_epochs`` needs for n points (one
    entry each when the order is a uniform shuffle)."""
    if n <= ORDER_RUNS_ABOVE:
        return 1, 1
    return n + n // ORDER_RUN + 2, n


cdef int _run_shuffle(int64_t* index, Py_ssize_t k, Py_ssize_t n, unsigned char* seen,
                      int64_t* scratch, uint64_t* state) noexcept nogil:
    # index[:k] (distinct coordinates in [0, n), any order) <- the same coordinates in
    # this epoch's order: increasing, cut into runs of ORDER_RUN from a random offset
    # (the first run shorter), the runs in random order, then every window of
    # ORDER_WINDOW consecutive places shuffled (Fisher-Yates, the same stream); scratch
    # holds k + k // ORDER_RUN + 2 entries. Returns -1 (index left sorted) when index[:k]
    # repeats a coordinate (they are checked to lie in [0, n) before), else 0
    cdef bint every = k == n  # no coordinate shrunk: the sorted set is 0, 1, ..., n - 1
    cdef int64_t* out = index if every else scratch
    cdef int64_t* starts = scratch + k
    cdef Py_ssize_t i, s, lo, hi, nr, r, pos, off
    if not every:
        memset(seen, 0, n)
        for s in range(k):
            seen[index[s]] = 1
        s = 0
        for i in range(n):
            if seen[i]:
                index[s] = i
                s += 1
        if s != k:
            return -1
    # run starts 0, off, off + ORDER_RUN, ... below k (off in [1, ORDER_RUN])
    off = 1 + <Py_ssize_t>((_splitmix64(state) >> 11) % <uint64_t>ORDER_RUN)
    nr = 0
    starts[nr] = 0
    nr += 1
    lo = off
    while lo < k:
        starts[nr] = lo
        nr += 1
        lo += ORDER_RUN
    _shuffle(starts, nr, state)
    pos = 0
    for r in range(nr):
        lo = starts[r]
        hi = off if lo == 0 else lo + ORDER_RUN
        if hi > k:
            hi = k
        if every:
            for s in range(lo, hi):
                out[pos + s - lo] = s
        else:
            for s in range(lo, hi):
                out[pos + s - lo] = index[s]
        pos += hi - lo
    if not every:
        memcpy(index, out, k * sizeof(int64_t))
    pos = 0
    while pos < k:
        hi = pos + ORDER_WINDOW
        if hi > k:
            hi = k
        _shuffle(index + pos, hi - pos, state)
        pos = hi
    return 0


def epoch_order(int64_t[::1] index, Py_ssize_t k, uint64_t[::1] rng_state):
    """index[:k] in place in the order of one dcd epoch on len(index) points (for
    tests): a uniform shuffle up to ``ORDER["runs_above"]`` points, else shuffled windows
    of runs (``_run_shuffle``). index[:k] must be distinct coordinates in [0, len(index))."""
    cdef Py_ssize_t n = index.shape[0]
    cdef Py_ssize_t i
    if not 0 <= k <= n or rng_state.shape[0] != 1:
        raise ValueError("epoch_order: k must be in [0, len(index)], rng_state one entry")
    seen = np.zeros(n, dtype=np.uint8)
    for i in range(k):
        if not 0 <= index[i] < n or seen[index[i]]:
            raise ValueError("epoch_order: index[:k] must be distinct coordinates in "
                             "[0, len(index))")
        seen[index[i]] = 1
    cdef Py_ssize_t m = order_scratch_sizes(n)[0]
    cdef int64_t[::1] scratch = np.empty(m, dtype=np.int64)
    cdef unsigned char[::1] mark = seen
    with nogil:
        if n > ORDER_RUNS_ABOVE:
            _run_shuffle(&index[0], k, n, &mark[0], &scratch[0], &rng_state[0])
        else:
            _shuffle(&index[0], k, &rng_state[0])


cdef Py_ssize_t _dcd_pass(rows_t X, const double* y, int64_t* index, Py_ssize_t active_size,
                          double* r, double* s2a, double* scal, const double* sc,
                          const double* c, const double* qd, double M, double t_col,
                          double mu, const double* box, Py_ssize_t bs, double pg_max_old, double pg_min_old,
                          bint shrinking, double* out, double* pairs) noexcept nogil:
    # one epoch of dual coordinate descent (Hsieh et al. 2008, LIBLINEAR's solver) over
    # index[:active_size] (already permuted): for each i, G_i = (Q r)_i - 1, PG_i its
    # projection, r_i <- proj_[0, gamma_i](r_i - G_i / Q_ii) (gamma_i = box[i]; a box
    # [0, 0] keeps r_i = 0 and PG_i = 0), scal = [b, P] and s2a kept
    # up to date; with ``shrinking`` coordinates at a bound that pass LIBLINEAR's test
    # against the previous epoch's PG extremes are swapped to the end of ``index``.
    # The row's product with s2a uses four partial sums (``row_dot4``): it is on the chain
    # from one coordinate to the next, and one chain of additions over a dense row's
    # entries was the longest part of it. CSR rows read s2a and sc from ``pairs`` when
    # given (s2a_j = pairs[2 j], sc_j = pairs[2 j + 1], ``row_dot4_pairs``: the same
    # numbers, one cache line per column for both) and leave s2a there; dense rows, and
    # CSR rows with ``pairs`` NULL, use s2a and sc.
    # out = [pg_max, pg_min, sum PG^2]; returns the new active size
    cdef Py_ssize_t s, i, tmp
    cdef double b = scal[0], P = scal[1]
    cdef double G, PG, rold, rn, u, pg_max = -INFINITY, pg_min = INFINITY, pgsq = 0.0
    s = 0
    while s < active_size:
        # the visiting order is random: fetch the per-coordinate scalars _PF_FAR
        # coordinates ahead and the rows _PF_NEAR ahead (a cache hint, no effect on results)
        if s + _PF_FAR < active_size:
            i = index[s + _PF_FAR]
            row_prefetch_offsets(X, i)
            MK_PREFETCH(&y[i])
            MK_PREFETCH(&r[i])
            MK_PREFETCH(&c[i])
            MK_PREFETCH(&qd[i])
            MK_PREFETCH(&box[i * bs])
        if s + _PF_NEAR < active_size:
            row_prefetch(X, index[s + _PF_NEAR])
        i = index[s]
        if rows_t in csr_rows_t and pairs != NULL:
            G = row_dot4_pairs(X, i, pairs)
        else:
            G = row_dot4(X, i, s2a)
        G = y[i] * (G - b * c[i] - P + b * M + t_col * b) + mu * r[i] - 1.0
        PG = 0.0
        if r[i] <= 0.0:
            if shrinking and G > pg_max_old:
                active_size -= 1
                tmp = index[s]
                index[s] = index[active_size]
                index[active_size] = tmp
                continue
            if G < 0.0 and _at(box, bs, i) > 0.0:
                PG = G
        elif r[i] >= _at(box, bs, i):
            if shrinking and G < pg_min_old:
                active_size -= 1
                tmp = index[s]
                index[s] = index[active_size]
                index[active_size] = tmp
                continue
            if G > 0.0:
                PG = G
        else:
            PG = G
        if PG > pg_max:
            pg_max = PG
        if PG < pg_min:
            pg_min = PG
        pgsq += PG * PG
        if fabs(PG) > 1e-12:
            rold = r[i]
            rn = _clip(rold - G / qd[i], 0.0, _at(box, bs, i))
            r[i] = rn
            u = (rn - rold) * y[i]
            if u != 0.0:
                b += u
                P += u * c[i]
                if rows_t in csr_rows_t and pairs != NULL:
                    row_axpy_scaled_pairs(X, i, u, pairs)
                else:
                    row_axpy_scaled(X, i, u, sc, s2a)
        s += 1
    scal[0] = b
    scal[1] = P
    out[0] = pg_max
    out[1] = pg_min
    out[2] = pgsq
    return active_size


cdef double _pg_pass(rows_t X, const double* y, const double* r, const double* s2a, double b,
                     double P, const double* c, double M, double t_col, double t_shift, double mu, const double* box, Py_ssize_t bs,
                     double* pg) noexcept nogil:
    # the full projected gradient (see projected_gradient); returns ||p||^2
    cdef Py_ssize_t i
    cdef double G, p, acc = 0.0
    for i in range(X.n):  # products in their own loop (see fista_iteration)
        pg[i] = row_dot(X, i, s2a)
    for i in range(X.n):
        G = y[i] * (pg[i] - b * c[i] - P + b * M + t_col * b + t_shift) + mu * r[i] - 1.0
        p = _projected(G, r[i], _at(box, bs, i))
        pg[i] = p
        acc += p * p
    return acc


cdef void _fresh_scatter_rows(rows_t X, Py_ssize_t lo, Py_ssize_t hi, const double* y,
                              const double* r, const double* xi, long double* fresh,
                              long double* b_out, double* rxi_out) noexcept nogil:
    # rows lo..hi of _fresh_scatter, added to fresh, b_out[0] and rxi_out[0]
    cdef Py_ssize_t i, k
    cdef long double b = b_out[0]
    cdef double rxi = rxi_out[0]
    for i in range(lo, hi):
        if r[i] != 0.0:
            b += y[i] * r[i]
            for k in range(row_start(X, i), row_stop(X, i)):
                fresh[col(X, i, k)] += (<long double>X.data[k]) * (y[i] * r[i])
        rxi += r[i] * xi[i]
    b_out[0] = b
    rxi_out[0] = rxi


cdef double _fresh_scatter(rows_t X, const double* y, const double* r, const double* xi,
                           long double* fresh, long double* b_out, int threads) noexcept nogil:
    # first pass of the full bound: fresh = X^T (y * r) and b = y^T r in long double;
    # returns r . xi. A large block by row parts (``_n_parts``: a count of the data
    # alone) on the OpenMP threads, the parts' sums added in part order (one part, the
    # whole pass in one, when the scratch cannot be had)
    cdef Py_ssize_t j, q, P, d = X.d, n = X.n
    cdef long double b = 0.0
    cdef double rxi = 0.0
    cdef double nnz = stored(X)
    cdef long double* buf = NULL
    cdef double* rbuf = NULL
    cdef int nt = 1
    for j in range(d):
        fresh[j] = 0.0
    P = _n_parts(n, d, nnz)
    if P > 1:
        buf = <long double*>calloc(P * (d + 1), sizeof(long double))
        rbuf = <double*>calloc(P, sizeof(double))
        if buf == NULL or rbuf == NULL:
            P = 1
        else:
            nt = _threads(nnz, P, threads)
    if P == 1:
        _fresh_scatter_rows(X, 0, n, y, r, xi, fresh, &b, &rxi)
    else:
        for q in prange(P, schedule="dynamic", num_threads=nt):
            _fresh_scatter_rows(X, q * n // P, (q + 1) * n // P, y, r, xi,
                                buf + q * (d + 1), buf + q * (d + 1) + d, rbuf + q)
        for q in range(P):
            for j in range(d):
                fresh[j] += buf[q * (d + 1) + j]
            b += buf[q * (d + 1) + d]
            rxi += rbuf[q]
    free(buf)
    free(rbuf)
    b_out[0] = b
    return rxi


cdef long double _fresh_coefficients(long double* fresh, const double* sc, const double* m,
                                     long double b, Py_ssize_t d) noexcept nogil:
    # v = s (s (a - m b)), the original-space coefficients, in place of a; returns m . v
    cdef Py_ssize_t j
    cdef long double mv = 0.0
    for j in range(d):
        fresh[j] = sc[j] * (sc[j] * (fresh[j] - m[j] * b))
        mv += m[j] * fresh[j]
    return mv


cdef long double _fresh_margins(rows_t X, const double* y, const double* r,
                                const long double* fresh, long double mv, long double b,
                                double t_col, double t_shift, double mu,
                                const double* box, Py_ssize_t bs) noexcept nogil:
    # second pass: sum of p_i^2 (long double) with theta_i = y_i (x_i . v - mv + t_col b
    # + t_shift), mv = m . v; only p_i is rounded to float64
    cdef Py_ssize_t i, k
    cdef long double t, G, acc = 0.0
    cdef double p
    for i in range(X.n):
        t = 0.0
        for k in range(row_start(X, i), row_stop(X, i)):
            t += (<long double>X.data[k]) * fresh[col(X, i, k)]
        # mu r_i in long double too: a float64 product would be off by u mu r_i, which
        # the long-double rounding bound does not cover (mu r_i near 1 at a large mu)
        G = y[i] * (t - mv + t_col * b + t_shift) + (<long double>mu) * r[i] - 1.0
        if r[i] <= 0.0:
            p = <double>G if G < 0.0 and _at(box, bs, i) > 0.0 else 0.0
        elif r[i] >= _at(box, bs, i):
            p = <double>G if G > 0.0 else 0.0
        else:
            p = <double>G
        acc += (<long double>p) * p
    return acc


cdef double _fresh_tail(long double acc, double rxi, double rsum, double rsq,
                        const double* rc, double t_col, double t_shift,
                        double mu) noexcept nogil:
    # |p_computed - p| <= rc[0] Omega_i + rc[1] (1 + |theta_i| + mu r_i) + u |p_i| per
    # point, Omega_i = (xi_i + mu_m)(r . xi + e^T r mu_m) + e^T r (docs/svm.md section 4)
    cdef double om, gnorm, dg, norm
    om = rc[2] * (rxi + rsum * rc[3]) + rc[4] * (t_col * rsum + fabs(t_shift))
    gnorm = rc[4] + om + mu * sqrt(rsq)
    dg = rc[0] * om + rc[1] * gnorm + rc[5]
    norm = <double>sqrtl(acc)
    return (norm * (1.0 + rc[0] + 2.3e-16) + dg) * (1.0 + 1e-15) / mu


#: dcd's fresh bound runs inside its epochs, where no busy test is made (the run loop
#: puts a one-shot phase on one thread when the cores are busy, not the steps): its parts
#: go to the OpenMP team only from this many stored entries (a pass of tens of
#: milliseconds), so that a team member descheduled on busy cores delays it by a small
#: fraction (a9a, 4.5e5 entries: two threads made a busy solve 1.6x one thread's time)
cdef double _STEP_PARALLEL_NNZ = 2e7


cdef double _fresh_bound(rows_t X, const double* y, const double* r, const double* sc,
                         const double* m, double mu, const double* box, Py_ssize_t bs, long double* fresh, const double* xi,
                         const double* rc, double rsum, double rsq, double t_col=1.0,
                         double t_shift=0.0) noexcept nogil:
    # eps = ||p(r)|| / mu plus its rounding bound (see dcd_epochs): w scattered afresh from
    # r and the margins, all in long double (a = X^T u, v = s (s (a - m b)) the original-
    # space coefficients, theta_i = y_i (x_i . v - m . v + t_col b + t_shift)); only p_i is
    # rounded to float64. t_col = 1, t_shift = 0: H-SVM; t_col = 0, t_shift = the
    # multiplier: the classical SVM. The passes are those of ``fresh_scatter`` and
    # ``fresh_margins`` (which a caller with several row blocks reduces over them)
    cdef long double b, mv, acc
    cdef double rxi
    # inside dcd's epochs: on the team only from _STEP_PARALLEL_NNZ (see _fresh_bound_d)
    rxi = _fresh_scatter(X, y, r, xi, fresh, &b, 0 if stored(X) >= _STEP_PARALLEL_NNZ else 1)
    mv = _fresh_coefficients(fresh, sc, m, b, X.d)
    acc = _fresh_margins(X, y, r, fresh, mv, b, t_col, t_shift, mu, box, bs)
    return _fresh_tail(acc, rxi, rsum, rsq, rc, t_col, t_shift, mu)


def fresh_scatter(rows_t X, const double[::1] y not None, const double[::1] r not None,
                  const double[::1] xi not None, long double[::1] fresh not None,
                  long double[::1] b_out not None, int threads=0):
    """First pass of the long-double bound ||p(r)|| / mu (``_fresh_bound``) over a row
    block: fresh = X^T (y * r), b_out[0] = y^T r (long double); returns r . xi. A large
    block by row parts on the OpenMP threads (at most ``threads`` when >= 1)."""
    cdef double rxi
    cdef long double b = 0.0
    cdef long double dummy = 0.0
    for name, got in (("y", y.shape[0]), ("r", r.shape[0]), ("xi", xi.shape[0])):
        if got != X.n:
            raise ValueError(f"{name} has {got} entries for a block of {X.n} rows")
    _check_width(X.d, "fresh", fresh.shape[0])
    if b_out.shape[0] < 1:
        raise ValueError("b_out needs an entry for y^T r")
    with nogil:
        rxi = _fresh_scatter(X, &y[0] if X.n > 0 else NULL, &r[0] if X.n > 0 else NULL,
                             &xi[0] if X.n > 0 else NULL,
                             &fresh[0] if X.d > 0 else &dummy, &b, threads)
    b_out[0] = b
    return rxi


def fresh_coefficients(long double[::1] fresh, const double[::1] sc, const double[::1] m,
                       long double[::1] ld):
    """fresh <- s (s (fresh - m b)) with b = ld[0] (long double); ld[1] <- m . fresh."""
    _same_lengths("fresh_coefficients", fresh.shape[0], sc=sc, m=m)
    if ld.shape[0] < 2 or fresh.shape[0] == 0:
        raise ValueError("fresh_coefficients: ld needs 2 entries and fresh at least one")
    ld[1] = _fresh_coefficients(&fresh[0], &sc[0], &m[0], ld[0], fresh.shape[0])


def fresh_margins(rows_t X, const double[::1] y, const double[::1] r, const long double[::1] fresh,
                  long double[::1] ld, double t_col, double t_shift, double mu,
                  const double[:] box):
    """Second pass over a row block: ld[2] <- sum of p_i(r)^2 (long double), the margins
    from the coefficients ``fresh``, mv = ld[1], b = ld[0]."""
    cdef Py_ssize_t bs = _bound_step(box, "box")  # 0: one bound for all points
    cdef long double acc
    _same_lengths("fresh_margins", X.n, y=y, r=r)
    _same_lengths("fresh_margins", X.d, fresh=fresh)
    _box_of("fresh_margins", X.n, box)
    if ld.shape[0] < 3:
        raise ValueError(f"fresh_margins: ld has {ld.shape[0]} entries, 3 expected")
    if X.n == 0:
        ld[2] = 0.0
        return
    cdef long double mv = ld[1], b = ld[0]
    with nogil:
        acc = _fresh_margins(X, &y[0], &r[0], &fresh[0], mv, b, t_col, t_shift, mu,
                             &box[0], bs)
    ld[2] = acc


def fresh_tail(const long double[::1] acc, double rxi, double rsum, double rsq,
               const double[::1] rc, double t_col, double t_shift, double mu):
    """The bound from the reduced passes: (||p|| (1 + rc[0] + 2.3e-16) + its rounding
    bound) (1 + 1e-15) / mu, ||p|| = sqrt(acc[0]) (long double)."""
    if acc.shape[0] < 1 or rc.shape[0] < 6:
        raise ValueError("fresh_tail: acc needs one entry and rc at least 6")
    return _fresh_tail(acc[0], rxi, rsum, rsq, &rc[0], t_col, t_shift, mu)


def w_bar_sq(const double[::1] a, double b, const double[::1] sc, const double[::1] m):
    """||s * (a - m b)||^2, as ``fista_iteration`` computes it (a serial loop)."""
    _same_lengths("w_bar_sq", a.shape[0], sc=sc, m=m)
    if a.shape[0] == 0:
        return 0.0
    return _w_bar_sq(&a[0], b, &sc[0], &m[0], a.shape[0])


cdef void _scatter_d_rows(rows_t X, Py_ssize_t lo, Py_ssize_t hi, const double* y,
                          const double* r, const double* xi, double* fresh,
                          double* sums) noexcept nogil:
    # rows lo..hi of _fresh_bound_d's scatter: fresh += X^T (y r), sums[0] += y^T r,
    # sums[1] += r . xi
    cdef Py_ssize_t i, k
    cdef double b = sums[0], rxi = sums[1], u
    for i in range(lo, hi):
        if r[i] != 0.0:
            u = y[i] * r[i]
            b += u
            for k in range(row_start(X, i), row_stop(X, i)):
                fresh[col(X, i, k)] += (<double>X.data[k]) * u
        rxi += r[i] * xi[i]
    sums[0] = b
    sums[1] = rxi


cdef double _margins_d_rows(rows_t X, Py_ssize_t lo, Py_ssize_t hi, const double* y,
                            const double* r, const double* fresh, double mv, double b,
                            double mu, const double* box, Py_ssize_t bs) noexcept nogil:
    # rows lo..hi of _fresh_bound_d's margins: the sum of p_i^2
    cdef Py_ssize_t i
    cdef double t, G, p, acc = 0.0
    for i in range(lo, hi):
        t = row_dot4(X, i, fresh)
        G = y[i] * (t - mv + b) + mu * r[i] - 1.0
        p = _projected(G, r[i], _at(box, bs, i))
        acc += p * p
    return acc


cdef double _fresh_bound_d(rows_t X, const double* y, const double* r, const double* sc,
                           const double* m, double mu, const double* box, Py_ssize_t bs, double* fresh,
                           const double* xi, const double* rc, double rsum, double rsq,
                           double* rounding) noexcept nogil:
    # ``_fresh_bound`` with float64 sums (``fresh``: d doubles): about four times faster,
    # its rounding term rc[6] Omega + rc[7] (...) instead of the long-double one, returned
    # in ``rounding`` (the caller redoes the pass in long double where that term decides).
    # A large block's two passes by row parts (``_n_parts``, a count of the data alone)
    # on the OpenMP threads, the parts' sums added in part order (one part, the whole
    # pass in one, when the scratch cannot be had)
    cdef Py_ssize_t j, q, P, d = X.d, n = X.n
    cdef double b = 0.0, mv = 0.0, acc = 0.0, rxi = 0.0, om, gnorm, dg, norm
    cdef double nnz = stored(X)
    cdef double sums[2]
    cdef double* buf = NULL
    cdef int nt = 1
    for j in range(d):
        fresh[j] = 0.0
    P = _n_parts(n, d, nnz)
    if P > 1:
        buf = <double*>calloc(P * (d + 2), sizeof(double))
        if buf == NULL:
            P = 1
        elif nnz >= _STEP_PARALLEL_NNZ:
            nt = _threads(nnz, P, 0)
    if P == 1:
        sums[0] = 0.0
        sums[1] = 0.0
        _scatter_d_rows(X, 0, n, y, r, xi, fresh, sums)
        b = sums[0]
        rxi = sums[1]
    else:
        for q in prange(P, schedule="dynamic", num_threads=nt):
            _scatter_d_rows(X, q * n // P, (q + 1) * n // P, y, r, xi, buf + q * (d + 2),
                            buf + q * (d + 2) + d)
        for q in range(P):
            for j in range(d):
                fresh[j] += buf[q * (d + 2) + j]
            b += buf[q * (d + 2) + d]
            rxi += buf[q * (d + 2) + d + 1]
    for j in range(d):
        fresh[j] = sc[j] * (sc[j] * (fresh[j] - m[j] * b))
        mv += m[j] * fresh[j]
    if P == 1:
        acc = _margins_d_rows(X, 0, n, y, r, fresh, mv, b, mu, box, bs)
    else:
        for q in prange(P, schedule="dynamic", num_threads=nt):
            buf[q] = _margins_d_rows(X, q * n // P, (q + 1) * n // P, y, r, fresh, mv, b,
                                     mu, box, bs)
        for q in range(P):
            acc += buf[q]
    free(buf)
    om = rc[2] * (rxi + rsum * rc[3]) + rc[4] * rsum
    gnorm = rc[4] + om + mu * sqrt(rsq)
    dg = rc[6] * om + rc[7] * gnorm + rc[8]
    norm = sqrt(acc + <double>n * 5e-324)
    rounding[0] = (norm * rc[6] + dg) * (1.0 + 1e-15) / mu
    return norm * (1.0 + 1e-15) / mu + rounding[0]


def _check_dcd_arrays(X, Py_ssize_t n, Py_ssize_t d, Py_ssize_t k, y, int64_t[::1] index,
                      r, s2a, scal, sc, m, c, qd, box, level, rng_state, pg, ctl, hist,
                      Py_ssize_t max_epochs, w_bar, coef, mask, fresh, xi, rc, seen, order):
    """The shapes ``dcd_epochs`` reads and writes, and index (a permutation of the n
    points, its entries in [0, n)); ValueError naming the first that is not."""
    cdef Py_ssize_t i
    cdef int64_t v
    sizes = order_scratch_sizes(n)
    want = [("X rows", X.n, n), ("X columns", X.d, d), ("index", index.shape[0], n),
            ("r", r.shape[0], n), ("c", c.shape[0], n), ("qd", qd.shape[0], n),
            ("pg", pg.shape[0], n), ("mask", mask.shape[0], n), ("xi", xi.shape[0], n),
            ("sc", sc.shape[0], d), ("m", m.shape[0], d), ("w_bar", w_bar.shape[0], d),
            ("coef", coef.shape[0], d), ("fresh", fresh.shape[0], d)]
    for name, got, need in want:
        if got != need:
            raise ValueError(f"dcd_epochs: {name} has {got} entries, not {need}")
    for name, got, need in (("scal", scal.shape[0], 2), ("ctl", ctl.shape[0], 7),
                            ("rng_state", rng_state.shape[0], 1), ("rc", rc.shape[0], 9),
                            ("order", order.shape[0], sizes[0]),
                            ("seen", seen.shape[0], sizes[1])):
        if got < need:
            raise ValueError(f"dcd_epochs: {name} has {got} entries, at least {need} needed")
    for name, a in (("box", box), ("level", level)):
        if a.shape[0] != n and not (a.shape[0] >= 1 and a.strides[0] == 0):
            raise ValueError(f"dcd_epochs: {name} has {a.shape[0]} entries for {n} points")
    if hist.shape[0] < max_epochs or hist.shape[1] < 4:
        raise ValueError(f"dcd_epochs: hist needs {max_epochs} rows of 4, got {hist.shape}")
    if not 0 <= k <= n:
        raise ValueError(f"dcd_epochs: the active size {k} is not in [0, {n}]")
    cdef unsigned char[::1] hit = np.zeros(n, dtype=np.uint8)
    cdef int repeat = 0
    with nogil:
        for i in range(n):
            v = index[i]
            if v < 0 or v >= n:
                break
            if hit[v]:
                repeat = 1
                break
            hit[v] = 1
    if n and (v < 0 or v >= n):
        raise ValueError(f"dcd_epochs: index holds {v}, not a point in [0, {n})")
    if repeat:
        raise ValueError(f"dcd_epochs: index holds {v} twice; it must be a permutation of "
                         f"the {n} points")


def dcd_epochs(rows_t X, const double[::1] y, int64_t[::1] index, double[::1] r, double[::1] s2a,
               double[::1] scal, const double[::1] sc, const double[::1] m,
               const double[::1] c, const double[::1] qd, double M, double mu,
               const double[:] box, const double[:] level, uint64_t[::1] rng_state, double[::1] pg, double[::1] ctl,
               bint shrinking, bint always, double[:, ::1] hist, Py_ssize_t max_epochs,
               double cert_above, double gap_at_most, double[::1] w_bar, double[::1] coef,
               unsigned char[::1] mask, long double[::1] fresh, const double[::1] xi,
               const double[::1] rc, unsigned char[::1] seen, int64_t[::1] order):
    """Up to ``max_epochs`` complete iterations of ``dcd`` (one ``_DCDState.step`` each).

    One iteration: the epoch's order of the active coordinates ``index[:k]`` (SplitMix64
    state ``rng_state``; a Fisher-Yates shuffle up to ``ORDER_RUNS_ABOVE`` points, else
    shuffled runs of adjacent coordinates, ``_run_shuffle``, with the scratch ``seen``
    and ``order`` of ``order_scratch_sizes(n)``), one epoch (``_dcd_pass``, t_col = 1), LIBLINEAR's shrinking
    bookkeeping, the estimate eps_est = sqrt(sum PG^2) / mu, the full projected-gradient
    bound eps = ||p(r)|| / mu when ``always`` or when eps_est would certify more than
    ``certify_fraction * n`` points, and the dual objective.

    The full bound is computed from a w scattered afresh from r (into ``fresh``, d long
    doubles; the epochs' own w accumulates the rounding of every coordinate update), in
    float64 (in long double with ``always``, or where the float64 rounding term alone
    keeps the rule from firing), and carries the rounding bound of docs/svm.md section 4:
    ``xi`` holds ||s * x_i|| and ``rc`` = [gamma_K, gamma_4 in the unit of long double,
    ||xi + mu_m e||, mu_m = ||s * m||, sqrt(n), the long-double underflow term, gamma_K,
    gamma_4, the underflow term in float64] (``svm._RoundingConstants``).

    ``ctl`` (in/out) = [k, pg_max_old, pg_min_old, shrink_tol, certify_fraction (NaN:
    no lazy check), full_passes, eps_est]. Row e of ``hist`` receives (objective, eps or
    inf, number of points with level_i - r_i > eps (``box`` holds the per-point bounds
    gamma_i, ``level`` the min(gamma_i, 1/mu), ``svm.certify_level``), max - min PG gap
    or inf after a reset of the shrunk set) of
    iteration e. Stops after the first iteration whose count exceeds ``cert_above`` or
    whose gap is <= ``gap_at_most`` (the stopping rules the caller checks), or after
    ``max_epochs``. Returns the number of iterations done.

    Outputs besides: ``w_bar`` = s2a / s - s m b (0 / 0 := 0) and ``coef`` = s * w_bar at
    the last iteration, and, when the last iteration made the full pass, ``mask`` (0/1)
    marks its points with level - r_i > eps (left as it was otherwise).
    """
    cdef Py_ssize_t bs = _bound_step(box, "box")  # 0: one bound for all points
    cdef Py_ssize_t ls = _bound_step(level, "level")
    cdef Py_ssize_t n = y.shape[0]
    cdef Py_ssize_t d = s2a.shape[0]
    cdef Py_ssize_t k
    cdef double pg_max_old, pg_min_old, shrink_tol, certify_fraction, full_passes, est
    cdef double out[3]
    cdef double rho_d = 0.0, eps_l
    cdef Py_ssize_t cnt_lo
    cdef double* fresh_d
    cdef double* pairs = NULL
    cdef double gap, eps, ncert, t, wsq, rsum, rsq, b, ri
    cdef const double* rp
    cdef const double* lp
    cdef Py_ssize_t e, i, j, cnt, done = 0
    cdef bint lazy
    cdef int bad = 0
    if ctl.shape[0] < 7:  # read before the other arrays are checked
        raise ValueError(f"dcd_epochs: ctl has {ctl.shape[0]} entries, at least 7 needed")
    if not (0.0 <= ctl[0] <= <double>n and ctl[0] == <double>(<Py_ssize_t>ctl[0])):
        raise ValueError(f"dcd_epochs: the active size ctl[0] = {ctl[0]!r} is not a whole "
                         f"number in [0, {n}]")
    k = <Py_ssize_t>ctl[0]
    pg_max_old, pg_min_old, shrink_tol = ctl[1], ctl[2], ctl[3]
    certify_fraction, full_passes, est = ctl[4], ctl[5], ctl[6]
    lazy = certify_fraction == certify_fraction  # not NaN
    _check_dcd_arrays(X, n, d, k, y, index, r, s2a, scal, sc, m, c, qd, box, level,
                      rng_state, pg, ctl, hist, max_epochs, w_bar, coef, mask, fresh,
                      xi, rc, seen, order)
    lp = &level[0]
    fresh_d = <double*>calloc(s2a.shape[0] + 1, sizeof(double))
    if fresh_d == NULL:
        raise MemoryError()
    if rows_t in csr_rows_t and <double>X.indptr[X.n] >= <double>d:
        # s2a and sc interleaved for the CSR passes (``_dcd_pass``), s2a copied back
        # after each pass: on wide sparse data (url's 3.2 million columns) the two
        # d-vectors are far outside the caches and every stored entry read both at its
        # column (1.5x faster epochs on 2 x 10^5 url-like rows, the same numbers); the
        # copies (3 d numbers a call and d an epoch) pay where an epoch reads at least d
        # stored entries (found by review: 2,000 rows of 3.2 million columns, 232,000
        # entries, +15-40% an epoch)
        pairs = <double*>malloc((2 * d + 1) * sizeof(double))
        if pairs == NULL:
            free(fresh_d)
            raise MemoryError()
        for j in range(d):
            pairs[2 * j] = s2a[j]
            pairs[2 * j + 1] = sc[j]
    with nogil:
        for e in range(max_epochs):
            if n > ORDER_RUNS_ABOVE:
                bad = _run_shuffle(&index[0], k, n, &seen[0], &order[0], &rng_state[0])
                if bad:
                    break
            else:
                _shuffle(&index[0], k, &rng_state[0])
            k = _dcd_pass(X, &y[0], &index[0], k, &r[0], &s2a[0],
                          &scal[0], &sc[0], &c[0], &qd[0], M, 1.0, mu, &box[0], bs, pg_max_old,
                          pg_min_old, shrinking, out, pairs)
            if pairs != NULL:
                for j in range(d):
                    s2a[j] = pairs[2 * j]
            gap = out[0] - out[1] if k > 0 else 0.0
            if gap <= shrink_tol and k < n:
                # LIBLINEAR: the test passed on a shrunk set -> reset it and keep going
                k = n
                pg_max_old = INFINITY
                pg_min_old = -INFINITY
                gap = INFINITY
            else:
                pg_max_old = out[0] if out[0] > 0 else INFINITY
                pg_min_old = out[1] if out[1] < 0 else -INFINITY
            # cheap estimate of ||p||/mu from the epoch's entries; the full pass only if
            # it would certify (paper section 4: "inexpensive optimality checks ... first")
            est = sqrt(out[2]) / mu
            eps = INFINITY
            ncert = 0.0
            # one pass over r: the count under the estimate and the sums of the objective
            # (the full pass below leaves r as it is)
            cnt = 0
            rsum = 0.0
            rsq = 0.0
            rp = &r[0]
            if not always and lazy:
                for i in range(n):
                    ri = rp[i]
                    if _at(lp, ls, i) - ri > est:
                        cnt += 1
                    rsum += ri
                    rsq += ri * ri
            else:
                for i in range(n):
                    ri = rp[i]
                    rsum += ri
                    rsq += ri * ri
            if always or (lazy and <double>cnt > certify_fraction * <double>n):
                if always:
                    # every epoch (a diagnostic mode): the tight long-double bound
                    eps = _fresh_bound(X, &y[0], &r[0], &sc[0],
                                       &m[0], mu, &box[0], bs, &fresh[0], &xi[0], &rc[0], rsum, rsq)
                else:
                    eps = _fresh_bound_d(X, &y[0], &r[0], &sc[0],
                                         &m[0], mu, &box[0], bs, fresh_d, &xi[0], &rc[0], rsum, rsq,
                                         &rho_d)
                full_passes += 1.0
                cnt = 0
                cnt_lo = 0
                for i in range(n):
                    if _at(lp, ls, i) - r[i] > eps:
                        cnt += 1
                    if _at(lp, ls, i) - r[i] > eps - rho_d:
                        cnt_lo += 1
                if not always and <double>cnt <= certify_fraction * <double>n \
                        and <double>cnt_lo > certify_fraction * <double>n:
                    # the float64 rounding term alone keeps the rule from firing: redo the
                    # pass in long double
                    eps_l = _fresh_bound(X, &y[0], &r[0], &sc[0],
                                         &m[0], mu, &box[0], bs, &fresh[0], &xi[0], &rc[0], rsum,
                                         rsq)
                    if eps_l < eps:
                        eps = eps_l
                        cnt = 0
                        for i in range(n):
                            if _at(lp, ls, i) - r[i] > eps:
                                cnt += 1
                ncert = <double>cnt
            # objective -1/2 (||w_bar||^2 + b^2) + e^T r - mu/2 ||r||^2 with
            # w_bar = s2a / s - s m b (0 / 0 := 0 for dropped columns)
            b = scal[0]
            wsq = 0.0
            for j in range(d):
                t = (s2a[j] / sc[j] if sc[j] > 0 else 0.0) - sc[j] * m[j] * b
                w_bar[j] = t
                coef[j] = sc[j] * t
                wsq += t * t
            hist[e, 0] = -0.5 * (wsq + b * b) + rsum - 0.5 * mu * rsq
            hist[e, 1] = eps
            hist[e, 2] = ncert
            hist[e, 3] = gap
            done = e + 1
            if ncert > cert_above or gap <= gap_at_most:
                break
        if done > 0 and hist[done - 1, 1] < INFINITY:
            # the last iteration made the full pass: its certified points
            eps = hist[done - 1, 1]
            for i in range(n):
                mask[i] = _at(lp, ls, i) - r[i] > eps
    free(fresh_d)
    free(pairs)
    if bad:
        raise ValueError("dcd_epochs: index[:k] repeats a point (the active coordinates "
                         "must be distinct)")
    ctl[0] = <double>k
    ctl[1] = pg_max_old
    ctl[2] = pg_min_old
    ctl[5] = full_passes
    ctl[6] = est
    return done


def projected_gradient(rows_t X, const double[::1] y, const double[::1] r, const double[::1] s2a,
                       double b, double P, const double[::1] c, double M, double t_col,
                       double t_shift, double mu, const double[:] box, double[::1] pg):
    """Full projected gradient p(r) (paper section 4) in one pass:
    G_i = y_i (z_i . w_bar + t_col b + t_shift) + mu r_i - 1, p_i = min(G_i, 0) at r_i = 0,
    max(G_i, 0) at r_i = gamma_i (``box``, n-vector), G_i inside, 0 where gamma_i = 0.
    Returns ||p||^2.

    ``t_shift`` adds an intercept not tied to r (classical SVM: the multiplier of
    y^T r = 0); it is 0 for H-SVM.
    """
    cdef Py_ssize_t bs = _bound_step(box, "box")  # 0: one bound for all points
    cdef double acc
    _same_lengths("projected_gradient", X.n, y=y, r=r, c=c, pg=pg)
    _same_lengths("projected_gradient", X.d, s2a=s2a)
    _box_of("projected_gradient", X.n, box)
    with nogil:
        acc = _pg_pass(X, &y[0], &r[0], &s2a[0], b, P, &c[0], M, t_col, t_shift,
                       mu, &box[0], bs, &pg[0])
    return acc


# ------------------------------------------------------------------------------ Pegasos
def pegasos_epoch(rows_t X, const double[::1] y, const int64_t[::1] order, double[::1] sa,
                  double[::1] st, const double[::1] sc, const double[::1] c,
                  const double[::1] xsq, double M, double lam, double radius,
                  const double[::1] weight):
    """One epoch of Pegasos (Shalev-Shwartz et al. 2007) with an unregularized bias.

    w = alpha * (s * a - s * m beta) in the scaled space (so that a rank-one update
    touches only the nonzeros of x_i); the caller keeps sa = s * a (not s2 * a: with
    s ~ 1e300 for a column of magnitude 1e-300 and |s * a| up to ||w|| / alpha, s2 * a
    overflows, and for s ~ 1e-300 it underflows). ``st`` holds [alpha, beta,
    P = (s * m) . sa, A2 = ||sa||^2, bias, k]; x_i . (s2 * a) is taken as
    (s * x_i) . sa (``row_scaled_dot``). Step k (k = 1, 2, ...): eta = 1 / (lam k); on a
    margin violation y_i (w . z_i + bias) < 1: w <- (1 - eta lam) w + eta w_i y_i z_i and
    bias <- bias + eta w_i y_i (``weight``: the sample weights w_i of the block's rows,
    ones for an unweighted run), else w <- (1 - eta lam) w; then w is projected on the
    ball of radius 1/sqrt(lam).
    """
    cdef Py_ssize_t d = sa.shape[0]
    cdef Py_ssize_t n_ord = order.shape[0]
    cdef Py_ssize_t s, i, j
    cdef double alpha, beta, P, A2, bias, k
    cdef double eta, dot, marg, delta, xa, wn2
    _same_lengths("pegasos_epoch", X.n, y=y, c=c, xsq=xsq, weight=weight)
    _same_lengths("pegasos_epoch", X.d, sa=sa, sc=sc)
    if st.shape[0] < 6:
        raise ValueError(f"pegasos_epoch: st needs 6 entries, got {st.shape[0]}")
    for s in range(n_ord):
        if not 0 <= order[s] < X.n:
            raise ValueError(f"pegasos_epoch: order[{s}] = {order[s]} is not a row of X "
                             f"({X.n} rows)")
    alpha, beta, P, A2, bias, k = st[0], st[1], st[2], st[3], st[4], st[5]
    with nogil:
        for s in range(n_ord):
            i = order[s]
            k += 1.0
            eta = 1.0 / (lam * k)
            xa = row_scaled_dot(X, i, &sc[0], &sa[0])
            dot = alpha * (xa - beta * c[i] - P + beta * M)
            marg = y[i] * (dot + bias)
            alpha *= (1.0 - eta * lam)
            if alpha == 0.0:
                # first step (eta lam = 1): w becomes 0; restart the representation
                for j in range(d):
                    sa[j] = 0.0
                alpha = 1.0
                beta = 0.0
                P = 0.0
                A2 = 0.0
                xa = 0.0
            if marg < 1.0 and weight[i] != 0.0:
                delta = eta * (weight[i] * y[i]) / alpha
                A2 += 2.0 * delta * xa + delta * delta * xsq[i]
                P += delta * c[i]
                beta += delta
                row_scaled_axpy(X, i, delta, &sc[0], &sa[0])
                bias += eta * (weight[i] * y[i])
            # ||w||^2 = alpha^2 ||sa - s m beta||^2
            wn2 = alpha * alpha * (A2 - 2.0 * beta * P + beta * beta * M)
            if wn2 > radius * radius:
                alpha *= radius / sqrt(wn2)
            if alpha < 1e-100 or alpha > 1e100:
                # fold alpha into the representation to stay in floating-point range
                for j in range(d):
                    sa[j] *= alpha
                A2 *= alpha * alpha
                P *= alpha
                beta *= alpha
                alpha = 1.0
        st[0] = alpha
        st[1] = beta
        st[2] = P
        st[3] = A2
        st[4] = bias
        st[5] = k


# ------------------------------------------------------------------------- small helpers
def dot(const double[::1] x, const double[::1] z):
    """x . z in a serial loop."""
    cdef Py_ssize_t i
    cdef double q = 0.0
    _same_lengths("dot", x.shape[0], z=z)
    with nogil:
        for i in range(x.shape[0]):
            q += x[i] * z[i]
    return q


# --------------------------------------------------- the referee's products (certificates)
# ``CertifiedPointsCertificate.check`` multiplies X by its own path: X^T u (sums of n
# terms) in float64 within blocks of REF_ROWS rows, the block sums accumulated in long
# double (x87 80-bit on x86-64; where long double is float64 the caller's bound uses
# float64's unit), so that its rounding bound is gamma_{REF_ROWS + 1} + (long double)
# gamma_{blocks} times the magnitudes instead of gamma_n; the row products X v (at most
# d terms each) in float64 (docs/svm.md section 6). ``ref_rmatvec`` on a long double u
# runs its partial sums in long double too (the Newton-decrement referee's gradient,
# docs/tikhonov.md).

#: rows per float64 partial sum of the referee's X^T u
cdef Py_ssize_t _REF_ROWS = 1024
REF_ROWS = _REF_ROWS

# the type of the referee's X^T u: float64 (the partial sums of REF_ROWS rows in float64),
# or long double (every product and sum in long double: the Newton-decrement referee's
# gradient where float64's rounding of sums that cancel hides a claim that holds)
ctypedef fused ref_real:
    double
    long double


def ref_rmatvec(rows_t X, const unsigned char[::1] skip, const double[::1] m,
                const ref_real[::1] u, const double[::1] r, long double[::1] a,
                double[::1] mag):
    """a += (X_B - e m^T)^T u and mag += |X_B - e m^T|^T r for a row block: sums over
    REF_ROWS rows at a time in u's type (float64 or long double: the centred entries and
    their products too), added to ``a`` in long double.

    Dense: every column is centred explicitly, c = x - m_j (``skip`` unused). CSR: the
    stored entries of the columns not marked in ``skip``; their mean term -m_j e^T u is
    added at the end (magnitude |m_j| e^T r); the marked ("heavy") columns are left to
    the caller, who centres them densely. A CSR block's float64 sums of REF_ROWS rows are
    kept for the columns those rows touch only (their list is built as they are met), so
    the work is O(nnz) however wide X is; a dense block touches every column. Returns the
    largest number of entries of a row (the length of a row's dot products)."""
    cdef Py_ssize_t n = u.shape[0]
    _same_lengths("ref_rmatvec", X.n, u=u, r=r)
    _same_lengths("ref_rmatvec", X.d, a=a, mag=mag, m=m)
    if rows_t in csr_rows_t and skip.shape[0] < X.d:
        raise ValueError(f"ref_rmatvec: skip has {skip.shape[0]} entries for {X.d} columns")
    cdef Py_ssize_t d = a.shape[0]
    cdef Py_ssize_t i, j, k, t, ln, i0, i1, nt, longest = 0
    cdef ref_real c, ui, bsum = 0.0
    cdef double ri, rsum = 0.0
    cdef long double btot = 0.0
    cdef ref_real* part = <ref_real*>calloc(d + 1, sizeof(ref_real))
    # CSR: the columns touched by the current REF_ROWS rows (``seen`` marks them)
    cdef Py_ssize_t* touched = NULL
    cdef unsigned char* seen = NULL
    if rows_t in csr_rows_t:
        touched = <Py_ssize_t*>malloc((d + 1) * sizeof(Py_ssize_t))
        seen = <unsigned char*>calloc(d + 1, sizeof(unsigned char))
    if part == NULL or (rows_t in csr_rows_t and (touched == NULL or seen == NULL)):
        free(part)
        free(touched)
        free(seen)
        raise MemoryError()
    with nogil:
        i0 = 0
        while i0 < n:
            i1 = i0 + _REF_ROWS
            if i1 > n:
                i1 = n
            nt = 0
            bsum = 0.0
            for i in range(i0, i1):
                ui = u[i]
                ri = r[i]
                bsum += ui
                rsum += ri
                ln = row_stop(X, i) - row_start(X, i)
                if ln > longest:
                    longest = ln
                for k in range(row_start(X, i), row_stop(X, i)):
                    j = col(X, i, k)
                    if rows_t in dense_rows_t:
                        c = <ref_real>X.data[k] - m[j]
                    elif skip[j]:
                        continue
                    else:
                        c = <ref_real>X.data[k]
                        if not seen[j]:
                            seen[j] = 1
                            touched[nt] = j
                            nt += 1
                    part[j] += c * ui
                    mag[j] += fabs(<double>c) * ri
            # the block's float64 sums into a (long double), and part back to zero
            if rows_t in dense_rows_t:
                for j in range(d):
                    a[j] += part[j]
                    part[j] = 0.0
            else:
                for t in range(nt):
                    j = touched[t]
                    a[j] += part[j]
                    part[j] = 0.0
                    seen[j] = 0
            btot += bsum
            i0 = i1
        if rows_t in csr_rows_t:
            for j in range(d):
                if not skip[j]:
                    a[j] -= (<long double>m[j]) * btot
                    mag[j] += fabs(m[j]) * rsum
    free(part)
    free(touched)
    free(seen)
    return longest


cdef void _ref_rows(rows_t X, Py_ssize_t lo, Py_ssize_t hi, const unsigned char* skip,
                    const double* m, const double* v, const double* Mv, const double* coef,
                    const double* acoef, double mv, double mc, double mM, double mA,
                    double* th, double* Mth, double* dec, double* Md) noexcept nogil:
    # rows lo..hi of ref_matvec one by one (dense rows after the four-row kernel's)
    cdef Py_ssize_t i, j, k
    cdef double c, ac, t1, t2, q1, q2
    for i in range(lo, hi):
        t1 = 0.0
        t2 = 0.0
        q1 = 0.0
        q2 = 0.0
        for k in range(row_start(X, i), row_stop(X, i)):
            j = col(X, i, k)
            if rows_t in dense_rows_t:
                c = <double>X.data[k] - m[j]
            elif skip[j]:
                continue
            else:
                c = <double>X.data[k]
            ac = fabs(c)
            t1 += c * v[j]
            t2 += c * coef[j]
            q1 += ac * Mv[j]
            q2 += ac * acoef[j]
        # x - 0.0 and q + 0.0 (q >= 0) are exact: a dense block's sums are unchanged
        th[i] += t1 - mv
        dec[i] += t2 - mc
        Mth[i] += q1 + mM
        Md[i] += q2 + mA


cdef void _ref_part(rows_t X, Py_ssize_t lo, Py_ssize_t hi, const unsigned char* skip,
                    const double* m, const double* v, const double* Mv, const double* coef,
                    const double* acoef, double mv, double mc, double mM, double mA,
                    double* th, double* Mth, double* dec, double* Md) noexcept nogil:
    # rows lo..hi of ref_matvec: dense rows four at a time, the rest one by one
    cdef Py_ssize_t i0 = lo, d = X.d
    if rows_t in dense_rows_t:
        if hi > lo and d > 0:
            if rows_t is DenseRows64:
                i0 = lo + mk_ref_matvec4_64(X.data + lo * d, hi - lo, d, m, v, Mv, coef,
                                            acoef, th + lo, Mth + lo, dec + lo, Md + lo)
            else:
                i0 = lo + mk_ref_matvec4_32(X.data + lo * d, hi - lo, d, m, v, Mv, coef,
                                            acoef, th + lo, Mth + lo, dec + lo, Md + lo)
    _ref_rows(X, i0, hi, skip, m, v, Mv, coef, acoef, mv, mc, mM, mA, th, Mth, dec, Md)


#: below this many stored entries ref_matvec runs on one thread (a parallel region costs
#: more); the parts of its rows are contiguous, each row's sums are one thread's
cdef double _REF_PARALLEL_NNZ = 2e5


def ref_matvec(rows_t X, const unsigned char[::1] skip, const double[::1] m,
               const double[::1] v, const double[::1] Mv, const double[::1] coef,
               const double[::1] acoef, double[::1] th, double[::1] Mth,
               double[::1] dec, double[::1] Md):
    """For the rows of a block, added to the outputs (float64): th_i += (x_i - m) . v,
    dec_i += (x_i - m) . coef, Mth_i += |x_i - m| . Mv and Md_i += |x_i - m| . acoef
    (the magnitudes of the rounding bound).

    Dense: centred explicitly (``skip`` unused). CSR: the stored entries of the columns
    not in ``skip``, minus the constant m_L . v_L (m_L . coef_L) of those columns,
    magnitudes plus |m_L| . Mv_L (|m_L| . acoef_L); the heavy columns are the caller's.
    The rows are split into contiguous parts among the OpenMP threads (omp_get_max_threads
    at the call; one thread below 2e5 stored entries); each row's sums are computed by
    one thread in the same order, so the results do not depend on the thread count."""
    cdef Py_ssize_t n = th.shape[0]
    cdef Py_ssize_t d = v.shape[0]
    cdef Py_ssize_t j, part, lo, hi
    cdef double mv = 0.0, mc = 0.0, mM = 0.0, mA = 0.0
    cdef int nt
    for name, got in (("m", m.shape[0]), ("Mv", Mv.shape[0]), ("coef", coef.shape[0]),
                      ("acoef", acoef.shape[0])):
        _check_width(X.d, name, got)
    for name, got in (("Mth", Mth.shape[0]), ("dec", dec.shape[0]), ("Md", Md.shape[0])):
        if got != n:
            raise ValueError(f"{name} has {got} entries, th {n}: one per row of the block")
    if X.n != n:
        raise ValueError(f"th has {n} entries for a block of {X.n} rows")
    _check_width(X.d, "v", d)
    if rows_t in csr_rows_t and skip.shape[0] < d:
        raise ValueError(f"skip has {skip.shape[0]} entries for {d} columns")
    if n == 0 or d == 0:
        return  # no entries: every sum is 0 (and the kernels below take &v[0])
    cdef double nnz = <double>n * d if rows_t in dense_rows_t else <double>X.indptr[n]
    with nogil:
        nt = mk_svm_max_threads()
        if nnz < _REF_PARALLEL_NNZ or nt < 1:
            nt = 1
        if nt > n:
            nt = <int>n
        if rows_t in csr_rows_t:
            # the mean terms of the light columns (0 for a dense block, centred per entry)
            for j in range(d):
                if not skip[j]:
                    mv += m[j] * v[j]
                    mc += m[j] * coef[j]
                    mM += fabs(m[j]) * Mv[j]
                    mA += fabs(m[j]) * acoef[j]
        if nt == 1:
            _ref_part(X, 0, n, &skip[0], &m[0], &v[0], &Mv[0], &coef[0], &acoef[0], mv, mc,
                      mM, mA, &th[0], &Mth[0], &dec[0], &Md[0])
        else:
            for part in prange(nt, schedule="static", num_threads=nt):
                lo = part * n // nt
                hi = (part + 1) * n // nt
                _ref_part(X, lo, hi, &skip[0], &m[0], &v[0], &Mv[0], &coef[0], &acoef[0],
                          mv, mc, mM, mA, &th[0], &Mth[0], &dec[0], &Md[0])


cdef struct _RefAcc:
    double threshold
    double top_p
    double top_e
    Py_ssize_t k_room
    bint floor_ok
    bint model_ok
    bint nan_p
    bint nan_e


cdef void _ref_points_rows(Py_ssize_t lo, Py_ssize_t hi, const double* ypm, const double* r,
                           Py_ssize_t rs, const double* box, Py_ssize_t bs,
                           const double* level, Py_ssize_t ls, const unsigned char* mask,
                           const double* th, const double* Mth, const double* dec,
                           const double* Md, const double* xth, const double* xdec,
                           double* p, double* EG, double t, double Et,
                           double mu, double k1, double gamma4, double delta,
                           bint check_model, double c1, double Ec1, double gC, double unit,
                           double eta, _RefAcc* acc) noexcept nogil:
    # points lo..hi of ref_points (r, box, level by their strides, in entries), into acc;
    # the accumulators are locals written to acc once (through the pointer, the stores
    # to p and EG might alias them and keep them out of registers); xth and xdec (NULL:
    # none) are the rows' own error, added to the bounds of theta_i and of the margins
    cdef Py_ssize_t i, k_room = 0
    cdef double rc, bc, theta, ath, Eth, mr, G, e, pv, lev, floor, ydec, Ed, q
    cdef double ut = unit * fabs(t), u2 = 2 * unit, t2 = 2 * fabs(t)
    cdef double lk = 1.0 - 2 * unit, fk = 1.0 + 2 * unit, uk = 1.0 - unit
    cdef double threshold = INFINITY, top_p = 0.0, top_e = 0.0
    cdef bint floor_ok = True, model_ok = True, nan_p = False, nan_e = False
    for i in range(lo, hi):
        rc = r[i * rs]
        bc = box[i * bs]
        theta = ypm[i] * (th[i] + t)
        ath = fabs(theta)
        Eth = Mth[i] * k1 + Et + ut + u2 * (ath + t2) + eta
        if xth != NULL:
            Eth = (Eth + xth[i]) * fk
        mr = mu * rc
        G = theta + mr - 1.0
        e = Eth + gamma4 * (ath + mr + 1.0) + eta
        # a box [0, 0] (weight 0) fixes its coordinate: p_i = 0; NaN propagates as
        # np.minimum / np.maximum
        if rc <= 0.0:
            pv = (G if not (G > 0.0) else 0.0) if bc > 0.0 else 0.0
        elif rc >= bc:
            pv = G if not (G < 0.0) else 0.0
        else:
            pv = G
        p[i] = pv
        EG[i] = e
        q = fabs(pv)
        nan_p = nan_p or q != q
        if q > top_p:
            top_p = q
        nan_e = nan_e or e != e
        if e > top_e:
            top_e = e
        if delta > 0.0:
            q = bc - rc
            q = rc if rc < q else q
            if q > delta:
                k_room += 1
        if not mask[i]:
            continue
        # the levels min(gamma_i, 1/mu), rounded down
        lev = level[i * ls] * lk
        lev = bc if bc < lev else lev
        q = (lev - rc) * uk
        if q < threshold:
            threshold = q
        floor = (1.0 - mu * lev) + u2 * (1.0 + mu * lev)
        if not (theta - Eth * fk - unit * ath > floor):
            floor_ok = False
        if check_model:
            ydec = ypm[i] * (dec[i] + c1)
            Ed = Md[i] * k1 * gC + Ec1 + u2 * fabs(ydec) + eta
            if xdec != NULL:
                Ed = (Ed + xdec[i]) * fk
            if not (ydec * uk > Ed):
                model_ok = False
    acc.threshold = threshold
    acc.top_p = top_p
    acc.top_e = top_e
    acc.k_room = k_room
    acc.floor_ok = floor_ok
    acc.model_ok = model_ok
    acc.nan_p = nan_p
    acc.nan_e = nan_e


#: from this many points ref_points splits them among the threads, in parts of
#: _REF_POINTS_PART (a dynamic schedule)
cdef Py_ssize_t _REF_POINTS_PARALLEL = 2 ** 15
cdef Py_ssize_t _REF_POINTS_PART = 2 ** 13


def ref_points(const double[::1] ypm, const double[:] r, const double[:] box,
               const double[:] level, const unsigned char[::1] mask, const double[::1] th,
               const double[::1] Mth, const double[::1] dec, const double[::1] Md,
               double[::1] p, double[::1] EG, double t, double Et, double mu, double k1,
               double gamma4, double delta, bint check_model, double c1, double Ec1,
               double gC, double unit, double eta, xth=None, xdec=None):
    """The referee's per-point quantities of a block of points, from pass C's row sums
    (``ref_matvec``): theta_i = y_i (th_i + t), its rounding bound Eth_i, G_i =
    theta_i + mu r_i - 1, its bound EG_i and the projected gradient p_i (written to
    ``p`` and ``EG``), and the tests of the certified points (``mask``). The same
    float64 operations, in the same order, as the numpy expressions of docs/svm.md
    section 6 (k1 = 1 + 2 g; gamma4 = gamma_4; unit = u; eta = 2^-1074), so the numbers
    and the bound are those of the vector form. ``xth`` and ``xdec`` (float64, one per
    point, or None): bounds on the error of theta_i and of the stored model's margin
    that come from the rows themselves (a kernel approximation's rows against its exact
    map), added to their rounding bounds.

    Returns (threshold, k_room, floor_ok, model_ok, top_p, top_EG): the smallest
    (level_i - r_i)(1 - u) over the certified points (inf without one), the number of
    points with min(r_i, gamma_i - r_i) > delta (0 unless delta > 0), whether every
    certified point has theta_i beyond rounding above 1 - mu level_i and (with
    ``check_model``) a stored-model margin beyond its rounding, and the largest |p_i|
    and |EG_i| (NaN when an entry is NaN), for ``_referee.scaled_norm``. The points are
    split into parts run on the OpenMP threads (from 2^15 points); every number above is
    a minimum, a maximum, a count or a conjunction, the same whatever the split."""
    cdef Py_ssize_t n = th.shape[0]
    cdef Py_ssize_t q, P = 1
    cdef _RefAcc* parts
    cdef _RefAcc tot
    cdef int nt = 1
    for name, got in (("ypm", ypm.shape[0]), ("r", r.shape[0]), ("box", box.shape[0]),
                      ("level", level.shape[0]), ("mask", mask.shape[0]),
                      ("Mth", Mth.shape[0]), ("dec", dec.shape[0]), ("Md", Md.shape[0]),
                      ("p", p.shape[0]), ("EG", EG.shape[0])):
        if got != n:
            raise ValueError(f"{name} has {got} entries, th {n}: one per point of the block")
    for name, st in (("r", r.strides[0]), ("box", box.strides[0]), ("level", level.strides[0])):
        if st % <Py_ssize_t>sizeof(double) != 0:
            raise ValueError(f"{name} has a stride of {st} bytes, not a whole number of "
                             f"entries: pass a contiguous array")
    tot.threshold = INFINITY
    tot.top_p = 0.0
    tot.top_e = 0.0
    tot.k_room = 0
    tot.floor_ok = True
    tot.model_ok = True
    tot.nan_p = False
    tot.nan_e = False
    if n == 0:
        return tot.threshold, 0, True, True, 0.0, 0.0
    if n >= _REF_POINTS_PARALLEL:
        nt = mk_svm_max_threads()
        P = (n + _REF_POINTS_PART - 1) // _REF_POINTS_PART if nt > 1 else 1
    parts = <_RefAcc*>malloc(P * sizeof(_RefAcc))
    if parts == NULL:
        raise MemoryError()
    cdef Py_ssize_t rs = r.strides[0] // <Py_ssize_t>sizeof(double)
    cdef Py_ssize_t bs = box.strides[0] // <Py_ssize_t>sizeof(double)
    cdef Py_ssize_t ls = level.strides[0] // <Py_ssize_t>sizeof(double)
    cdef const double[::1] xt
    cdef const double[::1] xd
    cdef const double* pxt = NULL
    cdef const double* pxd = NULL
    if xth is not None:
        xt = xth
        if xt.shape[0] != n:
            raise ValueError(f"xth has {xt.shape[0]} entries, th {n}: one per point")
        pxt = &xt[0]
    if xdec is not None:
        xd = xdec
        if xd.shape[0] != n:
            raise ValueError(f"xdec has {xd.shape[0]} entries, th {n}: one per point")
        pxd = &xd[0]
    with nogil:
        if P == 1:
            _ref_points_rows(0, n, &ypm[0], &r[0], rs, &box[0], bs, &level[0], ls, &mask[0],
                             &th[0], &Mth[0], &dec[0], &Md[0], pxt, pxd, &p[0], &EG[0], t,
                             Et, mu, k1, gamma4, delta, check_model, c1, Ec1, gC, unit, eta,
                             parts)
        else:
            for q in prange(P, schedule="dynamic", num_threads=nt):
                _ref_points_rows(q * n // P, (q + 1) * n // P, &ypm[0], &r[0], rs, &box[0],
                                 bs, &level[0], ls, &mask[0], &th[0], &Mth[0], &dec[0],
                                 &Md[0], pxt, pxd, &p[0], &EG[0], t, Et, mu, k1, gamma4,
                                 delta, check_model, c1, Ec1, gC, unit, eta, parts + q)
        for q in range(P):
            if parts[q].threshold < tot.threshold:
                tot.threshold = parts[q].threshold
            if parts[q].top_p > tot.top_p:
                tot.top_p = parts[q].top_p
            if parts[q].top_e > tot.top_e:
                tot.top_e = parts[q].top_e
            tot.k_room += parts[q].k_room
            tot.floor_ok = tot.floor_ok and parts[q].floor_ok
            tot.model_ok = tot.model_ok and parts[q].model_ok
            tot.nan_p = tot.nan_p or parts[q].nan_p
            tot.nan_e = tot.nan_e or parts[q].nan_e
    free(parts)
    if tot.nan_p:
        tot.top_p = float("nan")
    if tot.nan_e:
        tot.top_e = float("nan")
    return tot.threshold, tot.k_room, tot.floor_ok, tot.model_ok, tot.top_p, tot.top_e


def ref_matvec_ld(rows_t X, const double[::1] v, const double[::1] Mv, long double[::1] th,
                  double[::1] Mth):
    """th_i += x_i . v with the row's sum in long double, Mth_i += |x_i| . Mv (float64),
    for the rows of a block (no centering): the row products of the Newton-decrement
    referee (``tikhonov.NewtonDecrementCertificate``), whose errors in z = Phi theta are
    amplified by Phi^T and 1 / sqrt(lam)."""
    cdef Py_ssize_t n = th.shape[0]
    cdef Py_ssize_t d = v.shape[0]
    cdef Py_ssize_t i, j, k
    cdef long double t
    cdef double q
    _same_lengths("ref_matvec_ld", X.n, th=th, Mth=Mth)
    _same_lengths("ref_matvec_ld", X.d, v=v, Mv=Mv)
    with nogil:
        for i in range(n):
            t = 0.0
            q = 0.0
            for k in range(row_start(X, i), row_stop(X, i)):
                j = col(X, i, k)
                t += (<long double>X.data[k]) * v[j]
                q += fabs(<double>X.data[k]) * Mv[j]
            th[i] += t
            Mth[i] += q


# the per-layout kernels dispatch on the row block's class through a table (see
# ``marginkit.utils._rows.ByLayout``: Cython's dispatch costs microseconds per call)
from marginkit.utils._rows import dispatch_by_layout  # noqa: E402

dispatch_by_layout(globals())
