"""What every solver of the perceptron / von Neumann family returns (Ramdas & Pena 2014).

``_FamilyState`` is the Python state around a driver (``VertexIteration`` or
``SmoothedIteration``): it hands the run loop the certificate of a "separable" claim
(alpha with G alpha > 0, Lemma 1) or an "infeasible" one (p in the simplex with a small
||p||_G, Gordan's theorem for RKHSs, sec. 5), both re-checked by the referee before the
run stops. ``_PerceptronFamily.finalize`` turns the driver's last state into the result
fields: status, alpha, p, the margin bounds of Lemma 3 recomputed by the referee, and
the model (``coef_``, or support rows and coefficients for other kernels).

The paper's reference is in the package docstring (``marginkit.solvers.perceptron``).
"""
import math
import numbers
import warnings

import numpy as np
import scipy.sparse as sp

from ..._executors import Executor
from ..._validation import Param
from ...certificates import (InfeasibilityCertificate, SeparatorCertificate,
                             predictor_fingerprint)
from ..._referee import plugin_map
from ...linalg._operator import FeatureOperator, make_operator
from ...plugins import Solver, SolverState
from ...stopping import DualCertificate

_EPS = Param(1e-6, types=numbers.Real, low=0, low_open=True, high=1, high_open=True,
             doc="tolerance on ||p||_G for an infeasibility certificate (dual_certificate "
                 "rule); below 1, since every p in the simplex has ||p||_G <= 1")


def _from_core(name):
    """A read-only attribute of the state that is the driver's attribute ``name``."""
    return property(lambda self: getattr(self.core, name),
                    doc=f"The driver's ``{name}`` (read by stopping rules).")


class _FamilyState(SolverState):
    """Python state around a driver; ``step()`` is one iteration of it."""

    def __init__(self, core, op, problem=None):
        self.core = core
        self.op = op
        self.problem = problem
        self.n_iter = 0
        self.elapsed = 0.0
        self._refuted = {}

    min_margin = _from_core("min_margin")
    dual_norm = _from_core("dual_norm")
    dual_tol = _from_core("dual_tol")
    alpha_norm = _from_core("alpha_norm")
    mu = _from_core("mu")

    def certificate(self, status):
        """The certificate of a "separable" / "infeasible" claim at the current iterate
        (re-checked by the run loop), or None to decline it for now: after a refuted claim,
        the next one waits until the measure has improved by 2x, so a claim float32
        round-off keeps suggesting is not recomputed every iteration."""
        core = self.core
        last = self._refuted.get(status)
        if status == "separable":
            if last is not None and float(core.min_margin) <= 2 * last:
                return None
            return self._certificate("separable", self._alpha())
        if status == "infeasible":
            if last is not None and float(core.dual_norm) >= last / 2:
                return None
            return self._certificate("infeasible", np.array(core.best_p_arr, dtype=np.float64))
        return None

    def _certificate(self, status, v):
        """The certificate of ``status`` for the vector ``v`` (alpha, or p), bound to the
        run's configuration (its threshold)."""
        pb, core = self.problem, self.core
        if status == "separable":
            return SeparatorCertificate(v, core.min_margin, pb.kernel, pb.classes_,
                                        config=pb.config, **self._separator(v))
        return InfeasibilityCertificate(v, float(core.dual_norm), float(core.dual_tol),
                                        pb.kernel, pb.classes_, config=pb.config)

    def _separator(self, alpha):
        """The model of alpha the result predicts with (``_model``; on dask chunks the
        driver's ``primal()``), as the certificate stores it: ``coef``, or
        ``support_coef`` with the fingerprint of the rows and coefficients."""
        if self.op is None:
            return {"coef": np.asarray(self.core.primal(), dtype=np.float64), "intercept": 0.0}
        model = _model(self.problem, self.op, alpha)
        if model.get("coef_") is not None:
            return {"coef": model["coef_"], "intercept": float(model.get("intercept_") or 0.0)}
        fcoef = (model.get("extra") or {}).get("feature_space_coef")
        if fcoef is not None:
            return {"coef": fcoef, "intercept": 0.0}
        return {"support_coef": model["support_coef_"], "intercept": 0.0,
                "predictor": predictor_fingerprint(model["support_"], model["support_coef_"])}

    def refuted(self, status, verdict):
        core = self.core
        self._refuted[status] = float(core.min_margin if status == "separable" else core.dual_norm)

    def _alpha(self):
        return np.array(self.core.alpha_arr, dtype=np.float64)

    def step(self):
        self.core.step()

    def snapshot(self):
        lower, upper = self.core.margin_bounds()
        return {"min_margin": float(self.core.min_margin), "dual_norm": float(self.core.dual_norm),
                "mu": float(self.core.mu), "margin_lower": float(lower),
                "margin_upper": float(upper)}


class _PerceptronFamily(Solver):
    """Common ``finalize`` of the family: status, alpha, p, certificate, bounds, model."""

    provides = ("min_margin", "dual_norm", "dual_tol", "alpha_norm", "mu")
    default_stop = ("separated",)
    default_max_iter = 10_000
    param_table = {"eps": _EPS}
    #: runs on the row blocks of any executor (dask arrays: the linear kernel)
    blocked = True
    _normalize = True
    #: the parameter that is the solver's own tolerance on ||p||_G (``dual_tol``)
    dual_tol_param = "eps"

    def claim_thresholds(self, rules):
        """What the run's claims are checked against: ``dual_tol``, the largest eps of its
        ``dual_certificate`` rules (a rule without eps: the solver's own tolerance), or the
        solver's tolerance when no such rule is configured."""
        own = float(self.params[self.dual_tol_param])
        eps = [own if r.params.get("eps") is None else float(r.params["eps"])
               for r in rules if isinstance(r, DualCertificate)]
        return {"dual_tol": max(eps) if eps else own}

    def _operator(self, problem):
        """The Gram operator of the driver's one block: in memory the problem's (any
        kernel); None on a dask array, whose chunks build their own ``FeatureOperator``
        (linear kernel)."""
        if isinstance(problem.X, Executor):
            return None
        return make_operator(problem, normalize=self._normalize)

    def finalize(self, problem, state, status):
        """Status, alpha, p, margin bounds and the model: ``_model`` in memory (``op``
        the problem's operator), else coef_ = the driver's ``primal()``."""
        core, op = state.core, state.op
        alpha = np.array(core.alpha_arr, dtype=np.float64)
        # an "infeasible" result reports its witness, the p its certificate holds (the
        # best p; the plain perceptron's last p stays uniform: the saved result was
        # refused on load, found by the run's own binding check)
        best = lambda: np.array(core.best_p_arr, dtype=np.float64)  # noqa: E731
        fields = family_fields(problem, status, core, alpha,
                               best() if status == "infeasible" else
                               np.array(core.p_arr, dtype=np.float64), best)
        if op is not None:
            fields.update(_model(problem, op, alpha))
        else:  # coef_ = sum_c X_c^T S_c alpha_c (normalized rows), no intercept
            fields.update(coef_=np.asarray(core.primal(), dtype=np.float64), intercept_=0.0)
        return fields


def family_fields(problem, status, core, alpha, dual_vector, best_p):
    """Result fields every solver of the family returns (in memory and on Dask chunks):
    status, alpha, p and the margin bounds. The certificate of a claim is the one the run
    loop re-checked before stopping (``_FamilyState.certificate``); the margin bounds are
    the referee's (``certificates.margin_bounds`` of alpha and the best p, recomputed in
    float64 with outward rounding), not the solver's running estimates (``history``)."""
    from ...certificates import NotPositiveSemidefiniteError, labels_pm, margin_bounds

    kernel = problem.kernel
    X, y = problem.referee_data(blocked=getattr(kernel, "feature_map", None) is not None)
    try:
        lower, upper = margin_bounds(X, labels_pm(y, problem.classes_), kernel, alpha, best_p(),
                                     memory_budget=getattr(
                                         getattr(problem, "config", None), "memory_budget",
                                         None))
    except NotPositiveSemidefiniteError as exc:
        # no claim was made (a claim's check would have raised): the run's result stands,
        # but a kernel that is not PSD on the data defines no margin
        warnings.warn(f"margin_bounds are (-inf, inf): {exc}", RuntimeWarning, stacklevel=2)
        lower, upper = -math.inf, math.inf
    return {
        "dual_coef_": alpha,
        "dual_vector": dual_vector,
        "margin_bounds": (float(lower), float(upper)),
        "certificate": None,
    }


def _model(problem, op, alpha):
    """coef_ for the linear kernel; support rows and coefficients for other kernels, and
    for a plug-in kernel with a feature map, the model in the map's space that predict
    evaluates (``extra["feature_space_coef"]``, w = sum_i alpha_i y_i phi_i / |phi_i|)."""
    X, kernel = problem.X, problem.kernel
    sd = np.asarray(op.sqrt_diag)
    # f(x) = sum_i alpha_i y_i K(x_i, x) / sqrt(K(x_i, x_i))
    coef = alpha * problem.y / sd
    w = None
    if isinstance(op, FeatureOperator) and (op.phi is X or plugin_map(kernel)):
        # the model in the map's space: X's columns (the linear kernel), or a plug-in's
        # map, which the run solved and the certificate checks (predict reads it too)
        w = np.asarray(op.primal(alpha) if op.normalize else op.primal(alpha / sd),
                       dtype=np.float64)
        if op.phi is X:
            return {"coef_": w, "intercept_": 0.0}
    if getattr(kernel, "precomputed", False):
        return {"support_": None, "support_coef_": coef}
    idx = np.flatnonzero(alpha != 0)
    sup = X[idx]
    if sp.issparse(sup):
        sup = sup.copy()
    else:
        sup = np.array(sup, copy=True)
    out = {"support_": sup, "support_coef_": coef[idx]}
    if w is not None:
        # a plug-in's map, not its kernel function, which may differ from it within the
        # map check's tolerance or not be comparable at all (found by review: margins of
        # 8e-7 proved through the map while predict missed 2 of 3 training points)
        out.update(intercept_=0.0, extra={"feature_space_coef": w})
    return out
