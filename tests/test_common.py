"""Every registered solver over float32/float64 x dense/CSR on one separable problem.

Checks the shared contract: a known status, a certificate that verifies from the data
alone, predictions on new data, dense == CSR, float32 close to float64, agreement between
solvers on a separable problem, pickling.
"""
import pickle

import numpy as np
import pytest
import scipy.sparse as sp

import marginkit as mk
from marginkit.datasets import make_separable

STATUSES = {"separable", "infeasible", "certified", "converged", "max_iter"}
SOLVERS = [name for name in mk.list_plugins()["solver"]]


def _task(name):
    solver = mk.get_plugin("solver", name)()
    return getattr(solver, "task", "classification")


CLASSIFIERS = [s for s in SOLVERS if _task(s) == "classification"]


@pytest.fixture(scope="module")
def problem():
    X, y, *_ = make_separable(n_samples=60, n_features=5, margin=0.2, random_state=3)
    X_new, y_new, *_ = make_separable(n_samples=20, n_features=5, margin=0.2, random_state=4)
    return X, y, X_new


def _fit(name, X, y):
    return mk.solve(X, y, solver=name, random_state=0, max_iter=5000)


@pytest.mark.parametrize("name", CLASSIFIERS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("fmt", ["dense", "csr"])
def test_solver_contract(problem, name, dtype, fmt):
    X, y, X_new = problem
    Xc = X.astype(dtype)
    if fmt == "csr":
        Xc = sp.csr_matrix(Xc)
    before = Xc.copy()
    res = _fit(name, Xc, y)
    assert res.status in STATUSES, res.status
    assert res.n_iter >= 0 and res.time_s >= 0
    assert res.solver == name
    # the caller's array is untouched
    if fmt == "csr":
        assert (Xc != before).nnz == 0
    else:
        np.testing.assert_array_equal(Xc, before)
    if res.certificate is not None:
        assert res.certificate.verify(Xc, y), (name, res.certificate)
        # the same numbers in float64, dense (a certificate of the float32 data is about
        # those numbers: the SVM check binds the stored model to r on them to float64
        # rounding, which X's own float64 values, off by float32's rounding, exceed)
        same = Xc.toarray() if sp.issparse(Xc) else Xc
        assert res.certificate.verify(np.asarray(same, dtype=np.float64), y)
    pred = res.predict(X_new)
    assert pred.shape == (X_new.shape[0],)
    assert set(np.unique(pred)) <= set(np.unique(y))
    res2 = pickle.loads(pickle.dumps(res))
    np.testing.assert_array_equal(res2.decision_function(X_new), res.decision_function(X_new))


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_dense_and_csr_agree(problem, name):
    X, y, X_new = problem
    rd = _fit(name, X, y)
    rs = _fit(name, sp.csr_matrix(X), y)
    assert rd.status == rs.status and rd.n_iter == rs.n_iter
    np.testing.assert_allclose(rd.decision_function(X_new), rs.decision_function(X_new),
                               rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_float32_close_to_float64(problem, name):
    X, y, X_new = problem
    r64 = _fit(name, X, y)
    r32 = _fit(name, X.astype(np.float32), y)
    assert r32.status == r64.status
    d64 = r64.decision_function(X_new)
    d32 = r32.decision_function(X_new)
    scale = np.abs(d64).max()
    # same iterations up to float32 round-off: the scores agree to float32 accuracy
    assert np.abs(d32 - d64).max() <= 1e-3 * scale + 1e-6


def test_solvers_agree_on_a_separable_problem(problem):
    X, y, _ = problem
    for name in CLASSIFIERS:
        res = _fit(name, X, y)
        # a separable problem: perceptron-type solvers must find a separator; the others
        # must end with a classifier that separates the training data
        if res.status != "separable":
            assert res.status in {"certified", "converged", "max_iter"}, (name, res.status)
        assert res.score(X, y) == 1.0, (name, res.status, res.score(X, y))
