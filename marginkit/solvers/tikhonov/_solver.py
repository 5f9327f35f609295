"""The ``iterated_tikhonov`` solver: parameters, the run's configuration and its result.

The paper's reference is in the package docstring (``marginkit.solvers.tikhonov``).
"""
import numbers

import numpy as np

from ..._registry import _register_builtin
from ..._validation import Param
from ...plugins import Solver
from ._representation import blocked_limits
from ._schedule import NewtonDecrement, default_tol
from ._state import _TikhonovState


def _check_t(value, name, owner):
    if isinstance(value, str):
        if value != "auto":
            raise ValueError(f"{owner}: {name}={value!r} is not valid; use an integer >= 1 or 'auto'")
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{owner}: {name}={value!r} must be an integer >= 1 or 'auto'")
    if value < 1:
        raise ValueError(f"{owner}: {name}={value} is out of range; use an integer >= 1 or 'auto'")
    return int(value)


@_register_builtin("solver", "iterated_tikhonov")
class IteratedTikhonov(Solver):
    """Iterated Tikhonov / proximal point estimator (Beugnot et al. 2021, Definition 1, Eq. 4).

    Parameters
    ----------
    loss : {"logistic", "squared"}
        Logistic loss log(1 + exp(-y theta(x))) with labels +-1 (classification) or
        squared loss (y - theta(x))^2 / 2 (regression, real y).
    t : int >= 1 or "auto"
        Number of proximal steps (t = 1 is Tikhonov). ``"auto"`` (end of section 3.2)
        holds out ``validation_fraction`` of the data and keeps taking proximal steps
        while the validation loss improves, up to ``t_max``; the model is the one fit on
        the remaining data, the chosen t is ``result.extra["t"]``.
    lam : float > 0 or None
        Regularization lambda of Eq. 4 (None: 1/n).
    tol : float or None
        Target eps of Proposition 1 on the Newton decrement of the final subproblem;
        subproblem k is solved to eps 1.4^(k - t) / t. None (the default): ``solve``
        sets it from the data before the run (``default_tol``: 1e-8 min(1, G / sqrt(lam)),
        G a bound on the risk's gradient at the zero model): 1e-8 on data of unit or
        larger scale, proportionally smaller on data scaled down, so that the zero model
        does not meet it by scale alone; the value used is in
        ``result.config.solver_params["tol"]`` and is the claim's (on a dask array too:
        computed from the chunks where they are held).
    t_max : int
        Largest t tried by ``t="auto"``. Its steps are solved to the schedule of t = t_max
        (the tightest it may need); the chosen t is claimed and certified on its own
        schedule, tol kappa^(k - t) / t, which that chain meets.
    validation_fraction : float in (0, 1)
        Validation split of ``t="auto"`` (drawn with ``random_state``).
    fit_intercept : bool
        The paper's estimator has no intercept (default False). True adds an unpenalized
        intercept b, theta(x) = <theta, Phi(x)> + b, excluded from the proximal term
        (feature-map kernels and Nystroem only).
    method : {"newton", "spectral_filter"}
        Damped Newton on each subproblem, or (squared loss) the closed form of Eq. 8.
    newton_solver : {"auto", "cholesky", "cg"}
        Newton systems by Cholesky (LAPACK) or by preconditioned conjugate gradients with
        Hessian-vector products (memory O(n m) for a dense (n, m) feature map). "auto"
        picks "cg" for feature maps with m >= 512 and n >= 4 m whose rows are dense, or
        CSR with sum_i nnz_i^2 >= 60 nnz (rows of 60 or more non-zeros on an average
        weighted by their length: there the Hessian's pair products cost more than a
        solve's Hessian-vector products).
    n_components : int or None
        Nystroem approximation with that many centres sampled uniformly
        (``random_state``): theta lives in the m-dimensional span, memory O(n m).
        ``solve(..., features=F)`` with a ``NystroemFeatures`` fitted on the same X, kernel
        and m runs on its centres and feature rows instead of drawing and mapping them
        (one map for the runs of a one-vs-rest fit).
    keep_path : bool
        Keep the iterate of every proximal step k = 1..t in ``result.extra["path"]``
        (shape (t, len(coef)), in the form used for prediction: ``coef_`` for linear
        models, ``extra["feature_space_coef"]`` for other feature maps, ``support_coef_``
        otherwise; intercepts in ``extra["path_intercept"]``).
        IT(k) for k < t is exactly row k - 1 (Definition 1), solved to a tighter
        decrement than a run with t = k would ask for.

    Notes
    -----
    Runs on any executor (``problem.executor``): in memory, and on the row chunks of a
    dask array for the linear kernel (integer t, no ``n_components``), with the same
    iterations; Gram kernels are refused there (``blocked_limits``).

    References
    ----------
    G. Beugnot, J. Mairal and A. Rudi, "Beyond Tikhonov: Faster Learning with
    Self-Concordant Losses via Iterative Regularization", Advances in Neural Information
    Processing Systems 34 (NeurIPS 2021).
    """

    provides = ("decrement", "decrement_targets", "prox_step", "n_prox", "tol", "objective",
                "empirical_risk")
    #: statuses of this solver that are claims, and the kind of certificate each needs (a
    #: saved result reporting one without it is refused: ``_result`` binds them)
    certified_statuses = {"converged": "newton_decrement"}
    default_stop = ("newton_decrement",)
    default_max_iter = 1000
    param_table = {
        "loss": Param("logistic", types=str, options=("logistic", "squared"), doc="loss function"),
        "t": Param(1, validator=_check_t, doc="number of proximal steps or 'auto'"),
        "lam": Param(None, types=numbers.Real, low=0, low_open=True, allow_none=True,
                     doc="regularization lambda (None: 1/n)"),
        "tol": Param(None, types=numbers.Real, low=1e-300, allow_none=True,
                     doc="target Newton decrement eps (None: set from the data's scale, "
                         "1e-8 at unit scale)"),
        "t_max": Param(20, types=numbers.Integral, low=1, doc="largest t for t='auto'"),
        "validation_fraction": Param(0.2, types=numbers.Real, low=0, high=1, low_open=True,
                                     high_open=True, doc="validation split for t='auto'"),
        "fit_intercept": Param(False, types=bool, doc="unpenalized intercept (not in the paper)"),
        "method": Param("newton", types=str, options=("newton", "spectral_filter"),
                        doc="Newton or closed-form spectral filter (squared loss)"),
        "newton_solver": Param("auto", types=str, options=("auto", "cholesky", "cg"),
                               doc="linear solver of the Newton systems"),
        "n_components": Param(None, types=numbers.Integral, low=1, allow_none=True,
                              doc="Nystroem centres (None: exact kernel)"),
        "keep_path": Param(False, types=bool,
                           doc="keep every proximal iterate in result.extra['path']"),
    }

    class _Task:
        """``task`` follows ``loss`` on instances; the class reads as the default
        (``loss="logistic"``: classification), so code inspecting the registered class
        sees a string."""

        def __get__(self, obj, cls=None):
            if obj is None:
                return "classification"
            return "regression" if obj.params["loss"] == "squared" else "classification"

    task = _Task()
    #: runs on any executor (``Problem.executor``) within ``blocked_refusal``'s limits
    blocked = True
    #: the weighted risk 1/n sum_i w_i loss_i (integer t, method="newton")
    sample_weight = True
    #: with ``n_components``, runs on the rows of a fitted ``NystroemFeatures``
    #: (``solve(..., features=F)``: one map shared by the runs of a one-vs-rest fit)
    takes_features = True

    def start(self, problem):
        return _TikhonovState(self, problem)

    def resolve_config(self, config, executor, kernel, rules, weights=None):
        """The run's configuration with ``tol=None`` replaced by ``default_tol`` of the
        data (the rows of ``executor``, validated: in memory or on the chunks; the sample
        weights, None when unweighted), so that the run, its certificate and
        ``Result.config`` carry the number; unchanged when tol is given (here or in a
        ``newton_decrement`` rule)."""
        if self.params["tol"] is not None or any(
                isinstance(r, NewtonDecrement) and r.params["tol"] is not None for r in rules):
            return config
        lam = self.params["lam"] if self.params["lam"] is not None \
            else 1.0 / executor.n_samples
        tol = default_tol(executor, kernel, self.params["loss"], lam, weights)
        return config.replace(solver_params={**config.solver_params, "tol": tol})

    def blocked_refusal(self, kernel):
        """Why this solver cannot run on row blocks held by workers (see
        ``blocked_limits``), or None."""
        return blocked_limits(self.params, kernel)

    def finalize(self, problem, state, status):
        mdl = state.model
        t_used = state.n_prox
        w, w_prev = state.w, state.w_prev
        state._record_last_prox_step()
        fields = {"task": self.task}
        if state.failed:
            # keep the last finite iterate (theta^0 = 0 at worst)
            w = np.where(np.isfinite(w), w, 0.0)
        model, extra = state.model_fields(w)
        fields.update(model)
        if fields.get("support_") is not None:
            fields["support_"] = fields["support_"].copy()  # the result's own rows
        # the subproblem the returned iterate belongs to (the last one unless stopped early)
        target = state.decrement_target
        # a certificate is a claim that holds: only when the last target was met
        fields["certificate"] = state.certificate(status)
        fields["history"] = {
            "prox_decrement": np.asarray(state.prox_decrement, dtype=np.float64),
            "prox_newton_iter": np.asarray(state.prox_newton_iter, dtype=np.int64),
            "prox_empirical_risk": np.asarray(state.prox_risk, dtype=np.float64),
        }
        if state.auto:
            fields["history"]["validation_loss"] = np.asarray(state.validation_loss)
        if state.failed:
            for key in ("coef_", "dual_coef_", "support_coef_"):
                if fields.get(key) is not None:
                    fields[key] = np.where(np.isfinite(fields[key]), fields[key], 0.0)
        fields["extra"] = {"t": int(t_used), "lam": state.lam, "loss": state.loss_name,
                           "failure": state.failed,
                           "decrement": state.decrement, "target": target,
                           "newton_solver": state.newton_solver, **extra}
        if state.train_index is not None:
            # the rows of X the last model trained on (t="auto" holds the others out), and
            # their number: a precomputed model reads those columns of K(X_new, X_train)
            fields["extra"]["train_index"] = state.train_index
            fields["extra"]["split_rows"] = state.split_rows
        if self.params["keep_path"]:
            steps = list(state.prox_coef[: t_used - 1]) + [w]
            fields["extra"]["path"] = np.array([state.prediction_coef(v) for v in steps])
            fields["extra"]["path_intercept"] = np.array(
                [float(v[mdl.p]) if mdl.fit_intercept else 0.0 for v in steps])
        return fields
