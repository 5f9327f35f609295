"""The solve() engine with a small pure-Python solver: loop, rules, callback, verbose, errors."""
import pickle
import re
import signal
import threading

import numpy as np
import pytest
import scipy.sparse as sp

import marginkit as mk
from marginkit.plugins import Param, Solver, SolverState


class _CountState(SolverState):
    def __init__(self, problem, target):
        self.n_iter = 0
        self.target = target
        self.X_id = id(problem.X)
        self.error = 1.0

    def step(self):
        self.n_iter += 1
        self.error = 1.0 / (1 + self.n_iter)

    def snapshot(self):
        return {"error": self.error}


class CountSolver(Solver):
    """Halves nothing, just counts: error = 1 / (1 + k)."""

    provides = ("error",)
    default_stop = (("tolerance", {"tol": 0.1}),)
    default_max_iter = 50
    param_table = {"target": Param(3, doc="unused")}

    def start(self, problem):
        return _CountState(problem, self.params["target"])

    def finalize(self, problem, state, status):
        return {"dual_coef_": np.zeros(problem.n_samples)}


@pytest.fixture
def count_solver():
    mk.register("solver", "count")(CountSolver)
    return CountSolver


X = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
Y = np.array(["a", "a", "b", "b"])


def test_default_rules_and_history(count_solver):
    res = mk.solve(X, Y, solver="count")
    assert res.status == "converged"
    assert res.n_iter == 9  # 1/(1+9) <= 0.1
    np.testing.assert_allclose(res.history["error"], 1.0 / (1 + np.arange(10)))
    assert list(res.classes_) == ["a", "b"]
    assert res.solver == "count"


def test_config_and_keywords_are_the_same_call(count_solver):
    cfg = mk.Config(solver="count", max_iter=4, solver_params={"target": 5})
    r1 = mk.solve(X, Y, config=cfg)
    r2 = mk.solve(X, Y, solver="count", max_iter=4, target=5)
    assert r1.status == r2.status == "max_iter"
    assert r1.n_iter == r2.n_iter == 4
    assert r1.config == r2.config


def test_unknown_solver_param_named(count_solver):
    with pytest.raises(TypeError, match=r"unknown parameter.*\['bogus'\].*valid parameters: \['target'\]"):
        mk.solve(X, Y, solver="count", bogus=1)


def test_stop_rule_requirements_checked(count_solver):
    with pytest.raises(ValueError, match="stopping rule 'separated' needs \\['min_margin'\\].*compatible rules"):
        mk.solve(X, Y, solver="count", stop="separated")


def test_callback_stops_and_sees_state(count_solver):
    seen = []

    def cb(state):
        seen.append(state.n_iter)
        return state.n_iter == 2

    res = mk.solve(X, Y, solver="count", callback=cb, stop=("max_iter", {"n": 40}))
    assert res.status == "callback" and res.n_iter == 2 and seen == [0, 1, 2]


def test_time_limit(count_solver):
    res = mk.solve(X, Y, solver="count", stop=("max_iter", {"n": 10**9}), max_iter=10**9,
                   time_limit=0.05)
    assert res.status == "time_limit" and res.time_s >= 0.05


def test_keyboard_interrupt_propagates_by_default(count_solver):
    calls = []

    def cb(state):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return False

    with pytest.raises(KeyboardInterrupt):
        mk.solve(X, Y, solver="count", callback=cb, stop=("max_iter", {"n": 100}))
    assert len(calls) == 3


def test_keyboard_interrupt_returns_result(count_solver):
    calls = []

    def cb(state):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return False

    res = mk.solve(X, Y, solver="count", callback=cb, stop=("max_iter", {"n": 100}),
                   interrupt="return")
    assert res.status == "interrupted" and res.n_iter == 2


def test_interrupt_is_validated():
    with pytest.raises(ValueError, match=r"interrupt='stop' is not valid; use one of "
                                         r"\['raise', 'return'\]"):
        mk.solve(X, Y, interrupt="stop")
    with pytest.raises(TypeError, match="interrupt=True has type bool"):
        mk.Config(interrupt=True)


def _sigint_during_long_run(**kw):
    timer = threading.Timer(0.2, lambda: signal.raise_signal(signal.SIGINT))
    timer.start()
    try:
        return mk.solve(X, Y, solver="count", stop=("max_iter", {"n": 10**9}), max_iter=10**9,
                        **kw)
    finally:
        timer.cancel()


def test_sigint_raises_keyboard_interrupt(count_solver):
    # a real SIGINT during a long run: Python's KeyboardInterrupt, handler untouched
    handler = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        _sigint_during_long_run()
    assert signal.getsignal(signal.SIGINT) is handler


def test_sigint_between_iterations(count_solver):
    # with interrupt="return", a real SIGINT delivered during a long run ends it promptly
    # with a Result
    res = _sigint_during_long_run(interrupt="return")
    assert res.status == "interrupted" and res.n_iter > 0


def test_verbose_prints_progress(count_solver, capsys):
    mk.solve(X, Y, solver="count", verbose=2)
    out = capsys.readouterr().out
    assert "[count] iter" in out and "error=" in out and "stopped: converged" in out
    mk.solve(X, Y, solver="count", verbose=True)
    assert "stopped" in capsys.readouterr().out


def test_verbose_lines_once_each_and_no_empty_closing_line(count_solver, capsys):
    # tolerance 0.1 fires at iteration 9: error = 1 / (1 + k)
    mk.solve(X, Y, solver="count", verbose=2)
    lines = capsys.readouterr().out.splitlines()
    iters = [int(line.split()[2]) for line in lines if " iter " in line]
    assert iters == list(range(10))
    assert lines[-1].startswith("[count] stopped: converged after 9 iterations, ")
    assert all("error=" in line for line in lines[:-1])
    assert re.fullmatch(r"\[count\] iter +9 +\d+\.\d{3}s  error=0\.1", lines[-2])
    # level 1: iteration 0 and the last one (each once), then the closing line
    mk.solve(X, Y, solver="count", verbose=1)
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[2] for line in lines[:-1]] == ["0", "9"] and len(lines) == 3
    assert all("error=" in line for line in lines[:-1])


def test_verbose_says_when_max_iter_ends_a_run_without_its_claim(count_solver, capsys,
                                                                   recwarn):
    res = mk.solve(X, Y, solver="count", max_iter=4)
    assert res.status == "max_iter" and capsys.readouterr().out == "" and not recwarn.list
    mk.solve(X, Y, solver="count", max_iter=4, verbose=1)
    last = capsys.readouterr().out.splitlines()[-1]
    assert re.fullmatch(r"\[count\] stopped: max_iter after 4 iterations, \d+\.\d{3}s, "
                        r"before its stopping rule tolerance could end it with a claim; "
                        r"raise max_iter \(now 4\); a larger tol is reached sooner", last)
    # a run without a claim to make ends on its own budget: nothing to say
    mk.solve(X, Y, solver="count", stop=("max_iter", {"n": 3}), verbose=1)
    assert re.fullmatch(r"\[count\] stopped: max_iter after 3 iterations, \d+\.\d{3}s",
                        capsys.readouterr().out.splitlines()[-1])


def test_verbose_says_when_time_limit_ends_a_run(count_solver, capsys):
    res = mk.solve(X, Y, solver="count", stop=("max_iter", {"n": 10**9}), max_iter=10**9,
                   time_limit=0.05, verbose=1)
    last = capsys.readouterr().out.splitlines()[-1]
    assert res.status == "time_limit"
    assert re.fullmatch(rf"\[count\] stopped: time_limit after {res.n_iter} iterations, "
                        r"\d+\.\d{3}s, before its own stopping rules ended it; raise time_limit "
                        r"\(now 0\.05 s\)", last)


def test_inputs_not_modified_and_sparse_kept(count_solver):
    Xs = sp.csr_matrix(X)
    Xs_copy = Xs.copy()
    Xd = X.copy()
    Xd.flags.writeable = False
    mk.solve(Xd, Y, solver="count")
    mk.solve(Xs, Y, solver="count")
    np.testing.assert_array_equal(Xd, X)
    assert (Xs != Xs_copy).nnz == 0


def test_result_pickles_and_saves(count_solver, tmp_path):
    res = mk.solve(X, Y, solver="count")
    res2 = pickle.loads(pickle.dumps(res))
    assert res2.status == res.status and res2.n_iter == res.n_iter
    path = tmp_path / "r.npz"
    res.save(path)
    res3 = mk.load_result(path)
    assert res3.status == res.status
    np.testing.assert_array_equal(res3.history["error"], res.history["error"])
    assert list(res3.classes_) == ["a", "b"]


def test_load_result_rejects_garbage(tmp_path):
    p = tmp_path / "x.npz"
    p.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a file written by Result.save"):
        mk.load_result(p)


@pytest.mark.parametrize("Xbad,ybad,exc,match", [
    (np.array([[1.0, np.nan], [0, 1]]), [0, 1], ValueError, "NaN or infinity in row"),
    (np.zeros((0, 2)), [], ValueError, "empty"),
    (np.ones(3), [0, 1, 0], ValueError, "2-D"),
    (X, Y[:3], ValueError, "3 entries but X has 4 rows"),
    (X, ["a"] * 4, ValueError, "single class"),
    (X, [0, 1, 2, 0], ValueError, "3 classes.*one-vs-rest"),
    (X.astype(complex), Y, TypeError, "complex"),
    (X.astype(object), Y, TypeError, "object"),
])
def test_bad_input_errors(count_solver, Xbad, ybad, exc, match):
    with pytest.raises(exc, match=match):
        mk.solve(Xbad, ybad, solver="count")


def test_unknown_solver_lists_names():
    with pytest.raises(ValueError, match="unknown solver 'nope'.*registered solvers"):
        mk.solve(X, Y, solver="nope")


def test_precomputed_gram_checked(count_solver):
    if "precomputed" not in mk.list_plugins()["kernel"]:
        pytest.skip("precomputed kernel not registered")
    with pytest.raises(ValueError, match="square"):
        mk.solve(X, Y, solver="count", kernel="precomputed")
    K = np.array([[1.0, 0.5, 0, 0], [0.1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])
    with pytest.raises(ValueError, match="not symmetric"):
        mk.solve(K, Y, solver="count", kernel="precomputed")
