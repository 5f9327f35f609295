"""``dcd``: dual coordinate descent on the perturbed H-SVM dual, with certified stopping
(paper section 4).

The epochs run in one Cython call per batch (``_fast.dcd_epochs``: random order
from a SplitMix64 stream, in shuffled windows of runs of adjacent coordinates beyond
``_fast.ORDER["runs_above"]`` points, LIBLINEAR's shrinking, the lazy or every-epoch
full bound ||p(r)|| / mu). Sequential, so one in-memory block only; exact kernels run in ``_kernel``.

References
----------
.. [1] "Data-Dependent Complexity of First-Order Methods for Support Vector Machines",
   arXiv:2512.03947 (2025), section 4.
.. [2] C.-J. Hsieh, K.-W. Chang, C.-J. Lin, S. S. Keerthi, S. Sundararajan, "A Dual
   Coordinate Descent Method for Large-scale Linear SVM", ICML 2008.
"""
import math

import numpy as np

from ..._registry import _register_builtin
from ..._validation import Param
from ...plugins import SolverState
from . import _fast as _f
from . import _kernel
from ._base import _COMMON_PARAMS, _CertifiedSVM, _ClaimOffers
from ._certificate import run_certificate
from ._data import _feature_fields, _prepare
from ._rules import StallWatch, certify_target, gap_target, stalled_reason
from ._thresholds import _box_scales, _gamma_mu, certify_levels, check_scales, run_box


#: the columns of the kernel's history rows (``_fast.dcd_epochs``)
_DCD_HISTORY = ("objective", "error_bound", "n_certified", "projected_gradient_gap")


_NO_HISTORY = np.empty((0, 4))


class _DCDState(_ClaimOffers, SolverState):
    slack_masks = True  # its certificates come from ``run_certificate``

    def __init__(self, data, y, gamma, mu, seed, shrinking, bound_check, certify_above=None,
                 shrink_tol=None, box=None):
        n, d = data.n, data.d
        self.data, self.y, self.gamma, self.mu = data, y, gamma, mu
        # the per-point bounds gamma_i (``run_box``) and levels min(gamma_i, 1/mu)
        self.box = run_box(gamma, None, n) if box is None else box
        self.level = certify_levels(self.box, mu)
        # the epoch permutations come from a SplitMix64 stream seeded once from the run's
        # generator (drawn in Cython, so an epoch costs no numpy call)
        self._rng_state = np.array([seed], dtype=np.uint64)
        self.shrinking = bool(shrinking)
        self.bound_check = bound_check
        self.r = np.zeros(n)
        self.s2a = np.zeros(d)
        self.scal = np.zeros(2)  # [b, P]
        self.qd = data.qd if data.qd is not None else data.zsq + 1.0 + mu
        self.index = np.arange(n, dtype=np.int64)
        # scratch of the epoch order (``_fast.dcd_epochs``: runs of adjacent coordinates
        # beyond ``_fast.ORDER["runs_above"]`` points)
        m, b = _f.order_scratch_sizes(n)
        self._order, self._seen = np.empty(m, dtype=np.int64), np.empty(b, dtype=np.uint8)
        # from the run's rules (``DCD.start``): the gap at which a shrunk active set is
        # reset (liblinear's tol, else LIBLINEAR's default 0.1), and the certified-point
        # count the lazy full-bound check aims at (None: no rule counts certified points)
        self.shrink_tol = 0.1 if shrink_tol is None else shrink_tol
        self.certify_fraction = None if certify_above is None or bound_check != "lazy" \
            else certify_above / n
        # a run with a certified-points rule ends when no more points can be: the
        # estimate sqrt(sum PG^2) / mu is watched, a stall confirmed by the full bound
        self.certify_above = certify_above
        # coordinate descent's rate: sqrt of the largest Q_ii over mu stands for
        # FISTA's sqrt(kappa) (the window grows with the conditioning)
        horizon = math.sqrt(float(np.max(self.qd, initial=0.0)) / mu) if mu > 0 else math.inf
        self.stall = None if certify_above is None else StallWatch(self.level, horizon)
        self.failed = None
        self._confirm = False  # the next call runs one epoch with the full bound
        self._pg = np.empty(n)
        # the kernel's loop state between calls (see _fast.dcd_epochs): active size,
        # previous PG extremes, shrink_tol, certify_fraction, full passes, estimate
        self._ctl = np.array([n, np.inf, -np.inf, 0.1, np.nan, 0.0, np.inf])
        self._hist = _NO_HISTORY  # (k, 4) rows, allocated by the first call
        # written by the kernel: w_bar at the last iteration, the mask of its last full pass
        self._w_bar = np.zeros(d)
        self._coef = np.zeros(d)  # s * w_bar
        self._mask_bytes = np.zeros(n, dtype=np.uint8)
        # the full bound's w, scattered afresh from r (long double), and the constants of
        # its rounding bound
        self._fresh = np.zeros(d, dtype=np.longdouble)
        self.rc = data.rounding_constants(float(self.box.max(initial=0.0)))
        self._rc = self.rc.array_long_double()
        # iterations per Cython call in step_batch: about 2e7 row entries of work, so that
        # Ctrl-C and the caller's loop get control back every few tens of milliseconds,
        # and at most 10 000 (the history rows of one call)
        work = (len(data.data) if data.sparse else n * d) + n
        self._batch_cap = max(1, min(10_000, int(2e7 // max(work, 1))))
        self.n_iter = 0
        self.projected_gradient_gap = np.inf
        self.error_bound = np.inf
        self.n_certified = 0
        self.objective = 0.0
        self.mask = self._mask_bytes.view(bool)
        if bound_check == "always":
            self._full_bound()

    # the loop state kept in ``_ctl``, readable by name
    active_size = property(lambda self: int(self._ctl[0]))
    pg_max_old = property(lambda self: float(self._ctl[1]))
    pg_min_old = property(lambda self: float(self._ctl[2]))
    full_passes = property(lambda self: int(self._ctl[5]))
    error_estimate = property(lambda self: float(self._ctl[6]))

    def _full_bound(self):
        # at the start (r = 0, w = 0 exactly): ||p(0)|| / mu plus the rounding term of
        # the kernel's full bound (``_fast._fresh_bound``) at r = 0
        data = self.data
        b, P = self.scal
        pgsq = _f.projected_gradient(data.rows, self.y, self.r, self.s2a, b, P, data.c,
                                     data.M, 1.0, 0.0, self.mu, self.box, self._pg)
        self._ctl[5] += 1
        rc = self._rc
        dg = rc[1] * rc[4] + rc[5]
        self.error_bound = (float(np.sqrt(pgsq)) * (1.0 + rc[0] + 2.3e-16) + dg) \
            * (1.0 + 1e-15) / self.mu
        self.mask = self.level - self.r > self.error_bound
        self.n_certified = int(np.count_nonzero(self.mask))

    def w_bar(self):
        """w_bar = s2a / s - s m b (0 / 0 := 0), as the kernel leaves it after its last
        iteration (zero before the first)."""
        return self._w_bar.copy()

    def _epochs(self, k, cert_above=np.inf, gap_at_most=-np.inf):
        """Run up to k iterations in one Cython call (``_fast.dcd_epochs``), stopping
        after the first one where ``n_certified > cert_above`` or the gap is
        <= ``gap_at_most``; returns the history rows (objective, error_bound, n_certified,
        gap) of the iterations done."""
        data = self.data
        ctl = self._ctl
        cf = self.certify_fraction
        confirm, self._confirm = self._confirm, False
        if confirm:
            k = 1
        ctl[3] = self.shrink_tol
        ctl[4] = np.nan if cf is None else cf
        hist = self._hist
        if hist.shape[0] < k:
            hist = self._hist = np.empty((k, 4))  # row e is written by iteration e
        done = _f.dcd_epochs(data.rows, self.y, self.index, self.r, self.s2a, self.scal,
                             data.s, data.m, data.c, self.qd, data.M, self.mu, self.box,
                             self.level, self._rng_state, self._pg, ctl, self.shrinking,
                             self.bound_check == "always" or confirm, hist, k, cert_above,
                             gap_at_most,
                             self._w_bar, self._coef, self._mask_bytes, self._fresh,
                             self.rc.xi, self._rc, self._seen, self._order)
        obj, eps, ncert, gap = hist[done - 1].tolist()
        self.objective = obj
        self.error_bound = eps
        self.n_certified = int(ncert)
        self.projected_gradient_gap = gap
        if eps < np.inf:
            self.mask = self._mask_bytes.view(bool)
        self.n_iter += done
        if self.stall is not None and self.failed is None:
            self._watch(done, eps, confirm)
        return hist[:done]

    def _watch(self, done, eps, confirmed):
        """Feed the stall watch (``StallWatch``) with this call's bound: the full one,
        else the estimate sqrt(sum PG^2) / mu. A stall the estimate suggests is confirmed
        by the next call, one epoch with the full bound; a confirmed stall sets ``failed``
        (why the certified-points rule cannot fire)."""
        if confirmed or eps < np.inf:
            stuck = self.stall.update(eps, done)
            if stuck and self.n_certified <= self.certify_above:
                self.failed = stalled_reason("dcd", eps, self.n_certified, len(self.r),
                                             self.stall.window)
            elif confirmed:
                self.stall.postpone()
        elif self.stall.update(self.error_estimate, done):
            self._confirm = True

    def step(self):
        self._epochs(1)

    def step_batch(self, triggers, limit):
        """Several iterations in one Cython call where the run loop would only have
        recorded their snapshots (``SolverState.step_batch``): stops after the first
        iteration on which one of ``triggers`` holds, or after ``limit``. The kernel
        evaluates thresholds on ``n_certified`` (">"), ``projected_gradient_gap`` ("<=")
        and ``n_iter`` (">="); any other trigger returns None (one ``step`` at a time)."""
        cert_above, gap_at_most = np.inf, -np.inf
        for t in triggers:
            if t.field == "n_certified" and t.op == ">":
                cert_above = min(cert_above, t.value)
            elif t.field == "projected_gradient_gap" and t.op == "<=":
                gap_at_most = max(gap_at_most, t.value)
            elif t.field == "n_iter" and t.op == ">=":
                if math.isfinite(t.value):
                    limit = min(limit, math.ceil(t.value) - self.n_iter)
                elif t.value < 0.0:  # n_iter >= -inf holds after any iteration
                    limit = 0       # (>= +inf never: found by review, math.ceil failed)
            else:
                return None
        # at most a stall watch's window per call: a stalled run ends within two windows
        cap = self._batch_cap if self.stall is None else min(self._batch_cap, StallWatch.WINDOW)
        if self._confirm:
            cap = 1
        rows = self._epochs(max(1, min(limit, cap)), cert_above, gap_at_most)
        return rows.shape[0], dict(zip(_DCD_HISTORY, rows[:-1].T.tolist()))

    def snapshot(self):
        return {"objective": self.objective, "error_bound": self.error_bound,
                "n_certified": float(self.n_certified),
                "projected_gradient_gap": self.projected_gradient_gap}


def _model_from_r(data, y, r):
    """(t_bar, coef) of r: t_bar = y^T r and coef = s * w_bar(r) = s (s (X^T (y r) - m t_bar)),
    scattered afresh in long double (``_fast.fresh_scatter``, ``fresh_coefficients``) and
    rounded once to float64."""
    fresh = np.zeros(data.d, dtype=np.longdouble)
    ld = np.zeros(2, dtype=np.longdouble)
    _f.fresh_scatter(data.rows, y, r, data.xi, fresh, ld[:1])
    _f.fresh_coefficients(fresh, data.s, data.m, ld)
    return float(ld[0]), fresh.astype(np.float64)


#: why dcd runs on one in-memory block only (the message of a refused blocked run)
_DCD_SEQUENTIAL = (
    "solver 'dcd' is sequential: each coordinate step of dual coordinate descent uses the "
    "w updated by the step before, so its epochs cannot be split into row blocks that run "
    "where a dask array's chunks are held. Use a blocked solver on dask arrays: 'fista' "
    "(certified, H-SVM), 'fista_svm' (certified, classical SVM) or 'pegasos'; or compute X "
    "into memory (X.compute()) to run 'dcd'")


@_register_builtin("solver", "dcd")
class DCD(_CertifiedSVM):
    """Dual coordinate descent on the perturbed H-SVM dual (arXiv:2512.03947, section 4).

    Hsieh et al. (2008) as in LIBLINEAR: one epoch = one pass over the (active)
    coordinates in a random order drawn from ``random_state``; each coordinate is
    minimized exactly, r_i <- proj_[0, gamma](r_i - G_i / Q_ii), while w~ = H~^T r is kept
    up to date (O(nnz(x_i)) per coordinate, also with implicit centering). Optional
    LIBLINEAR shrinking.

    Stopping: ``certified_points`` with the bound eps = ||p(r)|| / mu (p the projected
    gradient at the end of the epoch, one extra pass over X, computed only when the
    estimate from the epoch's own entries would certify, or every epoch with
    ``bound_check="always"``); or ``liblinear`` (max - min projected gradient over the
    epoch <= tol). Sequential: refused on dask arrays (``_DCD_SEQUENTIAL``).

    References
    ----------
    .. [1] "Data-Dependent Complexity of First-Order Methods for Support Vector
       Machines", arXiv:2512.03947 (2025).
    .. [2] C.-J. Hsieh, K.-W. Chang, C.-J. Lin, S. S. Keerthi, S. Sundararajan, "A Dual
       Coordinate Descent Method for Large-scale Linear SVM", ICML 2008.
    """

    provides = ("error_bound", "n_certified", "objective", "projected_gradient_gap")
    default_max_iter = 1000
    #: sequential sweeps: one in-memory block only (refused on a dask array)
    blocked = False
    #: every epoch reads every stored entry of the rows (``Solver.sparse_rows``)
    sparse_rows = True
    not_blocked = _DCD_SEQUENTIAL
    param_table = {
        **_COMMON_PARAMS,
        "shrinking": Param(True, types=bool, doc="LIBLINEAR's shrinking of the active set"),
        "bound_check": Param("lazy", types=str, options=("lazy", "always"),
                             doc="full projected-gradient pass: only when the cheap estimate "
                                 "certifies ('lazy') or every epoch ('always')"),
    }

    def start(self, problem):
        if _kernel.is_exact(problem.kernel):
            return _kernel.start_dcd(self, problem, certify_target(problem))
        weights = getattr(problem, "sample_weight", None)
        gamma, mu = _gamma_mu(self.params, problem.X.shape[0], weights)
        blocked, identity = _prepare(problem, self.params["scale"], diag_shift=mu)
        data = blocked.local()
        if data is None:
            raise ValueError(_DCD_SEQUENTIAL)
        box = run_box(gamma, weights, data.n)
        gmax, low = _box_scales(box, mu)
        check_scales(self.name, data, gmax, mu, level=low, C=gamma,
                     weight_max=None if weights is None else float(np.max(weights)))
        # the epochs' SplitMix64 stream is seeded from 64 bits of the run's generator
        seed = problem.rng.bit_generator.random_raw()
        state = _DCDState(data, problem.y, gamma, mu, seed, self.params["shrinking"],
                          self.params["bound_check"], certify_target(problem),
                          gap_target(problem), box)
        state.weighted = weights is not None
        state.fit = (data, identity)
        state._solver = self
        return state

    def finalize(self, problem, state, status):
        if getattr(state, "kernel_run", False):
            return state.result_fields(problem, status)
        data, identity = state.fit
        t_bar = float(state.scal[0])
        coef = state._coef
        finite = math.isfinite(state.error_bound)
        certify = finite and state.n_certified > 0  # the number of points in mask
        if certify:
            # the model of a certificate from r afresh: the epochs' incremental w keeps the
            # rounding of every past update, which the referee cannot tell from a wrong
            # coefficient on a column whose rows are all at r_i = 0 (w(r)_j = 0 and
            # |X|^T r = 0 there); kept for the iteration (the claim's check and the
            # result both finalize at the same r)
            model = getattr(state, "_fresh_model", None)
            if model is None or model[0] != state.n_iter:
                model = state._fresh_model = (state.n_iter,
                                              *_model_from_r(data, state.y, state.r))
            t_bar, coef = model[1], model[2]
        fields = _feature_fields(data, identity, state._w_bar, t_bar, coef.copy())
        mask = state.mask if finite else np.zeros(data.n, dtype=bool)
        fields.update(dual_coef_=state.r.copy(), certified_mask=mask)
        if certify:
            fields["certificate"] = run_certificate(problem, state, status, data, mask,
                                                    state.r.copy(), self.formulation, t_bar,
                                                    fields)
        fields.setdefault("extra", {}).update(gamma=state.gamma, mu=state.mu,
                                              full_passes=state.full_passes)
        if getattr(state, "failed", None):
            fields["extra"]["failure"] = state.failed
        return fields
