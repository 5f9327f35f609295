"""Row norms of dense and CSR matrices: the one helper the kernels, the Gram operator and the
solvers share.

``row_sqnorms`` accumulates each row's sum of squares in float64 with a fixed order (the
columns of a C-ordered row, the stored entries of a CSR row), one thread per row, so the
result does not depend on the thread count; it reads X in place (no n x d or nnz-sized
temporaries). ``row_norms`` adds the overflow- and underflow-safe square root.
"""
import numpy as np
import scipy.sparse as sp

from ..kernels import _gram
from ..utils._rows import _from_arrays, row_block

__all__ = ["row_norms", "row_sqnorms"]

_FLOATS = (np.float32, np.float64)


def row_sqnorms(X, dtype=np.float64):
    """||x_i||^2 for every row of X (dense or sparse), summed in float64, returned as
    ``dtype``."""
    out = np.empty(X.shape[0], dtype=np.float64)
    if sp.issparse(X):
        X = X if X.format == "csr" else X.tocsr()
        data, indices, indptr = X.data, X.indices, X.indptr
        if data.dtype not in _FLOATS:
            data = data.astype(np.float64)
        if indptr.dtype not in (np.int32, np.int64):
            indptr = indptr.astype(np.int64)
        if indices.dtype != indptr.dtype:
            # one index type per row block (the column indices are not read here)
            indices = indices.astype(indptr.dtype)
        _gram.sqnorms(_from_arrays(X.shape[0], X.shape[1], (data, indices, indptr)), out)
    else:
        X = np.asarray(X)
        if X.dtype in _FLOATS and X.ndim == 2 and X.flags.c_contiguous:
            _gram.sqnorms(row_block(X), out)
        else:  # other layouts and dtypes: read in place by numpy
            np.einsum("ij,ij->i", X, X, dtype=np.float64, out=out)
    return out if out.dtype == dtype else out.astype(dtype)


#: squared norms outside [2^-960, 2^960] may have lost digits to underflow or overflowed:
#: those rows get their norm from the row divided by its largest magnitude
_SAFE_SQ = (2.0**-960, 2.0**960)


def row_norms(X):
    """||x_i|| in float64 for every row, without overflow or underflow: the square roots of
    ``row_sqnorms``, and for the rows whose square is out of the safe range the norm of the
    row divided by its largest magnitude, times that magnitude."""
    sq = row_sqnorms(X)
    bad = np.flatnonzero(~((sq >= _SAFE_SQ[0]) & (sq <= _SAFE_SQ[1])))
    nrm = np.sqrt(sq, out=sq)
    for i in bad:
        row = X[i]
        row = np.asarray(row.toarray() if sp.issparse(row) else row, dtype=np.float64).ravel()
        m = float(np.max(np.abs(row), initial=0.0))
        nrm[i] = 0.0 if m == 0.0 else m * float(np.sqrt(np.dot(row / m, row / m)))
    return nrm


def top_eigenvalue(S):
    """The largest eigenvalue of the symmetric matrix S: LAPACK's subset driver (the top
    one only), else the whole spectrum by divide and conquer, else None. Found by review:
    the subset driver raised "LinAlgError: Internal Error" on the scaled Gram matrix of
    20 one-hot rows (a top eigenvalue of multiplicity 19), and fista crashed."""
    import scipy.linalg

    p = S.shape[0]
    try:
        return float(scipy.linalg.eigvalsh(S, subset_by_index=[p - 1, p - 1])[0])
    except np.linalg.LinAlgError:
        pass
    try:
        return float(scipy.linalg.eigvalsh(S, driver="evd")[-1])
    except np.linalg.LinAlgError:
        return None
