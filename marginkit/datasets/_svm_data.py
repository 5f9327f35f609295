"""The four-point data set of arXiv:2512.03947, section 4.1 (LIBLINEAR's premature stop)."""
import numbers

import numpy as np
import scipy.sparse as sp

__all__ = ["make_four_point"]

# the three d-class points, in the first three coordinates (see docs/svm.md, section 8)
_D_POINTS = np.array([[0.5, -1.0, 1.0],
                      [0.5, 0.0, -1.0],
                      [-1.0, -0.5, 0.0]])


def make_four_point(d=1100, sparse=False, dtype=np.float64):
    """Four points in R^d on which LIBLINEAR's stopping rule can fire with c_1 misclassified.

    arXiv:2512.03947, section 4.1 and Table 5. The c-class is the single point c_1 = q e_1 with
    q = sqrt(3d/2 - 1) (so ||(c_1, 1)||^2 = 3d/2, the paper's q); the d-class is three
    points of norm at most 1.5 in the first three coordinates. The text of the paper we
    work from lost the coordinates of the d-points; these were chosen (by a search over a
    small grid, documented in docs/svm.md) to reproduce the behaviour of Table 5: with
    gamma = 64/n, mu = n/128 and no scaling, the H-SVM optimum classifies c_1 correctly
    with margin close to 1 for every d, while dual coordinate descent with LIBLINEAR's
    rule (tol 0.1) stops with c_1 misclassified for about half of the random orderings
    once d >= 1100 (and almost never at d = 500).

    Parameters
    ----------
    d : int >= 3
        Dimension.
    sparse : bool
        Return a CSR matrix (8 stored entries) instead of a dense array.
    dtype : float32 or float64

    Returns
    -------
    X : (4, d) array or CSR matrix
        Row 0 is c_1, rows 1-3 the d-points.
    y : (4,) int array
        [1, -1, -1, -1].

    References
    ----------
    "Data-Dependent Complexity of First-Order Methods for Support Vector Machines",
    arXiv:2512.03947 (2025).
    """
    if isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 3:
        raise ValueError(f"d={d!r} must be an integer >= 3 (the d-points use three coordinates)")
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise TypeError(f"dtype={dtype} must be float32 or float64")
    d = int(d)
    y = np.array([1, -1, -1, -1])
    # the 4 x 3 block that holds every nonzero; a CSR X is built from it without a dense
    # 4 x d array (found by review: d=10**12 gave numpy's MemoryError even for sparse=True)
    head = np.zeros((4, 3), dtype=dtype)
    head[0, 0] = np.sqrt(1.5 * d - 1.0)
    head[1:] = _D_POINTS
    if sparse:
        S = sp.csr_matrix(head)
        return sp.csr_matrix((S.data, S.indices, S.indptr), shape=(4, d)), y
    from ._clusters import refuse_beyond_memory

    with refuse_beyond_memory(f"d={d}", f"the dense X (4 x d {dtype.name})",
                              4 * d * dtype.itemsize, "ask for a smaller d, or sparse=True"):
        X = np.zeros((4, d), dtype=dtype)
    X[:, :3] = head
    return X, y
