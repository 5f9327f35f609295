"""Hostile but legal edits and inputs found by review: each test fails without its fix.

A certificate edited after the run (its arrays given another shape or dtype) must be
rejected, never verified for a claim that does not hold.
"""
import copy

import numpy as np

import marginkit as mk


def _infeasibility_certificate():
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((40, 3)), rng.choice([-1, 1], 40)
    res = mk.solve(X, y, solver="nvn")
    assert res.status == "infeasible"
    return res.certificate


def _nearly_flat_separable():
    """Two points separable through the origin with a margin of about 1e-4."""
    X = np.array([[1.0, 1e-4], [1.0, -1e-4]])
    y = np.array([1, -1])
    assert mk.solve(X, y, solver="perceptron").status == "separable"
    return X, y


def test_an_infeasibility_certificate_with_p_as_a_matrix_is_rejected():
    """p replaced by k copies of the uniform vector as the columns of an n x k matrix (each
    scaled 1/k, so sum(p) = 1): the columns' norms, added in quadrature, are 1/sqrt(k) of
    ||p||_G, below eps for k large, on data that are separable."""
    X, y = _nearly_flat_separable()
    cert = copy.copy(_infeasibility_certificate())
    k = 100_000
    cert.p = np.full((2, k), 1.0 / (2 * k))
    verdict = cert.check(X, y)
    assert not verdict and "p must be a real vector" in verdict.reason
    cert.p = np.full((2, 1), 0.5)
    assert not cert.check(X, y)
    cert.p = np.full(2, 0.5)  # the claim itself: false on separable data
    assert not cert.check(X, y)


def test_a_separator_certificate_with_alpha_of_another_kind_is_rejected():
    X, y = _nearly_flat_separable()
    cert = mk.solve(X, y, solver="perceptron").certificate
    assert cert.verify(X, y)
    for alpha in (cert.alpha.reshape(-1, 1), cert.alpha + 0j, cert.alpha.astype(object)):
        forged = copy.copy(cert)
        forged.alpha = alpha
        verdict = forged.check(X, y)
        assert not verdict and "alpha must be a real vector" in verdict.reason
