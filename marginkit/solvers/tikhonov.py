"""Iterated Tikhonov, a.k.a. the proximal point algorithm on the empirical risk.

From G. Beugnot, J. Mairal and A. Rudi, "Beyond Tikhonov: Faster Learning with
Self-Concordant Losses via Iterative Regularization", NeurIPS 2021 (Beugnot et al. 2021).

Definition 1 (Eq. 4): theta^0 = 0 and, for k < t,

    theta^{k+1} = argmin_theta  L_hat(theta) + lam/2 ||theta - theta^k||^2,
    L_hat(theta) = 1/n sum_i loss(y_i, theta(x_i)),

for the logistic loss (labels +-1) or the squared loss (regression). With sample
weights w (``solve(..., sample_weight=w)``) the empirical risk is the weighted
L_hat(theta) = 1/n sum_i w_i loss(y_i, theta(x_i)), normalized by the number of rows n
as the unweighted one (scikit-learn's LogisticRegression minimizes sum_i w_i loss_i
+ ||theta||^2 / (2 C), the same problem for C = 1 / (n lam)). t = 1 is plain
Tikhonov (kernel ridge / regularized logistic regression); t proximal steps give the
spectral filter g_lam^t(s) = (1 - (lam/(s + lam))^t) / s of Eq. 8 for the squared loss
and qualification t (Theorem 1).

Each subproblem is solved by a damped Newton method stopped on the Newton decrement
nu = ||grad||_{H^{-1}} (Eq. 19) with the schedule of Proposition 1: subproblem k is
solved to nu <= eps 1.4^{k - t} / t, which guarantees nu <= eps on the exact final
subproblem (Proposition 7 with c = 1/2). The ``newton_decrement`` stopping rule owns
the schedule; one ``state.step()`` is one Newton iteration (a subproblem that meets
its target hands over to the next one at the start of the following step).

Representations
---------------
* primal: kernels with an explicit ``feature_map`` (``linear``: Phi = X itself, dense or
  CSR, never densified; approximations such as Nystroem: an (n, m) array). Newton
  systems are (d, d) (Cholesky through LAPACK) or solved by preconditioned conjugate
  gradients for large dense feature maps (``newton_solver="cg"``): memory O(n m).
* Gram: any other kernel through the representer theorem, theta = sum_i beta_i Phi(x_i),
  beta in R^n (Eq. 6); the Newton system is reduced to the symmetric positive definite
  (n, n) matrix D^{1/2} K D^{1/2} / n + lam I. Memory O(n^2): use ``n_components``
  (Nystroem, section 3.2) for large n.

The squared loss also has the closed form of the spectral filter (appendix E.2),
``method="spectral_filter"``.

Blocks
------
The solver is written once over ``problem.executor`` (``marginkit._executors``): the
state (``_TikhonovState``: proximal steps, guarded Newton, schedule, chain certificate)
does the O(p) work and calls block kernels (``_k_tikhonov`` on each block's
``_BlockRows``) for every pass over the rows, adding their partial sums in block order.
In memory there is one block holding all rows (the ``_tikhonov_fast`` passes on the
whole data); on a dask array the blocks are the chunks held by the workers, so the same
iterations run there (linear kernel: ``blocked_limits`` says what cannot be split by
rows).

References
----------
G. Beugnot, J. Mairal and A. Rudi, "Beyond Tikhonov: Faster Learning with Self-Concordant
Losses via Iterative Regularization", Advances in Neural Information Processing Systems 34
(NeurIPS 2021).
"""
import math
import numbers

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from .._registry import _register_builtin
from .._referee import float64_block
from ..certificates import Certificate, Verdict, certificate_type, local_matrix
from .._executors import Executor, local_executor
from ..kernels.approximation import NystroemMap
from .._validation import Param, check_X
from ..plugins import Solver, SolverState, StoppingRule
from . import _tikhonov_fast as _fast
from ..utils._rows import row_block

__all__ = ["IteratedTikhonov", "NewtonDecrement", "NewtonDecrementCertificate",
           "NystroemMap", "decrement_schedule", "iterated_tikhonov_filter",
           "spectral_filter_path"]

#: kappa_c = -log(1 - c)/c at c = 1/2 (Proposition 1: 1.386..., rounded up to 1.4)
KAPPA = 1.4

#: the target Newton decrement of ``tol=None`` on data of unit scale (``default_tol``)
DEFAULT_TOL = 1e-8
#: the smallest factor ``default_tol`` applies to DEFAULT_TOL (data scaled below ~1e-12)
_MIN_TOL_FACTOR = 1e-12


# ====================================================================== schedule / filter
def decrement_schedule(tol, t, kappa=KAPPA):
    """Targets of Proposition 1: eps_k = tol * kappa^(k - t) / t for k = 1..t.

    Solving subproblem k to Newton decrement <= eps_k guarantees a decrement <= tol on
    the exact final subproblem (Proposition 7, Eq. 62; kappa = 1.4 is c = 1/2).
    """
    k = np.arange(1, int(t) + 1, dtype=np.float64)
    return float(tol) * float(kappa) ** (k - t) / t


def rule_schedule(rules, tol):
    """``(tol, kappa)`` of the decrement schedule of a run with stopping rules ``rules``:
    those of its ``newton_decrement`` rule (the last one when several; its tol None means
    the solver's ``tol``), else the solver's ``tol`` and ``KAPPA``. The state and the
    referee (``run_targets``) read the schedule from the rules this one way."""
    kappa = KAPPA
    for rule in rules:
        if isinstance(rule, NewtonDecrement):
            if rule.params["tol"] is not None:
                tol = rule.params["tol"]
            kappa = rule.params["kappa"]
    return float(DEFAULT_TOL if tol is None else tol), float(kappa)


def default_tol(kernel, X, y, loss, lam, fit_intercept):
    """The tolerance of ``tol=None``: DEFAULT_TOL * min(1, max(s, 1e-12)) with
    s = R Y / sqrt(lam), R = max_i sqrt(k(x_i, x_i)) over the rows of X (at least 1 with
    an intercept, whose feature is the constant 1), Y = 1 for the logistic loss and
    max_i |y_i| for the squared loss.

    s bounds the Newton decrement at the start, theta = 0 (the gradient there is at most
    R Y, the Hessian at least lam I). An absolute target is met by theta = 0 itself on
    data scaled down far enough (X * 1e-10: decrement 5e-10 at the zero model, below
    1e-8); the target scales down with s there. Scaled up, the decrement is scale-free (the
    data term of the Hessian dominates lam) and the target stays DEFAULT_TOL.
    """
    if getattr(kernel, "precomputed", False):
        d = X.diagonal() if sp.issparse(X) else np.diagonal(np.asarray(X))
        d = np.asarray(d, dtype=np.float64)
    else:
        d = np.concatenate([np.asarray(kernel.diag(float64_block(X[i:i + 4096])),
                                       dtype=np.float64).ravel()
                            for i in range(0, X.shape[0], 4096)])
    top = float(np.max(d)) if d.size else 0.0
    R = math.sqrt(top) if math.isfinite(top) and top > 0 else 0.0
    if fit_intercept:
        R = max(R, 1.0)
    Y = 1.0 if loss == "logistic" else float(np.max(np.abs(np.asarray(y, dtype=np.float64))))
    scale = R * Y / math.sqrt(float(lam))
    if not math.isfinite(scale):
        return DEFAULT_TOL
    return DEFAULT_TOL * min(1.0, max(scale, _MIN_TOL_FACTOR))


def iterated_tikhonov_filter(s, lam, t):
    """g_lam^t(s) = (1 - (lam / (s + lam))^t) / s (Eq. 8), stable near s = 0 (-> t / lam).

    Negative ``s`` (round-off in an eigendecomposition of a PSD matrix) is treated as 0.
    """
    s = np.maximum(np.asarray(s, dtype=np.float64), 0.0)
    lam = float(lam)
    # 1 - (lam/(s+lam))^t = -expm1(-t log1p(s/lam)); divide by s, with the limit t/lam
    num = -np.expm1(-t * np.log1p(s / lam))
    out = np.empty_like(s)
    small = s <= 1e-300
    out[small] = t / lam
    out[~small] = num[~small] / s[~small]
    return out


def spectral_filter_path(K, y, lam, t):
    """Iterated Tikhonov for the squared loss in closed form (appendix E.2).

    beta = 1/n U g_lam^t(D / n) U^T y with K = U D U^T; theta = sum_i beta_i Phi(x_i).

    Parameters
    ----------
    K : ndarray (n, n), the Gram matrix
    y : ndarray (n,)
    lam : float
    t : int

    Returns
    -------
    beta : ndarray (n,)
    """
    K = np.asarray(K, dtype=np.float64)
    n = K.shape[0]
    s, U = sla.eigh(K / n)
    return U @ (iterated_tikhonov_filter(s, lam, t) * (U.T @ np.asarray(y, float))) / n


# ====================================================================== exact kernels
#: bytes per Gram entry of the exact-kernel path: K, its eigenvectors and the feature
#: map Phi = V S^{1/2} (n x n each, float64)
_GRAM_COPIES = 3


def check_gram_budget(n, budget, what="iterated_tikhonov with an exact kernel"):
    """Refuse an exact-kernel path whose n x n matrices exceed ``budget`` bytes."""
    need = _GRAM_COPIES * 8.0 * float(n) * float(n)
    if need > budget:
        raise ValueError(
            f"{what} forms the {n} x {n} Gram matrix and its eigendecomposition: needs "
            f"{need / 2**30:.3g} GiB, memory_budget is {budget / 2**30:.3g} GiB; use "
            "n_components (Nystroem), a kernel approximation (nystroem/rff) or raise "
            "memory_budget")


class ExactKernelMap:
    """An exact kernel as a feature map on the training rows (the representer theorem
    in an orthonormal basis): K = V S V^T (``scipy.linalg.eigh``), Phi = V_+ S_+^{1/2}
    and ``projection_`` = V_+ S_+^{-1/2}, so that Phi(x) = k(x, X_train) projection_
    reproduces Phi on the training rows and theta = Phi^T beta for beta =
    projection_ theta.

    The eigenvalues kept are those above the rounding level of the decomposition,
    64 n u max|s| (Higham section 10.2: eigh is backward stable to about n u ||K||):
    the problem solved is the one of K_+ = V_+ S_+ V_+^T, within that level of K. An
    eigenvalue below minus that level means the kernel is not positive semi-definite on
    the data: ``NotPositiveSemidefiniteError``.

    Newton's method then runs on theta (p = rank K_+): the Hessian Phi^T D Phi / n + lam I
    is at least lam I, and its decrement is computed by a Cholesky solve, accurate to
    about cond(H) u relative. The n-dimensional form of the same Newton step (beta, with
    the Woodbury identity) subtracts two nearly equal terms and divides by lam: with an
    ill-conditioned K (poly kernel, large inputs) its decrement was off by orders of
    magnitude (1.2e-9 reported for 0.136).
    """

    def __init__(self, K, centres=None):
        from ..certificates import NotPositiveSemidefiniteError

        K = np.asarray(K, dtype=np.float64)
        n = K.shape[0]
        K = 0.5 * (K + K.T)
        if not np.all(np.isfinite(K)):
            raise ValueError("the Gram matrix has non-finite entries (kernel values overflow "
                             "float64); rescale X or the kernel parameters")
        s, V = sla.eigh(K)
        top = float(np.max(np.abs(s))) if s.size else 0.0
        tol = 64.0 * n * np.finfo(np.float64).eps / 2 * top
        if s.size and s[0] < -tol:
            raise NotPositiveSemidefiniteError(
                f"the kernel is not positive semi-definite on the data: its Gram matrix has "
                f"the eigenvalue {s[0]:.3g} (largest {s[-1]:.3g}, rounding level {tol:.3g}); "
                "iterated_tikhonov needs a positive semi-definite kernel")
        keep = s > tol
        if not np.any(keep):
            raise ValueError("the Gram matrix is zero on the data; check the kernel and its "
                             "parameters")
        root = np.sqrt(s[keep])
        self.eigenvalues_ = s[keep]
        self.features = V[:, keep] * root
        self.projection_ = V[:, keep] / root
        self.centres_ = centres
        self.rounding_level = tol


def gram_matrix(kernel, A, B=None):
    """K(A, B) in float64 (float32 rows converted first: the kernel's float32 arithmetic
    would not be positive semi-definite to float64 accuracy)."""
    def up(M):
        if sp.issparse(M):
            return M.astype(np.float64) if M.dtype != np.float64 else M
        return np.asarray(M, dtype=np.float64)

    A = up(A)
    B = A if B is None else up(B)
    return np.asarray(kernel(A, B), dtype=np.float64)


# ====================================================================== losses
class _Logistic:
    name = "logistic"
    derivatives = staticmethod(_fast.logistic_derivatives)
    loss_sum = staticmethod(_fast.logistic_loss_sum)


class _Squared:
    name = "squared"
    derivatives = staticmethod(_fast.squared_derivatives)
    loss_sum = staticmethod(_fast.squared_loss_sum)


_LOSSES = {"logistic": _Logistic, "squared": _Squared}


def _loss_numpy(loss, z, y):
    """(mean loss, g, h) in plain numpy: the independent recomputation of certificates."""
    if loss == "logistic":
        from scipy.special import expit

        m = y * z
        val = np.logaddexp(0.0, -m)
        s = expit(-m)
        return val, -y * s, s * (1.0 - s)
    r = z - y
    return 0.5 * r * r, r, np.ones_like(z)


def _finite(M):
    """M itself, or LinAlgError when an entry overflowed (LAPACK would not notice)."""
    if not np.isfinite(M).all():
        raise np.linalg.LinAlgError("non-finite Newton system")
    return M


# ====================================================================== block kernels
class _BlockRows:
    """The rows of Phi held by one block of a run (``block.v["tikhonov"]``) and the
    block-local n-vectors of the Newton iterations: z = Phi theta + b, the loss
    derivatives g and h, dz = Phi direction (+ its intercept) and the line search's trial
    predictions. Its methods are the data passes of one Newton iteration on these rows
    (the ``_tikhonov_fast`` passes); they return the block's partial sums, which the state
    adds in block order. In memory the single block holds all rows, so these are exactly
    the whole-data passes."""

    def __init__(self, Phi, y, loss_name, p, fit_intercept, weight=None):
        if Phi.shape[1] != p:
            raise ValueError(f"a row block has {Phi.shape[1]} features, the run {p}")
        self.sparse = sp.issparse(Phi)
        if not self.sparse:
            # the Cython passes read C-order rows: a private C copy of F-order input
            Phi = Phi if Phi.flags.c_contiguous else np.ascontiguousarray(Phi)
        self.Phi = Phi
        self.rows = row_block(Phi)
        self.y = np.ascontiguousarray(y, dtype=np.float64)
        self.loss = _LOSSES[loss_name]
        #: the block's sample weights (None: unweighted); g and h are then w_i l'(z_i)
        #: and w_i l''(z_i), the loss sums sum_i w_i l(z_i)
        self.weight = None if weight is None else np.ascontiguousarray(weight, dtype=np.float64)
        self.p = p
        self.fit_intercept = fit_intercept
        n = Phi.shape[0]
        self.z = np.zeros(n)
        self.g = np.empty(n)
        self.h = np.empty(n)
        self.dz = np.zeros(n)
        self.zt = None

    def predict(self, w):
        """Phi w[:p] (+ w[p]) on the block's rows."""
        out = np.empty(self.Phi.shape[0])
        _fast.matvec(self.rows, np.ascontiguousarray(w[: self.p]), out)
        if self.fit_intercept:
            out += w[self.p]
        return out

    def rmatvec(self, g):
        out = np.empty(self.p)
        _fast.rmatvec(self.rows, g, out)
        return out

    def _weighted_gram(self, rows, h):
        Hp = np.empty((self.p, self.p))
        _fast.weighted_gram(rows, h, Hp)
        return Hp

    def derivatives(self, with_hessian):
        """At z: (loss sum, Phi^T g, sum g) and, ``with_hessian``, (Phi^T diag(h) Phi,
        Phi^T h, sum h) (None each otherwise)."""
        total = self.loss.derivatives(self.z, self.y, self.g, self.h)
        if self.weight is not None:
            w = self.weight
            total = float(w @ _loss_numpy(self.loss.name, self.z, self.y)[0])
            self.g *= w
            self.h *= w
        rg = self.rmatvec(self.g)
        gs = float(self.g.sum()) if self.fit_intercept else 0.0
        if not with_hessian:
            return total, rg, gs, None, None, None
        Hp = self._weighted_gram(self.rows, self.h)
        if not self.fit_intercept:
            return total, rg, gs, Hp, None, None
        return total, rg, gs, Hp, self.rmatvec(self.h), float(self.h.sum())

    def sub_hessian(self, rows):
        """The Hessian sums of the rows ``rows`` (block-local indices) only: the
        preconditioner of the conjugate gradients."""
        h = np.ascontiguousarray(self.h[rows])
        sub = row_block(self.Phi[rows])
        Hp = self._weighted_gram(sub, h)
        if not self.fit_intercept:
            return Hp, None, None
        col = np.empty(self.p)
        _fast.rmatvec(sub, h, col)
        return Hp, col, float(h.sum())

    def hess_vec(self, v):
        """(Phi^T (h * (Phi v + b)), sum h * (Phi v + b)): the block's share of H v."""
        hz = self.h * self.predict(v)
        return self.rmatvec(hz), float(hz.sum())

    def set_direction(self, direction):
        self.dz = self.predict(direction)

    def trial(self, s):
        """Loss sum at the trial step w - s direction (its predictions kept for ``accept``)."""
        self.zt = self.z - s * self.dz
        if self.weight is not None:
            return float(self.weight @ _loss_numpy(self.loss.name, self.zt, self.y)[0])
        return self.loss.loss_sum(self.zt, self.y)

    def accept(self):
        self.z = np.ascontiguousarray(self.zt)
        self.zt = None

    def set_iterate(self, w):
        self.z = np.ascontiguousarray(self.predict(w))

    def rmatvec_y(self):
        return self.rmatvec(self.y)

    def gram(self):
        """Phi^T Phi (float64) and Phi^T y: the spectral filter's sums."""
        Phi = self.Phi
        G = np.asarray((Phi.T @ Phi).toarray() if self.sparse else Phi.T @ Phi, dtype=np.float64)
        return G, self.rmatvec(self.y)


def _k_tikhonov_setup(block, loss_name, p, fit_intercept, weight=None):
    """The block's rows (its X: Phi for the linear kernel, or the feature rows an in-memory
    run built) and sample weights as the run's ``_BlockRows``; returns the number of rows."""
    block.v["tikhonov"] = _BlockRows(block.X, block.y, loss_name, p, fit_intercept, weight)
    return block.X.shape[0]


def _k_tikhonov(block, calls):
    """Run ``calls`` ((method, args) pairs) in order on the block's ``_BlockRows``; the
    last call's result."""
    rows = block.v["tikhonov"]
    out = None
    for name, args in calls:
        out = getattr(rows, name)(*args)
    return out


def _block_sum(parts):
    """The sum of per-block results in block order (one block: that block's array)."""
    acc = parts[0]
    for part in parts[1:]:
        acc = acc + part
    return acc


class _Model:
    """The O(d) description of a run's feature space: n rows, p features (q = p + 1 with
    an unpenalized intercept), lam; ``Phi`` is the in-memory feature matrix (None when the
    rows are held by the blocks of a distributed executor)."""

    kind = "primal"

    def __init__(self, n, p, fit_intercept, lam, sparse, Phi=None):
        self.n, self.p = int(n), int(p)
        self.fit_intercept = bool(fit_intercept)
        self.q = self.p + int(self.fit_intercept)
        self.lam = lam
        self.sparse = bool(sparse)
        self.Phi = Phi

    def zeros(self):
        return np.zeros(self.q)

    def penalty(self, w, w_prev):
        d = w[: self.p] - w_prev[: self.p]
        return 0.5 * self.lam * float(d @ d)


# ====================================================================== state
class _GuardedNewton:
    """The guarded damped Newton iteration of ``_TikhonovState``: ``_evaluate`` (Newton
    quantities at the current iterate through ``_evaluate_unsafe``; a numerically singular
    or non-finite Newton system, e.g. squares of entries overflowing float64, ends the run
    honestly) and the damped step ``_newton_iteration``."""

    def _evaluate(self):
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                self._evaluate_unsafe()
            ok = np.isfinite(self.decrement) and np.all(np.isfinite(self.direction)) \
                and np.isfinite(self.objective)
        except (np.linalg.LinAlgError, ValueError):
            ok = False
        if not ok:
            import warnings

            self.failed = ("the Newton system is not numerically positive definite or not "
                           "finite (entries of X too large or too small for float64?); "
                           "rescale X")
            warnings.warn(f"iterated_tikhonov: {self.failed}", RuntimeWarning, stacklevel=2)
            self.decrement = np.inf
            self.done = True

    def refuted(self, status, verdict):
        """A "converged" claim the referee rejected (the recomputed decrement of a link of
        the chain, with its rounding bound, is above that link's target): when the
        recomputed value itself is within the target (the bound is limited by float64
        rounding, not by the iterate) or after three refutations (an earlier link cannot be
        repaired by Newton steps on the last subproblem), the run ends honestly (the rule
        then reports "max_iter", the reason is ``extra["failure"]``); otherwise Newton's
        method goes on."""
        import warnings

        self._refutations = getattr(self, "_refutations", 0) + 1
        target = verdict.threshold  # the target of the link that failed
        if verdict.value <= target or self._refutations >= 3:
            self.failed = (
                f"the Newton decrement cannot be certified below its target {target:.3g}: "
                f"recomputed from the data it is {verdict.value:.3g} with a rounding bound of "
                f"{verdict.rounding:.3g} ({verdict.reason}); the data or the kernel are too "
                "ill-conditioned for this tol in float64 (raise tol, lam, or rescale X)")
            warnings.warn(f"iterated_tikhonov: {self.failed}", RuntimeWarning, stacklevel=2)
            self.done = True

    def _chain(self):
        """The proximal iterates theta^1..theta^k of the current step k, the current iterate
        last (what the certificate stores; theta^0 = 0 is not part of it)."""
        return list(self.prox_coef[: self.prox_step - 1]) + [self.w]

    def _record_last_prox_step(self):
        """At the end of a run: the last subproblem, if it stopped the run before handing
        over, goes into the per-step history."""
        if len(self.prox_decrement) < self.prox_step:
            self.prox_decrement.append(self.decrement)
            self.prox_newton_iter.append(self.newton_iter)
            self.prox_risk.append(self.empirical_risk)

    def _newton_iteration(self):
        """One damped Newton step on the current subproblem: Armijo backtracking along
        -direction from s = 1 (halving, at most 40 times), with room for round-off near the
        optimum; when no step passes (the round-off floor) the full step. The subclass's
        ``_objective_at(s)`` evaluates a trial step, ``_accept(s)`` takes the last one."""
        dec2 = self.decrement ** 2
        f0 = self.objective
        s, accepted = 1.0, False
        for _ in range(40):
            f = self._objective_at(s)
            if f <= f0 - 0.25 * s * dec2 + 16 * np.finfo(float).eps * abs(f0):
                accepted = True
                break
            s *= 0.5
        if not accepted:
            s = 1.0
            self._objective_at(s)
        self._accept(s)
        self.step_size = s
        self.newton_iter += 1
        self._evaluate()


class _TikhonovState(_GuardedNewton, SolverState):
    """One run: the proximal sequence and the Newton iterations of the current subproblem.

    Attributes read by stopping rules: ``decrement`` (Newton decrement of the current
    subproblem at the current iterate), ``decrement_targets`` (Proposition 1 schedule
    of the run's ``newton_decrement`` rule), ``prox_step`` (k, 1-based), ``n_prox`` (t,
    or the chosen t once ``t="auto"`` has decided), ``objective``, ``empirical_risk``.
    """

    def __init__(self, solver, problem):
        prm = problem.params
        self.loss_name = prm["loss"]
        self.loss = _LOSSES[self.loss_name]
        self.auto = prm["t"] == "auto"
        self.t_sched = prm["t_max"] if self.auto else prm["t"]
        self.n_prox = self.t_sched
        self.tol, kappa = rule_schedule(problem.stop, prm["tol"])
        self.decrement_targets = decrement_schedule(self.tol, self.t_sched, kappa)
        self.method = prm["method"]
        self.n_iter = 0
        self.elapsed = 0.0
        self.done = False
        self.failed = None

        # rows held by the blocks of a distributed executor (a dask array's chunks): the
        # data passes run there; the in-memory constructions below need all rows at hand
        blocked = isinstance(problem.X, Executor)
        weights = getattr(problem, "sample_weight", None)
        if weights is not None and (prm["t"] == "auto" or prm["method"] == "spectral_filter"):
            raise ValueError(
                "iterated_tikhonov with sample_weight: t='auto' (its validation split) and "
                "method='spectral_filter' (the unweighted closed form) are not available; "
                "pass an integer t and method='newton'")
        if blocked:
            why = blocked_limits(prm, problem.kernel)
            if why:
                raise ValueError(f"iterated_tikhonov on row blocks held by workers: {why}")
        X = problem.X
        n_all = X.shape[0]
        self.train_index = None
        self.val = None
        if self.auto:
            n_val = int(round(prm["validation_fraction"] * n_all))
            if n_val < 1 or n_all - n_val < 2:
                raise ValueError(
                    f"t='auto' needs a validation split: validation_fraction="
                    f"{prm['validation_fraction']} of {n_all} samples leaves none; raise it or "
                    "pass an integer t"
                )
            perm = problem.rng.permutation(n_all)
            self.train_index = np.sort(perm[n_val:])
            val_index = np.sort(perm[:n_val])
        lam = prm["lam"] if prm["lam"] is not None else 1.0 / n_all
        self.lam = float(lam)

        kernel = problem.kernel
        self.nystroem = None
        self.exact = None
        self.identity_map = False
        m = prm["n_components"]
        if blocked:
            # the linear kernel on the blocks' own rows (``blocked_limits``)
            self.identity_map = True
            rows = problem.executor
            Phi = None
        else:
            y = problem.y
            Xtr = X if self.train_index is None else X[self.train_index]
            ytr = y if self.train_index is None else y[self.train_index]
            if getattr(kernel, "precomputed", False) and self.train_index is not None:
                Xtr = Xtr[:, self.train_index]
            ytr = np.ascontiguousarray(ytr, dtype=np.float64)
            if m is not None:
                if getattr(kernel, "precomputed", False):
                    raise ValueError("n_components (Nystroem) needs the data X, not "
                                     "kernel='precomputed'")
                self.nystroem = NystroemMap(kernel, m, problem.rng).fit(Xtr)
                Phi = self.nystroem.transform(Xtr)
            elif getattr(kernel, "feature_map", None) is not None \
                    and not getattr(kernel, "precomputed", False):
                # a map evaluated on float32 rows computes in float32: a non-linear map is
                # evaluated on float64 rows (the problem solved is the one the referee
                # checks) (an identity map then runs on X itself, as the linear kernel does)
                linear = getattr(kernel, "name", None) == "linear"
                Xb = Xtr if linear else float64_block(Xtr)
                Phi = kernel.feature_map(Xb)
                self.identity_map = linear or Phi is Xb
                Phi = Xtr if self.identity_map and not linear else Phi
                Phi = check_X(Phi, name="feature_map(X)")
            else:
                # exact kernel (or precomputed Gram): Newton on theta in the eigenbasis of K
                if prm["fit_intercept"]:
                    raise ValueError(
                        "fit_intercept=True needs a kernel with a feature map (linear) or "
                        "n_components (Nystroem); with a Gram kernel add a constant to the "
                        "kernel instead")
                budget = getattr(getattr(problem, "config", None), "memory_budget", 2.0 * 2**30)
                check_gram_budget(Xtr.shape[0], budget)
                if getattr(kernel, "precomputed", False):
                    K = Xtr.toarray() if sp.issparse(Xtr) else Xtr
                    centres = None
                else:
                    K = gram_matrix(kernel, Xtr)
                    centres = Xtr
                self.exact = ExactKernelMap(K, centres)
                del K
                Phi = np.ascontiguousarray(self.exact.features)
            # the training rows as given (linear kernel, no split): the problem's own
            # blocks; any other feature rows: one in-memory block of Phi
            rows = problem.executor if Phi is X else local_executor(Phi, ytr)
        fit_intercept = prm["fit_intercept"] and self.exact is None
        self.rows = rows
        self.model = _Model(rows.n_samples, rows.n_features, fit_intercept, self.lam,
                            rows.sparse, Phi)
        self.weighted = weights is not None
        if weights is None:
            rows.map(_k_tikhonov_setup, self.loss_name, self.model.p, self.model.fit_intercept)
        else:
            rows.map_each(_k_tikhonov_setup,
                          [(self.loss_name, self.model.p, self.model.fit_intercept, wb)
                           for wb in rows.split(weights)])
        self._pending = []
        if self.method == "spectral_filter":
            if self.loss_name != "squared":
                raise ValueError("method='spectral_filter' is the closed form of the squared loss "
                                 "(Eq. 8); use method='newton' for loss='logistic'")
            if self.auto or prm["fit_intercept"]:
                raise ValueError("method='spectral_filter' needs an integer t and fit_intercept=False")
        if self.auto:
            self._setup_validation(problem, X, problem.y, val_index)

        ns = prm["newton_solver"]
        if ns == "auto":
            dense_big = self.exact is None and not self.model.sparse \
                and self.model.p >= 512 and self.model.n >= 4 * self.model.p
            ns = "cg" if dense_big else "cholesky"
        if ns == "cg" and self.exact is not None:
            raise ValueError("newton_solver='cg' works on feature maps (linear, Nystroem); "
                             "use 'cholesky' for Gram kernels")
        self.newton_solver = ns
        if ns == "cg":
            s = min(self.model.n, max(2 * self.model.p, 1000))
            rows_cg = np.sort(problem.rng.choice(self.model.n, size=s, replace=False))
            off = rows.offsets
            # the subsample's rows block by block (block-local indices)
            self._precond_rows = [rows_cg[(rows_cg >= off[i]) & (rows_cg < off[i + 1])] - off[i]
                                  for i in range(rows.n_chunks)]
            self._precond_size = s
        # the CG preconditioner's factor, kept across Newton iterations while it works
        # (``_pcg``): the CG iterations of the solve right after it was formed, and of the
        # last solve
        self._precond = None
        self._precond_base = self._precond_last = 0

        self.w = self.model.zeros()
        self.w_prev = self.model.zeros()
        self._const_factor = None
        self.objective = self.empirical_risk = self.penalty = np.nan
        self.decrement = np.inf
        self.direction = self.model.zeros()
        self.prox_step = 1
        self.newton_iter = 0
        self.prox_decrement = []
        self.prox_newton_iter = []
        self.prox_risk = []
        self.prox_coef = []
        self.validation_loss = []
        if self.method == "newton":
            self._evaluate()
        else:
            self.decrement = np.inf
            self.objective = self.empirical_risk = self._risk()

    # ------------------------------------------------------------------ helpers
    def _setup_validation(self, problem, X, y, val_index):
        kernel = problem.kernel
        Xv = X[val_index]
        self.y_val = np.asarray(y[val_index], dtype=np.float64)
        if self.nystroem is not None:
            self.Phi_val = self.nystroem.transform(Xv)
        elif self.exact is not None:
            if getattr(kernel, "precomputed", False):
                Kv = Xv[:, self.train_index]
                Kv = np.asarray(Kv.toarray() if sp.issparse(Kv) else Kv, dtype=np.float64)
            else:
                Kv = gram_matrix(kernel, Xv, X[self.train_index])
            self.Phi_val = Kv @ self.exact.projection_
        else:
            Xv = Xv if self.identity_map else float64_block(Xv)
            self.Phi_val = check_X(kernel.feature_map(Xv), name="feature_map(X)")

    def _val_loss(self, w):
        z = np.asarray(self.Phi_val @ w[: self.model.p], dtype=np.float64).ravel()
        if self.model.fit_intercept:
            z = z + w[self.model.p]
        return self.loss.loss_sum(np.ascontiguousarray(z), self.y_val) / z.shape[0]

    def _map(self, name, *args):
        """``name(*args)`` on every block's rows, after the calls queued in ``_pending``
        (they ride along: one map per data pass); the results in block order."""
        calls = self._pending + [(name, args)]
        self._pending = []
        return self.rows.map(_k_tikhonov, calls)

    def _risk(self):
        """L_hat at the blocks' current predictions (theta^0 = 0 before any step)."""
        return sum(self._map("trial", 0.0)) / self.model.n

    @property
    def decrement_target(self):
        return float(self.decrement_targets[min(self.prox_step, len(self.decrement_targets)) - 1])

    def _evaluate_unsafe(self):
        mdl = self.model
        p, n, lam = mdl.p, mdl.n, self.lam
        const = self.newton_solver == "cholesky" and self.loss_name == "squared" \
            and self._const_factor is not None
        # one pass over the rows: the loss, Phi^T g and (unless the squared loss's constant
        # Hessian is factored already, or CG uses products) the Hessian sums
        parts = self._map("derivatives", self.newton_solver == "cholesky" and not const)
        total = sum(part[0] for part in parts)
        self.empirical_risk = total / n
        self.penalty = mdl.penalty(self.w, self.w_prev)
        grad = np.empty(mdl.q)
        grad[:p] = _block_sum([part[1] for part in parts]) / n \
            + lam * (self.w[:p] - self.w_prev[:p])
        if mdl.fit_intercept:
            grad[p] = sum(part[2] for part in parts) / n
        self.grad = grad
        if self.newton_solver == "cholesky":
            if const:
                cho = self._const_factor
            else:
                H = self._hessian([part[3:] for part in parts], n)
                cho = sla.cho_factor(_finite(H), lower=True, check_finite=False)
                if self.loss_name == "squared":
                    self._const_factor = cho
            self.direction = sla.cho_solve(cho, grad, check_finite=False)
        else:
            self.direction = self._pcg(grad)
        # dz = Phi direction, computed on the blocks with the next pass (the line search)
        self._pending.append(("set_direction", (self.direction,)))
        dec2 = float(self.grad @ self.direction)
        self.objective = self.empirical_risk + self.penalty
        self.decrement = float(np.sqrt(max(dec2, 0.0)))

    def _hessian(self, parts, n_rows):
        """The (q, q) Hessian Phi^T D Phi / n_rows + lam I (intercept row and column
        unpenalized) from the blocks' (Phi^T diag(h) Phi, Phi^T h, sum h)."""
        mdl, p = self.model, self.model.p
        H = np.empty((mdl.q, mdl.q))
        Hp = _block_sum([part[0] for part in parts]) / n_rows
        Hp.flat[:: p + 1] += self.lam
        H[:p, :p] = Hp
        if mdl.fit_intercept:
            col = _block_sum([part[1] for part in parts]) / n_rows
            H[:p, p] = col
            H[p, :p] = col
            H[p, p] = sum(part[2] for part in parts) / n_rows
        return H

    def _hess_vec(self, v):
        """H v without forming H: Phi^T (h * (Phi v + b)) / n + lam v, one pass."""
        mdl = self.model
        parts = self._map("hess_vec", v)
        out = np.empty(mdl.q)
        out[: mdl.p] = _block_sum([part[0] for part in parts]) / mdl.n + self.lam * v[: mdl.p]
        if mdl.fit_intercept:
            out[mdl.p] = sum(part[1] for part in parts) / mdl.n
        return out

    def _pcg(self, grad):
        """H^{-1} grad by conjugate gradients preconditioned with the Hessian of a
        uniform row subsample (the Nystroem centres' role in FALKON-type solvers).

        The preconditioner (one pass over the subsample's rows and a Cholesky factor) is
        formed at the first Newton iteration and kept while the Hessian it was formed at
        still serves: it is formed again once a solve needs more than twice the CG
        iterations (plus 5) of the solve right after it was formed. Only the speed of CG
        depends on it: every solve runs to the same residual tolerance."""
        mdl = self.model
        if self._precond is None or self._precond_last > 2 * self._precond_base + 5:
            calls = [(self._pending + [("sub_hessian", (rows,))],)
                     for rows in self._precond_rows]
            self._pending = []
            parts = self.rows.map_each(_k_tikhonov, calls)
            P = self._hessian(parts, self._precond_size)
            self._precond = sla.cho_factor(_finite(P), lower=True, check_finite=False)
            self._precond_base = None
        cho = self._precond
        gnorm = float(np.linalg.norm(grad))
        # inexact Newton: relative accuracy min(0.1, ||grad||) and, near the target, an
        # absolute accuracy making the decrement error a small fraction of the target
        atol = 1e-3 * self.decrement_target * np.sqrt(self.lam)
        stop = max(min(0.1, np.sqrt(gnorm)) * gnorm, atol)
        x = np.zeros_like(grad)
        r = grad.copy()
        zr = sla.cho_solve(cho, r, check_finite=False)
        p = zr.copy()
        rz = float(r @ zr)
        its = 0
        for its in range(10 * mdl.q + 100):
            if np.linalg.norm(r) <= stop:
                break
            Hp = self._hess_vec(p)
            a = rz / float(p @ Hp)
            x += a * p
            r -= a * Hp
            zr = sla.cho_solve(cho, r, check_finite=False)
            rz_new = float(r @ zr)
            p = zr + (rz_new / rz) * p
            rz = rz_new
        self._precond_last = its
        if self._precond_base is None:
            self._precond_base = its
        return x

    def _objective_at(self, s):
        """Objective of the current subproblem at w - s * direction (line search); keeps
        the trial predictions for ``_accept``."""
        mdl = self.model
        risk = sum(self._map("trial", s)) / mdl.n
        return risk + mdl.penalty(self.w - s * self.direction, self.w_prev)

    def _accept(self, s):
        self.w = self.w - s * self.direction
        self._pending.append(("accept", ()))

    # ------------------------------------------------------------------ iteration
    def _finish_prox_step(self):
        """Record subproblem k as solved; hand over to k + 1 or end the run."""
        k = self.prox_step
        self.prox_decrement.append(self.decrement)
        self.prox_newton_iter.append(self.newton_iter)
        self.prox_risk.append(self.empirical_risk)
        self.prox_coef.append(self.w.copy())
        if self.auto:
            v = self._val_loss(self.w)
            self.validation_loss.append(v)
            if k > 1 and not v < min(self.validation_loss[:-1]):
                # the validation loss stopped improving: keep t = k - 1 (section 3.2)
                self._choose(k - 1)
                return
            if k == self.t_sched:
                self._choose(k)
                return
        if k >= self.n_prox:
            self.done = True
            return
        self.w_prev = self.w.copy()
        self.prox_step = k + 1
        self.newton_iter = 0
        self._evaluate()

    def _choose(self, t):
        """End of t='auto': roll back to the iterate of proximal step t."""
        self.n_prox = self.prox_step = t
        self.w = self.prox_coef[t - 1].copy()
        self.w_prev = self.prox_coef[t - 2].copy() if t >= 2 else self.model.zeros()
        self._pending.append(("set_iterate", (self.w,)))
        self._evaluate()
        self.done = True

    def step(self):
        if self.done:
            return
        if self.method == "spectral_filter":
            self._filter_solve()
            return
        if self.decrement <= self.decrement_target:
            self._finish_prox_step()
            if self.done:
                return
        self._newton_iteration()

    def _filter_solve(self):
        """All t proximal steps at once through the spectral filter (Eq. 8, appendix E.2)."""
        mdl, t, lam, n = self.model, self.n_prox, self.lam, self.model.n
        if self.exact is not None:
            # Phi = V S^{1/2} already diagonalizes Phi^T Phi = S
            s = self.exact.eigenvalues_ / n
            b = _block_sum(self._map("rmatvec_y")) / n
            coef = [iterated_tikhonov_filter(s, lam, k) * b for k in range(t + 1)]
        else:
            parts = self._map("gram")
            G = _block_sum([part[0] for part in parts])
            s, V = sla.eigh(G / n)
            b = V.T @ _block_sum([part[1] for part in parts]) / n
            coef = [V @ (iterated_tikhonov_filter(s, lam, k) * b) for k in range(t + 1)]
        # IT(k) for k = 0..t (theta^0 = 0): the whole proximal chain, each link exact
        self.prox_coef = coef[1:t]
        self.w_prev, self.w = coef[t - 1], coef[t]
        self._pending.append(("set_iterate", (self.w,)))
        self.prox_step = t
        self._evaluate()
        self.prox_decrement = [self.decrement]
        self.prox_newton_iter = [0]
        self.prox_risk = [self.empirical_risk]
        self.done = True

    def snapshot(self):
        return {"objective": float(self.objective), "empirical_risk": float(self.empirical_risk),
                "decrement": float(self.decrement), "prox_step": float(self.prox_step),
                "target": self.decrement_target}

    def certificate(self, status):
        """The certificate of the claim "converged" at the current iterate (None for any
        other status): the proximal chain up to it, each subproblem solved to its target."""
        if status != "converged":
            return None
        problem, mdl = self.problem, self.model
        chain = self._chain()
        centres = projection = None
        if self.exact is not None:
            rep, chain = "gram", [self.exact.projection_ @ w for w in chain]
        else:
            rep = "primal"
            if self.nystroem is not None:
                centres, projection = self.nystroem.centres_, self.nystroem.projection_
        return NewtonDecrementCertificate(
            self.decrement, self.decrement_targets[: self.prox_step], self.loss_name, self.lam,
            rep, np.array(chain), mdl.fit_intercept, problem.kernel, problem.classes_,
            self.train_index, centres, projection, self.identity_map, config=problem.config,
            prox_step=self.prox_step, weighted=self.weighted)


# ====================================================================== stopping rule
@_register_builtin("stopping", "newton_decrement")
class NewtonDecrement(StoppingRule):
    """Proposition 1: solve subproblem k to Newton decrement <= tol kappa^(k-t) / t.

    The solver's state reads the schedule from the rule's parameters (``rule_schedule``;
    it hands a subproblem over to the next one when it meets its target); the rule stops with
    ``"converged"`` once the last proximal step meets its target: the decrement of the
    exact final subproblem is then <= tol (Proposition 7, c = 1/2). ``tol=None`` uses the
    solver's ``tol``; ``kappa`` = -log(1 - c)/c (1.4 for c = 1/2).
    """

    requires = ("decrement", "decrement_targets", "prox_step", "n_prox", "tol")
    status = "converged"
    advice = "a larger tol (or lam) is reached sooner"
    param_table = {
        "tol": Param(None, types=numbers.Real, low=0, low_open=True, allow_none=True,
                     doc="target eps on the final Newton decrement"),
        "kappa": Param(KAPPA, types=numbers.Real, low=1.0, doc="geometric factor of the schedule"),
    }

    def check(self, state):
        if getattr(state, "failed", None):
            return "max_iter"  # the numbers broke down: no target can be met (see extra)
        if state.prox_step >= state.n_prox and \
                state.decrement <= state.decrement_targets[state.n_prox - 1]:
            return self.status
        return None


# ====================================================================== certificate
def run_targets(config, n_train, prox_step):
    """The claim's numbers from the run's configuration (a ``Config``, or its dict form
    after ``load_result``): loss, lam (``lam`` or 1/n_train), fit_intercept, the target
    of the Newton decrement of subproblem k = ``prox_step`` (the run's last one; None: t)
    under the schedule of the run's ``newton_decrement`` rule (the last one in ``stop``;
    tol None means the solver's tol), tol kappa^(k - T) / T with T = t (``t_max`` for
    t="auto"), and ``targets``, the targets of the subproblems 1..k (a tuple). Parameters
    are validated by the solver's and the rule's tables (``ValueError``/``TypeError``
    naming them)."""
    from .._config import Config
    from .._registry import get_plugin
    from .._referee import stopping_rules

    if isinstance(config, Config):
        spec, sparams, stop = config.solver, dict(config.solver_params), config.stop
    elif isinstance(config, dict):
        spec, sparams, stop = config.get("solver"), config.get("solver_params") or {}, \
            config.get("stop")
        if not isinstance(sparams, dict):
            raise TypeError("config['solver_params'] must be a dict")
    else:
        raise TypeError(f"config must be a marginkit.Config or its dict form, got "
                        f"{type(config).__name__}")
    cls = get_plugin("solver", spec) if isinstance(spec, str) else type(spec)
    if not (isinstance(cls, type) and issubclass(cls, IteratedTikhonov)):
        raise ValueError(f"the run's solver {spec!r} is not iterated_tikhonov")
    if not isinstance(spec, str):
        sparams = {**spec.params, **sparams}
    prm = cls(**sparams).params
    rules = stopping_rules(stop, cls.default_stop)
    if rules is None:
        raise ValueError("the run's stopping rules cannot be read from its configuration")
    tol, kappa = rule_schedule(rules, prm["tol"])
    T = int(prm["t_max"]) if prm["t"] == "auto" else int(prm["t"])
    k = int(prox_step) if prox_step is not None else T
    if not (1 <= k <= T) or (prm["t"] != "auto" and k != T):
        raise ValueError(f"proximal step {prox_step!r} is not the run's last one (t={prm['t']!r})")
    lam = float(prm["lam"]) if prm["lam"] is not None else 1.0 / n_train
    targets = tuple(float(v) for v in decrement_schedule(tol, T, kappa)[:k])
    return {"loss": prm["loss"], "lam": lam, "fit_intercept": bool(prm["fit_intercept"]),
            "target": targets[-1], "targets": targets}


def _loss_derivatives_bounded(loss, z, ez, y):
    """(g, h, bounds e_g >= |g - l'(z*)|, e_h >= |h - l''(z*)|) for every z* within ez of
    z: the logistic loss through expit (assumed accurate to 4 u relative, as
    scipy.special.expit is in practice), |l''| <= 1/4, |l'''| <= 1/(6 sqrt 3); the
    squared loss exactly (h = 1)."""
    from .._referee import ETA, UNIT

    if loss == "logistic":
        from scipy.special import expit

        m = y * z
        sneg, spos = expit(-m), expit(m)
        g = -y * sneg
        h = sneg * spos
        eg = 0.25 * ez + 4 * UNIT * np.abs(g) + ETA
        eh = 0.0963 * ez + 12 * UNIT * h + ETA
        return g, h, eg, eh
    g = z - y
    return g, np.ones_like(z), ez + UNIT * np.abs(g) + ETA, np.zeros_like(z)


def _decrement_referee(blocks, y, theta, b, theta_prev, lam, loss, fit_intercept,
                       enough=None, steer=None, weight=None):
    """An upper bound nu_up of the Newton decrement of L_hat(theta, b) + lam/2
    ||theta - theta_prev||^2 at (theta, b), and the recomputed central value, from the
    rows of Phi (``blocks``, a ``_referee.RowBlocks``). Sums over the rows run in long
    double (``_svm_fast.ref_rmatvec`` / ``ref_matvec``); docs/tikhonov.md, "The
    certificate", derives the bound:

        nu <= sqrt(zeta^T H zeta + 2 zeta^T rho + ||rho||^2 / lam_lb) + ||G - G~|| / sqrt(lam_lb)

    for the computed gradient G~, any zeta (a Newton direction, solved in float64 and
    refined once), rho = G~ - H zeta, H the exact Hessian and lam_lb <= lambda_min(H).

    ``enough``: a target. zeta = 0 gives nu <= (||G~|| + ||G - G~||) / sqrt(lam_lb) from the
    gradient alone; when that is already <= ``enough`` it is returned as both numbers
    (no Hessian, no second pass: the intermediate links of a chain, whose targets are
    loose, are mostly proven this way).

    ``steer``: a dict that keeps the float64 Hessian Phi^T diag(l'') Phi that steers zeta
    between the calls of one chain check: formed by the first call that needs it (the
    check starts with the last link, the one it reports) and reused by the others, whose
    iterates are close to it. Any zeta gives a valid bound (rho is recomputed at each
    link's own iterate), so this only affects how tight the bound is.

    ``weight``: the sample weights of a weighted run (the risk 1/n sum_i w_i l(z_i)): the
    derivatives become w_i l'(z_i) and w_i l''(z_i), their bounds w_i e_g + 2 u |w_i g_i|
    (+ eta) for the rounded product, and everything downstream is the same."""
    from . import _svm_fast as f
    from .. import _referee as R

    LD = np.longdouble
    uL = float(np.finfo(LD).epsneg)

    def gL(k):
        return k * uL / (1.0 - k * uL)

    n = blocks.n
    p = theta.shape[0]
    q = p + int(fit_intercept)
    # sums over the rows: float64 over REF_ROWS rows, the partial sums in long double
    gB = R.gamma(f.REF_ROWS + 4) + gL(n // f.REF_ROWS + blocks.n_blocks + 8)
    zero_p, none = np.zeros(p), np.zeros(1, dtype=np.uint8)
    zero_m = np.zeros(p)
    # -- pass 1: z, l'(z), l''(z) and their bounds; G = Phi^T g / n (+ lam (theta - prev))
    z = np.empty(n)
    ez = np.empty(n)
    g = np.empty(n)
    h = np.empty(n)
    eg = np.empty(n)
    eh = np.empty(n)
    xi2 = np.empty(n) if fit_intercept else None
    aG = np.zeros(p, dtype=LD)
    magG = np.zeros(p)
    D = 1
    for lo, hi, B in blocks:
        if B.shape[1] != p:
            raise ValueError(f"the feature map has {B.shape[1]} columns, the certificate {p}")
        rows = row_block(B)
        m_ = hi - lo
        zt, Mz = np.zeros(m_, dtype=LD), np.zeros(m_)
        f.ref_matvec_ld(rows, theta, np.abs(theta), zt, Mz)
        rl = int(R.row_lengths(B).max(initial=0))
        D = max(D, rl)
        zb = (zt + LD(b)).astype(np.float64)
        z[lo:hi] = zb
        # the row product in long double (rl terms), b added, rounded to float64
        ez[lo:hi] = gL(rl + 3) * (Mz * (1 + R.gamma(rl + 2)) + abs(b)) + R.UNIT * np.abs(zb) \
            + R.ETA
        gb, hb, egb, ehb = _loss_derivatives_bounded(loss, zb, ez[lo:hi], y[lo:hi])
        if weight is not None:
            wb = weight[lo:hi]
            gb, hb = wb * gb, wb * hb
            egb = wb * egb + 2 * R.UNIT * np.abs(gb) + R.ETA
            ehb = wb * ehb + 2 * R.UNIT * hb + R.ETA
        g[lo:hi], h[lo:hi], eg[lo:hi], eh[lo:hi] = gb, hb, egb, ehb
        if fit_intercept:
            xi2[lo:hi] = np.asarray(B.multiply(B).sum(axis=1)).ravel() if sp.issparse(B) \
                else np.einsum("ij,ij->i", B, B)
        f.ref_rmatvec(rows, np.zeros(p, dtype=np.uint8), zero_m, gb, egb + gB * np.abs(gb),
                      aG, magG)
    g_ = R.gamma(n + D + p + 16)
    dth = theta.astype(LD) - theta_prev[:p].astype(LD)
    G = np.empty(q, dtype=LD)
    G[:p] = aG / n + LD(lam) * dth
    EG = np.empty(q)
    EG[:p] = magG * (1 + 2 * g_) / n + gL(4) * lam * np.abs(dth.astype(np.float64)) + R.ETA
    if fit_intercept:
        G[p] = np.sum(g.astype(LD)) / n
        EG[p] = (np.sum(eg) + gL(n + 2) * np.sum(np.abs(g))) * (1 + 2 * g_) / n + R.ETA
    # a lower bound of lambda_min(H): lam without intercept; with it (docs/tikhonov.md)
    # min(lam / 2, (1 - e) sum h / n), e = 2 T_h / (2 T_h + lam n), T_h >= sum h_i ||phi_i||^2
    if fit_intercept:
        T_h = float(np.sum((h + eh) * xi2)) * (1 + 2 * g_)
        h_lo = max(float(np.sum(np.maximum(h - eh, 0.0))) * (1 - 2 * g_), 0.0)
        lam_lb = min(0.5 * lam, lam * n / (2 * T_h + lam * n) * h_lo / n) * (1 - 4 * R.UNIT)
    else:
        lam_lb = lam * (1 - 4 * R.UNIT)
    if not lam_lb > 0:
        return math.inf, math.inf
    Gd = G.astype(np.float64)
    NEG, _ = R.scaled_norm(EG)
    if enough is not None:
        # zeta = 0: ||G~|| from its float64 rounding Gd (|Gd - G~| <= u |G~| + eta per entry)
        NG, eNG = R.scaled_norm(Gd)
        cheap = ((NG + eNG) * (1 + 2 * R.UNIT) + math.sqrt(q) * R.ETA
                 + NEG * (1 + g_)) / math.sqrt(lam_lb) * (1 + 4 * R.UNIT)
        if cheap <= enough:
            return cheap, cheap
    # -- a Newton direction zeta (float64; any zeta gives a valid bound)
    if steer is None or "H" not in steer:
        Hs = _weighted_gram(blocks, h, p)
        if steer is not None:
            steer["H"] = Hs
    else:
        Hs = steer["H"]
    zeta = _newton_direction(Hs, blocks, h, n, lam, p, fit_intercept, Gd)
    best = None
    for _ in range(2):  # the direction, then one refinement step on the residual
        up, central, rho_hat, rest = _decrement_pass2(blocks, h, eh, n, lam, p,
                                                       fit_intercept, G, zeta, lam_lb, gL, D, gB)
        if best is None or up < best[0]:
            best = (up, central)
        if Hs is None or rest <= 1e-6 * up * up:
            break  # the residual's share of the bound is negligible: no refinement
        zeta = zeta + _newton_direction(Hs, blocks, h, n, lam, p, fit_intercept,
                                        rho_hat.astype(np.float64))
    up, central = best
    nu_up = up * (1 + 2 * R.UNIT) + NEG * (1 + g_) / math.sqrt(lam_lb)
    return central, nu_up


def _weighted_gram(blocks, h, p):
    """Phi^T diag(h) Phi over the row blocks (float64; it only steers the direction zeta,
    the bound holds for any), or None when p x p does not fit in 256 MiB."""
    if p * p * 8 > 256 * 2**20:
        return None
    Hs = np.zeros((p, p))
    for lo, hi, B in blocks:
        hb = h[lo:hi]
        if sp.issparse(B):
            Hs += np.asarray((B.T @ B.multiply(hb[:, None])).toarray())
        else:
            Hs += (B * hb[:, None]).T @ B
    return Hs


def _newton_direction(Hs, blocks, h, n, lam, p, fit_intercept, rhs):
    """H^{-1} rhs from the (p x p) Hessian summed in pass 1 (float64 Cholesky, a least-
    squares solve when it fails); zeros when the Hessian was too large to form."""
    q = p + int(fit_intercept)
    if Hs is None:
        return np.zeros(q)
    H = np.empty((q, q))
    H[:p, :p] = Hs / n
    H[np.diag_indices(p)] += lam
    if fit_intercept:
        col = np.zeros(p)
        for lo, hi, B in blocks:
            col += np.asarray(B.T @ h[lo:hi]).ravel()
        H[:p, p] = H[p, :p] = col / n
        H[p, p] = float(np.sum(h)) / n
    try:
        return sla.cho_solve(sla.cho_factor(H, lower=True, check_finite=False), rhs,
                             check_finite=False)
    except (np.linalg.LinAlgError, ValueError):
        return np.linalg.lstsq(H, rhs, rcond=None)[0]


def _decrement_pass2(blocks, h, eh, n, lam, p, fit_intercept, G, zeta, lam_lb, gL, D, gB):
    """(upper bound of sqrt(G^T H^{-1} G), sqrt(zeta . G), rho_hat, the share of the
    residual and rounding terms in the squared bound) for a direction zeta: zeta^T H zeta,
    rho = G - H zeta and their rounding bounds, one pass over the rows."""
    from . import _svm_fast as f
    from .. import _referee as R

    LD = np.longdouble
    zt = np.ascontiguousarray(zeta[:p])
    zb = float(zeta[p]) if fit_intercept else 0.0
    ztL = zt.astype(LD)
    aQ = np.zeros(p, dtype=LD)
    magQ = np.zeros(p)
    Qsum = 0.0
    qsum = LD(0)
    eqsum = 0.0
    zero_p = np.zeros(p)
    for lo, hi, B in blocks:
        rows = row_block(B)
        m_ = hi - lo
        st, Ms = np.zeros(m_, dtype=LD), np.zeros(m_)
        f.ref_matvec_ld(rows, zt, np.abs(zt), st, Ms)
        rl = int(R.row_lengths(B).max(initial=0))
        s = (st + LD(zb)).astype(np.float64)
        es = gL(rl + 3) * (Ms * (1 + R.gamma(rl + 2)) + abs(zb)) + R.UNIT * np.abs(s) + R.ETA
        hb, ehb = h[lo:hi], eh[lo:hi]
        qv = hb * s                                     # ~ h_i s_i
        eq = ehb * (np.abs(s) + es) + hb * es + R.UNIT * np.abs(qv) + R.ETA
        Qsum += float(np.sum((hb + ehb) * (np.abs(s) + es) ** 2))
        qsum += np.sum(qv.astype(LD))
        eqsum += float(np.sum(eq)) + gL(n + 2) * float(np.sum(np.abs(qv)))
        f.ref_rmatvec(rows, np.zeros(p, dtype=np.uint8), zero_p, qv, eq + gB * np.abs(qv),
                      aQ, magQ)
    g_ = R.gamma(n + D + p + 16)
    q = zeta.shape[0]
    rho = np.empty(q, dtype=LD)
    rho[:p] = G[:p] - aQ / n - LD(lam) * ztL
    Erho = np.empty(q)
    Erho[:p] = magQ * (1 + 2 * g_) / n + gL(4) * (np.abs(G[:p].astype(np.float64))
                                                  + lam * np.abs(zt)) + R.ETA
    if fit_intercept:
        rho[p] = G[p] - qsum / n
        Erho[p] = eqsum * (1 + 2 * g_) / n + gL(4) * abs(float(G[p])) + R.ETA
    zHz = Qsum * (1 + 2 * g_) / n + lam * float(zt @ zt) * (1 + g_)
    zr = float(np.sum(zeta.astype(LD) * rho))
    nz, _ = R.scaled_norm(zeta)
    nE, _ = R.scaled_norm(Erho)
    nr, _ = R.scaled_norm(rho.astype(np.float64))
    # zeta . rho summed in long double: its rounding is at most gL(q + 2) ||zeta|| ||rho||
    B2 = zHz + 2 * zr + 2 * nz * (nE + gL(q + 2) * nr) + (nr * (1 + 4 * R.UNIT) + nE) ** 2 / lam_lb
    B2 = B2 * (1 + 8 * R.UNIT) + 4 * R.UNIT * abs(zr)
    central = math.sqrt(max(float(np.sum(zeta.astype(LD) * G)), 0.0))
    rest = 2 * nz * (nE + gL(q + 2) * nr) + (nr * (1 + 4 * R.UNIT) + nE) ** 2 / lam_lb
    return math.sqrt(max(B2, 0.0)), central, rho, rest


@certificate_type
class NewtonDecrementCertificate(Certificate):
    """The proximal chain theta^1..theta^t of a run, each link solved to its target.

    What the chain certifies (``check(X, y)``): for every k = 1..t, theta^k solves the
    proximal subproblem centred at the chain's previous link,

        F_k(theta) = L_hat(theta) + lam/2 ||theta - theta^{k-1}||^2,

    to Newton decrement ||grad F_k(theta^k)||_{H_k(theta^k)^{-1}} <= eps_k (Eq. 19), where
    theta^0 = 0 is fixed by the referee (never read from the certificate, as the solver
    starts there; an intercept is unpenalized and takes no part in the centre) and eps_k =
    tol kappa^(k - T) / T is the target of step k under the run's configuration (tol, t,
    or t_max for t="auto", and the ``newton_decrement`` rule's kappa), never the stored
    ``targets``. Because the first centre is the exact theta^0, link 1 is a decrement of
    the exact first subproblem; this is the hypothesis of Proposition 1 (Proposition 7
    with c = 1/2), whose induction starts there (Eq. 61). With kappa >= 1.4 and, for the
    logistic loss, tol <= sqrt(lam) / (2 R) (Assumption 5, R the self-concordance
    constant on the data), the proposition gives that theta^t has Newton decrement <= tol
    on the exact final subproblem, the one centred at the exact proximal iterate
    (Eq. 18); for the squared loss kappa >= 1 is enough (constant Hessian H >= lam I).
    That consequence and its conditions on tol and R are the paper's, not re-checked.

    Each link is recomputed from the data alone in float64 and long double with a proven
    upper bound (docs/tikhonov.md, "The certificate"), and that bound must be within the
    link's target; the Verdict of a chain that holds reports the last link (value,
    threshold, rounding) and the smallest margin over the links, a rejection the first
    link that fails, named in its reason. The loss, lam and fit_intercept also come from
    the configuration and must agree with the stored ones; the chain must have as many
    links as the run's last proximal step (t, or ``prox_step`` of t="auto"). Without a
    configuration (user code) the stored numbers and ``targets`` are used.

    Parameters
    ----------
    value : float
        The solver's Newton decrement of the last link (information; never read).
    targets : float or array (t,)
        The targets eps_1..eps_t the run used (a float: the same for every link).
    loss, lam : the loss name and lambda.
    representation : {"gram", "primal"}
    chain : array (t, d)
        theta^1..theta^t, one row per proximal step: representer weights beta^k (d = n,
        theta = sum_i beta_i Phi(x_i)) for exact kernels (``representation="gram"``; the
        referee forms K in float64 and its eigen feature map, ``ExactKernelMap``), the
        feature-space coefficients otherwise, with the intercept last when
        ``fit_intercept`` (feature maps, Nystroem centres and the identity: linear
        kernel, dense, CSR or a dask array read chunk by chunk, in row blocks).

    ``coef`` (theta^t), ``coef_prev`` (theta^{t-1}; zeros when t = 1) and ``target``
    (eps_t) are views on ``chain`` and ``targets``. Not re-checked: which rows form the
    training split of t="auto" (``train_index``, validated as increasing row indices).

    Weighted runs: ``check(X, y, sample_weight=w)`` takes the weights as data and
    recomputes every link on the weighted risk 1/n sum_i w_i loss_i; a certificate of a
    weighted run (``weighted``) checked without weights is rejected with a message saying
    to pass them, and other weights are a recomputation for those weights.
    """

    kind = "newton_decrement"

    def __init__(self, value, targets, loss, lam, representation, chain, fit_intercept,
                 kernel, classes, train_index=None, centres=None, projection=None,
                 identity_map=False, config=None, prox_step=None, weighted=False):
        self.value = float(value)
        self.chain = np.array(chain, dtype=np.float64)
        if self.chain.ndim != 2 or self.chain.shape[0] < 1:
            raise ValueError(f"chain must be a (t, d) array of the t >= 1 proximal iterates, "
                             f"got shape {self.chain.shape}")
        t = self.chain.shape[0]
        targets = np.asarray(targets, dtype=np.float64)
        if targets.ndim > 1 or targets.size not in (1, t):
            raise ValueError(f"targets must be one number or one per link ({t}), got shape "
                             f"{targets.shape}")
        self.targets = np.broadcast_to(targets.ravel(), (t,)).copy()
        self.loss = loss
        self.lam = float(lam)
        self.representation = representation
        self.fit_intercept = bool(fit_intercept)
        self.kernel = kernel
        self.classes = classes
        self.train_index = train_index
        self.centres = centres
        self.projection = projection
        self.identity_map = bool(identity_map)
        #: the run's configuration (source of the targets), None for user code
        self.config = config
        #: the proximal step k of the returned iterate (t="auto" picks it)
        self.prox_step = prox_step
        #: whether the run was weighted (its check then needs the sample weights)
        self.weighted = bool(weighted)

    # views on the chain (settable: a new value replaces the stored array by a copy)
    @property
    def coef(self):
        """theta^t (beta^t for exact kernels): the returned iterate."""
        return self.chain[-1]

    @coef.setter
    def coef(self, value):
        chain = self.chain.copy()
        chain[-1] = value
        self.chain = chain

    @property
    def coef_prev(self):
        """theta^{t-1}, the centre of the last subproblem (theta^0 = 0 when t = 1)."""
        return self.chain[-2] if self.chain.shape[0] >= 2 else np.zeros(self.chain.shape[1])

    @coef_prev.setter
    def coef_prev(self, value):
        if self.chain.shape[0] < 2:
            raise AttributeError("a chain of one link has no stored centre: theta^0 = 0")
        chain = self.chain.copy()
        chain[-2] = value
        self.chain = chain

    @property
    def target(self):
        """eps_t, the target of the last link."""
        return float(self.targets[-1])

    @target.setter
    def target(self, value):
        targets = np.array(self.targets, dtype=np.float64)
        targets[-1] = value
        self.targets = targets

    def _targets(self, n_train, t):
        config = getattr(self, "config", None)
        if config is None:
            targets = np.asarray(self.targets, dtype=np.float64)
            if targets.shape != (t,):
                raise ValueError(f"the certificate stores {targets.size} targets for a chain "
                                 f"of {t} links")
            return {"loss": self.loss, "lam": self.lam, "fit_intercept": self.fit_intercept,
                    "targets": tuple(float(v) for v in targets)}
        return run_targets(config, n_train, t)

    def _labels(self, y):
        y = np.asarray(y).ravel()
        if self.loss == "logistic":
            from ..certificates import labels_pm

            return labels_pm(y, self.classes)
        return y.astype(np.float64)

    def recompute(self, X, y):
        """The Newton decrement of the last link recomputed from (X, y), with this
        certificate's lam and loss (``bounds`` gives it with its proven upper bound)."""
        return self.bounds(X, y)[0]

    def bounds(self, X, y):
        """(recomputed decrement, proven upper bound) of the last link, theta^t on the
        subproblem centred at theta^{t-1}, with this certificate's lam and loss."""
        blocks, yv, thetas, bs = self._problem(X, y)
        return _link_bounds(blocks, yv, thetas, bs, thetas.shape[0], self.lam, self.loss,
                            self.fit_intercept)

    def _problem(self, X, y):
        """(row blocks of Phi, labels, the chain in feature space (t, p), intercepts (t,))."""
        from .. import _referee as R

        chain = np.asarray(self.chain)
        if chain.ndim != 2 or chain.shape[0] < 1 or chain.dtype.kind != "f":
            raise ValueError("the chain must be a (t, d) float array with t >= 1")
        yv = self._labels(y)
        precomputed = getattr(self.kernel, "precomputed", False)
        idx = self.train_index
        if idx is not None:
            idx = np.asarray(idx)
            if idx.ndim != 1 or idx.dtype.kind not in "iu" or idx.size == 0 \
                    or np.any(np.diff(idx) <= 0) or idx[0] < 0 or idx[-1] >= yv.shape[0]:
                raise ValueError("train_index must be increasing row indices of X")
            X = check_X(local_matrix(X))[idx]
            if precomputed:
                X = X[:, idx]
            yv = yv[idx]
        if self.representation == "gram":
            Xl = check_X(local_matrix(X))
            if precomputed:
                K = Xl.toarray() if sp.issparse(Xl) else Xl
            else:
                K = gram_matrix(self.kernel, Xl)
            budget = getattr(self.config, "memory_budget", None) if self.config is not None \
                and not isinstance(self.config, dict) else None
            check_gram_budget(K.shape[0], budget or 2.0 * 2**30,
                              "the Newton-decrement check of an exact kernel")
            emap = ExactKernelMap(K)
            Phi = np.ascontiguousarray(emap.features)
            if chain.shape[1] != Phi.shape[0]:
                raise ValueError("the representer weights must have one entry per training row")
            # theta^k = Phi^T beta^k for every link
            return R.RowBlocks(Phi), yv, chain @ Phi, np.zeros(chain.shape[0])
        if self.centres is not None:
            kernel, P, C = self.kernel, np.asarray(self.projection, dtype=np.float64), self.centres

            def fmap(B):
                return gram_matrix(kernel, B, C) @ P
        elif self.identity_map:
            fmap = None
        else:
            fmap = self.kernel.feature_map
        blocks = R.RowBlocks(X, fmap)
        p = chain.shape[1] - int(self.fit_intercept)
        bs = chain[:, p] if self.fit_intercept else np.zeros(chain.shape[0])
        return blocks, yv, np.ascontiguousarray(chain[:, :p]), bs

    def check(self, X, y, sample_weight=None):
        from ..certificates import NotPositiveSemidefiniteError
        from .._validation import check_sample_weight

        kind = self.kind
        if sample_weight is None and getattr(self, "weighted", False):
            return Verdict.reject(kind, "the certificate is of a weighted run: pass its "
                                        "weights, check(X, y, sample_weight=w) (verify "
                                        "likewise)")
        try:
            blocks, yv, thetas, bs = self._problem(X, y)
        except NotPositiveSemidefiniteError:
            raise  # a kernel that is not PSD on the data is an error, not a verdict
        except ValueError as exc:
            return Verdict.reject(kind, f"the data do not define the claim: {exc}")
        n = blocks.n
        if yv.shape != (n,):
            return Verdict.reject(kind, f"y has {yv.shape[0]} entries, X {n} rows")
        weight = None
        if sample_weight is not None:
            try:
                weight = check_sample_weight(sample_weight, yv.shape[0]
                                             if self.train_index is None else
                                             np.asarray(y).ravel().shape[0])
                if self.train_index is not None:
                    weight = weight[np.asarray(self.train_index)]
            except (TypeError, ValueError) as exc:
                return Verdict.reject(kind, str(exc))
        t = thetas.shape[0]
        step = getattr(self, "prox_step", None)
        if step is not None and step != t:
            return Verdict.reject(kind, f"the chain has {t} links but prox_step is {step!r}")
        try:
            th = self._targets(n, t)
        except (TypeError, ValueError) as exc:
            return Verdict.reject(kind, f"the run's configuration does not define the claim: {exc}")
        for name in ("loss", "lam", "fit_intercept"):
            if getattr(self, name) != th[name]:
                return Verdict.reject(kind, f"the certificate's {name}={getattr(self, name)!r} "
                                            f"is not the run's {name}={th[name]!r}")
        if not np.all(np.isfinite(self.chain)):
            return Verdict.reject(kind, "the coefficients are not finite")
        margin, steer, last = math.inf, {}, None
        # the last link first: its verdict is the one reported (its recomputed decrement,
        # no shortcut), and its Hessian steers the directions of the earlier links
        for k in [t, *range(1, t)]:
            target = th["targets"][k - 1]
            try:
                central, nu_up = _link_bounds(blocks, yv, thetas, bs, k, th["lam"], th["loss"],
                                              th["fit_intercept"],
                                              enough=target if k < t else None, steer=steer,
                                              weight=weight)
                if k < t and not nu_up <= target:
                    # steered by the last link's Hessian the bound may be too loose: the
                    # link's own Hessian before any verdict
                    central, nu_up = _link_bounds(blocks, yv, thetas, bs, k, th["lam"],
                                                  th["loss"], th["fit_intercept"],
                                                  weight=weight)
            except ValueError as exc:
                return Verdict.reject(kind, f"the data do not define the claim: {exc}")
            except OverflowError:
                return Verdict.reject(kind, f"link {k} of {t}: the bound of the recomputed "
                                            "Newton decrement overflows float64 (sample "
                                            "weights or entries of X too large); rescale them",
                                      value=math.inf, threshold=target, rounding=math.inf)
            rounding = nu_up - central if math.isfinite(nu_up) else math.inf
            margin = min(margin, target - nu_up)
            if not nu_up <= target:
                return Verdict(False, kind, value=central, threshold=target, rounding=rounding,
                               margin=target - nu_up,
                               reason=f"link {k} of {t} (theta^{k} on the subproblem centred at "
                                      f"theta^{k - 1}): Newton decrement above its target (with "
                                      "the rounding bound)")
            if k == t:
                last = (central, target, rounding)
        central, target, rounding = last
        return Verdict(True, kind, value=central, threshold=target, rounding=rounding,
                       margin=margin)


def _link_bounds(blocks, y, thetas, bs, k, lam, loss, fit_intercept, enough=None,
                 steer=None, weight=None):
    """(recomputed decrement, proven upper bound) of link k (1-based) of a chain in feature
    space: theta^k = ``thetas[k - 1]`` (intercept ``bs[k - 1]``) on the subproblem centred
    at theta^{k-1}, theta^0 = 0 (the solver's start, never read from a certificate);
    ``enough`` and ``steer`` as in ``_decrement_referee``."""
    prev = thetas[k - 2] if k >= 2 else np.zeros(thetas.shape[1])
    return _decrement_referee(blocks, y, np.ascontiguousarray(thetas[k - 1]), float(bs[k - 1]),
                              prev, lam, loss, fit_intercept, enough=enough, steer=steer,
                              weight=weight)


# ====================================================================== solver
def blocked_limits(params, kernel):
    """Why iterated Tikhonov cannot run with ``params`` and ``kernel`` on rows held in
    blocks by a distributed executor (the chunks of a dask array), or None.

    On row blocks every data pass of a Newton iteration is a sum over rows (z = Phi theta,
    Phi^T g, Phi^T diag(h) Phi, H v, the loss), which each block computes on its own rows:
    that needs the rows' features where the rows are. With the linear kernel they are the
    rows themselves. A Gram kernel's Newton system couples every pair of rows (the n x n
    matrix K and its eigendecomposition) and cannot be split by rows; t="auto" draws a
    validation split of the rows, and Nystroem (``n_components``) a sample of centres
    and a map fitted on them, which the blocked path does not do."""
    from ..kernels.builtin import LinearKernel

    if type(kernel) is not LinearKernel:
        name = getattr(kernel, "name", None) or type(kernel).__name__
        return (f"kernel {name!r} is not supported: a Gram kernel's Newton systems couple all "
                "rows (the n x n kernel matrix) and cannot be split into row chunks, and a "
                "kernel approximation's feature map is not evaluated on the chunks; use "
                "kernel='linear' (on explicit features), or compute X into memory "
                "(X.compute())")
    bad = []
    if params["t"] == "auto":
        bad.append("t='auto' (it holds out a random validation split of the rows; pass an "
                   "integer t)")
    if params["n_components"] is not None:
        bad.append("n_components (Nystroem centres are sampled and mapped in memory; compute "
                   "X into memory)")
    return "; ".join(bad) or None


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
        sets it from the data before the run, 1e-8 on data of unit or larger scale and
        smaller on data scaled down (``default_tol``: 1e-8 min(1, R Y / sqrt(lam)), R the
        largest sqrt(k(x, x)), Y = 1 (logistic) or max |y| (squared)), so that the zero
        model does not meet it by scale alone; the value used is in
        ``result.config.solver_params["tol"]`` and is the claim's. (Where it is not set
        before the run, on dask arrays, None is 1e-8.)
    t_max : int
        Largest t tried by ``t="auto"`` (its schedule uses t = t_max).
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
        picks "cg" for dense feature maps with m >= 512 and n >= 4 m.
    n_components : int or None
        Nystroem approximation with that many centres sampled uniformly
        (``random_state``): theta lives in the m-dimensional span, memory O(n m).
    keep_path : bool
        Keep the iterate of every proximal step k = 1..t in ``result.extra["path"]``
        (shape (t, len(coef)), in the form used for prediction: ``coef_`` for linear
        models, ``support_coef_`` otherwise; intercepts in ``extra["path_intercept"]``).
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

    def start(self, problem):
        return _TikhonovState(self, problem)

    def resolve_config(self, config, X, y, kernel, rules):
        """The run's configuration with ``tol=None`` replaced by ``default_tol`` of the
        data (X, y as validated), so that the run, its certificate and ``Result.config``
        carry the number; unchanged when tol is given (here or in a ``newton_decrement``
        rule)."""
        if self.params["tol"] is not None or any(
                isinstance(r, NewtonDecrement) and r.params["tol"] is not None for r in rules):
            return config
        lam = self.params["lam"] if self.params["lam"] is not None else 1.0 / X.shape[0]
        tol = default_tol(kernel, X, y, self.params["loss"], lam, self.params["fit_intercept"])
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
        support_X = problem.X if state.train_index is None else problem.X[state.train_index]
        kernel = problem.kernel
        if state.exact is not None:
            beta = state.exact.projection_ @ w[: mdl.p]
            fields["dual_coef_"] = beta
            fields["support_coef_"] = beta.copy()
            if not getattr(kernel, "precomputed", False):
                fields["support_"] = support_X.copy()
            fields["coef_"] = None
        elif state.nystroem is not None:
            centres, projection = state.nystroem.centres_, state.nystroem.projection_
            beta = projection @ w[: mdl.p]
            fields["dual_coef_"] = beta
            fields["support_"] = centres.copy()
            fields["support_coef_"] = beta.copy()
            fields["intercept_"] = float(w[mdl.p]) if mdl.fit_intercept else 0.0
        elif state.identity_map:
            fields["coef_"] = w[: mdl.p].copy()
            fields["intercept_"] = float(w[mdl.p]) if mdl.fit_intercept else 0.0
        else:
            # other feature maps: theta = Phi^T beta with the minimum-norm beta
            Phi = mdl.Phi
            G = np.asarray((Phi.T @ Phi).toarray() if mdl.sparse else Phi.T @ Phi)
            beta = np.asarray(Phi @ (sla.pinvh(G) @ w[: mdl.p])).ravel()
            fields["dual_coef_"] = beta
            fields["support_"] = support_X.copy()
            fields["support_coef_"] = beta.copy()
            fields["intercept_"] = float(w[mdl.p]) if mdl.fit_intercept else 0.0
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
            # keep the last finite iterate (theta^0 = 0 at worst)
            w = np.where(np.isfinite(w), w, 0.0)
            for key in ("coef_", "dual_coef_", "support_coef_"):
                if fields.get(key) is not None:
                    fields[key] = np.where(np.isfinite(fields[key]), fields[key], 0.0)
        fields["extra"] = {"t": int(t_used), "lam": state.lam, "loss": state.loss_name,
                           "failure": state.failed,
                           "decrement": state.decrement, "target": target,
                           "newton_solver": state.newton_solver}
        if not state.identity_map and state.exact is None:
            fields["extra"]["theta"] = w[: mdl.p].copy()
        if state.train_index is not None:
            fields["extra"]["train_index"] = state.train_index
        if self.params["keep_path"]:
            steps = list(state.prox_coef[: t_used - 1]) + [w]
            fields["extra"]["path"] = np.array([self._prediction_coef(state, v) for v in steps])
            fields["extra"]["path_intercept"] = np.array(
                [float(v[mdl.p]) if mdl.fit_intercept else 0.0 for v in steps])
        return fields

    @staticmethod
    def _prediction_coef(state, w):
        mdl = state.model
        if state.exact is not None:
            return state.exact.projection_ @ w[: mdl.p]
        if state.nystroem is not None:
            return state.nystroem.projection_ @ w[: mdl.p]
        if state.identity_map:
            return w[: mdl.p].copy()
        Phi = mdl.Phi
        G = np.asarray((Phi.T @ Phi).toarray() if mdl.sparse else Phi.T @ Phi)
        return np.asarray(Phi @ (sla.pinvh(G) @ w[: mdl.p])).ravel()
