"""Upper bounds of ||Z~||_2^2, for the Lipschitz constant L = mu + ||Z~||_2^2 of FISTA.

L must bound the largest eigenvalue of the Hessian of the perturbed dual from above (paper
section 2.3), so every estimate here is rounded *up* (docs/svm.md, section 2):
``lipschitz_bound`` forms the (d+1) x (d+1) Gram matrix over the row blocks when that is
cheap (``gram_is_cheap``) and takes its top eigenvalue by LAPACK (``top_eigenvalue_bound``),
else runs Lanczos on v -> Z~^T (Z~ v) (``lanczos_bound``); both add a proven margin for
the rounding of the computation (``_gram_rounding_bound``).

References
----------
.. [1] N. J. Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., SIAM,
   2002, section 3.1 (the entrywise error of a computed Gram matrix).
.. [2] B. N. Parlett, "The Symmetric Eigenvalue Problem", SIAM, 1998 (Lanczos, the
   residual bound of a Ritz value).
"""
import numpy as np

from ... import _referee as R
from ...stopping import DeadlineReached, past
from . import _fast as _f
from ..tikhonov import _fast as _rows_fast  # X v and X^T u over a row block
from ._data import _Blocked, _Data, _in_order

#: budget for the (d+1) x (d+1) Gram matrix of ``lipschitz_bound`` (bytes; also capped by
#: a quarter of ``Config.memory_budget``)
_GRAM_BYTES = 256 * 2**20
#: the Gram matrix is formed when it costs less than this many passes over X
#: (one pass = one product with Z~ and one with Z~^T, 2 nnz multiply-adds)
_GRAM_PASSES = 40


def _gram_rounding_bound(n, F, M, trace, augmented, p, n_blocks=1, terms=None):
    """Bound on the error of the computed largest eigenvalue of G = Z~^T Z~ (or Z^T Z).

    ``F`` = sum_i ||s * x_i||^2, ``M`` = ||s * m||^2, ``trace`` = trace(G). Every entry of G
    is a sum of at most n + 4 rounded products whose magnitudes are entries of W^T W, W the
    matrix of rows (|s * x_i| + |s * m|, 1); so entrywise |G_computed - G| <=
    gamma_{n+4} W^T W (Higham 2002, sec. 3.1) and ||W^T W||_2 <= ||W||_F^2 <=
    (sqrt(F) + sqrt(n M) + sqrt(n))^2. The symmetric eigensolver is backward stable: its
    largest eigenvalue is that of a matrix within O(p u ||G||_2) of G_computed, allowed
    for by 8 p u trace(G). With ``n_blocks`` row blocks each entry is the sum of the
    blocks' sums: n_blocks - 1 more additions in the chain. ``terms`` (default n) is the
    length of the sums instead: Z~ Z~^T, whose entries are sums over the p columns, has
    the same W W^T bound (||W W^T||_2 = ||W^T W||_2) and its own ``p`` (its order, n).
    """
    k = ((n if terms is None else terms) + 4 + n_blocks - 1) * R.UNIT
    gam = k / (1.0 - k)
    W = (np.sqrt(F) + np.sqrt(n * M) + (np.sqrt(n) if augmented else 0.0)) ** 2
    return gam * W + 8.0 * p * R.UNIT * trace


def _gram_blocks(data):
    """(Z^T Z, Z^T e) of the rows held by ``data`` (a ``_Data``), float64, one pass over X.

    Dense X: row blocks are centered and scaled exactly, (X_B - e m^T) S, and multiplied
    by BLAS. CSR X (never densified): G1 = S X^T X S and cs = S X^T e from
    ``_fast.csr_scaled_gram``, then with sm = s * m

        Z^T Z = G1 - sm cs^T - cs sm^T + n sm sm^T,   Z^T e = cs - n sm.
    """
    n, d = data.n, data.d
    s, m = data.s, data.m
    if data.sparse:
        P = np.zeros((d, d))
        diag, cs = np.zeros(d), np.zeros(d)
        rl = np.diff(data.indptr)
        xs = np.zeros(max(int(rl.max()) if rl.size else 0, 1))
        _f.csr_scaled_gram(data.rows, s, P, diag, cs, xs)
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
    """Largest eigenvalue of the Gram matrix G (``top_eigenvalue``: LAPACK, top one only;
    the trace of G, also at least that eigenvalue, where LAPACK fails) plus the rounding
    margin of ``_gram_rounding_bound``: an upper bound of ||Z~||_2^2."""
    from ...linalg._norms import top_eigenvalue

    p = G.shape[0]
    lam = top_eigenvalue(G)
    if lam is None:
        lam = float(np.trace(G))
    return max(lam, 0.0) + _gram_rounding_bound(n, F, M, trace, augmented, p, n_blocks)


def ritz_estimate(matvec, p, tol, seed=0, deadline=None):
    """theta + ||A x - theta x|| for the largest Ritz pair (theta, x) of the symmetric
    p x p operator A = ``matvec`` (Lanczos, ``scipy.sparse.linalg.eigsh``, relative
    tolerance ``tol``, start vector from ``seed``), theta clipped at 0; None when ARPACK
    fails (no convergence, or no vector to start from: an operator that is 0 in float64)
    or when a product would start after ``deadline`` (a ``time.perf_counter()`` time), or
    ``matvec`` itself raises ``DeadlineReached`` (a product cut at it).

    An eigenvalue lies within the residual of theta; that it is the largest one holds
    with high probability from a random start (Lanczos converges to the extreme
    eigenvalues first), not with certainty. Shared by ``lanczos_bound`` and the exact
    kernels' bound (``_kernel._lambda_max``).

    References
    ----------
    .. [1] B. N. Parlett, "The Symmetric Eigenvalue Problem", SIAM, 1998 (the residual
       bound: some eigenvalue lambda has |lambda - theta| <= ||A x - theta x||, ||x|| = 1).
    """
    from scipy.sparse.linalg import ArpackError, LinearOperator, eigsh

    def mv(v):
        if past(deadline):
            raise DeadlineReached
        return matvec(np.asarray(v, dtype=np.float64).ravel())

    if p == 1:
        # ARPACK needs an order above k = 1: the one entry is the eigenvalue (residual 0)
        return max(float(matvec(np.ones(1))[0]), 0.0)
    v0 = np.random.default_rng(seed).standard_normal(p)
    op = LinearOperator((p, p), matvec=mv, dtype=np.float64)
    try:
        theta, x = eigsh(op, k=1, which="LA", tol=tol, v0=v0)
        theta, x = float(theta[0]), x[:, 0] / np.linalg.norm(x[:, 0])
        res = float(np.linalg.norm(mv(x) - theta * x))
    except (ArpackError, DeadlineReached):
        return None
    return max(theta, 0.0) + res


def lanczos_bound(matvec, p, n, F, M, trace, augmented, tol=1e-10, seed=0, n_blocks=1,
                  terms=None, deadline=None):
    """Upper estimate of the largest eigenvalue of the p x p operator ``matvec`` (Z~^T Z~)
    by Lanczos (``ritz_estimate``: the Ritz value theta plus its residual) plus the
    rounding margin; the largest eigenvalue with high probability from a random start,
    not with certainty, unlike the Gram path. If ARPACK fails, or ``deadline`` (the run's
    time limit) passes first, the trace (>= the largest eigenvalue of this positive
    semidefinite operator) is used. ``terms``: the length of
    the sums of the operator's first product (default n); its second sums over the
    operator's order ``p``. The margin counts both: each entry of the computed product
    errs by at most (gamma_terms + gamma_p + gamma_terms gamma_p) (W^T W |v|)_i <=
    gamma_{terms + p} (W^T W |v|)_i (Higham 2002, lemma 3.3), so the residual of the
    computed product exceeds the exact one by at most gamma_{terms + p} ||W||_F^2 ||v||,
    and theta + residual + margin bounds the eigenvalue of the exact operator nearest
    theta. Returns (bound, products with the operator, "lanczos" or "trace": which of
    the two the bound is)."""
    count = [0]

    def mv(v):
        count[0] += 1
        return matvec(v)

    est = ritz_estimate(mv, p, tol, seed, deadline)
    margin = _gram_rounding_bound(n, F, M, trace, augmented, p, n_blocks,
                                  (n if terms is None else terms) + p)
    if est is None:
        return trace + margin, count[0], "trace"
    return est + margin, count[0], "lanczos"


def _k_gram_cost(block):
    return gram_cost(block.v["svm"])


def _k_gram(block):
    """The block's (Z_b^T Z_b, Z_b^T e): Gram matrices add over row blocks."""
    return _gram_blocks(block.v["svm"])


def _k_power(block, vs, offset):
    """The block's share of one product with Z~^T Z~ (``_fast.gram_power_matvec``):
    (e^T t, ||t||^2, X_b^T t) for t = X_b vs + offset."""
    data = block.v["svm"]
    buf = block.v.get("power")
    if buf is None:
        buf = block.v["power"] = (np.zeros(data.d), np.zeros(data.n))
    acc, t_buf = buf
    tsum, tsq = _f.gram_power_matvec(data.rows, vs, offset, acc, t_buf)
    return tsum, tsq, acc


def _k_rows_matvec(block, vs, offset):
    """t = X_b vs + offset for the block's rows (the row-block ``matvec`` the Newton
    solvers use, ``tikhonov._fast``)."""
    data = block.v["svm"]
    t = np.empty(data.n)
    _rows_fast.matvec(data.rows, vs, t)
    t += offset
    return t


def _k_rows_rmatvec(block, u):
    """X_b^T u_b for the block's share u_b of an n-vector (``tikhonov._fast.rmatvec``)."""
    data = block.v["svm"]
    if u.shape[0] != data.n:
        raise ValueError(f"the block holds {data.n} rows, its share of u {u.shape[0]}")
    acc = np.empty(data.d)
    _rows_fast.rmatvec(data.rows, np.ascontiguousarray(u), acc)
    return acc


def lipschitz_bound(data, augmented, memory_budget=2.0 * 2**30, tol=1e-10, seed=0,
                    deadline=None):
    """An upper bound of ||Z~||_2^2 (``augmented``) or ||Z||_2^2, for L = mu + this bound.

    L must bound the largest eigenvalue of the Hessian Q = H~ H~^T + mu I from above
    (paper section 2.3; the error bound eps_k = kappa ||y_k - r_{k+1}|| uses it), so the
    estimate is rounded *up* (derivation in docs/svm.md, section 2):

    * when the (d+1) x (d+1) Gram matrix is cheap (``gram_is_cheap``), G = Z~^T Z~ is
      formed in one pass over X (the blocks' Gram matrices ``_gram_blocks`` added in
      block order) and its largest eigenvalue taken by LAPACK (``top_eigenvalue_bound``)
      plus a rounding margin (about 1e-13 relative on the benchmark data);
    * otherwise Lanczos (``lanczos_bound``) on v -> Z~^T (Z~ v), one fused pass over the
      blocks per product (``_fast.gram_power_matvec``), to relative tolerance ``tol``;
      with fewer rows than columns (n < d + 1: wide sparse data) on the n x n operator
      u -> Z~ (Z~^T u) instead, which has the same nonzero eigenvalues and vectors of
      length n (ARPACK's own work per step is proportional to the vectors' length);
      the trace of the operator when the run's time limit (``deadline``) passes first.

    ``data`` is a ``_Blocked`` (the row blocks of a run) or a prepared ``_Data``.
    Returns (bound, info) with info = {"method": "gram", "lanczos" or "trace" (ARPACK
    failed or the deadline passed), "passes": products with Z~^T Z~}.
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
            F = float(np.trace(G[:d, :d])) * (1.0 + 4.0 * (n + 3 + nb) * R.UNIT)
            M = 0.0
        lam = top_eigenvalue_bound(G, n, F, M, trace, augmented, nb)
        return lam, {"method": "gram", "passes": 0}
    d = data.d
    m, s = data.m, data.s
    if n < p:
        def matvec_rows(u):
            # Z~^T u = [s * (X^T u - m e^T u); e^T u], then Z~ w = X (s * w_d) - m . (s * w_d)
            # + w_aug, the blocks' shares of u and of the result in block order
            usum = float(np.sum(u))
            xtu = _in_order(ex.map_each(_k_rows_rmatvec, [(q,) for q in ex.split(u)]))
            vs = s * (s * (xtu - m * usum))
            offset = (usum if augmented else 0.0) - _f.dot(m, vs)
            return np.concatenate(ex.map(_k_rows_matvec, vs, offset))

        lam, passes, method = lanczos_bound(matvec_rows, n, n, F, data.M, trace, augmented,
                                            tol, seed, nb, terms=p, deadline=deadline)
        return lam, {"method": method, "passes": passes}

    def matvec(v):
        vs = s * v[:d]
        offset = (v[d] if augmented else 0.0) - _f.dot(m, vs)
        parts = ex.map(_k_power, vs, offset)
        tsum = float(sum(q[0] for q in parts))
        out = s * (_in_order([q[2] for q in parts]) - m * tsum)
        return np.append(out, tsum) if augmented else out

    lam, passes, method = lanczos_bound(matvec, p, n, F, data.M, trace, augmented, tol, seed,
                                        nb, deadline=deadline)
    return lam, {"method": method, "passes": passes}
