"""The spectral filter of iterated Tikhonov for the squared loss (Beugnot et al. 2021,
Eq. 8 and appendix E.2): t proximal steps in closed form.

The paper's reference is in the package docstring (``marginkit.solvers.tikhonov``).
"""
import numpy as np
import scipy.linalg as sla


def iterated_tikhonov_filter(s, lam, t):
    """g_lam^t(s) = (1 - (lam / (s + lam))^t) / s (Eq. 8), stable near s = 0 (-> t / lam).

    Negative ``s`` (round-off in an eigendecomposition of a PSD matrix) is treated as 0.
    """
    s = np.maximum(np.asarray(s, dtype=np.float64), 0.0)
    lam = float(lam)
    # 1 - (lam/(s+lam))^t = -expm1(-t log1p(s/lam)); divide by s, with the limit t/lam
    num = -np.expm1(-t * np.log1p(s / lam))
    out = np.empty_like(s)
    small = s <= 1e-300
    out[small] = t / lam
    out[~small] = num[~small] / s[~small]
    return out


def spectral_filter_path(K, y, lam, t):
    """Iterated Tikhonov for the squared loss in closed form (appendix E.2).

    beta = 1/n U g_lam^t(D / n) U^T y with K = U D U^T; theta = sum_i beta_i Phi(x_i).

    Parameters
    ----------
    K : ndarray (n, n), the Gram matrix
    y : ndarray (n,)
    lam : float
    t : int

    Returns
    -------
    beta : ndarray (n,)
    """
    K = np.asarray(K, dtype=np.float64)
    n = K.shape[0]
    s, U = sla.eigh(K / n)
    return U @ (iterated_tikhonov_filter(s, lam, t) * (U.T @ np.asarray(y, float))) / n
