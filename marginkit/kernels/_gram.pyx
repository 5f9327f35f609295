"""Gram blocks K(A, B) for the dot-product and distance kernels, dense or CSR operands.

Each public function fills an output array allocated by the caller (C order, the dtype of
the operands) and touches no Python object inside its ``with nogil:`` section. A CSR
operand is a row block (``marginkit.utils._rows``, ``csr_rows_t``; the second one of a
CSR x CSR block ``csr_rows_b_t``, typed on its own), a dense one a C-ordered memoryview.

* ``dot_*``: out = A @ B.T. Dense x dense goes through BLAS (gemm; when B is A, gemm on
  row panels of the upper triangle and a mirror: half the flops, an exactly symmetric
  block). The CSR variants accumulate in float64; CSR x CSR walks the columns of B
  (``Bt``: the row block of B.T, B in CSC form), so it costs sum over shared features,
  like a sparse product, or (``dot_dense_t_csr``, when rows share many features) walks
  B's rows against a dense transposed copy of a chunk of A's rows, with the same sums.
* ``dist_*``: out = sum_f |a_if - b_jf|^p for p = 1 (L1) or 2 (squared Euclidean), from
  explicit differences with a merge over the sorted indices of CSR rows (no cancellation
  between norms).
* ``rbf_exponent`` / ``finish_poly``: the elementwise maps applied in place,
  -gamma max(|a|^2 + |b|^2 - 2 <a, b>, 0) (numpy's SIMD exp follows) and (gamma out + coef0)^p.
* ``rbf_careful_exponents`` / ``rbf_careful_bound``: the referee's RBF entries and their
  error bounds from the dot block (float64), one pass before numpy's exp and one after.
* ``sqnorms``: squared row norms in float64 of a row block (``marginkit.utils._rows``;
  called through ``marginkit.linalg._norms.row_sqnorms``).

Parallel loops are OpenMP ``prange`` over rows (or row panels) with a static or dynamic
schedule; every entry is computed by one thread with a fixed summation order, so the result
does not depend on the number of threads (``OMP_NUM_THREADS`` / ``threadpoolctl``). The
dense products call gemm on fixed row panels from the OpenMP threads; the Python wrapper
limits BLAS to one thread meanwhile (as scikit-learn's k-means does), which keeps them
deterministic too.
"""
from cython cimport floating
from cython.parallel cimport prange, threadid
from libc.math cimport INFINITY, cos, exp, expm1, fabs, floor, ldexp, log, pow
from scipy.linalg.cython_blas cimport dgemm, sgemm

from marginkit.utils._rows cimport (
    csr_rows_t, csr_rows_b_t, row_start, row_stop, rows_t, stored)

cdef int _MIRROR_BLOCK = 64
#: rows per gemm call (fixed: the partition, hence the rounding, ignores the thread count)
cdef int GEMM_PANEL = 256
# below this many elementary operations a parallel region costs more than it saves
cdef double _PARALLEL_WORK = 1e6

cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    static int mk_gram_max_threads(void) { return omp_get_max_threads(); }
    #else
    static int mk_gram_max_threads(void) { return 1; }
    #endif
    """
    int mk_gram_max_threads() noexcept nogil


cdef inline int _n_threads(double work) noexcept nogil:
    """OpenMP threads for a loop of ``work`` operations (OMP_NUM_THREADS/threadpoolctl cap)."""
    if work < _PARALLEL_WORK:
        return 1
    return mk_gram_max_threads()


# ------------------------------------------------------------------------------ BLAS products
cdef int _check_block(Py_ssize_t m, Py_ssize_t n, Py_ssize_t da, Py_ssize_t db,
                      Py_ssize_t out_m, Py_ssize_t out_n) except -1:
    """A block of two operands with m and n rows is filled only into an m x n ``out``, and
    only when both have the same number of features."""
    if da != db:
        raise ValueError(f"Gram block: the operands have {da} and {db} features")
    if out_m != m or out_n != n:
        raise ValueError(f"Gram block: out is {out_m} x {out_n} for {m} x {n}")
    return 0


cdef void _gemm_abt_ld(int m, int n, int k, const floating* A, const floating* B,
                       floating* C, int ldc) noexcept nogil:
    """C (m x n, row-major, row stride ldc) = A (m x k, row-major) @ B (n x k, row-major).T."""
    cdef char transa = b'T'
    cdef char transb = b'N'
    cdef int lda = k if k > 0 else 1
    cdef floating one = 1.0
    cdef floating zero = 0.0
    # Column-major view: C.T (n x m) = B @ A.T, i.e. op(B^T stored k x n) = B, op(A^T) = A^T.
    if floating is double:
        # C = A @ B.T
        dgemm(&transa, &transb, &n, &m, &k, &one, <double*>B, &lda, <double*>A, &lda,
              &zero, C, &ldc)
    else:
        # C = A @ B.T
        sgemm(&transa, &transb, &n, &m, &k, &one, <float*>B, &lda, <float*>A, &lda,
              &zero, C, &ldc)


cdef void _mirror_upper(floating[:, ::1] out) noexcept nogil:
    """out[i, j] = out[j, i] for j < i, tile by tile (cache-friendly transpose)."""
    cdef int nt
    cdef Py_ssize_t m = out.shape[0]
    cdef Py_ssize_t nb = (m + _MIRROR_BLOCK - 1) // _MIRROR_BLOCK
    cdef Py_ssize_t bi, bj, i, j, i_end, j_end
    nt = _n_threads(<double>m * m)
    for bi in prange(nb, schedule="dynamic", num_threads=nt):
        i_end = min((bi + 1) * _MIRROR_BLOCK, m)
        for bj in range(bi + 1):
            j_end = min((bj + 1) * _MIRROR_BLOCK, m)
            for i in range(bi * _MIRROR_BLOCK, i_end):
                for j in range(bj * _MIRROR_BLOCK, min(j_end, i)):
                    out[i, j] = out[j, i]


def mirror_upper(floating[:, ::1] out):
    """Copy the upper triangle of the square ``out`` onto its lower triangle, in place."""
    if out.shape[0] != out.shape[1]:
        raise ValueError(f"mirror_upper: out is {out.shape[0]} x {out.shape[1]}, not square")
    with nogil:
        _mirror_upper(out)


def dot_dense_dense(const floating[:, ::1] A, const floating[:, ::1] B, floating[:, ::1] out,
                    bint same=False, bint mirror=True):
    """out = A @ B.T by gemm on fixed panels of ``GEMM_PANEL`` rows, one OpenMP task each.

    ``same=True`` (B is A): panel p computes only C[i0:i1, i0:] (about half the flops),
    then the lower triangle is mirrored (unless ``mirror=False``: a caller that only reads
    the upper triangle, like ``rbf_exponent``), so the block is exactly symmetric. The panel
    partition does not depend on the thread count; called with a single-threaded BLAS
    (``threadpoolctl``, as the Python wrapper does) the result is the same for any number
    of OpenMP threads.
    """
    cdef int m = A.shape[0]
    cdef int n = B.shape[0]
    cdef int k = A.shape[1]
    cdef int n_panels = (m + GEMM_PANEL - 1) // GEMM_PANEL
    cdef int p, i0, rows
    cdef int nt = max(1, min(_n_threads(2.0 * m * n * k), n_panels))
    _check_block(m, n, k, B.shape[1], out.shape[0], out.shape[1])
    if same and m != n:
        raise ValueError("dot_dense_dense: same=True needs B to be A")
    if m == 0 or n == 0:
        return
    if k == 0:
        out[:, :] = 0
        return
    with nogil:
        for p in prange(n_panels, schedule="dynamic", num_threads=nt):
            i0 = p * GEMM_PANEL
            rows = min(GEMM_PANEL, m - i0)
            if same:
                # out[i0:i0+rows, i0:] = A[i0:i0+rows] @ A[i0:].T
                _gemm_abt_ld(rows, m - i0, k, &A[i0, 0], &A[i0, 0], &out[i0, i0], m)
            else:
                # out[i0:i0+rows, :] = A[i0:i0+rows] @ B.T
                _gemm_abt_ld(rows, n, k, &A[i0, 0], &B[0, 0], &out[i0, 0], n)
        if same and mirror:
            _mirror_upper(out)


def dot_csr_dense(csr_rows_t A, const floating[:, ::1] B, floating[:, ::1] out):
    """out = A @ B.T with A a CSR row block: out[i, j] = sum_k a_ik B[j, col_k] (float64
    sums)."""
    cdef Py_ssize_t m = A.n
    cdef Py_ssize_t n = B.shape[0]
    cdef Py_ssize_t i, j, p
    cdef double s
    cdef int nt = _n_threads(<double>n * (A.indptr[m] - A.indptr[0] + m))
    _check_block(m, n, A.d, B.shape[1], out.shape[0], out.shape[1])
    with nogil:
        for i in prange(m, schedule="static", num_threads=nt):
            for j in range(n):
                s = 0.0
                for p in range(row_start(A, i), row_stop(A, i)):
                    s = s + A.data[p] * B[j, A.indices[p]]
                out[i, j] = <floating>s


def dot_dense_csr(const floating[:, ::1] A, csr_rows_t B, floating[:, ::1] out):
    """out = A @ B.T with B a CSR row block: out[i, j] = sum_k b_jk A[i, col_k] (float64
    sums)."""
    cdef Py_ssize_t m = A.shape[0]
    cdef Py_ssize_t n = B.n
    cdef Py_ssize_t i, j, p
    cdef double s
    cdef int nt = _n_threads(<double>m * (B.indptr[n] - B.indptr[0] + n))
    _check_block(m, n, A.shape[1], B.d, out.shape[0], out.shape[1])
    with nogil:
        for i in prange(m, schedule="static", num_threads=nt):
            for j in range(n):
                s = 0.0
                for p in range(row_start(B, j), row_stop(B, j)):
                    s = s + B.data[p] * A[i, B.indices[p]]
                out[i, j] = <floating>s


#: rows of B per tile of ``dot_dense_t_csr`` (a tile of TILE_ROWS x m float64 stays in cache)
TILE_ROWS = 32


def dot_dense_t_csr(const double[:, ::1] At, csr_rows_t B, floating[:, ::1] out,
                    double[:, ::1] tiles):
    """out = A @ B.T from a dense transposed copy of the row block A (``At``: d x m,
    At[k, i] = a_ik, float64) and B a CSR row block of n rows.

    Tile by tile of ``TILE_ROWS`` rows j of B: tile[j, :] += b_jk At[k, :] over the stored
    entries of row j in increasing k (a loop over m contiguous float64 entries, which the
    compiler vectorizes; the cost is nnz(B) m, whatever the overlap of the rows), then the
    tile is written transposed into out[:, j]. The terms of out[i, j] are the products
    b_jk a_ik over the stored features k of row j in increasing k, the ones with
    a_ik = 0 exact zeros that leave the sum as it is: the nonzero terms are those of
    ``dot_csr_csc`` in its order, so for finite operands both give the same entries.
    ``tiles``: float64 scratch of shape (threads, TILE_ROWS * m), one row per thread
    (``max_threads()`` of them at most are used).
    """
    cdef Py_ssize_t m = At.shape[1]
    cdef Py_ssize_t n = B.n
    cdef Py_ssize_t T = TILE_ROWS
    cdef Py_ssize_t n_tiles = (n + T - 1) // T
    cdef Py_ssize_t tt, j0, j1, j, i, p, k, t, en
    cdef double v, v1, v2, v3
    cdef double* tile
    cdef double* trow
    cdef const double* arow
    cdef const double* a1
    cdef const double* a2
    cdef const double* a3
    cdef int nt = min(_n_threads(<double>m * (B.indptr[n] - B.indptr[0] + n)),
                      <int>tiles.shape[0])
    _check_block(m, n, At.shape[0], B.d, out.shape[0], out.shape[1])
    if tiles.shape[0] < 1 or tiles.shape[1] < T * m:
        raise ValueError(f"dot_dense_t_csr: tiles has shape {tuple(tiles.shape)[:2]}, "
                         f"needs at least (1, {T * m})")
    if m == 0 or n == 0:
        return
    with nogil:
        # dynamic: a thread of a busy core takes fewer tiles (each tile is one thread's,
        # in a fixed order: the entries do not depend on the schedule)
        for tt in prange(n_tiles, schedule="dynamic", chunksize=4, num_threads=max(nt, 1)):
            t = threadid()
            tile = &tiles[t, 0]
            j0 = tt * T
            j1 = min(j0 + T, n)
            for i in range((j1 - j0) * m):
                tile[i] = 0.0
            for j in range(j0, j1):
                trow = &tile[(j - j0) * m]
                p = row_start(B, j)
                en = row_stop(B, j)
                # four stored entries of row j per pass over the tile's row: each entry
                # of it takes the same additions in the same order as one entry per pass
                # (the same sums bit for bit), with a quarter of the loads and stores
                while p + 4 <= en:
                    v = B.data[p]
                    v1 = B.data[p + 1]
                    v2 = B.data[p + 2]
                    v3 = B.data[p + 3]
                    arow = &At[B.indices[p], 0]
                    a1 = &At[B.indices[p + 1], 0]
                    a2 = &At[B.indices[p + 2], 0]
                    a3 = &At[B.indices[p + 3], 0]
                    for i in range(m):
                        trow[i] = (((trow[i] + v * arow[i]) + v1 * a1[i]) + v2 * a2[i]) \
                            + v3 * a3[i]
                    p = p + 4
                while p < en:
                    v = B.data[p]
                    arow = &At[B.indices[p], 0]
                    for i in range(m):
                        trow[i] = trow[i] + v * arow[i]
                    p = p + 1
            for i in range(m):
                for j in range(j0, j1):
                    out[i, j] = <floating>tile[(j - j0) * m + i]


def max_threads():
    """OpenMP threads a parallel loop of this module may use (1 without OpenMP)."""
    return mk_gram_max_threads()


def dot_csr_csc(csr_rows_t A, csr_rows_b_t Bt, floating[:, ::1] out, double[:, ::1] work,
                bint same=False, bint mirror=True):
    """out = A @ B.T with A a CSR row block and B in CSC form (``Bt``: the CSR row block
    of B.T, sorted indices).

    Row i of the result accumulates a_ik * B[:, k] over the stored features k of row i,
    in increasing k: the cost is the number of shared (feature, row) pairs. ``work`` is a
    float64 scratch array of shape (max_threads(), n), one row per thread. ``same=True``
    (B is A): only the upper triangle j >= i is accumulated (the row indices of a CSC
    column are sorted, so the entries j >= i are found by bisection), then mirrored unless
    ``mirror=False``.
    """
    cdef Py_ssize_t m = A.n
    cdef Py_ssize_t n = Bt.d
    cdef Py_ssize_t i, j, j0, col, t, p, q, lo, hi, mid
    cdef double v
    cdef double avg_col = (Bt.indptr[Bt.n] - Bt.indptr[0]) / <double>max(Bt.n, 1)
    cdef int nt = min(_n_threads(2.0 * m * n + <double>(A.indptr[m] - A.indptr[0]) * avg_col),
                      <int>work.shape[0])
    _check_block(m, n, A.d, Bt.n, out.shape[0], out.shape[1])
    if work.shape[1] < n:
        raise ValueError(f"dot_csr_csc: work has {work.shape[1]} columns for {n} rows of B")
    if m == 0 or n == 0:
        return
    with nogil:
        for i in prange(m, schedule="dynamic", chunksize=8, num_threads=nt):
            t = threadid()
            j0 = i if same else 0
            for j in range(j0, n):
                work[t, j] = 0.0
            for p in range(row_start(A, i), row_stop(A, i)):
                col = A.indices[p]
                v = A.data[p]
                lo = row_start(Bt, col)
                hi = row_stop(Bt, col)
                if same:
                    # first stored row >= i in this column
                    while lo < hi:
                        mid = lo + (hi - lo) // 2
                        if Bt.indices[mid] < i:
                            lo = mid + 1
                        else:
                            hi = mid
                    hi = row_stop(Bt, col)
                for q in range(lo, hi):
                    work[t, Bt.indices[q]] += v * Bt.data[q]
            for j in range(j0, n):
                out[i, j] = <floating>work[t, j]
        if same and mirror:
            _mirror_upper(out)


# ------------------------------------------------------------------------------ distances
cdef inline double _term(double diff, int power) noexcept nogil:
    """|diff| (power 1) or diff^2 (power 2): one coordinate's share of the distance."""
    return fabs(diff) if power == 1 else diff * diff


def dist_dense_dense(const floating[:, ::1] A, const floating[:, ::1] B, floating[:, ::1] out,
                     int power, bint same=False):
    """out[i, j] = sum_f |A[i, f] - B[j, f]|^power (power 1 or 2) from explicit differences
    (float64 sums, no cancellation between norms); one triangle when B is A."""
    cdef Py_ssize_t m = out.shape[0]
    cdef Py_ssize_t n = out.shape[1]
    cdef Py_ssize_t d = A.shape[1]
    cdef Py_ssize_t i, j, f, j0
    cdef double s
    cdef int nt = _n_threads(<double>m * n * d)
    _check_block(A.shape[0], B.shape[0], d, B.shape[1], m, n)
    if same and m != n:
        raise ValueError("dist_dense_dense: same=True needs B to be A")
    with nogil:
        for i in prange(m, schedule="dynamic", chunksize=8, num_threads=nt):
            j0 = i if same else 0
            for j in range(j0, n):
                s = 0.0
                for f in range(d):
                    s = s + _term(<double>A[i, f] - <double>B[j, f], power)
                out[i, j] = <floating>s
        if same:
            _mirror_upper(out)


def dist_csr_dense(csr_rows_t A, const floating[:, ::1] B, floating[:, ::1] out, int power):
    """out[i, j] = sum_f |a_if - B[j, f]|^power with A a CSR row block (merge over the
    row's features)."""
    cdef Py_ssize_t m = A.n
    cdef Py_ssize_t n = B.shape[0]
    cdef Py_ssize_t d = B.shape[1]
    cdef Py_ssize_t i, j, f, p, p_end
    cdef double s
    cdef int nt = _n_threads(<double>m * n * d)
    _check_block(m, n, A.d, d, out.shape[0], out.shape[1])
    with nogil:
        for i in prange(m, schedule="static", num_threads=nt):
            p_end = row_stop(A, i)
            for j in range(n):
                s = 0.0
                p = row_start(A, i)
                for f in range(d):
                    if p < p_end and A.indices[p] == f:
                        s = s + _term(<double>A.data[p] - <double>B[j, f], power)
                        p = p + 1
                    else:
                        s = s + _term(<double>B[j, f], power)
                out[i, j] = <floating>s


def dist_dense_csr(const floating[:, ::1] A, csr_rows_t B, floating[:, ::1] out, int power):
    """out[i, j] = sum_f |A[i, f] - b_jf|^power with B a CSR row block (the order of
    ``dist_csr_dense``)."""
    cdef Py_ssize_t m = A.shape[0]
    cdef Py_ssize_t n = B.n
    cdef Py_ssize_t d = A.shape[1]
    cdef Py_ssize_t i, j, f, p, p_end
    cdef double s
    cdef int nt = _n_threads(<double>m * n * d)
    _check_block(m, n, d, B.d, out.shape[0], out.shape[1])
    with nogil:
        for i in prange(m, schedule="static", num_threads=nt):
            for j in range(n):
                s = 0.0
                p = row_start(B, j)
                p_end = row_stop(B, j)
                for f in range(d):
                    if p < p_end and B.indices[p] == f:
                        s = s + _term(<double>B.data[p] - <double>A[i, f], power)
                        p = p + 1
                    else:
                        s = s + _term(<double>A[i, f], power)
                out[i, j] = <floating>s


def dist_csr_csr(csr_rows_t A, csr_rows_b_t B, floating[:, ::1] out, int power,
                 bint same=False):
    """out[i, j] = sum_f |a_if - b_jf|^power, both CSR row blocks with sorted indices
    (merge of the rows)."""
    cdef Py_ssize_t m = A.n
    cdef Py_ssize_t n = B.n
    cdef Py_ssize_t i, j, j0, p, p_end, q, q_end
    cdef long long ca, cb
    cdef double s
    cdef int nt = _n_threads(<double>m * n * 4.0)
    _check_block(m, n, A.d, B.d, out.shape[0], out.shape[1])
    with nogil:
        for i in prange(m, schedule="dynamic", chunksize=8, num_threads=nt):
            j0 = i if same else 0
            for j in range(j0, n):
                s = 0.0
                p = row_start(A, i)
                p_end = row_stop(A, i)
                q = row_start(B, j)
                q_end = row_stop(B, j)
                while p < p_end or q < q_end:
                    ca = A.indices[p] if p < p_end else -1
                    cb = B.indices[q] if q < q_end else -1
                    if cb < 0 or (ca >= 0 and ca < cb):
                        s = s + _term(<double>A.data[p], power)
                        p = p + 1
                    elif ca < 0 or cb < ca:
                        s = s + _term(<double>B.data[q], power)
                        q = q + 1
                    else:
                        s = s + _term(<double>A.data[p] - <double>B.data[q], power)
                        p = p + 1
                        q = q + 1
                out[i, j] = <floating>s
        if same:
            _mirror_upper(out)


# ------------------------------------------------------------------------------ row norms
def sqnorms(rows_t X, double[::1] out):
    """out[i] = ||x_i||^2 for a row block X: float64 sums over the stored entries of row i
    in storage order (the columns of a dense row)."""
    cdef Py_ssize_t i, k
    cdef double s
    cdef int nt = _n_threads(stored(X))
    if out.shape[0] != X.n:
        raise ValueError(f"sqnorms: out has {out.shape[0]} entries for {X.n} rows")
    with nogil:
        for i in prange(X.n, schedule="static", num_threads=nt):
            s = 0.0
            for k in range(row_start(X, i), row_stop(X, i)):
                s = s + <double>X.data[k] * X.data[k]
            out[i] = s


# ------------------------------------------------------------------------------ elementwise maps
def rbf_exponent(floating[:, ::1] out, const floating[::1] sq_a, const floating[::1] sq_b,
                 double gamma, bint same=False):
    """In place: out <- -gamma * max(sq_a[:, None] + sq_b[None, :] - 2 out, 0).

    ``exp`` is then applied by numpy (its SIMD exp is several times faster than libm's).
    ``same=True`` (B is A): the diagonal is exactly 0 and only the upper triangle is
    evaluated, then mirrored (the result is exactly symmetric).
    """
    cdef Py_ssize_t m = out.shape[0]
    cdef Py_ssize_t n = out.shape[1]
    cdef Py_ssize_t i, j
    cdef double d2, sa
    cdef int nt = _n_threads(<double>m * n)
    if sq_a.shape[0] != m or sq_b.shape[0] != n or (same and m != n):
        raise ValueError(f"rbf_exponent: out is {m} x {n}, sq_a has {sq_a.shape[0]} entries "
                         f"and sq_b {sq_b.shape[0]}" + (" (same=True: square)" if same else ""))
    with nogil:
        if same:
            for i in prange(m, schedule="dynamic", chunksize=16, num_threads=nt):
                out[i, i] = 0.0
                sa = sq_a[i]
                for j in range(i + 1, n):
                    # |a|^2 + |b|^2 is formed first: the same rounding for (i, j) and (j, i)
                    d2 = (sa + <double>sq_b[j]) - 2.0 * <double>out[i, j]
                    out[i, j] = <floating>(-gamma * (d2 if d2 > 0.0 else 0.0))
            _mirror_upper(out)
        else:
            for i in prange(m, schedule="static", num_threads=nt):
                sa = sq_a[i]
                for j in range(n):
                    d2 = (sa + <double>sq_b[j]) - 2.0 * <double>out[i, j]
                    out[i, j] = <floating>(-gamma * (d2 if d2 > 0.0 else 0.0))


#: the unit roundoff of float64 (2^-53) and its smallest subnormal (the absolute error of
#: an exp that underflows to 0)
cdef double _U64 = ldexp(1.0, -53)
cdef double _TINY = ldexp(1.0, -1074)
#: a bound on 2 gamma e exp(-z) where exp(-z) underflowed (``rbf_careful_bound``)
cdef double _UNDERFLOWED = ldexp(1.0, -1050)


cdef inline double _careful_d2_e(double dot, double sa, double sb, double c,
                                 const double* d2x_row, Py_ssize_t j, double c_explicit,
                                 double e_abs, double* e) noexcept nogil:
    """D2 and its error bound e for entry j of a row of ``rbf_careful_*``: the norm formula
    on fl(<a, b>) = dot (``d2x_row`` NULL), or the squared distance ``d2x_row[j]`` summed
    from explicit differences; ``e_abs`` is the absolute part of the bound (products and
    squares that underflow)."""
    cdef double s, d2
    if d2x_row != NULL:
        d2 = d2x_row[j]
        e[0] = c_explicit * d2 + e_abs
        return d2
    s = sa + sb
    d2 = s - 2.0 * dot
    e[0] = c * s + e_abs
    return d2 if d2 > 0.0 else 0.0


def rbf_careful_exponents(double[:, ::1] K, double[:, ::1] E, const double[::1] sq_a,
                          const double[::1] sq_b, double gamma, double c,
                          const double[:, ::1] d2x, const long long[::1] which,
                          double c_explicit, double e_abs=0.0):
    """The exponents of the referee's RBF entries and of their error bounds, in place.

    On entry ``K[i, j]`` holds fl(<a_i, b_j>) (the dot block of the centered rows). Per
    entry, with S = fl(sq_a[i] + sq_b[j]): D2 = max(S - 2 <a, b>, 0) and e = c S (``c`` =
    (2k + 12) u, the norm formula's cancellation bound), or, on a row with ``which[i] >= 0``,
    D2 = ``d2x[which[i], j]`` (summed from explicit differences) and e = c_explicit D2
    (``c_explicit`` = (k + 4) u: a sum of non-negative terms); ``e_abs`` is added to e (the
    products and squares that underflow, ``RBFKernel.careful_block``). Writes K <- -gamma D2 and
    E <- -gamma max(D2 - e, 0); ``rbf_careful_bound`` finishes after numpy's exp of both
    (its SIMD exp is several times faster than libm's, so the exp is not fused here).
    """
    cdef Py_ssize_t m = K.shape[0]
    cdef Py_ssize_t n = K.shape[1]
    cdef Py_ssize_t i, j
    cdef double d2, e, sa
    cdef const double* row
    cdef int nt = _n_threads(<double>m * n * 8.0)
    _check_careful(K, E, sq_a, sq_b, d2x, which)
    with nogil:
        for i in prange(m, schedule="static", num_threads=nt):
            sa = sq_a[i]
            row = &d2x[which[i], 0] if which[i] >= 0 else NULL
            for j in range(n):
                d2 = _careful_d2_e(K[i, j], sa, sq_b[j], c, row, j, c_explicit, e_abs, &e)
                K[i, j] = d2 * -gamma
                d2 = d2 - e
                E[i, j] = (d2 if d2 > 0.0 else 0.0) * -gamma


def rbf_careful_bound(const double[:, ::1] K, double[:, ::1] E, const double[::1] sq_a,
                      const double[::1] sq_b, double gamma, double c,
                      const double[:, ::1] d2x, const long long[::1] which,
                      double c_explicit, double e_abs=0.0):
    """In place, after ``rbf_careful_exponents`` and the exp of both arrays (K = exp(-gamma
    D2), E = exp(-gamma max(D2 - e, 0))): E <- min(E ((gamma e) 2) + 8 u K + the smallest
    subnormal, 1), e recomputed as there (the same operations on the same operands).

    On a row of the norm formula gamma e <= 2^-40 (the row test of ``careful_block``), so
    the product is finite. On a row of explicit differences gamma e may overflow (gamma
    near the largest double; found by review: 0 * inf gave a NaN bound at gamma = 1e308
    on a Gram matrix that is the identity), so where the exp of E underflowed to 0
    (exp(-z) <= 4 tiny for z = gamma max(D2 - e, 0), so z >= 743) the product is not
    formed: with 2 e <= D2, gamma e <= z and the term 2 gamma e exp(-z) is at most
    2 z exp(-z) <= 2^-1061 < ``_UNDERFLOWED``; otherwise (or where D2 itself overflowed)
    it is bounded by 1. The cap at 1 holds for every entry: K and its float64 value both
    lie in [0, 1].

    The three steps give the operations of the numpy form of ``RBFKernel.careful_block``
    in the same order, so K and E are bit for bit that form's, and E the bound it proves.
    """
    cdef Py_ssize_t m = K.shape[0]
    cdef Py_ssize_t n = K.shape[1]
    cdef Py_ssize_t i, j
    cdef double e, sa, d2, t
    cdef double u8 = 8.0 * _U64
    cdef const double* row
    cdef int nt = _n_threads(<double>m * n * 8.0)
    _check_careful(K, E, sq_a, sq_b, d2x, which)
    with nogil:
        for i in prange(m, schedule="static", num_threads=nt):
            sa = sq_a[i]
            row = &d2x[which[i], 0] if which[i] >= 0 else NULL
            for j in range(n):
                d2 = _careful_d2_e(0.0, sa, sq_b[j], c, row, j, c_explicit, e_abs, &e)
                if row == NULL or E[i, j] != 0.0:
                    t = E[i, j] * ((gamma * e) * 2.0)
                elif 2.0 * e <= d2 and d2 < INFINITY:
                    t = _UNDERFLOWED
                else:
                    t = 1.0
                t = t + K[i, j] * u8 + _TINY
                E[i, j] = t if t < 1.0 else 1.0


cdef _check_careful(const double[:, ::1] K, const double[:, ::1] E, const double[::1] sq_a,
                    const double[::1] sq_b, const double[:, ::1] d2x,
                    const long long[::1] which):
    """The shapes ``rbf_careful_*`` index without bounds checks."""
    cdef Py_ssize_t m = K.shape[0]
    cdef Py_ssize_t n = K.shape[1]
    cdef Py_ssize_t i
    if E.shape[0] != m or E.shape[1] != n or sq_a.shape[0] != m or sq_b.shape[0] != n or \
            which.shape[0] != m or d2x.shape[1] != n:
        raise ValueError(f"rbf_careful: K {m} x {n} needs E of that shape, {m} row norms, "
                         f"{n} column norms, {m} row indices and explicit rows of {n}")
    for i in range(m):
        if which[i] >= d2x.shape[0]:
            raise ValueError(f"rbf_careful: row {i} reads explicit row {which[i]} of "
                             f"{d2x.shape[0]}")


cdef inline double _ipow(double x, int p) noexcept nogil:
    """x ** p for an integer p >= 1 by repeated squaring (log2(p) products, no libm pow)."""
    cdef double r = 1.0
    while True:
        if p & 1:
            r = r * x
        p = p >> 1
        if p == 0:
            return r
        x = x * x


def finish_poly(floating[:, ::1] out, double gamma, double coef0, int degree, bint same=False):
    """In place: out <- (gamma * out + coef0) ** degree (integer degree >= 1).

    ``same=True`` (B is A): only the upper triangle is read and written, then mirrored.
    """
    cdef Py_ssize_t m = out.shape[0]
    cdef Py_ssize_t n = out.shape[1]
    cdef Py_ssize_t i, j, j0
    cdef int nt = _n_threads(<double>m * n * 4.0)
    with nogil:
        for i in prange(m, schedule="dynamic", chunksize=16, num_threads=nt):
            j0 = i if same else 0
            for j in range(j0, n):
                out[i, j] = <floating>_ipow(gamma * <double>out[i, j] + coef0, degree)
        if same:
            _mirror_upper(out)


# ------------------------------------------------------------------------------ periodic spline
cdef inline double _horner(const double* c, Py_ssize_t nc, double x) noexcept nogil:
    cdef double s = 0.0
    cdef Py_ssize_t i
    for i in range(nc):
        s = s * x + c[i]
    return s


cdef inline double _cos_series(double t, int mode, const double* c, Py_ssize_t nc, double amp,
                               double q, int j0, double eps, double zreg, double dlg,
                               double lsin, double zq, double pair_scale) noexcept nogil:
    """C_q(t) = sum_{k >= 1} cos(2 pi k t) / k^q, by the route of ``_periodic.series_plan``."""
    cdef double u, x, s, m, expm, lx
    cdef Py_ssize_t k
    t = fabs(t)
    u = t - floor(t)
    if u > 0.5:
        u = 1.0 - u
    if mode == 0:
        return _horner(c, nc, u)
    if mode == 3:
        s = 0.0
        for k in range(nc, 0, -1):        # smallest terms first
            s = s + cos(6.283185307179586 * k * u) * c[k - 1]
        return s
    x = 6.283185307179586 * u
    s = _horner(c, nc, x * x)
    # log(x) from log(u): 2 pi u rounds to a subnormal below u = 2^-1000 (its relative error
    # is not u there: K(5e-324, 0) was off by 0.086 at order 1.0001, found by review); u
    # itself is a difference of two coordinates, exact at that size
    lx = log(u) + 1.8378770664093453 if u < 9.332636185032189e-302 else log(x)
    if mode == 1:
        if u < 9.332636185032189e-302:
            return s + amp * exp((q - 1.0) * lx)
        return s + amp * pow(x, q - 1.0)
    if x > 0.0:
        m = lx - dlg + lsin
        expm = m if eps == 0.0 else expm1(eps * m) / eps
        return s + pair_scale * pow(x, 2.0 * j0) * (zreg - expm)
    return zq if j0 == 0 else s


cdef inline double spline_distance(double a, double b) noexcept nogil:
    """The periodic distance of two coordinates reduced into [-1/2, 1/2]: |a - b|, or
    across the wrap-around (|a - b| > 1/2: opposite signs) (1/2 - |a|) + (1/2 - |b|), two
    non-negative terms and no cancellation. 1 - |a - b| rounded a - b first: 0.5 and
    -0.5 + 2^-54 were at distance 0 instead of 2^-54, and the kernel's value was off by
    141 at order 1.01 (found by review)."""
    cdef double t = a - b
    if fabs(t) > 0.5:
        return (0.5 - fabs(a)) + (0.5 - fabs(b))
    return fabs(t)


def spline_distances(const double[::1] a, const double[::1] b, double[:, ::1] out):
    """out[i, j] = the periodic distance of a[i] and b[j] as ``spline_factor`` computes it
    (``SplineKernel.careful_block`` bounds its rounding)."""
    cdef Py_ssize_t i, j
    with nogil:
        for i in range(out.shape[0]):
            for j in range(out.shape[1]):
                out[i, j] = spline_distance(a[i], b[j])


def spline_factor(const double[::1] a, const double[::1] b, double[:, ::1] out, int mode,
                  const double[::1] coef, tuple scalars, double weight, bint same=False):
    """In place: out[i, j] *= 1 + weight * C_q(a[i] - b[j]) (one coordinate of the spline).

    ``same=True`` (b is a): only the upper triangle j >= i is updated; the caller mirrors
    once after the last coordinate.
    """
    cdef Py_ssize_t m = out.shape[0]
    cdef Py_ssize_t n = out.shape[1]
    cdef Py_ssize_t nc = coef.shape[0]
    cdef Py_ssize_t i, j, j0s
    cdef double amp = scalars[0]
    cdef double q = scalars[1]
    cdef int j0 = scalars[2]
    cdef double eps = scalars[3]
    cdef double zreg = scalars[4]
    cdef double dlg = scalars[5]
    cdef double lsin = scalars[6]
    cdef double zq = scalars[7]
    cdef double pair_scale = scalars[8]
    cdef const double* c = &coef[0]
    cdef int nt = _n_threads(<double>m * n * (nc + 10))
    with nogil:
        for i in prange(m, schedule="dynamic", chunksize=16,
                        num_threads=nt):
            j0s = i if same else 0
            for j in range(j0s, n):
                out[i, j] *= 1.0 + weight * _cos_series(spline_distance(a[i], b[j]), mode, c,
                                                        nc, amp, q, j0, eps, zreg, dlg, lsin,
                                                        zq, pair_scale)


# the per-layout kernels dispatch on the row block's class through a table (see
# ``marginkit.utils._rows.ByLayout``: Cython's dispatch costs microseconds per call)
from marginkit.utils._rows import dispatch_by_layout  # noqa: E402

dispatch_by_layout(globals())
