"""Trust in the SVM family's claims: the referee of ``CertifiedPointsCertificate`` (its
rounding bound against exact and extended-precision recomputations, tampering, the
thresholds of the run's configuration, every layout and dask arrays), error bounds that
neither underflow nor lose their rounding margin, and inputs whose scale makes the
bound meaningless refused (docs/svm.md, sections 2 and 6)."""
import copy
import itertools
import math
import os
import sys
import warnings
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp

import marginkit as mk
from marginkit.solvers.svm import CertifiedPointsCertificate, run_thresholds, scaling_statistics

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _ill_nystroem as ILL  # noqa: E402


# ----------------------------------------------------------------------------- helpers
def make_problem(n=60, d=5, seed=0, shift=3.0, noise=0.3):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * (1.0 + np.arange(d)) + shift
    score = X[:, 0] - shift + 0.5 * (X[:, 1] - shift) + noise * rng.standard_normal(n)
    y = np.where(score > 0, 1, -1)
    return X, y


def tampered(cert, **changes):
    """A copy of ``cert`` with some fields replaced (the others shared)."""
    new = CertifiedPointsCertificate.__new__(CertifiedPointsCertificate)
    new.__dict__.update(cert.__dict__)
    new.__dict__.update(changes)
    return new


def projected_gradient_norm_exact(X, ypm, r, m, s, mu, gamma, formulation, t_bar):
    """||p(r)||^2 of the perturbed dual in exact rational arithmetic (m, s, r, X as the
    floats they are): the value the referee's rounding bound is about."""
    F = Fraction
    n, d = X.shape
    Xf = [[F(float(X[i, j])) for j in range(d)] for i in range(n)]
    mf = [F(float(v)) for v in m]
    sf = [F(float(v)) for v in s]
    rf = [F(float(v)) for v in r]
    yf = [F(int(v)) for v in ypm]
    Z = [[sf[j] * (Xf[i][j] - mf[j]) for j in range(d)] for i in range(n)]
    u = [yf[i] * rf[i] for i in range(n)]
    w = [sum(Z[i][j] * u[i] for i in range(n)) for j in range(d)]
    t = sum(u) if formulation == "hsvm" else F(float(t_bar))
    muf, gf = F(float(mu)), F(float(gamma))
    total = F(0)
    for i in range(n):
        theta = yf[i] * (sum(Z[i][j] * w[j] for j in range(d)) + t)
        G = theta + muf * rf[i] - 1
        if rf[i] <= 0:
            p = min(G, F(0))
        elif rf[i] >= gf:
            p = max(G, F(0))
        else:
            p = G
        total += p * p
    return total


def projected_gradient_norm_longdouble(X, ypm, r, m, s, mu, gamma, formulation, t_bar):
    """||p(r)|| with every operation in extended precision (x87 long double: about 2000
    times below float64 rounding), for cases too large for fractions."""
    L = np.longdouble
    Xl = np.asarray(X.toarray() if sp.issparse(X) else X, dtype=L)
    Z = (Xl - m.astype(L)) * s.astype(L)
    u = ypm.astype(L) * r.astype(L)
    w = Z.T @ u
    t = u.sum() if formulation == "hsvm" else L(t_bar)
    theta = ypm.astype(L) * (Z @ w + t)
    G = theta + L(mu) * r.astype(L) - 1
    p = np.where(r <= 0, np.minimum(G, 0), np.where(r >= gamma, np.maximum(G, 0), G))
    return float(np.sqrt((p * p).sum()))


# ------------------------------------------------------------- the referee's rounding bound
@pytest.mark.parametrize("formulation", ["hsvm", "svm"])
def test_rounding_bound_holds_against_exact_rational_recomputation(formulation):
    """eps_v = ||p(r)|| / mu computed in float64 is within the referee's rounding bound
    of its exact value (rational arithmetic), on data whose columns have means far above
    their spread (the implicit centering cancels) and a hostile r."""
    rng = np.random.default_rng(3)
    n, d = 14, 3
    X = rng.standard_normal((n, d)) * np.array([1.0, 1e-3, 50.0]) + np.array([0.0, 1e4, -3e3])
    y = np.where(rng.random(n) < 0.5, 1, -1)
    ypm = np.where(y == 1, 1.0, -1.0)
    solver = "fista" if formulation == "hsvm" else "fista_svm"
    res = mk.solve(X, y, solver=solver, stop=("max_iter", {"n": 40}))
    gamma, mu = 64.0 / n, n / 128.0
    m, s = scaling_statistics(X, "std")
    for k in range(3):
        r = np.clip(res.dual_coef_ * (1 + 1e-3 * rng.standard_normal(n)), 0, gamma)
        r[: 3 + k] = [0.0, gamma, 0.5 * gamma, 0.0, gamma][: 3 + k]
        if formulation == "svm":
            r -= ypm * (ypm @ r) / n  # close to y^T r = 0, not exactly
            r = np.clip(r, 0, gamma)
        t_bar = 0.37 if formulation == "svm" else float(ypm @ r)
        mask = np.zeros(n, dtype=bool)
        mask[np.argmin(r)] = True
        cert = CertifiedPointsCertificate(0.0, mask, r, gamma, mu, "std", m, s, formulation,
                                          t_bar, None, 0.0, np.array([-1, 1]))
        verdict = cert.check(X, y)
        exact2 = projected_gradient_norm_exact(X, ypm, r, m, s, mu, gamma, formulation, t_bar)
        lo = max(verdict.value - verdict.rounding, 0.0) * mu
        hi = (verdict.value + verdict.rounding) * mu
        if formulation == "hsvm":
            assert Fraction(lo) ** 2 <= exact2 <= Fraction(hi) ** 2
        else:
            # the classical SVM's rounding also holds the y^T r residual term
            assert exact2 <= Fraction(hi) ** 2
        assert verdict.rounding > 0


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("offset", [0.0, 1e6])
def test_rounding_bound_holds_against_extended_precision(sparse, offset):
    """The same on a larger problem (n = 400) against a long-double recomputation, dense
    and CSR, with and without a column mean 1e6 times its spread; and the bound is tight
    enough to be useful (far below the value)."""
    rng = np.random.default_rng(7)
    n, d = 400, 12
    X = rng.standard_normal((n, d)) * (1 + np.arange(d))
    X[rng.random((n, d)) < 0.3] = 0.0
    X[:, 0] += offset
    y = np.where(X[:, 1] + 0.5 * rng.standard_normal(n) > 0, 1, -1)
    ypm = np.where(y == 1, 1.0, -1.0)
    Xs = sp.csr_matrix(X) if sparse else X
    res = mk.solve(Xs, y, solver="fista", stop=("max_iter", {"n": 60}))
    gamma, mu = 64.0 / n, n / 128.0
    m, s = scaling_statistics(Xs, "std")
    r = res.dual_coef_
    cert = CertifiedPointsCertificate(0.0, r < gamma, r, gamma, mu, "std", m, s, "hsvm",
                                      float(ypm @ r), None, 0.0, np.array([-1, 1]))
    verdict = cert.check(Xs, y)
    exact = projected_gradient_norm_longdouble(X, ypm, r, m, s, mu, gamma, "hsvm", 0.0) / mu
    assert abs(verdict.value - exact) <= verdict.rounding
    assert verdict.rounding <= 1e-7 * verdict.value


# ------------------------------------------------------------------------ tampering
@pytest.fixture(scope="module")
def certified_run():
    X, y = make_problem(n=80, d=6, seed=3)
    res = mk.solve(X, y, solver="fista", stop=("certified_points", {"fraction": 0.3}))
    assert res.status == "certified" and res.certificate.verify(X, y)
    return X, y, res


def test_verdict_reports_the_recomputed_numbers(certified_run):
    X, y, res = certified_run
    cert = res.certificate
    v = cert.check(X, y)
    assert v.ok and v.kind == "certified_points" and v.reason == ""
    level = min(cert.gamma, 1.0 / cert.mu)
    assert v.threshold == pytest.approx(np.min(level - cert.r[cert.mask]), rel=1e-12)
    assert 0 < v.value <= cert.value * (1 + 1e-9)  # ||p(r)||/mu <= FISTA's bound
    assert v.margin == pytest.approx(v.threshold - v.value - v.rounding, rel=1e-9)
    assert 0 < v.rounding < 1e-6 * v.value


@pytest.mark.parametrize("change", [
    "mask", "r", "gamma", "mu", "means", "inv_std", "nan_means", "nan_inv_std", "coef",
    "coef_and_intercept", "intercept", "t_bar", "classes", "scale", "formulation", "labels"])
def test_tampered_certificate_is_rejected(certified_run, change):
    X, y, res = certified_run
    cert = res.certificate
    y_check = y
    level = min(cert.gamma, 1.0 / cert.mu)
    if change == "mask":
        # add the uncertified point closest to passing
        gaps = np.where(cert.mask, np.inf, level - cert.r)
        mask = cert.mask.copy()
        mask[np.argmin(np.abs(gaps - cert.value))] = True
        bad = tampered(cert, mask=mask)
    elif change == "r":
        r = cert.r.copy()
        i = np.flatnonzero(cert.mask)[0]
        r[i] = min(cert.gamma, r[i] + 1e-3)
        bad = tampered(cert, r=r)
    elif change == "gamma":
        bad = tampered(cert, gamma=cert.gamma * 1.5)
    elif change == "mu":
        bad = tampered(cert, mu=cert.mu * 0.5)
    elif change == "means":
        bad = tampered(cert, means=cert.means + 1e-5 / np.where(cert.inv_std > 0, cert.inv_std, 1))
    elif change == "inv_std":
        bad = tampered(cert, inv_std=cert.inv_std * (1 + 1e-5))
    elif change == "nan_means":  # NaN compared within every tolerance (found by review)
        bad = tampered(cert, means=np.full_like(cert.means, np.nan))
    elif change == "nan_inv_std":
        bad = tampered(cert, inv_std=np.where(cert.inv_std > 0, np.nan, 0.0))
    elif change == "coef":
        coef = cert.coef.copy()
        coef[0] *= 1 + 1e-4
        bad = tampered(cert, coef=coef)
    elif change == "coef_and_intercept":
        # another model, consistent with its own intercept: only the check of coef
        # against s * w_bar(r) sees it
        coef = cert.coef * (1 + 1e-4)
        bad = tampered(cert, coef=coef, intercept=cert.t_bar - float(cert.means @ coef))
    elif change == "intercept":
        bad = tampered(cert, intercept=cert.intercept + 1e-4 * (1 + abs(cert.intercept)))
    elif change == "t_bar":
        bad = tampered(cert, t_bar=cert.t_bar + 1e-3)
    elif change == "classes":
        bad = tampered(cert, classes=np.asarray(cert.classes)[::-1])
    elif change == "scale":
        bad = tampered(cert, scale="scale")
    elif change == "formulation":
        bad = tampered(cert, formulation="svm")
    else:
        y_check = np.asarray(y).copy()
        i = np.flatnonzero(cert.mask)[0]
        y_check[i] = -y_check[i]
        bad = cert
    verdict = bad.check(X, y_check)
    assert not verdict and verdict.reason



@pytest.mark.parametrize("empty", [[0], [0, 1, 2], [5, 6], [38, 39], list(range(40))])
def test_referee_blocks_of_csr_rows_cover_every_row_once(empty):
    """The referee's CSR blocks (cut at about max_entries stored entries) cover rows 0..n-1
    in order, each once, leading, inner and trailing empty rows included (the cut at
    entry 0 is the last leading empty row: block 0 started there, and the rows before it
    were never visited)."""
    from marginkit import _referee

    rng = np.random.default_rng(4)
    X = sp.random(40, 6, density=0.5, format="csr", random_state=rng)
    keep = np.ones(40)
    keep[empty] = 0.0
    X = sp.csr_matrix(sp.diags(keep) @ X)
    X.eliminate_zeros()
    for max_entries in (1, 3, 7, 1000):
        blocks = _referee.RowBlocks(X, max_entries=max_entries)
        seen = [(lo, hi) for lo, hi, _ in blocks]
        assert blocks.n == 40 and seen[0][0] == 0 and seen[-1][1] == 40
        assert all(a[1] == b[0] and a[0] < a[1] for a, b in zip(seen, seen[1:])), seen
        assert sum(B.shape[0] for _, _, B in blocks) == 40


def test_referee_checks_leading_empty_rows_of_csr_blocks(monkeypatch):
    """End to end: a CSR problem whose first rows are empty, checked in blocks of a few
    rows: the verdict is the one-block verdict, and an uncertified empty row claimed
    certified is rejected (the blocks skipped leading empty rows, whose per-point numbers
    then stayed unwritten)."""
    from functools import partial

    from marginkit.solvers.svm import _certificate

    rng = np.random.default_rng(6)
    X = np.vstack([np.zeros((3, 5)), rng.standard_normal((77, 5)) + 2.0])
    y = np.r_[1, -1, 1, np.where(X[3:, 0] > 2.0, 1, -1)]
    X[3:, 0] += 1.5 * y[3:]
    Xs = sp.csr_matrix(X)
    res = mk.solve(Xs, y, solver="dcd", random_state=0)
    cert = res.certificate
    assert res.status == "certified" and not cert.mask[:3].all()
    one = cert.check(Xs, y)
    monkeypatch.setattr(_certificate.R, "RowBlocks",
                        partial(_certificate.R.RowBlocks, max_entries=12))
    many = cert.check(Xs, y)
    assert one.ok and many.ok
    for k in ("value", "threshold", "margin"):
        assert getattr(many, k) == pytest.approx(getattr(one, k), rel=1e-9, abs=0), k
    j = int(np.flatnonzero(~cert.mask[:3])[0])
    bad = copy.copy(cert)
    bad.mask = cert.mask.copy()
    bad.mask[j] = True
    assert not bad.check(Xs, y)


def test_per_point_tests_over_blocks_agree_and_reject(certified_run, monkeypatch):
    # the referee's per-point tests run block by block (after pass C on the block): with
    # blocks of 7 rows (80 points: 12 blocks) the verdict is the one-block verdict, and a
    # point changed in the last block is still seen
    from functools import partial

    from marginkit.solvers.svm import _certificate

    X, y, res = certified_run
    cert = res.certificate
    one = cert.check(X, y)
    monkeypatch.setattr(_certificate.R, "RowBlocks",
                        partial(_certificate.R.RowBlocks, max_entries=7 * X.shape[1]))
    monkeypatch.setattr(_certificate, "_CHUNK", 7)
    many = cert.check(X, y)
    assert many.ok and one.ok
    for k in ("value", "threshold", "margin"):
        assert getattr(many, k) == pytest.approx(getattr(one, k), rel=1e-12, abs=0), k
    # the rounding bound counts the blocks (their partial sums): a little larger
    assert one.rounding <= many.rounding <= 1.01 * one.rounding
    # an uncertified point of the last block added to the mask: its gap level - r_j is
    # below the bound (only the per-point tests read the mask)
    j = np.flatnonzero(~cert.mask)[-1]
    assert j >= 7 * 11
    mask = cert.mask.copy()
    mask[j] = True
    v = tampered(cert, mask=mask).check(X, y)
    assert not v and "level - r_i <= eps_v" in v.reason
    # a certified point of a late block with its label flipped
    i = np.flatnonzero(cert.mask)[-1]
    assert i >= 7 * 10
    y_bad = np.asarray(y).copy()
    y_bad[i] = -y_bad[i]
    v = cert.check(X, y_bad)
    assert not v and v.reason

def test_labels_outside_the_classes_raise(certified_run):
    X, y, res = certified_run
    y2 = np.asarray(y).copy()
    y2[0] = 7
    with pytest.raises(ValueError, match="not among the run's classes"):
        res.certificate.check(X, y2)


# ------------------------------------------------------- thresholds from the configuration
def test_thresholds_come_from_the_configuration():
    X, y = make_problem(n=80, d=6, seed=3)
    cfg = mk.Config(solver="dcd", solver_params={"C": 0.5, "mu": 2.0},
                    stop=[("certified_points", {"fraction": 0.25})], random_state=0)
    th = run_thresholds(cfg, 80)
    assert th == {"gamma": 0.5, "mu": 2.0, "level": 0.5, "scale": "std",
                  "formulation": "hsvm", "fraction": 0.25}
    th = run_thresholds(mk.Config(solver="fista_svm"), 80)
    assert th["gamma"] == 64.0 / 80 and th["mu"] == 80 / 128.0 and th["formulation"] == "svm"
    assert th["fraction"] == 0.0
    # the dict form of a saved configuration, validated by the solver's table
    assert run_thresholds(cfg.to_dict(), 80) == run_thresholds(cfg, 80)
    with pytest.raises(ValueError, match="C"):
        run_thresholds({"solver": "fista", "solver_params": {"C": -1.0}}, 80)
    with pytest.raises(ValueError, match="not one of the certified SVM solvers"):
        run_thresholds({"solver": "snkp"}, 80)
    with pytest.raises(TypeError, match="config"):
        run_thresholds(42, 80)


def test_claim_needs_the_rules_fraction(certified_run):
    X, y, res = certified_run
    cert = res.certificate
    assert cert.claim == "certified" and cert.config is res.config
    n = X.shape[0]
    # the same points claimed under a run that asked for more than we have
    more = res.config.replace(stop=[("certified_points", {"fraction": cert.mask.sum() / n})])
    verdict = tampered(cert, config=more).check(X, y)
    assert not verdict and "fraction" in verdict.reason
    # without the claim (a max_iter result keeps its certified points) it holds
    assert tampered(cert, config=more, claim=None).check(X, y)
    # a configuration with other parameters than the certificate's
    other = res.config.replace(solver_params={"C": 2 * cert.gamma})
    verdict = tampered(cert, config=other).check(X, y)
    assert not verdict and "gamma" in verdict.reason


def test_saved_result_is_checked_against_its_saved_configuration(certified_run, tmp_path):
    X, y, res = certified_run
    path = tmp_path / "res.npz"
    res.save(path)
    back = mk.load_result(path)
    assert isinstance(back.certificate.config, mk.Config)
    assert back.certificate.check(X, y)
    back.certificate.config = back.certificate.config.replace(solver_params={"mu": 3.0})
    assert not back.certificate.check(X, y)


# ----------------------------------------------------------------- layouts and backends
@pytest.mark.parametrize("solver", ["fista", "fista_svm", "dcd"])
def test_layouts_dtypes_agree(solver):
    X, y = make_problem(n=120, d=7, seed=5)
    X[np.random.default_rng(1).random(X.shape) < 0.4] = 0.0
    ref = mk.solve(X, y, solver=solver, random_state=0)
    assert ref.status == "certified"
    cert = ref.certificate
    base = cert.check(X, y)
    assert base
    for Xv in (np.asfortranarray(X), sp.csr_matrix(X), sp.csc_matrix(X)):
        v = cert.check(Xv, y)
        assert v and v.value == pytest.approx(base.value, rel=1e-10)
    for Xv in (X.astype(np.float32), sp.csr_matrix(X.astype(np.float32))):
        res = mk.solve(Xv, y, solver=solver, random_state=0)
        assert res.status == "certified" and res.certificate.check(Xv, y)


@pytest.mark.parametrize("sparse", [False, True])
def test_referee_reads_a_dask_array_chunk_by_chunk(sparse, monkeypatch):
    da = pytest.importorskip("dask.array")
    from marginkit import _referee

    X, y = make_problem(n=150, d=6, seed=8)
    Xs = sp.csr_matrix(X) if sparse else X
    res = mk.solve(Xs, y, solver="dcd", random_state=0)
    base = res.certificate.check(Xs, y)
    Xd = da.from_array(Xs, chunks=(40, 6))
    if sparse:
        Xd = da.from_array(X, chunks=(40, 6)).map_blocks(sp.csr_matrix, dtype=X.dtype)
    seen = []
    orig = _referee.RowBlocks._raw

    def spy(self, k):
        out = orig(self, k)
        seen.append(out[2].shape[0])
        return out

    monkeypatch.setattr(_referee.RowBlocks, "_raw", spy)
    v = res.certificate.check(Xd, y)
    assert v and v.value == pytest.approx(base.value, rel=1e-10)
    assert max(seen) <= 40 and len(seen) >= 4 * 4  # several passes, one chunk at a time


# ---------------------------------------------------- error bounds: underflow, rounding
def _heart(data_dir):
    from marginkit.datasets import load_libsvm

    X, y = load_libsvm(os.path.join(data_dir, "heart_scale.xz"))
    return X, y


@pytest.mark.parametrize("solver", ["dcd", "fista", "fista_svm", "pegasos"])
def test_data_whose_inverse_spread_overflows_is_refused(solver):
    """X * 1e-310 (subnormal entries): 1/sigma overflows float64, so scale='std' cannot
    represent the problem or coef_; dcd used to end with NaN coef_ and every point
    "certified". Refused with a message naming the scale; scale=None still solves it."""
    X, y = make_problem(n=40, d=3, seed=2)
    Xt = X * 1e-310
    with pytest.raises(ValueError, match="standard deviation below 5.6e-309"):
        mk.solve(Xt, y, solver=solver, random_state=0)
    if solver != "pegasos":
        res = mk.solve(Xt, y, solver=solver, scale=None, random_state=0, max_iter=50)
        assert np.all(np.isfinite(res.coef_)) and np.isfinite(res.intercept_)
        assert res.certificate is None or res.certificate.verify(Xt, y)


def test_dual_variables_below_float64_resolution_are_refused(data_dir):
    """fista_svm with C = 1e-300, mu = 1e300 on a class-balanced subset of heart_scale:
    the squared differences of r underflowed, the error bound was exactly 0 and all 120
    points of one class were "certified" while the exact optimum misclassifies every one
    of them (the intercept is 0 and the data term below resolution). Refused now."""
    X, y = _heart(data_dir)
    X = X.toarray()
    idx = np.sort(np.concatenate([np.flatnonzero(y == 1)[:120], np.flatnonzero(y != 1)[:120]]))
    for solver in ("fista_svm", "fista", "dcd"):
        with pytest.raises(ValueError, match=r"below 2\^-969"):
            mk.solve(X[idx], y[idx], solver=solver, C=1e-300, mu=1e300, random_state=0)


def test_condition_number_overflow_is_refused():
    X, y = make_problem(n=40, d=3, seed=2)
    with pytest.raises(ValueError, match="condition number"):
        mk.solve(X, y, solver="fista", mu=1e-290, C=1.0)


@pytest.mark.parametrize("solver", ["fista", "fista_svm", "dcd"])
def test_small_C_bounds_are_positive_and_true(solver, data_dir):
    """C = 1e-4, mu = 1 on heart_scale: the bound used to be exactly 0 (r at the box's
    corner, ||y_k - r_{k+1}|| = 0 in float64). Every bound now carries a rounding term,
    bounds ||r_k - r*|| (r* from the extended-precision reference) at every iteration,
    and every certified point is certified for r* too."""
    from _svm_reference import margins, reference_dual

    X, y = _heart(data_dir)
    ypm = np.where(y == np.unique(y)[1], 1.0, -1.0)
    C, mu = 1e-4, 1.0
    aug = solver != "fista_svm"
    kw = dict(bound_check="always") if solver == "dcd" else {}
    rec = []
    res = mk.solve(X, y, solver=solver, C=C, mu=mu, random_state=0, max_iter=400,
                   callback=lambda st: rec.append((st.r.copy(), st.error_bound)) and False, **kw)
    m, s = scaling_statistics(X, "std")
    r_star, t_star, viol = reference_dual(X, ypm, m, s, C, mu, augmented=aug,
                                          equality=not aug, r0=res.dual_coef_)
    assert viol < 1e-15
    r_star = r_star.astype(np.float64)
    for r, eps in rec[1:]:
        assert eps > 0.0
        assert np.linalg.norm(r - r_star) <= eps
    if res.certified_mask is not None and res.certified_mask.any():
        th = margins(X, ypm, m, s, r_star, t_star, aug).astype(np.float64)
        cm = res.certified_mask
        assert np.all(th[cm] > 0) and np.all(r_star[cm] < min(C, 1 / mu))


@pytest.mark.parametrize("name", ["heart_scale", "ionosphere_scale"])
def test_fista_bound_near_1e12_stays_a_bound(name, data_dir):
    """fista run until its bound is <= 1e-12: the bound kappa ||y_k - r_{k+1}|| had only
    its 1/kappa slack against rounding and reported 9.5153e-13 on heart_scale while
    ||r - r*|| was 9.5245e-13 (ionosphere_scale: 9.7814e-13 vs 9.82e-13). With the
    rounding term (and the long-double projected-gradient bound where that term
    dominates) the reported bound is >= ||r - r*|| at every iteration, and the bound
    still gets below 1e-12."""
    from marginkit.datasets import load_libsvm
    from _svm_reference import reference_dual

    X, y = load_libsvm(os.path.join(data_dir, f"{name}.xz"))
    ypm = np.where(y == np.unique(y)[1], 1.0, -1.0)
    n = X.shape[0]
    rec = []

    def cb(st):
        rec.append((st.r.copy(), st.error_bound))
        return st.error_bound <= 1e-12

    res = mk.solve(X, y, solver="fista", stop=("max_iter", {"n": 5000}), callback=cb)
    assert res.status == "callback"
    m, s = scaling_statistics(X, "std")
    r_star, _, viol = reference_dual(X, ypm, m, s, 64.0 / n, n / 128.0, r0=res.dual_coef_)
    assert viol < 1e-16
    errs = np.sqrt(((np.array([r for r, _ in rec[-200:]], dtype=np.longdouble) - r_star) ** 2)
                   .sum(axis=1)).astype(np.float64)
    bounds = np.array([e for _, e in rec[-200:]])
    assert np.all(errs <= bounds)


def test_fraction_claim_bound_is_never_below_the_projected_gradient(data_dir):
    """||p(r)|| / mu <= any valid bound of ||r - r*|| at r (p is the least-norm element
    of the subdifferential): fista's bound with fraction 0.9 fell below it near 1e-14.
    Checked at every iteration against a long-double recomputation of ||p(r)|| / mu."""
    X, y = _heart(data_dir)
    ypm = np.where(y == np.unique(y)[1], 1.0, -1.0)
    n = X.shape[0]
    gamma, mu = 64.0 / n, n / 128.0
    m, s = scaling_statistics(X, "std")
    rec = []
    mk.solve(X, y, solver="fista", stop=[("certified_points", {"fraction": 0.9}),
                                         ("max_iter", {"n": 1500})],
             callback=lambda st: rec.append((st.r.copy(), st.error_bound)) and False)
    for r, eps in rec[1::7]:
        pg = projected_gradient_norm_longdouble(X, ypm, r, m, s, mu, gamma, "hsvm", 0.0)
        assert pg / mu <= eps * (1 + 1e-12)


@pytest.mark.parametrize("solver", ["fista", "fista_svm"])
@pytest.mark.parametrize("sparse", [False, True])
def test_dask_run_ends_like_the_in_memory_run_with_a_certificate_that_verifies(solver, sparse):
    """The dask drivers use the in-memory statistics algorithm, the same error bound with
    its rounding term and the same certificate (with the run's configuration), checked by
    the run loop on the dask array chunk by chunk."""
    da = pytest.importorskip("dask.array")
    X, y = make_problem(n=160, d=6, seed=11)
    X[np.random.default_rng(2).random(X.shape) < 0.3] = 0.0
    Xs = sp.csr_matrix(X) if sparse else X
    mem = mk.solve(Xs, y, solver=solver)
    Xd = da.from_array(X, chunks=(50, 6))
    if sparse:
        Xd = Xd.map_blocks(sp.csr_matrix, dtype=X.dtype)
    res = mk.solve(Xd, y, solver=solver)
    assert res.status == mem.status == "certified" and res.n_iter == mem.n_iter
    cert = res.certificate
    assert cert.config is res.config and cert.claim == "certified"
    assert cert.check(Xd, y) and cert.check(Xs, y)
    np.testing.assert_array_equal(res.certified_mask, mem.certified_mask)


@pytest.mark.parametrize("solver", ["fista", "dcd"])
def test_certificate_value_bounds_the_distance_to_the_optimum_for_small_mu(solver, data_dir):
    """Verdict.value = ||p(r)|| / mu (the projected gradient over the strong convexity
    constant) is >= ||r - r*||, r* the extended-precision optimum, also for mu < 1 where
    the division makes the bound larger than ||p(r)||."""
    from _svm_reference import reference_dual

    X, y = _heart(data_dir)
    ypm = np.where(y == np.unique(y)[1], 1.0, -1.0)
    C, mu = 1e-2, 0.05
    res = mk.solve(X, y, solver=solver, C=C, mu=mu, random_state=0, max_iter=3000,
                   stop=("certified_points", {"fraction": 0.0}))
    assert res.status == "certified"
    m, s = scaling_statistics(X, "std")
    r_star, _, viol = reference_dual(X, ypm, m, s, C, mu, augmented=True, r0=res.dual_coef_)
    assert viol < 1e-15
    verdict = res.certificate.check(X, y)
    assert verdict
    assert np.linalg.norm(res.certificate.r - r_star.astype(np.float64)) <= verdict.value


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_mask_and_r_of_another_kind_are_rejected(kernel):
    # a mask of indices (every entry the index of one truly certified point) reads as
    # "all points certified", while indexing with it checks that one point n times
    rng = np.random.default_rng(11)
    X = rng.standard_normal((80, 3))
    y = np.where(X[:, 0] + 0.3 * rng.standard_normal(80) > 0, 1, -1)
    cert = mk.solve(X, y, solver="dcd", kernel=kernel).certificate
    assert cert.verify(X, y)
    i = int(np.flatnonzero(cert.mask)[0]) or int(np.flatnonzero(cert.mask)[1])

    def forged(**changes):
        new = type(cert).__new__(type(cert))
        new.__dict__.update(cert.__dict__)
        new.__dict__.update(changes)
        return new

    for mask in (np.full(80, i), cert.mask.astype(float)):
        v = forged(mask=mask).check(X, y)
        assert not v and "the mask must be a boolean array" in v.reason
    v = forged(r=cert.r.astype(object)).check(X, y)
    assert not v and "r must be a real array" in v.reason
    assert forged(mask=list(cert.mask), r=list(cert.r)).verify(X, y)


def test_classical_svm_referee_numbers_do_not_depend_on_the_chunks(monkeypatch):
    # fista_svm's y^T r cancels to a few ulps; it enters the rounding term, which must be
    # the same whatever the chunk size of the per-point tests (it was summed per chunk)
    from marginkit.solvers.svm import _certificate

    rng = np.random.default_rng(0)
    n = 40000
    y = np.where(rng.random(n) < 0.5, 1, -1)
    X = sp.csr_matrix((rng.standard_normal((n, 5)) + 0.8 * y[:, None]).astype(np.float32))
    res = mk.solve(X, y, solver="fista_svm", random_state=0,
                   stop=("certified_points", {"fraction": 0.3}))
    cert = res.certificate
    verdicts = []
    for chunk in (1 << 40, 1 << 15, 1000):
        monkeypatch.setattr(_certificate, "_CHUNK", chunk)
        verdicts.append(cert.check(X, y))
    assert all(v.ok for v in verdicts)
    for v in verdicts[1:]:
        for k in ("value", "threshold", "rounding", "margin"):
            # abs=0: the rounding term is ~1e-12, pytest.approx's default abs tolerance
            assert getattr(v, k) == pytest.approx(getattr(verdicts[0], k), rel=1e-12, abs=0), k


def _per_point_reference(ypm, r, box, level, mask, th, Mth, dec, Md, t, Et, mu, g, gC,
                         delta, check_model, c1, Ec1, xth=None, xdec=None):
    """The per-point step of the referee in numpy vector form (docs/svm.md section 6)."""
    u = 2.0 ** -53
    eta = 2.0 ** -1074
    g4 = 4 * u / (1 - 4 * u)
    off = ~mask
    theta = ypm * (th + t)
    Eth = Mth * (1.0 + 2 * g) + Et + u * abs(t) + 2 * u * (np.abs(theta) + 2 * abs(t)) + eta
    if xth is not None:
        Eth = (Eth + xth) * (1.0 + 2 * u)
    G = theta + mu * r - 1.0
    EG = Eth + g4 * (np.abs(theta) + mu * r + 1.0) + eta
    p = np.where(r <= 0.0, np.where(box > 0.0, np.minimum(G, 0.0), 0.0),
                 np.where(r >= box, np.maximum(G, 0.0), G))
    k_room = int(np.count_nonzero(np.minimum(r, box - r) > delta)) if delta > 0.0 else 0
    lev = np.minimum(box, level * (1.0 - 2 * u))
    threshold = float(np.where(mask, (lev - r) * (1.0 - u), np.inf).min(initial=np.inf))
    floor = (1.0 - mu * lev) + 2 * u * (1.0 + mu * lev)
    floor_ok = bool(np.all((theta - Eth * (1.0 + 2 * u) - u * np.abs(theta) > floor) | off))
    model_ok = True
    if check_model:
        ydec = ypm * (dec + c1)
        Ed = Md * (1.0 + 2 * g) * gC + Ec1 + 2 * u * np.abs(ydec) + eta
        if xdec is not None:
            Ed = (Ed + xdec) * (1.0 + 2 * u)
        model_ok = bool(np.all((ydec * (1.0 - u) > Ed) | off))
    return p, EG, threshold, k_room, floor_ok, model_ok


@pytest.mark.parametrize("n", [3000, 40000], ids=["one part", "parts on two threads"])
@pytest.mark.parametrize("seed", range(6))
def test_per_point_kernel_is_the_vector_form_bit_for_bit(seed, n):
    # ``ref_points`` (one pass over a block's points) computes theta, its rounding bound,
    # G, EG, p and the tests with the float64 operations of the vector form, in the same
    # order: on points at the ends of their boxes, boxes [0, 0] (weight 0), margins at
    # the floor and at zero, subnormal and huge magnitudes, every output is bit-identical;
    # from 2^15 points in parts on the OpenMP threads, with the same results
    from marginkit.solvers.svm import _fast
    threadpoolctl = pytest.importorskip("threadpoolctl")

    rng = np.random.default_rng(seed)
    ypm = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    box = np.where(rng.random(n) < 0.1, 0.0, rng.uniform(0.5, 2.0, n))
    pick = rng.random(n)
    r = np.where(pick < 0.3, 0.0, np.where(pick < 0.6, box, rng.uniform(0, 1, n) * box))
    mu = float(rng.choice([1e-3, 0.7, 3.0]))
    level = np.minimum(box, 1.0 / mu)
    mask = rng.random(n) < 0.6
    scale = 10.0 ** rng.uniform(-320, 300, n) if seed % 2 else rng.uniform(0.5, 1.5, n)
    th = rng.standard_normal(n) * scale
    th[:50] = (1.0 - mu * level[:50]) * ypm[:50]  # margins at the floor (with t = 0 below)
    Mth = np.abs(rng.standard_normal(n)) * 1e-12 * scale
    Mth[50:60] = 5e-324
    dec, Md = rng.standard_normal(n) * scale, np.abs(rng.standard_normal(n)) * 1e-13
    dec[60:70] = 0.0
    t = 0.0 if seed < 2 else float(rng.standard_normal())
    g, gC = 1e-13, 1e-15
    # the rows' own error (a kernel approximation's), added to the bounds
    xth = np.abs(rng.standard_normal(n)) * 1e-9 * scale
    xdec = np.abs(rng.standard_normal(n)) * 1e-9 * scale
    for check_model, delta, extra in itertools.product((False, True), (0.0, 1e-3, 0.3),
                                                       (False, True)):
        Et, c1, Ec1 = 1e-14, float(rng.standard_normal()), 1e-15
        xs = (xth, xdec) if extra else (None, None)
        want = _per_point_reference(ypm, r, box, level, mask, th, Mth, dec, Md, t, Et,
                                    mu, g, gC, delta, check_model, c1, Ec1, *xs)
        p, EG = np.full(n, np.nan), np.full(n, np.nan)
        with threadpoolctl.threadpool_limits(2, user_api="openmp"):
            got = _fast.ref_points(ypm, r, box, level, mask.view(np.uint8), th, Mth, dec,
                                   Md, p, EG, t, Et, mu, 1.0 + 2 * g,
                                   4 * 2.0 ** -53 / (1 - 4 * 2.0 ** -53), delta,
                                   check_model, c1, Ec1, gC, 2.0 ** -53, 2.0 ** -1074,
                                   *xs)
        assert np.array_equal(p, want[0]) and np.array_equal(EG, want[1])
        assert got[0] == want[2] and got[1] == want[3]
        assert got[2] is want[4] and got[3] is want[5]
        assert got[4] == np.max(np.abs(want[0])) and got[5] == np.max(np.abs(want[1]))
    # NaN reaches the largest entries (scaled_norm then reports a non-finite norm)
    th[n - 7], box[n - 7], r[n - 7] = np.nan, 1.0, 0.5
    p, EG = np.empty(n), np.empty(n)
    got = _fast.ref_points(ypm, r, box, level, mask.view(np.uint8), th, Mth, dec, Md, p, EG,
                           t, 0.0, mu, 1.0, 0.0, 0.0, False, 0.0, 0.0, 0.0, 2.0 ** -53, 0.0)
    assert math.isnan(got[4]) and math.isnan(got[5])
    # one entry per point: a block of another length is refused, naming the argument
    with pytest.raises(ValueError, match=f"Mth has {n - 1} entries"):
        _fast.ref_points(ypm, r, box, level, mask.view(np.uint8), th, Mth[1:], dec, Md, p,
                         EG, t, 0.0, mu, 1.0, 0.0, 0.0, False, 0.0, 0.0, 0.0, 2.0 ** -53, 0.0)
    with pytest.raises(ValueError, match=f"xdec has {n - 1} entries"):
        _fast.ref_points(ypm, r, box, level, mask.view(np.uint8), th, Mth, dec, Md, p,
                         EG, t, 0.0, mu, 1.0, 0.0, 0.0, False, 0.0, 0.0, 0.0, 2.0 ** -53, 0.0,
                         xth, xdec[1:])
    # r, box and level are read by their strides: a broadcast bound and a strided r are
    # the contiguous ones; a stride that is not a whole number of entries is refused
    ones = np.broadcast_to(1.0, n)
    wide = np.repeat(r, 2)[::2]
    p2, EG2 = np.empty(n), np.empty(n)
    want = _fast.ref_points(ypm, r, np.ones(n), np.ones(n), mask.view(np.uint8), th, Mth,
                            dec, Md, p, EG, t, 0.0, mu, 1.0, 0.0, 0.1, True, 0.0, 0.0, 0.0,
                            2.0 ** -53, 0.0)
    got = _fast.ref_points(ypm, wide, ones, ones, mask.view(np.uint8), th, Mth, dec, Md, p2,
                           EG2, t, 0.0, mu, 1.0, 0.0, 0.1, True, 0.0, 0.0, 0.0, 2.0 ** -53, 0.0)
    assert np.array_equal(p, p2, equal_nan=True) and np.array_equal(EG, EG2, equal_nan=True)
    assert got[:4] == want[:4]
    raw = np.zeros(12 * n + 8, dtype=np.uint8)
    odd = np.lib.stride_tricks.as_strided(raw[:8].view(np.float64), (n,), (12,))
    with pytest.raises(ValueError, match="stride"):
        _fast.ref_points(ypm, odd, ones, ones, mask.view(np.uint8), th, Mth, dec, Md, p2,
                         EG2, t, 0.0, mu, 1.0, 0.0, 0.1, True, 0.0, 0.0, 0.0, 2.0 ** -53, 0.0)


def test_scaled_norm_in_place_is_the_copying_norm():
    from marginkit import _referee as R

    rng = np.random.default_rng(1)
    for v in (rng.standard_normal(1000) * 1e-310, rng.standard_normal(1000) * 1e300,
              np.zeros(5), rng.standard_normal(7)):
        want = R.scaled_norm(v)
        w = v.copy()
        assert R.scaled_norm(w, top=float(np.max(np.abs(v))), overwrite=True) == want
    assert R.scaled_norm(np.ones(3), top=math.nan) == (math.inf, math.inf)


def test_scaled_norm_beyond_float64_range_is_inf():
    # finite entries whose norm exceeds float64's largest number: inf (as for non-finite
    # entries), not an OverflowError out of the referee's math.ldexp
    from marginkit import _referee as R

    for v in (np.full(8, 1.7e308), np.array([1.5e308, -1.5e308])):
        assert R.scaled_norm(v) == (math.inf, math.inf)
        assert R.scaled_norm(v.copy(), overwrite=True) == (math.inf, math.inf)
    n, e = R.scaled_norm(np.array([1.0e308, 1.0e308]))  # sqrt(2) 1e308: still finite
    assert n == pytest.approx(math.sqrt(2.0) * 1e308, rel=1e-15) and math.isfinite(e)
    # through the referee: a certificate whose model is that of X * 1e154 (its
    # projected gradient's norm beyond float64's range) is rejected, not an error
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 2))
    y = np.where(X[:, 0] > 0, 1, 0)
    c = mk.solve(X, y, solver="dcd", scale=None, random_state=0).certificate
    Xf, ypm = X * 1e154, np.where(y == 1, 1.0, -1.0)
    t = float(ypm @ c.r)
    forged = CertifiedPointsCertificate(c.value, c.mask, c.r, c.gamma, c.mu, None, np.zeros(2),
                                        np.ones(2), c.formulation, t, Xf.T @ (ypm * c.r), t,
                                        classes=c.classes)
    assert not forged.verify(Xf, y)


def test_scaled_norm_bound_holds_for_subnormal_norms():
    # a subnormal norm is rounded to 2^-1074 absolute when scaled back, which a bound
    # relative to the norm does not cover: ||(2^-1074, 2^-1074)|| = sqrt(2) 2^-1074 comes
    # back as 2^-1074 (error 0.41 2^-1074) and the bound gamma_4 * 2^-1074 was 0
    import decimal

    from marginkit import _referee as R

    decimal.getcontext().prec = 80
    tiny = 2.0 ** -1074
    rng = np.random.default_rng(3)
    cases = [np.array([tiny, tiny]), np.array([tiny, -tiny, tiny]), np.array([3 * tiny]),
             np.array([5 * tiny, 7 * tiny])]
    cases += [np.round(rng.standard_normal(k) * 2.0 ** rng.integers(0, 60)) * tiny
              for k in (1, 2, 3, 9, 40) for _ in range(20)]
    for v in cases:
        n, e = R.scaled_norm(v)
        exact = sum(decimal.Decimal(float(x)) ** 2 for x in v).sqrt()
        assert abs(decimal.Decimal(n) - exact) <= decimal.Decimal(e), (v, n, e)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_dense_row_products_are_the_row_by_row_sums(dtype):
    # ref_matvec takes dense rows four at a time (interleaved): each row's four sums must
    # still be the float64 sums over its columns in order, for the rows of the groups of
    # four and for the rest (13 rows: 3 groups and 1), at magnitudes that make the order
    # visible
    from marginkit.solvers.svm import _fast
    from marginkit.utils._rows import row_block

    rng = np.random.default_rng(5)
    n, d = 13, 9
    X = (rng.standard_normal((n, d)) * 10.0 ** rng.integers(-8, 9, (n, d))).astype(dtype)
    m, v, coef = (rng.standard_normal(d) * 10.0 ** rng.integers(-6, 7, d) for _ in range(3))
    Mv, acoef = np.abs(rng.standard_normal(d)), np.abs(coef)
    out = [rng.standard_normal(n) for _ in range(4)]  # added to, as the referee's blocks
    th, Mth, dec, Md = (o.copy() for o in out)
    _fast.ref_matvec(row_block(np.ascontiguousarray(X)), np.zeros(d, dtype=np.uint8), m, v,
                     Mv, coef, acoef, th, Mth, dec, Md)
    for i in range(n):
        t1 = t2 = q1 = q2 = 0.0
        for j in range(d):  # Python floats: the same IEEE float64 operations, in order
            c = float(X[i, j]) - float(m[j])
            t1 += c * float(v[j])
            t2 += c * float(coef[j])
            q1 += abs(c) * float(Mv[j])
            q2 += abs(c) * float(acoef[j])
        assert th[i] == out[0][i] + t1 and dec[i] == out[2][i] + t2, i
        assert Mth[i] == out[1][i] + q1 and Md[i] == out[3][i] + q2, i
    with pytest.raises(ValueError, match="th has 12 entries for a block of 13 rows"):
        _fast.ref_matvec(row_block(np.ascontiguousarray(X)), np.zeros(d, dtype=np.uint8), m,
                         v, Mv, coef, acoef, th[1:], Mth[1:], dec[1:], Md[1:])


@pytest.mark.parametrize("layout", ["float64", "float32", "csr"])
def test_row_products_do_not_depend_on_the_thread_count(layout):
    # above 2e5 stored entries ref_matvec splits the rows among the OpenMP threads (each
    # row's sums one thread's): the outputs are bit for bit those of one thread, for row
    # counts whose parts end inside a group of four rows (n odd)
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from marginkit.solvers.svm import _fast
    from marginkit.utils._rows import row_block

    rng = np.random.default_rng(8)
    n, d = 20011, 23
    X = rng.standard_normal((n, d)) * 10.0 ** rng.integers(-5, 6, (n, d))
    if layout == "float32":
        X = X.astype(np.float32)
    elif layout == "csr":
        X = sp.csr_matrix(np.where(rng.random((n, d)) < 0.5, X, 0.0))
    skip = np.zeros(d, dtype=np.uint8)
    if layout == "csr":
        skip[[2, 7]] = 1
    m, v, coef = (rng.standard_normal(d) for _ in range(3))
    Mv, acoef = np.abs(rng.standard_normal(d)), np.abs(coef)
    outs = []
    for nt in (1, 2, 3):
        with threadpoolctl.threadpool_limits(nt, user_api="openmp"):
            o = [np.ones(n) for _ in range(4)]
            _fast.ref_matvec(row_block(X), skip, m, v, Mv, coef, acoef, *o)
        outs.append(o)
    for o in outs[1:]:
        for a, b in zip(outs[0], o):
            assert np.array_equal(a, b)
    # and against numpy (to rounding): the same quantities
    Z = X.toarray() if sp.issparse(X) else X.astype(np.float64)
    light = ~skip.astype(bool)
    C = Z[:, light] - m[light]  # CSR: the light columns, centred (the heavy are skipped)
    np.testing.assert_allclose(outs[0][0], 1 + C @ v[light], rtol=1e-9, atol=1e-6)
    if layout == "csr":
        # the magnitude of a sparse row: its stored entries, plus |m_L| . acoef_L
        mag = np.abs(Z[:, light]) @ acoef[light] + np.abs(m[light]) @ acoef[light]
    else:
        mag = np.abs(C) @ acoef
    np.testing.assert_allclose(outs[0][3], 1 + mag, rtol=1e-9, atol=1e-6)


@pytest.mark.parametrize("sparse", [False, True])
def test_row_products_of_rows_without_columns_leave_the_sums(sparse):
    # a block of zero columns has no entries: every sum stays as it was (the kernels are
    # not entered with pointers into empty arrays)
    from marginkit.solvers.svm import _fast
    from marginkit.utils._rows import row_block

    X = sp.csr_matrix((5, 0)) if sparse else np.zeros((5, 0))
    empty = np.zeros(0)
    o = [np.arange(5.0) + k for k in range(4)]
    _fast.ref_matvec(row_block(X), np.zeros(0, dtype=np.uint8), empty, empty, empty, empty,
                     empty, *o)
    for k, a in enumerate(o):
        assert np.array_equal(a, np.arange(5.0) + k)


@pytest.mark.parametrize("layout", ["C", "F", "csr"])
def test_float32_blocks_are_read_as_their_float64_values(layout, monkeypatch):
    # the referee reads float32 row blocks as stored (its kernels convert each entry to
    # float64, exactly): every verdict number is the one of the float64 copy of X, over
    # one block and over many
    from functools import partial

    from marginkit.solvers.svm import _certificate

    X, y = make_problem(n=90, d=5, seed=11, shift=40.0)
    X32 = X.astype(np.float32)
    res = mk.solve(X32, y, solver="dcd", random_state=0)
    cert = res.certificate
    if layout == "F":
        X32 = np.asfortranarray(X32)
    elif layout == "csr":
        X32 = sp.csr_matrix(X32)
    X64 = X32.astype(np.float64)
    for rows in (None, 7):
        if rows is not None:
            monkeypatch.setattr(_certificate.R, "RowBlocks",
                                partial(_certificate.R.RowBlocks, max_entries=rows * 5))
        a, b = cert.check(X32, y), cert.check(X64, y)
        assert a.ok and b.ok
        for k in ("value", "threshold", "rounding", "margin"):
            assert getattr(a, k) == getattr(b, k), (k, rows)


@pytest.mark.parametrize("mu", [1e12, 1e13])
def test_fista_error_bound_covers_the_exact_distance_at_a_large_mu(mu):
    """The solver's own bound on ||r - r*|| (``certificate.value``, the history's
    ``error_bound``) is an upper bound, against r* solved in exact rational arithmetic.
    At mu C = 1e12-1e13, mu r_i is near 1: its long-double bound computed mu r_i as a
    float64 product, off by u mu r_i, which its rounding term did not cover (the bound
    was 1.48x below the distance at 1e13; the referee's own bound covered it)."""
    from fractions import Fraction as Fr

    from _exact import solve_exact

    rng = np.random.default_rng(2)
    n = 30
    X = rng.normal(size=(n, 3))
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=n) > 0, 1, -1)
    res = mk.solve(X, y, solver="fista", C=1.0, mu=mu, scale=None, max_iter=2000)
    cert = res.certificate
    assert res.status == "certified" and cert.check(X, y)
    # Q = Y (X X^T + 1 1^T) Y + mu I; r* on the free set F solves Q_FF r_F = 1 (the box
    # C = 1 is far above r* ~ 1/mu); KKT checked below
    Xf = [[Fr(float(v)) for v in row] for row in X]
    yf = [int(v) for v in y]
    Q = [[yf[i] * yf[j] * (sum(a * b for a, b in zip(Xf[i], Xf[j])) + 1)
          + (Fr(mu) if i == j else 0) for j in range(n)] for i in range(n)]
    F = [i for i in range(n) if cert.r[i] > 0]
    k = len(F)
    rF = solve_exact([[Q[F[a]][F[b]] for b in range(k)] for a in range(k)], [Fr(1)] * k)
    rs = [Fr(0)] * n
    for a in range(k):
        rs[F[a]] = rF[a]
    grad = [sum(Q[i][j] * rs[j] for j in range(n)) - 1 for i in range(n)]
    assert all(v >= 0 for v in rs) and all(grad[i] >= 0 for i in range(n) if i not in F)
    dist = float(sum((Fr(float(cert.r[i])) - rs[i]) ** 2 for i in range(n))) ** 0.5
    assert cert.value >= dist and res.history["error_bound"][-1] >= dist


def test_a_column_is_constant_by_an_exact_rule_that_every_layout_shares():
    """scale='std' dropped a column whose spread was 1.1e-13 of its mean (500 ulps,
    exactly representable: the rule was sd <= 1e-12 |mean|), and fista, fista_svm and
    dcd certified points 0 and 1, which the exact optimum of the standardized problem
    misclassifies (theta = -0.30, from exact rational statistics; found by review).
    scikit-learn's rule (var <= n eps var + (n eps mean)^2) dropped it again from n =
    520 (at n = 20,000 a spread of 2^-39), and decided by the order of the sums: dask
    chunks of 7 rows dropped a column that in-memory X kept. Keeping every column whose
    values differ kept ulp noise (a "total" column, 3.0 + 4 ulps), whose implicit
    centring left nothing to certify: SVMClassifier() fell from 79% to 56% accuracy.
    A column is now constant when all its values lie within 2^-40 (4,096 ulps) of its
    largest magnitude, tested exactly: the same answer for every n, layout and order.
    The 500-ulp column is constant by that stated rule (the problem certified leaves it
    out, at every n); a 2^-39 one is kept, with the warning, and its two points are not
    certified (a rule at 2^-45 kept columns of 2^-44 whose implicit centring left
    nothing to certify: heart_scale 145 -> 0 points, review)."""
    import dask.array as da

    from marginkit._referee import RowBlocks
    from marginkit.sklearn import SVMClassifier
    from marginkit.solvers.svm._certificate import _StreamedBlocks, scaling_statistics

    for n, k in ((40, 43), (1000, 43), (20000, 39)):
        rng = np.random.default_rng(0)
        y = np.where(np.arange(n) < n // 2, 1, -1)
        d = 2.0 ** -k
        xA = 1.0 + d * y
        xA[[0, 1]] = 1.0 - d
        xB = y * 1.0 + 2.5 * rng.normal(size=n)
        xB[[0, 1]] = 4.0
        X = np.column_stack([xA, xB])
        for solver in ("fista", "fista_svm", "dcd"):
            if k == 43:  # constant by the rule, at every n: left out of the problem
                res = mk.solve(X, y, solver=solver, max_iter=300)
                cert = res.certificate
                assert cert is not None and cert.inv_std[0] == 0.0 and cert.verify(X, y)
                continue
            with pytest.warns(UserWarning, match="column 0 of X has a mean .* times its"):
                res = mk.solve(X, y, solver=solver, max_iter=300)
            cert = res.certificate
            assert cert is None or not (cert.mask[0] or cert.mask[1]), (n, k, solver)
    n = 40
    rng = np.random.default_rng(1)
    one_ulp = 1.0 + np.where(np.arange(n) % 2, np.spacing(1.0), 0.0)
    tiny = 1.0 + 2.0 ** -43 * np.where(np.arange(n) < 20, 1.0, -1.0)
    P = rng.random((n, 3))
    P /= P.sum(axis=1, keepdims=True)
    total = P[:, 0] + P[:, 1] + P[:, 2]  # 1 up to an ulp or two
    Xc = np.column_stack([np.full(n, 3.0), one_ulp, tiny, np.zeros(n), rng.normal(size=n),
                          total])
    expected = [True, True, True, True, False, True]
    for layout in (Xc, sp.csr_matrix(Xc), da.from_array(Xc, chunks=(7, 6))):
        if isinstance(layout, da.Array):
            s = scaling_statistics(_StreamedBlocks(RowBlocks(layout), 6), "std")[1]
        else:
            s = scaling_statistics(layout, "std")[1]
        np.testing.assert_array_equal(s == 0.0, expected)
    # the review's estimator: a column of 3.0 with 4 ulps on every 7th row is dropped
    X = rng.normal(size=(300, 3))
    X[:, 2] = 3.0
    X[::7, 2] = 3.0 + 4 * np.spacing(3.0)
    labels = np.digitize(X[:, 0], [-0.5, 0.5])
    model = SVMClassifier().fit(X, labels)
    assert all(r.status == "certified" for r in model.results_)
    assert model.score(X, labels) > 0.75
    # a spread just above the rule's is kept (2^-38 here), and one that underflows is
    # refused by name, as one of 1e-322 was (a column of 0 and 5e-324 was dropped)
    kept = np.column_stack([Xc[:, 4], 1.0 + 2.0 ** -38 * (np.arange(n) % 2)])
    assert np.all(scaling_statistics(kept, "std")[1] > 0.0)
    Xs = np.column_stack([rng.normal(size=10), np.where(np.arange(10) % 2, 5e-324, 0.0)])
    with pytest.raises(ValueError, match="standard deviation below"):
        mk.solve(Xs, np.where(Xs[:, 0] > 0, 1, -1), solver="dcd")


@pytest.mark.parametrize("what", ["coef", "intercept"])
def test_the_stored_linear_model_is_w_of_r_to_float64_rounding(what):
    """Found by review: the stored coefficients and intercept were checked against
    w_bar(r) to a relative 1e-6 of their magnitudes. At C = 1e3 on overlapping classes
    (sum r = 7.9e5) the coefficients could move by 0.3 and change up to 195 of 1,000
    training predictions; on a column of mean 1e6 times its spread the intercept could
    move by 0.94 and change 112 of 400; both with certificates that verified. The
    tolerance is now the rounding of a float64 evaluation from r."""
    rng = np.random.default_rng(0)
    if what == "coef":
        n = 1000
        X = rng.normal(size=(n, 2))
        y = np.where(X[:, 0] + 2.0 * rng.normal(size=n) > 0, 1, -1)
        kw = dict(C=1e3, scale=None, max_iter=200000)
    else:
        n = 400
        z = rng.normal(size=(n, 2))
        y = np.where(z[:, 0] + 0.5 * z[:, 1] + 0.7 * rng.normal(size=n) > 0, 1, -1)
        X = z.copy()
        X[:, 0] += 1e6
        kw = dict(C=10.0, mu=1.0)
    res = mk.solve(X, y, solver="fista", random_state=0, **kw)
    cert = res.certificate
    assert res.status == "certified" and cert.verify(X, y)
    pred = res.predict(X)
    for shift in (0.3, 1e-3):
        if what == "coef":
            cert.coef = res.coef_ + np.array([-shift, -shift])
        else:
            cert.intercept = res.intercept_ + shift
        assert not cert.verify(X, y), shift
        cert.coef, cert.intercept = res.coef_, res.intercept_
    assert cert.verify(X, y) and np.array_equal(res.predict(X), pred)


def test_the_stored_kernel_svm_intercept_is_y_r_to_float64_rounding():
    """Found by review: the kernel H-SVM's stored intercept was checked against y^T r to
    1e-6 sum(r): at C = 1e4 (sum r = 3.8e6) it could move by 0.95 and change 194 of 600
    training predictions with a certificate that verified."""
    rng = np.random.default_rng(1)
    n = 600
    X = rng.normal(size=(n, 2))
    y = np.where(X[:, 0] + 1.5 * rng.normal(size=n) > 0, 1, -1)
    res = mk.solve(X, y, solver="dcd", kernel="rbf", kernel_params={"gamma": 0.5}, C=1e4,
                   random_state=0, max_iter=20000)
    cert = res.certificate
    assert res.status == "certified" and cert.r.sum() > 1e6 and cert.verify(X, y)
    t = cert.intercept
    for shift in (0.95, -0.95, 1e-6):
        cert.intercept = t + shift
        assert not cert.verify(X, y), shift
    cert.intercept = t
    assert cert.verify(X, y)


def _exact_hsvm(Z, y, gam, mu):
    """The exact optimum (r, theta) of max -1/2 r^T Q r + e^T r on [0, gam]^n, Q = H H^T
    + mu I, H_i = y_i (z_i, 1), in rationals, by trying every active set (n small)."""
    import itertools

    n = len(Z)
    H = [[y[i] * v for v in Z[i]] + [y[i]] for i in range(n)]
    Q = [[sum(a * b for a, b in zip(H[i], H[j])) + (mu if i == j else 0) for j in range(n)]
         for i in range(n)]
    for st in itertools.product((0, 1, 2), repeat=n):
        free = [i for i in range(n) if st[i] == 1]
        r = [gam if st[i] == 2 else Fraction(0) for i in range(n)]
        # Gauss-Jordan on the free coordinates
        M = [[Q[i][j] for j in free] + [1 - sum(Q[i][j] * r[j] for j in range(n) if st[j] == 2)]
             for i in free]
        ok = True
        for c in range(len(free)):
            piv = next((i for i in range(c, len(free)) if M[i][c] != 0), None)
            if piv is None:
                ok = False
                break
            M[c], M[piv] = M[piv], M[c]
            for i in range(len(free)):
                if i != c and M[i][c] != 0:
                    f = M[i][c] / M[c][c]
                    M[i] = [a - f * b for a, b in zip(M[i], M[c])]
        if not ok:
            continue
        for k, i in enumerate(free):
            r[i] = M[k][-1] / M[k][k]
        if any(not (0 < r[i] < gam) for i in free):
            continue
        Qr = [sum(Q[i][j] * r[j] for j in range(n)) for i in range(n)]
        G = [q - 1 for q in Qr]
        if any((st[i] == 0 and G[i] < 0) or (st[i] == 2 and G[i] > 0) or
               (st[i] == 1 and G[i] != 0) for i in range(n)):
            continue
        return r, [Qr[i] - mu * r[i] for i in range(n)]
    raise AssertionError("no active set is optimal")


def test_a_certified_point_is_classified_as_predict_evaluates_the_stored_model():
    """Found by review: the referee checked the stored linear model's margins in centred
    form, while predict computes X @ coef_ + intercept_ on X uncentred. On a column of mean
    1e11 and spread about 1, a certificate of the exact optimum with a certified margin
    of 4e-7 verified, and predict misclassified that point (its rounding is about
    u |m| |coef|). Along a bisection towards a zero margin, every certificate that
    verifies must now leave its certified point correctly classified by predict, and
    the one predict misclassifies is rejected."""
    from marginkit.solvers.svm._data import scaling_statistics

    base = np.array([[1e11 - 2.0, 0.3], [1e11 - 1.0, -0.4], [1e11 + 1.0, 0.5],
                     [1e11 + 2.0, -0.2], [1e11 + 1.0, 0.0]])
    y = np.array([1, 1, -1, -1, 1])
    C, mu, k = 10.0, 1.0, 4
    template = mk.solve(base, y, solver="dcd", C=C, mu=mu, max_iter=1, random_state=0)
    F = Fraction

    def certificate_at(b):
        X = base.copy()
        X[k, 1] = b
        m, s = scaling_statistics(X, "std")
        Z = [[F(float(s[j])) * (F(float(X[i, j])) - F(float(m[j]))) for j in range(2)]
             for i in range(5)]
        rs, theta = _exact_hsvm(Z, [F(int(v)) for v in y], F(C), F(mu))
        r = np.array([float(v) for v in rs])
        u = y * r
        wbar = np.array([float(sum(F(float(u[i])) * Z[i][j] for i in range(5)))
                         for j in range(2)])
        tbar = float(sum(F(float(v)) for v in u))
        coef = s * wbar
        intercept = float(F(tbar) - sum(F(float(m[j])) * F(float(coef[j])) for j in range(2)))
        mask = np.zeros(5, bool)
        mask[k] = True
        cert = CertifiedPointsCertificate(0.0, mask, r, C, mu, "std", m, s, "hsvm", tbar, coef,
                                          intercept, template.classes_, kernel=template.kernel,
                                          config=template.config, claim=None)
        res = copy.copy(template)
        res.coef_, res.intercept_, res.certificate = coef, intercept, cert
        return X, theta[k], res

    lo, hi = -1.0, 0.0
    th_hi = certificate_at(hi)[1]
    wrong = 0
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        X, th, res = certificate_at(mid)
        if (th > 0) == (th_hi > 0):
            hi, th_hi = mid, th
        else:
            lo = mid
        if not 0 < th < 1e-4:
            continue
        right = res.predict(X)[k] == y[k]
        wrong += not right
        if res.certificate.verify(X, y):
            assert right, mid
    assert wrong > 0  # the case of the review is reached


@pytest.mark.parametrize("solver,run_on", [("fista", "numpy"), ("fista", "dask"),
                                           ("dcd", "numpy")])
def test_a_certificate_verifies_in_every_row_layout_of_the_same_numbers(solver, run_on):
    """Found by review: with the model checked to float64 rounding, a certificate made on
    a numpy X was rejected on a dask array of the same numbers (and the other way round):
    the column means, summed in another block order, differed by 3.6e-11 on a column whose
    mean cancels (entries of +-1e8 on rows far from the boundary), and the coefficients
    were compared with w(r) under the referee's means. They are now compared under the
    stored statistics (the run's, themselves checked against X's)."""
    da = pytest.importorskip("dask.array")
    import dask

    from marginkit.datasets import make_clusters

    n = 20000
    X, y = make_clusters(n, 4, offset=0.0, noise=0.0, radius=0.5, random_state=0)
    rng = np.random.default_rng(0)
    first = mk.solve(X, y, solver="fista", scale=None, C=1.0)
    easy = np.argsort(-np.abs(first.decision_function(X)))[: n // 5]
    col = rng.normal(0, 1e-3, n)
    col[easy] = np.where(np.arange(easy.size) % 2 == 0, 1.0, -1.0) * 1e8 \
        + rng.normal(0, 1, easy.size)
    X = np.column_stack([X, col])
    Xd = da.from_array(X, chunks=(997, -1))
    with dask.config.set(scheduler="synchronous"):
        res = mk.solve(X if run_on == "numpy" else Xd, y, solver=solver)
        assert res.status == "certified"
        for Z in (X, Xd):
            verdict = res.certificate.check(Z, y)
            assert verdict, verdict.reason


@pytest.mark.skipif(np.finfo(np.longdouble).eps > 1e-18, reason="needs extended precision")
@pytest.mark.parametrize("solver", ["dcd", "fista_svm", "fista"])
def test_the_bound_holds_for_the_exact_map_of_an_ill_conditioned_nystroem(solver):
    """Under a Nystroem map with |K_CC^{-1/2}| ~ 1e5 the rows' rounding moves the
    projected gradient by ~1e-10 / mu. The referee's bound on ||r - r*|| (its eps_v plus
    its rounding term) holds for the exact map of the run's centres and normalization,
    evaluated in extended precision (found by review: the SVM referee took the rows as
    exact, its bound 3e-12 where the exact map's projected gradient gave 2.6e-10)."""
    LD = np.longdouble
    res = mk.solve(ILL.X, ILL.Y, solver=solver, kernel="nystroem", max_iter=200_000,
                   stop=("certified_points", {"fraction": 0.9}), C=1.0,
                   kernel_params={"n_components": 7, "random_state": 196,
                                  "base_params": {"gamma": ILL.GAMMA}})
    c = res.certificate
    assert c is not None and c.kind == "certified_points"
    km = c.kernel
    assert np.abs(km.normalization_).max() > 1e4
    v = c.check(ILL.X, ILL.Y)
    assert v.ok, v.reason
    K = ILL.rbf_ld(ILL.X, km.components_, ILL.GAMMA)
    Phi = K @ np.asarray(km.normalization_).astype(LD)
    r, mu = c.r.astype(LD), LD(c.mu)
    ypm = np.where(ILL.Y == res.classes_[1], 1, -1).astype(LD)
    Z = (Phi - c.means.astype(LD)) * c.inv_std.astype(LD)
    t = np.sum(ypm * r) if c.formulation == "hsvm" else LD(c.t_bar)
    G = ypm * (Z @ (Z.T @ (ypm * r)) + t) + mu * r - 1
    box = LD(c.gamma)
    p = np.where(r <= 0, np.minimum(G, 0), np.where(r >= box, np.maximum(G, 0), G))
    exact = float(np.sqrt(np.sum(p * p)) / mu)
    assert exact > 10 * v.value  # the map's rounding dominates the computed gradient
    assert exact <= v.value + v.rounding


def test_no_claim_on_a_nystroem_map_over_an_approximation():
    """A Nystroem map whose base kernel is itself an approximation has no bound on its
    rows: its SVM certificate is rejected, saying so."""
    X, y = make_problem(n=60, d=3)
    base = mk.get_plugin("kernel", "rff")(gamma=0.1, n_components=20, random_state=1)
    nys = mk.get_plugin("kernel", "nystroem")(base=base, n_components=10, random_state=0)
    res = mk.solve(X, y, solver="dcd", kernel=nys, max_iter=50)
    assert res.certificate is None or not res.certificate.verify(X, y)
    assert res.status != "certified"


def test_a_claim_refuted_by_the_referees_rounding_is_offered_again_with_that_slack():
    """After a refutation whose rounding term is new, the state offers its claim again at
    the next iterate, keeping only the points that clear the bound by twice that term;
    a refutation within the slack waits for the bound to halve."""
    from types import SimpleNamespace

    from marginkit.certificates import Verdict
    from marginkit.solvers.svm._base import _ClaimOffers
    from marginkit.solvers.svm._certificate import run_certificate

    plain = _ClaimOffers()  # a state whose certificates do not keep to the slack
    plain.error_bound = 1e-3
    plain.refuted("certified", Verdict(False, "certified_points", rounding=2e-6, reason="x"))
    assert plain.claim_slack == 0.0 and plain._offer_below == 5e-4
    state = _ClaimOffers()
    state.slack_masks = True
    state.error_bound = 1e-3
    state.refuted("certified", Verdict(False, "certified_points", rounding=2e-6, reason="x"))
    assert state.claim_slack == 4e-6 and state._offer_below == 1e-3
    state.error_bound = 9e-4
    state.refuted("certified", Verdict(False, "certified_points", rounding=3e-6, reason="x"))
    assert state.claim_slack == 4e-6 and state._offer_below == 4.5e-4
    # the certificate keeps the points with level - r_i > error bound + slack
    r = np.array([0.0, 0.5, 1.0 - 9e-4 - 1e-6, 1.0 - 9e-4 - 1e-5])
    state.level, state.r = np.ones(4), r
    state.gamma, state.mu, state.weighted = 1.0, 1.0, False
    data = SimpleNamespace(scale="none", m=np.zeros(1), s=np.ones(1))
    problem = SimpleNamespace(classes_=np.array([-1, 1]), kernel=None, config=None)
    cert = run_certificate(problem, state, "certified", data, np.ones(4, dtype=bool), r,
                           "hsvm", 0.0, {"coef_": np.zeros(1), "intercept_": 0.0})
    assert cert.mask.tolist() == [True, True, False, True]


def test_a_linear_run_on_wide_csr_rows_is_read_in_blocks_of_its_entries(monkeypatch):
    """Found by review: the referee cut every X into blocks as if it were a map's rows of
    X's width, so a linear run on CSR rows of 600,000 columns was read in 750 blocks (each
    touching every column: 6 s instead of 0.2 s). Only a map's rows count their width."""
    import marginkit._referee as R

    rng = np.random.default_rng(0)
    n, d = 2000, 600_000
    idx = np.sort(rng.integers(0, d, size=(n, 10)), axis=1)
    X = sp.csr_matrix((np.ones(n * 10), idx.ravel(), np.arange(0, n * 10 + 1, 10)),
                      shape=(n, d))
    X.sum_duplicates()
    y = np.where(X @ rng.standard_normal(d) > 0, 1, -1)
    res = mk.solve(X, y, solver="dcd", max_iter=30, C=1.0)
    made = []
    init = R.RowBlocks.__init__

    def spy(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self.n_blocks)

    monkeypatch.setattr(R.RowBlocks, "__init__", spy)
    assert res.certificate.check(X, y)
    assert made == [1]


def test_a_maps_rows_from_csr_x_are_read_in_blocks_of_the_maps_width(monkeypatch):
    """Found by review: CSR X of more than BLOCK_ENTRIES stored entries was cut by its
    entries only, so a map's rows of 400 features came in one block of 262,154 rows
    (peak memory doubled, and growing with the number of components)."""
    import marginkit._referee as R

    X = sp.random(5000, 30, density=0.5, random_state=0, format="csr")
    monkeypatch.setattr(R, "MAP_BLOCK_ENTRIES", 40_000)
    blocks = R.RowBlocks(X, max_entries=10_000, row_width=400)  # 100 map rows a block
    sizes = np.diff(blocks._bounds)
    assert sizes.sum() == 5000 and sizes.max() <= 100
    assert R.RowBlocks(X, max_entries=10_000)._bounds.size < blocks._bounds.size


def test_a_maps_certificate_verifies_whatever_the_blocks(monkeypatch):
    """Found by review: an ill-conditioned Nystroem certificate verified in one block and
    was refused ("the stored coefficients are not s * w_bar(r)") when the map's rows were
    read two at a time: K P of a small block rounds otherwise than the run's blocks, and
    the coefficients' check did not allow for the rows' own error."""
    import marginkit._referee as R

    rng = np.random.default_rng(8)
    n, d = int(rng.integers(8, 40)), int(rng.integers(1, 3))
    X = rng.normal(size=(n, d)) * rng.choice([0.3, 1, 3])
    y = rng.integers(0, 2, size=n)
    y[0], y[1] = 0, 1
    g, m = float(rng.uniform(0.3, 3)), int(rng.integers(4, min(n, 12)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = mk.solve(X, y, solver="dcd", kernel="nystroem", max_iter=100000, C=1.0,
                       scale="std", stop=("certified_points", {"fraction": 0.5}),
                       kernel_params={"n_components": m, "random_state": 8,
                                      "base_params": {"gamma": g}})
    cert = res.certificate
    assert cert.check(X, y)
    monkeypatch.setattr(R, "MAP_BLOCK_ENTRIES", 2 * m)  # two rows of the map a block
    verdict = cert.check(X, y)
    assert verdict, verdict.reason
