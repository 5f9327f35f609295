"""Stopping-rule plug-ins.

A rule reads attributes of the solver's state (declared in ``requires`` and checked
against the solver's ``provides`` before a run) and returns a status to stop; it never
writes into the state. A rule whose test is a threshold on state fields declares it
(``triggers``). A rule keeps nothing of a run on itself (one instance may serve
concurrent runs), and a claim it
returns ("separable", "infeasible", ...) is re-checked by the run loop from the data
before the run stops on it (``marginkit.plugins``).
Rules specific to one family live beside it (``certified_points`` and ``liblinear``
with the SVM family, ``newton_decrement`` with iterated Tikhonov) and are imported here.
"""
import numbers
import time

from .._registry import _register_builtin
from .._validation import Param
from ..plugins import StoppingRule, Trigger

__all__ = ["Separated", "DualCertificate", "Tolerance", "MaxIter", "TimeLimit",
           "AUTO_DUAL_TOL", "DeadlineReached"]

#: the tolerance PerceptronClassifier's tol="auto" and the demo give the dual_certificate
#: rule they add to a solver's own rules (``marginkit._api.with_dual_certificate``)
AUTO_DUAL_TOL = 1e-3


@_register_builtin("stopping", "separated")
class Separated(StoppingRule):
    """Stop when G alpha > 0 (Ramdas & Pena 2014, Lemma 1): status ``"separable"``.

    Reads ``state.min_margin`` = min_i (G alpha)_i.
    """

    requires = ("min_margin",)
    status = "separable"
    advice = ("the classes may not be separable with this kernel (the dual_certificate "
              "rule of nvn, snkpvn and isnkpvn certifies that they are not)")

    def triggers(self, problem):
        return (Trigger("min_margin", ">", 0.0),)

    def check(self, state):
        return self.status if state.min_margin > 0 else None


@_register_builtin("stopping", "dual_certificate")
class DualCertificate(StoppingRule):
    """Stop when ||p||_G <= eps for a p in the simplex: status ``"infeasible"``.

    ``eps=None`` uses the solver's own tolerance (``state.dual_tol``: ``eps`` of
    ``isnkpvn``, ``delta`` of ``snkpvn``). Reads ``state.dual_norm``, and ``state.dual_tol``
    only when ``eps`` is None (a solver without a tolerance of its own provides
    ``dual_norm`` alone, and the rule then needs an eps).
    """

    #: with ``eps=None`` (the default); an instance with an eps requires ``dual_norm`` only
    requires = ("dual_norm", "dual_tol")
    status = "infeasible"
    advice = "a larger eps of dual_certificate is reached sooner"
    param_table = {"eps": Param(None, types=numbers.Real, low=0, low_open=True, high=1,
                                high_open=True, allow_none=True,
                                doc="threshold on ||p||_G (below 1: every p in the simplex "
                                    "has ||p||_G <= 1)")}

    def __init__(self, **params):
        super().__init__(**params)
        self.requires = type(self).requires if self.params["eps"] is None else ("dual_norm",)

    def threshold(self, state):
        """The eps of this rule for the run of ``state``."""
        eps = self.params["eps"]
        return state.dual_tol if eps is None else eps

    def triggers(self, problem):
        # with eps=None the threshold is the state's own (not known before the run)
        eps = self.params["eps"]
        return None if eps is None else (Trigger("dual_norm", "<=", eps),)

    def check(self, state):
        return self.status if state.dual_norm <= self.threshold(state) else None


@_register_builtin("stopping", "tolerance")
class Tolerance(StoppingRule):
    """Stop when ``state.<attribute>`` (default ``error``) <= tol: status ``"converged"``."""

    status = "converged"
    advice = "a larger tol is reached sooner"
    param_table = {
        "tol": Param(1e-6, types=numbers.Real, low=0, doc="threshold"),
        "attribute": Param("error", types=str, doc="state attribute compared with tol"),
    }

    @property
    def requires(self):
        return (self.params["attribute"],)

    def triggers(self, problem):
        return (Trigger(self.params["attribute"], "<=", self.params["tol"]),)

    def check(self, state):
        return self.status if getattr(state, self.params["attribute"]) <= self.params["tol"] else None


@_register_builtin("stopping", "max_iter")
class MaxIter(StoppingRule):
    """Stop after ``n`` iterations: status ``"max_iter"``. ``n=None``: the run's own
    iteration cap (``max_iter``) is its planned length, no warning at its end (the
    default rule of ``pegasos``, whose epochs are a fixed budget)."""

    status = "max_iter"
    param_table = {"n": Param(None, types=numbers.Integral, low=1, allow_none=True,
                              doc="iterations (None: the run's max_iter)")}

    def triggers(self, problem):
        n = self.params["n"]
        return () if n is None else (Trigger("n_iter", ">=", n),)

    def check(self, state):
        n = self.params["n"]
        return self.status if n is not None and state.n_iter >= n else None


@_register_builtin("stopping", "time_limit")
class TimeLimit(StoppingRule):
    """Stop once ``seconds`` of wall time have passed since the run began, its solver's
    start-up included (checked between iterations; a start-up reads ``problem.deadline``):
    ``"time_limit"``."""

    status = "time_limit"
    param_table = {"seconds": Param(Param.REQUIRED, types=numbers.Real, low=0, low_open=True,
                                    doc="wall-clock budget")}

    def check(self, state):
        return self.status if state.elapsed >= self.params["seconds"] else None


def deadline(rules, t0):
    """The ``time.perf_counter()`` time at which the ``time_limit`` rules among ``rules``
    end a run started at ``t0``, or None without one: the run's ``problem.deadline``, by
    which a solver's start-up (the step size of ``fista`` on an exact kernel) cuts short
    what would outlast it."""
    seconds = [rule.params["seconds"] for rule in rules if isinstance(rule, TimeLimit)]
    return t0 + min(seconds) if seconds else None


class DeadlineReached(Exception):
    """Raised by a solver's ``step()`` when the run's deadline (``problem.deadline``)
    passes in the middle of a step that cannot be cut short for a cheaper valid one (one
    product with an exact kernel's Gram matrix, computed block by block, is part of
    ``fista``'s iteration): the state is left at its last complete iterate, and the run
    loop ends the run there with status ``"time_limit"``, the step not counted. Only
    ``step()`` may raise it, and only once the deadline has passed (raised otherwise, it
    reaches the caller as the error it is)."""


def past(deadline):
    """Whether ``deadline`` (a run's ``problem.deadline``: a ``time.perf_counter()`` time,
    or None without a time limit) has passed: the one test of the solvers that cut their
    work short at it."""
    return deadline is not None and time.perf_counter() >= deadline
