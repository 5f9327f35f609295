"""Independent references for the claims a marginkit ``Result`` makes.

Nothing here imports marginkit: every claim is recomputed from X, y, the kernel's formula
and the run's configuration (as the test case wrote it), in extended precision
(``numpy.longdouble``, 64-bit mantissa on x86: u ~ 5.4e-20, exponent range 1e+-4932, so
|x| ~ 1e300 neither overflows nor a subnormal 1e-310 loses digits). Distance kernels are
computed from explicit differences, never from |a|^2 + |b|^2 - 2ab.

Each ``*_problems`` function returns a list of strings, one per way the claim fails
(empty: the claim holds beyond the reference's own rounding). A claim is judged true or
false, not "close enough": a claim that holds only within the reference's rounding bound
counts as failed.

Claims (paper 000 for the perceptron / von Neumann family, 001 for the SVM family, 002
for iterated Tikhonov):

* separable: G alpha > 0 with G_ij = y_i y_j K_ij / sqrt(K_ii K_jj);
* infeasible: p in the simplex with ||p||_G <= eps (the configuration's eps), G positive
  semi-definite on the data, and no alpha in the simplex with min_i (G alpha)_i > eps
  (linear program, small n);
* certified: every certified point is classified correctly by the returned classifier,
  by w(r) and by the exact optimum of the perturbed dual (solved here by an active-set
  least-squares method and refined; where its rounding is too wide to decide, by the
  duality gap at r, which bounds ||r - r*|| and so places r*_i below the level, where
  the KKT conditions make the point correct), and the reported error bound is >=
  ||r - r*||;
* converged (iterated Tikhonov): the Newton decrement of the returned iterate on the
  exact final proximal subproblem (the earlier proximal steps solved exactly here) is
  <= the configuration's tol.
"""
import math

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

LD = np.longdouble
U_LD = float(np.finfo(LD).eps) / 2
U_64 = float(np.finfo(np.float64).eps) / 2
#: the reference needs an extended precision (x86 long double): elsewhere it would judge
#: claims with float64 rounding, which is what it is meant to check
EXTENDED = np.finfo(LD).eps < 1e-18


# ============================================================================ kernels
def dense_ld(X):
    """X as a dense extended-precision array (float32/float64 values convert exactly)."""
    if sp.issparse(X):
        X = X.toarray()
    return np.asarray(X).astype(LD)


def _gamma(params, d):
    g = (params or {}).get("gamma")
    return LD(1.0) / LD(max(d, 1)) if g is None else LD(g)


def _pairwise(A, B, power):
    """sum_k |a_ik - b_jk|^power from explicit differences, in row blocks."""
    n, m, d = A.shape[0], B.shape[0], A.shape[1]
    out = np.empty((n, m), dtype=LD)
    step = max(1, 2_000_000 // max(m * d, 1))
    for i in range(0, n, step):
        diff = A[i:i + step, None, :] - B[None, :, :]
        out[i:i + step] = np.sum(diff * diff if power == 2 else np.abs(diff), axis=2)
    return out


def _bernoulli(q, t):
    """Bernoulli polynomial B_q(t) for q in {2, 4, 6}."""
    if q == 2:
        return t * t - t + LD(1) / 6
    if q == 4:
        return t ** 4 - 2 * t ** 3 + t * t - LD(1) / 30
    if q == 6:
        return t ** 6 - 3 * t ** 5 + LD(5) / 2 * t ** 4 - LD(1) / 2 * t * t + LD(1) / 42
    raise NotImplementedError(f"reference spline of order {q}")


def spline_factor(q, t, normalization="series"):
    """1 + 2 sum_k cos(2 pi k t) / w_k for even q (w_k = k^q or (2 pi k)^q)."""
    m = q // 2
    c = (-1) ** (m + 1) * _bernoulli(q, t) / LD(math.factorial(q))
    if normalization == "series":
        c = c * (2 * LD(np.pi)) ** q
    return 1 + c


def kernel_block(spec, A, B, fitted=None):
    """K(A, B) in extended precision from the kernel's own formula.

    ``spec`` is ``(name, params)`` as the test case passed it; ``fitted`` the Result's
    kernel object for the approximations (its fitted centres / frequencies define the
    approximated kernel: they are the model, not a claim).
    """
    name, params = spec
    params = dict(params or {})
    if name == "precomputed":
        return dense_ld(A)
    if name == "callable":
        f = params["function"]
        return np.asarray(f(np.asarray(_plain64(A)), np.asarray(_plain64(B))), dtype=np.float64).astype(LD)
    if name in ("nystroem", "rff"):
        PA = feature_map(spec, A, fitted)
        PB = PA if B is A else feature_map(spec, B, fitted)
        return PA @ PB.T
    A, B = dense_ld(A), (None if B is None else dense_ld(B))
    B = A if B is None else B
    d = A.shape[1]
    if name == "linear":
        return A @ B.T
    if name == "rbf":
        return np.exp(-_gamma(params, d) * _pairwise(A, B, 2))
    if name == "laplacian":
        return np.exp(-_gamma(params, d) * _pairwise(A, B, 1))
    if name == "poly":
        deg = int(params.get("degree", 3))
        c0 = LD(params.get("coef0", 1.0))
        return (_gamma(params, d) * (A @ B.T) + c0) ** deg
    if name == "spline":
        q = float(params.get("order", 2.0))
        if q != int(q) or int(q) % 2:
            raise NotImplementedError("reference spline: even integer orders only")
        norm = params.get("normalization", "series")
        K = np.ones((A.shape[0], B.shape[0]), dtype=LD)
        for j in range(d):
            t = np.mod(A[:, j][:, None] - B[:, j][None, :], LD(1))
            K *= spline_factor(int(q), t, norm)
        return K
    raise NotImplementedError(f"no reference for kernel {name!r}")


def _plain64(X):
    if sp.issparse(X):
        X = X.toarray()
    return np.asarray(X, dtype=np.float64)


def feature_map(spec, X, fitted):
    """Phi(X) of a fitted approximation (extended precision): Nystroem's
    K_base(X, C) K_CC^{-1/2} with the fitted C and K_CC^{-1/2}, or random Fourier features
    sqrt(2/m) cos(X W + b) with the fitted W, b."""
    name, params = spec
    params = dict(params or {})
    if name == "nystroem":
        base = params.get("base", "rbf")
        if not isinstance(base, str):
            raise NotImplementedError("reference Nystroem: base given by name only")
        bspec = (base, params.get("base_params") or {})
        C = np.asarray(fitted.components_.toarray() if sp.issparse(fitted.components_)
                       else fitted.components_)
        return kernel_block(bspec, X, C) @ np.asarray(fitted.normalization_, dtype=np.float64).astype(LD)
    if name == "rff":
        W = np.asarray(fitted.frequencies_, dtype=np.float64).astype(LD)
        b = np.asarray(fitted.offsets_, dtype=np.float64).astype(LD)
        m = W.shape[1]
        return np.sqrt(LD(2) / m) * np.cos(dense_ld(X) @ W + b)
    # an exact kernel: a factor F with F F^T = K (its eigendecomposition, negative
    # round-off eigenvalues dropped), the SVM duals on F being the kernel duals
    K = np.asarray(kernel_block(spec, X, X, fitted), dtype=np.float64)
    lam, V = np.linalg.eigh(0.5 * (K + K.T))
    return (V * np.sqrt(np.maximum(lam, 0.0))).astype(LD)


# ============================================================================ labels
def signs(y, classes):
    """+-1 (classes[1] is +1); a label outside classes is a failed claim (None)."""
    y = np.asarray(y).ravel()
    classes = list(np.asarray(classes).tolist())
    if len(classes) != 2:
        return None
    pos = np.array([v == classes[1] for v in y.tolist()])
    neg = np.array([v == classes[0] for v in y.tolist()])
    if not np.all(pos | neg):
        return None
    return np.where(pos, 1.0, -1.0)


# ============================================================================ perceptron family
class GramContext:
    """The normalized signed Gram matrix of (X, y) under a kernel, extended precision."""

    def __init__(self, X, y, classes, spec, fitted=None):
        self.spec = spec
        self.ypm = signs(y, classes)
        if self.ypm is None:
            raise ValueError("labels outside classes")
        K = kernel_block(spec, X, X if spec[0] != "precomputed" else None, fitted) \
            if spec[0] != "precomputed" else dense_ld(X)
        self.K = K
        diag = np.diagonal(K).copy()
        self.bad_diag = not np.all(diag > 0) or not np.all(np.isfinite(diag))
        with np.errstate(all="ignore"):
            s = self.ypm.astype(LD) / np.sqrt(diag)
            self.G = s[:, None] * K * s[None, :]
        self.n = K.shape[0]
        self.finite = bool(np.all(np.isfinite(self.G)))

    def min_eig(self):
        return float(np.linalg.eigvalsh(np.asarray(self.G, dtype=np.float64)).min())

    def dot(self, v):
        return self.G @ np.asarray(v, dtype=np.float64).astype(LD)

    def rounding(self, v):
        """Bound on the extended-precision rounding of G v (entries of G carry a few u
        each, the sum n more)."""
        v = np.abs(np.asarray(v, dtype=np.float64).astype(LD))
        return 16 * (self.n + 16) * LD(U_LD) * (np.abs(self.G) @ v)


def separator_problems(ctx, alpha):
    """G alpha > 0 beyond rounding."""
    alpha = np.asarray(alpha, dtype=np.float64)
    if alpha.shape != (ctx.n,):
        return [f"alpha has shape {alpha.shape}, the data have {ctx.n} points"]
    if not np.all(np.isfinite(alpha)):
        return ["alpha is not finite"]
    if ctx.bad_diag or not ctx.finite:
        return ["the normalized Gram matrix is not finite on these data (K(x, x) <= 0 "
                "or overflow), so no separator can be certified"]
    Ga = ctx.dot(alpha)
    R = ctx.rounding(alpha)
    bad = np.flatnonzero(~(Ga > R))
    if bad.size:
        i = int(bad[0])
        return [f"G alpha > 0 fails at {bad.size} point(s), e.g. point {i}: "
                f"(G alpha)_i = {float(Ga[i]):.6g} (rounding {float(R[i]):.3g})"]
    return []


def min_norm_point(G, iters=2000):
    """min_{p in simplex} p^T G p for a small PSD G (float64): Frank-Wolfe with away
    steps started at the best vertex, then an exact solve on the support; returns
    (value, p)."""
    G = np.asarray(G, dtype=np.float64)
    n = G.shape[0]
    from scipy.optimize import minimize

    p0 = np.full(n, 1.0 / n)
    cons = ({"type": "eq", "fun": lambda p: p.sum() - 1.0, "jac": lambda p: np.ones(n)},)
    res = minimize(lambda p: p @ G @ p, p0, jac=lambda p: 2 * G @ p, bounds=[(0, 1)] * n,
                   constraints=cons, method="SLSQP", options={"ftol": 1e-16, "maxiter": iters})
    p = np.clip(res.x, 0, None)
    p /= p.sum()
    # polish on the support: G_SS p_S = lam 1, sum p_S = 1
    S = np.flatnonzero(p > 1e-10)
    if S.size:
        A = np.zeros((S.size + 1, S.size + 1))
        A[:S.size, :S.size] = G[np.ix_(S, S)]
        A[:S.size, S.size] = -1.0
        A[S.size, :S.size] = 1.0
        rhs = np.zeros(S.size + 1)
        rhs[S.size] = 1.0
        try:
            sol = np.linalg.lstsq(A, rhs, rcond=None)[0]
            q = np.zeros(n)
            q[S] = sol[:S.size]
            if q.min() >= 0 and q @ G @ q <= p @ G @ p:
                p = q / q.sum()
        except np.linalg.LinAlgError:
            pass
    return float(p @ G @ p), p


def max_margin_lp(G):
    """max_{alpha in simplex} min_i (G alpha)_i (HiGHS linear program, float64)."""
    from scipy.optimize import linprog

    G = np.asarray(G, dtype=np.float64)
    n = G.shape[0]
    c = np.zeros(n + 1)
    c[-1] = -1.0
    A_ub = np.hstack([-G, np.ones((n, 1))])
    A_eq = np.zeros((1, n + 1))
    A_eq[0, :n] = 1.0
    res = linprog(c, A_ub=A_ub, b_ub=np.zeros(n), A_eq=A_eq, b_eq=[1.0],
                  bounds=[(0, None)] * n + [(None, None)], method="highs")
    if res.status != 0:
        return None
    return float(-res.fun)


def infeasibility_problems(ctx, p, eps, small=80):
    """p in the simplex, ||p||_G <= eps beyond rounding, G PSD on the data, and (small n)
    no alpha in the simplex achieving a margin above eps."""
    out = []
    p = np.asarray(p, dtype=np.float64)
    if p.shape != (ctx.n,):
        return [f"p has shape {p.shape}, the data have {ctx.n} points"]
    if not np.all(np.isfinite(p)):
        return ["p is not finite"]
    if p.min() < 0 or abs(float(np.sum(p.astype(LD))) - 1.0) > 8 * ctx.n * U_64:
        return [f"p is not in the simplex (min {p.min():.3g}, sum {float(np.sum(p)):.17g})"]
    if ctx.bad_diag or not ctx.finite:
        return ["the normalized Gram matrix is not finite on these data (K(x, x) <= 0 or "
                "overflow): no infeasibility certificate"]
    Gp = ctx.dot(p)
    pGp = float(np.asarray(p, dtype=np.float64).astype(LD) @ Gp)
    R = float(np.abs(p).astype(LD) @ ctx.rounding(p))
    if pGp < -R:
        out.append(f"p^T G p = {pGp:.6g} < 0: the kernel is not positive semi-definite on the "
                   "data, Gordan's theorem in an RKHS does not apply")
    elif not (max(pGp, 0.0) + R <= eps * eps):
        out.append(f"||p||_G = {math.sqrt(max(pGp, 0.0)):.6g} (rounding {math.sqrt(R):.3g}) "
                   f"exceeds eps = {eps:.6g} of the configuration")
    if ctx.n <= 400:
        lam_min = ctx.min_eig()
        if lam_min < -1e-10 * ctx.n:
            out.append(f"G has eigenvalue {lam_min:.6g} < 0: the kernel is not positive "
                       "semi-definite on the data")
        t = max_margin_lp(ctx.G)
        if t is not None and t > eps * (1 + 1e-9) + 1e-12:
            out.append(f"a separator exists: max_alpha min_i (G alpha)_i = {t:.6g} > eps = "
                       f"{eps:.6g} (linear program)")
    if ctx.n <= small and not out:
        val, _ = min_norm_point(ctx.G)
        if val > eps * eps * (1 + 1e-6) + 1e-14:
            out.append(f"min over the simplex of ||p||_G = {math.sqrt(max(val, 0)):.6g} > eps "
                       f"= {eps:.6g} (quadratic program), yet p has {math.sqrt(max(pGp, 0)):.3g}")
    return out


def margin_bound_problems(ctx, bounds, truth_separable, rtol=1e-6):
    """lower <= rho_K <= upper, rho_K = min-norm over the simplex for separable data
    (to relative ``rtol``)."""
    lo, hi = (float(b) for b in bounds)
    out = []
    if math.isnan(lo) or math.isnan(hi):
        return ["margin_bounds contain NaN"]
    if lo > hi * (1 + 1e-9) + 1e-12:
        out.append(f"margin_bounds lower {lo:.6g} > upper {hi:.6g}")
    if truth_separable and ctx.n <= 60 and ctx.finite and not ctx.bad_diag:
        val, _ = min_norm_point(ctx.G)
        rho = math.sqrt(max(val, 0.0))
        if lo > rho * (1 + rtol) + 1e-9:
            out.append(f"margin lower bound {lo:.6g} > rho_K = {rho:.6g}")
        if hi < rho * (1 - rtol) - 1e-9:
            out.append(f"margin upper bound {hi:.6g} < rho_K = {rho:.6g}")
    return out


# ============================================================================ SVM family
def standardize(F, scale):
    """(Z, m, s): the columns of F centred and divided by their population standard
    deviation ("std"), only divided ("scale") or as they are (None); a column whose spread
    is at round-off level of its mean (sd <= 1e-12 |mean|) counts as constant (s = 0)."""
    F = dense_ld(F)
    n, d = F.shape
    if scale is None:
        return F, np.zeros(d, dtype=LD), np.ones(d, dtype=LD)
    mean = F.sum(axis=0) / n
    dev = F - mean
    sd = np.sqrt((dev * dev).sum(axis=0) / n)
    const = ~(sd > LD(1e-12) * np.abs(mean)) | ~(sd > 0)
    s = np.where(const, LD(0), LD(1) / np.where(const, LD(1), sd))
    m = mean if scale == "std" else np.zeros(d, dtype=LD)
    return (F - m) * s, m, s


def _ld(x):
    """x in extended precision (kept as it is when it already is)."""
    x = np.asarray(x)
    return x if x.dtype == LD else np.asarray(x, dtype=np.float64).astype(LD)


def _bvls(A, b, lower, upper):
    from scipy.optimize import lsq_linear

    res = lsq_linear(np.asarray(A, dtype=np.float64), np.asarray(b, dtype=np.float64),
                     bounds=(lower, upper), method="bvls", tol=1e-15, max_iter=10_000)
    x = np.clip(res.x, lower, upper)
    x[res.active_mask < 0] = lower  # snapped: an entry one ulp inside a bound is on it
    x[res.active_mask > 0] = upper
    return x


class SVMOptimum:
    """The exact optimum of the perturbed dual (paper 001, sec. 2.2)

        max -1/2 ||H^T r||^2 + e^T r - mu/2 ||r||^2 over 0 <= r <= gamma  [y^T r = 0],

    H rows y_i (z_i, 1) ("hsvm": fista, dcd) or y_i z_i ("svm": fista_svm, y^T r = 0 with
    multiplier tau), at any C and mu.

    r = sigma rho with sigma = min(gamma, 1/mu) (the size of r*), rho in [0, U],
    U = gamma / sigma. With kappa = 1/(sigma mu) the problem in rho is

        min 1/2 ||H^T rho||^2 + mu/2 ||rho - kappa||^2 [+ tau y^T rho];

    when gamma mu < 1/4 (the box binds far below kappa) it is solved in rho itself,
    otherwise in x = s (kappa - rho), s = sqrt(max(mu, 1)), in which (times s^2 / mu) it
    reads

        min 1/2 ||x||^2 + 1/(2 mu) ||H^T x||^2 - (kappa s / mu) (H H^T 1)^T x - tau' y^T x

    (tau' = tau s / mu) with no cancellation between mu rho and the linear term however
    large mu is (at C = 1e-300, mu = 1e300 the first form loses H entirely in float64),
    and x neither overflows (deviations of rho of order one: x ~ s) nor underflows
    (deviations of order 1/mu: x ~ 1/s). Each form is a
    bounded least-squares problem, solved by BVLS (an exact active-set method); the
    multiplier tau by bracketing and bisection on y^T rho(tau); then Newton steps on the
    free set with extended-precision residuals. ``accuracy`` bounds ||rho - rho_true||
    by the projected gradient over the strong convexity modulus, in extended precision.
    """

    def __init__(self, Z, ypm, gamma, mu, formulation):
        n = Z.shape[0]
        self.n, self.gamma, self.mu, self.formulation = n, float(gamma), float(mu), formulation
        self.sigma = min(self.gamma, 1.0 / self.mu)
        self.upper = self.gamma / self.sigma
        self.kappa = 1.0 / (self.sigma * self.mu)
        y = ypm.astype(LD)
        Zl = Z.astype(LD)
        if formulation == "hsvm":
            Zl = np.hstack([Zl, np.ones((n, 1), dtype=LD)])
        H = y[:, None] * Zl
        self.H, self.y = H, y
        self.shifted = self.gamma * self.mu >= 0.25
        Hf = np.asarray(H, dtype=np.float64)
        self._p = Hf.shape[1]
        self._HH1 = self.H @ (self.H.T @ np.ones(n, dtype=LD))
        self.s = math.sqrt(max(self.mu, 1.0))
        if self.shifted:  # x = s (kappa - rho)
            self._A = np.vstack([Hf.T / math.sqrt(self.mu), np.eye(n)])
            self.lo, self.hi = self.s * (self.kappa - self.upper), self.s * self.kappa
        else:  # x = rho
            self._A = np.vstack([Hf.T, math.sqrt(self.mu) * np.eye(n)])
            self.lo, self.hi = 0.0, self.upper
        self.tau = 0.0
        if formulation == "hsvm":
            x = self._solve_tau(0.0)
        else:
            x, self.tau = self._solve_svm()
        self.x = self._refine(x)
        self.accuracy = self._accuracy(self.x)

    # ---- the variable x and rho
    def rho_of(self, x):
        x = _ld(x)
        return LD(self.kappa) - x / LD(self.s) if self.shifted else x

    def x_of_rho(self, rho):
        rho = _ld(rho)
        return LD(self.s) * (LD(self.kappa) - rho) if self.shifted else rho

    @property
    def rho(self):
        return np.asarray(self.rho_of(self.x), dtype=np.float64)

    @property
    def r(self):
        return np.asarray(self.r_ld, dtype=np.float64)

    @property
    def r_ld(self):
        """r* in extended precision (the refinement keeps its digits)."""
        return self.rho_of(self.x) * LD(self.sigma)

    def _rhs(self, tau):
        yf = np.asarray(self.y, dtype=np.float64)
        if self.shifted:
            b2 = np.asarray(LD(self.kappa * self.s / self.mu) * self._HH1, dtype=np.float64) \
                + tau * yf
            return np.concatenate([np.zeros(self._p), b2])
        lin = self.mu * self.kappa - tau * yf
        return np.concatenate([np.zeros(self._p), lin / math.sqrt(self.mu)])

    def _solve_tau(self, tau):
        return _bvls(self._A, self._rhs(tau), self.lo, self.hi)

    def _y_rho_sign(self, x):
        """sign of y^T rho(x) (as a float; computed without cancellation)."""
        x = _ld(x)
        if self.shifted:  # s y^T rho = s kappa y^T 1 - y^T x
            return float(LD(self.s * self.kappa) * np.sum(self.y) - self.y @ x)
        return float(self.y @ x)

    def _solve_svm(self):
        """The multiplier tau of y^T rho = 0: y^T rho(tau) is non-increasing in tau; a
        bracket found by doubling from [-1, 1], then bisection."""
        def f(tau):
            return self._y_rho_sign(self._solve_tau(tau))

        lo, hi = -1.0, 1.0
        for _ in range(1100):
            if f(lo) > 0:
                break
            lo *= 2.0
        for _ in range(1100):
            if f(hi) <= 0:
                break
            hi *= 2.0
        for _ in range(2200):
            mid = 0.5 * (lo + hi)
            if mid in (lo, hi):
                break
            if f(mid) > 0:
                lo = mid
            else:
                hi = mid
        tau = 0.5 * (lo + hi)
        return self._solve_tau(tau), tau

    def grad(self, x):
        """Gradient of the objective in x (extended precision)."""
        x = _ld(x)
        H, mu, tau = self.H, LD(self.mu), LD(self.tau)
        if self.shifted:
            return x + H @ (H.T @ x) / mu - LD(self.kappa * self.s / self.mu) * self._HH1 \
                - tau * self.y
        return H @ (H.T @ x) + mu * (x - LD(self.kappa)) + tau * self.y

    def projected_gradient(self, x):
        g = self.grad(x)
        x = _ld(x)
        return np.where(x <= LD(self.lo), np.minimum(g, 0),
                        np.where(x >= LD(self.hi), np.maximum(g, 0), g))

    def _accuracy(self, x):
        # ||x - x*|| <= ||p(x)|| / m for any feasible x (strong convexity modulus m: mu in
        # rho, 1 in x = s (kappa - rho)); the classical SVM's multiplier does not change
        # it for x with y^T rho = 0. Returned in rho units.
        pg = self.projected_gradient(x)
        nrm = float(np.sqrt(np.sum(pg * pg)))
        return nrm / self.s if self.shifted else nrm / self.mu

    def _refine(self, x):
        """Newton on the free set: steps solved in float64, residuals and the iterate in
        extended precision (iterative refinement), keeping the best point (and, for the
        classical SVM, its multiplier)."""
        best, best_tau, best_acc = _ld(x), self.tau, self._accuracy(x)
        n = self.n
        if self.shifted:
            Q = np.eye(n, dtype=LD) + self.H @ self.H.T / LD(self.mu)
            ysign = -1.0  # d(y^T rho) / dx = -y / s
        else:
            Q = self.H @ self.H.T + LD(self.mu) * np.eye(n, dtype=LD)
            ysign = 1.0
        lo, hi = LD(self.lo), LD(self.hi)
        cur, tau = _ld(x).copy(), self.tau
        for _ in range(8):
            F = np.flatnonzero((cur > lo) & (cur < hi))
            if F.size == 0:
                break
            self.tau = tau
            g = self.grad(cur)
            QF = np.asarray(Q[np.ix_(F, F)], dtype=np.float64)
            try:
                if self.formulation == "svm":
                    yF = ysign * np.asarray(self.y[F], dtype=np.float64)
                    M = np.zeros((F.size + 1, F.size + 1))
                    M[:F.size, :F.size] = QF
                    M[:F.size, F.size] = yF
                    M[F.size, :F.size] = yF
                    # linearized constraint: grad(c)^T step = -c(x), c ~ y^T rho
                    step = np.linalg.solve(M, np.concatenate(
                        [-np.asarray(g[F], dtype=np.float64), [-self._y_rho_sign(cur)]]))
                    tau = tau + float(step[F.size])
                    step = step[:F.size]
                else:
                    step = np.linalg.solve(QF, -np.asarray(g[F], dtype=np.float64))
            except np.linalg.LinAlgError:
                break
            cur = cur.copy()
            cur[F] = np.clip(cur[F] + step.astype(LD), lo, hi)
            self.tau = tau
            acc = self._accuracy(cur)
            if acc < best_acc:
                best, best_tau, best_acc = cur, tau, acc
        self.tau = best_tau
        return best

    def scaled_margins(self, rho=None):
        """theta_i / sigma = y_i (z_i . w_rho + tau) for rho (default: the optimum)."""
        if rho is None:
            r = self.rho_of(self.x)
        else:
            r = _ld(rho)
        m = self.H @ (self.H.T @ r)
        if self.formulation == "svm":
            m = m + LD(self.multiplier) * self.y
        return m

    @property
    def multiplier(self):
        """tau of the problem in rho (the shifted form solves for tau' = tau s / mu)."""
        return self.tau * self.mu / self.s if self.shifted else self.tau

    def margin_rounding(self):
        """How far theta_i/sigma of the computed optimum may be from the exact one's."""
        Hn = np.sqrt(np.sum(self.H * self.H, axis=1))
        Hnorm = float(np.linalg.norm(np.asarray(self.H, dtype=np.float64), 2))
        # the classical SVM's multiplier is fixed by the free-set KKT equations
        # y_i theta_i = 1/sigma - mu rho_i: allow the same size again
        return 2 * np.asarray(Hn, dtype=np.float64) * Hnorm * self.accuracy * (
            2 if self.formulation == "svm" else 1)


def _gap_term(s, r, gamma, mu):
    """phi(s) - s r + mu r^2 / 2 >= 0 (Fenchel-Young), phi(s) = max_{0<=t<=gamma} s t -
    mu t^2 / 2 the perturbed hinge, written without cancellation in each of phi's three
    pieces; and its derivative in s."""
    gm = gamma * mu
    low = -s * r + mu * r * r / 2
    mid = (s - mu * r) ** 2 / (2 * mu)
    high = (gamma - r) * (s - mu * (gamma + r) / 2)
    val = np.where(s <= 0, low, np.where(s <= gm, mid, high))
    der = np.where(s <= 0, -r, np.where(s <= gm, (s - mu * r) / mu, gamma - r))
    return val, der


def gap_bound(H, ypm, r, gamma, mu, formulation):
    """An upper bound on ||r - r*|| from the duality gap at r itself, in extended precision
    and with its rounding allowed for: no optimum is computed, so it holds where the
    active-set optimum of ``SVMOptimum`` cannot be resolved (margins of 1e114 under a
    float32 polynomial kernel, a box of 1e-12).

    With w = H^T r, theta_i = (H w)_i [+ b y_i] and any intercept b, P(w, b) - D(r) =
    sum_i phi(1 - theta_i) - (1 - theta_i) r_i + mu r_i^2 / 2 for r with y^T r = 0 (the
    ||w||^2 terms are sum_i r_i theta_i), each term >= 0; D is mu-strongly concave, so
    mu/2 ||r - r*||^2 <= D(r*) - D(r) <= P - D. Each theta_i is taken anywhere in its
    rounding interval (the term is convex in it: its worst value is at an end). The
    classical SVM ("svm") first moves r onto y^T r = 0 (scaling the larger class's side
    down, by at most |y^T r| in norm) and minimizes over b by bisection on the gap's
    derivative. Returns +inf for r outside the box.
    """
    r = np.asarray(r, dtype=np.float64)
    if not (np.all(np.isfinite(r)) and r.min() >= 0 and r.max() <= gamma):
        return math.inf
    H = dense_ld(H)
    n, p = H.shape
    y = np.asarray(ypm, dtype=np.float64).astype(LD)
    g, m_ = LD(gamma), LD(mu)
    rl = r.astype(LD)
    moved = LD(0)
    if formulation == "svm":
        e = y @ rl
        pos, neg = rl[y > 0].sum(), rl[y < 0].sum()
        if e > 0 and pos > 0:
            rl = np.where(y > 0, rl * (neg / pos), rl)
        elif e < 0 and neg > 0:
            rl = np.where(y < 0, rl * (pos / neg), rl)
        # |e| for the exact scaling, plus the rounding of the scaled entries and of e
        moved = abs(e) + abs(y @ rl) + LD(4 * (n + 2) * U_LD) * rl.sum()
    k = p + n + 4
    gk = LD(2 * k * U_LD)
    m = H @ (H.T @ rl)
    dm = gk * (np.abs(H) @ (np.abs(H.T) @ rl)) + LD(2 * U_LD) * np.abs(m)

    def gap(b):
        th = m + b * y
        d = dm + LD(2 * U_LD) * (abs(b) + np.abs(th))
        lo, _ = _gap_term(1 - th - d, rl, g, m_)
        hi, _ = _gap_term(1 - th + d, rl, g, m_)
        return np.maximum(np.maximum(lo, hi), 0).sum() * LD(1 + 4 * (n + 4) * U_LD)

    def slope(b):  # d/db of the gap at the computed theta (its minimizer, not its bound)
        _, der = _gap_term(1 - m - b * y, rl, g, m_)
        return -(y * der).sum()

    b = LD(0)
    if formulation == "svm":
        lo, hi = LD(-1), LD(1)
        for _ in range(20000):
            if slope(lo) <= 0 or not np.isfinite(lo):
                break
            lo *= 2
        for _ in range(20000):
            if slope(hi) >= 0 or not np.isfinite(hi):
                break
            hi *= 2
        for _ in range(400):
            mid = (lo + hi) / 2
            if mid in (lo, hi):
                break
            if slope(mid) < 0:
                lo = mid
            else:
                hi = mid
        b = min((lo, hi, (lo + hi) / 2), key=gap)
    bound = moved + np.sqrt(2 * gap(b) / m_)
    return float(bound * LD(1 + 1e-15))


def certified_problems(X, y, classes, spec, fitted, cfg, r, mask, coef, intercept,
                       feature_coef=None, bound=None, t_bar=None):
    """Every certified point classified correctly by the returned classifier, by w(r) and by
    the exact optimum; r feasible; the mask non-empty with more than fraction*n points;
    the reported bound >= ||r - r*||.

    ``cfg``: {"gamma", "mu", "scale", "formulation", "fraction"} from the case's
    configuration. ``coef``/``intercept``: the classifier in the input space (linear
    kernel), or ``feature_coef``/``intercept`` on the approximation's Phi(x).
    """
    out = []
    ypm = signs(y, classes)
    if ypm is None:
        return ["labels outside classes"]
    n = ypm.shape[0]
    r = np.asarray(r, dtype=np.float64)
    mask = np.asarray(mask)
    if mask.shape != (n,) or r.shape != (n,):
        return [f"mask/r have shapes {mask.shape}/{r.shape}, the data have {n} points"]
    mask = mask.astype(bool)
    gamma, mu = cfg["gamma"], cfg["mu"]
    if not np.all(np.isfinite(r)):
        return ["r is not finite"]
    if r.min() < 0 or r.max() > gamma:
        out.append(f"r is outside the box [0, {gamma:.6g}] (min {r.min():.6g}, max {r.max():.6g})")
    count = int(mask.sum())
    if count == 0:
        out.append("no point is certified")
    if count <= cfg.get("fraction", 0.0) * n:
        out.append(f"{count} points certified, not more than fraction*n = "
                   f"{cfg.get('fraction', 0.0) * n:g}")
    name = spec[0]
    F = X if name == "linear" else feature_map(spec, X, fitted)
    Z, m, s = standardize(F, cfg["scale"])
    if not np.all(np.isfinite(Z)):
        return out + ["the standardized features are not finite"]
    opt = SVMOptimum(Z, ypm, gamma, mu, cfg["formulation"])
    rho = r / opt.sigma
    if cfg["formulation"] == "svm" and abs(float(ypm @ (r / gamma))) > 1e-9 * math.sqrt(n):
        out.append(f"y^T r = {float(ypm @ r):.3g} != 0 (classical SVM dual)")
    th_opt = opt.scaled_margins()
    Rm = opt.margin_rounding()
    idx = np.flatnonzero(mask)
    # the certificate's own logic: level - r_i > eps >= ||r - r*|| for every certified point
    level = min(gamma, 1.0 / mu)
    d = r.astype(LD) - opt.r_ld
    dist = float(np.sqrt(np.sum(d * d)))
    slack = opt.accuracy * opt.sigma
    # r*_i < level makes point i correct under the exact optimum (KKT: theta*_i >= 1 -
    # mu r*_i > 0), so a gap bound at r itself that keeps level - r_i above it certifies
    # the point without resolving r* (needed where the optimum's rounding is too wide)
    gb = gap_bound(opt.H, ypm, r, gamma, mu, cfg["formulation"])
    by_gap = {int(i) for i in idx if level - r[i] > gb}
    close = [int(i) for i in idx if not level - r[i] > dist + slack and int(i) not in by_gap]
    if close:
        out.append(f"certified point(s) {close[:8]} have level - r_i <= ||r - r*|| = {dist:.6g}: "
                   "no valid error bound certifies them")
    wrong = [int(i) for i in idx if not th_opt[i] > Rm[i] and int(i) not in by_gap]
    if wrong:
        out.append(f"certified point(s) {wrong[:8]} misclassified by the exact optimum "
                   f"(theta*/sigma = {[float(th_opt[i]) for i in wrong[:3]]}, rounding "
                   f"{float(Rm[wrong[0]]):.2g})")
    # the classifier of r itself (w(r) = H^T r; the classical SVM's intercept is not a
    # function of r, so only the returned classifier is checked there)
    if cfg["formulation"] == "hsvm":
        th_r = opt.scaled_margins(rho)
        wr = [int(i) for i in idx if not th_r[i] > 0]
        if wr:
            out.append(f"certified point(s) {wr[:8]} misclassified by w(r)")
    # the returned classifier: w(r) in the input space, and it classifies every certified
    # point correctly. (On an approximation's Phi the coefficients are not compared: the
    # map's K_CC^{-1/2} amplifies the rounding of K(X, C), so two careful computations of
    # Phi differ far more than w(r) does between them.)
    if coef is not None and name == "linear":
        c = np.asarray(coef, dtype=np.float64)
        w = opt.H.T @ np.asarray(r, dtype=np.float64).astype(LD)
        want = s * w[:Z.shape[1]]  # extended precision: s may exceed float64's range
        if c.shape != want.shape:
            out.append(f"the returned coefficients have shape {c.shape}, w(r) {want.shape}")
        else:
            err = np.abs(c.astype(LD) - want)
            tol = LD(1e-6) * np.abs(want) + LD(1e-9) * np.max(np.abs(want))
            if not np.all(err <= tol):
                out.append("the returned coefficients are not w(r) (s * Z^T (y * r))")
    if name == "linear":
        if coef is None:
            out.append("no coef_ for a linear model")
        else:
            dec = dense_ld(X) @ np.asarray(coef, dtype=np.float64).astype(LD) + LD(intercept)
            Rd = 16 * (F.shape[1] + 4) * LD(U_LD) * (np.abs(dense_ld(X)) @ np.abs(
                np.asarray(coef, dtype=np.float64).astype(LD)) + abs(LD(intercept)))
            wd = [int(i) for i in idx if not ypm[i] * dec[i] > Rd[i]]
            if wd:
                out.append(f"certified point(s) {wd[:8]} misclassified by the returned classifier")
            if not np.all(np.isfinite(np.asarray(coef, dtype=np.float64))):
                out.append("coef_ is not finite")
    elif feature_coef is not None:
        dec = F @ np.asarray(feature_coef, dtype=np.float64).astype(LD) + LD(intercept)
        wd = [int(i) for i in idx if not ypm[i] * dec[i] > 0]
        if wd:
            out.append(f"certified point(s) {wd[:8]} misclassified by the returned classifier")
    if bound is not None:
        d = r.astype(LD) - opt.r_ld
        dist = float(np.sqrt(np.sum(d * d)))
        slack = opt.accuracy * opt.sigma
        if not (dist <= float(bound) * (1 + 1e-9) + slack or gb <= float(bound) * (1 + 1e-9)):
            out.append(f"error bound {float(bound):.6g} < ||r - r*|| = {dist:.6g} "
                       f"(r* to {slack:.2g}; the gap at r bounds it by {gb:.6g})")
    return out


# ============================================================================ iterated Tikhonov
def _loss(loss, z, y):
    """(sum of losses, g, h) in extended precision."""
    z = np.asarray(z).astype(LD)
    y = np.asarray(y, dtype=np.float64).astype(LD)
    if loss == "logistic":
        m = y * z
        # log(1 + exp(-m)) and sigma(-m) without overflow
        val = np.where(m > 0, np.log1p(np.exp(-m)), -m + np.log1p(np.exp(m)))
        sig = np.where(m > 0, np.exp(-m) / (1 + np.exp(-m)), 1 / (1 + np.exp(m)))
        return val.sum(), -y * sig, sig * (1 - sig)
    res = z - y
    return (res * res / 2).sum(), res, np.ones_like(z)


def _newton_parts(Phi, y, loss, lam, theta, b, anchor, fit_intercept):
    """(objective, gradient, Hessian) of 1/n sum loss(y_i, Phi_i theta + b) +
    lam/2 ||theta - anchor||^2 (b unpenalized); gradient in extended precision."""
    n, p = Phi.shape
    z = Phi @ theta.astype(LD) + LD(b)
    val, g, h = _loss(loss, z, y)
    d = theta.astype(LD) - anchor.astype(LD)
    obj = val / n + LD(lam) / 2 * (d @ d)
    grad = Phi.T @ g / n + LD(lam) * d
    hf = np.asarray(h, dtype=np.float64)
    Pf = np.asarray(Phi, dtype=np.float64)
    Hm = Pf.T @ (Pf * hf[:, None]) / n + lam * np.eye(p)
    if fit_intercept:
        grad = np.append(grad, g.sum() / n)
        col = Pf.T @ hf / n
        Hm = np.block([[Hm, col[:, None]], [col[None, :], np.array([[hf.sum() / n]])]])
    return obj, grad, Hm


def newton_decrement(Phi, y, loss, lam, theta, b, anchor, fit_intercept):
    _, grad, Hm = _newton_parts(Phi, y, loss, lam, theta, b, anchor, fit_intercept)
    gf = np.asarray(grad, dtype=np.float64)
    w, V = np.linalg.eigh(Hm)
    if w.min() <= 0:
        return math.inf
    c = V.T @ gf
    return float(np.sqrt(np.sum(c * c / w)))


def _objective(Phi, y, loss, lam, x, anchor, fit_intercept):
    p = Phi.shape[1]
    theta, b = x[:p], (x[p] if fit_intercept else 0.0)
    val = _loss(loss, Phi @ theta.astype(LD) + LD(b), y)[0]
    d = theta.astype(LD) - anchor.astype(LD)
    return val / Phi.shape[0] + LD(lam) / 2 * (d @ d)


def exact_prox_step(Phi, y, loss, lam, anchor, fit_intercept, start=None):
    """argmin of the proximal subproblem anchored at ``anchor`` (damped Newton to a
    decrement of 1e-15 or stagnation)."""
    p = Phi.shape[1]
    x = np.zeros(p + int(fit_intercept)) if start is None else np.array(start, dtype=np.float64)
    for _ in range(100):
        theta, b = x[:p], (x[p] if fit_intercept else 0.0)
        obj, grad, Hm = _newton_parts(Phi, y, loss, lam, theta, b, anchor, fit_intercept)
        gf = np.asarray(grad, dtype=np.float64)
        step = sla.solve(Hm, gf, assume_a="pos")
        dec = math.sqrt(max(float(gf @ step), 0.0))
        if dec <= 1e-15:
            break
        s = 1.0
        while s > 1e-12:
            on = _objective(Phi, y, loss, lam, x - s * step, anchor, fit_intercept)
            if on <= obj - 0.25 * s * dec * dec + 1e-18 * abs(float(obj)):
                break
            s /= 2
        if s <= 1e-12:
            break
        x = x - s * step
    return x


def tikhonov_features(spec, X, fitted, result_fields, n_components=None):
    """(Phi, theta, b) of the returned model in an orthonormal parametrization of its span
    (the Newton decrement is affine invariant, so any parametrization gives the same
    number): the input space (linear), the eigenbasis of K (Gram kernels:
    Phi = U S^{1/2}, theta = S^{1/2} U^T beta), the approximation's Phi (nystroem / rff
    kernels: theta, the result's ``feature_space_coef``), or for ``n_components`` the
    centres' span
    (Phi = K(X, C) K_CC^{-1/2}, theta = K_CC^{1/2} beta). Returns None when the kernel is
    not positive semi-definite on the data."""
    name = spec[0]
    coef, intercept = result_fields["coef_"], result_fields["intercept_"] or 0.0
    if name == "linear" and n_components is None:
        return dense_ld(X), np.asarray(coef, dtype=np.float64), float(intercept)
    if n_components is not None:
        C = result_fields["support_"]
        Kcc = np.asarray(kernel_block(spec, C, C), dtype=np.float64)
        w, V = np.linalg.eigh(0.5 * (Kcc + Kcc.T))
        keep = w > 1e-12 * max(w.max(), 0.0)
        P = (V[:, keep] / np.sqrt(w[keep])).astype(LD)
        Phi = kernel_block(spec, X, C) @ P
        beta = np.asarray(result_fields["support_coef_"], dtype=np.float64)
        theta = np.sqrt(w[keep]) * (V[:, keep].T @ beta)
        return Phi, theta, float(intercept)
    if name in ("nystroem", "rff"):
        Phi = feature_map(spec, X, fitted)
        theta = np.asarray(result_fields["feature_space_coef"], dtype=np.float64)
        return Phi, theta, float(intercept)
    K = kernel_block(spec, X, X if name != "precomputed" else None) if name != "precomputed" \
        else dense_ld(X)
    Kf = np.asarray(K, dtype=np.float64)
    Kf = 0.5 * (Kf + Kf.T)
    w, U = np.linalg.eigh(Kf)
    if w.min() < -1e-9 * max(abs(w).max(), 1e-300) * len(w):
        return None
    keep = w > 1e-13 * w.max()
    Phi = (U[:, keep] * np.sqrt(w[keep])).astype(LD)
    beta = np.asarray(result_fields["dual_coef_"], dtype=np.float64)
    theta = np.sqrt(w[keep]) * (U[:, keep].T @ beta)
    return Phi, theta, 0.0


def final_decrement(spec, X, y, classes, fitted, result_fields, cfg):
    """The returned iterate's Newton decrement on the exact final subproblem (the earlier
    proximal steps solved exactly here); None when the kernel is not PSD on the data, a
    string when the labels or the model are unusable.

    ``cfg``: {"loss", "t", "lam", "tol", "fit_intercept", "n_components"}.
    """
    loss = cfg["loss"]
    n = X.shape[0]
    if loss == "logistic":
        ypm = signs(y, classes)
        if ypm is None:
            return "labels outside classes"
    else:
        ypm = np.asarray(y, dtype=np.float64)
    lam = cfg["lam"] if cfg["lam"] is not None else 1.0 / n
    parts = tikhonov_features(spec, X, fitted, result_fields, cfg.get("n_components"))
    if parts is None:
        return None
    Phi, theta, b = parts
    if not (np.all(np.isfinite(theta)) and math.isfinite(b)):
        return "the returned model is not finite"
    fi = bool(cfg.get("fit_intercept", False))
    anchor = np.zeros(Phi.shape[1])
    x = None
    for _ in range(int(cfg["t"]) - 1):
        x = exact_prox_step(Phi, ypm, loss, lam, anchor, fi, start=x)
        anchor = x[:Phi.shape[1]]
    return newton_decrement(Phi, ypm, loss, lam, theta, b, anchor, fi)


def decrement_problems(spec, X, y, classes, fitted, result_fields, cfg):
    """The returned iterate's Newton decrement on the exact final subproblem <= tol."""
    nu = final_decrement(spec, X, y, classes, fitted, result_fields, cfg)
    if nu is None:
        return ["the kernel is not positive semi-definite on the data: the Newton decrement "
                "of the subproblem is not defined"]
    if isinstance(nu, str):
        return [nu]
    tol = cfg["tol"]
    if not nu <= tol * (1 + 1e-6) + 1e-13:
        return [f"Newton decrement of the exact final subproblem is {nu:.6g} > tol = {tol:.3g}"]
    return []
