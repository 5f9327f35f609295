"""Iterated Tikhonov (paper 002): Newton path, spectral filter, schedule, certificates."""
import re

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose

import marginkit as mk
from marginkit.plugins import Kernel
from marginkit.solvers.tikhonov import (NewtonDecrementCertificate, decrement_schedule,
                                        iterated_tikhonov_filter, spectral_filter_path)


# ----------------------------------------------------------------------------- kernels
class _Linear(Kernel):
    """Private linear kernel (feature map = identity), as the built-in one will be."""

    def feature_map(self, X):
        return X

    def __call__(self, A, B=None):
        B = A if B is None else B
        out = A @ B.T
        return np.asarray(out.toarray() if sp.issparse(out) else out, dtype=np.float64)


class _LinearGram(Kernel):
    """The same kernel without a feature map: forces the representer (Gram) path."""

    def __call__(self, A, B=None):
        B = A if B is None else B
        out = A @ B.T
        return np.asarray(out.toarray() if sp.issparse(out) else out, dtype=np.float64)


class _RBF(Kernel):
    def __init__(self, gamma=0.5):
        super().__init__()
        self.gamma = gamma

    def __call__(self, A, B=None):
        B = A if B is None else B
        A = np.asarray(A, dtype=np.float64)
        B = np.asarray(B, dtype=np.float64)
        d = (A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2 * A @ B.T
        return np.exp(-self.gamma * np.maximum(d, 0.0))


def _classification(n=200, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w = rng.standard_normal(d)
    y = np.where(X @ w + 0.7 * rng.standard_normal(n) > 0, 1, -1)
    return X, y


def _regression(n=150, d=4, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.sin(X[:, 0]) + X[:, 1] + 0.1 * rng.standard_normal(n)
    return X, y


def _solve(X, y, **kw):
    kw.setdefault("kernel", _Linear())
    return mk.solve(X, y, solver="iterated_tikhonov", **kw)


# ----------------------------------------------------------------------------- Tikhonov
@pytest.mark.parametrize("fmt", ["dense", "csr", "fortran"])
def test_t1_equals_sklearn_logistic_regression(fmt):
    linear_model = pytest.importorskip("sklearn.linear_model")
    X, y = _classification()
    n, lam = X.shape[0], 1e-2
    Xf = {"dense": X, "csr": sp.csr_matrix(X), "fortran": np.asfortranarray(X)}[fmt]
    res = _solve(Xf, y, lam=lam, t=1, tol=1e-10)
    clf = linear_model.LogisticRegression(fit_intercept=False, C=1 / (n * lam), tol=1e-12,
                                          max_iter=10_000, solver="newton-cholesky").fit(X, y)
    assert res.status == "converged"
    assert_allclose(res.coef_, clf.coef_.ravel(), atol=1e-6, rtol=0)


def test_intercept_matches_sklearn_unpenalized_intercept():
    linear_model = pytest.importorskip("sklearn.linear_model")
    X, y = _classification(seed=3)
    X = X + 1.5  # an intercept matters
    n, lam = X.shape[0], 1e-2
    res = _solve(X, y, lam=lam, t=1, tol=1e-10, fit_intercept=True)
    clf = linear_model.LogisticRegression(C=1 / (n * lam), tol=1e-12, max_iter=10_000,
                                          solver="newton-cholesky").fit(X, y)
    assert_allclose(res.coef_, clf.coef_.ravel(), atol=1e-6)
    assert_allclose(res.intercept_, clf.intercept_[0], atol=1e-6)
    assert res.certificate.verify(X, y)


def test_a9a_t1_equals_sklearn(data_dir):
    import lzma
    import os

    datasets = pytest.importorskip("sklearn.datasets")
    linear_model = pytest.importorskip("sklearn.linear_model")
    with lzma.open(os.path.join(data_dir, "a9a.xz")) as fh:
        X, y = datasets.load_svmlight_file(fh)
    X = sp.csr_matrix(X)[:5000]
    y = y[:5000]
    n = X.shape[0]
    lam = 1.0 / n
    res = _solve(X, y, lam=lam, t=1, tol=1e-10)
    clf = linear_model.LogisticRegression(fit_intercept=False, C=1 / (n * lam), tol=1e-12,
                                          max_iter=10_000, solver="newton-cholesky").fit(X, y)
    assert_allclose(res.coef_, clf.coef_.ravel(), atol=1e-6)
    assert res.certificate.verify(X, y)


# ----------------------------------------------------------------------------- squared loss
@pytest.mark.parametrize("t", [1, 2, 5])
def test_squared_newton_path_equals_spectral_filter_gram(t):
    X, y = _regression()
    kw = dict(kernel=_RBF(0.5), loss="squared", lam=1e-3, t=t)
    newton = _solve(X, y, **kw)
    filt = _solve(X, y, method="spectral_filter", **kw)
    ref = spectral_filter_path(_RBF(0.5)(X, X), y, 1e-3, t)
    assert newton.task == "regression" and newton.classes_ is None
    assert_allclose(newton.dual_coef_, ref, atol=1e-8 * max(1.0, np.abs(ref).max()))
    assert_allclose(filt.dual_coef_, ref, atol=1e-8 * max(1.0, np.abs(ref).max()))
    # predictions are real values for regression results
    assert_allclose(newton.predict(X), _RBF(0.5)(X, X) @ ref, atol=1e-8)


@pytest.mark.parametrize("t", [1, 3])
def test_squared_newton_path_equals_spectral_filter_primal(t):
    X, y = _regression()
    newton = _solve(X, y, loss="squared", lam=1e-2, t=t)
    filt = _solve(X, y, loss="squared", lam=1e-2, t=t, method="spectral_filter")
    assert_allclose(newton.coef_, filt.coef_, atol=1e-8)


@pytest.mark.parametrize("t", [1, 2, 4])
def test_proximal_steps_equal_refitting_residuals(t):
    """Eq. 3: theta^t = theta^{t-1} + ridge fit of the residuals y - theta^{t-1}(x)."""
    X, y = _regression()
    n, lam = X.shape[0], 1e-2
    res = _solve(X, y, loss="squared", lam=lam, t=t)
    theta = np.zeros(X.shape[1])
    for _ in range(t):
        resid = y - X @ theta
        theta = theta + np.linalg.solve(X.T @ X / n + lam * np.eye(X.shape[1]), X.T @ resid / n)
    assert_allclose(res.coef_, theta, atol=1e-10)
    # the kernel version: beta^t = beta^{t-1} + (K + n lam I)^{-1} (y - K beta^{t-1})
    K = _RBF(0.5)(X, X)
    beta = np.zeros(n)
    for _ in range(t):
        beta = beta + np.linalg.solve(K + n * lam * np.eye(n), y - K @ beta)
    resk = _solve(X, y, kernel=_RBF(0.5), loss="squared", lam=lam, t=t)
    assert_allclose(resk.dual_coef_, beta, atol=1e-8)


def test_filter_qualification_formula():
    s = np.array([0.0, 1e-20, 1e-6, 0.3, 2.0])
    lam, t = 0.1, 3
    direct = np.array([sum((lam / (x + lam)) ** i for i in range(t)) / (x + lam) for x in s])
    assert_allclose(iterated_tikhonov_filter(s, lam, t), direct, rtol=1e-12)


# ----------------------------------------------------------------------------- schedule
def test_schedule_values():
    targets = decrement_schedule(1e-6, 4)
    assert_allclose(targets, 1e-6 * 1.4 ** np.array([-3, -2, -1, 0]) / 4)


@pytest.mark.parametrize("kernel", [_Linear(), _RBF(0.3)])
def test_each_subproblem_meets_its_target(kernel):
    X, y = _classification(n=150)
    t, tol = 5, 1e-7
    res = _solve(X, y, kernel=kernel, lam=1e-2, t=t, tol=tol)
    assert res.status == "converged"
    targets = decrement_schedule(tol, t)
    dec = res.history["prox_decrement"]
    assert dec.shape == (t,) and np.all(dec <= targets)
    assert np.all(res.history["prox_newton_iter"] >= 1)
    assert res.history["prox_newton_iter"].sum() == res.n_iter
    assert res.certificate.kind == "newton_decrement"
    assert res.certificate.value <= targets[-1]
    assert res.certificate.verify(X, y)


def test_proposition1_final_exact_decrement_below_tol():
    """With the schedule, the decrement on the *exact* final subproblem is <= eps."""
    X, y = _classification(n=150, seed=5)
    t, tol, lam = 4, 1e-3, 1e-2
    loose = _solve(X, y, lam=lam, t=t, tol=tol)
    exact_prev = _solve(X, y, lam=lam, t=t - 1, tol=1e-13)
    cert = loose.certificate
    # the last subproblem centred at the exact theta^{t-1}: a chain (theta^{t-1}, theta^t)
    exact = NewtonDecrementCertificate(0.0, tol, "logistic", lam, "primal",
                                       np.array([exact_prev.coef_, cert.coef]), False, _Linear(),
                                       cert.classes, identity_map=True)
    assert exact.recompute(X, y) <= tol


def test_empirical_risk_decreases_with_t():
    X, y = _classification(n=200, seed=2)
    risks = []
    for t in range(1, 6):
        res = _solve(X, y, lam=1e-2, t=t, tol=1e-10)
        risks.append(res.history["prox_empirical_risk"][-1])
        prox = res.history["prox_empirical_risk"]
        assert np.all(np.diff(prox) < 0)
    assert np.all(np.diff(risks) < 0)
    assert_allclose(risks, prox, rtol=1e-8)


def test_custom_schedule_through_the_stopping_plugin():
    X, y = _classification(n=120)
    res = _solve(X, y, lam=1e-2, t=3, stop=[("newton_decrement", {"tol": 1e-4, "kappa": 2.0})])
    targets = decrement_schedule(1e-4, 3, kappa=2.0)
    assert res.status == "converged"
    assert np.all(res.history["prox_decrement"] <= targets)
    assert res.certificate.target == targets[-1]


def test_max_iter_status_gives_no_certificate():
    X, y = _classification(n=120)
    res = _solve(X, y, lam=1e-3, t=3, tol=1e-12, max_iter=2)
    assert res.status == "max_iter" and res.certificate is None
    assert res.history["prox_decrement"][-1] > decrement_schedule(1e-12, 3)[0]


def test_overflowing_data_ends_honestly():
    X, y = _classification(n=30)
    X = X * np.array([1e200] * 15 + [1.0] * 15)[:, None]
    with pytest.warns(RuntimeWarning, match="rescale X"):
        res = _solve(X, y, lam=1e-2, t=2, kernel="linear")
    assert res.status == "max_iter" and res.certificate is None
    assert np.all(np.isfinite(res.coef_)) and res.extra["failure"]
    # a kernel plug-in's blocks are checked: its overflow is refused by name
    with pytest.raises(ValueError, match="kernel plug-in _Linear returned NaN or infinity"):
        _solve(X, y, lam=1e-2, t=2)


# ----------------------------------------------------------------------------- certificate
def test_certificate_rejects_tampered_model():
    X, y = _classification()
    res = _solve(X, y, lam=1e-2, t=2, tol=1e-9)
    assert res.certificate.verify(X, y)
    res.certificate.coef = res.certificate.coef + 1e-3
    assert not res.certificate.verify(X, y)


def test_certificate_rejects_other_labels():
    X, y = _classification()
    res = _solve(X, y, kernel=_RBF(), lam=1e-2, t=2)
    assert res.certificate.verify(X, y)
    assert not res.certificate.verify(X, -y)


# ----------------------------------------------------------------------------- formats
@pytest.mark.parametrize("density", [0.05, 0.3, 1.0])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_weighted_gram_of_csr_rows_is_the_dense_one(density, index_dtype):
    """Phi^T diag(h) Phi of CSR rows, by pairs of non-zeros (sparse rows) or scattered
    into the dense scratch of dsyrk (rows a quarter full or more), equals the dense
    rows' (and numpy's) on rows of every length, h = 0 rows, and a count of rows that is
    not a multiple of the scratch's."""
    from marginkit.solvers.tikhonov import _fast
    from marginkit.utils._rows import row_block

    rng = np.random.default_rng(5)
    n, d = 601, 40
    keep = np.ones(n)
    keep[3] = 0.0  # an empty row
    X = sp.csr_matrix(sp.diags(keep) @ sp.random(n, d, density=density, format="csr",
                                                 random_state=rng))
    X.eliminate_zeros()
    X.sort_indices()
    X.indices = X.indices.astype(index_dtype)
    X.indptr = X.indptr.astype(index_dtype)
    h = rng.uniform(0.0, 0.25, n)
    h[::7] = 0.0
    H, Hd = np.empty((d, d)), np.empty((d, d))
    _fast.weighted_gram(row_block(X), h, H)
    _fast.weighted_gram(row_block(X.toarray()), h, Hd)
    ref = (X.T @ sp.diags(h) @ X).toarray()
    assert_allclose(H, ref, rtol=1e-12, atol=1e-14)
    assert_allclose(H, Hd, rtol=1e-12, atol=1e-14)
    assert np.array_equal(H, H.T)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_rmatvec_of_no_rows_is_zero(dtype):
    # a block's sample of no rows (the preconditioner's, on small chunks): BLAS returns at
    # once on an empty product, and out kept what it held (found by a test: a garbage
    # intercept column in the preconditioner)
    from marginkit.solvers.tikhonov import _fast
    from marginkit.utils._rows import row_block

    for X in (np.empty((0, 5), dtype=dtype), sp.csr_matrix((0, 5), dtype=dtype)):
        out = np.full(5, np.nan)
        _fast.rmatvec(row_block(X), np.empty(0), out)
        assert np.array_equal(out, np.zeros(5))


def test_loss_sums_are_compensated():
    """The solver's loss sums are within about a unit of the exact sum of their terms
    whatever n (a running sum's rounding grows with n): one term of 1e8 and 100,000 of
    order 1, where a running sum loses about 1e-3."""
    import math
    from marginkit.solvers.tikhonov import _fast

    rng = np.random.default_rng(0)
    n = 100_001
    y = np.zeros(n)
    z = rng.uniform(-1.0, 1.0, n)
    z[0] = math.sqrt(2e8)
    terms = 0.5 * z * z
    exact = math.fsum(terms)
    g, h = np.empty(n), np.empty(n)
    for got in (_fast.squared_loss_sum(z, y), _fast.squared_derivatives(z, y, g, h)):
        assert abs(got - exact) <= 2 * np.finfo(float).eps * exact
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    z[0] = -1e8 * y[0]  # a term of 1e8
    m = y * z
    terms = np.where(m > 0, np.log1p(np.exp(-np.abs(m))), -m + np.log1p(np.exp(-np.abs(m))))
    exact = math.fsum(terms)
    for got in (_fast.logistic_loss_sum(z, y), _fast.logistic_derivatives(z, y, g, h)):
        assert abs(got - exact) <= 2 * np.finfo(float).eps * exact
    # an overflowing sum is inf, not the NaN of inf - inf in the compensation (review)
    big, one = np.array([-1e308, -1e308]), np.ones(2)
    assert _fast.logistic_loss_sum(big, one) == np.inf
    assert _fast.squared_loss_sum(np.array([1e200, 1e200]), np.zeros(2)) == np.inf


def test_line_search_takes_full_newton_steps_on_many_rows():
    # a squared loss (Newton's step exact up to CG's residual) on 40,000 rows whose
    # objective is about 9e4: with a running sum the trial objectives' rounding exceeded
    # the line search's slack of 16 units and steps of 1/2 to 1/64 passed or failed at
    # random (18 Newton iterations; found by review); compensated sums take 5-7 (24
    # such problems, 5-8 with a running sum but for this one)
    rng = np.random.default_rng(7)
    X = rng.standard_normal((40000, 20)) + 5.0
    y = 300.0 * ((X - 5.0) @ rng.standard_normal(20) + rng.standard_normal(40000))
    res = mk.solve(X, y, solver="iterated_tikhonov", loss="squared", newton_solver="cg",
                   fit_intercept=True)
    assert res.status == "converged" and res.certificate.verify(X, y)
    assert res.n_iter <= 8


def test_earlier_links_are_handed_over_below_half_their_target():
    # no later step repairs an earlier link: handed over just under its target (1.66e-9
    # against 1.7e-9), link 1 of this chain was refused by the referee's rounding bound
    # (1.03e-10) and the run ended max_iter (benchmarks/tikhonov_scan.py, seed 776403)
    from marginkit.solvers.tikhonov import decrement_schedule

    rng = np.random.default_rng(776403)
    X = rng.standard_normal((3000, 40))
    beta = rng.standard_normal(40)
    e = rng.standard_normal(3000)
    y = 1e4 * (X @ beta / np.sqrt(40) + 0.01 * e)
    X = X + 2.0
    res = mk.solve(X, y, solver="iterated_tikhonov", loss="squared", fit_intercept=True,
                   newton_solver="cg", t=3, random_state=0)
    assert res.status == "converged" and res.certificate.verify(X, y)
    targets = decrement_schedule(res.extra["target"] * 3, 3)  # tol = t * the last target
    assert np.all(res.history["prox_decrement"][:-1] <= 0.5 * targets[:-1])


def test_cg_preconditioner_keeps_a_uniform_share(monkeypatch):
    # found by review: half the rows large in 10 columns, the other half small in 90
    # others; drawn only in proportion to the Hessian's trace, the sample held almost none
    # of the small rows and CG took 2,882 products (a uniform sample: 25); half of the
    # sample is uniform now
    from marginkit.solvers.tikhonov import _newton

    rng = np.random.default_rng(0)
    n, p = 10000, 100
    X = np.zeros((n, p))
    X[:5000, :10] = 30 * rng.standard_normal((5000, 10))
    X[5000:, 10:] = rng.standard_normal((5000, 90)) * np.logspace(0, -2, 90)
    y = X @ rng.standard_normal(p) + 0.1 * rng.standard_normal(n)
    count = [0]
    hess_vec = _newton._GuardedNewton._hess_vec

    def counted(self, v):
        count[0] += 1
        return hess_vec(self, v)

    monkeypatch.setattr(_newton._GuardedNewton, "_hess_vec", counted)
    res = mk.solve(X, y, solver="iterated_tikhonov", loss="squared", lam=1e-6,
                   newton_solver="cg", t=1, random_state=0)
    assert res.status == "converged" and count[0] <= 100


def test_a_link_whose_floor_is_above_half_its_target_is_handed_over():
    # found by review: y offsets of 1e7 (rounding noise lowers the objective at every
    # step, so no stall is seen) and link 1's floor between half its target and the
    # target: it spun 1,000 iterations without a reason; handed over at its target after
    # three steps below it, the referee decides, with its reason
    r = np.random.default_rng(754017)
    X = r.standard_normal((1000, 3))
    y = 1e7 + (X @ r.standard_normal(3) / np.sqrt(3) + 1e-6 * r.standard_normal(1000))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = mk.solve(X, y, solver="iterated_tikhonov", loss="squared", fit_intercept=True,
                       newton_solver="cg", t=5, random_state=0)
    assert res.n_iter < 50
    assert res.status == "converged" or "cannot be certified" in res.extra["failure"]


def test_auto_t_takes_no_improvement_within_rounding():
    # found by review: validation losses equal to the last bits picked t = 2 over t = 1
    # as the order of the sums changed, and t = 2's first target was below float64's
    # reach (max_iter); an improvement within 64 units of the loss is none
    r = np.random.default_rng(450357)
    X = r.standard_normal((5000, 3))
    s = X @ r.standard_normal(3) / np.sqrt(3)
    y = np.where(s + r.standard_normal(5000) > 0, 1.0, -1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = mk.solve(X + 2.0, y, solver="iterated_tikhonov", lam=1e-14, t="auto",
                       newton_solver="cholesky", random_state=0)
    assert res.status == "converged" and res.extra["t"] == 1


def test_small_newton_systems_run_blas_on_one_thread(monkeypatch):
    # BLAS's threads wake up at every call between the passes: a Cholesky factor of 153
    # columns took 1.8 ms on two threads and 0.1 ms on one (the digits' Nystroem fit,
    # 1.0-1.2 s -> 0.4-0.6 s); systems of fewer than SMALL_SYSTEM unknowns run on one,
    # and the caller's thread counts are back after the run
    from marginkit.solvers.tikhonov import _newton
    from marginkit.solvers.tikhonov._state import SMALL_SYSTEM
    from marginkit.utils._threads import _blas_libraries

    libs = _blas_libraries()
    before = [lib.get_num_threads() for lib in libs]
    if not libs or max(before) < 2:
        pytest.skip("no BLAS library running more than one thread here")
    seen = []
    finite = _newton._finite  # the solver's Newton system, right before its Cholesky

    def spy(M):
        seen.append((M.shape[0], max(lib.get_num_threads() for lib in libs)))
        return finite(M)

    monkeypatch.setattr(_newton, "_finite", spy)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 20))
    y = np.where(X[:, 0] + rng.standard_normal(400) > 0, 1, -1)
    res = mk.solve(X, y, solver="iterated_tikhonov", t=2, newton_solver="cholesky")
    assert res.status == "converged" and 20 < SMALL_SYSTEM
    solver_calls = [threads for q, threads in seen if q == 20]
    assert solver_calls and set(solver_calls) == {1}
    assert [lib.get_num_threads() for lib in libs] == before


def _precond_run(X, y, theta, cuts, weight=None, seed=0):
    """The conjugate gradients' side of a run (``_PreconditionedCG``) on the rows of X
    split at ``cuts`` into in-memory blocks, its derivatives at ``theta`` (an intercept
    last); the exact Hessian of the logistic loss there."""
    from marginkit._executors import Block, Executor
    from marginkit.solvers.tikhonov._newton import _GuardedNewton
    from marginkit.solvers.tikhonov._precond import _PreconditionedCG
    from marginkit.solvers.tikhonov._rows import _k_tikhonov, _k_tikhonov_setup, _Model

    n, p = X.shape
    edges = [0, *cuts, n]
    blocks = [Block(X[a:b], y[a:b], i, a) for i, (a, b) in enumerate(zip(edges, edges[1:]))]
    ex = Executor(blocks, np.diff(edges), p, X.dtype, sp.issparse(X))
    if weight is None:
        ex.map(_k_tikhonov_setup, "logistic", p, True)
    else:
        ex.map_each(_k_tikhonov_setup, [("logistic", p, True, weight[a:b])
                                        for a, b in zip(edges, edges[1:])])
    ex.map(_k_tikhonov, [("set_iterate", (theta,)), ("derivatives", (False,))])

    class Run(_PreconditionedCG, _GuardedNewton):
        pass

    run = Run()
    run.rows, run.lam, run._pending = ex, 1.0 / n, []
    run.model = _Model(n, p, True, run.lam, sp.issparse(X))
    run._init_precond(np.random.default_rng(seed))
    Xa = np.hstack([X.toarray() if sp.issparse(X) else X, np.ones((n, 1))])
    z = Xa @ theta
    h = 0.25 / np.cosh(z / 2) ** 2 * (1.0 if weight is None else weight)
    H = Xa.T @ (h[:, None] * Xa) / n
    H[np.diag_indices(p)] += run.lam
    return run, H


def _near_optimum(n=8000, d=12, seed=4):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.where(X @ rng.standard_normal(d) + 0.3 * rng.standard_normal(n) > 0, 1.0, -1.0)
    res = mk.solve(X, y, solver="iterated_tikhonov", t=1, fit_intercept=True, tol=1e-6)
    return X, y, np.r_[res.coef_, res.intercept_]


def _spread(P, H):
    """The largest over the smallest eigenvalue of P^-1 H: CG's convergence on H
    preconditioned by P."""
    import scipy.linalg as sla
    ev = sla.eigh(H, P, eigvals_only=True)
    return ev[-1] / ev[0]


def test_cg_preconditioner_samples_the_rows_the_hessian_is_made_of():
    """At a logistic optimum most rows have h_i near 0: the preconditioner's sample, drawn
    in proportion to h_i ||(x_i, 1)||^2 and weighted by h_i / pi_i, preconditions the
    Hessian far better than a uniform sample of the same size; it is unbiased."""
    X, y, theta = _near_optimum()
    n = X.shape[0]
    run, H = _precond_run(X, y, theta, cuts=[])
    assert run._precond_size == 2000
    P = run._sampled_hessian()
    # a uniform sample of 2,000 rows, as the preconditioner was before
    rng = np.random.default_rng(0)
    Xa = np.hstack([X, np.ones((n, 1))])
    h = 0.25 / np.cosh(Xa @ theta / 2) ** 2
    spreads = []
    for _ in range(5):
        S = rng.choice(n, 2000, replace=False)
        U = Xa[S].T @ (h[S, None] * Xa[S]) / 2000
        U[np.diag_indices(X.shape[1])] += run.lam
        spreads.append(_spread(U, H))
    assert _spread(P, H) < 1.5 < min(spreads)
    # unbiased: the mean of many samples' Hessians is the Hessian
    mean = sum(run._sampled_hessian() for _ in range(200)) / 200
    assert_allclose(mean, H, rtol=0, atol=0.02 * np.abs(H).max())


def test_cg_preconditioner_sample_does_not_depend_on_the_blocks():
    # the same rows are drawn whatever the blocking (a counter-based generator read at
    # each block's first row): the Hessians agree to rounding, in memory and on chunks
    X, y, theta = _near_optimum(n=5000)
    one, H = _precond_run(X, y, theta, cuts=[])
    three, _ = _precond_run(X, y, theta, cuts=[1, 2001, 4999])
    for _ in range(3):
        assert_allclose(three._sampled_hessian(), one._sampled_hessian(), rtol=1e-12,
                        atol=1e-15)


def test_cg_preconditioner_takes_every_row_when_few_weigh():
    # fewer rows of positive weight than the sample's size: all of them, whole (h_i /
    # pi_i = h_i), so the preconditioner is the Hessian itself; rows of weight 0 are never
    # drawn
    X, y, theta = _near_optimum(n=6000)
    w = np.zeros(6000)
    w[::5] = np.random.default_rng(1).uniform(0.5, 2.0, 1200)
    run, H = _precond_run(X, y, theta, cuts=[2500], weight=w)
    assert_allclose(run._sampled_hessian(), H, rtol=1e-12, atol=1e-15)


def test_dense_csr_float32_agree():
    X, y = _classification()
    ref = _solve(X, y, lam=1e-2, t=3, tol=1e-10)
    csr = _solve(sp.csr_matrix(X), y, lam=1e-2, t=3, tol=1e-10)
    X32 = X.astype(np.float32)
    f32 = _solve(X32, y, lam=1e-2, t=3, tol=1e-10)
    f32csr = _solve(sp.csr_matrix(X32), y, lam=1e-2, t=3, tol=1e-10)
    ref32 = _solve(X32.astype(np.float64), y, lam=1e-2, t=3, tol=1e-10)
    assert_allclose(csr.coef_, ref.coef_, atol=1e-10)
    # float32 data are used exactly (float64 accumulation): same solution as the
    # float64 copy of the rounded data
    assert_allclose(f32.coef_, ref32.coef_, atol=1e-9)
    assert_allclose(f32csr.coef_, ref32.coef_, atol=1e-9)
    assert_allclose(f32.coef_, ref.coef_, atol=1e-5)
    csr64 = sp.csr_matrix(X)
    csr64.indices = csr64.indices.astype(np.int64)
    csr64.indptr = csr64.indptr.astype(np.int64)
    assert_allclose(_solve(csr64, y, lam=1e-2, t=3, tol=1e-10).coef_, ref.coef_, atol=1e-10)


def test_caller_arrays_untouched():
    X, y = _classification()
    Xc, yc = X.copy(), y.copy()
    _solve(X, y, lam=1e-2, t=2)
    _solve(X, y, kernel=_RBF(), lam=1e-2, t=2)
    assert np.array_equal(X, Xc) and np.array_equal(y, yc)


def test_primal_and_gram_paths_agree():
    X, y = _classification(n=100)
    primal = _solve(X, y, lam=1e-2, t=3, tol=1e-11)
    gram = _solve(X, y, kernel=_LinearGram(), lam=1e-2, t=3, tol=1e-11)
    assert_allclose(X.T @ gram.dual_coef_, primal.coef_, atol=1e-8)
    assert_allclose(gram.decision_function(X), primal.decision_function(X), atol=1e-8)
    assert gram.coef_ is None and gram.support_ is not X


def test_precomputed_kernel():
    X, y = _classification(n=80)
    K = _RBF()(X, X)
    a = _solve(K, y, kernel="precomputed", lam=1e-2, t=2) if _has("kernel", "precomputed") \
        else pytest.skip("precomputed kernel not registered yet")
    b = _solve(X, y, kernel=_RBF(), lam=1e-2, t=2)
    assert_allclose(a.dual_coef_, b.dual_coef_, atol=1e-10)
    assert a.certificate.verify(K, y)


def _has(kind, name):
    return name in mk.list_plugins()[kind]


# ----------------------------------------------------------------------------- Nystroem
def test_nystroem_with_all_centres_is_exact():
    X, y = _classification(n=120)
    exact = _solve(X, y, kernel=_RBF(0.2), lam=1e-2, t=3, tol=1e-11)
    nys = _solve(X, y, kernel=_RBF(0.2), lam=1e-2, t=3, tol=1e-11, n_components=120,
                 random_state=0)
    assert_allclose(nys.decision_function(X), exact.decision_function(X), atol=1e-6)
    assert nys.certificate.verify(X, y)


def test_nystroem_cg_equals_cholesky():
    X, y = _classification(n=400, d=3)
    kw = dict(kernel=_RBF(0.5), lam=1e-3, t=2, tol=1e-9, n_components=80, random_state=1)
    chol = _solve(X, y, newton_solver="cholesky", **kw)
    cg = _solve(X, y, newton_solver="cg", **kw)
    assert cg.extra["newton_solver"] == "cg"
    assert_allclose(cg.decision_function(X), chol.decision_function(X), atol=1e-6)
    assert cg.certificate.verify(X, y)


def test_auto_newton_solver_takes_cg_for_csr_rows_with_many_nonzeros():
    """newton_solver="auto" on CSR rows: CG once the rows' Hessian pairs (sum nnz_i^2)
    cost more than 60 entries a row, Cholesky on short rows and below p = 512; both
    certify the same problem as on the dense rows."""
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    n, p = 2100, 520
    long_rows = np.where(rng.random((n, p)) < 0.25, rng.random((n, p)), 0.0)  # ~130 a row
    short_rows = np.where(rng.random((n, p)) < 0.05, rng.random((n, p)), 0.0)  # ~26 a row
    w = rng.standard_normal(p)
    for X, solver in ((long_rows, "cg"), (short_rows, "cholesky")):
        y = np.where(X @ w + 0.3 * rng.standard_normal(n) > np.median(X @ w), 1, -1)
        kw = dict(kernel="linear", lam=1e-3, t=2, tol=1e-8)
        Xs = sp.csr_matrix(X)
        auto = _solve(Xs, y, **kw)
        assert auto.extra["newton_solver"] == solver
        assert auto.status == "converged" and auto.certificate.verify(Xs, y)
        other = _solve(Xs, y, newton_solver="cholesky" if solver == "cg" else "cg", **kw)
        assert_allclose(auto.decision_function(X), other.decision_function(X), atol=1e-5)
    # fewer than 512 columns: Cholesky, however long the rows
    narrow = sp.csr_matrix(long_rows[:, :500])
    y = np.where(long_rows[:, :500] @ w[:500] > np.median(long_rows[:, :500] @ w[:500]), 1, -1)
    assert _solve(narrow, y, kernel="linear", lam=1e-3, t=2).extra["newton_solver"] == \
        "cholesky"


def test_nystroem_fewer_centres_runs_and_certifies():
    X, y = _classification(n=300)
    res = _solve(X, y, kernel=_RBF(0.2), lam=1e-2, t=2, n_components=30, random_state=0)
    assert res.support_.shape[0] == 30 and res.status == "converged"
    assert res.certificate.verify(X, y)
    assert res.score(X, y) > 0.8


# ------------------------------------------------- Nystroem features shared by several runs
def _shared(n=1200, d=5, m=40, seed=0):
    """Rows, three one-vs-rest labelings of them, the run's keywords and the kernel."""
    from marginkit.kernels.approximation import NystroemFeatures

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    c = rng.integers(0, 3, n)
    X[:, 0] += 1.5 * c
    kernel = mk.get_plugin("kernel", "rbf")(gamma=0.3)
    kw = dict(solver="iterated_tikhonov", kernel="rbf", kernel_params={"gamma": 0.3},
              n_components=m, t=3, lam=1e-3, random_state=7)
    return X, [(c == k).astype(np.int8) for k in range(3)], kw, kernel, NystroemFeatures


@pytest.mark.parametrize("newton_solver", ["cholesky", "cg"])
def test_features_give_each_run_the_result_of_its_own_solve(newton_solver):
    # cg draws its preconditioner's 1000 rows of the 1200 after the centres: a run on
    # given features draws the same ones (its generator stands where it would)
    X, ys, kw, kernel, NystroemFeatures = _shared()
    F = NystroemFeatures(kernel, kw["n_components"], kw["random_state"]).fit(X)
    assert F.features_.shape == (1200, 40) and not F.features_.flags.writeable
    for y in ys:
        own = mk.solve(X, y, newton_solver=newton_solver, **kw)
        got = mk.solve(X, y, newton_solver=newton_solver, features=F, **kw)
        assert got.extra["features_given"] is True and "features_given" not in own.extra
        assert got.extra["newton_solver"] == own.extra["newton_solver"] == newton_solver
        assert (got.status, got.n_iter) == (own.status, own.n_iter) == ("converged", got.n_iter)
        assert np.array_equal(got.support_, own.support_)
        assert np.array_equal(got.history["prox_newton_iter"], own.history["prox_newton_iter"])
        # equal up to BLAS rounding (the run chooses its threads)
        assert_allclose(got.decision_function(X), own.decision_function(X),
                        rtol=1e-12, atol=1e-12)
        assert_allclose(got.dual_coef_, own.dual_coef_, rtol=1e-10, atol=1e-12)
        assert got.certificate.verify(X, y) and own.certificate.verify(X, y)


def _counting(monkeypatch, module, name):
    """Count the calls of ``module.name`` (patched for the test)."""
    calls = []
    original = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


@pytest.mark.parametrize("budget, expected", [(2.0 * 2**30, 2), (2.5e6, 6)])
def test_one_vs_rest_runs_decompose_the_exact_gram_matrix_once(monkeypatch, budget, expected):
    """The one-vs-rest runs of an estimator differ by y only: K and its eigendecomposition
    are the same in every run. The solver decomposes it once per fit and the referee
    once (its own decomposition, never the solver's), not once per class each (on the
    digits, 20 decompositions of 0.41 s each in a 25 s fit); the runs' results are those
    of their own solves. A decomposition larger than a quarter of memory_budget is not
    kept (300 rows: 0.72 MB, above 2.5e6 / 4; the run's and the referee's own checks, which
    count 13 and 8 such matrices, are set to the Gram path's 3 here to reach that case)."""
    import scipy.linalg

    from marginkit.sklearn import IteratedTikhonovClassifier
    from marginkit.solvers.tikhonov import _representation

    monkeypatch.setattr(_representation, "_GRAM_COPIES", 3)
    monkeypatch.setattr(_representation, "_REFEREE_COPIES", 3)
    X, ys, kw, _, _ = _shared(n=300)
    y = np.argmax(np.column_stack(ys), axis=1)
    with monkeypatch.context() as m:
        calls = _counting(m, scipy.linalg, "eigh")
        est = IteratedTikhonovClassifier(kernel_params={"gamma": 0.3}, n_components=None,
                                         t=3, lam=1e-3, memory_budget=budget).fit(X, y)
    assert len(calls) == expected
    for k, res in enumerate(est.results_):
        own = mk.solve(X, (y == k).astype(np.int8), solver="iterated_tikhonov", kernel="rbf",
                       kernel_params={"gamma": 0.3}, t=3, lam=1e-3, memory_budget=budget)
        assert res.status == own.status == "converged"
        assert_allclose(res.support_coef_, own.support_coef_, rtol=1e-10, atol=1e-12)
        assert res.certificate.verify(X, (y == k).astype(np.int8))


def test_decompositions_are_shared_within_the_block_only():
    """``reuse`` outside ``shared_decompositions`` computes every time; inside, the same
    bytes under the same role give the arrays of the first call, read-only, another role
    or other bytes compute again, and nothing is kept after the block."""
    from marginkit.linalg._shared import reuse, shared_decompositions

    calls = []

    def compute(K):
        calls.append(1)
        return np.linalg.eigh(K)

    K = np.eye(4) + 0.1
    reuse(K, "solver", compute)
    reuse(K, "solver", compute)
    assert len(calls) == 2
    with shared_decompositions(2**20):
        s1, V1 = reuse(K, "solver", compute)
        s2, V2 = reuse(K.copy(), "solver", compute)
        assert len(calls) == 3 and s2 is s1 and V2 is V1 and not V1.flags.writeable
        reuse(K, "referee", compute)
        K2 = K.copy()
        K2[0, 0] = np.nextafter(K2[0, 0], 2.0)
        reuse(K2, "solver", compute)
        assert len(calls) == 5
    reuse(K2, "solver", compute)
    assert len(calls) == 6


def test_one_vs_rest_referee_normalizes_the_nystroem_centres_once(monkeypatch):
    """The Nystroem centres of an estimator's runs are the same (one NystroemFeatures
    per fit): the referee computes K_CC^{-1/2} once per fit, not once per class."""
    from marginkit.kernels import approximation
    from marginkit.sklearn import IteratedTikhonovClassifier

    X, ys, kw, _, _ = _shared(n=300)
    y = np.argmax(np.column_stack(ys), axis=1)
    calls = _counting(monkeypatch, approximation, "nystroem_projection")
    est = IteratedTikhonovClassifier(kernel_params={"gamma": 0.3}, n_components=30, t=3,
                                     lam=1e-3, random_state=0).fit(X, y)
    assert all(r.status == "converged" for r in est.results_)
    assert len(calls) == 2  # the solver's map, the referee's


def _other_problem(X, kw, kernel, NystroemFeatures):
    """(name, features, the run's X, the run's keywords): features fitted on another
    problem than the run's."""
    Xo = X.copy()
    Xo[3, 2] += 1e-9
    laplacian = mk.get_plugin("kernel", "laplacian")(gamma=0.3)
    wide = mk.get_plugin("kernel", "rbf")(gamma=0.31)
    m, seed = kw["n_components"], kw["random_state"]
    return [
        ("other X", NystroemFeatures(kernel, m, seed).fit(Xo), X, kw),
        ("fewer rows", NystroemFeatures(kernel, m, seed).fit(X[:-1]), X, kw),
        ("kernel", NystroemFeatures(laplacian, m, seed).fit(X), X, kw),
        ("gamma", NystroemFeatures(wide, m, seed).fit(X), X, kw),
        ("n_components", NystroemFeatures(kernel, m + 1, seed).fit(X), X, kw),
        ("float32 features", NystroemFeatures(kernel, m, seed).fit(X.astype(np.float32)),
         X, kw),
        ("float32 run", NystroemFeatures(kernel, m, seed).fit(X), X.astype(np.float32), kw),
        ("random_state", NystroemFeatures(kernel, m, seed + 1).fit(X), X, kw),
        ("csr", NystroemFeatures(kernel, m, seed).fit(sp.csr_matrix(X)), X, kw),
    ]


@pytest.mark.parametrize("case", range(9), ids=["other X", "fewer rows", "kernel", "gamma",
                                                 "n_components", "float32 features",
                                                 "float32 run", "random_state", "csr"])
def test_features_of_another_problem_are_refused(case):
    X, ys, kw, kernel, NystroemFeatures = _shared(n=300)
    name, F, Xrun, run_kw = _other_problem(X, kw, kernel, NystroemFeatures)[case]
    what = {"other X": "other rows", "fewer rows": "shape", "kernel": "LaplacianKernel",
            "gamma": "gamma=0.31", "n_components": "n_components=41",
            "float32 features": "float32", "float32 run": "float32",
            "random_state": "random_state=8", "csr": "shape"}[name]
    with pytest.raises(ValueError, match=rf"^features is not this run's Nystroem map: .*"
                                         rf"{re.escape(what)}.*features=None$"):
        mk.solve(Xrun, ys[0], features=F, **run_kw)


def test_features_without_a_seed_are_taken_with_any_draw():
    # a run without an integer random_state has no draw of its own to match
    X, ys, kw, kernel, NystroemFeatures = _shared(n=300)
    F = NystroemFeatures(kernel, kw["n_components"], 5).fit(X)
    res = mk.solve(X, ys[1], features=F, **{**kw, "random_state": None})
    assert res.status == "converged" and res.certificate.verify(X, ys[1])
    assert np.array_equal(res.support_, F.map_.centres_)


def test_features_are_refused_where_they_cannot_be_used():
    X, ys, kw, kernel, NystroemFeatures = _shared(n=300)
    F = NystroemFeatures(kernel, kw["n_components"], kw["random_state"]).fit(X)
    # solvers without takes_features
    for solver in ("fista", "snkp", "dcd"):
        if _has("solver", solver):
            assert not mk.get_plugin("solver", solver).takes_features
            with pytest.raises(ValueError, match=rf"^solver '{solver}' does not take features.*"
                                                 r"leave features=None"):
                mk.solve(X, ys[0], solver=solver, kernel="rbf", features=F)
    assert mk.get_plugin("solver", "iterated_tikhonov").takes_features
    # iterated_tikhonov without n_components, or with t="auto"
    plain = {k: v for k, v in kw.items() if k != "n_components"}
    with pytest.raises(ValueError, match=r"^features .*n_components.*pass features=None$"):
        mk.solve(X, ys[0], features=F, **plain)
    with pytest.raises(ValueError, match=r"^features .*t='auto'.*pass features=None$"):
        mk.solve(X, ys[0], features=F, **{**kw, "t": "auto"})
    # anything but a NystroemFeatures
    with pytest.raises(TypeError, match=r"^features=ndarray must be a fitted NystroemFeatures"):
        mk.solve(X, ys[0], features=F.features_, **kw)
    with pytest.raises(ValueError, match=r"^features is not this run's.*not fitted"):
        mk.solve(X, ys[0], features=NystroemFeatures(kernel, 40, 7), **kw)


def test_edited_feature_rows_cannot_give_a_certificate_that_verifies():
    X, ys, kw, kernel, NystroemFeatures = _shared(n=300)
    y = ys[0]
    honest = NystroemFeatures(kernel, kw["n_components"], kw["random_state"]).fit(X)
    edited = NystroemFeatures(kernel, kw["n_components"], kw["random_state"]).fit(X)
    rows = edited.features_.copy()
    rows[:60] *= 3.0  # the map's centres and projection unchanged, the rows not Phi(X)
    edited.features_ = rows
    states = []
    with pytest.warns(RuntimeWarning, match="took its rows from features.*edited"):
        res = mk.solve(X, y, features=edited, callback=lambda s: states.append(s) and False,
                       **kw)
    # the run's own convergence claims on the edited rows were refuted by the referee
    assert res.status == "max_iter" and res.certificate is None
    assert "took its rows from features" in res.extra["failure"]
    # the claim the run would make at its last iterate does not verify either
    claim = states[-1].certificate("converged")
    assert not claim.verify(X, y)
    # a certificate of the honest rows is checked from X, y, the kernel and its centres:
    # editing the features it was solved on afterwards changes nothing
    ok = mk.solve(X, y, features=honest, **kw)
    assert ok.certificate.verify(X, y)
    honest.features_.flags.writeable = True
    honest.features_[:60] *= 3.0
    assert ok.certificate.verify(X, y)
    assert not ok.certificate.verify(X, 1 - y)


# ----------------------------------------------------------------------------- t = "auto"
def test_t_auto_picks_best_validation_step():
    X, y = _classification(n=300, seed=4)
    res = _solve(X, y, kernel=_RBF(0.5), lam=1e-1, t="auto", t_max=8, random_state=0)
    v = res.history["validation_loss"]
    t = res.extra["t"]
    assert 1 <= t <= 8 and res.status == "converged"
    # kept going while it improved, stopped at the first non-improvement (or t_max)
    assert np.all(np.diff(v[:t]) < 0)
    assert t == 8 or v[t] >= v[t - 1]
    assert res.dual_coef_.shape[0] == len(res.extra["train_index"])
    assert res.certificate.verify(X, y)


def test_t_auto_default_lam_is_one_over_all_rows_for_the_run_and_its_referee(tmp_path):
    # lam=None is 1/n of the rows given (the validation split included), for the solver
    # and for the referee that recomputes the claim (it read 1/n_train and refused)
    X, y = _classification(n=300, seed=4)
    res = mk.solve(X, y, solver="iterated_tikhonov", kernel="rbf", kernel_params={"gamma": 0.5},
                   t="auto", t_max=8, random_state=0)
    assert res.extra["lam"] == 1.0 / 300 and len(res.extra["train_index"]) < 300
    assert res.status == "converged" and res.certificate.verify(X, y)
    res.save(tmp_path / "run.npz")
    assert mk.load_result(tmp_path / "run.npz").certificate.verify(X, y)


@pytest.mark.parametrize("lam", [1e-4, 1e-6])
def test_t_auto_with_a_small_lam_is_certified_on_the_schedule_of_the_chosen_t(lam, tmp_path):
    # a small lam makes the referee's rounding bound larger than the first targets of the
    # t_max schedule (tol 1.4^(1 - 20) / 20 = 8.4e-13): the run ended at max_iter, its
    # chain refuted. The chain of the chosen t meets the t-step schedule of Proposition 1
    # (it was solved to the tighter t_max one, eps_k(T) decreasing in T), which the run
    # and its referee now use.
    X, y = _classification(n=300, seed=0)
    res = mk.solve(X, y, solver="iterated_tikhonov", kernel="linear", t="auto", lam=lam,
                   random_state=0)
    t = res.extra["t"]
    assert 1 <= t < 20 and res.status == "converged" and not res.extra["failure"]
    cert = res.certificate
    tol = res.config.solver_params["tol"]
    assert_allclose(cert.targets, decrement_schedule(tol, t))
    assert cert.verify(X, y) and not cert.verify(X, -y)
    # the run's last target is the chosen t's own, tol / t
    assert_allclose(res.history["target"][-1], tol / t)
    res.save(tmp_path / "run.npz")
    assert mk.load_result(tmp_path / "run.npz").certificate.verify(X, y)


def test_t_auto_regression():
    X, y = _regression(n=200)
    res = _solve(X, y, kernel=_RBF(0.5), loss="squared", lam=1.0, t="auto", t_max=6,
                 random_state=0)
    assert res.task == "regression" and res.extra["t"] > 1


# ----------------------------------------------------------------------------- API
def test_task_follows_loss():
    solver = mk.get_plugin("solver", "iterated_tikhonov")
    assert solver(loss="squared").task == "regression"
    assert solver().task == "classification"


def test_labels_mapped_and_predict_classes():
    X, y = _classification()
    labels = np.where(y > 0, "spam", "ham")
    res = _solve(X, labels, lam=1e-2, t=2)
    assert list(res.classes_) == ["ham", "spam"]
    assert set(res.predict(X)) <= {"ham", "spam"}
    assert res.score(X, labels) > 0.7


@pytest.mark.parametrize("kw,exc,match", [
    ({"t": 0}, ValueError, "integer >= 1 or 'auto'"),
    ({"t": "many"}, ValueError, "integer >= 1 or 'auto'"),
    ({"loss": "hinge"}, ValueError, "logistic"),
    ({"lam": -1.0}, ValueError, "lam"),
    ({"loss": "logistic", "method": "spectral_filter"}, ValueError, "squared loss"),
])
def test_parameter_errors(kw, exc, match):
    X, y = _classification(n=40)
    with pytest.raises(exc, match=match):
        _solve(X, y, **kw)


def test_intercept_with_gram_kernel_is_refused():
    X, y = _classification(n=40)
    with pytest.raises(ValueError, match="feature map"):
        _solve(X, y, kernel=_RBF(), fit_intercept=True)


def test_result_save_load_keeps_certificate(tmp_path):
    mk.register("kernel", "_tik_linear")(_Linear)
    X, y = _classification(n=80)
    res = _solve(X, y, kernel="_tik_linear", lam=1e-2, t=2)
    path = tmp_path / "res.npz"
    res.save(path)
    back = mk.load_result(path)
    assert back.certificate.kind == "newton_decrement"
    assert back.certificate.verify(X, y)
    assert_allclose(back.coef_, res.coef_)


# ----------------------------------------------------------------------------- data (sec. 4)
def _series(q, d, terms=200_000):
    k = np.arange(1, terms + 1, dtype=np.float64)
    return 1.0 + 2.0 * np.array([np.sum(np.cos(2 * np.pi * k * v) / k ** q) for v in d])


@pytest.mark.parametrize("q,tol", [(2, 2e-5), (4, 1e-12), (22, 1e-12)])
def test_spline_kernel_against_its_series(q, tol):
    x = np.array([[0.0], [0.13], [0.5], [0.77], [0.999]])
    K = mk.get_plugin("kernel", "spline")(order=q)(x, np.zeros((1, 1)))[:, 0]
    assert_allclose(K, _series(q, x[:, 0]), atol=tol)


def test_source_capacity_target_and_labels():
    from marginkit.datasets._source_capacity import source_capacity_target

    x = np.linspace(0, 1, 7)
    # r = 0.25, alpha = 2: theta* = Lambda_2(0, .) = 1 + 2 sum cos(2 pi k x) / k^2
    assert_allclose(source_capacity_target(x, 0.25, 2), _series(2, x), atol=2e-5)
    X, y = mk.datasets.make_source_capacity(40_000, 0.25, 2, random_state=0)
    assert X.shape == (40_000, 1) and X.min() >= 0 and X.max() <= 1
    assert set(np.unique(y)) == {-1.0, 1.0}
    # E[y | x] = tanh(theta*(x) / 2): compare in 5 bins of x within 5 standard errors
    theta = source_capacity_target(X[:, 0], 0.25, 2)
    bins = np.minimum((X[:, 0] * 5).astype(int), 4)
    for b in range(5):
        m = bins == b
        se = np.sqrt(1.0 / m.sum())
        assert abs(y[m].mean() - np.tanh(theta[m] / 2).mean()) < 5 * se
    X1, y1 = mk.datasets.make_source_capacity(50, 3.25, 2, random_state=3)
    X2, y2 = mk.datasets.make_source_capacity(50, 3.25, 2, random_state=3)
    assert np.array_equal(X1, X2) and np.array_equal(y1, y2)


def test_excess_risk_evaluator():
    from marginkit.datasets._source_capacity import source_capacity_target, theoretical_rate

    er = mk.datasets.source_capacity_excess_risk
    star = lambda x: source_capacity_target(x[:, 0], 3.25, 2)  # noqa: E731
    assert er(star, 3.25, 2) == 0.0
    # a constant shift c: excess risk ~ c^2/2 E[s(1 - s)] (second order), computed on a grid
    c = 0.1
    xs = np.linspace(0, 1, 20001)
    ts = source_capacity_target(xs, 3.25, 2)
    s = 1 / (1 + np.exp(-ts))
    exact = np.mean(s * (np.logaddexp(0, -ts - c) - np.logaddexp(0, -ts))
                    + (1 - s) * (np.logaddexp(0, ts + c) - np.logaddexp(0, ts)))
    got = er(lambda x: star(x) + c, 3.25, 2)
    assert got > 0 and abs(got - exact) < 0.05 * exact
    assert_allclose(er(lambda x: star(x) + c, 3.25, 2, loss="squared"), c ** 2 / 2)
    # Table 1, theory rows
    table = {(1, 0.25): 0.75, (1, 3.25): 0.80, (3, 3.25): 0.92, (8, 3.25): 0.94,
             (8, 10.25): 0.97, (3, 10.25): 0.92}
    for (t, r), g in table.items():
        assert round(theoretical_rate(r, 2, t), 2) == g


def test_spline_logistic_fit_beats_zero_predictor():
    X, y = mk.datasets.make_source_capacity(300, 3.25, 2, random_state=1)
    res = mk.solve(X, y, solver="iterated_tikhonov", kernel="spline",
                   kernel_params={"order": 2}, lam=1e-2, t=3)
    er = mk.datasets.source_capacity_excess_risk
    assert res.certificate.verify(X, y)
    assert er(res, 3.25, 2) < 0.2 * er(lambda x: np.zeros(len(x)), 3.25, 2)


def test_keep_path_rows_are_the_shorter_runs():
    X, y = _classification(n=150)
    for kernel in (_Linear(), _RBF(0.3)):
        long = _solve(X, y, kernel=kernel, lam=1e-2, t=4, tol=1e-11, keep_path=True)
        path = long.extra["path"]
        assert path.shape[0] == 4
        for t in (1, 2, 4):
            short = _solve(X, y, kernel=kernel, lam=1e-2, t=t, tol=1e-11)
            ref = short.coef_ if short.coef_ is not None else short.support_coef_
            assert_allclose(path[t - 1], ref, atol=1e-8)


def test_asv_module_runs_one_case_each():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "asv_bench" / "benchmarks" / "tikhonov.py"
    spec = importlib.util.spec_from_file_location("_asv_tikhonov", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    b = mod.TikhonovLinear()
    b.setup("logistic", "csr", 2, "float32")
    b.time_solve("logistic", "csr", 2, "float32")
    assert b.track_newton_iterations("logistic", "csr", 2, "float32") >= 2
    assert b.track_final_decrement("logistic", "csr", 2, "float32") <= 1e-8
    k = mod.TikhonovKernel()
    k.setup(3, "nystroem")
    assert 0 < k.track_excess_risk(3, "nystroem") < 0.1
    f = mod.TikhonovFilter()
    f.setup("spectral_filter", 8)
    f.time_solve("spectral_filter", 8)


def test_source_capacity_bernoulli_normalization():
    from marginkit.datasets._source_capacity import source_capacity_target

    x = np.linspace(0, 1, 5)
    # weights |2 pi k|^-q: theta* = 1 + 2 sum cos(2 pi k x) / (2 pi k)^q
    q = 2.0
    ref = 1 + (_series(q, x) - 1) / (2 * np.pi) ** q
    assert_allclose(source_capacity_target(x, 0.25, 2, normalization="bernoulli"), ref, atol=1e-6)
    X, y = mk.datasets.make_source_capacity(20, 0.25, 2, random_state=0, normalization="bernoulli")
    X2, _ = mk.datasets.make_source_capacity(20, 0.25, 2, random_state=0)
    assert np.array_equal(X, X2)


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_squared_loss_fits_scale_down_with_y(kernel):
    # found by review: the default target's floor (1e-20) let y * 1e-100 end "converged"
    # 8% away from the unit fit scaled down; the solution is linear in y
    from marginkit.sklearn import IteratedTikhonovRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 6))
    y = X @ rng.normal(size=6) + 0.1 * rng.normal(size=400)
    unit = IteratedTikhonovRegressor(kernel=kernel, random_state=0).fit(X, y)
    ref = unit.predict(X)
    for s in (1e-120, 1e-100, 1e-30, 1e-3):
        fit = IteratedTikhonovRegressor(kernel=kernel, random_state=0).fit(X, y * s)
        assert fit.status_ == "converged", (s, fit.result_.extra.get("failure"))
        assert fit.result_.certificate.verify(X, y * s)
        assert_allclose(fit.predict(X) / s, ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())
    zero = IteratedTikhonovRegressor(kernel=kernel, random_state=0).fit(X, 0.0 * y)
    assert zero.status_ == "converged" and not np.any(zero.predict(X))


def test_small_weights_scale_the_default_target_down():
    # found by review: weights all 1e-12 (the weighted risk 1e-12 times the unweighted)
    # let the zero model meet the target 1e-8 at iteration 0, 100% from the weighted ridge
    rng = np.random.default_rng(0)
    n = 200
    X = rng.normal(size=(n, 5))
    y = X @ rng.normal(size=5)
    w = np.full(n, 1e-12)
    res = mk.solve(X, y, solver="iterated_tikhonov", loss="squared", t=1, sample_weight=w)
    lam = 1.0 / n
    exact = np.linalg.solve(X.T @ (w[:, None] * X) / n + lam * np.eye(5), X.T @ (w * y) / n)
    assert res.status == "converged" and res.n_iter >= 1
    assert np.linalg.norm(res.coef_ - exact) <= 1e-9 * np.linalg.norm(exact)


@pytest.mark.parametrize("intercept", [False, True])
def test_a_row_of_weight_zero_is_absent_whatever_its_label(intercept):
    # found by review: y = 1e160 on a row of weight 0 made the weighted loss sum
    # 0 * inf = NaN, and the run ended "Newton system not finite" at iteration 0; the
    # row is absent, as in scikit-learn: the fit is that of the other rows (same lam)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 3))
    y = X @ np.array([1.0, 2.0, 3.0]) + 0.1 * rng.standard_normal(50)
    y[0] = 1e160
    w = np.ones(50)
    w[0] = 0.0
    kw = dict(solver="iterated_tikhonov", loss="squared", lam=0.02, fit_intercept=intercept)
    res = mk.solve(X, y, sample_weight=w, **kw)
    # the same risk (1/50) sum over the other rows: weights 49/50 on 49 rows
    rest = mk.solve(X[1:], y[1:], sample_weight=np.full(49, 49 / 50), **kw)
    assert res.status == rest.status == "converged"
    assert res.certificate.verify(X, y, sample_weight=w)
    assert np.allclose(res.coef_, rest.coef_, rtol=1e-9, atol=0)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_a_row_of_weight_zero_does_not_set_the_default_target(loss):
    # found by review: R and Y were taken over every row; one weight-0 row of unit scale
    # beside data scaled by 1e-12 raised the target to 1e-8, met by the zero model
    rng = np.random.default_rng(0)
    n = 200
    X = rng.standard_normal((n, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.standard_normal(n)
    kw = dict(solver="iterated_tikhonov", kernel="linear", lam=1e-3, fit_intercept=False,
              loss=loss)
    if loss == "squared":
        Xs, ys, extra = X, y * 1e-12, (np.zeros(3), 1.0)
    else:
        Xs, ys, extra = X * 1e-12, np.where(y > 0, 1.0, -1.0), (np.ones(3), 1.0)
    alone = mk.solve(Xs, ys, **kw)
    X2, y2 = np.vstack([Xs, extra[0]]), np.append(ys, extra[1])
    res = mk.solve(X2, y2, sample_weight=np.append(np.ones(n), 0.0), **kw)
    # the same target up to the risk's 1/n (n + 1 rows with the weight-0 one)
    assert res.config.solver_params["tol"] == pytest.approx(alone.config.solver_params["tol"],
                                                            rel=0.02)
    assert res.config.solver_params["tol"] < 1e-15
    assert res.status == alone.status == "converged"
    # the same model up to the risk's 1/n (n + 1 rows with the weight-0 one): not zero
    assert np.linalg.norm(res.coef_ - alone.coef_) <= 2e-2 * np.linalg.norm(alone.coef_)


def test_an_intercept_does_not_keep_the_target_at_unit_scale():
    # found by review: R was lifted to 1 with an intercept, so X * 1e-10 with balanced
    # labels (the intercept's gradient 0 at the zero model) kept the target 1e-8 and the
    # default estimator ended "converged" at the zero model; now the features are fitted
    # and certified, or the run says float64 cannot confirm the claim
    from marginkit.sklearn import IteratedTikhonovClassifier

    rng = np.random.default_rng(0)
    n = 40
    X = rng.standard_normal((n, 3))
    score = X @ np.array([1.0, -2.0, 0.5])
    y = np.where(score > np.median(score), 1.0, -1.0)
    for s in (1e-5, 1e-10):
        Xs = X * s
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = IteratedTikhonovClassifier(kernel="linear", t=1).fit(Xs, y).result_
        # the exact regularized optimum (intercept unpenalized), by Newton in float64
        Z, w = np.hstack([Xs, np.ones((n, 1))]), np.zeros(4)
        for _ in range(60):
            sig = 1.0 / (1.0 + np.exp(y * (Z @ w)))
            g = -(Z.T @ (y * sig)) / n
            g[:3] += w[:3] / n
            H = (Z.T * (sig * (1.0 - sig))) @ Z / n
            H[:3, :3] += np.eye(3) / n
            w -= np.linalg.solve(H, g)
        if res.status == "converged":
            assert np.linalg.norm(res.coef_ - w[:3]) <= 1e-6 * np.linalg.norm(w[:3]), s
        else:
            assert res.status == "max_iter" and res.certificate is None
    assert res.config.solver_params["tol"] < 1e-15


@pytest.mark.parametrize("case", ["weight 1e-300", "weight 1e-12", "label 0"])
def test_one_row_of_unit_scale_does_not_keep_the_target_at_unit_scale(case):
    # found by review: a bound W R Y from the largest weight, norm and label (each maybe
    # of another row) let one unit row beside data scaled by 1e-12 keep the target 1e-8,
    # met by the zero model ("converged", verified); the target now sums what each row
    # gives the gradient at 0, which such a row barely moves (two unit rows of opposite
    # labels, which cancel in the gradient, still do: docs/tikhonov.md)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.standard_normal(40)
    loss, w = "squared", None
    if case.startswith("weight"):
        X2, y2 = np.vstack([X * 1e-12, np.ones((1, 3))]), np.append(y, 1.0)
        w = np.append(np.ones(40), float(case.split()[1]))
    else:
        X2, y2 = np.vstack([X * 1e-12, np.ones((1, 3))]), np.append(y, 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = mk.solve(X2, y2, solver="iterated_tikhonov", loss=loss, t=1, sample_weight=w)
    assert res.config.solver_params["tol"] < 1e-15
    assert res.status in ("converged", "max_iter")
    assert np.linalg.norm(res.coef_) > 0  # never the zero model
    if loss == "squared" and res.status == "converged":
        n = X2.shape[0]
        sw = np.ones(n) if w is None else w
        exact = np.linalg.solve(X2.T @ (sw[:, None] * X2) / n + np.eye(3) / n,
                                X2.T @ (sw * y2) / n)
        assert np.linalg.norm(res.coef_ - exact) <= 1e-9 * np.linalg.norm(exact)


@pytest.mark.parametrize("case", ["xor", "both labels"])
def test_a_gradient_that_cancels_does_not_collapse_the_target(case):
    # found by review: a target from the gradient's norm at the zero model collapsed to
    # 1e-138 (or 1e-24, rounding) where the labels cancel, below what float64 certifies:
    # XOR and rows repeated with both labels, whose optimum is the zero model, ended
    # max_iter (1000 Newton iterations); the target sums |w l'| sqrt(k) over the rows
    from marginkit.sklearn import IteratedTikhonovClassifier

    if case == "xor":
        X = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]] * 25)
        y = np.array([1, 0, 0, 1] * 25)
    else:
        rng = np.random.default_rng(0)
        Z = rng.standard_normal((100, 5))
        yz = np.where(rng.standard_normal(100) > 0, 1, 0)
        X, y = np.vstack([Z, Z]), np.r_[yz, 1 - yz]
    est = IteratedTikhonovClassifier(kernel="linear").fit(X, y)
    assert est.status_ == "converged" and est.result_.config.solver_params["tol"] == 1e-8
    assert est.result_.n_iter <= 20
    assert np.linalg.norm(est.coef_) <= 1e-6


@pytest.mark.parametrize("case", ["offset", "weightless_outlier", "featureless_outlier"])
def test_a_large_y_never_loosens_the_default_target(case):
    # found by review: a target that grew with max |y| was met far from the solution:
    # y = 1e9 plus an O(1) signal, with an intercept, by CG, "converged" 52% off Ridge;
    # an outlier of 1e12 on a row of weight 0 (or of zero features) certified the zero
    # model. The target stays 1e-8 above unit scale: exact, or an honest max_iter
    rng = np.random.default_rng(1)
    w = None
    if case == "offset":
        X = rng.standard_normal((2100, 512))
        y = 1e9 + X @ (0.05 * rng.standard_normal(512))
        kw = {"fit_intercept": True}
    else:
        X = rng.standard_normal((200, 5))
        y = X @ rng.standard_normal(5)
        y[0] = 1e12
        kw = {}
        if case == "weightless_outlier":
            w = np.ones(200)
            w[0] = 0.0
        else:
            X[0] = 0.0
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "iterated_tikhonov: the Newton decrement cannot",
                                RuntimeWarning)   # the honest end, asserted below
        res = mk.solve(X, y, solver="iterated_tikhonov", loss="squared", t=1,
                       sample_weight=w, **kw)
    assert res.config.solver_params["tol"] <= 1e-8
    if res.status == "converged":
        lam = 1.0 / X.shape[0]
        sw = np.ones(X.shape[0]) if w is None else w
        Z = np.hstack([X, np.ones((X.shape[0], 1))]) if kw else X
        reg = lam * sw.sum() * np.eye(Z.shape[1])
        if kw:
            reg[-1, -1] = 0.0  # the intercept is not regularized
        exact = np.linalg.solve(Z.T @ (sw[:, None] * Z) + reg, Z.T @ (sw * y))[:X.shape[1]]
        assert np.linalg.norm(res.coef_ - exact) <= 1e-4 * np.linalg.norm(exact)
    else:
        assert res.status == "max_iter" and res.certificate is None


def test_default_tol_scales_with_the_data_and_is_recorded_in_the_config():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 5))
    y = (X[:, 0] + 0.5 * rng.normal(size=200) > 0).astype(int)
    unit = mk.solve(X, y, solver="iterated_tikhonov", kernel="linear")
    assert unit.status == "converged" and unit.config.solver_params["tol"] == 1e-8
    signs = np.sign(unit.decision_function(X))
    # scaled down, an absolute 1e-8 was met by the zero model at iteration 0; the
    # default target scales down with the data, and the model is the unit-scale one's
    tiny = mk.solve(X * 1e-10, y, solver="iterated_tikhonov", kernel="linear")
    tol = tiny.config.solver_params["tol"]
    assert tiny.status == "converged" and tiny.n_iter >= 1 and tol < 1e-15
    assert tiny.certificate.verify(X * 1e-10, y)
    assert tiny.certificate.target <= tol
    assert np.mean(np.sign(tiny.decision_function(X * 1e-10)) == signs) > 0.95
    # a tol given is the claim asked for, at any scale
    asked = mk.solve(X * 1e-10, y, solver="iterated_tikhonov", kernel="linear", tol=1e-8)
    assert asked.config.solver_params["tol"] == 1e-8 and asked.n_iter == 0
    assert not np.any(asked.decision_function(X * 1e-10))
    # scaled up, the decrement is scale-free and the target stays 1e-8; float64 cannot
    # certify it with lam = 1/n there, and the run says so instead of claiming
    with pytest.warns(RuntimeWarning, match="too ill-conditioned for this tol in float64"):
        big = mk.solve(X * 1e10, y, solver="iterated_tikhonov", kernel="linear")
    assert big.config.solver_params["tol"] == 1e-8
    assert big.status == "max_iter" and big.certificate is None
    assert "cannot be certified below its target" in big.extra["failure"]
    # a value within the target says that the rounding bound is what is not
    import re

    value = float(re.search(r"recomputed from the data it is ([0-9.e+-]+)",
                            big.extra["failure"]).group(1))
    assert (value <= 1e-8) == ("within the target, but its rounding bound" in
                               big.extra["failure"])
    # a kernel with k(x, x) = 1 has the unit scale whatever the inputs
    rbf = mk.solve(X * 1e-10, y, solver="iterated_tikhonov", kernel="rbf",
                   kernel_params={"gamma": 1e20})
    assert rbf.config.solver_params["tol"] == 1e-8


@pytest.mark.parametrize("n", [57, 256, 601])
@pytest.mark.parametrize("layout", ["dense64", "dense32", "csr32", "csr64", "empty"])
def test_hessian_matvec_is_the_two_products_in_one_pass(layout, n):
    # n across the dense float64 path's blocks of 256 rows (one partial block, one full
    # block, two full blocks and a partial one)
    import scipy.sparse as sp

    from marginkit.solvers.tikhonov import _fast as _tikhonov_fast
    from marginkit.utils._rows import row_block

    rng = np.random.default_rng(5)
    n = 0 if layout == "empty" else n
    X = rng.normal(size=(n, 9)) * (rng.uniform(size=(n, 9)) < 0.4)
    X[3:5] = 0.0 if n else X[3:5]  # rows without entries
    if layout == "dense32":
        X = X.astype(np.float32)
    elif layout.startswith("csr"):
        X = sp.csr_matrix(X)
        if layout == "csr64":
            X.indices, X.indptr = X.indices.astype(np.int64), X.indptr.astype(np.int64)
    v, b = rng.normal(size=9), -0.7
    h = rng.uniform(size=n)
    h[::4] = 0.0  # rows of zero curvature
    Xd = X.toarray() if sp.issparse(X) else X
    z = h * (Xd.astype(np.float64) @ v + b)
    out = np.full(9, np.nan)
    total = _tikhonov_fast.hessian_matvec(row_block(X), v, b, h, out)
    np.testing.assert_allclose(out, Xd.astype(np.float64).T @ z, rtol=1e-12, atol=1e-12)
    assert total == pytest.approx(z.sum(), rel=1e-12, abs=1e-12)
    for bad in ((v[:-1], h, out), (v, h[:-1] if n else np.ones(1), out), (v, h, out[:-1])):
        with pytest.raises(ValueError, match="hessian_matvec"):
            _tikhonov_fast.hessian_matvec(row_block(X), bad[0], b, bad[1], bad[2])


def test_hessian_matvec_without_features_sums_the_intercept_curvature():
    from marginkit.solvers.tikhonov import _fast as _tikhonov_fast
    from marginkit.utils._rows import row_block

    h = np.linspace(0.0, 1.0, 300)
    out = np.zeros(0)
    total = _tikhonov_fast.hessian_matvec(row_block(np.zeros((300, 0))), out, 2.0, h, out)
    assert total == pytest.approx(2.0 * h.sum(), rel=1e-12)


def test_newton_systems_and_chains_beyond_the_memory_budget_are_refused():
    """Found by review: kernel="linear" on 8,000 sparse features ran with memory_budget
    1 MiB to a peak of 1.5 GB (its 8000 x 8000 Newton systems; 200,000 features asked for
    298 GiB), and t=10**8 took 2.4 GB (10**9: a raw MemoryError). Both are refused by
    name before they allocate, in the run and in the referee."""
    import copy

    rng = np.random.default_rng(0)
    X = sp.random(60, 8000, density=0.002, random_state=0, format="csr")
    y = (rng.random(60) > 0.5).astype(int)
    # (4 MiB: X's width alone, 40 vectors of 8000 entries, fits it; 1 MiB is refused by
    # the width check before the Newton systems are looked at)
    with pytest.raises(ValueError, match=r"forms 8001 x 8001 Newton systems .* memory_budget"):
        mk.solve(X, y, solver="iterated_tikhonov", memory_budget=2**22,
                 solver_params={"fit_intercept": True})
    with pytest.raises(ValueError, match=r"X has 8000 columns.*memory_budget"):
        mk.solve(X, y, solver="iterated_tikhonov", memory_budget=2**20,
                 solver_params={"fit_intercept": True})
    for key in ("t", "t_max"):
        params = {"t": 10**9} if key == "t" else {"t": "auto", "t_max": 10**9}
        with pytest.raises(ValueError, match=r"t=1000000000 proximal steps: needs at least"):
            mk.solve(X[:, :5], y, solver="iterated_tikhonov", solver_params=params)
    res = mk.solve(X[:, :50], y, solver="iterated_tikhonov")
    cert = copy.deepcopy(res.certificate)
    cert.chain = np.zeros((1, 30000))
    verdict = cert.check(X[:, :50], y)
    assert not verdict and "Newton systems" in verdict.reason


def test_features_of_rows_edited_in_place_after_fit_are_refused():
    """Found by review: NystroemFeatures kept a reference to X and compared the run's X
    with it, itself: rows edited in place after fit trained on the old Phi (training
    accuracy 0.12 instead of 0.98) with a warning about the centres. The digest of X at
    fit time is compared now."""
    X, ys, kw, kernel, NystroemFeatures = _shared(n=300)
    F = NystroemFeatures(kernel, kw["n_components"], kw["random_state"]).fit(X)
    assert mk.solve(X, ys[0], features=F, **kw).status == "converged"
    # the same matrix stored otherwise is the same X (review of the first digest: int64
    # indices, an explicit zero and -0.0 were refused)
    X0 = X.copy()
    X0[0, 0] = 0.0
    S = sp.csr_matrix(X0)
    F2 = NystroemFeatures(kernel, kw["n_components"], kw["random_state"]).fit(S)
    S64 = S.copy()
    S64.indices, S64.indptr = S64.indices.astype(np.int64), S64.indptr.astype(np.int64)
    Z = sp.csr_matrix(X)
    Z.data[0] = 0.0  # X0 with its zero stored explicitly
    assert Z.nnz == S.nnz + 1
    for same in (S64, Z):
        assert mk.solve(same, ys[0], features=F2, **kw).status == "converged"
    Xm = X.copy()
    Xm[Xm == 0.0] = -0.0
    assert mk.solve(Xm, ys[0], features=F, **kw).status == "converged"
    X[:, 0] *= -1.0
    with pytest.raises(ValueError, match="X was changed in place after fit"):
        mk.solve(X, ys[0], features=F, **kw)


def test_a_float32_precomputed_gram_is_cut_at_float32_rounding():
    """Found by review: a linear Gram of rank 3 given in float32 has eigenvalues down to
    -4e-7 (its float32 rounding); iterated_tikhonov refused it as not positive
    semi-definite at float64's rounding level (8.8e-12), where the SVM and perceptron
    solvers accept it. A float32 Gram matrix is cut at float64's level plus u_32 ||K||_F
    (a bound on its entries' rounding); its certificate verifies. (A first fix, the level
    64 n u_32 max|s|, let eigenvalues of -3 pass at n = 1000: review.)"""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(24, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    K32 = (X @ X.T).astype(np.float32)
    assert np.linalg.eigvalsh(K32.astype(np.float64))[0] < -1e-8
    res = mk.solve(K32, y, solver="iterated_tikhonov", kernel="precomputed")
    assert res.status == "converged" and res.certificate.verify(K32, y)
    for shift in (K32.astype(np.float64), K32):  # indefinite by 1e-3, in either precision
        with pytest.raises(ValueError, match="not positive semi-definite"):
            mk.solve(shift - np.float32(1e-3) * np.eye(24, dtype=shift.dtype), y,
                     solver="iterated_tikhonov", kernel="precomputed")
    # one large entry inflates ||K||_F: a negative 2 x 2 minor (eigenvalue -4.7) passed
    # the level u_32 ||K||_F (review); the test on the unit-diagonal scaling refuses it
    big = K32.copy()
    big[0, 0] += np.float32(1e8)
    big[1, 2] += np.float32(5.0) + 2 * np.sqrt(big[1, 1] * big[2, 2])
    big[2, 1] = big[1, 2]
    with pytest.raises(ValueError, match="scaled to a unit diagonal"):
        mk.solve(big, y, solver="iterated_tikhonov", kernel="precomputed")


def _linear_in_float32(A, B):
    return (A @ B.T).astype(np.float32)


def _indefinite_in_float32(A, B):
    K = (A @ B.T).astype(np.float32)
    if B is A:
        K -= np.float32(1e-3) * np.eye(A.shape[0], dtype=np.float32)
    return K


def test_a_callable_kernel_returning_float32_is_cut_at_float32_rounding():
    """Found by review: a callable kernel that returns float32 values had its Gram matrix
    cast to float64 and checked at float64's rounding level, so its own float32 rounding
    (eigenvalues to -4.8e-6 of 660 on 2,500 rbf rows) was refused as not positive
    semi-definite. Its values are float32 numbers, treated as a float32 precomputed Gram
    is; a kernel indefinite beyond that rounding is still refused."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(24, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    assert np.linalg.eigvalsh(_linear_in_float32(X, X).astype(np.float64))[0] < -1e-8
    res = mk.solve(X, y, solver="iterated_tikhonov", kernel=_linear_in_float32)
    assert res.status == "converged" and res.certificate.verify(X, y)
    with pytest.raises(ValueError, match="not positive semi-definite"):
        mk.solve(X, y, solver="iterated_tikhonov", kernel=_indefinite_in_float32)


def test_a_plugin_kernel_without_a_default_b_runs():
    """Found by review: ``Kernel.returned_gram`` called ``self(A)``, and a plug-in kernel
    whose ``__call__(self, A, B)`` gives B no default failed in iterated_tikhonov."""
    from marginkit.plugins import Kernel

    class TwoArg(Kernel):
        def __call__(self, A, B):
            return np.asarray(A @ B.T, dtype=np.float64)

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    res = mk.solve(X, y, solver="iterated_tikhonov", kernel=TwoArg())
    assert res.status == "converged" and res.certificate.verify(X, y)


def test_a_precomputed_auto_model_predicts_from_the_gram_of_all_its_rows():
    """Found by review: with kernel="precomputed" and t="auto" the model trains on the
    rows of a validation split (extra["train_index"]), and predict refused the documented
    K(X_new, X_train) of all the training rows ("must be ... with 32 columns, got 40"),
    in the estimators too. The result now reads the columns of its training rows."""
    import warnings

    from marginkit.sklearn import IteratedTikhonovClassifier, IteratedTikhonovRegressor

    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    K = X @ X.T
    Kt = rng.standard_normal((7, 3)) @ X.T
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = mk.solve(K, y, solver="iterated_tikhonov", kernel="precomputed", t="auto",
                       random_state=0)
        train = res.extra["train_index"]
        assert res.extra["split_rows"] == 60 and len(train) < 60
        np.testing.assert_array_equal(res.decision_function(Kt),
                                      res.decision_function(Kt[:, train]))
        with pytest.raises(ValueError, match="60 columns, got 50 .*train_index"):
            res.predict(K[:, :50])
        # dask rows of either width, as numpy's (review: the trained width was refused)
        da = pytest.importorskip("dask.array")
        for Z in (Kt, Kt[:, train]):
            np.testing.assert_allclose(
                res.decision_function(da.from_array(Z, chunks=(3, -1))).compute(),
                res.decision_function(Kt), rtol=1e-12)
        y3 = np.digitize(X[:, 1], [-0.5, 0.5])
        for est, target in ((IteratedTikhonovClassifier, y), (IteratedTikhonovClassifier, y3),
                            (IteratedTikhonovRegressor, X[:, 0])):
            model = est(kernel="precomputed", t="auto", random_state=0).fit(K, target)
            assert model.predict(Kt).shape == (7,)
            assert model.score(K, target) > 0.7


def test_a_file_whose_split_columns_were_edited_is_refused(tmp_path):
    """Review of 1e77037: a precomputed t="auto" model reads the columns of
    extra["train_index"]; a file whose copy of them was reversed loaded, verified, and
    predicted from other columns (test accuracy 0.93 -> 0.69). load_result now compares
    them with the certificate's train_index, which its check recomputes."""
    import io
    import json
    import warnings
    import zipfile

    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 3))
    y = np.where(X[:, 0] + 0.2 * rng.standard_normal(200) > 0, 1, -1)
    K = np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = mk.solve(K, y, solver="iterated_tikhonov", kernel="precomputed", t="auto",
                       random_state=0)
    path = tmp_path / "m.npz"
    res.save(path)
    np.testing.assert_array_equal(mk.load_result(path).predict(K), res.predict(K))
    with zipfile.ZipFile(path) as z:
        files = {name: z.read(name) for name in z.namelist()}
    meta = json.loads(np.load(io.BytesIO(files["__meta__.npy"])).tobytes())
    name = meta["fields"]["extra"]["__dict__"]["train_index"]["__array__"] + ".npy"
    buf = io.BytesIO()
    np.save(buf, np.load(io.BytesIO(files[name]))[::-1].copy())
    files[name] = buf.getvalue()
    edited = tmp_path / "edited.npz"
    with zipfile.ZipFile(edited, "w") as z:
        for key, value in files.items():
            z.writestr(key, value)
    with pytest.raises(ValueError, match=r"extra\['train_index'\].*is not its certificate's"):
        mk.load_result(edited)


def test_the_scan_script_records_each_problems_end(tmp_path, monkeypatch, capsys):
    # benchmarks/tikhonov_scan.py (docs/benchmarks.md): one problem at least, its status
    # and iterations recorded, the comparison with a file of another commit read back
    import importlib.util
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "tikhonov_scan.py"
    spec = importlib.util.spec_from_file_location("tikhonov_scan", path)
    scan = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(scan)
    out = tmp_path / "scan.json"
    with warnings.catch_warnings():
        scan.main([str(out), "--seconds", "0.5"])
    runs = json.loads(out.read_text())
    assert runs and all(r["status"] in ("converged", "max_iter") for r in runs.values())
    scan.main([str(tmp_path / "again.json"), "--seconds", "0.5", "--compare", str(out)])
    assert "in common; changes:" in capsys.readouterr().out
