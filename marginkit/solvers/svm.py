"""SVM family with certified stopping (paper 001): ``fista``, ``fista_svm``, ``dcd``, ``pegasos``.

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
for coordinate descent (section 4). The derivations are written out in ``docs/svm.md``.

Stopping rules registered here: ``certified_points(fraction=0.0)`` (status
``"certified"``) and ``liblinear(tol=0.1)`` (LIBLINEAR's max-minus-min projected
gradient over an epoch, status ``"converged"``).
"""
import math
import numbers

import numpy as np
import scipy.sparse as sp

from .._registry import _register_builtin
from ..certificates import Certificate, Verdict, certificate_type, local_matrix, labels_pm as _labels_pm
from .._validation import Param, check_X
from ..kernels.builtin import LinearKernel
from ..plugins import Solver, SolverState, StoppingRule
from ..stopping import MaxIter
from . import _svm_fast as _f
from ..utils._threads import single_threaded_blas

__all__ = ["Fista", "FistaSVM", "DCD", "Pegasos", "CertifiedPoints", "Liblinear",
           "CertifiedPointsCertificate", "scaling_statistics", "feature_matrix_norm2",
           "lipschitz_bound", "scaled_gram"]

_SCALES = ("std", "scale")
_FLOAT_DTYPES = frozenset((np.dtype(np.float32), np.dtype(np.float64)))


# ------------------------------------------------------------------------ data helpers
def scaling_statistics(X, scale):
    """Training means and inverse standard deviations (float64) for ``scale``.

    ``scale="std"``: m = column means, s = 1/sigma (population standard deviation), so
    that z_i = s * (x_i - m) (paper section 5.1). ``scale="scale"``: m = 0, s = 1/sigma
    (the paper's input to LIBLINEAR, LIBSVM and Pegasos: X Diag(sigma)^-1, no centering).
    ``scale=None``: m = 0, s = 1. Zero-variance columns get s = 0 (their centered values
    are all zero; with ``scale="scale"`` they are dropped): nothing is divided by zero.
    A column counts as constant when its spread is at round-off level of its mean (a
    threshold relative to the column's magnitude); the statistics are computed on the
    column divided by the power of two at or above its largest magnitude (exact), so they
    neither overflow nor underflow.
    Sparse input is never densified (sums over the stored entries only, in O(d) memory:
    ``_svm_fast.csr_scaling_statistics`` reads the CSR arrays in place).
    """
    n, d = X.shape
    if scale is None:
        return np.zeros(d), np.ones(d)
    # statistics of each column divided by the power of two at or above its largest
    # magnitude (an exact scaling): no overflow when squaring values near 1e300, no loss
    # of columns whose values are all tiny (1e-150)
    m, s = np.zeros(d), np.zeros(d)
    std = scale == "std"
    if type(X) is np.ndarray and X.flags.c_contiguous and X.dtype in _FLOAT_DTYPES:
        _f.dense_scaling_statistics(X, std, m, s)
        return m, s
    if sp.issparse(X):
        # three passes over the stored entries in Cython, O(d) memory: no temporary the
        # length of the nonzeros (issue 6: peak memory of solve <= 1.5 x the CSR input)
        Xc = X if X.format == "csr" else sp.csr_matrix(X)
        _f.csr_scaling_statistics(Xc.data, Xc.indices, Xc.indptr, n, std, m, s)
        return m, s
    X = np.asarray(X)
    if X.flags.c_contiguous and X.dtype in (np.float32, np.float64):
        _f.dense_scaling_statistics(X, std, m, s)
        return m, s
    # other layouts: column blocks (the statistics are per column), bounded temporaries
    step = max(1, 2_000_000 // max(n, 1))
    for j0 in range(0, d, step):
        blk = np.ascontiguousarray(X[:, j0:j0 + step], dtype=np.float64)
        _f.dense_scaling_statistics(blk, std, m[j0:j0 + step], s[j0:j0 + step])
    return m, s


def _scaling_constants(X, scale):
    """``scaling_statistics(X, scale)`` and the products sm = s * m, s2m = s * sm, the
    products from the same Cython call when X is CSR or a C-ordered float matrix."""
    d = X.shape[1]
    if scale is not None:
        dense = type(X) is np.ndarray
        if (dense and X.flags.c_contiguous and X.dtype in _FLOAT_DTYPES) or \
                (not dense and sp.issparse(X) and X.format == "csr"):
            m, s, sm, s2m = np.zeros(d), np.zeros(d), np.empty(d), np.empty(d)
            if dense:
                _f.dense_scaling_statistics(X, scale == "std", m, s, sm, s2m)
            else:
                _f.csr_scaling_statistics(X.data, X.indices, X.indptr, X.shape[0],
                                          scale == "std", m, s, sm, s2m)
            return m, s, sm, s2m
    m, s = scaling_statistics(X, scale)
    sm = s * m
    return m, s, sm, s * sm


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


class _Data:
    """The training matrix as the Cython kernels take it, plus the scaling constants.

    ``stats=(m, s)`` uses given column means and inverse deviations instead of X's own
    (the Dask backend passes the statistics of the whole distributed matrix).
    """

    def __init__(self, X, scale, stats=None, diag_shift=None):
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
        if stats is None:
            self.m, self.s, sm, s2m = _scaling_constants(X if sparse else Xc, scale)
        else:
            self.m, self.s = stats
            sm = self.s * self.m
            s2m = self.s * sm        # s^2 m without forming s^2 (range: see _svm_fast)
        self.M = float(sm.dot(sm))  # the value of sm @ sm (same dot), a shorter call
        self.c = np.empty(n)
        self.xsq = np.empty(n)
        # ||z_i||^2 = max(x_i^T S2 x_i - 2 c_i + M, 0) in the same pass, and with
        # ``diag_shift`` the diagonal qd = ||z_i||^2 + 1 + diag_shift of dcd's Q
        self.zsq = np.empty(n)
        self.qd = None if diag_shift is None else np.empty(n)
        _f.row_statistics(*self.args, n, self.s, s2m, self.c, self.xsq, self.M, self.zsq,
                          self.qd, 0.0 if diag_shift is None else diag_shift)

    # w_bar = s * (a - m b) for a = X^T u, b = e^T u
    def w_bar(self, a, b):
        return self.s * (a - self.m * b)

    def original(self, w_bar, t_bar, coef=None):
        """(coef, intercept) in the original feature space: w = s w_bar (or the given
        ``coef``, already that product), t = t_bar - m^T w."""
        if coef is None:
            coef = self.s * w_bar
        return coef, float(t_bar - self.m.dot(coef))


def feature_matrix_norm2(data, augmented, tol=1e-10, max_iter=10_000, seed=0):
    """||Z~||_2^2 (``augmented``: Z~ = [Z, e]) or ||Z||_2^2 by power iteration on Z~^T Z~.

    The paper's estimate (section 5.1), kept as a reference: a Rayleigh quotient, hence a
    lower estimate; the solvers use the upper bound of ``lipschitz_bound``.

    Each iteration is one fused pass over X (Z~ v and Z~^T (Z~ v) with the implicit
    centering). Stops when the Rayleigh quotient changes by less than ``tol`` relative
    (paper section 5.1: tolerance 1e-10). The start vector is a fixed pseudo-random vector.
    Returns (lambda_max, iterations).
    """
    d = data.d
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(d + (1 if augmented else 0))
    v /= np.linalg.norm(v)
    acc = np.zeros(d)
    t_buf = np.zeros(data.n)
    lam_old = 0.0
    lam = 0.0
    for it in range(1, max_iter + 1):
        vw = v[:d]
        vt = v[d] if augmented else 0.0
        vs = data.s * vw
        offset = vt - _f.dot(data.m, vs)
        tsum, tsq = _f.gram_power_matvec(*data.args, vs, offset, acc, t_buf)
        lam = tsq  # Rayleigh quotient ||Z~ v||^2 with ||v|| = 1
        out = data.s * (acc - data.m * tsum)
        if augmented:
            out = np.append(out, tsum)
        nrm = float(np.sqrt(_f.sum_and_sumsq(out)[1]))
        if nrm == 0.0:
            return 0.0, it
        v = out / nrm
        if it > 1 and abs(lam - lam_old) <= tol * lam:
            break
        lam_old = lam
    return float(lam), it


#: budget for the (d+1) x (d+1) Gram matrix of ``lipschitz_bound`` (bytes; also capped by
#: a quarter of ``Config.memory_budget``)
_GRAM_BYTES = 256 * 2**20
#: the Gram matrix is formed when it costs less than this many passes over X
#: (one pass = one product with Z~ and one with Z~^T, 2 nnz multiply-adds)
_GRAM_PASSES = 40
_UNIT_ROUNDOFF = np.finfo(np.float64).eps / 2


def _gram_rounding_bound(n, F, M, trace, augmented, p):
    """Bound on the error of the computed largest eigenvalue of G = Z~^T Z~ (or Z^T Z).

    ``F`` = sum_i ||s * x_i||^2, ``M`` = ||s * m||^2, ``trace`` = trace(G). Every entry of G
    is a sum of at most n + 4 rounded products whose magnitudes are entries of W^T W, W the
    matrix of rows (|s * x_i| + |s * m|, 1); so entrywise |G_computed - G| <=
    gamma_{n+4} W^T W (Higham 2002, sec. 3.1) and ||W^T W||_2 <= ||W||_F^2 <=
    (sqrt(F) + sqrt(n M) + sqrt(n))^2. The symmetric eigensolver is backward stable: its
    largest eigenvalue is that of a matrix within O(p u ||G||_2) of G_computed, allowed
    for by 8 p u trace(G).
    """
    k = (n + 4) * _UNIT_ROUNDOFF
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


def scaled_gram(data, augmented):
    """G = Z~^T Z~ ((d+1) x (d+1), ``augmented``) or Z^T Z (d x d), float64, one pass over X
    (``_gram_blocks``); X is never densified."""
    G, zte = _gram_blocks(data)
    return _augment(G, zte, data.n, augmented)


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


def top_eigenvalue_bound(G, n, F, M, trace, augmented):
    """Largest eigenvalue of the Gram matrix G (LAPACK, top one only) plus the rounding
    margin of ``_gram_rounding_bound``: an upper bound of ||Z~||_2^2."""
    import scipy.linalg

    p = G.shape[0]
    lam = float(scipy.linalg.eigvalsh(G, subset_by_index=[p - 1, p - 1])[0])
    return max(lam, 0.0) + _gram_rounding_bound(n, F, M, trace, augmented, p)


def lanczos_bound(matvec, p, n, F, M, trace, augmented, tol=1e-10, seed=0):
    """Upper estimate of the largest eigenvalue of the p x p operator ``matvec`` (Z~^T Z~)
    by Lanczos (``scipy.sparse.linalg.eigsh``, relative tolerance ``tol``, start vector
    from ``seed``): the Ritz value theta plus its residual ||A x - theta x|| plus the
    rounding margin. An eigenvalue lies within the residual of theta; that it is the
    largest one holds with high probability from a random start (Lanczos converges to the
    extreme eigenvalues first), not with certainty, unlike the Gram path. If ARPACK does
    not converge, the trace (>= the largest eigenvalue of this positive semidefinite
    operator) is used. Returns (bound, products with the operator)."""
    from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh

    count = [0]

    def mv(v):
        count[0] += 1
        return matvec(np.asarray(v, dtype=np.float64).ravel())

    v0 = np.random.default_rng(seed).standard_normal(p)
    op = LinearOperator((p, p), matvec=mv, dtype=np.float64)
    try:
        theta, x = eigsh(op, k=1, which="LA", tol=tol, v0=v0)
    except ArpackNoConvergence:
        return trace + _gram_rounding_bound(n, F, M, trace, augmented, p), count[0]
    theta, x = float(theta[0]), x[:, 0] / np.linalg.norm(x[:, 0])
    res = float(np.linalg.norm(mv(x) - theta * x))
    bound = max(theta, 0.0) + res + _gram_rounding_bound(n, F, M, trace, augmented, p)
    return bound, count[0]


def lipschitz_bound(data, augmented, memory_budget=2.0 * 2**30, tol=1e-10, seed=0):
    """An upper bound of ||Z~||_2^2 (``augmented``) or ||Z||_2^2, for L = mu + this bound.

    L must bound the largest eigenvalue of the Hessian Q = H~ H~^T + mu I from above
    (paper section 2.3; the error bound eps_k = kappa ||y_k - r_{k+1}|| uses it), so the
    estimate is rounded *up* (derivation in docs/svm.md, section 2):

    * when the (d+1) x (d+1) Gram matrix is cheap (``gram_is_cheap``), G = Z~^T Z~ is
      formed in one pass over X (``scaled_gram``) and its largest eigenvalue taken by
      LAPACK (``top_eigenvalue_bound``) plus a rounding margin (about 1e-13 relative on
      the benchmark data);
    * otherwise Lanczos (``lanczos_bound``) on v -> Z~^T (Z~ v), one fused pass over X per
      product (``_svm_fast.gram_power_matvec``), to relative tolerance ``tol``.

    Returns (bound, info) with info = {"method": "gram" or "lanczos", "passes": products
    with Z~^T Z~}.
    """
    p = data.d + (1 if augmented else 0)
    n = data.n
    if p == 0 or n == 0:
        return 0.0, {"method": "gram", "passes": 0}
    F = float(np.sum(data.xsq))
    trace = float(np.sum(data.zsq)) + (n if augmented else 0.0)
    nnz, cost = gram_cost(data)
    if gram_is_cheap(p, nnz, cost, memory_budget):
        G = scaled_gram(data, augmented)
        M = data.M
        if not data.sparse:
            # dense rows are centred before the product (``_gram_blocks``): each computed
            # entry is z_ij (1 + theta_2), so the margin's W has rows (|z_i|, 1), i.e.
            # F = sum_i ||z_i||^2 = trace(Z^T Z) and M = 0; the computed trace (a sum of
            # squares, accurate to gamma_n relative) is raised to cover its own rounding
            d = data.d
            F = float(np.trace(G[:d, :d])) * (1.0 + 4.0 * (n + 4) * _UNIT_ROUNDOFF)
            M = 0.0
        lam = top_eigenvalue_bound(G, n, F, M, trace, augmented)
        return lam, {"method": "gram", "passes": 0}
    d = data.d
    acc, t_buf = np.zeros(d), np.zeros(n)

    def matvec(v):
        vs = data.s * v[:d]
        offset = (v[d] if augmented else 0.0) - _f.dot(data.m, vs)
        tsum, _ = _f.gram_power_matvec(*data.args, vs, offset, acc, t_buf)
        out = data.s * (acc - data.m * tsum)
        return np.append(out, tsum) if augmented else out

    lam, passes = lanczos_bound(matvec, p, n, F, data.M, trace, augmented, tol, seed)
    return lam, {"method": "lanczos", "passes": passes}


def _prepare(problem, scale, diag_shift=None):
    """Apply the kernel's feature map and build the kernel-side data.

    Returns ``(data, Phi, identity)``. With the linear kernel (identity map) the solvers run
    on X itself. With a kernel approximation (``nystroem``, ``rff``, any non-identity
    ``feature_map``) they run on Phi = feature_map(X), the map being fixed (fitted) on the
    training rows; ``scale`` then acts on the columns of Phi: ``"std"`` centres each
    feature of Phi and divides it by its training standard deviation, ``"scale"`` only
    divides, None uses Phi as is (the approximated kernel K~ = Phi Phi^T exactly).
    """
    fmap = getattr(problem.kernel, "feature_map", None)
    X = problem.X
    identity = True
    if getattr(fmap, "__func__", None) is LinearKernel.feature_map:
        # the linear kernel's map is ``check_X``, which returns the already validated
        # problem.X itself: not run a second time
        fmap = None
    if fmap is not None:
        Phi = fmap(X)
        if Phi is not X:
            identity = False
            X = check_X(Phi, name="feature_map(X)")
    return _Data(X, scale, diag_shift=diag_shift), X, identity


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
@certificate_type
class CertifiedPointsCertificate(Certificate):
    """Points certified correctly classified by the current and the optimal classifier.

    ``value`` is the solver's error bound eps >= ||r - r*|| at the returned r; ``mask``
    marks the points with level - r_i > eps, level = min(gamma, 1/mu) (``certify_level``). ``verify(X, y)`` recomputes from the data and
    r alone (float64, numpy/scipy products independent of the Cython kernels):

    * the scaling statistics (means, inverse standard deviations) from X;
    * w_bar = Z^T (y * r), the intercept (t_bar = y^T r for H-SVM; the stored multiplier
      for the classical SVM), the margins theta_i = y_i (z_i . w_bar + t_bar);
    * the projected gradient p(r) of the perturbed dual and eps_v = ||p(r)|| / mu, which
      bounds ||r - r*|| for *any* feasible r (strong convexity, paper section 4) and is
      never larger than the FISTA bound in exact arithmetic;
    * r is feasible (box; |y^T r| at round-off level for the classical SVM), the mask is
      non-empty, every certified point has level - r_i > eps_v and
      theta_i > 1 - mu level (>= 0), and the stored original-space classifier (coef, intercept) agrees with w_bar and
      classifies every certified point correctly.

    With a kernel approximation (``kernel`` not None: a kernel whose fitted ``feature_map``
    is not the identity) every step above runs on Phi = kernel.feature_map(X) instead of X
    (the scaling statistics too), and ``coef`` is the classifier on Phi; the certificate
    then certifies the approximated kernel K~ = Phi Phi^T, as ``kernel(A, B)`` computes it.

    Not re-checked: the solver's own value of eps (its FISTA extrapolation point is not
    stored); the check uses the recomputed projected-gradient bound instead.
    """

    kind = "certified_points"

    def __init__(self, value, mask, r, gamma, mu, scale, means, inv_std, formulation,
                 t_bar, coef, intercept, classes=None, kernel=None):
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

    def features(self, X):
        """The features the solver worked on: X, or the kernel's fitted Phi(X)."""
        X = check_X(X)
        kernel = getattr(self, "kernel", None)  # absent in certificates saved before
        if kernel is None:
            return X
        return check_X(kernel.feature_map(X), name="feature_map(X)")

    def margins(self, X, y):
        """(theta, eps_v, w_bar, t_bar) recomputed in float64 from X (or Phi(X)), y and r."""
        X = self.features(X)
        ypm = _labels_pm(y, self.classes)
        m, s = scaling_statistics(X, self.scale)
        Xf = X.astype(np.float64) if X.dtype != np.float64 else X
        u = ypm * self.r
        a = np.asarray(Xf.T @ u, dtype=np.float64).ravel()
        w_bar = s * (a - m * u.sum())
        t_bar = float(u.sum()) if self.formulation == "hsvm" else self.t_bar
        ws = s * w_bar
        theta = ypm * (np.asarray(Xf @ ws, dtype=np.float64).ravel() - m @ ws + t_bar)
        G = theta + self.mu * self.r - 1.0
        p = np.where(self.r <= 0.0, np.minimum(G, 0.0),
                     np.where(self.r >= self.gamma, np.maximum(G, 0.0), G))
        eps_v = float(np.linalg.norm(p)) / self.mu
        return theta, eps_v, w_bar, t_bar, ypm, Xf

    def check(self, X, y):
        return Verdict(self._holds(local_matrix(X), y), self.kind)

    def _holds(self, X, y):
        r, gamma, mu = self.r, self.gamma, self.mu
        if r.min() < 0.0 or r.max() > gamma or not self.mask.any():
            return False
        if self.mask.shape != r.shape:
            return False
        theta, eps_v, w_bar, t_bar, ypm, Xf = self.margins(X, y)
        if self.formulation == "svm" and abs(ypm @ r) > 1e-9 * gamma * np.sqrt(r.size):
            return False
        cert = self.mask
        level = certify_level(gamma, mu)
        if not np.all(level - r[cert] > eps_v):
            return False
        if not np.all(theta[cert] > 1.0 - mu * level):
            return False
        if self.coef is not None:
            m, s = scaling_statistics(Xf, self.scale)
            coef = s * w_bar
            if not np.allclose(coef, self.coef, rtol=1e-6, atol=1e-9 * max(1.0, np.abs(coef).max())):
                return False
            dec = np.asarray(Xf @ self.coef, dtype=np.float64).ravel() + self.intercept
            if not np.all(ypm[cert] * dec[cert] > 0):
                return False
        return True


# ----------------------------------------------------------------------- stopping rules
@_register_builtin("stopping", "certified_points")
class CertifiedPoints(StoppingRule):
    """Stop when more than ``fraction * n`` training points are certified (paper sec. 2.3).

    A point is certified when level - r_i > eps, level = min(gamma, 1/mu)
    (``certify_level``), with eps >= ||r - r*|| the solver's error bound; it is then
    correctly classified (margin > 1 - mu level >= 0) by the current and by the optimal
    classifier. ``fraction=0`` stops at the first certified point, as in the
    paper's experiments. Reads ``state.n_certified``; status ``"certified"``.
    """

    requires = ("n_certified",)
    status = "certified"
    param_table = {"fraction": Param(0.0, types=numbers.Real, low=0.0, high=1.0, high_open=True,
                                     doc="stop when more than fraction * n points are certified")}

    def reset(self, problem, state):
        if hasattr(state, "certify_fraction"):
            state.certify_fraction = self.params["fraction"]

    def threshold(self, state):
        """Points to exceed: ``fraction * n``."""
        return self.params["fraction"] * state.problem.n_samples

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
    param_table = {"tol": Param(0.1, types=numbers.Real, low=0, low_open=True,
                                doc="threshold on max - min projected gradient (LIBLINEAR eps)")}

    def reset(self, problem, state):
        if hasattr(state, "shrink_tol"):
            state.shrink_tol = self.params["tol"]

    def check(self, state):
        return self.status if state.projected_gradient_gap <= self.params["tol"] else None


# ---------------------------------------------------------------------------------- FISTA
class _FistaState(SolverState):
    """State of strongly convex FISTA (Beck 2017, sec. 10.7.7) on the perturbed dual."""

    def __init__(self, data, y, gamma, mu, L, augmented, power_iterations):
        n, d = data.n, data.d
        self.data, self.y = data, y
        self.gamma, self.mu, self.L = gamma, mu, L
        self.level = certify_level(gamma, mu)
        self.kappa = L / mu
        sk = np.sqrt(self.kappa)
        self.beta = (sk - 1.0) / (sk + 1.0)
        self.augmented = augmented
        self.power_iterations = power_iterations
        self.r_prev, self.r, self._r_buf = np.zeros(n), np.zeros(n), np.zeros(n)
        self.a_prev, self.a, self._a_buf = np.zeros(d), np.zeros(d), np.zeros(d)
        self.b_prev = self.b = 0.0
        self.t_bar = 0.0            # classical SVM: intercept L * lambda of the last projection
        self._lam = 0.0             # warm start of the projection's multiplier
        self._v = np.zeros(d)
        nnz = float(n) * d if not data.sparse else float(data.indptr[-1])
        ns = _f.fista_blocks(n, d, nnz)
        self._parts = np.zeros((ns, 4))        # per block: partial sums
        self._bufs = np.zeros((ns, d))         # per block: its share of X^T (y * r)
        self._active = np.zeros(n, dtype=np.intp)  # scratch: rows with r_i != 0
        if not augmented:
            # classical SVM: the extrapolation point y_k and the point to project, kept
            # between the gradient pass and the scatter (the projection runs in between)
            self.y_k, self._vproj = np.zeros(n), np.zeros(n)
        self.n_iter = 0
        self.error_bound = np.inf
        self.n_certified = 0
        self.objective = 0.0

    def step(self):
        data = self.data
        r_new, a_new = self._r_buf, self._a_buf
        if self.augmented:
            # the whole iteration in one call (extrapolation, passes, bound, objective)
            b_new, eps, ncert, rsum, rsq, wsq = _f.fista_iteration(
                *data.args, self.y, self.r_prev, self.r, self.a_prev, self.a, self.b_prev,
                self.b, data.s, data.m, data.M, data.c, self.beta, self.L, self.mu,
                self.gamma, self.kappa, self.level, r_new, a_new, self._v, self._bufs,
                self._parts, self._active)
        else:
            vproj, yk, ns = self._vproj, self.y_k, self._bufs.shape[0]
            _f.fista_svm_gradient(
                *data.args, self.y, self.r_prev, self.r, self.a_prev, self.a, self.b_prev,
                self.b, data.s, data.m, data.M, data.c, self.beta, self.L, self.mu, self._v,
                yk, vproj, ns)
            lam = _f.project_box_hyperplane(vproj, self.y, self.gamma, r_new, self._lam)
            self._lam = lam
            self.t_bar = self.L * lam
            b_new, eps, ncert, rsum, rsq, wsq = _f.fista_svm_finish(
                *data.args, self.y, yk, vproj, lam, self.gamma, self.kappa, self.level,
                data.s, data.m, r_new, a_new, self._bufs, self._parts, self._active)
        self._r_buf, self.r_prev, self.r = self.r_prev, self.r, r_new
        self._a_buf, self.a_prev, self.a = self.a_prev, self.a, a_new
        self.b_prev, self.b = self.b, b_new
        self.error_bound = eps
        self.n_certified = ncert
        self.objective = -0.5 * wsq + rsum - 0.5 * self.mu * rsq
        self.n_iter += 1

    def snapshot(self):
        return {"objective": self.objective, "error_bound": self.error_bound,
                "n_certified": float(self.n_certified)}


class _FistaBase(Solver):
    requires = {"kernel": ("feature_map",)}
    provides = ("error_bound", "n_certified", "objective")
    default_stop = (("certified_points", {"fraction": 0.0}),)
    default_max_iter = 10_000
    param_table = dict(_COMMON_PARAMS)
    augmented = True

    def start(self, problem):
        data, Xfit, identity = _prepare(problem, self.params["scale"])
        gamma, mu = _gamma_mu(self.params, data.n)
        budget = getattr(getattr(problem, "config", None), "memory_budget", 2.0 * 2**30)
        # L's BLAS/LAPACK calls on one thread: OpenBLAS workers keep spinning after a call
        # and would take a core from the OpenMP iterations that follow
        with single_threaded_blas():
            lam, info = lipschitz_bound(data, self.augmented, budget)
        state = _FistaState(data, problem.y, gamma, mu, mu + lam, self.augmented,
                            info["passes"])
        state.lipschitz_method = info["method"]
        state.fit = (data, Xfit, identity)
        return state

    def finalize(self, problem, state, status):
        data, Xfit, identity = state.fit
        w_bar = data.w_bar(state.a, state.b)
        t_bar = state.b if self.augmented else state.t_bar
        fields = _feature_fields(data, identity, w_bar, t_bar)
        mask = state.level - state.r > state.error_bound
        fields.update(dual_coef_=state.r.copy(), certified_mask=mask)
        if mask.any():
            fields["certificate"] = CertifiedPointsCertificate(
                state.error_bound, mask, state.r.copy(), state.gamma, state.mu,
                data.scale, data.m, data.s, "hsvm" if self.augmented else "svm", t_bar,
                _fitted_coef(fields), fields["intercept_"], problem.classes_,
                kernel=None if identity else problem.kernel)
        extra = fields.setdefault("extra", {})
        extra.update(L=state.L, kappa=state.kappa, gamma=state.gamma, mu=state.mu,
                     power_iterations=state.power_iterations,
                     lipschitz_method=state.lipschitz_method, t_bar=t_bar)
        return fields


@_register_builtin("solver", "fista")
class Fista(_FistaBase):
    """Strongly convex FISTA on the perturbed H-SVM dual with certified stopping.

    Paper 001, sections 2.2-2.3 and 5.1 (Algorithm 1); Beck (2017), sec. 10.7.7::

        y_k = r_k + beta (r_k - r_{k-1}),  beta = (sqrt(kappa) - 1)/(sqrt(kappa) + 1),
        r_{k+1} = proj_[0, gamma]^n (y_k + grad g(y_k) / L),  kappa = L / mu,

    with L = mu + ||Z~||_2^2 (an upper bound: ``lipschitz_bound``) and the error bound
    eps_{k+1} = kappa ||y_k - r_{k+1}|| >= ||r_{k+1} - r*||. One iteration is one fused pass
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
    """

    augmented = True


@_register_builtin("solver", "fista_svm")
class FistaSVM(_FistaBase):
    """FISTA on the perturbed dual of the classical SVM (unregularized intercept).

    Paper 001, appendix C: the dual adds y^T r = 0, so each step projects onto
    Omega = {0 <= r <= gamma, y^T r = 0} exactly (breakpoint search, see
    ``project_box_hyperplane``), with L = mu + ||Z||_2^2. The intercept is t = L lambda,
    lambda the multiplier of the last projection (derivation in docs/svm.md), and the
    certified-point test is the same as for ``fista``.
    """

    augmented = False


# ----------------------------------------------------------------- dual coordinate descent
#: the columns of the kernel's history rows (``_svm_fast.dcd_epochs``)
_DCD_HISTORY = ("objective", "error_bound", "n_certified", "projected_gradient_gap")
_NO_HISTORY = np.empty((0, 4))


class _DCDState(SolverState):
    def __init__(self, data, y, gamma, mu, seed, shrinking, bound_check):
        n, d = data.n, data.d
        self.data, self.y, self.gamma, self.mu = data, y, gamma, mu
        self.level = certify_level(gamma, mu)
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
        self.shrink_tol = 0.1
        self.certify_fraction = None if bound_check == "lazy" else 0.0
        self._pg = np.empty(n)
        # the kernel's loop state between calls (see _svm_fast.dcd_epochs): active size,
        # previous PG extremes, shrink_tol, certify_fraction, full passes, estimate
        self._ctl = np.array([n, np.inf, -np.inf, 0.1, np.nan, 0.0, np.inf])
        self._hist = _NO_HISTORY  # (k, 4) rows, allocated by the first call
        # written by the kernel: w_bar at the last iteration, the mask of its last full pass
        self._w_bar = np.zeros(d)
        self._coef = np.zeros(d)  # s * w_bar
        self._mask_bytes = np.zeros(n, dtype=np.uint8)
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
        data = self.data
        b, P = self.scal
        pgsq = _f.projected_gradient(*data.args, self.y, self.r, self.s2a, b, P, data.c,
                                     data.M, 1.0, 0.0, self.mu, self.gamma, self._pg)
        self._ctl[5] += 1
        self.error_bound = float(np.sqrt(pgsq)) / self.mu
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
                             data.s, data.m, data.c, self.qd, data.M, self.mu, self.gamma,
                             self.level, self._rng_state, self._pg, ctl, self.shrinking,
                             self.bound_check == "always", hist, k, cert_above, gap_at_most,
                             self._w_bar, self._coef, self._mask_bytes)
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

    def step_batch(self, rules, limit):
        """Several iterations in one call where the run loop would only have recorded
        their snapshots: stops after the first iteration on which one of ``rules`` could
        fire, or after ``limit``. Returns the snapshots of the iterations before the last
        one (dict of lists), or None (one ``step``) when a rule is not one whose test the
        kernel evaluates (``certified_points``, ``liblinear``, ``max_iter``)."""
        cert_above, gap_at_most = np.inf, -np.inf
        for rule in rules:
            kind = type(rule)
            if kind is CertifiedPoints:
                cert_above = min(cert_above, float(rule.threshold(self)))
            elif kind is Liblinear:
                gap_at_most = max(gap_at_most, float(rule.params["tol"]))
            elif kind is MaxIter:
                limit = min(limit, int(rule.params["n"]) - self.n_iter)
            else:
                return None
        rows = self._epochs(max(1, min(limit, self._batch_cap)), cert_above, gap_at_most)
        return dict(zip(_DCD_HISTORY, rows[:-1].T.tolist()))

    def snapshot(self):
        return {"objective": self.objective, "error_bound": self.error_bound,
                "n_certified": float(self.n_certified),
                "projected_gradient_gap": self.projected_gradient_gap}


@_register_builtin("solver", "dcd")
class DCD(Solver):
    """Dual coordinate descent on the perturbed H-SVM dual (paper 001, section 4).

    Hsieh et al. (2008) as in LIBLINEAR: one epoch = one pass over the (active)
    coordinates in a random order drawn from ``random_state``; each coordinate is
    minimized exactly, r_i <- proj_[0, gamma](r_i - G_i / Q_ii), while w~ = H~^T r is kept
    up to date (O(nnz(x_i)) per coordinate, also with implicit centering). Optional
    LIBLINEAR shrinking.

    Stopping: ``certified_points`` with the bound eps = ||p(r)|| / mu (p the projected
    gradient at the end of the epoch, one extra pass over X, computed only when the
    estimate from the epoch's own entries would certify, or every epoch with
    ``bound_check="always"``); or ``liblinear`` (max - min projected gradient over the
    epoch <= tol).
    """

    requires = {"kernel": ("feature_map",)}
    provides = ("error_bound", "n_certified", "objective", "projected_gradient_gap")
    default_stop = (("certified_points", {"fraction": 0.0}),)
    default_max_iter = 1000
    param_table = {
        **_COMMON_PARAMS,
        "shrinking": Param(True, types=bool, doc="LIBLINEAR's shrinking of the active set"),
        "bound_check": Param("lazy", types=str, options=("lazy", "always"),
                             doc="full projected-gradient pass: only when the cheap estimate "
                                 "certifies ('lazy') or every epoch ('always')"),
    }

    def start(self, problem):
        gamma, mu = _gamma_mu(self.params, problem.X.shape[0])
        data, Xfit, identity = _prepare(problem, self.params["scale"], diag_shift=mu)
        # 64 bits of the run's generator (without building one for random_state=None)
        random_bits = getattr(problem, "random_bits", None)
        seed = random_bits() if random_bits is not None else problem.rng.bit_generator.random_raw()
        state = _DCDState(data, problem.y, gamma, mu, seed, self.params["shrinking"],
                          self.params["bound_check"])
        state.fit = (data, Xfit, identity)
        return state

    def finalize(self, problem, state, status):
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
                problem.classes_, kernel=None if identity else problem.kernel)
        fields.setdefault("extra", {}).update(gamma=state.gamma, mu=state.mu,
                                              full_passes=state.full_passes)
        return fields


# -------------------------------------------------------------------------------- Pegasos
class _PegasosState(SolverState):
    def __init__(self, data, y, lam, rng):
        self.data, self.y, self.lam, self.rng = data, y, lam, rng
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
        data = self.data
        order = self.rng.permutation(data.n).astype(np.int64)
        _f.pegasos_epoch(*data.args, self.y, order, self.s2a, self.st, data.s, data.c,
                         data.xsq, data.M, self.lam, self.radius)
        self.n_iter += 1

    def snapshot(self):
        return {"bias": float(self.st[4]), "steps": float(self.st[5])}


@_register_builtin("solver", "pegasos")
class Pegasos(Solver):
    """Pegasos (Shalev-Shwartz et al. 2007) as in paper 001, section 5.1.

    Minimizes lam/2 ||w||^2 + (1/n) sum_i max(0, 1 - y_i (w . z_i + b)) (lam = 1/64 is the
    paper's misclassification penalty 64/n) with step 1/(lam k), projection of w on the
    ball of radius 1/sqrt(lam) after each step, and an unregularized bias b updated on
    margin violations (Pegasos paper, section 6). One iteration is one epoch over a random
    permutation from ``random_state``; the run stops after ``epochs`` epochs
    (status ``"max_iter"``).
    """

    requires = {"kernel": ("feature_map",)}
    provides = ()
    default_max_iter = 10**9
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
        state = _PegasosState(data, problem.y, float(self.params["lam"]), problem.rng)
        state.fit = (data, Xfit, identity)
        return state

    def finalize(self, problem, state, status):
        data, Xfit, identity = state.fit
        w_bar = state.w_bar()
        bias = float(state.st[4])
        return _feature_fields(data, identity, w_bar, bias)
