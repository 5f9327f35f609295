"""The solve() engine with a small pure-Python solver: loop, rules, callback, verbose, errors."""
import pickle
import re
import signal
import sys
import threading
import warnings

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


def test_deadline_reached_ends_a_run_only_past_its_deadline(count_solver, monkeypatch):
    """A step may raise ``stopping.DeadlineReached`` once the run's deadline has passed:
    the run ends at time_limit, the step not counted. Raised before it (or without a time
    limit) it is the solver's own error and reaches the caller."""
    import time

    from marginkit.stopping import DeadlineReached

    calls = []
    real = count_solver.start

    def start(self, problem):
        state = real(self, problem)
        step = state.step

        def late_step():
            calls.append(problem.deadline)
            if len(calls) == 3:
                if problem.deadline is not None:
                    time.sleep(max(0.0, problem.deadline - time.perf_counter()) + 1e-3)
                raise DeadlineReached
            step()

        state.step = late_step
        return state

    monkeypatch.setattr(count_solver, "start", start)
    res = mk.solve(X, Y, solver="count", stop=("max_iter", {"n": 40}), time_limit=0.3)
    assert res.status == "time_limit" and res.n_iter == 2
    assert len(res.history["error"]) == 3
    calls.clear()
    with pytest.raises(DeadlineReached):
        mk.solve(X, Y, solver="count", stop=("max_iter", {"n": 40}))


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


@pytest.fixture
def sigint_delivered():
    # a process started in the background by a non-interactive shell ignores SIGINT
    # (SIG_IGN inherited): Python's own handler for the test, then the one found
    found = signal.getsignal(signal.SIGINT)
    if found is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, found)


def _sigint_during_long_run(**kw):
    # the time limit only bounds a run whose signal never arrives (it then fails the
    # test instead of filling memory with 10^9 iterations' history)
    timer = threading.Timer(0.2, lambda: signal.raise_signal(signal.SIGINT))
    timer.start()
    try:
        return mk.solve(X, Y, solver="count", stop=("max_iter", {"n": 10**9}), max_iter=10**9,
                        time_limit=60.0, **kw)
    finally:
        timer.cancel()


def test_sigint_raises_keyboard_interrupt(count_solver, sigint_delivered):
    # a real SIGINT during a long run: Python's KeyboardInterrupt, handler untouched
    handler = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        _sigint_during_long_run()
    assert signal.getsignal(signal.SIGINT) is handler


def test_sigint_between_iterations(count_solver, sigint_delivered):
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


def test_progress_bar_shows_the_run_on_stderr(count_solver, capsys, monkeypatch, tmp_path):
    pytest.importorskip("tqdm")
    res = mk.solve(X, Y, solver="count", progress_bar=True)
    captured = capsys.readouterr()
    assert captured.out == "" and res.status == "converged" and res.n_iter == 9
    # the bar's last state: 9 iterations of max_iter, the snapshot and the status
    assert "count" in captured.err and "9/" in captured.err
    assert "status=converged" in captured.err and "error=0.1" in captured.err
    # not stored with the result (how a run was shown is not part of it)
    res.save(tmp_path / "run.npz")
    assert res.config.progress_bar is True
    assert mk.load_result(tmp_path / "run.npz").config.progress_bar is False
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "tqdm" else real(name, *a))
    with pytest.raises(ValueError, match=r"progress_bar=True needs tqdm.*pip install tqdm"):
        mk.solve(X, Y, solver="count", progress_bar=True)
    with pytest.raises(TypeError, match="progress_bar"):
        mk.Config(progress_bar="yes")


def test_progress_bar_says_when_max_iter_ends_a_run_without_its_claim(count_solver, capsys):
    pytest.importorskip("tqdm")
    mk.solve(X, Y, solver="count", max_iter=4, progress_bar=True)
    err = capsys.readouterr().err
    assert "status=max_iter" in err
    # the advice of verbose's closing line is not lost with the bar
    assert re.search(r"\[count\] stopped: max_iter after 4 iterations, before its stopping "
                     r"rule tolerance could end it with a claim; raise max_iter \(now 4\)", err)
    mk.solve(X, Y, solver="count", progress_bar=True)  # a finished run: the bar alone
    assert "stopped:" not in capsys.readouterr().err


def test_progress_bar_is_closed_when_an_error_ends_the_run(count_solver, capsys):
    tqdm = pytest.importorskip("tqdm")

    def fail(state):
        if state.n_iter == 3:
            raise RuntimeError("the callback fails")
        return False

    before = set(tqdm.tqdm._instances)
    with pytest.raises(RuntimeError, match="the callback fails") as info:
        mk.solve(X, Y, solver="count", progress_bar=True, callback=fail)
    # no bar of the run is left open (tqdm keeps the open ones in tqdm._instances), while
    # the traceback (which holds the run's frames, as in an interactive session) lives
    assert info.traceback and set(tqdm.tqdm._instances) <= before
    capsys.readouterr()


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


def test_solve_warns_when_asked_and_a_run_ends_without_its_claim(count_solver, capsys):
    import warnings

    def caught(**kw):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            res = mk.solve(X, Y, solver="count", **kw)
        capsys.readouterr()
        return res, [w for w in got if issubclass(w.category, mk.ConvergenceWarning)]

    # asked: warn=True, or verbose >= 1 with warn=None (the default)
    for kw in ({"warn": True}, {"verbose": 1}, {"verbose": 2, "warn": None}):
        res, got = caught(max_iter=4, **kw)
        assert res.status == "max_iter" and len(got) == 1, kw
        assert str(got[0].message).startswith(
            "solver 'count' stopped with status 'max_iter' after 4 iterations, before its "
            "stopping rule tolerance could end it with a claim; raise max_iter (now 4)")
        assert got[0].filename == __file__  # points at the caller of solve
    # not asked, a claim, or a run without a claim ending on its own budget: silent
    for kw in ({}, {"verbose": 1, "warn": False}, {"warn": True, "max_iter": 10**6},
               {"warn": True, "stop": ("max_iter", {"n": 3})}):
        res, got = caught(**{"max_iter": 4, **kw})
        assert not got, kw
    res, got = caught(stop=("max_iter", {"n": 10**9}), max_iter=10**9, time_limit=0.02,
                      warn=True)
    assert res.status == "time_limit" and "raise time_limit" in str(got[0].message)
    with pytest.raises(TypeError, match="warn"):
        mk.Config(warn="yes")


def test_estimators_warn_once_with_verbose(capsys):
    pytest.importorskip("sklearn")
    import warnings
    from sklearn.exceptions import ConvergenceWarning as SkWarning
    from marginkit.sklearn import SVMClassifier

    Xb, yb = mk.datasets.make_clusters(300, 5, noise=0.3, random_state=0)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        SVMClassifier(max_iter=2, verbose=1).fit(Xb, yb)
    capsys.readouterr()
    kinds = [w.category for w in got if issubclass(w.category, (SkWarning, mk.ConvergenceWarning))]
    assert kinds == [SkWarning]


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


# ------------------------------------------------------------ the one-way plug-in protocol
class _SilentState(SolverState):
    """Counts nothing itself: the loop's n_iter and elapsed are the only ones."""

    def __init__(self):
        self.error = 1.0
        self.seen = []

    def step(self):
        self.seen.append(self.n_iter)
        self.error /= 2.0


class _SilentSolver(Solver):
    provides = ("error",)
    default_stop = (("tolerance", {"tol": 1e-3}),)

    def start(self, problem):
        return _SilentState()

    def finalize(self, problem, state, status):
        return {}


class _WrongCount(_SilentState):
    def step(self):
        super().step()
        self.n_iter += 5  # a state's own count: the loop's assignment wins


class _WrongCountSolver(_SilentSolver):
    def start(self, problem):
        return _WrongCount()


@pytest.mark.parametrize("solver", [_SilentSolver, _WrongCountSolver])
def test_the_loop_owns_n_iter_and_elapsed(solver):
    res = mk.solve(np.eye(3), [0, 1, 1], solver=solver)
    # error = 2^-k <= 1e-3 first at k = 10; before step k the state read n_iter = k
    assert res.status == "converged" and res.n_iter == 10
    assert res.time_s >= 0.0


def test_state_n_iter_is_the_loop_count_before_each_step():
    seen = []

    class Spy(_SilentSolver):
        def start(self, problem):
            state = _WrongCount()
            seen.append(state)
            return state

    mk.solve(np.eye(3), [0, 1, 1], solver=Spy)
    assert seen[0].seen == list(range(10))
    assert seen[0].n_iter == 10 and seen[0].elapsed > 0.0


def test_a_rule_with_reset_is_refused():
    class Old(mk.plugins.StoppingRule):
        def reset(self, problem, state):
            state.error = 0.0

        def check(self, state):
            return None

    with pytest.raises(TypeError, match=r"defines reset\(problem, state\), which marginkit "
                                        r"does not call.*Remove reset"):
        mk.solve(np.eye(3), [0, 1, 1], solver=_SilentSolver, stop=Old())


class _ReadOnlyState:
    """The state as a rule sees it in these tests: reads pass through, writes raise."""

    def __init__(self, state):
        object.__setattr__(self, "_state", state)

    def __getattr__(self, item):
        return getattr(self._state, item)

    def __setattr__(self, key, value):
        raise AssertionError(f"a stopping rule wrote state.{key}")


def _builtin_rule_classes():
    reg = mk._registry.REGISTRIES["stopping"]
    return {name: reg.get(name) for name in reg.names()}


_PROTOCOL_RUNS = [
    dict(solver="dcd", random_state=0),
    dict(solver="dcd", random_state=0, stop="liblinear"),
    dict(solver="dcd", random_state=0, bound_check="always",
         stop=[("certified_points", {"fraction": 0.2}), ("max_iter", {"n": 50})]),
    dict(solver="fista"),
    dict(solver="fista_svm", stop=[("certified_points", {"fraction": 0.1})]),
    dict(solver="pegasos", epochs=3, random_state=0),
    dict(solver="snkp"),
    dict(solver="isnkpvn", stop=["separated", "dual_certificate"]),
    dict(solver="perceptron", time_limit=10.0),
    dict(solver="iterated_tikhonov", t=2, stop=[("newton_decrement", {"tol": 1e-6,
                                                                      "kappa": 2.0})]),
    dict(solver="fista", stop=[("tolerance", {"tol": 1e-3, "attribute": "error_bound"})]),
]


@pytest.mark.parametrize("kw", _PROTOCOL_RUNS, ids=lambda kw: kw["solver"])
def test_rules_read_the_state_and_are_left_unchanged(monkeypatch, kw):
    import copy

    for name, cls in _builtin_rule_classes().items():
        if "check" in vars(cls):
            orig = vars(cls)["check"]
            monkeypatch.setattr(cls, "check",
                                lambda self, state, _orig=orig: _orig(self, _ReadOnlyState(state)))
            assert "reset" not in vars(cls), name
    X, y = mk.datasets.make_separable(60, margin=0.05, random_state=3)[:2]
    spec = kw.get("stop")
    solver = mk.get_plugin("solver", kw["solver"])
    own = {k: v for k, v in kw.items() if k in solver.param_table}  # pegasos' epochs
    rules = mk._api.resolve_stop(mk.Config(stop=spec).stop
                                 or mk._api._instantiate("solver", solver, own).default_stop)
    before = [copy.deepcopy(r.__dict__) for r in rules]
    res = mk.solve(X, y, **{**kw, "stop": rules})
    assert res.status  # the rules were checked (iteration 0 at least) through the view
    for rule, state in zip(rules, before):
        assert rule.__dict__ == state, rule


def test_a_rule_instance_serves_runs_with_different_thresholds_unchanged():
    # the rule's fraction reaches the state through problem.stop, never through the rule
    rule = mk.get_plugin("stopping", "certified_points")(fraction=0.3)
    X, y = mk.datasets.make_separable(80, margin=0.05, random_state=1)[:2]
    a = mk.solve(X, y, solver="dcd", random_state=0, stop=rule)
    b = mk.solve(X[:40], y[:40], solver="dcd", random_state=0, stop=rule)
    assert rule.params == {"fraction": 0.3} and set(vars(rule)) == {"params"}
    assert a.certified_mask.sum() > 0.3 * 80 and b.certified_mask.sum() > 0.3 * 40


class _FakeState:
    def __init__(self, **fields):
        self.__dict__.update(fields)


@pytest.mark.parametrize("name,params,field,values", [
    ("separated", {}, "min_margin", [-1.0, 0.0, 1e-300, 2.0]),
    ("dual_certificate", {"eps": 1e-3}, "dual_norm", [1e-2, 1e-3, 1e-4]),
    ("tolerance", {"tol": 0.5, "attribute": "gap"}, "gap", [1.0, 0.5, 0.25]),
    ("max_iter", {"n": 3}, "n_iter", [0, 2, 3, 4]),
    ("certified_points", {"fraction": 0.25}, "n_certified", [0, 2, 3, 4]),
    ("liblinear", {"tol": 0.1}, "projected_gradient_gap", [np.inf, 0.2, 0.1, 0.05]),
])
def test_a_rules_check_fires_exactly_when_its_triggers_hold(name, params, field, values):
    rule = mk.get_plugin("stopping", name)(**params)
    problem = mk.plugins.Problem(X=np.zeros((10, 2)), y=np.ones(10), classes_=None, kernel=None,
                                 smoother=None, params={}, rng=0)
    triggers = rule.triggers(problem)
    assert triggers and all(t.field == field for t in triggers)
    fired = []
    for v in values:
        state = _FakeState(problem=problem, **{field: v})
        by_check = rule.check(state) is not None
        assert by_check == any(t.holds(state) for t in triggers), (name, v)
        fired.append(by_check)
    assert any(fired) and not all(fired)


def test_trigger_refuses_an_unknown_operator():
    with pytest.raises(ValueError, match=r"Trigger op='=='"):
        mk.plugins.Trigger("n_iter", "==", 3)


def test_rules_without_thresholds_declare_none():
    problem = mk.plugins.Problem(X=np.zeros((4, 2)), y=np.ones(4), classes_=None, kernel=None,
                                 smoother=None, params={}, rng=0)
    assert mk.get_plugin("stopping", "time_limit")(seconds=1.0).triggers(problem) is None
    assert mk.get_plugin("stopping", "dual_certificate")().triggers(problem) is None
    assert mk.get_plugin("stopping", "newton_decrement")().triggers(problem) is None


@pytest.mark.parametrize("stop", [None, "liblinear", [("certified_points", {"fraction": 0.5}),
                                                      ("max_iter", {"n": 7})]])
def test_dcd_batched_epochs_equal_single_steps(stop):
    # a callback turns batching off: the same iterations, history and result
    X, y = mk.datasets.make_separable(300, margin=0.02, random_state=5)[:2]
    kw = dict(solver="dcd", random_state=4, stop=stop)
    batched = mk.solve(X, y, **kw)
    single = mk.solve(X, y, callback=lambda state: False, **kw)
    assert (batched.status, batched.n_iter) == (single.status, single.n_iter)
    for key in single.history:
        np.testing.assert_array_equal(batched.history[key], single.history[key])
    np.testing.assert_array_equal(batched.dual_coef_, single.dual_coef_)


def test_a_third_party_rule_with_triggers_batches_dcd_epochs():
    calls = []

    class GapBelow(mk.plugins.StoppingRule):
        requires = ("projected_gradient_gap",)

        def triggers(self, problem):
            return (mk.plugins.Trigger("projected_gradient_gap", "<=", 0.05),)

        def check(self, state):
            calls.append(state.n_iter)
            return self.status if state.projected_gradient_gap <= 0.05 else None

    X, y = mk.datasets.make_separable(300, margin=0.02, random_state=5)[:2]
    res = mk.solve(X, y, solver="dcd", random_state=0, stop=GapBelow())
    ref = mk.solve(X, y, solver="dcd", random_state=0, stop=[("liblinear", {"tol": 0.05})])
    assert res.status == ref.status == "converged" and res.n_iter == ref.n_iter > 2
    assert len(calls) < res.n_iter  # epochs ran in batches between the rule's checks


@pytest.mark.parametrize("answer, exc, what", [
    (True, TypeError, r"True \(bool\)"),
    (1, TypeError, r"1 \(int\)"),
    ("foo", ValueError, r"'foo' \(str\)"),
    ("", ValueError, r"'' \(str\)"),
    (np.array(["converged"]), TypeError, r"an object of type ndarray"),
])
def test_a_rule_answer_that_is_not_a_status_is_refused_by_the_rules_name(answer, exc, what):
    """Found by review: True, 1 or "foo" became ``Result.status`` as it was (the run
    "stopped" at iteration 0), an array gave numpy's "unhashable type"."""

    class Odd(mk.plugins.StoppingRule):
        def check(self, state):
            return answer

    X, y = mk.datasets.make_xor(60, random_state=0)[:2]
    with pytest.raises(exc, match=rf"stopping rule 'Odd': check\(\) returned {what}; return "
                                  r"None to go on, or a status: 'separable', .*'converged'"):
        mk.solve(X, y, solver="fista", stop=[Odd(), ("max_iter", {"n": 30})])


def test_problem_builds_its_generator_from_the_seed():
    kw = dict(X=np.zeros((2, 1)), y=np.ones(2), classes_=None, kernel=None, smoother=None,
              params={})
    a = mk.plugins.Problem(rng=7, **kw).rng
    assert isinstance(a, np.random.Generator)
    assert a.bit_generator.random_raw() == np.random.default_rng(7).bit_generator.random_raw()
    g = np.random.default_rng(1)
    assert mk.plugins.Problem(rng=g, **kw).rng is g


# ----------------------------------------------------------------------- the module graph
def _modules(suffix="py"):
    """The dotted names of marginkit's modules with sources ``*.<suffix>``."""
    import pathlib

    root = pathlib.Path(mk.__file__).parent
    out = []
    for path in sorted(root.rglob(f"*.{suffix}")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts[-1] != "__main__":
            out.append(".".join(parts))
    return out


def _import_graph(function_level):
    """marginkit's modules -> the marginkit modules they import: the module-level imports,
    or (``function_level``) every import statement, those inside functions included."""
    import ast
    import importlib.util

    mods = set(_modules())
    compiled = set(_modules("pyx"))  # leaves: ``from . import _fast`` is that module
    graph = {}
    for mod in mods:
        spec = importlib.util.find_spec(mod)
        tree = ast.parse(open(spec.origin).read())
        pkg = mod if spec.origin.endswith("__init__.py") else mod.rpartition(".")[0]
        deps = set()
        for node in (ast.walk(tree) if function_level else tree.body):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                                    + ([node.module] if node.module else []))
                for a in node.names:
                    name = f"{base}.{a.name}"
                    deps.add(name if name in mods or name in compiled else base)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
        graph[mod] = {d for d in deps if d in mods and d != mod}
    return graph


def _assert_acyclic(graph):
    state = {}

    def visit(m, path):
        state[m] = "open"
        for d in sorted(graph[m]):
            if state.get(d) == "open":
                raise AssertionError(f"import cycle: {' -> '.join(path + [m, d])}")
            if d not in state:
                visit(d, path + [m])
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [])


def test_top_level_imports_form_no_cycle():
    _assert_acyclic(_import_graph(function_level=False))


def test_imports_inside_functions_form_no_cycle_either():
    # a cycle closed by an import inside a function still ties its modules together:
    # none of them can be read, tested or moved without the others
    deep, top = _import_graph(function_level=True), _import_graph(function_level=False)
    assert any(deep[m] - top[m] for m in deep)  # the imports inside functions are read
    _assert_acyclic(deep)


@pytest.mark.slow
def test_every_module_imports_first_in_a_fresh_interpreter():
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(mk.__file__))
    env = dict(os.environ, PYTHONPATH=root)
    for mod in _modules():
        proc = subprocess.run([sys.executable, "-c", f"import {mod}"], env=env,
                              capture_output=True, text=True)
        assert proc.returncode == 0, f"import {mod} first: {proc.stderr[-2000:]}"


def test_a_finished_result_keeps_its_configuration_when_the_callers_instances_change():
    X, y = mk.datasets.make_separable(80, margin=0.05, random_state=1)[:2]
    solver = mk.get_plugin("solver", "dcd")(C=0.5)
    rule = mk.get_plugin("stopping", "certified_points")(fraction=0.3)
    kernel = mk.get_plugin("kernel", "nystroem")(n_components=20, random_state=0)
    cfg = mk.Config(solver=solver, kernel=kernel, stop=(rule,), random_state=0)
    res = mk.solve(X, y, config=cfg)
    direct = mk.solve(X, y, solver=solver, stop=rule, random_state=0)
    solver.set_params(C=2.0)
    rule.set_params(fraction=0.9)
    kernel.set_params(n_components=5)
    for r in (res, direct):
        assert r.config.solver.params["C"] == 0.5 and r.config.solver is not solver
        assert r.config.stop[0].params["fraction"] == 0.3
        assert r.certificate.verify(X, y)
    assert res.config.kernel.params["n_components"] == 20
    # the caller's Config still holds the caller's (changed) instances
    assert cfg.solver is solver and cfg.solver.params["C"] == 2.0


@pytest.mark.parametrize("solver", ["fista", "dcd", "snkp", "iterated_tikhonov"])
def test_a_run_cut_by_max_iter_before_its_time_limit_warns(solver):
    import warnings

    # only pegasos' default rule (max_iter with n=None: the run's cap is its length) makes
    # the end at max_iter a planned one; a run whose only rule is a time limit did not
    # finish when max_iter cut it
    X, y = mk.datasets.make_xor(60, random_state=3)
    for kw in ({"stop": [("time_limit", {"seconds": 100})]}, {"time_limit": 100}):
        with pytest.warns(mk.ConvergenceWarning, match="raise max_iter"):
            res = mk.solve(X, y, solver=solver, max_iter=1, warn=True, **kw)
        assert res.status == "max_iter"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = mk.solve(X, y, solver=solver, max_iter=2, stop=[("max_iter", {"n": None})],
                       warn=True)
    assert res.status == "max_iter" and res.n_iter == 2


@pytest.mark.parametrize("kernel", ["nystroem", "rff"])
def test_an_integer_random_state_seeds_the_kernels_draw(kernel):
    # a kernel that draws at random takes the run's integer seed unless it has its own:
    # the same call gives the same result, recorded in Result.config, and certifies
    X, y = mk.datasets.load_heart_scale()
    a, b = (mk.solve(X, y, solver="fista", kernel=kernel, random_state=0) for _ in range(2))
    assert a.config.kernel_params == {"random_state": 0}
    # the same draw (the map's BLAS products may round differently on other threads)
    if kernel == "nystroem":
        assert np.array_equal(a.kernel.component_indices_, b.kernel.component_indices_)
    else:
        assert a.kernel.seed_ == b.kernel.seed_ == 0
    np.testing.assert_allclose(a.dual_coef_, b.dual_coef_, rtol=1e-9, atol=1e-12)
    assert a.status == "certified" and a.certificate.verify(X, y)
    own = mk.solve(X, y, solver="fista", kernel=kernel, kernel_params={"random_state": 5},
                   random_state=0)
    assert own.config.kernel_params == {"random_state": 5}
    free = mk.solve(X, y, solver="fista", kernel=kernel)  # no seed: a fresh draw
    assert (free.config.kernel_params or {}).get("random_state") is None


@pytest.mark.parametrize("kw", [{"verbose": 1}, {"verbose": 2}, {"progress_bar": True}])
@pytest.mark.parametrize("stream", ["none", "closed", "broken"])
def test_progress_output_that_cannot_be_written_does_not_end_the_run(kw, stream, monkeypatch):
    """stdout/stderr None (pythonw, services), closed, or a broken pipe: the run
    returns its result, the output stops with a RuntimeWarning where it can be shown
    (found by review: "I/O operation on closed file" and no Result)."""
    import io
    import os

    class Broken(io.TextIOBase):
        def write(self, s):
            raise BrokenPipeError(32, "Broken pipe")

    if stream == "closed":
        out = open(os.devnull, "w")
        out.close()
    else:
        out = None if stream == "none" else Broken()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 4))
    y = np.where(X @ rng.standard_normal(4) > 0, 1, -1)
    expected = mk.solve(X, y, solver="snkp")
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = mk.solve(X, y, solver="snkp", **kw)
    assert res.status == expected.status and res.n_iter == expected.n_iter
