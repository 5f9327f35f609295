"""Which kernels are positive semi-definite by construction, for the referees.

A referee trusts a norm in the kernel's feature space (the perceptron family's
infeasibility certificate, the strong convexity of the kernel SVM dual) only for a kernel
that is positive semi-definite on the data: by construction for the classes below, by a
Cholesky factorization of the Gram matrix for any other kernel, up to ``PSD_MAX_N`` points.
"""
__all__ = ["PSD_MAX_N", "psd_kernel_types", "fresh_psd_kernel"]

#: the largest n for which a referee establishes that a kernel without a PSD construction
#: (a precomputed Gram matrix, a callable, a plug-in) is positive semi-definite on the
#: data: a float64 Cholesky factorization of the whole n x n Gram matrix (three n x n
#: float64 arrays, 400 MB at this size)
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
