"""``pegasos``: the primal sub-gradient method of Shalev-Shwartz et al., the baseline of
the paper's section 5.1 (no certificate; a fixed number of epochs).

One iteration is one epoch over the row blocks in order, each block's rows in a random
permutation (``_fast.pegasos_epoch``), w passed from block to block.

References
----------
.. [1] S. Shalev-Shwartz, Y. Singer, N. Srebro, "Pegasos: Primal Estimated sub-GrAdient
   SOlver for SVM", ICML 2007.
.. [2] "Data-Dependent Complexity of First-Order Methods for Support Vector Machines",
   arXiv:2512.03947 (2025), section 5.1.
"""
import numbers

import numpy as np

from ..._registry import _register_builtin
from ..._validation import Param
from ...plugins import Solver, SolverState
from . import _fast as _f
from ._base import _COMMON_PARAMS
from ._data import _feature_fields, _prepare, feature_map_refusal


def _k_pegasos_epoch(block, order, sa, st, lam, radius):
    """Pegasos steps over the block's rows in ``order`` (``_fast.pegasos_epoch``), w
    (the d-vector sa = s * a and the 6 scalars st) passed in and returned: an epoch
    passes it from block to block."""
    data = block.v["svm"]
    weight = block.v.get("weight")
    if weight is None:
        weight = block.v["weight"] = np.ones(data.n)
    _f.pegasos_epoch(data.rows, block.y, order, sa, st, data.s, data.c, data.xsq, data.M,
                     lam, radius, weight)
    return sa, st


def _k_set_weight(block, weight):
    block.v["weight"] = np.ascontiguousarray(weight, dtype=np.float64)


class _PegasosState(SolverState):
    """Pegasos over the row blocks of ``data`` (a ``_Blocked``).

    One epoch visits the blocks in their order 0, 1, ...; inside block c the rows follow
    ``rng.permutation(n_c)``, drawn block after block from the run's generator. The order
    is a function of (seed, blocking): with one block (in memory) it is
    ``rng.permutation(n)``; a dask array's chunks give another order, hence another
    (equally valid) run, the same for the same chunks."""

    def __init__(self, data, lam, rng, radius):
        self.data, self.lam, self.rng = data, lam, rng
        self.ex = data.executor
        self.radius = radius
        self.sa = np.zeros(data.d)  # s * a (``_fast.pegasos_epoch``)
        self.st = np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0])  # alpha, beta, P, A2, bias, k
        self.n_iter = 0
        self.objective = np.nan

    def w_bar(self):
        """w = alpha * (s * a - s * m beta), from sa = s * a (no division by s)."""
        data = self.data
        alpha, beta = self.st[0], self.st[1]
        return alpha * (self.sa - data.s * data.m * beta)

    def step(self):
        ex = self.ex
        for c in range(ex.n_chunks):
            order = self.rng.permutation(int(ex.sizes[c])).astype(np.int64)
            self.sa, self.st = ex.call(c, _k_pegasos_epoch, order, self.sa, self.st,
                                       self.lam, self.radius)

    def snapshot(self):
        return {"bias": float(self.st[4]), "steps": float(self.st[5])}


def _radius(lam, weights, n):
    """The radius of the ball that holds the minimizer: 1/sqrt(lam) (Pegasos, Theorem 1),
    sqrt(mean(w_i) / lam) with sample weights. At the optimum, strong duality gives
    lam ||w*||^2 = (1/n) sum_i alpha_i - (1/n) sum_i w_i hinge_i(w*) <= (1/n) sum_i w_i,
    the dual variables alpha_i lying in [0, w_i]; 1/sqrt(lam) would cut off the
    minimizer of a run whose weights average above 1 (weights c and lam are the
    unweighted run with lam / c, whose ball has radius sqrt(c / lam))."""
    radius = 1.0 / np.sqrt(lam)
    if weights is not None:
        radius *= np.sqrt(float(np.sum(weights, dtype=np.float64)) / n)
    return float(radius)


#: the largest first step |eta_1 w_i| ||z_i|| the kernel's representation holds: its
#: d-vector s * a reaches that over alpha, alpha >= 1e-100 (``_fast.pegasos_epoch``), and
#: ||s * a||^2 must stay below float64's largest number
#: epochs of a run that gives neither ``epochs`` nor ``max_iter`` (the paper's Table 1)
DEFAULT_EPOCHS = 200

_STEP_LIMIT = 2.0 ** 160


def _check_range(data, lam, radius, weights):
    """Refuse a run whose numbers leave float64's range (ValueError naming the fix): steps
    eta_1 w_i = w_i / lam too large for the kernel's representation of w, or coefficients
    s_j w_j (|w_j| <= radius) that overflow."""
    wmax = 1.0 if weights is None else float(np.max(weights, initial=0.0))
    zmax = float(data.xi_max) + float(np.sqrt(data.M))  # ||z_i|| <= ||s * x_i|| + ||s * m||
    with np.errstate(over="ignore"):
        step = wmax / lam * max(zmax, 1.0)
    if not step <= _STEP_LIMIT:
        what = f"lam = {lam:.3g}" if weights is None \
            else f"lam = {lam:.3g} with sample weights up to {wmax:.3g}"
        raise ValueError(
            f"pegasos: {what} makes the first steps eta w_i ||z_i|| = w_i ||z_i|| / lam up to "
            f"{step:.3g}, beyond the {_STEP_LIMIT:.3g} the iterate's float64 representation "
            "holds; raise lam" + ("" if weights is None else " or scale the sample weights down")
            + " (an estimator's C sets lam = 1/(C n): lower C)")
    smax = float(data.s.max(initial=0.0))
    with np.errstate(over="ignore"):
        coef_bound = max(smax, float(np.sqrt(data.M))) * radius
    if not coef_bound < 2.0 ** 1020:
        raise ValueError(
            f"pegasos: the scaled data (largest 1/sigma = {smax:.3g}) with lam = {lam:.3g} give "
            f"coefficients up to 1/sigma * {radius:.3g} that can overflow float64; rescale X "
            "(multiply it by a power of ten) or raise lam")


@_register_builtin("solver", "pegasos")
class Pegasos(Solver):
    """Pegasos (Shalev-Shwartz et al. 2007) as in arXiv:2512.03947, section 5.1.

    Minimizes lam/2 ||w||^2 + (1/n) sum_i w_i max(0, 1 - y_i (w . z_i + b)) (lam = 1/64 is
    the paper's misclassification penalty 64/n; the sample weights w_i are 1 for an
    unweighted run, and a weight scales its point's sub-gradient step, as C w_i scales
    the box of the dual solvers) with step 1/(lam k), projection of w on the
    ball of radius 1/sqrt(lam) (sqrt(mean(w_i) / lam) with weights: ``_radius``) after
    each step, and an unregularized bias b updated on
    margin violations (Pegasos paper, section 6). One iteration is one epoch over a random
    permutation from ``random_state`` (block by block on a dask array: see
    ``_PegasosState``); the run stops after ``epochs`` epochs (status ``"max_iter"``, its
    planned end): ``epochs=None`` (the default) runs ``max_iter`` epochs when the run
    gives one, else ``DEFAULT_EPOCHS`` (200, the paper's Table 1).

    References
    ----------
    .. [1] S. Shalev-Shwartz, Y. Singer, N. Srebro, "Pegasos: Primal Estimated
       sub-GrAdient SOlver for SVM", ICML 2007.
    .. [2] "Data-Dependent Complexity of First-Order Methods for Support Vector
       Machines", arXiv:2512.03947 (2025), section 5.1.
    """

    requires = {"kernel": ("feature_map",)}
    provides = ()
    @property
    def default_max_iter(self):
        """The run's cap without a max_iter: ``epochs`` when given (found by review:
        epochs=500 ran 200 epochs, the cap's, with no word), else ``DEFAULT_EPOCHS``."""
        epochs = self.params["epochs"]
        return DEFAULT_EPOCHS if epochs is None else int(epochs)

    #: what the unknown-parameter refusal says of a C (``_validation.check_params``)
    param_hints = {"C": "pegasos takes lam, not C: lam/2 ||w||^2 + (1/n) sum hinge is the "
                        "SVM of C = 1/(lam n), so pass lam = 1/(C n) for n training rows "
                        "(SVMClassifier(solver='pegasos', C=...) converts C itself)"}
    #: runs on any executor; the epoch order depends on the blocking (``_PegasosState``)
    blocked = True

    def blocked_refusal(self, kernel):
        """Why pegasos cannot run ``kernel`` on row chunks held by workers, or None."""
        return feature_map_refusal(kernel)
    #: the weighted hinge loss (1/n) sum_i w_i max(0, 1 - y_i f(x_i))
    sample_weight = True
    param_table = {
        "lam": Param(1.0 / 64.0, types=numbers.Real, low=0, low_open=True,
                     doc="regularization lambda (1/64 is C = 64/n)"),
        "epochs": Param(None, types=numbers.Integral, low=1, allow_none=True,
                        doc="number of epochs (None: the run's max_iter when given, "
                            f"else {DEFAULT_EPOCHS})"),
        "scale": _COMMON_PARAMS["scale"],
    }

    @property
    def default_stop(self):
        # epochs=None: the run's iteration cap (max_iter, else default_max_iter) is its
        # planned length, in memory and on dask alike
        epochs = self.params["epochs"]
        return (("max_iter", {"n": None if epochs is None else int(epochs)}),)

    def start(self, problem):
        data, identity = _prepare(problem, self.params["scale"])
        lam = float(self.params["lam"])
        weights = getattr(problem, "sample_weight", None)
        radius = _radius(lam, weights, data.n)
        _check_range(data, lam, radius, weights)
        if weights is not None:
            ex = data.executor
            ex.map_each(_k_set_weight, [(w,) for w in ex.split(weights)])
        state = _PegasosState(data, lam, problem.rng, radius)
        state.fit = (data, identity)
        return state

    def finalize(self, problem, state, status):
        data, identity = state.fit
        w_bar = state.w_bar()
        bias = float(state.st[4])
        fields = _feature_fields(data, identity, w_bar, bias)
        coef = fields["coef_"] if identity else fields["extra"]["feature_space_coef"]
        if not (np.all(np.isfinite(coef)) and np.isfinite(fields["intercept_"])):
            # not reached on the inputs ``_check_range`` lets through; never returned silently
            raise FloatingPointError(
                "pegasos: the model overflowed float64 (coef_ or intercept_ not finite); "
                "rescale X or raise lam")
        return fields
