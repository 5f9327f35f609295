"""The certified-points certificate of the SVM family on an exact kernel, and its referee.

Row i of H~ is y_i (phi(x_i), 1) for a kernel K(a, b) = <phi(a), phi(b)>: the SVM dual of
docs/svm.md carries over with the Gram matrix K = K(X, X) in place of Z Z^T,

* ``fista`` and ``dcd`` (formulation "hsvm", intercept regularized):
  Q = Y (K + 1 1^T) Y + mu I on the box [0, gamma]^n, theta_i(r) = y_i ((K u)_i + t_bar),
  u = y * r, t_bar = y^T r;
* ``fista_svm`` (formulation "svm"): Q = Y K Y + mu I on {0 <= r <= gamma, y^T r = 0},
  theta_i(r) = y_i ((K u)_i + t) for the stored intercept t (any value gives a valid bound:
  t y lies in the normal cone of the hyperplane).

A point with level_i - r_i > eps and theta_i > 1 - mu level_i (level_i = min(gamma_i,
1/mu)) is classified correctly by the current classifier and by the optimal one, eps =
||p(r)|| / mu bounding ||r - r*|| (p the projected gradient of the perturbed dual) as long
as Q is mu-strongly convex, i.e. K is positive semi-definite on the data. The derivation of
the referee's rounding bound is docs/svm.md, section 6, "Exact kernels".
"""
import math

import numpy as np
import scipy.sparse as sp

from ... import _referee as R
from ...certificates import (Certificate, Verdict, certificate_type, kernel_mismatch, labels_pm,
                            predictor_fingerprint, stored_r_mask)
from ..._validation import check_sample_weight
from ...plugins import referee_block
from ...kernels._psd import PSD_MAX_N, cholesky_psd_gap, fresh_psd_kernel
from ._thresholds import certify_level, claim_shortfall, rows_mismatch, run_thresholds, \
    stored_mismatch, stored_thresholds
from ...utils._memory import in_small_pages

__all__ = ["KernelCertifiedPointsCertificate", "PSD_MAX_N"]

#: Gram row blocks of at most this many entries (the temporaries of ``careful_block`` are
#: a few arrays of this size)
BLOCK_ENTRIES = 1 << 22
#: factor on the first-order rounding bounds (covers the second-order terms and the
#: rounding of the bounds' own evaluation)
_SAFETY = 2.0
U = R.UNIT
ETA = R.ETA


def _psd_by_construction(kernel):
    """``kernels._psd.fresh_psd_kernel``: a fresh instance of a kernel PSD by construction
    (the recomputation runs on it), None for any other kernel; parameters out of the
    class's table are a rejection."""
    try:
        return fresh_psd_kernel(kernel)
    except ValueError as exc:
        raise _Reject(str(exc)) from None


def predictor_of(X, ypm, r, precomputed):
    """The fingerprint of the predictor of r on (X, y) (``predictor_fingerprint``): the
    rows of X where r_i > 0 and their u_i = y_i r_i; for a precomputed Gram matrix no rows
    and u itself (what the solvers store as ``support_`` and ``support_coef_``)."""
    u = ypm * r
    if precomputed:
        return predictor_fingerprint(None, u)
    sup = np.flatnonzero(r > 0.0)
    return predictor_fingerprint(X[sup], u[sup])


class _Reject(Exception):
    """A rejection found deep in the recomputation (the reason is the message)."""


class _Lasting(_Reject):
    """A rejection that no iterate of the run changes: the kernel on X (not PSD, or not
    shown to be; entries that are not finite; a kernel that cannot be evaluated), given
    the run's mu. Its verdict is ``lasting`` (the solvers end the run on it)."""


@certificate_type
class KernelCertifiedPointsCertificate(Certificate):
    """Points certified correctly classified by the current and the optimal kernel SVM.

    ``value`` is the solver's error bound eps >= ||r - r*|| at the returned r (for
    information); ``mask`` marks the points with level_i - r_i > eps, level_i =
    min(gamma_i, 1/mu) (``certify_level``). ``check(X, y)`` is the referee: it
    recomputes the claim from X, y, r and the kernel alone, in float64 over blocks of Gram
    rows (bounded memory; never the whole n x n matrix for a kernel that is PSD by
    construction), with the kernel's ``careful_block`` (entries with proven error bounds;
    for ``precomputed`` X is the Gram matrix and its entries are the problem) and a proven
    bound on the rounding of the recomputation (docs/svm.md, section 6, "Exact kernels"):

    * u = y * r, f = K u (each entry's error bound from the kernel's entry bounds and the
      row sums of |K| r), the intercept (t = y^T r, an exactly rounded sum, for H-SVM; the
      stored multiplier for the classical SVM, any finite value of which gives a valid
      bound), the margins theta_i = y_i (f_i + t);
    * the projected gradient p(r) of the perturbed dual and eps_v = ||p(r)|| / mu', which
      bounds ||r - r*|| for *any* feasible r when Q is mu'-strongly convex, plus the
      rounding bound of its recomputation (and, for the classical SVM, a term for the
      residual of y^T r = 0);
    * K positive semi-definite on the data: by construction for ``rbf``, ``poly``,
      ``laplacian`` and ``spline`` (mu' = mu); for a precomputed Gram matrix, a callable or
      another plug-in kernel, from a float64 Cholesky factorization of the symmetrized
      Gram matrix plus c I (n <= ``PSD_MAX_N``), which proves lambda_min(K) >= -delta
      with delta < mu, and then mu' = mu - delta;
    * r is in the box, the mask is non-empty (more than ``fraction * n`` points for the
      claim ``"certified"``), every certified point has level_i - r_i > eps_v + rounding
      and theta_i > 1 - mu level_i beyond rounding, and for H-SVM the stored intercept is
      y^T r and the stored classifier's margin y_i ((K u)_i + intercept) is positive
      beyond rounding;
    * the predictor a result keeps (``support_`` = the rows of X where r_i > 0,
      ``support_coef_`` = their u_i; for ``precomputed`` no rows and u itself) is the one
      of r on X and y: its fingerprint (``predictor_fingerprint``), recomputed from X, y
      and r, is the stored ``predictor``. ``load_result`` compares the same fingerprint
      with the loaded ``support_`` and ``support_coef_``, so a file whose predictor was
      edited is refused, and one whose ``predictor`` was edited with it fails here.

    The thresholds come from the run's configuration ``config`` (``run_thresholds``:
    gamma = ``C`` or 64/n, mu = ``mu`` or n/128, the formulation of the run's solver and the
    ``certified_points`` fraction), never from numbers the certificate stores about itself;
    a stored gamma, mu, formulation or kernel that differs from the configuration's is a
    rejection. A certificate built without a configuration (user code) takes them from its
    constructor arguments. The kernel acts on X as given (the run's ``scale`` does not
    apply to exact kernels).

    Per-point boxes (a weighted run: gamma_i = C w_i): the weights are data, like y, and
    are passed to ``check(X, y, sample_weight=w)``; the referee forms the box from the
    configuration's C and those weights. A certificate whose stored gamma is a vector, or
    whose configuration records a weighted run (a ``weighted`` field), is rejected without
    weights; a stored box that is not C w is rejected. A point with w_i = 0 has the box
    [0, 0] and is never certified.

    Dask arrays are refused (the Gram rows of row chunks are not implemented).

    Parameters
    ----------
    value : float
        The solver's error bound (for information).
    mask : bool array (n,)
        The certified points.
    r : float array (n,)
        The dual variables.
    gamma : float or float array (n,)
        The box bound (per point for a weighted run).
    mu : float
        The perturbation.
    formulation : {"hsvm", "svm"}
        "hsvm" for ``fista`` and ``dcd``, "svm" for ``fista_svm``.
    intercept : float
        t_bar = y^T r ("hsvm") or the multiplier of y^T r = 0 ("svm").
    kernel : Kernel
        The exact kernel the run used.
    classes : array of two labels, optional
        ``classes[1]`` is the label +1.
    config : Config or dict, optional
        The run's configuration (the source of the thresholds).
    claim : str, optional
        "certified" when the certificate backs that status.
    predictor : str, optional
        ``predictor_fingerprint(support_, support_coef_)`` of the result's predictor
        (the solvers set it; without it the check covers r and the claim only, and
        ``load_result`` refuses a result that predicts with it).

    References
    ----------
    .. [1] "Data-Dependent Complexity of First-Order Methods for Support Vector
       Machines", arXiv:2512.03947 (2025): the certified stop (sections 2-4).
    .. [2] N. J. Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., SIAM,
       2002: the rounding model (sections 2.2, 3.1), Cholesky's backward error (Theorem 10.3).
    """

    kind = "certified_points"
    #: the check computes Gram rows from the whole of X (no row-block passes)
    blocked = False

    def __init__(self, value, mask, r, gamma, mu, formulation, intercept, kernel,
                 classes=None, config=None, claim=None, predictor=None):
        self.value = float(value)
        self.mask = np.asarray(mask, dtype=bool)
        self.r = np.asarray(r, dtype=np.float64)
        g = np.asarray(gamma, dtype=np.float64)
        self.gamma = float(g) if g.ndim == 0 else g
        self.mu = float(mu)
        self.formulation = formulation
        self.intercept = float(intercept)
        self.kernel = kernel
        self.classes = classes
        #: the run's configuration (the source of the thresholds), None for user code
        self.config = config
        #: "certified" when the certificate backs that status, None otherwise
        self.claim = claim
        #: the fingerprint of the predictor of r (``predictor_fingerprint``), or None
        if predictor is not None and not (isinstance(predictor, str) and len(predictor) == 64):
            raise ValueError("predictor must be the 64-character hex string of "
                             "predictor_fingerprint, or None")
        self.predictor = predictor

    def thresholds(self, n, sample_weight=None):
        """The claim's scalar thresholds for n training points and the run's validated
        ``sample_weight``: ``run_thresholds`` of the configuration, or the constructor's
        values without one (gamma None when the stored box is a vector)."""
        if self.config is not None:
            return run_thresholds(self.config, n, sample_weight)
        g = self.gamma if np.ndim(self.gamma) == 0 else None
        g, mu, form = stored_thresholds(g, self.mu, self.formulation)
        return {"gamma": g, "mu": mu, "level": None if g is None else certify_level(g, mu),
                "scale": None, "formulation": form, "fraction": 0.0}

    def verify(self, X, y, sample_weight=None):
        """True when the claim holds on (X, y) (and the run's weights):
        ``bool(self.check(X, y, sample_weight))``."""
        return bool(self.check(X, y, sample_weight=sample_weight))

    @in_small_pages
    def check(self, X, y, sample_weight=None):
        """Recompute the claim from X, y (and the run's ``sample_weight``) and the kernel;
        return a ``Verdict``."""
        try:
            return self._check(X, y, sample_weight)
        except _Reject as exc:
            return Verdict.reject(self.kind, str(exc), lasting=isinstance(exc, _Lasting))

    # ------------------------------------------------------------------ the referee
    def _check(self, X, y, sample_weight):
        from ...certificates import _dask, check_referee_width

        check_referee_width(X, self)  # X's width against the run's memory_budget
        kind = self.kind
        if _dask(X) is not None:
            raise _Reject("exact-kernel certificates do not read dask arrays yet: check on "
                          "X computed in memory (X.compute())")
        X = _as_matrix(X)
        kernel = self.kernel
        if kernel is None or getattr(kernel, "feature_map", None) is not None:
            raise _Reject(f"the kernel {kernel!r} has an explicit feature map (or none): its "
                          "certificate is CertifiedPointsCertificate, not this one")
        precomputed = bool(getattr(kernel, "precomputed", False))
        n = X.shape[0]
        if precomputed and X.shape[1] != n:
            raise _Reject(f"kernel='precomputed' needs the square Gram matrix as X, got "
                          f"shape {X.shape}")
        other = rows_mismatch(self.r, n, precomputed=getattr(kernel, "precomputed", False))
        if other is not None:
            raise _Reject(other)
        if sample_weight is not None:
            try:
                sample_weight = check_sample_weight(sample_weight, n)
            except (TypeError, ValueError) as exc:
                raise _Reject(str(exc)) from None
        elif self.config is not None and (np.ndim(self.gamma) > 0 or
                                          _config_weighted(self.config)):
            # first: the thresholds without the weights would report their consequence
            raise _Reject("the run was weighted (per-point boxes gamma_i = C w_i): pass its "
                          "sample_weight to check/verify")
        try:
            th = self.thresholds(n, sample_weight)
        except (TypeError, ValueError) as exc:
            raise _Reject(f"the run's configuration does not define the claim: {exc}") from None
        mu, form = th["mu"], th["formulation"]
        if self.config is not None:
            stored = (([("gamma", self.gamma)] if np.ndim(self.gamma) == 0 else [])
                      + [("mu", self.mu), ("formulation", self.formulation)])
            other = stored_mismatch(stored, th, sample_weight)
            if other is not None:
                raise _Reject(other)
        if form not in ("hsvm", "svm"):
            raise _Reject(f"formulation={form!r} is not 'hsvm' or 'svm'")
        if not (math.isfinite(mu) and mu > 0.0):
            raise _Reject(f"mu = {mu!r} is not a positive finite number")
        other = kernel_mismatch(kernel, self.config)
        if other is not None:
            raise _Reject(other)
        # labels outside the run's classes raise (labels_pm's ValueError), as in every
        # certificate's check (a strict verify)
        ypm = labels_pm(y, self.classes)
        try:
            r, mask = stored_r_mask(self.r, self.mask)
        except ValueError as exc:
            raise _Reject(str(exc)) from None
        if ypm.shape != (n,) or r.shape != (n,) or mask.shape != (n,):
            raise _Reject(f"r, mask and y must have one entry per row of X ({n}); got "
                          f"{r.shape}, {mask.shape} and {ypm.shape}")
        box = self._box(th, n, sample_weight)
        if not (np.all(np.isfinite(r)) and np.all(r >= 0.0) and np.all(r <= box)):
            raise _Reject("r is not in the box [0, gamma]")
        if self.predictor is not None and \
                self.predictor != predictor_of(X, ypm, r, precomputed):
            raise _Reject("the stored predictor (support_, support_coef_) is not the one "
                          "of r on X and y")
        n_cert = int(np.count_nonzero(mask))
        if n_cert == 0:
            raise _Reject("no point is certified")
        if self.claim == "certified":
            other = claim_shortfall(n_cert, th["fraction"], n, sample_weight)
            if other is not None:
                raise _Reject(other)
        t_stored = self.intercept
        if not math.isfinite(t_stored):
            raise _Reject("the intercept is not finite: the classical SVM's bound needs a "
                          "finite multiplier t (any finite value is valid)")
        res = margins_and_bound(X, ypm, r, box, mu, form, t_stored, kernel)
        numbers = dict(value=res.eps_v, rounding=res.rho)
        # the stored H-SVM intercept is y^T r as a float64 sum computes it, in any order
        # (found by review: a relative 1e-6 of sum r let it move by 0.95 at C = 1e4 and
        # change 194 of 600 predictions); the margins use the recomputed y^T r
        if form == "hsvm" and not abs(t_stored - res.t) <= R.gamma(n + 8) * res.r1 + 2 * res.et:
            raise _Reject("the stored intercept is not y^T r")
        level_lo = np.minimum(box, (1.0 / mu) * (1.0 - 2 * U))
        gaps = (level_lo[mask] - r[mask]) * (1.0 - U)
        threshold = float(gaps.min())
        bound = (res.eps_v + res.rho) * (1.0 + 2 * U)
        margin = threshold - bound
        numbers.update(threshold=threshold, margin=margin)
        if not margin > 0.0:
            return Verdict.reject(kind, "a certified point has level - r_i <= eps_v + rounding",
                                  **numbers)
        theta, eth = res.theta[mask], res.eth[mask]
        floor = (1.0 - mu * level_lo[mask]) + 2 * U * (1.0 + mu * level_lo[mask])
        if not np.all(theta - eth * (1.0 + 2 * U) - U * np.abs(theta) > floor):
            return Verdict.reject(kind, "a certified point has theta_i <= 1 - mu level beyond "
                                        "rounding", **numbers)
        # the stored classifier (K u + intercept, both formulations): its margins on the
        # certified points as predict evaluates it (the kernel's own evaluation's error,
        # ``ev``; the classical SVM's theta is this classifier's margin, whose floor test
        # above counts only the referee's rounding: found by review)
        ydec = ypm[mask] * (res.f[mask] + t_stored)
        ed = res.ef[mask] + res.ev[mask] + 2 * U * (np.abs(ydec) + abs(t_stored)) + ETA
        if not np.all(ydec * (1.0 - U) > ed):
            return Verdict.reject(kind, "the stored classifier misclassifies a certified "
                                        "point (beyond rounding)", **numbers)
        return Verdict(True, kind, **numbers)

    def holds_model(self):
        """Whether the certificate holds the model the result predicts with (the
        fingerprint of ``support_`` and ``support_coef_``; files of format 3 and before do
        not)."""
        return self.predictor is not None

    def predictor_mismatch(self, model, fields):
        """None when ``model`` (``_result.predicting_model``: what ``decision_function``
        evaluates) is the kernel expansion this certificate checks, with
        ``extra["support_indices"]`` the points where r > 0, else why not
        (``load_result``)."""
        if model is None:
            return None  # no model predicts: a certificate kept on its own
        kind, value = model
        if kind != "support":
            return ("the result predicts with r.coef_ (or a feature-space model), its "
                    "certificate checks the kernel expansion r.support_, r.support_coef_")
        if self.predictor is None:
            return ("its certificate holds no fingerprint of the predictor it checks "
                    "(r.certificate.fields.predictor)")
        support, support_coef = value
        if predictor_fingerprint(support, support_coef) != self.predictor:
            return "r.support_ and r.support_coef_ are not the predictor its certificate checks"
        support_indices = (fields.get("extra") or {}).get("support_indices")
        if support_indices is not None and not np.array_equal(
                np.asarray(support_indices), np.flatnonzero(self.r > 0.0)):
            return "r.extra['support_indices'] are not the points where its certificate's r > 0"
        return None

    def _box(self, th, n, sample_weight):
        """The box gamma_i of the run: the configuration's gamma times the validated
        weights (or the stored box for a certificate without a configuration)."""
        stored = np.asarray(self.gamma, dtype=np.float64)
        if sample_weight is None:  # an unweighted run's (``_check`` refused the others)
            if stored.ndim > 0:
                if stored.shape != (n,):
                    raise _Reject(f"gamma must be a float or have one entry per row of X ({n})")
                box = stored
            else:
                box = np.full(n, th["gamma"] if th["gamma"] is not None else float(stored))
        else:
            w = sample_weight  # validated by _check (check_sample_weight)
            scalar = th["gamma"]
            if scalar is None:
                raise _Reject("sample_weight needs the run's configuration (the C that the "
                              "weights scale); this certificate has none and a per-point box")
            box = scalar * w
            if stored.ndim > 0:
                if stored.shape != (n,) or not np.allclose(stored, box, rtol=1e-12, atol=0.0):
                    raise _Reject("the certificate's per-point box is not C * sample_weight of "
                                  "the weights given")
            elif not np.all(box == stored):
                raise _Reject("the certificate's box gamma is not C * sample_weight of the "
                              "weights given (a certificate of an unweighted run)")
        if not (np.all(np.isfinite(box)) and np.all(box >= 0.0) and np.any(box > 0.0)):
            raise _Reject("the box gamma must be finite, >= 0 and not all zero")
        return box


def _config_weighted(config):
    """Whether the run's configuration records a weighted run (a ``weighted`` field of a
    configuration that has one; False otherwise)."""
    if config is None:
        return False
    if isinstance(config, dict):
        return bool(config.get("weighted", False))
    return bool(getattr(config, "weighted", False))


def _as_matrix(X):
    """X validated (dense or canonical CSR): input that is not a finite numeric matrix
    raises ``check_X``'s TypeError or ValueError naming X, as the other certificates'
    checks do (a verdict is about data that can be read; it was a rejection here)."""
    from ..._validation import check_X

    return check_X(X)


# ------------------------------------------------------------------ the recomputation
class Recomputed:
    """What ``margins_and_bound`` returns: the recomputed quantities and their bounds.

    Attributes
    ----------
    f, ef : the products (K u)_i and bounds on |f_i - (K u)_i| (K the exact kernel)
    t, et : the intercept used in theta and a bound on its rounding; r1 >= sum(r)
    theta, eth : the margins y_i (f_i + t) and bounds on their error
    p, ep : the computed projected gradient and bounds on |p_i - p_i(exact)|
    eps_v, rho : ||p|| / mu' and a bound on (the exact ||p(r)|| / mu') - eps_v, the
        residual term of y^T r = 0 included for the classical SVM
    delta : the proven lower bound -delta on lambda_min(K) (0 for PSD kernels); mu' = mu - delta
    ev : a bound on how much further the kernel's own evaluation of K u (the one predict
        makes: ``Kernel.evaluation_slack``) may be from the exact K u than ef
    """

    __slots__ = ("f", "ef", "t", "et", "r1", "theta", "eth", "p", "ep", "eps_v", "rho",
                 "delta", "ev")

    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)


def _gram_rows(X, kernel, lo, hi, cols=None):
    """Rows lo:hi of K(X, X) in float64 and a bound on each entry's error (None: exact, the
    entries of a precomputed Gram matrix define the problem); ``cols`` (sorted indices):
    the columns K(X[lo:hi], X[cols]) only."""
    if getattr(kernel, "precomputed", False):
        K = X[lo:hi] if cols is None else X[lo:hi][:, cols]
        return np.asarray(K.toarray() if sp.issparse(K) else K, dtype=np.float64), None
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        # non-finite entries: rejected by the caller
        K, E = referee_block(kernel, X[lo:hi], X if cols is None else X[cols])
    return np.asarray(K, dtype=np.float64), np.asarray(E, dtype=np.float64)


def _check_diagonal(diag, ediag):
    if np.any(diag + ediag < 0.0):
        rows = np.flatnonzero(diag + ediag < 0.0)[:10].tolist()
        raise _Lasting(f"the kernel has negative diagonal entries K(x, x) < 0 at row(s) {rows}: "
                       "it is not positive semi-definite on this data")


def _finite_rows(K, E, refusal=_Reject):
    """``refusal`` (``_Lasting`` for the whole Gram matrix, which no iterate changes;
    ``_Reject`` for the support's columns, which depend on r) when K or E is not finite."""
    if not np.all(np.isfinite(K)) or (E is not None and not np.all(np.isfinite(E))):
        raise refusal("the kernel's Gram entries (or their error bounds) are not finite in "
                      "float64: X overflows the kernel (rescale X or the kernel's gamma) or "
                      "holds NaN/inf")


def margins_and_bound(X, ypm, r, box, mu, form, t_stored, kernel):
    """The referee's recomputation (docs/svm.md, section 6, "Exact kernels"): a
    ``Recomputed``. Raises ``_Reject`` when the kernel is not finite, not PSD on the data
    beyond rounding, or (classical SVM) r is off y^T r = 0 with no coordinate to absorb it.
    """
    n = X.shape[0]
    u = ypm * r                     # exact (a sign change)
    absu = np.abs(u)
    g_n = R.gamma(n + 2)
    fresh = _psd_by_construction(kernel)
    if fresh is not None:
        f, A, B, diag, ediag = _products_blocked(X, fresh, u, absu)
        delta = 0.0
    else:
        f, A, B, diag, ediag, delta = _products_full(X, kernel, u, absu, mu)
    _check_diagonal(diag, ediag)
    # |f~_i - (K u)_i| <= gamma_n sum_j |K~_ij| |u_j| + sum_j E_ij |u_j| + 2n eta; A and B
    # are themselves float64 sums of non-negative terms (relative error gamma_n)
    ef = _SAFETY * (g_n * A + B) * (1.0 + g_n) + 4 * n * ETA
    # predict's evaluation: within E + tau (K + E) + floor per entry (evaluation_slack)
    # (on X itself: predict may be given any rows, and a slack given per row or column
    # counts with its largest entry; no copy of the support's rows for it)
    tau, floor = (0.0, 0.0) if getattr(kernel, "precomputed", False) or not np.any(r) else \
        getattr(kernel, "evaluation_slack", lambda A_, B_: (0.0, 0.0))(X, X)
    tau, floor = float(np.max(tau)), float(np.max(floor))  # (NaN propagates)
    ev = _SAFETY * (tau * (A + B) + floor * float(np.sum(absu))) * (1.0 + g_n)
    r1 = float(np.sum(r)) * (1.0 + g_n)
    if form == "hsvm":
        t = math.fsum(u.tolist())   # correctly rounded
        et = U * abs(t)
    else:
        t, et = t_stored, 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        s = f + t
        theta = ypm * s
        eth = ef + et + 2 * U * (np.abs(theta) + abs(t)) + ETA
        mur = mu * r
        G = theta + mur - 1.0
        eg = eth + R.gamma(4) * (np.abs(theta) + mur + 1.0) + 3 * ETA
    # p: G projected on -N(r) per coordinate; a point with the box [0, 0] (weight 0) is
    # fixed (its normal cone is the whole line): p_i = 0
    p = np.where(r <= 0.0, np.minimum(G, 0.0), np.where(r >= box, np.maximum(G, 0.0), G))
    p[box <= 0.0] = 0.0
    if not (np.all(np.isfinite(p)) and np.all(np.isfinite(eg))):
        raise _Reject("the projected gradient is not finite in float64: rescale X, C or mu")
    mu_eff = (mu - delta) * (1.0 - 2 * U)
    if not mu_eff > 0.0:
        raise _Lasting("cannot establish that the kernel is PSD on this data: lambda_min(K) "
                       f">= -{delta:.3g} is all the Cholesky test proves, and mu = {mu:.3g}")
    N, eN = R.scaled_norm(p)
    NE, eNE = R.scaled_norm(eg)
    eps_v = N / mu_eff
    rho = ((eN + NE + eNE) / mu_eff + 4 * U * eps_v) * (1.0 + 4 * U)
    if form == "svm":
        # r lies on y^T r = 0 only up to |y^T r| <= dres; spread over the k free coordinates
        # with room > dres, a feasible r~ with r's active set is within dres / sqrt(k) of r,
        # and ||r - r*|| <= ||r - r~|| (1 + ||Q|| / mu') + ||p(r)|| / mu',
        # ||Q|| <= mu + lambda_max(K) <= mu + trace(K) + n delta
        b = math.fsum(u.tolist())
        dres = abs(b) * (1.0 + 2 * U)
        if dres > 0.0:
            room = np.minimum(r, box - r)
            k = int(np.count_nonzero(room > dres))
            if k == 0:
                raise _Reject(f"r is not on y^T r = 0 (|y^T r| <= {dres:.3g}) and no free "
                              "coordinate can absorb the residual")
            trace = float(np.sum(diag + ediag)) * (1.0 + g_n) + n * delta
            qnorm = (mu + trace) * (1.0 + 2 * U)
            rho += (1.0 + qnorm / mu_eff) * dres / math.sqrt(k) * (1.0 + 4 * U)
    if not (math.isfinite(eps_v) and math.isfinite(rho)):
        raise _Reject("the error bound is not finite in float64: rescale X, C or mu")
    return Recomputed(f=f, ef=ef, t=t, et=et, r1=r1, theta=theta, eth=eth, p=p, ep=eg,
                      eps_v=eps_v, rho=rho, delta=delta, ev=ev)


def _products_blocked(X, kernel, u, absu):
    """f = K u, A = |K| |u|, B = E |u| and the diagonal (with its bound) over blocks of
    Gram rows: at most ``BLOCK_ENTRIES`` entries per block (a kernel PSD by construction).

    Row block lo:hi is evaluated on the columns of the support (u_j != 0, the only ones
    the products read) and its own (the diagonal): every row of X is evaluated, so a row
    that is not finite under the kernel is still rejected."""
    n = X.shape[0]
    sup = np.flatnonzero(u)
    # rows per block: step (|support| + step) <= BLOCK_ENTRIES
    m = float(sup.size)
    step = max(1, min(n, int((math.sqrt(m * m + 4.0 * BLOCK_ENTRIES) - m) / 2.0)))
    f, A, B = np.empty(n), np.empty(n), np.zeros(n)
    diag, ediag = np.empty(n), np.zeros(n)
    products = getattr(kernel, "careful_products", None)
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        cols = np.union1d(sup, np.arange(lo, hi))
        own = np.searchsorted(cols, np.arange(lo, hi))
        if cols.size == n:
            cols = None
        if products is not None:
            _products_of_block(X, products, u, lo, hi, cols, own, f, A, B, diag, ediag)
            continue
        # the columns read (the support's and the block's own) and the blocks themselves
        # (their size follows the support's) depend on r: these refusals are not lasting
        # (a block of every column at one support is a block of some columns at another:
        # found by review)
        try:
            K, E = _gram_rows(X, kernel, lo, hi, cols)
        except (TypeError, ValueError, NotImplementedError) as exc:
            raise _Reject(f"the kernel cannot be evaluated on X: {exc}") from None
        width = n if cols is None else cols.size
        if K.shape != (hi - lo, width):
            raise _Reject(f"the kernel returned Gram rows of shape {K.shape} for "
                          f"{hi - lo} x {width}")
        _finite_rows(K, E)
        uc, ac = (u, absu) if cols is None else (u[cols], absu[cols])
        f[lo:hi] = K @ uc
        diag[lo:hi] = K[np.arange(hi - lo), own]
        # the built-in kernels' careful_block returns new arrays: |K| in place
        np.abs(K, out=K)
        A[lo:hi] = K @ ac
        if E is not None:
            B[lo:hi] = E @ ac
            ediag[lo:hi] = E[np.arange(hi - lo), own]
    return f, A, B, diag, ediag


def _products_of_block(X, products, u, lo, hi, cols, own, f, A, B, diag, ediag):
    """Rows lo:hi of f, A, B and the diagonal from the kernel's ``careful_products`` (the
    products of its ``careful_block`` entries without their n_A x n_B bound array)."""
    uc = u if cols is None else u[cols]
    try:
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            # non-finite results: rejected below
            out = products(X[lo:hi], X if cols is None else X[cols], uc, own)
    except (TypeError, ValueError) as exc:
        raise _Reject(f"the kernel cannot be evaluated on X: {exc}") from None
    out = [np.asarray(v, dtype=np.float64) for v in out]
    if any(v.shape != (hi - lo,) for v in out):
        raise _Reject(f"the kernel's careful products have shapes {[v.shape for v in out]} "
                      f"for {hi - lo} rows")
    # the products f, a, b read u and the columns of r's support (and of blocks whose
    # size follows it): their overflow, or an entry that is not finite among the columns
    # read, may depend on r (both found by review); the diagonal and its bound do not
    if not all(np.all(np.isfinite(v)) for v in out):
        lasting = not all(np.all(np.isfinite(v)) for v in out[3:])
        raise (_Lasting if lasting else _Reject)(
            "the kernel's Gram entries (or their error bounds) are not finite in float64: X "
            "overflows the kernel (rescale X or the kernel's gamma) or holds NaN/inf")
    f[lo:hi], A[lo:hi], B[lo:hi], diag[lo:hi], ediag[lo:hi] = out


def _products_full(X, kernel, u, absu, mu):
    """The products of ``_products_blocked`` for a kernel that is not PSD by construction,
    on the symmetrized Gram matrix S = (K + K^T) / 2 (the asymmetric part counted in the
    entry bounds, so the margins bound both K u and S u), and the proven delta with
    lambda_min(S_exact) >= -delta from a float64 Cholesky factorization of S + c I."""
    n = X.shape[0]
    if n > PSD_MAX_N:
        raise _Lasting(f"cannot establish that the kernel is PSD on this data: the referee "
                       f"checks a precomputed, callable or plug-in kernel by a Cholesky "
                       f"factorization of the whole Gram matrix, for n <= {PSD_MAX_N} points "
                       f"(here n = {n}); use a built-in kernel (rbf, poly, laplacian, spline)")
    K = np.empty((n, n))
    E = np.zeros((n, n))
    step = max(1, BLOCK_ENTRIES // max(n, 1))
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        try:
            Kb, Eb = _gram_rows(X, kernel, lo, hi)
        except (TypeError, ValueError, NotImplementedError) as exc:
            raise _Lasting(f"the kernel cannot be evaluated on X: {exc}") from None
        if Kb.shape != (hi - lo, n) or (Eb is not None and Eb.shape != Kb.shape):
            raise _Lasting(f"the kernel returned Gram rows of shape {Kb.shape} for "
                           f"{hi - lo} x {n}")
        _finite_rows(Kb, Eb, _Lasting)
        K[lo:hi] = Kb
        if Eb is not None:
            E[lo:hi] = Eb
    with np.errstate(over="ignore", invalid="ignore"):
        S = K + K.T
        S *= 0.5                    # |fl(S) - (K + K^T)/2| <= u |fl(S)| + eta
        asym = np.abs(K - K.T)
        asym *= 0.5 * (1.0 + 2 * U)
        E += E.T
        E *= 0.5
        E += asym
        E += U * np.abs(S) + ETA    # E bounds |S - S_exact| and |S - K_exact|
    del K, asym
    _finite_rows(S, E, _Lasting)
    f = S @ u
    A = np.abs(S) @ absu
    B = E @ absu
    diag, ediag = np.diagonal(S).copy(), np.diagonal(E).copy()
    _check_diagonal(diag, ediag)
    delta = _psd_gap(S, E, mu)
    return f, A, B, diag, ediag, delta


def _psd_gap(S, E, mu):
    """The smallest delta the referee proves with lambda_min(S_exact) >= -delta below mu,
    from the float64 Cholesky factorizations of fl(S + c I) for c = mu/1024, mu/32, mu/2 in
    turn (``kernels._psd.cholesky_psd_gap``; E bounds the entries' errors)."""
    n = S.shape[0]
    eF, _ = R.scaled_norm(E)
    eF *= 1.0 + R.gamma(n * n + 2)
    delta = cholesky_psd_gap(S, eF, (mu / 1024.0, mu / 32.0, mu / 2.0), below=mu,
                             safety=_SAFETY)
    if delta is not None:
        return delta
    raise _Lasting("cannot establish that the kernel is PSD on this data: the Cholesky "
                   f"factorization of K + c I fails for c = mu/2 = {mu / 2:.3g} (K has an "
                   "eigenvalue below -mu/2 on this data, or is too close to one); a precomputed "
                   "Gram matrix must be K(X, X) of a positive semi-definite kernel")
