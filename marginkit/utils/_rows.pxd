# One row block of a data matrix for nogil kernels: dense (C order) or CSR, float32 or
# float64 values, int32 or int64 indices (the idea of scikit-learn's SequentialDataset
# and lightning's RowDataset). Built from Python by ``marginkit.utils._rows.row_block``;
# a kernel takes one ``rows_t`` argument and is compiled once per layout, so the layout
# is decided once per call (no test per row) and each row is read as the plain loop over
# its entries. Entry k of row i is ``X.data[k]`` for k in [row_start(X, i),
# row_stop(X, i)), in column ``col(X, i, k)``: a dense row is served with the columns
# 0..d-1 and no index array. Every vector argument of the helpers is a length-d array.
from cython cimport floating
from libc.stdint cimport int32_t, int64_t

ctypedef fused index_t:
    int32_t
    int64_t


cdef class RowBlock:
    #: rows, columns
    cdef readonly Py_ssize_t n, d
    #: the arrays the pointers point into (kept alive with the block)
    cdef readonly tuple arrays


cdef class DenseRows32(RowBlock):
    cdef const float* data


cdef class DenseRows64(RowBlock):
    cdef const double* data


cdef class CSRRows32I32(RowBlock):
    cdef const float* data
    cdef const int32_t* indices
    cdef const int32_t* indptr


cdef class CSRRows32I64(RowBlock):
    cdef const float* data
    cdef const int64_t* indices
    cdef const int64_t* indptr


cdef class CSRRows64I32(RowBlock):
    cdef const double* data
    cdef const int32_t* indices
    cdef const int32_t* indptr


cdef class CSRRows64I64(RowBlock):
    cdef const double* data
    cdef const int64_t* indices
    cdef const int64_t* indptr


ctypedef fused rows_t:
    DenseRows32
    DenseRows64
    CSRRows32I32
    CSRRows32I64
    CSRRows64I32
    CSRRows64I64

# ``if rows_t in dense_rows_t:`` selects a layout's code at compile time
ctypedef fused dense_rows_t:
    DenseRows32
    DenseRows64

ctypedef fused csr_rows_t:
    CSRRows32I32
    CSRRows32I64
    CSRRows64I32
    CSRRows64I64

# a second CSR operand, typed independently of the first (a kernel of two CSR blocks,
# each with its own value and index types)
ctypedef fused csr_rows_b_t:
    CSRRows32I32
    CSRRows32I64
    CSRRows64I32
    CSRRows64I64


cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define MK_PREFETCH(p) __builtin_prefetch((const void *)(p))
    #elif defined(_MSC_VER) && (defined(_M_X64) || defined(_M_IX86))
    #include <xmmintrin.h>
    #define MK_PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
    #else
    #define MK_PREFETCH(p) ((void)0)
    #endif
    """
    # a cache hint only (no effect on results)
    void MK_PREFETCH(const void* p) noexcept nogil


# ------------------------------------------------------------------------ entries of a row
cdef inline Py_ssize_t row_start(rows_t X, Py_ssize_t i) noexcept nogil:
    """The first entry of row i."""
    if rows_t in dense_rows_t:
        return i * X.d
    else:
        return X.indptr[i]


cdef inline Py_ssize_t row_stop(rows_t X, Py_ssize_t i) noexcept nogil:
    """One past the last entry of row i."""
    if rows_t in dense_rows_t:
        return (i + 1) * X.d
    else:
        return X.indptr[i + 1]


cdef inline Py_ssize_t col(rows_t X, Py_ssize_t i, Py_ssize_t k) noexcept nogil:
    """The column of entry k (of row i)."""
    if rows_t in dense_rows_t:
        return k - i * X.d
    else:
        return X.indices[k]


cdef inline double stored(rows_t X) noexcept nogil:
    """The number of stored entries (n d for a dense block), as a double."""
    if rows_t in dense_rows_t:
        return <double>X.n * X.d
    else:
        return <double>X.indptr[X.n]


# ------------------------------------------------------------------------- row products
# pointer-level loops (a row's values and, for CSR, its column indices), specialized by
# the types of the pointers a row helper passes
cdef inline double _dot_dense(const floating* x, const double* v, Py_ssize_t d) noexcept nogil:
    cdef double acc = 0.0
    cdef Py_ssize_t j
    for j in range(d):
        acc += x[j] * v[j]
    return acc


cdef inline double _dot_sparse(const floating* val, const index_t* ind, Py_ssize_t nnz,
                               const double* v) noexcept nogil:
    cdef double acc = 0.0
    cdef Py_ssize_t k
    for k in range(nnz):
        acc += val[k] * v[ind[k]]
    return acc


cdef inline double _dot_dense4(const floating* x, const double* v, Py_ssize_t d) noexcept nogil:
    cdef double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0
    cdef Py_ssize_t j = 0
    while j + 4 <= d:
        a0 += x[j] * v[j]
        a1 += x[j + 1] * v[j + 1]
        a2 += x[j + 2] * v[j + 2]
        a3 += x[j + 3] * v[j + 3]
        j += 4
    while j < d:
        a0 += x[j] * v[j]
        j += 1
    return (a0 + a1) + (a2 + a3)


cdef inline double _dot_sparse4(const floating* val, const index_t* ind, Py_ssize_t nnz,
                                const double* v) noexcept nogil:
    cdef double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0
    cdef Py_ssize_t k = 0
    while k + 4 <= nnz:
        a0 += val[k] * v[ind[k]]
        a1 += val[k + 1] * v[ind[k + 1]]
        a2 += val[k + 2] * v[ind[k + 2]]
        a3 += val[k + 3] * v[ind[k + 3]]
        k += 4
    while k < nnz:
        a0 += val[k] * v[ind[k]]
        k += 1
    return (a0 + a1) + (a2 + a3)


cdef inline void _axpy_dense(double alpha, const floating* x, double* out,
                             Py_ssize_t d) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(d):
        out[j] += alpha * x[j]


cdef inline void _axpy_sparse(double alpha, const floating* val, const index_t* ind,
                              Py_ssize_t nnz, double* out) noexcept nogil:
    cdef Py_ssize_t k
    for k in range(nnz):
        out[ind[k]] += alpha * val[k]


cdef inline void _axpy_dense_scaled(double alpha, const floating* x, const double* sc,
                                    double* out, Py_ssize_t d) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(d):
        out[j] += alpha * (sc[j] * (sc[j] * x[j]))


cdef inline void _axpy_sparse_scaled(double alpha, const floating* val, const index_t* ind,
                                     Py_ssize_t nnz, const double* sc, double* out) noexcept nogil:
    cdef Py_ssize_t k
    for k in range(nnz):
        out[ind[k]] += alpha * (sc[ind[k]] * (sc[ind[k]] * val[k]))


cdef inline double _dot_dense_sc4(const floating* x, const double* sc, const double* v,
                                  Py_ssize_t d) noexcept nogil:
    cdef double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0
    cdef Py_ssize_t j = 0
    while j + 4 <= d:
        a0 += (sc[j] * x[j]) * v[j]
        a1 += (sc[j + 1] * x[j + 1]) * v[j + 1]
        a2 += (sc[j + 2] * x[j + 2]) * v[j + 2]
        a3 += (sc[j + 3] * x[j + 3]) * v[j + 3]
        j += 4
    while j < d:
        a0 += (sc[j] * x[j]) * v[j]
        j += 1
    return (a0 + a1) + (a2 + a3)


cdef inline double _dot_sparse_sc4(const floating* val, const index_t* ind, Py_ssize_t nnz,
                                   const double* sc, const double* v) noexcept nogil:
    cdef double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0
    cdef Py_ssize_t k = 0
    while k + 4 <= nnz:
        a0 += (sc[ind[k]] * val[k]) * v[ind[k]]
        a1 += (sc[ind[k + 1]] * val[k + 1]) * v[ind[k + 1]]
        a2 += (sc[ind[k + 2]] * val[k + 2]) * v[ind[k + 2]]
        a3 += (sc[ind[k + 3]] * val[k + 3]) * v[ind[k + 3]]
        k += 4
    while k < nnz:
        a0 += (sc[ind[k]] * val[k]) * v[ind[k]]
        k += 1
    return (a0 + a1) + (a2 + a3)


cdef inline void _axpy_dense_sc(double alpha, const floating* x, const double* sc,
                                double* out, Py_ssize_t d) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(d):
        out[j] += alpha * (sc[j] * x[j])


cdef inline void _axpy_sparse_sc(double alpha, const floating* val, const index_t* ind,
                                 Py_ssize_t nnz, const double* sc, double* out) noexcept nogil:
    cdef Py_ssize_t k
    for k in range(nnz):
        out[ind[k]] += alpha * (sc[ind[k]] * val[k])


cdef inline double _dot_sparse4_pairs(const floating* val, const index_t* ind,
                                      Py_ssize_t nnz, const double* vs) noexcept nogil:
    # ``_dot_sparse4`` with v_j = vs[2 j]: the same products and sums in the same order
    cdef double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0
    cdef Py_ssize_t k = 0
    while k + 4 <= nnz:
        a0 += val[k] * vs[2 * <Py_ssize_t>ind[k]]
        a1 += val[k + 1] * vs[2 * <Py_ssize_t>ind[k + 1]]
        a2 += val[k + 2] * vs[2 * <Py_ssize_t>ind[k + 2]]
        a3 += val[k + 3] * vs[2 * <Py_ssize_t>ind[k + 3]]
        k += 4
    while k < nnz:
        a0 += val[k] * vs[2 * <Py_ssize_t>ind[k]]
        k += 1
    return (a0 + a1) + (a2 + a3)


cdef inline void _axpy_sparse_scaled_pairs(double alpha, const floating* val,
                                           const index_t* ind, Py_ssize_t nnz,
                                           double* vs) noexcept nogil:
    # ``_axpy_sparse_scaled`` with out_j = vs[2 j] and sc_j = vs[2 j + 1]
    cdef Py_ssize_t k, j
    for k in range(nnz):
        j = 2 * <Py_ssize_t>ind[k]
        vs[j] += alpha * (vs[j + 1] * (vs[j + 1] * val[k]))


cdef inline double row_dot(rows_t X, Py_ssize_t i, const double* v) noexcept nogil:
    """x_i . v (one running sum, in entry order)."""
    cdef Py_ssize_t s
    if rows_t in dense_rows_t:
        return _dot_dense(X.data + i * X.d, v, X.d)
    else:
        s = X.indptr[i]
        return _dot_sparse(X.data + s, X.indices + s, X.indptr[i + 1] - s, v)


cdef inline double row_dot4(rows_t X, Py_ssize_t i, const double* v) noexcept nogil:
    """x_i . v with four partial sums s0..s3 (four independent multiply-add chains over
    the entries k = 0, 1, 2, 3 mod 4), returned as (s0 + s1) + (s2 + s3)."""
    cdef Py_ssize_t s
    if rows_t in dense_rows_t:
        return _dot_dense4(X.data + i * X.d, v, X.d)
    else:
        s = X.indptr[i]
        return _dot_sparse4(X.data + s, X.indices + s, X.indptr[i + 1] - s, v)


cdef inline void row_axpy(rows_t X, Py_ssize_t i, double alpha, double* out) noexcept nogil:
    """out += alpha x_i."""
    cdef Py_ssize_t s
    if rows_t in dense_rows_t:
        _axpy_dense(alpha, X.data + i * X.d, out, X.d)
    else:
        s = X.indptr[i]
        _axpy_sparse(alpha, X.data + s, X.indices + s, X.indptr[i + 1] - s, out)


cdef inline void row_axpy_scaled(rows_t X, Py_ssize_t i, double alpha, const double* sc,
                                 double* out) noexcept nogil:
    """out += alpha sc^2 x_i, evaluated as alpha (sc_j (sc_j x_ij)): sc_j^2 alone can
    overflow or underflow for columns of magnitude 1e-160 or 1e160, the product stays in
    range."""
    cdef Py_ssize_t s
    if rows_t in dense_rows_t:
        _axpy_dense_scaled(alpha, X.data + i * X.d, sc, out, X.d)
    else:
        s = X.indptr[i]
        _axpy_sparse_scaled(alpha, X.data + s, X.indices + s, X.indptr[i + 1] - s, sc, out)


cdef inline double row_dot4_pairs(csr_rows_t X, Py_ssize_t i, const double* vs) noexcept nogil:
    """``row_dot4`` of a CSR row with v interleaved with a second vector: v_j = vs[2 j]
    (the same value bit for bit). A pass that reads two d-vectors at the columns of each
    stored entry (``row_axpy_scaled_pairs``) finds both in one cache line: on wide sparse
    data (millions of columns) the vectors are far outside the caches and each entry's
    column is a cache miss per vector read."""
    cdef Py_ssize_t s = X.indptr[i]
    return _dot_sparse4_pairs(X.data + s, X.indices + s, X.indptr[i + 1] - s, vs)


cdef inline void row_axpy_scaled_pairs(csr_rows_t X, Py_ssize_t i, double alpha,
                                       double* vs) noexcept nogil:
    """``row_axpy_scaled`` of a CSR row with out and sc interleaved: out_j = vs[2 j],
    sc_j = vs[2 j + 1] (see ``row_dot4_pairs``)."""
    cdef Py_ssize_t s = X.indptr[i]
    _axpy_sparse_scaled_pairs(alpha, X.data + s, X.indices + s, X.indptr[i + 1] - s, vs)


cdef inline double row_scaled_dot(rows_t X, Py_ssize_t i, const double* sc,
                                  const double* v) noexcept nogil:
    """(sc * x_i) . v with four partial sums (as ``row_dot4``): each entry scaled first, so
    that x_i . (sc^2 * a) can be taken as (sc * x_i) . (sc * a) with sc * a kept instead of
    sc^2 * a, which overflows or underflows for columns of magnitude 1e-160 or 1e160
    when a is large."""
    cdef Py_ssize_t s
    if rows_t in dense_rows_t:
        return _dot_dense_sc4(X.data + i * X.d, sc, v, X.d)
    else:
        s = X.indptr[i]
        return _dot_sparse_sc4(X.data + s, X.indices + s, X.indptr[i + 1] - s, sc, v)


cdef inline void row_scaled_axpy(rows_t X, Py_ssize_t i, double alpha, const double* sc,
                                 double* out) noexcept nogil:
    """out += alpha (sc * x_i), evaluated as alpha (sc_j x_ij): one factor sc, where
    ``row_axpy_scaled`` applies two (sc^2 x_i)."""
    cdef Py_ssize_t s
    if rows_t in dense_rows_t:
        _axpy_dense_sc(alpha, X.data + i * X.d, sc, out, X.d)
    else:
        s = X.indptr[i]
        _axpy_sparse_sc(alpha, X.data + s, X.indices + s, X.indptr[i + 1] - s, sc, out)


cdef inline double row_sqnorm_scaled(rows_t X, Py_ssize_t i, const double* sc) noexcept nogil:
    """||sc * x_i||^2 (each entry scaled before it is squared)."""
    cdef double acc = 0.0, x
    cdef Py_ssize_t k
    for k in range(row_start(X, i), row_stop(X, i)):
        x = X.data[k]
        x = sc[col(X, i, k)] * x
        acc += x * x
    return acc


cdef inline double _sqnorm_dense4(const floating* x, const double* sc, Py_ssize_t d) noexcept nogil:
    cdef double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0, t0, t1, t2, t3
    cdef Py_ssize_t j = 0
    while j + 4 <= d:
        t0 = sc[j] * x[j]
        t1 = sc[j + 1] * x[j + 1]
        t2 = sc[j + 2] * x[j + 2]
        t3 = sc[j + 3] * x[j + 3]
        a0 += t0 * t0
        a1 += t1 * t1
        a2 += t2 * t2
        a3 += t3 * t3
        j += 4
    while j < d:
        t0 = sc[j] * x[j]
        a0 += t0 * t0
        j += 1
    return (a0 + a1) + (a2 + a3)


cdef inline double _sqnorm_sparse4(const floating* val, const index_t* ind, Py_ssize_t nnz,
                                   const double* sc) noexcept nogil:
    cdef double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0, t0, t1, t2, t3
    cdef Py_ssize_t k = 0
    while k + 4 <= nnz:
        t0 = sc[ind[k]] * val[k]
        t1 = sc[ind[k + 1]] * val[k + 1]
        t2 = sc[ind[k + 2]] * val[k + 2]
        t3 = sc[ind[k + 3]] * val[k + 3]
        a0 += t0 * t0
        a1 += t1 * t1
        a2 += t2 * t2
        a3 += t3 * t3
        k += 4
    while k < nnz:
        t0 = sc[ind[k]] * val[k]
        a0 += t0 * t0
        k += 1
    return (a0 + a1) + (a2 + a3)


cdef inline double row_sqnorm_scaled4(rows_t X, Py_ssize_t i, const double* sc) noexcept nogil:
    """||sc * x_i||^2 with four partial sums (as ``row_dot4``): each entry scaled before it
    is squared."""
    cdef Py_ssize_t s
    if rows_t in dense_rows_t:
        return _sqnorm_dense4(X.data + i * X.d, sc, X.d)
    else:
        s = X.indptr[i]
        return _sqnorm_sparse4(X.data + s, X.indices + s, X.indptr[i + 1] - s, sc)


cdef inline void row_prefetch(rows_t X, Py_ssize_t i) noexcept nogil:
    """Ask for the first 256 bytes of row i's values (and column indices) to be brought
    into cache, every line they touch: one request per 64 bytes from the row's start and
    one for its last entry in that span, whose line the steps miss when the row does not
    start on a line (longer rows are streamed by the hardware prefetcher once their first
    lines arrive)."""
    cdef Py_ssize_t st, ln, k
    cdef Py_ssize_t step = 64 // sizeof(X.data[0])
    cdef Py_ssize_t cap = 4 * step
    if rows_t in dense_rows_t:
        ln = X.d if X.d < cap else cap
        st = i * X.d
    else:
        st = X.indptr[i]
        ln = X.indptr[i + 1] - st
        if ln > cap:
            ln = cap
    k = 0
    while k < ln:
        MK_PREFETCH(X.data + st + k)
        k += step
    if ln > 0:
        MK_PREFETCH(X.data + st + ln - 1)
    if rows_t in csr_rows_t:
        step = 64 // sizeof(X.indices[0])
        k = 0
        while k < ln:
            MK_PREFETCH(X.indices + st + k)
            k += step
        if ln > 0:
            MK_PREFETCH(X.indices + st + ln - 1)


cdef inline void row_prefetch_offsets(rows_t X, Py_ssize_t i) noexcept nogil:
    """Ask for row i's offsets in ``indptr`` (CSR; nothing to fetch for a dense block)."""
    if rows_t in csr_rows_t:
        MK_PREFETCH(X.indptr + i)
