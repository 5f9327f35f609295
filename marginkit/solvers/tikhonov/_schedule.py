"""The decrement schedule of Proposition 1 (Beugnot et al. 2021) and its stopping rule.

Subproblem k of t is solved to Newton decrement eps_k = tol kappa^(k - t) / t, which
guarantees a decrement <= tol on the exact final subproblem (Proposition 7 with
c = 1/2, kappa = 1.4). ``NewtonDecrement`` owns the schedule (the state and the referee
read it from the run's rules through ``rule_schedule``); ``default_tol`` is the tol of
``tol=None``, scaled to the data.

The paper's reference is in the package docstring (``marginkit.solvers.tikhonov``).
"""
import math
import numbers

import numpy as np
import scipy.sparse as sp

from ..._referee import float64_block
from ..._registry import _register_builtin
from ..._validation import Param
from ...plugins import StoppingRule

#: kappa_c = -log(1 - c)/c at c = 1/2 (Proposition 1: 1.386..., rounded up to 1.4)
KAPPA = 1.4

#: the target Newton decrement of ``tol=None`` on data of unit scale (``default_tol``)
DEFAULT_TOL = 1e-8
#: the smallest factor ``default_tol`` applies to DEFAULT_TOL: a target of 1e-138, far
#: above the absolute part of the referee's rounding bound (about 1e-160 on unit data,
#: from the subnormal floor of the squared terms), so that an exactly zero model (y = 0,
#: X = 0) is still certified. Found by review: a floor of 1e-12 let a squared-loss fit of
#: y * 1e-100 end "converged" 8% away from the unit-scale fit scaled down (its target met
#: at 1e-20 absolute); it now matches it. Below s ~ 1e-130 the target stays 1e-138.
_MIN_TOL_FACTOR = 1e-130


def decrement_schedule(tol, t, kappa=KAPPA):
    """Targets of Proposition 1: eps_k = tol * kappa^(k - t) / t for k = 1..t.

    Solving subproblem k to Newton decrement <= eps_k guarantees a decrement <= tol on
    the exact final subproblem (Proposition 7, Eq. 62; kappa = 1.4 is c = 1/2).
    """
    k = np.arange(1, int(t) + 1, dtype=np.float64)
    return float(tol) * float(kappa) ** (k - t) / t


def rule_schedule(rules, tol):
    """``(tol, kappa)`` of the decrement schedule of a run with stopping rules ``rules``:
    those of its ``newton_decrement`` rule (the last one when several; its tol None means
    the solver's ``tol``), else the solver's ``tol`` and ``KAPPA``. The state and the
    referee (``run_targets``) read the schedule from the rules this one way."""
    kappa = KAPPA
    for rule in rules:
        if isinstance(rule, NewtonDecrement):
            if rule.params["tol"] is not None:
                tol = rule.params["tol"]
            kappa = rule.params["kappa"]
    return float(DEFAULT_TOL if tol is None else tol), float(kappa)


def _k_scale(block, kernel, loss, weights=None):
    """(the largest k(x, x), max |y|) over the rows of a block that count, those of a
    positive weight (``weights``: the block's, None for all rows; max |y| = 1 for the
    logistic loss). Found by review: a row of weight 0 set R or Y, and the zero model met
    the target it raised."""
    X = block.X
    if getattr(kernel, "precomputed", False):
        d = X.diagonal() if sp.issparse(X) else np.diagonal(np.asarray(X))
        d = np.asarray(d, dtype=np.float64)
    else:
        d = np.concatenate([np.asarray(kernel.diag(float64_block(X[i:i + 4096])),
                                       dtype=np.float64).ravel()
                            for i in range(0, X.shape[0], 4096)] or [np.zeros(0)])
    y = np.asarray(block.y, dtype=np.float64)
    if weights is not None:
        counts = np.asarray(weights) > 0
        d, y = d[counts], y[counts]
    top = float(np.max(d)) if d.size else 0.0
    Y = 1.0 if loss == "logistic" else float(np.max(np.abs(y), initial=0.0))
    return top, Y


def default_tol(executor, kernel, loss, lam, weights=None):
    """The tolerance of ``tol=None``: DEFAULT_TOL * min(1, max(s, 1e-130)) with
    s = W R Y / sqrt(lam), R = max_i sqrt(k(x_i, x_i)) over the rows of X (not lifted to 1
    with an intercept: found by review, with that lift X * 1e-10 and balanced labels
    ended "converged" at the zero model, the intercept's gradient 0 there; the run now
    certifies the features' fit or ends max_iter saying float64 cannot), Y = 1 for the
    logistic loss and
    max_i |y_i| for the squared loss, W the largest sample weight (1 unweighted; the
    weighted risk's gradient at 0 is at most W R Y: found by review, weights all 1e-12
    let the zero model meet 1e-8), R and Y over the rows of positive weight, over the
    blocks of ``executor`` (its rows: in memory
    one block, on a dask array the chunks where they are held, so that both runs take the
    same target; found by review: on the chunks None was an absolute 1e-8, and
    y * 1e-10 ended "converged" with the zero model).

    s bounds the Newton decrement at the start, theta = 0 (the gradient there is at most
    R Y, the Hessian at least lam I). An absolute target is met by theta = 0 itself on
    data scaled down far enough (X * 1e-10: decrement 5e-10 at the zero model, below
    1e-8; y * 1e-100 with the squared loss), so the target scales down with s there, to
    1e-138 (found by review: a floor at 1e-20 let y * 1e-100 end "converged" 8% away
    from the unit fit scaled down). Scaled up it stays DEFAULT_TOL: a target that grew
    with max |y| was met by models far from the solution (found by review: y = 1e9 plus
    an O(1) signal, fitted with an intercept by conjugate gradients, ended "converged"
    52% away from it against a target of 10; an outlier of 1e12 on a row of weight 0
    certified the zero model). There float64 may not certify 1e-8, and the run ends
    ``max_iter`` saying so; a ``tol`` given is the claim asked for.
    """
    if weights is None:
        parts = executor.map(_k_scale, kernel, loss)
    else:
        off = executor.offsets
        parts = executor.map_each(_k_scale, [(kernel, loss, weights[off[i]:off[i + 1]])
                                             for i in range(executor.n_chunks)])
    top = max(p[0] for p in parts)
    Y = max(p[1] for p in parts)
    R = math.sqrt(top) if math.isfinite(top) and top > 0 else 0.0
    W = 1.0 if weights is None else float(np.max(weights, initial=0.0))
    scale = W * R * Y / math.sqrt(float(lam))
    if not math.isfinite(scale):
        return DEFAULT_TOL
    return DEFAULT_TOL * min(1.0, max(scale, _MIN_TOL_FACTOR))


@_register_builtin("stopping", "newton_decrement")
class NewtonDecrement(StoppingRule):
    """Proposition 1: solve subproblem k to Newton decrement <= tol kappa^(k-t) / t.

    The solver's state reads the schedule from the rule's parameters (``rule_schedule``;
    it hands a subproblem over to the next one when it meets its target); the rule stops with
    ``"converged"`` once the last proximal step meets its target: the decrement of the
    exact final subproblem is then <= tol (Proposition 7, c = 1/2). ``tol=None`` uses the
    solver's ``tol``; ``kappa`` = -log(1 - c)/c (1.4 for c = 1/2).
    """

    requires = ("decrement", "decrement_targets", "prox_step", "n_prox", "tol")
    status = "converged"
    advice = "a larger tol (or lam) is reached sooner"
    param_table = {
        "tol": Param(None, types=numbers.Real, low=0, low_open=True, allow_none=True,
                     doc="target eps on the final Newton decrement"),
        "kappa": Param(KAPPA, types=numbers.Real, low=1.0, doc="geometric factor of the schedule"),
    }

    def check(self, state):
        if getattr(state, "failed", None):
            return "max_iter"  # the numbers broke down: no target can be met (see extra)
        if state.prox_step >= state.n_prox and \
                state.decrement <= state.decrement_targets[state.n_prox - 1]:
            return self.status
        return None
