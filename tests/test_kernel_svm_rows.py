"""DCD's Gram rows stored in float32: the same status and verified certificates as
float64 rows, dense and CSR input agree, ``matvec`` computes float64 kernel blocks, and
the fresh bound's product from the stored rows (``stored_product``) counts their
rounding, falling back to float64 rows when that rounding costs the claim."""
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics.pairwise import pairwise_kernels

import marginkit as mk
from marginkit.kernels.builtin import RBFKernel
from marginkit.solvers.svm import _kernel

C, MU, G = 1.0, 0.05, 0.5


def _data(n=120, d=6, seed=0, density=None):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    if density is not None:
        X = X * (rng.random((n, d)) < density)
    y = np.where(X[:, 0] ** 2 + X[:, 1] ** 2 + 0.3 * rng.standard_normal(n) > 1.0, 1, -1)
    return X, y


def _solve(X, y, rows, monkeypatch, **kw):
    monkeypatch.setattr(_kernel, "DCD_ROWS", rows)
    return mk.solve(X, y, solver="dcd", kernel="rbf", kernel_params={"gamma": G}, C=C,
                    mu=MU, **kw)


@pytest.mark.parametrize("budget", [None, 400_000])  # held; an LRU cache of rows
def test_float32_rows_certify_as_float64_rows(budget, monkeypatch):
    X, y = _data(n=300)
    kw = {} if budget is None else {"memory_budget": budget}
    r64 = _solve(X, y, np.float64, monkeypatch, **kw)
    r32 = _solve(X, y, np.float32, monkeypatch, **kw)
    assert r64.extra["gram_rows"] == "float64" and r32.extra["gram_rows"] == "float32"
    assert r64.extra["gram"] == r32.extra["gram"] == ("held" if budget is None
                                                      else "blocked")
    assert r32.status == r64.status == "certified"
    assert r32.certificate.verify(X, y) and r64.certificate.verify(X, y)
    # both bounds hold for the same r*: the duals are within the sum of the bounds
    gap = np.linalg.norm(r32.dual_coef_ - r64.dual_coef_)
    assert gap <= r32.certificate.value + r64.certificate.value
    assert np.mean(np.sign(r32.decision_function(X)) == np.sign(r64.decision_function(X))) \
        >= 0.99


def test_float32_rows_dense_and_csr_agree(monkeypatch):
    X, y = _data(density=0.6, seed=3)
    dense = _solve(X, y, np.float32, monkeypatch)
    csr = _solve(sp.csr_matrix(X), y, np.float32, monkeypatch)
    assert dense.status == csr.status == "certified"
    assert dense.n_iter == csr.n_iter
    np.testing.assert_allclose(csr.dual_coef_, dense.dual_coef_, rtol=0, atol=1e-6)
    assert dense.certificate.verify(X, y) and csr.certificate.verify(sp.csr_matrix(X), y)


def test_float32_rows_products_are_float64_kernel_blocks():
    n = 200
    X, y = _data(n=n)
    K = pairwise_kernels(X, metric="rbf", gamma=G)
    v = np.random.default_rng(1).standard_normal(n)
    v[::4] = 0.0
    for budget, held in ((1e9, True), (200_000, False)):
        gram = _kernel._Gram(X, RBFKernel(gamma=G), budget, "dcd", np.float32)
        assert gram.held == held
        yf = np.where(y > 0, 1.0, -1.0)
        gram.bring(0, np.arange(n, dtype=np.int64), yf, np.zeros(n), np.ones(n), -np.ones(n))
        rows, slot, _ = gram.store()
        assert rows.dtype == np.float32
        stored = rows[slot[0]]
        assert 0 < np.max(np.abs(stored - K[0])) <= 2.0 ** -24 * np.max(K[0])
        # the product is K v in float64 (its stored rows would be off by ~1e-8)
        np.testing.assert_allclose(gram.matvec(v), K @ v, rtol=0, atol=1e-13)


def test_float32_rows_keep_the_memory_budget(monkeypatch):
    X, y = _data(n=300)
    # 4 n^2 + a float64 block of 64 rows fits, 8 n^2 does not: float32 rows are held
    res = _solve(X, y, np.float32, monkeypatch, memory_budget=4 * 300 * 300 + 8 * 300 * 64)
    assert res.extra["gram"] == "held" and res.status == "certified"
    res = _solve(X, y, np.float64, monkeypatch, memory_budget=4 * 300 * 300 + 8 * 300 * 64)
    assert res.extra["gram"] == "blocked" and res.status == "certified"


@pytest.mark.parametrize("scale", [1e39, 1e-39])
def test_kernel_values_outside_float32_range_keep_float64_rows(scale):
    # |K_ij| <= max K_ii beyond float32's range: float32 rows would be inf (moves on
    # NaN: no claim in max_iter) or subnormal (entries of a few bits); they are float64
    X, y = _data(n=80, d=3)

    def kernel(A, B):
        return scale * pairwise_kernels(A, B, metric="rbf", gamma=3.0)

    def solve(k, c):
        return mk.solve(X, y, solver="dcd", kernel=k, C=c, max_iter=200)

    ref = solve(lambda A, B: pairwise_kernels(A, B, metric="rbf", gamma=3.0), 1.0)
    assert ref.extra["gram_rows"] == "float32" and ref.status == "certified"
    res = solve(kernel, 1.0 / scale)
    assert res.extra["gram_rows"] == "float64"
    if scale > 1.0:
        assert res.status == "certified" and res.certificate.verify(X, y)


def test_precomputed_gram_is_read_in_place_within_any_budget():
    # a dense precomputed Gram is the caller's n x n float64 matrix, read in place by
    # FISTA with no budget; dcd copies its rows into float32 within the budget, and
    # refused (ValueError) the budgets too small for the copy: it reads K in place then
    X, y = _data(n=300)
    K = pairwise_kernels(X, metric="rbf", gamma=G)
    for budget, rows in ((1e5, "float64"), (2e9, "float32")):
        res = mk.solve(K, y, solver="dcd", kernel="precomputed", C=C, mu=MU,
                       memory_budget=budget)
        assert res.extra["gram"] == "held" and res.extra["gram_rows"] == rows
        assert res.status == "certified" and res.certificate.verify(K, y)


def test_float64_rows_when_they_are_held_and_float32_rows_are_not():
    # n <= 64: float32 rows held need 4 n^2 + a float64 block of n rows (12 n^2 bytes),
    # float64 rows 8 n^2; between the two dcd was refused where FISTA holds the matrix
    n = 50
    X, y = _data(n=n)
    res = mk.solve(X, y, solver="dcd", kernel="rbf", kernel_params={"gamma": G}, C=C,
                   mu=MU, memory_budget=8 * n * n)
    assert res.extra["gram"] == "held" and res.extra["gram_rows"] == "float64"
    assert res.status == "certified" and res.certificate.verify(X, y)


def _gram_with_rows(X, budget, held_rows, dtype=np.float32, kernel=None):
    """A DCD ``_Gram`` whose store holds the rows ``held_rows`` (brought in blocks)."""
    gram = _kernel._Gram(X, kernel or RBFKernel(gamma=G), budget, "dcd", dtype)
    for lo in range(0, len(held_rows), 8):
        idx = np.asarray(held_rows[lo:lo + 8], dtype=np.int64)
        if gram.held:
            gram.ensure(idx)
        else:
            gram.cache.bring(idx)
    return gram


@pytest.mark.parametrize("budget", [1e9, 200_000])  # held; an LRU cache of rows
def test_stored_product_bound_holds_on_held_and_missing_rows(budget):
    """K v from the float32 rows where held (the others computed in float64): its error
    against the float64 kernel stays within ``rounding`` plus the stored rows' term, and
    that term is what float32 storage costs (neither 0 nor far above the actual error)."""
    n = 200
    X, y = _data(n=n, seed=5)
    K = pairwise_kernels(X, metric="rbf", gamma=G)
    rng = np.random.default_rng(2)
    v = rng.standard_normal(n)
    v[::3] = 0.0
    gram = _gram_with_rows(X, budget, np.arange(0, n, 2))   # half of v's rows held
    rows, slot, _ = gram.store()
    held = np.flatnonzero(v)[slot[np.flatnonzero(v)] >= 0]
    assert 0 < held.size < np.count_nonzero(v)
    out, extra, again = gram.stored_product(v)
    exact = np.array([np.sum(np.array([np.longdouble(K[i, j]) * np.longdouble(v[j])
                                       for j in range(n)])) for i in range(n)],
                     dtype=np.float64)
    err = np.linalg.norm(out - exact)
    a = float(gram.sd @ np.abs(v))
    assert 0.0 < err <= gram.rounding(a) + extra
    # the stored rows' rounding is the error's scale (1e-8 relative), not a loose bound
    assert extra <= 2.0 ** -24 * 1.01 * np.linalg.norm(np.abs(K[:, held]) @ np.abs(v[held])) \
        + 1e-300
    assert err > 0.01 * extra
    # again(): the held rows' part from float64 kernel rows, the rest reused
    np.testing.assert_allclose(again(), K @ v, rtol=0, atol=1e-12)
    # float64 rows (and v's rows all missing) add nothing to the rounding
    g64 = _gram_with_rows(X, 1e9, np.arange(n), dtype=np.float64)
    out64, extra64, _ = g64.stored_product(v)
    assert extra64 == 0.0
    np.testing.assert_allclose(out64, K @ v, rtol=0, atol=1e-12)
    g_none = _gram_with_rows(X, 1e9, [])
    out_none, extra_none, _ = g_none.stored_product(v)
    assert extra_none == 0.0
    np.testing.assert_allclose(out_none, K @ v, rtol=0, atol=1e-12)


def test_stored_product_refuses_rows_that_are_not_held():
    """The compiled loop reads only rows the caller says are held: a slot out of the
    store, or an index out of range, is a ValueError, not a read out of bounds."""
    from marginkit.solvers.svm import _kernel_fast as kf
    rows = np.ones((2, 5), dtype=np.float32)
    v = np.ones(5)
    out, mag = np.zeros(5), np.zeros(5)
    slot = np.array([0, 1, -1, 7, 1], dtype=np.int64)
    for bad in ([2], [3], [5], [-1]):
        with pytest.raises(ValueError):
            kf.stored_product(np.array(bad, dtype=np.int64), rows, slot, v, out, mag)
    with pytest.raises(ValueError):
        kf.stored_product(np.array([0], dtype=np.int64), rows, slot, v, out, mag[:4])
    kf.stored_product(np.array([0, 4], dtype=np.int64), rows, slot, v, out, mag)
    np.testing.assert_array_equal(out, 2.0)


def test_fresh_bound_reads_the_stored_rows_and_recomputes_when_they_block_the_claim(
        monkeypatch):
    """The fresh bound behind a claim comes from the stored float32 rows (no float64
    kernel product) when it certifies with their rounding counted; with a mu so small
    that the rounding term costs most of the certified points, the product is recomputed
    from float64 kernel rows. Every claim verifies."""
    X, y = _data(n=300, seed=1)
    calls = []
    real = _kernel._Gram._blocks_product

    def counted(self, v, S, deadline=None):
        if S.size:
            calls.append(S.size)
        return real(self, v, S, deadline)

    monkeypatch.setattr(_kernel._Gram, "_blocks_product", counted)
    res = _solve(X, y, np.float32, monkeypatch)
    assert res.status == "certified" and res.certificate.verify(X, y)
    assert calls == []  # every row of the support is held: no kernel row computed for it
    small = mk.solve(X, y, solver="dcd", kernel="rbf", kernel_params={"gamma": G}, C=C,
                     mu=1e-5)
    assert small.status == "certified" and small.certificate.verify(X, y)
    assert calls, "the float32 rows' rounding cost most certified points; float64 expected"
    # the float64 product certifies the points the stored rows' rounding would have lost
    # (about half of them at this mu)
    calls.clear()
    monkeypatch.setattr(_kernel, "_STORED_SHARE", 0.0)
    cheap = mk.solve(X, y, solver="dcd", kernel="rbf", kernel_params={"gamma": G}, C=C,
                     mu=1e-5)
    assert cheap.status == "certified" and cheap.certificate.verify(X, y)
    assert np.count_nonzero(small.certified_mask) > 1.5 * np.count_nonzero(cheap.certified_mask)


def test_fresh_bounds_that_make_no_claim_keep_the_float64_path(monkeypatch):
    """The stored rows' bound serves claims only: with a check every pass
    (bound_check="always") the passes before the claim continue from the float64 G, so
    the run makes the moves it made when every fresh bound was float64 (a G from the
    float32 rows at mu = 1e-5 certified 1,714 points where float64 gave 1,924, found by
    review), and the claim's points are within the rounding term's share of them."""
    X, y = _data(n=400, seed=2)
    kw = dict(solver="dcd", kernel="rbf", kernel_params={"gamma": G}, C=C, mu=1e-4,
              bound_check="always")
    res = mk.solve(X, y, **kw)
    # every fresh bound from float64 kernel rows: the path before the stored rows' bound
    real = _kernel._Gram.stored_product

    def float64_only(self, v):
        out, extra, again = real(self, v)
        return again(), 0.0, again

    monkeypatch.setattr(_kernel._Gram, "stored_product", float64_only)
    ref = mk.solve(X, y, **kw)
    assert res.status == ref.status == "certified" and res.n_iter == ref.n_iter
    assert res.extra["moves"] == ref.extra["moves"]
    np.testing.assert_array_equal(res.dual_coef_, ref.dual_coef_)
    n_res, n_ref = np.count_nonzero(res.certified_mask), np.count_nonzero(ref.certified_mask)
    assert _kernel._STORED_SHARE * n_ref <= n_res <= n_ref
    assert res.certificate.verify(X, y)


def test_entries_beyond_the_diagonal_are_refused_not_stored_as_inf():
    """A plug-in whose diag() says 1 while its blocks are 1e39: float32 rows would hold
    inf and the moves NaN (the run ended max_iter with NaN in dual_coef_, found by
    review). |K_ij| <= sqrt(K_ii K_jj) for a PSD kernel, so the block is refused."""
    from marginkit.plugins import Kernel

    class Big(Kernel):
        name = "test_big_entries"

        def __call__(self, A, B=None):
            return pairwise_kernels(A, A if B is None else B, metric="rbf", gamma=G) * 1e39

        def diag(self, A):
            return np.ones(A.shape[0])

    X, y = _data(n=200)
    with pytest.raises(ValueError, match=r"not positive semi-definite on X, or its diag\(\) "
                                         r"disagrees with its Gram blocks: \|K\[0, 0\]\| = 1e\+39"):
        mk.solve(X, y, solver="dcd", kernel=Big(), C=1.0, mu=0.05, max_iter=50)
    # entries within the diagonal's bound are stored as before
    res = mk.solve(X, y, solver="dcd", kernel="rbf", kernel_params={"gamma": G}, C=1.0,
                   mu=0.05)
    assert res.status == "certified" and np.all(np.isfinite(res.dual_coef_))
