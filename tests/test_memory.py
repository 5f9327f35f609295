"""Runs and certificate checks allocate without numpy's huge-page advice
(``marginkit.utils._memory``), and leave the caller's setting as they found it, also when
several run at once in threads or one raises."""
import threading

import numpy as np
import pytest

import marginkit as mk
from marginkit.utils import _memory

pytestmark = pytest.mark.skipif(_memory._SWITCH is None,
                                reason="this numpy has no huge-page switch")


def _advice():
    """The current setting (reading it means setting it: put it back)."""
    now = _memory._SWITCH(True)
    _memory._SWITCH(now)
    return now


@pytest.fixture
def advice_on():
    before = _memory._SWITCH(True)
    yield
    _memory._SWITCH(before)


def _data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    return X, np.where(X[:, 0] > 0, 1, -1)


def test_solve_and_check_run_without_the_advice(advice_on, monkeypatch):
    X, y = _data()
    seen = []
    from marginkit.solvers.svm import _kernel

    start = _kernel._KernelDCDState.__init__

    def spy(self, *a, **k):
        seen.append(_advice())
        return start(self, *a, **k)

    monkeypatch.setattr(_kernel._KernelDCDState, "__init__", spy)
    res = mk.solve(X, y, solver="dcd", kernel="rbf", C=1.0)
    assert seen == [False] and _advice() is True
    check = type(res.certificate).check.__wrapped__
    monkeypatch.setattr(type(res.certificate), "check", _memory.in_small_pages(
        lambda self, *a, **k: seen.append(_advice()) or check(self, *a, **k)))
    assert res.certificate.verify(X, y) and seen[-1] is False and _advice() is True


def test_setting_restored_after_an_error_and_nested_use(advice_on):
    with pytest.raises(ValueError):
        mk.solve(np.full((3, 2), np.nan), [1, -1, 1], solver="snkp")
    assert _advice() is True
    with _memory.small_pages():
        with _memory.small_pages():
            assert _advice() is False
        assert _advice() is False
    assert _advice() is True
    _memory._SWITCH(False)  # a caller's own choice is what comes back
    with _memory.small_pages():
        pass
    assert _advice() is False


def test_concurrent_runs_share_one_count(advice_on):
    """Overlapping runs in two threads: the advice stays off until the last one ends,
    then comes back on."""
    inside, release = threading.Barrier(3), threading.Event()
    states = []

    def run():
        with _memory.small_pages():
            inside.wait()
            release.wait()
            states.append(_advice())

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    inside.wait()
    assert _advice() is False
    release.set()
    for t in threads:
        t.join()
    assert states == [False, False] and _advice() is True


_INTERRUPTS = r"""
import random, signal, sys
import numpy as np
import marginkit as mk
from marginkit.utils import _memory

def advice():
    now = _memory._SWITCH(True)
    _memory._SWITCH(now)
    return now

rng = np.random.default_rng(0)
X = rng.standard_normal((20, 3))
y = np.where(X[:, 0] > 0, 1, -1)
mk.solve(X, y, solver="snkp")  # imports done before the first interrupt

def interrupt(signum, frame):
    raise KeyboardInterrupt

signal.signal(signal.SIGALRM, interrupt)
rnd = random.Random(1)
hits = 0
for i in range(1500):
    try:
        try:
            signal.setitimer(signal.ITIMER_REAL, rnd.uniform(1e-5, 4e-4))
            mk.solve(X, y, solver="snkp")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except KeyboardInterrupt:
        hits += 1
    if _memory._active != 0:
        sys.exit(f"count left at {_memory._active} after interrupt {hits}")
signal.signal(signal.SIGALRM, signal.SIG_IGN)
if hits < 100 or advice() is not True:
    sys.exit(f"{hits} interrupts, advice {advice()}")
"""


def test_interrupts_at_any_moment_leave_no_count_behind():
    """Found by review: KeyboardInterrupt at random moments of many short solves left the
    count at 1 after a few hundred interrupts, or the switch off (the setting then
    stayed as it was for the rest of the process). In a process of its own: interrupts
    at random moments may also catch other process-wide state mid-change."""
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(mk.__file__)))
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-c", _INTERRUPTS], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_interrupts_as_a_decorated_call_ends_leave_no_count_behind(advice_on):
    """Found by the second review: a Ctrl-C delivered as ``__exit__`` started (Python
    checks for signals when a function starts) left the count at 1 and the advice off,
    about once in 16 interrupts of an empty block; ``in_small_pages`` leaves inline."""
    import random
    import signal

    @_memory.in_small_pages
    def nothing():
        pass

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    rnd = random.Random(0)
    try:
        for _ in range(4000):
            try:
                try:
                    signal.setitimer(signal.ITIMER_REAL, rnd.uniform(1e-6, 3e-5))
                    for _ in range(50):
                        nothing()
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            except KeyboardInterrupt:
                pass
            assert _memory._active == 0 and _advice() is True
    finally:
        signal.signal(signal.SIGALRM, old)
        _memory._active = 0
