"""Hostile but legal inputs (issue "Trust"): no crash, no hang, no claim the data refute.

Every case of ``tests/_hostile_cases.py`` runs in a forked child of a worker process, with
a timeout and a memory cap, so a segfault or a hang fails that case alone. A case passes
when marginkit either refuses the input with a clear ``ValueError``/``TypeError`` naming
the argument, or returns a result whose every claim the independent references of
``tests/_hostile_ref.py`` (extended precision, explicit differences, exact optima of the
small problems) confirm; some cases accept only one of the two (see ``Case.expect``).

The default run takes a sample of each grid (every solver, kernel and malformation at
least once); ``-m slow`` runs the whole grid. The tests at the end check the references
themselves against known answers.
"""
import math
import os
import sys

import numpy as np
import pytest
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _hostile_cases as HC  # noqa: E402
import _hostile_ref as R  # noqa: E402

CASES = HC.catalogue()
BY_ID = {c.id: c for c in CASES}
_OUTCOMES = {}


def _params(*groups):
    out = []
    for c in CASES:
        if c.group in groups:
            marks = [pytest.mark.slow] if c.slow else []
            out.append(pytest.param(c.id, id=c.id, marks=marks))
    return out


@pytest.fixture
def outcome(request):
    """The outcome of a case: every selected case not run yet runs now, in one worker per
    environment (forking one child per case)."""

    def get(case_id):
        if case_id not in _OUTCOMES:
            selected = []
            for item in request.session.items:
                cs = getattr(item, "callspec", None)
                cid = cs.params.get("case_id") if cs is not None else None
                if cid in BY_ID and cid not in _OUTCOMES:
                    selected.append(BY_ID[cid])
            if case_id not in {c.id for c in selected}:
                selected.append(BY_ID[case_id])
            _OUTCOMES.update(HC.run_cases(selected))
        return _OUTCOMES[case_id]

    return get


def _check(outcome, case_id):
    case = BY_ID[case_id]
    out = outcome(case_id)
    if out.get("kind") == "unavailable":
        pytest.skip(f"optional dependency {out['needs']} not installed")
    reason = HC.judge(case, out)
    assert reason is None, f"[item {case.item}] {case_id}: {reason}"


# ------------------------------------------------------------------ issue items 1-13
@pytest.mark.parametrize("case_id", _params("csr"))
def test_malformed_sparse_structure(outcome, case_id):
    """Item 1: a CSR matrix with a column index out of range, negative, lengths that
    disagree or a non-monotone indptr, given to solve (every solver), kernel(A, B) (every
    kernel, either side), predict, the estimators and Dask: a ValueError naming the
    argument, never a crash or a silent answer."""
    _check(outcome, case_id)


@pytest.mark.parametrize("case_id", _params("cancel"))
def test_distance_kernel_cancellation(outcome, case_id):
    """Item 2: points 0.01 apart at coordinates ~1e6 (float64) or ~1e3 (float32) under rbf
    / laplacian: K(A, B) agrees with the formula from explicit differences, and no solver
    calls distinct points infeasible."""
    _check(outcome, case_id)


@pytest.mark.parametrize("case_id", _params("nonpsd"))
def test_kernel_not_psd(outcome, case_id):
    """Item 3: the precomputed Gram [[1, 2], [2, 1]] and a callable kernel that is not
    PSD: a clear error or no false infeasibility certificate."""
    _check(outcome, case_id)


@pytest.mark.parametrize("case_id", _params("scale", "f32rbf"))
def test_magnitudes_and_float32(outcome, case_id):
    """Item 4: |x| ~ 1e154..1e300 and 1e-160..1e-310 (float64), 1e19..1e30 and
    1e-20..1e-40 (float32), every solver, layout and dtype, in memory and on Dask; float32
    data with rbf: claims hold, model fields are finite."""
    _check(outcome, case_id)


@pytest.mark.parametrize("case_id", _params("extreme"))
def test_svm_parameter_extremes(outcome, case_id):
    """Item 5: C and mu at 1e-300..1e300 and X * 1e-310: every certified point is
    classified correctly by the exact optimum of the perturbed dual, the error bound is
    >= ||r - r*||."""
    _check(outcome, case_id)


@pytest.mark.parametrize("case_id", _params("tikhonov"))
def test_tikhonov_newton_decrement(outcome, case_id):
    """Item 6: "converged" means the Newton decrement on the exact final proximal
    subproblem is <= tol, recomputed in numpy (every kernel, t = 1 and 3, float32 and
    float64, dense and CSR)."""
    _check(outcome, case_id)


@pytest.mark.parametrize("case_id", _params("tamper"))
def test_verify_rejects_tampered_certificates(outcome, case_id):
    """Item 7: a certificate with a field changed so that its claim is false (alpha, p,
    eps raised to 0.5 / 1 / 5, mask, r, coef, intercept, gamma / mu, the kernel, labels,
    classes, the Newton anchor or target): verify() is False."""
    _check(outcome, case_id)


@pytest.mark.parametrize("case_id", _params("load"))
def test_tampered_results_file(outcome, case_id):
    """Item 8: header keys that replace predict / score / verify, unknown keys, deep
    nesting, a malformed sparse support_, members that declare or decompress to GiB, bad
    plug-in references: a ValueError, never code, memory exhaustion or a crash."""
    _check(outcome, case_id)


@pytest.mark.parametrize("case_id", _params("libsvm"))
def test_libsvm_loader_and_cli(outcome, case_id):
    """Item 9: NUL bytes, feature indices beyond 2^31 / 2^63, binary garbage, a bad line
    at the end of a large file (memory bounded by a small multiple of the CSR), and
    `marginkit fit` on them: one line, exit 2."""
    _check(outcome, case_id)


@pytest.mark.parametrize("case_id", _params("threads"))
def test_concurrency(outcome, case_id):
    """Item 10: a solver instance shared by threads gives the results of separate runs,
    overlapping solves leave the BLAS thread count as it was, and a kernel instance used
    again never changes an earlier Result."""
    _check(outcome, case_id)


@pytest.mark.parametrize("case_id", _params("plugin"))
def test_third_party_plugins(outcome, case_id):
    """Item 11: a smoother that raises or returns the wrong length, stopping rules that
    claim falsely or raise, SystemExit in an entry point, a built-in registered again."""
    _check(outcome, case_id)


@pytest.mark.parametrize("case_id", _params("misc"))
def test_smaller_items(outcome, case_id):
    """Item 13: objects with __dask_graph__ that are not dask arrays, C=10**400, NaN
    labels, memory_budget with exact kernels and rff."""
    _check(outcome, case_id)


@pytest.mark.parametrize("case_id", _params("status"))
def test_every_status_has_a_reference(outcome, case_id):
    """Every status a solver returns on clean data (separable, infeasible, certified,
    converged, max_iter) agrees with the independent reference."""
    _check(outcome, case_id)


# ------------------------------------------------------------------ the references themselves
@pytest.fixture(autouse=True)
def _one_blas_thread():
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


def test_reference_precision_is_extended():
    assert R.EXTENDED, "the references need numpy.longdouble with a 64-bit mantissa"


def test_reference_kernels_against_closed_forms():
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((5, 3)), rng.standard_normal((4, 3))
    d2 = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
    d1 = np.abs(A[:, None, :] - B[None, :, :]).sum(-1)
    close = lambda a, b: np.testing.assert_allclose(np.asarray(a, float), b, rtol=1e-13)  # noqa: E731
    close(R.kernel_block(("rbf", {"gamma": 0.3}), A, B), np.exp(-0.3 * d2))
    close(R.kernel_block(("rbf", {}), A, B), np.exp(-d2 / 3))
    close(R.kernel_block(("laplacian", {"gamma": 0.3}), A, B), np.exp(-0.3 * d1))
    close(R.kernel_block(("poly", {"degree": 2, "coef0": 1.0}), A, B), (A @ B.T / 3 + 1) ** 2)
    close(R.kernel_block(("linear", {}), sp.csr_matrix(A), B), A @ B.T)
    # spline order 2: 1 + 2 sum_k cos(2 pi k t) / k^2, summed directly
    t = np.linspace(0, 1, 7)
    k = np.arange(1, 200_000)
    series = 1 + 2 * (np.cos(2 * np.pi * np.outer(t, k)) / k ** 2).sum(axis=1)
    np.testing.assert_allclose(np.asarray(R.spline_factor(2, t.astype(R.LD)), float), series,
                               atol=2e-5)
    # distance kernels do not cancel: 0.01 apart at 1e6
    P = 1e6 + np.array([[0.0, 0.0], [0.01, 0.0]])
    K = np.asarray(R.kernel_block(("rbf", {"gamma": 1.0}), P, P), float)
    assert abs(K[0, 1] - math.exp(-1e-4)) < 1e-12
    # overflow-free at 1e300
    Q = np.array([[1e300, 0.0], [0.0, 1e300]])
    assert np.all(np.isfinite(np.asarray(R.kernel_block(("linear", {}), Q, Q) / R.LD(1e600), float)))


def test_reference_separator_and_infeasibility():
    X, y = HC.separable(12, 2, seed=0)
    ctx = R.GramContext(X, y, [0, 1], ("linear", {}))
    # the max-margin alpha of the LP separates; its negation does not
    t = R.max_margin_lp(ctx.G)
    assert t > 0
    from scipy.optimize import linprog

    G = np.asarray(ctx.G, float)
    n = len(y)
    res = linprog(np.r_[np.zeros(n), -1], A_ub=np.hstack([-G, np.ones((n, 1))]),
                  b_ub=np.zeros(n), A_eq=np.r_[np.ones(n), 0][None, :], b_eq=[1],
                  bounds=[(0, None)] * n + [(None, None)], method="highs")
    alpha = res.x[:n]
    assert R.separator_problems(ctx, alpha) == []
    assert R.separator_problems(ctx, -alpha) != []
    # uniform p on separable data is no certificate; duplicates with opposite labels are
    assert R.infeasibility_problems(ctx, np.full(n, 1 / n), 1e-6) != []
    Xd, yd = HC.duplicates_opposite()
    cd = R.GramContext(Xd, yd, [0, 1], ("linear", {}))
    assert R.infeasibility_problems(cd, np.array([0.5, 0.5, 0, 0]), 1e-6) == []
    # p = e_1 has ||p||_G = 1: not a certificate at eps 1e-6, "true" only at eps >= 1
    assert R.infeasibility_problems(cd, np.array([1.0, 0, 0, 0]), 1e-6) != []
    # a Gram matrix that is not PSD: p^T G p < 0 is no certificate
    cn = R.GramContext(np.array([[1.0, 2.0], [2.0, 1.0]]), [0, 1], [0, 1], ("precomputed", {}))
    probs = R.infeasibility_problems(cn, np.array([0.5, 0.5]), 1e-6)
    assert any("not positive semi-definite" in p for p in probs)
    # min-norm point agrees with the LP on separable data: rho = min ||p||_G >= t
    val, p = R.min_norm_point(ctx.G)
    assert math.sqrt(val) >= t - 1e-9


def _lbfgs_optimum(Z, ypm, gamma, mu):
    """r* of the perturbed H-SVM dual by L-BFGS-B with bounds (scipy), for checking the
    active-set reference on small problems."""
    from scipy.optimize import minimize

    H = ypm[:, None] * np.hstack([Z, np.ones((len(ypm), 1))])
    Q = H @ H.T + mu * np.eye(len(ypm))
    sigma = min(gamma, 1 / mu)  # solved in r / sigma
    res = minimize(lambda x: 0.5 * x @ Q @ x - x.sum() / sigma, np.zeros(len(ypm)),
                   jac=lambda x: Q @ x - 1 / sigma, method="L-BFGS-B",
                   bounds=[(0, gamma / sigma)] * len(ypm),
                   options={"ftol": 1e-15, "gtol": 1e-13, "maxiter": 100_000})
    return res.x * sigma


@pytest.mark.parametrize("gamma,mu", [(64 / 30, 30 / 128), (0.05, 2.0), (10.0, 0.05), (1e-4, 1.0),
                                      (1e300, 1.0), (0.1, 1e3)])
def test_reference_svm_optimum(gamma, mu):
    X, y = HC.overlapping(30, 3, seed=2)
    Z = np.asarray(R.standardize(X, "std")[0], float)
    ypm = np.where(y == 1, 1.0, -1.0)
    opt = R.SVMOptimum(Z, ypm, gamma, mu, "hsvm")
    ref = _lbfgs_optimum(Z, ypm, gamma, mu)
    np.testing.assert_allclose(opt.r, ref, atol=1e-6 * min(gamma, 1 / mu))
    assert opt.accuracy < 1e-12 * max(1.0, opt.upper)
    svm = R.SVMOptimum(Z, ypm, gamma, mu, "svm")
    assert abs(ypm @ svm.r) < 1e-9 * min(gamma, 1 / mu) * len(y)
    assert svm.accuracy < 1e-10 * max(1.0, svm.upper)
    # the classical SVM's KKT conditions: y_i (z_i w + t) = 1 - mu r_i on the free set
    w = (ypm * svm.r) @ Z
    free = (svm.r > 1e-9 * gamma) & (svm.r < gamma * (1 - 1e-9))
    theta = ypm * (Z @ w + svm.multiplier * svm.sigma)
    np.testing.assert_allclose(theta[free], 1 - mu * svm.r[free], atol=1e-8)


def test_reference_svm_optimum_at_c_1e_300():
    """C = 1e-300, mu = 1e300 on balanced data: every r*_i at the box or within 1e-300 of
    it, the classification decided by the multiplier; the KKT conditions in the scaled
    variables hold."""
    X, y = HC.random_problem(29)
    Z = np.asarray(R.standardize(X, "std")[0], float)
    ypm = np.where(y == 1, 1.0, -1.0)
    opt = R.SVMOptimum(Z, ypm, 1e-300, 1e300, "svm")
    assert opt.shifted and opt.accuracy < 1e-12
    theta = np.asarray(opt.scaled_margins(), float)  # theta / sigma
    e = np.asarray(opt.x, float) * math.sqrt(1e300)  # mu (1 - rho) = theta / sigma if free
    free = (opt.x > opt.lo) & (opt.x < opt.hi)
    np.testing.assert_allclose(theta[free], e[free], rtol=1e-9)
    assert np.all(theta[~free] <= 1e-9)  # at r = gamma: theta <= 1 - mu gamma = 0


def test_reference_certified_points_rejects_a_misclassified_point():
    X, y = HC.overlapping(30, 3, seed=2)
    n = len(y)
    gamma, mu = 64 / n, n / 128
    Z = np.asarray(R.standardize(X, "std")[0], float)
    ypm = np.where(y == 1, 1.0, -1.0)
    opt = R.SVMOptimum(Z, ypm, gamma, mu, "hsvm")
    theta = np.asarray(opt.scaled_margins(), float)
    good = theta > 0.5
    bad = good.copy()
    bad[np.argmin(theta)] = True
    m, s = np.asarray(R.standardize(X, "std")[1], float), np.asarray(R.standardize(X, "std")[2], float)
    w = (ypm * opt.r) @ np.hstack([Z, np.ones((n, 1))])
    coef = s * w[:-1]
    intercept = w[-1] - m @ coef
    cfg = {"gamma": gamma, "mu": mu, "scale": "std", "formulation": "hsvm", "fraction": 0.0}
    assert R.certified_problems(X, y, [0, 1], ("linear", {}), None, cfg, opt.r, good, coef,
                                intercept, bound=1e-9) == []
    assert R.certified_problems(X, y, [0, 1], ("linear", {}), None, cfg, opt.r, bad, coef,
                                intercept) != []
    far = np.clip(opt.r + 0.01 * gamma, 0, gamma)
    assert any("error bound" in p for p in R.certified_problems(
        X, y, [0, 1], ("linear", {}), None, cfg, far, good, coef, intercept, bound=1e-9))


@pytest.mark.parametrize("form", ["hsvm", "svm"])
@pytest.mark.parametrize("gamma,mu", [(64 / 30, 30 / 128), (0.05, 2.0), (10.0, 0.05),
                                      (1e-4, 1.0), (0.1, 1e3)])
def test_reference_gap_bound(gamma, mu, form):
    """The duality-gap bound at r is >= ||r - r*|| (r* the active-set optimum) for points
    of the box at distances 1e-8..1 of it, tight at the optimum, infinite outside the box."""
    X, y = HC.overlapping(30, 3, seed=2)
    Z = np.asarray(R.standardize(X, "std")[0], float)
    ypm = np.where(y == 1, 1.0, -1.0)
    opt = R.SVMOptimum(Z, ypm, gamma, mu, form)
    level = min(gamma, 1 / mu)
    # (a square root of the optimum's own accuracy: 1e-10 for the classical SVM)
    assert R.gap_bound(opt.H, ypm, opt.r, gamma, mu, form) < 1e-4 * level
    rng = np.random.default_rng(0)
    for _ in range(20):
        step = rng.normal(size=30) * gamma * 10.0 ** rng.uniform(-8, 0)
        r = np.clip(opt.r + step, 0, gamma)
        dist = float(np.linalg.norm(r - opt.r))
        assert R.gap_bound(opt.H, ypm, r, gamma, mu, form) >= dist - opt.accuracy * opt.sigma
    out = opt.r.copy()
    out[0] = gamma * (1 + 1e-9)
    assert R.gap_bound(opt.H, ypm, out, gamma, mu, form) == math.inf


def test_reference_gap_bound_decides_where_the_optimum_cannot():
    """A polynomial kernel on float32 data at 1e19: margins near 1e114, the active-set
    optimum's rounding bound near 1e229, so only the gap at r decides. dcd's certified
    points and its error bound hold (the gap at r reaches below it); a certified point
    moved to the box does not."""
    import marginkit as mk

    X, y = HC.build_data(BY_ID["scale-1e+19-f32-dense-dcd-poly"].spec["data"])
    kp = HC.kernel_params("poly")
    res = mk.solve(X, y, solver="dcd", kernel="poly", kernel_params=kp, random_state=0)
    assert res.status == "certified"
    n = len(y)
    cfg = {"gamma": 64 / n, "mu": n / 128, "scale": None, "formulation": "hsvm",
           "fraction": 0.0}
    classes = np.unique(y)
    ypm = R.signs(y, classes)
    opt = R.SVMOptimum(R.feature_map(("poly", kp), X, None), ypm, cfg["gamma"], cfg["mu"],
                       "hsvm")
    assert opt.margin_rounding().max() > 1e100
    r, mask = np.asarray(res.dual_coef_, float), np.asarray(res.certified_mask, bool)
    bound = res.certificate.value

    def problems(r, bound):
        return R.certified_problems(X, y, classes, ("poly", kp), None, cfg, r, mask,
                                    res.coef_, res.intercept_ or 0.0, bound=bound)

    assert problems(r, bound) == []
    assert R.gap_bound(opt.H, ypm, r, cfg["gamma"], cfg["mu"], "hsvm") <= bound
    moved = r.copy()
    moved[np.flatnonzero(mask)[0]] = cfg["gamma"]
    assert any("level - r_i" in p for p in problems(moved, None))


def test_reference_newton_decrement():
    X, y = HC.overlapping(30, 2, seed=1)
    ypm = np.where(y == 1, 1.0, -1.0)
    lam = 0.1
    Phi = X.astype(R.LD)
    x = R.exact_prox_step(Phi, ypm, "logistic", lam, np.zeros(2), False)
    assert R.newton_decrement(Phi, ypm, "logistic", lam, x, 0.0, np.zeros(2), False) < 1e-13
    # away from the optimum the decrement is sqrt(g^T H^-1 g), by finite differences of g
    th = x + np.array([0.3, -0.2])
    from scipy.special import expit

    def grad(t):
        z = X @ t
        return X.T @ (-ypm * expit(-ypm * z)) / len(y) + lam * t

    g = grad(th)
    H = np.column_stack([(grad(th + 1e-6 * e) - grad(th - 1e-6 * e)) / 2e-6 for e in np.eye(2)])
    want = math.sqrt(g @ np.linalg.solve(H, g))
    got = R.newton_decrement(Phi, ypm, "logistic", lam, th, 0.0, np.zeros(2), False)
    assert abs(got - want) < 1e-7 * want
    # the Gram parametrization gives the same decrement as the primal one (linear kernel)
    fields = {"coef_": None, "intercept_": 0.0, "dual_coef_": None, "support_": X,
              "support_coef_": None}
    beta = np.linalg.lstsq(X.T, th, rcond=None)[0]  # theta = X^T beta
    fields["dual_coef_"] = beta
    Phi_g, th_g, _ = R.tikhonov_features(("precomputed", {}), X @ X.T, None, fields)
    got_g = R.newton_decrement(Phi_g, ypm, "logistic", lam, th_g, 0.0, np.zeros(len(th_g)), False)
    assert abs(got_g - got) < 1e-9 * got


def test_judge_rules():
    """The parent's verdict on outcomes: crashes, hangs, foreign exceptions and unmatched
    messages fail; clear refusals and confirmed results pass."""
    c = HC.Case("x", "g", "solve", {}, expect="honest", match=r"\bX\b")
    assert HC.judge(c, {"kind": "crash", "signal": "SIGSEGV"}) is not None
    assert HC.judge(c, {"kind": "hang", "seconds": 1}) is not None
    assert HC.judge(c, {"kind": "error", "type": "RuntimeError", "value_or_type": False,
                        "message": "X"}) is not None
    assert HC.judge(c, {"kind": "error", "type": "ValueError", "value_or_type": True,
                        "message": "bad y"}) is not None
    assert HC.judge(c, {"kind": "error", "type": "ValueError", "value_or_type": True,
                        "message": "X (CSR): column index 9"}) is None
    assert HC.judge(c, {"kind": "done", "problems": ["G alpha > 0 fails"]}) is not None
    assert HC.judge(c, {"kind": "done", "problems": []}) is None
    r = HC.Case("y", "g", "solve", {}, expect="refuse")
    assert HC.judge(r, {"kind": "done", "problems": []}) is not None
    o = HC.Case("z", "g", "solve", {}, expect="ok")
    assert HC.judge(o, {"kind": "error", "type": "ValueError", "value_or_type": True,
                        "message": "X"}) is not None


def test_worker_isolates_a_segfault(tmp_path):
    """A crash in one forked case is reported for that case; the next case still runs."""
    import subprocess

    script = tmp_path / "w.py"
    script.write_text(
        "import sys, os, ctypes, json\n"
        f"sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
        "import _hostile_cases as HC\n"
        "HC._TMP[0] = sys.argv[1]\n"
        "HC.ACTIONS['boom'] = lambda case, facts: ctypes.string_at(0)\n"
        "HC.ACTIONS['fine'] = lambda case, facts: ([], {})\n"
        "a = HC._fork_case(HC.Case('a', 'g', 'boom', {}), {})\n"
        "b = HC._fork_case(HC.Case('b', 'g', 'fine', {}), {})\n"
        "print(json.dumps([a['kind'], b['kind']]))\n")
    out = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True,
                         text=True, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == '["crash", "done"]', out.stderr
