"""Built-in smoother plug-ins ``entropy`` and ``l2`` (Ramdas & Pena 2014, secs. 4 and 6).

Each plug-in is a thin Python front over a ``cdef class`` of
``marginkit.smoothers._smoothers`` whose ``argmin`` runs without the GIL inside the
solvers' iterations; ``cython_smoother()`` returns that object.

References
----------
A. Ramdas and J. Peña, "Margins, Kernels and Non-linear Smoothed Perceptrons",
Proceedings of the 31st International Conference on Machine Learning (ICML 2014);
arXiv:1505.04123.
"""
import numpy as np

from .._registry import _register_builtin
from ..plugins import Smoother
from ._smoothers import EntropySmoother, L2Smoother, PythonSmoother

__all__ = ["Entropy", "L2", "cython_smoother"]


def _check_g_mu(g, mu):
    """g as a float64 vector and mu as a float, refused by name unless g is finite and mu
    positive with a finite inverse (found by review: a NaN or infinite g, or a positive mu
    of 1e-320, gave NaN or a point of sum 0, not of the simplex; a finite g / mu that
    overflows is fine: its vertex)."""
    g = np.asarray(g, dtype=np.float64).ravel()
    if not np.all(np.isfinite(g)):
        raise ValueError("g must be finite (no NaN or infinity)")
    try:
        mu = float(mu)
    except (TypeError, ValueError):
        raise TypeError(f"mu must be a positive number, got {type(mu).__name__}") from None
    with np.errstate(over="ignore", divide="ignore"):
        finite = mu > 0.0 and np.isfinite(np.float64(1.0) / mu)
    if not finite:
        raise ValueError(f"mu={mu!r} must be positive with a finite 1 / mu (the minimizer "
                         "does not change when g and mu are scaled by the same factor: scale "
                         "both up)")
    return g, mu


def _check_q(q, n):
    if q is None:
        return None
    q = np.asarray(q, dtype=np.float64).ravel()
    if q.shape[0] != n:
        raise ValueError(f"q has length {q.shape[0]}, expected {n}")
    if q.min() < 0 or abs(q.sum() - 1.0) > 1e-9:
        raise ValueError("q must lie in the simplex (q >= 0, sum(q) = 1)")
    return q


@_register_builtin("smoother", "entropy")
class Entropy(Smoother):
    """Entropy prox-function d(p) = sum_i p_i log p_i + log n (Ramdas & Pena 2014, sec. 4).

    1-strongly convex in the l1 norm, minimized at the center 1/n, with
    sup_simplex d = log n. The smoothed minimizer is a softmax:

        argmin_{p in simplex} <g, p> + mu d(p) = exp(-g/mu) / ||exp(-g/mu)||_1,

    computed with the log-sum-exp shift. ``q`` is accepted and ignored.

    References
    ----------
    A. Ramdas and J. Peña, "Margins, Kernels and Non-linear Smoothed Perceptrons",
    Proceedings of the 31st International Conference on Machine Learning (ICML 2014);
    arXiv:1505.04123.
    """

    strong_convexity_norm = "l1"

    def cython_smoother(self):
        """The nogil ``EntropySmoother`` used by the solvers."""
        return EntropySmoother()

    def argmin_simplex(self, g, mu, q=None):
        g, mu = _check_g_mu(g, mu)
        return EntropySmoother().argmin_simplex(g, mu, None)

    def value(self, p, q=None):
        return EntropySmoother().value(p, None)


@_register_builtin("smoother", "l2")
class L2(Smoother):
    """Squared distance to a center q: d_q(p) = 1/2 ||p - q||_2^2 (Ramdas & Pena 2014, sec. 6).

    1-strongly convex in the l2 norm. The smoothed minimizer

        argmin_{p in simplex} <g, p> + mu/2 ||p - q||^2 = proj_simplex(q - g/mu)

    is found by Newton's (Michelot's) iteration on the threshold t of
    p_i = max(y_i - t, 0) from the lower bound max(y) - 1: a handful of vectorized O(n)
    passes, no sorting.
    ``q=None`` means the uniform distribution 1/n.

    References
    ----------
    A. Ramdas and J. Peña, "Margins, Kernels and Non-linear Smoothed Perceptrons",
    Proceedings of the 31st International Conference on Machine Learning (ICML 2014);
    arXiv:1505.04123.
    """

    strong_convexity_norm = "l2"

    def cython_smoother(self):
        """The nogil ``L2Smoother`` used by the solvers."""
        return L2Smoother()

    def argmin_simplex(self, g, mu, q=None):
        g, mu = _check_g_mu(g, mu)
        with np.errstate(over="ignore"):
            scaled_finite = np.isfinite(np.max(np.abs(g), initial=0.0) / mu)
        if not scaled_finite:
            # proj(q - g / mu) does not change when g moves by a constant: from min(g) the
            # argmin's entry of q - g / mu is finite (review: an infinite entry gave a point
            # of sum 0, off the simplex)
            with np.errstate(over="ignore"):
                g = g - np.min(g)
        return L2Smoother().argmin_simplex(g, mu, _check_q(q, g.shape[0]))

    def value(self, p, q=None):
        p = np.asarray(p, dtype=np.float64).ravel()
        return L2Smoother().value(p, _check_q(q, p.shape[0]))


def cython_smoother(smoother):
    """A ``SimplexSmoother`` for any Smoother plug-in.

    Built-ins give their nogil implementation; a third-party plug-in that only has
    ``argmin_simplex`` is wrapped (called with the GIL each iteration).
    """
    make = getattr(smoother, "cython_smoother", None)
    if make is not None:
        return make()
    norm = 2 if getattr(smoother, "strong_convexity_norm", "l1") == "l2" else 1
    return PythonSmoother(smoother, norm)
