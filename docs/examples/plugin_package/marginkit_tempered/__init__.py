"""A tempered entropy smoother for marginkit's smoothed perceptron solvers.

The prox-function is T times the relative entropy to a centre q (uniform when q is None)

    d_q(p) = T * sum_i p_i log(p_i / q_i),        T >= 1,

which is T-strongly convex, hence 1-strongly convex, in the l1 norm on the simplex
(Pinsker's inequality), as the smoothed solvers of Ramdas & Pena 2014 (sec. 4) require. Its
smoothed minimizer has a closed form, a softmax at temperature T mu:

    argmin_{p in simplex} <g, p> + mu d_q(p) = q * exp(-g / (T mu)) / Z.

T = 1 is marginkit's built-in ``entropy`` smoother; a larger T smooths more.
"""
import numbers

import numpy as np

from marginkit.plugins import Param, Smoother

__all__ = ["TemperedEntropy"]
__version__ = "0.1.0"


class TemperedEntropy(Smoother):
    """T * KL(p || q) on the simplex (registered as ``tempered_entropy``)."""

    strong_convexity_norm = "l1"
    param_table = {
        "temperature": Param(2.0, types=numbers.Real, low=1.0,
                             doc="T >= 1 (1-strong convexity in the l1 norm needs T >= 1)"),
    }

    def argmin_simplex(self, g, mu, q=None):
        z = -np.asarray(g, dtype=np.float64).ravel() / (self.temperature * mu)
        if q is not None:
            z = z + np.log(np.asarray(q, dtype=np.float64).ravel())
        z -= z.max()  # log-sum-exp shift: exp never overflows
        e = np.exp(z)
        return e / e.sum()

    def value(self, p, q=None):
        p = np.asarray(p, dtype=np.float64).ravel()
        q = np.full(p.size, 1.0 / p.size) if q is None else np.asarray(q, dtype=np.float64).ravel()
        nz = p > 0
        return float(self.temperature * np.sum(p[nz] * np.log(p[nz] / q[nz])))
