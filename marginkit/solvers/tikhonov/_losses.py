"""The losses of iterated Tikhonov: logistic (labels +-1) and squared (regression).

Three evaluations, for three purposes: the Cython passes of the solver
(``_fast``: value, l' and l'' in one pass), a plain numpy one (weighted risks,
the independent recomputation of certificates) and the referee's, with a proven bound on
the rounding error of l' and l'' (``_loss_derivatives_bounded``).

The paper's reference is in the package docstring (``marginkit.solvers.tikhonov``).
"""
import numpy as np

from . import _fast


class _Logistic:
    name = "logistic"
    derivatives = staticmethod(_fast.logistic_derivatives)
    loss_sum = staticmethod(_fast.logistic_loss_sum)


class _Squared:
    name = "squared"
    derivatives = staticmethod(_fast.squared_derivatives)
    loss_sum = staticmethod(_fast.squared_loss_sum)


_LOSSES = {"logistic": _Logistic, "squared": _Squared}


def _loss_numpy(loss, z, y):
    """(mean loss, g, h) in plain numpy: the independent recomputation of certificates."""
    if loss == "logistic":
        from scipy.special import expit

        m = y * z
        val = np.logaddexp(0.0, -m)
        s = expit(-m)
        return val, -y * s, s * (1.0 - s)
    r = z - y
    return 0.5 * r * r, r, np.ones_like(z)


def _loss_derivatives_bounded(loss, z, ez, y):
    """(g, h, bounds e_g >= |g - l'(z*)|, e_h >= |h - l''(z*)|) for every z* within ez of
    z: the logistic loss through expit (assumed accurate to 4 u relative, as
    scipy.special.expit is in practice), |l''| <= 1/4, |l'''| <= 1/(6 sqrt 3); the
    squared loss exactly (h = 1)."""
    from ..._referee import ETA, UNIT

    if loss == "logistic":
        from scipy.special import expit

        m = y * z
        sneg, spos = expit(-m), expit(m)
        g = -y * sneg
        h = sneg * spos
        eg = 0.25 * ez + 4 * UNIT * np.abs(g) + ETA
        eh = 0.0963 * ez + 12 * UNIT * h + ETA
        return g, h, eg, eh
    g = z - y
    return g, np.ones_like(z), ez + UNIT * np.abs(g) + ETA, np.zeros_like(z)
