"""Base classes of the four plug-in kinds: Solver, Smoother, Kernel, StoppingRule.

A plug-in declares its parameters in a table (``param_table``: name -> ``Param``),
which validates constructor arguments and lets ``marginkit.testing.check_plugin``
check the contract. Composition (``marginkit.solve``) checks what a solver needs
from the other plug-ins (``Solver.requires``) and what stopping rules need from a
solver's state (``StoppingRule.requires`` against ``Solver.provides``) before running.

The run loop (``marginkit._api``) is::

    state = solver.start(problem)
    while no rule fires and state.n_iter < max_iter:
        state.step()                  # one iteration, GIL released inside Cython
    fields = solver.finalize(problem, state, status)

Stopping rules are checked *before* each step (iteration 0 included), as in the
papers' algorithm boxes ("if G alpha_k > 0, halt").
"""
from ._validation import Param, check_params

__all__ = ["Plugin", "Solver", "SolverState", "Smoother", "Kernel", "StoppingRule", "Param"]


class Plugin:
    """Common behaviour: a declarative parameter table and ``get_params``."""

    kind = None
    name = None
    #: name -> Param; the constructor accepts exactly these keywords.
    param_table = {}

    def __init__(self, **params):
        # the owner's name is only needed in error messages: passed as the plug-in itself
        self.params = check_params(self.param_table, params, owner=self)

    def _owner(self):
        return f"{self.kind or 'plug-in'} {self.name or type(self).__name__!r}"

    def get_params(self):
        return dict(self.params)

    def __getattr__(self, item):
        # parameters are readable as attributes (rule.fraction, kernel.gamma)
        params = self.__dict__.get("params")
        if params is not None and item in params:
            return params[item]
        raise AttributeError(item)

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({args})"

    def __getstate__(self):
        return self.__dict__

    def __setstate__(self, state):
        self.__dict__.update(state)


class SolverState:
    """Mutable state of one run. Subclasses (often Cython cdef classes) implement ``step``.

    Attributes every state has: ``n_iter`` (steps taken). Anything listed in the solver's
    ``provides`` must be an attribute (read by stopping rules and verbose output).

    Optional: ``step_batch(rules, limit)`` takes up to ``limit`` steps in one call when
    only ``rules`` would run between them (``solve`` uses it without callback and verbose
    output). It stops after the first step on which a rule could fire and returns the
    ``snapshot`` values of its steps but the last (dict of lists), or None without taking
    a step when it cannot evaluate the rules itself.
    """

    n_iter = 0

    def step(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def snapshot(self):
        """Per-iteration numbers for ``Result.history`` (dict of floats)."""
        return {}


class Solver(Plugin):
    """A solver plug-in.

    Class attributes
    ----------------
    requires : dict
        ``{"smoother": ("argmin_simplex",), "kernel": ("feature_map",)}``: attribute
        names the solver needs on the other plug-ins. Composition fails with a message
        naming the missing piece and the compatible registered choices.
    provides : tuple of str
        State attributes stopping rules may read (``min_margin``, ``dual_norm``, ...).
    default_stop : tuple
        Stopping specs used when ``stop=None``.
    default_smoother : str or None
        Smoother used when the solver needs one and ``smoother=None``.
    default_max_iter : int
    task : "classification" or "regression"
    """

    kind = "solver"
    requires = {}
    provides = ()
    default_stop = ()
    default_smoother = None
    default_max_iter = 10_000
    task = "classification"

    def start(self, problem):  # pragma: no cover - abstract
        """Return a ``SolverState`` for ``problem`` (a ``marginkit._api.Problem``)."""
        raise NotImplementedError

    def finalize(self, problem, state, status):  # pragma: no cover - abstract
        """Return a dict of ``Result`` fields (coef_, dual_coef_, certificate, ...)."""
        raise NotImplementedError


class Smoother(Plugin):
    """A prox-function d(p) on the simplex, used to smooth min_{p in simplex} <g, p>.

    Solvers that need the closed-form smoothed minimizer require ``argmin_simplex``.
    """

    kind = "smoother"
    #: norm in which d is 1-strongly convex ("l1" or "l2")
    strong_convexity_norm = "l1"

    def argmin_simplex(self, g, mu, q=None):  # pragma: no cover - abstract
        """argmin over the simplex of <g, p> + mu d_q(p)."""
        raise NotImplementedError

    def value(self, p, q=None):  # pragma: no cover - abstract
        """d_q(p)."""
        raise NotImplementedError


class Kernel(Plugin):
    """A positive semi-definite kernel.

    ``__call__(A, B)`` returns the Gram block K(A, B) as a dense float array.
    Kernels with an explicit finite feature map (``linear``, approximations) set
    ``feature_map`` so that K(A, B) = Phi(A) Phi(B)^T and solvers can work in
    feature space without forming the n x n Gram.
    """

    kind = "kernel"
    #: the Gram matrix is given by the user (X is the (n, n) Gram)
    precomputed = False

    def __call__(self, A, B=None):  # pragma: no cover - abstract
        raise NotImplementedError

    def diag(self, A):
        """K(x_i, x_i) for each row of A (default: through 1 x 1 blocks)."""
        import numpy as np

        return np.array([self(A[i : i + 1], A[i : i + 1])[0, 0] for i in range(A.shape[0])])


class StoppingRule(Plugin):
    """A stopping rule. ``check(state)`` returns a status string to stop, or None."""

    kind = "stopping"
    #: state attributes needed (checked against the solver's ``provides``)
    requires = ()
    #: status the rule reports when it fires
    status = "converged"

    def reset(self, problem, state):
        """Called once before the first check of a run."""

    def check(self, state):  # pragma: no cover - abstract
        raise NotImplementedError
