"""An upper bound on lambda_max(G), the largest eigenvalue of the normalized Gram.

The l2 prox-function of SNKPVN and ISNKPVN (Ramdas & Pena 2014, sec. 6 and appendix)
starts from mu_0 = 2 lambda with lambda >= max ||r||_G^2 / ||r||_2^2; the paper takes
lambda = n (|G_ij| <= 1). ``gram_norm_bound`` gives lambda_max(G) itself, plus a margin
for its round-off, where it is cheap to form: for a feature map, G and Phi_n^T Phi_n
(Phi_n: the rows of Phi divided by their norms) have the same non-zero eigenvalues.

The paper's reference is in the package docstring (``marginkit.solvers.perceptron``).
"""
import numpy as np
import scipy.sparse as sp

from ...linalg._operator import FeatureOperator
from ._fast import csr_normalized_cross

# Phi_n^T Phi_n is formed to bound lambda_max(G) only when it is cheap next to the
# iterations it saves: dense Phi with d <= 512 (n d^2 multiply-adds through BLAS-3), CSR Phi
# with d <= 2048 and at most 64 entries per row (sum_i nnz_i^2 <= 64 nnz: the cost of at
# most 32 products with G)
_GRAM_BOUND_MAX_D_DENSE = 512
_GRAM_BOUND_MAX_D_CSR = 2048
_GRAM_BOUND_MAX_ROW_NNZ = 64


def gram_norm_bound(op):
    """An upper bound on lambda_max(G), the largest eigenvalue of the normalized Gram.

    Every bound lambda >= max ||r||_G^2 / ||r||_2^2 serves as the paper's lambda_# for the
    l2 prox-function (appendix: mu_0 = 2 lambda_#); the paper takes n (|G_ij| <= 1). For a
    feature operator where it is cheap (dense: d <= 512; CSR: d <= 2048 and at most 64
    entries per row), lambda_max(G) = lambda_max(Phi_n^T Phi_n)
    (Phi_n: the rows of Phi divided by their norms) is computed from that d x d matrix,
    accumulated in float64 (dense: over blocks of rows, no copy of Phi beyond one block;
    CSR: sum_i nnz_i^2 multiply-adds, no copy), plus a margin for its round-off; otherwise n.
    """
    C = normalized_feature_cross(op)
    return float(op.n) if C is None else bound_from_cross(C, op.n)


def normalized_feature_cross(op):
    """Phi_n^T Phi_n (d x d, float64) of a normalized ``FeatureOperator``, or None when
    ``op`` is not one or forming it is not cheap (see ``gram_norm_bound``)."""
    if not isinstance(op, FeatureOperator) or not op.normalize:
        return None
    Phi, d, n = op.phi, op.d, op.n
    if sp.issparse(Phi):
        widest = int(np.diff(Phi.indptr).max()) if n else 0
        if d > _GRAM_BOUND_MAX_D_CSR or widest > _GRAM_BOUND_MAX_ROW_NNZ:
            return None
    elif d > _GRAM_BOUND_MAX_D_DENSE:
        return None
    inv = 1.0 / np.asarray(op.sqrt_diag)
    C = np.zeros((d, d))
    if sp.issparse(Phi):
        # the operator's CSR row block (float32/64 data, int32/64 indices)
        csr_normalized_cross(op.rows, inv, C)
        return 0.5 * (C + C.T)
    step = max(1, (1 << 22) // max(d, 1))
    for start in range(0, n, step):
        stop = min(n, start + step)
        B = np.asarray(Phi[start:stop], dtype=np.float64) * inv[start:stop, None]
        C += B.T @ B
    return C


def bound_from_cross(C, n):
    """The bound of ``gram_norm_bound`` from Phi_n^T Phi_n (summed over row blocks)."""
    if C.size and not np.all(np.isfinite(C)):
        return float(n)  # a cross product that overflowed bounds nothing: the paper's n
    if C.size:
        from ...linalg._norms import top_eigenvalue

        lam = top_eigenvalue(C)  # LAPACK's subset driver, else the whole spectrum
    else:
        lam = float(n)
    if lam is None or not np.isfinite(lam):
        return float(n)
    # entries of C carry a float64 round-off far below 1e-6 n (trace(C) = n)
    return float(min(n, max(1.0, lam * (1.0 + 1e-6) + 1e-6 * n)))
