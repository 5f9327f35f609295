"""Holes found by fuzzing the public surface from outside: each test fails without its fix.

Crash-type findings (a segfault, an abort, a hang) run in a child process through the
hostile worker's harness, so they fail their test alone.
"""
import numpy as np
import pytest
import scipy.sparse as sp

import marginkit as mk
from marginkit.kernels._periodic import periodic_cosine_series


def test_spline_kernel_of_odd_integer_order_has_a_diagonal():
    """order=3 went through the near-odd expansion with a scalar t (the diagonal's
    C_q(0)), which indexed a float: TypeError inside fista, dcd and iterated_tikhonov."""
    c0 = periodic_cosine_series(0.0, 3.0)
    assert c0.shape == () and np.isclose(float(c0), 1.2020569031595942)  # zeta(3)
    assert float(periodic_cosine_series(0.3, 3.0)) == periodic_cosine_series([0.3], 3.0)[0]
    rng = np.random.default_rng(0)
    X = rng.uniform(size=(30, 3))
    y = np.where(X[:, 0] > 0.5, 1, -1)
    for solver in ("fista", "iterated_tikhonov"):
        res = mk.solve(X, y, solver=solver, kernel="spline", kernel_params={"order": 3})
        assert res.certificate.verify(X, y)


def _separable(n=30, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:, 0] += np.where(np.arange(n) % 2, 2.0, -2.0)
    return X, np.where(np.arange(n) % 2, 1, -1)


def test_a_callable_kernel_returning_complex_values_is_refused():
    """The block went through np.asarray(K, dtype=float64), which drops the imaginary
    part with only a ComplexWarning: the solve ran on another kernel than the user's."""
    X, y = _separable()

    def complex_kernel(A, B):
        return A @ B.T + 1j * np.sign(A[:, :1] - B[:, :1].T)

    for solver in ("snkp", "fista", "iterated_tikhonov"):
        with pytest.raises(ValueError, match=r"callable kernel complex_kernel returned a "
                                             r"complex block"):
            mk.solve(X, y, solver=solver, kernel=complex_kernel)


@pytest.mark.parametrize("layout", ["dense", "csr"])
def test_a_callable_kernel_cannot_write_into_the_callers_X(layout):
    """The function was handed the caller's own array (dense) or a csr_array on the
    caller's CSR arrays: a function writing into its argument changed the user's data."""
    X, y = _separable()
    X = sp.csr_matrix(X) if layout == "csr" else X
    before = (X.data if layout == "csr" else X).copy()
    refused = []

    def writing_kernel(A, B):
        try:
            if layout == "csr":
                A.data[0] = 99.0
            else:
                A[0, 0] = 99.0
        except ValueError:
            refused.append(True)
        K = A @ B.T
        return K.toarray() if sp.issparse(K) else K

    mk.solve(X, y, solver="snkp", kernel=writing_kernel)
    assert refused
    np.testing.assert_array_equal(X.data if layout == "csr" else X, before)
