"""The reproductions of the papers: the printed algorithms against the solvers, and the
reproduction script's smoke run."""
import os
import re

import numpy as np
import pytest

import marginkit as mk
from marginkit.datasets import make_duplicated_opposite, make_separable


# --------------------------------------------- paper 000: the ISNKPVN algorithm box
def _project_simplex(v):
    """Euclidean projection onto the simplex by sorting (paper 000, sec. 6: "by sorting
    the entries of q - G alpha / mu")."""
    u = np.sort(v)[::-1]
    css = np.cumsum(u)
    k = np.arange(1, v.size + 1)
    last = np.flatnonzero(u - (css - 1.0) / k > 0)[-1]
    return np.maximum(v - (css[last] - 1.0) / (last + 1.0), 0.0)


def _isnkpvn_box(G, gamma, eps, max_steps):
    """ISNKPVN(gamma, eps) and SNKPVN(q, delta) as printed in paper 000, sec. 6, line by
    line, with mu_0 = 2n.

    Returns the outcome ("separable": G alpha_k > 0 at a check of the inner loop;
    "halt": the outer loop's delta_t < eps after an inner loop returned; "steps": not
    decided within ``max_steps`` inner updates), the states after each inner update, and
    the last one. A state is taken where the box continues with an update: after an
    update and the returns and restarts it triggers (an inner loop may return at its
    first check), as the solver reports one per step."""
    n = G.shape[0]

    def norm(p):
        return np.sqrt(max(float(p @ G @ p), 0.0))

    def p_mu(q, alpha, mu):  # p^q_mu(alpha) = argmin_simplex <G alpha, p> + mu/2 ||p - q||^2
        return _project_simplex(q - G @ alpha / mu)

    states, best = [], np.inf
    q = np.full(n, 1.0 / n)
    t = 0
    delta = norm(q) / gamma                         # delta_t := ||q_t||_G / gamma
    alpha, mu, k = q.copy(), 2.0 * n, 0             # SNKPVN(q_t, delta_t): alpha_0 = q,
    p = p_mu(q, alpha, mu)                          # mu_0 = 2n, p_0 = p^q_mu0(alpha_0)
    while True:
        best = min(best, norm(p))
        if np.all(G @ alpha > 0):                   # halt: alpha_k is a solution
            state = dict(alpha=alpha, p=p, mu=mu, delta=delta, outer=t, best=best)
            states.append(state)
            return "separable", states, state
        if norm(p) < delta:                         # return p_k: q_{t+1} = p_k
            if delta < eps:                         # halt; q_{t+1} solves the dual
                state = dict(alpha=alpha, p=p, mu=mu, delta=delta, outer=t, best=best)
                states.append(state)
                return "halt", states, state
            q, t = p, t + 1
            delta = norm(q) / gamma
            alpha, mu, k = q.copy(), 2.0 * n, 0
            p = p_mu(q, alpha, mu)
            continue
        # the box continues: the state the solver reports after the previous step
        states.append(dict(alpha=alpha, p=p, mu=mu, delta=delta, outer=t, best=best))
        if len(states) > max_steps:
            return "steps", states, states[-1]
        theta = 2.0 / (k + 3)
        alpha_next = (1 - theta) * (alpha + theta * p) + theta ** 2 * p_mu(q, alpha, mu)
        mu = (1 - theta) * mu
        p = (1 - theta) * p + theta * p_mu(q, alpha_next, mu)
        alpha, k = alpha_next, k + 1


def _normalized_signed_gram(K, y):
    s = y / np.sqrt(np.diag(K))
    return s[:, None] * K * s[None, :]


def _rbf(X, gamma):
    sq = (X ** 2).sum(axis=1)
    return np.exp(-gamma * np.maximum(sq[:, None] + sq[None, :] - 2 * X @ X.T, 0.0))


def _cases():
    Xs, ys, _ = make_separable(60, 3, margin=0.005, random_state=0)
    Xo, yo, _ = make_separable(48, 3, margin=0.2, random_state=5)
    yo = yo.astype(float)
    # flip the label of the negative point most aligned with the first positive one:
    # infeasible, by a small margin
    yo[np.argmax((Xo @ Xo[np.argmax(yo)]) * (yo < 0))] *= -1
    Xd, yd, _ = make_duplicated_opposite(40, 4, n_duplicates=1, random_state=1)
    return {
        # the linear kernel through its Gram matrix: mu_0 = 2n, as printed
        "separable, linear Gram": (Xs @ Xs.T, ys.astype(float), 2.0),
        "one flipped label, linear Gram": (Xo @ Xo.T, yo, 2.0),
        "duplicated opposite, rbf": (_rbf(Xd, 2.0), yd.astype(float), 3.0),
    }


@pytest.mark.parametrize("case", list(_cases()))
def test_isnkpvn_printed_configuration_is_the_algorithm_box(case):
    """finish=False, warm_restart=False and a kernel without a feature map (here the
    linear kernel's Gram matrix, or rbf) give the iterates of the printed ISNKPVN, step
    for step: the same alpha_k, p_k, mu_k, delta_t and outer index t. The solver stops on
    the first p_k with ||p_k||_G <= eps, the box once an inner loop returns with
    delta_t < eps: the same iterates, and the solver's stop at or before the box's."""
    K, y, gamma = _cases()[case]
    eps = 1e-4
    G = _normalized_signed_gram(K, y)
    res = mk.solve(K, y, solver="isnkpvn", kernel="precomputed", eps=eps, shrink=gamma,
                   finish=False, warm_restart=False, max_iter=4000)
    outcome, states, last = _isnkpvn_box(G, gamma, eps, max_steps=4000)
    assert res.status in ("separable", "infeasible")
    assert outcome == ("separable" if res.status == "separable" else "halt")
    steps = res.n_iter
    assert steps >= 5 and res.extra["outer_iterations"] >= 2
    assert len(states) >= steps + 1  # the box decides at or after the solver's stop
    h = res.history
    for key in ("mu", "delta"):
        np.testing.assert_allclose(h[key], [s[key] for s in states[:steps + 1]], rtol=1e-9)
    np.testing.assert_array_equal(h["outer"], [s["outer"] for s in states[:steps + 1]])
    np.testing.assert_allclose(h["min_margin"],
                               [np.min(G @ s["alpha"]) for s in states[:steps + 1]],
                               rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(h["dual_norm"], [s["best"] for s in states[:steps + 1]],
                               rtol=1e-8, atol=1e-13)
    np.testing.assert_allclose(res.dual_coef_, states[steps]["alpha"], rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(res.dual_vector, states[steps]["p"], rtol=1e-9, atol=1e-14)
    if res.status == "infeasible":
        assert res.certificate.value <= eps and last["best"] <= eps
        assert last["delta"] < eps and len(states) - 1 >= steps
    else:
        assert len(states) - 1 == steps


def test_isnkpvn_other_options_leave_the_printed_algorithm():
    """finish=False alone is not the printed algorithm: warm restarts (the default) change
    mu_k from the first restart on, and kernel="linear" starts from mu_0 = 2 lambda_#
    (a bound on lambda_max(G), here below n / 2) instead of 2n."""
    K, y, gamma = _cases()["one flipped label, linear Gram"]
    G = _normalized_signed_gram(K, y)
    _, states, _ = _isnkpvn_box(G, gamma, 1e-4, max_steps=4000)
    box_mu = np.array([s["mu"] for s in states])
    warm = mk.solve(K, y, solver="isnkpvn", kernel="precomputed", eps=1e-4, shrink=gamma,
                    finish=False, max_iter=4000)
    m = min(warm.n_iter, len(states) - 1) + 1
    assert warm.history["mu"][0] == box_mu[0]
    assert not np.allclose(warm.history["mu"][:m], box_mu[:m], rtol=1e-9)
    Xo, _, _ = make_separable(48, 3, margin=0.2, random_state=5)
    linear = mk.solve(Xo, y, solver="isnkpvn", kernel="linear", eps=1e-4, shrink=gamma,
                      finish=False, warm_restart=False, max_iter=4000)
    assert linear.history["mu"][0] < box_mu[0] / 2


# ------------------------------------- paper 002: the target of the synthetic task (sec. 4)
def _fourier_target(x, q, terms=40):  # the tail beyond k = 40 is below 1e-12 for q >= 8
    k = np.arange(1, terms + 1)
    return 1.0 + 2.0 * (np.cos(2 * np.pi * np.outer(x, k)) / k ** q).sum(axis=1)


@pytest.mark.parametrize("r", [3.25, 10.25])
def test_source_capacity_target_is_the_series_for_either_kernel(r):
    """theta* = Lambda_q(0, .) as the Fourier series of the definition (coefficients k^-q,
    source condition r in the eigenbasis of both spline normalizations), not the printed
    closed form, which is the constant 1 (to 8.3e-7 for r = 3.25, exactly for 10.25)."""
    from marginkit.datasets._source_capacity import source_capacity_target

    q = (r + 0.5) * 2 + 0.5
    x = np.linspace(0, 1, 9)
    printed = source_capacity_target(x, r, 2, normalization="bernoulli")
    assert np.ptp(printed) < 2e-6
    n = 60_000
    with pytest.warns(FutureWarning, match="normalization no longer changes the task"):
        X, y = mk.datasets.make_source_capacity(n, r, 2, random_state=0,
                                                normalization="bernoulli")
    X0, y0 = mk.datasets.make_source_capacity(n, r, 2, random_state=0)
    assert np.array_equal(X, X0) and np.array_equal(y, y0)
    # E[y | x] = tanh(theta*(x) / 2) with the series theta* (from -0.46 to 0.91 here),
    # in 6 bins within 5 standard errors
    theta = _fourier_target(X[:, 0], q)
    bins = np.minimum((X[:, 0] * 6).astype(int), 5)
    for b in range(6):
        m = bins == b
        assert abs(y[m].mean() - np.tanh(theta[m] / 2).mean()) < 5 / np.sqrt(m.sum())
    assert np.ptp([y[bins == b].mean() for b in range(6)]) > 0.5
    er = mk.datasets.source_capacity_excess_risk
    zero = lambda x: np.zeros(len(x))  # noqa: E731
    with pytest.warns(FutureWarning, match="normalization no longer changes the task"):
        assert er(zero, r, 2, normalization="bernoulli") == er(zero, r, 2)
    with pytest.raises(ValueError, match="normalization='fourier' is not valid"):
        mk.datasets.make_source_capacity(10, r, 2, normalization="fourier")


# ------------------------------------------------------- the reproduction script, smoke run
def test_reproduce_smoke_run_writes_every_table(data_dir, tmp_path):
    """``benchmarks/reproduce.py --smoke`` fills every generated block of a copy of
    docs/reproductions.rst with a table, the papers' numbers beside ours."""
    pytest.importorskip("liblinear")
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    page = tmp_path / "reproductions.rst"
    shutil.copyfile(root / "docs" / "reproductions.rst", page)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MARGINKIT_DATA": data_dir}
    subprocess.run([sys.executable, str(root / "benchmarks" / "reproduce.py"), "--smoke",
                    "--quiet", "--out", str(page)], cwd=tmp_path, env=env, check=True,
                   timeout=600)
    text = page.read_text()
    blocks = re.findall(r"\.\. begin generated (\S+)\n(.*?)\.\. end generated \1", text, re.S)
    assert sorted(name for name, _ in blocks) == sorted(
        ["svm-table1", "svm-table3", "svm-table4", "svm-table5", "tikhonov-table1"])
    for name, body in blocks:
        assert ".. list-table::" in body and "``reproduce.py --smoke``" in body, name
    body = dict(blocks)
    # paper numbers beside ours: Table 3 (3 vs 5, FISTA SVM black 0.9685), Table 5 (d = 1100:
    # 34.5 %), Tikhonov Table 1 (r = 10.25, t = 8: 0.98)
    assert "0.9685" in body["svm-table3"] and "34.5" in body["svm-table5"]
    assert "0.98" in body["tikhonov-table1"]
    # the certified rule never returns c_1 misclassified (paper 001, secs. 2.3 and 4)
    assert body["svm-table5"].count("0 / 20") == 2
