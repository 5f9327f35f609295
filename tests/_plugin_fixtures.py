"""Objects loaded through real importlib.metadata.EntryPoint objects in test_registry."""
import numpy as np

from marginkit.plugins import Smoother, StoppingRule


class EntryPointSmoother(Smoother):
    """Entropy smoother written in plain numpy, as a third party would."""

    strong_convexity_norm = "l1"

    def argmin_simplex(self, g, mu, q=None):
        z = -np.asarray(g, dtype=float) / mu
        z -= z.max()
        e = np.exp(z)
        return e / e.sum()

    def value(self, p, q=None):
        p = np.asarray(p, dtype=float)
        nz = p > 0
        return float(np.sum(p[nz] * np.log(p[nz])) + np.log(p.size))


class NeverStop(StoppingRule):
    def check(self, state):
        return None


def broken():  # referenced by an entry point whose target does not exist
    raise RuntimeError("unreachable")
