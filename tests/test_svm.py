"""SVM family (paper 001): error bounds, certified points, agreement between solvers,
dense/CSR and float32/float64, the exact projection of fista_svm, LIBLINEAR's rule on the
four-point data set of section 4.1."""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import marginkit as mk
from marginkit._api import resolve_kernel
from marginkit.plugins import Kernel
from marginkit.solvers.svm import _fast as _svm_fast
from marginkit.solvers.svm import _projection
from marginkit.solvers.svm import CertifiedPointsCertificate, scaling_statistics


# ----------------------------------------------------------------------------- helpers
def make_problem(n=60, d=5, seed=0, shift=3.0, noise=0.3):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * (1.0 + np.arange(d)) + shift
    score = X[:, 0] - shift + 0.5 * (X[:, 1] - shift) + noise * rng.standard_normal(n)
    y = np.where(score > 0, 1, -1)
    return X, y


def explicit_Z(X, y, scale, augmented=True):
    """H~ (rows y_i (z_i, 1)) or H (rows y_i z_i), formed densely in float64 (tests only)."""
    X = np.asarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64)
    n, d = X.shape
    if scale == "std":
        m = X.mean(axis=0)
        sd = X.std(axis=0)
        s = np.where(sd > 1e-12, 1.0 / np.where(sd > 0, sd, 1.0), 0.0)
        Z = (X - m) * s
    elif scale is None:
        Z = X
    else:
        raise ValueError(scale)
    if augmented:
        Z = np.hstack([Z, np.ones((n, 1))])
    return y[:, None] * Z


def box_qp_reference(H, mu, gamma, equality_y=None, iters=200_000):
    """r* of max -1/2||H^T r||^2 + e^T r - mu/2||r||^2 over the box (and y^T r = 0) to ~1e-13.

    Plain projected gradient (box) or SciPy's SLSQP (box + equality) with an explicit Q,
    independent of the package's kernels, then an exact solve of the KKT system on the
    identified active set.
    """
    n = H.shape[0]
    Q = H @ H.T + mu * np.eye(n)
    L = np.linalg.eigvalsh(Q)[-1]
    r = np.zeros(n)

    if equality_y is None:
        for _ in range(iters):
            r_new = np.clip(r - (Q @ r - 1.0) / L, 0, gamma)
            if np.max(np.abs(r_new - r)) < 1e-15:
                r = r_new
                break
            r = r_new
    else:
        from scipy.optimize import minimize

        sol = minimize(lambda x: 0.5 * x @ Q @ x - x.sum(), np.zeros(n), jac=lambda x: Q @ x - 1.0,
                       method="SLSQP", bounds=[(0, gamma)] * n, options={"ftol": 1e-15, "maxiter": 1000},
                       constraints=[{"type": "eq", "fun": lambda x: equality_y @ x,
                                     "jac": lambda x: equality_y}])
        r = np.clip(sol.x, 0, gamma)
    # polish: free set F solves Q_FF r_F = 1 - Q_FB r_B (with the equality when present)
    free = (r > 1e-10) & (r < gamma - 1e-10)
    fixed = ~free
    rb = np.where(r >= gamma - 1e-10, gamma, 0.0)
    rhs = 1.0 - Q[np.ix_(free, fixed)] @ rb[fixed]
    if equality_y is None:
        rf = np.linalg.solve(Q[np.ix_(free, free)], rhs)
    else:
        k = int(free.sum())
        K = np.zeros((k + 1, k + 1))
        K[:k, :k] = Q[np.ix_(free, free)]
        K[:k, k] = equality_y[free]
        K[k, :k] = equality_y[free]
        sol = np.linalg.solve(K, np.append(rhs, -equality_y[fixed] @ rb[fixed]))
        rf = sol[:k]
    r_pol = rb.copy()
    r_pol[free] = rf
    if np.all(r_pol >= 0) and np.all(r_pol <= gamma) and np.abs(r_pol - r).max() < 1e-6:
        r = r_pol
    return r, Q


def run_recording(X, y, **kw):
    """Run solve and record (r_k, error_bound_k, n_certified_k) at every iteration."""
    rec = []

    def cb(state):
        rec.append((state.r.copy(), state.error_bound, state.n_certified))
        return False

    res = mk.solve(X, y, callback=cb, **kw)
    return res, rec


class _IdentityMapKernel(Kernel):
    """Private linear kernel (K = X X^T) with an explicit feature map."""

    def __call__(self, A, B=None):
        B = A if B is None else B
        return np.asarray(A @ B.T)

    def feature_map(self, X):
        return X


class _ApproxMapKernel(_IdentityMapKernel):
    """A non-identity feature map: Phi(X) = [X, X**2] (explicit, for the feature_map path)."""

    def __call__(self, A, B=None):
        B = A if B is None else B
        return self.feature_map(A) @ self.feature_map(B).T

    def feature_map(self, X):
        X = np.asarray(X, dtype=np.float64)
        return np.hstack([X, X ** 2])


# ------------------------------------------------------------------------ registration
def test_registered_and_requirements():
    plugins = mk.list_plugins()
    for name in ("fista", "fista_svm", "dcd", "pegasos"):
        assert name in plugins["solver"]
    for name in ("certified_points", "liblinear"):
        assert name in plugins["stopping"]
    X, y = make_problem()
    # pegasos needs an explicit feature map (fista, fista_svm and dcd take exact kernels)
    with pytest.raises(ValueError, match="feature_map"):
        mk.solve(X, y, solver="pegasos", kernel=lambda A, B: np.exp(-((A[:, None] - B[None]) ** 2).sum(-1)))
    with pytest.raises(ValueError, match="projected_gradient_gap"):
        mk.solve(X, y, solver="fista", stop="liblinear")
    with pytest.raises(ValueError, match="C"):
        mk.solve(X, y, solver="fista", C=-1.0)
    with pytest.raises(ValueError, match="scale"):
        mk.solve(X, y, solver="dcd", scale="minmax")


# ---------------------------------------------------------------------- FISTA error bound
@pytest.mark.parametrize("scale", ["std", None])
def test_fista_error_bound_every_iteration(scale):
    # uncentered data (scale=None) is worse conditioned: keep it near the origin there
    X, y = make_problem(n=50, d=4, seed=1, shift=3.0 if scale == "std" else 0.3)
    ypm = np.where(y == 1, 1.0, -1.0)
    n = X.shape[0]
    gamma, mu = 64.0 / n, n / 128.0
    H = explicit_Z(X, ypm, scale)
    r_star, Q = box_qp_reference(H, mu, gamma)
    res, rec = run_recording(X, y, solver="fista", scale=scale, stop=("max_iter", {"n": 600}))
    assert res.status == "max_iter"
    assert len(rec) == 600
    finite = 0
    for r, eps, ncert in rec:
        err = np.linalg.norm(r - r_star)
        if np.isfinite(eps):
            finite += 1
            assert err <= eps * (1 + 1e-9) + 1e-12
            cert = gamma - r > eps
            assert ncert == cert.sum()
            theta = H @ (H.T @ r)
            theta_star = H @ (H.T @ r_star)
            assert np.all(theta[cert] > 1 - mu * gamma)
            assert np.all(theta_star[cert] > 1 - mu * gamma)
    assert finite == 599
    # the bound converges with the iterates (linear rate of strongly convex FISTA)
    assert rec[-1][1] < 1e-4 * rec[1][1]
    assert max(ncert for _, _, ncert in rec) >= 1


def test_fista_certified_stop_and_verify():
    X, y = make_problem(n=80, d=6, seed=2)
    res = mk.solve(X, y, solver="fista")
    assert res.status == "certified"
    assert res.certified_mask.sum() >= 1
    assert res.history["n_certified"][-1] == res.certified_mask.sum()
    assert res.history["n_certified"][:-1].max() == 0
    cert = res.certificate
    assert cert.kind == "certified_points"
    assert cert.value == res.history["error_bound"][-1]
    assert cert.verify(X, y)
    # certified points are correctly classified by the returned model
    pred = res.predict(X)
    assert np.all(pred[res.certified_mask] == np.asarray(y)[res.certified_mask])
    # more certified points with a larger fraction
    res2 = mk.solve(X, y, solver="fista", stop=("certified_points", {"fraction": 0.5}))
    assert res2.certified_mask.sum() > 40 and res2.n_iter >= res.n_iter
    assert res2.certificate.verify(X, y)


def test_certificate_verify_rejects_tampering():
    X, y = make_problem(n=80, d=6, seed=3)
    res = mk.solve(X, y, solver="fista", stop=("certified_points", {"fraction": 0.3}))
    cert = res.certificate
    assert cert.verify(X, y)
    # flipped labels: the recomputed margins and bound no longer support the claim
    assert not cert.verify(X, -np.asarray(y))
    # claiming a point at the upper bound (r_i = gamma) cannot pass gamma - r_i > eps
    bad = CertifiedPointsCertificate(cert.value, cert.mask.copy(), cert.r, cert.gamma, cert.mu,
                                     cert.scale, cert.means, cert.inv_std, cert.formulation,
                                     cert.t_bar, cert.coef, cert.intercept, cert.classes)
    i = int(np.argmax(cert.r))
    bad.mask[i] = True
    assert cert.r[i] == pytest.approx(cert.gamma) or not bad.verify(X, y)
    assert not bad.verify(X, y)
    # a perturbed r breaks the bound or the stored coefficients
    bad2 = CertifiedPointsCertificate(cert.value, cert.mask, cert.r * 0.5, cert.gamma, cert.mu,
                                      cert.scale, cert.means, cert.inv_std, cert.formulation,
                                      cert.t_bar, cert.coef, cert.intercept, cert.classes)
    assert not bad2.verify(X, y)
    # a wrong scaling claim (None instead of std) changes the recomputation
    bad3 = CertifiedPointsCertificate(cert.value, cert.mask, cert.r, cert.gamma, cert.mu, None,
                                      cert.means, cert.inv_std, cert.formulation, cert.t_bar,
                                      cert.coef, cert.intercept, cert.classes)
    assert not bad3.verify(X, y)


@pytest.mark.parametrize("solver", ["dcd", "fista", "fista_svm"])
@pytest.mark.parametrize("sparse", [False, True])
def test_certified_points_with_mu_gamma_above_one(solver, sparse):
    """C = 0.5, mu = 8 (mu gamma = 4): gamma - r_i > eps only gives a margin
    > 1 - mu gamma < 0; the certified level is min(gamma, 1/mu), and every certified
    point is correctly classified by the returned classifier and by r* (the returned
    certificate verifies; before the level it did not, on this problem)."""
    X, y = make_problem(n=60, d=3, seed=0, noise=1.5)
    Xs = sp.csr_matrix(X) if sparse else X
    gamma, mu = 0.5, 8.0
    res = mk.solve(Xs, y, solver=solver, C=gamma, mu=mu, random_state=0)
    cert = res.certificate
    assert res.status == "certified" and cert.verify(Xs, y)
    level = 1.0 / mu
    np.testing.assert_array_equal(res.certified_mask, level - res.dual_coef_ > cert.value)
    assert np.all(res.predict(X)[cert.mask] == y[cert.mask])
    if solver != "fista_svm":
        ypm = np.where(y == 1, 1.0, -1.0)
        H = explicit_Z(X, ypm, "std")
        r_star, _ = box_qp_reference(H, mu, gamma)
        assert np.linalg.norm(res.dual_coef_ - r_star) <= cert.value * (1 + 1e-9)
        assert np.all((H @ (H.T @ r_star))[cert.mask] > 0)
    # the paper's threshold gamma claims more points than the margin bound supports
    old = CertifiedPointsCertificate(cert.value, gamma - cert.r > cert.value, cert.r, gamma, mu,
                                     cert.scale, cert.means, cert.inv_std, cert.formulation,
                                     cert.t_bar, cert.coef, cert.intercept, cert.classes)
    assert old.mask.sum() > cert.mask.sum() and not old.verify(Xs, y)


def test_original_space_coefficients_and_zero_variance_column():
    X, y = make_problem(n=70, d=4, seed=4)
    X = np.hstack([X, np.full((X.shape[0], 1), 7.0)])  # zero-variance column
    ypm = np.where(y == 1, 1.0, -1.0)
    res = mk.solve(X, y, solver="fista", stop=("max_iter", {"n": 50}))
    assert np.all(np.isfinite(res.coef_)) and res.coef_[-1] == 0.0
    H = explicit_Z(X, ypm, "std")  # the constant column becomes 0 after centering
    w_tilde = H.T @ res.dual_coef_
    dec_scaled = (H / ypm[:, None]) @ w_tilde
    np.testing.assert_allclose(res.decision_function(X), dec_scaled, rtol=1e-10, atol=1e-10)
    m, s = scaling_statistics(X, "std")
    assert s[-1] == 0.0 and m[-1] == pytest.approx(7.0)


def _row_blocks(X, cuts):
    """An Executor over the row blocks X[cuts[i]:cuts[i + 1]] (in this process)."""
    from marginkit._executors import Block, Executor

    blocks = [Block(X[lo:hi], None, i, lo) for i, (lo, hi) in enumerate(zip(cuts, cuts[1:]))]
    return Executor(blocks, np.diff(cuts), X.shape[1], X.dtype, sp.issparse(X))


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("scale", ["std", "scale"])
def test_scaling_statistics_over_row_blocks_follow_the_in_memory_rule(sparse, scale):
    # one implementation: three block kernels reduced in block order. Columns: constant
    # (dropped), a spread at round-off level of the mean (dropped: its values lie within
    # 2^-45 of their magnitude, tested exactly, whatever the blocks), a spread just above
    # it (kept), 1e-150 and 1e300 magnitudes (exact power-of-two scaling), a mostly-zero
    # one (implicit zeros of CSR blocks)
    rng = np.random.default_rng(3)
    n = 90
    X = np.column_stack([np.full(n, 3.0), 1.0 + 1e-15 * rng.standard_normal(n),
                         1.0 + 1e-9 * rng.standard_normal(n),
                         1e-150 * rng.standard_normal(n), 1e300 * rng.random(n),
                         np.where(rng.random(n) < 0.1, 5.0, 0.0), rng.standard_normal(n)])
    X = sp.csr_matrix(X) if sparse else X
    m1, s1 = scaling_statistics(X, scale)
    assert s1[0] == 0.0 and s1[1] == 0.0 and s1[2] > 0.0 and np.all(s1[3:] > 0.0)
    for cuts in ([0, n], [0, 40, 41, 90], [0, 13, 29, 60, 77, 90]):
        m2, s2 = scaling_statistics(_row_blocks(X, cuts), scale)
        np.testing.assert_array_equal(s2 == 0.0, s1 == 0.0)
        np.testing.assert_allclose(s2, s1, rtol=1e-13, atol=0)
        np.testing.assert_allclose(m2, m1, rtol=1e-13, atol=0)
        if len(cuts) == 2:  # one block: the in-memory computation itself
            assert s2.tobytes() == s1.tobytes() and m2.tobytes() == m1.tobytes()


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("augmented", [True, False])
def test_lipschitz_bound_over_row_blocks(sparse, augmented):
    # the blocks' Gram matrices add up (or one Lanczos product per map): the same bound
    # to rounding, above the exact top eigenvalue
    from marginkit.solvers import svm

    X, _ = make_problem(n=120, d=7, seed=9)
    X = sp.csr_matrix(np.where(np.abs(X) < 0.5, 0.0, X)) if sparse else X
    one = svm._Blocked.build(_row_blocks(X, [0, 120]), "std")
    many = svm._Blocked.build(_row_blocks(X, [0, 50, 51, 120]), "std")
    Z = (np.asarray(X.todense() if sparse else X) - one.m) * one.s
    if augmented:
        Z = np.column_stack([Z, np.ones(120)])
    top = np.linalg.eigvalsh(Z.T @ Z)[-1]
    for budget in (2.0 * 2**30, 1.0):  # Gram matrix, Lanczos
        lam1, info1 = svm.lipschitz_bound(one, augmented, budget)
        lam2, info2 = svm.lipschitz_bound(many, augmented, budget)
        assert info1["method"] == info2["method"] == ("gram" if budget > 1 else "lanczos")
        assert lam1 >= top and lam2 >= top
        assert lam2 == pytest.approx(lam1, rel=1e-9)



@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("augmented", [True, False])
def test_lipschitz_bound_of_wide_data_runs_on_the_rows(sparse, augmented):
    # fewer rows than columns: Lanczos on the n x n operator Z~ Z~^T (same top eigenvalue
    # as Z~^T Z~), over one or several row blocks; above the exact value and tight
    from marginkit.solvers import svm

    rng = np.random.default_rng(5)
    n, d = 60, 400
    X = rng.standard_normal((n, d)) * (rng.random((n, d)) < 0.1) + 0.25
    X = sp.csr_matrix(X) if sparse else X
    one = svm._Blocked.build(_row_blocks(X, [0, n]), "std")
    many = svm._Blocked.build(_row_blocks(X, [0, 25, 26, n]), "std")
    Z = (np.asarray(X.todense() if sparse else X) - one.m) * one.s
    if augmented:
        Z = np.column_stack([Z, np.ones(n)])
    top = np.linalg.eigvalsh(Z @ Z.T)[-1]
    lam1, info1 = svm.lipschitz_bound(one, augmented, 1.0)
    lam2, info2 = svm.lipschitz_bound(many, augmented, 1.0)
    assert info1["method"] == info2["method"] == "lanczos"
    assert top <= lam1 <= top * (1 + 1e-9) and top <= lam2 <= top * (1 + 1e-9)
    # the same problem solved with the bound from the rows is certified
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    res = mk.solve(X, y, solver="fista" if augmented else "fista_svm", memory_budget=2**20)
    assert res.extra["lipschitz_method"] == "lanczos"
    assert res.extra["L"] - res.extra["mu"] >= top
    # past the run's time limit the estimate takes the trace of Z~^T Z~ (a valid bound)
    lam0, info0 = svm.lipschitz_bound(one, augmented, 1.0, deadline=0.0)
    assert info0 == {"method": "trace", "passes": 0} and lam0 >= np.sum(Z * Z) >= top


@pytest.mark.parametrize("solver", ["fista", "fista_svm", "dcd"])
def test_one_value_box_runs_as_the_full_vector(solver, monkeypatch):
    # an unweighted run's box and levels are views of one number (stride 0, read once by
    # the kernels); the same run on materialized n-vectors ends identically
    from marginkit.solvers.svm import _dcd, _fista, _thresholds

    X, y = mk.datasets.load_libsvm("heart_scale")
    box = _thresholds.run_box(0.5, None, 7)
    assert box.strides == (0,) and _thresholds.certify_levels(box, 4.0).strides == (0,)
    a = mk.solve(X, y, solver=solver, random_state=0)

    def full_box(gamma, sample_weight, n):
        return np.ascontiguousarray(_thresholds.run_box(gamma, sample_weight, n))

    for mod in (_fista, _dcd):
        monkeypatch.setattr(mod, "run_box", full_box)
    b = mk.solve(X, y, solver=solver, random_state=0)
    assert (a.status, a.n_iter) == (b.status, b.n_iter)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.dual_coef_, b.dual_coef_)
    assert a.certificate.verify(X, y) and b.certificate.verify(X, y)

# ------------------------------------------------------------------------------- DCD
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("scale", ["std", None])
@pytest.mark.parametrize("augmented", [True, False])
def test_lipschitz_bound_against_dense_eigvalsh(dtype, sparse, scale, augmented):
    # L = mu + bound must not be below the Hessian's top eigenvalue, and only just above:
    # Gram + LAPACK path and Lanczos path (forced by a tiny memory budget)
    from marginkit.solvers import svm

    X, y = make_problem(n=90, d=6, seed=3, shift=40.0)
    X[np.random.default_rng(3).random(X.shape) < 0.3] = 0.0
    X = X.astype(dtype)
    data = svm._Data(sp.csr_matrix(X) if sparse else X, scale)
    Z = explicit_Z(X, np.ones(len(y)), scale, augmented)
    ref = np.linalg.eigvalsh(Z.T @ Z)[-1]
    for budget, method in ((2.0**31, "gram"), (1.0, "lanczos")):
        lam, info = svm.lipschitz_bound(data, augmented, memory_budget=budget)
        assert info["method"] == method
        assert ref <= lam <= ref * (1 + 1e-10)
    res = mk.solve(sp.csr_matrix(X) if sparse else X, y, solver="fista" if augmented
                   else "fista_svm", scale=scale, max_iter=3)
    assert res.extra["lipschitz_method"] == "gram"
    assert res.extra["L"] - res.extra["mu"] >= ref


@pytest.mark.parametrize("augmented", [True, False])
def test_lipschitz_bound_tight_with_an_offset_column(augmented):
    # dense rows are centred before the Gram product: a column whose mean is 1e6 times its
    # spread must not inflate the rounding margin (it did with the uncentred row norms)
    from marginkit.solvers import svm

    X, y = make_problem(n=400, d=5, seed=4)
    X[:, 1] += 1e6
    data = svm._Data(X, "std")
    Z = explicit_Z(X, np.ones(len(y)), "std", augmented)
    ref = np.linalg.eigvalsh(Z.T @ Z)[-1]
    lam, info = svm.lipschitz_bound(data, augmented)
    assert info["method"] == "gram"
    assert ref <= lam <= ref * (1 + 1e-10)


@pytest.mark.parametrize("shrinking", [False, True])
def test_dcd_bound_every_iteration_and_agreement_with_fista(shrinking):
    X, y = make_problem(n=50, d=4, seed=5)
    ypm = np.where(y == 1, 1.0, -1.0)
    n = X.shape[0]
    gamma, mu = 64.0 / n, n / 128.0
    H = explicit_Z(X, ypm, "std")
    r_star, Q = box_qp_reference(H, mu, gamma)
    res, rec = run_recording(X, y, solver="dcd", shrinking=shrinking, bound_check="always",
                             random_state=0, stop=("max_iter", {"n": 300}))
    for r, eps, ncert in rec:
        # eps = ||p(r)|| / mu, recomputed here from the explicit Q
        G = Q @ r - 1.0
        p = np.where(r <= 0, np.minimum(G, 0), np.where(r >= gamma, np.maximum(G, 0), G))
        assert eps == pytest.approx(np.linalg.norm(p) / mu, rel=1e-9, abs=1e-12)
        assert np.linalg.norm(r - r_star) <= eps * (1 + 1e-9) + 1e-12
        cert = gamma - r > eps
        theta, theta_star = H @ (H.T @ r), H @ (H.T @ r_star)
        assert np.all(theta[cert] > 1 - mu * gamma) and np.all(theta_star[cert] > 1 - mu * gamma)
    fista = mk.solve(X, y, solver="fista", stop=("max_iter", {"n": 400}))
    np.testing.assert_allclose(res.dual_coef_, r_star, atol=1e-8)
    np.testing.assert_allclose(fista.dual_coef_, res.dual_coef_, atol=1e-8)
    np.testing.assert_allclose(fista.coef_, res.coef_, rtol=1e-6, atol=1e-8)


def test_dcd_certified_and_liblinear_rules():
    X, y = make_problem(n=200, d=8, seed=6)
    res = mk.solve(X, y, solver="dcd", random_state=1)
    assert res.status == "certified"
    assert res.certificate.verify(X, y)
    assert res.history["error_bound"][-1] == res.certificate.value
    lib = mk.solve(X, y, solver="dcd", stop="liblinear", random_state=1)
    assert lib.status == "converged"
    assert lib.history["projected_gradient_gap"][-1] <= 0.1
    assert np.all(lib.history["projected_gradient_gap"][:-1] > 0.1)
    assert lib.score(X, y) > 0.8 and res.score(X, y) > 0.8


def test_dcd_same_seed_bitwise_identical():
    X, y = make_problem(n=120, d=6, seed=7)
    a = mk.solve(X, y, solver="dcd", random_state=3, stop=("max_iter", {"n": 7}))
    b = mk.solve(X, y, solver="dcd", random_state=3, stop=("max_iter", {"n": 7}))
    c = mk.solve(X, y, solver="dcd", random_state=4, stop=("max_iter", {"n": 7}))
    assert np.array_equal(a.dual_coef_, b.dual_coef_) and np.array_equal(a.coef_, b.coef_)
    assert not np.array_equal(a.dual_coef_, c.dual_coef_)


@pytest.mark.parametrize("kw", [{}, {"stop": "liblinear"}, {"shrinking": False},
                                {"bound_check": "always"},
                                {"stop": ("certified_points", {"fraction": 0.5})},
                                {"stop": ("max_iter", {"n": 9})}, {"max_iter": 4}])
@pytest.mark.parametrize("sparse", [False, True])
def test_dcd_epochs_per_call_do_not_change_the_run(kw, sparse):
    # without a callback the run loop lets dcd run several epochs per Cython call; a
    # callback forces one epoch per call: same r, history, status and iteration count
    X, y = make_problem(n=150, d=7, seed=11)
    if sparse:
        X = sp.csr_matrix(X)
    a = mk.solve(X, y, solver="dcd", random_state=5, **kw)
    b = mk.solve(X, y, solver="dcd", random_state=5, callback=lambda state: False, **kw)
    assert a.status == b.status and a.n_iter == b.n_iter
    assert np.array_equal(a.dual_coef_, b.dual_coef_)
    assert a.history.keys() == b.history.keys()
    for key in a.history:
        assert np.array_equal(a.history[key], b.history[key]), key
    if a.certificate is not None:
        assert a.certificate.verify(X, y)


def _run_offset(order, active):
    """The offset off in [1, 16] for which ``order`` is the runs [0, off), [off, off + 16),
    ... of the sorted ``active`` coordinates, in some sequence, with each window of 1024
    consecutive places shuffled: every window then holds coordinates of at most 66 runs,
    and each run lies in at most 2 consecutive windows. None when no offset fits (a
    uniform shuffle puts about 1000 runs in a window)."""
    pos = np.searchsorted(active, order)
    window = np.arange(pos.size) // 1024
    for off in range(1, 17):
        run = np.where(pos < off, 0, 1 + (pos - off) // 16)
        pairs = np.unique(np.stack([window, run]), axis=1)
        per_window = np.bincount(pairs[0])
        wins = np.split(pairs[0][np.argsort(pairs[1], kind="stable")],
                        np.cumsum(np.bincount(pairs[1]))[:-1])
        if per_window.max() <= 66 and all(w.size <= 2 and (w.size < 2 or w[1] - w[0] == 1)
                                         for w in wins if w.size):
            return off
    return None


@pytest.mark.parametrize("n,k", [(1000, 1000), (131072, 40000), (131073, 131073),
                                 (200000, 140001), (200000, 1500), (300000, 17)])
def test_dcd_epoch_order_permutes_the_active_set_in_runs_beyond_131072_points(n, k):
    """dcd's epoch order (``_fast.epoch_order``, the call ``dcd_epochs`` makes): a
    permutation of the active coordinates index[:k]; up to 131,072 points a uniform
    shuffle, beyond it runs of 16 coordinates adjacent among the active ones (the first
    run from a random offset) in random order, each window of 1024 places shuffled; the
    inactive ones index[k:] stay as they were; the same stream gives the same order, the
    next epoch another."""
    rng = np.random.default_rng(n + k)
    idx = rng.permutation(n).astype(np.int64)
    active, rest = np.sort(idx[:k]), idx[k:].copy()
    state = np.array([7], dtype=np.uint64)
    again = idx.copy()
    _svm_fast.epoch_order(idx, k, state)
    _svm_fast.epoch_order(again, k, np.array([7], dtype=np.uint64))
    assert np.array_equal(idx, again)
    assert np.array_equal(np.sort(idx[:k]), active) and np.array_equal(idx[k:], rest)
    if n <= 131072:
        if k > 4096:  # (in one window a uniform shuffle looks like runs)
            assert _run_offset(idx[:k], active) is None
        return
    assert _run_offset(idx[:k], active) is not None
    if k > 5000:
        # the runs are in random order, not in memory order
        pos = np.searchsorted(active, idx[:k])
        assert np.mean(np.diff(pos) > 0) < 0.6
    nxt = idx.copy()
    _svm_fast.epoch_order(nxt, k, state)
    assert not np.array_equal(nxt, idx) and _run_offset(nxt[:k], active) is not None
    with pytest.raises(ValueError, match="distinct coordinates"):
        _svm_fast.epoch_order(np.zeros(n, dtype=np.int64), k, state)


def test_dcd_beyond_131072_points_certifies_the_classifier_of_fista():
    """On more points than the order's runs start at, dcd certifies, its certificate
    verifies, and its classifier is fista's on the same problem."""
    X, y = mk.datasets.make_clusters(140000, 5, random_state=3)
    for sparse in (False, True):
        Xs = sp.csr_matrix(X) if sparse else X
        res = mk.solve(Xs, y, solver="dcd", random_state=1)
        assert res.status == "certified" and res.certificate.verify(Xs, y)
        if not sparse:
            ref = mk.solve(X, y, solver="fista")
            assert ref.status == "certified"
            agree = np.mean(np.sign(res.decision_function(X)) == np.sign(ref.decision_function(X)))
            assert agree > 0.999
            # points certified by either run are classified alike by both
            both = res.certified_mask | ref.certified_mask
            assert np.array_equal(res.predict(X)[both], ref.predict(X)[both])


def _rows_of_every_length(seed, n=50, d=45):
    # row i holds i mod (d + 1) entries (rows 0 and 46 none), the columns drawn at random
    rng = np.random.default_rng(seed)
    y = np.where(rng.uniform(size=n) < 0.5, -1.0, 1.0)
    X = np.zeros((n, d))
    for i in range(n):
        k = i % (d + 1)
        X[i, rng.choice(d, size=k, replace=False)] = rng.standard_normal(k) + 0.8 * y[i]
    return X, y


@pytest.mark.parametrize("seed", [4, 5, 8])
@pytest.mark.parametrize("sparse", [False, True])
def test_dcd_certifies_when_a_column_has_only_points_at_zero(seed, sparse):
    # with scale=None a column whose rows are all at r_i = 0 has w(r)_j = 0 and |X|^T r = 0,
    # so the referee takes its coefficient exactly (and one whose |X|^T r is small, nearly
    # so); the epochs' incremental w still held the rounding of the updates of its rows
    # when their r_i were larger (5e-18 on seed 4), so every claim was refuted ("the
    # stored coefficients are not s * w_bar(r)") and the run went to max_iter without a
    # certificate while the solver certified most points from the sixth epoch on
    X, y = _rows_of_every_length(seed)
    if sparse:
        X = sp.csr_matrix(X)
    res = mk.solve(X, y, solver="dcd", random_state=0, scale=None, max_iter=60)
    assert res.status == "certified" and res.n_iter < 20
    assert res.certificate.verify(X, y)
    # the returned model is w(r) to the rounding of the current magnitudes (exactly 0 on
    # a column without a point of positive r_i)
    ypm = np.where(y == res.classes_[1], 1.0, -1.0)
    w, mag = X.T @ (ypm * res.dual_coef_), abs(X).T @ res.dual_coef_
    assert np.all(np.abs(res.coef_ - w) <= 1e-12 * mag)


# ------------------------------------------------------------------------- fista_svm
def test_projection_box_hyperplane_kkt():
    rng = np.random.default_rng(8)
    for trial in range(20):
        n = int(rng.integers(2, 300))
        y = np.where(rng.random(n) < 0.3, 1.0, -1.0)
        y[0], y[1] = 1.0, -1.0
        v = rng.standard_normal(n) * rng.choice([0.01, 1.0, 50.0])
        gamma = float(rng.choice([0.05, 1.0, 10.0]))
        r = np.zeros(n)
        lam = _projection.project_box_hyperplane(v, y, np.full(n, gamma), r)
        assert abs(y @ r) <= 1e-12 * max(1.0, gamma * n)
        assert r.min() >= 0 and r.max() <= gamma
        np.testing.assert_allclose(r, np.clip(v - lam * y, 0, gamma), atol=1e-15)
        # KKT: v - r = lam y + nu with nu in the normal cone of the box at r
        nu = v - r - lam * y
        inner = (r > 0) & (r < gamma)
        assert np.all(np.abs(nu[inner]) <= 1e-12 * max(1.0, np.abs(v).max()))
        assert np.all(nu[r == 0] <= 1e-12) and np.all(nu[r == gamma] >= -1e-12)
        # optimality against random feasible points: <v - r, x - r> <= 0
        for _ in range(5):
            x = np.zeros(n)
            _projection.project_box_hyperplane(rng.standard_normal(n) * 5, y, np.full(n, gamma), x)
            assert (v - r) @ (x - r) <= 1e-10 * max(1.0, np.abs(v).max() * gamma * n)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_fista_svm_gradient_pass_evaluates_the_projection_search(sparse, weighted):
    # the gradient pass returns (phi, n_free) at the warm start: the same numbers a
    # separate phi_slope pass over its output gives, on any number of row blocks
    from marginkit.utils._rows import row_block
    rng = np.random.default_rng(31)
    n, d = 37, 5
    X = rng.standard_normal((n, d))
    X[rng.random((n, d)) < 0.4] = 0.0
    rows = row_block(sp.csr_matrix(X) if sparse else X)
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    r, r_prev = rng.random(n) * 0.1, rng.random(n) * 0.1
    a, a_prev = rng.standard_normal(d), rng.standard_normal(d)
    sc, m, c = np.ones(d), np.zeros(d), np.zeros(n)
    box = rng.random(n) * 0.2 if weighted else np.broadcast_to(0.1, (n,))
    for ns in (1, 3):
        v, yk, vproj = np.zeros(d), np.zeros(n), np.zeros(n)
        parts = np.zeros((ns, 4))
        for lam0 in (0.0, 0.03, -0.2):
            ph, nf = _svm_fast.fista_svm_gradient(rows, y, r_prev, r, a_prev, a, 0.1, 0.2, sc,
                                                  m, 0.0, c, 0.5, 3.0, 0.25, v, yk, vproj,
                                                  lam0, box, parts)
            want_ph, want_nf = _svm_fast.phi_slope(vproj, y, box, lam0)
            assert nf == want_nf
            assert ph == pytest.approx(want_ph, rel=1e-12, abs=1e-15)
    with pytest.raises(ValueError, match="box"):
        _svm_fast.fista_svm_gradient(rows, y, r_prev, r, a_prev, a, 0.1, 0.2, sc, m, 0.0, c,
                                     0.5, 3.0, 0.25, v, yk, vproj, 0.0, box[:-1], parts)
    # the search started from that evaluation ends where one starting from scratch does
    first = _svm_fast.phi_slope(vproj, y, box, 0.0)
    run = [lambda t: _svm_fast.phi_slope(vproj, y, box, t),
           lambda t, up: _svm_fast.next_breakpoint(vproj, y, box, t, up)]
    assert _projection.multiplier(*run, 0.0, 0.2, first) == pytest.approx(
        _projection.multiplier(*run, 0.0, 0.2), rel=1e-12, abs=1e-15)


def test_fista_svm_converges_to_classical_svm_dual():
    X, y = make_problem(n=50, d=4, seed=9)
    ypm = np.where(y == 1, 1.0, -1.0)
    n = X.shape[0]
    gamma, mu = 64.0 / n, n / 128.0
    H = explicit_Z(X, ypm, "std", augmented=False)
    r_star, Q = box_qp_reference(H, mu, gamma, equality_y=ypm)
    res, rec = run_recording(X, y, solver="fista_svm", stop=("max_iter", {"n": 300}))
    for r, eps, ncert in rec[1:]:
        assert np.linalg.norm(r - r_star) <= eps * (1 + 1e-9) + 1e-12
    np.testing.assert_allclose(res.dual_coef_, r_star, atol=1e-8)
    # the intercept t = L lambda satisfies the KKT system: p(Qr - e + t y) = 0 at r*
    t = res.extra["t_bar"]
    G = Q @ res.dual_coef_ - 1.0 + t * ypm
    r = res.dual_coef_
    p = np.where(r <= 0, np.minimum(G, 0), np.where(r >= gamma, np.maximum(G, 0), G))
    assert np.linalg.norm(p) < 1e-7
    cert_res = mk.solve(X, y, solver="fista_svm")
    assert cert_res.status == "certified" and cert_res.certificate.verify(X, y)


# ------------------------------------------------------------- dense / CSR, float32 / 64
@pytest.mark.parametrize("solver", ["fista", "fista_svm", "dcd", "pegasos"])
def test_dense_csr_float32_agree(solver):
    rng = np.random.default_rng(10)
    X, y = make_problem(n=150, d=12, seed=10)
    X[rng.random(X.shape) < 0.5] = 0.0
    kw = dict(solver=solver, random_state=5, stop=("max_iter", {"n": 30}))
    if solver == "pegasos":
        kw.pop("stop")
        kw["epochs"] = 5
    dense = mk.solve(X, y, **kw)
    csr = mk.solve(sp.csr_matrix(X), y, **kw)
    csr64 = sp.csr_matrix(X)
    csr64 = sp.csr_matrix((csr64.data, csr64.indices.astype(np.int64), csr64.indptr.astype(np.int64)),
                          shape=X.shape)
    csr_i64 = mk.solve(csr64, y, **kw)
    f32 = mk.solve(X.astype(np.float32), y, **kw)
    np.testing.assert_allclose(csr.coef_, dense.coef_, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(csr_i64.coef_, dense.coef_, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(f32.coef_, dense.coef_, rtol=2e-3, atol=2e-4)
    assert csr.intercept_ == pytest.approx(dense.intercept_, rel=1e-9, abs=1e-10)
    assert f32.intercept_ == pytest.approx(dense.intercept_, rel=2e-3, abs=2e-4)
    Xf = np.asfortranarray(X)
    fort = mk.solve(Xf, y, **kw)
    np.testing.assert_allclose(fort.coef_, dense.coef_, rtol=1e-12, atol=1e-13)


def test_inputs_not_modified_and_feature_map_kernel():
    X, y = make_problem(n=60, d=3, seed=11)
    Xs = sp.csr_matrix(X)
    before = (X.copy(), Xs.data.copy())
    res = mk.solve(Xs, y, solver="fista", kernel=_IdentityMapKernel())
    assert np.array_equal(X, before[0]) and np.array_equal(Xs.data, before[1])
    assert res.coef_ is not None and res.certificate.verify(Xs, y)
    approx = mk.solve(X, y, solver="fista", kernel=_ApproxMapKernel(), scale=None)
    assert approx.coef_ is None
    assert approx.score(X, y) > 0.8
    # scale="std" standardizes the columns of Phi (no longer refused)
    approx_std = mk.solve(X, y, solver="fista", kernel=_ApproxMapKernel())
    assert approx_std.coef_ is None and approx_std.certificate.verify(X, y)


# ------------------------------------------------------- kernel approximations (Phi)
def _approx_data(seed=13):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((160, 4))
    y = np.where((X ** 2).sum(axis=1) > 3.4, 1, -1)  # not linearly separable in X
    Xnew = rng.standard_normal((40, 4))
    return X, y, Xnew


@pytest.mark.parametrize("kernel", ["nystroem", "rff"])
@pytest.mark.parametrize("solver", ["fista", "fista_svm", "dcd", "pegasos"])
@pytest.mark.parametrize("scale", [None, "std"])
def test_kernel_approximation_runs_on_feature_map(kernel, solver, scale):
    """The solvers work on Phi = feature_map(X): the same run as the linear kernel on the
    explicit matrix Phi, the certificate verifies from (X, y) through the kernel's fitted
    map, and predictions on new data apply that same map."""
    X, y, Xnew = _approx_data()
    kw = dict(solver=solver, scale=scale, random_state=3)
    if solver == "pegasos":
        kw["epochs"] = 10
    else:
        kw["stop"] = ("certified_points", {"fraction": 0.2})
    res = mk.solve(X, y, kernel=kernel,
                   kernel_params={"n_components": 40, "random_state": 0}, **kw)
    assert res.coef_ is None
    Phi = res.kernel.feature_map(X)
    Phi_new = res.kernel.feature_map(Xnew)
    ref = mk.solve(Phi, y, **kw)  # linear kernel on the explicit features
    f = res.extra["feature_space_coef"]
    np.testing.assert_allclose(f, ref.coef_, rtol=1e-9, atol=1e-12)
    assert res.intercept_ == pytest.approx(ref.intercept_, rel=1e-9, abs=1e-12)
    np.testing.assert_allclose(res.decision_function(Xnew), Phi_new @ ref.coef_ + ref.intercept_,
                               rtol=1e-9, atol=1e-9)
    assert res.score(X, y) > 0.8
    if solver == "pegasos":
        return
    assert res.status == "certified"
    cert = res.certificate
    assert cert.verify(X, y) and ref.certificate.verify(Phi, y)
    if scale is None:
        # w = Phi^T (y * r), independently: decision = Phi_new w + t
        ypm = np.where(y == 1, 1.0, -1.0)
        t = ref.extra.get("t_bar", ref.intercept_)
        np.testing.assert_allclose(res.decision_function(Xnew),
                                   Phi_new @ (Phi.T @ (ypm * res.dual_coef_)) + t,
                                   rtol=1e-8, atol=1e-8)
    # the claim is about this fitted map: raw X, or another draw of the map, fail it
    for other in (None, resolve_kernel(kernel, {"n_components": 40, "random_state": 1})):
        bad = CertifiedPointsCertificate(cert.value, cert.mask, cert.r, cert.gamma, cert.mu,
                                         cert.scale, cert.means, cert.inv_std, cert.formulation,
                                         cert.t_bar, cert.coef, cert.intercept, cert.classes,
                                         kernel=other)
        assert not bad.verify(X, y)


# ----------------------------------------------------------------------------- Pegasos
def test_pegasos_epochs_seed_and_accuracy():
    X, y = make_problem(n=300, d=5, seed=12)
    a = mk.solve(X, y, solver="pegasos", epochs=20, random_state=0)
    b = mk.solve(X, y, solver="pegasos", epochs=20, random_state=0)
    assert a.n_iter == 20 and a.status == "max_iter"
    assert np.array_equal(a.coef_, b.coef_) and a.intercept_ == b.intercept_
    assert a.score(X, y) > 0.85
    # the iterate stays in the ball of radius 1/sqrt(lam) (scaled space)
    m, s = scaling_statistics(X, "std")
    w_bar = np.divide(a.coef_, s, out=np.zeros_like(a.coef_), where=s > 0)
    assert np.linalg.norm(w_bar) <= 8.0 * (1 + 1e-9)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("sparse", [False, True])
def test_pegasos_extreme_and_mixed_magnitudes_same_classifier(dtype, sparse):
    """scale="std": columns of magnitude 1e-301 or of mixed magnitudes 1e-301 .. 1e298
    (exact powers of two, so the standardized problem is the same to the bit) give the
    classifier of the data at magnitude 1, finite, and dense and CSR alike. The kernel
    used to keep s^2 * a, which for s ~ 1e301 and a ~ ||w|| / alpha overflowed (coef_
    inf/NaN, and NaN margins from 0 * inf on dense rows where CSR skips the zeros)."""
    X, y = make_problem(n=257, d=5, seed=12)
    X[np.random.default_rng(12).random(X.shape) < 0.3] = 0.0
    # float32: the same exponents scaled into float32's range
    e = np.array([-1000, -500, 0, 500, 990]) if dtype == np.float64 \
        else np.array([-100, -50, 0, 50, 100])
    kw = dict(solver="pegasos", random_state=0, epochs=200)
    base = mk.solve(X.astype(dtype), y, **kw)
    for mags in (np.full(5, 2.0 ** e[0]), 2.0 ** e):
        Xs = (X * mags).astype(dtype)
        res = mk.solve(sp.csr_matrix(Xs) if sparse else Xs, y, **kw)
        assert np.all(np.isfinite(res.coef_)) and np.isfinite(res.intercept_)
        np.testing.assert_allclose(res.coef_ * mags, base.coef_, rtol=1e-12, atol=0)
        assert res.intercept_ == pytest.approx(base.intercept_, rel=1e-12, abs=1e-14)



@pytest.mark.parametrize("d", [2, 3, 4, 5, 6, 7, 8, 9])
def test_pegasos_dense_and_csr_agree_at_every_row_length(d):
    """The margins' four partial sums (``row_scaled_dot``) over dense rows of d entries
    and over CSR rows of 0..d stored entries, d = 2..9 (every remainder of the four-way split):
    the same run to rounding, and the margin of each point matches numpy's."""
    X, y = make_problem(n=120, d=d, seed=d)
    X[np.random.default_rng(d).random(X.shape) < 0.4] = 0.0
    kw = dict(solver="pegasos", random_state=0, epochs=30)
    dense, csr = mk.solve(X, y, **kw), mk.solve(sp.csr_matrix(X), y, **kw)
    np.testing.assert_allclose(csr.coef_, dense.coef_, rtol=1e-10, atol=1e-12)
    assert csr.intercept_ == pytest.approx(dense.intercept_, rel=1e-10, abs=1e-12)
    np.testing.assert_allclose(dense.decision_function(X), X @ dense.coef_ + dense.intercept_,
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("solver", ["dcd", "fista", "fista_svm", "pegasos"])
def test_std_centring_overflow_names_a_fix_that_works(solver):
    """A column of magnitude 1e-291 whose mean is 1e9 of its spreads: with scale="std"
    the implicit centring's m / std^2 overflows float64. The refusal must not advise the
    scale="std" already in use, and each fix it names must run."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 3))
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    X[:, 1] = 1e-300 * (1e9 + rng.standard_normal(200))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy overflow warning on the way
        with pytest.raises(ValueError, match=r"scale='std': the implicit centring") as err:
            mk.solve(X, y, solver=solver)
    assert "use scale='std'" not in str(err.value)
    for fix in (dict(X=X - X.mean(axis=0)), dict(X=X * 1e290), dict(X=X, scale=None)):
        kw = dict(fix)
        res = mk.solve(kw.pop("X"), y, solver=solver, random_state=0, **kw)
        assert np.all(np.isfinite(res.coef_))

def test_pegasos_refuses_out_of_range_lam_weights_and_spread():
    """Inputs whose numbers leave float64's range are refused naming the fix (they gave
    NaN coef_ at lam = 1e-300, ||w_bar|| = 1e71 / sqrt(lam) far outside the ball at
    lam = 1e-150, the same with sample weights 1e100, and coef_ inf for a column of
    spread 1e-308); lam = 1e-40 still runs, inside the ball."""
    X, y = make_problem(n=257, d=5, seed=12)
    kw = dict(solver="pegasos", random_state=0, epochs=5)
    for lam in (1e-300, 1e-150):
        with pytest.raises(ValueError, match="raise lam"):
            mk.solve(X, y, lam=lam, **kw)
    # an estimator user sets C, not lam: the refusal names both
    from marginkit.sklearn import SVMClassifier
    with pytest.raises(ValueError, match=r"lam = 1/\(C n\): lower C"):
        SVMClassifier(solver="pegasos", C=1e60).fit(X, y)
    with pytest.raises(ValueError, match="sample weights down"):
        mk.solve(X, y, sample_weight=np.full(len(y), 1e100), **kw)
    Xt = X.copy()
    Xt[:, 0] = 1e-308 * (Xt[:, 0] - 3.0)
    with pytest.raises(ValueError, match="rescale X"):
        mk.solve(Xt, y, **kw)
    res = mk.solve(X, y, lam=1e-40, **kw)
    m, s = scaling_statistics(X, "std")
    assert np.all(np.isfinite(res.coef_)) and np.isfinite(res.intercept_)
    assert np.linalg.norm(res.coef_ / s) <= 1e20 * (1 + 1e-9)

# ------------------------------------------------------- four-point data set (Table 5)
def _four_point_runs(d, seeds):
    X, y = mk.datasets.make_four_point(d, sparse=True)
    lib_fail = cert_fail = 0
    for s in seeds:
        lib = mk.solve(X, y, solver="dcd", scale=None, stop="liblinear", random_state=s)
        if lib.status == "converged" and lib.decision_function(X[:1])[0] <= 0:
            lib_fail += 1
        cert = mk.solve(X, y, solver="dcd", scale=None, random_state=s)
        assert cert.status == "certified"
        assert cert.certificate.verify(X, y)
        if cert.decision_function(X[:1])[0] <= 0:
            cert_fail += 1
    return lib_fail / len(seeds), cert_fail


def test_four_point_generator():
    X, y = mk.datasets.make_four_point(1100)
    assert X.shape == (4, 1100) and list(y) == [1, -1, -1, -1]
    assert np.linalg.norm(X[0]) ** 2 + 1 == pytest.approx(1.5 * 1100)
    Xs, _ = mk.datasets.make_four_point(1100, sparse=True, dtype=np.float32)
    assert sp.issparse(Xs) and Xs.dtype == np.float32 and Xs.nnz == 8
    with pytest.raises(ValueError, match="d="):
        mk.datasets.make_four_point(2)
    # the optimum (FISTA to convergence) classifies c_1 correctly
    opt = mk.solve(X, y, solver="fista", scale=None, stop=("max_iter", {"n": 5000}))
    assert opt.decision_function(X[:1])[0] > 0.5
    fista = mk.solve(X, y, solver="fista", scale=None)
    assert fista.status == "certified" and fista.score(X, y) == 1.0


@pytest.mark.parametrize("d", [500, 1100])
def test_four_point_liblinear_rule_fails_certified_never(d):
    rate, cert_fail = _four_point_runs(d, range(1, 1001))
    assert cert_fail == 0
    if d >= 1100:
        assert rate > 0.3  # paper, Table 5: 34.5 % at d = 1100
    else:
        assert rate < 0.01  # paper: 0 % at d = 500


@pytest.mark.slow
@pytest.mark.parametrize("d", [2000, 5000])
def test_four_point_table5_large_d(d):
    rate, cert_fail = _four_point_runs(d, range(1, 1001))
    assert cert_fail == 0 and rate > 0.3


# ------------------------------------------------------------------ memory (issue 6)
@pytest.mark.parametrize("solver", ["fista", "fista_svm", "dcd", "pegasos"])
def test_csr_solve_peak_memory_within_budget(solver):
    """Peak traced memory of solve on CSR input <= 1.5 x the input's bytes + O(n + d):
    the scaling statistics read the CSR arrays in place (no nnz-sized temporaries)."""
    import gc
    import tracemalloc

    n, d, per_row = 6000, 300, 40
    X = sp.random(n, d, density=per_row / d, format="csr", random_state=0, dtype=np.float64)
    y = np.where(np.random.default_rng(0).random(n) < 0.5, 1, -1)
    inp = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
    kw = dict(solver=solver, max_iter=3, random_state=0)
    mk.solve(X, y, **kw)  # imports and lazily built caches outside the measurement
    gc.collect()
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        mk.solve(X, y, **kw)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak - start <= 1.5 * inp + 12 * 8 * (n + d)
    # the statistics alone need O(d) memory
    gc.collect()
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        scaling_statistics(X, "std")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak - start <= 64 * 8 * d


def test_kernel_approximation_save_load(tmp_path):
    """A saved result keeps the kernel's parameters and the free choices of its fit (the
    Nystroem centres): after loading, the certificate verifies and the result predicts as
    the run did, with no refit; a refit on the training rows with the same seed is the
    same map."""
    X, y, Xnew = _approx_data(seed=14)
    res = mk.solve(X, y, solver="dcd", kernel="nystroem", random_state=0,
                   kernel_params={"n_components": 30, "random_state": 2})
    assert res.status == "certified"
    path = tmp_path / "res.npz"
    res.save(path)
    back = mk.load_result(path)
    assert back.certificate.verify(X, y)
    np.testing.assert_allclose(back.decision_function(Xnew), res.decision_function(Xnew),
                               rtol=1e-12, atol=1e-12)
    back.kernel.fit(X)
    np.testing.assert_allclose(back.decision_function(Xnew), res.decision_function(Xnew),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("solver", ["fista", "fista_svm", "dcd"])
@pytest.mark.parametrize("sparse", [False, True])
def test_fista_row_blocks_thread_count_independent(solver, sparse):
    # large enough for the OpenMP path (>= 2e5 stored entries, 16 row blocks): the blocks
    # and their summation order do not depend on the thread count -> bitwise the same
    # (dcd: its scaling statistics, row constants and fresh bound go by row parts)
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from marginkit.solvers.svm import _fast as _svm_fast

    X, y = make_problem(n=4000, d=60, seed=5, shift=1.0, noise=1.0)
    if sparse:
        X[np.random.default_rng(5).random(X.shape) < 0.1] = 0.0
        X = sp.csr_matrix(X)
    nnz = X.nnz if sparse else X.size
    assert nnz >= 2e5 and _svm_fast.fista_blocks(4000, 60, float(nnz)) == 16
    runs = []
    for nt in (1, 2, 1):
        with threadpoolctl.threadpool_limits(nt):
            runs.append(mk.solve(X, y, solver=solver, max_iter=30, random_state=0))
    if solver == "dcd":
        assert runs[0].status == "certified"  # its fresh bound made the claim
    for r in runs[1:]:
        assert r.n_iter == runs[0].n_iter
        assert np.array_equal(r.history["error_bound"], runs[0].history["error_bound"])
        assert r.coef_.tobytes() == runs[0].coef_.tobytes()
        assert r.dual_coef_.tobytes() == runs[0].dual_coef_.tobytes()
        assert r.intercept_ == runs[0].intercept_


@pytest.mark.parametrize("bound_check", ["lazy", "always"])
def test_dcd_bound_by_row_parts_bounds_the_recomputed_projected_gradient(bound_check):
    # from 2e5 stored entries dcd's fresh bound sums X^T (y r) and ||p||^2 by row parts
    # (16 here): the error bound it reports (section 4, eps = ||p(r)|| / mu plus its
    # rounding) is still at least ||p(r)|| / mu recomputed in long double from X, y and
    # the returned r alone, and within that rounding term of it
    from _svm_reference import margins

    X, y = make_problem(n=12001, d=20, seed=4, shift=1.0, noise=1.0)
    assert _svm_fast.stat_parts(12001, 20, X.size) == 16
    res = mk.solve(X, y, solver="dcd", random_state=0,
                   solver_params={"bound_check": bound_check})
    assert res.status == "certified"
    gamma, mu = res.extra["gamma"], res.extra["mu"]
    ypm = np.where(y == res.classes_[1], 1.0, -1.0)
    m, sd = X.mean(axis=0), X.std(axis=0)
    r = res.dual_coef_
    theta = margins(X, ypm, m, 1.0 / sd, r, None, True)
    G = theta + np.longdouble(mu) * r - 1
    p = np.where(r <= 0, np.minimum(G, 0), np.where(r >= gamma, np.maximum(G, 0), G))
    eps = float(np.sqrt(np.sum(p * p)) / mu)
    bound = res.history["error_bound"][-1]
    assert eps <= bound <= eps * (1 + 1e-6) + 1e-9
    assert res.certificate.verify(X, y)


@pytest.mark.slow
@pytest.mark.parametrize("bound_check", ["lazy", "always"])
def test_dcd_fresh_bound_on_the_team_is_thread_count_independent(bound_check):
    # from 2e7 stored entries dcd's in-epoch fresh bound (float64, and long double with
    # "always") runs its row parts on the OpenMP team: the same bits on 1 and 2 threads
    threadpoolctl = pytest.importorskip("threadpoolctl")
    X, y = make_problem(n=700_000, d=30, seed=3, shift=1.0, noise=1.0)
    assert X.size >= 2e7
    runs = []
    for nt in (1, 2):
        with threadpoolctl.threadpool_limits(nt):
            runs.append(mk.solve(X, y, solver="dcd", random_state=0, max_iter=30,
                                 solver_params={"bound_check": bound_check}))
    assert runs[0].status == "certified"
    assert runs[1].n_iter == runs[0].n_iter
    assert np.array_equal(runs[1].history["error_bound"], runs[0].history["error_bound"])
    assert runs[1].coef_.tobytes() == runs[0].coef_.tobytes()


def test_fista_svm_on_all_zero_features_runs():
    # Z^T Z = 0: Lanczos has no vector to start from; the trace (0) bounds the spectrum
    y = np.r_[np.ones(20), -np.ones(20)]
    for X in (sp.csr_matrix((40, 5000)), np.zeros((40, 10))):
        res = mk.solve(X, y, solver="fista_svm", max_iter=50)
        assert res.status == "max_iter" and res.certificate is None


def test_bound_kernels_refuse_a_strided_box():
    # the kernels read a per-point bound contiguously or as one value (stride 0); a view
    # with another stride (every other entry) is refused, not read as contiguous
    v = np.array([0.5, 2.0, 0.7, 3.0])
    y = np.array([1.0, -1.0, 1.0, -1.0])
    wide = np.repeat([1.0, 100.0], 4)[[0, 4, 1, 5, 2, 6, 3, 7]]  # 1, 100, 1, 100, ...
    box = wide[::2]
    assert np.all(box == 1.0) and box.strides[0] == 16
    want = _svm_fast.phi_slope(v, y, np.ascontiguousarray(box), 0.0)
    assert want == _svm_fast.phi_slope(v, y, np.broadcast_to(1.0, (4,)), 0.0)
    with pytest.raises(ValueError, match="box must be a contiguous float64 vector"):
        _svm_fast.phi_slope(v, y, box, 0.0)
    with pytest.raises(ValueError, match="box must be a contiguous float64 vector"):
        _svm_fast.next_breakpoint(v, y, box, 0.0, True)
    # one entry is read at its start whatever its stride
    one = box[:1]
    assert one.strides[0] == 16
    assert _svm_fast.phi_slope(v[:1], y[:1], one, 0.0) == (0.5, 1)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("augmented", [True, False])
def test_lipschitz_bound_of_one_row(sparse, augmented):
    # one row and many columns: the n x n operator is 1 x 1, below ARPACK's smallest
    # order; its entry is the eigenvalue (a bound, not a TypeError from eigsh)
    from marginkit.solvers import svm

    rng = np.random.default_rng(6)
    X = rng.standard_normal((1, 300)) * (rng.random((1, 300)) < 0.3)
    X = sp.csr_matrix(X) if sparse else X
    B = svm._Blocked.build(_row_blocks(X, [0, 1]), "std")
    Z = (np.asarray(X.todense() if sparse else X) - B.m) * B.s
    if augmented:
        Z = np.column_stack([Z, np.ones(1)])
    top = float((Z @ Z.T)[0, 0])  # 0 unaugmented: one row is its own mean
    lam, info = svm.lipschitz_bound(B, augmented, 1.0)
    assert info["method"] == "lanczos"
    assert top <= lam <= top + 1e-9 * max(top, 1.0)


def test_lanczos_margin_counts_both_sums_of_each_product():
    # the operator's product is two sums (over n, then over its order p): the margin is
    # the rounding bound of sums of n + p terms, never of the first alone
    from marginkit.solvers.svm import _lipschitz as lip

    A = np.diag([4.0, 1.0, 0.5, 0.25])
    n, F, M, trace = 1000, 7.0, 0.3, float(np.trace(A))
    bound, _, method = lip.lanczos_bound(lambda v: A @ v, 4, n, F, M, trace, True, seed=0)
    assert method == "lanczos"
    est = lip.ritz_estimate(lambda v: A @ v, 4, 1e-10, 0)
    margin = bound - est
    both = lip._gram_rounding_bound(n, F, M, trace, True, 4, 1, n + 4)
    assert margin == pytest.approx(both, rel=1e-12)
    assert margin > lip._gram_rounding_bound(n, F, M, trace, True, 4, 1, n)
    nside, _, _ = lip.lanczos_bound(lambda v: A @ v, 4, n, F, M, trace, True, seed=0, terms=30)
    assert nside - est == pytest.approx(
        lip._gram_rounding_bound(n, F, M, trace, True, 4, 1, 34), rel=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sparse", [False, True])
def test_column_max_propagates_nan_as_np_maximum(dtype, sparse):
    from marginkit.utils._rows import row_block
    rng = np.random.default_rng(12)
    X = (rng.standard_normal((50, 6)) * 10).astype(dtype)
    X[rng.random(X.shape) < 0.3] = 0.0
    X[7, 2] = np.nan
    start = np.array([0.0, 50.0, 1.0, np.nan, 0.5, 3.0])
    want = np.maximum(start, np.abs(X).max(axis=0).astype(np.float64))
    got = start.copy()
    _svm_fast.column_max(row_block(sp.csr_matrix(X) if sparse else X), got)
    np.testing.assert_array_equal(got, want)
    clean = np.nan_to_num(X)
    got = start.copy()
    _svm_fast.column_max(row_block(sp.csr_matrix(clean) if sparse else clean), got)
    np.testing.assert_array_equal(got, np.maximum(start, np.abs(clean).max(axis=0)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sparse", [False, True])
def test_column_max_sums_is_the_first_two_passes_in_one(dtype, sparse):
    """The fused first pass of the scaling statistics: its maxima are column_max's (NaN
    kept) and its unscaled sums, times the exact power of two, the scaled entries' sums
    bit for bit (rows not a multiple of 4, columns from 1e-200 to 1e200, zeros);
    scaling_statistics takes a scaled pass where an unscaled sum overflows."""
    from marginkit.solvers.svm import _data
    from marginkit.utils._rows import row_block

    rng = np.random.default_rng(13)
    scales = np.array([1.0, 1e3, 1e-3, 1e200 if dtype == np.float64 else 1e30,
                       1e-200 if dtype == np.float64 else 1e-30, 0.0, 5.0])
    X = (rng.standard_normal((1003, 7)) * scales).astype(dtype)
    X[rng.random(X.shape) < 0.3] = 0.0
    B = row_block(sp.csr_matrix(X) if sparse else X)
    cm, raw, cnt = np.zeros(7), np.zeros(7), np.zeros(7, dtype=np.int64)
    _svm_fast.column_max_sums(B, np.ones(7), cm, raw, cnt)
    cm_ref = np.zeros(7)
    _svm_fast.column_max(B, cm_ref)
    np.testing.assert_array_equal(cm, cm_ref)
    safe, inv = np.empty(7), np.empty(7)
    _svm_fast.pow2_safe(cm, safe, inv)
    sums, cnt_ref, cm2 = np.zeros(7), np.zeros(7, dtype=np.int64), np.zeros(7)
    _svm_fast.column_max_sums(B, inv, cm2, sums, cnt_ref)  # the sums of x * inv
    np.testing.assert_array_equal(raw * inv, sums)
    np.testing.assert_array_equal(cnt, cnt_ref)
    np.testing.assert_array_equal(cm2, cm)
    # the sums of x * inv are the scaled entries' sums, in row order
    Xs = (X.astype(np.float64) * inv)
    np.testing.assert_allclose(sums, Xs.sum(axis=0), rtol=1e-12, atol=0)
    with pytest.raises(ValueError, match="sums has 6 entries"):
        _svm_fast.column_max_sums(B, inv, cm, np.zeros(6), cnt)
    # an unscaled sum that overflows: the scaled pass (the sums of x / 2^1024 are finite)
    big = rng.standard_normal((40, 3))
    big[:, 1] = 1.7e308
    m, s = _data.scaling_statistics(big, "std")
    assert m[1] == pytest.approx(1.7e308, rel=1e-15) and s[1] == 0.0 and np.all(np.isfinite(m))


@pytest.mark.parametrize("n", [1000, 131073])
def test_dcd_epochs_refuses_arrays_of_the_wrong_size(n):
    """``_fast.dcd_epochs`` checks what it reads and writes before compiled code runs: a
    short hist, r, w_bar or ctl, an active size beyond n, an index entry out of range or
    repeated raise ValueError naming it (they crashed the process or ran a wrong epoch)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 4))
    y = np.sign(X[:, 0])
    got = {}
    mk.solve(X, y, solver="dcd", max_iter=1, callback=lambda s: bool(got.setdefault("s", s)))
    s = got["s"]
    d = s.data

    def call(hist=None, **over):
        a = dict(index=s.index.copy(), r=s.r.copy(), w_bar=s._w_bar.copy(), ctl=s._ctl.copy())
        a.update(over)
        return _svm_fast.dcd_epochs(
            d.rows, s.y, a["index"], a["r"], s.s2a.copy(), s.scal.copy(), d.s, d.m, d.c, s.qd,
            d.M, s.mu, s.box, s.level, s._rng_state.copy(), s._pg, a["ctl"], s.shrinking,
            False, np.empty((5, 4)) if hist is None else hist, 5, np.inf, -np.inf,
            a["w_bar"], s._coef.copy(), s._mask_bytes.copy(), s._fresh.copy(), s.rc.xi,
            s._rc, s._seen, s._order)

    assert call() == 5
    with pytest.raises(ValueError, match="hist needs 5 rows of 4"):
        call(hist=np.empty((1, 4)))
    with pytest.raises(ValueError, match=f"r has {n - 1} entries"):
        call(r=np.zeros(n - 1))
    with pytest.raises(ValueError, match="w_bar has 3 entries"):
        call(w_bar=np.zeros(3))
    ctl = s._ctl.copy()
    ctl[0] = n + 1
    with pytest.raises(ValueError, match="active size"):
        call(ctl=ctl)
    bad = s.index.copy()
    bad[1] = -7
    with pytest.raises(ValueError, match="index holds -7"):
        call(index=bad)
    rep = np.arange(n, dtype=np.int64)
    rep[1] = 0  # point 0 twice (among the active ones): not a permutation, at every size
    ctl = s._ctl.copy()
    ctl[0] = n // 2
    with pytest.raises(ValueError, match="index holds 0 twice"):
        call(index=rep, ctl=ctl)
    with pytest.raises(ValueError, match="index holds 0 twice"):
        call(index=np.zeros(n, dtype=np.int64))
    # ctl is read first: a short one is refused before any entry is read
    with pytest.raises(ValueError, match="ctl has 1 entries, at least 7"):
        call(ctl=np.zeros(1))
    for bad_size in (np.nan, np.inf, 1e19, n + 0.5, -1.0):
        ctl = s._ctl.copy()
        ctl[0] = bad_size
        with pytest.raises(ValueError, match="active size ctl.0. = .* is not a whole number"):
            call(ctl=ctl)


def test_pegasos_runs_max_iter_epochs_unless_epochs_is_given():
    # one iteration is one epoch: max_iter is the run's length (it was capped silently at
    # the 200 epochs of the default), and that end is planned (no warning); epochs, when
    # given, is the length and max_iter a cap that warns when it cuts the run short
    import warnings

    from sklearn.exceptions import ConvergenceWarning as SkConvergenceWarning

    from marginkit.sklearn import SVMClassifier

    X, y = mk.datasets.load_heart_scale()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert mk.solve(X, y, solver="pegasos", warn=True).n_iter == 200
        assert mk.solve(X, y, solver="pegasos", max_iter=350, warn=True).n_iter == 350
        assert mk.solve(X, y, solver="pegasos", epochs=30, max_iter=1000, warn=True).n_iter == 30
        assert SVMClassifier(solver="pegasos", max_iter=260).fit(X, y).n_iter_ == 260
    with pytest.warns(mk.ConvergenceWarning, match="raise max_iter"):
        res = mk.solve(X, y, solver="pegasos", epochs=300, max_iter=100, warn=True)
    assert res.n_iter == 100
    with pytest.warns(SkConvergenceWarning):
        SVMClassifier(solver="pegasos", solver_params={"epochs": 300}, max_iter=100).fit(X, y)


@pytest.mark.parametrize("solver, params", [("fista", {}), ("fista_svm", {}), ("dcd", {}),
                                            ("dcd", {"bound_check": "always"})])
def test_run_ends_when_no_more_points_can_be_certified(solver, params):
    # linear SVM on XOR: at the optimum every point is at its box level (a margin
    # violator), so the certified-points rule can never fire; the run ends once its bound
    # is at float64's floor (StallWatch) instead of at max_iter, saying why
    from marginkit.solvers.svm._rules import StallWatch

    X, y = mk.datasets.make_xor(200, random_state=0)
    with pytest.warns(mk.ConvergenceWarning, match="error bound stopped decreasing"):
        res = mk.solve(X, y, solver=solver, random_state=0, warn=True, **params)
    assert res.status == "max_iter" and res.n_iter <= 3 * StallWatch.WINDOW
    assert "not expected to certify them" in res.extra["failure"]
    assert res.certificate is None and not res.certified_mask.any()
    # what the reason says, from the data: every point violates the model's margin
    margins = np.where(y == 1, 1, -1) * res.decision_function(X)
    assert (margins < 1).all()
    # data whose rule can fire are not cut short: the same solvers certify a blob pair
    Xb, yb = mk.datasets.make_separable(200, margin=0.1, random_state=0)[:2]
    ok = mk.solve(Xb, yb, solver=solver, random_state=0, **params)
    assert ok.status == "certified" and "failure" not in (ok.extra or {})


def test_stall_window_grows_with_the_conditioning():
    # an ill-conditioned run converges unevenly: a plateau of a few hundred iterations
    # below the floor is not a stall when sqrt(kappa) says the rate is that slow (a review
    # found the fixed window of 100 ending such runs at 6e-7 of the level, later 3e-9)
    from marginkit.solvers.svm._rules import StallWatch

    plateau = [1e-7] * 300 + [1e-9]
    fixed, slow = StallWatch(np.ones(3)), StallWatch(np.ones(3), horizon=50.0)
    assert fixed.window == 100 and slow.window == 500
    assert any(fixed.update(e) for e in plateau)
    assert not any(slow.update(e) for e in plateau)
    # fista sizes its window by sqrt(kappa), dcd by sqrt(max Q_ii / mu)
    rng = np.random.default_rng(4)
    X = rng.standard_normal((300, 20)) @ np.diag(np.logspace(0, -3, 20))
    y = np.sign(X @ rng.standard_normal(20) + 0.5 * rng.standard_normal(300))
    got = {}
    res = mk.solve(X, y, solver="fista", C=1.0, mu=3e-4, max_iter=3,
                   callback=lambda s: bool(got.setdefault("s", s)) and False)
    assert got["s"].stall.window == int(10 * np.sqrt(res.extra["kappa"])) > 100


def test_pegasos_given_c_says_lam_is_one_over_c_n():
    from marginkit.datasets import load_heart_scale

    X, y = load_heart_scale()
    with pytest.raises(TypeError, match=r"unknown parameter\(s\) \['C'\].*pegasos takes lam, "
                                        r"not C.*lam = 1/\(C n\)"):
        mk.solve(X, y, solver="pegasos", C=1.0)


def test_fista_on_one_hot_rows_does_not_crash_in_lapack(monkeypatch):
    # found by review: LAPACK's subset driver raised "Internal Error" on the scaled Gram
    # matrix of 20 one-hot rows (top eigenvalue of multiplicity 19) and fista crashed
    import scipy.linalg

    from marginkit.linalg._norms import top_eigenvalue

    X = np.eye(20)
    y = np.where(np.arange(20) % 2 == 0, 1, -1)
    res = mk.solve(X, y, solver="fista", kernel="linear", max_iter=100)
    assert res.status == "certified" and res.certificate.verify(X, y)
    # the fallbacks, whatever this machine's LAPACK does: the whole spectrum, then None
    S = np.diag([1.0, 3.0, 2.0])
    real = scipy.linalg.eigvalsh
    calls = []

    def flaky(a, *args, **kw):
        calls.append(kw)
        if "subset_by_index" in kw or fail_all:
            raise np.linalg.LinAlgError("Internal Error.")
        return real(a, *args, **kw)

    monkeypatch.setattr(scipy.linalg, "eigvalsh", flaky)
    fail_all = False
    assert top_eigenvalue(S) == 3.0 and len(calls) == 2
    fail_all = True
    assert top_eigenvalue(S) is None
    # and fista's Lipschitz bound then takes the trace (>= the top eigenvalue)
    res = mk.solve(X, y, solver="fista", kernel="linear", max_iter=100)
    assert res.status == "certified" and res.certificate.verify(X, y)


def test_pegasos_runs_its_epochs_beyond_the_default_cap():
    """Found by review: epochs=500 ran 200 epochs (the default cap's) with status
    "max_iter" and no word; a user's max_iter below the epochs still caps them."""
    import warnings

    from marginkit.sklearn import SVMClassifier

    X, y = mk.datasets.make_xor(60, random_state=1)[:2]
    assert mk.solve(X, y, solver="pegasos", kernel="rff", epochs=250, random_state=0).n_iter == 250
    assert mk.solve(X, y, solver="pegasos", kernel="rff", epochs=250, max_iter=120,
                    random_state=0).n_iter == 120
    assert mk.solve(X, y, solver="pegasos", kernel="rff", random_state=0).n_iter == 200
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = SVMClassifier(solver="pegasos", kernel="rff", solver_params={"epochs": 250}).fit(X, y)
    assert est.result_.n_iter == 250
