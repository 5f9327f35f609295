"""Gram operators (paper 000, sec. 3): G a and G e_j against a dense numpy reference."""
import types

import numpy as np
import pytest
import scipy.sparse as sp

import marginkit as mk
from marginkit.linalg._operator import DenseGramOperator, FeatureOperator, make_operator


def _reference_G(X, y, K=None, normalize=True):
    Xd = np.asarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64)
    if K is None:
        K = Xd @ Xd.T
    d = np.sqrt(np.diag(K)) if normalize else np.ones(K.shape[0])
    s = y / d
    return s[:, None] * K * s[None, :]


def _data(rng, n=40, d=7, density=0.5):
    X = rng.normal(size=(n, d))
    X[rng.random((n, d)) > density] = 0.0
    X[:, 0] += 0.5  # no zero rows
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return X, y


def _int64_csr(A, indptr_dtype=np.int64):
    """A copy of CSR ``A`` with int64 indices (the scipy constructor would downcast them)."""
    out = sp.csr_matrix(A.shape, dtype=A.dtype)
    out.data = A.data.copy()
    out.indices = A.indices.astype(np.int64)
    out.indptr = A.indptr.astype(indptr_dtype)
    return out


def _layouts(X):
    c32 = sp.csr_matrix(X)
    c64 = _int64_csr(c32)
    out = {}
    for dt in (np.float64, np.float32):
        Xt = X.astype(dt)
        out[f"C-{np.dtype(dt).name}"] = np.ascontiguousarray(Xt)
        out[f"F-{np.dtype(dt).name}"] = np.asfortranarray(Xt)
        out[f"csr32-{np.dtype(dt).name}"] = c32.astype(dt)
        out[f"csr64-{np.dtype(dt).name}"] = c64.astype(dt)
    return out


def _problem(X, y, kernel, budget=2.0 * 2**30):
    return types.SimpleNamespace(X=X, y=y, kernel=kernel,
                                 config=types.SimpleNamespace(memory_budget=budget))


@pytest.mark.parametrize("normalize", [True, False])
def test_feature_operator_all_layouts(rng, normalize):
    X, y = _data(rng)
    a = rng.normal(size=X.shape[0])
    for name, Phi in _layouts(X).items():
        G = _reference_G(Phi.astype(np.float64), y, normalize=normalize)
        before = Phi.copy()
        op = FeatureOperator(Phi, y, normalize=normalize)
        tol = 1e-12 if "float64" in name else 1e-5
        scale = np.abs(G).sum(axis=1).max() * np.abs(a).max()
        np.testing.assert_allclose(op.dot(a), G @ a, atol=tol * scale, err_msg=name)
        for j in (0, 5, X.shape[0] - 1):
            np.testing.assert_allclose(op.col(j), G[:, j], atol=tol, err_msg=name)
            rows = [3, j, 0, 7]
            np.testing.assert_allclose(op.col_entries(j, rows), G[rows, j], atol=tol,
                                       err_msg=name)
        # never copied or modified
        assert op.phi is Phi
        if sp.issparse(Phi):
            assert (Phi != before).nnz == 0 and Phi.indices.dtype == before.indices.dtype
        else:
            np.testing.assert_array_equal(Phi, before)


def test_feature_operator_reads_rows_through_a_row_block(rng):
    """C-order and CSR feature rows are one row block of the arrays the operator holds
    (the class of their value and index types); F-order ones are read by columns."""
    X, y = _data(rng)
    for name, Phi in _layouts(X).items():
        op = FeatureOperator(Phi, y)
        if name.startswith("F-"):
            assert op.rows is None
            continue
        bits = "64" if op.phi.dtype == np.float64 else "32"
        if sp.issparse(Phi):
            kind = f"CSRRows{bits}I{op.phi.indices.dtype.itemsize * 8}"
            held = (op.phi.data, op.phi.indices, op.phi.indptr)
        else:
            kind, held = f"DenseRows{bits}", (Phi,)
        assert type(op.rows).__name__ == kind, name
        assert op.rows.shape == Phi.shape
        assert all(a is b for a, b in zip(op.rows.arrays, held, strict=True)), name


def test_feature_operator_primal(rng):
    X, y = _data(rng)
    a = rng.random(X.shape[0])
    op = FeatureOperator(sp.csr_matrix(X), y)
    w = op.primal(a)
    expected = X.T @ (a * y / np.linalg.norm(X, axis=1))
    np.testing.assert_allclose(w, expected, atol=1e-12)
    np.testing.assert_allclose(op.features_dot(w), op.dot(a), atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_dense_gram_operator(rng, dtype):
    X, y = _data(rng)
    K = np.exp(-0.3 * ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    Kc = K.copy()
    op = DenseGramOperator(K, y, dtype=dtype)
    np.testing.assert_array_equal(K, Kc)  # not owned: the caller's matrix is untouched
    assert op.single == (dtype == np.float32)
    G = _reference_G(X, y, K=K)
    a = rng.normal(size=X.shape[0])
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(op.dot(a), G @ a, atol=tol * np.abs(a).sum())
    np.testing.assert_allclose(op.col(3), G[:, 3], atol=tol)
    np.testing.assert_allclose(op.col_entries(3, [0, 3, 9]), G[[0, 3, 9], 3], atol=tol)
    np.testing.assert_allclose(np.diag(op.gram), 1.0, atol=tol)
    with pytest.raises(IndexError, match="row index"):
        op.col_entries(3, [X.shape[0]])


def test_make_operator_picks_implementation(rng):
    X, y = _data(rng)
    lin = mk.get_plugin("kernel", "linear")()
    rbf = mk.get_plugin("kernel", "rbf")(gamma=0.2)
    pre = mk.get_plugin("kernel", "precomputed")()
    op = make_operator(_problem(X, y, lin))
    assert isinstance(op, FeatureOperator) and op.phi is X
    op = make_operator(_problem(X.astype(np.float32), y, rbf))
    assert isinstance(op, DenseGramOperator) and op.single
    K = rbf(X, X)
    G = _reference_G(X, y, K=np.asarray(K, dtype=np.float64))
    Kc = K.copy()
    op = make_operator(_problem(K, y, pre))
    assert isinstance(op, DenseGramOperator)
    np.testing.assert_array_equal(K, Kc)
    a = rng.normal(size=X.shape[0])
    np.testing.assert_allclose(op.dot(a), G @ a, atol=1e-10)
    opu = make_operator(_problem(X, y, lin), normalize=False)
    np.testing.assert_allclose(opu.dot(a), _reference_G(X, y, normalize=False) @ a, atol=1e-10)
    np.testing.assert_allclose(opu.sqrt_diag, np.linalg.norm(X, axis=1))


def test_memory_budget_refused(rng):
    X, y = _data(rng, n=100)
    rbf = mk.get_plugin("kernel", "rbf")()
    with pytest.raises(ValueError, match=r"n=100 needs .* GiB for the Gram matrix; raise "
                                         r"memory_budget or use a kernel approximation"):
        make_operator(_problem(X, y, rbf, budget=100 * 100 * 8 - 1))
    # float32 input needs half: fits in the same budget
    op = make_operator(_problem(X.astype(np.float32), y, rbf, budget=100 * 100 * 8 - 1))
    assert op.single
    # the linear kernel never forms the Gram
    lin = mk.get_plugin("kernel", "linear")()
    assert isinstance(make_operator(_problem(X, y, lin, budget=1.0)), FeatureOperator)


def test_zero_points_rejected(rng):
    X, y = _data(rng)
    X[[3, 17]] = 0.0
    for Phi in (X, sp.csr_matrix(X), X.astype(np.float32)):
        with pytest.raises(ValueError, match=r"row\(s\) \[3, 17\] of X have K\(x, x\) = 0"):
            FeatureOperator(Phi, y)
    K = X @ X.T
    with pytest.raises(ValueError, match=r"row\(s\) \[3, 17\]"):
        DenseGramOperator(K, y)


def test_solve_reports_zero_rows(rng):
    X, y = _data(rng)
    X[5] = 0.0
    with pytest.raises(ValueError, match=r"row\(s\) \[5\]"):
        mk.solve(X, y, solver="snkp")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("index", ["int32", "int64", "int32/int64 indptr", "int64/int32 indptr"])
def test_csr_row_norms_without_copies(rng, dtype, index):
    """Row norms of CSR input (both dtypes, int32/int64 and mixed index arrays) equal the dense
    float64 ones, the operator shares the caller's data and indices, and building it
    allocates no nnz-sized temporary (tracemalloc sees numpy's allocations)."""
    import tracemalloc

    from marginkit.linalg._norms import row_sqnorms as _row_sqnorms

    n, d, per_row = 3000, 400, 40
    A = sp.random(n, d, density=per_row / d, format="csr", random_state=0, dtype=np.float64)
    A.data += 0.5
    A = A.astype(dtype)
    if index == "int64":
        A = _int64_csr(A)
    elif index == "int32/int64 indptr":
        A.indptr = A.indptr.astype(np.int64)
    elif index == "int64/int32 indptr":
        A = _int64_csr(A, indptr_dtype=np.int32)
    A.data[A.indptr[7]:A.indptr[8]] = 0.0  # an all-zero stored row
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    dense = A.toarray().astype(np.float64)
    expected = np.einsum("ij,ij->i", dense, dense)
    np.testing.assert_allclose(_row_sqnorms(A), expected, rtol=1e-13)
    assert _row_sqnorms(A)[7] == 0.0
    A.data[A.indptr[7]:A.indptr[8]] = 1.0
    expected[7] = float(A.indptr[8] - A.indptr[7])
    data_before, indices_before = A.data.copy(), A.indices.copy()
    tracemalloc.start()
    try:
        op = FeatureOperator(A, y)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    np.testing.assert_allclose(op.sqrt_diag ** 2, expected, rtol=1e-13)
    # O(n + d) work vectors only: far below one copy of the values or of the indices
    assert peak < 0.5 * min(A.data.nbytes, A.indices.nbytes), (peak, A.data.nbytes)
    assert np.shares_memory(op.phi.data, A.data) and np.shares_memory(op.phi.indices, A.indices)
    if "/" not in index:
        assert op.phi is A
    np.testing.assert_array_equal(A.data, data_before)
    np.testing.assert_array_equal(A.indices, indices_before)
    assert A.indptr.dtype == (np.int32 if index in ("int32", "int64/int32 indptr") else np.int64)
    a = rng.normal(size=n)
    G = _reference_G(A, y)
    np.testing.assert_allclose(op.dot(a), G @ a,
                               atol=(1e-12 if dtype == np.float64 else 1e-5) * np.abs(G).sum(1).max())


@pytest.mark.parametrize("order", ["C", "F"])
def test_feature_operator_sparse_vector_rows_only(rng, order):
    """A vector with few nonzeros (the l2 smoother's projections) takes the rows-only path
    of the float64 dense layouts; both paths agree with the reference."""
    X, y = _data(rng, n=64, d=5, density=1.0)
    Xo = np.asarray(X, order=order)
    op = FeatureOperator(Xo, y)
    G = _reference_G(X, y)
    for nnz in (1, 3, 16, 17, 64):  # 16 * 4 <= 64: rows only; 17 and up: BLAS
        a = np.zeros(64)
        a[rng.choice(64, nnz, replace=False)] = rng.random(nnz)
        np.testing.assert_allclose(op.dot(a), G @ a, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(op.primal(a), Xo.T @ (a * op.scale), rtol=1e-12, atol=1e-13)
