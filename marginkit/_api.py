"""``solve``: validate, compose the plug-ins, run the iteration loop, wrap the ``Result``."""
import contextlib
import copy
import dataclasses
import numbers
import signal
import sys
import threading
import time
import warnings

import numpy as np
import scipy.sparse as sp

from ._compose import (_instantiate, _rules_and_cap, claim_thresholds, compose,
                       resolve_defaults, resolve_kernel, resolve_stop)
from ._config import FIELD_NAMES as _CONFIG_FIELDS, Config
from ._executors import local_executor
from .exceptions import ConvergenceWarning
from ._registry import get_plugin
from ._result import Result, bind_run_fields
from .certificates import CLAIM_KINDS
from ._width import check_width_budget
from ._validation import (check_gram, check_sample_weight, check_X, check_y, dask_array_of,
                          label_count)
from .plugins import Problem
from . import stopping
from .utils._memory import in_small_pages
from .utils._threads import BlasChoice

__all__ = ["solve", "Problem", "resolve_kernel", "resolve_stop", "compose",
           "claim_thresholds", "run", "referee"]


def _make_config(config, kwargs):
    fields = _CONFIG_FIELDS
    direct, extra = {}, {}
    for k, v in kwargs.items():
        if k in fields:
            direct[k] = v
        else:
            extra[k] = v
    sp_given = direct.pop("solver_params", None)
    if config is None:
        solver_params = dict(sp_given or {})
        solver_params.update(extra)
        return Config(**direct, solver_params=solver_params)
    if not isinstance(config, Config):
        raise TypeError(f"config must be a marginkit.Config, got {type(config).__name__}")
    if direct or extra or sp_given:
        solver_params = dict(config.solver_params)
        solver_params.update(sp_given or {})
        solver_params.update(extra)
        return config.replace(**direct, solver_params=solver_params)
    return config


def _seeded_kernel(config):
    """``config`` with its integer ``random_state`` also given to a registered kernel
    that draws at random (``nystroem``, ``rff``: a ``random_state`` parameter) named by
    name or class without one, so that a seeded call is repeatable and ``Result.config``
    says which draw the run made; a kernel instance, or a kernel seed given in
    ``kernel_params``, is kept as it is."""
    seed, kernel = config.random_state, config.kernel
    if not isinstance(seed, numbers.Integral) or isinstance(seed, bool):
        return config
    if isinstance(kernel, str):
        try:
            kernel = get_plugin("kernel", kernel)
        except ValueError:
            return config  # an unknown name is compose's error
    if not isinstance(kernel, type) or "random_state" not in getattr(kernel, "param_table", {}):
        return config
    params = dict(config.kernel_params or {})
    if params.get("random_state") is not None:
        return config
    params["random_state"] = int(seed)
    return config.replace(kernel_params=params)


def _private_plugins(config):
    """``config`` with its plug-in instances (solver, kernel, smoother, stopping rules)
    replaced by copies, so that the run and its ``Result.config`` keep the parameters they
    were given: a later ``set_params`` on the caller's instance rebuilds that instance
    only. A shallow copy keeps what an instance holds (a fitted kernel approximation's
    map); names, classes and callables are kept as they are."""
    import copy

    from .plugins import Plugin

    def own(spec):
        return copy.copy(spec) if isinstance(spec, Plugin) else spec

    changes = {f: own(getattr(config, f)) for f in ("solver", "kernel", "smoother")
               if isinstance(getattr(config, f), Plugin)}
    stop = config.stop
    if isinstance(stop, Plugin):
        changes["stop"] = own(stop)
    elif isinstance(stop, (list, tuple)) and any(isinstance(s, Plugin) for s in stop):
        changes["stop"] = type(stop)(own(s) for s in stop)
    return config.replace(**changes) if changes else config


class _Verbose:
    """Progress lines of a run (``verbose >= 1``), on stdout.

    One line per reported iteration, ``[solver] iter K  T s  key=value ...``: the iteration,
    the seconds since the run started and the state's snapshot (the solver's own progress
    measures, named as in ``Result.history``). Level 1 reports iteration 0, then at most
    one iteration every half second, and the last one; level 2 every iteration. Each
    iteration is reported once; the run ends with one ``stopped:`` line.
    """

    def __init__(self, level, solver_name, stream=None):
        self.level = level
        self.name = solver_name
        self.stream = stream or sys.stdout
        self.last = -1.0
        self.shown = None  # the iteration of the last line printed

    def line(self, k, elapsed, snap):
        self.last = elapsed
        self.shown = k
        items = "  ".join(f"{key}={val:.6g}" for key, val in snap.items())
        print(f"[{self.name}] iter {k:6d}  {elapsed:8.3f}s  {items}".rstrip(), file=self.stream,
              flush=True)

    def __call__(self, k, elapsed, snap):
        if self.level >= 2 or k == 0 or elapsed - self.last >= 0.5:
            self.line(k, elapsed, snap)

    def close(self, k, elapsed, status, last=None, note=None, blas=None):
        """The line of ``last`` = (iteration, elapsed, snapshot), the state's last snapshot,
        unless printed already, then the ``stopped:`` line (with ``note``, and at level 2
        the BLAS threads the run chose, ``blas``: a ``BlasChoice``)."""
        if last is not None and self.shown != last[0]:
            self.line(*last)
        tail = f", {note}" if note else ""
        if blas is not None and self.level >= 2:
            tail += f"; {blas.describe()}"
        print(f"[{self.name}] stopped: {status} after {k} iterations, {elapsed:.3f}s{tail}",
              file=self.stream, flush=True)

    def abandon(self):
        """A run that an exception ends: no ``stopped:`` line (the exception says why)."""


class _ProgressBar:
    """The run as a tqdm progress bar (``progress_bar=True``), on stderr: iterations out of
    ``max_iter`` and the state's snapshot (the solver's progress measures, as the lines
    of ``verbose``) after the bar, refreshed at most ten times a second; the bar ends
    with the run's status (and, for a run that did not finish, ``verbose``'s closing line
    below it). Same calls as ``_Verbose``."""

    def __init__(self, solver_name, total):
        from tqdm.auto import tqdm

        self.bar = tqdm(total=total, desc=solver_name, unit="it", leave=True)
        self.name = solver_name
        self.last = -1.0

    def _show(self, k, snap, **extra):
        self.bar.set_postfix({**{key: f"{val:.3g}" for key, val in snap.items()}, **extra},
                             refresh=False)
        self.bar.update(k - self.bar.n)

    def __call__(self, k, elapsed, snap):
        if elapsed - self.last >= 0.1:
            self.last = elapsed
            self._show(k, snap)

    def close(self, k, elapsed, status, last=None, note=None, blas=None):
        """The bar's last state with the status; below it, for a run that did not finish
        (``note``), the closing line ``verbose`` prints: what did not happen and what to
        change."""
        self._show(k, last[2] if last is not None else {}, status=status)
        self.bar.close()
        if note:
            self.bar.write(f"[{self.name}] stopped: {status} after {k} iterations, {note}",
                           file=sys.stderr)

    def abandon(self):
        """Close the bar of a run that an exception ends (no status to show)."""
        self.bar.close()


class _BestEffort:
    """Progress output (``_Verbose``, ``_ProgressBar``, made by ``make``) as best effort,
    as the logging module's handlers do: a stream that cannot be written (None under
    pythonw or a service, a closed file, a broken pipe) ends the output with one
    ``RuntimeWarning``, not the run (found by review: the run ended with "I/O operation
    on closed file" and no Result). Same calls as ``_Verbose``."""

    def __init__(self, make):
        self.out = None
        self.out = self._do(make)

    def _do(self, fn, *args):
        try:
            return fn(*args)
        except (OSError, ValueError, AttributeError) as exc:
            self.out = None
            try:
                warnings.warn(f"progress output stopped: {type(exc).__name__}: {exc} "
                              "(verbose writes to sys.stdout, progress_bar to sys.stderr); "
                              "the run goes on", RuntimeWarning, stacklevel=4)
            except (OSError, ValueError):
                pass  # the warning's stream (stderr) cannot be written either
            return None

    def __call__(self, *args):
        if self.out is not None:
            self._do(self.out, *args)

    def close(self, *args, **kwargs):
        if self.out is not None:
            self._do(lambda: self.out.close(*args, **kwargs))

    def abandon(self):
        if self.out is not None:
            self._do(self.out.abandon)


class _DeferredInterrupt:
    """Context manager of ``interrupt="return"`` runs: a Ctrl-C (SIGINT) during the loop
    only sets a flag, checked between iterations, so ``state.step()`` is never cut in the
    middle (the state stays consistent and the run ends with status ``"interrupted"``). A
    second Ctrl-C raises at once. Installed only in the main thread and only over Python's
    default SIGINT handler (runs with ``interrupt="raise"``, the default, install nothing).
    """

    def __init__(self):
        self.hit = False
        self.forced = False
        self._old = None

    def _handler(self, signum, frame):
        if self.hit:
            self.forced = True
            raise KeyboardInterrupt
        self.hit = True

    def __enter__(self):
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            self._old = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc):
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)
        return False


#: statuses the run loop itself decides (never claims)
_LOOP_STATUSES = frozenset(("max_iter", "time_limit", "callback", "interrupted"))


def referee(problem, solver, state, status):
    """Re-check the claim ``status`` of ``state`` from the data.

    Returns ``(accepted, certificate)``. The certificate is ``state.certificate(status)``,
    or, for a state without that method, the one ``solver.finalize(problem, state,
    status)`` returns. A claim status (``certificates.CLAIM_KINDS``) is accepted only with
    a certificate of the matching kind that verifies on the training data
    (``problem.check_certificate``); any other status is accepted without a certificate
    when there is none, and only if it verifies when there is one. A refuted claim is
    reported to ``state.refuted(status, verdict)`` (when the state has it) and the run goes
    on. Errors of the check (a kernel that is not positive semi-definite on the data)
    propagate.
    """
    claim_kind = CLAIM_KINDS.get(status)
    make = getattr(state, "certificate", None)
    if make is not None:
        cert = make(status)
    else:
        cert = (solver.finalize(problem, state, status) or {}).get("certificate")
    if cert is None:
        return claim_kind is None, None
    cert = run_certificate(problem, cert)
    if claim_kind is not None and type(cert).__module__.partition(".")[0] != "marginkit":
        # the referee is the certificate's own check: a class of the solver's (a subclass
        # that overrides check, or ignores the run's configuration) would referee itself
        # (found by review)
        raise TypeError(
            f"solver {solver.name or type(solver).__name__!r} offered a "
            f"{type(cert).__name__} for the claim {status!r}: a claim is re-checked by one "
            "of marginkit's certificate types (marginkit.certificates: SeparatorCertificate, "
            "InfeasibilityCertificate; the SVM and Tikhonov solvers' own), built as they are")
    if claim_kind is not None and getattr(cert, "kind", None) != claim_kind:
        raise TypeError(
            f"solver {solver.name or type(solver).__name__!r} offered a "
            f"{getattr(cert, 'kind', None)!r} certificate for the claim {status!r}, which "
            f"needs a {claim_kind!r} one"
        )
    verdict = problem.check_certificate(cert)
    if verdict:
        return True, cert
    hook = getattr(state, "refuted", None)
    if hook is not None:
        hook(status, verdict)
    return False, None


def run_certificate(problem, cert):
    """``cert`` as a certificate of this run: checked, reported and saved with the run's
    configuration (``problem.config``: its thresholds and its kernel), whatever
    configuration it was built with. A copy when it held another one or none (a
    plug-in's certificate built with ``config=None`` was checked against a kernel and a
    threshold of its own: an RBF kernel's separator of XOR data verified as the linear
    run's, found by review); ``load_result`` binds a stored certificate the same way."""
    run = getattr(problem, "config", None)
    if run is None or not hasattr(cert, "config") or cert.config is run:
        return cert
    cert = copy.copy(cert)
    try:
        cert.config = run
    except AttributeError:  # a read-only property (found by review: a bare error)
        pass
    if cert.config is not run:
        raise TypeError(f"a {type(cert).__name__} offered for this run does not take the "
                        "run's configuration (its config cannot be set): a certificate's "
                        "config must be a plain attribute")
    return cert


def _stop_requested(value):
    """A callback's answer: None, a bool or a number, by its truth value (True ends the run,
    status "callback"); anything else (an array, a string, the state) is refused by name
    (an array gave numpy's "truth value ... is ambiguous", a string "False" ended the run;
    found by review)."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if value is None or isinstance(value, (bool, np.bool_, numbers.Real)):
        return bool(value)
    raise TypeError(f"callback returned a {type(value).__name__}; return None or a bool "
                    "(True ends the run)")


#: what a stopping rule's ``check`` may return to end a run (None: go on)
_RULE_STATUSES = (*CLAIM_KINDS, "converged", "max_iter", "time_limit")


def _rule_status(rule, value):
    """A stopping rule's answer: None or one of ``_RULE_STATUSES``; anything else (True,
    1, an unknown string, an array) is refused by the rule's name (it became
    ``Result.status`` as it was, or numpy's "unhashable type"; found by review)."""
    if value is None or (isinstance(value, str) and value in _RULE_STATUSES):
        return value
    kind = type(value).__name__
    what = (f"{value!r} ({kind})" if isinstance(value, (str, bool, np.bool_, numbers.Number))
            else f"an object of type {kind}")
    allowed = ", ".join(repr(s) for s in _RULE_STATUSES)
    exc = ValueError if isinstance(value, str) else TypeError
    raise exc(f"stopping rule {rule.name or type(rule).__name__!r}: check() returned {what}; "
              f"return None to go on, or a status: {allowed}")


def _same_field(a, b):
    """Whether a finalize field equals the run's own value of it."""
    if a is b:
        return True
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def _snapshot_shapes(solver, snap, shapes, k):
    """The fields of a state's snapshot and their shapes, checked against the first
    snapshot's (``shapes``): a dict with the same fields, each of one shape, at every
    iteration. Found by review: a snapshot that was not a dict, or whose vector grew, was
    noticed only when the history was converted after the whole run, by an error naming
    neither the solver nor snapshot()."""
    who = f"solver {solver.name or type(solver).__name__!r}: snapshot()"
    if not isinstance(snap, dict):
        raise TypeError(f"{who} returned {type(snap).__name__}; return a dict of field -> "
                        "number (or array of one shape)")
    got = {key: np.shape(val) for key, val in snap.items()}
    if shapes is not None and got != shapes:
        raise ValueError(f"{who} at iteration {k} returned the fields and shapes {got}, at "
                         f"the first iteration {shapes}: a snapshot reports the same fields, "
                         "each of one shape, at every iteration")
    return got


def _check_stated(rule, declared, state, status):
    """A rule that fired (a claim or ``"converged"``; a run's end such as a solver's
    stall, ``"max_iter"``, is the state's own) while the run took batches of steps must
    have declared a threshold that holds (``triggers``: the batches stop only where one
    holds). Found by review: a rule declaring none, or another one than its check tests,
    was consulted at the ends of batches only, and the run went on to its budget past
    where the rule fired, with the rule's status. Checked wherever the rule fires, at the
    end of every batch."""
    if not any(t.holds(state) for t in declared):
        raise ValueError(
            f"stopping rule {rule.name or type(rule).__name__!r}: check() returned "
            f"{status!r} at iteration {state.n_iter} where none of the thresholds it declares "
            f"holds (triggers: {list(declared)}); triggers(problem) must state when check "
            "fires (or return None: the run then checks the rule after every step)")


def _checked_batch(solver, done, limit, history):
    """A state's ``step_batch`` answer ``(steps, snapshots)``: between 1 and ``limit``
    steps (an integer), and for each field the history records, the snapshots of all the
    steps but the last (found by review: a count of 0 made the run spin forever, its
    history growing; more than ``limit`` steps ran past max_iter; snapshots of the wrong
    length or of unknown fields gave a history of other length than n_iter, or a bare
    KeyError)."""
    who = f"solver {solver.name or type(solver).__name__!r}: step_batch(triggers, limit={limit})"
    try:
        steps, snaps = done
    except (TypeError, ValueError):
        raise TypeError(f"{who} must return (steps, snapshots) or None") from None
    if isinstance(steps, (bool, np.bool_)) or not isinstance(steps, numbers.Integral) \
            or not 1 <= steps <= limit:
        raise ValueError(f"{who} returned {steps!r} steps; it must take between 1 and "
                         f"{limit} steps (an integer), or return None to take none")
    if not isinstance(snaps, dict):
        raise TypeError(f"{who} returned snapshots of type {type(snaps).__name__}; give a "
                        "dict of one list per snapshot field")
    unknown = sorted(map(str, set(snaps) - set(history)))
    if unknown:
        raise ValueError(f"{who} returned snapshots of field(s) {unknown[:5]} that the "
                         f"state's snapshot() does not report ({sorted(history)[:8]})")
    for key in history:
        try:
            count = len(snaps.get(key, ()))
        except TypeError:
            count = "no list of"
        if count != steps - 1:
            raise ValueError(f"{who} took {steps} steps but returned {count} snapshots "
                             f"of {key!r}; give those of every step but the last "
                             f"({steps - 1})")
    return int(steps), snaps


def run(problem, solver, rules, max_iter, config, blas=None):
    """The iteration loop shared by every solver.

    Returns ``(state, status, history, elapsed, certificate)``: ``certificate`` is the one
    the run stopped on (re-checked by ``referee``): a claim's, or a ``"converged"`` run's
    when its solver offered one; None otherwise.

    ``blas`` (a ``marginkit.utils._threads.BlasChoice``) chooses the BLAS threads of
    ``solver.start``, of the steps and of each referee check (one thread when the cores
    are busy, else the process's default); the caller that passes it closes it, else the
    run makes its own and restores the default threads when it ends.

    A Ctrl-C raises ``KeyboardInterrupt`` out of the loop, as anywhere in Python: the
    solvers' context managers restore what they set (BLAS thread counts) on the way out,
    and a run keeps its state on ``state``, never on the plug-in instances. With
    ``config.interrupt == "return"`` the loop defers it to the end of the current
    iteration and returns with status ``"interrupted"`` (a second Ctrl-C raises at once).
    """
    own_blas = blas is None
    if own_blas:
        blas = BlasChoice()
    try:
        return _loop(problem, solver, rules, max_iter, config, blas)
    finally:
        if own_blas:
            blas.close()


def _loop(problem, solver, rules, max_iter, config, blas):
    clock = time.perf_counter
    t0 = clock()  # time_limit counts the start-up too: the wall clock a user waits
    problem.stop = tuple(rules)
    problem.deadline = stopping.deadline(rules, t0)
    with blas.phase("start"):
        state = solver.start(problem)
    if state is None or not callable(getattr(state, "step", None)):
        # found by review: a start() returning None failed on "'NoneType' object has no
        # attribute 'problem'"
        raise TypeError(f"solver {solver.name or type(solver).__name__!r}: start() returned "
                        f"{'None' if state is None else 'a ' + type(state).__name__}, which "
                        "has no step(); return the run's state (a marginkit.plugins."
                        "SolverState)")
    if getattr(state, "problem", None) is None:
        state.problem = problem
    history = {}
    callback = config.callback
    name = solver.name or type(solver).__name__
    verbose = (_BestEffort(lambda: _ProgressBar(name, max_iter)) if config.progress_bar
               else _BestEffort(lambda: _Verbose(config.verbose, name)) if config.verbose
               else None)
    status = None
    accepted = None
    last = None  # (iteration, elapsed, snapshot) of the state's last snapshot
    k = 0  # the loop's count of steps: what state.n_iter reads
    defer = config.interrupt == "return"
    guard = _DeferredInterrupt() if defer else contextlib.nullcontext()
    # several steps per call (``step_batch``) when nothing but the rules runs between
    # steps and every rule states its test as thresholds on state fields (``triggers``)
    batch, triggers = None, None
    if callback is None and verbose is None:
        batch = getattr(state, "step_batch", None)
        if batch is not None:
            # (a generator of triggers is read once: found by review, the batch's list
            # took it and the rule's own check then saw none)
            declared = [None if t is None else tuple(t)
                        for t in (rule.triggers(problem) for rule in rules)]
            if all(t is not None for t in declared):
                triggers = [t for ts in declared for t in ts]
            else:
                batch = None
    stated = dict(zip(map(id, rules), declared)) if batch is not None else None
    shapes = None  # the fields of the first snapshot and their shapes
    try:
        with guard:
            while True:
                state.n_iter = k
                state.elapsed = clock() - t0
                snap = state.snapshot()
                shapes = _snapshot_shapes(solver, snap, shapes, k)
                for key, val in snap.items():
                    history.setdefault(key, []).append(val)
                if verbose is not None:
                    last = (k, state.elapsed, snap)
                    verbose(*last)
                for rule in rules:
                    status = _rule_status(rule, rule.check(state))
                    if status and stated is not None and status not in _LOOP_STATUSES:
                        _check_stated(rule, stated[id(rule)], state, status)
                    if status and status not in _LOOP_STATUSES:
                        with blas.phase("referee", k):
                            ok, accepted = referee(problem, solver, state, status)
                        if not ok:
                            status = None
                    if status:
                        break
                if status:
                    break
                if defer and guard.hit:
                    status = "interrupted"
                    break
                if k >= max_iter:
                    status = "max_iter"
                    break
                if callback is not None and _stop_requested(callback(state)):
                    status = "callback"
                    break
                if state.elapsed >= blas.due:
                    blas.step(k, state.elapsed)
                if batch is not None:
                    done = batch(triggers, max_iter - k)
                    if done is not None:
                        steps, snaps = _checked_batch(solver, done, max_iter - k, history)
                        for key, vals in snaps.items():
                            history[key].extend(vals)
                        k += steps
                        continue
                    batch = None
                try:
                    state.step()
                except stopping.DeadlineReached:
                    if not stopping.past(problem.deadline):
                        raise  # not this run's time limit: the solver's own error
                    # the step was cut at the run's deadline, its state left as it was
                    status = "time_limit"
                    break
                k += 1
    except KeyboardInterrupt:
        if not defer or guard.forced:
            if verbose is not None:
                verbose.abandon()
            raise
        status = "interrupted"
        last = None  # the state may have moved on since its last snapshot
    except BaseException:
        # an error of the solver, a rule, the referee or the callback: a progress bar is
        # closed, not left open on the terminal above the traceback
        if verbose is not None:
            verbose.abandon()
        raise
    state.n_iter = k
    elapsed = clock() - t0
    state.elapsed = elapsed
    blas.count(k)  # the threads stay as chosen for finalize
    if verbose is not None:
        note = unfinished(rules, max_iter, status, state.n_iter, getattr(state, "failed", None))
        if last is not None and last[0] != state.n_iter:
            last = None
        verbose.close(state.n_iter, elapsed, status, last, note, blas)
    hist = {k: np.asarray(v) for k, v in history.items()}
    return state, status, hist, elapsed, accepted


#: statuses that end a run on its budget, not on what it found
_BUDGET_STATUSES = ("max_iter", "time_limit")


def _rule_name(rule):
    return rule.name or type(rule).__name__


def unfinished(rules, max_iter, status, n_iter, failure=None):
    """Why a run that stopped with ``status`` after ``n_iter`` iterations did not finish,
    or None when it did.

    A run finishes on a claim or a convergence status (any status but the budget ones),
    and a run whose rules make no claim (a fixed budget, such as ``pegasos``' epochs or
    ``stop=("max_iter", {"n": ...})``, or ``{"n": None}``: the run's cap, ``pegasos``'
    default length) finishes on its own ``max_iter`` rule. It does not
    finish when ``time_limit`` ends it, or when it reaches ``max_iter`` (the loop's cap
    ``max_iter``, or a rule) before a rule that can end it otherwise fired. ``failure`` is
    the solver's reason when it could not go on (a run's ``extra["failure"]``). Returns a
    clause that follows "stopped with status S after N iterations": what did not happen
    and what to change (``max_iter``, ``time_limit``, the rules' ``advice``).
    """
    if status not in _BUDGET_STATUSES:
        return None
    claims = [r for r in rules if getattr(r, "status", None) not in _BUDGET_STATUSES]
    # the max_iter rules that fired (a rule without an iteration count ``n`` is taken as fired)
    fired = [r.params.get("n") for r in rules if getattr(r, "status", None) == "max_iter"
             and not (isinstance(r.params.get("n"), int) and n_iter < r.params["n"])]
    if status == "max_iter" and not claims and fired:
        return None  # a claim-less run ended on its own budget rule: its planned end
    if failure:
        return f"without its claim: {failure}"
    if claims:
        what = (f"before its stopping rule{'s' if len(claims) > 1 else ''} "
                f"{', '.join(_rule_name(r) for r in claims)} could end it with a claim")
    else:
        what = "before its own stopping rules ended it"
    if status == "time_limit":
        limits = [r.params.get("seconds") for r in rules
                  if getattr(r, "status", None) == "time_limit"]
        now = f" (now {min(limits):g} s)" if limits and None not in limits else ""
        change = f"raise time_limit{now}"
    elif fired and None not in fired:
        change = f"raise n of the max_iter stopping rule (now {min(fired)})"
    else:
        change = f"raise max_iter (now {max_iter})"
    advice = [a for a in (getattr(r, "advice", None) for r in claims) if a]
    return f"{what}; {change}" + "".join(f"; {a}" for a in advice)


def unfinished_result(result):
    """``unfinished`` for a ``Result``: why its run did not finish, or None.

    The run's rules and iteration cap are resolved from ``result.config`` as ``compose``
    resolves them; ``result.extra["failure"]`` is the solver's own reason, if any.
    """
    config = result.config
    if result.status not in _BUDGET_STATUSES or not isinstance(config, Config):
        return None
    solver = _instantiate("solver", config.solver, config.solver_params)
    rules, max_iter = _rules_and_cap(config, solver)
    return unfinished(rules, max_iter, result.status, result.n_iter,
                      (result.extra or {}).get("failure"))


def finish_fields(problem, fields, accepted):
    """The certificate rules of a ``Result``: the accepted claim's certificate replaces the
    one ``finalize`` built; any other certificate is kept only if it verifies on the
    training data (else it, and a certified mask, are dropped)."""
    if accepted is not None:
        fields["certificate"] = accepted
        mask = getattr(accepted, "mask", None)
        if mask is not None and "certified_mask" in fields:
            fields["certified_mask"] = np.array(mask, dtype=bool)
        return fields
    cert = fields.get("certificate")
    if cert is not None:
        cert = fields["certificate"] = run_certificate(problem, cert)
    if cert is not None and not problem.check_certificate(cert):
        cert = fields["certificate"] = None
    if fields.get("certified_mask") is not None:
        # the points of the verified certificate, none without one (found by review: a
        # plug-in's finalize reported every point certified with no certificate at all,
        # and save / load_result kept the mask)
        mask = getattr(cert, "mask", None)
        mask = None if mask is None else np.asarray(mask)
        fields["certified_mask"] = np.array(mask, dtype=bool) \
            if mask is not None and mask.shape == (problem.n_samples,) and \
            mask.dtype == np.bool_ else np.zeros(problem.n_samples, dtype=bool)
    return fields


def _referee_margin_bounds(problem, solver, fields):
    """A plug-in solver's ``margin_bounds`` are the referee's (found by review: a
    plug-in's (0.9, 0.95) was reported where the referee's upper bound for its own p was
    0.67): ``certificates.margin_bounds`` recomputed from the data for its ``dual_coef_``
    (alpha: any direction bounds the margin from below; none, or not n finite numbers:
    the lower bound is -inf) and its ``dual_vector`` (p: any p >= 0 bounds it from above;
    none, or not n finite numbers >= 0: the uniform p), as the built-in family's are.
    marginkit's solvers report the referee's already."""
    if fields.get("margin_bounds") is None or \
            type(solver).__module__.partition(".")[0] == "marginkit":
        return
    from .certificates import NotPositiveSemidefiniteError, labels_pm, margin_bounds

    n = problem.n_samples

    def vector(name):
        try:
            v = np.asarray(fields.get(name), dtype=np.float64)
        except (TypeError, ValueError):
            return None
        return v if v.shape == (n,) and np.all(np.isfinite(v)) else None

    alpha, p = vector("dual_coef_"), vector("dual_vector")
    if alpha is None:
        alpha = np.zeros(n)
    if p is None or np.any(p < 0):
        p = np.full(n, 1.0 / max(n, 1))
    kernel = problem.kernel
    X, y = problem.referee_data(blocked=getattr(kernel, "feature_map", None) is not None)
    try:
        lower, upper = margin_bounds(X, labels_pm(y, problem.classes_), kernel, alpha, p,
                                     memory_budget=getattr(
                                         getattr(problem, "config", None), "memory_budget",
                                         None))
    except NotPositiveSemidefiniteError:
        lower, upper = -np.inf, np.inf
    fields["margin_bounds"] = (float(lower), float(upper))


def _refuse_weights(solver, w):
    """The message for weights given to a solver that does not take them (None when the
    weights are all ones: the unweighted problem)."""
    if np.all(w == 1.0):
        return None
    from .solvers.perceptron import _PerceptronFamily

    name = solver.name or type(solver).__name__
    if isinstance(solver, _PerceptronFamily):
        return (f"solver {name!r} does not take sample_weight: positive weights do not change "
                "whether the data are separable, so the problem is the same without them; "
                "drop the rows of weight 0 (X[w > 0], y[w > 0]), as "
                "PerceptronClassifier.fit(X, y, sample_weight) does, and leave the weights out")
    return (f"solver {name!r} does not take sample_weight; the weighted problems are solved "
            "by 'fista', 'fista_svm', 'dcd' (per-point boxes C w_i), 'pegasos' and "
            "'iterated_tikhonov' (weighted losses)")


@in_small_pages
def solve(X, y, config=None, sample_weight=None, features=None, **kwargs):
    """Solve a margin problem and return a ``Result`` with its certificate.

    Parameters
    ----------
    X : array-like or scipy.sparse matrix, shape (n_samples, n_features)
        float32 or float64 (other numeric dtypes are converted); with
        ``kernel="precomputed"`` the (n, n) Gram matrix. Never modified.
    y : array-like, shape (n_samples,)
        Two distinct labels (classifiers) or real targets (regression solvers).
    config : Config, optional
        A full configuration; keyword arguments override its fields.
    sample_weight : array-like, shape (n_samples,), optional
        Per-sample weights (finite, >= 0, not all zero; never modified), data like y.
        The SVM solvers ('fista', 'fista_svm', 'dcd') give point i the dual box
        [0, C w_i], as LIBSVM's ``-wi`` and scikit-learn's ``SVC(sample_weight=...)``
        (mu unchanged; a point of weight 0 is never certified); 'pegasos' minimizes the
        weighted hinge loss; 'iterated_tikhonov' the weighted risk
        1/n sum_i w_i loss_i (integer t, method="newton"). The certificate is checked
        with the weights (``certificate.verify(X, y, sample_weight=w)``) and
        ``Result.extra["weighted"]`` records the weighting. The perceptron family and
        other solvers without ``Solver.sample_weight`` refuse weights that are not all
        ones; a dask array X with weights is refused.
    features : marginkit.kernels.approximation.NystroemFeatures, optional
        The Nystroem map and its feature rows Phi(X), fitted once on this X and shared by
        several runs (the classes of a one-vs-rest fit): 'iterated_tikhonov' with
        ``n_components`` then runs on them instead of drawing the centres and mapping X
        again. The run checks that they are the map of its problem (the same kernel,
        ``n_components`` and X, and with an integer ``random_state`` the centres it would
        draw) and raises ``ValueError`` otherwise; solvers without
        ``Solver.takes_features`` refuse them. ``Result.extra["features_given"]`` records
        it; the certificate is checked as without them, from X, y, the kernel and the
        centres it holds.
    **kwargs
        The fields of ``Config``, which override those of ``config``: ``solver``,
        ``kernel``, ``kernel_params``, ``smoother``, ``stop``, ``max_iter``,
        ``random_state``, ``verbose``, ``progress_bar``, ``callback``, ``time_limit``,
        ``memory_budget``, ``warn`` and ``interrupt`` (see ``Config``).
        ``progress_bar=True`` draws a tqdm bar on stderr in place of ``verbose``'s lines;
        ``warn=True``, or ``verbose >= 1`` with the default ``warn=None``, issues a
        ``marginkit.ConvergenceWarning`` when the run ends on ``max_iter`` or
        ``time_limit`` without its claim. Any other keyword is a parameter of the solver
        (``eps=1e-6``, ``C=...``), kept in ``Config.solver_params``.

    Returns
    -------
    Result

    Examples
    --------
    >>> import numpy as np, marginkit as mk
    >>> X = np.array([[1.0, 0.2], [0.8, -0.1], [-1.0, 0.1], [-0.9, -0.3]])
    >>> res = mk.solve(X, [1, 1, 0, 0], solver="snkp")
    >>> res.status, res.certificate.verify(X, [1, 1, 0, 0])
    ('separable', True)
    """
    # the run's own plug-in instances: a later set_params on the caller's cannot reach it
    config = _private_plugins(_seeded_kernel(_make_config(config, kwargs)))
    solver, kernel, smoother, rules, max_iter = compose(config)
    Xd = dask_array_of(X)  # None for in-memory input, an xarray object on numpy included
    if Xd is not None:
        if sample_weight is not None:
            raise TypeError(
                "sample_weight is not supported with a dask array X yet; compute X into "
                "memory (X.compute()) to solve the weighted problem")
        if features is not None:
            raise TypeError(
                "features (feature rows computed before the run) are not supported with a "
                "dask array X; compute X into memory (X.compute()) or leave features=None")
        # dask arrays: the data stays on the workers (marginkit._dask), validated chunk-wise
        # there; the same run loop drives the solver's blocks
        from ._dask import dask_problem

        # X's width against memory_budget as in memory (the referee checks it so too:
        # found by review, a dask run accepted a width whose verify was then refused)
        check_width_budget(Xd, kernel, config.memory_budget)
        composed = (solver, kernel, smoother, rules, max_iter)
        with dask_problem(Xd, y, config, composed) as (problem, driver, config, composed):
            solver, _, _, rules, max_iter = composed
            res = _run_to_result(problem, driver, solver, rules, max_iter, config)
            res.extra.setdefault("dask", problem.summary())
        return res
    task = getattr(solver, "task", "classification")
    if sp.issparse(X) and X.format != "csr" and len(X.shape) == 2 and \
            label_count(y) not in (None, X.shape[0]):
        # y's length against the declared rows before X's conversion, whose row pointers
        # cost 8 bytes a declared row (found by review: a COO of 40 entries declared with
        # 1.5e8 rows took 1.7 GiB, then failed on y's length); X's own errors still come
        # first for data of the right length
        check_y(y, X.shape[0], task=task)
    Xv = check_X(X)
    check_width_budget(Xv, kernel, config.memory_budget)
    if getattr(kernel, "precomputed", False):
        check_gram(Xv)  # square, symmetric, K_ii >= 0; blockwise, never densifies sparse K
    yv, classes = check_y(y, Xv.shape[0], task=task)
    weights = None
    if sample_weight is not None:
        weights = check_sample_weight(sample_weight, Xv.shape[0])
        if not getattr(solver, "sample_weight", False):
            refusal = _refuse_weights(solver, weights)
            if refusal is not None:
                raise ValueError(refusal)
            weights = None  # all ones: the unweighted problem
    if features is not None and not getattr(solver, "takes_features", False):
        raise ValueError(
            f"solver {solver.name or type(solver).__name__!r} does not take features (feature "
            "rows computed before the run); leave features=None, or use 'iterated_tikhonov' "
            "with n_components, which runs on a fitted NystroemFeatures")
    config, (solver, kernel, smoother, rules, max_iter) = resolve_defaults(
        config, (solver, kernel, smoother, rules, max_iter), local_executor(Xv, yv),
        weights)
    problem = Problem(X=Xv, y=yv, classes_=classes, kernel=kernel, smoother=smoother,
                      params=dict(solver.params), rng=config.random_state, config=config,
                      sample_weight=weights, features=features)
    return _run_to_result(problem, solver, solver, rules, max_iter, config)


def _run_to_result(problem, runner, solver, rules, max_iter, config):
    """Run ``runner`` (the solver, or its dask driver) on ``problem`` and assemble the
    ``Result``: the run's fields, then the solver's ``finalize`` fields, the status of the
    run (a claim only after its re-check), the record of a weighted run and the
    certificate rules of ``finish_fields``."""
    blas = BlasChoice()
    try:
        state, status, history, elapsed, accepted = run(problem, runner, rules, max_iter,
                                                        config, blas)
        # finalize and the check of the certificate it returns (``finish_fields``); after
        # an accepted claim on the referee's threads (the model finalize reports is the
        # one the accepted certificate holds, rounding included: ``BlasChoice.phase``)
        with blas.phase("finalize", state.n_iter,
                        like="referee" if accepted is not None else None):
            run_fields = {"status": status, "n_iter": int(state.n_iter), "time_s": elapsed,
                          "solver": solver.name or type(solver).__name__, "config": config}
            reported = runner.finalize(problem, state, status) or {}
            # (the same value is no conflict: found by review, a finalize returning the
            # run's own status was refused)
            taken = sorted(k for k in set(reported) & set(run_fields)
                           if not _same_field(reported[k], run_fields[k]))
            if taken:
                # what describes the run is the loop's (found by review: a plug-in's
                # finalize set config to rbf on a linear run, n_iter to -5, solver to a
                # built-in that never ran; save then failed as on an edited file)
                raise ValueError(
                    f"solver {run_fields['solver']!r}: finalize returned {taken}, which the "
                    "run loop sets (the status, iterations, time, solver and "
                    "configuration of the run); return the model's fields only")
            fields = {**run_fields, "classes_": problem.classes_, "kernel": problem.kernel,
                      "task": getattr(solver, "task", "classification"), **reported}
            weights = getattr(problem, "sample_weight", None)
            if weights is not None:
                # the run was weighted: its certificate is checked with the weights
                fields["extra"] = {**(fields.get("extra") or {}), "weighted": True,
                                   "sample_weight_sum": float(weights.sum())}
            if getattr(problem, "features", None) is not None:
                fields["extra"] = {**(fields.get("extra") or {}), "features_given": True}
            finish_fields(problem, fields, accepted)
            bind_run_fields(fields, fields["solver"])
            _referee_margin_bounds(problem, solver, fields)
    finally:
        blas.close()
    # the BLAS threads the run chose (``BlasChoice``), beside a solver's own extra fields
    fields["extra"] = {**(fields.get("extra") or {}), **blas.summary()}
    hist = fields.pop("history", None)
    if hist:
        history.update(hist)
    fields["history"] = history
    res = Result(**fields)
    if config.warn or (config.warn is None and config.verbose >= 1):
        why = unfinished(rules, max_iter, res.status, res.n_iter, res.extra.get("failure"))
        if why is not None:
            warnings.warn(f"solver {res.solver!r} stopped with status {res.status!r} after "
                          f"{res.n_iter} iterations, {why}. The result is the last iterate, "
                          "with no certificate of its claim.", ConvergenceWarning,
                          stacklevel=4)  # solve's caller: past solve and its decorator
    return res


def with_dual_certificate(cfg, eps, own_tolerance=False):
    """``cfg`` (a ``Config`` whose stop is the solver's own rules) with the
    ``dual_certificate`` rule at ``eps`` added to them, where it can act.

    Returns ``(config, why, solver_name)``: ``why`` is None when the rule was added (or,
    with ``own_tolerance``, the solver's tolerance set: below); ``"own"`` when the rules
    hold one already at a tolerance this cannot set (the solver certifies at its own);
    ``"given"`` (with ``own_tolerance``) when the solver's own tolerance was given by the
    caller; else the list of state attributes the rule reads that the solver does not
    provide (``Solver.provides``). ``config`` is ``cfg`` in the cases ``"own"`` and
    missing attributes.

    With ``own_tolerance``, the solver's own tolerance on ||p||_G (its parameter
    ``Solver.dual_tol_param``: ``eps`` of the perceptron family, ``delta`` of ``snkpvn``)
    is ``eps`` unless the caller gave it (named in ``solver_params``, or set on a solver
    instance to another value than its default): rules that hold ``dual_certificate`` at
    that tolerance (``eps=None``: ``isnkpvn``, ``nvn``, ``snkpvn``) get it set to ``eps``;
    rules without one get ``dual_certificate(eps=eps)``. When the caller gave it,
    ``why`` is ``"given"`` and ``config`` certifies at the caller's tolerance: ``cfg``
    itself, or its rules with ``dual_certificate(eps=None)`` added."""
    from .stopping import DualCertificate

    solver, _, _, rules, _ = compose(cfg)
    name = solver.name or type(solver).__name__
    param = getattr(solver, "dual_tol_param", None) if own_tolerance else None
    table = getattr(solver, "param_table", None) or {}
    if param is not None and not (isinstance(param, str) and param in table):
        raise ValueError(
            f"solver {name!r}: dual_tol_param={param!r} must name one of its parameters "
            f"({sorted(table)}), the one that is its own tolerance on ||p||_G, or be None")
    given = param is not None and (
        param in cfg.solver_params
        or solver.params.get(param) != solver.param_table[param].default)
    own = [r for r in rules if isinstance(r, DualCertificate)]
    if own:
        if param is None or any(r.params["eps"] is not None for r in own):
            return cfg, "own", name
        if given:
            return cfg, "given", name
        return cfg.replace(solver_params={**cfg.solver_params, param: eps}), None, name
    rule = DualCertificate(eps=None if given else eps)
    missing = [a for a in rule.requires if a not in getattr(solver, "provides", ())]
    if missing:
        return cfg, missing, name
    return cfg.replace(stop=[*rules, rule]), "given" if given else None, name
