"""The Euclidean projection onto {0 <= r_i <= gamma_i, y^T r = 0}, written once.

The KKT conditions give r = proj_[0, gamma_i](v - lam y) for the lam solving
phi(lam) = y^T proj_[0, gamma_i](v - lam y) = 0; phi is continuous, non-increasing and
piecewise linear (breakpoints y_i v_i and y_i (v_i - gamma_i)), with slope -n_free(lam).
Newton's method on phi inside a bracket [lo, hi] is exact once lam lies on the root's
linear piece; where the slope is 0 (no free coordinate) the step goes to the nearest
breakpoint, and a step leaving the bracket is replaced by bisection. Each step is one
O(n) pass (``_fast.phi_slope``); warm-started from the previous projection's multiplier
it takes a few steps (an exact breakpoint search in the sense of Brucker 1984, without
sorting).

``multiplier`` is the search; it sees the data only through two functions, so the same
steps run on one vector (``project_box_hyperplane``) and over the row blocks of an
executor (``fista_svm`` on several blocks or on Dask: one map per evaluation, two numbers
per block).

References
----------
P. Brucker, "An O(n) algorithm for quadratic knapsack problems", Operations Research
Letters 3(3), 163-166, 1984.
"""

import math

import numpy as np

from . import _fast as _f

# Newton steps at the most (each exact on its linear piece: a few suffice when warm)
_MAX_STEPS = 200


def multiplier(phi, breakpoint, lam, gamma, first=None):
    """The lam with phi(lam) = 0, from ``lam``. ``phi(lam)`` returns (phi, n_free),
    ``breakpoint(lam, upward)`` the nearest breakpoint strictly above (below) lam;
    ``gamma`` is the largest box bound (the scale of the stopping test); ``first``, when
    given, is (phi, n_free) at the starting ``lam``, computed by the caller. Where phi is
    constant and nonzero beyond every breakpoint (no feasible r) the last lam is
    returned."""
    lo, hi = -math.inf, math.inf
    for step in range(_MAX_STEPS):
        ph, nf = first if step == 0 and first is not None else phi(lam)
        if ph == 0.0:
            break
        if ph > 0.0:
            lo = lam
        else:
            hi = lam
        lam_new = lam + ph / nf if nf > 0 else breakpoint(lam, ph > 0.0)
        if not (lo < lam_new < hi):
            if math.isfinite(lo) and math.isfinite(hi):
                lam_new = 0.5 * (lo + hi)
            else:
                break  # phi constant and nonzero beyond every breakpoint: infeasible
        if abs(lam_new - lam) <= 1e-15 * (abs(lam) + gamma):
            lam = lam_new
            break
        lam = lam_new
    return lam


def project_box_hyperplane(v, y, box, out, lam0=0.0):
    """Euclidean projection of v onto {0 <= r_i <= gamma_i, y^T r = 0} (float64
    n-vectors; y in {-1, +1}^n, ``box`` the gamma_i >= 0: a weighted run's C w_i) into
    ``out``; returns the multiplier lam (warm start ``lam0``)."""
    lam = multiplier(lambda t: _f.phi_slope(v, y, box, t),
                     lambda t, up: _f.next_breakpoint(v, y, box, t, up),
                     float(lam0), float(box.max(initial=0.0)))
    np.clip(v - lam * y, 0.0, box, out=out)
    return lam


def project_blocks(ex, lam, gamma, first=None):
    """``multiplier`` over the row blocks of ``ex`` (each block holds its share of the
    point to project, ``v["fista"]["vproj"]``, and of the bounds, ``v["box"]``); the
    blocks' partial sums are added in block order. ``first``: the blocks' shares of
    (phi, n_free) at ``lam``, when the caller's pass computed them."""
    if first is not None:
        ph = 0.0
        for q in first:
            ph += q[0]
        first = (ph, sum(q[1] for q in first))

    def phi(t):
        parts = ex.map(_k_phi_slope, t)
        ph = 0.0
        for q in parts:
            ph += q[0]
        return ph, sum(q[1] for q in parts)

    def breakpoint(t, upward):
        near = ex.map(_k_next_breakpoint, t, upward)
        return min(near) if upward else max(near)

    return multiplier(phi, breakpoint, lam, gamma, first)


def _k_phi_slope(block, lam):
    """The block's share of phi(lam) and of the free coordinates."""
    return _f.phi_slope(block.v["fista"]["vproj"], block.y, block.v["box"], lam)


def _k_next_breakpoint(block, lam, upward):
    return _f.next_breakpoint(block.v["fista"]["vproj"], block.y, block.v["box"], lam, upward)
