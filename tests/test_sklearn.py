"""scikit-learn estimators: the estimator checks, one-vs-rest, validation through Config,
certificates kept in ``result_``, progress and callbacks, pickling."""
import os
import pickle
import re
import sys

import numpy as np
import scipy.sparse as sp
import pytest

pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

import marginkit as mk  # noqa: E402
from marginkit.sklearn import (IteratedTikhonovClassifier, IteratedTikhonovRegressor,  # noqa: E402
                               PerceptronClassifier, SVMClassifier, expected_failed_checks)

sys.path.insert(0, os.path.dirname(__file__))
from _surface_helpers import TOY, ToyPerceptron, register_toy, separable_blobs  # noqa: E402
from _surface_helpers import _State as _ToyState  # noqa: E402

_SOLVERS = set(mk.list_plugins()["solver"])


def _if(solver, est):
    return [est] if solver in _SOLVERS else []


# Estimators with their built-in solvers, as far as those are registered. Defaults are
# the estimators' own (no reduced max_iter): the checks must pass as users get them.
CHECKED = (
    _if("snkp", PerceptronClassifier())
    + _if("isnkpvn", PerceptronClassifier(solver="isnkpvn"))
    + _if("fista", SVMClassifier())
    + _if("dcd", SVMClassifier(solver="auto"))
    + _if("iterated_tikhonov", IteratedTikhonovClassifier())
    + _if("iterated_tikhonov", IteratedTikhonovRegressor())
    + _if("iterated_tikhonov", IteratedTikhonovClassifier(kernel="linear"))
    + _if("iterated_tikhonov", IteratedTikhonovRegressor(kernel="linear"))
)


# the default perceptron runs to max_iter on the checks' overlapping classes
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@parametrize_with_checks(CHECKED, expected_failed_checks=expected_failed_checks)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


@pytest.fixture
def toy():
    return register_toy()


def three_blobs(n=90, seed=0):
    rng = np.random.default_rng(seed)
    centers = np.array([[4.0, 0.0], [-2.0, 3.5], [-2.0, -3.5]])
    y = np.repeat(np.array(["a", "b", "c"]), n // 3)
    X = centers[np.repeat(np.arange(3), n // 3)] + rng.normal(scale=0.6, size=(n, 2))
    return X, y


def test_one_vs_rest_keeps_certificates(toy):
    X, y = three_blobs()
    clf = PerceptronClassifier(solver=TOY).fit(X, y)
    assert list(clf.classes_) == ["a", "b", "c"] and clf.n_features_in_ == 2
    assert isinstance(clf.result_, list) and len(clf.result_) == 3
    assert clf.decision_function(X).shape == (90, 3)
    np.testing.assert_array_equal(clf.predict(X), y)
    for c, res in zip(clf.classes_, clf.result_):
        # each one-vs-rest problem is separable; its certificate is checked from the data
        assert res.status == "separable"
        assert res.certificate.verify(X, (y == c).astype(int))
    assert clf.n_iter_.shape == (3,) and clf.status_ == ["separable"] * 3


def test_binary_labels_and_result(toy):
    X, y01 = separable_blobs(40, seed=3)
    y = np.where(y01 == 1, "yes", "no")
    clf = PerceptronClassifier(solver=TOY, kernel="rbf", kernel_params={"gamma": 0.5}).fit(X, y)
    assert isinstance(clf.result_, mk.Result) and clf.result_.status == "separable"
    assert clf.result_.certificate.verify(X, y)
    d = clf.decision_function(X)
    assert d.shape == (40,)
    np.testing.assert_array_equal(clf.predict(X), np.where(d > 0, "yes", "no"))
    assert clf.score(X, y) == 1.0


def test_parameters_validated_by_config(toy):
    X, y = separable_blobs(20)
    with pytest.raises(ValueError, match="max_iter=0"):
        PerceptronClassifier(solver=TOY, max_iter=0).fit(X, y)
    with pytest.raises(ValueError, match="unknown kernel 'nope'"):
        PerceptronClassifier(solver=TOY, kernel="nope").fit(X, y)
    with pytest.raises(ValueError, match="unknown solver 'nope'"):
        PerceptronClassifier(solver="nope").fit(X, y)
    with pytest.raises(TypeError, match=r"unknown parameter\(s\) \['bogus'\]"):
        PerceptronClassifier(solver=TOY, solver_params={"bogus": 1}).fit(X, y)
    with pytest.raises(ValueError, match="step=-1.0"):
        PerceptronClassifier(solver=TOY, solver_params={"step": -1.0}).fit(X, y)
    with pytest.raises(TypeError, match="solver_params"):
        PerceptronClassifier(solver=TOY, solver_params=[1]).fit(X, y)
    with pytest.raises(TypeError, match="verbose"):
        PerceptronClassifier(solver=TOY, verbose="loud").fit(X, y)


def test_feature_count_and_unfitted_errors(toy):
    from sklearn.exceptions import NotFittedError

    X, y = separable_blobs(20)
    clf = PerceptronClassifier(solver=TOY)
    with pytest.raises(NotFittedError):
        clf.predict(X)
    clf.fit(X, y)
    with pytest.raises(ValueError, match="X has 3 features, but PerceptronClassifier is expecting 2"):
        clf.predict(np.ones((2, 3)))
    with pytest.raises(ValueError, match="one class"):
        clf.fit(X[:5], y[:5])


def test_pickle_and_clone(toy):
    X, y = three_blobs(60, seed=2)
    clf = PerceptronClassifier(solver=TOY, kernel="rbf").fit(X, y)
    back = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(back.decision_function(X), clf.decision_function(X))
    c2 = clone(clf)
    assert not hasattr(c2, "result_") and c2.get_params() == clf.get_params()


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_callback_stops_and_verbose_reports(toy, capsys):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 2))
    y = rng.integers(0, 2, 50)  # random labels: the linear problem is not separable
    seen = []

    def stop_at_5(state):
        seen.append(state.n_iter)
        return state.n_iter >= 5

    clf = PerceptronClassifier(solver=TOY, callback=stop_at_5).fit(X, y)
    assert clf.status_ == "callback" and clf.n_iter_ == 5
    assert seen == [0, 1, 2, 3, 4, 5]
    PerceptronClassifier(solver=TOY, verbose=2, max_iter=3).fit(X, y)
    out = capsys.readouterr().out
    assert out.count(f"[{TOY}] iter") >= 4 and "stopped: max_iter after 3 iterations" in out


@pytest.mark.parametrize("make", [
    lambda: PerceptronClassifier(solver=TOY, progress_bar=True),
    lambda: SVMClassifier(progress_bar=True),
    lambda: IteratedTikhonovClassifier(kernel="linear", progress_bar=True),
    lambda: IteratedTikhonovRegressor(kernel="linear", progress_bar=True),
], ids=["perceptron", "svm", "tikhonov", "tikhonov_regressor"])
def test_estimators_take_progress_bar(toy, make, capsys, monkeypatch):
    """``progress_bar=True`` is ``solve``'s tqdm bar on stderr (one per binary fit), a
    hyper-parameter like any other; without tqdm the fit says how to get it."""
    pytest.importorskip("tqdm")
    if not {"fista", "iterated_tikhonov"} <= _SOLVERS:
        pytest.skip("fista or iterated_tikhonov not registered")
    X, y = three_blobs()
    est = make()
    assert est.get_params()["progress_bar"] is True
    assert clone(est).progress_bar is True
    if isinstance(est, IteratedTikhonovRegressor):
        y = (y == "a").astype(float)
    est.fit(X, y)
    captured = capsys.readouterr()
    assert captured.out == ""
    results = est.result_ if isinstance(est.result_, list) else [est.result_]
    assert all(r.config.progress_bar is True for r in results)
    # one bar per binary fit, each ending with its status
    assert captured.err.count("status=") == len(results)
    assert all(f"status={r.status}" in captured.err for r in results)
    assert type(est)().progress_bar is False
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "tqdm" else real(name, *a))
    with pytest.raises(ValueError, match=r"progress_bar=True needs tqdm.*pip install tqdm"):
        make().fit(X, y)


def test_sparse_and_dense_agree(toy):
    import scipy.sparse as sp

    X, y = three_blobs(60, seed=4)
    d1 = PerceptronClassifier(solver=TOY).fit(X, y).decision_function(X)
    d2 = PerceptronClassifier(solver=TOY).fit(sp.csr_matrix(X), y).decision_function(sp.csr_matrix(X))
    np.testing.assert_allclose(d1, d2, rtol=1e-10, atol=1e-12)


@pytest.mark.skipif("fista" not in _SOLVERS, reason="fista not registered")
def test_svm_classifier_heart_scale_certified():
    X, y = mk.datasets.load_heart_scale()
    clf = SVMClassifier().fit(X, y)
    res = clf.result_
    assert res.certified_mask is not None and res.certified_mask.shape == (270,)
    # certified points are correctly classified by the returned model
    pred = clf.predict(X)
    assert np.all(pred[res.certified_mask] == y[res.certified_mask])
    assert clf.score(X, y) > 0.8


@pytest.mark.skipif("iterated_tikhonov" not in _SOLVERS, reason="iterated_tikhonov not registered")
def test_tikhonov_regressor_fits_smooth_function():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(120, 1))
    y = np.sin(2 * np.pi * X[:, 0]) + 0.05 * rng.normal(size=120)
    reg = IteratedTikhonovRegressor(kernel="rbf", kernel_params={"gamma": 10.0}).fit(X, y)
    assert reg.result_.task == "regression"
    assert reg.score(X, y) > 0.95
    assert reg.predict(X[:5]).shape == (5,)


@pytest.mark.skipif("iterated_tikhonov" not in _SOLVERS, reason="iterated_tikhonov not registered")
def test_tikhonov_losses_match_the_estimator():
    X, y = three_blobs(60, seed=1)
    clf = IteratedTikhonovClassifier(loss="squared", kernel="linear").fit(X, y)
    assert all(r.task == "regression" for r in clf.result_)
    assert clf.score(X, y) == 1.0 and clf.decision_function(X).shape == (60, 3)
    with pytest.raises(ValueError, match="loss='logistic' is a classifier"):
        IteratedTikhonovRegressor(loss="logistic").fit(X, np.arange(60.0))


def test_linear_coef_and_intercept(toy):
    X, y = three_blobs(60, seed=3)
    clf = PerceptronClassifier(solver=TOY).fit(X, y)
    assert clf.coef_.shape == (3, 2) and clf.intercept_.shape == (3,)
    np.testing.assert_allclose(X @ clf.coef_.T + clf.intercept_, clf.decision_function(X),
                               rtol=1e-10, atol=1e-10)
    Xb, yb = separable_blobs(30, seed=1)
    clf = PerceptronClassifier(solver=TOY, fit_intercept=False).fit(Xb, yb)
    assert clf.coef_.shape == (1, 2) and clf.intercept_.tolist() == [0.0]
    np.testing.assert_allclose(Xb @ clf.coef_[0], clf.decision_function(Xb), rtol=1e-10)
    rbf = PerceptronClassifier(solver=TOY, kernel="rbf").fit(Xb, yb)
    assert not hasattr(rbf, "coef_")
    with pytest.raises(AttributeError, match="kernel expansion"):
        rbf.intercept_


# ------------------------------------------------------------------ ConvergenceWarning
from sklearn.exceptions import ConvergenceWarning  # noqa: E402


def _overlapping(n=80, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    return X, (X[:, 0] + rng.normal(size=n) > 0).astype(int)


@pytest.mark.skipif("fista" not in _SOLVERS, reason="fista not registered")
def test_max_iter_without_a_claim_warns_naming_solver_status_and_fix():
    X, y = _overlapping()
    with pytest.warns(ConvergenceWarning,
                      match=r"^SVMClassifier: solver 'fista' stopped with status 'max_iter' "
                            r"after 3 iterations, before its stopping rule certified_points "
                            r"could end it with a claim; raise max_iter \(now 3\)\. The model "
                            r"is the last iterate, with no certificate of its claim"):
        clf = SVMClassifier(solver="fista", max_iter=3).fit(X, y)
    assert clf.status_ == "max_iter"


def test_one_vs_rest_warns_once_naming_the_classes(toy):
    X, y = three_blobs()
    y = y.copy()
    y[:3] = "b"  # class "a" against the rest is no longer separable
    with pytest.warns(ConvergenceWarning) as record:
        PerceptronClassifier(solver=TOY, max_iter=40).fit(X, y)
    assert len(record) == 1
    assert re.match(r"PerceptronClassifier: in 2 of the 3 one-vs-rest fits \(classes "
                    r"\['a', 'b'\]\); class 'a' against the rest: solver 'toy_perceptron' "
                    r"stopped with status 'max_iter' after 40 iterations, before its stopping "
                    r"rule separated could end it with a claim; raise max_iter \(now 40\); "
                    r"the classes may not be separable", str(record[0].message))


@pytest.mark.skipif("iterated_tikhonov" not in _SOLVERS, reason="iterated_tikhonov not registered")
def test_regressor_warns_when_the_newton_decrement_is_not_reached():
    X, _ = _overlapping(40)
    with pytest.warns(ConvergenceWarning,
                      match=r"^IteratedTikhonovRegressor: solver 'iterated_tikhonov' stopped with "
                            r"status 'max_iter' after 1 iterations, before its stopping rule "
                            r"newton_decrement could end it with a claim; raise max_iter "
                            r"\(now 1\); a larger tol \(or lam\) is reached sooner"):
        IteratedTikhonovRegressor(kernel="linear", max_iter=1).fit(X, X[:, 0])


def test_no_warning_when_a_fit_ends_with_its_claim_or_budget(toy):
    import warnings

    X, y = separable_blobs(40)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        assert PerceptronClassifier(solver=TOY).fit(X, y).status_ == "separable"
        # a callback that stops the run is the user's decision, not a failure to converge
        PerceptronClassifier(solver=TOY, callback=lambda s: s.n_iter >= 1).fit(*_overlapping())
        if "pegasos" in _SOLVERS:
            # a fixed number of epochs (no claim to make) ends as planned
            clf = SVMClassifier(solver="pegasos", solver_params={"epochs": 3}).fit(X, y)
            assert clf.status_ == "max_iter"
    if "pegasos" in _SOLVERS:  # ... but not when max_iter cuts its epochs short
        with pytest.warns(ConvergenceWarning, match=r"solver 'pegasos' stopped with status "
                          r"'max_iter' after 2 iterations, before its own stopping rules ended "
                          r"it; raise max_iter \(now 2\)\."):
            SVMClassifier(solver="pegasos", max_iter=2, solver_params={"epochs": 3}).fit(X, y)


@pytest.mark.skipif("isnkpvn" not in _SOLVERS, reason="isnkpvn not registered")
def test_isnkpvn_perceptron_certifies_overlapping_classes_infeasible():
    import warnings

    X, y = _overlapping(200)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        clf = PerceptronClassifier(solver="isnkpvn").fit(X, y)
    # isnkpvn ends with its answer, a checked certificate, well before max_iter
    assert clf.status_ == "infeasible"
    assert clf.n_iter_ < 1000
    Xa = np.hstack([X, np.ones((X.shape[0], 1))])  # the certificate is on [X, 1]
    assert clf.result_.certificate.verify(Xa, y)
    assert not clf.result_.certificate.verify(Xa, np.where(X[:, 0] > 0, 1, 0))


# ------------------------------------------------------------------ probabilities
def _three_overlapping(n=120, seed=0):
    rng = np.random.default_rng(seed)
    centers = np.array([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])
    y = np.repeat(np.array(["a", "b", "c"]), n // 3)
    return centers[np.repeat(np.arange(3), n // 3)] + rng.normal(size=(n, 2)), y


@pytest.mark.skipif("iterated_tikhonov" not in _SOLVERS, reason="iterated_tikhonov not registered")
def test_logistic_tikhonov_probabilities_are_logistic_regressions():
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier

    # t = 1 with an unpenalized intercept is L2-regularized logistic regression with
    # C = 1 / (n lam): the same probabilities, two classes and one-vs-rest normalized
    X, y = _three_overlapping()
    n, lam = X.shape[0], 0.05
    kw = dict(t=1, lam=lam, kernel="linear", solver_params={"fit_intercept": True})
    lr = LogisticRegression(C=1.0 / (n * lam), tol=1e-12, max_iter=10_000)
    for labels, ref in ((y, OneVsRestClassifier(lr)), (y == "a", lr)):
        clf = IteratedTikhonovClassifier(**kw).fit(X, labels)
        ref = clone(ref).fit(X, labels)
        P = clf.predict_proba(X)
        assert P.shape == (n, clf.classes_.size)
        np.testing.assert_allclose(P, ref.predict_proba(X), atol=1e-7)
        np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)
        np.testing.assert_allclose(clf.predict_log_proba(X), np.log(P), rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(clf.classes_[P.argmax(axis=1)], clf.predict(X))


@pytest.mark.skipif("iterated_tikhonov" not in _SOLVERS, reason="iterated_tikhonov not registered")
def test_tikhonov_linear_kernel_fits_an_intercept_by_default():
    from sklearn.linear_model import LogisticRegression, Ridge

    # data away from the origin: a model linear in X without an intercept cannot put its
    # boundary at x0 = 5 (it was 'auto'-less: no intercept for every kernel)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2)) + np.array([5.0, -3.0])
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=300) > 5.0, "up", "down")
    n, lam = X.shape[0], 0.01
    clf = IteratedTikhonovClassifier(t=1, lam=lam, kernel="linear").fit(X, y)
    assert clf.result_.config.solver_params["fit_intercept"] is True
    assert clf.result_.certificate.verify(X, y)
    lr = LogisticRegression(C=1.0 / (n * lam), tol=1e-12, max_iter=10_000).fit(X, y)
    np.testing.assert_allclose(clf.predict_proba(X), lr.predict_proba(X), atol=1e-7)
    none = IteratedTikhonovClassifier(t=1, lam=lam, kernel="linear",
                                      fit_intercept=False).fit(X, y)
    assert none.result_.config.solver_params["fit_intercept"] is False
    assert clf.score(X, y) > 0.9 > none.score(X, y) + 0.1
    # the regressor: t = 1 is ridge regression with alpha = n lam, intercept included
    z = X @ np.array([1.0, -2.0]) + 7.0 + 0.1 * rng.normal(size=n)
    reg = IteratedTikhonovRegressor(t=1, lam=lam, kernel="linear").fit(X, z)
    ridge = Ridge(alpha=n * lam).fit(X, z)
    np.testing.assert_allclose(reg.predict(X), ridge.predict(X), rtol=1e-9, atol=1e-9)
    # other kernels keep Beugnot et al.'s theta(x) without intercept; True asks for one
    # (Nystroem, every row a centre on these few rows)
    Xr, yr = _rings(200)
    assert IteratedTikhonovClassifier(random_state=0).fit(Xr, yr) \
        .result_.config.solver_params["fit_intercept"] is False
    rbf = IteratedTikhonovClassifier(random_state=0, fit_intercept=True).fit(Xr, yr)
    assert rbf.result_.config.solver_params["fit_intercept"] is True
    assert rbf.result_.config.solver_params["n_components"] == 200
    # the spectral filter (closed form, squared loss) has no intercept: "auto" is False
    sf = IteratedTikhonovRegressor(kernel="linear", solver_params={"method": "spectral_filter"})
    assert sf.fit(X, z).result_.config.solver_params["fit_intercept"] is False
    # given twice, the two must agree; solver_params alone decide when it is "auto"
    with pytest.raises(ValueError, match="fit_intercept=True .* one place"):
        IteratedTikhonovClassifier(kernel="linear", fit_intercept=True,
                                   solver_params={"fit_intercept": False}).fit(X, y)
    alone = IteratedTikhonovClassifier(kernel="linear", solver_params={"fit_intercept": False})
    assert alone.fit(X, y).result_.config.solver_params["fit_intercept"] is False
    with pytest.raises(TypeError, match="fit_intercept"):
        IteratedTikhonovClassifier(kernel="linear", fit_intercept=1).fit(X, y)


@pytest.mark.skipif("iterated_tikhonov" not in _SOLVERS, reason="iterated_tikhonov not registered")
def test_log_proba_keeps_confident_predictions_finite():
    X, y = separable_blobs(40, seed=2)
    clf = IteratedTikhonovClassifier(t=1, lam=1e-6, kernel="linear").fit(20.0 * X, y)
    d, L = clf.decision_function(2000.0 * X), clf.predict_log_proba(2000.0 * X)
    far = np.abs(d) > 40  # log sigma(-|d|) = -|d| to double precision there
    assert far.sum() > 30 and np.abs(d).max() > 800  # np.log(predict_proba) gives -inf
    assert np.all(np.isfinite(L))
    np.testing.assert_allclose(L.min(axis=1)[far], -np.abs(d[far]), rtol=1e-12)


def test_probabilities_only_where_the_model_defines_them():
    est = [IteratedTikhonovClassifier(loss="squared"),
           IteratedTikhonovClassifier(solver_params={"loss": "squared"}),
           SVMClassifier(), PerceptronClassifier()]
    for e in est:
        assert not hasattr(e, "predict_proba") and not hasattr(e, "predict_log_proba")
    assert hasattr(IteratedTikhonovClassifier(), "predict_proba")
    with pytest.raises(AttributeError, match="has no attribute 'predict_proba'") as info:
        IteratedTikhonovClassifier(loss="squared").predict_proba
    assert re.search(r"loss='logistic'.*this model has loss='squared'", str(info.value.__cause__))


@pytest.mark.skipif("iterated_tikhonov" not in _SOLVERS, reason="iterated_tikhonov not registered")
def test_probabilities_follow_the_fitted_loss_not_a_later_set_params():
    X, y = _three_overlapping(60)
    clf = IteratedTikhonovClassifier(kernel="linear").fit(X, y)
    clf.set_params(loss="squared")  # not refitted: the fitted model is still logistic
    assert clf.predict_proba(X).shape == (60, 3)
    clf.fit(X, y)
    assert not hasattr(clf, "predict_proba")


@pytest.mark.skipif("fista" not in _SOLVERS, reason="fista not registered")
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_svm_inside_calibrated_classifier_cv():
    from sklearn.calibration import CalibratedClassifierCV

    X, y = _three_overlapping(90, seed=3)
    for method in ("sigmoid", "isotonic"):
        cal = CalibratedClassifierCV(SVMClassifier(), cv=3, method=method).fit(X, y)
        P = cal.predict_proba(X)
        assert P.shape == (90, 3) and list(cal.classes_) == ["a", "b", "c"]
        np.testing.assert_allclose(P.sum(axis=1), 1.0)
        assert cal.score(X, y) > 0.8
        assert all(isinstance(c.estimator, SVMClassifier) for c in cal.calibrated_classifiers_)


# ------------------------------------------------------------------ plug-in instances
def _solver_instance(name, **params):
    return mk.get_plugin("solver", name)(**params)


@pytest.mark.skipif("fista" not in _SOLVERS, reason="fista not registered")
def test_plugin_instances_as_hyper_parameters_clone_and_cross_validate():
    from sklearn.model_selection import GridSearchCV, cross_val_score

    X, y = mk.datasets.load_heart_scale()
    est = SVMClassifier(solver=_solver_instance("fista", C=0.5),
                        kernel=mk.get_plugin("kernel", "linear")())
    deep = est.get_params(deep=True)
    assert deep["solver__C"] == 0.5 and deep["solver__scale"] == "std"
    c = clone(est)
    assert c.solver is not est.solver and c.solver.get_params() == est.solver.get_params()
    scores = cross_val_score(est, X, y, cv=3)
    assert scores.shape == (3,) and scores.mean() > 0.75
    est.set_params(solver__C=2.0)
    assert est.solver.C == 2.0 and est.get_params()["solver__C"] == 2.0
    with pytest.raises(ValueError, match="C=-1.0"):
        est.set_params(solver__C=-1.0)
    assert est.solver.C == 2.0  # a refused value leaves the instance as it was
    grid = GridSearchCV(SVMClassifier(solver=_solver_instance("fista")),
                        {"solver__C": [0.01, 1.0]}, cv=3).fit(X, y)
    assert grid.best_params_["solver__C"] in (0.01, 1.0)
    assert grid.best_estimator_.result_.config.solver.C == grid.best_params_["solver__C"]


@pytest.mark.skipif("fista" not in _SOLVERS, reason="fista not registered")
def test_a_solver_instance_keeps_its_parameters_and_conflicts_are_refused():
    X, y = mk.datasets.load_heart_scale()
    clf = SVMClassifier(solver=_solver_instance("fista", C=0.5, scale=None)).fit(X, y)
    ref = mk.solve(X, y, solver="fista", C=0.5, scale=None)
    np.testing.assert_array_equal(clf.decision_function(X), ref.decision_function(X))
    assert clf.result_.certificate.verify(X, y)
    # the estimator's own hyper-parameter, moved from its default, applies ...
    clf = SVMClassifier(solver=_solver_instance("fista"), C=0.5).fit(X, y)
    assert clf.result_.config.solver_params["C"] == 0.5
    # ... and the same parameter set to two values is an error, not a silent choice
    with pytest.raises(ValueError, match=r"SVMClassifier: C=2.0 is given to the estimator "
                                         r"and C=0.5 to its solver Fista\(C=0.5, .*\); set C "
                                         r"in one place only"):
        SVMClassifier(solver=_solver_instance("fista", C=0.5), C=2.0).fit(X, y)


@pytest.mark.skipif("fista" not in _SOLVERS, reason="fista not registered")
def test_set_params_after_fit_leaves_the_fitted_result_alone():
    X, y = mk.datasets.load_heart_scale()
    clf = SVMClassifier(solver=_solver_instance("fista", C=0.5)).fit(X, y)
    d = clf.decision_function(X)
    clf.set_params(solver__C=0.01)
    res = clf.result_
    assert res.config.solver.C == 0.5
    np.testing.assert_array_equal(clf.decision_function(X), d)
    assert res.certificate.verify(X, y)  # checked with the C it was solved with


@pytest.mark.parametrize("change", [{"intercept_scaling": 10.0}, {"fit_intercept": False}])
def test_the_intercept_column_is_the_fitted_one_after_set_params(change):
    # found by review: predict, coef_ and intercept_ appended the constant column from the
    # current hyper-parameters, so set_params(intercept_scaling=10) after fit gave 41 of 73
    # training points the wrong class while status_ said "separable" (and
    # fit_intercept=False made predict raise a width error)
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 4, size=(80, 2))
    X = X[np.abs(X[:, 0] - 2) > 0.2]
    y = np.where(X[:, 0] > 2, 1, -1)
    clf = PerceptronClassifier(fit_intercept=True, intercept_scaling=1.0).fit(X, y)
    assert clf.status_ == "separable"
    d, coef, b = clf.decision_function(X), clf.coef_.copy(), clf.intercept_.copy()
    clf.set_params(**change)
    np.testing.assert_array_equal(clf.decision_function(X), d)
    np.testing.assert_array_equal(clf.coef_, coef)
    np.testing.assert_array_equal(clf.intercept_, b)
    assert (clf.predict(X) == y).all()
    clf.fit(X, y)  # a new fit takes the new parameters
    assert clf.coef_.shape == (1, 2)


def _stale_csr(kind, rng):
    """(M, canonical): a CSR matrix scipy reads as ``canonical`` whose arrays would mislead a
    pass that reads them directly: ``tail``, entries past indptr[-1]; ``flag``, duplicate
    columns in row 0 under a stale has_canonical_format flag."""
    Xd = rng.normal(size=(30, 6))
    Xd[rng.random(Xd.shape) < 0.3] = 0.0
    M = sp.csr_matrix(Xd)
    if kind == "tail":
        M.data = np.concatenate([M.data, [-50.0, -50.0, -50.0]])
        M.indices = np.concatenate([M.indices, [0, 0, 0]]).astype(M.indices.dtype)
    else:
        assert M.has_canonical_format
        M.indices[:3] = 0  # row 0's first three entries all in column 0
        M.data[:3] = 1e3
        assert M.has_canonical_format  # stale
    return M, sp.csr_matrix(M.toarray())


@pytest.mark.parametrize("kind", ["tail", "flag"])
@pytest.mark.parametrize("make", [lambda: PerceptronClassifier(),
                                  lambda: SVMClassifier(kernel="rbf"),
                                  lambda: IteratedTikhonovClassifier()],
                         ids=["perceptron", "svm_rbf", "tikhonov"])
def test_estimators_read_a_csr_matrix_as_scipy_does(kind, make):
    # found by review: PerceptronClassifier's intercept column (sp.hstack) read entries past
    # indptr[-1] as its values, and gamma="scale" skipped the duplicates under a stale
    # canonical flag: other models than on the same matrix in canonical form, silently
    rng = np.random.default_rng(0)
    M, canonical = _stale_csr(kind, rng)
    before = (M.data.copy(), M.indices.copy())
    y = np.where(canonical.toarray()[:, 1] > 0, 1, -1)
    a, b = make().fit(canonical, y), make().fit(M, y)
    np.testing.assert_array_equal(a.decision_function(canonical), b.decision_function(M))
    np.testing.assert_array_equal(M.data, before[0])  # the caller's arrays untouched
    np.testing.assert_array_equal(M.indices, before[1])


@pytest.mark.parametrize("scaling", [1e39, 1e-46])
def test_an_intercept_scaling_beyond_float32_is_refused_by_name(scaling):
    X = np.random.default_rng(0).normal(size=(20, 3)).astype(np.float32)
    y = np.where(X[:, 0] > 0, 1, -1)
    with pytest.raises(ValueError, match="intercept_scaling=.*float32"):
        PerceptronClassifier(intercept_scaling=scaling).fit(X, y)
    PerceptronClassifier(intercept_scaling=scaling).fit(X.astype(np.float64), y)


@pytest.mark.parametrize("scaling", [0.1, 1e30])
def test_the_intercept_column_is_the_fitted_value_in_any_dtype(scaling):
    # review: a float64 fit predicting float32 X appended float32(intercept_scaling), not
    # the value of the fit (scores off by 2.6e20 at 1e30); a float32 fit records the value
    # float32 holds
    rng = np.random.default_rng(0)
    X = (rng.standard_normal((120, 3)) + 2.0).astype(np.float32).astype(np.float64)
    y = (X[:, 0] + X[:, 1] > 4.0).astype(int)
    for fit_dtype in (np.float64, np.float32):
        est = PerceptronClassifier(intercept_scaling=scaling).fit(X.astype(fit_dtype), y)
        d64 = est.decision_function(X)
        np.testing.assert_array_equal(est.decision_function(X.astype(np.float32)), d64)


def test_an_estimator_fitted_before_the_column_was_recorded_predicts_as_it_did():
    # review: a pickle without _column (fitted before it was recorded) appended the value
    # in float64 on float32 X, not in X's dtype as its fit had
    rng = np.random.default_rng(0)
    X = (rng.standard_normal((120, 3)) + 2.0).astype(np.float32)
    y = (X[:, 0] + X[:, 1] > 4.0).astype(int)
    est = PerceptronClassifier(intercept_scaling=1e30).fit(X, y)
    d = est.decision_function(X)
    old = pickle.loads(pickle.dumps(est))
    del old.__dict__["_column"]  # as an estimator pickled before
    np.testing.assert_array_equal(old.decision_function(X), d)


def test_plugin_set_params_rebuilds_what_the_constructor_derives():
    ny = mk.get_plugin("kernel", "nystroem")(n_components=5, base="rbf",
                                             base_params={"gamma": 0.5})
    ny.set_params(base_params={"gamma": 2.0})
    assert ny.base_kernel.gamma == 2.0
    with pytest.raises(TypeError, match=r"unknown parameter\(s\) \['bogus'\]"):
        ny.set_params(bogus=1)


# ------------------------------------------------------------------ what C means
@pytest.mark.skipif(not {"fista", "fista_svm"} <= _SOLVERS, reason="SVM solvers not registered")
def test_C_is_libsvm_c_and_none_is_the_papers_64_over_n():
    from sklearn.svm import SVC

    X, y = mk.datasets.load_heart_scale()
    Xd, n = X.toarray(), X.shape[0]
    # C=None is C=64/n, the paper's box
    np.testing.assert_array_equal(
        SVMClassifier(random_state=0).fit(X, y).decision_function(X),
        SVMClassifier(C=64.0 / n, random_state=0).fit(X, y).decision_function(X))
    # the box of the dual is LIBSVM's -c: with the perturbation mu made small, the
    # classical formulation on X as given is LIBSVM's model, dual variables included
    clf = SVMClassifier(solver="fista_svm", C=1.0, mu=1e-4, scale=None).fit(Xd, y)
    svc = SVC(kernel="linear", C=1.0, tol=1e-8).fit(Xd, y)
    assert clf.status_ == "certified"
    np.testing.assert_allclose(clf.decision_function(Xd), svc.decision_function(Xd), atol=1e-3)
    r = clf.result_.dual_coef_
    alpha = np.zeros(n)
    alpha[svc.support_] = np.abs(svc.dual_coef_[0])
    assert r.max() <= 1.0 and np.sum(r > 1.0 - 1e-9) == np.sum(alpha > 1.0 - 1e-9)
    np.testing.assert_allclose(r, alpha, atol=1e-2)
    # with the default mu = 1/(2C), the hinge is smoothed over violations up to mu C =
    # 1/2: a different model, which is why the docs say so
    far = SVMClassifier(solver="fista_svm", C=1.0, scale=None).fit(Xd, y)
    assert np.abs(far.decision_function(Xd) - svc.decision_function(Xd)).max() > 0.5


def test_the_estimator_docstrings_say_what_C_means():
    doc = " ".join(SVMClassifier.__doc__.split())
    for phrase in ("LIBSVM's -c", "0 <= r_i <= C", "C=None is the paper's default 64/n",
                   "Huber", "mu=1e-4", "lam = 1/(C n)"):
        assert phrase in doc, phrase


# ------------------------------------------------------------------ pandas input
@pytest.mark.skipif("fista" not in _SOLVERS, reason="fista not registered")
def test_dataframe_input_sets_feature_names_and_checks_them_at_predict():
    import warnings

    pd = pytest.importorskip("pandas")
    X, y = _three_overlapping(60, seed=5)
    df = pd.DataFrame(X, columns=["height", "width"])
    for est in (SVMClassifier(), PerceptronClassifier(kernel="rbf"),
                IteratedTikhonovClassifier(kernel="linear"), IteratedTikhonovRegressor()):
        target = X[:, 0] if isinstance(est, IteratedTikhonovRegressor) else y
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            est.fit(df, pd.Series(target))
        assert est.feature_names_in_.tolist() == ["height", "width"]
        assert est.n_features_in_ == 2
        with pytest.raises(ValueError, match=r"The feature names should match those that were "
                                             r"passed during fit"):
            est.predict(df[["width", "height"]])
        with pytest.raises(ValueError, match="Feature names unseen at fit time:\n- depth"):
            est.predict(df.rename(columns={"width": "depth"}))
        with pytest.warns(UserWarning, match=f"X does not have valid feature names, but "
                                             f"{type(est).__name__} was fitted with feature names"):
            pred = est.predict(X)
        np.testing.assert_array_equal(pred, est.predict(df))
        est.fit(X, target)  # a refit on an array forgets the names
        assert not hasattr(est, "feature_names_in_")


def test_dataframe_of_integers_and_non_string_columns(toy):
    pd = pytest.importorskip("pandas")
    X, y = separable_blobs(30, seed=4)
    Xi = np.round(4 * X).astype(np.int64)
    clf = PerceptronClassifier(solver=TOY).fit(pd.DataFrame(Xi, columns=["a", "b"]), y)
    ref = PerceptronClassifier(solver=TOY).fit(Xi, y)
    np.testing.assert_array_equal(clf.decision_function(pd.DataFrame(Xi, columns=["a", "b"])),
                                  ref.decision_function(Xi))
    # integer column labels are not feature names (scikit-learn's convention)
    clf = PerceptronClassifier(solver=TOY).fit(pd.DataFrame(Xi), y)
    assert not hasattr(clf, "feature_names_in_")


@pytest.mark.skipif("fista" not in _SOLVERS, reason="fista not registered")
def test_stopping_rule_instances_are_copied_at_fit():
    X, y = mk.datasets.load_heart_scale()
    rule = mk.get_plugin("stopping", "certified_points")(fraction=0.5)
    for stop in (rule, [rule]):
        clf = SVMClassifier(stop=stop).fit(X, y)
        rule.set_params(fraction=0.9)
        kept = clf.result_.config.stop
        kept = kept[0] if isinstance(kept, (list, tuple)) else kept
        assert kept is not rule and kept.fraction == 0.5
        assert clf.result_.certificate.verify(X, y)
        rule.set_params(fraction=0.5)


# ------------------------------------------------------------ predict on dask arrays
@pytest.mark.parametrize("make", [
    lambda: SVMClassifier(),
    lambda: IteratedTikhonovClassifier(kernel="linear"),
    lambda: PerceptronClassifier(kernel="linear"),
])
def test_estimators_predict_lazily_on_dask_arrays(make):
    da = pytest.importorskip("dask.array")
    import scipy.sparse
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X, y = X[:400], y[:400] % 3
    est = make().fit(X, y)
    methods = ["decision_function", "predict"]
    if hasattr(est, "predict_proba"):
        methods += ["predict_proba", "predict_log_proba"]
    for Xd in (da.from_array(X, chunks=(150, 32)), da.from_array(scipy.sparse.csr_matrix(X), chunks=(150, 64))):
        for m in methods:
            lazy = getattr(est, m)(Xd)
            assert isinstance(lazy, da.Array), m
            want = getattr(est, m)(X)
            assert lazy.shape == want.shape
            if m == "predict":
                np.testing.assert_array_equal(lazy.compute(), want)
            else:
                np.testing.assert_allclose(lazy.compute(), want, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="X has 10 features, but .* is expecting 64 features"):
        est.predict(da.from_array(X[:, :10], chunks=100))


def test_regressor_predicts_lazily_on_dask_arrays():
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = X @ rng.normal(size=5)
    est = IteratedTikhonovRegressor(kernel="linear").fit(X, y)
    lazy = est.predict(da.from_array(X, chunks=70))
    assert isinstance(lazy, da.Array)
    np.testing.assert_allclose(lazy.compute(), est.predict(X), rtol=1e-12, atol=1e-12)


def test_unfitted_estimator_on_a_dask_array_raises_not_fitted():
    da = pytest.importorskip("dask.array")
    from sklearn.exceptions import NotFittedError

    X = da.from_array(np.ones((10, 3)), chunks=5)
    for m in ("predict", "decision_function"):
        with pytest.raises(NotFittedError):
            getattr(SVMClassifier(), m)(X)
    with pytest.raises(NotFittedError):
        IteratedTikhonovRegressor().predict(X)


# ------------------------------------------------------------------ pegasos and C
@pytest.mark.skipif("pegasos" not in _SOLVERS, reason="pegasos not registered")
def test_pegasos_takes_C_as_lam_one_over_C_n():
    X, y = mk.datasets.load_heart_scale()
    n = X.shape[0]
    clf = SVMClassifier(solver="pegasos", C=1.0, random_state=0).fit(X, y)
    assert clf.result_.config.solver_params["lam"] == pytest.approx(1.0 / n)
    same = SVMClassifier(solver="pegasos", random_state=0,
                         solver_params={"lam": 1.0 / n}).fit(X, y)
    np.testing.assert_array_equal(clf.decision_function(X), same.decision_function(X))
    # C = 64/n is pegasos' own default lam = 1/64
    dflt = SVMClassifier(solver="pegasos", random_state=0).fit(X, y)
    np.testing.assert_array_equal(
        SVMClassifier(solver="pegasos", C=64.0 / n, random_state=0).fit(X, y)
        .decision_function(X), dflt.decision_function(X))
    with pytest.raises(ValueError, match=r"C=1.0 and lam are both given to solver 'pegasos', "
                                         r"whose lam is 1/\(C n\); set one of them"):
        SVMClassifier(solver="pegasos", C=1.0, solver_params={"lam": 0.1}).fit(X, y)
    with pytest.raises(ValueError, match=r"C=1.0 and lam are both given"):
        SVMClassifier(solver=mk.get_plugin("solver", "pegasos")(lam=0.1), C=1.0).fit(X, y)


def test_perceptron_classifier_on_a_precomputed_gram_matrix():
    from sklearn.metrics.pairwise import pairwise_kernels

    rng = np.random.default_rng(6)
    X = rng.standard_normal((60, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    K = pairwise_kernels(X, metric="rbf", gamma=0.5)
    with pytest.raises(ValueError, match=r"fit_intercept=True appends a constant feature to "
                                         r"X, which is the Gram matrix here"):
        PerceptronClassifier(kernel="precomputed").fit(K, y)
    clf = PerceptronClassifier(kernel="precomputed", fit_intercept=False).fit(K, y)
    assert clf.result_.status == "separable" and clf.score(K, y) == 1.0


# ------------------------------------------------------------------ n_components="auto"
from marginkit.sklearn import AUTO_EXACT_ROWS, auto_components  # noqa: E402


def _rings(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    return X, (np.hypot(X[:, 0], X[:, 1]) > 1.1).astype(int)


def test_auto_components_follows_its_rule():
    assert auto_components(AUTO_EXACT_ROWS) is None
    assert auto_components(AUTO_EXACT_ROWS + 1) == 65  # ceil(4 sqrt(257))
    assert auto_components(1437) == 152
    assert auto_components(10**6) == 1000


def test_rbf_gamma_is_svc_scale():
    # "rbf" and "poly" without a gamma: SVC's gamma="scale", 1 / (d X.var()) of the
    # training rows, integer weights counted as repeated rows; mk.solve keeps 1 / d
    import scipy.sparse as sp
    from sklearn.datasets import load_digits
    from sklearn.svm import SVC

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    tr, te = np.arange(0, 1400), np.arange(1400, len(y))
    clf = SVMClassifier(solver="dcd", kernel="rbf", C=1.0).fit(X[tr], y[tr])
    gamma = clf.results_[0].config.kernel_params["gamma"]
    assert gamma == pytest.approx(1.0 / (64 * X[tr].var()), rel=1e-12)
    assert clf.get_params()["kernel_params"] is None  # the estimator's parameter as given
    svc = SVC(C=1.0).fit(X[tr], y[tr])
    assert clf.score(X[te], y[te]) >= svc.score(X[te], y[te]) - 0.01
    # the first one-vs-rest run's certificate, checked under its kernel from the data
    assert clf.results_[0].certificate.verify(X[tr], (y[tr] == clf.classes_[0]).astype(np.int8))
    # CSR rows and weights: the same gamma as dense rows and repeated rows
    sub = np.arange(300)
    w = np.random.default_rng(0).integers(1, 4, sub.size).astype(float)
    reps = np.repeat(sub, w.astype(int))
    a = SVMClassifier(kernel="poly", C=1.0, max_iter=2).fit(sp.csr_matrix(X[sub]), y[sub] % 2,
                                                             sample_weight=w)
    b = SVMClassifier(kernel="poly", C=1.0, max_iter=2).fit(X[reps], y[reps] % 2)
    assert a.result_.config.kernel_params["gamma"] == pytest.approx(
        b.result_.config.kernel_params["gamma"], rel=1e-12)
    # a gamma given, another kernel, or mk.solve: as before
    given = SVMClassifier(kernel="rbf", kernel_params={"gamma": 0.5}, max_iter=2)
    assert given.fit(X[sub], y[sub] % 2).result_.config.kernel_params["gamma"] == 0.5
    lap = SVMClassifier(kernel="laplacian", max_iter=2).fit(X[sub], y[sub] % 2)
    assert not (lap.result_.config.kernel_params or {}).get("gamma")
    # duplicate CSR entries count as their sum, as scipy reads them
    dup = sp.csr_matrix((np.array([1., 1., 3., 1.]), np.array([0, 0, 1, 0]),
                         np.array([0, 2, 3, 4])), shape=(3, 2))
    fit = SVMClassifier(kernel="rbf", solver="dcd", max_iter=2).fit(dup, [0, 1, 0])
    assert fit.result_.config.kernel_params["gamma"] == pytest.approx(1 / (2 * dup.toarray().var()))
    # a constant X gives 1 (its computed spread is rounding); X near float64's limits is
    # refused naming gamma, not run with gamma 0 or inf
    const = SVMClassifier(kernel="poly", kernel_params={"degree": 10}, solver="dcd", max_iter=2)
    assert const.fit(np.full((40, 2), 0.1), y[:40] % 2).result_.config.kernel_params["gamma"] == 1.0
    for f in (1e160, 1e-160):
        with pytest.raises(ValueError, match=r"gamma='scale'.*rescale X or pass kernel_params"):
            SVMClassifier(kernel="rbf", solver="dcd", max_iter=2).fit(X[sub] * f, y[sub] % 2)


@pytest.mark.skipif("iterated_tikhonov" not in _SOLVERS, reason="iterated_tikhonov not registered")
def test_tikhonov_auto_components_nystroem_beyond_the_exact_rows_and_none_is_exact():
    X, y = _rings(400)
    auto = IteratedTikhonovClassifier(random_state=0).fit(X, y)
    assert auto.result_.config.solver_params["n_components"] == auto_components(400) == 80
    assert auto.score(X, y) > 0.9
    # its certificate is checked on the data by the referee (the approximate kernel's problem)
    assert auto.result_.certificate.verify(X, y)
    exact = IteratedTikhonovClassifier(n_components=None, random_state=0).fit(X, y)
    assert exact.result_.config.solver_params.get("n_components") is None
    # the estimator's rbf takes SVC's gamma="scale" (``test_rbf_gamma_is_svc_scale``)
    ref = mk.solve(X, y, solver="iterated_tikhonov", kernel="rbf", t=3, random_state=0,
                   kernel_params=exact.result_.config.kernel_params)
    np.testing.assert_allclose(exact.decision_function(X), ref.decision_function(X),
                               rtol=1e-10, atol=1e-12)
    assert exact.result_.config.solver_params.get("n_components") is None
    # up to AUTO_EXACT_ROWS rows, "auto" is the exact kernel
    small = IteratedTikhonovClassifier(random_state=0).fit(X[:200], y[:200])
    assert small.result_.config.solver_params.get("n_components") is None
    # an explicit size is used as given; the linear kernel is always exact
    m40 = IteratedTikhonovClassifier(n_components=40, random_state=0).fit(X, y)
    assert m40.result_.config.solver_params["n_components"] == 40
    lin = IteratedTikhonovClassifier(kernel="linear").fit(X, y)
    assert lin.result_.config.solver_params.get("n_components") is None
    reg = IteratedTikhonovRegressor(random_state=0).fit(X, X[:, 0] ** 2)
    assert reg.result_.config.solver_params["n_components"] == 80


@pytest.mark.skipif("iterated_tikhonov" not in _SOLVERS, reason="iterated_tikhonov not registered")
def test_tikhonov_auto_components_with_an_intercept_on_few_rows_takes_every_row():
    # the exact kernel has no intercept: up to AUTO_EXACT_ROWS rows, "auto" with
    # fit_intercept=True fits with every row a Nystroem centre (it fit beyond them only)
    X, y = _rings(200)
    clf = IteratedTikhonovClassifier(random_state=0,
                                     solver_params={"fit_intercept": True}).fit(X, y)
    assert clf.result_.config.solver_params["n_components"] == 200
    assert clf.status_ == "converged" and clf.result_.certificate.verify(X, y)
    # every row a centre is the exact kernel's span: without the intercept, its model
    exact = IteratedTikhonovClassifier(n_components=None, random_state=0).fit(X, y)
    full = IteratedTikhonovClassifier(n_components=200, random_state=0).fit(X, y)
    Xt = _rings(50, seed=1)[0]
    np.testing.assert_allclose(full.decision_function(Xt), exact.decision_function(Xt),
                               atol=1e-5)


@pytest.mark.skipif("iterated_tikhonov" not in _SOLVERS, reason="iterated_tikhonov not registered")
def test_tikhonov_n_components_refusals_name_the_argument():
    X, y = _rings(300)
    for bad, err in (("many", ValueError), (0, ValueError), (1.5, TypeError), (True, TypeError)):
        with pytest.raises(err, match="n_components"):
            IteratedTikhonovClassifier(n_components=bad).fit(X, y)
    with pytest.raises(ValueError, match="n_components.*one place"):
        IteratedTikhonovClassifier(n_components=30,
                                   solver_params={"n_components": 20}).fit(X, y)
    # solver_params alone decide when the estimator's is "auto"
    clf = IteratedTikhonovClassifier(solver_params={"n_components": 20}, random_state=0).fit(X, y)
    assert clf.result_.config.solver_params["n_components"] == 20


@pytest.mark.skipif("iterated_tikhonov" not in _SOLVERS, reason="iterated_tikhonov not registered")
def test_tikhonov_one_vs_rest_shares_the_nystroem_features_and_keeps_each_class_result():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X, y = X[:400], y[:400]
    clf = IteratedTikhonovClassifier(random_state=0).fit(X, y)
    assert clf.result_[0].config.solver_params["n_components"] == auto_components(400)
    scores = clf.decision_function(X)
    for j, (c, res) in enumerate(zip(clf.classes_, clf.results_)):
        assert res.extra["features_given"] is True
        own = mk.solve(X, (y == c).astype(np.int8), config=res.config)
        assert "features_given" not in own.extra
        assert (res.status, res.n_iter) == (own.status, own.n_iter)
        assert res.status == "converged"
        assert np.array_equal(res.support_, own.support_)  # the same centres
        np.testing.assert_allclose(res.decision_function(X), own.decision_function(X),
                                   rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(scores[:, j], own.decision_function(X),
                                   rtol=1e-12, atol=1e-12)
        assert res.certificate.verify(X, (y == c).astype(np.int8))
    # without a seed: one draw of the centres for the whole fit, every class certified
    free = IteratedTikhonovClassifier().fit(X, y)
    assert all(np.array_equal(r.support_, free.results_[0].support_) for r in free.results_)
    assert all(r.certificate.verify(X, (y == c).astype(np.int8))
               for c, r in zip(free.classes_, free.results_))
    # two classes (one run) and the exact kernel (no centres) take no features
    two = IteratedTikhonovClassifier(random_state=0).fit(X[y < 2], y[y < 2])
    exact = IteratedTikhonovClassifier(n_components=None, random_state=0).fit(X[:150], y[:150])
    assert "features_given" not in two.result_.extra
    assert all("features_given" not in r.extra for r in exact.results_)


# ------------------------------------------------------------------ PerceptronClassifier tol
def _normalized_dual_norm(X, y, p):
    """||p||_G recomputed from the data alone: G_ij = y_i y_j <x_i, x_j> / (|x_i| |x_j|)
    (linear kernel), in float64."""
    Z = X / np.linalg.norm(X, axis=1, keepdims=True) * np.where(y > 0, 1.0, -1.0)[:, None]
    return float(np.linalg.norm(Z.T @ p))


@pytest.mark.skipif("snkp" not in _SOLVERS, reason="snkp not registered")
def test_perceptron_tol_ends_overlapping_data_with_a_checked_infeasibility_certificate():
    import warnings

    X, y = _overlapping(300, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        clf = PerceptronClassifier().fit(X, y)
    assert clf.status_ == "infeasible" and clf.n_iter_ < 2000
    cert = clf.result_.certificate
    Xa = np.hstack([X, np.ones((300, 1))])  # the augmented matrix the solve saw
    assert cert.eps == 1e-3 and cert.verify(Xa, y)
    p = cert.p
    assert p.min() >= 0 and abs(p.sum() - 1) < 1e-12
    assert _normalized_dual_norm(Xa, y, p) <= 1e-3
    # its iterate is still a classifier of the overlapping classes (no claim is made of it)
    assert clf.score(X, y) > 0.7
    # a smaller tol takes longer; tol=None is the solver's own rule only
    fine = PerceptronClassifier(tol=1e-4).fit(X, y)
    assert fine.status_ == "infeasible" and fine.n_iter_ > clf.n_iter_
    with pytest.warns(ConvergenceWarning, match="status 'max_iter'"):
        none = PerceptronClassifier(tol=None, max_iter=clf.n_iter_ + 50).fit(X, y)
    assert none.status_ == "max_iter"


@pytest.mark.skipif("snkp" not in _SOLVERS or "isnkpvn" not in _SOLVERS,
                    reason="snkp/isnkpvn not registered")
def test_perceptron_tol_leaves_separators_and_explicit_rules_alone_and_is_the_certifying_solvers_tolerance():
    X, y = separable_blobs(60)
    assert PerceptronClassifier().fit(X, y).status_ == "separable"
    Xo, yo = _overlapping(200, seed=3)
    with pytest.warns(ConvergenceWarning):  # an explicit stop is the user's: tol is not added
        explicit = PerceptronClassifier(stop="separated", max_iter=30).fit(Xo, yo)
    assert explicit.status_ == "max_iter"
    # the solvers that certify infeasibility with their own rules take tol as their own
    # tolerance (eps of isnkpvn), unless solver_params gives it; tol=None keeps theirs
    a = PerceptronClassifier(solver="isnkpvn", random_state=0).fit(Xo, yo)
    b = PerceptronClassifier(solver="isnkpvn", tol=None, random_state=0).fit(Xo, yo)
    c = PerceptronClassifier(solver="isnkpvn", solver_params={"eps": 1e-6},
                             random_state=0).fit(Xo, yo)
    assert a.status_ == b.status_ == c.status_ == "infeasible"
    assert a.result_.certificate.eps == 1e-3 and a.result_.config.solver_params["eps"] == 1e-3
    assert b.result_.certificate.eps == c.result_.certificate.eps == 1e-6
    assert a.n_iter_ <= b.n_iter_ == c.n_iter_
    Xa = np.hstack([Xo, np.ones((Xo.shape[0], 1))])
    p = a.result_.certificate.p
    # ||p||_G recomputed: the rows y_i x_i / ||x_i|| of the normalized Gram matrix
    Z = Xa * np.where(yo == a.classes_[1], 1.0, -1.0)[:, None]
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    assert np.linalg.norm(Z.T @ p) <= 1e-3 and a.result_.certificate.verify(Xa, yo)
    d = PerceptronClassifier(solver="snkpvn", tol=1e-2).fit(Xo, yo)
    assert d.result_.config.solver_params["delta"] == 1e-2 and d.result_.certificate.eps == 1e-2
    for bad, err in ((0, ValueError), (1.0, ValueError), (-1e-3, ValueError),
                     ("tight", ValueError), ([1e-3], TypeError)):
        with pytest.raises(err, match="tol"):
            PerceptronClassifier(tol=bad).fit(Xo, yo)


class _NormState(_ToyState):
    """The toy perceptron's state with ||p||_G of p = alpha / sum(alpha) (1 at alpha = 0)."""

    @property
    def dual_norm(self):
        s = self.alpha.sum()
        return 1.0 if s <= 0 else float(np.sqrt(max(self.alpha @ self.Ga, 0.0))) / s


class _ToyWithDualNorm(ToyPerceptron):
    """A third-party solver that provides ``dual_norm`` (not ``dual_tol``: it has no
    tolerance of its own) and certifies the claim "infeasible" in ``finalize``."""

    provides = ("min_margin", "dual_norm")

    def start(self, problem):
        state = super().start(problem)
        return _NormState(state.G, state.step_size)

    def finalize(self, problem, state, status):
        from marginkit.certificates import InfeasibilityCertificate
        from marginkit.stopping import DualCertificate

        out = super().finalize(problem, state, status)
        if status == "infeasible":
            eps = max(r.params["eps"] for r in problem.stop if isinstance(r, DualCertificate))
            out["certificate"] = InfeasibilityCertificate(
                state.alpha / state.alpha.sum(), state.dual_norm, eps, problem.kernel,
                problem.classes_)
        return out


def test_tol_auto_and_an_explicit_tol_that_cannot_act(toy):
    """``tol="auto"`` (the default) adds dual_certificate(eps=1e-3) where the solver
    provides ``dual_norm``, and leaves a solver without it to its own rules; an explicit
    tol acts, or is refused with what to do instead, never silently ignored."""
    X, y = three_blobs()
    assert PerceptronClassifier().tol == "auto"
    a = PerceptronClassifier(solver=TOY).fit(X, y)
    b = PerceptronClassifier(solver=TOY, tol=None).fit(X, y)
    assert [r.config.stop for r in a.result_] == [r.config.stop for r in b.result_]
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    with pytest.raises(ValueError, match=r"tol=0\.001 .*dual_certificate.*reads dual_norm"
                                         r".*'toy_perceptron' does not provide.*tol=None"):
        PerceptronClassifier(solver=TOY, tol=1e-3).fit(X, y)
    # a plug-in with dual_norm only (no dual_tol: the rule's eps is tol): tol works
    mk.register("solver", "toy_dual_norm", overwrite=True)(_ToyWithDualNorm)
    Xo, yo = _overlapping(200, seed=3)
    clf = PerceptronClassifier(solver="toy_dual_norm", tol=0.1).fit(Xo, yo)
    Xa = np.hstack([Xo, np.ones((200, 1))])
    assert clf.status_ == "infeasible" and clf.n_iter_ <= 100
    assert clf.result_.certificate.eps == 0.1 and clf.result_.certificate.verify(Xa, yo)
    # an explicit tol beside rules that already decide: refused, naming the alternative
    with pytest.raises(ValueError, match=r"tol=0\.01 adds a rule to the solver's default "
                                         r"rules.*\('dual_certificate', \{'eps': 0\.01\}\)"):
        PerceptronClassifier(solver="toy_dual_norm", stop="separated", tol=0.01).fit(Xo, yo)
    if "isnkpvn" in _SOLVERS:
        # isnkpvn's own tolerance is tol, unless given already (then a number is refused)
        assert PerceptronClassifier(solver="isnkpvn", tol=0.01).fit(Xo, yo) \
            .result_.certificate.eps == 0.01
        given = (r"tol=0\.01: the own tolerance on \|\|p\|\|_G of solver 'isnkpvn' \(eps\) "
                 r"is given already, in solver_params or on the solver instance: set "
                 r"eps=0\.01 there, or pass tol=None or 'auto' to keep it")
        with pytest.raises(ValueError, match=given):
            PerceptronClassifier(solver="isnkpvn", tol=0.01,
                                 solver_params={"eps": 1e-4}).fit(Xo, yo)
        isnkpvn = mk.get_plugin("solver", "isnkpvn")
        with pytest.raises(ValueError, match=given):
            PerceptronClassifier(solver=isnkpvn(eps=1e-4), tol=0.01).fit(Xo, yo)
        # an instance at the default eps takes tol; the same tol given twice is no conflict
        assert PerceptronClassifier(solver=isnkpvn(), tol=0.01).fit(Xo, yo) \
            .result_.certificate.eps == 0.01
        assert PerceptronClassifier(solver="isnkpvn", tol=0.01, solver_params={"eps": 0.01}) \
            .fit(Xo, yo).result_.certificate.eps == 0.01
    # the separating solvers: an eps the user gave them is the rule's too ("auto"), and
    # a different tol is refused rather than one of them ignored
    mine = PerceptronClassifier(solver="snkp", solver_params={"eps": 0.05}).fit(Xo, yo)
    assert mine.status_ == "infeasible" and mine.result_.certificate.eps == 0.05
    with pytest.raises(ValueError, match=r"tol=0\.001: the own tolerance .* 'snkp' \(eps\)"):
        PerceptronClassifier(solver="snkp", tol=1e-3, solver_params={"eps": 0.05}).fit(Xo, yo)

    # a plug-in whose own rules fix their eps: tol cannot set it, and says so
    class _FixedEps(_ToyWithDualNorm):
        default_stop = ("separated", ("dual_certificate", {"eps": 0.05}))

    mk.register("solver", "toy_fixed_eps", overwrite=True)(_FixedEps)
    fixed = PerceptronClassifier(solver="toy_fixed_eps").fit(Xo, yo)  # "auto": its rules
    assert fixed.status_ == "infeasible" and fixed.result_.certificate.eps == 0.05
    with pytest.raises(ValueError, match=r"'toy_fixed_eps' certifies infeasibility with its "
                                         r"own rules \(a dual_certificate rule\) at a "
                                         r"tolerance tol cannot set"):
        PerceptronClassifier(solver="toy_fixed_eps", tol=0.01).fit(Xo, yo)

    # a plug-in whose dual_tol_param names no parameter of it: said so, not ignored
    class _WrongParam(_ToyWithDualNorm):
        dual_tol_param = "epsilon"

    mk.register("solver", "toy_wrong_param", overwrite=True)(_WrongParam)
    with pytest.raises(ValueError, match=r"solver 'toy_wrong_param': "
                                         r"dual_tol_param='epsilon' must name one of its "
                                         r"parameters"):
        PerceptronClassifier(solver="toy_wrong_param").fit(Xo, yo)
    c = PerceptronClassifier(solver="snkp")._config()
    assert any(type(r).__name__ == "DualCertificate" and r.params["eps"] == 1e-3
               for r in c.stop)



@pytest.mark.parametrize("kernel", ["linear", "rbf", "precomputed"])
def test_svm_auto_runs_dcd_on_every_kernel(kernel):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((120, 4))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] > 0, 1, -1)
    Xin = X @ X.T if kernel == "precomputed" else X
    clf = SVMClassifier(solver="auto", kernel=kernel).fit(Xin, y)
    res = clf.results_[0]
    assert res.solver == "dcd"
    assert res.status == "certified" and res.certificate.verify(Xin, y)
    assert clf.score(Xin, y) > 0.9


def test_a_parameter_of_numbers_and_words_says_both_in_its_errors():
    X = np.random.default_rng(0).random((20, 3))
    y = np.r_[np.ones(10), -np.ones(10)]
    accepted = r"a number in \(0, 1\), 'auto' or None"
    for bad, err in ((2.0, ValueError), ("tight", ValueError), (True, TypeError)):
        with pytest.raises(err, match=accepted):
            PerceptronClassifier(tol=bad).fit(X, y)


def test_estimators_take_the_memory_budget_their_refusals_name():
    # a memory refusal says "raise memory_budget": an estimator user can
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 4))
    y = np.where(X[:, 0] > 0, 1, -1)
    for est in (SVMClassifier(solver="dcd", kernel="rbf"),
                IteratedTikhonovClassifier(n_components=None),
                PerceptronClassifier(kernel="rbf", max_iter=50)):
        with pytest.raises(ValueError, match="memory_budget"):
            clone(est).set_params(memory_budget=1e4).fit(X, y)
        clone(est).set_params(memory_budget=1e8).fit(X, y)
        assert est.get_params()["memory_budget"] is None
    with pytest.raises(ValueError, match="memory_budget=-1 is out of range"):
        SVMClassifier(memory_budget=-1).fit(X, y)


def test_a_range_that_must_be_finite_leaves_infinity_out():
    X = np.random.default_rng(0).random((20, 3))
    y = np.r_[np.ones(10), -np.ones(10)]
    with pytest.raises(ValueError, match=r"must be finite \(a number in \(0, inf\)\)"):
        SVMClassifier(memory_budget=np.inf).fit(X, y)


# ------------------------------------------------------- SVMClassifier shares ||Z~||^2
@pytest.mark.skipif("fista" not in _SOLVERS, reason="fista not registered")
@pytest.mark.parametrize("solver", ["fista", "fista_svm"])
@pytest.mark.parametrize("sparse", [False, True])
def test_svm_one_vs_rest_computes_the_gram_norm_once_and_keeps_each_class_result(solver,
                                                                                  sparse):
    import scipy.sparse as sp

    X, y = three_blobs(150, seed=3)
    X = np.hstack([X, np.random.default_rng(0).normal(size=(150, 3))])
    Xf = sp.csr_matrix(X) if sparse else X
    clf = SVMClassifier(solver=solver).fit(Xf, y)
    first = clf.results_[0]
    assert first.extra["lipschitz_method"] in ("gram", "lanczos")
    assert "gram_norm" not in first.config.solver_params
    scores = clf.decision_function(Xf)
    for j, (c, res) in enumerate(zip(clf.classes_, clf.results_)):
        yc = (y == c).astype(np.int8)
        if j:
            # the first run's bound, not recomputed
            assert res.config.solver_params["gram_norm"] == first.extra["gram_norm"]
            assert res.extra["lipschitz_method"] == "given"
        assert res.extra["gram_norm"] == first.extra["gram_norm"]
        # the same run as a solve that computes its own bound
        own = mk.solve(Xf, yc, solver=solver)
        assert own.extra["gram_norm"] == first.extra["gram_norm"]
        assert (res.status, res.n_iter) == (own.status, own.n_iter)
        np.testing.assert_array_equal(res.dual_coef_, own.dual_coef_)
        np.testing.assert_array_equal(scores[:, j], own.decision_function(Xf))
        assert res.status == "certified" and res.certificate.verify(Xf, yc)


@pytest.mark.skipif("fista" not in _SOLVERS, reason="fista not registered")
def test_svm_one_vs_rest_does_not_share_a_trace_that_stood_for_the_gram_norm():
    # a first run whose Lanczos estimate its time limit cut took the trace of Z~^T Z~
    # (a valid, loose bound): the other runs compute their own, not inherit that
    import scipy.sparse as sp

    X = sp.random(120, 3000, density=0.01, format="csr", random_state=1)
    y = np.random.default_rng(9).integers(0, 3, 120)
    clf = SVMClassifier(solver="fista", memory_budget=1e6,
                        stop=[("certified_points", {}), ("time_limit", {"seconds": 1e-9})])
    with pytest.warns(ConvergenceWarning):
        clf.fit(X, y)
    assert [r.status for r in clf.results_] == ["time_limit"] * 3
    assert clf.results_[0].extra["lipschitz_method"] == "trace"
    assert all("gram_norm" not in r.config.solver_params for r in clf.results_)


@pytest.mark.skipif("fista" not in _SOLVERS, reason="fista not registered")
def test_gram_norm_below_the_true_norm_never_gives_a_false_certificate():
    X, y = three_blobs(120, seed=5)
    yb = (y == "a").astype(np.int8)
    X = np.hstack([X, np.random.default_rng(1).normal(size=(120, 6))])  # a loose F-bound
    true = mk.solve(X, yb, solver="fista").extra["gram_norm"]
    for factor in (1.0, 0.9, 0.8):
        res = mk.solve(X, yb, solver="fista", gram_norm=true * factor, max_iter=300)
        assert res.extra["gram_norm"] == true * factor
        if res.certificate is not None:
            assert res.certificate.verify(X, yb)
    # below ||Z~||_F^2 / min(n, d + 1), a lower bound of the norm: not a bound, refused
    with pytest.raises(ValueError, match="gram_norm=.* is below .* a lower bound"):
        mk.solve(X, yb, solver="fista", gram_norm=true * 1e-3)
    with pytest.raises(ValueError, match="gram_norm=0 is below"):
        mk.solve(X, yb, solver="fista", gram_norm=0.0)
    with pytest.raises(ValueError, match="gram_norm"):
        mk.solve(X, yb, solver="fista", gram_norm=-1.0)
    with pytest.raises(ValueError, match="gram_norm.*exact kernel"):
        mk.solve(X, yb, solver="fista", kernel="rbf", gram_norm=true)
    # kernels with a random map draw theirs anew per run: the estimator shares nothing
    clf = SVMClassifier(kernel="rff", kernel_params={"n_components": 20}).fit(X, y)
    assert all("gram_norm" not in r.config.solver_params for r in clf.results_)


@pytest.mark.skipif("fista" not in _SOLVERS, reason="fista not registered")
@pytest.mark.parametrize("X", [np.tile([1.0, 2.0, 3.0], (60, 1)), np.zeros((60, 3))])
def test_svm_one_vs_rest_takes_a_gram_norm_of_zero(X):
    # rows whose standardized features are all zero: fista_svm's ||Z||^2 is 0, a valid
    # bound the other classes take (it was refused as out of range)
    y = np.repeat(["a", "b", "c"], 20)
    clf = SVMClassifier(solver="fista_svm").fit(X, y)
    for res, c in zip(clf.results_, clf.classes_):
        assert type(res.extra["gram_norm"]) is float and res.extra["gram_norm"] == 0.0
        own = mk.solve(X, (y == c).astype(np.int8), solver="fista_svm")
        assert (res.status, res.n_iter) == (own.status, own.n_iter)
        np.testing.assert_array_equal(res.dual_coef_, own.dual_coef_)


@pytest.mark.skipif("fista" not in _SOLVERS, reason="fista not registered")
def test_gram_norm_that_overflows_the_condition_number_is_refused_by_name():
    X, y = three_blobs(60, seed=2)
    with pytest.raises(ValueError, match="gram_norm=1e\\+300 .* overflow"):
        mk.solve(X, (y == "a").astype(np.int8), solver="fista", gram_norm=1e300)


# ------------------------------------------- SVMClassifier reads mostly-zero rows as CSR
def _mostly_zero(n=240, d=30, density=0.15, seed=0, dtype=np.float64, order="C"):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < density)
    y = np.array(["a", "b", "c"])[np.argmax(X[:, :3] + 0.3 * rng.normal(size=(n, 3)), axis=1)]
    return np.asarray(X, dtype=dtype, order=order), y


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("order", ["C", "F"])
def test_sparse_copy_is_scipys_csr_of_the_non_zeros(dtype, order):
    import scipy.sparse as sp

    from marginkit.utils import _sparse

    X, _ = _mostly_zero(dtype=dtype, order=order)
    X[0] = 0.0
    X[1, :5] = -0.0
    before = X.copy()
    S = _sparse.sparse_copy(X)
    ref = sp.csr_matrix(X)
    ref.eliminate_zeros()
    assert S.dtype == X.dtype and S.has_canonical_format
    assert S.indices.dtype == S.indptr.dtype == np.int32
    np.testing.assert_array_equal(S.indptr, ref.indptr)
    np.testing.assert_array_equal(S.indices, ref.indices)
    np.testing.assert_array_equal(S.data, ref.data)
    np.testing.assert_array_equal(X, before)  # the caller's array is not touched
    # blocks of rows: the same copy when X spans several of them
    _sparse._BLOCK_ENTRIES, saved = 64, _sparse._BLOCK_ENTRIES
    try:
        T = _sparse.sparse_copy(X)
    finally:
        _sparse._BLOCK_ENTRIES = saved
    assert (T != S).nnz == 0 and np.array_equal(T.indices, S.indices)
    # denser than a quarter, or a copy beyond the budget: no copy
    assert _sparse.sparse_copy(X, max_density=0.1) is None
    assert _sparse.sparse_copy(X, budget=S.data.nbytes) is None
    assert _sparse.sparse_copy(np.ones((4, 3))) is None
    assert _sparse.sparse_copy(np.zeros((0, 3))) is None


@pytest.mark.skipif("fista" not in _SOLVERS, reason="fista not registered")
@pytest.mark.parametrize("solver", ["fista", "fista_svm", "dcd"])
def test_svm_solves_mostly_zero_dense_rows_as_their_csr_copy(solver, capsys):
    import scipy.sparse as sp

    X, y = _mostly_zero()
    before = X.copy()
    dense = SVMClassifier(solver=solver, random_state=0, verbose=1).fit(X, y)
    assert "CSR copy" in capsys.readouterr().out
    np.testing.assert_array_equal(X, before)
    # the run of the CSR matrix itself, bit for bit
    csr = SVMClassifier(solver=solver, random_state=0).fit(sp.csr_matrix(X), y)
    for a, b, c in zip(dense.results_, csr.results_, dense.classes_):
        assert (a.status, a.n_iter) == (b.status, b.n_iter) == ("certified", a.n_iter)
        np.testing.assert_array_equal(a.dual_coef_, b.dual_coef_)
        # the certificate holds on the caller's dense rows
        assert a.certificate.verify(X, (y == c).astype(np.int8))
    np.testing.assert_array_equal(dense.decision_function(X), csr.decision_function(X))
    # rows denser than a quarter, another kernel, or no room for the copy: X as given
    for est, Xf in ((SVMClassifier(solver=solver, random_state=0), X + 1.0),
                    (SVMClassifier(solver=solver, random_state=0, memory_budget=1.2e4), X)):
        fit = est.fit(Xf, y)
        own = mk.solve(Xf, (y == "a").astype(np.int8), solver=solver, random_state=0,
                       memory_budget=est.memory_budget or 2.0 * 2**30)
        np.testing.assert_array_equal(fit.results_[0].dual_coef_, own.dual_coef_)
    ny = SVMClassifier(solver=solver, random_state=0, kernel="nystroem",
                       kernel_params={"n_components": 10, "random_state": 0}).fit(X, y)
    own = mk.solve(X, (y == "a").astype(np.int8), solver=solver, random_state=0,
                   kernel="nystroem", kernel_params={"n_components": 10, "random_state": 0})
    np.testing.assert_array_equal(ny.results_[0].dual_coef_, own.dual_coef_)
    # the solvers say it (Solver.sparse_rows), not a list of names in the estimator
    assert mk.get_plugin("solver", solver).sparse_rows
    assert not mk.get_plugin("solver", "pegasos").sparse_rows


def test_one_vs_rest_progress_lines_name_their_class(capsys):
    X, y = three_blobs(90, seed=1)
    SVMClassifier(verbose=1).fit(X, y)
    out = capsys.readouterr().out.splitlines()
    heads = [i for i, line in enumerate(out) if "against the rest" in line]
    assert [out[i] for i in heads] == [
        f"SVMClassifier: class {c!r} against the rest ({k} of 3)"
        for k, c in enumerate(["a", "b", "c"], 1)]
    # each one's own progress lines follow it, ending with its "stopped" line
    for i, j in zip(heads, heads[1:] + [len(out)]):
        assert out[i + 1].startswith("[fista] iter") and "stopped" in out[j - 1]
    SVMClassifier(verbose=0).fit(X, y)
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("make", [lambda: SVMClassifier(),
                                  lambda: PerceptronClassifier(solver="perceptron"),
                                  lambda: IteratedTikhonovClassifier(kernel="linear")])
def test_a_refit_that_raises_or_is_interrupted_leaves_the_previous_fit(make):
    from sklearn.datasets import load_digits, load_iris

    Xi, yi = load_iris(return_X_y=True)
    Xd, yd = load_digits(return_X_y=True)
    est = make().fit(Xi, yi)
    before = est.decision_function(Xi)

    def stop(state):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        est.set_params(callback=stop).fit(Xd, yd)
    # classes_, n_features_in_ and the results are the first fit's, together
    assert est.n_features_in_ == 4 and list(est.classes_) == [0, 1, 2]
    np.testing.assert_array_equal(est.decision_function(Xi), before)
    with pytest.raises(ValueError):
        est.set_params(callback=None, max_iter=-1).fit(Xd, yd)
    assert est.n_features_in_ == 4
    np.testing.assert_array_equal(est.decision_function(Xi), before)


def test_a_regressor_refit_that_raises_leaves_the_previous_fit():
    from sklearn.datasets import load_iris

    X, _ = load_iris(return_X_y=True)
    est = IteratedTikhonovRegressor(kernel="linear").fit(X, X[:, 0])
    before = est.predict(X)
    def stop(state):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        est.set_params(callback=stop).fit(X[:, :2], X[:, 0])
    assert est.n_features_in_ == 4
    np.testing.assert_array_equal(est.predict(X), before)


@pytest.mark.parametrize("solver", ["snkp", "isnkpvn", "iterated_tikhonov"])
def test_svm_classifier_with_a_solver_of_another_family_names_the_estimator(solver):
    X, y = separable_blobs(40, seed=3)
    # not "unknown parameter 'scale'", a parameter the user never passed
    with pytest.raises(TypeError, match=r"takes no scale.*PerceptronClassifier.*"
                                         r"IteratedTikhonovClassifier"):
        SVMClassifier(solver=solver).fit(X, y)


@pytest.mark.parametrize("est, key", [
    (lambda: SVMClassifier(solver="dcd", C=1.0, solver_params={"C": 0.5}), "C"),
    (lambda: SVMClassifier(mu=0.1, solver_params={"mu": 0.01}), "mu"),
    (lambda: IteratedTikhonovClassifier(kernel="linear", lam=0.1,
                                        solver_params={"lam": 0.01}), "lam"),
])
def test_a_hyper_parameter_set_again_in_solver_params_is_refused(est, key):
    X, y = separable_blobs(40, seed=3)
    with pytest.raises(ValueError, match=rf"{key}=.* is given to the estimator and {key}=.* "
                                         r"in solver_params; set .* in one place only"):
        est().fit(X, y)
    # the same value twice, or solver_params alone, is no conflict
    SVMClassifier(C=0.5, solver_params={"C": 0.5}).fit(X, y)
    assert SVMClassifier(solver_params={"C": 0.5}).fit(X, y).result_.extra["gamma"] == 0.5


def test_tikhonov_auto_components_says_so_with_verbose(capsys):
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    keep = y < 2
    IteratedTikhonovClassifier(verbose=1).fit(X[keep], y[keep])
    out = capsys.readouterr().out
    m = auto_components(int(keep.sum()))
    assert f"approximated by Nystroem with {m} centres" in out
    assert "n_components=None solves with the exact kernel" in out
    IteratedTikhonovClassifier(verbose=0).fit(X[keep], y[keep])
    assert "Nystroem" not in capsys.readouterr().out


def test_pegasos_given_mu_names_its_own_parameters():
    X, y = separable_blobs(40, seed=3)
    with pytest.raises(TypeError, match=r"solver 'pegasos' takes no mu \(its parameters: "
                                        r"\['epochs', 'lam', 'scale'\]\); leave mu at None"):
        SVMClassifier(solver="pegasos", mu=0.1).fit(X, y)


def test_estimators_refuse_missing_labels_by_name():
    """Found by review: a NaT label was a class (and the run's own claim then failed its
    referee), datetime labels with a NaT gave "y has a single class [0]", and pandas' NA
    gave "boolean value of NA is ambiguous". Every missing label is refused as one."""
    pd = pytest.importorskip("pandas")
    from marginkit.sklearn import IteratedTikhonovClassifier, PerceptronClassifier, SVMClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 3))
    day = [np.datetime64("2020-01-01"), np.datetime64("NaT"), np.datetime64("2021-01-01")]
    labels = [(np.array((day * 7)[:20]), "contains NaT"),
              (np.array([1, pd.NA] * 10, dtype=object), "another missing label"),
              (pd.Series(["a", None] * 10), "another missing label")]
    for est in (SVMClassifier(), PerceptronClassifier(), IteratedTikhonovClassifier()):
        for y, message in labels:
            with pytest.raises(ValueError, match=message):
                est.fit(X, y)


def test_a_subclass_with_slots_keeps_its_fitted_state():
    """Review of the one-assignment publication: a subclass keeping fitted state in
    __slots__ lost it (the private copy of a fit and the prediction methods' copy read
    the attribute dictionary only)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = (X[:, 0] > 0).astype(int)

    class Scaled(SVMClassifier):
        __slots__ = ("scale_",)

        def fit(self, X, y, sample_weight=None):
            super().fit(X, y, sample_weight)
            self.scale_ = 2.0
            return self

        def decision_function(self, X):
            return super().decision_function(X) * self.scale_

    class SetInFit(SVMClassifier):
        __slots__ = ("n_calls_",)

        def _fit(self, X, y, sample_weight=None):
            self.n_calls_ = 1
            return super()._fit(X, y, sample_weight)

    est = Scaled().fit(X, y)
    assert est.predict(X).shape == (60,) and est.score(X, y) > 0.9
    assert SetInFit().fit(X, y).n_calls_ == 1


def test_tikhonov_estimators_report_their_linear_model():
    # found by review: IteratedTikhonovClassifier(kernel="linear").coef_ raised
    # AttributeError (it looked for the perceptrons' intercept_scaling column) and the
    # regressor had no coef_ at all, so scikit-learn tools saw no linear model
    from sklearn.linear_model import Ridge

    from marginkit.sklearn import IteratedTikhonovClassifier, IteratedTikhonovRegressor

    X = np.random.default_rng(1).standard_normal((30, 3))
    y = np.sign(X[:, 0] + 0.1)
    clf = IteratedTikhonovClassifier(kernel="linear").fit(X, y)
    assert clf.coef_.shape == (1, 3) and clf.intercept_.shape == (1,)
    np.testing.assert_allclose(X @ clf.coef_.ravel() + clf.intercept_, clf.decision_function(X))
    reg = IteratedTikhonovRegressor(kernel="linear", t=1).fit(X, X[:, 0] + 2.0)
    assert reg.coef_.shape == (3,) and isinstance(reg.intercept_, float)
    np.testing.assert_allclose(X @ reg.coef_ + reg.intercept_, reg.predict(X))
    np.testing.assert_allclose(reg.coef_, Ridge(alpha=1.0).fit(X, X[:, 0] + 2.0).coef_,
                               rtol=1e-6)
    assert not hasattr(IteratedTikhonovRegressor(kernel="rbf").fit(X, X[:, 0]), "coef_")


def test_perceptron_result_reads_x_with_the_intercept_column():
    """What the result_ attribute's doc says (found by review: result_.predict(X) on the
    fit's X refused 2 features for 3, and its certificate did not verify on X): the
    result was solved on X with the intercept column appended."""
    from marginkit.sklearn import PerceptronClassifier

    X, y = mk.datasets.make_separable(100, margin=0.1, random_state=0)[:2]
    est = PerceptronClassifier(intercept_scaling=2.0).fit(X, y)
    Xa = np.hstack([X, np.full((len(X), 1), 2.0)])
    assert est.status_ == "separable" and est.result_.certificate.verify(Xa, y)
    np.testing.assert_array_equal(est.result_.predict(Xa), est.predict(X))
