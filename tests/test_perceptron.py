"""Perceptron / von Neumann family of paper 000: certificates, bounds, agreement.

Certificates are checked against G recomputed here from X, y and the kernel (numpy and
scikit-learn's pairwise kernels), never with the solver's operator.
"""
import pickle

import numpy as np
import pytest
import scipy.sparse as sp

import marginkit as mk
from marginkit.datasets import make_duplicated_opposite, make_separable, make_xor

pairwise = pytest.importorskip("sklearn.metrics.pairwise")
scipy_optimize = pytest.importorskip("scipy.optimize")

SOLVERS = ["perceptron", "normalized_perceptron", "nkp", "snkp", "nvn", "snkpvn", "isnkpvn"]
DUAL_SOLVERS = ["nvn", "snkpvn", "isnkpvn"]
GAMMA = 0.5
KERNELS = {"linear": ("linear", None), "rbf": ("rbf", {"gamma": GAMMA})}


# ----------------------------------------------------------------------- independent checks
def gram_reference(X, y, kernel):
    """Normalized signed Gram G recomputed in float64 from the data alone."""
    Xd = np.asarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64)
    if kernel == "linear":
        K = Xd @ Xd.T
    elif kernel == "rbf":
        K = pairwise.rbf_kernel(Xd, gamma=GAMMA)
    else:
        raise AssertionError(kernel)
    s = np.asarray(y, dtype=np.float64) / np.sqrt(np.diag(K))
    return s[:, None] * K * s[None, :]


def min_gnorm_simplex(G):
    """min_{p in simplex} ||p||_G by SLSQP (= rho_K when the data are separable)."""
    n = G.shape[0]
    res = scipy_optimize.minimize(
        lambda p: p @ G @ p, np.full(n, 1.0 / n), jac=lambda p: 2 * G @ p, method="SLSQP",
        bounds=[(0.0, 1.0)] * n, constraints=[{"type": "eq", "fun": lambda p: p.sum() - 1.0}],
        options={"ftol": 1e-15, "maxiter": 2000})
    return float(np.sqrt(max(res.fun, 0.0)))


def assert_certificate(res, X, y, kernel):
    G = gram_reference(X, y, kernel)
    if res.status == "separable":
        alpha = res.certificate.alpha
        assert np.all(G @ alpha > 0), "G alpha > 0 fails on the recomputed Gram"
        np.testing.assert_allclose(res.dual_coef_, alpha)
    elif res.status == "infeasible":
        p = res.certificate.p
        assert p.min() >= 0 and abs(p.sum() - 1) < 1e-9
        norm = np.sqrt(max(p @ G @ p, 0.0))
        assert norm <= res.certificate.eps * (1 + 1e-6) + 1e-9
    else:  # pragma: no cover - the callers only expect conclusive statuses
        raise AssertionError(res.status)
    assert res.certificate.verify(X, y)


def as_input(X, fmt, dtype):
    X = X.astype(dtype)
    return sp.csr_matrix(X) if fmt == "csr" else X


def run(X, y, solver, kernel, **kw):
    name, params = KERNELS[kernel]
    return mk.solve(X, y, solver=solver, kernel=name, kernel_params=params, **kw)


@pytest.fixture(scope="module")
def separable():
    X, y, u = make_separable(40, 4, margin=0.2, random_state=1)
    return X, y, u


@pytest.fixture(scope="module")
def separable_rho(separable):
    X, y, _ = separable
    return min_gnorm_simplex(gram_reference(X, y, "linear"))


@pytest.fixture(scope="module")
def duplicated():
    X, y, pairs = make_duplicated_opposite(30, 4, n_duplicates=2, random_state=2)
    return X, y, pairs


# ----------------------------------------------------------------------- certificates
@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("kernel", ["linear", "rbf"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("fmt", ["dense", "csr"])
def test_separator_certificate_verified(separable, solver, kernel, dtype, fmt):
    X, y, _ = separable
    Xin = as_input(X, fmt, dtype)
    res = run(Xin, y, solver, kernel)
    assert res.status == "separable"
    assert_certificate(res, Xin, y, kernel)
    assert np.array_equal(res.predict(Xin), y)
    lo, hi = res.margin_bounds
    assert 0 < lo <= hi


@pytest.mark.parametrize("solver", DUAL_SOLVERS)
@pytest.mark.parametrize("kernel", ["linear", "rbf"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("fmt", ["dense", "csr"])
def test_infeasibility_certificate_verified(duplicated, solver, kernel, dtype, fmt):
    X, y, _ = duplicated
    Xin = as_input(X, fmt, dtype)
    # von Neumann (Frank-Wolfe) converges sublinearly when the witness set is a small face
    eps = 1e-2 if solver == "nvn" else 1e-6
    res = run(Xin, y, solver, kernel, max_iter=20_000, **({"delta": eps} if solver == "snkpvn" else {"eps": eps}))
    assert res.status == "infeasible"
    assert_certificate(res, Xin, y, kernel)
    assert res.dual_vector.shape == (X.shape[0],)
    assert res.margin_bounds[1] <= eps
    assert res.certificate.eps == pytest.approx(eps)


def test_xor_linear_infeasible_rbf_separable():
    X, y = make_xor(40, noise=0.1, random_state=3)
    res = run(X, y, "isnkpvn", "linear")
    assert res.status == "infeasible"
    G = gram_reference(X, y, "linear")
    p = res.certificate.p
    assert np.sqrt(max(p @ G @ p, 0.0)) <= 1e-6
    for solver in SOLVERS:
        res = run(X, y, solver, "rbf")
        assert res.status == "separable", solver
        assert_certificate(res, X, y, "rbf")


def test_isnkpvn_finds_separator(separable):
    X, y, u = separable
    res = run(X, y, "isnkpvn", "linear", eps=1e-8, shrink=3.0)
    assert res.status == "separable"
    assert_certificate(res, X, y, "linear")
    # the separator is in feature space: coef_ = sum_i alpha_i y_i x_i / ||x_i||
    w = (res.dual_coef_ * y / np.linalg.norm(X, axis=1)) @ X
    np.testing.assert_allclose(res.coef_, w, atol=1e-12)
    assert np.all(y * (X @ res.coef_) > 0)


# ----------------------------------------------------------------------- the paper's bounds
@pytest.mark.parametrize("margin,seed", [(0.3, 0), (0.1, 1), (0.05, 2)])
def test_iteration_bounds(margin, seed):
    X, y, u = make_separable(30, 3, margin=margin, random_state=seed)
    n = X.shape[0]
    rho = min_gnorm_simplex(gram_reference(X, y, "linear"))
    assert rho == pytest.approx(margin, rel=1e-4)  # the generator's claim, checked by a QP
    res = run(X, y, "snkp", "linear")
    assert res.status == "separable"
    assert res.n_iter <= 2 * np.sqrt(2 * np.log(n)) / rho + 1  # Theorem 1
    for solver in ("nkp", "normalized_perceptron"):
        res = run(X, y, solver, "linear")
        assert res.status == "separable"
        assert res.n_iter <= 1 / rho**2 + 1
    res = run(X, y, "snkpvn", "linear", delta=rho / 2)
    assert res.status == "separable"
    assert res.n_iter <= 2 * np.sqrt(2 * n) / rho + 1  # Lemma 8


def test_snkp_bound_rbf():
    X, y = make_xor(24, noise=0.2, random_state=5)
    G = gram_reference(X, y, "rbf")
    rho = min_gnorm_simplex(G)
    res = run(X, y, "snkp", "rbf")
    assert res.status == "separable"
    assert res.n_iter <= 2 * np.sqrt(2 * np.log(X.shape[0])) / rho + 1


@pytest.mark.parametrize("solver", SOLVERS)
def test_lemma3_margin_bounds(separable, separable_rho, solver):
    X, y, _ = separable
    rho = separable_rho
    assert rho == pytest.approx(0.2, rel=1e-4)  # make_separable's margin
    res = run(X, y, solver, "linear", stop=("max_iter", {"n": 60}))
    lo, hi = res.margin_bounds
    assert lo <= rho + 1e-9 and rho <= hi + 1e-9
    h = res.history
    assert np.all(h["margin_lower"] <= h["margin_upper"] + 1e-12)
    assert np.all(np.diff(h["dual_norm"]) <= 0)  # best ||p||_G seen
    # the lower bound is min(G alpha) / ||alpha||_G of the returned alpha, recomputed here
    G = gram_reference(X, y, "linear")
    alpha = res.dual_coef_
    if np.isfinite(lo):
        assert lo == pytest.approx(np.min(G @ alpha) / np.sqrt(alpha @ G @ alpha), rel=1e-9)
    else:
        assert np.min(G @ alpha) <= 1e-12


@pytest.mark.parametrize("smoother,q", [("entropy", None), ("l2", None), ("l2", "random")])
def test_smoothed_upper_bound_invariant(separable, smoother, q):
    """Appendix lemma: L_{mu_k}(alpha_k) <= -1/2 ||p_k||_G^2 at every iteration."""
    from marginkit._executors import local_executor
    from marginkit.solvers.perceptron import SmoothedIteration
    from marginkit.linalg._operator import FeatureOperator

    X, y, _ = separable
    op = FeatureOperator(X, y)
    sm = mk.get_plugin("smoother", smoother)()
    qv = None if q is None else np.random.default_rng(0).dirichlet(np.ones(X.shape[0]))
    mu0 = 2.0 if smoother == "entropy" else 2.0 * X.shape[0]
    core = SmoothedIteration(local_executor(X, y), sm, mu0, qv, 0.0, op=op)
    G = gram_reference(X, y, "linear")
    for k in range(25):
        p = np.asarray(core.p_arr)
        assert core.smoothed_loss() <= -0.5 * (p @ G @ p) + 1e-10
        assert core.mu == pytest.approx(mu0 * 2.0 / ((k + 1) * (k + 2)))
        np.testing.assert_allclose(core.ga_arr, G @ core.alpha_arr, atol=1e-10)
        np.testing.assert_allclose(core.gp_arr, G @ p, atol=1e-10)
        assert abs(np.sum(core.alpha_arr) - 1) < 1e-12 and abs(p.sum() - 1) < 1e-12
        core.step()


# ----------------------------------------------------------------------- agreement
def test_all_solvers_agree(separable, duplicated):
    X, y, _ = separable
    for kernel in ("linear", "rbf"):
        statuses = {s: run(X, y, s, kernel).status for s in SOLVERS}
        assert set(statuses.values()) == {"separable"}, statuses
    X, y, _ = duplicated
    for kernel in ("linear", "rbf"):
        for s in SOLVERS:
            res = run(X, y, s, kernel, max_iter=20_000 if s in DUAL_SOLVERS else 2000,
                      **({"eps": 1e-2} if s == "nvn" else {}))
            if s in DUAL_SOLVERS:
                assert res.status == "infeasible", (s, kernel)
            else:  # primal-only solvers cannot conclude, and must never claim a separator
                assert res.status == "max_iter", (s, kernel)
            # every solver's p is a point of the simplex: an upper bound on rho_K (<= 0 here)
            assert res.margin_bounds[1] >= 0


def test_dtype_and_format_agree(separable):
    X, y, _ = separable
    for solver in ("snkp", "isnkpvn", "nkp"):
        r64 = run(X, y, solver, "linear", stop=("max_iter", {"n": 30}))
        rcsr = run(sp.csr_matrix(X), y, solver, "linear", stop=("max_iter", {"n": 30}))
        r32 = run(X.astype(np.float32), y, solver, "linear", stop=("max_iter", {"n": 30}))
        np.testing.assert_allclose(rcsr.dual_coef_, r64.dual_coef_, atol=1e-12)
        if solver != "nkp":  # vertex methods may break float32 ties differently
            np.testing.assert_allclose(r32.dual_coef_, r64.dual_coef_, atol=1e-4)


def test_precomputed_kernel(separable):
    X, y, _ = separable
    K = pairwise.rbf_kernel(X, gamma=GAMMA)
    Xnew = X[:5] + 0.01
    for solver in ("snkp", "isnkpvn", "perceptron"):
        res_pre = mk.solve(K, y, solver=solver, kernel="precomputed")
        res = run(X, y, solver, "rbf")
        assert res_pre.status == res.status == "separable"
        np.testing.assert_allclose(res_pre.dual_coef_, res.dual_coef_, atol=1e-8)
        np.testing.assert_allclose(res_pre.decision_function(pairwise.rbf_kernel(Xnew, X, gamma=GAMMA)),
                                   res.decision_function(Xnew), atol=1e-8)


# ----------------------------------------------------------------------- models and results
@pytest.mark.parametrize("kernel", ["linear", "rbf"])
@pytest.mark.parametrize("fmt", ["dense", "csr"])
def test_decision_function_new_data(separable, kernel, fmt):
    X, y, _ = separable
    Xin = as_input(X, fmt, np.float64)
    res = run(Xin, y, "snkp", kernel)
    Xnew = np.random.default_rng(7).normal(size=(9, X.shape[1]))
    Xnew_in = as_input(Xnew, fmt, np.float64)
    # f(x) = sum_i alpha_i y_i K(x_i, x) / sqrt(K(x_i, x_i)), recomputed here
    if kernel == "linear":
        Knew, diag = Xnew @ X.T, np.einsum("ij,ij->i", X, X)
        assert res.coef_ is not None and res.support_ is None
    else:
        Knew, diag = pairwise.rbf_kernel(Xnew, X, gamma=GAMMA), np.ones(X.shape[0])
        assert res.coef_ is None and res.support_.shape[0] == np.count_nonzero(res.dual_coef_)
    f = Knew @ (res.dual_coef_ * y / np.sqrt(diag))
    np.testing.assert_allclose(res.decision_function(Xnew_in), f, atol=1e-10)
    np.testing.assert_array_equal(res.predict(Xnew_in), np.where(f > 0, 1.0, -1.0))


def test_labels_and_pickle(separable, tmp_path):
    X, y, _ = separable
    labels = np.where(y > 0, "spam", "ham")
    for kernel in ("linear", "rbf"):
        res = run(X, labels, "isnkpvn", kernel)
        assert res.status == "separable" and list(res.classes_) == ["ham", "spam"]
        assert np.array_equal(res.predict(X), labels)
        again = pickle.loads(pickle.dumps(res))
        np.testing.assert_array_equal(again.decision_function(X), res.decision_function(X))
        assert again.certificate.verify(X, labels)
        path = tmp_path / f"res_{kernel}.npz"
        res.save(path)
        loaded = mk.load_result(path)
        np.testing.assert_allclose(loaded.decision_function(X), res.decision_function(X))
        assert loaded.certificate.verify(X, labels)


def test_support_is_private_copy(separable):
    X, y, _ = separable
    Xc = X.copy()
    res = run(Xc, y, "nkp", "rbf")
    before = res.decision_function(X[:4])
    Xc[:] = 0.0
    np.testing.assert_array_equal(res.decision_function(X[:4]), before)


def test_caller_arrays_untouched(separable):
    X, y, _ = separable
    for Xin in (X.copy(), sp.csr_matrix(X), X.astype(np.float32)):
        snap = Xin.copy()
        yc = y.copy()
        for solver in SOLVERS:
            for kernel in ("linear", "rbf"):
                run(Xin, yc, solver, kernel)
        if sp.issparse(Xin):
            assert (Xin != snap).nnz == 0
        else:
            np.testing.assert_array_equal(Xin, snap)
        np.testing.assert_array_equal(yc, y)


def test_perceptron_counts_and_normalized_alpha(separable):
    X, y, _ = separable
    res = run(X, y, "perceptron", "linear")
    counts = res.extra["mistake_counts"]
    assert counts.sum() == res.n_iter
    np.testing.assert_allclose(res.dual_coef_, counts * np.linalg.norm(X, axis=1))
    np.testing.assert_allclose(res.coef_, (counts * y) @ X)


def test_history_and_state(separable):
    X, y, _ = separable
    seen = []
    res = run(X, y, "isnkpvn", "linear", callback=lambda st: seen.append(
        (st.min_margin, st.dual_norm, st.dual_tol)) and False)
    assert {"min_margin", "dual_norm", "mu", "margin_lower", "margin_upper", "delta",
            "outer"} <= set(res.history)
    assert len(res.history["min_margin"]) == res.n_iter + 1
    assert all(t == 1e-6 for _, _, t in seen)
    assert res.history["min_margin"][-1] > 0


def test_parameter_errors(separable):
    X, y, _ = separable
    with pytest.raises(ValueError, match="shrink"):
        mk.solve(X, y, solver="isnkpvn", shrink=1.0)
    with pytest.raises(ValueError, match="simplex"):
        mk.solve(X, y, solver="snkpvn", q=[0.5, 0.7])
    with pytest.raises(ValueError, match="q has length 2"):
        mk.solve(X, y, solver="snkpvn", q=[0.5, 0.5])
    # found by review: numpy's "setting an array element with a sequence"
    n = X.shape[0]
    with pytest.raises(TypeError, match=r"q must be a dense vector .* q.toarray\(\).ravel\(\)"):
        mk.solve(X, y, solver="snkpvn", q=sp.csr_matrix(np.full((1, n), 1.0 / n)))
    with pytest.raises(TypeError, match="q must be a vector of real numbers"):
        mk.solve(X, y, solver="snkpvn", q=["a"] * n)
    with pytest.raises(ValueError, match="GiB for the Gram matrix"):
        mk.solve(X, y, solver="snkp", kernel="rbf", memory_budget=1000.0)


def test_snkpvn_center(separable):
    X, y, _ = separable
    q = np.zeros(X.shape[0])
    q[:2] = 0.5  # the support pair: ||q||_G = rho exactly
    res = run(X, y, "snkpvn", "linear", q=q)
    assert res.status == "separable"
    assert_certificate(res, X, y, "linear")


def test_generators():
    X, y, u = make_separable(50, 5, margin=0.25, random_state=0)
    Xn = X / np.linalg.norm(X, axis=1)[:, None]
    assert np.min(y * (Xn @ u)) == pytest.approx(0.25)
    X, y = make_xor(20, noise=0.0, random_state=0)
    assert set(y) == {-1.0, 1.0}
    X, y, pairs = make_duplicated_opposite(20, 3, n_duplicates=3, random_state=0)
    for i, j in pairs:
        np.testing.assert_array_equal(X[i], X[j])
        assert y[i] == -y[j]
    with pytest.raises(ValueError, match="margin"):
        make_separable(10, 2, margin=1.5)


def test_normalized_perceptron_equals_nkp():
    """Sec. 2.1 in feature space and sec. 4 through G are the same iterates (linear kernel)."""
    # random data: no exact ties in argmin_i (G alpha)_i that round-off could break either way
    rng = np.random.default_rng(11)
    X = rng.normal(size=(40, 5))
    y = np.where(rng.random(40) < 0.5, -1.0, 1.0)
    stop = [("max_iter", {"n": 25})]
    for Xin in (X, sp.csr_matrix(X)):
        a = run(Xin, y, "normalized_perceptron", "linear", stop=stop)
        b = run(Xin, y, "nkp", "linear", stop=stop)
        np.testing.assert_allclose(a.dual_coef_, b.dual_coef_, atol=1e-12)
        np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-12)
        np.testing.assert_allclose(a.history["min_margin"], b.history["min_margin"], atol=1e-12)


def test_perceptron_matches_reference_loop(separable):
    """The classic perceptron against a plain numpy loop (most violated point first)."""
    X, y, _ = separable
    w = np.zeros(X.shape[1])
    counts = np.zeros(X.shape[0])
    for _ in range(500):
        m = y * (X @ w)
        if m.min() > 0:
            break
        i = int(np.argmin(m))
        w += y[i] * X[i]
        counts[i] += 1
    res = run(X, y, "perceptron", "linear")
    assert res.status == "separable"
    np.testing.assert_array_equal(res.extra["mistake_counts"], counts)
    np.testing.assert_allclose(res.coef_, w, atol=1e-12)


def test_snkp_with_l2_smoother(separable):
    X, y, _ = separable
    res = run(X, y, "snkp", "linear", smoother="l2")
    assert res.status == "separable"
    assert_certificate(res, X, y, "linear")
    # mu_0 = 2 lambda_#, lambda_# a bound on lambda_max(G) (the paper's n at most)
    lam = np.linalg.eigvalsh(gram_reference(X, y, "linear"))[-1]
    mu0 = res.history["mu"][0]
    assert 2.0 * lam <= mu0 <= 2.0 * X.shape[0]
    assert mu0 == pytest.approx(2.0 * lam, rel=1e-4)
    res = run(X, y, "snkp", "linear")
    assert res.history["mu"][0] == pytest.approx(2.0)


@pytest.mark.parametrize("fmt", ["dense", "fortran", "csr", "csr32"])
def test_gram_norm_bound(fmt):
    """An upper bound on lambda_max(G), tight when d is small, n when d is large or for a
    dense Gram; the same for every layout."""
    from marginkit.solvers.perceptron import gram_norm_bound
    from marginkit.linalg._operator import DenseGramOperator, FeatureOperator

    rng = np.random.default_rng(3)
    X = rng.standard_normal((300, 7))
    y = np.where(rng.random(300) < 0.5, -1.0, 1.0)
    lam = np.linalg.eigvalsh(gram_reference(X, y, "linear"))[-1]
    Xf = {"dense": X, "fortran": np.asfortranarray(X), "csr": sp.csr_matrix(X),
          "csr32": sp.csr_matrix(X.astype(np.float32))}[fmt]
    bound = gram_norm_bound(FeatureOperator(Xf, y))
    tol = 1e-6 if fmt == "csr32" else 1e-12
    assert lam * (1 - tol) <= bound <= lam * (1 + 1e-4)
    assert lam < 300 / 3  # the bound is well below the paper's n here
    assert gram_norm_bound(DenseGramOperator(gram_reference(X, y, "linear"), y)) == 300


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_csr_normalized_cross(dtype, index):
    """X_n^T X_n from a CSR row block (rows divided by their norms) matches the dense
    product for each value and index type; a block that does not match inv or C is
    refused before any entry is read."""
    from marginkit.solvers.perceptron._fast import csr_normalized_cross
    from marginkit.utils._rows import row_block

    rng = np.random.default_rng(5)
    X = rng.standard_normal((60, 9))
    X[rng.random(X.shape) < 0.6] = 0.0
    X[:, 2] = 1.0
    A = sp.csr_matrix(X.astype(dtype))
    A.indices, A.indptr = A.indices.astype(index), A.indptr.astype(index)
    Xd = A.toarray().astype(np.float64)
    inv = 1.0 / np.linalg.norm(Xd, axis=1)
    C = np.zeros((9, 9))
    csr_normalized_cross(row_block(A), inv, C)
    Xn = Xd * inv[:, None]
    np.testing.assert_allclose(C, Xn.T @ Xn, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="inv has 59 entries"):
        csr_normalized_cross(row_block(A), inv[:-1], np.zeros((9, 9)))
    with pytest.raises(ValueError, match="C is 8 x 9"):
        csr_normalized_cross(row_block(A), inv, np.zeros((8, 9)))


def test_isnkpvn_warm_restarts_keep_the_invariant(duplicated):
    """Restarts at the schedule index the last inner loop reached (mu not reset to mu_0)
    keep the appendix invariant L_mu(alpha) <= -1/2 ||p||_G^2 at every iteration, and the
    run ends with the same kind of certificate as the paper's cold restarts."""
    from marginkit._executors import local_executor
    from marginkit.solvers.perceptron import SmoothedIteration, gram_norm_bound
    from marginkit.linalg._operator import FeatureOperator

    X, y, _ = duplicated
    op = FeatureOperator(X, y)
    G = gram_reference(X, y, "linear")
    sm = mk.get_plugin("smoother", "l2")()
    mu0 = 2.0 * gram_norm_bound(op)
    outs = {}
    for warm in (True, False):
        core = SmoothedIteration(local_executor(X, y), sm, mu0, None, 1e-3, op=op, gamma=2.0,
                                 warm=warm)
        restarted_late = False
        for _ in range(4000):
            p = np.asarray(core.p_arr)
            assert core.smoothed_loss() <= -0.5 * (p @ G @ p) + 1e-10
            assert core.mu == pytest.approx(mu0 * 2.0 / ((core.k + 1) * (core.k + 2)))
            if core.dual_norm <= 1e-3 or core.min_margin > 0:
                break
            outer = core.outer
            core.step()
            restarted_late |= core.outer > outer and core.k > 0
        assert core.dual_norm <= 1e-3
        outs[warm] = (core.outer, restarted_late)
    assert outs[True][1] and not outs[False][1]


def test_infeasible_result_save_load(tmp_path):
    X, y = make_xor(40, noise=0.1, random_state=3)
    res = run(X, y, "isnkpvn", "linear")
    assert res.status == "infeasible" and res.margin_bounds[0] == -np.inf
    path = tmp_path / "infeasible.npz"
    res.save(path)
    loaded = mk.load_result(path)
    assert loaded.status == "infeasible" and loaded.margin_bounds == res.margin_bounds
    assert loaded.certificate.verify(X, y)
    assert loaded.extra["outer_iterations"] == res.extra["outer_iterations"]
    again = pickle.loads(pickle.dumps(res))
    np.testing.assert_array_equal(again.dual_vector, res.dual_vector)


def test_gram_norm_bound_falls_back_to_n_when_costly():
    """Wide dense X or CSR rows with many entries: the d x d matrix is not formed."""
    from marginkit.solvers.perceptron import gram_norm_bound
    from marginkit.linalg._operator import FeatureOperator

    rng = np.random.default_rng(0)
    y = np.where(rng.random(40) < 0.5, -1.0, 1.0)
    assert gram_norm_bound(FeatureOperator(rng.standard_normal((40, 513)), y)) == 40
    assert gram_norm_bound(FeatureOperator(sp.csr_matrix(rng.standard_normal((40, 65))), y)) == 40
    assert gram_norm_bound(FeatureOperator(sp.csr_matrix(rng.standard_normal((40, 64))), y)) < 40


@pytest.mark.parametrize("n", [7, 8, 9, 64, 67])
def test_smoothed_core_argmin_is_the_first_minimum(n):
    """The vectorized pass keeps min_i (G alpha)_i and its first index (duplicated rows
    give ties), for lengths around the eight lanes."""
    from marginkit._executors import local_executor
    from marginkit.solvers.perceptron import SmoothedIteration
    from marginkit.linalg._operator import FeatureOperator

    rng = np.random.default_rng(n)
    X = rng.standard_normal((n, 3))
    X[n // 2:] = X[: n - n // 2]  # ties
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    y[n // 2:] = y[: n - n // 2]
    op = FeatureOperator(X, y)
    for name in ("entropy", "l2"):
        sm = mk.get_plugin("smoother", name)()
        core = SmoothedIteration(local_executor(X, y), sm, 2.0 if name == "entropy" else 2.0 * n,
                                 None, 0.0, op=op)
        for _ in range(30):
            core.step()
            ga = np.asarray(core.ga_arr)
            if core.min_margin <= 0:
                assert core.imin == int(np.argmin(ga)) and core.min_margin == ga.min()


# ------------------------------------------------------------------- isnkpvn's exact finish
def overlap_instance(n, d=20, seed=5):
    """Rows [x_i, 1] of Gaussian points separated by a random hyperplane, with the label of
    the positive point nearest the positive mean flipped: barely infeasible (the
    ``overlap`` instance of the feasibility benchmark)."""
    g = np.random.default_rng(seed)
    w, b = g.standard_normal(d), 0.5 * g.standard_normal()
    X = g.standard_normal((n, d))
    y = np.where(X @ w + b > 0, 1.0, -1.0)
    pos = np.flatnonzero(y > 0)
    y[pos[np.argmin(((X[pos] - X[pos].mean(axis=0)) ** 2).sum(axis=1))]] = -1.0
    return np.hstack([X, np.ones((n, 1))]), y


@pytest.fixture(scope="module")
def overlap():
    return overlap_instance(2000)


def assert_finish_certificate(res, X, y, kernel="linear"):
    """The certificate verifies by itself and against G recomputed here."""
    assert res.certificate is not None and res.certificate.verify(X, y)
    assert_certificate(res, X, y, kernel)
    if res.status == "infeasible":
        G = gram_reference(X, y, kernel)
        p = res.certificate.p
        assert np.sqrt(max(p @ G @ p, 0.0)) <= 1e-6


@pytest.mark.parametrize("fmt", ["dense", "csr32", "float32", "csr"])
def test_isnkpvn_finish_decides_barely_infeasible_data(overlap, fmt):
    X, y = overlap
    Xf = {"dense": X, "csr": sp.csr_matrix(X), "float32": X.astype(np.float32),
          "csr32": sp.csr_matrix(X.astype(np.float32))}[fmt]
    on = mk.solve(Xf, y, solver="isnkpvn")
    off = mk.solve(Xf, y, solver="isnkpvn", finish=False)
    assert on.status == off.status == "infeasible"
    assert on.extra["finish"] == "decided" and 0 < on.extra["finish_steps"] <= on.n_iter
    # (the run loop's own record of its BLAS threads left out)
    extra = {k: v for k, v in off.extra.items() if k not in ("blas_threads", "blas_choice")}
    assert extra == {"outer_iterations": off.extra["outer_iterations"],
                         "delta": off.extra["delta"], "finish": "off", "finish_steps": 0}
    assert 4 * on.n_iter <= off.n_iter
    # an exact certificate on few points (an affinely independent set in R^21: <= 22)
    assert on.certificate.value < 1e-12 and np.count_nonzero(on.certificate.p) <= 22
    assert_finish_certificate(on, X, y)
    assert_finish_certificate(off, X, y)
    np.testing.assert_array_equal(on.dual_vector >= 0, True)


def test_isnkpvn_without_finish_is_the_paper_algorithm(overlap):
    """finish=False runs the iterations of the previous release, iterate for iterate."""
    X, y = overlap
    res = mk.solve(X, y, solver="isnkpvn", finish=False)
    assert (res.n_iter, res.extra["outer_iterations"]) == (271, 14)
    again = mk.solve(X, y, solver="isnkpvn", finish=False)
    np.testing.assert_array_equal(again.dual_vector, res.dual_vector)
    np.testing.assert_array_equal(again.certificate.p, res.certificate.p)


def test_isnkpvn_finish_taken_once(overlap):
    """With a stop rule that lets the run go on, the finish's point is taken once and the
    iterations continue from it."""
    X, y = overlap
    res = mk.solve(X, y, solver="isnkpvn", stop=("max_iter", {"n": 120}))
    decided = mk.solve(X, y, solver="isnkpvn")
    assert res.status == "max_iter" and res.n_iter == 120 and res.extra["finish"] == "decided"
    assert res.extra["finish_steps"] == decided.extra["finish_steps"]
    assert res.extra["outer_iterations"] == decided.extra["outer_iterations"]
    # the solver's best ||p||_G (Result.margin_bounds is the referee's, rounding included)
    assert res.history["margin_upper"][-1] <= decided.certificate.value


def test_isnkpvn_finish_is_reproducible(overlap):
    X, y = overlap
    a = mk.solve(X, y, solver="isnkpvn")
    b = mk.solve(X, y, solver="isnkpvn")
    # the run loop's record of its BLAS threads follows the machine's load, not the data
    drop = ("blas_threads", "blas_choice")
    assert a.n_iter == b.n_iter and \
        {k: v for k, v in a.extra.items() if k not in drop} == \
        {k: v for k, v in b.extra.items() if k not in drop}
    np.testing.assert_array_equal(a.certificate.p, b.certificate.p)
    np.testing.assert_array_equal(a.dual_vector, b.dual_vector)


def test_isnkpvn_finish_separator(separable, separable_rho):
    X, y, _ = separable
    for fmt in (X, sp.csr_matrix(X.astype(np.float32))):
        res = mk.solve(fmt, y, solver="isnkpvn")
        assert res.status == "separable" and res.extra["finish"] in ("decided", "running")
        assert_finish_certificate(res, X, y)
        lower, upper = res.margin_bounds
        assert lower <= separable_rho * (1 + 1e-6) and upper >= separable_rho * (1 - 1e-6)


def test_isnkpvn_finish_separator_on_a_small_margin():
    # margin 1e-3 in 5 dimensions: the paper needs many halvings, the finish few cycles
    X, y, _ = make_separable(3000, 5, margin=1e-3, random_state=0)
    on = mk.solve(X, y, solver="isnkpvn")
    off = mk.solve(X, y, solver="isnkpvn", finish=False)
    assert on.status == off.status == "separable"
    assert on.extra["finish"] == "decided" and on.n_iter < off.n_iter
    assert_finish_certificate(on, X, y)
    G = gram_reference(X, y, "linear")
    assert np.all(G @ on.dual_coef_ > 0)


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_isnkpvn_finish_with_a_dense_gram(duplicated, kernel):
    """Other kernels: the finish reads entries of the private dense G."""
    X, y, _ = duplicated
    res = run(X, y, "isnkpvn", kernel)
    assert res.status == "infeasible"
    assert_finish_certificate(res, X, y, kernel)


def test_isnkpvn_refused_finish_leaves_the_iterations_alone(overlap, monkeypatch):
    """A candidate that fails the float64 check is dropped, the finish stops, and the run
    is the paper's, iterate for iterate."""
    from marginkit.solvers import perceptron

    X, y = overlap
    off = mk.solve(X, y, solver="isnkpvn", finish=False)
    checks = []
    real = perceptron._IteratedState._finish_holds

    def refuse_first(self, claim, p):
        checks.append(claim)
        return False if len(checks) == 1 else real(self, claim, p)

    monkeypatch.setattr(perceptron._IteratedState, "_finish_holds", refuse_first)
    res = mk.solve(X, y, solver="isnkpvn")
    assert res.extra["finish"] == "stopped" and res.n_iter == off.n_iter
    np.testing.assert_array_equal(res.certificate.p, off.certificate.p)
    np.testing.assert_array_equal(res.dual_coef_, off.dual_coef_)


def test_min_norm_point_wolfe(separable, duplicated):
    """Wolfe's algorithm alone: a separator (G p > 0) on separable data, a point of norm
    <= tol on infeasible data, p in the simplex on the corral."""
    from marginkit.solvers.perceptron._fast import MinNormPoint
    from marginkit.linalg._operator import FeatureOperator

    for (X, y, _), expected in ((separable, "separator"), (duplicated, "certificate")):
        G = gram_reference(X, y, "linear")
        mnp = MinNormPoint(FeatureOperator(X, y), 64)
        assert mnp.run(int(np.argmin(G.sum(axis=1))), 500, 1e-20) == expected
        p = np.asarray(mnp.p_arr)
        assert p.min() >= 0 and abs(p.sum() - 1) < 1e-12
        np.testing.assert_array_equal(np.flatnonzero(p), np.sort(mnp.support))
        if expected == "separator":
            assert np.all(G @ p > 0)
        else:
            assert p @ G @ p <= 1e-20 * (1 + 1e-6) + 1e-24
    with pytest.raises(IndexError):
        mnp.run(len(y), 1, 0.0)


@pytest.mark.parametrize("solver", ["snkp", "perceptron", "isnkpvn", "nvn"])
def test_a_callable_kernel_that_is_not_symmetric_is_refused(solver):
    """Found by review: dcd and kernel="precomputed" refused a non-symmetric Gram matrix,
    the perceptron family certified "separable" claims about K(a, b) = a.b + g(a) - g(b),
    which is not a kernel. The callable's K(A, A) blocks are checked for every solver."""
    rng = np.random.default_rng(0)
    X = np.array([[1, 1], [-1, -1], [1, -1], [-1, 1]], float) + 0.01 * rng.normal(size=(4, 2))
    y = np.array([1, 1, -1, -1])

    def asym(A, B):
        g = lambda Z: 5.0 * Z[:, 0] * Z[:, 1]  # noqa: E731
        return np.asarray(A) @ np.asarray(B).T + g(A)[:, None] - g(B)[None, :]

    with pytest.raises(ValueError, match="callable kernel asym: K is not symmetric"):
        mk.solve(X, y, solver=solver, kernel=asym, max_iter=200)


def test_snkpvn_takes_a_float32_centre_in_the_simplex():
    """Found by review: the uniform centre q = 1/n given in float32 sums to 1 - 1.5e-8 and
    was refused (tolerance 1e-8, the sum printed as '1'); entries are read in their own
    precision and scaled onto the simplex."""
    X, y = make_xor(40, noise=0.1, random_state=0)[:2]
    q32 = np.full(len(y), 1.0 / len(y), dtype=np.float32)
    res = mk.solve(X, y, solver="snkpvn", q=q32)
    assert res.status == "infeasible" and res.certificate.verify(X, y)
    with pytest.raises(ValueError, match="sum 0.9"):
        mk.solve(X, y, solver="snkpvn", q=q32 * np.float32(0.99))
