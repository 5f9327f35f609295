"""The perceptron / von Neumann family of A. Ramdas and J. Pena, "Margins, Kernels and
Non-linear Smoothed Perceptrons", ICML 2014 (Ramdas & Pena 2014 below).

Every solver works with the normalized signed Gram matrix (sec. 3)

    G_ij = y_i y_j K(x_i, x_j) / sqrt(K(x_i, x_i) K(x_j, x_j)),

through a ``marginkit.linalg._operator.GramOperator`` (feature space for the linear
kernel, never an n x n matrix; a private dense G otherwise). The function
f = sum_i alpha_i y_i phi(x_i) / sqrt(K(x_i, x_i)) separates the data iff G alpha > 0
(Lemma 1); a p in the simplex with ||p||_G = 0 proves that none does (Gordan's theorem
for RKHSs, sec. 5), and for every p in the simplex and alpha,

    min_i (G alpha)_i / ||alpha||_G  <=  rho_K  <=  ||p||_G          (Lemma 3),

which is ``Result.margin_bounds``.

=========================  ===================================  ========================
solver                     algorithm                            default stop, max_iter
=========================  ===================================  ========================
``perceptron``             classic kernel perceptron (sec. 2.1) separated, 10_000
``normalized_perceptron``  Normalized Perceptron (sec. 2.1)     separated, 10_000
``nkp``                    Normalized Kernel Perceptron (s. 4)  separated, 10_000
``snkp``                   Smoothed NKP (sec. 4, entropy)       separated, 10_000
``nvn``                    Normalized von Neumann (sec. 5)      separated + dual_certificate, 100_000
``snkpvn``                 SNKPVN(q, delta) (sec. 6, l2)        separated + dual_certificate, 100_000
``isnkpvn``                ISNKPVN(gamma, eps) (sec. 6, l2)     separated + dual_certificate, 100_000
=========================  ===================================  ========================

State attributes for stopping rules: ``min_margin`` (min_i (G alpha)_i, recomputed
exactly before it is reported positive), ``dual_norm`` (best ||p||_G seen, p in the
simplex), ``dual_tol`` (the solver's eps or delta), ``alpha_norm``, ``mu``.
"""
import math
import numbers
import warnings

import numpy as np
import scipy.sparse as sp

from ..._registry import _register_builtin
from ...certificates import InfeasibilityCertificate, SeparatorCertificate
from ..._validation import Param
from ...plugins import Solver, SolverState
from ...stopping import DualCertificate
from ...smoothers.builtin import cython_smoother
from ...linalg._operator import FeatureOperator, make_operator
from ..._executors import Block, Executor
from .._perceptron_fast import (MinNormPoint, SmoothedBlock, VertexBlock, csr_normalized_cross,
                               seq_dot)

__all__ = ["Perceptron", "NormalizedPerceptron", "NKP", "SNKP", "NVN", "SNKPVN", "ISNKPVN"]

_EPS = Param(1e-6, types=numbers.Real, low=0, low_open=True, high=1, high_open=True,
             doc="tolerance on ||p||_G for an infeasibility certificate (dual_certificate "
                 "rule); below 1, since every p in the simplex has ||p||_G <= 1")


def _check_q(value, name, owner):
    q = np.array(value, dtype=np.float64).ravel()
    if q.size == 0 or not np.all(np.isfinite(q)):
        raise ValueError(f"{owner}: {name} must be a finite vector in the simplex")
    if q.min() < 0 or abs(q.sum() - 1.0) > 1e-8:
        raise ValueError(f"{owner}: {name} must lie in the simplex (q >= 0, sum(q) = 1); "
                         f"got min {q.min():.3g}, sum {q.sum():.6g}")
    return q


class _FamilyState(SolverState):
    """Python state around a Cython core; ``step()`` is one iteration without the GIL."""

    def __init__(self, core, op, problem=None):
        self.core = core
        self.op = op
        self.problem = problem
        self.n_iter = 0
        self.elapsed = 0.0
        self._refuted = {}

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
                                        config=pb.config)
        return InfeasibilityCertificate(v, float(core.dual_norm), float(core.dual_tol),
                                        pb.kernel, pb.classes_, config=pb.config)

    def refuted(self, status, verdict):
        core = self.core
        self._refuted[status] = float(core.min_margin if status == "separable" else core.dual_norm)

    def _alpha(self):
        return np.array(self.core.alpha_arr, dtype=np.float64)

    def step(self):
        self.core.step()

    @property
    def min_margin(self):
        return self.core.min_margin

    @property
    def dual_norm(self):
        return self.core.dual_norm

    @property
    def dual_tol(self):
        return self.core.dual_tol

    @property
    def alpha_norm(self):
        return self.core.alpha_norm

    @property
    def mu(self):
        return self.core.mu

    def snapshot(self):
        lower, upper = self.core.margin_bounds()
        return {"min_margin": float(self.core.min_margin), "dual_norm": float(self.core.dual_norm),
                "mu": float(self.core.mu), "margin_lower": float(lower),
                "margin_upper": float(upper)}


class _IteratedState(_FamilyState):
    def step(self):
        self.core.step()
        candidate = self.core.finish_state
        if candidate in ("separator", "certificate"):
            # the finish's p is taken only once checked like a certificate, from scratch
            p = np.array(self.core.finish_p(), dtype=np.float64)
            claim = "separable" if candidate == "separator" else "infeasible"
            if self._finish_holds(claim, p):
                self.core.accept_finish()
            else:
                self.core.refuse_finish()

    def _finish_holds(self, claim, p):
        """The finish's candidate p passes the referee as the certificate of ``claim``."""
        return bool(self.problem.check_certificate(self._certificate(claim, p)))

    def snapshot(self):
        snap = super().snapshot()
        snap["delta"] = float(self.core.delta)
        snap["outer"] = float(self.core.outer)
        return snap


class _PerceptronFamily(Solver):
    """Common ``finalize`` of the family: status, alpha, p, certificate, bounds, model."""

    provides = ("min_margin", "dual_norm", "dual_tol", "alpha_norm", "mu")
    default_stop = ("separated",)
    default_max_iter = 10_000
    param_table = {"eps": _EPS}
    _normalize = True
    #: the parameter that is the solver's own tolerance on ||p||_G (``dual_tol``)
    _dual_tol_param = "eps"

    def claim_thresholds(self, rules):
        """What the run's claims are checked against: ``dual_tol``, the largest eps of its
        ``dual_certificate`` rules (a rule without eps: the solver's own tolerance), or the
        solver's tolerance when no such rule is configured."""
        own = float(self.params[self._dual_tol_param])
        eps = [own if r.params.get("eps") is None else float(r.params["eps"])
               for r in rules if isinstance(r, DualCertificate)]
        return {"dual_tol": max(eps) if eps else own}

    def _operator(self, problem):
        return make_operator(problem, normalize=self._normalize)

    def finalize(self, problem, state, status):
        """Status, alpha, p, margin bounds and the model: ``_model`` in memory (``op``
        the problem's operator), else coef_ = the driver's ``primal()``."""
        core, op = state.core, state.op
        alpha = np.array(core.alpha_arr, dtype=np.float64)
        fields = family_fields(problem, status, core, alpha,
                               np.array(core.p_arr, dtype=np.float64),
                               lambda: np.array(core.best_p_arr, dtype=np.float64))
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
        lower, upper = margin_bounds(X, labels_pm(y, problem.classes_), kernel, alpha, best_p())
    except NotPositiveSemidefiniteError as exc:
        # no claim was made (a claim's check would have raised): the run's result stands,
        # but a kernel that is not PSD on the data defines no margin
        warnings.warn(f"margin_bounds are (-inf, inf): {exc}", RuntimeWarning, stacklevel=2)
        lower, upper = -math.inf, math.inf
    return {
        "status": status,
        "dual_coef_": alpha,
        "dual_vector": dual_vector,
        "margin_bounds": (float(lower), float(upper)),
        "certificate": None,
    }


def _model(problem, op, alpha):
    """coef_ for the linear kernel; support rows and coefficients for other kernels."""
    X, kernel = problem.X, problem.kernel
    sd = np.asarray(op.sqrt_diag)
    # f(x) = sum_i alpha_i y_i K(x_i, x) / sqrt(K(x_i, x_i))
    coef = alpha * problem.y / sd
    if isinstance(op, FeatureOperator) and op.phi is X:
        w = op.primal(alpha) if op.normalize else op.primal(alpha / sd)
        return {"coef_": np.asarray(w, dtype=np.float64), "intercept_": 0.0}
    if getattr(kernel, "precomputed", False):
        return {"support_": None, "support_coef_": coef}
    idx = np.flatnonzero(alpha != 0)
    sup = X[idx]
    if sp.issparse(sup):
        sup = sup.copy()
    else:
        sup = np.array(sup, copy=True)
    return {"support_": sup, "support_coef_": coef[idx]}


class _VertexFamily(_PerceptronFamily):
    """The vertex solvers: one ``VertexIteration`` over the row blocks of
    ``problem.executor`` (in memory: one block with the problem's Gram operator, any
    kernel; on a dask array: the chunks, linear kernel)."""

    #: runs on the row blocks of any executor (dask arrays: the linear kernel)
    blocked = True
    _kind = None

    def _kind_for(self, op):
        return self._kind

    def start(self, problem):
        ex = problem.executor
        # in memory the one block gets the problem's operator (any kernel); the chunks of
        # a dask array build their own FeatureOperator (linear kernel)
        op = None if isinstance(problem.X, Executor) else self._operator(problem)
        kind = self._kind_for(op)
        return _FamilyState(VertexIteration(ex, kind, self.params["eps"], op=op), op, problem)

@_register_builtin("solver", "perceptron")
class Perceptron(_VertexFamily):
    """Classic kernel perceptron (Ramdas & Pena 2014, sec. 2.1, kernelized).

    Works on the unnormalized signed Gram Gu = Y K Y: with c_i the number of updates on
    point i, it updates the most violated point i = argmin_i (Gu c)_i while
    min_i (Gu c)_i <= 0. Mistake bound max_i K(x_i, x_i) / rho^2 (unnormalized margin).
    The certificate and ``dual_coef_`` use the normalized alpha_i = c_i sqrt(K(x_i, x_i)),
    so they verify with G; the raw counts are ``Result.extra["mistake_counts"]``.
    ``dual_norm`` is ||alpha / sum(alpha)||_G. Default ``max_iter``: 10_000.

    References
    ----------
    A. Ramdas and J. Pena, "Margins, Kernels and Non-linear Smoothed Perceptrons",
    Proceedings of the 31st International Conference on Machine Learning (ICML), 2014.
    """

    _normalize = False
    _kind = "perceptron"

    def finalize(self, problem, state, status):
        fields = super().finalize(problem, state, status)
        fields["extra"] = {"mistake_counts": np.array(state.core.counts_arr)}
        return fields


@_register_builtin("solver", "normalized_perceptron")
class NormalizedPerceptron(_VertexFamily):
    """Normalized Perceptron (Ramdas & Pena 2014, sec. 2.1): w_0 = 0,
    w_{k+1} = (1 - t_k) w_k + t_k y_i x_i / ||x_i||, t_k = 1/(k+1), i the most
    misclassified point. Finds a separator within 1/rho_2^2 iterations.

    With a kernel that has a feature map (``linear``), w lives in feature space and the
    margins Y X_2^T w are recomputed from w every iteration. Other kernels run the same
    iterates through G (then it coincides with ``nkp``). Default ``max_iter``: 10_000.

    References
    ----------
    A. Ramdas and J. Pena, "Margins, Kernels and Non-linear Smoothed Perceptrons",
    Proceedings of the 31st International Conference on Machine Learning (ICML), 2014.
    """

    def _kind_for(self, op):
        # the chunks of a dask array (op None) hold feature operators
        return "normalized_perceptron" if op is None or isinstance(op, FeatureOperator) \
            else "nkp"


@_register_builtin("solver", "nkp")
class NKP(_VertexFamily):
    """Normalized Kernel Perceptron (Ramdas & Pena 2014, sec. 4): alpha_0 = 0,
    alpha_{k+1} = (1 - t_k) alpha_k + t_k p(alpha_k), t_k = 1/(k+1), p(alpha) = e_i with
    i = argmin_i (G alpha)_i. A subgradient method on L(alpha) = max_p <-alpha, p>_G +
    ||alpha||_G^2 / 2; separator within 1/rho_K^2 iterations. alpha (in the simplex)
    is also the dual p. Default ``max_iter``: 10_000.

    References
    ----------
    A. Ramdas and J. Pena, "Margins, Kernels and Non-linear Smoothed Perceptrons",
    Proceedings of the 31st International Conference on Machine Learning (ICML), 2014.
    """

    _kind = "nkp"


# Phi_n^T Phi_n is formed to bound lambda_max(G) only when it is cheap next to the
# iterations it saves: dense Phi with d <= 512 (n d^2 multiply-adds through BLAS-3), CSR Phi
# with d <= 2048 and at most 64 entries per row (sum_i nnz_i^2 <= 64 nnz: the cost of at
# most 32 products with G)
_GRAM_BOUND_MAX_D_DENSE = 512
_GRAM_BOUND_MAX_D_CSR = 2048
_GRAM_BOUND_MAX_ROW_NNZ = 64


def gram_norm_bound(op):
    """An upper bound on lambda_max(G), the largest eigenvalue of the normalized Gram.

    Every bound lambda >= max ||r||_G^2 / ||r||_2^2 serves as the paper's lambda_# for the
    l2 prox-function (appendix: mu_0 = 2 lambda_#); the paper takes n (|G_ij| <= 1). For a
    feature operator where it is cheap (dense: d <= 512; CSR: d <= 2048 and at most 64
    entries per row), lambda_max(G) = lambda_max(Phi_n^T Phi_n)
    (Phi_n: the rows of Phi divided by their norms) is computed from that d x d matrix,
    accumulated in float64 (dense: over blocks of rows, no copy of Phi beyond one block;
    CSR: sum_i nnz_i^2 multiply-adds, no copy), plus a margin for its round-off; otherwise n.
    """
    C = normalized_feature_cross(op)
    return float(op.n) if C is None else bound_from_cross(C, op.n)


def normalized_feature_cross(op):
    """Phi_n^T Phi_n (d x d, float64) of a normalized ``FeatureOperator``, or None when
    ``op`` is not one or forming it is not cheap (see ``gram_norm_bound``)."""
    if not isinstance(op, FeatureOperator) or not op.normalize:
        return None
    Phi, d, n = op.phi, op.d, op.n
    if sp.issparse(Phi):
        widest = int(np.diff(Phi.indptr).max()) if n else 0
        if d > _GRAM_BOUND_MAX_D_CSR or widest > _GRAM_BOUND_MAX_ROW_NNZ:
            return None
    elif d > _GRAM_BOUND_MAX_D_DENSE:
        return None
    inv = 1.0 / np.asarray(op.sqrt_diag)
    C = np.zeros((d, d))
    if sp.issparse(Phi):
        # the operator's CSR arrays (float32/64 data, int32/64 indices)
        csr_normalized_cross(Phi.data, Phi.indices, Phi.indptr, inv, C)
        return 0.5 * (C + C.T)
    step = max(1, (1 << 22) // max(d, 1))
    for start in range(0, n, step):
        stop = min(n, start + step)
        B = np.asarray(Phi[start:stop], dtype=np.float64) * inv[start:stop, None]
        C += B.T @ B
    return C


def bound_from_cross(C, n):
    """The bound of ``gram_norm_bound`` from Phi_n^T Phi_n (summed over row blocks)."""
    if C.size and not np.all(np.isfinite(C)):
        return float(n)  # a cross product that overflowed bounds nothing: the paper's n
    if C.size:
        import scipy.linalg

        d = C.shape[0]  # the top eigenvalue only (LAPACK's subset driver)
        lam = float(scipy.linalg.eigvalsh(C, subset_by_index=[d - 1, d - 1])[0])
    else:
        lam = float(n)
    if not np.isfinite(lam):
        return float(n)
    # entries of C carry a float64 round-off far below 1e-6 n (trace(C) = n)
    return float(min(n, max(1.0, lam * (1.0 + 1e-6) + 1e-6 * n)))


# ------------------------------------------------------------- the vertex family, blocked
# perceptron, normalized_perceptron, NKP and NVN are written once, over the row blocks of
# ``problem.executor``: the driver below holds the scalars and makes every decision; the
# n-vectors live on the blocks (``VertexBlock``). An iteration takes one column
# G e_j = S X (s_j x_j): the block holding j returns the d-vector s_j x_j and every block
# applies S_c X_c to it (in memory, the one block's ``op.column``, any kernel).
def _k_vb(block, name, *args):
    """``block.v["vb"].<name>(*args)``: a pass of the block's ``VertexBlock``."""
    return getattr(block.v["vb"], name)(*args)


def _k_vb_get(block, name):
    """The block's piece of an n-vector (``alpha``, ``p``, ``best_p``, ``counts``)."""
    return getattr(block.v["vb"], name + "_arr")


def _block_operator(block, normalize):
    """The ``FeatureOperator`` of a chunk's rows (linear kernel), or the global indices of
    the chunk's all-zero rows when it has some (they cannot be normalized)."""
    from ...linalg._norms import row_sqnorms

    bad = np.flatnonzero(~(row_sqnorms(block.X) > 0)) + block.offset
    return bad if bad.size else FeatureOperator(block.X, block.y, normalize)


def _k_vb_init(block, op, normalize, n_total):
    """Set up the block: ``op`` its Gram operator (the whole problem's, in memory) or None
    (a chunk of a dask array: the block's ``FeatureOperator``, linear kernel). Returns the
    global indices of the block's all-zero rows (then nothing is set up) or None."""
    if op is None:
        op = _block_operator(block, normalize)
        if not isinstance(op, FeatureOperator):
            return op
    block.v["vb"] = VertexBlock(op, block.offset, n_total)
    return None


class _BlockDriver:
    """What the vertex and smoothed drivers share: the passes of their blocks (the object
    ``block.v[key]`` a block kernel ``_call(block, name, *args)`` runs a method of), called
    directly on one local block and mapped over the executor otherwise; G products
    reduced over the blocks; n-vectors gathered in block order."""

    _call = _get = None  # the module-level block kernels (set by the subclasses)

    def _adopt_blocks(self, bad, key):
        """Raise on the all-zero rows the blocks' set-up found (``bad``: one array or None
        per block); then keep the single local block's object, if any, to call directly."""
        bad = [b for b in bad if b is not None]
        if bad:
            bad = np.concatenate(bad)
            raise ValueError(
                f"row(s) {bad[:10].tolist()}{' ...' if bad.size > 10 else ''} of X have "
                "K(x, x) = 0 (all-zero feature rows); the normalized Gram is undefined there: "
                "remove those rows or use a kernel with K(x, x) > 0")
        ex = self.ex
        self._local = ex.workers[0].v[key] \
            if self.single and ex.client is None and isinstance(ex.workers[0], Block) else None

    def _map(self, name, *args):
        if self._local is not None:
            return [getattr(self._local, name)(*args)]
        return self.ex.map(type(self)._call, name, *args)

    def _sum(self, parts):
        return parts[0] if self.single else sum(parts)

    def _own_gram(self):
        """Whether the single block's operator gives G products itself."""
        return False

    def _gram(self, src, dst):
        """dst = G src: the block's own product, or X_c^T S_c src reduced over the blocks
        and S_c X_c w applied on each."""
        if self._own_gram():
            self._map("gram", src, dst)
        else:
            self._map("fdot", dst, np.sum(self._map("primal", src), axis=0))

    def gather(self, name):
        parts = self.ex.map(type(self)._get, name)
        return parts[0] if self.single else np.concatenate(parts)


class VertexIteration(_BlockDriver):
    """The vertex methods of Ramdas & Pena 2014 as one state machine over the blocks of an
    executor: ``kind`` is "perceptron" (sec. 2.1, classic, on the unnormalized Gram),
    "normalized_perceptron" (sec. 2.1, w in feature space), "nkp" (sec. 4) or "nvn"
    (sec. 5, exact line search). One column of G per iteration (the normalized
    perceptron: one pass S X w from scratch); argmins break ties to the lowest global
    index. G alpha is recomputed from scratch before a run may be declared separable, and
    G p before ||p||_G may be declared below a tolerance.

    References
    ----------
    A. Ramdas and J. Pena, "Margins, Kernels and Non-linear Smoothed Perceptrons",
    Proceedings of the 31st International Conference on Machine Learning (ICML), 2014.
    """

    _call, _get = _k_vb, _k_vb_get

    def __init__(self, ex, kind, dual_tol, op=None):
        self.ex = ex
        self.kind = kind
        self.n = ex.n_samples
        self.single = ex.n_chunks == 1
        self.dual_tol = float(dual_tol)
        self.k = 0
        self.imin = 0
        self.mu = 0.0
        self.min_margin = math.inf
        self.alpha_norm = 0.0
        self.cur_dual = math.inf
        self.dual_norm = math.inf
        self.alpha_sum = 0.0
        self._sdj = 0.0
        self._fresh = False
        normalize = kind != "perceptron"
        self._adopt_blocks(ex.map(_k_vb_init, op, normalize, self.n), "vb")
        # the column of a single block is its operator's (any kernel)
        self._own_col = self.single and op is not None
        if kind == "perceptron":
            self._perc_stats(self._map("perc_stats"))
        elif kind == "normalized_perceptron":
            # w lives in the feature space of the operator (a feature map's d)
            self.w = np.zeros(max(ex.n_features if op is None else op.d, 1))
            self.imin, self.min_margin = 0, 0.0
            self._np_stats()
        elif kind == "nkp":
            self._set_margins(self._map("margin_stats"))
        else:
            self._gram("p", "gp")
            self._nvn_stats(self._map("nvn_sync"))

    # -- the blocks ------------------------------------------------------------------

    def _owner(self, j):
        return int(np.searchsorted(self.ex.offsets, j, side="right")) - 1

    def _call_owner(self, j, name, *args):
        if self._local is not None:
            return getattr(self._local, name)(*args)
        return self.ex.call(self._owner(j), _k_vb, name, *args)

    def _column_w(self, j):
        """None (the block's own column) or the d-vector s_j x_j."""
        return None if self._own_col else self._call_owner(j, "row", j)

    def _own_gram(self):
        return self._own_col

    alpha_arr = property(lambda self: self.gather("alpha"))
    p_arr = property(lambda self: self.gather("p"))
    best_p_arr = property(lambda self: self.gather("best_p"))
    counts_arr = property(lambda self: self.gather("counts"))

    def primal(self):
        """The weight vector sum_c X_c^T S_c alpha_c (blocks with a ``FeatureOperator``;
        the perceptron: its counts, alpha_i / sqrt(K_ii))."""
        name = "primal_over_sd" if self.kind == "perceptron" else "primal"
        return np.sum(self._map(name, "alpha"), axis=0)

    # -- shared pieces -----------------------------------------------------------------
    def _reduce(self, stats):
        """The stats of the block with the lowest minimum (ties: the first such block, so
        the lowest global index)."""
        if self.single:
            return stats[0]
        return stats[min(range(len(stats)), key=lambda c: (stats[c][0], c))]

    def _set_margins(self, stats):
        gmin, imin = self._reduce(stats)[:2]
        aga = self._sum([s[2] for s in stats])
        self._fresh = gmin > 0.0
        if self._fresh:
            # about to report "separable": recompute G alpha exactly
            self._gram("alpha", "ga")
            stats = self._map("margin_stats")
            gmin, imin = self._reduce(stats)[:2]
            aga = self._sum([s[2] for s in stats])
        self.imin, self.min_margin = imin, gmin
        self.alpha_norm = _gnorm(aga)
        return aga

    def _set_dual(self, pgp, fresh_below):
        """cur_dual = ||p||_G; keep the best p. Fresh G p near the tolerance."""
        self.cur_dual = _gnorm(pgp)
        if self.cur_dual <= fresh_below:
            self._gram("p", "gp")
            self.cur_dual = _gnorm(self._sum(self._map("dot", "p", "gp")))
        if self.cur_dual < self.dual_norm:
            self.dual_norm = self.cur_dual
            self._map("copy", "best_p", "p")

    def _perc_stats(self, stats):
        """Most violated point (unnormalized margins), min_i (G alpha)_i (normalized),
        ||alpha||_G and ||alpha / sum(alpha)||_G."""
        m = min(s[2] for s in stats)
        if m > 0.0:
            self._gram("counts", "ga")
            stats = self._map("perc_stats")
            m = min(s[2] for s in stats)
        best = self._reduce(stats)
        self.imin, self._sdj = best[1], best[4]
        self.min_margin = m
        # ||alpha||_G^2 = counts^T Gu counts; p = alpha / sum(alpha) lies in the simplex
        self.alpha_norm = _gnorm(self._sum([s[3] for s in stats]))
        if self.alpha_sum > 0.0:
            self.cur_dual = self.alpha_norm / self.alpha_sum
            if self.cur_dual < self.dual_norm:
                self.dual_norm = self.cur_dual
                self._map("best_from_alpha", self.alpha_sum)

    def _np_stats(self):
        self.alpha_norm = _gnorm(seq_dot(self.w, self.w))
        if self.k > 0:
            self.cur_dual = self.alpha_norm
            if self.cur_dual < self.dual_norm:
                self.dual_norm = self.cur_dual
                self._map("copy", "best_p", "alpha")

    def _nvn_stats(self, stats):
        aga = self._set_margins(stats)
        if self.min_margin > 0.0:
            self._map("copy", "gp", "ga")
        # alpha = p and G alpha = G p: p . G p = alpha . G alpha
        self._set_dual(aga, self.dual_tol)

    # -- one iteration -----------------------------------------------------------------
    def step(self):
        j, kind = self.imin, self.kind
        if kind == "perceptron":
            self.alpha_sum += self._sdj
            stats = self._map("perc_update", j, self._column_w(j))
            self.k += 1
            self._perc_stats(stats)
        elif kind == "nkp":
            t = 1.0 / (self.k + 1)
            stats = self._map("nkp_update", j, self._column_w(j), t)
            self.k += 1
            aga = self._set_margins(stats)
            if self._fresh:
                self._map("sync_p")  # p = alpha, G p = the fresh G alpha
            self._set_dual(aga, self.dual_tol)
        elif kind == "normalized_perceptron":
            t = 1.0 / (self.k + 1)
            self.w *= 1.0 - t
            self.w = self._call_owner(j, "add_row", j, t, self.w)
            stats = self._map("np_update", j, t, self.w)
            self.min_margin, self.imin = self._reduce(stats)
            self.k += 1
            self._np_stats()
        else:  # nvn
            parts = self._map("nvn_column", j, self._column_w(j))
            a = self._sum([q[0] for q in parts])
            b = sum(q[1] for q in parts)
            c = sum(q[2] for q in parts)
            # ||(1-t) p + t e_j||_G^2 = (1-t)^2 a + 2 t (1-t) b + t^2 c, minimized over [0, 1]
            den = a - 2.0 * b + c
            t = (a - b) / den if den > 0.0 else 0.0
            t = min(max(t, 0.0), 1.0)
            stats = self._map("nvn_update", j, t)
            self.k += 1
            self._nvn_stats(stats)

    def margin_bounds(self):
        """(lower, upper) on rho_K (Ramdas & Pena 2014, Lemma 3): min(G alpha)/||alpha||_G
        and the best ||p||_G."""
        lower = self.min_margin / self.alpha_norm \
            if (self.min_margin > 0 and self.alpha_norm > 0) else -np.inf
        return lower, self.dual_norm


# ----------------------------------------------------------- the smoothed family, blocked
# SNKP, SNKPVN and ISNKPVN are written once, over the row blocks of ``problem.executor``:
# the driver below holds the scalars (k, mu, norms, delta) and makes every decision; the
# n-vectors live on the blocks (``SmoothedBlock``), whose passes return partial sums
# reduced here in block order. In memory the single block runs a whole iteration in one
# nogil call; on a dask array each block is a chunk held by a worker.
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
    block.v["sb"] = SmoothedBlock(op, smoother, q, n_total)
    block.v["sb_fin"] = MinNormPoint(op, finish_cap) if finish_cap > 0 else None
    return None


def _k_sb_cross(block):
    """Phi_c^T Phi_c of the block's normalized rows, or None (see ``gram_norm_bound``)."""
    return normalized_feature_cross(block.v["sb_op"])


def _k_fin_cycle(block, tol_sq):
    """One major cycle of the block's finish (started at the most violated point of G p
    when idle): (state, major cycles so far)."""
    fin = block.v["sb_fin"]
    if fin.state == "idle":
        fin.start_at(block.v["sb"].argmin_gp()[1])
    return fin.cycle(tol_sq), int(fin.steps)


def _k_fin_p(block):
    return block.v["sb_fin"].p_arr


def _k_fin_accept(block):
    """q = alpha = the finish's p, G alpha = its G p; ||p||_G^2. The finish stops."""
    sb, fin = block.v["sb"], block.v["sb_fin"]
    sb.set("q", fin.p_arr)
    sb.set("alpha", fin.p_arr)
    sb.set("ga", fin.gp_arr)
    fin.halt()
    return float(fin.norm_sq)


def _k_fin_halt(block):
    block.v["sb_fin"].halt()


def _smoother_kind(smoother):
    """'entropy' or 'l2' for the built-in smoothers (they run on blocks), else None."""
    from ..._registry import get_plugin

    for name in ("entropy", "l2"):
        if type(smoother) is get_plugin("smoother", name):
            return name
    return None


class SmoothedIteration(_BlockDriver):
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
    of a ``MinNormPoint`` on the block (Wolfe's algorithm, see ``ISNKPVN``); its
    candidates are checked by the caller and taken with ``accept_finish`` or refused with
    ``refuse_finish``.

    References
    ----------
    A. Ramdas and J. Pena, "Margins, Kernels and Non-linear Smoothed Perceptrons",
    Proceedings of the 31st International Conference on Machine Learning (ICML), 2014.
    """

    _call, _get = _k_sb, _k_sb_get

    def __init__(self, ex, smoother, mu0, q, dual_tol, op=None, gamma=None, warm=False,
                 finish_cap=0):
        self.ex = ex
        self.n = ex.n_samples
        self.single = ex.n_chunks == 1
        self.dual_tol = float(dual_tol)
        self.iterated = gamma is not None
        self.gamma = gamma
        self.warm = bool(warm)
        self.k = 0
        self.mu = 0.0
        self.vscale = 1.0
        self.imin = 0
        self.min_margin = math.inf
        self.alpha_norm = 0.0
        self.cur_dual = math.inf
        self.dual_norm = math.inf
        self.rejected_restarts = 0
        self.outer = 0
        self.delta = math.inf
        self.steps = 0
        self.finish_decided = False
        self._finish = "off" if finish_cap <= 0 else "idle"
        self.finish_steps = 0
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

    alpha_arr = property(lambda self: self.gather("alpha"))
    ga_arr = property(lambda self: self.gather("ga"))
    p_arr = property(lambda self: self.gather("p"))
    gp_arr = property(lambda self: self.gather("gp"))
    best_p_arr = property(lambda self: self.gather("best_p"))

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
        return (stats[best][0], int(self.ex.offsets[best]) + int(stats[best][1]),
                sum(s[2] for s in stats))

    def _set_margins(self, stats):
        gmin, imin, aga = self._reduce_margins(stats)
        if gmin > 0.0:
            # about to report "separable": recompute G alpha exactly
            self._gram("alpha", "ga")
            gmin, imin, aga = self._reduce_margins(self._map("margin_stats"))
        self.imin, self.min_margin = imin, gmin
        self.alpha_norm = _gnorm(aga)

    def _set_dual(self, pgp, fresh_below):
        """cur_dual = ||p||_G; keep the best p. Fresh G p near the tolerance."""
        self.cur_dual = _gnorm(pgp)
        if self.cur_dual <= fresh_below:
            self._gram("p", "gp")
            self.cur_dual = _gnorm(self._sum(self._map("dot", "p", "gp")))
        if self.cur_dual < self.dual_norm:
            self.dual_norm = self.cur_dual
            self._map("copy", "best_p", "p")

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
        self.steps += 1
        if (self._finish in ("idle", "running") and self.steps % _FINISH_PERIOD == 0
                and self.min_margin <= 0.0 and self.dual_norm > self.dual_tol):
            self._finish, self.finish_steps = self.ex.map(_k_fin_cycle,
                                                          self.dual_tol * self.dual_tol)[0]

    def margin_bounds(self):
        """(lower, upper) on rho_K (Ramdas & Pena 2014, Lemma 3): min(G alpha)/||alpha||_G
        and the best ||p||_G."""
        lower = self.min_margin / self.alpha_norm \
            if (self.min_margin > 0 and self.alpha_norm > 0) else -np.inf
        return lower, self.dual_norm

    def smoothed_loss(self):
        """L_mu(alpha) = -<alpha, p_mu(alpha)>_G - mu d(p_mu(alpha)) + 1/2 ||alpha||_G^2
        (one block)."""
        lin, d = self._map("smoothed_loss_part", self.mu)[0]
        return float(lin - self.mu * d + 0.5 * self.alpha_norm ** 2)

    # -- the exact finish (ISNKPVN, one block) -----------------------------------------
    @property
    def finish_state(self):
        """"off", or the state of the finish's ``MinNormPoint``."""
        return self._finish

    def finish_p(self):
        return self.ex.map(_k_fin_p)[0]

    def accept_finish(self):
        """Take the finish's checked candidate p as the next prox-center: the outer loop
        restarts at q = alpha = p (delta = ||p||_G / gamma, k = 0, the paper's start, so
        its invariant holds), and p becomes the best p if its norm is lower. A separator
        candidate gives G alpha > 0 at once, a certificate ||best p||_G <= eps."""
        if self._finish not in ("separator", "certificate"):
            raise RuntimeError("the finish has no candidate to accept")
        norm = _gnorm(self.ex.map(_k_fin_accept)[0])
        if norm < self.dual_norm:
            self.dual_norm = norm
            self._map("copy", "best_p", "alpha")
        self.delta = norm / self.gamma
        self.outer += 1
        self._start_at(0)
        # taken once: the finish has done its work
        self._finish = "stopped"
        self.finish_decided = True

    def refuse_finish(self):
        """Drop a candidate that failed the caller's check; the finish stops for good."""
        if self._finish != "off":
            self.ex.map(_k_fin_halt)
            self._finish = "stopped"


# the finish runs one major cycle (about one pass over the data) every this many steps
_FINISH_PERIOD = 2


def _gnorm(sq):
    return math.sqrt(sq) if sq > 0.0 else 0.0


class _SmoothedFamily(_PerceptronFamily):
    """The smoothed solvers: one ``SmoothedIteration`` over the row blocks of
    ``problem.executor`` (in memory: one block with the problem's Gram operator, any
    kernel; on a dask array: the chunks, linear kernel)."""

    requires = {"smoother": ("argmin_simplex",)}
    #: runs on the row blocks of any executor (dask arrays: the linear kernel)
    blocked = True
    _state = _FamilyState

    def start(self, problem):
        ex = problem.executor
        # in memory the one block gets the problem's operator (any kernel); the chunks of
        # a dask array build their own FeatureOperator (linear kernel)
        op = None if isinstance(problem.X, Executor) else self._operator(problem)
        return self._state(self._iteration(problem, ex, op), op, problem)

@_register_builtin("solver", "snkp")
class SNKP(_SmoothedFamily):
    """Smoothed Normalized Kernel Perceptron (Ramdas & Pena 2014, sec. 4, algorithm box):

        alpha_0 = 1/n, mu_0 = 2, p_0 = p_{mu_0}(alpha_0); for k = 0, 1, ...: t = 2/(k+3),
        alpha_{k+1} = (1-t)(alpha_k + t p_k) + t^2 p_{mu_k}(alpha_k), mu_{k+1} = (1-t) mu_k,
        p_{k+1} = (1-t) p_k + t p_{mu_{k+1}}(alpha_{k+1}),

    with p_mu(alpha) = softmax(-G alpha / mu) (``entropy`` smoother). Finds a separator
    within 2 sqrt(2 log n) / rho_K iterations (Theorem 1); ||p_k||_G bounds rho_K from
    above (Lemma 3). One product with G per iteration. Default ``max_iter``: 10_000.

    References
    ----------
    A. Ramdas and J. Pena, "Margins, Kernels and Non-linear Smoothed Perceptrons",
    Proceedings of the 31st International Conference on Machine Learning (ICML), 2014.
    """

    requires = {"smoother": ("argmin_simplex",)}
    default_smoother = "entropy"

    def _iteration(self, problem, ex, op):
        return SmoothedIteration(ex, problem.smoother, None, None, self.params["eps"], op=op)


@_register_builtin("solver", "nvn")
class NVN(_VertexFamily):
    """Normalized von Neumann with exact line search (Ramdas & Pena 2014, sec. 5), kernelized:
    p_0 = 1/n, w_k = G p_k kept with columns of G, j = argmin_j (G p_k)_j,
    theta = argmin_{[0,1]} ||(1-theta) p_k + theta e_j||_G, p_{k+1} = (1-theta) p_k + theta e_j.

    Stops with ||p||_G <= eps (``infeasible``) or G p > 0 (``separable``, alpha = p).
    Default ``max_iter``: 100_000.

    References
    ----------
    A. Ramdas and J. Pena, "Margins, Kernels and Non-linear Smoothed Perceptrons",
    Proceedings of the 31st International Conference on Machine Learning (ICML), 2014.
    """

    default_stop = ("separated", "dual_certificate")
    default_max_iter = 100_000
    _kind = "nvn"


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
    Proceedings of the 31st International Conference on Machine Learning (ICML), 2014.
    """

    requires = {"smoother": ("argmin_simplex",)}
    default_smoother = "l2"
    default_stop = ("separated", "dual_certificate")
    default_max_iter = 100_000
    _dual_tol_param = "delta"
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


@_register_builtin("solver", "isnkpvn")
class ISNKPVN(_SmoothedFamily):
    """Iterated SNKPVN(gamma, eps) (Ramdas & Pena 2014, sec. 6, algorithm box and Theorem 4).

    The box: q_0 = 1/n; outer loop t: delta_t = ||q_t||_G / gamma,
    q_{t+1} = SNKPVN(q_t, delta_t) (which halts on G alpha_k > 0 and returns p_k once
    ||p_k||_G < delta_t); halt when delta_t < eps, once that inner loop has returned.
    This solver runs the same iterates but stops on the first iterate with
    ||p_k||_G <= eps (the ``dual_certificate`` rule: p_k is already an eps-certificate),
    at or before the point where the box halts (the box needs an inner loop to return
    with delta_t < eps, often one more inner loop). One state machine: each ``step()`` is
    one inner SNKPVN iteration; the inner loop is restarted when ||p_k||_G < delta_t.
    Finds a separator in O(sqrt(n)/rho_K log(1/rho_K)) iterations, or an eps-certificate
    of infeasibility in O(min(sqrt(n)/eps, sqrt(n)/|rho_K|) log(1/eps)) (Theorem 4).

    The printed algorithm, iterate for iterate (up to round-off; tested against a numpy
    transcription of the box): ``finish=False, warm_restart=False`` with a kernel whose G
    is formed as a dense matrix, for which mu_0 = 2n as printed: a kernel without a
    feature map (``rbf``, ``poly``, ``laplacian``, ``spline``, a callable, or
    ``kernel="precomputed"``, e.g. K = X X^T for the linear kernel). Kernels with a
    feature map (``linear``, ``nystroem``, ``rff``) start from mu_0 = 2 lambda_#,
    lambda_# = ``gram_norm_bound`` (lambda_max(G) plus a round-off margin, at most n),
    which is the paper's n only when the bound is not formed (dense features with
    d > 512; CSR with d > 2048 or a row of more than 64 entries).

    Two refinements that keep the paper's invariant L_mu(alpha_k) <= -1/2 ||p_k||_G^2 (its
    appendix), hence its bounds: mu_0 = 2 lambda with lambda a bound on lambda_max(G)
    (``gram_norm_bound``; the paper's n is the worst case), and warm restarts: an inner
    loop restarts at the schedule index k_0 (mu_k0 = 2 mu_0 / ((k_0 + 1)(k_0 + 2))) the
    last one reached instead of k_0 = 0, once the restart's base case
    ||p_k0 - q||_G^2 <= mu_k0 ||p_k0 - q||_2^2 is checked (k_0 is lowered by 15% until it
    holds; it always does at 0).

    An exact finish (``finish=True``), an extension of the paper: alongside, every
    second step runs one major cycle of Wolfe's minimum-norm-point algorithm on the same
    problem, min_{p in simplex} ||p||_G (``MinNormPoint``: a corral S of at most 256
    vertices, new vertices priced by G p over all n points, one product with G and
    O(|S|^2) more a cycle), started at the most violated point. Its optimum p* answers
    exactly either way: G p* >= ||p*||_G^2 > 0 (a separator) unless ||p*||_G = 0 (a
    certificate), and few cycles reach it when the answer rests on few points (at most
    D + 1 affinely independent ones for the linear kernel on D features). A candidate
    (G p > 0, or ||p||_G <= eps) is checked from scratch in float64 like a certificate;
    if it holds, the outer loop restarts at q = alpha = p (k = 0: the paper's own start,
    so its invariant holds), which ends the run at once with that separator or
    certificate; if not, or when Wolfe's algorithm can no longer progress numerically (or
    S is full), the finish stops for good. The iterations are never changed otherwise,
    so the paper's bounds hold, at the cost of one more product with G every second step.

    Parameters
    ----------
    eps : float, default 1e-6
        Accuracy of the infeasibility certificate (``dual_tol``).
    shrink : float > 1, default 2.0
        The paper's gamma.
    warm_restart : bool, default True
        False restarts every inner loop at mu_0, as in the paper.
    finish : bool, default True
        Run the exact finish (it needs all rows in one block: in memory, or a dask array
        of one chunk; on several chunks True is a ValueError). False leaves the iterations
        alone: they are the printed algorithm's with ``warm_restart=False`` and mu_0 = 2n
        (see above). ``Result.extra`` reports ``finish`` ("off";
        "decided": the answer is the finish's; "stopped": it gave up; "running") and
        ``finish_steps`` (its major cycles).

    Default ``max_iter``: 100_000.

    References
    ----------
    A. Ramdas and J. Pena, "Margins, Kernels and Non-linear Smoothed Perceptrons",
    Proceedings of the 31st International Conference on Machine Learning (ICML), 2014.
       P. Wolfe, "Finding the nearest point in a polytope", Mathematical Programming 11,
    128-149, 1976.
    """

    requires = {"smoother": ("argmin_simplex",)}
    default_smoother = "l2"
    default_stop = ("separated", "dual_certificate")
    default_max_iter = 100_000
    param_table = {
        "eps": _EPS,
        "shrink": Param(2.0, types=numbers.Real, low=1, low_open=True,
                        doc="gamma > 1: delta_t = ||q_t||_G / gamma"),
        "warm_restart": Param(True, types=bool,
                              doc="restart the inner loop at the mu it reached (checked "
                                  "invariant) instead of mu_0"),
        "finish": Param(True, types=bool,
                        doc="alongside, Wolfe's min-norm-point algorithm; its checked "
                            "separator or certificate ends the run"),
    }

    _state = _IteratedState

    def _iteration(self, problem, ex, op):
        if self.params["finish"] and ex.n_chunks > 1:
            raise ValueError(
                f"solver 'isnkpvn': the exact finish (finish=True) is not blocked: Wolfe's "
                f"corral needs the rows of all of X in one block, and X is split into "
                f"{ex.n_chunks} chunks; pass finish=False to run the blocked ISNKPVN "
                "iterations without it (or one chunk, or X in memory)")
        return SmoothedIteration(ex, problem.smoother, None, None, self.params["eps"], op=op,
                                 gamma=self.params["shrink"], warm=self.params["warm_restart"],
                                 finish_cap=_FINISH_CAP if self.params["finish"] else 0)

    def finalize(self, problem, state, status):
        fields = super().finalize(problem, state, status)
        core = state.core
        fields["extra"] = {"outer_iterations": int(core.outer), "delta": float(core.delta),
                           "finish": _finish_outcome(core),
                           "finish_steps": int(core.finish_steps)}
        return fields


# the finish's corral holds at most this many vertices (an R factor of 256^2 doubles)
_FINISH_CAP = 256


def _finish_outcome(core):
    if core.finish_state == "off":
        return "off"
    if core.finish_decided:
        return "decided"
    return "stopped" if core.finish_state == "stopped" else "running"
