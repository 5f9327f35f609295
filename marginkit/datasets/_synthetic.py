"""Synthetic classification problems for the perceptron / von Neumann family (Ramdas & Pena 2014).

``make_separable``           linearly separable, with a prescribed normalized margin rho_2.
``make_xor``                 XOR: not linearly separable, separable with an RBF kernel.
``make_duplicated_opposite`` some points repeated with the opposite label: infeasible for
                             every kernel (an exact witness p with ||p||_G = 0 exists).

References
----------
A. Ramdas and J. Peña, "Margins, Kernels and Non-linear Smoothed Perceptrons",
Proceedings of the 31st International Conference on Machine Learning (ICML 2014);
arXiv:1505.04123.
"""
import numbers

import numpy as np

from .._validation import check_random_state
from ._clusters import refuse_beyond_memory

__all__ = ["make_separable", "make_xor", "make_duplicated_opposite"]


def _check_int(value, name, low):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{name}={value!r} must be an integer >= {low}")
    return int(value)


def _unit_orthogonal(rng, u, size):
    """``size`` random unit vectors orthogonal to the unit vector u."""
    z = rng.normal(size=(size, u.shape[0]))
    z -= np.outer(z @ u, u)
    nz = np.linalg.norm(z, axis=1)
    while np.any(nz < 1e-12):  # measure-zero event; redraw those rows
        bad = nz < 1e-12
        z[bad] = rng.normal(size=(int(bad.sum()), u.shape[0]))
        z[bad] -= np.outer(z[bad] @ u, u)
        nz = np.linalg.norm(z, axis=1)
    return z / nz[:, None]


def make_separable(n_samples=100, n_features=2, margin=0.1, random_state=None):
    """Linearly separable data whose normalized margin is exactly ``margin``.

    The normalized margin (Ramdas & Pena 2014, sec. 2.2) is
    rho_2 = max_{||w|| = 1} min_i y_i w^T x_i / ||x_i||. Points are drawn with
    y_i u^T x_i / ||x_i|| in [margin, 1] for a random unit u; the first two points are a
    +1 / -1 pair at exactly ``margin`` whose signed directions average to u, so u is the
    max-margin direction (KKT) and rho_2 = margin. Norms are random in [0.5, 2] (they do
    not change rho_2, only the unnormalized margin of the classic perceptron).

    Parameters
    ----------
    n_samples : int >= 2
    n_features : int >= 2
    margin : float in (0, 1)
    random_state : None, int or numpy Generator

    Returns
    -------
    X : ndarray (n_samples, n_features), float64
    y : ndarray of -1.0 / +1.0
    direction : ndarray (n_features,)
        The unit max-margin direction u: min_i y_i u^T x_i / ||x_i|| = margin.

    References
    ----------
    A. Ramdas and J. Peña, "Margins, Kernels and Non-linear Smoothed Perceptrons",
    Proceedings of the 31st International Conference on Machine Learning (ICML 2014);
    arXiv:1505.04123.
    """
    n = _check_int(n_samples, "n_samples", 2)
    d = _check_int(n_features, "n_features", 2)
    if not isinstance(margin, numbers.Real) or not 0.0 < margin < 1.0:
        raise ValueError(f"margin={margin!r} must be in (0, 1)")
    rng = check_random_state(random_state)
    with refuse_beyond_memory(f"n_samples={n}, n_features={d}", "X (float64, with temporaries "
                              "of its size)", 8 * n * d, "ask for fewer samples or features"):
        u = rng.normal(size=d)
        u /= np.linalg.norm(u)
        # cosines with u in [margin, 1], random sides
        t = rng.uniform(margin, 1.0, size=n)
        y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
        v = _unit_orthogonal(rng, u, n)
        # the support pair: y x/||x|| = margin u +- sqrt(1 - margin^2) v, which average to
        # margin u
        t[:2] = margin
        y[:2] = (1.0, -1.0)
        v[1] = v[0]
        dirs = (y * t)[:, None] * u[None, :] + np.sqrt(1.0 - t**2)[:, None] * v
        X = dirs * rng.uniform(0.5, 2.0, size=n)[:, None]
    return X, y, u


def make_xor(n_samples=100, noise=0.1, n_features=2, random_state=None):
    """XOR: four clusters around (+-1, +-1) with label sign(x_1 x_2).

    Not linearly separable (0 is in the convex hull of the y_i x_i / ||x_i||, so the
    linear-kernel problem is infeasible) for ``noise`` < 0.3; separable with an RBF
    kernel (its Gram is positive definite on distinct points). Extra features (for
    ``n_features`` > 2) are small noise.

    Returns
    -------
    X : ndarray (n_samples, n_features), float64
    y : ndarray of -1.0 / +1.0
    """
    n = _check_int(n_samples, "n_samples", 4)
    d = _check_int(n_features, "n_features", 2)
    if not isinstance(noise, numbers.Real) or not 0.0 <= noise < 0.3:
        raise ValueError(f"noise={noise!r} must be in [0, 0.3) so that the clusters stay apart")
    rng = check_random_state(random_state)
    corners = np.array([[1.0, 1.0], [-1.0, -1.0], [1.0, -1.0], [-1.0, 1.0]])
    with refuse_beyond_memory(f"n_samples={n}, n_features={d}", "X (float64)", 8 * n * d,
                              "ask for fewer samples or features"):
        which = np.arange(n) % 4
        X = np.zeros((n, d))
        X[:, :2] = corners[which] + noise * rng.uniform(-1.0, 1.0, size=(n, 2))
        if d > 2:
            X[:, 2:] = noise * rng.uniform(-1.0, 1.0, size=(n, d - 2))
        y = np.where(X[:, 0] * X[:, 1] > 0, 1.0, -1.0)
    return X, y


def make_duplicated_opposite(n_samples=50, n_features=5, n_duplicates=1, random_state=None):
    """Random points, ``n_duplicates`` of them repeated with the opposite label.

    For any kernel, a duplicated pair (i, j) gives y_i phi(x_i) = -y_j phi(x_j), so
    p = (e_i + e_j) / 2 has ||p||_G = 0: the problem is infeasible (Gordan, Ramdas & Pena 2014
    sec. 5) and no classifier separates it.

    Returns
    -------
    X : ndarray (n_samples, n_features), float64
        The last ``n_duplicates`` rows are copies of earlier rows.
    y : ndarray of -1.0 / +1.0
    pairs : ndarray (n_duplicates, 2) of int
        Row indices (original, copy) of each duplicated pair.

    References
    ----------
    A. Ramdas and J. Peña, "Margins, Kernels and Non-linear Smoothed Perceptrons",
    Proceedings of the 31st International Conference on Machine Learning (ICML 2014);
    arXiv:1505.04123.
    """
    n = _check_int(n_samples, "n_samples", 2)
    d = _check_int(n_features, "n_features", 1)
    k = _check_int(n_duplicates, "n_duplicates", 1)
    if k > n // 2:
        raise ValueError(f"n_duplicates={k} must be at most n_samples // 2 = {n // 2}")
    rng = check_random_state(random_state)
    m = n - k
    with refuse_beyond_memory(f"n_samples={n}, n_features={d}", "X (float64, with a "
                              "temporary of its size)", 8 * n * d,
                              "ask for fewer samples or features"):
        X0 = rng.normal(size=(m, d))
        w = rng.normal(size=d)
        y0 = np.where(X0 @ w >= 0, 1.0, -1.0)
        src = rng.choice(m, size=k, replace=False)
        X = np.vstack([X0, X0[src]])
        y = np.concatenate([y0, -y0[src]])
    pairs = np.column_stack([src, np.arange(m, n)])
    return X, y, pairs
