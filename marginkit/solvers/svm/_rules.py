"""The stopping rules of the SVM family, and the targets the solvers aim their checks at.

* ``certified_points(fraction=0.0)``: more than ``fraction * n`` points certified
  (paper section 2.3), status ``"certified"``;
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


def gap_target(problem):
    """The largest projected-gradient gap at which a rule of the run fires (``liblinear``'s
    tol), or None: dcd's shrinking resets its active set at that gap, as LIBLINEAR does."""
    values = [t.value for t in triggers_on(problem, "projected_gradient_gap") if t.op == "<="]
    return max(values) if values else None
