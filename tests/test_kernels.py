"""Kernel plug-ins: Gram blocks against scikit-learn, dense/CSR x float32/float64, symmetry
and PSD, diag, callable-kernel errors, the periodic spline (paper 002) against its Fourier
series, kernel approximations, pickling."""
import os
import pickle
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal

import marginkit as mk
from marginkit.kernels._periodic import periodic_cosine_series
from marginkit.kernels.approximation import NystroemMap, nystroem_projection

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _ill_nystroem as ILL  # noqa: E402

pairwise = pytest.importorskip("sklearn.metrics.pairwise")

SKLEARN = {
    "linear": (lambda A, B, **kw: pairwise.linear_kernel(A, B), [{}]),
    "rbf": (pairwise.rbf_kernel, [{"gamma": None}, {"gamma": 0.37}]),
    "poly": (pairwise.polynomial_kernel, [{"degree": 3, "gamma": None, "coef0": 1.0},
                                          {"degree": 2, "gamma": 0.5, "coef0": 0.0}]),
    "laplacian": (pairwise.laplacian_kernel, [{"gamma": None}, {"gamma": 0.2}]),
}
CASES = [(name, kw) for name, (_, kws) in SKLEARN.items() for kw in kws]


def _data(rng, n, d, density=0.4):
    X = rng.standard_normal((n, d))
    X[rng.random((n, d)) > density] = 0.0  # genuinely sparse rows, some all-zero
    X[0] = 0.0
    return X


def _fmt(X, fmt, dtype):
    X = X.astype(dtype)
    if fmt == "csr":
        return sp.csr_matrix(X)
    if fmt == "csr64":
        c = sp.csr_matrix(X)
        return sp.csr_matrix((c.data, c.indices.astype(np.int64), c.indptr.astype(np.int64)),
                             shape=c.shape)
    if fmt == "fortran":
        return np.asfortranarray(X)
    return X


def _tol(dtype):
    return {"rtol": 2e-4, "atol": 2e-5} if dtype == np.float32 else {"rtol": 1e-10, "atol": 1e-12}


@pytest.mark.parametrize("name,kw", CASES)
@pytest.mark.parametrize("fmt_a", ["dense", "csr", "csr64", "fortran"])
@pytest.mark.parametrize("fmt_b", ["dense", "csr"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gram_matches_sklearn(name, kw, fmt_a, fmt_b, dtype, rng):
    A = _data(rng, 37, 11)
    B = _data(rng, 23, 11)
    ref_fn = SKLEARN[name][0]
    params = {k: v for k, v in kw.items()}
    kernel = mk.get_plugin("kernel", name)(**params)
    K = kernel(_fmt(A, fmt_a, dtype), _fmt(B, fmt_b, dtype))
    assert K.dtype == dtype and K.shape == (37, 23)
    assert K.flags.c_contiguous
    ref = ref_fn(A, B, **params)
    scale = max(1.0, np.abs(ref).max()) if name in ("linear", "poly") else 1.0
    tol = _tol(dtype)
    assert_allclose(K, ref, rtol=tol["rtol"], atol=tol["atol"] * scale)


@pytest.mark.parametrize("name,kw", CASES)
@pytest.mark.parametrize("fmt", ["dense", "csr"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gram_symmetric_psd_and_diag(name, kw, fmt, dtype, rng):
    X = _data(rng, 40, 6)
    kernel = mk.get_plugin("kernel", name)(**kw)
    Xf = _fmt(X, fmt, dtype)
    K = kernel(Xf)
    assert_allclose(K, K.T, rtol=0, atol=0)  # B = A is computed symmetric exactly
    ref = SKLEARN[name][0](X, X, **kw)
    tol = _tol(dtype)
    assert_allclose(K, ref, rtol=tol["rtol"], atol=tol["atol"] * max(1.0, np.abs(ref).max()))
    K64 = K.astype(np.float64)
    lam_min = np.linalg.eigvalsh(K64).min()
    assert lam_min >= -1e-6 * max(1.0, np.abs(K64).max()) * (1e3 if dtype == np.float32 else 1)
    d = kernel.diag(Xf)
    assert d.dtype == dtype and d.shape == (40,)
    assert_allclose(d, np.diag(K), **_tol(dtype))
    if name in ("rbf", "laplacian"):
        assert np.all(np.diag(K) == 1.0)


def test_mixed_dtypes_promote_to_float64(rng):
    A = rng.standard_normal((5, 3)).astype(np.float32)
    B = rng.standard_normal((4, 3))
    K = mk.get_plugin("kernel", "rbf")(gamma=0.5)(A, B)
    assert K.dtype == np.float64
    assert_allclose(K, pairwise.rbf_kernel(A.astype(np.float64), B, gamma=0.5), rtol=1e-12)


def test_inputs_are_not_modified(rng):
    A = _data(rng, 20, 5)
    Acsr = sp.csr_matrix(A)
    before = (A.copy(), Acsr.data.copy(), Acsr.indices.copy())
    for name, kw in CASES:
        kernel = mk.get_plugin("kernel", name)(**kw)
        kernel(A, Acsr)
        kernel(Acsr)
        kernel.diag(Acsr)
    assert_allclose(A, before[0], rtol=0, atol=0)
    assert np.array_equal(Acsr.data, before[1]) and np.array_equal(Acsr.indices, before[2])


def test_feature_count_mismatch_is_an_error(rng):
    with pytest.raises(ValueError, match="same number of columns"):
        mk.get_plugin("kernel", "rbf")()(np.ones((3, 2)), np.ones((3, 4)))


def test_gram_block_kernels_check_their_operands():
    """The compiled CSR block kernels fill only an out of the block's shape, from operands
    with the same number of features (checked before any entry is read)."""
    from marginkit.kernels import _gram
    from marginkit.utils._rows import row_block

    A = sp.random(6, 4, density=0.5, format="csr", random_state=0)
    B = np.ones((3, 4))
    with pytest.raises(ValueError, match="out is 6 x 2 for 6 x 3"):
        _gram.dot_csr_dense(row_block(A), B, np.empty((6, 2)))
    with pytest.raises(ValueError, match="the operands have 5 and 4 features"):
        _gram.dist_dense_csr(np.ones((3, 5)), row_block(A), np.empty((3, 6)), 1)
    with pytest.raises(ValueError, match="out is 6 x 5 for 6 x 6"):
        _gram.dist_csr_csr(row_block(A), row_block(A), np.empty((6, 5)), 2)
    Bt = sp.csr_matrix(B).T.tocsr()  # the row block of B.T
    with pytest.raises(ValueError, match="work has 2 columns for 3 rows of B"):
        _gram.dot_csr_csc(row_block(A), row_block(Bt), np.empty((6, 3)), np.empty((1, 2)))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_dense_rows_product_gives_the_entries_of_the_column_walk(dtype, index):
    """CSR x CSR blocks whose rows share many features go through B's rows against dense
    copies of chunks of A's rows (``_dot_dense_rows``): the same entries, bit for bit, as
    the walk over B's columns (``dot_csr_csc``), whatever the chunking and the threads;
    rows that share few features keep the column walk."""
    from threadpoolctl import threadpool_limits

    from marginkit.kernels import _gram
    from marginkit.kernels import builtin as b
    from marginkit.utils._rows import row_block

    def csr(M):
        M = sp.csr_matrix(M, dtype=dtype)
        M.indices, M.indptr = M.indices.astype(index), M.indptr.astype(index)
        return M

    rng = np.random.default_rng(7)
    for n, d, density, m in [(300, 40, 0.5, 70), (200, 500, 0.002, 140)]:
        B = sp.random(n, d, density=density, format="csr", random_state=rng,
                      data_rvs=lambda k: rng.standard_normal(k) * 10.0 ** rng.integers(-3, 4, k))
        if d == 500:  # 8 features every row shares
            B = sp.hstack([rng.standard_normal((n, 8)), B[:, 8:]])
        B = csr(B)
        A = csr(B[rng.choice(n, m, replace=False)])
        Bt = b._csc_sorted(B)
        assert b._dense_rows_pay(A, Bt, B.nnz)
        walk = np.empty((m, n), dtype=dtype)
        _gram.dot_csr_csc(row_block(A), b._transpose_block(Bt), walk,
                          np.empty((max(1, _gram.max_threads()), n)), False, True)
        # d = 500: three chunks of 65 rows (256 KiB of float64 each)
        assert b._dense_rows_step(d) < m or d == 40
        for threads in (1, 2):
            with threadpool_limits(threads):
                np.testing.assert_array_equal(b._dot_block(A, B, Bt=Bt), walk)
        exact = (A.astype(np.float64) @ B.astype(np.float64).T).toarray()
        np.testing.assert_allclose(walk, exact, rtol=1e-5 if dtype == np.float32 else 1e-12,
                                   atol=1e-6 * np.abs(exact).max())
    # few shared features (a sparse text-like block), or so many features that a chunk
    # would hold too few rows: the column walk
    B = csr(sp.random(400, 3000, density=0.003, format="csr", random_state=rng))
    assert not b._dense_rows_pay(B[:50], b._csc_sorted(B), B.nnz)
    B = csr(sp.hstack([np.ones((400, 8)), sp.random(400, 10_000, density=0.001,
                                                        random_state=rng)]))
    assert not b._dense_rows_pay(B[:50], b._csc_sorted(B), B.nnz)
    # the compiled kernel checks its operands
    At = np.zeros((40, 5))
    with pytest.raises(ValueError, match="the operands have 40 and 10 features"):
        _gram.dot_dense_t_csr(At, row_block(csr(np.ones((3, 10)))), np.empty((5, 3)),
                              np.empty((1, _gram.TILE_ROWS * 5)))
    with pytest.raises(ValueError, match="out is 5 x 2 for 5 x 3"):
        _gram.dot_dense_t_csr(At, row_block(csr(np.ones((3, 40)))), np.empty((5, 2)),
                              np.empty((1, _gram.TILE_ROWS * 5)))
    with pytest.raises(ValueError, match="tiles has shape"):
        _gram.dot_dense_t_csr(At, row_block(csr(np.ones((3, 40)))), np.empty((5, 3)),
                              np.empty((1, 5)))


@pytest.mark.parametrize("bad,exc,match", [
    ({"gamma": -1.0}, ValueError, "gamma"),
    ({"gamma": 0.0}, ValueError, "gamma"),
    ({"gamma": "scale"}, TypeError, "gamma"),
    ({"width": 1.0}, TypeError, "unknown parameter"),
])
def test_rbf_params_validated(bad, exc, match):
    with pytest.raises(exc, match=match):
        mk.get_plugin("kernel", "rbf")(**bad)


def test_poly_params_validated():
    with pytest.raises(ValueError, match="degree"):
        mk.get_plugin("kernel", "poly")(degree=0)
    with pytest.raises(TypeError, match="degree"):
        mk.get_plugin("kernel", "poly")(degree=2.5)


def test_linear_feature_map_is_x_itself(rng):
    X = rng.standard_normal((10, 4))
    k = mk.get_plugin("kernel", "linear")()
    assert k.feature_map(X) is X
    Xs = sp.csr_matrix(X)
    assert k.feature_map(Xs) is Xs
    assert_allclose(k(X), X @ X.T, rtol=1e-12)


def test_only_feature_map_kernels_advertise_it():
    for name in ("rbf", "poly", "laplacian", "spline", "precomputed"):
        assert getattr(mk.get_plugin("kernel", name)(), "feature_map", None) is None


def test_precomputed_returns_the_gram(rng):
    X = rng.standard_normal((8, 3))
    G = X @ X.T
    k = mk.get_plugin("kernel", "precomputed")()
    assert k.precomputed
    assert_allclose(k(G), G)
    assert_allclose(k(G[:3], G), G[:3])
    assert_allclose(k.diag(G), np.diag(G))
    with pytest.raises(ValueError, match="square Gram"):
        k.diag(G[:3])
    with pytest.raises(ValueError, match="columns"):
        k(G[:, :5], G)


# ------------------------------------------------------------------------- callable kernel
def _rbf_fn(A, B):
    return pairwise.rbf_kernel(A, B, gamma=0.3)


def _wrong_shape(A, B):
    return np.ones((A.shape[0], B.shape[0] + 1))


def _with_nan(A, B):
    K = np.ones((A.shape[0], B.shape[0]))
    K[0, 0] = np.nan
    return K


def test_callable_kernel_wraps_function(rng):
    A, B = rng.standard_normal((9, 3)), rng.standard_normal((4, 3))
    k = mk.get_plugin("kernel", "callable")(function=_rbf_fn)
    assert_allclose(k(A, B), _rbf_fn(A, B))
    assert_allclose(k.diag(A), np.ones(9))
    k2 = pickle.loads(pickle.dumps(k))
    assert_allclose(k2(A, B), _rbf_fn(A, B))
    # solve() turns a plain function into this plug-in
    from marginkit._api import resolve_kernel

    assert isinstance(resolve_kernel(_rbf_fn), type(k))


def test_callable_kernel_errors(rng):
    A = rng.standard_normal((5, 2))
    Kc = mk.get_plugin("kernel", "callable")
    with pytest.raises(ValueError, match=r"shape \(5, 4\).*must return K\(A, B\) of shape \(5, 3\)"):
        Kc(function=_wrong_shape)(A, A[:3])
    with pytest.raises(ValueError, match="NaN or infinity"):
        Kc(function=_with_nan)(A)
    with pytest.raises(TypeError, match="callable"):
        Kc(function=3)
    with pytest.raises(TypeError, match="missing required parameter 'function'"):
        Kc()


# ------------------------------------------------------------------------- periodic spline
def _fourier_cos_sum(t, q, n_terms=400_000):
    """sum_{k=1}^{N} cos(2 pi k t) / k^q plus the Euler-Maclaurin tail at t = 0 mod 1."""
    t = np.asarray(t, dtype=np.float64).ravel()
    k = np.arange(1, n_terms + 1, dtype=np.float64)
    out = np.empty_like(t)
    for i, ti in enumerate(t):
        out[i] = np.sum(np.cos(2 * np.pi * k * ti) / k ** q)
    return out


@pytest.mark.parametrize("q", [2, 4, 6, 22, 2.5, 3, 3.0004, 5.5, 7.25])
def test_periodic_series_matches_truncated_fourier(q):
    # generic points away from t = 0 mod 1, where a long truncation is accurate to 1e-12
    t = np.array([0.013, 0.1, 0.25, 0.37, 0.5, 0.61, 0.9, -0.3, 1.7])
    ref = _fourier_cos_sum(t, q)
    assert_allclose(periodic_cosine_series(t, q), ref, rtol=0, atol=1e-10)


@pytest.mark.parametrize("q", [1.5, 2, 3, 3.5, 4, 5.000001, 8, 41.5])
def test_periodic_series_at_zero_is_zeta(q):
    from scipy.special import zeta

    assert_allclose(periodic_cosine_series(np.array([0.0, 1.0, -2.0]), q), zeta(q),
                    rtol=1e-13)


def test_periodic_series_even_closed_form():
    # q = 2: sum cos(2 pi k t)/k^2 = pi^2 (t^2 - t + 1/6), t in [0, 1]
    t = np.linspace(0, 1, 17)
    assert_allclose(periodic_cosine_series(t, 2), np.pi ** 2 * (t * t - t + 1 / 6),
                    rtol=0, atol=1e-14)
    # q = 4: -pi^4/3 B_4(t), B_4 = t^4 - 2 t^3 + t^2 - 1/30
    assert_allclose(periodic_cosine_series(t, 4),
                    -np.pi ** 4 / 3 * (t ** 4 - 2 * t ** 3 + t ** 2 - 1 / 30), rtol=0, atol=1e-13)


def test_periodic_series_continuous_in_q():
    # the routes (closed form, expansion, near-odd expansion, plain series) agree at the seams
    t = np.array([0.0, 0.07, 0.31, 0.5])
    for q0 in (2.0, 3.0, 4.0, 5.0):
        for dq in (1e-11, 1e-7, 1e-3, 9.99e-3, 1.001e-2):
            lo, hi = periodic_cosine_series(t, q0 - dq), periodic_cosine_series(t, q0 + dq)
            mid = periodic_cosine_series(t, q0)
            assert_allclose(mid, (lo + hi) / 2, atol=max(1e-11, 10 * dq * dq), rtol=0)
    assert_allclose(periodic_cosine_series(t, 40.0 - 1e-9), periodic_cosine_series(t, 40.0),
                    atol=1e-12)


def _spline_ref(A, B, q, weight=2.0):
    K = np.ones((A.shape[0], B.shape[0]))
    for j in range(A.shape[1]):
        T = A[:, j][:, None] - B[:, j][None, :]
        K *= 1 + weight * _fourier_cos_sum(T, q, n_terms=100_000).reshape(T.shape)
    return K


@pytest.mark.parametrize("q", [2, 4, 2.5, 3])
@pytest.mark.parametrize("d", [1, 2])
def test_spline_kernel_matches_fourier_series(q, d, rng):
    A, B = rng.random((6, d)), rng.random((5, d))
    k = mk.get_plugin("kernel", "spline")(order=q)
    K = k(A, B)
    tol = 1e-10 if q >= 2.5 else 1e-8  # truncation error of the reference ~ 1/(k^(q-1))
    assert_allclose(K, _spline_ref(A, B, q), rtol=0, atol=tol * 4 ** d)


@pytest.mark.parametrize("q", [2, 4, 8])
def test_spline_bernoulli_normalization_is_papers_closed_form(q, rng):
    # paper 002, app. E.1: Lambda_q(x, z) = 1 + (-1)^(q/2 - 1) B_q(|x - z|) / q!
    from math import factorial

    from scipy.special import comb

    from marginkit.kernels._periodic import bernoulli_numbers

    x, z = rng.random(7), rng.random(7)
    t = np.abs(x - z)
    Bn = bernoulli_numbers(q)
    Bq = sum(comb(q, k, exact=True) * float(Bn[k]) * t ** (q - k) for k in range(q + 1))
    ref = 1 + (-1) ** (q // 2 - 1) * Bq / factorial(q)
    k = mk.get_plugin("kernel", "spline")(order=q, normalization="bernoulli")
    assert_allclose(np.diag(k(x[:, None], z[:, None])), ref, rtol=0, atol=1e-13)


@pytest.mark.parametrize("fmt", ["dense", "csr"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_spline_symmetric_psd_diag(fmt, dtype, rng):
    X = rng.random((60, 2))
    X[rng.random((60, 2)) < 0.3] = 0.0
    k = mk.get_plugin("kernel", "spline")(order=3.5)
    K = k(_fmt(X, fmt, dtype))
    assert K.dtype == dtype
    assert_allclose(K, K.T, rtol=0, atol=0)
    assert np.linalg.eigvalsh(K.astype(np.float64)).min() > -1e-5
    assert_allclose(k.diag(_fmt(X, fmt, dtype)), np.diag(K), rtol=1e-6)
    assert_allclose(K, k(X), rtol=0, atol=1e-5 if dtype == np.float32 else 1e-14)


def test_spline_is_periodic(rng):
    A, B = rng.random((4, 2)), rng.random((3, 2))
    k = mk.get_plugin("kernel", "spline")(order=2)
    assert_allclose(k(A + 1.0, B - 2.0), k(A, B), atol=1e-12)


def test_spline_params_validated():
    with pytest.raises(ValueError, match="order"):
        mk.get_plugin("kernel", "spline")(order=1.0)
    with pytest.raises(ValueError, match="normalization"):
        mk.get_plugin("kernel", "spline")(normalization="fourier")


def _spline_exact(A, B, q, weight, mp):
    """K(A, B) of the spline kernel at 30 digits (``mpmath.clcos``: sum cos(k x) / k^q)."""
    w = mp.mpf(weight)
    return np.array([[float(mp.fprod(
        1 + w * mp.clcos(q, 2 * mp.pi * (mp.mpf(float(a)) - mp.mpf(float(b))))
        for a, b in zip(ra, rb))) for rb in B] for ra in A])


def _spline_near_zero_rows(k, q, mp):
    """Coordinates t where the series factor 1 + w C_q(t) is within about 1e-12 of 0
    (it changes sign between t = 0 and t = 1/2), or None when it does not."""
    w = mp.mpf(k._weight())

    def f(t):
        return 1 + w * mp.clcos(q, 2 * mp.pi * t)
    if f(mp.mpf(0.5)) > 0:
        return None
    root = float(mp.findroot(f, (mp.mpf(0), mp.mpf(0.5)), solver="bisect"))
    return root + np.array([-2e-12, 0.0, 3e-12])


@pytest.mark.parametrize("normalization", ["series", "bernoulli"])
@pytest.mark.parametrize("q", [2.0, 3.0, 10.0, 45.0] + [
    # the polylog route: mpmath's reference takes seconds a case
    pytest.param(q, marks=pytest.mark.slow) for q in (1.001, 1.05, 1.5, 4.5)])
def test_spline_careful_block_bounds_its_true_error(q, normalization, rng):
    """Every entry of SplineKernel.careful_block is within its bound of the kernel computed
    at 30 digits, at random points and where the series normalization's factor changes
    sign (there a relative bound cannot hold: see the next test)."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 30
    k = mk.get_plugin("kernel", "spline")(order=q, normalization=normalization)
    A, B = rng.random((6, 3)), rng.random((5, 3))
    near = _spline_near_zero_rows(k, q, mp)
    if near is not None:
        A = np.vstack([A, np.column_stack([near, rng.random((3, 2))])])
        B[0, 0] = 0.0
    K, E = k.careful_block(A, B)
    assert_array_equal(K, k(A, B))
    err = np.abs(K - _spline_exact(A, B, q, k._weight(), mp))
    assert np.all(err <= E), (err / E).max()
    assert np.all(E <= 1e-9 * (1 + k._weight() * float(mp.zeta(q))) ** 3)  # not vacuous


@pytest.mark.parametrize("q", [3.0101, 3.01, 2.98, 5.01, 5.011, 7.02, 1.0101])
def test_spline_careful_bound_covers_the_cancellation_near_odd_orders(q):
    """Found by review: near an odd order, outside the window of the analytic pair
    (|q - n| < 0.01), the expansion's terms A x^(q-1) and zeta(q - 2 j0) x^(2 j0) / (2 j0)!
    are each about 1 / |q - n| and cancel; the error at t = 1/2 was 16 times a bound
    scaled by zeta(q) (q = 3.0101), and a forged "separable" certificate verified. The
    bound now scales with the size of the terms (``_periodic.term_scale``). Exact values:
    C_q(0) = zeta(q), C_q(1/2) = -(1 - 2^(1-q)) zeta(q)."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 30
    for normalization in ("series", "bernoulli"):
        k = mk.get_plugin("kernel", "spline")(order=q, normalization=normalization)
        K, E = k.careful_block(np.array([[0.5], [0.0]]), np.zeros((1, 1)))
        w, qq = mp.mpf(k._weight()), mp.mpf(q)
        exact = [1 - w * (1 - mp.power(2, 1 - qq)) * mp.zeta(qq), 1 + w * mp.zeta(qq)]
        err = np.abs(K[:, 0] - np.array([float(v) for v in exact]))
        assert np.all(err <= E[:, 0]), (normalization, err / E[:, 0])


@pytest.mark.parametrize("q", [1.5, 2.0, 4.0])
def test_spline_bound_holds_for_coordinates_far_from_the_unit_cube(q):
    """Found by review: the difference of raw coordinates of 1e8 was rounded to 1e-8
    before the reduction modulo 1, and the factor's error was 4e5 times the bound. The
    coordinates are now reduced modulo 1 first (exactly), in the kernel and in its
    careful block alike, dense or CSR."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 40
    k = mk.get_plugin("kernel", "spline")(order=q)
    A = np.array([[1e8 + 0.3], [1e6 + 0.123456789], [12345.678], [-7.25], [0.999999999]])
    B = np.array([[0.1], [-3e9 + 0.5]])
    K, E = k.careful_block(A, B)
    assert_array_equal(K, k(A, B))
    assert_array_equal(K, k(sp.csr_matrix(A), sp.csr_matrix(B)))
    w = mp.mpf(k._weight())
    exact = np.array([[float(1 + w * mp.clcos(q, 2 * mp.pi * (mp.mpf(float(a)) - mp.mpf(float(b)))))
                       for b in B[:, 0]] for a in A[:, 0]])
    assert np.all(np.abs(K - exact) <= E)


@pytest.mark.parametrize("q, column", [
    (1.01, [-1e-20, 0.0, 1e-20]),              # x - floor(x) made -1e-20 into 1.0
    (1.2, [-0.3, 0.7, 0.3]),                   # -0.3 and 0.7: one double apart, not 1
    (1.01, [1 - 2.0 ** -53, 3e-17, 0.0]),      # across the wrap-around, near t = 0
    (1.5, [0.5 - 1e-17, -0.5 + 3e-17, 0.25]),
    (2.0, [-1e-20, 0.7, -0.3, 0.1]),
    (1.2, [0.5, -0.5 + 2.0 ** -54, 0.1]),     # 2^-54 apart across the wrap-around: the
    (1.01, [0.5, -0.5 + 2.0 ** -54, 0.1])])   # distance was 0 (1 - fl(a - b)), off by 141
def test_spline_bound_holds_for_negative_and_wrapping_coordinates(q, column):
    """Found by review: the reduction x - floor(x) rounds for negative x (-1e-20 became
    1.0, the distance 0 instead of 1e-20: K(-1e-20, 0) = 202.16 computed, 72.88 exact at
    q = 1.01, and a false "certified" claim verified), and a rounded difference near
    t = 0, where the kernel is as steep as |t|^(q-1), erred by 9e-3 against a bound of
    3e-13 (q = 1.2). Coordinates are now reduced by x - rint(x), exactly, and the
    rounding of each difference (computed exactly) is in the bound. Across the
    wrap-around the distance is (1/2 - |a|) + (1/2 - |b|), without cancellation: 0.5 and
    -0.5 + 2^-54 were at distance 0, and iterated_tikhonov, whose referee takes the
    kernel's values as computed, certified a chain that fails on the exact kernel."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 40
    k = mk.get_plugin("kernel", "spline")(order=q)
    A = np.array(column)[:, None]
    K, E = k.careful_block(A, A)
    assert_array_equal(K, k(A, A))
    err = np.abs(K - _spline_exact(A, A, q, k._weight(), mp))
    assert np.all(err <= E), (err / E).max()
    assert err.max() <= 1e-12 * k._weight() * float(mp.zeta(q))  # the values themselves


@pytest.mark.parametrize("order", [700.0, 1000.0])
def test_spline_orders_up_to_the_documented_limit_solve(order, rng):
    """Found by review: orders from about 646 on overflowed k^q (an OverflowError out of
    ``diag``); the terms beyond k = 2 are now 0, as they are in float64."""
    X = rng.random((30, 2))
    y = (X[:, 0] > 0.5).astype(int)
    res = mk.solve(X, y, solver="dcd", kernel="spline", kernel_params={"order": order})
    assert res.status == "certified" and res.certificate.verify(X, y)


def test_spline_claims_no_bound_for_subnormal_differences():
    """Found by review: a coordinate difference of 5e-324 put 2 pi t in the subnormal
    range (relative error up to 5%), and at q = 1.0001 the error was 4e8 times the bound.
    Such entries get an infinite bound (no claim); a difference of 0 keeps its bound."""
    k = mk.get_plugin("kernel", "spline")(order=1.0001)
    A = np.array([[0.25], [0.25 + 2.0 ** -40], [5e-324], [0.0]])
    K, E = k.careful_block(A, np.array([[0.25], [0.0]]))
    assert np.all(np.isfinite(E[:2, 0])) and np.isfinite(E[3, 1]) and E[3, 1] > 0
    assert np.isinf(E[2, 1]) and np.isfinite(E[2, 0])


def test_spline_careful_bound_is_absolute_near_a_zero_of_a_factor(rng):
    """Found while reviewing the referee's bounds: the bound was d 1e-13 |K|, relative,
    but the series factor 1 + 2 C_2(t) changes sign (1 - pi^2 / 6 at t = 1/2); near its
    zero the computed kernel's error is about 1e-15 absolute, far above that relative
    bound, which certificates then trusted."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 30
    k = mk.get_plugin("kernel", "spline")(order=2.0)
    A = np.column_stack([_spline_near_zero_rows(k, 2.0, mp), np.full(3, 0.3)])
    B = np.zeros((1, 2))
    K, E = k.careful_block(A, B)
    err = np.abs(K - _spline_exact(A, B, 2.0, k._weight(), mp))
    old = (A.shape[1] * 1e-13 + 8 * np.finfo(np.float64).eps / 2) * np.abs(K)
    assert np.any(err > old) and np.all(err <= E)


# ------------------------------------------------------------------------- pickling
@pytest.mark.parametrize("name,kw", CASES + [("spline", {"order": 3}), ("precomputed", {})])
def test_kernels_pickle(name, kw, rng):
    k = mk.get_plugin("kernel", name)(**kw)
    k2 = pickle.loads(pickle.dumps(k))
    assert k2.get_params() == k.get_params()
    X = rng.random((6, 6))
    X = X @ X.T if name == "precomputed" else X
    assert_allclose(k2(X), k(X))


# ------------------------------------------------------------------------- threads
@pytest.mark.parametrize("name,kw", CASES)
@pytest.mark.parametrize("fmt", ["dense", "csr"])
def test_one_thread_gives_the_same_gram(name, kw, fmt, rng):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    A, B = _data(rng, 300, 40), _data(rng, 200, 40)  # above the parallel-work threshold
    kernel = mk.get_plugin("kernel", name)(**kw)
    Af, Bf = _fmt(A, fmt, np.float64), _fmt(B, fmt, np.float64)
    with threadpoolctl.threadpool_limits(limits=1):
        K1, S1 = kernel(Af, Bf), kernel(Af)
    K2, S2 = kernel(Af, Bf), kernel(Af)
    assert np.array_equal(K1, K2) and np.array_equal(S1, S2)


# ------------------------------------------------------------------------- approximations
@pytest.mark.parametrize("base,params,ref", [
    ("rbf", {"gamma": 0.3}, lambda X: pairwise.rbf_kernel(X, gamma=0.3)),
    ("laplacian", {"gamma": 0.2}, lambda X: pairwise.laplacian_kernel(X, gamma=0.2)),
    ("poly", {"degree": 2}, lambda X: pairwise.polynomial_kernel(X, degree=2, coef0=1)),
])
@pytest.mark.parametrize("fmt", ["dense", "csr"])
def test_nystroem_with_all_centres_is_exact(base, params, ref, fmt, rng):
    X = _data(rng, 60, 5, density=0.8)
    k = mk.get_plugin("kernel", "nystroem")(base=base, base_params=params, n_components=60,
                                            random_state=0)
    Xf = _fmt(X, fmt, np.float64)
    P = k.feature_map(Xf)
    assert P.shape == (60, 60) and P.dtype == np.float64
    assert_allclose(P @ P.T, ref(X), rtol=0, atol=1e-8)
    assert_allclose(k(Xf), ref(X), rtol=0, atol=1e-8)
    assert_allclose(k.diag(Xf), np.diag(ref(X)), rtol=0, atol=1e-8)


def test_nystroem_fixed_at_first_fit(rng):
    X, Xnew = rng.standard_normal((50, 4)), rng.standard_normal((9, 4))
    k = mk.get_plugin("kernel", "nystroem")(n_components=20, random_state=3)
    assert not k.fitted
    P = k.feature_map(X)
    assert k.fitted and k.components_.shape == (20, 4)
    # new data goes through the same map: K(X_new, X_train) = Phi(X_new) Phi(X_train)^T
    assert_allclose(k(Xnew, X), k.feature_map(Xnew) @ P.T, rtol=1e-12)
    assert_allclose(k.feature_map(X), P)            # not refitted by later calls
    # a fresh instance with the same seed reproduces the map (deterministic given X, seed)
    k2 = mk.get_plugin("kernel", "nystroem")(n_components=20, random_state=3)
    assert_allclose(k2(Xnew, X), k(Xnew, X), rtol=1e-12)
    # an unfitted kernel called on (new, train) fits on the training side B
    assert_allclose(k2.components_, k.components_)
    with pytest.raises(ValueError, match="fitted on 4"):
        k.feature_map(np.ones((2, 3)))
    # float32 input gives a float32 map
    assert k.feature_map(Xnew.astype(np.float32)).dtype == np.float32


def test_nystroem_rank_deficient_base_is_stable(rng):
    # linear kernel on 3 features: K_CC has rank 3, the null space must be dropped
    X = rng.standard_normal((40, 3))
    k = mk.get_plugin("kernel", "nystroem")(base="linear", n_components=25, random_state=0)
    P = k.feature_map(X)
    assert k.n_components_kept_ == 3
    assert np.isfinite(P).all()
    assert_allclose(P @ P.T, X @ X.T, atol=1e-9)


def test_nystroem_params_validated():
    Ny = mk.get_plugin("kernel", "nystroem")
    with pytest.raises(ValueError, match="base='precomputed' cannot be approximated"):
        Ny(base="precomputed")
    with pytest.raises(ValueError, match="n_components"):
        Ny(n_components=0)
    with pytest.raises(TypeError, match="random_state"):
        Ny(random_state="seed")
    with pytest.raises(TypeError, match="unknown parameter"):
        Ny(base="rbf", base_params={"width": 2.0})


@pytest.mark.parametrize("base,ref", [
    ("rbf", lambda X: pairwise.rbf_kernel(X, gamma=0.25)),
    ("laplacian", lambda X: pairwise.laplacian_kernel(X, gamma=0.25)),
])
def test_rff_converges_to_the_kernel(base, ref, rng):
    X = rng.standard_normal((30, 4))
    K = ref(X)
    errs = []
    for m in (100, 1600, 25600):
        k = mk.get_plugin("kernel", "rff")(base=base, gamma=0.25, n_components=m, random_state=1)
        errs.append(np.abs(k(X) - K).mean())
    # Monte Carlo rate 1/sqrt(m): each 16x more features divide the error by about 4
    assert errs[1] < errs[0] / 2 and errs[2] < errs[1] / 2
    assert errs[2] < 0.02


def test_rff_feature_map_dtype_sparse_and_consistency(rng):
    X, Xnew = _data(rng, 40, 6), rng.standard_normal((5, 6))
    k = mk.get_plugin("kernel", "rff")(n_components=64, random_state=0)
    P = k.feature_map(sp.csr_matrix(X))
    assert P.shape == (40, 64) and P.dtype == np.float64
    assert_allclose(P, k.feature_map(X), rtol=1e-12, atol=1e-12)
    assert k.gamma_ == 1 / 6
    assert_allclose(k(Xnew, X), k.feature_map(Xnew) @ P.T)
    assert k.feature_map(X.astype(np.float32)).dtype == np.float32
    assert_allclose(k.diag(X), np.einsum("ij,ij->i", P, P))


@pytest.mark.parametrize("name,kw", [("nystroem", {"n_components": 10, "random_state": 0}),
                                     ("rff", {"n_components": 10, "random_state": 0})])
def test_approximations_pickle_fitted_state(name, kw, rng):
    X = rng.standard_normal((20, 3))
    k = mk.get_plugin("kernel", name)(**kw)
    P = k.feature_map(X)
    k2 = pickle.loads(pickle.dumps(k))
    assert k2.fitted
    assert_allclose(k2.feature_map(X), P)


# ----------------------------------------------- approximations: one fit per run
def _two_blobs(seed, n=120, d=4):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.where((X ** 2).sum(axis=1) > d - 0.6, 1, -1)


_APPROX = [("nystroem", {"n_components": 15}), ("rff", {"n_components": 30})]


@pytest.mark.parametrize("name,kw", _APPROX)
@pytest.mark.parametrize("solver", ["fista", "snkp"])
def test_a_run_fits_a_private_copy(name, kw, solver):
    """Two runs with one unfitted instance: each Result keeps the map of its own training
    rows (the same as with a fresh instance), a later run does not refit an earlier
    Result's kernel, and the user's instance stays unfitted."""
    (X1, y1), (X2, y2) = _two_blobs(1), _two_blobs(2)
    Xnew = np.random.default_rng(3).standard_normal((7, 4))
    k = mk.get_plugin("kernel", name)(random_state=5, **kw)
    run = dict(solver=solver, kernel=k, max_iter=30, random_state=0)
    res1 = mk.solve(X1, y1, **run)
    dec1 = res1.decision_function(Xnew)
    assert not k.fitted and res1.kernel is not k and res1.kernel.fitted
    res2 = mk.solve(X2, y2, **run)
    assert not k.fitted
    assert_allclose(res1.decision_function(Xnew), dec1, rtol=0, atol=0)
    for res, X, y in ((res1, X1, y1), (res2, X2, y2)):
        fresh = mk.solve(X, y, **{**run, "kernel": name,
                                  "kernel_params": {"random_state": 5, **kw}})
        assert_allclose(res.decision_function(Xnew), fresh.decision_function(Xnew),
                        rtol=0, atol=0)
    if name == "nystroem":  # centres drawn from each run's own rows
        assert all(any(np.array_equal(c, x) for x in X2) for c in res2.kernel.components_)


@pytest.mark.parametrize("name,kw", _APPROX)
def test_a_fitted_instance_is_honoured_and_refitting_it_spares_results(name, kw):
    (X, y), (Xo, _) = _two_blobs(1), _two_blobs(4, n=300)
    Xnew = np.random.default_rng(3).standard_normal((7, 4))
    k = mk.get_plugin("kernel", name)(random_state=None, **kw).fit(Xo)
    P = k.feature_map(X)
    res = mk.solve(X, y, solver="fista", kernel=k, max_iter=30)
    assert_allclose(res.kernel.feature_map(X), P, rtol=0, atol=0)  # the user's map
    dec = res.decision_function(Xnew)
    k.fit(Xo[::-1])  # refitting the user's instance (fresh entropy: another map)
    assert not np.allclose(k.feature_map(X), P)
    assert_allclose(res.decision_function(Xnew), dec, rtol=0, atol=0)
    assert res.certificate is None or res.certificate.verify(X, y)


@pytest.mark.parametrize("name,kw,X,match", [
    ("rff", {"n_components": 1000}, np.ones((200, 4)),
     r"kernel 'rff': the feature matrix of 200 rows x 1000 components needs 0\.00149 GiB; "
     r"memory_budget is 9\.31e-05 GiB; use fewer components \(n_components=1000\) or "
     r"raise memory_budget"),
    ("rff", {"n_components": 1000}, sp.eye(20, 5000, format="csr"),
     r"kernel 'rff': the 5000 x 1000 random frequencies needs 0\.0373 GiB"),
    ("nystroem", {"n_components": 150}, np.random.default_rng(0).standard_normal((200, 4)),
     r"kernel 'nystroem': the 150 x 150 matrices of the centres needs 0\.000503 GiB; "
     r"memory_budget is 9\.31e-05 GiB; use fewer components \(n_components=150\)"),
    ("nystroem", {"n_components": 40}, np.random.default_rng(0).standard_normal((2000, 4)),
     r"kernel 'nystroem': the feature matrix of 2000 rows x 40 components needs 0\.00119 GiB"),
])
@pytest.mark.parametrize("solver", ["fista", "snkp", "iterated_tikhonov"])
def test_approximation_respects_memory_budget(name, kw, X, match, solver):
    y = np.arange(X.shape[0]) % 2
    with pytest.raises(ValueError, match=match):
        mk.solve(X, y, solver=solver, kernel=name, kernel_params=kw, memory_budget=1e5,
                 max_iter=5)
    # the same within the budget (iterated Tikhonov's Newton steps on 1000 features are
    # slow), and direct use of an instance has no budget
    if solver != "iterated_tikhonov":
        mk.solve(X, y, solver=solver, kernel=name, kernel_params=kw, max_iter=5)
    mk.get_plugin("kernel", name)(**kw).feature_map(X)


@pytest.mark.parametrize("name,kw", _APPROX)
def test_concurrent_first_use_fits_once(name, kw):
    """Threads using one unfitted instance at once (fresh entropy each fit) all get the
    same map: the first use fits it once."""
    import threading

    X, _ = _two_blobs(1, n=400)
    for _ in range(5):
        k = mk.get_plugin("kernel", name)(random_state=None, **kw)
        out, barrier = [None] * 6, threading.Barrier(6)

        def work(i):
            barrier.wait()
            out[i] = k.feature_map(X)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for P in out[1:]:
            assert_allclose(P, out[0], rtol=0, atol=0)


def test_approximations_feed_feature_space_solvers():
    # composition accepts them wherever a feature map is required
    for name in ("linear", "nystroem", "rff"):
        assert callable(getattr(mk.get_plugin("kernel", name)(), "feature_map", None))


@pytest.mark.parametrize("q", [2, 4, 22, 1.001, 1.5, 2.5, 3, 3 + 1e-12, 3.004, 5 - 1e-5, 7.25,
                               39.5, 55.5])
def test_spline_cython_matches_numpy_series(q, rng):
    # the Cython Gram (truncated expansion, per-entry routes) against the numpy reference
    A, B = rng.random((30, 2)) * 3 - 1, rng.random((20, 2))
    ref = np.ones((30, 20))
    # the kernel reduces coordinates modulo 1 (exactly) before their differences, which
    # are then rounded to u (a difference of raw coordinates in [-1, 2) to 2u)
    Au = A - np.floor(A)
    for j in range(2):
        ref *= 1 + 2 * periodic_cosine_series(Au[:, j][:, None] - B[:, j][None, :], q)
    k = mk.get_plugin("kernel", "spline")(order=q)
    assert_allclose(k(A, B), ref, rtol=0, atol=2e-15 * np.abs(ref).max())
    S = k(A)
    assert np.array_equal(S, S.T)


def test_asv_kernels_module_runs(monkeypatch):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "asv_bench" / "benchmarks" / "kernels.py"
    spec = importlib.util.spec_from_file_location("_asv_kernels", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "N", 120)
    b = mod.RBFGram()
    for impl in ("marginkit", "sklearn"):
        b.setup(impl, "csr", "float32")
        b.time_gram(impl, "csr", "float32")
    r = mod.RBFGramRatio()
    r.setup("dense", "float64")
    assert 0 < r.track_ratio("dense", "float64") < np.inf


def _square_of_dot(A, B):
    return (A @ B.T) ** 2


def test_callable_kernel_gets_elementwise_sparse_blocks(rng):
    """``(A @ B.T) ** 2`` squares the entries on CSR input too (not a matrix power), and a
    sparse or ``numpy.matrix`` output becomes a dense ndarray."""
    X = sp.random(12, 5, density=0.4, format="csr", random_state=0, dtype=np.float64)
    k = mk.get_plugin("kernel", "callable")(function=_square_of_dot)
    want = (X.toarray() @ X.toarray().T) ** 2
    for A in (X, X.toarray()):
        K = k(A)                               # square block, B is A
        assert type(K) is np.ndarray and K.dtype == np.float64
        assert_allclose(K, want, rtol=1e-12)
        assert_allclose(k(A, A[:4]), want[:, :4], rtol=1e-12)
    assert_allclose(k.diag(X), np.diag(want), rtol=1e-12)
    as_matrix = mk.get_plugin("kernel", "callable")(function=lambda A, B: np.asmatrix(np.ones((A.shape[0], B.shape[0]))))
    assert type(as_matrix(X)) is np.ndarray
    K32 = k(X.astype(np.float32))
    assert type(K32) is np.ndarray and K32.dtype == np.float32
    # the caller's matrix is neither modified nor densified
    assert sp.isspmatrix_csr(X)


@pytest.mark.parametrize("base,params,d", [("rbf", {"gamma": 0.4}, 5), ("linear", {}, 3)])
@pytest.mark.parametrize("fmt", ["dense", "csr"])
def test_nystroem_kernel_and_solver_map_are_one_map(base, params, d, fmt, rng):
    # the ``nystroem`` kernel and the map a solver fits itself (NystroemMap) draw the same
    # centres from the same seed and give the same Phi, with the same eigenvalue cut-off
    # (the linear base on 3 features has a rank-3 K_CC among 30 centres)
    X = _fmt(_data(rng, 80, d, density=0.9), fmt, np.float64)
    kern = mk.get_plugin("kernel", "nystroem")(base=base, base_params=params, n_components=30,
                                               random_state=7)
    P = kern.feature_map(X)
    fitted = NystroemMap(mk.get_plugin("kernel", base)(**params), 30, 7).fit(X)
    assert_array_equal(fitted.centre_index_, kern.component_indices_)
    assert fitted.n_components_kept_ == kern.n_components_kept_ == (3 if base == "linear" else 30)
    assert_array_equal(fitted.projection_, kern.normalization_)
    assert_array_equal(fitted.transform(X), P)
    assert fitted.transform(X).shape == (80, 30)


def test_nystroem_projection_cut_off_and_refusals():
    # eigenvalues at or below m eps lambda_max are dropped, those above are kept
    m, eps = 4, np.finfo(np.float64).eps
    V = np.linalg.qr(np.random.default_rng(0).standard_normal((m, m)))[0]
    lam = np.array([1.0, 1e-3, 20.0 * m * eps, 0.05 * m * eps])
    P, kept = nystroem_projection((V * lam) @ V.T)
    assert kept == 3
    with pytest.raises(ValueError, match=r"K\(C, C\) at the centres are all zero"):
        nystroem_projection(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="not finite"):
        nystroem_projection(np.full((2, 2), np.inf))


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_rbf_rows_on_prepared_columns_match_the_call(sparse, dtype):
    rng = np.random.default_rng(3)
    B = rng.normal(size=(40, 7)).astype(dtype) + 5.0
    B[rng.random(B.shape) < 0.5] = 0.0
    A = B[[3, 17, 29]]
    if sparse:
        A, B = sp.csr_matrix(A), sp.csr_matrix(B)
    from marginkit.kernels.builtin import RBFKernel
    k = RBFKernel(gamma=0.3)
    cols = k.columns(B)
    assert_array_equal(k.rows(A, cols), k(A, B))
    assert_array_equal(k.rows(A[:0], cols), k(A[:0], B))
    with pytest.raises(ValueError, match="features"):
        k.rows(np.ones((2, 3)), cols)


def _careful_rbf_numpy(kernel, A, B):
    """The numpy form of ``RBFKernel.careful_block`` (one array operation per step), the
    reference of the compiled pass: K, E and the rows recomputed from explicit differences."""
    from marginkit.kernels import builtin as b
    from marginkit.linalg._norms import row_sqnorms
    A, B = b._as64(A), b._as64(B)
    g = b._resolve_gamma(kernel.gamma, A.shape[1])
    Ac, Bc = b._centered(A, B)
    na = row_sqnorms(Ac)
    nb = na if Bc is Ac else row_sqnorms(Bc)
    k = max(b._row_nnz_max(Ac), b._row_nnz_max(Bc))
    e = na[:, None] + nb[None, :]
    D2 = b._dot_block(Ac, Bc)
    D2 *= -2.0
    D2 += e
    np.maximum(D2, 0.0, out=D2)
    e *= b._cancellation_bound(k, b._U64)
    rows = b._cancelled_rows(Ac, Bc, na, nb, g, np.dtype(np.float64), 2.0**-40)
    if rows.size:
        D2[rows] = b._dist_block(A[rows], B, 2)
        e[rows] = (k + 4) * b._U64 * D2[rows]
    K = np.exp(np.multiply(D2, -g))
    Z = np.exp(np.maximum(D2 - e, 0.0) * -g)
    with np.errstate(over="ignore", invalid="ignore"):
        T = Z * ((g * e) * 2.0)
    # where Z underflowed on a row of explicit differences: 2^-1050 (2 e <= D2), else 1
    explicit = np.zeros(D2.shape, dtype=bool)
    explicit[rows] = True
    T = np.where((Z != 0.0) | ~explicit, T, np.where(2.0 * e <= D2, 2.0**-1050, 1.0))
    E = np.minimum(T + K * (8 * b._U64) + b._TINY, 1.0)
    return K, E, rows


def _careful_rbf_data(case, rng):
    """(A, B, gamma): rows near and far from each other; ``offset``: two clusters 1e4 apart
    (norms far above the spread: rows the norm formula would cancel, recomputed from
    explicit differences); ``underflow``: entries exp(-gamma D2) from normal through
    subnormal to 0, on the norm formula (pairs symmetric about the centre) and, with
    ``underflow_far``, on explicit differences."""
    A = rng.normal(size=(24, 5))
    A[rng.random(A.shape) < 0.3] = 0.0
    near = A[:12] + np.logspace(-6, 0.5, 12)[:, None] * rng.normal(size=(12, 5))
    B = np.vstack([near, rng.normal(size=(9, 5))])
    gamma = 0.7
    g_d2 = np.array([600.0, 710.0, 720.0, 730.0, 740.0, 744.0, 760.0])  # gamma D2 targets
    if case == "offset":
        A[::2, 0] += 1e4
        B[::2, 0] += 1e4
        gamma = 0.01
    elif case == "underflow":
        gamma = 100.0
        A, B = 0.05 * A, 0.05 * B
        half = 0.5 * np.sqrt(g_d2 / gamma)[:, None] * np.eye(5)[0]
        A = np.vstack([A, half])
        B = np.vstack([B, half, -half])
    elif case == "underflow_far":
        gamma = 1e3
        B = np.vstack([B, A[0] + np.sqrt(g_d2 / gamma)[:, None] * np.eye(5)[0]])
    return A, B, gamma


def _careful_rbf_inputs(case, layout, dtype, same, rng):
    A, B, gamma = _careful_rbf_data(case, rng)
    if same:
        A = B = np.vstack([A, B])
    A, B = A.astype(dtype), B.astype(dtype)
    Al, Bl = (sp.csr_matrix(A), sp.csr_matrix(B)) if layout == "csr" else (A, B)
    return (Al, Al, A, A, gamma) if same else (Al, Bl, A, B, gamma)


@pytest.mark.parametrize("case", ["spread", "offset", "underflow", "underflow_far"])
@pytest.mark.parametrize("layout", ["dense", "csr"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("same", [False, True])
def test_rbf_careful_block_is_its_numpy_form(case, layout, dtype, same):
    Al, Bl, _, _, gamma = _careful_rbf_inputs(case, layout, dtype, same, np.random.default_rng(8))
    kernel = mk.get_plugin("kernel", "rbf")(gamma=gamma)
    before = (Al.copy(), Bl.copy())
    K, E = kernel.careful_block(Al, Bl)
    K_ref, E_ref, rows = _careful_rbf_numpy(kernel, Al, Bl)
    if case == "underflow":
        # the norm formula serves most rows (those of the largest norms, g D2 from about
        # 720 on, are recomputed from explicit differences)
        assert 0 < K.shape[0] - rows.size and rows.size <= 20
    else:
        assert (rows.size > 0) == (case in ("offset", "underflow_far"))
    assert K.dtype == E.dtype == np.float64 and K.shape == E.shape == K_ref.shape
    # the same operations in the same order (and numpy's exp in both): bit for bit
    assert_array_equal(K, K_ref)
    assert_array_equal(E, E_ref)
    for x, x0 in zip((Al, Bl), before):
        assert_array_equal(x.toarray() if sp.issparse(x) else x,
                           x0.toarray() if sp.issparse(x0) else x0)
    if case.startswith("underflow"):
        assert np.any(K == 0.0) and np.any((K > 0.0) & (K < np.finfo(np.float64).tiny))


@pytest.mark.parametrize("case", ["spread", "offset", "underflow", "underflow_far"])
@pytest.mark.parametrize("layout", ["dense", "csr"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("same", [False, True])
def test_rbf_careful_block_bounds_its_true_error(case, layout, dtype, same):
    Al, Bl, A, B, gamma = _careful_rbf_inputs(case, layout, dtype, same, np.random.default_rng(9))
    K, E = mk.get_plugin("kernel", "rbf")(gamma=gamma).careful_block(Al, Bl)
    # explicit differences in long double (64-bit significand on x86: 2^11 times finer)
    a, b = A.astype(np.longdouble), B.astype(np.longdouble)
    exact = np.exp(-np.longdouble(gamma) * ((a[:, None] - b[None]) ** 2).sum(axis=2))
    assert np.all(np.abs(K - exact) <= E)
    # and the bound is a tight one, not a blanket: within 1e-6 of the entries (or tiny)
    assert np.all(E <= 1e-6 * K + 1e-300)


def _careful_products_inputs(case, layout, dtype, same, rng):
    """The inputs of the careful-block tests, and harder ones: ``tiny_gamma`` (entries
    within 1e-8 of 1), ``huge_gamma`` (most entries underflow), ``duplicates`` (rows within
    1e-9 of each other), ``large_norms`` (an offset of 1e7: every row recomputed from
    explicit differences)."""
    base = case if case in ("spread", "offset", "underflow", "underflow_far") else "spread"
    A, B, gamma = _careful_rbf_data(base, rng)
    if case == "tiny_gamma":
        gamma = 1e-8
    elif case == "huge_gamma":
        gamma = 50.0
    elif case == "duplicates":
        B = np.vstack([B, A[:8] + 1e-9 * rng.normal(size=(8, A.shape[1]))])
    elif case == "large_norms":
        A, B = A + 1e7, B + 1e7
        A[:, 1:], B[:, 1:] = A[:, 1:] - 1e7, B[:, 1:] - 1e7
    if same:
        A = B = np.vstack([A, B])
    A, B = A.astype(dtype), B.astype(dtype)
    Al, Bl = (sp.csr_matrix(A), sp.csr_matrix(B)) if layout == "csr" else (A, B)
    return (Al, Al, A, A, gamma) if same else (Al, Bl, A, B, gamma)


_PRODUCT_CASES = ["spread", "offset", "underflow", "underflow_far", "tiny_gamma", "huge_gamma",
                  "duplicates", "large_norms"]


@pytest.mark.parametrize("case", _PRODUCT_CASES)
@pytest.mark.parametrize("layout", ["dense", "csr"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("same", [False, True])
def test_rbf_careful_products_dominate_careful_block(case, layout, dtype, same):
    """careful_products gives careful_block's products, and a bound b at or above the
    float64 E |u| of careful_block's E on every row (and its diagonal bounds)."""
    rng = np.random.default_rng(10)
    Al, Bl, _, _, gamma = _careful_products_inputs(case, layout, dtype, same, rng)
    kernel = mk.get_plugin("kernel", "rbf")(gamma=gamma)
    m, n = Al.shape[0], Bl.shape[0]
    before = (Al.copy(), Bl.copy())
    K, E = kernel.careful_block(Al, Bl)
    if case == "large_norms":
        assert np.all(E > 0.0)                    # every row on the explicit path
    for u in (rng.normal(size=n), np.where(rng.random(n) < 0.4, 0.0, rng.random(n)),
              1e-300 * rng.normal(size=n)):
        own = rng.integers(0, n, size=m)
        f, a, b, d, ed = kernel.careful_products(Al, Bl, u, own)
        assert f.shape == a.shape == b.shape == d.shape == ed.shape == (m,)
        scale = np.abs(K) @ np.abs(u)
        assert np.all(np.abs(f - K @ u) <= 4 * n * 2.0**-53 * scale + 1e-320)
        assert np.all(np.abs(a - scale) <= 4 * n * 2.0**-53 * scale + 1e-320)
        assert np.all(b >= E @ np.abs(u))
        assert_array_equal(d, K[np.arange(m), own])
        assert np.all(ed >= E[np.arange(m), own])
        # a bound of the same size, not a blanket one
        assert np.all(b <= 2.0 * (E @ np.abs(u)) + 1e-300)
    assert kernel.careful_products(Al, Bl, u)[3:] == (None, None)
    for x, x0 in zip((Al, Bl), before):
        assert_array_equal(x.toarray() if sp.issparse(x) else x,
                           x0.toarray() if sp.issparse(x0) else x0)


@pytest.mark.parametrize("case", _PRODUCT_CASES)
@pytest.mark.parametrize("layout", ["dense", "csr"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_rbf_careful_products_bound_the_true_error(case, layout, dtype):
    """Against K(A, B) in long double (explicit differences): each entry's error is below
    the bound of u = e_j (b then bounds that one entry), and K u's error is below
    gamma_n a + b + 2 n eta for dense u."""
    rng = np.random.default_rng(11)
    Al, Bl, A, B, gamma = _careful_products_inputs(case, layout, dtype, False, rng)
    kernel = mk.get_plugin("kernel", "rbf")(gamma=gamma)
    a_, b_ = A.astype(np.longdouble), B.astype(np.longdouble)
    exact = np.exp(-np.longdouble(gamma) * ((a_[:, None] - b_[None]) ** 2).sum(axis=2))
    n = B.shape[0]
    for j in range(n):
        e_j = np.zeros(n)
        e_j[j] = 1.0
        f, _, b, _, _ = kernel.careful_products(Al, Bl, e_j)
        assert np.all(np.abs(f - exact[:, j]) <= b), j
    u = rng.normal(size=n)
    f, a, b, _, _ = kernel.careful_products(Al, Bl, u)
    g_n = n * 2.0**-53 / (1 - n * 2.0**-53)
    err = np.abs(f.astype(np.longdouble) - exact @ u.astype(np.longdouble))
    assert np.all(err <= g_n * a + b + 2 * n * 2.0**-1074)


def test_rbf_careful_products_refuses_a_wrong_vector():
    kernel = mk.get_plugin("kernel", "rbf")(gamma=0.5)
    with pytest.raises(ValueError, match=r"u must have one entry per row of B \(4\)"):
        kernel.careful_products(np.ones((2, 3)), np.ones((4, 3)), np.ones(3))
    f, a, b, d, ed = kernel.careful_products(np.ones((0, 3)), np.ones((4, 3)), np.ones(4),
                                             np.zeros(0, dtype=int))
    assert f.shape == b.shape == d.shape == (0,)


def test_rbf_careful_block_on_no_rows():
    kernel = mk.get_plugin("kernel", "rbf")(gamma=0.5)
    K, E = kernel.careful_block(np.ones((0, 3)), np.ones((4, 3)))
    assert K.shape == E.shape == (0, 4)
    from marginkit.kernels import _gram
    K, E, na, nb = np.zeros((2, 3)), np.zeros((2, 3)), np.zeros(2), np.zeros(3)
    for f in (_gram.rbf_careful_exponents, _gram.rbf_careful_bound):
        with pytest.raises(ValueError, match="row norms"):
            f(K, E, na[:1], nb, 0.5, 1e-15, np.zeros((0, 3)), np.full(2, -1), 1e-15)
        with pytest.raises(ValueError, match="reads explicit row 1 of 1"):
            f(K, E, na, nb, 0.5, 1e-15, np.zeros((1, 3)), np.array([0, 1]), 1e-15)


def _traced_peak(fn):
    import tracemalloc

    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("name", ["nystroem", "rff"])
def test_float32_rows_are_mapped_without_a_float64_copy_of_X(name):
    """float32 X under a kernel approximation: the solvers fitted the map on a float64
    copy of all of X and evaluated it on another (2 x X.nbytes each). The fit now reads X
    as it is (it copies the rows it draws) and the map converts one bounded row block at a
    time, with the same features."""
    from marginkit._executors import local_executor
    from marginkit._referee import feature_rows
    from marginkit.solvers.svm._data import fit_on_rows

    rng = np.random.default_rng(0)
    X = rng.standard_normal((20000, 200)).astype(np.float32)
    y = np.where(X[:, 0] > 0, 1, -1)
    kp = {"n_components": 50, "random_state": 0}
    k = mk.get_plugin("kernel", name)(**kp)
    _, peak = _traced_peak(lambda: fit_on_rows(k, local_executor(X, y.astype(float))))
    assert k.fitted and peak < X.nbytes / 4
    Phi, peak = _traced_peak(lambda: feature_rows(k, X))
    assert Phi.dtype == np.float64 and peak - Phi.nbytes < X.nbytes / 2
    np.testing.assert_allclose(Phi, k.feature_map(X.astype(np.float64)), rtol=0, atol=1e-12)
    for solver in ("fista", "iterated_tikhonov"):
        _, peak = _traced_peak(lambda: mk.solve(X, y, solver=solver, kernel=name,
                                                kernel_params=kp, max_iter=2))
        assert peak < 2 * X.nbytes, solver  # below one float64 copy of X


def test_spline_values_at_subnormal_distances_are_accurate():
    """Found by review: 2 pi t rounded to a subnormal for t = 5e-324, and K(5e-324, 0) was
    off by 0.086 at order 1.0001; careful_block gives such entries no bound, but
    iterated_tikhonov's referee takes the kernel's values as computed, and certified a
    chain that fails on the exact kernel. log(2 pi t) is now log(t) + log(2 pi)."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 40
    for q in (1.0001, 1.001, 1.5):
        k = mk.get_plugin("kernel", "spline")(order=q)
        A = np.array([[0.0], [5e-324], [1e-323], [1e-310]])
        K = k(A, A)
        exact = _spline_exact(A, A, q, k._weight(), mp)
        assert np.all(np.abs(K - exact) <= 1e-12 * np.abs(exact)), (q, np.abs(K - exact).max())


@pytest.mark.parametrize("name", ["rbf", "laplacian", "poly", "spline"])
def test_careful_block_validates_its_operands_as_the_kernel_does(name):
    """Found by review: ``careful_block`` (the referee's kernel path, a public method)
    handed a COO or CSC operand with a row index out of range to scipy's compiled
    routines (the process crashed), and took NaN rows (rbf gave K = 1 with a NaN bound);
    its operands are now validated as the kernel's own blocks are."""
    kernel = mk.get_plugin("kernel", name)()
    X = np.random.default_rng(0).uniform(size=(4, 3))
    coo = sp.coo_matrix(X)
    coo.row[0] = 99
    csc = sp.csc_matrix(X)
    csc.indices[0] = 99
    for bad in (coo, csc):
        with pytest.raises(ValueError, match="out of range"):
            kernel.careful_block(bad, X)
    nan = X.copy()
    nan[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity"):
        kernel.careful_block(nan, X)
    with pytest.raises(ValueError, match="2-D"):
        kernel.careful_block(X[0], X)
    K, E = kernel.careful_block(sp.coo_matrix(X), X)  # a valid COO operand is read
    assert np.allclose(K, kernel(X, X)) and np.all(E >= 0)


@pytest.mark.parametrize("case", _PRODUCT_CASES + ["close_pair"])
@pytest.mark.parametrize("layout", ["dense", "csr"])
@pytest.mark.parametrize("same", [False, True])
def test_rbf_evaluation_bound_covers_its_own_evaluation(case, layout, same):
    """``RBFKernel.evaluation_bound`` bounds the error of ``kernel(A, B)``, the evaluation
    predict makes (the norm formula up to the 2^-36 row test), against long-double
    explicit differences. ``close_pair`` is the review's: two points 5e-7 apart at 70,
    where the norm formula gives exactly 1 for an entry of 1 - 1.25e-13, beyond
    careful_block's E: a separator checked with E alone verified while predict scored
    both points 0."""
    rng = np.random.default_rng(10)
    if case == "close_pair":
        x = np.concatenate([-70.0 + 0.1 * rng.normal(size=10), [70.0, 70.0 + 5e-7]])[:, None]
        A = B = x
        gamma = 0.5
        if layout == "csr":
            A = B = sp.csr_matrix(x)
        Ad, Bd = x, x
    else:
        A, B, Ad, Bd, gamma = _careful_products_inputs(case, layout, np.float64, same, rng)
    kernel = mk.get_plugin("kernel", "rbf")(gamma=gamma)
    K, E = kernel.careful_block(A, B)
    bound = kernel.evaluation_bound(A, B, K, E)
    assert np.all(bound >= E)
    fast = kernel(A, B)
    a, b = Ad.astype(np.longdouble), Bd.astype(np.longdouble)
    exact = np.exp(-np.longdouble(gamma) * ((a[:, None] - b[None]) ** 2).sum(axis=2))
    err = np.abs(fast - exact)
    assert np.all(err <= bound)
    assert np.all(bound <= 2e-11 * K + E + 1e-300)  # 2^-36 and roundings, no blanket
    if case == "close_pair":
        assert np.any(err > E)  # what the bound adds is needed


@pytest.mark.parametrize("layout", ["dense", "csr"])
def test_float32_blocks_whose_intermediates_overflow_are_computed_again(layout):
    """Found by review: finite float32 rows gave inf (poly with gamma 1e-40: <a, b> = 4e38
    overflows float32 before gamma brings it to about 1.1) or NaN (rbf: squared norms
    inf - inf) with no error. The block is computed again in float64 and rounded to
    float32; an entry beyond float32's range stays inf (linear), as numpy's products."""
    import warnings

    Xf = np.array([[2e19, 1.0], [1.0, 3e19], [-2e19, 5.0]], np.float32)
    X = sp.csr_matrix(Xf) if layout == "csr" else Xf
    X64 = Xf.astype(np.float64)
    G64 = X64 @ X64.T
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        poly = mk.get_plugin("kernel", "poly")(gamma=1e-40)(X)
        rbf = mk.get_plugin("kernel", "rbf")(gamma=1e-40)(X)
        lin = mk.get_plugin("kernel", "linear")()(X)
    assert poly.dtype == rbf.dtype == lin.dtype == np.float32
    assert_allclose(poly, (1e-40 * G64 + 1.0) ** 3, rtol=1e-6)
    sq = np.sum(X64 ** 2, axis=1)
    assert_allclose(rbf, np.exp(-1e-40 * (sq[:, None] + sq[None] - 2 * G64)), rtol=1e-6)
    assert np.isinf(lin[0, 0]) and lin[0, 1] == np.float32(G64[0, 1])


def test_rbf_with_no_rows_in_b_warns_nothing():
    """Found by review: K(A, B) of a B with no rows (the support of a model that stopped
    before its first step) warned "Mean of empty slice" from numpy."""
    import warnings

    k = mk.get_plugin("kernel", "rbf")(gamma=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert k(np.ones((3, 2)), np.ones((0, 2))).shape == (3, 0)
        assert k.careful_block(np.ones((3, 2)), np.ones((0, 2)))[0].shape == (3, 0)


def test_rbf_rows_whose_mean_overflows_are_not_centred_into_nan():
    # found by review: a column of +-1e308 has a NaN mean (inf - inf in the pairwise sum);
    # centring by it made every norm NaN, no row was recomputed and every entry was 1
    x = np.arange(16, dtype=float)
    x[0] = x[8] = 1e308
    x[1] = x[9] = -1e308
    X = x[:, None]
    kernel = mk.get_plugin("kernel", "rbf")(gamma=1.0)
    K = kernel(X)
    assert K[2, 3] == pytest.approx(np.exp(-1.0)) and K[0, 1] == 0.0 and K[0, 8] == 1.0
    Kc, E = kernel.careful_block(X, X)
    with np.errstate(over="ignore", invalid="ignore"):
        exact = np.exp(-np.minimum((x[:, None] - x[None, :]) ** 2, 1e300))
    assert np.all(np.abs(Kc - exact) <= E)


def test_laplacian_float32_falls_back_to_float64_where_float32_overflows():
    # found by review: rows 3e38 apart had an infinite float32 L1 distance (K = 0 instead
    # of 0.94 at gamma 1e-40), and gamma 1e39 (inf in float32) made the diagonal NaN
    kernel = mk.get_plugin("kernel", "laplacian")
    A = np.array([[3e38], [-3e38]], dtype=np.float32)
    K = kernel(gamma=1e-40)(A)
    assert K.dtype == np.float32
    assert K[0, 1] == pytest.approx(np.exp(-1e-40 * 6e38), rel=1e-6)
    X = np.random.default_rng(0).normal(size=(4, 2)).astype(np.float32)
    assert_array_equal(kernel(gamma=1e39)(X), np.eye(4, dtype=np.float32))
    np.testing.assert_allclose(kernel(gamma=0.5)(X), kernel(gamma=0.5)(X.astype(np.float64)),
                               rtol=1e-6)


@pytest.mark.parametrize("normalization", ["series", "bernoulli"])
def test_spline_on_csr_reads_the_stored_columns_only(normalization):
    # found by review: the spline looped over every column, 8.6 s a block on 4 rows of
    # 10^5 columns (hours at 10^9) whatever the number of entries; the empty columns are
    # one factor K_1(0, 0) each, applied at once
    rng = np.random.default_rng(0)
    X = np.zeros((5, 40))
    X[:, [3, 17, 30]] = rng.random((5, 3))
    X[rng.random(X.shape) < 0.3] = 0.0
    Y = np.zeros((4, 40))
    Y[:, [3, 21]] = rng.random((4, 2))
    kernel = mk.get_plugin("kernel", "spline")(order=3.0, normalization=normalization)
    for A, B in ((X, X), (X, Y)):
        dense = kernel(A, B)
        np.testing.assert_allclose(kernel(sp.csr_matrix(A), sp.csr_matrix(B)), dense,
                                   rtol=1e-13)
        K, E = kernel.careful_block(sp.csr_matrix(A), sp.csr_matrix(B))
        Kd, Ed = kernel.careful_block(A, B)
        assert np.all(np.abs(K - Kd) <= E) and np.all(E <= 2 * Ed + 1e-300)
    wide = sp.csr_matrix((np.array([0.25, 0.5, 0.75]), np.array([7, 999_999_990, 5]),
                          np.array([0, 2, 2, 3])), shape=(3, 10**9))
    high = mk.get_plugin("kernel", "spline")(order=60.0, normalization="bernoulli")
    K, E = high.careful_block(wide, wide)               # milliseconds, not hours
    assert K.shape == (3, 3) and np.all(np.isfinite(E))
    np.testing.assert_allclose(np.diag(K), high.diag(wide), rtol=1e-12)


def test_degree_and_rff_gamma_at_their_extremes_get_clear_answers():
    # found by review: degree 2**31 reached a C int (OverflowError); rff at gamma 1.7e308
    # drew infinite frequencies (sqrt(2 gamma)), its features were NaN and the
    # perceptrons called every row all-zero
    X = np.array([[0.5, 0.1], [0.2, 0.3], [-0.4, 0.2], [0.1, -0.6]])
    y = np.array([1, 1, -1, -1])
    with pytest.raises(ValueError, match=r"degree=2147483648 is out of range"):
        mk.solve(X, y, solver="perceptron", kernel="poly", kernel_params={"degree": 2**31})
    rff = mk.get_plugin("kernel", "rff")(base="rbf", gamma=1.7e308, n_components=50,
                                         random_state=0)
    rff.fit(X)
    assert np.all(np.isfinite(rff.feature_map(X)))
    with pytest.raises(ValueError, match=r"random features of row\(s\) \[0, 1, 2, 3\] of X "
                                         r"are not finite.*smaller gamma or rescale X"):
        rff.feature_map(X * 1e200)


def test_spline_bound_refuses_products_that_left_the_normal_range():
    # found by review: on CSR the stored columns' factors (about 1e-12 each) were
    # multiplied before the 390 empty columns' 4.29^390, and K and its bound underflowed
    # to 0 where K = 4.47e-114; the empty columns now come first, and an entry whose
    # running product went subnormal gets no finite bound
    kernel = mk.get_plugin("kernel", "spline")(order=2.0)
    A = np.zeros((1, 420))
    A[0, np.arange(30) * 14] = 0.3192439724041959
    B = np.zeros((1, 420))
    Kd, Ed = kernel.careful_block(A, B)
    Ks, Es = kernel.careful_block(sp.csr_matrix(A), sp.csr_matrix(B))
    exact = 4.4732e-114                                # mpmath, 40 digits (review)
    for K, E in ((Kd, Ed), (Ks, Es)):
        assert abs(K[0, 0] - exact) <= E[0, 0] and E[0, 0] < 1e-110
    # all stored: the running product itself goes below the normal range
    Z = np.full((1, 40), 0.3192439724041959)
    K, E = kernel.careful_block(Z, np.zeros((1, 40)))
    assert K[0, 0] < 1e-300 and E[0, 0] == np.inf


def test_sparse_products_compact_columns_far_beyond_the_entries(monkeypatch):
    """Hashed features: 2 rows of 2^40 columns with 4 entries. The sparse products work on
    the stored columns (found by review: the CSC copy's column pointers of 2^31 columns
    were 16 GiB), with the same entries bit for bit as through all the columns."""
    from marginkit.kernels import builtin as KB

    d = 2 ** 40
    A = sp.csr_matrix((np.array([1.0, 2.0, 3.0, 1.0]), np.array([0, 5, 7, d - 1]),
                       np.array([0, 2, 4])), shape=(2, d))
    dense = np.array([[1.0, 2.0, 0.0, 0.0], [0.0, 0.0, 3.0, 1.0]])
    for name, params in (("linear", {}), ("rbf", {"gamma": 0.1}), ("poly", {"gamma": 0.5})):
        K = mk.get_plugin("kernel", name)(**params)
        np.testing.assert_allclose(K(A, A), K(dense, dense), rtol=1e-15)
        np.testing.assert_allclose(K(A[:1], A), K(dense[:1], dense), rtol=1e-15)
    rbf = mk.get_plugin("kernel", "rbf")(gamma=0.1)
    np.testing.assert_array_equal(rbf.rows(A[1:], rbf.columns(A)), rbf(A[1:], A))
    # B prepared once on its own columns (found by review: compacting B again for each
    # block of rows cost 100x); rows with entries B has none in, and empty rows
    B = sp.random(30, 200_000, density=2e-4, random_state=1, format="csr")
    R = sp.vstack([sp.random(17, 200_000, density=2e-4, random_state=2, format="csr"), B[:3],
                   sp.csr_matrix((2, 200_000))]).tocsr()
    cols = rbf.columns(B)
    assert cols.keep is not None
    np.testing.assert_array_equal(rbf.rows(R, cols), rbf(R, B))
    # the same entries as through every column, on blocks narrow enough for both ways
    rng = np.random.default_rng(0)
    for trial in range(10):
        n_cols = int(rng.integers(5_000, 100_000))
        X = sp.random(int(rng.integers(1, 30)), n_cols, density=3e-4, random_state=trial,
                      format="csr")
        Y = sp.random(int(rng.integers(1, 30)), n_cols, density=3e-4, random_state=50 + trial,
                      format="csr")
        X.data = rng.normal(size=X.nnz) * 10.0 ** rng.integers(-5, 5, size=X.nnz)
        for P, Q in ((X, Y), (X, X)):
            assert KB._wide(n_cols, P.nnz + (0 if Q is P else Q.nnz))
            compact = KB._dot_block(P, Q)
            with monkeypatch.context() as m:
                m.setattr(KB, "_wide", lambda d, nnz: False)
                full = KB._dot_block(P, Q)
            np.testing.assert_array_equal(compact, full)


@pytest.mark.skipif(np.finfo(np.longdouble).eps > 1e-18, reason="needs extended precision")
def test_feature_rounding_bounds_the_maps_own_rounding():
    """The rounding bound of an approximation's rows as the referee reads them holds
    against the map of its stored centres and normalization (Nystroem) or frequencies and
    offsets (random features) evaluated in extended precision, on an ill-conditioned K_CC
    (|P| ~ 1e5) and on phases near 1e7 (found by review: the referees took those rows as
    exact)."""
    from marginkit._referee import row_bounds

    LD = np.longdouble
    X = ILL.X
    g = ILL.GAMMA
    nys = mk.get_plugin("kernel", "nystroem")(n_components=7, random_state=196,
                                               base_params={"gamma": g})
    nys.fit(X)
    P = np.asarray(nys.normalization_, dtype=np.float64)
    assert np.abs(P).max() > 1e4
    Phi, err = nys.careful_features(X)
    exact = ILL.rbf_ld(X, nys.components_, g) @ P.astype(LD)
    assert np.all(np.abs(Phi.astype(LD) - exact) <= err)  # entry by entry
    e = row_bounds(err)
    gap = np.sqrt(np.sum((Phi.astype(LD) - exact) ** 2, axis=1)).astype(np.float64)
    assert np.all(gap <= e) and np.all(e < 1e-8 * np.linalg.norm(Phi, axis=1))
    # weighted rows (the SVM referee's standardized coordinates)
    w = np.linspace(0.5, 3e3, Phi.shape[1])
    gap = np.sqrt(np.sum(((Phi.astype(LD) - exact) * w) ** 2, axis=1)).astype(np.float64)
    assert np.all(gap <= row_bounds(err, w))
    np.testing.assert_allclose(Phi, nys.feature_map(X), rtol=0, atol=1e-6)
    rng = np.random.default_rng(0)
    Xr = rng.normal(size=(30, 3)) * 10
    rff = mk.get_plugin("kernel", "rff")(gamma=1e6, n_components=40, random_state=0).fit(Xr)
    Phi = rff.feature_map(Xr)
    W, b = (np.asarray(a, dtype=np.float64).astype(LD) for a in (rff.frequencies_, rff.offsets_))
    exact = np.sqrt(LD(2) / W.shape[1]) * np.cos(Xr.astype(LD) @ W + b)
    err = rff.feature_rounding(Xr, Phi)
    assert np.all(np.abs(Phi.astype(LD) - exact) <= err)
    e = row_bounds(err)
    gap = np.sqrt(np.sum((Phi.astype(LD) - exact) ** 2, axis=1)).astype(np.float64)
    assert np.all(gap <= e) and np.all(gap > 0)


@pytest.mark.skipif(np.finfo(np.longdouble).eps > 1e-18, reason="needs extended precision")
@pytest.mark.parametrize("solver", ["snkp", "nkp", "perceptron"])
def test_a_nystroem_separator_holds_for_the_exact_map(solver):
    """Found by review: snkp on 8 points under a Nystroem map with |P| ~ 1e5 claimed
    "separable" with min G alpha = 3e-14 (verified) where the map of its own centres and
    normalization, evaluated in extended precision, gave -6e-13. A separator the library
    returns holds for the exact map."""
    LD = np.longdouble
    X = ILL.X
    y = ILL.Y
    g = ILL.GAMMA
    res = mk.solve(X, y, solver=solver, kernel="nystroem", max_iter=20000,
                   kernel_params={"n_components": 7, "random_state": 196,
                                  "base_params": {"gamma": g}})
    if res.status != "separable":
        assert res.certificate is None or res.certificate.kind != "separator"
        return
    km = res.certificate.kernel
    Phi = ILL.rbf_ld(X, km.components_, g) @ np.asarray(km.normalization_).astype(LD)
    Q = Phi / np.sqrt(np.sum(Phi * Phi, axis=1))[:, None]
    s = np.where(y == res.classes_[1], 1, -1).astype(LD)
    alpha = np.asarray(res.dual_coef_, dtype=np.float64).astype(LD)
    G_alpha = s * (Q @ (Q.T @ (s * alpha)))
    assert np.min(G_alpha) > 0


def test_the_referee_reads_only_marginkits_own_maps_with_their_bounds():
    """Found by review: a Nystroem map over an rff base took the base's default careful
    block (a few ulps) where its phases carry 1e-10, and a false separator verified; a
    subclass of the Nystroem kernel with a map of its own was refereed on its parent's
    map. The first bounds nothing (no claim), the second is read through its own map."""
    from marginkit.certificates import _referee_features
    from marginkit.kernels.approximation import NystroemKernel

    X = np.random.default_rng(0).normal(size=(20, 2))
    over = mk.get_plugin("kernel", "nystroem")(
        base=mk.get_plugin("kernel", "rff")(gamma=1.0, n_components=10, random_state=1),
        n_components=5, random_state=0).fit(X)
    assert np.all(np.isinf(over.careful_features(X)[1]))

    class Ones(NystroemKernel):
        def _transform(self, A):
            return np.ones((A.shape[0], self.components_.shape[0]))

    sub = Ones(n_components=5, random_state=0).fit(X)
    P, tau = _referee_features(sub, X)
    assert tau is None and np.all(P == 1.0)
