"""Concurrent runs: the BLAS thread limit is scoped to the solves that set it, and one
instance of a solver, kernel, smoother or stopping rule serves several runs at once
(per-run state lives in the run)."""
import os
import threading
import warnings

import numpy as np
import pytest

import marginkit as mk
from marginkit.utils._threads import single_threaded_blas

threadpoolctl = pytest.importorskip("threadpoolctl")


def _blas_counts():
    return [(i["filepath"], i["num_threads"]) for i in threadpoolctl.threadpool_info()
            if i["user_api"] == "blas"]


def _run_threads(fns, main=None):
    """Run each fn in its own thread (and ``main`` in this one meanwhile); re-raise the
    first error."""
    errors = []

    def wrap(fn):
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=wrap, args=(fn,)) for fn in fns]
    for t in threads:
        t.start()
    if main is not None:
        wrap(main)
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


# ------------------------------------------------------------------- BLAS thread limit
def _check_limitable(counts):
    if not counts:
        pytest.skip("no BLAS library found by threadpoolctl")
    if all(n == 1 for _, n in counts):
        if (os.cpu_count() or 1) == 1 or "1" in (os.environ.get("OPENBLAS_NUM_THREADS"),
                                                os.environ.get("OMP_NUM_THREADS")):
            pytest.skip("BLAS is configured for one thread: nothing to limit")
        pytest.fail(f"BLAS was left on one thread by an earlier run: {counts}")


class _Actor:
    """A thread (or the calling thread) that enters and leaves the context on request."""

    def __init__(self, main=False):
        self.ctx = single_threaded_blas()
        self.main = main
        self.todo, self.done = [], threading.Semaphore(0)
        self.wake = threading.Semaphore(0)
        self.errors = []
        if not main:
            self.thread = threading.Thread(target=self._loop)
            self.thread.start()

    def _do(self, action):
        if action == "enter":
            self.ctx.__enter__()
        elif action == "exit":
            self.ctx.__exit__(None, None, None)
        elif action == "raise":
            # leave through an exception raised inside the context
            try:
                raise RuntimeError("inside")
            except RuntimeError as exc:
                self.ctx.__exit__(type(exc), exc, exc.__traceback__)

    def _loop(self):
        while True:
            self.wake.acquire()
            action = self.todo.pop(0)
            if action == "stop":
                return
            try:
                self._do(action)
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                self.errors.append(exc)
            self.done.release()

    def __call__(self, action):
        if self.main:
            self._do(action)
            return
        self.todo.append(action)
        self.wake.release()
        if action != "stop":
            self.done.acquire()


@pytest.mark.parametrize("order", [
    "A+ B+ A- B-", "A+ B+ B- A-", "B+ A+ A- B-", "B+ A+ B- A-",
    "A+ B+ A! B-", "A+ B+ B! A!", "A+ A- B+ B-", "A+ B+ C+ A- C- B-",
])
@pytest.mark.parametrize("main", ["A", "B", None], ids=["A-main", "B-main", "no-main"])
def test_blas_limit_restored_under_any_interleaving(order, main):
    """Enter/leave from different threads (one of them possibly the main thread, which
    threadpoolctl makes the only one able to change OpenBLAS once it has set it), in
    every order, leaving normally or through an exception: 1 thread while any context
    is open, the original counts once all are closed."""
    mk.solve(np.eye(3), [0, 1, 1], solver="fista")  # BLAS loaded as in a run
    before = _blas_counts()
    _check_limitable(before)
    actors = {name: _Actor(main=(name == main)) for name in "ABC"}
    try:
        open_ = 0
        for step in order.split():
            name, sign = step[0], step[1]
            actors[name]({"+": "enter", "-": "exit", "!": "raise"}[sign])
            open_ += 1 if sign == "+" else -1
            counts = _blas_counts()
            if open_:
                assert all(n == 1 for _, n in counts), (step, counts)
        assert _blas_counts() == before
        for a in actors.values():
            assert a.errors == []
    finally:
        for a in actors.values():
            if not a.main:
                a("stop")
                a.thread.join()


class _Raises(mk.plugins.StoppingRule):
    requires = ("error_bound",)

    def check(self, state):
        if state.n_iter >= 3:
            raise ArithmeticError("rule failed on purpose")
        return None


def test_blas_counts_unchanged_after_many_concurrent_solves():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 40))
    y = (X[:, 0] + 0.3 * rng.standard_normal(300) > 0).astype(int)
    before = _blas_counts()
    _check_limitable(before)

    def fista():
        for _ in range(8):
            mk.solve(X, y, solver="fista", max_iter=20)

    def gram():
        for _ in range(8):
            mk.solve(X, y, solver="snkp", kernel="rbf", max_iter=20)

    def raising():
        for _ in range(8):
            with pytest.raises(ArithmeticError, match="on purpose"):
                mk.solve(X, y, solver="fista", stop=[_Raises()], max_iter=20)

    # the main thread solves too: threadpoolctl lets the main thread, once it has set
    # OpenBLAS's count, be the only one that can change it while it lives
    _run_threads([fista, gram, raising, fista, gram, raising], main=fista)
    assert _blas_counts() == before
    # and from the main thread afterwards, as for any single solve
    mk.solve(X, y, solver="fista", max_iter=5)
    assert _blas_counts() == before


# --------------------------------------------------------- shared plug-in instances
SOLVERS = mk.list_plugins()["solver"]


def _problem(seed, n=90, d=5):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = (X @ rng.standard_normal(d) + 0.4 * rng.standard_normal(n) > 0).astype(int)
    return X, y


def _kernels_for(cls):
    approx = {"random_state": 0, "n_components": 20}
    if "feature_map" in cls.requires.get("kernel", ()):
        return [("linear", {}), ("nystroem", approx), ("rff", approx)]
    return [("linear", {}), ("rbf", {"gamma": 0.3}), ("poly", {"degree": 2}),
            ("nystroem", approx)]


def _same(a, b):
    assert a.status == b.status and a.n_iter == b.n_iter, (a.status, b.status, a.n_iter, b.n_iter)
    for f in ("coef_", "dual_coef_", "dual_vector", "certified_mask", "support_coef_"):
        va, vb = getattr(a, f, None), getattr(b, f, None)
        assert (va is None) == (vb is None), f
        if va is not None:
            assert np.array_equal(np.asarray(va), np.asarray(vb)), f
    assert set(a.history) == set(b.history)
    for key in a.history:
        assert np.array_equal(a.history[key], b.history[key], equal_nan=True), key
    assert (a.certificate is None) == (b.certificate is None)
    if a.certificate is not None:
        assert a.certificate.kind == b.certificate.kind
        assert a.certificate.value == b.certificate.value


@pytest.mark.parametrize("solver", SOLVERS)
def test_shared_instances_serve_concurrent_runs(solver):
    """One Solver, Kernel, Smoother and StoppingRule instance each, used by 4 threads at
    once on 4 different problems (and in sequence): every result equals that of the same
    problem solved alone with fresh instances."""
    from marginkit._api import resolve_stop

    cls = mk.get_plugin("solver", solver)
    problems = [_problem(seed) for seed in range(4)]
    for kname, kparams in _kernels_for(cls):
        solver_obj = cls()
        kernel = mk.get_plugin("kernel", kname)(**kparams)
        smoother = None
        if "smoother" in cls.requires:
            smoother = mk.get_plugin("smoother", cls.default_smoother)()
        rules = resolve_stop(tuple(solver_obj.default_stop))
        shared = dict(solver=solver_obj, kernel=kernel, smoother=smoother, stop=rules,
                      max_iter=150, random_state=0)

        def fresh(X, y):
            return mk.solve(X, y, solver=solver, kernel=kname, kernel_params=kparams,
                            max_iter=150, random_state=0)

        alone = [fresh(X, y) for X, y in problems]
        for (X, y), ref in zip(problems, alone):  # in sequence: nothing carried over
            _same(mk.solve(X, y, **shared), ref)
        out = [None] * 4
        barrier = threading.Barrier(4)

        def work(i):
            barrier.wait()
            out[i] = mk.solve(*problems[i], **shared)

        _run_threads([lambda i=i: work(i) for i in range(4)])
        for res, ref in zip(out, alone):
            _same(res, ref)
        assert not getattr(kernel, "fitted", False)  # the runs fitted copies of their own


@pytest.mark.filterwarnings("ignore:.*The model is the last iterate")  # ConvergenceWarning
def test_sklearn_estimators_from_threads():
    """Estimators fitted in 4 threads at once (one shared kernel instance among their
    hyper-parameters), then one fitted estimator predicting from 4 threads: the same as
    one thread at a time."""
    pytest.importorskip("sklearn")
    from sklearn.base import clone

    from marginkit.sklearn import PerceptronClassifier, SVMClassifier

    kernel = mk.get_plugin("kernel", "nystroem")(n_components=20, random_state=0)
    problems = [_problem(seed) for seed in range(4)]
    Xtest = np.random.default_rng(9).standard_normal((50, 5))
    for est in (PerceptronClassifier(kernel=kernel, max_iter=200, random_state=0),
                SVMClassifier(kernel=kernel, max_iter=200, random_state=0),
                PerceptronClassifier(kernel="rbf", max_iter=200)):
        alone = [clone(est).fit(X, y).decision_function(Xtest) for X, y in problems]
        fitted = [clone(est) for _ in problems]
        _run_threads([lambda e=e, p=p: e.fit(*p) for e, p in zip(fitted, problems)])
        for e, ref in zip(fitted, alone):
            assert np.array_equal(e.decision_function(Xtest), ref)
        parts = [Xtest[i::3] for i in range(3)] + [Xtest]
        one_by_one = [fitted[0].decision_function(P) for P in parts]
        out = [None] * 4

        def predict(i, e=fitted[0]):
            out[i] = e.decision_function(parts[i])

        _run_threads([lambda i=i: predict(i) for i in range(4)])
        for a, b in zip(out, one_by_one):
            assert np.array_equal(a, b)


@pytest.mark.parametrize("make", ["SVMClassifier", "PerceptronClassifier",
                                  "IteratedTikhonovClassifier"])
def test_predict_during_a_refit_in_another_thread_reads_one_fit(make):
    """Found by review: fit set classes_ at its start and the results at its end, so a
    predict of another thread during a refit paired the new classes_ with the old
    results and inverted every label, silently. A fit now publishes its attributes in one
    assignment, and the prediction methods read one copy of them."""
    import threading

    import marginkit.sklearn as mks

    rng = np.random.default_rng(0)
    X = rng.standard_normal((600, 5))
    s = X[:, 0] + 0.3 * rng.standard_normal(600)
    yA, yB = np.where(s > 0, 1, 2), np.where(s > 0, 20, 10)  # the same split, other order
    kw = {"kernel": "linear"} if make == "IteratedTikhonovClassifier" else {}
    new = lambda: getattr(mks, make)(random_state=0, **kw)  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        refA, refB = new().fit(X, yA).predict(X), new().fit(X, yB).predict(X)
        est = new().fit(X, yA)
        done, torn, seen = threading.Event(), [], [0]

        def refit():
            for k in range(8):
                est.fit(X, yB if k % 2 == 0 else yA)
            done.set()

        def read():
            while not done.is_set():
                p = est.predict(X)
                seen[0] += 1
                if not (np.array_equal(p, refA) or np.array_equal(p, refB)):
                    torn.append(p)

        threads = [threading.Thread(target=refit), threading.Thread(target=read)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert seen[0] > 0 and not torn


def test_a_fit_publishes_only_what_it_changed():
    """Review of the one-assignment publication: a fit's end reverted what a callback or
    another thread set on the estimator during the fit (set_params, an attribute)."""
    from marginkit.sklearn import SVMClassifier

    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 4))
    y = np.where(X[:, 0] > 0, 1, -1)
    est = SVMClassifier(solver="fista", max_iter=None)

    def callback(state):
        est.history_ = getattr(est, "history_", 0) + 1
        est.set_params(max_iter=123)

    est.set_params(callback=callback)
    est.fit(X, y)
    assert est.history_ > 0 and est.max_iter == 123 and hasattr(est, "result_")


def test_coef_and_intercept_read_one_fit():
    """Review: coef_ and intercept_ read results_ more than once each, so a refit in
    another thread could give W of one fit with b of another (shapes (1, 4) and (3,))
    within one call."""
    from marginkit.sklearn import SVMClassifier

    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 4))
    y2 = np.where(X[:, 0] > 0, 1, 2)
    y3 = np.digitize(X[:, 0], [-0.5, 0.5])
    est = SVMClassifier(solver="dcd").fit(X, y2)
    done, bad = threading.Event(), []

    def refit():
        for k in range(10):
            est.fit(X, y3 if k % 2 == 0 else y2)
        done.set()

    def read():
        while not done.is_set():
            W, b = est._linear_parts()  # what coef_ and intercept_ each read
            if W.shape[0] != b.shape[0]:
                bad.append((W.shape, b.shape))

    threads = [threading.Thread(target=refit), threading.Thread(target=read)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


def test_fits_of_one_estimator_are_serialized_and_a_nested_fit_is_refused():
    """Review: two threads refitting one estimator on 3 and 5 features mixed the two fits
    (n_features_in_ of one, coef_ of the other, in 5 of 30 pairs), and a fit called from
    the estimator's own callback published a model that predicted on neither width."""
    from marginkit.sklearn import PerceptronClassifier, SVMClassifier

    rng = np.random.default_rng(0)
    X5 = rng.standard_normal((200, 5))
    y = np.where(X5[:, 0] > 0, 1, -1)
    X3 = X5[:, :3]
    est = PerceptronClassifier()
    mixed = []

    def refit(X):
        for _ in range(6):
            est.fit(X, y)
            snap = dict(est.__dict__)
            if snap["n_features_in_"] != snap["results_"][0].coef_.shape[0] - 1:
                mixed.append(snap["n_features_in_"])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        threads = [threading.Thread(target=refit, args=(X,)) for X in (X3, X5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not mixed
    assert est.predict(X5 if est.n_features_in_ == 5 else X3).shape == (200,)

    outer = SVMClassifier().fit(X3, y)
    outer.set_params(callback=lambda state: outer.fit(X5, y))
    with pytest.raises(RuntimeError, match="fit was called during a fit of the same estimator"):
        outer.fit(X3, y)
    assert outer.n_features_in_ == 3 and outer.predict(X3).shape == (200,)


def test_the_fit_lock_is_per_instance_even_for_equal_estimators():
    """Review round 4: the lock table was keyed by equality, so estimators whose __eq__
    compares parameters (clones among them) shared one lock, and a callback fitting a
    clone in another thread deadlocked."""
    from marginkit.sklearn import SVMClassifier, _fit_lock

    class Equal(SVMClassifier):
        def __eq__(self, other):
            return type(other) is type(self) and self.get_params() == other.get_params()

        def __hash__(self):
            return 0

    a, b = Equal(), Equal()
    assert a == b and _fit_lock(a) is not _fit_lock(b) and _fit_lock(a) is _fit_lock(a)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((100, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    done = []

    def callback(state):
        if not done:
            t = threading.Thread(target=lambda: done.append(b.fit(X, y)))
            t.start()
            t.join(timeout=60)
            assert not t.is_alive()

    a.set_params(callback=callback)
    a.fit(X, y)
    assert done and hasattr(a, "result_")
