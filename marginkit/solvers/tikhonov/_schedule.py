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
import warnings

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
    """The block's sum of w_i |l'_i| sqrt(k(x_i, x_i)), |l'_i| = |y_i| for the squared
    loss at the zero model and 1 for the logistic loss (its bound everywhere);
    ``weights``: the block's, None for all 1."""
    X = block.X
    if getattr(kernel, "precomputed", False):
        d = X.diagonal() if sp.issparse(X) else np.diagonal(np.asarray(X))
        d = np.asarray(d, dtype=np.float64)
    else:
        d = np.concatenate([np.asarray(kernel.diag(float64_block(X[i:i + 4096])),
                                       dtype=np.float64).ravel()
                            for i in range(0, X.shape[0], 4096)] or [np.zeros(0)])
    if loss == "logistic":
        v = np.ones(d.shape[0])
    else:
        v = np.abs(np.asarray(block.y, dtype=np.float64))
    if weights is not None:
        v = v * np.asarray(weights, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):  # not finite: DEFAULT_TOL
        return float(np.sum(v * np.sqrt(np.maximum(d, 0.0))))


def default_tol(executor, kernel, loss, lam, weights=None):
    """The tolerance of ``tol=None``: DEFAULT_TOL * min(1, max(s, 1e-130)), s = G /
    sqrt(lam), G = (1/n) sum_i w_i |l'_i| sqrt(k(x_i, x_i)) (|l'_i| = |y_i| for the squared
    loss at the zero model, 1 for the logistic loss) over the blocks of ``executor`` (in
    memory one block, on a dask array the chunks where they are held: both runs take the
    same target).

    G bounds the norm of the risk's gradient at the zero model over the features (the
    triangle inequality), and s the features' part of the Newton decrement there (the
    Hessian is at least lam I). An absolute target is met by theta = 0 itself on data
    scaled down far enough (X * 1e-10: decrement 5e-10 at the zero model, below 1e-8;
    y * 1e-100 with the squared loss), so the target scales down with s, to 1e-138
    (found by review: a floor at 1e-20 let y * 1e-100 end "converged" 8% away from the
    unit fit scaled down). The sum weighs each row by what it gives the gradient, not by
    the largest weight, norm and label over all rows, which one row of unit scale and
    weight 0 or 1e-300 (or label 0) beside data scaled by 1e-12 had kept at 1, the zero
    model meeting 1e-8; nor is the norm lifted to 1 for an intercept, which did so on
    X * 1e-10 with balanced labels (found by reviews). It is not the gradient itself,
    which cancels on symmetric data (XOR, rows repeated with both labels: G = 0) and
    took the target to 1e-138, below what float64 certifies: runs whose optimum is the
    zero model ended max_iter after 1000 iterations (found by review). The intercept is
    not penalized, so s does not cover its direction: the run fits it in its first
    steps. Scaled up, the target stays DEFAULT_TOL: one that grew with y was met far from
    the solution (y = 1e9 plus an O(1) signal, fitted with an intercept by conjugate
    gradients, ended "converged" 52% away against a target of 10). There float64 may
    not certify 1e-8, and the run ends ``max_iter`` saying so; a ``tol`` given is the
    claim asked for.
    """
    if weights is None:
        parts = executor.map(_k_scale, kernel, loss)
    else:
        off = executor.offsets
        parts = executor.map_each(_k_scale, [(kernel, loss, weights[off[i]:off[i + 1]])
                                             for i in range(executor.n_chunks)])
    with np.errstate(over="ignore", invalid="ignore"):
        scale = sum(parts) / executor.n_samples / math.sqrt(float(lam))
    if not math.isfinite(scale):
        return DEFAULT_TOL
    if 0.0 < scale < _MIN_TOL_FACTOR:
        # found by review: y * 1e-200 (squared loss) ended "converged" at the zero model,
        # the target of 1e-138 met before the first step (an absolute claim, true, but
        # not the fit of y scaled down); an exactly zero y or X (scale 0) is not warned
        warnings.warn(
            f"iterated_tikhonov: the data's scale (the gradient at the zero model over "
            f"sqrt(lam), {scale:.3g}) is below {_MIN_TOL_FACTOR:g}, so the default target "
            f"{DEFAULT_TOL * _MIN_TOL_FACTOR:g} (the smallest float64 certifies) may be met "
            "by the zero model, not the fit of this data scaled down; rescale y (or X), or "
            "pass tol", RuntimeWarning, stacklevel=2)
    return DEFAULT_TOL * min(1.0, max(scale, _MIN_TOL_FACTOR))


@_register_builtin("stopping", "newton_decrement")
class NewtonDecrement(StoppingRule):
    """Proposition 1: solve subproblem k to Newton decrement <= tol kappa^(k-t) / t.

    The solver's state reads the schedule from the rule's parameters (``rule_schedule``;
    it hands a subproblem over to the next one when it meets its target); the rule stops with
    ``"converged"`` once the last proximal step meets its target: the decrement of the
    exact final subproblem is then <= tol (Proposition 7, c = 1/2). A last step whose
    Newton iterations have stalled (``state.stalled``: float64's floor) is claimed too,
    and the referee confirms or refuses the claim from the data. ``tol=None`` uses the
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
        if state.prox_step >= state.n_prox and (
                state.decrement <= state.decrement_targets[state.n_prox - 1]
                or getattr(state, "stalled", False)):
            # a stalled last link is claimed too: the referee confirms it from the data
            # or refuses it, and the run ends with the reason
            return self.status
        return None
