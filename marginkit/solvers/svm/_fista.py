"""``fista`` and ``fista_svm``: strongly convex FISTA on the perturbed SVM duals, with
certified stopping (paper sections 2.2-2.3, 5.1 and appendix C).

The run's r lives in its row blocks (one in-memory block, or a dask array's chunks);
one iteration is one fused pass over each block's rows (``_fast.fista_iteration``,
OpenMP over sub-blocks) and the driver reduces the partial sums in block order. The
error bound is kappa ||y_k - r_{k+1}|| plus a bound on the step's own rounding
(``fista_rounding``), or the long-double ||p(r)|| / mu where that is smaller. Exact
kernels run in ``_kernel``.

References
----------
.. [1] "Data-Dependent Complexity of First-Order Methods for Support Vector Machines",
   arXiv:2512.03947 (2025).
.. [2] A. Beck, "First-Order Methods in Optimization", SIAM, 2017, section 10.7.7.
"""
import math
import numbers

import numpy as np

from ... import _referee as R
from ..._registry import _register_builtin
from ..._validation import Param
from ...plugins import SolverState
from ...utils._threads import ThreadChoice, single_threaded_blas
from . import _fast as _f
from . import _kernel
from ._base import _COMMON_PARAMS, _CertifiedSVM, _ClaimOffers
from ._certificate import run_certificate
from ._data import _feature_fields, _in_order, _prepare
from ._lipschitz import lipschitz_bound
from ._projection import project_blocks
from ._rules import StallWatch, certify_target, stalled_reason
from ._thresholds import _box_scales, _gamma_mu, certify_levels, check_scales, run_box


def fista_rounding(rc, beta, L, mu, rk, rk1, augmented, t=0.0):
    """The rounding term of the FISTA error bound at the step from (r_k, r_{k-1}), each
    given as (sum r, sum r^2) (docs/svm.md section 2, "Rounding"): an upper bound of
    (||g_computed(y_k) - g(y_k)|| + L ||delta_v||) / mu, where g is the gradient at the
    computed extrapolation point y_k and delta_v the rounding of y_k + g / L (and, for
    the classical SVM, of its shift by the multiplier, t = L lambda)."""
    rn = (1.0 + beta) * math.sqrt(rk[1]) + beta * math.sqrt(rk1[1])   # >= ||rho||
    B = (1.0 + beta) * rk[0] + beta * rk1[0]                           # = e^T rho
    rxi = min(rn * rc.xi_norm, B * rc.xi_max)                          # >= rho . xi
    om = rc.xim_norm * (rxi + B * rc.mu_m) + (rc.sqrt_n * B if augmented else 0.0)
    gnorm = rc.sqrt_n + om + mu * rn                                   # >= ||g_computed||
    dg = rc.gK * om + rc.g3 * gnorm + rc.under
    u = R.UNIT
    dv = 2.0 * u * gnorm + u * L * rn + 2.0 * L * R.ETA * rc.sqrt_n
    if not augmented:
        dv += u * (L * rn + gnorm + abs(t) * rc.sqrt_n)
    return (dg + dv) / mu * (1.0 + 16 * u)


# Block kernels of FISTA: the dual variables of a block's rows (r, r_prev, the scratch
# r_buf) live in block.v beside its rows; a, b (the d-vector X^T (y * r) and y^T r) are
# the driver's. In memory the one block runs the whole iteration in one fused call
# (``_fast.fista_iteration``: OpenMP over sub-blocks of rows); on several blocks each
# block runs the same call on its rows and the driver reduces the partial sums in block
# order (the bound and the certified count need the global ||y_k - r_{k+1}||).
def _k_set_box(block, box, level):
    """The block's share of the run's per-point bounds and levels (``block.v``)."""
    block.v["box"], block.v["level"] = box, level


def _set_box(ex, box, level):
    ex.map_each(_k_set_box, list(zip(ex.split(box), ex.split(level))))


def _k_fista_open(block, augmented, threads):
    data = block.v["svm"]
    n, d = data.n, data.d
    nnz = float(n) * d if not data.sparse else float(data.indptr[-1])
    ns = _f.fista_blocks(n, d, nnz)
    block.v.update(r=np.zeros(n), r_prev=np.zeros(n), r_buf=np.zeros(n),
                   fista=dict(a=[np.zeros(d) for _ in range(3)], k=0, v=np.zeros(d),
                              shape=(n, d, nnz), threads=ThreadChoice(threads), nt=1,
                              bufs=np.zeros((ns, d)), parts=np.zeros((ns, 4)),
                              active=np.zeros(n, dtype=np.intp),
                              yk=None if augmented else np.zeros(n),
                              vproj=None if augmented else np.zeros(n)))


def _begin_threads(st):
    """The thread count of the block's iteration that starts now (``ThreadChoice``: one
    thread or the OpenMP team, whichever this run measured faster; within the OpenMP
    limit read now)."""
    st["nt"] = st["threads"].begin(_f.fista_threads(*st["shape"]))
    return st["nt"]


def _k_thread_summary(block):
    return block.v["fista"]["threads"].summary()


def _k_thread_events(block):
    """The block's thread choices made since the last call (and forgets them)."""
    choice = block.v["fista"]["threads"]
    events, choice.events = choice.events, []
    return events


def _next_a(st):
    """The block's output d-vector for this iteration: one of three, never the a or
    a_prev the driver holds from the two iterations before."""
    st["k"] += 1
    return st["a"][st["k"] % 3]


def _rotate(v, r_new):
    v["r_buf"], v["r_prev"], v["r"] = v["r_prev"], v["r"], r_new


def _rmin(r, several):
    """min r over the block, for a driver of several blocks (one block counts itself)."""
    return (float(r.min()) if r.size else math.inf) if several else None


def _k_fista_step(block, a_prev, a, b_prev, b, s, m, M, beta, L, mu, kappa, unit, rho,
                  several):
    """One FISTA iteration on the block's rows (``_fast.fista_iteration``); returns
    (X_b^T (y * r_new), the call's results (b_new, eps, ncert, rsum, rsq, wsq, dsq) for
    the block, min r_new)."""
    data, v = block.v["svm"], block.v
    st = v["fista"]
    r_new, a_new = v["r_buf"], _next_a(st)
    out = _f.fista_iteration(data.rows, block.y, v["r_prev"], v["r"], a_prev, a, b_prev, b,
                             s, m, M, data.c, beta, L, mu, v["box"], kappa, v["level"], r_new,
                             a_new, st["v"], st["bufs"], st["parts"], st["active"], unit, rho,
                             _begin_threads(st))
    _rotate(v, r_new)
    return a_new, out, _rmin(r_new, several)


def _k_fsvm_gradient(block, a_prev, a, b_prev, b, s, m, M, beta, L, mu, lam0):
    """First half of a classical-SVM iteration on the block (``fista_svm_gradient``):
    y_k and the point to project, kept in the block; returns the block's share of
    (phi, n_free) at the projection's warm start ``lam0``."""
    data, v = block.v["svm"], block.v
    st = v["fista"]
    return _f.fista_svm_gradient(data.rows, block.y, v["r_prev"], v["r"], a_prev, a, b_prev,
                                 b, s, m, M, data.c, beta, L, mu, st["v"], st["yk"],
                                 st["vproj"], lam0, v["box"], st["parts"],
                                 _begin_threads(st))


def _k_fsvm_finish(block, lam, kappa, s, m, unit, rho, feas, gK, several):
    """Second half on the block (``fista_svm_finish``), as ``_k_fista_step`` returns."""
    data, v = block.v["svm"], block.v
    st = v["fista"]
    r_new, a_new = v["r_buf"], _next_a(st)
    out = _f.fista_svm_finish(data.rows, block.y, st["yk"], st["vproj"], lam, v["box"],
                              kappa, v["level"], s, m, r_new, a_new, st["bufs"], st["parts"],
                              st["active"], unit, rho, feas, gK, st["nt"])
    _rotate(v, r_new)
    return a_new, out, _rmin(r_new, several)


def _k_count_above(block, eps):
    """#{i in the block: level_i - r_i > eps}."""
    return int(np.count_nonzero(block.v["level"] - block.v["r"] > eps))


def _k_free_with_room(block, delta):
    r = block.v["r"]
    return int(np.count_nonzero(np.minimum(r, block.v["box"] - r) > delta))


def _k_fresh_scatter(block):
    """First pass of the long-double bound ||p(r)|| / mu on the block
    (``_fast.fresh_scatter``): (X_b^T (y r), y_b^T r_b, r_b . xi_b) in long double."""
    data = block.v["svm"]
    fresh, ld = np.zeros(data.d, dtype=np.longdouble), np.zeros(1, dtype=np.longdouble)
    # on the threads of the iteration (the run's ``ThreadChoice``)
    rxi = _f.fresh_scatter(data.rows, block.y, block.v["r"], data.xi, fresh, ld,
                           block.v["fista"]["nt"])
    return fresh, ld[0], rxi


def _k_fresh_margins(block, coef, ld, t_col, t_shift, mu):
    """Second pass: the block's sum of p_i(r)^2 (long double)."""
    data = block.v["svm"]
    ld = np.array(ld, dtype=np.longdouble)
    _f.fresh_margins(data.rows, block.y, block.v["r"], coef, ld, t_col, t_shift, mu,
                     block.v["box"])
    return ld[2]


class _FistaState(_ClaimOffers, SolverState):
    """State of strongly convex FISTA (Beck 2017, sec. 10.7.7) on the perturbed dual,
    over the row blocks of ``data`` (a ``_Blocked``): r lives in the blocks, a = X^T (y r)
    and b = y^T r here. ``box`` is the n-vector of the per-point bounds gamma_i
    (``run_box``; C everywhere for an unweighted run), ``gamma`` the run's C."""

    slack_masks = True  # its certificates come from ``run_certificate``

    def __init__(self, data, gamma, mu, L, augmented, power_iterations, box=None,
                 threads="auto", verbose=0):
        n, d = data.n, data.d
        self.data, self.ex = data, data.executor
        self.gamma, self.mu, self.L = gamma, mu, L
        self.box = run_box(gamma, None, n) if box is None else box
        self.level = certify_levels(self.box, mu)
        # the scales of the bounds: the largest gamma_i (C for an unweighted run)
        self.gamma_max = gmax = float(self.box.max(initial=0.0))
        self.level_max = float(self.level.max(initial=0.0))
        self.kappa = L / mu
        sk = np.sqrt(self.kappa)
        self.beta = (sk - 1.0) / (sk + 1.0)
        self.augmented = augmented
        self.power_iterations = power_iterations
        # the error bound: kappa ||y_k - r_{k+1}|| (its 1/kappa slack covers the rounding
        # of the norm while (kappa - 1) gamma_{n+8} <= 1) plus the rounding term of the
        # step, in units of the power of two at or above gamma
        self.kappa_bound = max(self.kappa, (self.kappa - 1.0) * (1.0 + R.gamma(n + 8)))
        self.unit = float(R.pow2_at_least(gmax))
        self.rc = data.rounding_constants(gmax)
        self._rc_long = self.rc.array_long_double()
        self.fresh_bounds = 0  # iterations that fell back on the projected-gradient bound
        self.certify_above = 0.0  # fewest certified points a rule fires at (start)
        # a run with a certified-points rule ends when no more points can be
        self.stall = None  # a StallWatch, set by start when a rule counts certified points
        self.failed = None
        self._sums = ((0.0, 0.0), (0.0, 0.0))  # (sum r, sum r^2) of r_k and r_{k-1}
        self.rounding = 0.0
        self.a_prev, self.a = np.zeros(d), np.zeros(d)
        self.b_prev = self.b = 0.0
        self.t_bar = 0.0            # classical SVM: intercept L * lambda of the last projection
        self._lam = 0.0             # warm start of the projection's multiplier
        self._one = data.local()    # the in-memory block (fused calls), or None
        # each block's thread choice (``ThreadChoice``) lives in its state; at verbose >= 2
        # an in-memory run prints every change
        self.ex.map(_k_fista_open, augmented, threads)
        self._say_threads = verbose >= 2 and self._one is not None
        _set_box(self.ex, self.box, self.level)
        self.n_iter = 0
        self.error_bound = np.inf
        self.n_certified = 0
        self.objective = 0.0

    @property
    def r(self):
        """r_k (gathered from the blocks)."""
        return self.ex.gather("r")

    def _reduce(self, parts, feas=0.0):
        """(a_new, b_new, eps, ncert, rsum, rsq, wsq) from the blocks' results."""
        if len(parts) == 1:  # the block's bound and count are the global ones
            a_new, (b_new, eps, ncert, rsum, rsq, wsq, _), _ = parts[0]
            return a_new, b_new, eps, ncert, rsum, rsq, wsq
        a_new = _in_order([q[0] for q in parts])
        b_new = rsum = rsq = dsq = 0.0
        for q in parts:
            out = q[1]
            b_new += out[0]
            rsum += out[3]
            rsq += out[4]
            dsq += out[6]
        rmin = min(q[2] for q in parts)
        eps = self.kappa_bound * (math.sqrt(dsq) * self.unit) + self.rounding_now
        if feas != 0.0:
            eps = eps + feas * (abs(b_new) + self.rc.gK * rsum)
        ncert = 0
        if self.level_max - rmin > eps:  # a second map only once a point can be certified
            ncert = sum(self.ex.map(_k_count_above, eps))
        s, m = self.data.s, self.data.m
        wsq = _f.w_bar_sq(a_new, b_new, s, m) + (b_new * b_new if self.augmented else 0.0)
        return a_new, b_new, eps, ncert, rsum, rsq, wsq

    def _count_above(self, thr):
        return sum(self.ex.map(_k_count_above, thr))

    def step(self):
        data, ex = self.data, self.ex
        rk, rk1 = self._sums
        s, m, M = data.s, data.m, data.M
        common = (self.a_prev, self.a, self.b_prev, self.b, s, m, M, self.beta, self.L, self.mu)
        if self.augmented:
            rho = self.rounding_now = fista_rounding(self.rc, self.beta, self.L, self.mu, rk,
                                                     rk1, True)
            # the whole iteration in one call per block (extrapolation, passes, bound)
            parts = ex.map(_k_fista_step, *common, self.kappa_bound, self.unit, rho,
                           ex.n_chunks > 1)
            a_new, b_new, eps, ncert, rsum, rsq, wsq = self._reduce(parts)
        else:
            # the gradient pass also evaluates the projection's search at its warm start
            first = ex.map(_k_fsvm_gradient, *common, self._lam)
            # the same steps on one block as on several (each a map over the blocks)
            lam = self._lam = project_blocks(ex, self._lam, self.gamma_max, first)
            self.t_bar = self.L * lam
            rho = self.rounding_now = fista_rounding(self.rc, self.beta, self.L, self.mu, rk,
                                                     rk1, False, self.t_bar)
            feas = (1.0 + self.kappa) * (1.0 + 1e-15)
            parts = ex.map(_k_fsvm_finish, lam, self.kappa_bound, s, m, self.unit, rho, feas,
                           self.rc.gK, ex.n_chunks > 1)
            a_new, b_new, eps, ncert, rsum, rsq, wsq = self._reduce(parts, feas)
            if ncert:
                # the residual of y^T r = 0 is spread over a free coordinate with room
                # (docs/svm.md section 3): without one the bound does not hold
                # (none is needed where r is on it exactly, delta = 0, as the referee
                # reads it: found by review, a class all at weight 0 has r* = 0, and the
                # run went to max_iter with an infinite bound)
                delta = abs(b_new) + self.rc.gK * rsum
                if delta > 0.0 and sum(ex.map(_k_free_with_room, delta)) == 0:
                    eps, ncert = np.inf, 0
        self.a_prev, self.a = self.a, a_new
        if eps < math.inf and rho > 0.0 and self._rounding_decides(eps, rho, ncert):
            # the rounding term alone keeps the certified-points rule from firing, or it
            # dominates the bound: bound ||r - r*|| by ||p(r)|| / mu computed in long double
            # instead, when smaller (valid for any feasible r, docs/svm.md sections 2, 4)
            fresh = self._fresh_bound(rsum, rsq)
            if not self.augmented:
                fresh += (1.0 + self.kappa) * (abs(b_new) + self.rc.gK * rsum) * (1.0 + 1e-15)
            self.fresh_bounds += 1
            if fresh < eps:
                eps = fresh
                ncert = self._count_above(eps)
        self.b_prev, self.b = self.b, b_new
        self._sums = ((rsum, rsq), rk)
        if self._say_threads:
            for k, msg in _k_thread_events(ex.workers[0]):
                print(f"[{self._solver.name or 'fista'}] iter {k:6d}  {msg}", flush=True)
        self.rounding = rho
        self.error_bound = eps
        self.n_certified = ncert
        if self.stall is not None and self.stall.update(eps) and ncert <= self.certify_above:
            self.failed = stalled_reason(self._solver.name or "fista", eps, ncert, self.data.n,
                                         self.stall.window)
        self.objective = -0.5 * wsq + rsum - 0.5 * self.mu * rsq

    def _fresh_bound(self, rsum, rsq):
        """||p(r_k)|| / mu plus its rounding bound, sums in long double
        (``_fast._fresh_bound``): two passes over the blocks, reduced in block order."""
        data, ex = self.data, self.ex
        t_col, t_shift = (1.0, 0.0) if self.augmented else (0.0, self.t_bar)
        parts = ex.map(_k_fresh_scatter)
        coef = _in_order([q[0] for q in parts])
        b, rxi = np.longdouble(0.0), 0.0
        for q in parts:
            b += q[1]
            rxi += q[2]
        ld = np.array([b, 0.0, 0.0], dtype=np.longdouble)
        _f.fresh_coefficients(coef, data.s, data.m, ld)
        acc = np.longdouble(0.0)
        for q in ex.map(_k_fresh_margins, coef, ld, t_col, t_shift, self.mu):
            acc += q
        return _f.fresh_tail(np.array([acc], dtype=np.longdouble), rxi, rsum, rsq,
                             self._rc_long, t_col, t_shift, self.mu)

    def _rounding_decides(self, eps, rho, ncert):
        """Whether the fallback bound is worth its pass: the rounding term exceeds the
        FISTA term, or without it the rule (more than ``certify_above`` points) would
        fire and with it does not."""
        if rho >= eps - rho:
            return True
        need = self.certify_above
        if ncert > need or rho < 1e-3 * eps:
            # the rule fires anyway, or the term is too small to hold it back but for a
            # point within 1e-3 eps of its level (one iteration later at worst): no O(n) count
            return False
        return self._count_above(eps - rho) > need

    def snapshot(self):
        return {"objective": self.objective, "error_bound": self.error_bound,
                "n_certified": float(self.n_certified)}


#: the most threads ``threads`` may ask for (the passes take a C int, and no OpenMP team
#: comes near this; found by review: 2**31 passed the check and overflowed in Cython)
MAX_THREADS = 2 ** 15


def _threads_param(value, name, owner):
    """'auto', or the number of threads (an integer from 1 to ``MAX_THREADS``) as a
    Python int."""
    if isinstance(value, str):
        if value != "auto":
            raise ValueError(f"{owner}: {name}={value!r} is not valid; use 'auto' or an "
                             f"integer >= 1")
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{owner}: {name}={value!r} must be 'auto' or an integer >= 1")
    if value < 1:
        raise ValueError(f"{owner}: {name}={value} is out of range; use 'auto' or an "
                         f"integer >= 1")
    if value > MAX_THREADS:
        raise ValueError(f"{owner}: {name}={value} is out of range; use 'auto' or an "
                         f"integer <= {MAX_THREADS} (the threads run within the OpenMP limit "
                         "anyway)")
    return int(value)


def _thread_fields(summaries):
    """``Result.extra`` fields of the blocks' thread choices: ``threads``, the thread
    count of the last iteration (the largest over blocks), and ``thread_choice``: the
    policy, the OpenMP limit seen, the iterations run on one thread and on the team
    (summed over blocks) and the probes of the team."""
    out = dict(summaries[0])
    for q in summaries[1:]:
        out["last"] = max(out["last"], q["last"])
        out["max"] = max(out["max"], q["max"])
        for key in ("one_thread_iterations", "team_iterations", "probes", "probes_put_off"):
            out[key] += q[key]
    return {"threads": out.pop("last"), "thread_choice": out}


class _FistaBase(_CertifiedSVM):
    provides = ("error_bound", "n_certified", "objective")
    default_max_iter = 10_000
    param_table = dict(_COMMON_PARAMS, threads=Param(
        "auto", validator=_threads_param,
        doc="OpenMP threads of the passes: 'auto' (one thread or the team, whichever the "
            f"run measures faster) or at most this many (1 to {MAX_THREADS}); always within "
            "the OpenMP limit"),
        gram_norm=Param(None, types=numbers.Real, low=0, allow_none=True,
                        doc="an upper bound of ||Z~||_2^2 (fista) or ||Z||_2^2 (fista_svm) "
                            "from an earlier run on the same rows: its "
                            "extra['gram_norm'] (None: computed)"))
    augmented = True
    #: runs on any executor (``Problem.executor``: one in-memory block, a dask array's chunks)
    blocked = True
    #: every iteration reads every stored entry of the rows (``Solver.sparse_rows``)
    sparse_rows = True

    @property
    def formulation(self):
        """The dual the claims are checked in: "hsvm" for ``fista`` (rows y_i (z_i, 1)),
        "svm" for ``fista_svm``."""
        return "hsvm" if self.augmented else "svm"

    def start(self, problem):
        given = self.params["gram_norm"]
        if _kernel.is_exact(problem.kernel):
            if given is not None:
                raise ValueError(
                    f"{self.name}: gram_norm bounds the norm of the rows of a feature space "
                    "(the linear kernel or a kernel approximation); an exact kernel's Gram "
                    "operator is bounded by the run itself: leave gram_norm=None")
            return _kernel.start_fista(self, problem, self.augmented)
        # a number of threads caps the start's passes over X too ("auto": the OpenMP
        # limit for these one-time passes, whose parts a busy core delays one at a time)
        requested = self.params["threads"]
        data, identity = _prepare(problem, self.params["scale"],
                                  threads=0 if requested == "auto" else int(requested))
        weights = getattr(problem, "sample_weight", None)
        gamma, mu = _gamma_mu(self.params, data.n, weights)
        box = run_box(gamma, weights, data.n)
        gmax, low = _box_scales(box, mu)
        budget = getattr(getattr(problem, "config", None), "memory_budget", 2.0 * 2**30)
        if given is not None:
            # the bound of an earlier run on the same rows (a one-vs-rest fit's first
            # class): ||Z~||_2 depends on the rows and their scaling, not on y or the box
            lam, info = float(given), {"method": "given", "passes": 0}
            # ||Z~||_2^2 >= ||Z~||_F^2 / rank: a value below that is not a bound of these
            # rows (0 is one only when every standardized row is 0)
            cols = data.d + (1 if self.augmented else 0)
            fro = data.zsq_sum + (data.n if self.augmented else 0.0)
            least = fro / max(1, min(data.n, cols))
            if lam < least * (1.0 - 1e-6):
                raise ValueError(
                    f"{self.name}: gram_norm={lam:.6g} is below ||Z~||_F^2 / min(n, d) = "
                    f"{least:.6g}, a lower bound of ||Z~||_2^2 on these rows; pass the "
                    "extra['gram_norm'] of a run on the same rows, or gram_norm=None")
            if not lam / mu <= 2.0 ** 900:
                raise ValueError(
                    f"{self.name}: gram_norm={lam:.3g} with mu = {mu:.3g} makes the condition "
                    "number (mu + gram_norm) / mu overflow the error bound; pass the "
                    "extra['gram_norm'] of a run on the same rows, or gram_norm=None")
        else:
            # L's BLAS/LAPACK calls on one thread: OpenBLAS workers keep spinning after a
            # call and would take a core from the OpenMP iterations that follow
            with single_threaded_blas():
                lam, info = lipschitz_bound(data, self.augmented, budget,
                                            deadline=getattr(problem, "deadline", None))
        check_scales(self.name, data, gmax, mu, mu + lam, level=low, C=gamma,
                     weight_max=None if weights is None else float(np.max(weights)))
        state = _FistaState(data, gamma, mu, mu + lam, self.augmented, info["passes"], box,
                            self.params["threads"],
                            getattr(getattr(problem, "config", None), "verbose", 0) or 0)
        state.weighted = getattr(problem, "sample_weight", None) is not None
        state.lipschitz_method = info["method"]
        state.gram_norm = float(lam)
        target = certify_target(problem)
        if target is not None:
            state.certify_above = target
            # FISTA's linear rate divides the error by e in about sqrt(kappa) iterations
            state.stall = StallWatch(state.level, math.sqrt(state.kappa))
        state.fit = (data, identity)
        state._solver = self
        return state

    def finalize(self, problem, state, status):
        if getattr(state, "kernel_run", False):
            return state.result_fields(problem, status)
        data, identity = state.fit
        w_bar = data.w_bar(state.a, state.b)
        t_bar = state.b if self.augmented else state.t_bar
        fields = _feature_fields(data, identity, w_bar, t_bar)
        r = state.r.copy()
        mask = state.level - r > state.error_bound
        fields.update(dual_coef_=r, certified_mask=mask)
        if mask.any():
            fields["certificate"] = run_certificate(problem, state, status, data, mask,
                                                    r.copy(), self.formulation, t_bar, fields)
        extra = fields.setdefault("extra", {})
        extra.update(L=state.L, kappa=state.kappa, gamma=state.gamma, mu=state.mu,
                     power_iterations=state.power_iterations,
                     lipschitz_method=state.lipschitz_method, gram_norm=state.gram_norm,
                     t_bar=t_bar,
                     **_thread_fields(state.ex.map(_k_thread_summary)))
        if state.failed:
            extra["failure"] = state.failed
        return fields


@_register_builtin("solver", "fista")
class Fista(_FistaBase):
    """Strongly convex FISTA on the perturbed H-SVM dual with certified stopping.

    arXiv:2512.03947, sections 2.2-2.3 and 5.1 (Algorithm 1); Beck (2017), sec. 10.7.7::

        y_k = r_k + beta (r_k - r_{k-1}),  beta = (sqrt(kappa) - 1)/(sqrt(kappa) + 1),
        r_{k+1} = proj_[0, gamma]^n (y_k + grad g(y_k) / L),  kappa = L / mu,

    with L = mu + ||Z~||_2^2 (an upper bound: ``lipschitz_bound``) and the error bound
    eps_{k+1} = kappa ||y_k - r_{k+1}|| + rho_k >= ||r_{k+1} - r*||, rho_k the rounding term
    of the computed step (``fista_rounding``; the long-double ||p(r)|| / mu where it
    dominates; docs/svm.md section 2). One iteration is one fused pass
    over the rows of X (Z~ w~(y_k) gathered, X^T (y * r_{k+1}) scattered); w~ is linear
    in r, so w~(y_k) comes from the stored w~(r_k), w~(r_{k-1}).

    Parameters
    ----------
    C : float or None
        gamma, the box bound (None: 64/n).
    mu : float or None
        The perturbation (None: n/128, or 1/(2C) with a given C; divided by the largest
        sample weight in a weighted run).
    scale : {"std", "scale", None}
        "std": implicit centering and scaling by the training standard deviation
        (paper section 5.1); coef_ and intercept_ are returned in the original space.
        With a kernel approximation (``nystroem``, ``rff``) the solver works on
        Phi = feature_map(X) and "std" standardizes the columns of Phi (training
        statistics); coef_ is None, ``extra["feature_space_coef"]`` and intercept_ give
        the classifier on Phi(x), and predict applies the kernel's fitted map.
    threads : "auto" or int
        OpenMP threads of the passes over X. "auto" (default): each run times its own
        iterations and uses one thread or the team, whichever is faster; the team is
        tried only while one thread gets its core (on busy cores a team that waits for
        its slowest thread at every iteration is many times slower). An int from 1 to
        32768 (``MAX_THREADS``): at most that many, every iteration. Always within the OpenMP limit (OMP_NUM_THREADS,
        ``threadpoolctl.threadpool_limits``); the result does not depend on it. The
        choice is ``extra["threads"]`` (last iteration) and ``extra["thread_choice"]``;
        ``verbose=2`` prints its changes. ``fista_svm`` takes the same parameter.
    gram_norm : float or None
        An upper bound of ||Z~||_2^2, the squared norm of the standardized rows (None:
        computed by ``lipschitz_bound``, ``extra["lipschitz_method"]``). It depends on X,
        ``scale`` and the feature map only, not on y, C or the weights, so a run on the
        same rows can take ``extra["gram_norm"]`` of an earlier one: the one-vs-rest
        fits of ``SVMClassifier`` compute it once. A value below the true norm makes
        the step too long and the solver's error bound wrong: the iterations can diverge
        and the run end at ``max_iter`` without a claim (seen below about half the true
        norm), but the referee's check does not use it, so never a false certificate. A
        value below ||Z~||_F^2 / min(n, d + 1), a lower bound of the norm (0 on rows that
        are not all 0), is refused.
        ``fista_svm`` takes it for ||Z||_2^2. Not for exact kernels.

    References
    ----------
    .. [1] "Data-Dependent Complexity of First-Order Methods for Support Vector
       Machines", arXiv:2512.03947 (2025).
    .. [2] A. Beck, "First-Order Methods in Optimization", SIAM, 2017, section 10.7.7.
    """

    augmented = True


@_register_builtin("solver", "fista_svm")
class FistaSVM(_FistaBase):
    """FISTA on the perturbed dual of the classical SVM (unregularized intercept).

    arXiv:2512.03947, appendix C: the dual adds y^T r = 0, so each step projects onto
    Omega = {0 <= r <= gamma, y^T r = 0} exactly (breakpoint search, see
    ``project_box_hyperplane``), with L = mu + ||Z||_2^2. The intercept is t = L lambda,
    lambda the multiplier of the last projection (derivation in docs/svm.md), and the
    certified-point test is the same as for ``fista``.

    References
    ----------
    .. [1] "Data-Dependent Complexity of First-Order Methods for Support Vector
       Machines", arXiv:2512.03947 (2025).
    .. [2] A. Beck, "First-Order Methods in Optimization", SIAM, 2017, section 10.7.7.
    .. [3] P. Brucker, "An O(n) algorithm for quadratic knapsack problems", Operations
       Research Letters 3(3), 1984.
    """

    augmented = False
