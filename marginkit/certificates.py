"""Certificates: the claims a run makes, and the referee that checks them.

A certificate is what a status claims ("separable", "infeasible", "certified",
"converged" with a Newton decrement), in a form anyone can check from the data alone.
``Certificate.check(X, y)`` recomputes the claim from X, y and the kernel by a
numerically careful path of its own (float64, never the solver's fast path, never a
number the certificate stores about itself) against the thresholds of the run's
configuration, and returns a ``Verdict``; ``verify(X, y)`` is ``bool(check(X, y))``.

The run loop (``marginkit.solve``) uses the same referee before it stops on a claim:
when a stopping rule returns a claim, the solver's state builds the certificate of that
claim (``SolverState.certificate(status)``) and the run stops only if it verifies on
the training data; otherwise the run goes on. Every certificate a ``Result`` carries
has passed this check.
"""
import math
import numbers

import numpy as np

from ._compose import claim_thresholds, resolve_kernel
from .plugins import referee_block
from ._referee import ETA, _features, referee_rows, row_bounds
from ._referee import UNIT as U  # the unit round-off of float64
from .utils._memory import in_small_pages

__all__ = ["Certificate", "Verdict", "NotPositiveSemidefiniteError", "certificate_type",
           "CERTIFICATE_TYPES", "CLAIM_KINDS", "labels_pm"]

#: statuses that are claims, and the kind of certificate each needs
CLAIM_KINDS = {"separable": "separator", "infeasible": "infeasibility",
               "certified": "certified_points"}

#: certificate class name -> class (what ``load_result`` may restore)
CERTIFICATE_TYPES = {}


def certificate_type(cls):
    """Class decorator: make a certificate class restorable by ``load_result``."""
    CERTIFICATE_TYPES[cls.__name__] = cls
    return cls


class NotPositiveSemidefiniteError(ValueError):
    """The kernel is not positive semi-definite on the data: p^T G p < 0 beyond round-off.

    Gordan's theorem in the kernel's feature space (the infeasibility certificate) needs a
    PSD kernel; a run that meets such a kernel stops with this error instead of a claim.
    """


class Verdict:
    """What the referee found: truthy exactly when the claim holds.

    Attributes
    ----------
    ok : bool
        The claim holds, beyond the rounding error of its recomputation.
    kind : str
        The certificate's kind.
    value : float
        The recomputed measure (min_i (G alpha)_i, ||p||_G, the error bound, the Newton
        decrement...), never the certificate's own number.
    threshold : float
        What the claim compares the measure with, from the run's configuration.
    rounding : float
        A bound on the recomputation's own rounding error.
    margin : float
        How far the claim clears its threshold after the rounding bound (> 0 iff ``ok``
        for claims that compare one measure with one threshold; the smallest such margin
        over the points for per-point claims).
    reason : str
        Why the claim failed ("" when it holds).
    lasting : bool
        The reason does not depend on the iterate: no claim of this kind can hold on
        this data with this kernel and configuration (an exact kernel that is not
        positive semi-definite on X, or cannot be shown to be; a diagonal, or the whole
        Gram matrix the referee forms for a callable or precomputed kernel, that is not
        finite). A solver ends its run on such a verdict instead of offering claims
        until ``max_iter``. False when the claim holds.
    """

    __slots__ = ("ok", "kind", "value", "threshold", "rounding", "margin", "reason",
                 "lasting")

    def __init__(self, ok, kind, value=math.nan, threshold=math.nan, rounding=0.0,
                 margin=math.nan, reason="", lasting=False):
        self.ok = bool(ok)
        self.kind = kind
        self.value = float(value)
        self.threshold = float(threshold)
        self.rounding = float(rounding)
        self.margin = float(margin)
        self.reason = "" if self.ok else (reason or "the claim does not hold")
        self.lasting = bool(lasting) and not self.ok

    @classmethod
    def reject(cls, kind, reason, **numbers):
        return cls(False, kind, reason=reason, **numbers)

    def __bool__(self):
        return self.ok

    def __repr__(self):
        head = "holds" if self.ok else \
            f"rejected{' (lasting)' if self.lasting else ''}: {self.reason}"
        return (f"Verdict({self.kind}: {head}; value={self.value:.6g}, "
                f"threshold={self.threshold:.6g}, rounding={self.rounding:.3g}, "
                f"margin={self.margin:.3g})")


class Certificate:
    """Base class: ``kind``, ``value``, ``check(X, y) -> Verdict``, ``verify(X, y) -> bool``.

    ``value`` is the solver's own number, for information; the referee never reads it.
    """

    kind = None
    value = None

    def check(self, X, y):  # pragma: no cover - abstract
        """Recompute the claim from X, y and the kernel; return a ``Verdict``.

        The built-in kinds take per-sample weights as data,
        ``check(X, y, sample_weight=None)`` (the weights of a weighted run)."""
        raise NotImplementedError

    def verify(self, X, y, sample_weight=None):
        """True when the claim holds on (X, y): ``bool(self.check(X, y))``; with
        ``sample_weight`` (the weights of a weighted run), ``bool(self.check(X, y,
        sample_weight=sample_weight))``."""
        if sample_weight is None:
            return bool(self.check(X, y))
        return bool(self.check(X, y, sample_weight=sample_weight))

    def __repr__(self):
        return f"{type(self).__name__}(kind={self.kind!r}, value={self.value!r})"


def predictor_fingerprint(support, support_coef):
    """SHA-256 (hex) of a kernel model's predictor: the rows it keeps (``support``: a
    matrix, or None for a precomputed Gram matrix) and their coefficients.

    The rows are read as a CSR matrix of float64 entries with sorted column indices and
    no stored zeros, so the fingerprint is that of the matrix, not of its layout: dense
    or CSR, float32 rows read as float64 (exactly), int32 or int64 indices give the same
    one. A certificate of a kernel model holds the fingerprint of the predictor it
    certifies: its referee recomputes the predictor from X, y and the certified variables,
    and ``load_result`` compares it with the loaded ``support_`` and ``support_coef_``
    (docs/reliability.md, "Input policy")."""
    import hashlib

    import scipy.sparse as sp

    h = hashlib.sha256()
    if support is None:
        h.update(b"none;")
    else:
        R = sp.csr_matrix(support, dtype=np.float64, copy=True)
        R.sum_duplicates()
        R.eliminate_zeros()
        h.update(f"csr {R.shape[0]} {R.shape[1]};".encode())
        for a, dt in ((R.indptr, "<i8"), (R.indices, "<i8"), (R.data, "<f8")):
            h.update(np.ascontiguousarray(a, dtype=dt).tobytes())
            h.update(b";")
    coef = np.ascontiguousarray(np.asarray(support_coef, dtype=np.float64).ravel(), dtype="<f8")
    h.update(f"coef {coef.shape[0]};".encode())
    h.update(coef.tobytes())
    return h.hexdigest()


def _dask(X):
    """X as a dask array when it is one (or an xarray object backed by one), else None."""
    from ._validation import dask_array_of

    return dask_array_of(X)


def local_matrix(X):
    """X as an in-memory matrix: a dask array is computed chunk by chunk (row blocks
    stacked, sparse chunks kept sparse); anything else is returned as it is."""
    X = _dask(X) if _dask(X) is not None else X
    if not hasattr(X, "__dask_graph__"):
        return X
    import scipy.sparse as sp

    from ._validation import check_chunk_shape

    blocks = []
    for i, rows in enumerate(X.chunks[0]):  # one row of chunks in flight at a time
        b = X.blocks[i].compute()
        if X.ndim == 2:
            check_chunk_shape(np.shape(b), (rows, X.shape[1]), i)
        blocks.append(b)
    if any(sp.issparse(b) for b in blocks):
        return sp.vstack([sp.csr_matrix(b) for b in blocks], format="csr")
    return np.concatenate(blocks, axis=0)


def stored_r_mask(r, mask):
    """A certified-points certificate's dual vector r (float64) and mask (bool) as
    arrays, as its constructor stores them; ``ValueError`` naming the field when either
    is of another kind (an array of indices or of floats is not a set of points: indexed
    with it, the referee would check other points than those it claims)."""
    m = np.asarray(mask)
    if m.dtype != np.bool_:
        raise ValueError(f"the mask must be a boolean array, got dtype {m.dtype}")
    a = np.asarray(r)
    if a.dtype.kind not in "biuf":
        raise ValueError(f"r must be a real array, got dtype {a.dtype}")
    return a.astype(np.float64, copy=False), m


def claim_vector(v, name, n_points, n_labels):
    """A perceptron-family certificate's vector (``alpha`` or ``p``) as a float64 array of
    one entry per point and "", or None and the reason it is of another kind: a matrix
    (its columns would be checked as several vectors, whose norms add in quadrature, each
    scaled down by their number: not the one vector the claim is about), complex or
    non-numeric entries, another length."""
    a = np.asarray(v)
    if a.ndim != 1 or a.dtype.kind not in "biuf":
        return None, (f"{name} must be a real vector of one entry per point, got "
                      f"{a.dtype} of shape {a.shape}")
    if a.shape[0] != n_labels or n_points != n_labels:
        return None, f"{name} has {a.shape[0]} entries for {n_points} points and {n_labels} labels"
    return a.astype(np.float64, copy=False), ""


def labels_pm(y, classes):
    """Labels as +-1 floats (``classes[1]`` is +1); a label outside ``classes`` raises.

    ``classes=None`` takes the two distinct labels of ``y`` (sorted).
    """
    y = np.asarray(y).ravel()
    if classes is None:
        classes = np.unique(y)
        if classes.size != 2:
            raise ValueError(f"y has {classes.size} distinct labels; a certificate needs two")
    classes = np.asarray(classes)
    pos = y == classes[1]
    neg = y == classes[0]
    unknown = ~(pos | neg)
    if unknown.any():
        bad = np.unique(y[unknown])[:5].tolist()
        raise ValueError(
            f"y holds label(s) {bad} that are not among the run's classes "
            f"{classes.tolist()}; pass the labels the model was fit on"
        )
    return np.where(pos, 1.0, -1.0)


# ------------------------------------------------------------------ row blocks
def n_rows(X):
    """Rows of a matrix, a dask array or ``RowBlocks``."""
    return X.n_samples if hasattr(X, "n_samples") else X.shape[0]


def as_data(X, cert=None):
    """What a check reads: an in-memory X validated (``check_X``), a dask array (of known
    row chunk sizes: ``_referee.known_row_chunks``) or a ``RowBlocks``-like object as
    it is. With ``cert`` (the certificate whose referee reads X), X's width is first
    checked against its run's ``memory_budget`` as ``solve`` checks it
    (``check_referee_width``)."""
    if cert is not None:
        check_referee_width(X, cert)
    if hasattr(X, "map") and hasattr(X, "n_samples"):
        return X
    if _dask(X) is not None:
        from ._referee import known_row_chunks

        return known_row_chunks(_dask(X))  # unknown chunk sizes measured (a new array)
    from ._validation import check_X

    return check_X(X)


def check_referee_width(X, cert):
    """``solve``'s check of X's number of columns against ``memory_budget`` (the
    certificate's run's, else the default) for the referee of ``cert``, which keeps
    vectors of the input space (linear) or column pointers (a kernel's sparse products)
    as the solvers do: a ValueError naming the budget and the fix instead of arrays of
    16 GiB for a CSR X of 2^31 declared columns (found by review). X's shape only."""
    from ._width import check_width_budget

    check_width_budget(X, getattr(cert, "kernel", None),
                       getattr(getattr(cert, "config", None), "memory_budget", None))


def row_blocks(X):
    """X as row blocks for the passes (``_referee.RowBlocks``: an in-memory matrix is
    validated and cut into bounded blocks, a dask array read one chunk at a time); an
    object that already has ``map`` and ``n_samples`` (the Dask backend's chunk pool) is
    used as it is."""
    from ._referee import RowBlocks

    if hasattr(X, "map") and hasattr(X, "n_samples"):
        return X
    return RowBlocks(_dask(X) if _dask(X) is not None else X)


# ------------------------------------------------------------------ rounding model
#: factor on every first-order rounding bound: covers the second-order terms and the
#: rounding of the bound's own evaluation
SAFETY = 2.0


def _pow2_scale(v):
    """v / 2^e with 2^e >= max |v| (exact unless entries are subnormal after the scaling)."""
    top = float(np.max(np.abs(v), initial=0.0))
    if top == 0.0 or not math.isfinite(top):
        return v, top
    e = math.frexp(top)[1]
    return np.ldexp(v, -e), top


def unit_rows(P):
    """Rows of P (float64, dense or CSR) scaled to unit norm without overflow or underflow:
    ``(Q, absQ, zero, k)``; zero rows (norm 0) are left at 0 and flagged in ``zero``; ``k``
    bounds the entries per row. Each entry of Q has relative error <= (k + 6) u.

    Every row is first divided by its largest magnitude (exact up to one rounding), so no
    square of a raw entry is ever formed.
    """
    import scipy.sparse as sp

    if sp.issparse(P):
        P = P.tocsr()
        counts = np.diff(P.indptr)
        full = np.flatnonzero(counts)  # reduceat needs non-empty segments
        data = np.abs(P.data, dtype=np.float64)  # a new array: |P| now, Q's data below
        m = np.zeros(P.shape[0])
        if full.size:
            m[full] = np.maximum.reduceat(data, P.indptr[full])
        zero = ~(m > 0)
        data /= np.repeat(np.where(zero, 1.0, m), counts)
        r = np.zeros(P.shape[0])
        if full.size:
            r[full] = np.sqrt(np.add.reduceat(data * data, P.indptr[full]))
        data /= np.repeat(np.where(zero, 1.0, r), counts)
        absP = sp.csr_matrix((data, P.indices, P.indptr), shape=P.shape)
        P = sp.csr_matrix((np.copysign(data, P.data), P.indices, P.indptr), shape=P.shape)
        k = int(counts.max(initial=0))
        return P, absP, zero, k
    P = np.asarray(P, dtype=np.float64)
    m = np.max(np.abs(P), axis=1, initial=0.0)
    zero = ~(m > 0)
    Q = P / np.where(zero, 1.0, m)[:, None]
    r = np.sqrt(np.einsum("ij,ij->i", Q, Q))
    Q /= np.where(zero, 1.0, r)[:, None]
    return Q, np.abs(Q), zero, P.shape[1]


# ------------------------------------------------------------------ feature-map passes
def _referee_features(kernel, Xb):
    """``referee_rows``' features, and per row a bound tau_i = 2 e_i / ||Phi~_i|| on the
    distance between its unit row and the exact map's (None without a rounding bound)."""
    P, err = referee_rows(kernel, Xb)
    if err is None:
        return P, None
    e = row_bounds(err)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        # row norms scaled by the row's largest entry (a squared norm that overflows
        # made tau 0: found by review)
        top = np.max(np.abs(P), axis=1, initial=0.0)
        safe = np.where(top > 0, top, 1.0)
        nrm = top * np.sqrt(np.einsum("ij,ij->i", P / safe[:, None], P / safe[:, None])) \
            * (1 - 4 * U)
        tau = 2 * e / nrm * (1 + 8 * U)
    return P, np.where((nrm > 0) & np.isfinite(tau), tau, np.inf)


def _pass_primal(Xb, sb, vb, kernel):
    """Block share of w = Q^T (s v) and a = |Q|^T |v| (v an n-vector, or n x k for k
    vectors at once), its zero rows, row length and |v|^T tau (``_referee_features``)."""
    P, tau = _referee_features(kernel, Xb)
    Q, absQ, zero, k = unit_rows(P)
    shape = (Q.shape[1],) + vb.shape[1:]
    u = vb * (sb if vb.ndim == 1 else sb[:, None])
    w = np.asarray(Q.T @ u).reshape(shape)
    a = np.asarray(absQ.T @ np.abs(vb)).reshape(shape)
    if tau is None:
        t = np.zeros(vb.shape[1:])
    else:
        with np.errstate(invalid="ignore", over="ignore"):  # 0 * inf: an unbounded row
            t = np.abs(vb).T @ np.where(np.isfinite(tau), tau, np.inf)
        t = np.where(np.isnan(t), np.inf, t)
    return w, a, bool(zero.any()), k, t


def _pass_dual(Xb, sb, kernel, w, ew, dq, T=0.0):
    """Block share of min_i (G v)_i - err_i and min_i (G v)_i, with G v = s (Q w); T =
    sum_j |v_j| tau_j (``_feature_products``) bounds ||w - w_exact||, the map's rounding,
    and the rows' own tau_i their distance to the exact unit rows."""
    P, tau = _referee_features(kernel, Xb)
    Q, absQ, _, k = unit_rows(P)
    g = sb * np.asarray(Q @ w).ravel()
    # products that underflow have an absolute error (eta each, k per row: found by
    # review, a forged separator of rows with subnormal entries verified)
    err = SAFETY * ((k + dq + 8) * U * np.asarray(absQ @ np.abs(w)).ravel()
                    + np.asarray(absQ @ ew).ravel() + (k + 2) * ETA)
    if tau is not None:
        # |q_i . w_ex - q~_i . w~| <= tau_i ||w_ex|| + ||w_ex - w~||, ||w_ex|| <= ||w|| +
        # ||ew|| + T (the exact unit rows' sum against the computed rows')
        reach = (float(np.linalg.norm(w)) + float(np.linalg.norm(ew)) + T) * (1 + 8 * U)
        with np.errstate(over="ignore", invalid="ignore"):
            err = err + SAFETY * (tau * reach + T)
        err = np.where(np.isnan(err), np.inf, err)
    if g.size == 0:
        return np.inf, np.inf
    return float(np.min(g - err)), float(np.min(g))


def _feature_products(blocks, ypm, kernel, v):
    """w = Q^T (s v) over the blocks (v an n-vector or n x k), a bound ``ew`` on its
    rounding, the row length and whether some row has norm 0 (the normalized Gram is then
    undefined)."""
    parts = blocks.map(_pass_primal, per_block=(ypm, v), common=(kernel,))
    w = np.zeros_like(parts[0][0]) if parts else np.zeros(0)
    a = np.zeros_like(w)
    T = np.zeros(v.shape[1:])
    for wb, ab, _, _, tb in parts:  # fixed block order
        w += wb
        a += ab
        T = T + tb
    zero = any(p[2] for p in parts)
    dq = max((p[3] for p in parts), default=0)
    n = blocks.n_samples
    # the relative rounding of the sums, and an absolute eta per product that underflows
    # (n per column; v's own scaling by a power of two loses at most eta per entry too)
    ew = SAFETY * ((n + dq + 8) * U * a + (2 * n + 2) * ETA)
    # ||w_ex - w|| beyond ew: the exact map's unit rows against the computed ones
    T = SAFETY * T * (1 + (n + 4) * U)
    return w, ew, dq, zero, (float(T) if np.ndim(T) == 0 else T)


# ------------------------------------------------------------------ Gram-matrix path
def _gram_rows(X, kernel, lo, hi):
    """Rows lo:hi of K(X, X) in float64 and a bound on each entry's error."""
    import scipy.sparse as sp

    if getattr(kernel, "precomputed", False):
        K = X[lo:hi]
        K = np.asarray(K.toarray() if sp.issparse(K) else K, dtype=np.float64)
        return K, None
    return referee_block(kernel, X[lo:hi], X)


def _gram_products(X, ypm, kernel, v):
    """(G v, its error bound, G undefined) from the kernel's careful Gram rows (in memory,
    row blocks); v an n-vector or n x k (k products from one pass over the Gram rows)."""
    import scipy.sparse as sp

    from ._validation import check_X

    X = check_X(local_matrix(X))
    n = X.shape[0]
    if getattr(kernel, "precomputed", False) and X.shape[1] != n:
        raise ValueError(f"kernel='precomputed' needs the square Gram matrix, got shape {X.shape}")
    step = max(1, (1 << 21) // max(n, 1))
    # the diagonal K(x_i, x_i) (with its error) from small square blocks
    diag, ediag = np.empty(n), np.zeros(n)
    for lo in range(0, n, 256):
        hi = min(n, lo + 256)
        if getattr(kernel, "precomputed", False):
            K, E = np.asarray(X[lo:hi, lo:hi].toarray() if sp.issparse(X) else X[lo:hi, lo:hi],
                              dtype=np.float64), None
        else:
            K, E = referee_block(kernel, X[lo:hi], X[lo:hi])
        diag[lo:hi] = np.diagonal(K)
        if E is not None:
            ediag[lo:hi] = np.diagonal(E)
    if np.any(diag + ediag < 0):
        raise NotPositiveSemidefiniteError(
            f"the kernel has negative diagonal entries K(x, x) < 0 at row(s) "
            f"{np.flatnonzero(diag + ediag < 0)[:10].tolist()}: it is not positive "
            "semi-definite on this data"
        )
    zero = ~(diag - ediag > 0)
    if zero.any():
        return None, None, True
    t = (ypm / np.sqrt(diag))[:, None]
    delta = float(np.max(ediag / (2 * diag))) + 2 * U
    V = v.reshape(n, -1)
    tv = t * V
    g, A, B = np.empty(V.shape), np.empty(V.shape), np.zeros(V.shape)
    # absolute errors of results that underflow, eta / 2 each (found by review: t up to
    # 2^530 amplified them into a forged separator's "margin" of 9e-165): v_j's scaling by a
    # power of two and t_j v_j, through K_ij (|K_ij| (|t_j| + 1) eta / 2; found by review
    # too: t_j = 2^99.5 amplified the first), and the n products K_ij (t v)_j of a row, all
    # scaled by t_i (counted as eta each)
    under = np.empty(n)
    at1 = np.abs(t[:, 0]) + 1.0
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        K, E = _gram_rows(X, kernel, lo, hi)
        g[lo:hi] = t[lo:hi] * (K @ tv)
        aK = np.abs(K)
        A[lo:hi] = np.abs(t[lo:hi]) * (aK @ np.abs(tv))
        under[lo:hi] = np.abs(t[lo:hi, 0]) * ((aK @ at1) * (1 + (n + 2) * U) + n + 2) * ETA
        if E is not None:
            B[lo:hi] = np.abs(t[lo:hi]) * (E @ np.abs(tv))
    err = SAFETY * (((n + 4) * U + 2 * delta) * A + B + under[:, None])
    return g.reshape(v.shape), err.reshape(v.shape), False


class PSDUnprovenError(NotPositiveSemidefiniteError):
    """The referee cannot establish that a kernel is positive semi-definite on the data
    (a Gram matrix larger than it factors); not a proof that it is not. A run meets it as
    it meets ``NotPositiveSemidefiniteError``: at its first claim that needs it."""


def _psd_kernel(kernel):
    """(a kernel to evaluate, True) when ``kernel`` is positive semi-definite by
    construction: a fresh instance of exactly one of the built-in classes of
    ``kernels._psd.psd_kernel_types`` built from parameters its table
    accepts (as the kernel SVM referee does); ``(kernel, False)`` for any other kernel (a
    precomputed Gram matrix, a callable, a plug-in, a subclass, parameters changed behind
    the constructor)."""
    from .kernels._psd import fresh_psd_kernel

    try:
        fresh = fresh_psd_kernel(kernel)
    except ValueError:
        fresh = None
    return (kernel, False) if fresh is None else (fresh, True)


def gram_psd_shift(X, kernel):
    """delta >= 0 with lambda_min(G) >= -delta for the exact normalized Gram matrix G
    (G_ij = K_ij / sqrt(K_ii K_jj), signs aside) of X under a kernel that is not positive
    semi-definite by construction (``_psd_kernel``): found by review, an indefinite
    precomputed Gram matrix gave an "infeasible" claim with p^T G p = 0 that verified, and
    Gordan's alternative in the RKHS needs one (p^T G p = 0 gives G p = 0 only for PSD G).

    From the kernel's careful Gram rows (entry bounds E; none for a precomputed matrix),
    the symmetrized normalized S~ = T (K + K^T)/2 T, T = diag(1/sqrt(K_ii)), within EG of
    G (the asymmetric part, E, the diagonal's error through T, the roundings), and float64
    Cholesky factorizations of S~ + c I for c = 2 ||EG||_F, then c0 + 2 ||EG||_F (c0 =
    4 (n + 2)^2 u; float32 entries add their rounding 2^-24 |K| to EG, as
    ``iterated_tikhonov`` reads them: a float32 precomputed Gram matrix here, and the
    blocks a callable returns in float32 through their own E, ``Kernel.careful_block``).
    The shifts stay at the rounding level: for a PSD G within EG of S~, S~ + (c0 +
    2 ||EG||_F) I has lambda_min >= c0 + ||EG||_F, above what the factorization needs to
    complete (Higham, Theorem 10.7: n gamma_{n+1} for a unit diagonal), so only a matrix
    indefinite beyond its rounding fails both (found by review: shifts up to 32768 c0 let
    eigenvalues of -3.5e-8 at n = 50 pass). The
    first that completes gives R^T R = fl(S~ + c I) + dA with |dA| <= gamma_{n+1} |R^T| |R|
    (Higham, Theorem 10.3), so lambda_min(G) >= -(c + u max|S~_ii + c| + gamma_{n+1}
    ||R||_F^2 + ||EG||_F) (``kernels._psd.cholesky_psd_gap``, as for the kernel SVM
    referee). The claim is then checked with p^T (G + delta I) p, a PSD form: it
    holds for K itself when K is PSD, and otherwise for the PSD kernel K + delta diag(K)
    on the data, within delta of K.

    ``NotPositiveSemidefiniteError`` when both shifts fail (an eigenvalue of G below about
    -(c0 + 2 ||EG||_F)); ``PSDUnprovenError`` (a ``NotPositiveSemidefiniteError``) when n
    exceeds ``PSD_MAX_N`` (the referee does not factor larger Gram matrices)."""
    from ._validation import check_X
    from .kernels._psd import PSD_MAX_N

    X = check_X(local_matrix(X))
    n = X.shape[0]
    if n > PSD_MAX_N:
        raise PSDUnprovenError(
            f"cannot establish that the kernel is positive semi-definite on this data: the "
            f"referee checks a precomputed, callable or plug-in kernel by a Cholesky "
            f"factorization of the whole Gram matrix, for n <= {PSD_MAX_N} points (here "
            f"n = {n}); use a built-in kernel (linear, rbf, poly, laplacian, spline)")
    if n == 0:
        return 0.0
    return _psd_shift_of(X, kernel, n)


#: ``gram_psd_shift``'s answers for the last few precomputed Gram matrices, by digest
_PSD_MEMO = {}
_PSD_LOCK = __import__("threading").Lock()


def _gram_digest(S, float32):
    """A digest of the raw Gram matrix the proof factors (its float64 copy S) and of
    whether its entries are float32 (their rounding enters the proof)."""
    import hashlib

    h = hashlib.blake2b(digest_size=32)
    h.update(repr((S.shape, bool(float32))).encode())
    h.update(np.ascontiguousarray(S).view(np.uint8).data)
    return h.hexdigest()


def _psd_shift_of(X, kernel, n):
    """``gram_psd_shift`` of validated rows X (n >= 1 of them): the raw Gram matrix, then
    the memo or the factorizations (``_psd_shift_factored``)."""
    S = np.empty((n, n))
    E = None
    step = max(1, (1 << 21) // n)
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        Kb, Eb = _gram_rows(X, kernel, lo, hi)
        S[lo:hi] = Kb
        if Eb is not None:
            if E is None:
                E = np.zeros((n, n))
            E[lo:hi] = Eb
    if not (np.all(np.isfinite(S)) and (E is None or np.all(np.isfinite(E)))):
        raise NotPositiveSemidefiniteError(
            "the kernel's Gram entries (or their error bounds) are not finite on this data")
    # a float32 precomputed Gram matrix: its entries are float32 numbers (a kernel's
    # float32 blocks carry their rounding in E, ``Kernel.careful_block``)
    float32 = bool(getattr(kernel, "precomputed", False)) and X.dtype == np.float32
    # a precomputed Gram matrix's answer is a function of its bytes alone: kept for the
    # next checks of the same matrix (a run re-checks a refused claim once its measure has
    # halved; measured: each re-check factored a 4,096-point Gram matrix again, 2 s). The
    # digest is of the copy factored here, so an answer is never filed under bytes it was
    # not computed from (found by review: X edited by another thread between a digest of
    # X and its factorization filed a PSD answer under an indefinite matrix)
    key = _gram_digest(S, float32) if getattr(kernel, "precomputed", False) else None
    with _PSD_LOCK:
        known = _PSD_MEMO.get(key) if key is not None else None
    if known is None:
        try:
            known = _psd_shift_factored(S, E, n, float32)
        except NotPositiveSemidefiniteError as exc:
            known = str(exc)
        if key is not None:
            with _PSD_LOCK:
                if len(_PSD_MEMO) >= 4:
                    _PSD_MEMO.pop(next(iter(_PSD_MEMO)))
                _PSD_MEMO[key] = known
    if isinstance(known, str):
        raise NotPositiveSemidefiniteError(known)
    return known


def _psd_shift_factored(S, E, n, float32):
    """The proof of ``gram_psd_shift`` on the raw Gram matrix S (float64, overwritten) with
    the entries' error bounds E (None: exact) and whether they are float32 numbers."""
    from . import _referee as R
    from .kernels._psd import cholesky_psd_gap

    with np.errstate(over="ignore", invalid="ignore"):
        # EG: |K - K^T| / 2 + (E + E^T) / 2, before S is symmetrized in place
        EG = np.abs(S - S.T)
        if E is not None:
            EG += E
            EG += E.T
            del E
        EG *= 0.5 * (1.0 + 4 * U)
        if float32:
            # a float32 Gram matrix, or a callable's float32 values: the claim is for a
            # PSD matrix within its entries' rounding (as ``iterated_tikhonov`` reads them;
            # found by review: a float32 RBF callable lost its margin bounds)
            EG += (2.0 ** -24) * np.abs(S)
        S += S.T
        S *= 0.5
        d = np.diagonal(S).copy()
        ed = np.diagonal(EG).copy()
        if np.any(d - ed <= 0.0):
            raise NotPositiveSemidefiniteError(
                "the kernel has a diagonal entry K(x, x) <= 0 within its rounding: the "
                "normalized Gram matrix is undefined on this data")
        t = 1.0 / np.sqrt(d)
        # t_i within rel of 1/sqrt(K_ii exact): the diagonal's error and two roundings
        rel = float(np.max(ed / (d - ed))) * 0.5 * (1.0 + 4 * U) + 3 * U
        S *= t[:, None]
        S *= t[None, :]
        EG *= t[:, None]
        EG *= t[None, :]
        EG *= (1.0 + rel) ** 2 * (1.0 + 4 * U)
        EG += ((1.0 + rel) ** 2 - 1.0 + 4 * U) * np.abs(S) + ETA
    if not (np.all(np.isfinite(S)) and np.all(np.isfinite(EG))):
        raise NotPositiveSemidefiniteError(
            "the kernel's normalized Gram matrix is not finite in float64 on this data")
    eF, eerr = R.scaled_norm(EG, overwrite=True)
    del EG
    eF = (eF + eerr) * (1.0 + 4 * U)
    c0 = 4.0 * (n + 2.0) ** 2 * U
    # the entries' rounding first (the smaller delta), then what the factorization needs
    delta = cholesky_psd_gap(S, eF, (2.0 * eF, c0 + 2.0 * eF))
    if delta is not None:
        return delta
    raise NotPositiveSemidefiniteError(
        f"the kernel is not positive semi-definite on this data: its normalized Gram "
        f"matrix has an eigenvalue below -{c0 + 2.0 * eF:.2g}, beyond the rounding of its "
        "entries and of a Cholesky factorization, so no infeasibility certificate or margin "
        "bound exists; use a PSD kernel (a precomputed Gram matrix must be K(X, X) of one)")


# ------------------------------------------------------------------ a stored separator
def _row_length(P):
    """The largest number of entries of a row of P (its columns when dense)."""
    import scipy.sparse as sp

    if sp.issparse(P):
        return int(np.diff(P.tocsr().indptr).max(initial=0))
    return P.shape[1]


def _pass_stored(Xb, yb, kernel, w, ew, b=0.0):
    """Block share of min_i (y_i phi(x_i) . w - err_i): the margins of the separator w in
    the kernel's feature space (the linear kernel's: X's columns), err_i a bound on their
    rounding (any order of the k products of a row: gamma_{k+2} |phi(x_i)| . |w|) plus
    |phi(x_i)| . ew, ew bounding the error of w itself."""
    P = _features(kernel, Xb)
    k = _row_length(P) + 2
    absP = abs(P)
    m = np.asarray(P @ w).ravel()
    a = np.asarray(absP @ np.abs(w)).ravel()
    e = np.asarray(absP @ ew).ravel()
    err = SAFETY * (k * U / (1 - k * U) * a + e + U * (np.abs(m) + abs(b)) + k * ETA)
    if m.size == 0:
        return np.inf
    return float(np.min(yb * (m + b) - err))


def stored_separator_margin(X, ypm, kernel, coef=None, support=None, support_coef=None,
                            intercept=0.0):
    """The smallest margin y_i f(x_i) of a stored separator f (plus ``intercept``), less a
    bound on the rounding of its recomputation in float64 (positive: f classifies every
    point correctly as a float64 evaluation computes it, whatever the order of its sums;
    ``Result.predict`` evaluates kernel models on float32 X in float64 for that reason),
    a kernel's entries counted with the error of its own evaluation, the one predict
    makes (``Kernel.evaluation_bound``).

    f is ``coef`` in the kernel's feature space (the linear model's ``coef_``), or
    ``K(x, support) @ support_coef`` (a kernel model; ``support`` None for a precomputed
    Gram matrix X, whose columns are then the model's rows). Feature maps are evaluated
    on float64 rows (``_features``) with w = Phi(support)^T support_coef and its error
    bound; other kernels through ``careful_block`` (entry bounds included)."""
    feature = getattr(kernel, "feature_map", None) is not None
    if coef is not None or feature:
        if coef is not None:
            w, ew = np.asarray(coef, dtype=np.float64), np.zeros(np.shape(coef))
        else:
            c = np.asarray(support_coef, dtype=np.float64)
            Ps = _features(kernel, support)
            k = Ps.shape[0] + 2
            w = np.asarray(Ps.T @ c).ravel()
            ew = SAFETY * (k * U / (1 - k * U) * np.asarray(abs(Ps).T @ np.abs(c)).ravel()
                           + k * ETA)
        blocks = row_blocks(X)
        parts = blocks.map(_pass_stored, per_block=(ypm,), common=(kernel, w, ew, intercept))
        return float(np.min(parts)) if parts else np.inf  # NaN propagates
    import scipy.sparse as sp

    from ._validation import check_X

    X = check_X(local_matrix(X))
    c = np.asarray(support_coef, dtype=np.float64)
    k = c.shape[0] + 4
    precomputed = getattr(kernel, "precomputed", False)
    low = np.inf
    step = max(1, (1 << 21) // max(c.shape[0], 1))
    for lo in range(0, X.shape[0], step):
        hi = min(X.shape[0], lo + step)
        if precomputed:
            K = X[lo:hi]
            K, E = np.asarray(K.toarray() if sp.issparse(K) else K, dtype=np.float64), None
        else:
            K, E = referee_block(kernel, X[lo:hi], support)
            # the error of the kernel's own evaluation, the one predict makes
            bound = getattr(kernel, "evaluation_bound", None)
            if bound is not None:
                E = bound(X[lo:hi], support, K, E)
        f = K @ c
        err = SAFETY * (k * U / (1 - k * U) * (np.abs(K) @ np.abs(c))
                        + (0.0 if E is None else E @ np.abs(c))
                        + U * (np.abs(f) + abs(intercept)) + k * ETA)
        if hi > lo:
            # np.min propagates NaN, as Python's min(low, nan) does not (found by review)
            low = float(np.min([low, np.min(ypm[lo:hi] * (f + intercept) - err)]))
    return low


# ------------------------------------------------------------------ the two claims
def separator_margin(X, ypm, kernel, alpha):
    """The referee's view of "G alpha > 0": ``(low, value, rounding)`` with value = min_i
    (G alpha)_i and low = min_i ((G alpha)_i - err_i) (err_i a bound on the rounding of the
    recomputation), both for alpha scaled to sum(abs(alpha)) = 1; None when G is undefined
    (a point of zero norm). The claim holds iff low > 0."""
    v, top = _pow2_scale(np.asarray(alpha, dtype=np.float64))
    if top == 0.0 or not math.isfinite(top):
        return None
    l1 = float(np.sum(np.abs(v))) * (1 + (v.size + 2) * U)  # an upper bound on sum |v|
    if getattr(kernel, "feature_map", None) is not None:
        blocks = row_blocks(X)
        w, ew, dq, zero, T = _feature_products(blocks, ypm, kernel, v)
        if zero:
            return None
        parts = blocks.map(_pass_dual, per_block=(ypm,), common=(kernel, w, ew, dq, T))
        low = float(np.min([p[0] for p in parts]))  # NaN propagates (not Python's min)
        value = float(np.min([p[1] for p in parts]))
    else:
        g, err, zero = _gram_products(X, ypm, kernel, v)
        if zero:
            return None
        low, value = float(np.min(g - err)), float(np.min(g))
    return low / l1, value / l1, (value - low) / l1


def dual_norm_bound(X, ypm, kernel, p, eps=None):
    """The referee's view of ||p||_G for p >= 0: ``(upper, value)``, an upper bound on the
    true ||p / sum(p)||_G that covers the rounding of its recomputation, and the computed
    value; None when G is undefined (a point of zero norm).

    A kernel that is not positive semi-definite by construction (a precomputed Gram
    matrix, a callable, a plug-in) has the bound of p^T (G + delta I) p, delta from
    ``gram_psd_shift``. Raises ``NotPositiveSemidefiniteError`` when p^T G p is negative
    beyond its rounding bound or such a kernel is not PSD on the data (no RKHS: Gordan's
    theorem does not apply), and, given the claim's ``eps``, when delta is so large that
    no p in the simplex can be certified (delta > n eps^2: a float32 Gram matrix at a
    small eps); ``PSDUnprovenError`` when its Gram matrix is too large for the referee to
    establish that it is.
    """
    v, top = _pow2_scale(np.asarray(p, dtype=np.float64))
    if top == 0.0:
        return None
    total = float(np.sum(v)) * (1 - (v.size + 2) * U)  # a lower bound on sum(v) (v >= 0)
    if getattr(kernel, "feature_map", None) is not None:
        w, ew, dq, zero, T = _feature_products(row_blocks(X), ypm, kernel, v)
        if zero:
            return None
        value = float(np.linalg.norm(w))
        upper = (value * (1 + (dq + 8) * U) + float(np.linalg.norm(ew)) + T) * (1 + 4 * U)
        return upper / total, value / total
    kernel, proven = _psd_kernel(kernel)
    g, err, zero = _gram_products(X, ypm, kernel, v)
    if zero:
        return None
    if not proven and _exact_gordan(X, ypm, kernel, v):
        return 0.0, 0.0
    shift = 0.0 if proven else gram_psd_shift(X, kernel)
    if eps is not None and shift > v.size * eps * eps:
        # ||v||_2^2 >= total^2 / n: no p in the simplex has a bound below sqrt(shift / n)
        floor = math.sqrt(shift / v.size)
        raise NotPositiveSemidefiniteError(
            f"the kernel's normalized Gram matrix is positive semi-definite only to within "
            f"{shift:.2g} as the referee can prove it (the rounding of its entries as given, "
            f"and of a float64 Cholesky factorization), so no ||p||_G is certified below "
            f"sqrt({shift:.2g} / n) = {floor:.2g} > eps = {eps:.2g}: use a built-in kernel "
            f"(PSD by construction), entries computed in float64 if they are float32, or "
            f"ask for eps >= {floor:.2g}")
    sq, sq_err = _quadratic(v, g, err, total, shift)
    upper = math.sqrt(max(sq + sq_err, 0.0)) / total
    return upper, math.sqrt(max(sq, 0.0)) / total


def _exact_gordan(X, ypm, kernel, v):
    """Whether G^T v = G v = 0 holds exactly, without any PSD assumption: the support of v
    splits into groups of points with identical Gram rows and columns, whose sums
    y_j v_j are exactly 0. Within a group t_j = y_j / sqrt(K_jj) then cancels and G v = 0
    (an exact duplicate of a point, with the opposite label). Then p^T G alpha = 0 for
    every alpha, and with p >= 0, p != 0, no alpha has G alpha > 0: no separator exists
    (Gordan's alternative in the data space). Found by review: with the PSD proof's
    allowance, a precomputed Gram matrix with a duplicate point of the opposite label,
    whose certificate p = (1/2, 1/2) is exact, could no longer be certified from a few
    hundred points.

    Identical rows: a precomputed matrix's entries are the Gram matrix itself, compared bit
    for bit. A kernel's computed entries are only within its error bound of the true ones
    (4 ulps for a callable's, more for float32 ones), and two different points can have
    bit-identical computed rows (found by review: points 2e-4 apart under an RBF callable
    computed in float32, a separable pair whose "infeasible" claim verified): their rows
    are identical only when the points are, the same stored row of X bit for bit (the
    kernel is a function of its arguments); their computed rows are compared too."""
    import scipy.sparse as sp

    from ._validation import check_X

    support = np.flatnonzero(v > 0)
    if support.size < 2 or support.size > 256:
        return False
    X = check_X(local_matrix(X))
    if getattr(kernel, "precomputed", False):
        rows, cols = X[support], X[:, support]
        rows = rows.toarray() if sp.issparse(rows) else np.asarray(rows)
        cols = cols.toarray() if sp.issparse(cols) else np.asarray(cols)
        points = [b""] * support.size
    else:
        # the points as stored (values and, for CSR rows, which entries are stored) and the
        # kernel's rows and columns as the referee computes them, not X's rows alone: a
        # "kernel" that is not a function of its arguments would break "identical points,
        # identical rows"
        points = [_stored_row(X, j) for j in support]
        rows = referee_block(kernel, X[support], X)[0]
        cols = referee_block(kernel, X, X[support])[0]
    rows = np.hstack([np.asarray(rows, dtype=np.float64), np.asarray(cols, dtype=np.float64).T])
    groups = {}
    for r, point, j in zip(np.ascontiguousarray(rows, dtype=np.float64), points, support):
        groups.setdefault((point, r.tobytes()), []).append(j)
    # an exact sum of doubles is a multiple of 2^-1074: fsum (correctly rounded) is 0 iff
    # the sum is
    return all(math.fsum(float(ypm[j]) * float(v[j]) for j in js) == 0.0
               for js in groups.values())


def _stored_row(X, j):
    """Row j of X as stored, as bytes: its dtype and values (a dense row), or its column
    indices and values (a CSR row), signed zeros as 0."""
    import scipy.sparse as sp

    if sp.issparse(X):
        lo, hi = int(X.indptr[j]), int(X.indptr[j + 1])
        return b"csr " + X.dtype.str.encode() + b";" + \
            np.ascontiguousarray(X.indices[lo:hi], dtype=np.int64).tobytes() + b";" + \
            (np.ascontiguousarray(X.data[lo:hi]) + 0.0).astype(X.dtype).tobytes()
    # + 0.0 makes -0.0 into 0.0: the same real point (found by review: [-0.0, x] beside
    # [0.0, x] with the opposite label was no longer a duplicate)
    return X.dtype.str.encode() + b";" + (np.ascontiguousarray(X[j]) + 0.0).astype(
        X.dtype).tobytes()


def _quadratic(v, g, err, total, shift=0.0):
    """(v^T G v, a bound on its rounding) from g = G v and its bound ``err``, the bound
    with ``shift`` ||v||^2 added (``gram_psd_shift``: the form of G + shift I, PSD);
    raises ``NotPositiveSemidefiniteError`` when it is negative beyond that bound
    (``total``: the scale of v reported in the message)."""
    av = np.abs(v)
    sq = float(v @ g)
    sq_err = float(av @ err) * (1 + (v.size + 2) * U) + 2 * (v.size + 2) * U * float(av @ np.abs(g))
    if shift:
        sq_err += shift * float(av @ av) * (1 + (v.size + 4) * U)
    if sq + sq_err < 0:
        raise NotPositiveSemidefiniteError(
            f"p^T G p = {sq / total**2:.3g} < 0 beyond its rounding bound "
            f"({sq_err / total**2:.2g}): the kernel is not positive semi-definite on this "
            "data, so no infeasibility certificate exists; use a PSD kernel (a precomputed "
            "Gram matrix must be K(X, X) of one)"
        )
    return sq, sq_err


def margin_bounds(X, ypm, kernel, alpha, p, memory_budget=None):
    """The referee's bounds on the normalized margin rho_K (Ramdas & Pena 2014, Lemma 3), what
    ``Result.margin_bounds`` reports: ``(lower, upper)`` with lower = min_i (G alpha)_i /
    ||alpha||_G (-inf unless G alpha > 0 holds beyond its rounding bound) and upper =
    ||p / sum(p)||_G for p >= 0, both recomputed in float64 from X, y and the kernel and
    rounded outwards (one pass over the Gram rows, or two over the feature map's row
    blocks). ``(-inf, inf)`` when G is undefined (a point with K(x, x) = 0) or p is 0,
    and for a kernel not PSD by construction whose Gram matrix is too large for the
    referee to establish that it is PSD (``gram_psd_shift``; norms in G need it);
    ``NotPositiveSemidefiniteError`` as ``dual_norm_bound``. X's width is first checked
    against ``memory_budget`` (the default ``Config``'s when None) as ``solve`` checks it
    (found by review: 32 GiB asked for a CSR X of 2^31 declared columns).

    References
    ----------
    A. Ramdas and J. Peña, "Margins, Kernels and Non-linear Smoothed Perceptrons",
    Proceedings of the 31st International Conference on Machine Learning (ICML 2014);
    arXiv:1505.04123.
    """
    from ._width import check_width_budget

    check_width_budget(X, kernel, memory_budget)
    va, top_a = _pow2_scale(np.asarray(alpha, dtype=np.float64))
    vp, top_p = _pow2_scale(np.asarray(p, dtype=np.float64))
    if not (math.isfinite(top_a) and math.isfinite(top_p)) or top_p == 0.0:
        return -math.inf, math.inf
    total = float(np.sum(vp)) * (1 - (vp.size + 2) * U)  # a lower bound on sum(p) (p >= 0)
    V = np.column_stack([va, vp])
    if getattr(kernel, "feature_map", None) is not None:
        blocks = row_blocks(X)
        w, ew, dq, zero, T = _feature_products(blocks, ypm, kernel, V)
        if zero:
            return -math.inf, math.inf
        norm_a, norm_p = ((float(np.linalg.norm(w[:, j])) * (1 + (dq + 8) * U)
                           + float(np.linalg.norm(ew[:, j])) + float(T[j])) * (1 + 4 * U)
                          for j in (0, 1))
        low = -math.inf
        if top_a > 0:
            parts = blocks.map(_pass_dual, per_block=(ypm,),
                               common=(kernel, np.ascontiguousarray(w[:, 0]),
                                       np.ascontiguousarray(ew[:, 0]), dq, float(T[0])))
            low = float(np.min([part[0] for part in parts]))  # NaN propagates
    else:
        kernel, proven = _psd_kernel(kernel)
        g, err, zero = _gram_products(X, ypm, kernel, V)
        if zero:
            return -math.inf, math.inf
        try:
            shift = 0.0 if proven else gram_psd_shift(X, kernel)
        except PSDUnprovenError:
            return -math.inf, math.inf  # a norm in G needs G PSD, not established here
        sq_p, e_p = _quadratic(vp, g[:, 1], err[:, 1], total, shift)
        norm_p = math.sqrt(max(sq_p + e_p, 0.0))
        sq_a, e_a = _quadratic(va, g[:, 0], err[:, 0], 1.0, shift)
        norm_a = math.sqrt(max(sq_a + e_a, 0.0))
        low = float(np.min(g[:, 0] - err[:, 0])) if top_a > 0 else -math.inf
    upper = norm_p / total * (1 + 4 * U)
    lower = low / norm_a * (1 - 4 * U) if (low > 0 and norm_a > 0) else -math.inf
    # a recomputation that overflowed (a NaN or infinite bound) bounds nothing
    return (lower if math.isfinite(lower) else -math.inf,
            upper if math.isfinite(upper) else math.inf)


def _thresholds(config, key):
    """A claim's threshold from the run's configuration (a ``Config`` or its dict); None
    without a configuration. A configuration that does not give it raises ``ValueError``."""
    if config is None:
        return None

    value = claim_thresholds(config).get(key)
    if value is None:
        raise ValueError(f"the run's configuration gives no {key!r} threshold")
    return float(value)


def _same_value(a, b):
    """Parameter values equal: plug-ins by class and parameters (a saved result rebuilds
    them), arrays by value, containers entry by entry, the rest by ``==``."""
    from .plugins import Plugin

    if a is b:
        return True
    if isinstance(a, Plugin) or isinstance(b, Plugin):
        pa, pb = _params_of(a), _params_of(b)
        return type(a) is type(b) and pa is not None and pb is not None and \
            set(pa) == set(pb) and all(_same_value(pa[k], pb[k]) for k in pa)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_value(x, z) for x, z in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return set(a) == set(b) and all(_same_value(a[k], b[k]) for k in a)
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - values without a truth value differ
        return False


def _params_of(obj):
    """A plug-in's constructor parameters, or None when it has none to read."""
    try:
        params = obj.get_params()
    except Exception:  # noqa: BLE001 - a plug-in that does not implement the protocol
        return None
    return params if isinstance(params, dict) else None


def _shadowed(plugin, prefix="", depth=0):
    """The parameters of ``plugin`` (and of the plug-ins among its parameters, such as a
    Nystroem ``base`` kernel) that an attribute of another value set on the instance
    shadows: the code that evaluates it reads the attribute, get_params() the parameter."""
    params = getattr(plugin, "params", None)
    if not isinstance(params, dict) or depth > 8:
        return []
    inst = getattr(plugin, "__dict__", {})
    out = [prefix + k for k, v in params.items() if k in inst and not _same_value(inst[k], v)]
    for k, v in params.items():
        if hasattr(v, "params") and hasattr(v, "__dict__"):
            out += _shadowed(v, f"{prefix}{k}.", depth + 1)
    return sorted(out)


def kernel_mismatch(kernel, config):
    """None when ``kernel`` is the run's kernel (the class and parameters of the kernel
    that the run's configuration ``config`` builds; nothing to compare without one), else
    the reason it is not (``kernel`` None: the identity map of the linear kernel). A
    certificate checked against a kernel of its own choosing would certify a different
    problem (a narrower RBF separates more)."""
    if config is None:
        return None
    from .kernels.builtin import LinearKernel

    # a plug-in's parameters are read through ``params``; an attribute of the same name
    # set on the instance (``kernel.gamma = 50``, kept by pickle) would be read instead by
    # the code that evaluates the kernel, while get_params() still reports the run's
    shadow = _shadowed(kernel)
    if shadow:
        return (f"the certificate's kernel has attribute(s) {shadow} set on it that shadow "
                "its parameters (set_params changes a parameter); it is not the run's kernel")
    if isinstance(config, dict):
        spec, params = config.get("kernel", "linear"), config.get("kernel_params")
    else:
        spec, params = config.kernel, config.kernel_params
    try:
        run = resolve_kernel(spec, params)
    except (TypeError, ValueError, KeyError) as exc:
        return f"the run's configuration does not define its kernel: {exc}"
    if kernel is None:
        kernel = LinearKernel() if isinstance(run, LinearKernel) else None
        if kernel is None:
            return f"the certificate has no kernel (the linear map), the run's is {run!r}"
    if kernel is run or _same_value(kernel, run):
        return None
    return f"the certificate's kernel {kernel!r} is not the run's kernel {run!r}"


def _or_linear(kernel):
    """A certificate's kernel, None meaning the linear kernel (as ``kernel_mismatch``)."""
    from .kernels.builtin import LinearKernel

    return LinearKernel() if kernel is None else kernel


def check_refittable(kernel):
    """``ValueError`` when the unfitted kernel approximation ``kernel`` cannot be refitted
    to the map a certificate was computed on: its draw is random (``random_state`` None or
    a Generator), so a refit draws another map; the run's fit, which ``Result.save``
    stores, is missing (a file written before fits were saved, or edited). A kernel
    without a ``random_state`` parameter has a deterministic fit: refitted as it is."""
    params = getattr(kernel, "params", {})
    rs = params.get("random_state")
    if "random_state" in params and (isinstance(rs, bool)
                                     or not isinstance(rs, numbers.Integral)):
        raise ValueError(
            f"{kernel!r} is unfitted and its draw is random (random_state={rs!r}): the "
            "fit the certificate was computed on was not saved with the result (a file "
            "written by an older marginkit, or edited), and a refit would draw another "
            "map; solve again with an integer random_state in kernel_params (then the "
            "fit is reproducible), and save that result")
    base = getattr(kernel, "__dict__", {}).get("base_kernel")
    if hasattr(base, "referee_copy") and getattr(base, "fitted", True) is False:
        check_refittable(base)  # a Nystroem map of a random approximation


def referee_kernel(kernel, X=None):
    """The kernel a referee evaluates for a certificate's ``kernel``: a kernel
    approximation rebuilt from its parameters and the free choices of its fit
    (``referee_copy``: the Nystroem centres, the seed of the random features), everything
    else recomputed, so a fit edited after the run is not checked
    as if the run had made it; other kernels as they are. ``ValueError`` when the stored
    fit is not one its parameters can produce.

    An unfitted approximation (a loaded result keeps its parameters only) is fitted on
    all the rows of the training data ``X`` (in memory: a dask array is computed), as the
    run fitted it, so an integer ``random_state`` reproduces the run's map; fitted lazily
    by the passes, it would draw its centres from the first row block alone."""
    copy = getattr(kernel, "referee_copy", None)
    if copy is None:
        return kernel
    fresh = copy()
    pool = hasattr(X, "map") and hasattr(X, "n_samples")  # a run's own blocks: fitted
    if X is not None and not pool and getattr(fresh, "fitted", True) is False:
        check_refittable(fresh)
        from ._validation import check_X

        fresh.fit(check_X(local_matrix(X)))
    return fresh


class _PerceptronFamilyCertificate(Certificate):
    """Certificates on the normalized Gram G: with a feature map, their check is two
    passes over row blocks (``blocked``), so it also runs where the blocks are held."""

    @property
    def blocked(self):
        return getattr(_or_linear(self.kernel), "feature_map", None) is not None

    def check(self, X, y, sample_weight=None):
        """Recompute the claim from X, y and the kernel: a ``Verdict``.

        Positive weights do not change whether data are separable, so ``sample_weight``
        with every weight > 0 checks the same claim; weights that are not valid, or that
        have zeros, are a rejected verdict: the claim is then about the rows of positive
        weight, to be checked on ``X[w > 0]``, as ``PerceptronClassifier.fit`` solves it.
        An X that cannot be read raises first, as without weights."""
        if sample_weight is not None:
            from ._validation import check_sample_weight

            X = as_data(X)
            labels_pm(y, self.classes)  # labels outside the classes raise first, as unweighted
            try:
                w = check_sample_weight(sample_weight, n_rows(X))
            except (TypeError, ValueError) as exc:
                return Verdict.reject(self.kind, str(exc))
            if not (w > 0).all():
                return Verdict.reject(
                    self.kind, "sample_weight has zeros: the claim is about the rows of "
                    "positive weight; check it on X[w > 0], y[w > 0], as "
                    "PerceptronClassifier.fit solves it")
        from ._referee import MapRefused

        try:
            return self._check(X, y)
        except MapRefused as exc:
            # a map refusing X of another width: data that do not fit the claim, as in
            # the linear SVM check (found by review: its ValueError escaped here)
            return Verdict.reject(self.kind, str(exc))


@certificate_type
class SeparatorCertificate(_PerceptronFamilyCertificate):
    """G alpha > 0: f = sum_i alpha_i y_i phi(x_i)/sqrt(K(x_i, x_i)) separates the data.

    ``value`` is min_i (G alpha)_i as the solver computed it (for information). ``check``
    recomputes G alpha in float64 from X, y and the kernel (feature maps: rows scaled to
    unit norm without squaring raw entries; other kernels: the kernel's ``careful_block``,
    distance kernels from explicit differences) with a bound on that recomputation's
    rounding, and holds when min_i (G alpha)_i exceeds it. ``Verdict.value`` and
    ``margin`` are for alpha scaled to sum(abs(alpha)) = 1 (a lower bound on the margin
    rho_K times ||alpha||_G / sum(abs(alpha))).

    References
    ----------
    A. Ramdas and J. Peña, "Margins, Kernels and Non-linear Smoothed Perceptrons",
    Proceedings of the 31st International Conference on Machine Learning (ICML 2014);
    arXiv:1505.04123.
    """

    kind = "separator"

    def __init__(self, alpha, value, kernel, classes=None, config=None, coef=None,
                 support_coef=None, predictor=None, intercept=None):
        self.alpha = np.asarray(alpha, dtype=np.float64)
        self.value = float(value)
        self.kernel = kernel
        self.classes = classes
        self.config = config
        #: the separator a result predicts with: ``coef`` (a model in X's columns), or
        #: ``support_coef`` with ``predictor`` = ``predictor_fingerprint(support_,
        #: support_coef_)`` (a kernel model, its rows those of X where alpha != 0)
        self.coef = None if coef is None else np.asarray(coef, dtype=np.float64)
        self.support_coef = None if support_coef is None else \
            np.asarray(support_coef, dtype=np.float64)
        if (support_coef is None) != (predictor is None) or (
                predictor is not None and not (isinstance(predictor, str)
                                               and len(predictor) == 64)):
            raise ValueError("support_coef and predictor (the 64-character hex string of "
                             "predictor_fingerprint) go together, or are both None")
        if coef is not None and support_coef is not None:
            raise ValueError("a separator is coef or support_coef (one model), not both")
        self.predictor = predictor
        #: the intercept the result adds (0.0: the family's models have none; None in
        #: files of format 3 and before)
        self.intercept = None if intercept is None else float(intercept)

    def holds_model(self):
        """Whether the certificate holds the separator the result predicts with (files of
        format 3 and before do not)."""
        return self.coef is not None or self.predictor is not None

    def predictor_mismatch(self, model, fields):
        """None when ``model`` (``_result.predicting_model``: what ``decision_function``
        evaluates) is the separator this certificate checks, else why not
        (``load_result``)."""
        if model is None:
            return None
        kind, value = model
        if kind in ("coef", "feature_space"):
            if self.coef is None:
                return ("its certificate holds no copy of the separator r.coef_ it checks "
                        "(r.certificate.fields.coef)")
            if not _same_value(self.coef, np.asarray(value, dtype=np.float64)):
                return ("r.coef_ (or r.extra['feature_space_coef']) is not the separator its "
                        "certificate checks (r.certificate.fields.coef)")
            return None
        if self.predictor is None:
            return ("its certificate holds no fingerprint of the separator it checks "
                    "(r.certificate.fields.predictor)")
        if predictor_fingerprint(*value) != self.predictor:
            return "r.support_ and r.support_coef_ are not the separator its certificate checks"
        return None

    @in_small_pages
    def _check(self, X, y):
        X = as_data(X, self)
        ypm = labels_pm(y, self.classes)
        alpha, why = claim_vector(self.alpha, "alpha", n_rows(X), ypm.shape[0])
        if alpha is None:
            return Verdict.reject(self.kind, why)
        if not np.all(np.isfinite(alpha)):
            return Verdict.reject(self.kind, "alpha is not finite")
        other = kernel_mismatch(self.kernel, self.config)
        if other is not None:
            return Verdict.reject(self.kind, other)
        try:
            kernel = referee_kernel(_or_linear(self.kernel), X)
        except ValueError as exc:
            return Verdict.reject(self.kind, str(exc))
        res = separator_margin(X, ypm, kernel, alpha)
        if res is None:
            return Verdict.reject(self.kind, "alpha is zero, or a point has K(x, x) = 0 "
                                             "(the normalized Gram is undefined)")
        low, value, rounding = res
        if not low > 0:
            return Verdict(False, self.kind, value=value, threshold=0.0, rounding=rounding,
                           margin=low,
                           reason="min_i (G alpha)_i does not exceed its rounding bound")
        why = self._stored_separator(X, ypm, kernel, alpha)
        if why is not None:
            return Verdict.reject(self.kind, why, value=value, threshold=0.0,
                                  rounding=rounding, margin=low)
        return Verdict(True, self.kind, value=value, threshold=0.0, rounding=rounding,
                       margin=low)

    def _stored_separator(self, X, ypm, kernel, alpha):
        """Why the separator the certificate stores (the one the result predicts with) is
        not established on (X, y), or None: it must be the model of alpha's support (the
        rows of X where alpha != 0, bound by their fingerprint) and classify every point
        correctly beyond the rounding of its recomputation."""
        if self.coef is None and self.support_coef is None:
            return None  # a certificate of alpha alone (user code): nothing predicts
        if self.coef is not None and getattr(kernel, "feature_map", None) is None:
            return ("the stored separator coef is a model in feature space, and the kernel "
                    f"{kernel!r} has no feature map")
        from .kernels.builtin import LinearKernel

        if self.coef is not None and isinstance(_or_linear(kernel), LinearKernel):
            width = np.shape(self.coef)[-1] if np.ndim(self.coef) else 1
            shape = getattr(X, "shape", None)
            cols = shape[1] if shape is not None else getattr(X, "n_features", width)
            if width != cols:
                return (f"the stored separator coef has {width} entries, X {cols} features "
                        "(X of another width than the run's?)")
        support = None
        if self.coef is None:
            precomputed = getattr(kernel, "precomputed", False)
            if not precomputed:
                support = local_matrix(X)[np.flatnonzero(alpha != 0)]
            if predictor_fingerprint(support, self.support_coef) != self.predictor:
                return ("the stored separator (support_, support_coef_) is not a model of "
                        "the rows of X where alpha != 0")
        low = stored_separator_margin(X, ypm, kernel, coef=self.coef, support=support,
                                      support_coef=self.support_coef,
                                      intercept=self.intercept or 0.0)
        if not low > 0:
            return ("the stored separator (coef_ or support_coef_) does not classify every "
                    "point correctly beyond the rounding of its recomputation")
        return None


@certificate_type
class InfeasibilityCertificate(_PerceptronFamilyCertificate):
    """p in the simplex with ||p||_G <= eps (Gordan's theorem in the RKHS, Ramdas & Pena 2014, sec. 5):
    no separator has normalized margin above eps.

    ``value`` is ||p||_G as the solver computed it (for information). ``eps`` is the run's
    threshold: from the run's configuration (``config``: the largest eps of its
    ``dual_certificate`` rules, or the solver's own tolerance) when the certificate has one,
    else the ``eps`` it was built with. ``check`` recomputes an upper bound on ||p||_G in
    float64 from X, y and the kernel (rounding included) and holds when it is <= eps;
    a p^T G p negative beyond rounding, or a kernel that is not PSD on the data
    (precomputed, callable and plug-in kernels are checked by ``gram_psd_shift``; the
    built-in ones are PSD by construction), raises ``NotPositiveSemidefiniteError``, and
    so does a Gram matrix of such a kernel too large to check (``PSDUnprovenError``, its
    subclass).

    References
    ----------
    A. Ramdas and J. Peña, "Margins, Kernels and Non-linear Smoothed Perceptrons",
    Proceedings of the 31st International Conference on Machine Learning (ICML 2014);
    arXiv:1505.04123.
    """

    kind = "infeasibility"

    def __init__(self, p, value, eps, kernel, classes=None, config=None):
        self.p = np.asarray(p, dtype=np.float64)
        self.value = float(value)
        self._eps = float(eps)
        self.kernel = kernel
        self.classes = classes
        self.config = config

    @property
    def eps(self):
        """The threshold ||p||_G is checked against (from the run's configuration)."""
        eps = _thresholds(self.config, "dual_tol")
        return float(self._eps if eps is None else eps)

    @in_small_pages
    def _check(self, X, y):
        try:
            eps = self.eps
        except ValueError as exc:
            return Verdict.reject(self.kind, str(exc))
        if not (0.0 < eps < 1.0):
            return Verdict.reject(self.kind, f"eps = {eps!r} is not in (0, 1): every p in the "
                                             "simplex has ||p||_G <= 1, such a claim says nothing")
        X = as_data(X, self)
        ypm = labels_pm(y, self.classes)
        p, why = claim_vector(self.p, "p", n_rows(X), ypm.shape[0])
        if p is None:
            return Verdict.reject(self.kind, why)
        if not np.all(np.isfinite(p)) or p.min() < 0 or abs(float(np.sum(p)) - 1.0) > 1e-9:
            return Verdict.reject(self.kind, "p is not in the simplex (p >= 0, sum(p) = 1)",
                                  threshold=eps)
        other = kernel_mismatch(self.kernel, self.config)
        if other is not None:
            return Verdict.reject(self.kind, other, threshold=eps)
        try:
            kernel = referee_kernel(_or_linear(self.kernel), X)
        except ValueError as exc:
            return Verdict.reject(self.kind, str(exc), threshold=eps)
        res = dual_norm_bound(X, ypm, kernel, p, eps)
        if res is None:
            return Verdict.reject(self.kind, "a point has K(x, x) = 0 (the normalized Gram "
                                             "is undefined)", threshold=eps)
        upper, value = res
        return Verdict(upper <= eps, self.kind, value=value, threshold=eps,
                       rounding=upper - value, margin=eps - upper,
                       reason="||p||_G (with its rounding bound) exceeds eps")
