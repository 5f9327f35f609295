"""Sample and class weights: the SVM solvers' per-point boxes gamma_i = C w_i, Pegasos'
weighted hinge loss, the referee of weighted certified-points claims, the estimators'
``class_weight`` / ``sample_weight`` and the refusals (docs/svm.md, section 6,
"Weighted problems"; docs/tikhonov.md, section 1)."""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import marginkit as mk
from marginkit.solvers.svm import CertifiedPointsCertificate
from marginkit.solvers.svm import _projection

SVM_DUAL = ("fista", "fista_svm", "dcd")


def make_problem(n=80, d=4, seed=0, noise=0.4):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * (1.0 + np.arange(d))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] + noise * rng.standard_normal(n) > 0, 1, -1)
    return X, y


def heart(n=None):
    X, y = mk.datasets.load_heart_scale()
    X = X.toarray()
    return (X, y) if n is None else (X[:n], y[:n])


def tampered(cert, **changes):
    new = CertifiedPointsCertificate.__new__(CertifiedPointsCertificate)
    new.__dict__.update(cert.__dict__)
    new.__dict__.update(changes)
    return new


# ------------------------------------------------------------------- the weighted problem
@pytest.mark.parametrize("solver,mu,stop", [
    ("dcd", 1e-6, ("liblinear", {"tol": 1e-9})),
    ("fista", 1e-3, ("certified_points", {"fraction": 0.6})),
    ("fista_svm", 1e-3, ("certified_points", {"fraction": 0.6})),
])
def test_integer_weights_equal_row_repetition(solver, mu, stop):
    # weight 2 = the row twice: the box [0, 2C] of one variable against two in [0, C]
    # (their sum), equal problems as mu -> 0 (the perturbation mu/2 r_i^2 differs)
    X, y = heart(120)
    n = X.shape[0]
    rng = np.random.default_rng(1)
    w = np.ones(n)
    dup = rng.choice(n, 30, replace=False)
    w[dup] = 2.0
    Xr, yr = np.vstack([X, X[dup]]), np.concatenate([y, y[dup]])
    kw = dict(solver=solver, C=0.5, mu=mu, scale=None, stop=stop, max_iter=20000,
              random_state=0)
    a = mk.solve(X, y, sample_weight=w, **kw)
    b = mk.solve(Xr, yr, **kw)
    r_sum = b.dual_coef_[:n].copy()
    r_sum[dup] += b.dual_coef_[n:]
    tol = 1e-5 if solver == "dcd" else 5e-3
    np.testing.assert_allclose(a.dual_coef_, r_sum, atol=tol)
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X), atol=tol)
    # and not the unweighted problem
    c = mk.solve(X, y, **kw)
    assert np.abs(c.dual_coef_ - a.dual_coef_).max() > 10 * tol


@pytest.mark.parametrize("solver", SVM_DUAL)
def test_zero_weight_equals_removal(solver):
    X, y = make_problem(n=90, seed=2)
    w = np.ones(X.shape[0])
    w[::7] = 0.0
    keep = w > 0
    kw = dict(solver=solver, C=0.3, mu=0.05, scale=None,
              stop=("certified_points", {"fraction": 0.7}), max_iter=20000, random_state=0)
    a = mk.solve(X, y, sample_weight=w, **kw)
    b = mk.solve(X[keep], y[keep], **kw)
    assert np.all(a.dual_coef_[~keep] == 0.0)          # box [0, 0]: fixed at 0
    assert not a.certified_mask[~keep].any()            # and never certified
    np.testing.assert_allclose(a.dual_coef_[keep], b.dual_coef_, atol=2e-3)
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X), atol=2e-3)
    assert a.certificate.verify(X, y, sample_weight=w)


@pytest.mark.parametrize("solver", SVM_DUAL + ("pegasos",))
def test_unit_weights_are_the_unweighted_run_bit_for_bit(solver):
    X, y = make_problem(seed=3)
    a = mk.solve(X, y, solver=solver, random_state=0)
    b = mk.solve(X, y, solver=solver, random_state=0, sample_weight=np.ones(len(y)))
    assert np.array_equal(a.coef_, b.coef_) and a.intercept_ == b.intercept_
    assert a.n_iter == b.n_iter
    if a.dual_coef_ is not None:
        assert np.array_equal(a.dual_coef_, b.dual_coef_)
    assert b.extra["weighted"] and "weighted" not in (a.extra or {})


def test_weighted_fista_svm_matches_svc_with_sample_weight(data_dir):
    from sklearn.svm import SVC

    X, y = mk.datasets.load_heart_scale()
    w = np.random.default_rng(3).uniform(0.2, 3.0, X.shape[0])
    svc = SVC(kernel="linear", C=1.0, tol=1e-8).fit(X, y, sample_weight=w)
    res = mk.solve(X, y, solver="fista_svm", C=1.0, mu=1e-4, scale=None, sample_weight=w,
                   stop=("certified_points", {"fraction": 0.5}), max_iter=100000)
    assert res.status == "certified"
    d, ds = res.decision_function(X), svc.decision_function(X)
    assert np.abs(d - ds).max() <= 5e-3 * np.abs(ds).max()
    # the weights matter: the unweighted SVC is far from it
    d0 = SVC(kernel="linear", C=1.0, tol=1e-8).fit(X, y).decision_function(X)
    assert np.abs(d0 - ds).max() > 20 * np.abs(d - ds).max()
    assert res.certificate.verify(X, y, sample_weight=w)


@pytest.mark.parametrize("solver", SVM_DUAL)
def test_default_mu_of_a_weighted_run_depends_on_c_times_w(solver):
    # mu=None is 1/(2 C w_max): C=1 with weights w and C=2 with w/2 are one problem
    X, y = make_problem(seed=4)
    w = np.random.default_rng(4).uniform(0.5, 4.0, len(y))
    kw = dict(solver=solver, random_state=0)
    a = mk.solve(X, y, C=1.0, sample_weight=w, **kw)
    b = mk.solve(X, y, C=2.0, sample_weight=w / 2, **kw)
    assert a.certificate.mu == b.certificate.mu == 0.5 / w.max()
    assert a.status == b.status == "certified" and a.n_iter == b.n_iter
    np.testing.assert_array_equal(a.dual_coef_, b.dual_coef_)
    assert a.certificate.verify(X, y, sample_weight=w)
    assert b.certificate.verify(X, y, sample_weight=w / 2)


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_weighted_referees_name_the_weights(kernel):
    # weights left out, or of another largest weight (another mu=None), or whose mu=None
    # leaves float64's positive range: a rejection that names the weights, never an error
    X, y = make_problem(n=60, seed=8)
    w = np.random.default_rng(8).uniform(0.5, 3.0, len(y))
    res = mk.solve(X, y, solver="dcd", kernel=kernel, C=1.0, sample_weight=w, random_state=0)
    cert = res.certificate
    assert res.status == "certified" and cert.verify(X, y, sample_weight=w)
    v = cert.check(X, y)
    assert not v and "pass its" in v.reason and "sample_weight" in v.reason, v.reason
    v = cert.check(X, y, sample_weight=w / 2)
    assert not v and "largest sample weight" in v.reason, v.reason
    huge = w.copy()
    huge[0] = 1e300
    v = cert.check(X, y, sample_weight=huge)
    assert not v and "largest sample weight, 1e+300" in v.reason, v.reason
    with pytest.raises(ValueError, match=r"C=1e\+200 and the largest sample weight w_max = "
                                         r"1e\+200 .* outside float64's positive range"):
        mk.solve(X, y, solver="dcd", kernel=kernel, C=1e200, sample_weight=np.full(60, 1e200))
    # a certificate of C = 1e30 checked with a weight of 1e300: mu = 0, rejected
    rng = np.random.default_rng(0)
    Xs = np.vstack([rng.normal(3, .3, (30, 2)), rng.normal(-3, .3, (30, 2))])
    ys = np.r_[np.ones(30), -np.ones(30)]
    big = mk.solve(Xs, ys, solver="dcd", kernel=kernel, C=1e30, random_state=0).certificate
    v = big.check(Xs, ys, sample_weight=huge)
    assert not v and "w_max = 1e+300" in v.reason, v.reason


def test_kernel_certified_claim_counts_the_points_of_positive_weight():
    # the solver counts the certifiable points (positive weight); the exact-kernel
    # referee counted all rows and refused every claim of a run with zero weights
    X, y = make_problem(n=120, seed=9, noise=0.1)
    w = np.ones(len(y))
    w[:60] = 0.0
    for kernel in ("linear", "rbf"):
        res = mk.solve(X, y, solver="dcd", kernel=kernel, C=1.0, sample_weight=w,
                       stop=("certified_points", {"fraction": 0.7}), max_iter=3000,
                       random_state=0)
        assert res.status == "certified", kernel
        assert 0.7 * 60 < res.certificate.mask.sum() <= 0.7 * 120
        assert res.certificate.verify(X, y, sample_weight=w)


def test_class_weights_above_two_change_the_model_as_in_svc():
    # with mu = 1/(2C) for every weight a weight above 2 acted on violations wider than
    # w_i / 2 only: {1: 5}, {1: 10} and {1: 100} fit one model, 76 of 270 predictions
    # away from SVC(class_weight={1: 10}). With 1/(2 C w_max) each is near SVC's
    from sklearn.svm import SVC

    from marginkit.sklearn import SVMClassifier

    X, y = mk.datasets.load_heart_scale()
    coefs = []
    for cw in ({1: 5}, {1: 10}, {1: 100}):
        ours = SVMClassifier(solver="fista_svm", C=1.0, class_weight=cw,
                             solver_params={"scale": None}, max_iter=20000).fit(X, y)
        svc = SVC(kernel="linear", C=1.0, class_weight=cw).fit(X, y)
        assert ours.status_ == "certified"
        assert np.count_nonzero(ours.predict(X) != svc.predict(X)) <= 10, cw
        coefs.append(ours.coef_.ravel())
    assert min(np.abs(coefs[i] - coefs[j]).max() for i, j in ((0, 1), (1, 2), (0, 2))) > 0.1


def test_projection_with_per_point_bounds_kkt():
    rng = np.random.default_rng(8)
    for trial in range(20):
        n = int(rng.integers(3, 300))
        y = np.where(rng.random(n) < 0.4, 1.0, -1.0)
        y[0], y[1] = 1.0, -1.0
        v = rng.standard_normal(n) * rng.choice([0.01, 1.0, 50.0])
        box = rng.choice([0.05, 1.0, 10.0]) * rng.uniform(0.0, 3.0, n)
        box[rng.random(n) < 0.1] = 0.0
        box[:2] = np.maximum(box[:2], 0.5)
        r = np.zeros(n)
        lam = _projection.project_box_hyperplane(v, y, box, r)
        assert abs(y @ r) <= 1e-11 * max(1.0, box.sum())
        assert r.min() >= 0 and np.all(r <= box)
        np.testing.assert_allclose(r, np.clip(v - lam * y, 0, box), atol=1e-15)
        for _ in range(5):  # optimality: <v - r, x - r> <= 0 for feasible x
            x = np.zeros(n)
            _projection.project_box_hyperplane(rng.standard_normal(n) * 5, y, box, x)
            assert (v - r) @ (x - r) <= 1e-9 * max(1.0, np.abs(v).max() * box.sum())


def test_pegasos_minimizes_the_weighted_hinge_loss():
    X, y = make_problem(n=200, seed=4, noise=1.0)
    n = X.shape[0]
    ypm = np.where(y == 1, 1.0, -1.0)
    w = np.where(ypm > 0, 3.0, 0.5)
    lam = 1.0 / 64.0

    def objective(res, weights):
        # scale=None: the regularized vector is coef_ itself (the bias is free)
        f = res.decision_function(X)
        return 0.5 * lam * res.coef_.dot(res.coef_) + \
            np.mean(weights * np.maximum(0.0, 1.0 - ypm * f))

    kw = dict(solver="pegasos", scale=None, lam=lam, epochs=300, random_state=0)
    a = mk.solve(X, y, sample_weight=w, **kw)
    b = mk.solve(X, y, **kw)
    assert objective(a, w) < objective(b, w)
    assert objective(b, np.ones(n)) < objective(a, np.ones(n))
    # the weighted model leans to the heavy class
    assert np.mean(a.decision_function(X) > 0) > np.mean(b.decision_function(X) > 0)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("solver", SVM_DUAL)
def test_weighted_runs_over_layouts_and_dtypes(solver, sparse, dtype):
    X, y = heart()
    w = np.random.default_rng(5).uniform(0.0, 2.0, X.shape[0])
    ref = mk.solve(X, y, solver=solver, sample_weight=w, random_state=0)
    Xi = X.astype(dtype)
    Xi = sp.csr_matrix(Xi) if sparse else Xi
    res = mk.solve(Xi, y, solver=solver, sample_weight=w, random_state=0)
    assert res.status == "certified"
    assert res.certificate.verify(Xi, y, sample_weight=w)
    assert not res.certificate.verify(Xi, y)
    atol = 1e-10 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(res.decision_function(X), ref.decision_function(X), atol=atol)
    assert np.all(res.dual_coef_ <= 64.0 / X.shape[0] * w)


# ---------------------------------------------------------------- certificates and referee
@pytest.mark.parametrize("solver", SVM_DUAL)
def test_weighted_certificate_needs_its_weights(solver):
    X, y = make_problem(seed=6)
    w = np.random.default_rng(6).uniform(0.5, 2.0, X.shape[0])
    res = mk.solve(X, y, solver=solver, sample_weight=w, random_state=0)
    cert = res.certificate
    assert res.status == "certified" and cert.weighted and res.extra["weighted"]
    assert cert.check(X, y, sample_weight=w)
    verdict = cert.check(X, y)
    assert not verdict and "pass its weights" in verdict.reason
    # the weights as a list, and the caller's array untouched
    w_copy = w.copy()
    assert cert.verify(X, y, sample_weight=list(w))
    assert np.array_equal(w, w_copy)


@pytest.mark.parametrize("solver", SVM_DUAL)
def test_referee_recomputes_with_the_weights_it_is_given(solver):
    X, y = make_problem(seed=7)
    n = X.shape[0]
    w = np.random.default_rng(7).uniform(0.5, 2.0, n)
    res = mk.solve(X, y, solver=solver, sample_weight=w, random_state=0)
    cert = res.certificate
    # boxes below r: r is infeasible for those weights (the largest weight kept: it
    # sets the default mu, 1/(2 C w_max))
    small = w.copy()
    pos = cert.r > 0
    small[pos] = 0.5 * cert.r[pos] / cert.gamma
    small[np.argmax(w)] = w.max()
    assert np.any(cert.r > small * cert.gamma)
    verdict = cert.check(X, y, sample_weight=small)
    assert not verdict and "boxes" in verdict.reason
    # weights of another largest weight: another mu than the run's
    verdict = cert.check(X, y, sample_weight=w / 2)
    assert not verdict and "mu" in verdict.reason and "not the run's mu" in verdict.reason
    # a certified point given weight 0 cannot be certified (its level is 0)
    i = int(np.flatnonzero(cert.mask & (cert.r == 0.0))[0]) if \
        np.any(cert.mask & (cert.r == 0.0)) else None
    if i is not None:
        zero = w.copy()
        zero[i] = 0.0
        assert not cert.check(X, y, sample_weight=zero)
    # an unweighted certificate checked with weights: recomputed for them
    plain = mk.solve(X, y, solver=solver, random_state=0).certificate
    assert plain.verify(X, y, sample_weight=np.ones(n))
    assert not plain.verify(X, y, sample_weight=np.full(n, 1e-3))


def test_mask_on_a_zero_weight_point_is_rejected():
    X, y = make_problem(seed=8)
    w = np.ones(X.shape[0])
    w[:5] = 0.0
    res = mk.solve(X, y, solver="dcd", sample_weight=w, random_state=0)
    cert = res.certificate
    mask = cert.mask.copy()
    mask[0] = True
    verdict = tampered(cert, mask=mask).check(X, y, sample_weight=w)
    assert not verdict and "level - r_i" in verdict.reason


def test_weighted_result_saves_and_loads(tmp_path):
    X, y = make_problem(seed=9)
    w = np.random.default_rng(9).uniform(0.5, 2.0, X.shape[0])
    res = mk.solve(X, y, solver="fista", sample_weight=w)
    path = tmp_path / "weighted.json"
    res.save(path)
    back = mk.load_result(path)
    assert back.extra["weighted"] is True
    assert back.extra["sample_weight_sum"] == pytest.approx(w.sum())
    assert back.certificate.weighted
    assert back.certificate.verify(X, y, sample_weight=w)
    assert not back.certificate.verify(X, y)


# --------------------------------------------------------------------------- refusals
@pytest.mark.parametrize("weights,exc,match", [
    (lambda n: -np.ones(n), ValueError, "sample_weight must be >= 0; sample 0"),
    (lambda n: np.r_[np.nan, np.ones(n - 1)], ValueError, "sample_weight contains NaN"),
    (lambda n: np.r_[np.inf, np.ones(n - 1)], ValueError, "sample_weight contains NaN or inf"),
    (lambda n: np.zeros(n), ValueError, "zero for every sample"),
    (lambda n: np.ones(n + 1), ValueError, "sample_weight has 81 entries but X has 80 rows"),
    (lambda n: np.ones((n, 2)), ValueError, "sample_weight must be 1-D"),
    (lambda n: np.array(["a"] * n), TypeError, "sample_weight must be numeric"),
    (lambda n: sp.csr_matrix(np.ones((1, n))), TypeError, "sample_weight is sparse"),
])
def test_bad_weights_are_refused(weights, exc, match):
    X, y = make_problem()
    with pytest.raises(exc, match=match):
        mk.solve(X, y, solver="dcd", sample_weight=weights(X.shape[0]))


def test_solvers_without_weights_refuse_them():
    X, y = make_problem()
    w = np.linspace(0.5, 2.0, X.shape[0])
    with pytest.raises(ValueError, match="positive weights do not change whether the data are "
                                         "separable.*PerceptronClassifier"):
        mk.solve(X, y, solver="snkp", sample_weight=w)
    with pytest.raises(ValueError, match="t='auto' .* and method='spectral_filter' .* are not "
                                         "available; pass an integer t"):
        mk.solve(X, y, solver="iterated_tikhonov", kernel="linear", t="auto", sample_weight=w)
    with pytest.raises(ValueError, match="pass an integer t and method='newton'"):
        mk.solve(X, y.astype(float), solver="iterated_tikhonov", loss="squared",
                 kernel="linear", method="spectral_filter", sample_weight=w)
    # all ones: the unweighted problem
    res = mk.solve(X, y, solver="snkp", sample_weight=np.ones(X.shape[0]))
    assert res.status == mk.solve(X, y, solver="snkp").status


def test_dask_input_with_weights_is_refused():
    da = pytest.importorskip("dask.array")
    X, y = make_problem()
    with pytest.raises(TypeError, match="sample_weight is not supported with a dask array"):
        mk.solve(da.from_array(X, chunks=(40, 4)), y, solver="fista",
                 sample_weight=np.ones(X.shape[0]))


# ------------------------------------------------------------------------- estimators
def test_balanced_class_weight_equals_explicit_sample_weights():
    from marginkit.sklearn import SVMClassifier

    X, y = make_problem(n=120, seed=10)
    y = np.where(np.arange(120) < 90, y, 1)  # unbalanced
    classes, counts = np.unique(y, return_counts=True)
    w = (len(y) / (len(classes) * counts))[np.searchsorted(classes, y)]
    a = SVMClassifier(class_weight="balanced", random_state=0).fit(X, y)
    b = SVMClassifier(random_state=0).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X), rtol=1e-12)
    np.testing.assert_allclose(a.sample_weight_, w, rtol=1e-15)
    c = SVMClassifier(class_weight={int(classes[0]): 2.0}, random_state=0).fit(X, y)
    d = SVMClassifier(random_state=0).fit(X, y, sample_weight=np.where(y == classes[0], 2.0, 1.0))
    np.testing.assert_array_equal(c.decision_function(X), d.decision_function(X))
    assert not np.allclose(a.decision_function(X),
                           SVMClassifier(random_state=0).fit(X, y).decision_function(X))


def test_estimator_weights_one_vs_rest_and_zero_rows():
    from marginkit.sklearn import SVMClassifier

    rng = np.random.default_rng(11)
    X = rng.standard_normal((150, 3))
    y = np.argmax(X[:, :3] + 0.3 * rng.standard_normal((150, 3)), axis=1)
    w = rng.uniform(0.0, 2.0, 150)
    w[:10] = 0.0
    clf = SVMClassifier(solver="dcd", random_state=0).fit(X, y, sample_weight=w)
    keep = w > 0
    ref = SVMClassifier(solver="dcd", random_state=0).fit(X[keep], y[keep],
                                                          sample_weight=w[keep])
    np.testing.assert_array_equal(clf.decision_function(X), ref.decision_function(X))
    for c, res in zip(clf.classes_, clf.results_):  # every one-vs-rest fit weighted alike
        assert res.extra["weighted"]
        labels = (y[keep] == c).astype(np.int8)
        assert res.certificate.verify(X[keep], labels, sample_weight=w[keep])
        assert not res.certificate.verify(X[keep], labels)


@pytest.mark.parametrize("name", ["fista", "dcd", "fista_svm", "tikhonov", "regressor"])
def test_precomputed_gram_with_zero_weights_drops_rows_and_columns(name):
    # X is K(X, X): a row of weight 0 is removed from both sides, and prediction reads the
    # columns of K(X_new, X_train) of the rows solved
    from sklearn.metrics.pairwise import pairwise_kernels

    from marginkit.sklearn import (IteratedTikhonovClassifier, IteratedTikhonovRegressor,
                                   SVMClassifier)

    X, y = make_problem(n=90)
    Xt = X[:15] + 0.1
    w = np.where(np.arange(90) % 4 == 0, 0.0, 1.0 + (np.arange(90) % 3))
    K = pairwise_kernels(X, metric="rbf", gamma=0.2)
    Kt = pairwise_kernels(Xt, X, metric="rbf", gamma=0.2)
    if name == "tikhonov":
        make = lambda **kw: IteratedTikhonovClassifier(lam=0.1, **kw)
    elif name == "regressor":
        make = lambda **kw: IteratedTikhonovRegressor(lam=0.1, **kw)
    else:
        make = lambda **kw: SVMClassifier(solver=name, C=1.0, **kw)
    pre = make(kernel="precomputed").fit(K, y, sample_weight=w)
    keep = w > 0
    ref = make(kernel="precomputed").fit(K[keep][:, keep], y[keep], sample_weight=w[keep])
    out = pre.predict(Kt) if name == "regressor" else pre.decision_function(Kt)
    want = ref.predict(Kt[:, keep]) if name == "regressor" else ref.decision_function(Kt[:, keep])
    np.testing.assert_array_equal(out, want)
    with pytest.raises(ValueError, match="features"):
        pre.predict(Kt[:, keep])  # K(X_new, X_train) has a column per row given to fit


def test_estimator_refuses_bad_weights():
    from marginkit.sklearn import SVMClassifier

    X, y = make_problem()
    with pytest.raises(ValueError, match="Negative values in data passed to `?sample_weight"):
        SVMClassifier().fit(X, y, sample_weight=-np.ones(len(y)))
    with pytest.raises(ValueError, match="class_weight='heavy' must be None, 'balanced' or a dict"):
        SVMClassifier(class_weight="heavy").fit(X, y)
    w = np.where(y == 1, 1.0, 0.0)
    with pytest.raises(ValueError, match="samples of positive weight are of one class"):
        SVMClassifier().fit(X, y, sample_weight=w)
    # three classes, one of them weighted 0 throughout: its one-vs-rest problem has no
    # positive sample
    y3 = np.where(np.arange(len(y)) % 5 == 0, 2, y)
    with pytest.raises(ValueError, match=r"class\(es\) \[2\] have no sample of positive weight"):
        SVMClassifier(class_weight={2: 0.0}).fit(X, y3)


def test_perceptron_weights_only_select_rows():
    from marginkit.sklearn import PerceptronClassifier

    X, y = make_problem(n=60, seed=12, noise=0.0)
    w = np.random.default_rng(12).uniform(0.5, 3.0, len(y))
    a = PerceptronClassifier(random_state=0).fit(X, y, sample_weight=w)
    b = PerceptronClassifier(random_state=0).fit(X, y)
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    w[:6] = 0.0
    c = PerceptronClassifier(random_state=0).fit(X, y, sample_weight=w)
    d = PerceptronClassifier(random_state=0).fit(X[6:], y[6:])
    np.testing.assert_array_equal(c.decision_function(X), d.decision_function(X))
    # its certificates: positive weights check the same claim, zeros are refused
    Xa = np.hstack([X, np.ones((len(y), 1))])  # fit_intercept's column
    cert = b.result_.certificate
    assert cert.verify(Xa, y, sample_weight=np.full(len(y), 2.0))
    assert not cert.verify(Xa, y, sample_weight=w)
    # check takes the weights as every kind's does (it had no sample_weight: TypeError)
    assert cert.check(Xa, y, sample_weight=np.full(len(y), 2.0))
    v = cert.check(Xa, y, sample_weight=w)
    assert not v and "X[w > 0]" in v.reason
    v = cert.check(Xa, y, sample_weight=np.full(len(y), np.nan))
    assert not v and "sample_weight" in v.reason
    assert not cert.check(Xa, y, sample_weight=np.ones(len(y) - 1))
    Xn = Xa.copy()
    Xn[1, 0] = np.nan
    with pytest.raises(ValueError, match="X contains NaN"):
        cert.check(Xn, y, sample_weight=np.full(len(y), np.nan))  # X first
    # then labels outside the classes, before the weights (found by review)
    with pytest.raises(ValueError, match="not among the run's classes"):
        cert.verify(Xa, np.where(y > 0, 7, y), sample_weight=w)


# --------------------------------------------------------------------- iterated Tikhonov
def test_weighted_logistic_tikhonov_is_weighted_logistic_regression():
    from sklearn.linear_model import LogisticRegression

    X, y = make_problem(n=300, d=5, seed=13, noise=1.0)
    n, lam = X.shape[0], 1e-2
    w = np.random.default_rng(13).uniform(0.0, 3.0, n)
    res = mk.solve(X, y, solver="iterated_tikhonov", kernel="linear", t=1, lam=lam,
                   fit_intercept=True, tol=1e-10, sample_weight=w)
    assert res.status == "converged"
    lr = LogisticRegression(C=1.0 / (n * lam), tol=1e-12, max_iter=10000)
    lr.fit(X, y, sample_weight=w)
    np.testing.assert_allclose(res.coef_, lr.coef_.ravel(), atol=1e-6)
    assert res.intercept_ == pytest.approx(lr.intercept_[0], abs=1e-6)
    plain = mk.solve(X, y, solver="iterated_tikhonov", kernel="linear", t=1, lam=lam,
                     fit_intercept=True, tol=1e-10)
    assert np.abs(plain.coef_ - res.coef_).max() > 1e-2


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_tikhonov_integer_weights_equal_row_repetition(loss):
    # 1/n sum_i w_i loss_i + lam/2 ||.||^2 against 1/N sum over the N repeated rows with
    # lam n / N: the same objective up to the factor n / N
    X, y = make_problem(n=200, d=4, seed=14, noise=1.0)
    y = y if loss == "logistic" else y + 0.3 * X[:, 1]
    n, lam = X.shape[0], 1e-2
    rng = np.random.default_rng(14)
    dup = rng.choice(n, 40, replace=False)
    w = np.ones(n)
    w[dup] = 2.0
    Xr, yr = np.vstack([X, X[dup]]), np.concatenate([y, y[dup]])
    kw = dict(solver="iterated_tikhonov", kernel="linear", loss=loss, t=3, tol=1e-10)
    a = mk.solve(X, y, lam=lam, sample_weight=w, **kw)
    b = mk.solve(Xr, yr, lam=lam * n / Xr.shape[0], **kw)
    assert a.status == b.status == "converged"
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-8)


def test_tikhonov_zero_weight_equals_removal_with_the_default_lam():
    X, y = make_problem(n=150, seed=15, noise=1.0)
    w = np.ones(X.shape[0])
    w[::5] = 0.0
    keep = w > 0
    kw = dict(solver="iterated_tikhonov", kernel="linear", t=2, tol=1e-10)
    a = mk.solve(X, y, sample_weight=w, **kw)
    # the default lam 1/n with n rows: 1/n sum_i w_i loss_i + 1/(2n) ||.||^2 has the
    # minimizer of the same objective over the rows kept
    b = mk.solve(X[keep], y[keep], **kw)
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-8)


@pytest.mark.parametrize("kernel,extra", [("linear", {}), ("rbf", {}),
                                          ("rbf", {"n_components": 40})])
def test_weighted_tikhonov_certificate_needs_its_weights(kernel, extra):
    X, y = make_problem(n=120, seed=16, noise=1.0)
    w = np.random.default_rng(16).uniform(0.2, 2.0, X.shape[0])
    res = mk.solve(X, y, solver="iterated_tikhonov", kernel=kernel, t=2, random_state=0,
                   sample_weight=w, **extra)
    cert = res.certificate
    assert res.status == "converged" and cert.weighted and res.extra["weighted"]
    assert cert.verify(X, y, sample_weight=w)
    verdict = cert.check(X, y)
    assert not verdict and "pass its weights" in verdict.reason
    verdict = cert.check(X, y, sample_weight=w * 3.0)
    assert not verdict and "Newton decrement above its target" in verdict.reason
    bad = cert.check(X, y, sample_weight=-w)
    assert not bad and "sample_weight must be >= 0" in bad.reason


def test_weighted_tikhonov_result_saves_and_loads(tmp_path):
    X, y = make_problem(n=100, seed=17)
    w = np.random.default_rng(17).uniform(0.5, 2.0, X.shape[0])
    res = mk.solve(X, y, solver="iterated_tikhonov", kernel="linear", t=2, sample_weight=w)
    res.save(tmp_path / "t.json")
    back = mk.load_result(tmp_path / "t.json")
    assert back.certificate.weighted and back.extra["weighted"]
    assert back.certificate.verify(X, y, sample_weight=w)
    assert not back.certificate.verify(X, y)


def test_tikhonov_estimators_take_weights():
    from marginkit.sklearn import IteratedTikhonovClassifier, IteratedTikhonovRegressor

    X, y = make_problem(n=120, seed=18, noise=1.0)
    y = np.where(np.arange(120) < 100, y, 1)
    classes, counts = np.unique(y, return_counts=True)
    w = (len(y) / (len(classes) * counts))[np.searchsorted(classes, y)]
    a = IteratedTikhonovClassifier(kernel="linear", class_weight="balanced").fit(X, y)
    b = IteratedTikhonovClassifier(kernel="linear").fit(X, y, sample_weight=w)
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X), rtol=1e-12)
    assert a.result_.certificate.verify(X, y, sample_weight=w)
    t = X[:, 0] + 0.1 * X[:, 1]
    sw = np.random.default_rng(18).uniform(0.0, 2.0, 120)
    sw[:7] = 0.0
    reg = IteratedTikhonovRegressor(kernel="linear").fit(X, t, sample_weight=sw)
    ref = IteratedTikhonovRegressor(kernel="linear").fit(X[7:], t[7:], sample_weight=sw[7:])
    np.testing.assert_array_equal(reg.predict(X), ref.predict(X))
    assert reg.result_.certificate.verify(X[7:], t[7:], sample_weight=sw[7:])


def test_weights_out_of_float64_range_end_honestly():
    X, y = make_problem(n=60, seed=19)
    with pytest.raises(ValueError, match="the smallest positive box C w_i .* give those points "
                                         "weight 0"):
        mk.solve(X, y, solver="dcd", sample_weight=np.r_[1e-320, np.ones(59)])
    # data on which the referee's bound overflows (an OverflowError before)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 3))
    y = (X[:, 0] > 0).astype(int)
    with pytest.warns(RuntimeWarning, match="overflows float64"):
        res = mk.solve(X, y, solver="iterated_tikhonov", kernel="linear", t=1,
                       sample_weight=np.full(60, 1e300))
    assert res.status == "max_iter" and res.certificate is None
    assert "overflows float64 (sample weights" in res.extra["failure"]


def test_huge_finite_weights_are_named_not_blamed_on_x_or_c():
    """Found by review: weights of 1e307 each (finite, their sum overflows) gave
    "1 / (3 * nan) ... rescale X" for the estimators' gamma='scale', "C = 2.13e+307 ...
    reduce C" with the default C, and numpy overflow warnings."""
    from marginkit.sklearn import IteratedTikhonovClassifier, SVMClassifier, _variance

    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    w = np.full(30, 1e307)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        # gamma='scale' weighs the rows relative to each other only
        var, _ = _variance(X, w)
        assert var == pytest.approx(X.var(), rel=1e-12)
        svm = r"largest box C w_i = 2.13e\+307 \(C = 2.13 times the largest sample weight " \
              r"1e\+307\).*rescale the weights \(sample_weight, and class_weight"
        with pytest.raises(ValueError, match=svm):
            SVMClassifier().fit(X, y, sample_weight=w)
        with pytest.raises(ValueError, match="fista: the " + svm):
            mk.solve(X, y, solver="fista", sample_weight=w)
        with pytest.raises(ValueError, match=r"dcd: the largest box C w_i = 2.13e\+306"):
            mk.solve(X, y, solver="dcd", sample_weight=w / 10)
        tik = r"iterated_tikhonov: the sample weights sum to more than float64 holds \(largest " \
              r"1e\+307\).*divide the weights \(sample_weight, and class_weight"
        with pytest.raises(ValueError, match=tik):
            IteratedTikhonovClassifier().fit(X, y, sample_weight=w)
        with pytest.raises(ValueError, match=tik):
            IteratedTikhonovClassifier(class_weight={1: 1e307, -1: 1e307}).fit(X, y)
    # weights whose sum is finite but which overflow the Newton system with X
    with pytest.warns(RuntimeWarning, match=r"entries of X or sample weights too large .*"
                                            r"divide the weights \(sample_weight"):
        res = mk.solve(X * 1e150, y, solver="iterated_tikhonov", kernel="linear", t=1,
                       sample_weight=np.full(30, 1e10))
    assert res.status == "max_iter" and "sample weights" in res.extra["failure"]


def test_pegasos_weighted_ball_holds_the_minimizer():
    """Weights c on every point are the unweighted problem with lam / c (the same steps
    eta w_i, the same shrink 1 - eta lam), whose minimizer lies in the ball of radius
    sqrt(c / lam): the weighted run projects on sqrt(mean(w) / lam), not 1/sqrt(lam)
    (which cut off w* and gave another model). c = 4, a power of two: bit for bit."""
    X, y = make_problem(n=257, seed=4, noise=1.0)
    kw = dict(solver="pegasos", random_state=0, epochs=50)
    for c in (4.0, 64.0):
        a = mk.solve(X, y, lam=1.0 / 64.0, sample_weight=np.full(len(y), c), **kw)
        b = mk.solve(X, y, lam=1.0 / 64.0 / c, **kw)
        np.testing.assert_array_equal(a.coef_, b.coef_)
        assert a.intercept_ == b.intercept_


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_a_certificate_checked_on_more_rows_than_its_run_says_so(kernel):
    # a fit drops the rows of weight 0; a check on all the rows used to report the
    # default C = 64/n differing, a consequence rather than the cause
    from marginkit.datasets import load_heart_scale
    from marginkit.sklearn import SVMClassifier

    X, y = load_heart_scale()
    w = np.ones(X.shape[0])
    w[:20] = 0.0
    cert = SVMClassifier(kernel=kernel).fit(X, y, sample_weight=w).result_.certificate
    verdict = cert.check(X, y, sample_weight=w)
    assert not verdict and "a run on 250 rows and X has 270" in verdict.reason
    assert "X[w > 0]" in verdict.reason
    keep = w > 0
    assert cert.verify(X[keep], y[keep], sample_weight=w[keep])


class _BadLength:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


@pytest.mark.parametrize("r", [_BadLength(-1), _BadLength(2**70), range(10**20), "xxxxx",
                               np.zeros((3, 80))])
def test_a_hostile_stored_r_is_rejected_not_raised(r):
    from marginkit.datasets import load_heart_scale

    X, y = load_heart_scale()
    for kernel in ("linear", "rbf"):
        cert = mk.solve(X, y, solver="fista", kernel=kernel, C=1.0).certificate
        cert.r = r
        verdict = cert.check(X, y)
        assert not verdict and not cert.verify(X, y)


@pytest.mark.parametrize("class_weight,match", [
    ({1: float("nan")}, r"class_weight\[1\]=nan"), ({1: -1.0}, r"class_weight\[1\]=-1.0"),
    ({1: "2"}, r"class_weight\[1\]='2'"), ({1: True}, r"class_weight\[1\]=True"),
    ({1: 0, -1: 0}, "every class of y the weight 0"),
    ({1: 0, -1: 0, 7: 1.0}, "every class of y the weight 0"),
    (10 ** 400, "must be None, .balanced.")])
def test_class_weight_values_are_checked_by_name(class_weight, match):
    """Found by review: NaN, negative and all-zero class weights were reported as
    sample_weight's (never passed), a string '2' and True were taken as numbers, and
    class_weight=10**400 was printed in full."""
    from marginkit.sklearn import SVMClassifier

    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    with pytest.raises(ValueError, match=match) as info:
        SVMClassifier(class_weight=class_weight).fit(X, y)
    assert len(str(info.value)) < 300


@pytest.mark.parametrize("solver,kernel", [("dcd", "linear"), ("fista", "linear"),
                                           ("dcd", "rbf")])
def test_a_box_too_small_names_the_users_c(solver, kernel):
    """Found by review: C = 1 with weights from 1e-300 to 1e300 was refused as
    "C = 1e+300" (the largest box C w_max)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = np.sign(X[:, 0] + 0.3 * rng.normal(size=40))
    w = np.ones(40)
    w[:5], w[5:10] = 1e-300, 1e300
    with pytest.raises(ValueError, match=r"smallest positive box C w_i \(C = 1, times"):
        mk.solve(X, y, solver=solver, kernel=kernel, sample_weight=w, C=1.0)


def test_a_class_at_weight_zero_is_certified_by_fista_svm():
    """Found by review: with every point of one class at weight 0 the classical SVM's
    dual has r* = 0; fista_svm's bound asked for a free coordinate to absorb the residual
    of y^T r = 0, which is 0 there, so the bound stayed infinite and the run went to
    max_iter (fista and dcd certify at once)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 5))
    y = np.where(X[:, 0] > 0, 1, -1)
    w = np.where(y > 0, 0.0, 1.0)
    r = mk.solve(X, y, solver="fista_svm", sample_weight=w, C=1.0)
    assert r.status == "certified" and r.n_iter < 100
    assert r.certificate.verify(X, y, sample_weight=w)
    assert not r.certified_mask[y > 0].any()
