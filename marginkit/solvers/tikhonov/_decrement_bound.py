"""The referee's bound on the Newton decrement of a proximal subproblem, from the data alone.

``_link_bounds`` gives, for one link theta^k of a proximal chain, the Newton decrement of
F_k(theta) = L_hat(theta) + lam/2 ||theta - theta^{k-1}||^2 at theta^k recomputed in
float64 and long double, and a proven upper bound on it (docs/tikhonov.md, "The
certificate"): sums over the rows run in long double (``svm._fast.ref_rmatvec`` /
``ref_matvec``) with the rounding bounds of ``marginkit._referee``, and any Newton
direction zeta gives a valid bound (``_newton_direction`` only makes it tight).

The paper's reference is in the package docstring (``marginkit.solvers.tikhonov``).

References
----------
N. J. Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., SIAM, 2002.
"""
import math

import numpy as np
import scipy.linalg as sla

from ...linalg._norms import row_sqnorms
from ...utils._rows import row_block
from ._losses import _loss_derivatives_bounded


def _decrement_referee(blocks, y, theta, b, theta_prev, lam, loss, fit_intercept,
                       enough=None, steer=None, weight=None):
    """An upper bound nu_up of the Newton decrement of L_hat(theta, b) + lam/2
    ||theta - theta_prev||^2 at (theta, b), and the recomputed central value, from the
    rows of Phi (``blocks``, a ``_referee.RowBlocks``). Sums over the rows run in long
    double (``svm._fast.ref_rmatvec`` / ``ref_matvec``); docs/tikhonov.md, "The
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
    from ..svm import _fast as f
    from ... import _referee as R

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
    m = None  # with an intercept, the centre of the coordinates of the bound
    for lo, hi, B in blocks:
        if B.shape[1] != p:
            raise ValueError(f"the feature map has {B.shape[1]} columns, the certificate {p}")
        if fit_intercept and m is None:
            m = _first_block_mean(B)
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
            xi2[lo:hi] = _centred_sqnorms_up(B, m)
        # with an intercept, (Phi - e m^T)^T g: the gradient in the centred coordinates
        f.ref_rmatvec(rows, np.zeros(p, dtype=np.uint8), zero_m if m is None else m, gb,
                      egb + gB * np.abs(gb), aG, magG)
    g_ = R.gamma(n + D + p + 16)
    dth = theta.astype(LD) - theta_prev[:p].astype(LD)
    G = np.empty(q, dtype=LD)
    G[:p] = aG / n + LD(lam) * dth
    EG = np.empty(q)
    EG[:p] = magG * (1 + 2 * g_) / n + gL(4) * lam * np.abs(dth.astype(np.float64)) + R.ETA
    if fit_intercept:
        G[p] = np.sum(g.astype(LD)) / n
        EG[p] = (np.sum(eg) + gL(n + 2) * np.sum(np.abs(g))) * (1 + 2 * g_) / n + R.ETA
    # a lower bound of lambda_min(H): lam without intercept; with it (docs/tikhonov.md),
    # of H' = S^-T H S^-1 in the coordinates S (x, beta) = (x, beta + m . x):
    # min(lam / 2, (1 - e) sum h / n), e = 2 T_h / (2 T_h + lam n),
    # T_h >= sum h_i ||phi_i - m||^2 (G and rho above and below are S^-T G and S^-T rho)
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
        Hs = _weighted_gram(blocks, h, p, m)
        if steer is not None:
            steer["H"] = Hs
    else:
        Hs = steer["H"]
    zeta = _newton_direction(Hs, blocks, h, n, lam, p, fit_intercept, Gd, m)
    best = None
    for _ in range(2):  # the direction, then one refinement step on the residual
        up, central, rho_hat, rest = _decrement_pass2(blocks, h, eh, n, lam, p,
                                                       fit_intercept, G, zeta, lam_lb, gL, D, gB,
                                                       m)
        if best is None or up < best[0]:
            best = (up, central)
        if Hs is None or rest <= 1e-6 * up * up:
            break  # the residual's share of the bound is negligible: no refinement
        zeta = zeta + _newton_direction(Hs, blocks, h, n, lam, p, fit_intercept,
                                        rho_hat.astype(np.float64), m)
    up, central = best
    nu_up = up * (1 + 2 * R.UNIT) + NEG * (1 + g_) / math.sqrt(lam_lb)
    return central, nu_up


def _first_block_mean(B):
    """The column means of a row block (float64; zeros where not finite): the centre m of
    the coordinates in which an intercept's bound is taken. Any m makes the bound valid;
    a centre near the rows keeps T_h, and the magnitudes |phi_i - m| of the sums, small
    when the rows are far from the origin. The first block's (all of X in memory) needs
    no pass of its own."""
    with np.errstate(over="ignore", invalid="ignore"):
        m = np.asarray(B.mean(axis=0, dtype=np.float64)).ravel()
    return np.where(np.isfinite(m), m, 0.0)


def _centred_sqnorms_up(B, m):
    """Upper bounds of ||phi_i - m||^2 for the rows of a block: dense rows centred
    explicitly, 4096 rows at a time (relative rounding gamma_{p+4}); CSR rows as
    ||x||^2 - 2 x . m + ||m||^2, with the rounding of each term and of their
    cancellation (|x . m| <= ||x|| ||m||)."""
    import scipy.sparse as sp
    from ... import _referee as R

    p = m.shape[0]
    g = R.gamma(p + 8)
    if not sp.issparse(B):
        out = np.empty(B.shape[0])
        for lo in range(0, B.shape[0], 4096):
            C = np.asarray(B[lo:lo + 4096], dtype=np.float64) - m
            out[lo:lo + 4096] = np.einsum("ij,ij->i", C, C)
        return out * (1 + g) + R.ETA
    x2 = row_sqnorms(B)
    xm = np.asarray(B @ m).ravel()
    mm = float(m @ m)
    mag = x2 + 2 * np.sqrt(x2 * mm) + mm
    return np.maximum(x2 - 2 * xm + mm, 0.0) + 2 * g * mag + R.ETA


def _weighted_gram(blocks, h, p, m=None):
    """(Phi - e m^T)^T diag(h) (Phi - e m^T) over the row blocks (float64; m = 0 without
    an intercept), or None when p x p does not fit in 256 MiB. It only steers the
    direction zeta (the bound holds for any zeta, and is computed in ``_decrement_pass2``
    from the rows alone), so it is summed by the Newton solver's own kernel
    (``tikhonov._fast.weighted_gram``: BLAS ``dsyrk`` over dense row blocks, one pass over
    the non-zero pairs of CSR rows), not by a careful path. Dense rows are centred 4096 at
    a time; CSR rows are not, their Gram matrix is corrected by the rank-two term."""
    import scipy.sparse as sp
    from . import _fast

    if p * p * 8 > 256 * 2**20:
        return None
    Hs = np.zeros((p, p))
    Hb = np.empty((p, p))
    for lo, hi, B in blocks:
        # h >= 0 (the loss is convex, the weights positive); a NaN h (a NaN model, which
        # the bound rejects anyway) is taken as 0 on dense rows and spreads on CSR ones
        hb = np.ascontiguousarray(h[lo:hi])
        if m is None or sp.issparse(B):
            _fast.weighted_gram(row_block(B), hb, Hb)
            Hs += Hb
            if m is not None:
                c = np.asarray(B.T @ hb).ravel()
                Hs += float(np.sum(hb)) * np.outer(m, m) - np.outer(m, c) - np.outer(c, m)
            continue
        for a in range(0, hi - lo, 4096):
            C = np.asarray(B[a:a + 4096], dtype=np.float64) - m
            _fast.weighted_gram(row_block(C), np.ascontiguousarray(hb[a:a + 4096]), Hb)
            Hs += Hb
    return Hs


def _newton_direction(Hs, blocks, h, n, lam, p, fit_intercept, rhs, m=None):
    """A Newton direction from the (p x p) Hessian of ``_weighted_gram`` (float64
    Cholesky, a least-squares solve when it fails); zeros when the Hessian was too large
    to form. With an intercept the system is that of the coordinates centred at ``m``,
    H' zeta' = rhs (``rhs`` and H' are S^-T G and S^-T H S^-1, well conditioned when the
    rows are far from the origin, where H is not), and the direction is returned in the
    coordinates (theta, b): zeta = S^-1 zeta' = (zeta'_x, zeta'_b - m . zeta'_x)."""
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
        H[p, p] = float(np.sum(h)) / n
        H[:p, p] = H[p, :p] = col / n - (0.0 if m is None else m * H[p, p])
    try:
        z = sla.cho_solve(sla.cho_factor(H, lower=True, check_finite=False), rhs,
                          check_finite=False)
    except (np.linalg.LinAlgError, ValueError):
        z = np.linalg.lstsq(H, rhs, rcond=None)[0]
    if fit_intercept and m is not None:
        z[p] = float(np.longdouble(z[p]) - np.sum(m.astype(np.longdouble) * z[:p]))
    return z


def _decrement_pass2(blocks, h, eh, n, lam, p, fit_intercept, G, zeta, lam_lb, gL, D, gB,
                     m=None):
    """(upper bound of sqrt(G^T H^{-1} G), sqrt(zeta . G), rho_hat, the share of the
    residual and rounding terms in the squared bound) for a direction zeta: zeta^T H zeta,
    rho = G - H zeta and their rounding bounds, one pass over the rows. With an intercept
    ``G`` and the returned rho are S^-T G and S^-T rho in the coordinates centred at ``m``
    (``_decrement_referee``), and zeta^T rho = (S zeta)^T (S^-T rho)."""
    from ..svm import _fast as f
    from ... import _referee as R

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
        f.ref_rmatvec(rows, np.zeros(p, dtype=np.uint8), zero_p if m is None else m, qv,
                      eq + gB * np.abs(qv), aQ, magQ)
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
    zc = zeta.astype(LD)
    ezc = 0.0
    if m is not None:  # S zeta = (zeta_x, zeta_b + m . zeta_x), its last entry within ezc
        mz = np.sum(m.astype(LD) * ztL)
        zc[p] = zc[p] + mz
        ezc = gL(p + 4) * (abs(zb) + float(np.abs(m) @ np.abs(zt)))
    zr = float(np.sum(zc * rho))
    nz, _ = R.scaled_norm(zc.astype(np.float64))
    nE, _ = R.scaled_norm(Erho)
    nr, _ = R.scaled_norm(rho.astype(np.float64))
    # zeta . rho summed in long double: its rounding is at most gL(q + 2) ||zeta|| ||rho||;
    # the rounding of S zeta adds ezc |rho_b|
    if m is not None:
        ezc *= abs(float(rho[p])) + float(Erho[p])
    B2 = zHz + 2 * zr + 2 * (nz * (nE + gL(q + 2) * nr) + ezc) \
        + (nr * (1 + 4 * R.UNIT) + nE) ** 2 / lam_lb
    B2 = B2 * (1 + 8 * R.UNIT) + 4 * R.UNIT * abs(zr)
    central = math.sqrt(max(float(np.sum(zc * G)), 0.0))
    rest = 2 * (nz * (nE + gL(q + 2) * nr) + ezc) + (nr * (1 + 4 * R.UNIT) + nE) ** 2 / lam_lb
    return math.sqrt(max(B2, 0.0)), central, rho, rest


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

