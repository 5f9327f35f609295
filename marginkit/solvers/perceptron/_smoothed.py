"""The smoothed methods of Ramdas & Pena 2014: ``snkp`` and ``snkpvn``, and the smoothed
iteration ``isnkpvn`` runs.

SNKP (sec. 4) smooths the NKP's loss with the entropy prox-function, SNKPVN(q, delta)
(sec. 6) with ||p - q||^2 / 2 centred at q; ISNKPVN (sec. 6, ``_iterated``) restarts
SNKPVN at shrinking accuracies. They are written once, as ``SmoothedIteration`` over the
row blocks of ``problem.executor``: the driver holds the scalars (k, mu, norms, delta)
and makes every decision; the n-vectors live on the blocks (``SmoothedBlock``), whose
passes return partial sums reduced here in block order. In memory the single block runs
a whole iteration in one nogil call; on a dask array each block is a chunk held by a
worker.

The paper's reference is in the package docstring (``marginkit.solvers.perceptron``).
"""
import math
import numbers

import numpy as np
import scipy.sparse as sp

from ..._registry import _register_builtin
from ..._validation import Param
from ...linalg._operator import FeatureOperator
from ...smoothers.builtin import cython_smoother
from ._fast import SmoothedBlock
from ._blocks import _BlockDriver, _block_operator, _gnorm
from ._family import _FamilyState, _PerceptronFamily
from ._finish import _ExactFinish, _setup_finish
from ._gram_bound import bound_from_cross, normalized_feature_cross


def _check_q(value, name, owner):
    """SNKPVN's centre ``q`` as a float64 vector, checked to be finite and in the simplex."""
    if sp.issparse(value):
        raise TypeError(f"{owner}: {name} must be a dense vector in the simplex, got a "
                        f"sparse {type(value).__name__}; pass {name}.toarray().ravel()")
    try:
        given = np.asarray(value)
        q = np.array(given, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise TypeError(f"{owner}: {name} must be a vector of real numbers in the simplex, "
                        f"got {type(value).__name__}") from None
    if q.size == 0 or not np.all(np.isfinite(q)):
        raise ValueError(f"{owner}: {name} must be a finite vector in the simplex")
    # entries rounded in their own precision (found by review: the uniform q in float32
    # sums to 1 - 1.5e-8 and was refused at 1e-8), then scaled onto the simplex
    unit = float(np.finfo(given.dtype).eps) / 2 if given.dtype.kind == "f" else 0.0
    if q.min() < 0 or abs(q.sum() - 1.0) > max(1e-8, 4 * unit):
        raise ValueError(f"{owner}: {name} must lie in the simplex (q >= 0, sum(q) = 1); "
                         f"got min {q.min():.3g}, sum {float(q.sum())!r}")
    return q / q.sum()


def _k_sb(block, name, *args):
    """``block.v["sb"].<name>(*args)``: a pass of the block's ``SmoothedBlock``."""
    return getattr(block.v["sb"], name)(*args)


def _k_sb_get(block, name):
    """The block's piece of an n-vector (``alpha``, ``p``, ``best_p``, ...)."""
    return getattr(block.v["sb"], name + "_arr")


def _k_sb_init(block, op, smoother, q, n_total, finish_cap):
    """Set up the block: ``op`` its Gram operator (the whole problem's, in memory) or None
    (a chunk of a dask array: the block's ``FeatureOperator``, linear kernel), ``smoother``
    a ``SimplexSmoother`` or the name of a built-in one. Returns the global indices of the
    block's all-zero rows (then nothing is set up) or None."""
    if op is None:
        op = _block_operator(block, True)
        if not isinstance(op, FeatureOperator):
            return op
    if isinstance(smoother, str):
        from ...smoothers._smoothers import EntropySmoother, L2Smoother

        smoother = EntropySmoother() if smoother == "entropy" else L2Smoother()
    block.v["sb_op"] = op
    block.v["sb"] = SmoothedBlock(op, smoother, q, block.offset, n_total)
    _setup_finish(block, op, finish_cap)
    return None


def _k_sb_cross(block):
    """Phi_c^T Phi_c of the block's normalized rows, or None (see ``gram_norm_bound``)."""
    return normalized_feature_cross(block.v["sb_op"])


def _smoother_kind(smoother):
    """'entropy' or 'l2' for the built-in smoothers (they run on blocks), else None."""
    from ..._registry import get_plugin

    for name in ("entropy", "l2"):
        if type(smoother) is get_plugin("smoother", name):
            return name
    return None


class SmoothedIteration(_ExactFinish, _BlockDriver):
    """SNKP / SNKPVN(q, delta) (Ramdas & Pena 2014, secs. 4 and 6) and, with ``gamma``,
    ISNKPVN(gamma, eps) as one state machine, over the blocks of an executor.

    One iteration of the algorithm box

        alpha_{k+1} = (1 - t)(alpha_k + t p_k) + t^2 p_{mu_k}(alpha_k),   t = 2/(k+3)
        mu_{k+1}    = (1 - t) mu_k
        p_{k+1}     = (1 - t) p_k + t p_{mu_{k+1}}(alpha_{k+1})

    with p_mu(alpha) = smoother.argmin(G alpha, mu, q); v = p_{mu_k}(alpha_k) and G v are
    kept from the previous iteration, so an iteration costs one product G v. G alpha is
    recomputed from scratch before a run may be declared separable, and G p before
    ||p||_G may be declared below a tolerance.

    The inner loop starts at the schedule index k0 (mu_k0 = 2 mu_0 / ((k0 + 1)(k0 + 2)));
    the paper starts at k0 = 0. Its induction (appendix) holds from any k0 at which
    ||r||_G^2 <= mu ||r||_2^2, r = p_mu(q) - q (checked exactly for the l2 smoother; always
    true at k0 = 0); a k0 that fails the check is lowered by 15% until one passes
    (``rejected_restarts`` counts them). ISNKPVN restarts the inner loop from
    q_{t+1} = p_k with delta_{t+1} = ||q_{t+1}||_G / gamma once ||p_k||_G < delta_t (at the
    index the last inner loop reached with ``warm``, else at 0).

    With ``finish_cap`` > 0 (one block only), every second step also runs one major cycle
    of a ``MinNormPoint`` on the block (Wolfe's algorithm, ``_finish``); its
    candidates are checked by the caller and taken with ``accept_finish`` or refused with
    ``refuse_finish``.

    References
    ----------
    A. Ramdas and J. Pena, "Margins, Kernels and Non-linear Smoothed Perceptrons",
    Proceedings of the 31st International Conference on Machine Learning (ICML), 2014;
    arXiv:1505.04123.
    """

    _call, _get = _k_sb, _k_sb_get

    def __init__(self, ex, smoother, mu0, q, dual_tol, op=None, gamma=None, warm=False,
                 finish_cap=0):
        super().__init__(ex, dual_tol)
        self.iterated = gamma is not None
        self.gamma = gamma
        self.warm = bool(warm)
        self.vscale = 1.0
        self.rejected_restarts = 0
        self.outer = 0
        self.delta = math.inf
        self._init_finish(finish_cap)
        kind = _smoother_kind(smoother)
        sm = cython_smoother(smoother)
        self.norm = sm.norm
        self.entropy = kind == "entropy"
        if not self.single and kind is None:
            raise ValueError(
                f"smoother {getattr(smoother, 'name', smoother)!r} is not supported on dask "
                "arrays split into several chunks; use the built-in 'entropy' or 'l2' smoother")
        if op is None and kind is None:
            raise ValueError(
                f"smoother {getattr(smoother, 'name', smoother)!r} is not supported on dask "
                "arrays; use the built-in 'entropy' or 'l2' smoother")
        # blocks reached through a client get the smoother's name, local blocks the object
        sm_arg = sm if ex.client is None else kind
        qparts = [None] * ex.n_chunks if q is None else ex.split(q)
        self._adopt_blocks(ex.map_each(_k_sb_init, [(op, sm_arg, qparts[i], self.n, finish_cap)
                                                    for i in range(ex.n_chunks)]), "sb")
        if mu0 is None and self.norm == 1:
            mu0 = 2.0  # a prox-function strongly convex in l1
        elif mu0 is None:
            # l2: mu_0 = 2 lambda, lambda >= lambda_max(G) (``gram_norm_bound``), from the
            # blocks' Phi_c^T Phi_c
            crosses = ex.map(_k_sb_cross)
            mu0 = 2.0 * (float(self.n) if any(c is None for c in crosses)
                         else bound_from_cross(np.sum(crosses, axis=0), self.n))
        self.mu0 = float(mu0)
        # alpha_0 = q, G alpha_0, p_0 = p_{mu_0}(alpha_0)
        self._map("copy", "alpha", "q")
        self._gram("alpha", "ga")
        self._start_at(0)
        if self.iterated:
            # delta_0 = ||q_0||_G / gamma, with G q_0 = G alpha_0
            self.delta = _gnorm(self._sum(self._map("dot", "q", "ga"))) / gamma
            self._settle()

    # -- the blocks ------------------------------------------------------------------
    def _own_gram(self):
        return self.single

    ga_arr = property(lambda self: self.gather("ga"))
    gp_arr = property(lambda self: self.gather("gp"))

    def primal(self):
        """w = sum_c X_c^T S_c alpha_c (blocks with a ``FeatureOperator``)."""
        return np.sum(self._map("primal", "alpha"), axis=0)

    # -- the smoother: v = p_mu(alpha), G v --------------------------------------------
    def _smooth(self, mu):
        """v = p_mu(alpha) normalized (vscale 1) and G v."""
        if self.single:
            self._map("smooth", mu)
        elif self.entropy:
            gmin = min(s[0] for s in self._map("margin_stats"))
            parts = self._map("weights", gmin, 1.0 / mu)
            scale = 1.0 / sum(p[0] for p in parts)
            self._map("scale", "v", scale)
            self._map("fdot", "gv", np.sum([p[1] for p in parts], axis=0) * scale)
        else:
            tau = self._simplex_threshold(1.0 / mu)
            self._map("fdot", "gv", np.sum(self._map("l2_final", tau), axis=0))
        self.vscale = 1.0

    def _simplex_threshold(self, inv, n_candidates=64):
        """tau with sum_i max(u_i - tau, 0) = 1 for u = q - G alpha / mu, over the blocks.

        f(tau) = S(tau) - tau C(tau) - 1 (S, C: sum and number of the entries above tau)
        is decreasing, f(max u - 1) >= 0 > f(max u). Each round evaluates f at candidate
        taus on the blocks' sorted u (2 numbers per candidate and block) and keeps the
        bracket [t_i, t_j] of neighbouring candidates with f(t_i) >= 0 > f(t_j); when no
        entry lies in (t_i, t_j], the active set {u > tau} is that of t_i and
        tau = (S(t_i) - 1) / C(t_i), the threshold of the ``l2`` smoother's projection.
        The Michelot step (S(t_i) - 1) / C(t_i) joins the next candidates.
        """
        umax = max(self._map("l2_raw", inv))
        cand = np.linspace(umax - 1.0, umax, n_candidates + 1)
        for _ in range(200):
            parts = self._map("l2_eval", cand)
            C = np.sum([p[0] for p in parts], axis=0)
            S = np.sum([p[1] for p in parts], axis=0)
            f = S - cand * C - 1.0
            ok = np.flatnonzero(f >= 0.0)
            i = int(ok[-1]) if ok.size else 0  # round-off at max u - 1: keep the lowest
            j = min(i + 1, cand.size - 1)
            if C[i] == C[j] or j == i:
                return (S[i] - 1.0) / C[i] if C[i] > 0 else cand[i]
            lo, hi = cand[i], cand[j]
            tau = (S[i] - 1.0) / C[i] if C[i] > 0 else lo
            inner = np.linspace(lo, hi, n_candidates + 1)
            if lo < tau < hi:
                inner = np.sort(np.append(inner, tau))
            cand = inner
        raise RuntimeError("simplex projection threshold did not converge")  # pragma: no cover

    # -- shared pieces -----------------------------------------------------------------
    def _reduce_margins(self, stats):
        """(min G alpha, its first global index, alpha . G alpha) from the blocks'."""
        if self.single:
            return stats[0]
        best = min(range(len(stats)), key=lambda c: (stats[c][0], c))
        return stats[best][0], int(stats[best][1]), sum(s[2] for s in stats)

    def _set_margins(self, stats):
        gmin, imin, aga = self._reduce_margins(stats)
        if gmin > 0.0:
            # about to report "separable": recompute G alpha exactly
            self._gram("alpha", "ga")
            gmin, imin, aga = self._reduce_margins(self._map("margin_stats"))
        self.imin, self.min_margin = imin, gmin
        self.alpha_norm = _gnorm(aga)

    def _start_at(self, k0):
        """The inner loop at alpha = q (G alpha known) from schedule index k0 (see the
        class docstring)."""
        if self.norm != 2:
            k0 = 0  # the check is written for the l2 prox-function
        while True:
            self.k = k0
            self.mu = self.mu0 * (2.0 / ((k0 + 1.0) * (k0 + 2.0)))
            self._smooth(self.mu)
            if k0 == 0:
                break
            sums = self._map("restart_sums")
            if sum(s[0] for s in sums) <= self.mu * sum(s[1] for s in sums):
                break
            self.rejected_restarts += 1
            k0 = (k0 * 85) // 100
        self._map("copy", "p", "v")
        self._map("copy", "gp", "gv")
        self._set_margins(self._map("margin_stats"))
        self._set_dual(self._sum(self._map("dot", "p", "gp")), self.dual_tol)

    def _iterate(self):
        """One iteration of the box; returns p . G p."""
        t = 2.0 / (self.k + 3)
        c1, c2, c3 = 1.0 - t, (1.0 - t) * t, t * t * self.vscale
        self.mu = c1 * self.mu
        if self.single:
            gmin, imin, aga, pgp, self.vscale = self._map("iterate", c1, c2, c3, self.mu, t)[0]
            stats = [(gmin, imin, aga)]
        else:
            stats = self._map("combine", c1, c2, c3)
            if self.entropy:
                parts = self._map("weights", min(s[0] for s in stats), 1.0 / self.mu)
                self.vscale = 1.0 / sum(p[0] for p in parts)
                w = np.sum([p[1] for p in parts], axis=0)
            else:
                w = np.sum(self._map("l2_final", self._simplex_threshold(1.0 / self.mu)),
                           axis=0)
                self.vscale = 1.0
            pgp = sum(self._map("finish", w, c1, t * self.vscale))
        self.k += 1
        self._set_margins(stats)
        return pgp

    def _settle(self):
        """Restart the inner loop while it has returned and the run is not over."""
        while (self.cur_dual < self.delta and self.min_margin <= 0.0
               and self.dual_norm > self.dual_tol):
            self._map("restart_at_p")
            self.delta = self.cur_dual / self.gamma
            self.outer += 1
            self._start_at(self.k if self.warm else 0)

    def step(self):
        pgp = self._iterate()
        if not self.iterated:
            self._set_dual(pgp, self.dual_tol)
            return
        self._set_dual(pgp, self.delta if self.delta > self.dual_tol else self.dual_tol)
        self._settle()
        self._finish_step()

    def smoothed_loss(self):
        """L_mu(alpha) = -<alpha, p_mu(alpha)>_G - mu d(p_mu(alpha)) + 1/2 ||alpha||_G^2
        (one block)."""
        lin, d = self._map("smoothed_loss_part", self.mu)[0]
        return float(lin - self.mu * d + 0.5 * self.alpha_norm ** 2)


class _SmoothedFamily(_PerceptronFamily):
    """The smoothed solvers: one ``SmoothedIteration`` over the row blocks of
    ``problem.executor`` (in memory: one block with the problem's Gram operator, any
    kernel; on a dask array: the chunks, linear kernel)."""

    requires = {"smoother": ("argmin_simplex",)}
    _state = _FamilyState

    def start(self, problem):
        op = self._operator(problem)
        return self._state(self._iteration(problem, problem.executor, op), op, problem)

@_register_builtin("solver", "snkp")
class SNKP(_SmoothedFamily):
    """Smoothed Normalized Kernel Perceptron (Ramdas & Pena 2014, sec. 4): accelerated
    smoothed steps on the entropy-smoothed margin, a separator within O(sqrt(log n) / rho_K)
    iterations. Its algorithm box:

        alpha_0 = 1/n, mu_0 = 2, p_0 = p_{mu_0}(alpha_0); for k = 0, 1, ...: t = 2/(k+3),
        alpha_{k+1} = (1-t)(alpha_k + t p_k) + t^2 p_{mu_k}(alpha_k), mu_{k+1} = (1-t) mu_k,
        p_{k+1} = (1-t) p_k + t p_{mu_{k+1}}(alpha_{k+1}),

    with p_mu(alpha) = softmax(-G alpha / mu) (``entropy`` smoother). Finds a separator
    within 2 sqrt(2 log n) / rho_K iterations (Theorem 1); ||p_k||_G bounds rho_K from
    above (Lemma 3). One product with G per iteration. Default ``max_iter``: 10_000.

    References
    ----------
    A. Ramdas and J. Pena, "Margins, Kernels and Non-linear Smoothed Perceptrons",
    Proceedings of the 31st International Conference on Machine Learning (ICML), 2014;
    arXiv:1505.04123.
    """

    default_smoother = "entropy"

    def _iteration(self, problem, ex, op):
        return SmoothedIteration(ex, problem.smoother, None, None, self.params["eps"], op=op)


@_register_builtin("solver", "snkpvn")
class SNKPVN(_SmoothedFamily):
    """SNKPVN(q, delta) (Ramdas & Pena 2014, sec. 6): the SNKP iteration with the smoother
    d_q(p) = ||p - q||^2 / 2 (``l2``), alpha_0 = q, mu_0 = 2 lambda, p_0 = p^q_{mu_0}(alpha_0),
    with lambda >= lambda_max(G) (``gram_norm_bound``; the paper's n at most).

    Stops with G alpha > 0 (``separable``) or ||p_k||_G <= delta (``infeasible``, a
    delta-certificate). Default ``max_iter``: 100_000.

    References
    ----------
    A. Ramdas and J. Pena, "Margins, Kernels and Non-linear Smoothed Perceptrons",
    Proceedings of the 31st International Conference on Machine Learning (ICML), 2014;
    arXiv:1505.04123.
    """

    default_smoother = "l2"
    default_stop = ("separated", "dual_certificate")
    default_max_iter = 100_000
    dual_tol_param = "delta"
    param_table = {
        "q": Param(None, allow_none=True, validator=_check_q,
                   doc="center q in the simplex (None: 1/n)"),
        "delta": Param(1e-6, types=numbers.Real, low=0, low_open=True, high=1, high_open=True,
                       doc="accuracy delta: stop when ||p||_G <= delta (below 1)"),
    }

    def _iteration(self, problem, ex, op):
        q = self.params["q"]
        if q is not None and q.shape[0] != ex.n_samples:
            raise ValueError(f"solver 'snkpvn': q has length {q.shape[0]}, X has "
                             f"{ex.n_samples} rows")
        return SmoothedIteration(ex, problem.smoother, None, q, self.params["delta"], op=op)

