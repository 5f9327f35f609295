"""Synthetic tasks with known source and capacity conditions (Beugnot et al. 2021, sec. 4, app. E).

Inputs x ~ U[0, 1], kernel Lambda_alpha (periodic spline of order alpha, the registered
``spline`` kernel), target theta* = Lambda_{(r + 1/2) alpha + 1/2}(0, .) as the Fourier
series of the paper's definition,

    theta*(x) = 1 + 2 sum_{k >= 1} cos(2 pi k x) / k^q,    q = (r + 1/2) alpha + 1/2,

which lies in the RKHS and satisfies the source condition r and the capacity condition
alpha [16]. Both normalizations of the ``spline`` kernel have the same eigenfunctions under
U[0, 1] (1, cos(2 pi k x), sin(2 pi k x)) and eigenvalues 1 and w k^-alpha (w = 1 for the
series, (2 pi)^-alpha for the closed form printed in app. E.1): in either eigenbasis the
coefficients k^-q of theta* make ||T^-s theta*||_H finite for every order s < r and
infinite from s = r on (the "+ epsilon" of app. E.3), so the task is the same for both
kernels. (Lambda_q of the printed closed
form, 1 + 2 sum cos(2 pi k x) / (2 pi k)^q, is not a target of order r at any usable
scale: its non-constant part is scaled by (2 pi)^-q, so for the paper's easy tasks it is
1 within 8.3e-7 (q = 8, r = 3.25) and exactly 1 in float64 (q = 22, r = 10.25): a
constant, which has every order.)

* logistic loss: y in {-1, +1} with P(y = 1 | x) = 1 / (1 + exp(-theta*(x))), so that
  theta* minimizes the expected logistic loss (Eq. 21, app. E.3);
* squared loss: y = theta*(x) + Gaussian noise (app. E.2).

The excess risk L(theta) - L(theta*) is estimated by Monte Carlo on 10^4 points with the
closed forms of app. E.3 (logistic) and 1/2 E[(theta - theta*)^2] (squared loss).

References
----------
G. Beugnot, J. Mairal and A. Rudi, "Beyond Tikhonov: Faster Learning with
Self-Concordant Losses via Iterative Regularization", Advances in Neural Information
Processing Systems 34 (NeurIPS 2021).
"""
import math
import numbers
import warnings

import numpy as np

from .._validation import check_random_state
from ._clusters import refuse_beyond_memory

__all__ = ["make_source_capacity", "source_capacity_target", "source_capacity_excess_risk",
           "theoretical_rate"]


#: the largest order the ``spline`` kernel takes (its parameter table)
_MAX_ORDER = 1000.0


def _target_order(r, alpha):
    return (float(r) + 0.5) * float(alpha) + 0.5


def _check(n, r, alpha, loss):
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"n={n!r} must be an integer >= 1")
    if not (isinstance(r, numbers.Real) and r > 0):
        raise ValueError(f"r={r!r} must be a real > 0 (source condition)")
    if not (isinstance(alpha, numbers.Real) and alpha > 1):
        raise ValueError(f"alpha={alpha!r} must be a real > 1 (capacity condition)")
    if loss not in ("logistic", "squared"):
        raise ValueError(f"loss={loss!r} is not valid; use 'logistic' or 'squared'")
    q = _target_order(r, alpha)
    if not q <= _MAX_ORDER:
        # found by review: r=1e308 was reported as "kernel 'spline': order=inf"
        r_max = (_MAX_ORDER - 0.5) / float(alpha) - 0.5
        fix = (f"choose r <= {r_max:.4g} for this alpha" if r_max > 0.0
               else "choose a smaller alpha")
        raise ValueError(
            f"r={r!r} with alpha={alpha!r} gives the target's order (r + 1/2) alpha + 1/2 = "
            f"{q:.4g}, above the largest order of the spline kernel, {_MAX_ORDER:g}; {fix}")


def source_capacity_target(x, r, alpha, normalization="series"):
    """Lambda_q(0, x), q = (r + 1/2) alpha + 1/2, in the given normalization.

    ``"series"`` (Fourier weights |k|^-q, the paper's definition) is the target theta* of
    the task (``make_source_capacity``), whatever kernel is fitted. ``"bernoulli"`` is
    the closed form printed in app. E.1 (weights |2 pi k|^-q), kept to show what that form
    gives: 1 within 8.3e-7 for q = 8 and exactly 1 in float64 for q = 22 (module
    docstring).
    """
    from .._registry import get_plugin

    x = np.asarray(x, dtype=np.float64).reshape(-1, 1)
    kernel = get_plugin("kernel", "spline")(order=_target_order(r, alpha),
                                            normalization=normalization)
    return np.asarray(kernel(x, np.zeros((1, 1))), dtype=np.float64)[:, 0]


def _check_normalization(normalization, owner):
    if normalization is None:
        return
    if normalization not in ("series", "bernoulli"):
        raise ValueError(f"{owner}: normalization={normalization!r} is not valid; use "
                         "'series' or 'bernoulli' (or leave it out)")
    warnings.warn(
        f"{owner}: normalization no longer changes the task; theta* is the Fourier series "
        "Lambda_q(0, .) of the paper's definition, a target of source condition r for both "
        "spline normalizations (the printed closed form made it the constant 1 for r = 3.25 "
        "and 10.25); fit with spline(normalization=...) of your choice and drop this argument",
        FutureWarning, stacklevel=3)


def make_source_capacity(n, r, alpha, loss="logistic", noise=1.0, random_state=None,
                         normalization=None):
    """Sample the synthetic task of Beugnot et al. 2021 (sec. 4; app. E.2, E.3).

    Parameters
    ----------
    n : int
        Number of samples.
    r : float > 0
        Source condition (the paper uses 0.25, 3.25, 10.25 with alpha = 2, so that
        (r + 1/2) alpha + 1/2 is an even integer).
    alpha : float > 1
        Capacity condition: the kernel is ``spline`` of order alpha.
    loss : {"logistic", "squared"}
        Labels +-1 with P(y = 1 | x) = sigmoid(theta*(x)), or y = theta*(x) + noise * N(0, 1).
    noise : float
        Standard deviation of the Gaussian noise (squared loss only).
    random_state : None, int or numpy Generator
    normalization : None
        Deprecated, no effect: the target is the same for both normalizations of the
        ``spline`` kernel (module docstring); passing it warns.

    Returns
    -------
    X : ndarray (n, 1), x uniform on [0, 1]
    y : ndarray (n,), float64

    References
    ----------
    G. Beugnot, J. Mairal and A. Rudi, "Beyond Tikhonov: Faster Learning with
    Self-Concordant Losses via Iterative Regularization", Advances in Neural Information
    Processing Systems 34 (NeurIPS 2021).
    """
    _check(n, r, alpha, loss)
    _check_normalization(normalization, "make_source_capacity")
    if isinstance(noise, bool) or not isinstance(noise, numbers.Real) or \
            not (math.isfinite(noise) and noise >= 0):
        # found by review: NaN and inf gave non-finite targets, -1 and True passed
        raise ValueError(f"noise={noise!r} must be a finite number >= 0 (the standard "
                         "deviation of the targets' Gaussian noise)")
    rng = check_random_state(random_state)
    with refuse_beyond_memory(f"n={n}", "x (float64, with temporaries of its size)", 8 * n,
                              "ask for fewer samples"):
        x = rng.random(n)
        theta = source_capacity_target(x, r, alpha)
        if loss == "logistic":
            p = 0.5 * (1.0 + np.tanh(0.5 * theta))  # sigmoid, stable
            y = np.where(rng.random(n) < p, 1.0, -1.0)
        else:
            y = theta + float(noise) * rng.standard_normal(n)
    return x.reshape(-1, 1), y


def source_capacity_excess_risk(model, r, alpha, loss="logistic", n_mc=10_000,
                                random_state=0, normalization=None):
    """Monte Carlo estimate of L(theta) - L(theta*) (app. E.3).

    Parameters
    ----------
    model : Result, or callable X -> theta(X)
        A fitted result (its ``decision_function``) or any function of an (m, 1) array.
    r, alpha, loss : as in ``make_source_capacity``
    n_mc : int
        Monte Carlo points x ~ U[0, 1] (10^4 in the paper).
    random_state : None, int or Generator
        Seed of the Monte Carlo points (fixed by default so that estimators compare on the
        same points).
    normalization : None
        Deprecated, no effect (as in ``make_source_capacity``).

    Returns
    -------
    float
        Logistic: mean of s(t*) log((1 + e^{-t})/(1 + e^{-t*})) + s(-t*) log((1 + e^{t})/
        (1 + e^{t*})), s the sigmoid; squared: mean of (t - t*)^2 / 2 (noise cancels).

    References
    ----------
    G. Beugnot, J. Mairal and A. Rudi, "Beyond Tikhonov: Faster Learning with
    Self-Concordant Losses via Iterative Regularization", Advances in Neural Information
    Processing Systems 34 (NeurIPS 2021).
    """
    _check(int(n_mc), r, alpha, loss)
    _check_normalization(normalization, "source_capacity_excess_risk")
    rng = check_random_state(random_state)
    x = rng.random(int(n_mc)).reshape(-1, 1)
    f = model.decision_function if hasattr(model, "decision_function") else model
    theta = np.asarray(f(x), dtype=np.float64).ravel()
    star = source_capacity_target(x[:, 0], r, alpha)
    if loss == "squared":
        return float(0.5 * np.mean((theta - star) ** 2))
    p = 0.5 * (1.0 + np.tanh(0.5 * star))
    term_pos = np.logaddexp(0.0, -theta) - np.logaddexp(0.0, -star)
    term_neg = np.logaddexp(0.0, theta) - np.logaddexp(0.0, star)
    return float(np.mean(p * term_pos + (1.0 - p) * term_neg))


def theoretical_rate(r, alpha, t):
    """Exponent gamma of L - L* ~ n^-gamma: alpha (1 + 2 s) / (1 + alpha (1 + 2 s)),
    s = min(r, t - 1/2) (Theorem 1 / Table 1 of Beugnot et al. 2021).

    References
    ----------
    G. Beugnot, J. Mairal and A. Rudi, "Beyond Tikhonov: Faster Learning with
    Self-Concordant Losses via Iterative Regularization", Advances in Neural Information
    Processing Systems 34 (NeurIPS 2021).
    """
    s = min(float(r), float(t) - 0.5)
    return alpha * (1 + 2 * s) / (1 + alpha * (1 + 2 * s))
