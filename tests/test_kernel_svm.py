"""The SVM solvers on exact kernels (fista, fista_svm, dcd through the Gram matrix)."""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics.pairwise import pairwise_kernels

import marginkit as mk
from marginkit.sklearn import SVMClassifier

C, MU, G = 1.0, 0.05, 0.5


def _data(n=80, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.where(X[:, 0] ** 2 + X[:, 1] ** 2 + 0.3 * rng.standard_normal(n) > 1.0, 1, -1)
    return X, y


def _reference(K, y, C, mu, svm, iters=4000):
    """r* of the perturbed dual by FISTA in numpy on the explicit Q (a long, independent
    solve): Q = Y (K + 1 1^T) Y + mu I on the box (H-SVM), or Y K Y + mu I on the box and
    y^T r = 0 (classical SVM, projection by bisection on the multiplier)."""
    n = y.size
    Y = np.diag(y.astype(float))
    Q = Y @ (K + (0.0 if svm else 1.0)) @ Y + mu * np.eye(n)
    L = np.linalg.eigvalsh(Q)[-1]
    kappa = L / mu
    beta = (np.sqrt(kappa) - 1) / (np.sqrt(kappa) + 1)

    def proj(v):
        if not svm:
            return np.clip(v, 0.0, C)
        lo, hi = -1e3, 1e3
        for _ in range(64):
            lam = 0.5 * (lo + hi)
            if y @ np.clip(v - lam * y, 0.0, C) > 0:
                lo = lam
            else:
                hi = lam
        return np.clip(v - 0.5 * (lo + hi) * y, 0.0, C)

    r = r_prev = np.zeros(n)
    for _ in range(iters):
        z = r + beta * (r - r_prev)
        r_prev, r = r, proj(z + (1.0 - Q @ z) / L)
    return r


def _theta(K, y, r, t):
    return y * (K @ (y * r) + t)


def _check_certified(res, X, y, K, svm):
    """Every certified point has theta_i > 1 - mu level under r and under r*, and
    ||r - r*|| <= eps at the stop (r* from the independent reference)."""
    assert res.status == "certified"
    cert = res.certificate
    r, mask, eps = res.dual_coef_, res.certified_mask, cert.value
    assert mask.any()
    r_star = _reference(K, y, C, MU, svm)
    assert np.linalg.norm(r - r_star) <= eps
    level = min(C, 1.0 / MU)
    t = res.intercept_
    t_star = (y @ r_star) if not svm else None
    assert np.all(_theta(K, y, r, t)[mask] > 1.0 - MU * level)
    if not svm:
        assert np.all(_theta(K, y, r_star, t_star)[mask] > 1.0 - MU * level)
    else:
        # the optimal intercept: the multiplier, read off the free coordinates of r*
        free = (r_star > 1e-8) & (r_star < C - 1e-8)
        g = 1.0 - MU * r_star - y * (K @ (y * r_star))
        t_star = float(np.median((y * g)[free]))
        assert np.all(_theta(K, y, r_star, t_star)[mask] > 1.0 - MU * level - 1e-6)
    return r_star


@pytest.mark.parametrize("solver", ["fista", "fista_svm", "dcd"])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_agrees_with_explicit_q_reference(solver, sparse, dtype):
    X, y = _data()
    X = X.astype(dtype)
    Xin = sp.csr_matrix(X) if sparse else X
    res = mk.solve(Xin, y, solver=solver, kernel="rbf", kernel_params={"gamma": G}, C=C,
                   mu=MU, stop=[("certified_points", {"fraction": 0.3})])
    K = pairwise_kernels(X.astype(np.float64), metric="rbf", gamma=G)
    _check_certified(res, X, y, K, svm=solver == "fista_svm")
    assert res.certificate.verify(Xin, y)
    assert res.coef_ is None and res.extra["gram"] == "held"
    # the support rows keep the input's format, one row per r_i > 0
    assert sp.issparse(res.support_) == sparse
    assert res.support_.shape[0] == np.count_nonzero(res.dual_coef_ > 0)
    dec = res.decision_function(Xin)
    np.testing.assert_allclose(dec, K @ (y * res.dual_coef_) + res.intercept_, rtol=1e-5,
                               atol=1e-5)


def test_solvers_agree_on_r_star():
    X, y = _data(seed=1)
    kw = dict(kernel="rbf", kernel_params={"gamma": G}, C=C, mu=MU,
              stop=[("certified_points", {"fraction": 0.3})])
    a = mk.solve(X, y, solver="fista", **kw)
    b = mk.solve(X, y, solver="dcd", **kw)
    assert a.status == b.status == "certified"
    # both within their bound of the same r*
    gap = np.linalg.norm(a.dual_coef_ - b.dual_coef_)
    assert gap <= a.certificate.value + b.certificate.value
    c = mk.solve(X, y, solver="fista_svm", **kw)
    K = pairwise_kernels(X, metric="rbf", gamma=G)
    r_star = _reference(K, y, C, MU, svm=True)
    assert np.linalg.norm(c.dual_coef_ - r_star) <= c.certificate.value


@pytest.mark.parametrize("budget", [None, 800_000])
def test_dcd_with_and_without_shrinking_reach_the_same_r_star(budget):
    # held Gram and row cache (8 n^2 = 1.4 MB does not fit 800 kB); C=10 leaves many
    # points at a bound, which the shrunk run takes out of its active set
    X, y = _data(n=420, seed=4)
    kw = dict(solver="dcd", kernel="rbf", kernel_params={"gamma": G}, C=10.0, mu=0.01,
              stop=[("certified_points", {"fraction": 0.5})])
    if budget is not None:
        kw["memory_budget"] = budget
    on = mk.solve(X, y, shrinking=True, **kw)
    off = mk.solve(X, y, shrinking=False, **kw)
    assert on.status == off.status == "certified"
    assert on.extra["gram"] == off.extra["gram"] == ("held" if budget is None else "blocked")
    assert on.certificate.verify(X, y) and off.certificate.verify(X, y)
    assert on.extra["active"] < X.shape[0]
    assert off.extra["active"] == X.shape[0] and off.extra["unshrinks"] == 0
    gap = np.linalg.norm(on.dual_coef_ - off.dual_coef_)
    assert gap <= on.certificate.value + off.certificate.value


def test_dcd_max_iter_counts_passes_over_the_active_coordinates():
    X, y = _data(n=200, seed=5)
    kw = dict(solver="dcd", kernel="rbf", kernel_params={"gamma": G}, C=C, mu=MU,
              stop=[("certified_points", {"fraction": 0.99})])
    one = mk.solve(X, y, max_iter=1, **kw)
    assert one.status == "max_iter" and one.n_iter == 1
    # one pass: at most one move per coordinate
    assert 0 < one.extra["moves"] <= X.shape[0]
    three = mk.solve(X, y, max_iter=3, **kw)
    assert three.n_iter == 3 and one.extra["moves"] < three.extra["moves"] <= 3 * X.shape[0]


@pytest.mark.parametrize("solver", ["fista", "fista_svm", "dcd"])
def test_the_default_mu_with_a_given_c_is_one_over_two_c_for_every_kernel(solver):
    X, y = _data(n=120, seed=6)
    kw = dict(solver=solver, kernel="rbf", kernel_params={"gamma": G})
    res = mk.solve(X, y, C=2.0, **kw)
    # mu C = 1/2, as at the paper's defaults; derived from C by the solver and by the
    # referee alike, so the run's configuration keeps the mu=None it was given
    assert res.extra["mu"] == 0.25 and res.config.solver_params.get("mu") is None
    assert res.status == "certified" and res.certificate.verify(X, y)
    # a configuration reused with another C derives its mu afresh
    again = mk.solve(X, y, config=res.config, C=4.0)
    assert again.extra["mu"] == 0.125 and again.certificate.verify(X, y)
    assert mk.solve(X, y, config=res.config, C=None).extra["mu"] == X.shape[0] / 128.0
    # C=None keeps the paper's defaults (gamma = 64/n, mu = n/128), a given mu stays
    paper = mk.solve(X, y, **kw)
    assert paper.extra["mu"] == X.shape[0] / 128.0
    assert paper.config.solver_params.get("mu") is None
    assert mk.solve(X, y, C=2.0, mu=0.05, **kw).extra["mu"] == 0.05
    # the linear kernel and the feature maps take the same default
    lin = mk.solve(X, y, solver=solver, C=2.0, scale=None)
    assert lin.extra["mu"] == 0.25 and lin.certificate.verify(X, y)
    assert mk.solve(X, y, solver=solver, C=2.0, kernel="rff",
                    kernel_params={"n_components": 20, "random_state": 0}).extra["mu"] == 0.25
    clf = SVMClassifier(solver=solver, kernel="rbf", kernel_params={"gamma": G}, C=2.0)
    assert clf.fit(X, y).result_.extra["mu"] == 0.25


@pytest.mark.parametrize("solver", ["fista", "dcd"])
def test_a_given_c_changes_the_linear_model(solver):
    """With the paper's mu = n/128 kept for a user C, every C above 128/n gave one and the
    same model (the box min(C, 1/mu) never reached): C = 1 and C = 10 on heart_scale
    (128/n = 0.47) fitted the same coef_. With mu = 1/(2C) the box is C: the duals reach
    it, and the two models differ."""
    from marginkit.datasets import load_heart_scale

    X, y = load_heart_scale()
    fits = {}
    for C in (1.0, 10.0):
        res = mk.solve(X, y, solver=solver, C=C, random_state=0)
        assert res.status == "certified" and res.certificate.verify(X, y)
        r = np.asarray(res.dual_coef_)
        # the level of the box is C, reached by the margin violators
        assert r.max() <= C * (1 + 1e-12) and r.max() >= 0.5 * C
        fits[C] = res.coef_
    gap = np.abs(fits[1.0] - fits[10.0]).max()
    assert gap > 0.05 * np.abs(fits[1.0]).max()


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_a_c_whose_default_mu_overflows_is_refused_naming_c(kernel):
    X, y = _data(n=40, seed=2)
    with pytest.raises(ValueError, match=r"C=1e-310 is too small .* mu = 1/\(2C\)"):
        mk.solve(X, y, solver="fista", kernel=kernel, C=1e-310)
    # a C so large that its mu cannot bound the error says which knob moves mu
    with pytest.raises(ValueError, match=r"raise mu \(with mu=None and a given C"):
        mk.solve(X, y, solver="fista", kernel=kernel, C=1e300)


def test_fista_svm_with_small_mu_agrees_with_libsvm():
    from sklearn.svm import SVC

    from marginkit.datasets import load_heart_scale

    X, y = load_heart_scale()
    res = mk.solve(X, y, solver="fista_svm", kernel="rbf", kernel_params={"gamma": 0.1},
                   C=1.0, mu=1e-4, stop=[("certified_points", {"fraction": 0.6})],
                   max_iter=100_000)
    assert res.status == "certified" and res.certificate.verify(X, y)
    svc = SVC(C=1.0, kernel="rbf", gamma=0.1).fit(X, y)
    ours, theirs = res.decision_function(X), svc.decision_function(X)
    assert np.mean(np.sign(ours) == np.sign(theirs)) >= 0.99
    assert np.max(np.abs(ours - theirs)) < 0.05
    assert abs(res.intercept_ - svc.intercept_[0]) < 0.05


def _rbf_function(A, B):
    return pairwise_kernels(A, B, metric="rbf", gamma=G)


@pytest.mark.parametrize("solver", ["fista", "dcd"])
def test_precomputed_and_callable_kernels_match_the_named_kernel(solver):
    X, y = _data(seed=2)
    kw = dict(solver=solver, C=C, mu=MU)
    named = mk.solve(X, y, kernel="rbf", kernel_params={"gamma": G}, **kw)
    K = pairwise_kernels(X, metric="rbf", gamma=G)
    pre = mk.solve(K, y, kernel="precomputed", **kw)
    fun = mk.solve(X, y, kernel=_rbf_function, **kw)
    for other in (pre, fun):
        assert other.status == named.status == "certified"
        assert other.n_iter == named.n_iter
        np.testing.assert_allclose(other.dual_coef_, named.dual_coef_, rtol=0, atol=1e-9)
    assert pre.support_ is None and pre.support_coef_.shape == (X.shape[0],)
    np.testing.assert_allclose(pre.decision_function(K), named.decision_function(X),
                               atol=1e-8)
    assert pre.certificate.verify(K, y) and fun.certificate.verify(X, y)


@pytest.mark.parametrize("solver", ["fista", "fista_svm", "dcd"])
def test_held_and_blocked_gram_give_the_same_result(solver):
    X, y = _data(n=300, seed=3)
    kw = dict(solver=solver, kernel="rbf", kernel_params={"gamma": G}, C=C, mu=MU)
    held = mk.solve(X, y, **kw)
    # 8 n^2 = 720 kB does not fit: row blocks of the products and the row cache; FISTA
    # says what that costs (about n^2 kernel evaluations a product) and what to use,
    # dcd's row cache computes each row about once
    if solver == "dcd":
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            blocked = mk.solve(X, y, memory_budget=400_000, **kw)
    else:
        with pytest.warns(UserWarning, match=r"300 x 300 Gram matrix .* does not fit "
                                             r"memory_budget .* solver='dcd' .*nystroem"):
            blocked = mk.solve(X, y, memory_budget=400_000, **kw)
    assert held.extra["gram"] == "held" and blocked.extra["gram"] == "blocked"
    assert held.status == blocked.status == "certified"
    assert held.n_iter == blocked.n_iter
    np.testing.assert_allclose(blocked.dual_coef_, held.dual_coef_, rtol=0, atol=1e-10)
    assert blocked.certificate.verify(X, y)


@pytest.mark.parametrize("solver", ["fista", "fista_svm"])
@pytest.mark.parametrize("budget", [400_000, None])
def test_time_limit_bounds_the_start_up_of_fista_on_an_exact_kernel(solver, budget):
    # a Gram matrix the budget does not hold: every product of the step size's Lanczos
    # estimate recomputes about n^2 entries, tens of products before the first iteration;
    # one it holds is filled first (n^2 entries). time_limit counts from before the
    # start-up, whose estimate stops at the deadline (the trace, a valid bound, takes its
    # place): count the entries the kernel computes
    X, y = _data(n=300, seed=3)
    n = X.shape[0]
    entries = []

    def counted(A, B):
        entries.append(A.shape[0] * B.shape[0])
        return pairwise_kernels(A, B, metric="rbf", gamma=G)

    kw = dict(solver=solver, kernel=counted, C=C, mu=MU, max_iter=1)
    def warns():
        return pytest.warns(UserWarning, match="does not fit memory_budget") if budget else \
            warnings.catch_warnings()

    if budget:
        kw["memory_budget"] = budget
    with warns():
        free = mk.solve(X, y, **kw)
    assert free.status == "max_iter" and free.extra["gram"] == ("blocked" if budget else "held")
    assert sum(entries) > (5 if budget else 1) * n * n  # the estimate's products, or K
    entries.clear()
    with warns():
        capped = mk.solve(X, y, time_limit=1e-9, **kw)
    assert capped.status == "time_limit" and capped.n_iter == 0
    assert sum(entries) < n * n  # not one product: the diagonal and the checks of K only


def test_time_limit_ends_a_pass_of_kernel_dcd():
    # one pass of kernel dcd computes most Gram rows (minutes on a large n): it ends at
    # the run's time limit. A kernel that takes 20 ms a block: about 30 blocks (of at
    # most 16 rows, into the row cache) for the pass that certifies, a few at a limit of
    # 0.2 s
    import time

    X, y = _data(n=400, seed=4)
    calls = []

    def slow(A, B):
        calls.append(A.shape[0])
        time.sleep(0.02)
        return pairwise_kernels(A, B, metric="rbf", gamma=G)

    kw = dict(solver="dcd", kernel=slow, C=C, memory_budget=0.6 * 8 * 400 * 400)
    free = mk.solve(X, y, **kw)
    assert free.status == "certified" and free.n_iter == 1 and len(calls) > 25
    n_free = len(calls)
    calls.clear()
    capped = mk.solve(X, y, time_limit=0.2, **kw)
    assert capped.status == "time_limit" and len(calls) < n_free / 2


@pytest.mark.parametrize("solver", ["fista", "fista_svm"])
def test_time_limit_cuts_a_fista_product_on_a_gram_matrix_not_held(solver):
    # one product with a Gram matrix that is not held computes its rows block by block
    # (about n^2 kernel entries: minutes on a large n); past the run's time limit it stops
    # between two blocks, and the run ends at the last complete iterate. Here the kernel
    # turns slow (0.2 s a block, 7 blocks a product) once the loop has started
    import time

    X, y = _data(n=400, seed=4)
    slow, blocks = [False], []

    def kernel(A, B):
        if slow[0]:
            blocks.append(A.shape[0])
            time.sleep(0.2)
        return pairwise_kernels(A, B, metric="rbf", gamma=G)

    def turn_slow(state):
        slow[0] = True

    kw = dict(solver=solver, kernel=kernel, C=C, memory_budget=0.6 * 8 * 400 * 400,
              callback=turn_slow)
    with pytest.warns(UserWarning, match="does not fit memory_budget"):
        one = mk.solve(X, y, max_iter=1, **kw)
    assert one.n_iter == 1 and one.extra["gram"] == "blocked" and len(blocks) == 7
    slow[0], blocks[:] = False, []
    with pytest.warns(UserWarning, match="does not fit memory_budget"):
        cut = mk.solve(X, y, time_limit=1.0, **kw)
    # the first step's product was cut (before: it ran to its end, n_iter 1, 7 blocks)
    assert cut.status == "time_limit" and cut.n_iter == 0 and len(blocks) < 7
    assert all(len(v) == 1 for v in cut.history.values()) and cut.certificate is None
    np.testing.assert_array_equal(cut.dual_coef_, np.zeros_like(cut.dual_coef_))
    # the products of the start-up's Lanczos estimate stop there too (the trace then
    # bounds the eigenvalue): slow from the start, not one product is finished
    slow[0], blocks[:] = True, []
    with pytest.warns(UserWarning, match="does not fit memory_budget"):
        early = mk.solve(X, y, time_limit=0.5, **kw)
    assert early.status == "time_limit" and early.n_iter == 0 and len(blocks) < 7


def _negative(A, B):
    return -pairwise_kernels(A, B, metric="rbf", gamma=G)


def _asymmetric(A, B):
    K = pairwise_kernels(A, B, metric="rbf", gamma=G)
    return K + 0.1 * np.arange(K.shape[1])[None, :]


def _junk(A, B):
    K = pairwise_kernels(A, B, metric="rbf", gamma=G)
    K[0, 0] = np.nan
    return K


@pytest.mark.parametrize("solver", ["fista", "fista_svm", "dcd"])
def test_refusals(solver):
    X, y = _data(n=40)
    with pytest.raises(ValueError, match=r"not positive semi-definite on X: K\(x_0, x_0\)"):
        mk.solve(X, y, solver=solver, kernel=_negative)
    with pytest.raises(ValueError, match=r"callable kernel _asymmetric: K is not symmetric"):
        mk.solve(X, y, solver=solver, kernel=_asymmetric)
    with pytest.raises(ValueError, match="NaN or infinity"):
        mk.solve(X, y, solver=solver, kernel=_junk)
    with pytest.raises(ValueError, match=r"memory_budget is 0.00977 MiB.*nystroem.*rff"):
        mk.solve(X, y, solver=solver, kernel="rbf", memory_budget=10_240)
    with pytest.raises(ValueError, match="scale='scale': with an exact kernel the kernel sees X"):
        mk.solve(X, y, solver=solver, kernel="rbf", scale="scale")
    K = pairwise_kernels(X, metric="rbf")
    with pytest.raises(ValueError, match=r"square \(n, n\) Gram matrix"):
        mk.solve(K[:, :30], y, solver=solver, kernel="precomputed")


def test_dask_arrays_are_refused_with_exact_kernels():
    da = pytest.importorskip("dask.array")
    import dask

    X, y = _data(n=60)
    DX = da.from_array(X, chunks=(20, 5))
    Dy = da.from_array(y, chunks=20)
    with dask.config.set(scheduler="sync"):
        for solver in ("fista", "fista_svm"):
            with pytest.raises(ValueError, match="kernel 'rbf' has no explicit feature "
                                                 "map.*'nystroem' or 'rff'"):
                mk.solve(DX, Dy, solver=solver, kernel="rbf")


def test_scale_does_not_apply_to_exact_kernels():
    X, y = _data(seed=4)
    X = 3.0 * X + 1.0
    a = mk.solve(X, y, solver="dcd", kernel="rbf", kernel_params={"gamma": G}, C=C, mu=MU)
    b = mk.solve(X, y, solver="dcd", kernel="rbf", kernel_params={"gamma": G}, C=C, mu=MU,
                 scale=None)
    np.testing.assert_array_equal(a.dual_coef_, b.dual_coef_)


@pytest.mark.parametrize("kernel,params", [("poly", {"degree": 2, "coef0": 1.0}),
                                           ("laplacian", {"gamma": 0.2}),
                                           ("spline", {"order": 2.0})])
def test_other_exact_kernels(kernel, params):
    X, y = _data(seed=5)
    if kernel == "spline":
        X = (X - X.min(0)) / (X.max(0) - X.min(0) + 1e-9)
    res = mk.solve(X, y, solver="dcd", kernel=kernel, kernel_params=params, C=C, mu=MU)
    assert res.status == "certified" and res.certificate.verify(X, y)
    Kfun = mk.get_plugin("kernel", kernel)(**params)
    K = np.asarray(Kfun(X), dtype=np.float64)
    r_star = _reference(K, y, C, MU, svm=False)
    assert np.linalg.norm(res.dual_coef_ - r_star) <= res.certificate.value


def test_svm_classifier_with_rbf_kernel_binary_and_one_vs_rest():
    X, y = _data(n=120, seed=6)
    clf = SVMClassifier(solver="dcd", kernel="rbf", kernel_params={"gamma": G}, C=C,
                        mu=MU).fit(X, y)
    assert clf.status_ == "certified"
    res = clf.result_
    sup = np.flatnonzero(res.dual_coef_ > 0)
    np.testing.assert_array_equal(clf.support_, sup)
    np.testing.assert_array_equal(clf.support_vectors_, X[sup])
    assert clf.dual_coef_.shape == (1, sup.size)
    np.testing.assert_allclose(clf.dual_coef_[0], (np.where(y > 0, 1, -1) * res.dual_coef_)[sup])
    assert clf.n_support_.tolist() == [int(np.sum(y[sup] == c)) for c in clf.classes_]
    np.testing.assert_allclose(clf.intercept_, [res.intercept_])
    K = pairwise_kernels(X, X[sup], metric="rbf", gamma=G)
    np.testing.assert_allclose(clf.decision_function(X),
                               K @ clf.dual_coef_[0] + clf.intercept_[0], atol=1e-8)
    assert clf.score(X, y) > 0.8
    with pytest.raises(AttributeError, match="kernel expansion"):
        clf.coef_
    # three classes, one-vs-rest: one row of dual_coef_ and one intercept per class
    y3 = np.where(y > 0, 2, np.where(X[:, 2] > 0, 1, 0))
    clf3 = SVMClassifier(solver="dcd", kernel="rbf", kernel_params={"gamma": G}, C=C,
                         mu=MU).fit(X, y3)
    assert clf3.dual_coef_.shape == (3, clf3.support_.size)
    assert clf3.intercept_.shape == (3,) and clf3.n_support_.sum() == clf3.support_.size
    assert clf3.decision_function(X).shape == (120, 3)
    assert clf3.score(X, y3) > 0.6


@pytest.mark.parametrize("solver", ["dcd", "fista", "fista_svm"])
def test_exact_kernel_sample_weights(solver):
    # per-point boxes C w_i on exact kernels: a point of weight 0 keeps r_i = 0 (the
    # working-set selection of dcd must not stall on it), the claim verifies with the
    # run's weights and is refused without them
    X, y = mk.datasets.load_libsvm("heart_scale")
    w = np.ones(X.shape[0])
    w[:30] = 0.0
    w[30:60] = 2.5
    res = mk.solve(X, y, solver=solver, kernel="rbf", kernel_params={"gamma": 0.1}, C=1.0,
                   mu=0.01, sample_weight=w)
    assert res.status == "certified"
    assert np.all(res.dual_coef_[:30] == 0.0)
    assert np.all(res.dual_coef_ <= 1.0 * w + 1e-15)
    assert res.dual_coef_[30:60].max() > 1.0  # the larger boxes are used
    assert res.certificate.verify(X, y, sample_weight=w)
    assert not res.certificate.verify(X, y)
    assert not res.certified_mask[:30].any()


@pytest.mark.parametrize("solver", ["fista", "fista_svm", "dcd"])
def test_a_zero_gram_matrix_runs(solver):
    # the whole Gram matrix underflows to 0 (poly without coef0 on tiny X): Lanczos has no
    # vector to start from; the bound on the largest eigenvalue is the trace, 0
    X, y = _data(n=40)
    for Xk, kw in ((X * 1e-150, dict(kernel="poly", kernel_params={"degree": 3, "coef0": 0.0})),
                   (np.zeros((40, 40)), dict(kernel="precomputed"))):
        res = mk.solve(Xk, y, solver=solver, max_iter=500, **kw)
        assert res.status in ("certified", "max_iter")
        if res.certificate is not None:
            assert res.certificate.verify(Xk, y)


@pytest.mark.parametrize("solver", ["fista", "fista_svm", "dcd"])
def test_boxes_out_of_float64_range_are_refused(solver):
    # as on linear kernels: no certificate resolves them, so the run would spend max_iter
    import warnings

    X, y = _data(n=40)
    kw = dict(solver=solver, kernel="rbf", max_iter=50)
    for kernel in ("rbf", "linear"):
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # the refusal, not numpy's overflow
            with pytest.raises(ValueError, match="overflow"):
                mk.solve(X, y, C=1e10, sample_weight=np.full(40, 1e300),
                         **dict(kw, kernel=kernel))
    with pytest.raises(ValueError, match=r"the box C w_i overflows float64 \(C = 1e\+10, "
                                         r"largest sample weight 1e\+300\)"):
        mk.solve(X, y, C=1e10, sample_weight=np.full(40, 1e300), **kw)
    with pytest.raises(ValueError, match="smallest positive box C w_i .* below 2\\^-969"):
        mk.solve(X, y, C=1e-10, sample_weight=np.r_[np.ones(39), 1e-300], **kw)
    with pytest.raises(ValueError, match=r"C = 1e-300 and mu = .* below 2\^-969"):
        mk.solve(X, y, C=1e-300, **kw)


@pytest.mark.parametrize("solver", ["fista", "fista_svm", "dcd"])
def test_a_run_whose_claims_are_refuted_says_why(monkeypatch, solver):
    from marginkit.solvers.svm import _kernel_certificate as KC

    X, y = _data(n=60)
    K = pairwise_kernels(X, metric="rbf", gamma=G)
    ok = mk.solve(K, y, solver=solver, kernel="precomputed")
    assert ok.status == "certified"
    monkeypatch.setattr(KC, "PSD_MAX_N", 50)  # the referee's PSD test: n <= 50
    res = mk.solve(K, y, solver=solver, kernel="precomputed", max_iter=300)
    assert res.status == "max_iter"
    assert "cannot establish that the kernel is PSD on this data" in res.extra["refuted"]
    # a refusal no iterate changes ends the run at once (it ran to max_iter, offering
    # claims the referee refused alike), and the result says why
    assert res.n_iter < ok.n_iter + 5
    assert res.extra["failure"].startswith("the referee refuses every claim of this run")
    assert res.extra["refuted"] in res.extra["failure"]
    with pytest.warns(mk.ConvergenceWarning, match="without its claim: the referee refuses"):
        mk.solve(K, y, solver=solver, kernel="precomputed", max_iter=300, warn=True)


@pytest.mark.parametrize("solver", ["fista", "fista_svm", "dcd"])
def test_an_indefinite_kernel_ends_the_run_at_the_first_refused_claim(solver):
    """A callable kernel that is not PSD on the data (sigmoid): the referee's Cholesky
    test refuses the first claim with a lasting verdict, and the run ends there with the
    reason, not at max_iter after one refused claim per halving of the bound."""
    from sklearn.metrics.pairwise import sigmoid_kernel

    from marginkit.kernels.builtin import RBFKernel
    from marginkit.solvers.svm import _kernel_certificate as KC

    X, y = _data(n=120)
    kernel = lambda A, B: sigmoid_kernel(A, B, gamma=0.5, coef0=1.0)  # noqa: E731
    assert np.linalg.eigvalsh(kernel(X, X))[0] < -1.0
    res = mk.solve(X, y, solver=solver, kernel=kernel, max_iter=5000)
    assert res.status == "max_iter" and res.n_iter < 500
    assert "kernel is PSD on this data" in res.extra["failure"]
    assert res.certificate is None and res.kernel.name == "callable"
    # the verdict itself: lasting for the kernel, not for a claim refused on its numbers
    cert = KC.KernelCertifiedPointsCertificate(
        value=0.1, mask=np.ones(120, bool), r=np.zeros(120), gamma=1.0, mu=0.5,
        formulation="hsvm", intercept=0.0, kernel=res.kernel)
    verdict = cert.check(X, y)
    assert not verdict and verdict.lasting
    rbf = KC.KernelCertifiedPointsCertificate(
        value=0.1, mask=np.ones(120, bool), r=np.zeros(120), gamma=1.0, mu=0.5,
        formulation="hsvm", intercept=0.0, kernel=RBFKernel(gamma=G))
    verdict = rbf.check(X, y)
    assert not verdict and not verdict.lasting


@pytest.mark.parametrize("solver", ["fista", "fista_svm"])
def test_a_held_gram_matrix_is_filled_within_the_budget(solver):
    import tracemalloc

    rng = np.random.default_rng(0)
    n = 1500
    X = rng.normal(size=(n, 8))
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=n) > 0, 1, -1)
    budget = 25e6  # K: 8 n^2 = 18 MB, held, with blocks of the 7 MB left
    tracemalloc.start()
    try:
        res = mk.solve(X, y, solver=solver, kernel="rbf", kernel_params={"gamma": 0.1},
                       C=1.0, memory_budget=budget)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert res.extra["gram"] == "held" and res.status == "certified"
    # the first product once filled all n rows in one float64 block beside K (and its
    # symmetry check several more n x n temporaries): about 4.5x the budget here; now K,
    # one block of rows, the kernel's own temporaries for it and the symmetry checks
    assert peak < 2.0 * budget, peak / budget


@pytest.mark.parametrize("solver", ["fista", "fista_svm"])
def test_an_asymmetric_kernel_is_refused_whatever_the_blocks_of_a_held_gram(solver):
    # the held matrix is filled in blocks of the rows the budget leaves room for; pairs
    # in different blocks are compared too (an antisymmetric term between the two halves
    # of X only: blocks of 150 rows each see a symmetric square part)
    rng = np.random.default_rng(1)
    n = 300
    X = rng.normal(size=(n, 3))
    X[:, 2] = np.r_[np.ones(n // 2), np.zeros(n // 2)]
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=n) > 0, 1, -1)

    def k(A, B):
        g, h = A[:, 2:3], B[:, 2:3]
        base = np.exp(-0.5 * ((A[:, None, :2] - B[None, :, :2]) ** 2).sum(-1))
        return base + 1e-3 * (g @ (1 - h).T - (1 - g) @ h.T)

    for budget in (2 * 2**30, 8 * n * n + 8 * n * 150):
        with pytest.raises(ValueError, match="K is not symmetric"):
            mk.solve(X, y, solver=solver, kernel=k, C=1.0, memory_budget=budget)


def test_dcd_bound_counts_the_rounding_of_the_intercept_sum():
    """The fresh bound eps >= ||p(r)|| / mu, p computed exactly (long double) at the
    returned r: with a small kernel diagonal and a large C the float64 sum t = y^T r is
    off by more than the products' rounding term covers (before: eps 2639.267 against
    2639.315, found by review)."""
    from sklearn.metrics.pairwise import rbf_kernel

    LD = np.longdouble
    rng = np.random.default_rng(0)
    n = 300
    X = rng.standard_normal((n, 5))
    y = np.where(X[:, 0] ** 2 + X[:, 1] ** 2 > 1, 1, -1)
    K = rbf_kernel(X, gamma=0.5) * 2.0 ** -90
    C, mu = 1e6, 1e-6
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = mk.solve(K, y, solver="dcd", kernel="precomputed", C=C, mu=mu,
                       bound_check="always")
    assert res.status == "certified" and res.certificate.verify(K, y)
    r = res.dual_coef_
    u = y.astype(LD) * r.astype(LD)
    G = y * (K.astype(LD) @ u + u.sum()) + LD(mu) * r - 1
    p = np.where(r <= 0, np.minimum(G, 0), np.where(r >= C, np.maximum(G, 0), G))
    exact = float(np.sqrt(np.sum(p * p))) / mu
    assert res.certificate.value >= exact
    assert res.certificate.value <= 1.1 * exact  # the sum's worst-case rounding


def test_an_overflow_of_the_products_is_not_a_lasting_refusal():
    """The RBF referee's bound sum_j E_ij |u_j| overflows for some iterates r of data at
    the edge of float64 (|x| ~ 1e153) and not for others: such a refusal depends on r, so
    the run goes on and certifies at a later claim (it ended at the first refusal as if
    the kernel could never pass, found by review)."""
    rng = np.random.default_rng(0)
    n = 200
    X = rng.standard_normal((n, 5))
    y = np.where(X[:, 0] ** 2 + X[:, 1] ** 2 + 0.3 * rng.standard_normal(n) > 1.0, 1, -1)
    s2 = np.finfo(float).max / 222.475
    Xs = X * np.sqrt(s2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = mk.solve(Xs, y, solver="fista", kernel="rbf",
                       kernel_params={"gamma": 0.5 / s2}, C=10.0, mu=1e-3)
    assert "not finite in float64" in res.extra["refuted"]  # a claim was refused so
    assert res.status == "certified" and "failure" not in res.extra
    v = res.certificate.check(Xs, y)
    assert v and not v.lasting
    assert "(lasting)" not in repr(v)


def test_a_refusal_on_columns_that_some_supports_do_not_read_is_not_lasting():
    """One pair of rows whose L1 distance overflows, both of weight 0 (r = 0 there at every
    iterate): a claim whose blocks span every column reads the pair's inf entry, one with a
    larger support (two blocks) does not. The refusal depends on r, so the run goes on and
    certifies (it ended at the first refusal as lasting, found by review)."""
    n, s = 1450, 1e308
    rng = np.random.default_rng(0)
    t = rng.uniform(-0.5, 0.5, n)
    y = np.where(t + 0.1 * rng.standard_normal(n) > 0, 1, -1)
    t[0], t[-1] = -0.95, 0.95
    w = np.ones(n)
    w[0] = w[-1] = 0.0
    X = (t * s)[:, None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = mk.solve(X, y, solver="dcd", kernel="laplacian", kernel_params={"gamma": 4.0 / s},
                       C=1.0, sample_weight=w)
    assert res.status == "certified" and "failure" not in res.extra
    assert res.certificate.check(X, y, sample_weight=w)


def test_kernel_model_scores_are_formed_by_row_blocks(monkeypatch):
    """Found by review: decision_function formed K(X_test, support_) at once (3.35 GiB for
    150,000 test rows against 3,000 support rows). Blocks of rows give the same scores to
    the rounding of the products' sums (whose order BLAS may choose by the block's size),
    dense and CSR, and the same predictions."""
    import scipy.sparse as sp

    from marginkit import _result

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
    res = mk.solve(X, y, solver="dcd", kernel="rbf", kernel_params={"gamma": 0.5}, C=1.0)
    Xt = rng.normal(size=(1000, 4))
    for data in (Xt, sp.csr_matrix(np.where(np.abs(Xt) > 1, Xt, 0.0))):
        whole = res.decision_function(data)
        monkeypatch.setattr(_result, "_SCORE_BLOCK", 7 * res.support_.shape[0] + 3)
        np.testing.assert_allclose(res.decision_function(data), whole, rtol=1e-12, atol=1e-14)
        np.testing.assert_array_equal(res.predict(data), np.where(whole > 0, 1, -1))
        monkeypatch.setattr(_result, "_SCORE_BLOCK", 1)
        np.testing.assert_allclose(res.decision_function(data[:50]), whole[:50], rtol=1e-12,
                                   atol=1e-14)
        monkeypatch.undo()
