"""The referee of the perceptron family's claims (``marginkit.certificates``).

A claim a run reports ("separable", "infeasible") must be true: ``check`` recomputes it from
X, y and the kernel in float64 with a bound on its own rounding, against the thresholds of
the run's configuration; hostile but legal inputs (cancelling distances, non-PSD Grams,
magnitudes near overflow, tampered certificates) never yield a claim that an independent
numpy recomputation rejects.
"""
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp

import marginkit as mk
from marginkit.certificates import (InfeasibilityCertificate, NotPositiveSemidefiniteError,
                                    SeparatorCertificate, Verdict)
from marginkit.datasets import make_xor
from marginkit.kernels.builtin import RBFKernel

FAMILY = ["perceptron", "normalized_perceptron", "nkp", "snkp", "nvn", "snkpvn", "isnkpvn"]
DUAL = ["nvn", "snkpvn", "isnkpvn"]


# ------------------------------------------------------------------ numpy references
def rbf_reference(A, B, gamma):
    """exp(-gamma ||a - b||^2) from explicit differences in long double."""
    A = np.asarray(A, dtype=np.longdouble)
    B = np.asarray(B, dtype=np.longdouble)
    D2 = ((A[:, None, :] - B[None, :, :]) ** 2).sum(axis=2)
    return np.exp(-gamma * D2)


def normalized_gram(K, y):
    K = np.asarray(K, dtype=np.longdouble)
    d = np.sqrt(np.diag(K))
    y = np.asarray(y, dtype=np.longdouble)
    return (y[:, None] * y[None, :]) * K / (d[:, None] * d[None, :])


def pm(y):
    y = np.asarray(y)
    return np.where(y == np.unique(y)[1], 1.0, -1.0)


def reference_claim_holds(res, X, y, kernel_gram):
    """An independent check of a result's claim from an explicit Gram matrix."""
    G = normalized_gram(kernel_gram, pm(y))
    if res.status == "separable":
        alpha = np.asarray(res.certificate.alpha, dtype=np.longdouble)
        return bool(np.all(G @ alpha > 0))
    if res.status == "infeasible":
        p = np.asarray(res.certificate.p, dtype=np.longdouble)
        return bool(p.min() >= 0 and np.sqrt(max(float(p @ G @ p), 0.0)) <= res.certificate.eps)
    return True


def offset_pairs(offset, dtype=np.float64, gap=0.01):
    """Points on a small grid around ``offset`` with a pair ``gap`` apart of opposite labels:
    separable by RBF (distinct points), not by a hyperplane through 0 at this offset."""
    rng = np.random.default_rng(0)
    base = rng.uniform(-1, 1, size=(10, 2))
    X = np.vstack([base, base[:1] + [gap, 0.0]]) + offset
    y = np.r_[np.where(base[:, 0] > 0, 1, -1), -np.sign(base[0, 0]) or 1]
    return X.astype(dtype), y


# ------------------------------------------------------------------ item: cancellation
@pytest.mark.parametrize("offset,dtype,tol", [(1e6, np.float64, 1e-9), (1e3, np.float32, 2e-5)])
def test_rbf_gram_does_not_cancel_at_an_offset(offset, dtype, tol):
    X, _ = offset_pairs(offset, dtype)
    K = mk.get_plugin("kernel", "rbf")(gamma=0.5)(X)
    ref = rbf_reference(X.astype(np.float64), X.astype(np.float64), 0.5)
    assert float(np.max(np.abs(K - ref))) <= tol
    # the pair 0.01 apart: K = exp(-0.5 * 1e-4), not 1
    assert K[0, -1] < 1.0 - 1e-5


def test_rbf_gram_sparse_offset_rows_recomputed():
    X, _ = offset_pairs(1e6)
    Xs = sp.csr_matrix(X)
    K = mk.get_plugin("kernel", "rbf")(gamma=0.5)(Xs)
    ref = rbf_reference(X, X, 0.5)
    assert float(np.max(np.abs(K - ref))) <= 1e-9


@pytest.mark.parametrize("solver", DUAL)
@pytest.mark.parametrize("offset,dtype", [(1e6, np.float64), (1e3, np.float32)])
def test_no_false_infeasibility_under_rbf_at_an_offset(solver, offset, dtype):
    X, y = offset_pairs(offset, dtype)
    res = mk.solve(X, y, solver=solver, kernel="rbf", kernel_params={"gamma": 0.5},
                   max_iter=3000)
    assert res.status != "infeasible"
    K = rbf_reference(X.astype(np.float64), X.astype(np.float64), 0.5)
    assert reference_claim_holds(res, X, y, K)
    if res.certificate is not None:
        assert res.certificate.verify(X, y)


def test_verify_rejects_a_cancelled_infeasibility_claim():
    """The certificate the old cancelling Gram suggested (uniform p, norm ~0 at K = 1)."""
    X, y = offset_pairs(1e6)
    kernel = mk.get_plugin("kernel", "rbf")(gamma=0.5)
    p = np.zeros(len(y))
    p[0] = p[-1] = 0.5
    cert = InfeasibilityCertificate(p, 0.0, 1e-6, kernel, np.unique(y))
    verdict = cert.check(X, y)
    assert not verdict and verdict.value > 1e-4


# ------------------------------------------------------------------ item: non-PSD kernels
def _indexed_kernel(M):
    def k(A, B):
        return M[np.asarray(A, dtype=int)[:, 0]][:, np.asarray(B, dtype=int)[:, 0]]
    return k


NON_PSD = np.array([[1.0, 2.0], [2.0, 1.0]])


@pytest.mark.parametrize("solver", DUAL)
def test_non_psd_precomputed_gram_is_an_error(solver):
    with pytest.raises(NotPositiveSemidefiniteError, match="not positive semi-definite"):
        mk.solve(NON_PSD, [1, -1], solver=solver, kernel="precomputed")


@pytest.mark.parametrize("solver", DUAL)
def test_non_psd_callable_kernel_is_an_error(solver):
    X = np.array([[0.0], [1.0]])
    with pytest.raises(NotPositiveSemidefiniteError, match="not positive semi-definite"):
        mk.solve(X, [1, -1], solver=solver, kernel=_indexed_kernel(NON_PSD))


def test_non_psd_certificate_never_verifies():
    kernel = mk.get_plugin("kernel", "precomputed")()
    cert = InfeasibilityCertificate([0.5, 0.5], 0.0, 1e-6, kernel, np.array([-1, 1]))
    with pytest.raises(NotPositiveSemidefiniteError):
        cert.verify(NON_PSD, [1, -1])


# found by review: a copositive but indefinite Gram matrix has a p in the simplex with
# p^T G p = 0 exactly and G p != 0 (no Gordan witness); the data are separable
COPOSITIVE = np.array([[1.0, 1.0, 0.5], [1.0, 1.0, 0.375], [0.5, 0.375, 1.0]])
COPOSITIVE_Y = np.array([1, -1, 1])


def test_an_indefinite_gram_with_a_zero_quadratic_form_is_no_infeasibility_proof():
    """Found by review: with K = COPOSITIVE (one negative eigenvalue) isnkpvn claimed
    "infeasible" with ||p||_G = 0 and verify() held, while snkp's separator of the same
    data also verified. The referee only checked p^T G p >= 0 along p; a kernel that is
    not PSD by construction (precomputed, callable) is now proven PSD on the data by a
    Cholesky factorization before a norm in G is trusted."""
    K, y = COPOSITIVE, COPOSITIVE_Y
    assert np.linalg.eigvalsh(K)[0] < -1e-3
    G = np.outer(y, y) * K
    p = np.array([0.5, 0.5, 0.0])  # p^T G p = 0, G p = (0, 0, 0.0625) != 0
    assert p @ G @ p == 0.0 and (G @ p)[2] > 0
    kernel = mk.get_plugin("kernel", "precomputed")()
    cert = InfeasibilityCertificate(p, 0.0, 1e-6, kernel, np.array([-1, 1]))
    with pytest.raises(NotPositiveSemidefiniteError, match="not positive semi-definite"):
        cert.verify(K, y)
    for kw in ({"kernel": "precomputed"}, {"kernel": _indexed_kernel(K)}):
        X = K if kw["kernel"] == "precomputed" else np.arange(3.0)[:, None]
        with pytest.raises(NotPositiveSemidefiniteError, match="not positive semi-definite"):
            mk.solve(X, y, solver="isnkpvn", **kw)
        res = mk.solve(X, y, solver="snkp", **kw)  # a separator needs no PSD kernel
        assert res.status == "separable" and res.certificate.verify(X, y)
        assert np.all(res.predict(X) == y)


def test_a_low_rank_float64_gram_still_proves_infeasibility():
    """A precomputed linear Gram matrix of rank 5 (singular, PSD) keeps its infeasibility
    claim under the PSD proof (the shift is at float64's rounding); float32 entries can
    only be proven PSD to within their rounding, and a claim at eps = 1e-6 is refused by
    name before the run iterates on."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 5))
    y = np.where(rng.random(200) < 0.5, 1, -1)
    K = X @ X.T
    res = mk.solve(K, y, solver="isnkpvn", kernel="precomputed")
    assert res.status == "infeasible" and res.certificate.verify(K, y)
    assert res.margin_bounds[1] <= 1e-6
    with pytest.raises(NotPositiveSemidefiniteError, match="ask for eps >="):
        mk.solve(K.astype(np.float32), y, solver="isnkpvn", kernel="precomputed")


def test_products_that_underflow_are_in_the_separator_bound():
    """Found by review: the referee's rounding bounds of G alpha were relative only, and
    products that underflow to subnormals have an absolute error (eta each). Rows
    x_k = m_k 2^-1074 e_0 + e_k made a forged alpha with (G alpha)_0 = -0.375 2^-1074
    verify (rounding bound 0); on a PSD precomputed Gram with K_00 = 2^-1060 the
    normalization 1/sqrt(K_00) = 2^530 amplified the same error to a "margin" of 9e-165
    where the exact value is -6.5e-165."""
    from marginkit.kernels.builtin import LinearKernel, PrecomputedKernel

    T = 2.0 ** -1074
    m = [5, 2, 7, 4, 6]
    y = np.array([1, 1, 1, 1, -1, -1])
    alpha = np.array([0.0, 0.0625, 0.1875, 0.1875, 0.3125, 0.1875])
    X = np.eye(6)
    X[1:, 0] = np.array(m) * T
    exact = sum(Fraction(float(alpha[k])) * int(y[k]) * Fraction(float(X[k, 0]))
                for k in range(1, 6))
    assert exact < 0  # alpha misclassifies x_0
    cert = SeparatorCertificate(alpha, 0.0, LinearKernel(), classes=np.array([-1, 1]))
    assert not cert.verify(X, y)
    K = np.eye(6)
    K[0, 0] = 2.0 ** -1060
    K[0, 1:] = K[1:, 0] = np.array(m) * T
    cert = SeparatorCertificate(alpha, 0.0, PrecomputedKernel(), classes=np.array([-1, 1]))
    assert not cert.verify(K, y)


# ------------------------------------------------------------------ item: float64 re-checks
def test_perceptron_refuses_norms_its_raw_gram_cannot_hold():
    X, y = make_xor(40, random_state=0)[:2]
    X = np.c_[X, np.ones(len(X))] * 1e160
    with pytest.raises(ValueError, match="rescale X"):
        mk.solve(X, y, solver="perceptron")


@pytest.mark.parametrize("scale", [1e150, 1e-150, 1e300, 1e-300])
@pytest.mark.parametrize("solver", FAMILY)
def test_extreme_scales_claims_hold(solver, scale):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    try:
        res = mk.solve(X * scale, y, solver=solver, max_iter=2000)
    except ValueError as exc:
        assert "rescale X" in str(exc)
        return
    if res.status in ("separable", "infeasible"):
        assert res.certificate.verify(X * scale, y)
        assert reference_claim_holds(res, X, y, X @ X.T)  # same directions
    if res.coef_ is not None:
        assert np.all(np.isfinite(res.coef_))


@pytest.mark.parametrize("seed", range(4))
def test_perceptron_rbf_float32_claims_verify(seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(60, 5)).astype(np.float32)
    y = np.where(rng.random(60) > 0.5, 1, -1)
    res = mk.solve(X, y, solver="perceptron", kernel="rbf", kernel_params={"gamma": 0.3},
                   max_iter=5000)
    if res.status == "separable":
        assert res.certificate.verify(X, y)
        assert reference_claim_holds(res, X, y, rbf_reference(X, X, 0.3))


def test_dask_dual_family_no_false_claim_at_1e155():
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(2)
    X = rng.normal(size=(80, 3))
    y = np.where(X[:, 0] > 0.1, 1, -1)
    X = X * 1e155
    for solver in DUAL:
        kw = {"finish": False} if solver == "isnkpvn" else {}
        res = mk.solve(da.from_array(X, chunks=(20, 3)), y, solver=solver, max_iter=2000, **kw)
        assert res.status != "infeasible"
        if res.status == "separable":
            assert res.certificate.verify(X, y)
            assert reference_claim_holds(res, X / 1e155, y, (X / 1e155) @ (X / 1e155).T)


# ------------------------------------------------------------------ item: a strict verify()
def _infeasible_run():
    X, y = make_xor(200, random_state=0)[:2]
    res = mk.solve(X, y, solver="isnkpvn")
    assert res.status == "infeasible"
    return X, y, res


def test_verify_refuses_labels_outside_classes():
    X, y, res = _infeasible_run()
    bad = np.where(y == y.max(), 7, y)
    with pytest.raises(ValueError, match="not among the run's classes"):
        res.certificate.verify(X, bad)


@pytest.mark.parametrize("eps", [1.0, 5.0])
def test_eps_at_or_above_one_is_refused(eps):
    X, y = make_xor(20, random_state=0)[:2]
    with pytest.raises(ValueError, match="eps"):
        mk.solve(X, y, solver="isnkpvn", eps=eps)
    with pytest.raises(ValueError, match="eps"):
        mk.solve(X, y, solver="nvn", stop=[("dual_certificate", {"eps": eps})])
    with pytest.raises(ValueError, match="delta"):
        mk.solve(X, y, solver="snkpvn", delta=eps)


def test_threshold_is_the_runs_not_the_certificates():
    X, y, res = _infeasible_run()
    cert = res.certificate
    assert cert.eps == 1e-6
    cert._eps = 0.9  # tampering with the stored number changes nothing
    assert cert.eps == 1e-6
    cert.p = np.full(len(y), 1.0 / len(y))  # a p whose norm is far above 1e-6
    assert not cert.verify(X, y)
    # a certificate built outside a run is checked against the eps it was built with
    loose = InfeasibilityCertificate(np.full(len(y), 1.0 / len(y)), 0.0, 0.9, cert.kernel,
                                     cert.classes)
    assert loose.check(X, y).threshold == 0.9


def test_the_dual_certificate_rule_eps_is_the_threshold():
    X, y = make_xor(200, random_state=0)[:2]
    res = mk.solve(X, y, solver="nvn", stop=["separated", ("dual_certificate", {"eps": 1e-2})])
    assert res.status == "infeasible" and res.certificate.eps == 1e-2
    assert res.certificate.verify(X, y)
    assert mk.solve(X, y, solver="snkpvn", delta=1e-3).certificate.eps == 1e-3


def test_threshold_within_rounding_is_no_certificate():
    """Two copies of a point with opposite labels: ||p||_G is 0 in exact arithmetic, but a
    threshold below the recomputation's rounding bound cannot be certified."""
    X = np.array([[1.0, 2.0], [1.0, 2.0], [3.0, -1.0]])
    y = np.array([1, -1, 1])
    kernel = mk.get_plugin("kernel", "linear")()
    p = np.array([0.5, 0.5, 0.0])
    ok = InfeasibilityCertificate(p, 0.0, 1e-6, kernel, np.array([-1, 1])).check(X, y)
    assert ok and 0 < ok.rounding < 1e-12
    tiny = InfeasibilityCertificate(p, 0.0, 1e-300, kernel, np.array([-1, 1])).check(X, y)
    assert not tiny and tiny.margin < 0


@pytest.mark.parametrize("layout", ["dense", "csr", "fortran", "float32"])
def test_tampered_certificates_are_rejected(layout):
    X, y, res = _infeasible_run()
    Xl = {"dense": X, "csr": sp.csr_matrix(X), "fortran": np.asfortranarray(X),
          "float32": X.astype(np.float32)}[layout]
    cert = res.certificate
    assert cert.verify(Xl, y)
    p = cert.p
    for bad_p in (p * 1.5, np.r_[p[:-1], -1e-3 + p[-1]], np.roll(p, 7), np.full(p.size, 1 / p.size)):
        forged = InfeasibilityCertificate(bad_p, cert.value, 1e-6, cert.kernel, cert.classes,
                                          config=cert.config)
        assert not forged.verify(Xl, y)
    # G is invariant under swapping the two classes (y y^T); other labels are refused
    relabelled = InfeasibilityCertificate(p, cert.value, 1e-6, cert.kernel, np.array([0, 1]),
                                          config=cert.config)
    with pytest.raises(ValueError, match="classes"):
        relabelled.verify(Xl, y)
    Xr, yr = make_xor(200, random_state=0)[:2]
    sep = mk.solve(Xr, yr, solver="snkp", kernel="rbf", kernel_params={"gamma": 2.0})
    assert sep.status == "separable" and sep.certificate.verify(Xr, yr)
    alpha = sep.certificate.alpha.copy()
    alpha[np.argmax(alpha)] = -alpha.sum()
    forged = SeparatorCertificate(alpha, 1.0, sep.certificate.kernel, sep.certificate.classes)
    assert not forged.verify(Xr, yr)


def test_rounding_bound_covers_the_exact_value():
    """The referee's upper bound on ||p||_G is never below a long-double recomputation, and
    its G alpha lower bound never above it."""
    rng = np.random.default_rng(5)
    for trial in range(20):
        n, d = rng.integers(3, 30), rng.integers(1, 6)
        X = rng.normal(size=(n, d)) * 10.0 ** rng.integers(-100, 100)
        y = np.where(rng.random(n) > 0.5, 1, -1)
        y[:2] = (-1, 1)
        p = rng.random(n) ** 4
        p /= p.sum()
        kernel = mk.get_plugin("kernel", "linear")()
        v = InfeasibilityCertificate(p, 0.0, 0.5, kernel, np.array([-1, 1])).check(X, y)
        G = normalized_gram(np.asarray(X, dtype=np.longdouble) @ np.asarray(X, dtype=np.longdouble).T, y)
        exact = float(np.sqrt(max(p.astype(np.longdouble) @ G @ p.astype(np.longdouble), 0)))
        assert v.value + v.rounding >= exact
        s = SeparatorCertificate(p, 0.0, kernel, np.array([-1, 1])).check(X, y)
        gmin = float(np.min(G @ p.astype(np.longdouble)))
        assert s.margin <= gmin / p.sum() and s.value + 1e-12 >= gmin


def test_verdict_reports_value_threshold_and_margin():
    X, y, res = _infeasible_run()
    v = res.certificate.check(X, y)
    assert isinstance(v, Verdict) and v
    assert v.threshold == 1e-6 and 0 <= v.value < 1e-6
    assert v.margin == pytest.approx(v.threshold - v.value - v.rounding)
    assert "holds" in repr(v)


@pytest.mark.parametrize("name,params", [("rbf", {"gamma": 0.7}), ("laplacian", {"gamma": 0.3}),
                                         ("poly", {"degree": 3, "gamma": 0.5, "coef0": 1.0})])
@pytest.mark.parametrize("offset", [0.0, 1e4, 1e7])
@pytest.mark.parametrize("layout", ["dense", "csr"])
def test_careful_block_bounds_cover_a_long_double_recomputation(name, params, offset, layout):
    if name == "poly" and offset:
        pytest.skip("the polynomial kernel of far-away points overflows by design")
    rng = np.random.default_rng(3)
    A = rng.normal(size=(15, 4))
    A[rng.random(A.shape) < 0.3] = 0.0
    A[:, 0] += offset
    B = np.vstack([A[:5] + 1e-3 * rng.normal(size=(5, 4)), rng.normal(size=(6, 4))])
    kernel = mk.get_plugin("kernel", name)(**params)
    Al, Bl = (sp.csr_matrix(A), sp.csr_matrix(B)) if layout == "csr" else (A, B)
    K, err = kernel.careful_block(Al, Bl)
    a, b = np.asarray(A, dtype=np.longdouble), np.asarray(B, dtype=np.longdouble)
    if name == "rbf":
        exact = np.exp(-params["gamma"] * ((a[:, None] - b[None]) ** 2).sum(axis=2))
    elif name == "laplacian":
        exact = np.exp(-params["gamma"] * np.abs(a[:, None] - b[None]).sum(axis=2))
    else:
        exact = (params["gamma"] * (a @ b.T) + params["coef0"]) ** params["degree"]
    assert np.all(np.abs(K - exact) <= err)
    assert float(np.max(err / np.maximum(np.abs(exact), 1e-300))) < 1e-6


def test_verify_on_a_numpy_backed_xarray():
    xr = pytest.importorskip("xarray")
    X, y, res = _infeasible_run()
    assert res.certificate.verify(xr.DataArray(X), y)


def test_columns_beyond_the_memory_budget_are_refused_before_solving():
    X = sp.csr_matrix((np.ones(2), np.array([0, 2_999_999_999]), np.array([0, 1, 2])),
                      shape=(2, 3_000_000_000))
    with pytest.raises(ValueError, match="columns.*memory_budget"):
        mk.solve(X, [0, 1])


# ------------------------------------------------------------------ margin bounds, kernels
def _long_double_bounds(res, X, y, K):
    """min(G alpha)/||alpha||_G and ||p||_G of the result's alpha and best p, in long double."""
    G = normalized_gram(K, pm(y))
    alpha = np.asarray(res.dual_coef_, dtype=np.longdouble)
    Ga = G @ alpha
    lower = Ga.min() / np.sqrt(alpha @ Ga)
    return float(lower), Ga


@pytest.mark.parametrize("solver", ["snkp", "snkpvn", "nvn"])
@pytest.mark.parametrize("offset,dtype", [(0.0, np.float64), (1e3, np.float32)])
def test_margin_bounds_are_the_referees(solver, offset, dtype):
    """Result.margin_bounds bound rho_K from both sides as a long-double recomputation sees
    them, also where the solver's own float32 estimate of ||p||_G rounds to 0."""
    X, y = offset_pairs(offset, dtype)
    res = mk.solve(X, y, solver=solver, kernel="rbf", kernel_params={"gamma": 0.5},
                   max_iter=3000)
    lower, upper = res.margin_bounds
    K = rbf_reference(X.astype(np.float64), X.astype(np.float64), 0.5)
    exact_lower, _ = _long_double_bounds(res, X, y, K)
    assert upper > 0 and lower <= upper
    if res.status == "separable":
        assert 0 < lower <= exact_lower * (1 + 1e-12)
    # every p in the simplex bounds rho_K from above: the referee's upper is >= rho_K >=
    # the exact margin of the returned alpha
    assert upper >= exact_lower


def test_margin_bounds_on_dask_match_in_memory():
    da = pytest.importorskip("dask.array")
    X, y = make_xor(120, random_state=1)[:2]
    X = np.c_[X, np.ones(len(X))]
    mem = mk.solve(X, y, solver="nvn", max_iter=400)
    dsk = mk.solve(da.from_array(X, chunks=(40, 3)), y, solver="nvn", max_iter=400)
    np.testing.assert_allclose(dsk.margin_bounds, mem.margin_bounds, rtol=1e-9)


def test_overflowing_gram_is_refused():
    X, y = offset_pairs(0.0)
    with pytest.raises(ValueError, match="non-finite entries.*rescale X"):
        mk.solve(X * 1e155, y, solver="perceptron", kernel="poly", kernel_params={"degree": 3})


def test_certificates_of_another_kernel_are_rejected():
    """A certificate checked with a kernel other than its run's certifies another problem."""
    import copy

    X, y, res = _infeasible_run()
    forged = copy.deepcopy(res.certificate)
    forged.kernel = mk.get_plugin("kernel", "rbf")(gamma=1.0)
    verdict = forged.check(X, y)
    assert not verdict and "not the run's kernel" in verdict.reason
    Xr, yr = make_xor(200, random_state=0)[:2]
    sep = mk.solve(Xr, yr, solver="snkp", kernel="rbf", kernel_params={"gamma": 2.0})
    forged = copy.deepcopy(sep.certificate)
    forged.kernel = mk.get_plugin("kernel", "rbf")(gamma=3.0)
    assert sep.certificate.verify(Xr, yr) and not forged.verify(Xr, yr)
    svm = mk.solve(Xr, yr, solver="fista", kernel="rff",
                   kernel_params={"n_components": 50, "random_state": 0})
    assert svm.status == "certified" and svm.certificate.verify(Xr, yr)
    forged = copy.deepcopy(svm.certificate)
    forged.kernel = None  # "the linear map"
    verdict = forged.check(Xr, yr)
    assert not verdict and "the run's is" in verdict.reason


@pytest.mark.parametrize("layout", ["dense", "csr"])
def test_a_point_of_zero_norm_defines_no_certificate(layout):
    """p on a row of zero norm would have ||p||_G = 0: the normalized Gram is undefined
    there, so no p certifies anything."""
    X, y, res = _infeasible_run()
    X0 = X.copy()
    X0[5] = 0.0
    X0 = sp.csr_matrix(X0) if layout == "csr" else X0
    p = np.zeros(len(y))
    p[5] = 1.0
    cert = InfeasibilityCertificate(p, 0.0, 1e-6, res.certificate.kernel, res.certificate.classes,
                                    config=res.certificate.config)
    verdict = cert.check(X0, y)
    assert not verdict and "K(x, x) = 0" in verdict.reason
    sep = SeparatorCertificate(p, 1.0, res.certificate.kernel, res.certificate.classes)
    verdict = sep.check(X0, y)
    assert not verdict and "K(x, x) = 0" in verdict.reason


def test_a_certificate_of_another_size_is_rejected_with_a_reason():
    X, y, res = _infeasible_run()
    for cert in (res.certificate,
                 SeparatorCertificate(np.ones(len(y)), 1.0, res.certificate.kernel,
                                      res.certificate.classes)):
        verdict = cert.check(X[:-1], y[:-1])
        assert not verdict and "entries for" in verdict.reason


def test_separator_verdict_value_is_the_normalized_margin():
    """Verdict.value = min_i (G alpha)_i for alpha scaled to sum |alpha| = 1 (long double)."""
    Xr, yr = make_xor(200, random_state=0)[:2]
    sep = mk.solve(Xr, yr, solver="snkp", kernel="rbf", kernel_params={"gamma": 2.0})
    v = sep.certificate.check(Xr, yr)
    G = normalized_gram(rbf_reference(Xr, Xr, 2.0), pm(yr))
    alpha = np.asarray(sep.certificate.alpha, dtype=np.longdouble)
    exact = float((G @ alpha).min() / np.abs(alpha).sum())
    assert v and v.value == pytest.approx(exact, rel=1e-9)
    assert v.margin <= exact
    # the verdict's numbers do not depend on the scale of alpha
    scaled = SeparatorCertificate(3.0 * sep.certificate.alpha, 1.0, sep.certificate.kernel,
                                  sep.certificate.classes)
    w = scaled.check(Xr, yr)
    assert w and w.value == pytest.approx(v.value, rel=1e-12)
    assert w.rounding == pytest.approx(v.rounding, rel=1e-9)
    assert w.margin == pytest.approx(v.margin, rel=1e-9)


@pytest.mark.parametrize("solver", ["fista", "fista_svm", "dcd"])
def test_fitted_feature_maps_certify_float32_data_as_float64(solver):
    """A fitted map is evaluated on float64 rows by the solvers and the referee alike, so
    float32 data reach the same certified claim as their float64 copy."""
    rng = np.random.default_rng(0)
    X = (rng.normal(size=(300, 3)) * 2).astype(np.float32)
    y = np.where(np.sin(2 * X[:, 0]) + X[:, 1] > 0, 1.0, -1.0)
    kw = dict(solver=solver, kernel="nystroem", max_iter=20000, random_state=0,
              kernel_params={"n_components": 60, "random_state": 1, "base_params": {"gamma": 0.5}},
              stop=("certified_points", {"fraction": 0.0}))
    r32, r64 = mk.solve(X, y, **kw), mk.solve(X.astype(np.float64), y, **kw)
    assert r32.status == r64.status == "certified" and r32.n_iter == r64.n_iter
    assert np.array_equal(r32.certified_mask, r64.certified_mask)
    assert r32.certificate.verify(X, y) and r64.certificate.verify(X, y)


def test_kernel_check_survives_a_round_trip_with_a_kernel_instance_parameter(tmp_path):
    from marginkit.kernels.builtin import RBFKernel

    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 3))
    y = np.where(np.sin(2 * X[:, 0]) + X[:, 1] > 0, 1.0, -1.0)
    res = mk.solve(X, y, solver="nvn", kernel="nystroem",
                   kernel_params={"base": RBFKernel(gamma=0.7), "n_components": 40,
                                  "random_state": 1})
    assert res.status == "separable"
    res.save(tmp_path / "r.mk")
    assert mk.load_result(tmp_path / "r.mk").certificate.verify(X, y)
    forged = mk.load_result(tmp_path / "r.mk").certificate
    forged.kernel = mk.get_plugin("kernel", "nystroem")(base=RBFKernel(gamma=0.8),
                                                        n_components=40, random_state=1)
    assert not forged.verify(X, y)


def test_an_indefinite_gram_without_a_claim_keeps_its_result():
    """No claim, no certificate: the run's result stands, with margin bounds that say
    nothing (the kernel defines no margin) and a warning naming the cause."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    y = np.where(rng.random(60) > .5, 1., -1.)
    K = np.tanh(0.5 * X @ X.T - 1.0) + 1.5 * np.eye(60)
    K = 0.5 * (K + K.T)
    with pytest.warns(RuntimeWarning, match="not positive semi-definite"):
        res = mk.solve(K, y, solver="nkp", kernel="precomputed", stop=("max_iter", {"n": 30}))
    assert res.status == "max_iter" and res.margin_bounds == (-np.inf, np.inf)


@pytest.mark.parametrize("layout", ["dense", "csr"])
def test_a_margin_of_exactly_zero_is_no_separator(layout):
    """G alpha >= 0 with an exact 0 (a point orthogonal to the separator) is no strict
    separation: the referee needs min_i (G alpha)_i > 0 beyond its rounding bound."""
    X = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 0.0]])
    X = sp.csr_matrix(X) if layout == "csr" else X
    cert = SeparatorCertificate(np.array([1.0, 0.0, 0.0]), 0.0,
                                mk.get_plugin("kernel", "linear")(), np.array([-1, 1]))
    verdict = cert.check(X, np.array([1, 1, 1]))
    assert not verdict and verdict.value == 0.0


def test_kernel_parameters_compare_by_value():
    """Nested kernel parameters (a base kernel's dict, lists) compare entry by entry."""
    import copy

    from marginkit.certificates import _same_value

    assert _same_value({"gamma": 0.5}, {"gamma": 0.5})
    assert not _same_value({"gamma": 0.5}, {"gamma": 0.8})
    assert not _same_value({"gamma": 0.5}, {"degree": 0.5})
    assert _same_value([1.0, np.array([2.0])], (1.0, np.array([2.0])))
    assert not _same_value([1.0, 2.0], [1.0, 3.0]) and not _same_value([1.0], [1.0, 1.0])
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 3))
    y = np.where(np.sin(2 * X[:, 0]) + X[:, 1] > 0, 1.0, -1.0)
    kp = {"base_params": {"gamma": 0.7}, "n_components": 40, "random_state": 1}
    res = mk.solve(X, y, solver="nvn", kernel="nystroem", kernel_params=kp)
    assert res.status == "separable" and res.certificate.verify(X, y)
    forged = copy.deepcopy(res.certificate)
    forged.kernel = mk.get_plugin("kernel", "nystroem")(**{**kp, "base_params": {"gamma": 0.8}})
    verdict = forged.check(X, y)
    assert not verdict and "not the run's kernel" in verdict.reason


def test_certified_points_outside_the_box_are_rejected():
    import copy

    Xr, yr = make_xor(200, random_state=0)[:2]
    res = mk.solve(Xr, yr, solver="fista", kernel="rff",
                   kernel_params={"n_components": 50, "random_state": 0})
    assert res.status == "certified" and res.certificate.verify(Xr, yr)
    for r in (res.certificate.r * 1.0, res.certificate.r.copy()):
        r[np.argmax(r)] = res.certificate.gamma * (1 + 1e-3)
        forged = copy.deepcopy(res.certificate)
        forged.r = r
        verdict = forged.check(Xr, yr)
        assert not verdict and "box" in verdict.reason
    forged.r = res.certificate.r.copy()
    forged.r[0] = -1e-3
    assert "box" in forged.check(Xr, yr).reason


@pytest.mark.parametrize("solver", ["snkpvn", "isnkpvn", "snkp"])
@pytest.mark.parametrize("layout", ["dense", "csr"])
def test_rows_of_norm_1e_300_run(solver, layout):
    """The l2 smoother's bound on lambda_max(G) scales each entry by 1/||x_i|| (not the
    product by 1/||x_i||^2, which overflows): tiny rows run as their unscaled copy does."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 4))
    y = np.where(X @ rng.normal(size=4) > 0, 1.0, -1.0)
    ref = mk.solve(X, y, solver=solver, max_iter=50)
    Xt = X * 1e-300
    res = mk.solve(sp.csr_matrix(Xt) if layout == "csr" else Xt, y, solver=solver, max_iter=50)
    assert res.status == ref.status and res.n_iter == ref.n_iter


@pytest.mark.parametrize("solver", ["nvn", "fista", "iterated_tikhonov"])
def test_nystroem_centres_whose_kernel_overflows_are_refused(solver):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3)) * 1e40
    y = np.where(X[:, 0] > 0, 1., -1.)
    with pytest.raises(ValueError, match=r"K\(C, C\) at the centres are not finite.*rescale X"):
        mk.solve(X, y, solver=solver, kernel="nystroem", max_iter=50,
                 kernel_params={"base": "poly", "base_params": {"degree": 8},
                                "n_components": 20, "random_state": 0})


def test_a_certificate_without_a_kernel_is_the_linear_kernels():
    Xr, yr = make_xor(200, random_state=0)[:2]
    X = np.c_[Xr, Xr[:, 0] * Xr[:, 1]]  # separable by a hyperplane through 0
    res = mk.solve(X, yr, solver="snkp", max_iter=3000)
    assert res.status == "separable"
    mine = SeparatorCertificate(res.certificate.alpha, 0.0, None, res.classes_,
                                config=res.config)
    assert mine.check(X, yr).value == pytest.approx(res.certificate.check(X, yr).value)


def test_problem_labels_of_minus_one_and_one_are_y_read_only():
    X = np.random.default_rng(0).standard_normal((40, 3))
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    res = mk.solve(X, y, solver="dcd", random_state=0)
    assert res.status == "certified" and res.certificate.verify(X, y)
    from marginkit.plugins import Problem

    kw = dict(X=X, y=y, kernel=None, smoother=None, params={})
    p = Problem(classes_=np.array([-1.0, 1.0]), **kw)
    got = p.labels()
    assert np.array_equal(got, y) and not got.flags.writeable
    q = Problem(classes_=np.array([-1, 1]), **kw)
    assert np.array_equal(q.labels(), y) and q.labels().dtype == np.int64


def test_predict_on_float32_rows_agrees_with_the_certified_separator():
    """Found by review: on float32 X the kernel models were evaluated in float32 by
    ``predict``, and a poly-kernel separator the referee verified in float64 misclassified
    training point 0 (decision value -3e-4 against +3.3e-3 in long double). Kernel models
    evaluate float32 rows in float64."""
    X = np.array([[0.3989378], [-1.8854105], [0.40292716]], dtype=np.float32)
    y = np.array([1, 1, -1])
    res = mk.solve(X, y, solver="snkp", kernel="poly", kernel_params={"gamma": 1e4},
                   max_iter=5000)
    assert res.status == "separable" and res.certificate.verify(X, y)
    L = np.longdouble
    f = ((L(1e4) * (X.astype(L) @ np.asarray(res.support_, dtype=L).T) + 1) ** 3) \
        @ res.support_coef_.astype(L)
    assert np.all(y * f > 0)
    assert np.array_equal(res.predict(X), y)
    assert np.array_equal(res.decision_function(X), res.decision_function(X.astype(np.float64)))


def test_the_psd_proof_is_kept_per_matrix_and_its_allowance_is_a_rejection(monkeypatch):
    """Measured: on a 4,096-point linear Gram matrix a run re-checks a refused claim as its
    p improves, and each check factored the matrix again (2 s). The proof's answer is kept
    for the same bytes. A claim the allowance refuses is an ordinary rejection (the run
    goes on: another p may pass; found by review, refusing it by name ended runs that
    would have certified); one that no p could meet (delta > n eps^2) is refused by
    name."""
    import marginkit.certificates as C

    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 5))
    y = np.where(rng.random(200) < 0.5, 1, -1)
    K = X @ X.T
    res = mk.solve(K, y, solver="isnkpvn", kernel="precomputed")
    assert res.status == "infeasible"
    calls = []
    real = C._psd_shift_factored
    monkeypatch.setattr(C, "_psd_shift_factored", lambda *a: calls.append(1) or real(*a))
    C._PSD_MEMO.clear()
    assert res.certificate.verify(K, y) and res.certificate.verify(K, y)
    assert len(calls) == 1  # the second check reads the first one's answer
    edited = K.copy()
    edited[0, 0] *= 2.0
    res.certificate.check(edited, y)
    assert len(calls) == 2  # other bytes, another proof
    p = res.certificate.p / res.certificate.p.sum()
    C._PSD_MEMO.clear()
    monkeypatch.setattr(C, "_psd_shift_factored", lambda *a: 1.01e-12 / float(p @ p))
    assert res.certificate.check(K, y).ok is False
    C._PSD_MEMO.clear()
    monkeypatch.setattr(C, "_psd_shift_factored", lambda *a: 1.01e-12 * len(y))
    with pytest.raises(NotPositiveSemidefiniteError, match="ask for eps >="):
        res.certificate.verify(K, y)
    C._PSD_MEMO.clear()


def test_a_gram_indefinite_beyond_its_rounding_proves_nothing():
    """Found by review: the PSD proof tried shifts up to 32768 c0 (c0 = 4 (n + 2)^2 u) and
    took a Gram matrix with an exactly negative quadratic form (lambda_min(G) = -3.5e-8 at
    n = 50) as "PSD within delta": an "infeasible" claim verified at eps = 1e-4 while a
    separator (alpha = -1) verified too. The shifts stay at the rounding level now."""
    n = 50
    rng = np.random.default_rng(1)
    Xh = rng.standard_normal((n // 2, 3))
    X = np.vstack([Xh, -Xh])
    y = np.ones(n)
    y[: n // 4] = -1
    y[n // 2: n // 2 + n // 4] = -1
    K = X @ X.T
    d = np.sqrt(np.diag(K))
    Kp = K - 7e-10 * np.outer(y, y) * np.outer(d, d)
    Kp = (Kp + Kp.T) / 2
    G = Kp / np.outer(np.sqrt(np.diag(Kp)), np.sqrt(np.diag(Kp))) * np.outer(y, y)
    assert np.linalg.eigvalsh(G)[0] < -3e-8
    kernel = mk.get_plugin("kernel", "precomputed")()
    cert = InfeasibilityCertificate(np.full(n, 1.0 / n), 0.0, 1e-4, kernel)
    with pytest.raises(NotPositiveSemidefiniteError, match="beyond the rounding"):
        cert.check(Kp, y)


def test_an_underflowing_scaled_alpha_is_in_the_gram_bound():
    """Found by review: alpha_j = 3 eta for 600 points with t_j = 1/sqrt(K_jj) = 2^99.5:
    the scaling of alpha loses eta / 2 per entry, amplified by t_j, and a forged separator
    of an exactly PSD K = X X^T verified with (G alpha)_0 < 0 exactly."""
    from marginkit.kernels.builtin import PrecomputedKernel

    eta, s, m = 2.0 ** -1074, 2.0 ** -100, 600
    X = [(17.0, 0.0), (0.0, 1.0)] + [(s, s)] * m + [(-s, s)]
    alpha = np.array([0.0, 1.0] + [3 * eta] * m + [2 * (1.5 * m + 1) * eta])
    X = np.array(X)
    K = X @ X.T
    row0 = sum(Fraction(float(K[0, k])) * Fraction(float(alpha[k])) for k in range(2, len(X)))
    assert row0 < 0  # alpha misclassifies x_0
    cert = SeparatorCertificate(alpha, 0.0, PrecomputedKernel(), classes=np.array([-1.0, 1.0]))
    assert not cert.verify(K, np.ones(len(X)))


def _rbf_in_float32(A, B):
    A = np.asarray(A, dtype=np.float32)
    B = np.asarray(B, dtype=np.float32)
    d2 = (A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2 * A @ B.T
    return np.exp(-2.0 * np.maximum(d2, 0)).astype(np.float32)


def test_a_float32_callable_keeps_its_margin_bounds():
    """Found by review: a callable RBF that returns float32 lost its margin bounds
    ((0.474, 0.487) -> (-inf, inf), with a warning that the kernel is not PSD): its values
    are float32 numbers, and the PSD proof counts their rounding as it does a float32
    precomputed Gram matrix's."""
    X, y = make_xor(300, noise=0.05, random_state=0)[:2]
    res = mk.solve(X, y, solver="snkp", kernel=_rbf_in_float32)
    assert res.status == "separable" and res.certificate.verify(X, y)
    lower, upper = res.margin_bounds
    assert 0 < lower <= upper < 1


def test_an_exact_opposite_duplicate_needs_no_psd_allowance():
    """Found by review: with the PSD proof's allowance delta ||p||^2, the exact certificate
    p = (1/2, 1/2) on a point duplicated with the opposite label could no longer be
    certified on a precomputed Gram matrix of a few hundred points. Identical rows (and
    columns) with y_j p_j summing to 0 exactly give G p = 0 exactly: no separator exists,
    whatever the spectrum."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = np.where(X @ np.array([1.0, -2.0, 0.5]) > 0, 1, -1)
    X[-1] = X[0]
    y[-1] = -y[0]
    K = X @ X.T
    # BLAS rounds identical rows differently by their place: the Gram matrix of a kernel
    # evaluated per pair has them identical, as here
    K[-1], K[:, -1] = K[0], K[:, 0]
    K[-1, -1] = K[0, 0]
    p = np.zeros(300)
    p[0] = p[-1] = 0.5
    for data, kernel in ((K, "precomputed"), (X, _indexed_kernel(K))):
        if kernel != "precomputed":
            data = np.arange(300.0)[:, None]
            data[-1] = data[0]  # the duplicate is the same row of the callable's input
        kern = mk.get_plugin("kernel", "precomputed")() if kernel == "precomputed" else \
            mk.get_plugin("kernel", "callable")(function=kernel)
        assert InfeasibilityCertificate(p, 0.0, 1e-6, kern).verify(data, y)
        q = p.copy()
        q[0], q[-1] = 0.5 + 2.0 ** -40, 0.5 - 2.0 ** -40  # no longer exactly balanced
        assert not InfeasibilityCertificate(q, 0.0, 1e-6, kern).verify(data, y)  # allowance
    res = mk.solve(K, y, solver="isnkpvn", kernel="precomputed")
    assert res.status == "infeasible" and res.certificate.verify(K, y)


def _rbf_float32(A, B):
    """The RBF kernel (gamma 1) computed in float32: points 2e-4 apart get identical rows."""
    A = np.asarray(A.toarray() if sp.issparse(A) else A, dtype=np.float32)
    B = np.asarray(B.toarray() if sp.issparse(B) else B, dtype=np.float32)
    return np.exp(-((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)).astype(np.float32)


class _RBFSubclass(RBFKernel):
    """marginkit's RBF kernel under another class: not PSD by construction to the referee."""


@pytest.mark.parametrize("case", ["float32_callable", "rbf_subclass", "csr_rows"])
def test_bit_identical_computed_rows_of_different_points_prove_nothing(case):
    """Found by review: the exact Gordan shortcut took bit-identical computed Gram rows for
    identical points. Two points 2e-4 apart with opposite labels under an RBF callable
    computed in float32 (Gram all ones) got "infeasible" from nvn, snkpvn and isnkpvn at
    eps = 1e-6, and p = (1/2, 1/2) verified, where the pair is separable with normalized
    margin sqrt((1 - exp(-4e-8)) / 2) = 1.4e-4; under a subclass of the RBF kernel, points
    1e-17 apart verified at eps = 1e-20 (margin 7.1e-18). Rows are now grouped only when the
    points are the same stored row of X; an exact duplicate still proves G p = 0."""
    if case == "float32_callable":
        kern = mk.get_plugin("kernel", "callable")(function=_rbf_float32)
        # the third point far from both (its float32 entries with them are 0)
        X, copy, eps = np.array([[0.0], [2e-4], [30.0]]), np.array([[0.0], [0.0], [30.0]]), 1e-6
    elif case == "rbf_subclass":
        kern = _RBFSubclass(gamma=1.0)
        X, copy, eps = np.array([[0.0], [1e-17], [3.0]]), np.array([[0.0], [0.0], [3.0]]), 1e-20
    else:  # the same values, one CSR row storing an explicit zero: not the same stored row
        kern = mk.get_plugin("kernel", "callable")(function=_rbf_float32)
        X = sp.csr_matrix((np.array([1.0, 1.0, 0.0, 3.0]), np.array([0, 0, 1, 0]),
                           np.array([0, 1, 3, 4])), shape=(3, 2))
        copy, eps = sp.csr_matrix(np.array([[1.0, 0.0], [1.0, 0.0], [3.0, 0.0]])), 1e-6
    y = np.array([1, -1, 1])
    p = np.array([0.5, 0.5, 0.0])
    cert = InfeasibilityCertificate(p, 0.0, eps, kern)
    try:
        verified = bool(cert.verify(X, y))
    except NotPositiveSemidefiniteError as e:  # the honest answer: eps is out of reach
        assert "ask for eps >=" in str(e)
        verified = False
    assert not verified
    assert InfeasibilityCertificate(p, 0.0, eps, kern).verify(copy, y)  # an exact duplicate


def test_a_duplicate_with_a_signed_zero_is_a_duplicate():
    """Review of the stored-row rule: [-0.0, x] beside [0.0, x] (the same real point) with
    the opposite label must still prove G p = 0 exactly (not only within the PSD
    allowance, which fails at eps = 1e-6 on 300 points)."""
    def rbf(A, B):
        A, B = (np.asarray(M.toarray() if sp.issparse(M) else M, dtype=np.float64)
                for M in (A, B))
        return np.exp(-((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    y = np.where(X[:, 0] > 0, 1, -1)
    X[0, 0] = 0.0
    X[-1] = X[0]
    X[-1, 0] = -0.0
    y[-1] = -y[0]
    p = np.zeros(300)
    p[0] = p[-1] = 0.5
    kern = mk.get_plugin("kernel", "callable")(function=rbf)
    assert InfeasibilityCertificate(p, 0.0, 1e-6, kern).verify(X, y)
    assert InfeasibilityCertificate(p, 0.0, 1e-6, kern).verify(sp.csr_matrix(X), y)


def _values_c(A, B):
    """1 on the diagonal, 1 + 2e-7 off it (6 distinct 1-D points): an indefinite Gram
    matrix, lambda_min = -2e-7, far beyond float64's rounding."""
    A, B = np.asarray(A), np.asarray(B)
    return np.where(A[:, :1] == B[:, 0][None, :], 1.0, 1.0 + 2e-7)


def _float32_for_small_blocks(A, B):
    K = _values_c(A, B)
    return K.astype(np.float32) if K.shape == (2, 2) else K


def test_float32_allowance_comes_from_the_blocks_it_covers():
    """Found by review: the PSD proof granted float32's rounding allowance when a 2-row
    probe of the callable came back float32; a callable returning float32 for 2 x 2 blocks
    only got an "infeasible" claim verified on its indefinite float64 Gram matrix, while
    alpha = -1 separates (both claims verified). The allowance now rides on each block's
    own error bound (``Kernel.careful_block``): the float64 Gram matrix is refused."""
    X = np.arange(6, dtype=np.float64).reshape(-1, 1)
    y = np.array([1, -1, 1, -1, 1, -1])
    stop = ["separated", ("dual_certificate", {"eps": 1e-3})]
    for kernel in (_values_c, _float32_for_small_blocks):
        with pytest.raises(NotPositiveSemidefiniteError):
            mk.solve(X, y, solver="snkp", kernel=kernel, stop=stop, max_iter=5000)
    p = np.full(6, 1.0 / 6)
    kern = mk.kernels.builtin.CallableKernel(function=_float32_for_small_blocks)
    with pytest.raises(NotPositiveSemidefiniteError):
        InfeasibilityCertificate(p, 0.0, 1e-3, kern, np.array([-1, 1])).check(X, y)
    # a block the function does return in float32 carries float32's rounding
    K32, E32 = kern.careful_block(X[:2], X[:2])
    assert np.all(E32 >= 2.0 ** -24 * np.abs(K32)) and E32.max() > 0
    K64, E64 = kern.careful_block(X[:3], X[:3])
    assert np.all(E64 < 1e-14 * np.abs(K64) + 1e-300)


def test_every_certificate_kind_treats_unreadable_and_mismatched_data_alike():
    """verify raised for the linear SVM and perceptron certificates but returned False
    for the kernel SVM and Newton-decrement ones on an X it cannot read: now every kind
    raises for X that is not a finite numeric matrix and rejects data that do not fit."""
    import warnings

    rng = np.random.default_rng(0)
    X = rng.standard_normal((100, 4))
    y = np.where(X[:, 0] > 0, 1, -1)
    runs = {
        "dcd": dict(solver="dcd"),
        "dcd rbf": dict(solver="dcd", kernel="rbf"),
        # a feature map's other widths were its ValueError (found by review)
        "dcd nystroem": dict(solver="dcd", kernel="nystroem",
                             kernel_params={"n_components": 30, "random_state": 0}),
        "dcd rff": dict(solver="dcd", kernel="rff",
                        kernel_params={"n_components": 30, "random_state": 0}),
        "snkp": dict(solver="snkp", kernel="rbf"),
        "tikhonov": dict(solver="iterated_tikhonov", kernel="linear"),
        "tikhonov rbf": dict(solver="iterated_tikhonov", kernel="rbf"),
    }
    for name, kw in runs.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cert = mk.solve(X, y, **kw).certificate
        assert cert is not None and cert.verify(X, y), name
        for bad, exc in ((np.full((100, 4), "a"), TypeError), (None, TypeError),
                         (np.where(X > 1, np.nan, X), ValueError), (X[:, :, None], ValueError)):
            with pytest.raises(exc):
                cert.verify(bad, y)
        for other in (X[:, :3], np.hstack([X, X[:, :1]]), X[:50]):
            assert cert.verify(other, y) is False, name


def test_unreadable_data_raise_before_any_verdict_and_non_square_grams_are_rejected():
    """A weighted run's certificate checked without its weights on an X that is not a
    finite numeric matrix raises for every kind (the linear SVM and Newton-decrement
    checks answered "pass its weights" first); a Newton-decrement certificate of a
    precomputed kernel on a non-square X is a rejection naming the square Gram matrix
    (numpy's matmul error escaped, or a column was broadcast into a "not PSD" matrix;
    both found by review)."""
    import warnings

    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 4))
    y = np.where(X[:, 0] ** 2 + X[:, 1] ** 2 > 1, 1, -1)
    w = rng.uniform(0.5, 2.0, 80)
    Xnan = X.copy()
    Xnan[3, 1] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kw in (dict(solver="dcd"), dict(solver="dcd", kernel="rbf"),
                   dict(solver="iterated_tikhonov", kernel="rbf")):
            cert = mk.solve(X, y, sample_weight=w, **kw).certificate
            with pytest.raises(ValueError, match=r"X contains NaN or infinity in row\(s\) \[3\]"):
                cert.check(Xnan, y)
            with pytest.raises(TypeError, match="X is None"):
                cert.check(None, y)
            v = cert.check(X, y)
            assert not v and "pass its" in v.reason and "weight" in v.reason
        K = np.exp(-0.5 * ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
        tik = mk.solve(K, y, solver="iterated_tikhonov", kernel="precomputed").certificate
        Kc = np.full((80, 80), 2.0)
        tikc = mk.solve(Kc, y, solver="iterated_tikhonov", kernel="precomputed").certificate
    for cert, bad in ((tik, K[:, :1]), (tik, K[:, :5]), (tikc, Kc[:, :1]), (tikc, Kc[:1])):
        v = cert.check(bad, y)
        assert not v and "needs the square Gram matrix" in v.reason
    assert tik.check(K, y)


def test_a_map_fitted_again_reads_x_before_any_verdict():
    """A certificate whose Nystroem map must be fitted again on the training rows (a
    result loaded without the fit) raises for an X it cannot read, as every check does
    (the refit's ValueError became a rejected verdict), and verifies on the rows."""
    import copy
    import warnings

    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 3))
    y = np.where(X[:, 0] ** 2 + X[:, 1] ** 2 > 1, 1, -1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = mk.solve(X, y, solver="dcd", kernel="nystroem",
                       kernel_params={"n_components": 50, "random_state": 0})
    cert = copy.copy(res.certificate)
    cert.kernel = type(cert.kernel)(**cert.kernel.params)
    assert cert.kernel.fitted is False
    Xn = X.copy()
    Xn[2, 1] = np.nan
    with pytest.raises(ValueError, match=r"X contains NaN or infinity in row\(s\) \[2\]"):
        cert.check(Xn, y)  # first: a check on the rows fits the map
    assert cert.kernel.fitted is False
    assert cert.check(X, y)


def test_a_nystroem_newton_certificate_reads_a_list_as_x():
    """The Newton-decrement check of a Nystroem run read X.shape of the caller's X: a list
    raised AttributeError (found by review); every check reads X validated."""
    import warnings

    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = mk.solve(X, y, solver="iterated_tikhonov", kernel="rbf", n_components=30,
                       random_state=0)
    assert res.certificate.check(X.tolist(), y)
    assert res.certificate.verify(X.tolist(), list(y))


def test_labels_outside_the_classes_raise_for_every_kind():
    """A strict verify for every kind: labels outside the run's classes raise ValueError
    (the kernel SVM and logistic Newton-decrement checks returned a rejected verdict where
    the linear SVM and perceptron ones raised; found by review)."""
    import warnings

    rng = np.random.default_rng(0)
    X = rng.standard_normal((120, 3))
    y = np.where(X[:, 0] ** 2 + X[:, 1] ** 2 > 1, 1, -1)
    bad = np.where(y > 0, 7, y)
    runs = (dict(solver="dcd"), dict(solver="dcd", kernel="rbf"),
            dict(solver="snkp", kernel="rbf"),
            dict(solver="iterated_tikhonov", kernel="rbf"),
            dict(solver="iterated_tikhonov", kernel="linear"))
    for kw in runs:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cert = mk.solve(X, y, **kw).certificate
        assert cert is not None and cert.verify(X, y), kw
        with pytest.raises(ValueError, match="not among the run's classes"):
            cert.verify(X, bad)


def test_a_separator_is_certified_only_as_predict_evaluates_it():
    """Found by review: on a close pair at 70 (5e-7 apart, opposite labels) the RBF
    perceptron's separator of normalized margin 4e-14 verified ("separable"), while
    ``predict`` misclassified a training point: its kernel evaluation (the norm formula,
    accurate to 2^-36) gave K(x_10, x_11) = 1 where careful_block's explicit differences
    give 1 - 1.25e-13, and both points scored 0. The stored separator is now checked
    with the error of the kernel's own evaluation (``Kernel.evaluation_bound``): no
    claim here, and a claim elsewhere is one predict honours."""
    rng = np.random.default_rng(0)
    x = np.concatenate([-70.0 + 0.1 * rng.normal(size=10), [70.0, 70.0 + 5e-7]])[:, None]
    y = np.concatenate([-np.ones(10), [1, -1]])
    res = mk.solve(x, y, solver="perceptron", kernel="rbf", kernel_params={"gamma": 0.5},
                   max_iter=20000)
    assert res.status != "separable" and res.certificate is None
    # a pair the evaluation resolves (5e-3 apart): separable, and predict agrees
    x[-1, 0] = 70.0 + 5e-3
    res = mk.solve(x, y, solver="perceptron", kernel="rbf", kernel_params={"gamma": 0.5},
                   max_iter=20000)
    assert res.status == "separable" and res.certificate.verify(x, y)
    np.testing.assert_array_equal(res.predict(x), y)
    # the slack holds for any rows and layout predict is given (review: a slack taken
    # per row from the check's rows certified margins of 1e-12 that predict on a subset
    # of the same CSR rows, or on their dense form, misclassified): such margins, below
    # the norm formula's 2^-36, are not certified; margins of 1e-8 are, and predict
    # honours them on every subset and layout
    D = np.zeros((6, 1002))
    D[:, 1] = 67.0
    D[:, 0] = [0.0, 1e-6, 5.0, 5.0 + 1e-6, 10.0, 10.0]
    D[5, 2:] = 1e-200
    y = np.array([1, -1, 1, -1, 1, 1])
    X = sp.csr_matrix(D)
    res = mk.solve(X, y, solver="perceptron", kernel="rbf", kernel_params={"gamma": 1.0},
                   max_iter=1000)
    assert res.status != "separable" and res.certificate is None
    D[[1, 3], 0] += 1e-4 - 1e-6
    X = sp.csr_matrix(D)
    res = mk.solve(X, y, solver="perceptron", kernel="rbf", kernel_params={"gamma": 1.0},
                   max_iter=1000)
    assert res.status == "separable" and res.certificate.verify(X, y)
    for rows in (slice(None), slice(0, 4), [1], [3], [0, 2]):
        np.testing.assert_array_equal(res.predict(X[rows]), y[rows])
        np.testing.assert_array_equal(res.predict(D[rows]), y[rows])
