"""The certified-points certificate of the linear SVM solvers, and its referee.

``CertifiedPointsCertificate`` (kind ``"certified_points"``) claims that the points of
its mask are classified correctly by the current and by the optimal classifier of the
perturbed dual (paper sections 2.3 and 4). Its ``check`` recomputes the claim from X (or
Phi(X) of a kernel approximation), y, the weights and r alone, with thresholds from the
run's configuration (``run_thresholds``), in float64 over row blocks with a proven
bound on the recomputation's rounding error (docs/svm.md, section 6). Exact kernels have
their own certificate (``_kernel_certificate``).

References
----------
.. [1] "Data-Dependent Complexity of First-Order Methods for Support Vector Machines",
   arXiv:2512.03947 (2025), sections 2.3 (certified points) and 4 (the bound
   ||r - r*|| <= ||p(r)|| / mu).
.. [2] N. J. Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., SIAM,
   2002, sections 2.2 and 3.1 (the rounding model of the recomputation).
"""
import math

import numpy as np
import scipy.sparse as sp

from ... import _referee as R
from ..._validation import check_sample_weight, check_X
from ..._executors import Block, Executor
from ...certificates import Certificate, Verdict, certificate_type, check_referee_width, \
    kernel_mismatch, check_refittable, labels_pm as _labels_pm, local_matrix, referee_kernel, stored_r_mask
from ...kernels.builtin import LinearKernel
from . import _fast as _f
from ...utils._rows import row_block
from ._data import scaling_statistics
from ._thresholds import certify_level, certify_levels, claim_shortfall, rows_mismatch, \
    run_box, run_thresholds, stored_mismatch, stored_thresholds
from ...utils._memory import in_small_pages


#: tolerance between the stored scaling statistics and X's (relative, means in units of
#: the spread and of their own size): loose enough for a certificate of float32 data
#: checked on its float64 values (the claims themselves use the statistics recomputed
#: from X)
_STATS_RTOL = 1e-6


#: columns with s_j |m_j| above this are centred explicitly by the referee (the bound of
#: the implicit form grows like (s_j |m_j|)^2; below it, it stays within a few hundred
#: times the rounding of the centred form, which is still ~1e-10 relative)
_HEAVY = 8.0


@certificate_type
class CertifiedPointsCertificate(Certificate):
    """Points certified correctly classified by the current and the optimal classifier.

    ``value`` is the solver's error bound eps >= ||r - r*|| at the returned r (for
    information); ``mask`` marks the points with level - r_i > eps, level =
    min(gamma, 1/mu) (``certify_level``). ``check(X, y)`` is the referee: it recomputes
    the claim from X (or the kernel approximation's Phi(X)), y and r alone, in float64
    with numpy/scipy products over row blocks (independent of the Cython kernels; a dask
    array is read one chunk at a time), with a proven bound on the rounding error of the
    recomputation (docs/svm.md, section 6):

    * the scaling statistics (means, inverse standard deviations) from X, which must
      agree with the stored ones;
    * w_bar = Z^T (y * r), the intercept (t_bar = y^T r for H-SVM; the stored multiplier
      for the classical SVM, any value of which gives a valid bound), the margins
      theta_i = y_i (z_i . w_bar + t_bar);
    * the projected gradient p(r) of the perturbed dual and eps_v = ||p(r)|| / mu, which
      bounds ||r - r*|| for *any* feasible r (strong convexity, paper section 4), plus the
      rounding bound of its recomputation (and, for the classical SVM, a term for the
      residual of y^T r = 0);
    * r is feasible, the mask is non-empty (more than ``fraction * n`` points for the
      claim ``"certified"``), every certified point has level - r_i > eps_v + rounding
      and theta_i > 1 - mu level beyond rounding, the stored original-space classifier
      (coef, intercept) agrees with w_bar and classifies every certified point correctly
      beyond the rounding of its own margins.

    The thresholds come from the run's configuration ``config`` (a ``Config``, or its
    dict form after ``load_result``): gamma (``C`` or 64/n), mu (``mu`` or n/128), the
    scale, the formulation and the ``certified_points`` fraction, never from numbers the
    certificate stores about itself; a stored gamma, mu, scale or formulation that
    differs from the configuration's is a rejection. A certificate built without a
    configuration (user code) takes them from its constructor arguments.

    With a kernel approximation (``kernel`` not None: a kernel whose fitted ``feature_map``
    is not the identity) every step above runs on Phi = kernel.feature_map(X) instead of X
    (the scaling statistics too), and ``coef`` is the classifier on Phi; the certificate
    then certifies the approximated kernel K~ = Phi Phi^T, as ``kernel(A, B)`` computes it.

    Weighted runs (``solve(..., sample_weight=w)``): the box of point i is
    [0, gamma_i], gamma_i = C w_i, and its level min(gamma_i, 1/mu); ``check(X, y,
    sample_weight=w)`` takes the weights as data, like y, and recomputes every step with
    the boxes C w_i (C from the configuration, as above; nothing from the certificate's
    own numbers). A certificate of a weighted run (``weighted``) checked without weights
    is rejected, with a message saying to pass them; with other weights than the run's,
    the claim is recomputed for those weights and accepted only when it holds for them.

    Not re-checked: the solver's own value of eps (its FISTA extrapolation point is not
    stored); the check uses the recomputed projected-gradient bound instead.
    """

    kind = "certified_points"

    def __init__(self, value, mask, r, gamma, mu, scale, means, inv_std, formulation,
                 t_bar, coef, intercept, classes=None, kernel=None, config=None, claim=None,
                 weighted=False):
        self.value = float(value)
        self.mask = np.asarray(mask, dtype=bool)
        self.r = np.asarray(r, dtype=np.float64)
        self.gamma = float(gamma)
        self.mu = float(mu)
        self.scale = scale
        self.means = np.asarray(means, dtype=np.float64)
        self.inv_std = np.asarray(inv_std, dtype=np.float64)
        self.formulation = formulation
        self.t_bar = float(t_bar)
        self.coef = None if coef is None else np.asarray(coef, dtype=np.float64)
        self.intercept = float(intercept)
        self.classes = classes
        self.kernel = kernel
        #: the run's configuration (the source of the thresholds), None for user code
        self.config = config
        #: "certified" when the certificate backs that status (then more than
        #: fraction * n points must be certified), None otherwise
        self.claim = claim
        #: whether the run was weighted (its check then needs the sample weights)
        self.weighted = bool(weighted)

    def holds_model(self):
        """Whether the certificate holds the model the result predicts with (``coef``)."""
        return self.coef is not None

    def predictor_mismatch(self, model, fields):
        """None when ``model`` (``_result.predicting_model``: what ``decision_function``
        evaluates) is the linear model ``coef`` this certificate checks (``coef_``, or the
        feature-space coefficients of a kernel approximation), else why not
        (``load_result``)."""
        from ...certificates import _same_value

        if model is None:
            return None
        kind, value = model
        if kind == "support":
            return ("the result predicts with a kernel expansion (r.support_coef_), its "
                    "certificate checks a linear model (r.certificate.fields.coef)")
        if self.coef is None:
            return ("its certificate holds no copy of the model it checks "
                    "(r.certificate.fields.coef)")
        if not _same_value(np.asarray(self.coef), np.asarray(value)):
            return ("r.coef_ (or r.extra['feature_space_coef']) is not the model its "
                    "certificate checks (r.certificate.fields.coef)")
        return None

    def _rows_to_refit(self, X):
        """X validated (``check_X``: raises for an X that is not a finite numeric matrix,
        before any verdict) when the kernel's map must be fitted again on it (a result
        loaded without the fit), else None."""
        kernel = getattr(self, "kernel", None)
        if kernel is None or isinstance(kernel, LinearKernel) or \
                getattr(kernel, "fitted", True) is not False:
            return None
        return check_X(local_matrix(X))

    def _map_kernel(self, rows):
        """The kernel whose ``feature_map`` is the run's (None: the identity), fitted
        again on ``rows`` (``_rows_to_refit``) for a result loaded without the fit."""
        kernel = getattr(self, "kernel", None)  # absent in certificates saved before
        if kernel is None or isinstance(kernel, LinearKernel):
            return None  # the identity map: X itself
        if rows is not None:
            # a result loaded without the kernel's fit: fit the map on the training rows
            # (an integer random_state reproduces it; a random draw is refused)
            check_refittable(kernel)
            kernel.fit(rows)
        # the fit rebuilt from its free choices: a map edited after the run is not the run's
        return referee_kernel(kernel)

    def thresholds(self, n, sample_weight=None):
        """The claim's thresholds for n training points and the run's validated
        ``sample_weight`` (``run_thresholds`` of the configuration, or the constructor's
        values without one)."""
        config = getattr(self, "config", None)
        if config is not None:
            return run_thresholds(config, n, sample_weight)
        gamma, mu, form = stored_thresholds(self.gamma, self.mu, self.formulation)
        return {"gamma": gamma, "mu": mu, "level": certify_level(gamma, mu),
                "scale": self.scale, "formulation": form, "fraction": 0.0}

    @in_small_pages
    def check(self, X, y, sample_weight=None):
        kind = self.kind

        def reject(reason, **numbers):
            return Verdict.reject(kind, reason, **numbers)

        check_referee_width(X, self)  # X's width against the run's memory_budget
        rows = self._rows_to_refit(X)
        try:
            mapk = self._map_kernel(rows)
        except ValueError as exc:
            return reject(str(exc))
        # float32 blocks as stored: the referee's kernels read each entry as its float64
        # value (exact), so a float64 copy of each block would only cost its writing; an X
        # that is not a finite numeric matrix raises here, before any verdict
        # a kernel approximation's rows as the referee reads them, each with a bound on
        # its distance to the exact map (``certificates.referee_rows``)
        blocks = R.RowBlocks(X, native=True, kernel=mapk,
                             row_width=None if mapk is None else self.means.shape[0])
        n = blocks.n
        fitted_on = getattr(mapk, "n_features_in_", None)
        if fitted_on is not None and blocks.width is not None and blocks.width != fitted_on:
            # X can be read but is not the run's (its map raises on other columns)
            return reject(f"X has {blocks.width} features, the run's feature map was "
                          f"fitted on {fitted_on}")
        if sample_weight is None and getattr(self, "weighted", False):
            return reject("the certificate is of a weighted run: pass its weights, "
                          "check(X, y, sample_weight=w) (verify likewise)")
        if sample_weight is not None:
            try:
                sample_weight = check_sample_weight(sample_weight, n)
            except (TypeError, ValueError) as exc:
                return reject(str(exc))
        other = rows_mismatch(self.r, n)
        if other is not None:
            return reject(other)
        try:
            th = self.thresholds(n, sample_weight)
        except (TypeError, ValueError) as exc:
            return reject(f"the run's configuration does not define the claim: {exc}")
        gamma, mu, scale, form = th["gamma"], th["mu"], th["scale"], th["formulation"]
        other = stored_mismatch((("gamma", self.gamma), ("mu", self.mu), ("scale", self.scale),
                                 ("formulation", self.formulation)), th, sample_weight)
        if other is not None:
            return reject(other)
        other = kernel_mismatch(self.kernel, getattr(self, "config", None))
        if other is not None:
            return reject(other)
        ypm = _labels_pm(y, self.classes)
        try:
            r, mask = stored_r_mask(self.r, self.mask)
        except ValueError as exc:
            return reject(str(exc))
        if ypm.shape != (n,) or r.shape != (n,) or mask.shape != (n,):
            return reject(f"r, mask and y must have one entry per row of X ({n})")
        box = run_box(gamma, sample_weight, n)
        if not (np.all(np.isfinite(r)) and r.min() >= 0.0 and np.all(r <= box)):
            if sample_weight is None:
                return reject(f"r is not in the box [0, gamma = {gamma:.6g}]")
            return reject(f"r is not in the boxes [0, gamma * w_i] (gamma = {gamma:.6g})")
        n_cert = int(np.count_nonzero(mask))
        if n_cert == 0:
            return reject("no point is certified")
        if getattr(self, "claim", None) == "certified":
            other = claim_shortfall(n_cert, th["fraction"], n, sample_weight)
            if other is not None:
                return reject(other)
        try:
            return _referee_certified_points(self, blocks, ypm, box, mu,
                                             certify_levels(box, mu), scale, form, reject)
        except R.MapRefused as exc:
            # a plug-in map with no n_features_in_ that refuses another width of X
            # (found by review: its ValueError escaped verify)
            return reject(str(exc))


def run_certificate(problem, state, status, data, mask, r, formulation, t_bar, fields):
    """The ``CertifiedPointsCertificate`` of a linear run (``fista``, ``fista_svm``,
    ``dcd``) at the dual vector ``r`` with the certified ``mask``: the run's error bound,
    gamma, mu and scaling statistics, and the model of the result ``fields`` (coef_ or,
    with a kernel approximation, the classifier on Phi; intercept_)."""
    coef = fields.get("coef_")
    if coef is None:
        coef = fields.get("extra", {}).get("feature_space_coef")
    slack = getattr(state, "claim_slack", 0.0)
    if slack > 0.0:
        # after a refuted claim: only the points that clear the referee's rounding too
        mask = mask & (state.level - r > state.error_bound + slack)
    return CertifiedPointsCertificate(
        state.error_bound, mask, r, state.gamma, state.mu, data.scale, data.m, data.s,
        formulation, t_bar, coef, fields["intercept_"], problem.classes_,
        kernel=problem.kernel, config=problem.config,
        claim="certified" if status == "certified" else None, weighted=state.weighted)


class _StreamedBlocks(Executor):
    """The referee's row blocks (a ``RowBlocks``: a dask array's chunks or Phi(X), made
    one at a time) as the executor of ``scaling_statistics``: each of its passes reads
    the blocks again, so all of X is never held at once."""

    def __init__(self, blocks, d):
        super().__init__([], [blocks.n], d, np.float64, False)
        self.blocks = blocks

    def map(self, fn, *args):
        return [fn(Block(B, None, k, lo), *args) for k, (lo, _, B) in enumerate(self.blocks)]


def _referee_certified_points(cert, blocks, ypm, box, mu, level, scale, form, reject):
    """The recomputation and the rounding bound of docs/svm.md, section 6; ``box`` and
    ``level`` are the n-vectors of the bounds gamma_i and the levels min(gamma_i, 1/mu)."""
    kind = cert.kind
    n = blocks.n
    r, mask = stored_r_mask(cert.r, cert.mask)  # of the right kinds (check)
    d = cert.means.shape[0]
    if cert.inv_std.shape != (d,) or (cert.coef is not None and cert.coef.shape != (d,)):
        return reject("the stored statistics and coefficients must have one entry per feature")
    # -- statistics (the solver's own function on in-memory data; as sums over row
    # blocks otherwise, the same operations)
    if blocks.kernel is None and blocks.X is not None:
        m, s = scaling_statistics(blocks.X, scale)
    else:
        m, s = scaling_statistics(_StreamedBlocks(blocks, d), scale)
    if m.shape != (d,):
        return reject(f"X has {m.shape[0]} features, the certificate {d}")
    if not np.all(np.isfinite(s)):
        return reject("1/sigma overflows float64 for a column of X (standard deviation below "
                      "1e-308): the standardized problem cannot be represented")
    zero = s == 0.0
    if not (np.all(np.isfinite(cert.inv_std)) and np.all(np.isfinite(cert.means))):
        # (NaN compared within every tolerance below: found by review)
        return reject("the stored scaling statistics are not finite")
    if not np.array_equal(zero, cert.inv_std == 0.0):
        return reject("the stored inverse standard deviations drop other columns than X's")
    with np.errstate(over="ignore", invalid="ignore"):
        bad_s = np.abs(cert.inv_std - s) > _STATS_RTOL * s
        bad_m = np.abs(s * (cert.means - m)) > _STATS_RTOL * (1.0 + s * np.abs(m))
    if bad_s.any() or (scale == "std" and bad_m[~zero].any()) or \
            (scale != "std" and np.any(cert.means != 0.0)):
        return reject("the stored scaling statistics are not X's")
    # -- pass B: a = (X - e m^T)^T u and its magnitude |X - e m^T|^T r (u = y * r), float64
    # sums over 1024 rows added in long double; CSR columns with s_j |m_j| > 8 ("heavy":
    # a mean large against the spread, whose implicit zeros the sparse form cannot centre
    # accurately) are centred densely, block by block
    heavy = (s * np.abs(m) > _HEAVY) if scale == "std" else np.zeros(d, dtype=bool)
    # a kernel approximation's rows: their error bounds in the standardized coordinates
    blocks.error_weights = s
    LD = np.longdouble
    uL, gL = R.LONG_UNIT, R.gamma_long  # long double's unit roundoff and gamma_k

    u = np.empty(n)
    for c in _chunks(n):
        np.multiply(ypm[c], r[c], out=u[c])
    a = np.zeros(d, dtype=LD)
    mag = np.zeros(d)
    D = 1
    cache = {} if blocks.n_blocks == 1 else None
    for lo, hi, B in blocks:
        if B.shape[1] != d:
            return reject(f"X has {B.shape[1]} features, the certificate {d}")
        ub, rb = u[lo:hi], r[lo:hi]
        for part, cols in _referee_parts(B, heavy, cache):
            if cols is None:
                D = max(D, int(_f.ref_rmatvec(part, heavy.view(np.uint8), m, ub, rb, a, mag)))
            else:
                aH, magH = np.zeros(cols.size, dtype=LD), np.zeros(cols.size)
                _f.ref_rmatvec(part, _NO_SKIP[:cols.size], m[cols], ub, rb, aH, magH)
                a[cols] += aH
                mag[cols] += magH
    NB = blocks.chain
    g = R.gamma(n + D + d + 32)              # float64 operations (bounds, small sums)
    # X^T u: float64 sums of at most REF_ROWS terms, their partials summed in long double
    gB = R.gamma(_f.REF_ROWS + 4) + gL(n // _f.REF_ROWS + blocks.n_blocks + 8)
    gC = R.gamma(D + d + 8)                  # the row products of pass C (float64)
    gl = gL(n + d + 32)                      # other long double sums
    eta = R.ETA
    if form == "svm":
        # y^T r, which y^T r = 0 cancels to a few ulps: correctly rounded (math.fsum), so
        # the residual the rounding term takes is the same however the points are chunked
        bL = LD(math.fsum(u))
    else:
        bL = sum((np.sum(u[c].astype(LD)) for c in _chunks(n)), LD(0.0))  # any order: gl(n + 2)
    b = float(bL)
    R1 = float(np.sum(r)) * (1.0 + g)
    EbL = gL(n + 2) * R1
    mag *= 1.0 + 2 * g                       # >= the exact magnitudes
    with np.errstate(over="ignore", invalid="ignore"):
        wL = s.astype(LD) * a
        vL = s.astype(LD) * wL
        v = vL.astype(np.float64)            # rounded once more: u |v|
        Ev = s * (s * (gB * mag)) + (4 * uL + R.UNIT) * np.abs(v) + eta
        Vmag = s * (s * mag)                 # >= |v|
    if form == "hsvm":
        tL, Et = bL, EbL
    else:
        tL, Et = LD(cert.t_bar), 0.0
    t = float(tL)
    if not (np.all(np.isfinite(Ev)) and np.all(np.isfinite(Vmag))):
        return reject("the classifier w(r) is not representable in float64 (coefficients "
                      "overflow): rescale X, C or mu")
    coef = cert.coef
    check_model = coef is not None
    absm = np.abs(m)
    if check_model:
        # the stored model is w_bar(r) under the stored statistics (those of the run, X's
        # to _STATS_RTOL: their rounding depends on the layout X was summed in; found by
        # review), as any float64 evaluation from r computes it: sums of n terms in any
        # order, on X uncentred (|X|^T r <= |X - e m^T|^T r + |m| sum r) and centred by
        # m (y^T r) after. X^T u - mS (y^T r) = a + (m - mS) (y^T r). (A relative 1e-6 of
        # the magnitudes let coefficients and intercepts move by about 1 in decision
        # units at large C, 112 of 400 predictions changing: found by review.)
        sS, mS = cert.inv_std, cert.means
        absmS = np.abs(mS)
        with np.errstate(over="ignore", invalid="ignore"):
            dm = m - mS                      # float64: within u |dm| of the exact difference
            vS = (sS.astype(LD) * (sS.astype(LD) * (a + dm.astype(LD) * bL))).astype(np.float64)
            EvS = sS * (sS * (gB * mag + 4 * R.UNIT * np.abs(dm) * (abs(b) + EbL))) \
                + (4 * uL + R.UNIT) * np.abs(vS) + eta
            gM = R.gamma(n + d + 32)
            tol = gM * (sS * (sS * (mag + (absm + np.abs(dm)) * R1))) + 2 * EvS + 4 * eta
            if blocks.row_error is not None:
                # a map's rows: the run's and the referee's are each within the entry
                # bounds of the exact map, so a column of X^T u differs by at most
                # 2 sum_i r_i Err_ij <= 2 T / s_j (T = sum_i r_i ||s Err_i||), and the
                # coefficient s_j^2 a_j by 2 s_j T (found by review: a block of one row
                # rounds K P otherwise than the run's blocks of 4096)
                T_rows = float(np.sum(r * blocks.row_error)) * (1.0 + g)
                tol = tol + 2.0 * sS * T_rows * (1.0 + 4 * R.UNIT)
        if not np.all(np.abs(coef - vS) <= tol):
            return reject("the stored coefficients are not s * w_bar(r)")
        mcL = mS.astype(LD) @ coef.astype(LD)
        want = float(tL - mcL)
        scale_i = abs(t) + float(absmS @ np.abs(coef))
        # the solver's t_bar is a float64 sum of y^T r (H-SVM), within gamma_{n+8} sum r
        # of tL, as its own check below allows (found by review: this tolerance had
        # only the long double's bound)
        Et_run = R.gamma(n + 8) * R1 if form == "hsvm" else 0.0
        if not abs(cert.intercept - want) <= Et + Et_run + g * scale_i + (d + 2) * eta:
            return reject("the stored intercept is not t_bar - m . coef")
        mcL = m.astype(LD) @ coef.astype(LD)
        c1L = LD(cert.intercept) + mcL       # dec_i = (x_i - m) . coef + c1
        c1 = float(c1L)
        Ec1 = gl * (abs(cert.intercept) + float(absm @ np.abs(coef))) + R.UNIT * abs(c1) + eta
    else:
        coef = np.zeros(d)
    if form == "hsvm" and not abs(cert.t_bar - b) <= R.gamma(n + 8) * R1 + 2 * EbL:
        return reject("the stored t_bar is not y^T r")
    # -- pass C, float64 row products: theta_raw = (X - e m^T) v and the stored model's
    # (X - e m^T) coef, with the magnitudes |X - e m^T| (Ev + gC |v|) and |X - e m^T| |coef|,
    # into four vectors of one block's rows (reused from block to block: at n = 10^6 and
    # beyond the page faults of fresh n-vectors cost more than the passes over X); then,
    # per block, the per-point quantities (``ref_points``, the same float64 operations as
    # the vector form of docs/svm.md section 6): p and its rounding bound EG (whose norms
    # need every point), and the tests of the certified points, which do not depend on the
    # bound; the verdict follows in the order of the tests below
    Mv = Ev + gC * np.abs(v)
    acoef = np.abs(coef)
    # -- the rows' own error (a kernel approximation's rows against its exact map;
    # docs/svm.md section 6): under the run's statistics z_i = s (phi_i - m) moves by
    # ez_i >= ||s (phi~_i - phi_i)|| (``row_error`` with the weights s, read in pass B), w_bar
    # by T = sum_j r_j ez_j, so theta_i moves by at most ez_i (||w_bar|| + T) + ||z_i|| T,
    # and the stored model's margin (phi_i - m) . coef by ez_i ||coef / s|| (coef = s w_bar
    # vanishes on the constant columns); both join the rounding bounds of theta_i and of
    # the margin (the projected gradient is 1-Lipschitz in theta: its norm's bound follows)
    e_rows = blocks.row_error
    if e_rows is not None:
        if not np.all(np.isfinite(e_rows)):
            return reject("the kernel approximation's rows carry no bound on their distance "
                          "to its exact map (a Nystroem map over an approximation): no claim "
                          "on them is certified")
        if check_model and np.any(coef[zero] != 0.0):
            return reject("the stored coefficients are not zero on the constant columns")
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            ez = e_rows * (1.0 + 4 * R.UNIT)
            T = float(np.sum(r * ez)) * (1.0 + g)
            reach = (R.scaled_norm(s * mag)[0] + T) * (1.0 + g)
            cnorm = R.scaled_norm(coef[~zero] / s[~zero])[0] * (1.0 + g) if check_model \
                else 0.0
            sm_norm = R.scaled_norm(s * m)[0] * (1.0 + g)
        if not (math.isfinite(T) and math.isfinite(reach) and math.isfinite(cnorm)):
            return reject("the bound on the kernel approximation's rows is not finite in "
                          "float64: rescale X, C or mu")
    delta = abs(b) + EbL + R.UNIT * abs(b) if form == "svm" else 0.0
    ypm = np.ascontiguousarray(ypm, dtype=np.float64)
    mask8 = np.ascontiguousarray(mask).view(np.uint8)
    p, EG = np.empty(n), np.empty(n)
    k1, gamma4 = 1.0 + 2 * g, R.gamma(4)
    c1_, Ec1_ = (c1, Ec1) if check_model else (0.0, 0.0)
    # the stored model's margins as ``predict`` computes them, x_i . coef + intercept in
    # float64 on x_i uncentred: off by gamma_{d+2} (|x_i| . |coef| + |intercept|), and
    # |x_i| . |coef| <= Md_i + |m| . |coef| (found by review: a certified point of a
    # column of mean 1e11 and spread 1 that predict misclassified, the centred margin
    # 4e-7 being proved)
    gP = R.gamma(d + 2)
    if check_model:
        Ec1_ += gP * (abs(cert.intercept) + float(absm @ acoef)) * (1.0 + 4 * g)
    threshold, k_room, floor_ok, model_ok = math.inf, 0, True, True
    top_p = top_EG = 0.0
    zf2 = 0.0
    buf = None
    for lo, hi, B in blocks:
        k = hi - lo
        if buf is None or buf.shape[1] < k:
            buf = np.empty((4, k))
        th, Mth, dec, Md = buf[0, :k], buf[1, :k], buf[2, :k], buf[3, :k]
        buf[:, :k] = 0.0
        for part, cols in _referee_parts(B, heavy, cache):
            if cols is None:
                _f.ref_matvec(part, heavy.view(np.uint8), m, v, Mv, coef, acoef,
                              th, Mth, dec, Md)
            else:
                _f.ref_matvec(part, _NO_SKIP[:cols.size], m[cols], v[cols], Mv[cols],
                              coef[cols], acoef[cols], th, Mth, dec, Md)
        if form == "svm":
            zf2 += _scaled_frobenius2(B, m, s, n)
        xth = xdec = None
        if e_rows is not None:
            with np.errstate(over="ignore", invalid="ignore"):
                zn = _scaled_row_norms(B, m, s, sm_norm) * (1.0 + 2 * g)
                xth = (ez[lo:hi] * reach + zn * T) * (1.0 + 8 * R.UNIT)
                xdec = ez[lo:hi] * cnorm * (1.0 + 4 * R.UNIT)
        # theta_i and the bound Eth_i on its rounding (|th_i| <= |theta_i| + |t|: the
        # rounding of th + t, and of t itself); G, EG and p (a box [0, 0] fixes its
        # coordinate: p_i = 0); the levels min(gamma_i, 1/mu) rounded down
        tb, kb, fb, mb, tp, te = _f.ref_points(
            ypm[lo:hi], r[lo:hi], box[lo:hi], level[lo:hi], mask8[lo:hi], th, Mth, dec, Md,
            p[lo:hi], EG[lo:hi], t, Et, mu, k1, gamma4, delta, check_model, c1_, Ec1_,
            gC + gP, R.UNIT, eta, xth, xdec)
        threshold = min(threshold, tb)
        k_room += kb
        floor_ok = floor_ok and fb
        model_ok = model_ok and mb
        top_p = tp if (tp > top_p or tp != tp) else top_p      # a NaN is kept
        top_EG = te if (te > top_EG or te != te) else top_EG
    del buf
    # p and EG are the referee's own: their norms scale them in place
    N, eN = R.scaled_norm(p, top=top_p, overwrite=True)
    NE, eNE = R.scaled_norm(EG, top=top_EG, overwrite=True)
    del p, EG
    eps_v = N / mu
    rho = ((eN + NE + eNE) / mu + 4 * R.UNIT * eps_v) * (1.0 + 4 * R.UNIT)
    if delta > 0.0:
        # r must lie on y^T r = 0: |y^T r| <= delta; spread over the k free coordinates
        # that have room, a feasible r~ is within delta / sqrt(k) of r and keeps r's
        # active set, so ||r - r*|| <= ||r - r~|| (1 + ||Q|| / mu) + ||p(r)|| / mu
        if k_room == 0:
            return reject(f"r is not on y^T r = 0 (|y^T r| <= {delta:.3g}) and no free "
                          "coordinate can absorb the residual")
        if e_rows is not None:
            # ||Q||_2 <= mu + ||Z||_F^2 for the exact rows: ||Z||_F grows by ||ez|| at most
            zf2 = (math.sqrt(zf2) + R.scaled_norm(ez)[0]) ** 2 * (1.0 + 4 * R.UNIT)
        qnorm = mu + zf2 * (1.0 + g)
        rho += (1.0 + qnorm / mu) * delta / math.sqrt(k_room) * (1.0 + 4 * R.UNIT)
    if not (math.isfinite(eps_v) and math.isfinite(rho)):
        return reject("the projected gradient is not finite in float64: rescale X, C or mu")
    bound = (eps_v + rho) * (1.0 + 2 * R.UNIT)
    margin = threshold - bound
    numbers = dict(value=eps_v, threshold=threshold, rounding=rho, margin=margin)
    if not margin > 0.0:
        return reject("a certified point has level - r_i <= eps_v + rounding", **numbers)
    if not floor_ok:
        return reject("a certified point has theta_i <= 1 - mu level beyond rounding",
                      **numbers)
    if not model_ok:
        return reject("the stored classifier misclassifies a certified point (beyond "
                      "rounding)", **numbers)
    return Verdict(True, kind, **numbers)



#: points per chunk of the referee's u = y * r and of its long-double sum
_CHUNK = 1 << 15


def _chunks(n):
    """Slices of [0, n) of at most ``_CHUNK`` points, in order."""
    return [slice(lo, min(lo + _CHUNK, n)) for lo in range(0, n, _CHUNK)]

#: a row of zeros to pass as ``skip`` where no column is skipped
_NO_SKIP = np.zeros(1 << 16, dtype=np.uint8)


def _referee_parts(B, heavy, cache=None):
    """The parts of a row block for the referee's kernels: ``(rows, None)`` for the
    block itself (a dense block: every column, centred by the kernel; a CSR block: its
    light columns) and, for a CSR block with heavy columns, ``(rows, cols)`` for those
    columns densified (a column with s_j |m_j| > 8 holds more than 98% of its entries,
    since s_j |m_j| <= sqrt(p_j / (1 - p_j)) for a fraction p_j of nonzeros). A CSR block
    more than half full is densified whole."""
    sparse = sp.issparse(B)
    any_heavy = bool(heavy.any())
    if sparse and any_heavy and B.nnz > 0.5 * B.shape[0] * B.shape[1]:
        # ``cache`` (one block of in-memory data): densified once for both passes
        key = id(B)
        dense = None if cache is None else cache.get(key)
        if dense is None:
            dense = np.ascontiguousarray(B.toarray(), dtype=np.float64)
            if cache is not None:
                cache[key] = dense
        B, sparse = dense, False
    yield row_block(B), None
    if sparse and any_heavy:
        cols = np.flatnonzero(heavy)
        yield row_block(np.ascontiguousarray(B[:, cols].toarray(), dtype=np.float64)), cols


def _scaled_row_norms(B, m, s, sm_norm):
    """Per row of the block, ||z_i|| = ||s * (x_i - m)|| (to float64 rounding; the caller
    allows for it): dense rows directly, CSR rows by ||s * x_i|| + ||s * m|| (the
    triangle inequality, with ``sm_norm`` >= ||s * m||), so no implicit zero is formed."""
    if sp.issparse(B):
        sx = sp.csr_matrix((s[B.indices] * B.data, B.indices, B.indptr), shape=B.shape)
        return np.sqrt(np.asarray(sx.multiply(sx).sum(axis=1)).ravel()) + sm_norm
    out = np.empty(B.shape[0])
    for a in range(0, B.shape[0], 4096):  # (bounded temporaries)
        Z = (B[a:a + 4096] - m) * s
        out[a:a + 4096] = np.sqrt(np.einsum("ij,ij->i", Z, Z))
    return out


def _scaled_frobenius2(B, m, s, n_total):
    """sum over the block's rows of ||z_i||^2 = ||s * (x_i - m)||^2 (implicit zeros of a
    CSR block included), for the bound ||Q||_2 <= mu + ||Z||_F^2."""
    if sp.issparse(B):
        dev = s[B.indices] * (B.data - m[B.indices])
        cnt = np.bincount(B.indices, minlength=m.shape[0])
        sm = s * m
        # numpy's loops rather than BLAS for the long dot (see ``_referee.scaled_norm``)
        return float(np.einsum("i,i->", dev, dev)) + float(((B.shape[0] - cnt) * sm) @ sm)
    Z = (B - m) * s
    return float(np.einsum("ij,ij->", Z, Z))
