"""Smoothers ``entropy`` and ``l2`` (paper 000, secs. 4 and 6) against brute force."""
import numpy as np
import pytest

import marginkit as mk

scipy_optimize = pytest.importorskip("scipy.optimize")


def _brute_force(g, mu, d):
    """argmin over the simplex of <g, p> + mu d(p) by SLSQP."""
    n = g.shape[0]
    res = scipy_optimize.minimize(
        lambda p: g @ p + mu * d(p), np.full(n, 1.0 / n), method="SLSQP",
        bounds=[(0.0, 1.0)] * n, constraints=[{"type": "eq", "fun": lambda p: p.sum() - 1.0}],
        options={"ftol": 1e-14, "maxiter": 500})
    return res.x


def _entropy(p):
    p = np.clip(p, 1e-300, None)
    return float(np.sum(p * np.log(p)) + np.log(p.shape[0]))


def test_registered():
    assert {"entropy", "l2"} <= set(mk.list_plugins()["smoother"])
    assert mk.get_plugin("smoother", "entropy").strong_convexity_norm == "l1"
    assert mk.get_plugin("smoother", "l2").strong_convexity_norm == "l2"


@pytest.mark.parametrize("mu", [0.05, 0.5, 5.0])
def test_entropy_matches_brute_force(rng, mu):
    sm = mk.get_plugin("smoother", "entropy")()
    for _ in range(3):
        g = rng.normal(size=6)
        p = sm.argmin_simplex(g, mu)
        assert p.min() >= 0 and abs(p.sum() - 1) < 1e-12
        ref = _brute_force(g, mu, _entropy)
        obj = lambda q: g @ q + mu * _entropy(q)  # noqa: E731
        assert obj(p) <= obj(ref) + 1e-9
        np.testing.assert_allclose(p, ref, atol=2e-4)
        # closed form: softmax(-g/mu)
        e = np.exp(-(g - g.min()) / mu)
        np.testing.assert_allclose(p, e / e.sum(), rtol=1e-12)


def test_entropy_is_stable_for_huge_scores(rng):
    sm = mk.get_plugin("smoother", "entropy")()
    g = np.array([1e6, -1e6, 3.0, -1e6 + 1.0])
    p = sm.argmin_simplex(g, 1e-3)
    assert np.all(np.isfinite(p)) and abs(p.sum() - 1) < 1e-12
    assert p[1] == pytest.approx(1.0)
    # value: d(1/n) = 0, d(vertex) = log n
    n = 5
    assert sm.value(np.full(n, 1 / n)) == pytest.approx(0.0, abs=1e-15)
    assert sm.value(np.eye(n)[2]) == pytest.approx(np.log(n))


@pytest.mark.parametrize("mu", [0.01, 0.3, 10.0])
def test_l2_matches_brute_force_and_kkt(rng, mu):
    sm = mk.get_plugin("smoother", "l2")()
    n = 7
    for _ in range(3):
        g = rng.normal(size=n)
        q = rng.dirichlet(np.ones(n))
        p = sm.argmin_simplex(g, mu, q)
        assert p.min() >= 0 and abs(p.sum() - 1) < 1e-12
        ref = _brute_force(g, mu, lambda r: 0.5 * np.sum((r - q) ** 2))
        np.testing.assert_allclose(p, ref, atol=1e-5)
        # KKT: grad = g + mu (p - q) equals a constant lambda on the support, >= lambda off it
        grad = g + mu * (p - q)
        on = p > 1e-12
        lam = grad[on].mean()
        np.testing.assert_allclose(grad[on], lam, atol=1e-10 * max(1.0, mu))
        assert np.all(grad[~on] >= lam - 1e-10 * max(1.0, mu))
        assert sm.value(p, q) == pytest.approx(0.5 * np.sum((p - q) ** 2))


def test_l2_default_center_and_projection(rng):
    sm = mk.get_plugin("smoother", "l2")()
    # g = 0: the minimizer is the center
    np.testing.assert_allclose(sm.argmin_simplex(np.zeros(4), 1.0), np.full(4, 0.25))
    q = np.array([0.1, 0.2, 0.3, 0.4])
    np.testing.assert_allclose(sm.argmin_simplex(np.zeros(4), 1.0, q), q)
    # tiny mu: a vertex at argmin g
    np.testing.assert_allclose(sm.argmin_simplex(np.array([3.0, -1.0, 2.0]), 1e-9), [0, 1, 0])
    with pytest.raises(ValueError, match="simplex"):
        sm.argmin_simplex(np.zeros(3), 1.0, q=np.array([0.5, 0.6, -0.1]))
    with pytest.raises(ValueError, match="mu"):
        sm.argmin_simplex(np.zeros(3), 0.0)


def test_python_smoother_adapter(rng):
    """A third-party smoother with only argmin_simplex runs through the GIL adapter."""
    from marginkit.smoothers.builtin import cython_smoother

    class MySmoother(mk.plugins.Smoother):
        strong_convexity_norm = "l1"

        def argmin_simplex(self, g, mu, q=None):
            e = np.exp(-(g - g.min()) / mu)
            return e / e.sum()

        def value(self, p, q=None):
            return _entropy(np.asarray(p))

    cy = cython_smoother(MySmoother())
    g = rng.normal(size=5)
    np.testing.assert_allclose(cy.argmin_simplex(g, 0.3),
                               mk.get_plugin("smoother", "entropy")().argmin_simplex(g, 0.3))
    assert cy.value(np.full(5, 0.2)) == pytest.approx(0.0, abs=1e-12)
