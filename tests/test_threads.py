"""The thread choice of the FISTA passes: one thread or the OpenMP team, measured in the run.

No timing is asserted: the policy's logic runs on scripted clocks, and the solves check
that results do not depend on the choice and that the choice is recorded and bounded by
the OpenMP limit.
"""
import numpy as np
import pytest
import scipy.sparse as sp

import marginkit as mk
from marginkit.solvers import _svm_fast
from marginkit.utils._threads import ThreadChoice

threadpoolctl = pytest.importorskip("threadpoolctl")


def _problem(sparse, seed=5):
    # large enough for the OpenMP path (>= 2e5 stored entries, 16 row blocks)
    rng = np.random.default_rng(seed)
    n, d = 4000, 60
    X = rng.standard_normal((n, d)) * (1.0 + np.arange(d)) + 1.0
    score = X[:, 0] - 1.0 + 0.5 * (X[:, 1] - 1.0) + rng.standard_normal(n)
    y = np.where(score > 0, 1.0, -1.0)
    if sparse:
        X[rng.random(X.shape) < 0.1] = 0.0
        X = sp.csr_matrix(X)
    nnz = X.nnz if sparse else X.size
    assert nnz >= 2e5 and _svm_fast.fista_blocks(n, d, float(nnz)) == 16
    return X, y


# ------------------------------------------------------------------ the policy's logic
class _Script:
    """Clocks for ``ThreadChoice``: each iteration lasts ``wall(nt)`` seconds and gets
    ``share`` of them on the processor."""

    def __init__(self, wall, share=1.0):
        self.wall, self.share = wall, share
        self.t = self.cpu = 0.0

    def run(self, choice, iterations, cap=2):
        used = []
        for _ in range(iterations):
            nt = choice.begin(cap)
            used.append(nt)
            dt = self.wall(nt)
            self.t += dt
            self.cpu += self.share * dt
        return used


def _choice(script, requested="auto"):
    return ThreadChoice(requested, clock=lambda: script.t, cpu_clock=lambda: script.cpu)


def test_choice_keeps_the_team_when_it_is_faster():
    script = _Script(lambda nt: 1.0 if nt == 1 else 0.55)
    choice = _choice(script)
    used = script.run(choice, 50)
    # three one-thread iterations (one not measured), then the team for good
    assert used[:3] == [1, 1, 1] and set(used[3:]) == {2}
    summary = choice.summary()
    assert summary == {"last": 2, "max": 2, "policy": "auto", "one_thread_iterations": 3,
                       "team_iterations": 47, "probes": 1, "probes_put_off": 0}


def test_choice_drops_a_slow_team_after_one_iteration_and_backs_off():
    script = _Script(lambda nt: 1.0 if nt == 1 else 20.0)
    choice = _choice(script)
    used = script.run(choice, 2000)
    team = [k for k, nt in enumerate(used) if nt > 1]
    # the first probe is one iteration (clearly slower), the next waits at least
    # 32 * (20 - 1) iterations, and each wait at least doubles (counted from the
    # iteration after the probe)
    assert team[0] == 3 and team[1] - team[0] >= 32 * 19
    assert len(team) == choice.summary()["probes"] <= 3
    gaps = np.diff(team)
    assert np.all(gaps[1:] - 1 >= 2 * (gaps[:-1] - 1))
    assert choice.summary()["last"] == 1


def test_choice_puts_the_probe_off_while_one_thread_lacks_the_processor():
    script = _Script(lambda nt: 1.0 if nt == 1 else 0.5, share=0.5)
    choice = _choice(script)
    used = script.run(choice, 300)
    assert set(used) == {1}
    summary = choice.summary()
    assert summary["probes"] == 0 and summary["probes_put_off"] >= 3
    assert "cores busy" in choice.events[0][1]
    # the processor comes back: the team is tried at the next probe and kept
    script.share = 1.0
    used = script.run(choice, 600)
    assert used[-1] == 2 and choice.summary()["probes"] == 1


def test_choice_measures_the_share_over_a_window_before_the_first_probe():
    script = _Script(lambda nt: 3e-3 if nt == 1 else 1.5e-3)
    choice = _choice(script)
    used = script.run(choice, 30)
    # iteration 0 is not measured; iterations 1..4 make the 10 ms window (3 would not)
    assert used.index(2) == 5 and used[-1] == 2


def test_choice_leaves_a_team_that_becomes_slower_than_one_thread():
    state = {"busy": False}
    script = _Script(lambda nt: 1.0 if nt == 1 else (6.0 if state["busy"] else 0.5))
    choice = _choice(script)
    assert script.run(choice, 20)[-1] == 2
    state["busy"] = True
    used = script.run(choice, 3)
    # two iterations slower than one thread, then one thread
    assert used == [2, 2, 1]
    assert "became slower than one thread" in choice.events[-1][1]


def test_choice_within_the_limit_and_as_requested():
    script = _Script(lambda nt: 1.0 if nt == 1 else 0.5)
    assert set(script.run(_choice(script), 30, cap=1)) == {1}
    assert set(script.run(_choice(script, 2), 30, cap=1)) == {1}
    forced = _choice(script, 2)
    assert set(script.run(forced, 30, cap=4)) == {2}
    assert forced.summary()["probes"] == 0
    assert set(script.run(_choice(script, 1), 30, cap=2)) == {1}


# ----------------------------------------------------------------------------- solves
@pytest.mark.parametrize("solver", ["fista", "fista_svm"])
@pytest.mark.parametrize("sparse", [False, True])
def test_results_do_not_depend_on_the_thread_choice(solver, sparse):
    X, y = _problem(sparse)
    runs = []
    with threadpoolctl.threadpool_limits(2):
        for threads in (1, 2, "auto"):
            runs.append(mk.solve(X, y, solver=solver, max_iter=30,
                                 solver_params={"threads": threads}))
    with threadpoolctl.threadpool_limits(1):
        runs.append(mk.solve(X, y, solver=solver, max_iter=30))
    one, team, auto, limited = runs
    assert one.extra["threads"] == 1 and one.extra["thread_choice"]["team_iterations"] == 0
    assert team.extra["threads"] == 2
    assert team.extra["thread_choice"]["team_iterations"] == team.n_iter
    assert auto.extra["thread_choice"]["policy"] == "auto"
    assert auto.extra["thread_choice"]["max"] == 2
    assert limited.extra["threads"] == 1 and limited.extra["thread_choice"]["max"] == 1
    for r in runs[1:]:
        assert r.n_iter == one.n_iter
        assert r.coef_.tobytes() == one.coef_.tobytes()
        assert r.dual_coef_.tobytes() == one.dual_coef_.tobytes()
        assert r.intercept_ == one.intercept_
        for key in one.history:
            assert one.history[key].tobytes() == r.history[key].tobytes(), key


def test_threadpool_limit_of_one_thread_wins_over_a_request():
    X, y = _problem(sparse=False)
    with threadpoolctl.threadpool_limits(1):
        res = mk.solve(X, y, solver="fista", max_iter=10, solver_params={"threads": 2})
    assert res.extra["threads"] == 1
    assert res.extra["thread_choice"] == {"max": 1, "policy": 2, "one_thread_iterations": 10,
                                          "team_iterations": 0, "probes": 0,
                                          "probes_put_off": 0}


def test_small_data_run_on_one_thread():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 5))
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    with threadpoolctl.threadpool_limits(2):
        res = mk.solve(X, y, solver="fista", max_iter=10, solver_params={"threads": 2})
    assert res.extra["threads"] == 1 and res.extra["thread_choice"]["max"] == 1


def test_verbose_2_reports_the_thread_choice(capsys, monkeypatch):
    # a share no iteration reaches, measured from the first iterations on: every probe is
    # put off, and said so
    monkeypatch.setattr(ThreadChoice, "share", 2.0)
    monkeypatch.setattr(ThreadChoice, "window", 0.0)
    X, y = _problem(sparse=False)
    with threadpoolctl.threadpool_limits(2):
        res = mk.solve(X, y, solver="fista", max_iter=10, verbose=2)
    out = capsys.readouterr().out
    assert "[fista] iter      3  threads 1: one thread got" in out
    assert res.extra["thread_choice"]["probes_put_off"] >= 1


@pytest.mark.parametrize("value, exc, match", [
    (0, ValueError, r"threads=0 is out of range; use 'auto' or an integer >= 1"),
    ("two", ValueError, r"threads='two' is not valid; use 'auto' or an integer >= 1"),
    (True, TypeError, r"threads=True must be 'auto' or an integer >= 1"),
    (2.0, TypeError, r"threads=2.0 must be 'auto' or an integer >= 1"),
    (float("nan"), ValueError, r"threads=nan must be finite"),
])
def test_threads_parameter_is_checked(value, exc, match):
    X, y = _problem(sparse=False)
    with pytest.raises(exc, match=match):
        mk.solve(X, y, solver="fista", solver_params={"threads": value})
