"""The thread choice of the FISTA passes: one thread or the OpenMP team, measured in the run;
and the BLAS threads the run loop chooses for every solver (one thread on busy cores).

No timing is asserted: the policy's logic runs on scripted clocks, and the solves check
that results do not depend on the choice and that the choice is recorded and bounded by
the OpenMP limit.
"""
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

import marginkit as mk
from marginkit.solvers.svm import _fast as _svm_fast
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
    # found by review: 2**31 passed and overflowed the passes' C int (a raw OverflowError)
    (2 ** 31, ValueError, r"threads=2147483648 is out of range; use 'auto' or an integer "
                          r"<= 32768"),
    (2 ** 63, ValueError, r"threads=9223372036854775808 is out of range"),
])
def test_threads_parameter_is_checked(value, exc, match):
    X, y = _problem(sparse=False)
    with pytest.raises(exc, match=match):
        mk.solve(X, y, solver="fista", solver_params={"threads": value})


# ------------------------------------------------------- BLAS threads chosen by the run loop
from marginkit import _api  # noqa: E402
from marginkit.kernels import _gram  # noqa: E402
from marginkit.plugins import Solver, SolverState  # noqa: E402
from marginkit.utils import _threads  # noqa: E402
from marginkit.utils._threads import BlasChoice, busy_cores, single_threaded_blas  # noqa: E402


def _blas_threads():
    return max(i["num_threads"] for i in threadpoolctl.threadpool_info()
               if i["user_api"] == "blas")


@pytest.fixture
def blas_default():
    """The process's default BLAS threads (skips where there is nothing to choose)."""
    mk.solve(np.eye(3), [0, 1, 1], solver="fista")  # BLAS loaded as in a run
    if not any(i["user_api"] == "blas" for i in threadpoolctl.threadpool_info()):
        pytest.skip("no BLAS library found by threadpoolctl")
    n = _blas_threads()
    if n <= 1:
        pytest.skip("BLAS is configured for one thread: nothing to choose")
    return n


def _cores(busy):
    """A busy test that answers ``busy`` and counts its calls."""
    calls = []

    def test(want, cores=None):
        calls.append(want)
        return busy

    return test, calls


class _ProbeState(SolverState):
    def __init__(self, seen, fail_at):
        self.seen, self.fail_at = seen, fail_at
        self.error = 1.0
        self.k = 0

    def step(self):
        self.k += 1
        self.seen.setdefault("step", set()).add(_blas_threads())
        self.seen.setdefault("step_openmp", set()).add(_gram.max_threads())
        if self.k == self.fail_at:
            raise ArithmeticError("step failed on purpose")
        self.error = 1.0 / (1 + self.k)

    def snapshot(self):
        return {"error": self.error}


class _BlasProbe(Solver):
    """A third-party solver with no thread code: records the BLAS threads it runs on."""

    provides = ("error",)
    default_stop = (("tolerance", {"tol": 0.1}),)
    default_max_iter = 50
    seen = {}
    fail_at = None

    def start(self, problem):
        self.seen["start"] = _blas_threads()
        self.seen["start_openmp"] = _gram.max_threads()
        return _ProbeState(self.seen, self.fail_at)

    def finalize(self, problem, state, status):
        self.seen["finalize"] = _blas_threads()
        return {"dual_coef_": np.zeros(problem.n_samples)}


@pytest.fixture
def probe_solver():
    _BlasProbe.seen = {}
    _BlasProbe.fail_at = None
    mk.register("solver", "blas_probe")(_BlasProbe)
    return _BlasProbe


_XP = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
_YP = np.array([1, 1, 0, 0])


@pytest.mark.parametrize("busy", [True, False], ids=["busy", "free"])
def test_every_solver_runs_on_the_blas_threads_the_loop_chose(busy, blas_default,
                                                              probe_solver, monkeypatch):
    test, calls = _cores(busy)
    monkeypatch.setattr(_threads, "busy_cores", test)
    omp = _gram.max_threads()
    res = mk.solve(_XP, _YP, solver="blas_probe")
    nt = 1 if busy else blas_default
    # a one-shot phase on one thread runs its OpenMP loops on one; the steps keep the
    # OpenMP threads (their passes choose for themselves)
    assert probe_solver.seen == {"start": nt, "step": {nt}, "finalize": nt,
                                 "start_openmp": 1 if busy else omp, "step_openmp": {omp}}
    assert _gram.max_threads() == omp
    assert _blas_threads() == blas_default  # restored after the run
    assert res.extra["blas_threads"] == nt
    assert res.extra["blas_choice"] == {
        "policy": "auto", "max": blas_default, "start": nt, "referee": nt, "finalize": nt,
        "one_thread_steps": 9 if busy else 0, "default_steps": 0 if busy else 9,
        "tests": len(calls), "changes": 1 if busy else 0}
    assert calls and set(calls) == {blas_default}


@pytest.mark.parametrize("busy", [True, False], ids=["busy", "free"])
def test_shared_nystroem_features_are_computed_on_the_threads_of_a_runs_start(
        busy, blas_default, monkeypatch):
    # the one-vs-rest fit's map and Phi(X) stand for the start of every run that takes
    # them: on busy cores one BLAS thread and one OpenMP thread, as a start would have
    from marginkit.kernels.approximation import NystroemFeatures

    rbf = mk.get_plugin("kernel", "rbf")
    seen = []

    class _Recording(rbf):
        def __call__(self, A, B=None):
            seen.append((_blas_threads(), _gram.max_threads()))
            return super().__call__(A, B)

    monkeypatch.setattr(_threads, "busy_cores", _cores(busy)[0])
    omp = _gram.max_threads()
    X = np.random.default_rng(0).standard_normal((300, 4))
    F = NystroemFeatures(_Recording(gamma=0.5), 30, 0).fit(X)
    assert F.features_.shape == (300, 30)
    assert seen and set(seen) == {(1, 1) if busy else (blas_default, omp)}
    assert (_blas_threads(), _gram.max_threads()) == (blas_default, omp)  # restored


def test_a_failing_step_restores_the_blas_threads(blas_default, probe_solver, monkeypatch):
    monkeypatch.setattr(_threads, "busy_cores", _cores(True)[0])
    probe_solver.fail_at = 3
    with pytest.raises(ArithmeticError, match="step failed on purpose"):
        mk.solve(_XP, _YP, solver="blas_probe")
    assert probe_solver.seen["step"] == {1}
    assert _blas_threads() == blas_default


def test_a_limit_of_the_caller_wins(blas_default, probe_solver, monkeypatch):
    test, calls = _cores(False)
    monkeypatch.setattr(_threads, "busy_cores", test)
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        res = mk.solve(_XP, _YP, solver="blas_probe")
        assert _blas_threads() == 1
    assert {k: probe_solver.seen[k] for k in ("start", "step", "finalize")} == \
        {"start": 1, "step": {1}, "finalize": 1}
    assert calls == []  # nothing tested, nothing set
    assert res.extra["blas_threads"] == 1
    assert res.extra["blas_choice"]["policy"] == "limited"
    assert _blas_threads() == blas_default


def test_below_the_threads_seen_before_is_a_limit(blas_default, monkeypatch):
    monkeypatch.setattr(BlasChoice, "_seen", [blas_default + 1])
    choice = BlasChoice(busy=_cores(True)[0])
    with choice.phase("start"):
        assert choice.policy == "limited" and _blas_threads() == blas_default
    choice.close()


def test_another_runs_limit_is_not_the_callers(blas_default):
    # marginkit's own one-thread context (another run's, or a solver's) is open: the run
    # still chooses, nests in it, and the default comes back when both are closed
    outer = single_threaded_blas()
    outer.__enter__()
    try:
        choice = BlasChoice(busy=_cores(True)[0])
        assert choice.policy == "auto" and choice.default == blas_default
        with choice.phase("start"):
            assert _blas_threads() == 1
    finally:
        outer.__exit__(None, None, None)
    assert _blas_threads() == 1  # the run's own context holds
    choice.close()
    assert _blas_threads() == blas_default


def test_choice_follows_the_cores_and_tests_rarely(blas_default):
    answers = iter([True, False, True])
    t = [0.0]
    choice = BlasChoice(busy=lambda want: next(answers), clock=lambda: t[0])
    with choice.phase("start"):
        assert _blas_threads() == 1 and choice.due == 0.0
    t[0] = 1.0
    choice.step(0, 1.0)
    assert _blas_threads() == blas_default and choice.due == 1.0 + choice.interval
    with choice.phase("referee", 5):  # within ``reuse`` of the last test: its answer
        assert _blas_threads() == blas_default
    t[0] = 2.0
    choice.step(7, 2.0)
    assert _blas_threads() == 1
    choice.close(8)
    assert _blas_threads() == blas_default
    assert choice.summary() == {"blas_threads": 1, "blas_choice": {
        "policy": "auto", "max": blas_default, "start": 1, "referee": blas_default,
        "one_thread_steps": 1, "default_steps": 7, "tests": 3, "changes": 3}}


def test_a_phase_like_an_earlier_one_takes_its_threads_without_a_test(blas_default):
    answers = iter([False, True])
    t = [0.0]
    choice = BlasChoice(busy=lambda want: next(answers), clock=lambda: t[0])
    with choice.phase("referee", 3):
        assert _blas_threads() == blas_default
    t[0] = 1.0  # beyond ``reuse``: a phase of its own would test the cores again
    with choice.phase("finalize", 3, like="referee"):
        assert _blas_threads() == blas_default
    assert choice.tests == 1
    with choice.phase("finalize", 3):
        assert _blas_threads() == 1
    choice.close()
    assert choice.tests == 2 and _blas_threads() == blas_default


def test_a_claims_model_is_reported_with_the_rounding_its_certificate_holds(blas_default,
                                                                            monkeypatch):
    # found on the digits: the cores busy at finalize only, finalize computed an exact
    # kernel model's coefficients (a product with the eigen map) on one BLAS thread where
    # the accepted certificate held them from the referee's two, they differed in the
    # last bits, and the run raised "r.support_ and r.support_coef_ are not the predictor
    # its certificate checks"; finalize now runs on the threads of the referee that
    # accepted the claim
    def busy(want, cores=None):  # busy outside the run loop: at finalize only
        f = sys._getframe(1)
        while f is not None:
            if f.f_code is _api.run.__code__:
                return False
            f = f.f_back
        return True

    monkeypatch.setattr(_threads, "busy_cores", busy)
    monkeypatch.setattr(BlasChoice, "reuse", 0.0)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((1437, 64))
    y = (X[:, 0] + 0.5 * rng.standard_normal(1437) > 0).astype(int)
    res = mk.solve(X, y, solver="iterated_tikhonov", kernel="rbf")
    assert res.status == "converged" and res.certificate.verify(X, y)
    choice = res.extra["blas_choice"]
    assert choice["finalize"] == choice["referee"] == blas_default


def test_microsecond_steps_are_decided_by_elapsed_time(blas_default, monkeypatch):
    # a perceptron run of many tiny steps: a test at the start and then at most one per
    # ``interval`` of run time (plus the referee and finalize)
    test, calls = _cores(True)
    monkeypatch.setattr(_threads, "busy_cores", test)
    monkeypatch.setattr(BlasChoice, "reuse", 0.0)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 5))
    y = np.where(X @ np.arange(1.0, 6.0) > 0, 1, 0)
    res = mk.solve(X, y, solver="perceptron", max_iter=200_000)
    assert res.n_iter > 100
    assert len(calls) <= 4 + res.time_s / BlasChoice.interval
    choice = res.extra["blas_choice"]
    assert choice["one_thread_steps"] == res.n_iter and choice["tests"] == len(calls)


@pytest.mark.parametrize("kernel, params", [
    ("rbf", {"n_components": 60, "random_state": 0}),
    ("rbf", {}),
    ("linear", {}),
])
def test_results_do_not_depend_on_the_blas_choice(kernel, params, blas_default,
                                                  monkeypatch):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((300, 8))
    y = np.where(X[:, 0] + 0.3 * rng.standard_normal(300) > 0, 1, -1)
    got = {}
    for busy in (True, False):
        monkeypatch.setattr(_threads, "busy_cores", _cores(busy)[0])
        got[busy] = mk.solve(X, y, solver="iterated_tikhonov", kernel=kernel, **params)
    one, default = got[True], got[False]
    assert one.extra["blas_choice"]["start"] == 1
    assert default.extra["blas_choice"]["start"] == blas_default
    assert one.status == default.status and one.n_iter == default.n_iter
    for name in ("coef_", "dual_coef_", "intercept_"):
        a, b = getattr(one, name, None), getattr(default, name, None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_verbose_2_reports_the_blas_choice(blas_default, probe_solver, monkeypatch, capsys):
    monkeypatch.setattr(_threads, "busy_cores", _cores(True)[0])
    mk.solve(_XP, _YP, solver="blas_probe", verbose=2)
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("[blas_probe] stopped: converged after 9 iterations, ")
    assert last.endswith(f"; BLAS threads (1 when the cores were busy, else {blas_default}): "
                         "start 1, referee 1; steps 9 on 1")


# ------------------------------------------------------------------------ the busy test
class _Machine:
    """Scripted /proc readings for ``busy_cores``: the machine's runnable tasks (one
    reading after another), this process's threads and those of them runnable."""

    def __init__(self, monkeypatch, running, threads=4, own=1, python=1):
        self.running = list(running)
        self.scans = 0
        monkeypatch.setattr(_threads, "_runnable_now",
                            lambda: self.running.pop(0) if len(self.running) > 1
                            else self.running[0])
        monkeypatch.setattr(_threads, "_own_runnable", self._own)
        monkeypatch.setattr(_threads.threading, "active_count", lambda: python)
        real = _threads.os.listdir
        monkeypatch.setattr(_threads.os, "listdir",
                            lambda p: [str(i) for i in range(threads)]
                            if p == "/proc/self/task" else real(p))
        self.own = own

    def _own(self):
        self.scans += 1
        return self.own


@pytest.mark.parametrize("running, threads, own, want, cores, busy, scans", [
    ([1], 4, 1, 2, 2, False, 0),        # only this thread runs: free, no scan
    ([2], 4, 1, 1, 2, False, 0),        # one other task, one thread wanted of two cores
    ([9], 4, 1, 2, 2, True, 0),         # busy even if all four threads are runnable
    ([3, 3], 4, 3, 2, 2, False, 1),     # the runnable tasks are this process's pool
    ([3, 3], 4, 2, 2, 2, True, 1),      # one other task: no room for two threads
    ([3, 2], 4, 2, 2, 2, False, 1),     # the other task ran for a moment only
    ([4], 4, 1, 8, 4, True, 1),         # 8 threads wanted, 4 cores: all must be free
])
def test_busy_cores_counts_the_other_runnable_tasks(monkeypatch, running, threads, own,
                                                    want, cores, busy, scans):
    machine = _Machine(monkeypatch, running, threads=threads, own=own)
    assert busy_cores(want, cores=cores) is busy
    assert machine.scans == scans


def test_busy_cores_without_proc_reads_the_load_average(monkeypatch):
    monkeypatch.setattr(_threads, "_runnable_now", lambda: None)
    monkeypatch.setattr(_threads.os, "getloadavg", lambda: (2.5, 0.0, 0.0))
    assert busy_cores(2, cores=2) is True
    assert busy_cores(2, cores=4) is False
    monkeypatch.delattr(_threads.os, "getloadavg")
    assert busy_cores(2, cores=2) is False


def test_busy_cores_reads_this_machine():
    # the real readings: a boolean, whatever the load
    assert busy_cores(2) in (True, False)
    assert _threads._own_runnable() >= 1  # the calling thread runs


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
def test_a_request_of_one_thread_starts_no_openmp_team():
    # solver_params={"threads": 1} caps every pass of the solver over X, the one-time
    # passes of its start (scaling statistics, row constants) included: on rows large
    # enough for the parallel parts (>= 2e5 entries) a fresh process gains no thread
    code = (
        "import os, numpy as np, marginkit as mk\n"
        "X = np.random.default_rng(0).standard_normal((24000, 20))\n"
        "y = np.where(X[:, 0] > 0, 1.0, -1.0)\n"
        "n = len(os.listdir('/proc/self/task'))\n"
        "for s in ('fista', 'fista_svm'):\n"
        "    mk.solve(X, y, solver=s, max_iter=3, solver_params={'threads': 1})\n"
        "print(n, len(os.listdir('/proc/self/task')))\n"
        "mk.solve(X, y, solver='fista', max_iter=3, solver_params={'threads': 2})\n"
        "print(len(os.listdir('/proc/self/task')))\n")
    env = dict(os.environ, OMP_NUM_THREADS="2")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=300, check=True).stdout.split()
    before, after, default = map(int, out)
    assert after == before
    # the test can see a team: a request of two threads starts one (the default
    # threads may stay on one on a busy machine, BlasChoice and ThreadChoice)
    assert default > before


def test_the_intercept_from_the_model_does_not_depend_on_the_blas_threads():
    # found by a test run on a busy machine: the intercept t_bar - m . coef was a BLAS dot,
    # split among a number of threads that BlasChoice may change between the claim's
    # check and the result's finalize; the two intercepts differed in the last bit and
    # the result was refused ("r.intercept_ is not the intercept its certificate checks")
    from threadpoolctl import threadpool_limits

    from marginkit.solvers.svm._data import _Original

    rng = np.random.default_rng(0)
    orig = _Original.__new__(_Original)
    orig.m = rng.normal(size=3_200_000)
    coef = rng.normal(size=3_200_000)
    with threadpool_limits(1):
        one = orig.original(None, 0.25, coef)[1]
    with threadpool_limits(2):
        two = orig.original(None, 0.25, coef)[1]
    assert one == two
