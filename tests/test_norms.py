"""The shared row-norm helper: every layout gives the float64 sums of squares of the rows."""
import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose

from marginkit.linalg._norms import row_norms, row_sqnorms


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["C", "F", "csr32", "csr64", "csc"])
def test_row_sqnorms_every_layout(layout, dtype):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 7)).astype(dtype)
    X[rng.random(X.shape) < 0.5] = 0.0
    X[4] = 0.0
    expected = (X.astype(np.float64) ** 2).sum(axis=1)
    if layout == "F":
        A = np.asfortranarray(X)
    elif layout.startswith("csr"):
        A = sp.csr_matrix(X)
        idx = np.int32 if layout == "csr32" else np.int64
        A.indices, A.indptr = A.indices.astype(idx), A.indptr.astype(idx)
    elif layout == "csc":
        A = sp.csc_matrix(X)
    else:
        A = X
    got = row_sqnorms(A)
    assert got.dtype == np.float64
    assert_allclose(got, expected, rtol=1e-13)
    assert got[4] == 0.0
    assert row_sqnorms(A, dtype=dtype).dtype == dtype


def test_row_norms_neither_overflow_nor_underflow():
    X = np.array([[3e200, 4e200], [3e-200, 4e-200], [0.0, 0.0], [3.0, 4.0]])
    assert_allclose(row_norms(X), [5e200, 5e-200, 0.0, 5.0], rtol=1e-15)
    assert_allclose(row_norms(sp.csr_matrix(X)), [5e200, 5e-200, 0.0, 5.0], rtol=1e-15)
    with np.errstate(over="ignore", under="ignore"):
        assert not np.isfinite(np.sqrt(row_sqnorms(X)[0]))  # what the safe path avoids


def test_sqnorms_kernel_refuses_an_out_of_another_length():
    from marginkit.kernels._gram import sqnorms
    from marginkit.utils._rows import row_block

    X = np.ones((5, 3))
    with pytest.raises(ValueError, match="out has 4 entries for 5 rows"):
        sqnorms(row_block(X), np.empty(4))
    with pytest.raises(ValueError, match="out has 6 entries for 5 rows"):
        sqnorms(row_block(sp.csr_matrix(X)), np.empty(6))
