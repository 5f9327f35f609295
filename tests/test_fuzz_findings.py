"""Holes found by fuzzing the public surface from outside: each test fails without its fix.

Crash-type findings (a segfault, an abort, a hang) run in a child process through the
hostile worker's harness, so they fail their test alone.
"""
import numpy as np

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
