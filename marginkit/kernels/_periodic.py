"""The periodic cosine series C_q(t) = sum_{k >= 1} cos(2 pi k t) / k^q, for real q > 1.

This is the building block of the periodic spline kernel of Beugnot et al. 2021 (sec. 4 and
app. E.1): Lambda_q(x, z) = 1 + sum_{k != 0} exp(2 i pi k (x - z)) / |k|^q = 1 + 2 C_q(x - z).
Three evaluation routes, all accurate to about 1e-15 absolute (see docs/kernels.md for the
derivations):

* even integer q <= 40: the Bernoulli closed form
  C_q(t) = (-1)^(q/2 + 1) (2 pi)^q B_q({t}) / (2 q!), with exact (rational) Bernoulli numbers;
* other q < 40: the expansion of the polylogarithm Re Li_q(exp(2 i pi u)) about u = 0,
  C_q(u) = pi / (2 Gamma(q) cos(pi q / 2)) x^(q-1) + sum_j (-1)^j zeta(q - 2j) x^(2j) / (2j)!,
  x = 2 pi |u|, |u| <= 1/2, which converges like 4^-j; near odd integers q = n + eps the two
  singular terms are combined analytically (Stieltjes and polygamma series in eps);
* q >= 40: the series itself, which needs at most four terms for 1e-17.

References
----------
G. Beugnot, J. Mairal and A. Rudi, "Beyond Tikhonov: Faster Learning with
Self-Concordant Losses via Iterative Regularization", Advances in Neural Information
Processing Systems 34 (NeurIPS 2021).
"""
import functools
from fractions import Fraction
from math import comb, factorial

import numpy as np
from scipy.special import gammaln, polygamma, zeta

__all__ = ["periodic_cosine_series", "bernoulli_numbers", "series_plan", "term_scale"]

# Stieltjes constants gamma_0..gamma_6: zeta(1 + e) = 1/e + sum_k (-1)^k gamma_k e^k / k!
_STIELTJES = (0.5772156649015329, -0.07281584548367672, -0.009690363192872318,
              0.002053834420303346, 0.002325370065467300, 0.0007933238173010627,
              -0.0002387693454301996)
_NEAR_ODD = 1e-2      # |q - n| below which the singular pair is combined analytically
_DIRECT_FROM = 40.0   # q from which the plain series is the cheapest exact route
_N_SERIES = 80        # terms of the polylog expansion (|x / 2 pi| <= 1/2: 4^-80 is negligible)


@functools.lru_cache(maxsize=None)
def bernoulli_numbers(m):
    """Exact Bernoulli numbers B_0..B_m (B_1 = -1/2) as Fractions."""
    B = [Fraction(1)]
    for n in range(1, m + 1):
        B.append(-sum(comb(n + 1, k) * B[k] for k in range(n)) / Fraction(n + 1))
    return tuple(B)


@functools.lru_cache(maxsize=64)
def _even_coefficients(q):
    """Polynomial coefficients (highest power first) of (-1)^(q/2+1) (2 pi)^q B_q(u) / (2 q!)."""
    B = bernoulli_numbers(q)
    sign = -1.0 if (q // 2) % 2 == 0 else 1.0
    scale = sign * (2.0 * np.pi) ** q / 2.0
    return np.array([scale * float(comb(q, k) * B[k] / factorial(q)) for k in range(q + 1)])


def _cos_half_pi(q):
    """cos(pi q / 2) with exact argument reduction (accurate near the zeros at odd q)."""
    m = np.round(q / 2.0)
    r = q - 2.0 * m                      # in [-1, 1], exact
    sign = -1.0 if int(m) % 2 else 1.0
    return sign * np.sin(np.pi * (1.0 - abs(r)) / 2.0)


@functools.lru_cache(maxsize=64)
def _series_coefficients(q):
    """(A, c) with C_q(u) = A x^(q-1) + sum_j c_j x^(2j), generic (non-integer) q."""
    j = np.arange(_N_SERIES)
    lfact = gammaln(2 * j + 1.0)
    c = (-1.0) ** j * zeta(q - 2.0 * j) * np.exp(-lfact)
    A = np.pi / (2.0 * np.exp(gammaln(q)) * _cos_half_pi(q))
    return A, c


@functools.lru_cache(maxsize=64)
def _near_odd_coefficients(q):
    n = int(np.round(q))
    eps = q - n
    j0 = (n - 1) // 2
    j = np.arange(_N_SERIES)
    c = (-1.0) ** j * zeta(q - 2.0 * j) * np.exp(-gammaln(2 * j + 1.0))
    c[j0] = 0.0                               # the zeta(1 + eps) term is handled with the pair
    # zeta(1 + eps) - 1/eps
    zreg = sum((-1) ** k * g * eps ** k / factorial(k) for k, g in enumerate(_STIELTJES))
    # (lnGamma(n + eps) - lnGamma(n)) / eps = sum_k psi^(k)(n) eps^k / (k+1)!
    dlg = sum(float(polygamma(k, n)) * eps ** k / factorial(k + 1) for k in range(10))
    # ln(z / sin z) / eps with z = pi eps / 2
    z = np.pi * eps / 2.0
    lsin = (np.pi / 2.0) * z * (1 / 6 + z * z / 180 + z ** 4 / 2835 + z ** 6 / 37800)
    return n, eps, j0, c, zreg, dlg, lsin


def _near_odd(x, q):
    n, eps, j0, c, zreg, dlg, lsin = _near_odd_coefficients(q)
    out = np.polynomial.polynomial.polyval(x * x, c)
    pos = x > 0
    xp = x[pos]
    M = np.log(xp) - dlg + lsin               # L / eps, L = log(g(eps)), g(0) = 1
    if eps == 0.0:
        expm = M
    else:
        expm = np.expm1(eps * M) / eps
    sign = -1.0 if j0 % 2 else 1.0
    pair = sign * xp ** (2 * j0) / factorial(2 * j0) * (zreg - expm)
    out[pos] += pair
    if j0 == 0:                               # q near 1: C_q(0) = zeta(q)
        out[~pos] = zeta(q)
    return out


def periodic_cosine_series(t, q):
    """C_q(t) = sum_{k >= 1} cos(2 pi k t) / k^q, elementwise, for real q > 1.

    Parameters
    ----------
    t : array_like
        Any real values (the function has period 1 and is even).
    q : float > 1

    Returns
    -------
    ndarray of float64, the shape of ``t``.
    """
    q = float(q)
    if not q > 1.0:
        raise ValueError(f"q={q!r} must be > 1 (the series diverges at t = 0 otherwise)")
    t = np.abs(np.asarray(t, dtype=np.float64))  # C is even: |t| makes C(t) == C(-t) bitwise
    if t.ndim == 0:                           # a scalar t: the branches below index arrays
        return periodic_cosine_series(t.reshape(1), q).reshape(())
    u = t - np.floor(t)
    u = np.minimum(u, 1.0 - u)                # in [0, 1/2], C is even and 1-periodic
    if q >= _DIRECT_FROM:
        n_terms = int(np.ceil(10.0 ** (17.0 / (q - 1.0)))) + 1
        out = np.zeros_like(u)
        with np.errstate(over="ignore"):      # k^q = inf (q >= 646 at k = 3): term 0
            for k in range(n_terms, 0, -1):   # smallest terms first
                out += np.cos(2.0 * np.pi * k * u) / np.float64(k) ** q
        return out
    if q == np.round(q) and int(q) % 2 == 0:
        return np.polyval(_even_coefficients(int(q)), u)
    x = 2.0 * np.pi * u
    n = np.round(q)
    if int(n) % 2 == 1 and abs(q - n) < _NEAR_ODD:
        return _near_odd(x, q)
    A, c = _series_coefficients(q)
    return A * x ** (q - 1.0) + np.polynomial.polynomial.polyval(x * x, c)


def series_plan(q):
    """Precomputed constants for the Cython evaluation of C_q (``_gram.spline_factor``).

    Returns ``(mode, coef, scalars)``: mode 0 = even closed form (``coef``: polynomial in u,
    highest power first), 1 = polylog expansion, 2 = near an odd integer (``coef``: the
    series in x^2, highest power first, truncated where 2 (2 pi)^(q-1) 4^-j < 1e-17),
    3 = plain series (``coef[k-1] = k^-q``); ``scalars`` = (amp, q, j0, eps, zreg, dlg, lsin,
    zeta(q), pair_scale) as used by that mode.
    """
    q = float(q)
    if not q > 1.0:
        raise ValueError(f"q={q!r} must be > 1")
    zero = (0.0, q, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    if q >= _DIRECT_FROM:
        n_terms = int(np.ceil(10.0 ** (17.0 / (q - 1.0)))) + 1
        return 3, np.arange(1, n_terms + 1, dtype=np.float64) ** (-q), zero
    if q == np.round(q) and int(q) % 2 == 0:
        return 0, np.ascontiguousarray(_even_coefficients(int(q))), zero
    n_keep = int(np.ceil((np.log(2.0) + (q - 1.0) * np.log(2 * np.pi) + 17 * np.log(10.0))
                         / np.log(4.0))) + 2
    n_keep = min(n_keep, _N_SERIES)
    n = np.round(q)
    if int(n) % 2 == 1 and abs(q - n) < _NEAR_ODD:
        n, eps, j0, c, zreg, dlg, lsin = _near_odd_coefficients(q)
        sign = -1.0 if j0 % 2 else 1.0
        scal = (0.0, q, j0, eps, zreg, dlg, lsin, float(zeta(q)), sign / factorial(2 * j0))
        return 2, np.ascontiguousarray(c[:n_keep][::-1]), scal
    A, c = _series_coefficients(q)
    return 1, np.ascontiguousarray(c[:n_keep][::-1]), (A,) + zero[1:]


@functools.lru_cache(maxsize=64)
def term_scale(q):
    """An upper bound of the sum of the absolute values of the terms that the evaluation
    of C_q (``series_plan``'s route, as ``_gram.spline_factor`` runs it) adds, over
    0 <= u <= 1/2, and at least zeta(q) = C_q(0): the scale of its rounding error.

    The terms, not the value, set the error where they cancel: near an odd order, outside
    the window of the analytic pair (``_NEAR_ODD``), A x^(q-1) and zeta(q - 2 j0) x^(2 j0) /
    (2 j0)! are each about 1 / |q - n| (found by review: at q = 3.0101 the error was 16
    times a bound scaled by zeta(q) alone). Even orders: the polynomial's coefficients at
    u = 1/2 (Horner, highest power first); the plain series: its positive terms, at most
    zeta(q); the expansions: the absolute terms on a grid of 2,048 points of x in (0, pi]
    (each term's size is monotone in x but for the analytic pair's, which is smooth), with
    a margin of 1%."""
    q = float(q)
    mode, coef, scalars = series_plan(q)
    zq = float(zeta(q))
    if mode == 3:
        return zq
    if mode == 0:
        powers = np.arange(coef.shape[0] - 1, -1, -1)
        return max(zq, float(np.sum(np.abs(coef) * 0.5 ** powers)))
    x = np.linspace(0.0, np.pi, 2049)[1:]
    size = np.polynomial.polynomial.polyval(x * x, np.abs(coef[::-1]))
    if mode == 1:
        size = size + abs(scalars[0]) * x ** (q - 1.0)
    else:
        _, _, j0, eps, zreg, dlg, lsin, _, pair_scale = scalars
        m = np.log(x) - dlg + lsin
        expm = m if eps == 0.0 else np.expm1(eps * m) / eps
        size = size + abs(pair_scale) * x ** (2.0 * j0) * (abs(zreg) + np.abs(expm))
    return max(zq, 1.01 * float(np.max(size)))
