"""The row blocks of the Cython kernels (``marginkit.utils._rows``): every layout gives the
kernels the same rows."""
import pickle

import numpy as np
import pytest
import scipy.sparse as sp

import marginkit as mk
from marginkit.solvers.svm import _fast as _svm_fast
from marginkit.solvers.tikhonov import _fast as _tikhonov_fast
from marginkit.utils._rows import LAYOUTS, ByLayout, row_block


def _matrix(n=37, d=11, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * (rng.random((n, d)) < 0.3)
    X[5] = 0.0  # an empty row
    return X


def _layouts(X):
    """(name, block input) for the six layouts; the float32 ones hold X rounded."""
    out = []
    for dt in (np.float64, np.float32):
        Xd = np.ascontiguousarray(X, dtype=dt)
        out.append((f"dense {np.dtype(dt).name}", Xd))
        for it in (np.int32, np.int64):
            C = sp.csr_matrix(Xd)
            C.indices = C.indices.astype(it)
            C.indptr = C.indptr.astype(it)
            out.append((f"csr {np.dtype(dt).name} {np.dtype(it).name}", C))
    return out


@pytest.mark.parametrize("name", [n for n, _ in _layouts(_matrix())])
def test_row_block_layouts(name):
    X = _matrix()
    B = dict(_layouts(X))[name]
    blk = row_block(B)
    assert blk.shape == X.shape
    assert blk.dense == name.startswith("dense")
    kind = {"dense float64": "DenseRows64", "dense float32": "DenseRows32",
            "csr float64 int32": "CSRRows64I32", "csr float64 int64": "CSRRows64I64",
            "csr float32 int32": "CSRRows32I32", "csr float32 int64": "CSRRows32I64"}[name]
    assert type(blk).__name__ == kind
    # the block keeps the arrays alive and copies nothing
    held = blk.arrays
    if sp.issparse(B):
        assert held[0] is B.data and held[1] is B.indices and held[2] is B.indptr
    else:
        assert held[0] is B
    # a pickled block is packed again from its arrays, in the same layout
    again = pickle.loads(pickle.dumps(blk))
    assert type(again) is type(blk) and again.shape == blk.shape
    acc, t = np.empty(X.shape[1]), np.empty(X.shape[0])
    v = np.linspace(-1.0, 1.0, X.shape[1])
    ref = _svm_fast.gram_power_matvec(blk, v, 0.0, acc, t), acc.copy()
    assert (_svm_fast.gram_power_matvec(again, v, 0.0, acc, t), acc.copy())[0] == ref[0]
    np.testing.assert_array_equal(acc, ref[1])


@pytest.mark.parametrize("name", [n for n, _ in _layouts(_matrix())])
def test_kernels_read_every_layout_alike(name):
    X = _matrix()
    B = dict(_layouts(X))[name]
    Xr = B.toarray() if sp.issparse(B) else B
    Xr = Xr.astype(np.float64)
    n, d = X.shape
    rng = np.random.default_rng(1)
    v = rng.standard_normal(d)
    blk = row_block(B)
    # t = X v + offset, acc = X^T t
    acc, t = np.empty(d), np.empty(n)
    tsum, tsq = _svm_fast.gram_power_matvec(blk, v, 0.5, acc, t)
    np.testing.assert_allclose(t, Xr @ v + 0.5, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(acc, Xr.T @ t, rtol=1e-12, atol=1e-12)
    assert tsum == pytest.approx(t.sum()) and tsq == pytest.approx(t @ t)
    # c = X (s^2 m), xsq = ||s x_i||^2, and the long-double row products
    s, m = rng.random(d) + 0.5, rng.standard_normal(d)
    c, xsq = np.empty(n), np.empty(n)
    _svm_fast.row_statistics(blk, s, s * s * m, c, xsq)
    np.testing.assert_allclose(c, Xr @ (s * s * m), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(xsq, ((Xr * s) ** 2).sum(1), rtol=1e-12, atol=1e-13)
    th, Mth = np.zeros(n, dtype=np.longdouble), np.zeros(n)
    _svm_fast.ref_matvec_ld(blk, v, np.abs(v), th, Mth)
    np.testing.assert_allclose(th.astype(np.float64), Xr @ v, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(Mth, np.abs(Xr) @ np.abs(v), rtol=1e-13, atol=1e-13)
    # column statistics: the stored entries' largest magnitudes
    cm = np.zeros(d)
    _svm_fast.column_max(blk, cm)
    np.testing.assert_array_equal(cm, np.abs(Xr).max(0))




@pytest.mark.parametrize("name", [n for n, _ in _layouts(_matrix())])
def test_referee_rmatvec_over_several_row_blocks(name):
    # the referee's X^T u over REF_ROWS-row blocks (a CSR block keeps the sums of the
    # columns its rows touch only): equal to the long-double product, heavy columns
    # ("skip") left out of a CSR block's sums and mean term, every column centred in a
    # dense one
    rng = np.random.default_rng(4)
    n, d = 2600, 300  # three row blocks, each touching part of the columns
    X = rng.standard_normal((n, d)) * (rng.random((n, d)) < 0.004)
    B = dict(_layouts(X))[name]
    Xr = (B.toarray() if sp.issparse(B) else B).astype(np.longdouble)
    u, r = rng.standard_normal(n), rng.random(n)
    m = rng.standard_normal(d) * 0.1
    skip = (rng.random(d) < 0.2).astype(np.uint8)
    a, mag = np.zeros(d, dtype=np.longdouble), np.zeros(d)
    longest = _svm_fast.ref_rmatvec(row_block(B), skip, m, u, r, a, mag)
    C = Xr - m.astype(np.longdouble)  # centred entries (dense: all; CSR: stored + mean)
    if sp.issparse(B):
        keep = skip == 0
        want = Xr.T @ u.astype(np.longdouble) - m.astype(np.longdouble) * np.sum(u.astype(np.longdouble))
        want_mag = np.abs(Xr).T @ r + np.abs(m) * r.sum()
        np.testing.assert_allclose(a[keep].astype(np.float64), want[keep].astype(np.float64),
                                   rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(mag[keep], want_mag[keep].astype(np.float64), rtol=1e-12)
        assert np.all(a[~keep] == 0) and np.all(mag[~keep] == 0)
        assert longest == int(np.diff(B.indptr).max())
    else:
        np.testing.assert_allclose(a.astype(np.float64), (C.T @ u).astype(np.float64),
                                   rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(mag, (np.abs(C).T @ r).astype(np.float64), rtol=1e-12)
        assert longest == d

def test_layout_kernels_dispatch_through_a_table():
    # every fused kernel of one row-block argument is a ByLayout (a table of its compiled
    # specializations); kernels fused over other types too keep Cython's dispatch
    import importlib

    wrapped = 0
    for name in ("marginkit.solvers.svm._fast", "marginkit.solvers.perceptron._fast",
                 "marginkit.solvers.tikhonov._fast", "marginkit.kernels._gram"):
        for fn in vars(importlib.import_module(name)).values():
            sig = getattr(fn, "__signatures__", None)
            assert not (sig and LAYOUTS.issuperset(sig)), f"{name}: {fn} is not wrapped"
            if isinstance(fn, ByLayout):
                assert LAYOUTS.issuperset(fn.__wrapped__.__signatures__)
                wrapped += 1
    assert wrapped >= 20
    # the table calls the block's own specialization, and refuses what is no block as
    # Cython's dispatch does
    cm = np.zeros(11)
    for _, B in _layouts(_matrix()):
        blk = row_block(B)
        ref = np.zeros(11)
        _svm_fast.column_max.__wrapped__[type(blk)](blk, ref)
        cm[:] = 0.0
        _svm_fast.column_max(blk, cm)
        np.testing.assert_array_equal(cm, ref)
    with pytest.raises(TypeError, match="No matching signature"):
        _svm_fast.column_max(_matrix(), cm)

def test_layout_table_refuses_a_block_of_no_layout_and_serves_subclasses():
    # the RowBlock base class is no layout: a TypeError as for any other argument, not
    # the table's KeyError; a subclass of a layout is served by that layout's kernel (as
    # Cython's isinstance dispatch serves it)
    from marginkit.utils._rows import DenseRows64, RowBlock

    cm = np.zeros(11)
    for bad in (None, np.zeros((3, 11)), RowBlock.__new__(RowBlock), 3):
        with pytest.raises(TypeError, match="No matching signature"):
            _svm_fast.column_max(bad, cm)
        with pytest.raises(TypeError, match="No matching signature"):
            _tikhonov_fast.hessian_matvec(bad, np.zeros(11), 0.0, np.zeros(3), np.zeros(11))

    class Sub(DenseRows64):
        pass

    sub = Sub.__new__(Sub)  # an empty block (0 x 0): the kernel reads nothing
    assert _tikhonov_fast.hessian_matvec(sub, np.zeros(0), 0.0, np.zeros(0), np.zeros(0)) == 0.0
    # the DenseRows64 kernel's own check answers
    with pytest.raises(ValueError, match=r"hessian_matvec: v \(2\) and out \(0\)"):
        _tikhonov_fast.hessian_matvec(sub, np.zeros(2), 0.0, np.zeros(0), np.zeros(0))


def test_layout_kernels_pickle_by_reference():
    # a ByLayout kernel pickles as the module function it is (the fused function it
    # wraps is not that object, so pickle refused it)
    fn = pickle.loads(pickle.dumps(_svm_fast.column_max))
    assert fn is _svm_fast.column_max


def test_layout_kernels_take_the_block_by_keyword():
    # as the fused function they wrap: the block named by its parameter
    B = np.ascontiguousarray(_matrix(), dtype=np.float64)
    cm = np.zeros(B.shape[1])
    _svm_fast.column_max(X=row_block(B), colmax=cm)
    ref = np.zeros(B.shape[1])
    _svm_fast.column_max(row_block(B), ref)
    np.testing.assert_array_equal(cm, ref)
    assert np.any(cm != 0)


def test_int64_indices_solve_as_int32():
    X, y = mk.datasets.load_libsvm("heart_scale")
    X64 = X.copy()
    X64.indices = X64.indices.astype(np.int64)
    X64.indptr = X64.indptr.astype(np.int64)
    for solver in ("fista", "dcd"):
        a = mk.solve(X, y, solver=solver, random_state=0)
        b = mk.solve(X64, y, solver=solver, random_state=0)
        assert (a.status, a.n_iter) == (b.status, b.n_iter)
        np.testing.assert_array_equal(a.coef_, b.coef_)


def test_row_block_rejects_what_it_cannot_point_into():
    X = _matrix()
    with pytest.raises(ValueError, match="X: a dense row block is C-contiguous"):
        row_block(np.asfortranarray(X))
    with pytest.raises(TypeError, match="X: a row block holds float32 or float64 values"):
        row_block(X.astype(np.int64))
    with pytest.raises(ValueError, match="X: a row block is 2-d"):
        row_block(X[0])
    with pytest.raises(TypeError, match="X: a row block is a C-contiguous ndarray or a CSR"):
        row_block(sp.csc_matrix(X))
    C = sp.csr_matrix(X)
    C.indptr = C.indptr.astype(np.int64)
    with pytest.raises(TypeError, match="X: CSR indices and indptr of one type"):
        row_block(C)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [13, 16, 3])
def test_dense_scaling_passes_are_the_entry_by_entry_sums(dtype, n):
    # the dense passes of the scaling statistics run four rows at a time: their sums must
    # be the entry-by-entry sums in row order (the CSR loop over a matrix that stores every
    # entry), bit for bit, for the groups of four and the rest, at magnitudes that make the
    # order of the additions visible
    rng = np.random.default_rng(n)
    d = 7
    X = (rng.standard_normal((n, d)) * 10.0 ** rng.integers(-9, 10, (n, d))).astype(dtype)
    full = sp.csr_matrix(X)
    assert full.nnz == n * d
    inv = 2.0 ** rng.integers(-40, 40, d).astype(np.float64)
    means = rng.standard_normal(d) * 1e3
    start = rng.standard_normal(d)  # the sums are added to (the blocks of a run)
    out = {}
    for name, B in (("dense", np.ascontiguousarray(X)), ("csr", full)):
        sums, cnt = start.copy(), np.zeros(d, dtype=np.int64)
        _svm_fast.column_max_sums(row_block(B), inv, np.zeros(d), sums, cnt)
        ss = start.copy()
        _svm_fast.scaled_sqdev(row_block(B), inv, means, ss)
        out[name] = (sums, cnt, ss)
    for a, b in zip(out["dense"], out["csr"]):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("d", [0, 1, 3, 4, 5, 28])
@pytest.mark.parametrize("name", [n for n, _ in _layouts(_matrix())])
def test_row_statistics_four_partial_sums_are_the_row_sums(name, d):
    # c_i = x_i . s2m and xsq_i = ||sc * x_i||^2 with four partial sums per row, for row
    # lengths below, at and past a multiple of four; zsq and qd follow from them
    X = _matrix(n=19, d=d, seed=d) if d else np.zeros((19, 0))
    X = dict(_layouts(X))[name]
    Xd = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    rng = np.random.default_rng(1)
    sc, s2m = rng.uniform(0.5, 2.0, d), rng.standard_normal(d)
    n, M, shift = Xd.shape[0], 0.75, 0.125
    c, xsq, zsq, qd = (np.full(n, np.nan) for _ in range(4))
    _svm_fast.row_statistics(row_block(X), sc, s2m, c, xsq, M, zsq, qd, shift)
    np.testing.assert_allclose(c, Xd @ s2m, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(xsq, ((Xd * sc) ** 2).sum(axis=1), rtol=1e-14, atol=0)
    np.testing.assert_array_equal(zsq, np.maximum(xsq - 2.0 * c + M, 0.0))
    np.testing.assert_array_equal(qd, zsq + 1.0 + shift)


def _part_bounds(n, P):
    return [(q * n // P, (q + 1) * n // P) for q in range(P)]


@pytest.mark.parametrize("layout", ["dense float64", "dense float32", "csr float64"])
def test_large_block_statistics_by_row_parts(layout):
    # from 2e5 stored entries the scaling passes, the row constants and the first pass of
    # the fresh bound split the rows into parts (``stat_parts``: a count of the data
    # alone), each summed in row order and the parts added in part order: the sums are
    # those of that order bit for bit, and the same on one thread and on two; n is not a
    # multiple of 16 x 4, so parts end inside a group of four dense rows
    threadpoolctl = pytest.importorskip("threadpoolctl")
    rng = np.random.default_rng(7)
    n, d = 24_003, 20
    X = rng.standard_normal((n, d)) * 10.0 ** rng.integers(-6, 7, (n, d))
    if layout.startswith("csr"):
        X = X * (rng.random((n, d)) < 0.6)
        X[:, 4] = 0.0  # a column without stored entries keeps the maximum it starts from
        B = sp.csr_matrix(X)
        nnz = B.nnz
    else:
        B = np.ascontiguousarray(X, dtype=np.float32 if "32" in layout else np.float64)
        X = B.astype(np.float64)
        nnz = n * d
    P = _svm_fast.stat_parts(n, d, nnz)
    assert nnz >= 2e5 and P == min(16, int(nnz / (32 * d)))
    assert _svm_fast.stat_parts(n, d, 1.9e5) == 1
    inv = 2.0 ** rng.integers(-8, 8, d).astype(np.float64)
    means = rng.standard_normal(d)
    start = rng.standard_normal(d)
    sums_ref, ss_ref = start.copy(), start.copy()
    for lo, hi in _part_bounds(n, P):
        sums_ref = sums_ref + np.cumsum(X[lo:hi] * inv, axis=0)[-1]
        dev = X[lo:hi] * inv - means
        if layout.startswith("csr"):
            dev = np.where(X[lo:hi] != 0.0, dev, 0.0)  # only the stored entries
        ss_ref = ss_ref + np.cumsum(dev * dev, axis=0)[-1]
    sc, s2m = rng.uniform(0.5, 2.0, d), rng.standard_normal(d)
    r = np.where(rng.random(n) < 0.3, 0.0, rng.random(n))
    yv, xi = np.where(rng.random(n) < 0.5, 1.0, -1.0), rng.random(n)
    out = {}
    for nt in (1, 2):
        with threadpoolctl.threadpool_limits(nt, user_api="openmp"):
            blk = row_block(B)
            cm, sums, cnt = np.full(d, -1.0), start.copy(), np.zeros(d, dtype=np.int64)
            _svm_fast.column_max_sums(blk, inv, cm, sums, cnt)
            ss = start.copy()
            _svm_fast.scaled_sqdev(blk, inv, means, ss)
            c, xsq = np.empty(n), np.empty(n)
            _svm_fast.row_statistics(blk, sc, s2m, c, xsq)
            fresh, b = np.zeros(d, dtype=np.longdouble), np.zeros(1, dtype=np.longdouble)
            rxi = _svm_fast.fresh_scatter(blk, yv, r, xi, fresh, b)
            out[nt] = (cm, sums, cnt, ss, c, xsq, fresh, b, np.array([rxi]))
    for a, b_ in zip(out[1], out[2]):
        assert np.array_equal(a, b_)
    cm, sums, cnt, ss, c, xsq, fresh, b, rxi = out[2]
    assert np.array_equal(sums, sums_ref) and np.array_equal(ss, ss_ref)
    want_cm = np.abs(X).max(axis=0)
    if layout.startswith("csr"):
        want_cm[4] = -1.0
    assert np.array_equal(cm, want_cm)
    assert np.array_equal(cnt, np.count_nonzero(X, axis=0) if layout.startswith("csr")
                          else np.full(d, n))
    np.testing.assert_allclose(c, X @ s2m, rtol=1e-12, atol=1e-9 * np.abs(X).max())
    np.testing.assert_allclose(xsq, ((X * sc) ** 2).sum(axis=1), rtol=1e-13)
    u = (yv * r).astype(np.longdouble)
    want = (X.astype(np.longdouble).T @ u).astype(np.float64)
    np.testing.assert_allclose(fresh.astype(np.float64), want, rtol=0,
                               atol=1e-15 * float((np.abs(X).T @ r).max()))
    assert float(b[0]) == pytest.approx(float(np.sum(u)), rel=1e-14, abs=1e-12)
    assert rxi[0] == pytest.approx(float(r @ xi), rel=1e-13)


def test_large_block_statistics_keep_nan():
    # a NaN in one part reaches the column's maximum (as np.maximum) and its sums
    threadpoolctl = pytest.importorskip("threadpoolctl")
    n, d = 24_000, 20
    X = np.random.default_rng(3).standard_normal((n, d))
    X[n - 5, 3] = np.nan
    with threadpoolctl.threadpool_limits(2, user_api="openmp"):
        cm, sums, cnt = np.zeros(d), np.zeros(d), np.zeros(d, dtype=np.int64)
        _svm_fast.column_max_sums(row_block(X), np.ones(d), cm, sums, cnt)
    assert np.isnan(cm[3]) and np.isnan(sums[3])
    assert np.all(np.isfinite(np.delete(cm, 3))) and np.all(np.isfinite(np.delete(sums, 3)))


def test_row_pass_arguments_are_checked():
    # the passes write one entry per row or per column: other lengths, and None for an
    # output, are refused before any entry is read or written
    n, d = 50, 4
    blk = row_block(np.random.default_rng(0).standard_normal((n, d)))
    one = np.ones(n)
    ld = np.zeros(1, dtype=np.longdouble)
    for bad in (dict(y=one[1:]), dict(r=one[1:]), dict(xi=one[1:]),
                dict(fresh=np.zeros(d - 1, dtype=np.longdouble)),
                dict(b_out=np.zeros(0, dtype=np.longdouble))):
        kw = dict(y=one, r=one, xi=one, fresh=np.zeros(d, dtype=np.longdouble), b_out=ld)
        kw.update(bad)
        with pytest.raises(ValueError, match=next(iter(bad))):
            _svm_fast.fresh_scatter(blk, kw["y"], kw["r"], kw["xi"], kw["fresh"],
                                    kw["b_out"])
    sc, c = np.ones(d), np.empty(n)
    with pytest.raises(ValueError, match="xsq has 49 entries"):
        _svm_fast.row_statistics(blk, sc, sc, c, np.empty(n - 1))
    with pytest.raises(ValueError, match="zsq has 49 entries"):
        _svm_fast.row_statistics(blk, sc, sc, c, np.empty(n), 0.0, np.empty(n - 1))
    with pytest.raises(TypeError):
        _svm_fast.row_statistics(blk, sc, sc, None, np.empty(n))


@pytest.mark.parametrize("edit", ["indices[3] = 10**6", "indices[3] = -10**6",
                                  "indptr[-1] = 10**7", "indptr[5] = 10**6", "indptr[0] = 1",
                                  "indptr[7] = 0"])
def test_row_block_refuses_a_malformed_csr_structure(edit):
    # row_block is what every compiled kernel reads without bounds checks: a CSR matrix
    # edited after its construction (an index out of range, pointers past the arrays or
    # decreasing) is refused here, not read out of bounds (found by review: a segfault,
    # or heap corruption that surfaced at exit, through _fast.column_max_sums)
    X = sp.random(30, 4, density=0.5, format="csr", random_state=1)
    exec("X." + edit)
    with pytest.raises(ValueError, match=r"^X: (a CSR column index|CSR indptr)"):
        row_block(X)
    for dt in (np.int32, np.int64):
        Y = sp.random(30, 4, density=0.5, format="csr", random_state=1)
        Y.indices, Y.indptr = Y.indices.astype(dt), Y.indptr.astype(dt)
        assert row_block(Y).n == 30  # the genuine matrix, either index type
    assert row_block(sp.csr_matrix((0, 5))).n == 0
