"""Which kernels are positive semi-definite by construction, for the referees.

A referee trusts a norm in the kernel's feature space (the perceptron family's
infeasibility certificate, the strong convexity of the kernel SVM dual) only for a kernel
that is positive semi-definite on the data: by construction for the classes below, by a
Cholesky factorization of the Gram matrix for any other kernel, up to ``PSD_MAX_N`` points.
"""
__all__ = ["PSD_MAX_N", "psd_kernel_types", "fresh_psd_kernel", "cholesky_psd_gap"]

#: the largest n for which a referee establishes that a kernel without a PSD construction
#: (a precomputed Gram matrix, a callable, a plug-in) is positive semi-definite on the
#: data: a float64 Cholesky factorization of the whole n x n Gram matrix (three to five
#: n x n float64 arrays, 400-700 MB at this size)
PSD_MAX_N = 4096


def psd_kernel_types():
    """The kernel classes that are positive semi-definite by construction on any data, with
    a ``careful_block`` whose entry bounds are proven (``kernels/builtin.py``):

    * ``rbf`` exp(-g ||a - b||^2) and ``laplacian`` exp(-g ||a - b||_1): Fourier transforms
      of positive measures (Bochner; Schoenberg for the l1 distance);
    * ``poly`` (g <a, b> + c0)^p with c0 >= 0 and an integer p >= 1 (its parameter table
      enforces both): a polynomial with non-negative coefficients of the PSD linear kernel
      (Schur product theorem);
    * ``spline``: a product over the coordinates of cosine series with non-negative weights.

    Exactly these classes (a subclass may override the kernel), so a referee needs no PSD
    check for them; a diagonal entry K(x, x) < 0 beyond its rounding still rejects.
    """
    from .builtin import LaplacianKernel, PolynomialKernel, RBFKernel, SplineKernel

    return (RBFKernel, PolynomialKernel, LaplacianKernel, SplineKernel)


def fresh_psd_kernel(kernel):
    """A fresh instance of the kernel's class, built from the parameters the kernel uses
    and validated by the class's parameter table, when that class is one of
    ``psd_kernel_types``; None for any other kernel.

    The classes are PSD by construction only within their tables (gamma > 0, coef0 >= 0,
    an integer degree >= 1, ...): ``ValueError`` for an instance whose parameters were
    changed behind the constructor (a doctored pickle, an attribute set on it), and a
    referee evaluates the fresh instance, never the state a certificate carries.
    """
    cls = type(kernel)
    if cls not in psd_kernel_types():
        return None
    try:
        values = {name: getattr(kernel, name) for name in cls.param_table}
        return cls(**values)
    except (AttributeError, TypeError, ValueError) as exc:
        raise ValueError(f"the kernel's parameters are not ones {cls.__name__} accepts "
                         f"({exc}): it is not positive semi-definite by construction") from None


def cholesky_psd_gap(S, eF, shifts, below=float("inf"), safety=1.0 + 1e-6):
    """The first delta, over the shifts c of ``shifts`` in turn, with lambda_min(S*) >=
    -delta for every symmetric S* within ``eF`` of the float64 matrix S in Frobenius norm
    (``eF`` bounds ||S* - S||_F, the entries' own errors), that is below ``below``; None
    when none is.

    When the float64 Cholesky factorization of fl(S + c I) runs to completion, R^T R =
    fl(S + c I) + dA with |dA| <= gamma_{n+1} |R^T| |R| (Higham, "Accuracy and Stability
    of Numerical Algorithms", Theorem 10.3), so ||dA||_2 <= gamma_{n+1} ||R||_F^2, the
    diagonal's shift is within u max|S_ii + c|, and

        lambda_min(S*) >= -(c + u max|S_ii + c| + gamma_{n+1} ||R||_F^2 + eF),

    the terms after c times ``safety`` (1 + 1e-6 covers the roundings of this sum; ||R||_F
    carries its own bound; the kernel SVM's referee keeps a factor 2). The
    perceptron family's referee (``certificates.gram_psd_shift``) and the kernel SVM's
    (``_psd_gap``) both prove positive semi-definiteness this way.
    """
    import numpy as np

    from .. import _referee as R

    n = S.shape[0]
    dmax = float(np.max(np.abs(np.diagonal(S)), initial=0.0))
    for c in shifts:
        A = S.copy()
        A[np.diag_indices(n)] += c
        try:
            L = np.linalg.cholesky(A)
        except np.linalg.LinAlgError:
            continue
        del A
        if not np.all(np.isfinite(L)):
            continue
        rF, erF = R.scaled_norm(L, overwrite=True)
        rF2 = (rF + erF) ** 2 * (1.0 + 4 * R.UNIT)
        delta = c * (1.0 + R.UNIT) + safety * (R.UNIT * (dmax + c) + R.gamma(n + 1) * rF2
                                               + eF)
        if delta < below:
            return delta
    return None
