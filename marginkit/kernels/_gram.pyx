"""Gram blocks K(A, B) for the dot-product and distance kernels, dense or CSR operands.

Each public function fills an output array allocated by the caller (C order, the dtype of
the operands) and touches no Python object inside its ``with nogil:`` section.

* ``dot_*``: out = A @ B.T. Dense x dense goes through BLAS (gemm; syrk and a mirror when
  B is A, which halves the flops and makes the block exactly symmetric). The CSR variants
  accumulate in float64; CSR x CSR walks the columns of B (``B_csc``: B in CSC form), so
  it costs sum over shared features, like a sparse product.
* ``l1_*``: out = ||a_i - b_j||_1, with an exact merge over the sorted indices of CSR rows
  (no cancellation between norms).
* ``finish_rbf`` / ``finish_exp`` / ``finish_poly``: the elementwise maps applied in place,
  exp(-gamma max(|a|^2 + |b|^2 - 2 <a, b>, 0)), exp(-gamma out) and (gamma out + coef0)^p.
* ``sqnorms_*``: squared row norms, computed once per block in float64.

Parallel loops are OpenMP ``prange`` over rows with a static or dynamic schedule; every
entry is computed by one thread with a fixed summation order, so the result does not depend
on the number of threads (``OMP_NUM_THREADS`` / ``threadpoolctl``). BLAS threads follow
the BLAS library's own settings (``threadpoolctl`` again).
"""
from cython cimport floating
from cython.parallel cimport parallel, prange
from libc.math cimport exp, fabs, pow
from libc.stdlib cimport calloc, free
from scipy.linalg.cython_blas cimport dgemm, dsyrk, sgemm, ssyrk

ctypedef fused index_a:
    int
    long long

ctypedef fused index_b:
    int
    long long

cdef int _MIRROR_BLOCK = 64


# ------------------------------------------------------------------------------ BLAS products
cdef void _gemm_abt(int m, int n, int k, const floating* A, const floating* B,
                    floating* C) noexcept nogil:
    """C (m x n, row-major) = A (m x k, row-major) @ B (n x k, row-major).T."""
    cdef char transa = b'T'
    cdef char transb = b'N'
    cdef int lda = k if k > 0 else 1
    cdef int ldc = n if n > 0 else 1
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


cdef void _syrk_aat_upper(int m, int k, const floating* A, floating* C) noexcept nogil:
    """Upper triangle (j >= i, row-major) of C (m x m) = A (m x k) @ A.T."""
    cdef char uplo = b'L'      # lower in column-major = upper in row-major
    cdef char trans = b'T'
    cdef int lda = k if k > 0 else 1
    cdef int ldc = m if m > 0 else 1
    cdef floating one = 1.0
    cdef floating zero = 0.0
    if floating is double:
        # np.triu(C) = np.triu(A @ A.T)
        dsyrk(&uplo, &trans, &m, &k, &one, <double*>A, &lda, &zero, C, &ldc)
    else:
        # np.triu(C) = np.triu(A @ A.T)
        ssyrk(&uplo, &trans, &m, &k, &one, <float*>A, &lda, &zero, C, &ldc)


cdef void _mirror_upper(floating[:, ::1] out) noexcept nogil:
    """out[i, j] = out[j, i] for j < i, tile by tile (cache-friendly transpose)."""
    cdef Py_ssize_t m = out.shape[0]
    cdef Py_ssize_t nb = (m + _MIRROR_BLOCK - 1) // _MIRROR_BLOCK
    cdef Py_ssize_t bi, bj, i, j, i_end, j_end
    for bi in prange(nb, schedule="dynamic"):
        i_end = min((bi + 1) * _MIRROR_BLOCK, m)
        for bj in range(bi + 1):
            j_end = min((bj + 1) * _MIRROR_BLOCK, m)
            for i in range(bi * _MIRROR_BLOCK, i_end):
                for j in range(bj * _MIRROR_BLOCK, min(j_end, i)):
                    out[i, j] = out[j, i]


def mirror_upper(floating[:, ::1] out):
    """Copy the upper triangle of the square ``out`` onto its lower triangle, in place."""
    with nogil:
        _mirror_upper(out)


def dot_dense_dense(const floating[:, ::1] A, const floating[:, ::1] B, floating[:, ::1] out,
                    bint same=False):
    """out = A @ B.T (BLAS). ``same=True`` (B is A): syrk on one triangle, then mirrored."""
    cdef int m = A.shape[0]
    cdef int n = B.shape[0]
    cdef int k = A.shape[1]
    if m == 0 or n == 0:
        return
    if k == 0:
        out[:, :] = 0
        return
    with nogil:
        if same:
            _syrk_aat_upper(m, k, &A[0, 0], &out[0, 0])
            _mirror_upper(out)
        else:
            _gemm_abt(m, n, k, &A[0, 0], &B[0, 0], &out[0, 0])


def dot_csr_dense(const floating[::1] a_data, const index_a[::1] a_indices,
                  const index_a[::1] a_indptr, const floating[:, ::1] B,
                  floating[:, ::1] out):
    """out = A @ B.T with A in CSR: out[i, j] = sum_k a_ik B[j, col_k] (float64 sums)."""
    cdef Py_ssize_t m = out.shape[0]
    cdef Py_ssize_t n = out.shape[1]
    cdef Py_ssize_t i, j
    cdef index_a p
    cdef double s
    with nogil:
        for i in prange(m, schedule="static"):
            for j in range(n):
                s = 0.0
                for p in range(a_indptr[i], a_indptr[i + 1]):
                    s = s + a_data[p] * B[j, a_indices[p]]
                out[i, j] = <floating>s


def dot_dense_csr(const floating[:, ::1] A, const floating[::1] b_data,
                  const index_b[::1] b_indices, const index_b[::1] b_indptr,
                  floating[:, ::1] out):
    """out = A @ B.T with B in CSR: out[i, j] = sum_k b_jk A[i, col_k] (float64 sums)."""
    cdef Py_ssize_t m = out.shape[0]
    cdef Py_ssize_t n = out.shape[1]
    cdef Py_ssize_t i, j
    cdef index_b p
    cdef double s
    with nogil:
        for i in prange(m, schedule="static"):
            for j in range(n):
                s = 0.0
                for p in range(b_indptr[j], b_indptr[j + 1]):
                    s = s + b_data[p] * A[i, b_indices[p]]
                out[i, j] = <floating>s


def dot_csr_csc(const floating[::1] a_data, const index_a[::1] a_indices,
                const index_a[::1] a_indptr, const floating[::1] bt_data,
                const index_b[::1] bt_indices, const index_b[::1] bt_indptr,
                floating[:, ::1] out):
    """out = A @ B.T with A in CSR and B in CSC (``bt_*``: the CSR arrays of B.T).

    Row i of the result accumulates a_ik * B[:, k] over the stored features k of row i,
    in increasing k: the cost is the number of shared (feature, row) pairs, and entry (i, j)
    sums the same products in the same order as entry (j, i) of K(B, A).
    """
    cdef Py_ssize_t m = out.shape[0]
    cdef Py_ssize_t n = out.shape[1]
    cdef Py_ssize_t i, j, col
    cdef index_a p
    cdef index_b q
    cdef double v
    cdef double* acc
    with nogil, parallel():
        acc = <double*> calloc(n if n > 0 else 1, sizeof(double))
        for i in prange(m, schedule="dynamic", chunksize=8):
            for j in range(n):
                acc[j] = 0.0
            for p in range(a_indptr[i], a_indptr[i + 1]):
                col = a_indices[p]
                v = a_data[p]
                for q in range(bt_indptr[col], bt_indptr[col + 1]):
                    acc[bt_indices[q]] += v * bt_data[q]
            for j in range(n):
                out[i, j] = <floating>acc[j]
        free(acc)


# ------------------------------------------------------------------------------ L1 distances
def l1_dense_dense(const floating[:, ::1] A, const floating[:, ::1] B, floating[:, ::1] out,
                   bint same=False):
    """out[i, j] = sum_f |A[i, f] - B[j, f]| (float64 sums); one triangle when B is A."""
    cdef Py_ssize_t m = out.shape[0]
    cdef Py_ssize_t n = out.shape[1]
    cdef Py_ssize_t d = A.shape[1]
    cdef Py_ssize_t i, j, f, j0
    cdef double s
    with nogil:
        for i in prange(m, schedule="dynamic", chunksize=8):
            j0 = i if same else 0
            for j in range(j0, n):
                s = 0.0
                for f in range(d):
                    s = s + fabs(<double>A[i, f] - <double>B[j, f])
                out[i, j] = <floating>s
        if same:
            _mirror_upper(out)


def l1_csr_dense(const floating[::1] a_data, const index_a[::1] a_indices,
                 const index_a[::1] a_indptr, const floating[:, ::1] B,
                 floating[:, ::1] out):
    """out[i, j] = ||a_i - B[j]||_1 with A in CSR (exact merge over the row's features)."""
    cdef Py_ssize_t m = out.shape[0]
    cdef Py_ssize_t n = out.shape[1]
    cdef Py_ssize_t d = B.shape[1]
    cdef Py_ssize_t i, j, f
    cdef index_a p, p_end
    cdef double s
    with nogil:
        for i in prange(m, schedule="static"):
            p_end = a_indptr[i + 1]
            for j in range(n):
                s = 0.0
                p = a_indptr[i]
                for f in range(d):
                    if p < p_end and a_indices[p] == f:
                        s = s + fabs(<double>a_data[p] - <double>B[j, f])
                        p = p + 1
                    else:
                        s = s + fabs(<double>B[j, f])
                out[i, j] = <floating>s


def l1_dense_csr(const floating[:, ::1] A, const floating[::1] b_data,
                 const index_b[::1] b_indices, const index_b[::1] b_indptr,
                 floating[:, ::1] out):
    """out[i, j] = ||A[i] - b_j||_1 with B in CSR (same summation order as ``l1_csr_dense``)."""
    cdef Py_ssize_t m = out.shape[0]
    cdef Py_ssize_t n = out.shape[1]
    cdef Py_ssize_t d = A.shape[1]
    cdef Py_ssize_t i, j, f
    cdef index_b p, p_end
    cdef double s
    with nogil:
        for i in prange(m, schedule="static"):
            for j in range(n):
                s = 0.0
                p = b_indptr[j]
                p_end = b_indptr[j + 1]
                for f in range(d):
                    if p < p_end and b_indices[p] == f:
                        s = s + fabs(<double>b_data[p] - <double>A[i, f])
                        p = p + 1
                    else:
                        s = s + fabs(<double>A[i, f])
                out[i, j] = <floating>s


def l1_csr_csr(const floating[::1] a_data, const index_a[::1] a_indices,
               const index_a[::1] a_indptr, const floating[::1] b_data,
               const index_b[::1] b_indices, const index_b[::1] b_indptr,
               floating[:, ::1] out, bint same=False):
    """out[i, j] = ||a_i - b_j||_1, both CSR with sorted indices (merge of the two rows)."""
    cdef Py_ssize_t m = out.shape[0]
    cdef Py_ssize_t n = out.shape[1]
    cdef Py_ssize_t i, j, j0
    cdef index_a p, p_end
    cdef index_b q, q_end
    cdef long long ca, cb
    cdef double s
    with nogil:
        for i in prange(m, schedule="dynamic", chunksize=8):
            j0 = i if same else 0
            for j in range(j0, n):
                s = 0.0
                p = a_indptr[i]
                p_end = a_indptr[i + 1]
                q = b_indptr[j]
                q_end = b_indptr[j + 1]
                while p < p_end or q < q_end:
                    ca = a_indices[p] if p < p_end else -1
                    cb = b_indices[q] if q < q_end else -1
                    if cb < 0 or (ca >= 0 and ca < cb):
                        s = s + fabs(<double>a_data[p])
                        p = p + 1
                    elif ca < 0 or cb < ca:
                        s = s + fabs(<double>b_data[q])
                        q = q + 1
                    else:
                        s = s + fabs(<double>a_data[p] - <double>b_data[q])
                        p = p + 1
                        q = q + 1
                out[i, j] = <floating>s
        if same:
            _mirror_upper(out)


# ------------------------------------------------------------------------------ row norms
def sqnorms_dense(const floating[:, ::1] A, floating[::1] out):
    """out[i] = ||A[i]||^2 (float64 sums)."""
    cdef Py_ssize_t m = A.shape[0]
    cdef Py_ssize_t d = A.shape[1]
    cdef Py_ssize_t i, f
    cdef double s
    with nogil:
        for i in prange(m, schedule="static"):
            s = 0.0
            for f in range(d):
                s = s + <double>A[i, f] * A[i, f]
            out[i] = <floating>s


def sqnorms_csr(const floating[::1] data, const index_a[::1] indptr, floating[::1] out):
    """out[i] = sum of squares of the stored entries of row i (float64 sums)."""
    cdef Py_ssize_t m = out.shape[0]
    cdef Py_ssize_t i
    cdef index_a p
    cdef double s
    with nogil:
        for i in prange(m, schedule="static"):
            s = 0.0
            for p in range(indptr[i], indptr[i + 1]):
                s = s + <double>data[p] * data[p]
            out[i] = <floating>s


# ------------------------------------------------------------------------------ elementwise maps
def finish_rbf(floating[:, ::1] out, const floating[::1] sq_a, const floating[::1] sq_b,
               double gamma, bint same=False):
    """In place: out <- exp(-gamma * max(sq_a[:, None] + sq_b[None, :] - 2 out, 0)).

    ``same=True`` (B is A): the diagonal is exactly 1 and only the upper triangle is
    evaluated, then mirrored (the result is exactly symmetric).
    """
    cdef Py_ssize_t m = out.shape[0]
    cdef Py_ssize_t n = out.shape[1]
    cdef Py_ssize_t i, j
    cdef double d2
    with nogil:
        if same:
            for i in prange(m, schedule="dynamic", chunksize=16):
                out[i, i] = 1.0
                for j in range(i + 1, n):
                    # |a|^2 + |b|^2 is formed first: the same rounding for (i, j) and (j, i)
                    d2 = (<double>sq_a[i] + <double>sq_b[j]) - 2.0 * <double>out[i, j]
                    if d2 < 0.0:
                        d2 = 0.0
                    out[i, j] = <floating>exp(-gamma * d2)
            _mirror_upper(out)
        else:
            for i in prange(m, schedule="static"):
                for j in range(n):
                    d2 = (<double>sq_a[i] + <double>sq_b[j]) - 2.0 * <double>out[i, j]
                    if d2 < 0.0:
                        d2 = 0.0
                    out[i, j] = <floating>exp(-gamma * d2)


def finish_exp(floating[:, ::1] out, double gamma):
    """In place: out <- exp(-gamma * out)."""
    cdef Py_ssize_t m = out.shape[0]
    cdef Py_ssize_t n = out.shape[1]
    cdef Py_ssize_t i, j
    with nogil:
        for i in prange(m, schedule="static"):
            for j in range(n):
                out[i, j] = <floating>exp(-gamma * <double>out[i, j])


def finish_poly(floating[:, ::1] out, double gamma, double coef0, double degree):
    """In place: out <- (gamma * out + coef0) ** degree."""
    cdef Py_ssize_t m = out.shape[0]
    cdef Py_ssize_t n = out.shape[1]
    cdef Py_ssize_t i, j
    with nogil:
        for i in prange(m, schedule="static"):
            for j in range(n):
                out[i, j] = <floating>pow(gamma * <double>out[i, j] + coef0, degree)
