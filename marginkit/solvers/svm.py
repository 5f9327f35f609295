"""SVM family with certified stopping: ``fista``, ``fista_svm``, ``dcd``, ``pegasos``.

From "Data-Dependent Complexity of First-Order Methods for Support Vector Machines",
arXiv:2512.03947 (cited by its arXiv number below).

Perturbed H-SVM dual (paper section 2.2)::

    maximize g(r) = -1/2 ||H~^T r||^2 + e^T r - mu/2 ||r||^2   over 0 <= r <= gamma,

row i of H~ being y_i (z_i, 1), z_i the (implicitly) centered and scaled feature vector,
and w~(r) = H~^T r = (w, t) the classifier. ``fista_svm`` solves the classical SVM (the
intercept is not regularized): H has rows y_i z_i and the dual gains y^T r = 0.
Defaults (paper section 2.4): gamma = 64/n (``C``), mu = n/128 (so mu gamma = 1/2).

Certified points (paper section 2.3): for any feasible r with ||r - r*|| <= eps, a point
with level - r_i > eps, level = min(gamma, 1/mu) (``certify_level``), has signed margin
> 1 - mu level >= 0 under both w(r) and w(r*) (the paper's gamma when mu gamma < 1, its
assumption; 1/mu otherwise, where 1 - mu gamma < 0 would not mean correct). The
bound eps is kappa ||y_k - r_{k+1}|| for FISTA and ||p(r)||/mu (projected gradient p)
for coordinate descent (section 4), each plus a bound on its own rounding error (summed
in a scaled form so that it cannot underflow); parameters or data whose scale makes the
bound meaningless are refused (``check_scales``). The derivations are written out in
``docs/svm.md``.

Stopping rules registered here: ``certified_points(fraction=0.0)`` (status
``"certified"``) and ``liblinear(tol=0.1)`` (LIBLINEAR's max-minus-min projected
gradient over an epoch, status ``"converged"``).
"""
import math
import numbers

import numpy as np
import scipy.sparse as sp

from .. import _referee
from .._registry import _register_builtin
from ..certificates import Certificate, Verdict, certificate_type, kernel_mismatch, local_matrix, \
    labels_pm as _labels_pm, stored_r_mask
from .._executors import Block, Executor, local_executor
from .._validation import Param, check_X
from ..kernels.builtin import LinearKernel
from ..plugins import Solver, SolverState, StoppingRule, Trigger, triggers_on
from . import _svm_fast as _f
from ..utils._threads import ThreadChoice, single_threaded_blas

__all__ = ["Fista", "FistaSVM", "DCD", "Pegasos", "CertifiedPoints", "Liblinear",
           "CertifiedPointsCertificate", "scaling_statistics", "lipschitz_bound"]

_SCALES = ("std", "scale")
_FLOAT_DTYPES = frozenset((np.dtype(np.float32), np.dtype(np.float64)))


# ------------------------------------------------------------------------ data helpers
# The data of a run are row blocks (``marginkit._executors``): one in-memory block, or the
# chunks of a dask array. Each block keeps its ``_Data`` in ``block.v["svm"]`` (the matrix
# as the Cython kernels take it and its per-row constants); the statistics, sums and
# Gram matrices below are block kernels reduced in block order.
def _block_data(block):
    data = block.v.get("svm")
    if data is None:
        data = block.v["svm"] = _Data(block.X, rows=False)
    return data


def _k_column_max(block):
    data = _block_data(block)
    cm = np.zeros(data.d)
    _f.column_max(*data.args, data.n, cm)
    return cm


def _k_column_sums(block, inv):
    data = _block_data(block)
    sums, cnt = np.zeros(data.d), np.zeros(data.d, dtype=np.int64)
    _f.scaled_column_sums(*data.args, data.n, inv, sums, cnt)
    return sums, cnt


def _k_sqdev(block, inv, means):
    data = _block_data(block)
    ss = np.zeros(data.d)
    _f.scaled_sqdev(*data.args, data.n, inv, means, ss)
    return ss


def _in_order(parts):
    """The sum of the blocks' arrays, added in block order (the first one itself when
    there is one block)."""
    out = parts[0]
    if len(parts) > 1:
        out = out.copy()
        for q in parts[1:]:
            out += q
    return out


def scaling_statistics(X, scale):
    """Training means and inverse standard deviations (float64) for ``scale``.

    ``scale="std"``: m = column means, s = 1/sigma (population standard deviation), so
    that z_i = s * (x_i - m) (paper section 5.1). ``scale="scale"``: m = 0, s = 1/sigma
    (the paper's input to LIBLINEAR, LIBSVM and Pegasos: X Diag(sigma)^-1, no centering).
    ``scale=None``: m = 0, s = 1. Zero-variance columns get s = 0 (their centered values
    are all zero; with ``scale="scale"`` they are dropped): nothing is divided by zero.
    A column counts as constant when its spread is at round-off level of its mean (a
    threshold relative to the column's magnitude, ``_svm_fast.scaling_tail``); the
    statistics are computed on the column divided by the power of two at or above its
    largest magnitude (exact), so they neither overflow nor underflow.

    ``X`` is a matrix or an ``Executor`` (the row blocks of a run): three passes over the
    blocks' stored entries (column maxima; sums of x / safe_j; squared deviations, the
    implicit zeros of CSR blocks included), each a block kernel reduced in block order,
    O(d) memory per block; sparse input is never densified.
    """
    ex = X if isinstance(X, Executor) else local_executor(_as_float_matrix(X), None)
    n, d = ex.shape
    if scale is None:
        return np.zeros(d), np.ones(d)
    parts = ex.map(_k_column_max)
    cm = parts[0]
    for q in parts[1:]:
        cm = np.maximum(cm, q)  # NaN propagates
    safe, inv = np.empty(d), np.empty(d)
    _f.pow2_safe(cm, safe, inv)
    parts = ex.map(_k_column_sums, inv)
    sums = _in_order([q[0] for q in parts])
    cnt = _in_order([q[1] for q in parts])
    means = sums / n
    ss = _in_order(ex.map(_k_sqdev, inv, means))
    m, s = np.zeros(d), np.zeros(d)
    _f.scaling_tail(n, cm, safe, sums, ss, cnt, scale == "std", m, s)
    return m, s


def _as_float_matrix(X):
    """X as a CSR matrix or a dense array of float32/float64 (other types as float64)."""
    if sp.issparse(X):
        X = X if X.format == "csr" else sp.csr_matrix(X)
        return X if X.dtype in _FLOAT_DTYPES else X.astype(np.float64)
    X = np.asarray(X)
    return X if X.dtype in _FLOAT_DTYPES else X.astype(np.float64)


def _read_only(a):
    a.flags.writeable = False
    return a


#: the unused form of the training matrix (the kernels take both, see ``_svm_fast``):
#: shared read-only 1-element arrays per dtype, never written (``const`` in every kernel)
_DENSE_PLACEHOLDER = {np.dtype(t): _read_only(np.zeros((1, 1), dtype=t)) for t in (np.float32, np.float64)}
_CSR_PLACEHOLDER = {np.dtype(t): (_read_only(np.zeros(1, dtype=t)),
                                  _read_only(np.zeros(1, dtype=np.int32)),
                                  _read_only(np.zeros(1, dtype=np.int32)))
                    for t in (np.float32, np.float64)}


class _Original:
    """The map from the solvers' scaled space back to the input space (needs m, s)."""

    # w_bar = s * (a - m b) for a = X^T u, b = e^T u
    def w_bar(self, a, b):
        return self.s * (a - self.m * b)

    def original(self, w_bar, t_bar, coef=None):
        """(coef, intercept) in the original feature space: w = s w_bar (or the given
        ``coef``, already that product), t = t_bar - m^T w."""
        if coef is None:
            coef = self.s * w_bar
        return coef, float(t_bar - self.m.dot(coef))


class _Data(_Original):
    """One row block of the training matrix as the Cython kernels take it, plus the
    scaling constants and its per-row constants.

    ``stats=(m, s)`` uses given column means and inverse deviations (those of all the
    blocks of the run) instead of the block's own; ``rows=False`` only prepares the
    matrix (``set_rows`` computes the per-row constants later).
    """

    def __init__(self, X, scale=None, stats=None, diag_shift=None, rows=True):
        n, d = X.shape
        self.n, self.d = n, d
        self.sparse = sparse = not isinstance(X, np.ndarray) and sp.issparse(X)
        self.dtype = X.dtype
        if sparse:
            self.Xd = _DENSE_PLACEHOLDER[X.dtype]
            self.data, self.indices, self.indptr = X.data, X.indices, X.indptr
        else:
            Xc = X if X.flags.c_contiguous else np.ascontiguousarray(X)  # private C copy
            self.Xd = Xc
            self.data, self.indices, self.indptr = _CSR_PLACEHOLDER[X.dtype]
        self.args = (self.Xd, self.data, self.indices, self.indptr, not sparse)
        self.scale = scale
        self._rounding = None
        self._xi = None
        if rows:
            if stats is None:
                stats = scaling_statistics(_executor_of(self), scale)
            self.set_rows(scale, stats[0], stats[1], diag_shift)

    def set_rows(self, scale, m, s, diag_shift=None):
        """The scaling constants (m, s, M) and the per-row constants of the block."""
        n = self.n
        self.scale, self.m, self.s = scale, m, s
        self.check_inverse_spread(s, scale)
        sm = s * m
        s2m = s * sm        # s^2 m without forming s^2 (range: see _svm_fast)
        self.M = float(sm.dot(sm))
        self.c = np.empty(n)
        self.xsq = np.empty(n)
        # ||z_i||^2 = max(x_i^T S2 x_i - 2 c_i + M, 0) in the same pass, and with
        # ``diag_shift`` the diagonal qd = ||z_i||^2 + 1 + diag_shift of dcd's Q
        self.zsq = np.empty(n)
        self.qd = None if diag_shift is None else np.empty(n)
        _f.row_statistics(*self.args, n, s, s2m, self.c, self.xsq, self.M, self.zsq,
                          self.qd, 0.0 if diag_shift is None else diag_shift)
        if not (np.isfinite(self.M) and np.all(np.isfinite(self.xsq))
                and np.all(np.isfinite(self.c))):
            raise ValueError(
                f"scale={scale!r}: the squared norms of the (scaled) rows of X overflow "
                "float64 (entries too large for this scaling); rescale X or use "
                "scale='std'")

    @property
    def xi(self):
        """xi_i = ||s * x_i|| (the rounding bounds' row norms), computed once."""
        if self._xi is None:
            self._xi = np.sqrt(self.xsq)
        return self._xi

    @property
    def zsq_sum(self):
        return float(np.sum(self.zsq))

    def longest_row(self):
        return int(np.diff(self.indptr).max(initial=0)) if self.sparse else self.d

    def rounding_constants(self, gamma):
        """The constants of the rounding bounds for box bound ``gamma``
        (``_RoundingConstants``), computed once."""
        if self._rounding is None or self._rounding.gamma != gamma:
            self._rounding = _RoundingConstants(self, gamma)
        return self._rounding

    @staticmethod
    def check_inverse_spread(s, scale):
        """Refuse statistics whose 1/sigma overflowed (ValueError naming the scale)."""
        bad = ~np.isfinite(s)
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"scale={scale!r}: column {j} of X has a standard deviation below 5.6e-309, "
                "whose inverse overflows float64, so the standardized problem and coef_ "
                "cannot be represented; multiply X by a power of ten (e.g. 1e300) or pass "
                "scale=None")


def _executor_of(data, y=None):
    """A one-block ``Executor`` around a prepared ``_Data`` (and labels ``y``)."""
    block = Block(None, y)
    block.v["svm"] = data
    return Executor([block], [data.n], data.d, data.dtype, data.sparse)


def _k_rows(block, scale, m, s, diag_shift):
    """The block's per-row constants with the run's statistics; returns the block's sums
    for the rounding constants and the bounds (``_Blocked``)."""
    data = _block_data(block)
    data.set_rows(scale, m, s, diag_shift)
    return (float(np.sum(data.xsq)), float(np.sum(data.xi)), float(data.xi.max(initial=0.0)),
            data.longest_row(), data.zsq_sum)


class _Blocked(_Original):
    """The training data of a blocked solver: the row blocks of ``executor`` (each with
    its ``_Data`` in ``block.v["svm"]``) and the global constants: n, d, m, s, M = ||s m||^2
    and the sums over the blocks of ||s * x_i||^2, ||s * x_i||, max ||s * x_i||, the
    longest row and sum ||z_i||^2 (``zsq_sum``), each reduced in block order."""

    def __init__(self, executor, scale, m, s, sums):
        self.executor = executor
        self.n, self.d = executor.shape
        self.sparse, self.dtype = executor.sparse, executor.dtype
        self.n_blocks = executor.n_chunks
        self.scale, self.m, self.s = scale, m, s
        sm = s * m
        self.M = float(sm.dot(sm))  # as _Data
        self.xsq_sum = float(sum(q[0] for q in sums))
        self.xi_sum = float(sum(q[1] for q in sums))
        self.xi_max = float(max(q[2] for q in sums))
        self.longest = int(max(q[3] for q in sums))
        self.zsq_sum = float(sum(q[4] for q in sums))
        self._rounding = None

    @classmethod
    def build(cls, executor, scale, diag_shift=None):
        m, s = scaling_statistics(executor, scale)
        _Data.check_inverse_spread(s, scale)
        return cls(executor, scale, m, s, executor.map(_k_rows, scale, m, s, diag_shift))

    @classmethod
    def of(cls, data):
        """A prepared one-block ``_Data`` as a ``_Blocked``."""
        sums = [(float(np.sum(data.xsq)), float(np.sum(data.xi)),
                 float(data.xi.max(initial=0.0)), data.longest_row(), data.zsq_sum)]
        return cls(_executor_of(data), data.scale, data.m, data.s, sums)

    def local(self):
        """The one in-memory block's ``_Data`` (a run whose data are one block in this
        process), else None."""
        ex = self.executor
        if ex.client is None and ex.n_chunks == 1:
            return ex.workers[0].v["svm"]
        return None

    def rounding_constants(self, gamma):
        if self._rounding is None or self._rounding.gamma != gamma:
            self._rounding = _RoundingConstants(
                self, gamma, sums=(self.xsq_sum, self.xi_sum, self.xi_max, self.longest),
                n_blocks=self.n_blocks)
        return self._rounding


#: budget for the (d+1) x (d+1) Gram matrix of ``lipschitz_bound`` (bytes; also capped by
#: a quarter of ``Config.memory_budget``)
_GRAM_BYTES = 256 * 2**20
#: the Gram matrix is formed when it costs less than this many passes over X
#: (one pass = one product with Z~ and one with Z~^T, 2 nnz multiply-adds)
_GRAM_PASSES = 40
_UNIT_ROUNDOFF = np.finfo(np.float64).eps / 2
_ETA = 2.0 ** -1074  # the absolute rounding of a subnormal result (``_referee.ETA``)


def _gram_rounding_bound(n, F, M, trace, augmented, p, n_blocks=1):
    """Bound on the error of the computed largest eigenvalue of G = Z~^T Z~ (or Z^T Z).

    ``F`` = sum_i ||s * x_i||^2, ``M`` = ||s * m||^2, ``trace`` = trace(G). Every entry of G
    is a sum of at most n + 4 rounded products whose magnitudes are entries of W^T W, W the
    matrix of rows (|s * x_i| + |s * m|, 1); so entrywise |G_computed - G| <=
    gamma_{n+4} W^T W (Higham 2002, sec. 3.1) and ||W^T W||_2 <= ||W||_F^2 <=
    (sqrt(F) + sqrt(n M) + sqrt(n))^2. The symmetric eigensolver is backward stable: its
    largest eigenvalue is that of a matrix within O(p u ||G||_2) of G_computed, allowed
    for by 8 p u trace(G). With ``n_blocks`` row blocks each entry is the sum of the
    blocks' sums: n_blocks - 1 more additions in the chain.
    """
    k = (n + 4 + n_blocks - 1) * _UNIT_ROUNDOFF
    gam = k / (1.0 - k)
    W = (np.sqrt(F) + np.sqrt(n * M) + (np.sqrt(n) if augmented else 0.0)) ** 2
    return gam * W + 8.0 * p * _UNIT_ROUNDOFF * trace


def _gram_blocks(data):
    """(Z^T Z, Z^T e) of the rows held by ``data`` (a ``_Data``), float64, one pass over X.

    Dense X: row blocks are centered and scaled exactly, (X_B - e m^T) S, and multiplied
    by BLAS. CSR X (never densified): G1 = S X^T X S and cs = S X^T e from
    ``_svm_fast.csr_scaled_gram``, then with sm = s * m

        Z^T Z = G1 - sm cs^T - cs sm^T + n sm sm^T,   Z^T e = cs - n sm.
    """
    n, d = data.n, data.d
    s, m = data.s, data.m
    if data.sparse:
        P = np.zeros((d, d))
        diag, cs = np.zeros(d), np.zeros(d)
        rl = np.diff(data.indptr)
        xs = np.zeros(max(int(rl.max()) if rl.size else 0, 1))
        _f.csr_scaled_gram(data.data, data.indices, data.indptr, s, P, diag, cs, xs)
        G = P + P.T
        G[np.diag_indices(d)] += diag
        sm = s * m
        G -= np.outer(sm, cs)
        G -= np.outer(cs, sm)
        G += n * np.outer(sm, sm)
        return G, cs - n * sm
    G, zte = np.zeros((d, d)), np.zeros(d)
    step = max(1, 2_000_000 // max(d, 1))  # row blocks: bounded temporaries
    for i0 in range(0, n, step):
        B = np.asarray(data.Xd[i0:i0 + step], dtype=np.float64) - m
        B *= s
        G += B.T @ B
        zte += B.sum(axis=0)
    return G, zte


def _augment(G, zte, n, augmented):
    """Z~^T Z~ = [[Z^T Z, Z^T e], [e^T Z, n]] (``augmented``), else Z^T Z."""
    if not augmented:
        return G
    d = G.shape[0]
    Ga = np.empty((d + 1, d + 1))
    Ga[:d, :d] = G
    Ga[:d, d] = zte
    Ga[d, :d] = zte
    Ga[d, d] = n
    return Ga


def gram_cost(data):
    """(nnz, multiply-adds of ``_gram_blocks``) for the rows held by ``data``."""
    if data.sparse:
        rl = np.diff(data.indptr).astype(np.float64)
        return float(rl.sum()), 0.5 * float(rl @ rl)
    nnz = float(data.n) * data.d
    return nnz, 0.5 * nnz * data.d / 8.0  # BLAS: several times the rate of a sparse pass


def gram_is_cheap(p, nnz, cost, memory_budget):
    """Form the p x p Gram matrix when it fits (``_GRAM_BYTES``, a quarter of
    ``memory_budget``) and forming plus decomposing it costs at most ``_GRAM_PASSES``
    passes over X (one pass: 2 nnz multiply-adds)."""
    if p <= 3:  # a few numbers; Lanczos needs p > 2 anyway
        return True
    if 8.0 * p * p > min(_GRAM_BYTES, 0.25 * memory_budget):
        return False
    return cost + p ** 3 / 3.0 <= _GRAM_PASSES * 2.0 * max(nnz, 1.0)


def top_eigenvalue_bound(G, n, F, M, trace, augmented, n_blocks=1):
    """Largest eigenvalue of the Gram matrix G (LAPACK, top one only) plus the rounding
    margin of ``_gram_rounding_bound``: an upper bound of ||Z~||_2^2."""
    import scipy.linalg

    p = G.shape[0]
    lam = float(scipy.linalg.eigvalsh(G, subset_by_index=[p - 1, p - 1])[0])
    return max(lam, 0.0) + _gram_rounding_bound(n, F, M, trace, augmented, p, n_blocks)


def lanczos_bound(matvec, p, n, F, M, trace, augmented, tol=1e-10, seed=0, n_blocks=1):
    """Upper estimate of the largest eigenvalue of the p x p operator ``matvec`` (Z~^T Z~)
    by Lanczos (``scipy.sparse.linalg.eigsh``, relative tolerance ``tol``, start vector
    from ``seed``): the Ritz value theta plus its residual ||A x - theta x|| plus the
    rounding margin. An eigenvalue lies within the residual of theta; that it is the
    largest one holds with high probability from a random start (Lanczos converges to the
    extreme eigenvalues first), not with certainty, unlike the Gram path. If ARPACK fails
    (no convergence, or an operator that is 0 in float64), the trace (>= the largest
    eigenvalue of this positive semidefinite operator) is used. Returns (bound, products
    with the operator)."""
    from scipy.sparse.linalg import ArpackError, LinearOperator, eigsh

    count = [0]

    def mv(v):
        count[0] += 1
        return matvec(np.asarray(v, dtype=np.float64).ravel())

    v0 = np.random.default_rng(seed).standard_normal(p)
    op = LinearOperator((p, p), matvec=mv, dtype=np.float64)
    try:
        theta, x = eigsh(op, k=1, which="LA", tol=tol, v0=v0)
    except ArpackError:
        # no convergence, or no vector to start from (the operator is 0 in float64)
        return trace + _gram_rounding_bound(n, F, M, trace, augmented, p, n_blocks), count[0]
    theta, x = float(theta[0]), x[:, 0] / np.linalg.norm(x[:, 0])
    res = float(np.linalg.norm(mv(x) - theta * x))
    bound = max(theta, 0.0) + res + _gram_rounding_bound(n, F, M, trace, augmented, p,
                                                         n_blocks)
    return bound, count[0]


def _k_gram_cost(block):
    return gram_cost(block.v["svm"])


def _k_gram(block):
    """The block's (Z_b^T Z_b, Z_b^T e): Gram matrices add over row blocks."""
    return _gram_blocks(block.v["svm"])


def _k_power(block, vs, offset):
    """The block's share of one product with Z~^T Z~ (``_svm_fast.gram_power_matvec``):
    (e^T t, ||t||^2, X_b^T t) for t = X_b vs + offset."""
    data = block.v["svm"]
    buf = block.v.get("power")
    if buf is None:
        buf = block.v["power"] = (np.zeros(data.d), np.zeros(data.n))
    acc, t_buf = buf
    tsum, tsq = _f.gram_power_matvec(*data.args, vs, offset, acc, t_buf)
    return tsum, tsq, acc


def lipschitz_bound(data, augmented, memory_budget=2.0 * 2**30, tol=1e-10, seed=0):
    """An upper bound of ||Z~||_2^2 (``augmented``) or ||Z||_2^2, for L = mu + this bound.

    L must bound the largest eigenvalue of the Hessian Q = H~ H~^T + mu I from above
    (paper section 2.3; the error bound eps_k = kappa ||y_k - r_{k+1}|| uses it), so the
    estimate is rounded *up* (derivation in docs/svm.md, section 2):

    * when the (d+1) x (d+1) Gram matrix is cheap (``gram_is_cheap``), G = Z~^T Z~ is
      formed in one pass over X (the blocks' Gram matrices ``_gram_blocks`` added in
      block order) and its largest eigenvalue taken by LAPACK (``top_eigenvalue_bound``)
      plus a rounding margin (about 1e-13 relative on the benchmark data);
    * otherwise Lanczos (``lanczos_bound``) on v -> Z~^T (Z~ v), one fused pass over the
      blocks per product (``_svm_fast.gram_power_matvec``), to relative tolerance ``tol``.

    ``data`` is a ``_Blocked`` (the row blocks of a run) or a prepared ``_Data``.
    Returns (bound, info) with info = {"method": "gram" or "lanczos", "passes": products
    with Z~^T Z~}.
    """
    if isinstance(data, _Data):
        data = _Blocked.of(data)
    ex = data.executor
    p = data.d + (1 if augmented else 0)
    n, nb = data.n, data.n_blocks
    if p == 0 or n == 0:
        return 0.0, {"method": "gram", "passes": 0}
    F = data.xsq_sum
    trace = data.zsq_sum + (n if augmented else 0.0)
    costs = ex.map(_k_gram_cost)
    nnz, cost = float(sum(c[0] for c in costs)), float(sum(c[1] for c in costs))
    if gram_is_cheap(p, nnz, cost, memory_budget):
        parts = ex.map(_k_gram)
        G = _augment(_in_order([q[0] for q in parts]), _in_order([q[1] for q in parts]), n,
                     augmented)
        M = data.M
        if not data.sparse:
            # dense rows are centred before the product (``_gram_blocks``): each computed
            # entry is z_ij (1 + theta_2), so the margin's W has rows (|z_i|, 1), i.e.
            # F = sum_i ||z_i||^2 = trace(Z^T Z) and M = 0; the computed trace (a sum of
            # squares, accurate to gamma_n relative) is raised to cover its own rounding
            d = data.d
            F = float(np.trace(G[:d, :d])) * (1.0 + 4.0 * (n + 3 + nb) * _UNIT_ROUNDOFF)
            M = 0.0
        lam = top_eigenvalue_bound(G, n, F, M, trace, augmented, nb)
        return lam, {"method": "gram", "passes": 0}
    d = data.d
    m, s = data.m, data.s

    def matvec(v):
        vs = s * v[:d]
        offset = (v[d] if augmented else 0.0) - _f.dot(m, vs)
        parts = ex.map(_k_power, vs, offset)
        tsum = float(sum(q[0] for q in parts))
        out = s * (_in_order([q[2] for q in parts]) - m * tsum)
        return np.append(out, tsum) if augmented else out

    lam, passes = lanczos_bound(matvec, p, n, F, data.M, trace, augmented, tol, seed, nb)
    return lam, {"method": "lanczos", "passes": passes}


class _RoundingConstants:
    """Per-run constants of the solvers' rounding bounds (docs/svm.md, sections 2 and 4).

    With xi_i = ||s * x_i|| and mu_m = ||s * m||, every rounding error of the margins
    computed by the kernels through the implicit centering is bounded by gamma_K times
    (xi_i + mu_m)(rho . xi + B mu_m) + B (B = sum of the dual vector rho whose margins are
    computed; Cauchy-Schwarz on the scaled rows): ``xi`` (n), ``xi_norm`` = ||xi||,
    ``xi_max``, ``xim_norm`` = ||xi + mu_m e||, ``mu_m``, ``sqrt_n``, ``gK`` = gamma_K
    with K = n + (longest row) + d + 40 (the summation chains of the scatter, the gather
    and the centering; with ``n_blocks`` row blocks, whose partial sums are added in block
    order, n_blocks - 1 more), ``g3`` = gamma_4, and ``under``, the absolute error of subnormal
    intermediate results."""

    def __init__(self, data, gamma, sums=None, n_blocks=1):
        from .. import _referee as R

        n, d = data.n, data.d
        if sums is None:
            self.xi = data.xi
            xsq_sum, xi_sum = float(np.sum(data.xsq)), float(np.sum(self.xi))
            xi_max = float(self.xi.max(initial=0.0))
            longest = int(np.diff(data.indptr).max(initial=0)) if data.sparse else d
        else:
            # the same sums reduced over the row blocks of a run (``_Blocked``)
            self.xi = None
            xsq_sum, xi_sum, xi_max, longest = sums
        self.xi_norm = math.sqrt(xsq_sum)
        self.xi_max = xi_max
        self.mu_m = float(np.sqrt(data.M))
        # ||xi + mu_m e||^2 = sum xsq + 2 mu_m sum xi + n mu_m^2
        self.xim_norm = math.sqrt(xsq_sum + 2.0 * self.mu_m * xi_sum + n * self.mu_m ** 2) \
            * (1.0 + 4 * R.UNIT)
        self.sqrt_n = float(np.sqrt(n))
        K = n + longest + d + 40 + (n_blocks - 1)
        self.K = K
        self.gK = R.gamma(K)
        self.g3 = R.gamma(4)
        s_norm = R.scaled_norm(data.s)[0]
        self.under = 2.0 * K * R.ETA * (self.xim_norm * (s_norm + 1.0)
                                        + self.sqrt_n * (3.0 * n * gamma + 1.0))
        self.n = n
        self.gamma = gamma

    def array_long_double(self):
        """[gamma_K, gamma_4, ||xi + mu_m e||, mu_m, sqrt(n), under] for the full bound
        whose sums run in long double (gamma in long double's unit roundoff; the only
        float64 rounding left, of each p_i, is the kernel's; long double's exponent range
        leaves only that rounding to underflow), then [gamma_K, gamma_4, under] in float64
        for the float64 version of the same pass."""
        uL = float(np.finfo(np.longdouble).epsneg)

        def gL(k):
            return k * uL / (1.0 - k * uL)

        from .._referee import ETA

        return np.array([gL(self.K), gL(4), self.xim_norm, self.mu_m, self.sqrt_n,
                         4.0 * self.sqrt_n * ETA, self.gK, self.g3, self.under])


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
    dv = 2.0 * _UNIT_ROUNDOFF * gnorm + _UNIT_ROUNDOFF * L * rn + 2.0 * L * _ETA * rc.sqrt_n
    if not augmented:
        dv += _UNIT_ROUNDOFF * (L * rn + gnorm + abs(t) * rc.sqrt_n)
    return (dg + dv) / mu * (1.0 + 16 * _UNIT_ROUNDOFF)


#: the smallest scale of the dual variables at which float64 resolves their differences
#: (an ulp of r is then a normal number)
_LEVEL_FLOOR = 2.0 ** -969


def check_scales(name, data, gamma, mu, L=None, trace=None, level=None, box_only=False):
    """Refuse parameters and data whose scale makes the error bound meaningless (ValueError
    naming the scale): dual variables below 2^-969 (their differences would be subnormal),
    coefficients s * w_bar that can overflow, a condition number L / mu that overflows.
    ``trace`` = sum_i ||z_i||^2 (default: from ``data.zsq``); ``gamma`` is the largest
    box bound, ``level`` (default min(gamma, 1/mu)) the smallest positive level of a
    weighted run; ``box_only``: the dual variables' scale only (exact kernels, whose
    solvers check the data's own scales, ``data`` unused)."""
    weighted = level is not None
    if level is None:
        level = certify_level(gamma, mu)
    if not level >= _LEVEL_FLOOR and weighted:
        raise ValueError(
            f"{name}: the smallest positive box C w_i with mu = {mu:.3g} puts dual variables "
            f"in [0, {level:.3g}], below 2^-969 = {_LEVEL_FLOOR:.2g}, where float64 cannot "
            "resolve their differences and the error bound would be meaningless; raise the "
            "smallest positive sample weights (or C) so that C w_i is at least 1e-290, or "
            "give those points weight 0")
    if not level >= _LEVEL_FLOOR:
        raise ValueError(
            f"{name}: C = {gamma:.3g} and mu = {mu:.3g} put the dual variables in "
            f"[0, min(C, 1/mu)] = [0, {level:.3g}], below 2^-969 = {_LEVEL_FLOOR:.2g}, where "
            "float64 cannot resolve their differences and the error bound would be "
            "meaningless; choose C and 1/mu of at least 1e-290")
    if box_only:
        return
    trace = (data.zsq_sum if trace is None else float(trace)) + data.n
    smax = float(data.s.max(initial=0.0))
    with np.errstate(over="ignore"):
        coef_bound = smax * gamma * math.sqrt(data.n) * math.sqrt(trace)
    if not (math.isfinite(trace) and coef_bound < 2.0 ** 1020):
        raise ValueError(
            f"{name}: the scaled data (||Z~||_F^2 = {trace:.3g}, largest 1/sigma = {smax:.3g}) "
            f"with C = {gamma:.3g} give coefficients that can overflow float64; rescale X "
            "or reduce C")
    if L is not None and not (math.isfinite(L) and L / mu <= 2.0 ** 900):
        raise ValueError(
            f"{name}: mu = {mu:.3g} is too small against ||Z~||_2^2 <= {L - mu:.3g}: the "
            f"condition number L / mu = {L / mu:.3g} makes the error bound overflow; raise mu")


def _kernel_svm():
    """The exact-kernel solvers (``_kernel_svm``, imported on first use: it builds on
    this module)."""
    from . import _kernel_svm as ks

    return ks


def _prepare(problem, scale, diag_shift=None):
    """Apply the kernel's feature map and build the kernel-side data.

    Returns ``(data, Phi, identity)``, ``data`` a ``_Blocked``. With the linear kernel (identity map) the solvers run
    on X itself. With a kernel approximation (``nystroem``, ``rff``, any non-identity
    ``feature_map``) they run on Phi = feature_map(X), the map being fixed (fitted) on the
    training rows; ``scale`` then acts on the columns of Phi: ``"std"`` centres each
    feature of Phi and divides it by its training standard deviation, ``"scale"`` only
    divides, None uses Phi as is (the approximated kernel K~ = Phi Phi^T exactly).
    """
    fmap = getattr(problem.kernel, "feature_map", None)
    X = problem.X
    identity = True
    if isinstance(problem.kernel, LinearKernel):
        # the identity map (``check_X``, which would return the validated problem.X itself)
        fmap = None
    if fmap is not None:
        Phi = _referee.feature_rows(problem.kernel, X)
        if Phi is not X:
            identity = False
            X = check_X(Phi, name="feature_map(X)")
    # the run's row blocks: problem.executor (one in-memory block, or a dask array's
    # chunks), or one block of Phi
    ex = problem.executor if identity else local_executor(X, problem.y)
    return _Blocked.build(ex, scale, diag_shift), X, identity


def _feature_fields(data, identity, w_bar, t_bar, coef=None):
    """The model fields of a linear model on the solver's features.

    ``identity``: coef_/intercept_ in the input space. Otherwise (kernel approximation)
    coef_ is None and the model is linear in Phi(x): decision(x) = Phi(x) . f + intercept_
    with f = ``extra["feature_space_coef"]`` (the centering/scaling of ``scale`` folded
    into f and intercept_), which ``Result.decision_function`` evaluates through the
    result's kernel (the same fitted feature map).
    """
    coef, intercept = data.original(w_bar, t_bar, coef)
    if identity:
        return {"coef_": coef, "intercept_": intercept}
    return {"coef_": None, "intercept_": intercept, "extra": {"feature_space_coef": coef}}


def _gamma_mu(params, n):
    gamma = params["C"] if params["C"] is not None else 64.0 / n
    mu = params["mu"] if params["mu"] is not None else n / 128.0
    return float(gamma), float(mu)


def certify_level(gamma, mu):
    """min(gamma, 1/mu): a point with level - r_i > eps (eps >= ||r - r*||) is certified.

    Then r_i < gamma and r*_i < gamma, so theta_i(r) >= 1 - mu (r_i + eps) and
    theta_i(r*) >= 1 - mu r*_i, both > 1 - mu level >= 0 (docs/svm.md, "Certified
    points"). The paper's threshold gamma is this level when mu gamma <= 1 (its defaults:
    mu gamma = 1/2); for mu gamma > 1 the margin bound 1 - mu gamma is negative and
    gamma - r_i > eps would not mean that the point is correctly classified.
    """
    return min(float(gamma), 1.0 / float(mu))


def run_box(gamma, sample_weight, n):
    """The per-point box bounds of a run: gamma_i = C w_i (``sample_weight`` w, validated
    by ``solve``), or the n-vector of C for an unweighted run (float64).

    As LIBSVM's ``-wi`` and scikit-learn's ``SVC(sample_weight=...)``, a weight rescales
    the penalty of its point's slack: the dual box of point i is [0, C w_i]; a point of
    weight 0 has the box [0, 0], so r_i = 0 throughout and it is never certified.
    """
    if sample_weight is None:
        return np.full(n, float(gamma))
    with np.errstate(over="ignore"):  # an infinite box is refused by the solvers' checks
        return float(gamma) * np.asarray(sample_weight, dtype=np.float64)


def certify_levels(box, mu):
    """The per-point levels min(gamma_i, 1/mu) of ``certify_level`` (an n-vector)."""
    return np.minimum(box, 1.0 / float(mu))


def _box_scales(box, mu):
    """(largest gamma_i, smallest positive level) of a run's box: the scales of the
    rounding bounds and of ``check_scales``."""
    gmax = float(box.max(initial=0.0))
    pos = box[box > 0.0]
    level = certify_level(float(pos.min()), mu) if pos.size else certify_level(gmax, mu)
    return gmax, level


def _k_set_box(block, box, level):
    """The block's share of the run's per-point bounds and levels (``block.v``)."""
    block.v["box"], block.v["level"] = box, level


def _set_box(ex, box, level):
    ex.map_each(_k_set_box, list(zip(ex.split(box), ex.split(level))))


def _fitted_coef(fields):
    """The classifier's coefficients on the solver's features (input space or Phi)."""
    if fields.get("coef_") is not None:
        return fields["coef_"]
    return fields.get("extra", {}).get("feature_space_coef")


_COMMON_PARAMS = {
    "C": Param(None, types=numbers.Real, low=0, low_open=True, allow_none=True,
               doc="box bound gamma of the dual (None: 64/n)"),
    "mu": Param(None, types=numbers.Real, low=0, low_open=True, allow_none=True,
                doc="perturbation mu (None: n/128)"),
    "scale": Param("std", types=str, options=_SCALES, allow_none=True,
                   doc="'std' (implicit centering and scaling), 'scale' (scaling only) or None"),
}


# --------------------------------------------------------------------------- certificate
#: relative tolerance of the consistency checks between the stored model (coef,
#: intercept, statistics) and its recomputation from r: far above the rounding of either
#: computation (dcd updates its w incrementally, about n u per epoch), far below any
#: change that alters the model
_MODEL_RTOL = 1e-6
#: the same for the stored scaling statistics (relative, means in units of the spread
#: and of their own size): loose enough for a certificate of float32 data checked on its
#: float64 values (the claims themselves use the statistics recomputed from X)
_STATS_RTOL = 1e-6
#: columns with s_j |m_j| above this are centred explicitly by the referee (the bound of
#: the implicit form grows like (s_j |m_j|)^2; below it, it stays within a few hundred
#: times the rounding of the centred form, which is still ~1e-10 relative)
_HEAVY = 8.0


def _svm_solver_class(spec):
    """The registered SVM solver class named (or instantiated) by ``spec``, or None."""
    from .._registry import get_plugin

    if isinstance(spec, str):
        try:
            cls = get_plugin("solver", spec)
        except ValueError:
            return None
    else:
        cls = type(spec)
    if isinstance(cls, type) and issubclass(cls, (_FistaBase, DCD)):
        return cls
    return None


def _stop_fraction(stop, default_stop):
    """The smallest ``fraction`` of the ``certified_points`` rules of a run's ``stop``
    (0.0 when there is none); None when the rules cannot be read."""
    from .._referee import stopping_rules

    rules = stopping_rules(stop, default_stop)
    if rules is None:
        return None
    fractions = [float(r.params["fraction"]) for r in rules if isinstance(r, CertifiedPoints)]
    return min(fractions) if fractions else 0.0


def run_thresholds(config, n):
    """The thresholds of a certified-points claim from the run's configuration.

    ``config`` is a ``Config`` or, after ``load_result``, its dict form; ``n`` the number
    of training points. Returns a dict with gamma (``C`` or 64/n), mu (``mu`` or n/128),
    level = min(gamma, 1/mu), scale, formulation ("hsvm" for ``fista`` and ``dcd``,
    "svm" for ``fista_svm``) and fraction (the ``certified_points`` rule's, None when
    the stopping rules cannot be read). The solver's parameters are validated by its own
    parameter table: invalid values raise ``ValueError``/``TypeError`` naming them.
    """
    from .._config import Config

    if isinstance(config, Config):
        spec, sparams, stop = config.solver, dict(config.solver_params), config.stop
    elif isinstance(config, dict):
        spec = config.get("solver")
        sparams = config.get("solver_params") or {}
        stop = config.get("stop")
        if not isinstance(sparams, dict):
            raise TypeError(f"config['solver_params'] must be a dict, got {type(sparams).__name__}")
    else:
        raise TypeError(f"config must be a marginkit.Config or its dict form, got "
                        f"{type(config).__name__}")
    cls = _svm_solver_class(spec)
    if cls is None:
        raise ValueError(f"the run's solver {spec!r} is not one of the certified SVM solvers "
                         "(fista, fista_svm, dcd)")
    if not isinstance(spec, str):
        sparams = {**spec.params, **sparams}
    solver = cls(**sparams)  # validated by the solver's parameter table
    gamma, mu = _gamma_mu(solver.params, n)
    return {"gamma": gamma, "mu": mu, "level": certify_level(gamma, mu),
            "scale": solver.params["scale"],
            "formulation": "svm" if issubclass(cls, FistaSVM) else "hsvm",
            "fraction": _stop_fraction(stop, solver.default_stop)}


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

    def _feature_map(self, X):
        kernel = getattr(self, "kernel", None)  # absent in certificates saved before
        if kernel is None or isinstance(kernel, LinearKernel):
            return None  # the identity map: X itself
        if getattr(kernel, "fitted", True) is False:
            # a loaded result keeps the kernel's parameters only: fit the map on the
            # training rows (an integer random_state reproduces it)
            kernel.fit(check_X(local_matrix(X)))
        return kernel.feature_map

    def thresholds(self, n):
        """The claim's thresholds for n training points (``run_thresholds`` of the
        configuration, or the constructor's values without one)."""
        config = getattr(self, "config", None)
        if config is not None:
            return run_thresholds(config, n)
        return {"gamma": self.gamma, "mu": self.mu, "level": certify_level(self.gamma, self.mu),
                "scale": self.scale, "formulation": self.formulation, "fraction": 0.0}

    def check(self, X, y, sample_weight=None):
        from .. import _referee
        from .._validation import check_sample_weight

        kind = self.kind

        def reject(reason, **numbers):
            return Verdict.reject(kind, reason, **numbers)

        if sample_weight is None and getattr(self, "weighted", False):
            return reject("the certificate is of a weighted run: pass its weights, "
                          "check(X, y, sample_weight=w) (verify likewise)")
        blocks = _referee.RowBlocks(X, self._feature_map(X))
        n = blocks.n
        if sample_weight is not None:
            try:
                sample_weight = check_sample_weight(sample_weight, n)
            except (TypeError, ValueError) as exc:
                return reject(str(exc))
        try:
            th = self.thresholds(n)
        except (TypeError, ValueError) as exc:
            return reject(f"the run's configuration does not define the claim: {exc}")
        gamma, mu, scale, form = th["gamma"], th["mu"], th["scale"], th["formulation"]
        for name, mine in (("gamma", self.gamma), ("mu", self.mu), ("scale", self.scale),
                           ("formulation", self.formulation)):
            if mine != th[name]:
                return reject(f"the certificate's {name}={mine!r} is not the run's "
                              f"{name}={th[name]!r}")
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
            fraction = th["fraction"]
            if fraction is None:
                return reject("the run's stopping rules cannot be read from its configuration")
            # n counts the points that can be certified: those of positive weight
            n_pos = n if sample_weight is None else int(np.count_nonzero(sample_weight > 0))
            if not n_cert > fraction * n_pos:
                return reject(f"{n_cert} certified points, the claim needs more than "
                              f"fraction * n = {fraction * n_pos:.6g}")
        return _referee_certified_points(self, blocks, ypm, box, mu, certify_levels(box, mu),
                                         scale, form, reject)


def _referee_certified_points(cert, blocks, ypm, box, mu, level, scale, form, reject):
    """The recomputation and the rounding bound of docs/svm.md, section 6; ``box`` and
    ``level`` are the n-vectors of the bounds gamma_i and the levels min(gamma_i, 1/mu)."""
    from .. import _referee as R

    kind = cert.kind
    n = blocks.n
    r, mask = stored_r_mask(cert.r, cert.mask)  # of the right kinds (check)
    d = cert.means.shape[0]
    if cert.inv_std.shape != (d,) or (cert.coef is not None and cert.coef.shape != (d,)):
        return reject("the stored statistics and coefficients must have one entry per feature")
    # -- statistics (the solver's own function on in-memory data; as sums over row
    # blocks otherwise, the same operations)
    if blocks.fmap is None and blocks.X is not None:
        m, s = scaling_statistics(blocks.X, scale)
    else:
        m, s = R.block_scaling_statistics(blocks, scale, d)
    if m.shape != (d,):
        return reject(f"X has {m.shape[0]} features, the certificate {d}")
    if not np.all(np.isfinite(s)):
        return reject("1/sigma overflows float64 for a column of X (standard deviation below "
                      "1e-308): the standardized problem cannot be represented")
    zero = s == 0.0
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
    LD = np.longdouble
    uL = float(np.finfo(LD).epsneg)  # unit roundoff of long double (2^-64 on x87)

    def gL(k):
        return k * uL / (1.0 - k * uL)

    u = ypm * r
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
                D = max(D, int(_f.ref_rmatvec(*part, heavy.view(np.uint8), m, ub, rb, a, mag)))
            else:
                aH, magH = np.zeros(cols.size, dtype=LD), np.zeros(cols.size)
                _f.ref_rmatvec(*part, _NO_SKIP[:cols.size], m[cols], ub, rb, aH, magH)
                a[cols] += aH
                mag[cols] += magH
    NB = blocks.chain
    g = R.gamma(n + D + d + 32)              # float64 operations (bounds, small sums)
    # X^T u: float64 sums of at most REF_ROWS terms, their partials summed in long double
    gB = R.gamma(_f.REF_ROWS + 4) + gL(n // _f.REF_ROWS + blocks.n_blocks + 8)
    gC = R.gamma(D + d + 8)                  # the row products of pass C (float64)
    gl = gL(n + d + 32)                      # other long double sums
    eta = R.ETA
    bL = np.sum(u.astype(LD))
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
        tol = _MODEL_RTOL * Vmag + 2 * Ev + 4 * eta
        if not np.all(np.abs(coef - v) <= tol):
            return reject("the stored coefficients are not s * w_bar(r)")
        mcL = m.astype(LD) @ coef.astype(LD)
        want = float(tL - mcL)
        scale_i = abs(t) + float(absm @ np.abs(coef))
        if not abs(cert.intercept - want) <= _MODEL_RTOL * scale_i + Et + g * scale_i \
                + (d + 2) * eta:
            return reject("the stored intercept is not t_bar - m . coef")
        c1L = LD(cert.intercept) + mcL       # dec_i = (x_i - m) . coef + c1
        c1 = float(c1L)
        Ec1 = gl * (abs(cert.intercept) + float(absm @ np.abs(coef))) + R.UNIT * abs(c1) + eta
    else:
        coef = np.zeros(d)
    if form == "hsvm" and not abs(cert.t_bar - b) <= _MODEL_RTOL * R1 + 2 * EbL:
        return reject("the stored t_bar is not y^T r")
    # -- pass C, float64 row products: theta_raw = (X - e m^T) v and the stored model's
    # (X - e m^T) coef, with the magnitudes |X - e m^T| (Ev + gC |v|) and |X - e m^T| |coef|
    Mv = Ev + gC * np.abs(v)
    acoef = np.abs(coef)
    th, dec = np.zeros(n), np.zeros(n)
    Mth, Md = np.zeros(n), np.zeros(n)
    zf2 = 0.0
    for lo, hi, B in blocks:
        for part, cols in _referee_parts(B, heavy, cache):
            if cols is None:
                _f.ref_matvec(*part, heavy.view(np.uint8), m, v, Mv, coef, acoef,
                              th[lo:hi], Mth[lo:hi], dec[lo:hi], Md[lo:hi])
            else:
                _f.ref_matvec(*part, _NO_SKIP[:cols.size], m[cols], v[cols], Mv[cols],
                              coef[cols], acoef[cols], th[lo:hi], Mth[lo:hi], dec[lo:hi],
                              Md[lo:hi])
        if form == "svm":
            zf2 += _scaled_frobenius2(B, m, s, n)
    theta = ypm * (th + t)
    G = theta + mu * r - 1.0
    # |th_i| <= |theta_i| + |t|: the rounding of th + t (and of t itself)
    Eth = Mth * (1.0 + 2 * g) + Et + R.UNIT * abs(t) + 2 * R.UNIT * (np.abs(theta) + 2 * abs(t)) \
        + eta
    EG = Eth + R.gamma(4) * (np.abs(theta) + mu * r + 1.0) + eta
    # a box [0, 0] (weight 0) fixes its coordinate: p_i = 0
    p = np.where(r <= 0.0, np.where(box > 0.0, np.minimum(G, 0.0), 0.0),
                 np.where(r >= box, np.maximum(G, 0.0), G))
    N, eN = R.scaled_norm(p)
    NE, eNE = R.scaled_norm(EG)
    eps_v = N / mu
    rho = ((eN + NE + eNE) / mu + 4 * R.UNIT * eps_v) * (1.0 + 4 * R.UNIT)
    if form == "svm":
        # r must lie on y^T r = 0: |y^T r| <= delta; spread over the k free coordinates
        # that have room, a feasible r~ is within delta / sqrt(k) of r and keeps r's
        # active set, so ||r - r*|| <= ||r - r~|| (1 + ||Q|| / mu) + ||p(r)|| / mu
        delta = abs(b) + EbL + R.UNIT * abs(b)
        if delta > 0.0:
            room = np.minimum(r, box - r)
            k = int(np.count_nonzero(room > delta))
            if k == 0:
                return reject(f"r is not on y^T r = 0 (|y^T r| <= {delta:.3g}) and no free "
                              "coordinate can absorb the residual")
            qnorm = mu + zf2 * (1.0 + g)
            rho += (1.0 + qnorm / mu) * delta / math.sqrt(k) * (1.0 + 4 * R.UNIT)
    if not (math.isfinite(eps_v) and math.isfinite(rho)):
        return reject("the projected gradient is not finite in float64: rescale X, C or mu")
    # the levels min(gamma_i, 1/mu), rounded down
    level_lo = np.minimum(box, level * (1.0 - 2 * R.UNIT))
    gaps = (level_lo[mask] - r[mask]) * (1.0 - R.UNIT)
    threshold = float(gaps.min())
    bound = (eps_v + rho) * (1.0 + 2 * R.UNIT)
    margin = threshold - bound
    numbers = dict(value=eps_v, threshold=threshold, rounding=rho, margin=margin)
    if not margin > 0.0:
        return reject("a certified point has level - r_i <= eps_v + rounding", **numbers)
    floor = (1.0 - mu * level_lo[mask]) + 2 * R.UNIT * (1.0 + mu * level_lo[mask])
    if not np.all(theta[mask] - Eth[mask] * (1.0 + 2 * R.UNIT) - R.UNIT * np.abs(theta[mask])
                  > floor):
        return reject("a certified point has theta_i <= 1 - mu level beyond rounding", **numbers)
    if check_model:
        ydec = ypm * (dec + c1)
        Ed = Md * (1.0 + 2 * g) * gC + Ec1 + 2 * R.UNIT * np.abs(ydec) + eta
        if not np.all(ydec[mask] * (1.0 - R.UNIT) > Ed[mask]):
            return reject("the stored classifier misclassifies a certified point (beyond "
                          "rounding)", **numbers)
    return Verdict(True, kind, **numbers)


#: a row of zeros to pass as ``skip`` where no column is skipped
_NO_SKIP = np.zeros(1 << 16, dtype=np.uint8)


def _referee_parts(B, heavy, cache=None):
    """The parts of a row block for the referee's kernels: ``(args, None)`` for the
    block itself (a dense block: every column, centred by the kernel; a CSR block: its
    light columns) and, for a CSR block with heavy columns, ``(args, cols)`` for those
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
    if not sparse:
        yield (B, *_CSR_PLACEHOLDER[B.dtype], True), None
        return
    yield (_DENSE_PLACEHOLDER[B.dtype], B.data, B.indices, B.indptr, False), None
    if any_heavy:
        cols = np.flatnonzero(heavy)
        H = np.ascontiguousarray(B[:, cols].toarray(), dtype=np.float64)
        yield (H, *_CSR_PLACEHOLDER[np.dtype(np.float64)], True), cols


def _scaled_frobenius2(B, m, s, n_total):
    """sum over the block's rows of ||z_i||^2 = ||s * (x_i - m)||^2 (implicit zeros of a
    CSR block included), for the bound ||Q||_2 <= mu + ||Z||_F^2."""
    if sp.issparse(B):
        dev = s[B.indices] * (B.data - m[B.indices])
        cnt = np.bincount(B.indices, minlength=m.shape[0])
        sm = s * m
        return float(dev @ dev) + float(((B.shape[0] - cnt) * sm) @ sm)
    Z = (B - m) * s
    return float(np.einsum("ij,ij->", Z, Z))


# ----------------------------------------------------------------------- stopping rules
def _certifiable(problem):
    """The points of a run that can be certified: all of them, or those of positive
    weight in a weighted run."""
    w = getattr(problem, "sample_weight", None)
    return problem.n_samples if w is None else int(np.count_nonzero(w > 0))


@_register_builtin("stopping", "certified_points")
class CertifiedPoints(StoppingRule):
    """Stop when more than ``fraction * n`` training points are certified (paper sec. 2.3).

    A point is certified when level - r_i > eps, level = min(gamma, 1/mu)
    (``certify_level``), with eps >= ||r - r*|| the solver's error bound; it is then
    correctly classified (margin > 1 - mu level >= 0) by the current and by the optimal
    classifier. ``fraction=0`` stops at the first certified point, as in the
    paper's experiments. Reads ``state.n_certified``; status ``"certified"``. In a
    weighted run n counts the points of positive weight (a point of weight 0 is never
    certified: weight 0 is the point's removal).
    """

    requires = ("n_certified",)
    status = "certified"
    param_table = {"fraction": Param(0.0, types=numbers.Real, low=0.0, high=1.0, high_open=True,
                                     doc="stop when more than fraction * n points are certified")}

    def threshold(self, state):
        """Points to exceed: ``fraction * n``."""
        return self.params["fraction"] * _certifiable(state.problem)

    def triggers(self, problem):
        return (Trigger("n_certified", ">", self.params["fraction"] * _certifiable(problem)),)

    def check(self, state):
        return self.status if state.n_certified > self.threshold(state) else None


@_register_builtin("stopping", "liblinear")
class Liblinear(StoppingRule):
    """LIBLINEAR's rule: max minus min projected gradient over an epoch <= ``tol``.

    The projected-gradient entries are evaluated at the intermediate iterates of the epoch
    (paper section 4.1), so the rule can fire with a poor classifier. Reads
    ``state.projected_gradient_gap`` (inf while a shrunk active set is being reset, as in
    LIBLINEAR); status ``"converged"``.
    """

    requires = ("projected_gradient_gap",)
    status = "converged"
    advice = "a larger tol is reached sooner"
    param_table = {"tol": Param(0.1, types=numbers.Real, low=0, low_open=True,
                                doc="threshold on max - min projected gradient (LIBLINEAR eps)")}

    def triggers(self, problem):
        return (Trigger("projected_gradient_gap", "<=", self.params["tol"]),)

    def check(self, state):
        return self.status if state.projected_gradient_gap <= self.params["tol"] else None


def certify_target(problem):
    """The fewest certified points at which a rule of the run fires (its ``n_certified``
    triggers: more than ``fraction * n`` for ``certified_points``), or None when no rule
    of the run states one. The states aim their cheap pre-checks at it."""
    values = [t.value for t in triggers_on(problem, "n_certified") if t.op == ">"]
    return min(values) if values else None


def gap_target(problem):
    """The largest projected-gradient gap at which a rule of the run fires (``liblinear``'s
    tol), or None: dcd's shrinking resets its active set at that gap, as LIBLINEAR does."""
    values = [t.value for t in triggers_on(problem, "projected_gradient_gap") if t.op == "<="]
    return max(values) if values else None


class _ClaimOffers:
    """The claim protocol of the SVM states (``SolverState.certificate``): the
    certificate of a claim is the one ``finalize`` builds at the current iterate; after a
    refuted claim (``refuted``) the claim is offered again only once the error bound has
    halved, so that a bound the referee cannot confirm (its own rounding, a model it
    rejects) costs a few re-checks, not one per iteration."""

    _offer_below = np.inf

    def certificate(self, status):
        if status == "certified" and not self.error_bound <= self._offer_below:
            return None
        return (self._solver.finalize(self.problem, self, status) or {}).get("certificate")

    def refuted(self, status, verdict):
        self._offer_below = 0.5 * self.error_bound


# ---------------------------------------------------------------------------------- FISTA
# Block kernels of FISTA: the dual variables of a block's rows (r, r_prev, the scratch
# r_buf) live in block.v beside its rows; a, b (the d-vector X^T (y * r) and y^T r) are
# the driver's. In memory the one block runs the whole iteration in one fused call
# (``_svm_fast.fista_iteration``: OpenMP over sub-blocks of rows); on several blocks each
# block runs the same call on its rows and the driver reduces the partial sums in block
# order (the bound and the certified count need the global ||y_k - r_{k+1}||).
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
    """One FISTA iteration on the block's rows (``_svm_fast.fista_iteration``); returns
    (X_b^T (y * r_new), the call's results (b_new, eps, ncert, rsum, rsq, wsq, dsq) for
    the block, min r_new)."""
    data, v = block.v["svm"], block.v
    st = v["fista"]
    r_new, a_new = v["r_buf"], _next_a(st)
    out = _f.fista_iteration(*data.args, block.y, v["r_prev"], v["r"], a_prev, a, b_prev, b,
                             s, m, M, data.c, beta, L, mu, v["box"], kappa, v["level"], r_new,
                             a_new, st["v"], st["bufs"], st["parts"], st["active"], unit, rho,
                             _begin_threads(st))
    _rotate(v, r_new)
    return a_new, out, _rmin(r_new, several)


def _k_fsvm_gradient(block, a_prev, a, b_prev, b, s, m, M, beta, L, mu):
    """First half of a classical-SVM iteration on the block (``fista_svm_gradient``):
    y_k and the point to project, kept in the block."""
    data, v = block.v["svm"], block.v
    st = v["fista"]
    _f.fista_svm_gradient(*data.args, block.y, v["r_prev"], v["r"], a_prev, a, b_prev, b, s,
                          m, M, data.c, beta, L, mu, st["v"], st["yk"], st["vproj"],
                          st["bufs"].shape[0], _begin_threads(st))


def _k_phi_slope(block, lam):
    """The block's share of phi(lam) and of the free coordinates (the projection)."""
    return _f.phi_slope(block.v["fista"]["vproj"], block.y, block.v["box"], lam)


def _k_next_breakpoint(block, lam, upward):
    return _f.next_breakpoint(block.v["fista"]["vproj"], block.y, block.v["box"], lam, upward)


def _k_fsvm_finish(block, lam, kappa, s, m, unit, rho, feas, gK, several):
    """Second half on the block (``fista_svm_finish``), as ``_k_fista_step`` returns."""
    data, v = block.v["svm"], block.v
    st = v["fista"]
    r_new, a_new = v["r_buf"], _next_a(st)
    out = _f.fista_svm_finish(*data.args, block.y, st["yk"], st["vproj"], lam, v["box"],
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
    (``_svm_fast.fresh_scatter``): (X_b^T (y r), y_b^T r_b, r_b . xi_b) in long double."""
    data = block.v["svm"]
    fresh, ld = np.zeros(data.d, dtype=np.longdouble), np.zeros(1, dtype=np.longdouble)
    rxi = _f.fresh_scatter(*data.args, block.y, block.v["r"], data.xi, fresh, ld)
    return fresh, ld[0], rxi


def _k_fresh_margins(block, coef, ld, t_col, t_shift, mu):
    """Second pass: the block's sum of p_i(r)^2 (long double)."""
    data = block.v["svm"]
    ld = np.array(ld, dtype=np.longdouble)
    _f.fresh_margins(*data.args, block.y, block.v["r"], coef, ld, t_col, t_shift, mu,
                     block.v["box"])
    return ld[2]


def _project_blocks(ex, lam, gamma):
    """``_svm_fast.project_box_hyperplane``'s search for the multiplier over row blocks:
    the same Newton steps in a bracket, each evaluation of phi and n_free one map (two
    numbers per block), the nearest breakpoint one map; returns lam. ``gamma`` is the
    largest box bound (the scale of the stopping test)."""
    lo, hi = -math.inf, math.inf
    for _ in range(200):
        parts = ex.map(_k_phi_slope, lam)
        ph = 0.0
        for q in parts:
            ph += q[0]
        nf = sum(q[1] for q in parts)
        if ph == 0.0:
            break
        if ph > 0.0:
            lo = lam
        else:
            hi = lam
        if nf > 0:
            lam_new = lam + ph / nf
        else:
            near = ex.map(_k_next_breakpoint, lam, ph > 0.0)
            lam_new = min(near) if ph > 0.0 else max(near)
        if not (lo < lam_new < hi):
            if math.isfinite(lo) and math.isfinite(hi):
                lam_new = 0.5 * (lo + hi)
            else:
                break  # phi constant and nonzero beyond every breakpoint: infeasible
        if abs(lam_new - lam) <= 1e-15 * (abs(lam) + gamma):
            lam = lam_new
            break
        lam = lam_new
    return lam


class _FistaState(_ClaimOffers, SolverState):
    """State of strongly convex FISTA (Beck 2017, sec. 10.7.7) on the perturbed dual,
    over the row blocks of ``data`` (a ``_Blocked``): r lives in the blocks, a = X^T (y r)
    and b = y^T r here. ``box`` is the n-vector of the per-point bounds gamma_i
    (``run_box``; C everywhere for an unweighted run), ``gamma`` the run's C."""

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
        from .._referee import gamma as _gamma_k, pow2_at_least

        self.kappa_bound = max(self.kappa, (self.kappa - 1.0) * (1.0 + _gamma_k(n + 8)))
        self.unit = float(pow2_at_least(gmax))
        self.rc = data.rounding_constants(gmax)
        self._rc_long = self.rc.array_long_double()
        self.fresh_bounds = 0  # iterations that fell back on the projected-gradient bound
        self.certify_above = 0.0  # fewest certified points a rule fires at (start)
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
            ex.map(_k_fsvm_gradient, *common)
            if self._one is not None:
                st, y = ex.workers[0].v["fista"], ex.workers[0].y
                lam = _f.project_box_hyperplane(st["vproj"], y, ex.workers[0].v["box"],
                                                ex.workers[0].v["r_buf"], self._lam)
            else:
                lam = _project_blocks(ex, self._lam, self.gamma_max)
            self._lam = lam
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
                delta = abs(b_new) + self.rc.gK * rsum
                if sum(ex.map(_k_free_with_room, delta)) == 0:
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
        self.objective = -0.5 * wsq + rsum - 0.5 * self.mu * rsq

    def _fresh_bound(self, rsum, rsq):
        """||p(r_k)|| / mu plus its rounding bound, sums in long double
        (``_svm_fast._fresh_bound``): two passes over the blocks, reduced in block order."""
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


def _threads_param(value, name, owner):
    """'auto', or the number of threads (an integer >= 1) as a Python int."""
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


class _FistaBase(Solver):
    #: any kernel: an explicit feature map runs on Phi(X), an exact kernel on its Gram
    #: matrix (``_kernel_svm``)
    requires = {}
    provides = ("error_bound", "n_certified", "objective")
    default_stop = (("certified_points", {"fraction": 0.0}),)
    default_max_iter = 10_000
    param_table = dict(_COMMON_PARAMS, threads=Param(
        "auto", validator=_threads_param,
        doc="OpenMP threads of the passes: 'auto' (one thread or the team, whichever the "
            "run measures faster) or at most this many; always within the OpenMP limit"))
    augmented = True
    #: runs on any executor (``Problem.executor``: one in-memory block, a dask array's chunks)
    blocked = True
    #: per-point boxes gamma_i = C w_i (``run_box``)
    sample_weight = True

    def resolve_config(self, config, X, y, kernel, rules):
        """Exact kernels: mu=None with a given C is resolved to 1/(2C) and recorded in the
        run's configuration (``_kernel_svm.resolve_config``)."""
        return _kernel_svm().resolve_config(self, config, kernel)

    def start(self, problem):
        if _kernel_svm().is_exact(problem.kernel):
            return _kernel_svm().start_fista(self, problem, self.augmented)
        data, Xfit, identity = _prepare(problem, self.params["scale"])
        gamma, mu = _gamma_mu(self.params, data.n)
        box = run_box(gamma, getattr(problem, "sample_weight", None), data.n)
        gmax, low = _box_scales(box, mu)
        budget = getattr(getattr(problem, "config", None), "memory_budget", 2.0 * 2**30)
        # L's BLAS/LAPACK calls on one thread: OpenBLAS workers keep spinning after a call
        # and would take a core from the OpenMP iterations that follow
        with single_threaded_blas():
            lam, info = lipschitz_bound(data, self.augmented, budget)
        check_scales(self.name, data, gmax, mu, mu + lam, level=low)
        state = _FistaState(data, gamma, mu, mu + lam, self.augmented, info["passes"], box,
                            self.params["threads"],
                            getattr(getattr(problem, "config", None), "verbose", 0) or 0)
        state.weighted = getattr(problem, "sample_weight", None) is not None
        state.lipschitz_method = info["method"]
        target = certify_target(problem)
        if target is not None:
            state.certify_above = target
        state.fit = (data, Xfit, identity)
        state._solver = self
        return state

    def finalize(self, problem, state, status):
        if getattr(state, "kernel_run", False):
            return state.result_fields(problem, status)
        data, Xfit, identity = state.fit
        w_bar = data.w_bar(state.a, state.b)
        t_bar = state.b if self.augmented else state.t_bar
        fields = _feature_fields(data, identity, w_bar, t_bar)
        r = state.r.copy()
        mask = state.level - r > state.error_bound
        fields.update(dual_coef_=r, certified_mask=mask)
        if mask.any():
            fields["certificate"] = CertifiedPointsCertificate(
                state.error_bound, mask, r.copy(), state.gamma, state.mu,
                data.scale, data.m, data.s, "hsvm" if self.augmented else "svm", t_bar,
                _fitted_coef(fields), fields["intercept_"], problem.classes_,
                kernel=problem.kernel, config=problem.config,
                claim="certified" if status == "certified" else None,
                weighted=state.weighted)
        extra = fields.setdefault("extra", {})
        extra.update(L=state.L, kappa=state.kappa, gamma=state.gamma, mu=state.mu,
                     power_iterations=state.power_iterations,
                     lipschitz_method=state.lipschitz_method, t_bar=t_bar,
                     **_thread_fields(state.ex.map(_k_thread_summary)))
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
        The perturbation (None: n/128).
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
        its slowest thread at every iteration is many times slower). An int: at most
        that many, every iteration. Always within the OpenMP limit (OMP_NUM_THREADS,
        ``threadpoolctl.threadpool_limits``); the result does not depend on it. The
        choice is ``extra["threads"]`` (last iteration) and ``extra["thread_choice"]``;
        ``verbose=2`` prints its changes. ``fista_svm`` takes the same parameter.

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


# ----------------------------------------------------------------- dual coordinate descent
#: the columns of the kernel's history rows (``_svm_fast.dcd_epochs``)
_DCD_HISTORY = ("objective", "error_bound", "n_certified", "projected_gradient_gap")
_NO_HISTORY = np.empty((0, 4))


class _DCDState(_ClaimOffers, SolverState):
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
        # from the run's rules (``DCD.start``): the gap at which a shrunk active set is
        # reset (liblinear's tol, else LIBLINEAR's default 0.1), and the certified-point
        # count the lazy full-bound check aims at (None: no rule counts certified points)
        self.shrink_tol = 0.1 if shrink_tol is None else shrink_tol
        self.certify_fraction = None if certify_above is None or bound_check != "lazy" \
            else certify_above / n
        self._pg = np.empty(n)
        # the kernel's loop state between calls (see _svm_fast.dcd_epochs): active size,
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
        # the kernel's full bound (``_svm_fast._fresh_bound``) at r = 0
        data = self.data
        b, P = self.scal
        pgsq = _f.projected_gradient(*data.args, self.y, self.r, self.s2a, b, P, data.c,
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
        """Run up to k iterations in one Cython call (``_svm_fast.dcd_epochs``), stopping
        after the first one where ``n_certified > cert_above`` or the gap is
        <= ``gap_at_most``; returns the history rows (objective, error_bound, n_certified,
        gap) of the iterations done."""
        data = self.data
        ctl = self._ctl
        cf = self.certify_fraction
        ctl[3] = self.shrink_tol
        ctl[4] = np.nan if cf is None else cf
        hist = self._hist
        if hist.shape[0] < k:
            hist = self._hist = np.empty((k, 4))  # row e is written by iteration e
        done = _f.dcd_epochs(*data.args, self.y, self.index, self.r, self.s2a, self.scal,
                             data.s, data.m, data.c, self.qd, data.M, self.mu, self.box,
                             self.level, self._rng_state, self._pg, ctl, self.shrinking,
                             self.bound_check == "always", hist, k, cert_above, gap_at_most,
                             self._w_bar, self._coef, self._mask_bytes, self._fresh,
                             self.rc.xi, self._rc)
        obj, eps, ncert, gap = hist[done - 1].tolist()
        self.objective = obj
        self.error_bound = eps
        self.n_certified = int(ncert)
        self.projected_gradient_gap = gap
        if eps < np.inf:
            self.mask = self._mask_bytes.view(bool)
        self.n_iter += done
        return hist[:done]

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
                limit = min(limit, math.ceil(t.value) - self.n_iter)
            else:
                return None
        rows = self._epochs(max(1, min(limit, self._batch_cap)), cert_above, gap_at_most)
        return rows.shape[0], dict(zip(_DCD_HISTORY, rows[:-1].T.tolist()))

    def snapshot(self):
        return {"objective": self.objective, "error_bound": self.error_bound,
                "n_certified": float(self.n_certified),
                "projected_gradient_gap": self.projected_gradient_gap}


#: why dcd runs on one in-memory block only (the message of a refused blocked run)
_DCD_SEQUENTIAL = (
    "solver 'dcd' is sequential: each coordinate step of dual coordinate descent uses the "
    "w updated by the step before, so its epochs cannot be split into row blocks that run "
    "where a dask array's chunks are held. Use a blocked solver on dask arrays: 'fista' "
    "(certified, H-SVM), 'fista_svm' (certified, classical SVM) or 'pegasos'; or compute X "
    "into memory (X.compute()) to run 'dcd'")


@_register_builtin("solver", "dcd")
class DCD(Solver):
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

    requires = {}  # as _FistaBase
    provides = ("error_bound", "n_certified", "objective", "projected_gradient_gap")
    default_stop = (("certified_points", {"fraction": 0.0}),)
    default_max_iter = 1000
    #: sequential sweeps: one in-memory block only (refused on a dask array)
    blocked = False
    #: per-point boxes gamma_i = C w_i (``run_box``)
    sample_weight = True
    not_blocked = _DCD_SEQUENTIAL
    param_table = {
        **_COMMON_PARAMS,
        "shrinking": Param(True, types=bool, doc="LIBLINEAR's shrinking of the active set"),
        "bound_check": Param("lazy", types=str, options=("lazy", "always"),
                             doc="full projected-gradient pass: only when the cheap estimate "
                                 "certifies ('lazy') or every epoch ('always')"),
    }

    def resolve_config(self, config, X, y, kernel, rules):
        """Exact kernels: mu=None with a given C is resolved to 1/(2C) and recorded in the
        run's configuration (``_kernel_svm.resolve_config``)."""
        return _kernel_svm().resolve_config(self, config, kernel)

    def start(self, problem):
        if _kernel_svm().is_exact(problem.kernel):
            return _kernel_svm().start_dcd(self, problem, certify_target(problem))
        gamma, mu = _gamma_mu(self.params, problem.X.shape[0])
        blocked, Xfit, identity = _prepare(problem, self.params["scale"], diag_shift=mu)
        data = blocked.local()
        if data is None:
            raise ValueError(_DCD_SEQUENTIAL)
        weights = getattr(problem, "sample_weight", None)
        box = run_box(gamma, weights, data.n)
        gmax, low = _box_scales(box, mu)
        check_scales(self.name, data, gmax, mu, level=low)
        # the epochs' SplitMix64 stream is seeded from 64 bits of the run's generator
        seed = problem.rng.bit_generator.random_raw()
        state = _DCDState(data, problem.y, gamma, mu, seed, self.params["shrinking"],
                          self.params["bound_check"], certify_target(problem),
                          gap_target(problem), box)
        state.weighted = weights is not None
        state.fit = (data, Xfit, identity)
        state._solver = self
        return state

    def finalize(self, problem, state, status):
        if getattr(state, "kernel_run", False):
            return state.result_fields(problem, status)
        data, Xfit, identity = state.fit
        t_bar = float(state.scal[0])
        fields = _feature_fields(data, identity, state._w_bar, t_bar, state._coef.copy())
        finite = math.isfinite(state.error_bound)
        mask = state.mask if finite else np.zeros(data.n, dtype=bool)
        fields.update(dual_coef_=state.r.copy(), certified_mask=mask)
        if finite and state.n_certified > 0:  # the number of points in mask
            fields["certificate"] = CertifiedPointsCertificate(
                state.error_bound, mask, state.r.copy(), state.gamma, state.mu, data.scale,
                data.m, data.s, "hsvm", t_bar, _fitted_coef(fields), fields["intercept_"],
                problem.classes_, kernel=problem.kernel,
                config=problem.config, claim="certified" if status == "certified" else None,
                weighted=state.weighted)
        fields.setdefault("extra", {}).update(gamma=state.gamma, mu=state.mu,
                                              full_passes=state.full_passes)
        return fields


# -------------------------------------------------------------------------------- Pegasos
def _k_pegasos_epoch(block, order, s2a, st, lam, radius):
    """Pegasos steps over the block's rows in ``order`` (``_svm_fast.pegasos_epoch``), w
    (the d-vector s2a and the 6 scalars st) passed in and returned: an epoch passes it
    from block to block."""
    data = block.v["svm"]
    weight = block.v.get("weight")
    if weight is None:
        weight = block.v["weight"] = np.ones(data.n)
    _f.pegasos_epoch(*data.args, block.y, order, s2a, st, data.s, data.c, data.xsq, data.M,
                     lam, radius, weight)
    return s2a, st


def _k_set_weight(block, weight):
    block.v["weight"] = np.ascontiguousarray(weight, dtype=np.float64)


class _PegasosState(SolverState):
    """Pegasos over the row blocks of ``data`` (a ``_Blocked``).

    One epoch visits the blocks in their order 0, 1, ...; inside block c the rows follow
    ``rng.permutation(n_c)``, drawn block after block from the run's generator. The order
    is a function of (seed, blocking): with one block (in memory) it is
    ``rng.permutation(n)``; a dask array's chunks give another order, hence another
    (equally valid) run, the same for the same chunks."""

    def __init__(self, data, lam, rng):
        self.data, self.lam, self.rng = data, lam, rng
        self.ex = data.executor
        self.radius = 1.0 / np.sqrt(lam)
        self.s2a = np.zeros(data.d)
        self.st = np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0])  # alpha, beta, P, A2, bias, k
        self.n_iter = 0
        self.objective = np.nan

    def w_bar(self):
        data = self.data
        alpha, beta = self.st[0], self.st[1]
        a_s = np.divide(self.s2a, data.s, out=np.zeros_like(self.s2a), where=data.s > 0)
        return alpha * (a_s - data.s * data.m * beta)

    def step(self):
        ex = self.ex
        for c in range(ex.n_chunks):
            order = self.rng.permutation(int(ex.sizes[c])).astype(np.int64)
            self.s2a, self.st = ex.call(c, _k_pegasos_epoch, order, self.s2a, self.st,
                                        self.lam, self.radius)

    def snapshot(self):
        return {"bias": float(self.st[4]), "steps": float(self.st[5])}


@_register_builtin("solver", "pegasos")
class Pegasos(Solver):
    """Pegasos (Shalev-Shwartz et al. 2007) as in arXiv:2512.03947, section 5.1.

    Minimizes lam/2 ||w||^2 + (1/n) sum_i w_i max(0, 1 - y_i (w . z_i + b)) (lam = 1/64 is
    the paper's misclassification penalty 64/n; the sample weights w_i are 1 for an
    unweighted run, and a weight scales its point's sub-gradient step, as C w_i scales
    the box of the dual solvers) with step 1/(lam k), projection of w on the
    ball of radius 1/sqrt(lam) after each step, and an unregularized bias b updated on
    margin violations (Pegasos paper, section 6). One iteration is one epoch over a random
    permutation from ``random_state`` (block by block on a dask array: see
    ``_PegasosState``); the run stops after ``epochs`` epochs (status ``"max_iter"``).

    References
    ----------
    .. [1] S. Shalev-Shwartz, Y. Singer, N. Srebro, "Pegasos: Primal Estimated
       sub-GrAdient SOlver for SVM", ICML 2007.
    .. [2] "Data-Dependent Complexity of First-Order Methods for Support Vector
       Machines", arXiv:2512.03947 (2025), section 5.1.
    """

    requires = {"kernel": ("feature_map",)}
    provides = ()
    default_max_iter = 10**9
    #: runs on any executor; the epoch order depends on the blocking (``_PegasosState``)
    blocked = True
    #: the weighted hinge loss (1/n) sum_i w_i max(0, 1 - y_i f(x_i))
    sample_weight = True
    param_table = {
        "lam": Param(1.0 / 64.0, types=numbers.Real, low=0, low_open=True,
                     doc="regularization lambda (1/64 is C = 64/n)"),
        "epochs": Param(200, types=numbers.Integral, low=1, doc="number of epochs"),
        "scale": _COMMON_PARAMS["scale"],
    }

    @property
    def default_stop(self):
        return (("max_iter", {"n": int(self.params["epochs"])}),)

    def start(self, problem):
        data, Xfit, identity = _prepare(problem, self.params["scale"])
        weights = getattr(problem, "sample_weight", None)
        if weights is not None:
            ex = data.executor
            ex.map_each(_k_set_weight, [(w,) for w in ex.split(weights)])
        state = _PegasosState(data, float(self.params["lam"]), problem.rng)
        state.fit = (data, Xfit, identity)
        return state

    def finalize(self, problem, state, status):
        data, Xfit, identity = state.fit
        w_bar = state.w_bar()
        bias = float(state.st[4])
        return _feature_fields(data, identity, w_bar, bias)
