"""An independent reference for the perturbed SVM duals (tests only): r* to a residual
far below float64 rounding, by an active-set iteration whose linear systems are solved in
extended precision (x87 long double) through the Woodbury identity.

    minimize 1/2 r^T Q r - e^T r (+ t y^T r)  over 0 <= r <= gamma (and y^T r = 0),
    Q = H H^T + mu I,  H = diag(y) Z~  (Z~ = [Z, e] for H-SVM, Z for the classical SVM),

with Z = (X - e m^T) Diag(s) formed in long double from the float64 statistics (m, s)
the solvers use. Nothing here calls marginkit's kernels.
"""
import numpy as np
import scipy.sparse as sp

L = np.longdouble


def _solve_small(A, b):
    """Gaussian elimination with partial pivoting in long double (numpy's solvers are
    float64 only); A is p x p (p small), b is p x k."""
    A = np.array(A, dtype=L)
    b = np.array(b, dtype=L).reshape(A.shape[0], -1)
    p = A.shape[0]
    for c in range(p):
        piv = c + int(np.argmax(np.abs(A[c:, c])))
        if piv != c:
            A[[c, piv]] = A[[piv, c]]
            b[[c, piv]] = b[[piv, c]]
        for r_ in range(c + 1, p):
            f = A[r_, c] / A[c, c]
            A[r_, c:] -= f * A[c, c:]
            b[r_] -= f * b[c]
    x = np.zeros_like(b)
    for c in range(p - 1, -1, -1):
        x[c] = (b[c] - A[c, c + 1:] @ x[c + 1:]) / A[c, c]
    return x


def design(X, y, m, s, augmented):
    """H = diag(y) Z~ in long double (rows y_i (z_i, 1) or y_i z_i)."""
    Xl = np.asarray(X.toarray() if sp.issparse(X) else X, dtype=L)
    Z = (Xl - np.asarray(m, dtype=L)) * np.asarray(s, dtype=L)
    if augmented:
        Z = np.hstack([Z, np.ones((Z.shape[0], 1), dtype=L)])
    return np.asarray(y, dtype=L)[:, None] * Z


def _apply_inverse(HF, mu, B, refine=4):
    """(mu I + H_F H_F^T)^{-1} B by Woodbury, (B - H_F (mu I + H_F^T H_F)^{-1} H_F^T B) / mu,
    with a few steps of iterative refinement on the residual (Woodbury alone amplifies
    the rounding of the small solve by ||H_F||^2 / mu)."""
    p = HF.shape[1]
    S = mu * np.eye(p, dtype=L) + HF.T @ HF

    def apply(R):
        return (R - HF @ _solve_small(S, HF.T @ R)) / mu

    X = apply(B)
    for _ in range(refine):
        X = X + apply(B - (HF @ (HF.T @ X) + mu * X))
    return X


def reference_dual(X, y, m, s, gamma, mu, augmented=True, equality=False, r0=None,
                   max_rounds=200):
    """(r*, t*) and the final KKT violation. ``r0`` (e.g. a long solver run) seeds the
    active set; the iteration moves every coordinate that violates its KKT sign."""
    y = np.asarray(y, dtype=np.float64)
    H = design(X, y, m, s, augmented)
    n = H.shape[0]
    gam, mu_l = L(gamma), L(mu)
    yl = y.astype(L)
    r = np.zeros(n, dtype=L) if r0 is None else np.asarray(r0, dtype=L)
    tol = L(1e-9) * gam
    free = (r > tol) & (r < gam - tol)
    upper = r >= gam - tol
    t = L(0)
    for _ in range(max_rounds):
        lower = ~free & ~upper
        rB = np.where(upper, gam, L(0))
        rB[free] = 0
        # Q r_B restricted to the free rows: H_F (H^T r_B) + mu r_B (r_B = 0 on F)
        wB = H.T @ rB
        HF = H[free]
        rhs = np.ones(int(free.sum()), dtype=L) - HF @ wB
        if equality:
            yF = yl[free]
            sol = _apply_inverse(HF, mu_l, np.column_stack([rhs, yF]))
            a1, a2 = sol[:, 0], sol[:, 1]
            denom = yF @ a2
            t = (yF @ a1 + yl[~free] @ rB[~free]) / denom if denom != 0 else L(0)
            rF = a1 - t * a2
        else:
            rF = _apply_inverse(HF, mu_l, rhs[:, None])[:, 0] if free.any() else rhs
        r = rB.copy()
        r[free] = rF
        # clip free coordinates that left the box, and fix the signs at the bounds
        G = H @ (H.T @ r) + mu_l * r - 1 + (t * yl if equality else 0)
        out_low = free & (r < 0)
        out_high = free & (r > gam)
        bad_low = lower & (G < 0)
        bad_high = upper & (G > 0)
        if not (out_low.any() or out_high.any() or bad_low.any() or bad_high.any()):
            break
        free = (free & ~out_low & ~out_high) | bad_low | bad_high
        upper = (upper & ~bad_high) | out_high
    G = H @ (H.T @ r) + mu_l * r - 1 + (t * yl if equality else 0)
    p = np.where(r <= 0, np.minimum(G, 0), np.where(r >= gam, np.maximum(G, 0), G))
    viol = float(np.sqrt((p * p).sum()))
    if equality:
        viol = max(viol, float(abs(yl @ r)))
    return r, t, viol


def margins(X, y, m, s, r, t, augmented):
    """theta_i(r) = y_i (z_i . w(r) + t) in long double (t = y^T r for H-SVM)."""
    H = design(X, y, m, s, augmented)
    th = H @ (H.T @ np.asarray(r, dtype=L))
    if not augmented:
        th = th + np.asarray(y, dtype=L) * t
    return th
