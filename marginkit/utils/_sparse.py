"""A CSR copy of a dense matrix that is mostly zeros, built by blocks of rows.

LIBLINEAR (and scikit-learn's ``LinearSVC``, which hands it its rows) always solves on
sparse rows. The SVM estimators do the same for a dense X with few non-zero entries:
their solvers read every stored entry of X once or twice per iteration, so rows of
one non-zero in five cost a third of the time as CSR (docs/svm.md, "Dense rows that are
mostly zeros").
"""
import numpy as np
import scipy.sparse as sp

#: rows of at most this fraction of non-zero entries are copied to CSR by the estimators
SPARSE_COPY_DENSITY = 0.25

#: entries per block of rows (the temporaries of a block are a few times its non-zeros)
_BLOCK_ENTRIES = 1 << 20


def _row_blocks(n, d):
    step = max(1, _BLOCK_ENTRIES // max(d, 1))
    for lo in range(0, n, step):
        yield lo, min(n, lo + step)


def sparse_copy(X, max_density=SPARSE_COPY_DENSITY, budget=np.inf):
    """A canonical CSR copy of the dense 2-D array ``X`` (same dtype; int32 indices when
    they fit) when at most ``max_density`` of its entries are non-zero and the copy's
    bytes are within ``budget``; else None (X is then read as it is).

    Two passes over X by blocks of rows: the non-zeros of each row, then the copy; the
    temporaries are those of one block. ``X`` is not modified. Entries equal to zero
    (including -0.0) are not stored, which changes no product with X.
    """
    n, d = X.shape
    if n == 0 or d == 0:
        return None
    counts = np.empty(n, dtype=np.int64)
    for lo, hi in _row_blocks(n, d):
        counts[lo:hi] = np.count_nonzero(X[lo:hi], axis=1)
    nnz = int(counts.sum())
    if nnz > max_density * n * d:
        return None
    small = max(nnz, d) < np.iinfo(np.int32).max
    index_dtype = np.int32 if small else np.int64
    size = nnz * (X.dtype.itemsize + np.dtype(index_dtype).itemsize) \
        + (n + 1) * np.dtype(index_dtype).itemsize
    if size > budget:
        return None
    indptr = np.zeros(n + 1, dtype=index_dtype)
    np.cumsum(counts, out=indptr[1:])
    indices = np.empty(nnz, dtype=index_dtype)
    data = np.empty(nnz, dtype=X.dtype)
    for lo, hi in _row_blocks(n, d):
        block = X[lo:hi]
        rows, cols = np.nonzero(block)  # row-major order: each row's columns increasing
        a, b = indptr[lo], indptr[hi]
        indices[a:b] = cols
        data[a:b] = block[rows, cols]
    out = sp.csr_matrix((data, indices, indptr), shape=(n, d), copy=False)
    out.has_sorted_indices = True
    return out
