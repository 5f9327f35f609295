"""The stopping rules of the SVM family, and the targets the solvers aim their checks at.

* ``certified_points(fraction=0.0)``: more than ``fraction * n`` points certified
  (paper section 2.3), status ``"certified"``; ``"max_iter"`` when the state says no
  more points can be certified (``StallWatch``);
* ``liblinear(tol=0.1)``: LIBLINEAR's max-minus-min projected gradient over an epoch,
  status ``"converged"`` (paper section 4.1, for comparison);
* ``certify_target`` / ``gap_target``: the thresholds of a run's rules on
  ``n_certified`` and ``projected_gradient_gap``, read from their triggers.

References
----------
.. [1] "Data-Dependent Complexity of First-Order Methods for Support Vector Machines",
   arXiv:2512.03947 (2025), sections 2.3 and 4.1.
.. [2] C.-J. Hsieh, K.-W. Chang, C.-J. Lin, S. S. Keerthi, S. Sundararajan, "A Dual
   Coordinate Descent Method for Large-scale Linear SVM", ICML 2008 (LIBLINEAR's rule).
"""
import math
import numbers

import numpy as np

from ..._registry import _register_builtin
from ..._validation import Param
from ...plugins import StoppingRule, Trigger, triggers_on


def _certifiable(problem):
    """The points of a run that can be certified: all of them, or those of positive
    weight in a weighted run."""
    w = getattr(problem, "sample_weight", None)
    return problem.n_samples if w is None else int(np.count_nonzero(w > 0))


@_register_builtin("stopping", "certified_points")
class CertifiedPoints(StoppingRule):
    """Stop when more than ``fraction * n`` training points are certified (paper sec. 2.3).

    A point is certified when level - r_i > eps, level = min(gamma, 1/mu)
    (``certify_level``), with eps >= ||r - r*|| the solver's error bound; it is then
    correctly classified (margin > 1 - mu level >= 0) by the current and by the optimal
    classifier. ``fraction=0`` stops at the first certified point, as in the
    paper's experiments. Reads ``state.n_certified``; status ``"certified"``. In a
    weighted run n counts the points of positive weight (a point of weight 0 is never
    certified: weight 0 is the point's removal).
    """

    requires = ("n_certified",)
    status = "certified"
    param_table = {"fraction": Param(0.0, types=numbers.Real, low=0.0, high=1.0, high_open=True,
                                     doc="stop when more than fraction * n points are certified")}

    def threshold(self, state):
        """Points to exceed: ``fraction * n``."""
        return self.params["fraction"] * _certifiable(state.problem)

    def triggers(self, problem):
        return (Trigger("n_certified", ">", self.params["fraction"] * _certifiable(problem)),)

    def check(self, state):
        if getattr(state, "failed", None):
            return "max_iter"  # no more points can be certified (``StallWatch``, see extra)
        return self.status if state.n_certified > self.threshold(state) else None


@_register_builtin("stopping", "liblinear")
class Liblinear(StoppingRule):
    """LIBLINEAR's rule: max minus min projected gradient over an epoch <= ``tol``.

    The projected-gradient entries are evaluated at the intermediate iterates of the epoch
    (paper section 4.1), so the rule can fire with a poor classifier. Reads
    ``state.projected_gradient_gap`` (inf while a shrunk active set is being reset, as in
    LIBLINEAR); status ``"converged"``.
    """

    requires = ("projected_gradient_gap",)
    status = "converged"
    advice = "a larger tol is reached sooner"
    param_table = {"tol": Param(0.1, types=numbers.Real, low=0, low_open=True,
                                doc="threshold on max - min projected gradient (LIBLINEAR eps)")}

    def triggers(self, problem):
        return (Trigger("projected_gradient_gap", "<=", self.params["tol"]),)

    def check(self, state):
        return self.status if state.projected_gradient_gap <= self.params["tol"] else None


def certify_target(problem):
    """The fewest certified points at which a rule of the run fires (its ``n_certified``
    triggers: more than ``fraction * n`` for ``certified_points``), or None when no rule
    of the run states one. The states aim their cheap pre-checks at it."""
    values = [t.value for t in triggers_on(problem, "n_certified") if t.op == ">"]
    return min(values) if values else None


class StallWatch:
    """Whether a run's certified-points rule can still be expected to fire
    (``CertifiedPoints``).

    The run has stalled when its error bound eps is at most ``FRACTION`` times the
    smallest positive level min(gamma_i, 1/mu) and has not decreased by a relative
    ``PROGRESS`` over the last ``window`` iterations: at least ``WINDOW``, and at least
    ten times the iterations the solver's linear rate needs to divide the error by e
    (``horizon``: sqrt(kappa) for FISTA), so that an ill-conditioned run that is still
    converging, slowly or unevenly, is not taken for a stalled one. Every point not
    certified then has level_i - r_i <= eps, so its optimal r*_i >= level_i - 2 eps:
    within 2e-6 of its box level."""

    FRACTION = 1e-6
    PROGRESS = 1e-3
    WINDOW = 100

    def __init__(self, level, horizon=0.0):
        level = np.asarray(level, dtype=np.float64)
        pos = level[level > 0.0]
        self.floor = self.FRACTION * float(pos.min()) if pos.size else 0.0
        horizon = float(horizon)
        self.window = int(max(self.WINDOW, 10.0 * horizon)) if math.isfinite(horizon) \
            else math.inf
        self.best, self.best_at, self.k = np.inf, 0, 0

    def update(self, eps, steps=1):
        """Record the bound eps after ``steps`` more iterations; True once the run has
        stalled (eps itself at most the floor: the points not certified with eps are
        within eps of their level)."""
        self.k += steps
        if eps < self.best * (1.0 - self.PROGRESS):
            self.best, self.best_at = eps, self.k
        return eps <= self.floor and self.k - self.best_at >= self.window

    def postpone(self):
        """Look again only after another window (a check that did not confirm the
        stall)."""
        self.best_at = self.k


def stalled_reason(solver, eps, n_certified, n, window):
    """The ``extra["failure"]`` of a run whose certified-points rule is not expected to
    fire (``StallWatch``)."""
    return (f"{solver}: the error bound stopped decreasing at {eps:.3g} (not 0.1% lower "
            f"over {window} iterations) with {n - n_certified} of the {n} points not "
            f"certified ({n_certified} are): each has r_i within that bound of its box "
            "level min(C w_i, 1/mu), so its optimal r*_i is within twice the bound of the "
            "level: a margin violator of the optimal model, or within that distance of "
            "one. More iterations are not expected to certify them; the model is the last "
            "iterate. A kernel that separates the classes (kernel='rbf', or 'nystroem' for "
            "many rows) or a larger C changes that")


def gap_target(problem):
    """The largest projected-gradient gap at which a rule of the run fires (``liblinear``'s
    tol), or None: dcd's shrinking resets its active set at that gap, as LIBLINEAR does."""
    values = [t.value for t in triggers_on(problem, "projected_gradient_gap") if t.op == "<="]
    return max(values) if values else None
