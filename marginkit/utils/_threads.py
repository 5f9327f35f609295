"""Thread-count helpers shared by the Cython front ends."""
import contextlib
import math
import os
import threading
import time
from collections import deque

_LOCK = threading.Lock()
#: depth: contexts open in the process; libs: the BLAS libraries limited (found once);
#: saved: their thread counts before the outermost context
_STATE = {"depth": 0, "libs": None, "saved": ()}


def _blas_libraries():
    """threadpoolctl's controllers of the loaded BLAS libraries with a process-wide count.

    OpenBLAS built on OpenMP is left out: its count is the calling thread's OpenMP
    setting, which marginkit's own OpenMP loops in that thread read too (and a BLAS call
    inside an OpenMP region runs on one thread anyway).
    """
    from threadpoolctl import ThreadpoolController

    libs = ThreadpoolController().select(user_api="blas").lib_controllers
    return [lib for lib in libs
            if not (lib.internal_api == "openblas"
                    and getattr(lib, "threading_layer", None) == "openmp")]


def _set_counts(pairs):
    """Set each (library, count), from whichever thread calls."""
    for lib, count in pairs:
        lib.set_num_threads(count)
    # threadpoolctl (>= 3.6) lets only the first thread that sets OpenBLAS's process-wide
    # count change it until that thread lets go; letting go at once is what allows the
    # thread that closes the last context to restore the count another thread saved
    for cls in {type(lib) for lib, _ in pairs}:
        release = getattr(cls, "clear_controlling_thread", None)
        if release is not None:
            release()


class _SingleThreadedBLAS:
    """Context limiting BLAS to one thread, correct when entered from several threads.

    The limit is process-wide (the BLAS library's thread count): the first context to
    enter saves the counts and sets 1, the last to leave restores the saved counts,
    whichever threads these are and in whatever order overlapping contexts leave (an
    exception inside leaves like any exit). A count that is no longer 1 when the last
    context leaves was set by someone else meanwhile (e.g. ``threadpool_limits`` in
    another thread) and is left as it is.
    """

    def __enter__(self):
        counted = False
        try:
            with _LOCK:
                if _STATE["depth"] == 0:
                    if _STATE["libs"] is None:
                        _STATE["libs"] = _blas_libraries()  # after BLAS is loaded
                    libs = _STATE["libs"]
                    _STATE["saved"] = [lib.get_num_threads() for lib in libs]
                    _set_counts([(lib, 1) for lib, n in zip(libs, _STATE["saved"])
                                 if n is not None])
                _STATE["depth"] += 1
                counted = True
        except BaseException:
            # interrupted (Ctrl-C) part-way: undo what was done, so that no count is left
            # behind (found by review: interrupts at random moments of short runs left the
            # depth at -1 and the later runs' limits wrong)
            if counted:
                self.__exit__(None, None, None)
            else:
                with _LOCK:
                    if _STATE["depth"] == 0:
                        self._restore()
            raise
        return self

    @staticmethod
    def _restore():
        """The saved counts back where they are still 1 (under the lock, at depth 0)."""
        saved, _STATE["saved"] = _STATE["saved"], ()
        if saved:
            _set_counts([(lib, n) for lib, n in zip(_STATE["libs"], saved)
                         if n is not None and n != 1 and lib.get_num_threads() == 1])

    def __exit__(self, *exc):
        with _LOCK:
            _STATE["depth"] -= 1
            if _STATE["depth"] == 0:
                self._restore()
        return False


def single_threaded_blas():
    """Context limiting BLAS to one thread.

    Used around BLAS/LAPACK calls that run right before (or inside) marginkit's own OpenMP
    regions: OpenBLAS worker threads keep spinning for a while after a call, and on a
    machine with as many cores as OpenMP threads they take a core from the OpenMP team,
    whose barrier then waits at every iteration. While any such context is open, BLAS
    calls of other threads of the process run on one thread too; when the last one
    closes, the thread counts are those from before the first.
    """
    return _SingleThreadedBLAS()


class ThreadChoice:
    """One thread or the OpenMP team for a pass that runs once per iteration, chosen by
    timing the run itself.

    A parallel region per iteration ends in a barrier, and libgomp's idle threads spin
    while they wait: on a machine whose cores are busy (other processes, or several fits
    at once) one descheduled thread holds up the others at every iteration, and the team
    can be many times slower than one thread. The choice is therefore measured, in the
    run, from the wall time between the starts of consecutive iterations (the whole
    iteration, its serial parts included): a few iterations on one thread, then the team
    (``probe``: at most two iterations, one when the first is clearly slower), but only
    once the latest one-thread iterations, over at least ``window`` seconds (a few of the
    scheduler's time slices), got the processor for at least ``share`` of their wall
    time (the thread's CPU time over the wall time: a lower share means the cores are
    oversubscribed already, where a team that waits for its slowest thread loses; the
    probe is then put off as a lost one would be, without its cost); the team
    is kept while it is faster by ``margin``, and dropped as soon as two iterations in a
    row are slower than one thread was. A lost probe is repeated later, after at least
    ``backoff`` times its ratio of extra time (so that probing costs a few percent of the
    run at most) and twice the previous wait. Results do not depend on the choice (the
    passes' row blocks do not depend on the thread count), only the time does.

    ``requested`` is ``"auto"`` (the above) or a number of threads, used as is within
    the OpenMP limit; with an OpenMP limit of one thread (``OMP_NUM_THREADS=1``,
    ``threadpoolctl.threadpool_limits(1)``) every iteration runs on one thread. The
    instance belongs to one run (kept with the run's per-block state).
    """

    #: one-thread iterations measured before the first probe (after one unmeasured)
    first = 2
    #: the team must take at most this fraction of one thread's time to be kept
    margin = 0.9
    #: a lost probe waits at least backoff * (team / one - 1) iterations
    backoff = 32
    #: the first waits after a lost probe (it then doubles)
    wait0 = 16
    #: the least CPU share of one-thread iterations at which the team is tried
    share = 0.9
    #: the share is measured over the latest one-thread iterations of at least this
    #: many seconds (a probe waits for them)
    window = 0.01

    def __init__(self, requested="auto", clock=None, cpu_clock=None):
        self.requested = requested
        self.clock = clock or time.perf_counter
        self.cpu_clock = cpu_clock or time.thread_time
        self._cpu = None           # the thread's CPU time at the start of the previous iteration
        self.cpu_share = deque(maxlen=256)  # recent one-thread (CPU time, wall time)
        self.skipped = 0           # probes put off for a low CPU share
        self.k = 0                 # iterations begun
        self._t = None             # start of the previous iteration
        self._nt = None            # its thread count
        self.mode = "one"          # "one", "probe" or "team"
        self.one = deque(maxlen=3)   # recent one-thread iteration times
        self.team = deque(maxlen=3)  # recent team iteration times
        self.probe = []            # the current probe's times
        self.next_probe = self.first + 1
        self.wait = self.wait0
        self.slow = 0              # consecutive team iterations slower than one thread
        self.iterations = {}       # thread count -> iterations run on it
        self.probes = 0
        self.cap = 1
        self.events = []           # (iteration, message) of every change, for verbose

    def _say(self, msg):
        self.events.append((self.k, msg))

    def begin(self, cap):
        """The thread count of the iteration that starts now; ``cap``: the most threads
        the passes would use (``solvers.svm._fast.fista_threads``, read at each iteration)."""
        now, cpu = self.clock(), self.cpu_clock()
        if self._t is not None:
            self._record(self._nt, now - self._t, cpu - self._cpu)
        self._t, self._cpu = now, cpu
        self.cap = cap
        if self.requested != "auto":
            nt = max(1, min(int(self.requested), cap))
        elif cap <= 1:
            nt = 1
        else:
            nt = self._decide(cap)
        self._nt = nt
        self.k += 1
        self.iterations[nt] = self.iterations.get(nt, 0) + 1
        return nt

    def _record(self, nt, dt, cpu):
        if self.requested != "auto" or self.cap <= 1:
            return
        if nt == 1:
            if self.k > 1:  # the first interval holds the start-up of the run
                self.one.append(dt)
                self.cpu_share.append((cpu, dt))
            return
        if self.mode == "probe":
            self.probe.append(dt)
        else:
            self.team.append(dt)
            t1 = min(self.one) if self.one else math.inf
            self.slow = self.slow + 1 if dt > t1 else 0

    def _lost(self, ratio):
        self.mode = "one"
        self.wait = max(2 * self.wait, int(math.ceil(self.backoff * (ratio - 1.0))))
        self.next_probe = self.k + self.wait

    def _decide(self, cap):
        t1 = min(self.one) if self.one else math.inf
        if self.mode == "one":
            if self.k >= self.next_probe and self.one:
                cpu = wall = 0.0
                for c, w in reversed(self.cpu_share):
                    cpu += c
                    wall += w
                    if wall >= self.window:
                        break
                if wall < self.window:
                    return 1  # not measured long enough yet
                if cpu < self.share * wall:
                    self.skipped += 1
                    self.wait *= 2
                    self.next_probe = self.k + self.wait
                    self._say(f"threads 1: one thread got {cpu / wall:.0%} of a core "
                              f"(cores busy); next try in {self.wait} iterations")
                    return 1
                self.mode, self.probe = "probe", []
                self.probes += 1
                return cap
            return 1
        if self.mode == "probe":
            if not self.probe:
                return cap
            ratio = min(self.probe) / t1
            if len(self.probe) == 1 and ratio <= 1.5:
                return cap  # not clearly lost: a second iteration decides
            if ratio <= self.margin:
                self.mode, self.slow = "team", 0
                self.team.clear()
                self.team.extend(self.probe)
                self.wait = self.wait0
                self._say(f"threads {cap}: {min(self.probe) * 1e3:.3g} ms per iteration vs "
                          f"{t1 * 1e3:.3g} ms on one thread")
                return cap
            self._lost(ratio)
            self._say(f"threads 1: {cap} threads took {ratio:.2f}x one thread's "
                      f"{t1 * 1e3:.3g} ms per iteration; next try in {self.wait} iterations")
            return 1
        # team
        if self.slow >= 2:
            ratio = min(list(self.team)[-2:]) / t1
            self.mode = "one"
            self.one.clear()  # the machine changed: measure one thread afresh
            self.cpu_share.clear()
            self.next_probe = self.k + self.wait
            self._say(f"threads 1: {cap} threads became slower than one thread "
                      f"({ratio:.2f}x); next try in {self.wait} iterations")
            return 1
        return cap

    def summary(self):
        """What was chosen, for ``Result.extra``: the thread count of the last iteration,
        the OpenMP limit seen last, the iterations run on one thread and on more, and
        the number of probes of the team and of probes put off (cores busy)."""
        team = sum(v for nt, v in self.iterations.items() if nt > 1)
        return {"last": int(self._nt or 1), "max": int(self.cap),
                "policy": self.requested if self.requested == "auto" else int(self.requested),
                "one_thread_iterations": int(self.iterations.get(1, 0)),
                "team_iterations": int(team), "probes": int(self.probes),
                "probes_put_off": int(self.skipped)}


def _openmp_libraries():
    """threadpoolctl's controllers of the loaded OpenMP runtimes."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController().select(user_api="openmp").lib_controllers


class _OneThreadOpenMP:
    """Context limiting the OpenMP regions the calling thread starts to one thread (an
    OpenMP thread count is the calling thread's own setting: no other thread sees it)."""

    def __enter__(self):
        with _LOCK:
            if _STATE.get("omp") is None:
                _STATE["omp"] = _openmp_libraries()
            libs = _STATE["omp"]
        self.saved = [(lib, lib.get_num_threads()) for lib in libs]
        for lib, n in self.saved:
            if n is not None and n != 1:
                lib.set_num_threads(1)
        return self

    def __exit__(self, *exc):
        for lib, n in self.saved:
            if n is not None and n != 1:
                lib.set_num_threads(n)
        return False


def _usable_cores():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _own_runnable():
    """This process's threads that are runnable now (state R), other Python threads left
    out (they compete for the cores like other processes do): the calling thread and the
    library pools' workers (OpenBLAS, OpenMP), which spin for a while after a call."""
    others = {t.native_id for t in threading.enumerate()} - {threading.get_native_id()}
    n = 0
    for tid in os.listdir("/proc/self/task"):
        if int(tid) in others:
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # the thread ended meanwhile
            continue
        # the state is the field after the command name "(...)", which may hold spaces
        if stat[stat.rindex(b")") + 2:stat.rindex(b")") + 3] == b"R":
            n += 1
    return n


def _runnable_now():
    """Runnable tasks of the whole machine now (Linux: the 4th field of /proc/loadavg,
    the caller included), or None where there is no such count."""
    try:
        with open("/proc/loadavg", "rb") as f:
            return int(f.read().split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        return None


def busy_cores(want, cores=None):
    """Whether ``want`` threads of this process would share the cores with other work
    now: True when the runnable tasks that are not this process's own (the calling
    thread and its library pools; other Python threads of the process count as other
    work) leave fewer than ``min(want, cores)`` cores free.

    Linux reads the machine's runnable tasks now (/proc/loadavg) and, only when that
    count alone cannot decide, the states of this process's threads; elsewhere the
    1-minute load average (``os.getloadavg``, this process included) stands for them.
    With neither, the cores count as free. Costs about 10 microseconds when the count
    alone decides, about 10 more per thread of the process when it does not.
    """
    cores = cores or _usable_cores()
    room = cores - min(want, cores)  # other runnable tasks the team leaves room for
    running = _runnable_now()
    if running is None:
        try:
            return os.getloadavg()[0] - 1.0 > room
        except (AttributeError, OSError):
            return False
    if running - 1 <= room:
        return False  # free even if every runnable task is another process's
    try:
        ours_at_most = len(os.listdir("/proc/self/task")) - threading.active_count() + 1
        if running - ours_at_most > room:
            return True  # busy even if every thread of this process is runnable
        own = _own_runnable()
    except (OSError, ValueError):  # no per-thread states: every runnable task counts
        return True
    # a second reading after the scan: a task that ran for a moment (a kernel worker)
    # is not a busy core
    again = _runnable_now()
    return min(running, again if again is not None else running) - own > room


class BlasChoice:
    """BLAS/LAPACK on one thread or on the process's default threads, chosen by the run
    loop for every solver (``marginkit._api.run``).

    OpenBLAS (pthreads, the build numpy and scipy wheels ship) hands every call of some
    size to its worker threads, which spin and synchronize per call: with more runnable
    threads than cores the workers are descheduled in turn and small and medium calls
    collapse (iterated Tikhonov with a 100-component Nystroem map on the digits: 22x
    slower on two threads than on one, at load 5-10 on two cores). So the run asks, for
    each phase, whether the default threads would find their cores free (``busy_cores``:
    the runnable tasks now, 10-100 microseconds) and runs the phase on one thread when
    they would not: ``solver.start``, each referee check and ``solver.finalize`` are
    decided when they begin; the steps when the run starts stepping and then again at
    the first step boundary at least ``interval`` seconds of run time after the last
    decision (the loop compares its own clock with a due time, so a step of microseconds
    costs nothing more; a step longer than ``interval`` is decided at each boundary). A
    test less than ``reuse`` seconds old decides the next phase too.

    One thread is ``single_threaded_blas()``, process-wide and correct across threads
    (another run's or a solver's own context nests in it); a one-shot phase on one
    thread also runs the OpenMP loops of its thread on one (marginkit's kernel blocks
    collapse the same way on busy cores), never the steps, whose OpenMP passes choose
    their own threads (``ThreadChoice``). Nothing is changed when the
    BLAS libraries are already limited: all on one thread, or below the most threads
    this process was seen to use by an earlier run (a ``threadpool_limits`` or
    ``OPENBLAS_NUM_THREADS`` of the user wins), except a limit of marginkit's own
    contexts (another run's), under which the run chooses as usual. The choice changes
    the time only: a result may differ by BLAS rounding (a sum split over a different
    number of threads), nothing else.
    """

    #: seconds of run time between two decisions of the steps
    interval = 0.1
    #: a busy test this recent decides the next phase too (a small run's start, first
    #: step, referee and finalize follow each other within microseconds)
    reuse = 0.01
    #: the most threads seen on the BLAS libraries outside any limit of marginkit's
    _seen = [0]

    def __init__(self, busy=None, clock=None):
        self.busy = busy or busy_cores
        self.clock = clock or time.perf_counter
        self._tested = -math.inf    # when the last busy test was made
        self._busy = False
        self._ctx = None            # the open single_threaded_blas() context in mode one
        with _LOCK:
            if _STATE["libs"] is None:
                _STATE["libs"] = _blas_libraries()
            libs = _STATE["libs"]
            counts = _STATE["saved"] if _STATE["depth"] else \
                [lib.get_num_threads() for lib in libs]
        counts = [n for n in counts if n is not None]
        self.default = max(counts, default=1)
        seen = self._seen[0]
        self.policy = "auto"
        if self.default <= 1 or self.default < seen:
            self.policy = "limited"
        else:
            self._seen[0] = max(seen, self.default)
        self.nt = self.default      # BLAS threads now
        self.last = self.default    # the threads of the last decision
        self.calls = {}             # phase -> threads of its last call
        self.steps = {1: 0, self.default: 0}  # threads -> steps run on them
        self._k = 0                 # the step at the last decision of the steps
        self.due = math.inf if self.policy == "limited" else 0.0
        self.tests = 0
        self.changes = 0

    def _decide(self, nt=None):
        """Set the BLAS threads (``nt``, or 1 when the cores are busy and the default
        threads when they are not) and return them."""
        if self.policy == "limited":
            return self.nt
        if nt is None:
            now = self.clock()
            if now - self._tested >= self.reuse:
                self.tests += 1
                self._busy = self.busy(self.default)
                self._tested = now
            nt = 1 if self._busy else self.default
        if nt != self.nt:
            if nt == 1:
                ctx = single_threaded_blas()
                ctx.__enter__()  # all or nothing: kept only once entered
                self._ctx = ctx
            else:
                ctx, self._ctx = self._ctx, None
                ctx.__exit__(None, None, None)
            self.nt = nt
            self.changes += 1
        self.last = nt
        return nt

    def count(self, k):
        """Count the steps up to ``k`` on the threads chosen at the last decision."""
        self.steps[self.nt] += k - self._k
        self._k = k

    def phase(self, where, k=0, like=None):
        """Context of a one-shot phase (``"start"``, ``"referee"``, ``"finalize"``) that
        begins now, after ``k`` steps: decides the BLAS threads (they stay as decided
        after it), and on one thread also limits the OpenMP loops this thread starts
        meanwhile (marginkit's kernel blocks, an OpenMP build of OpenBLAS) to one.

        ``like``: an earlier phase whose threads this one takes instead of deciding anew.
        ``finalize`` after an accepted claim takes the threads of the ``referee`` that
        accepted it: the model it reports (a kernel expansion's coefficients, a
        product with a projection) is then computed as the certificate's copy of it was,
        with the same rounding (a BLAS sum split among another number of threads may
        differ in the last bits, and the result was refused as a model that is not the
        certified one: found on the digits with the cores busy at finalize only)."""
        self.count(k)
        self.calls[where] = self._decide(self.calls.get(like))
        return _OneThreadOpenMP() if self.nt == 1 and self.policy == "auto" \
            else contextlib.nullcontext()

    def step(self, k, elapsed):
        """Decide the threads of the steps from step ``k`` on, at run time ``elapsed``
        (called by the loop once ``elapsed`` reaches ``self.due``)."""
        self.count(k)
        self._decide()
        self.due = elapsed + self.interval

    def close(self, k=None):
        """Restore the default threads (the steps up to ``k`` are counted on the threads
        they ran on)."""
        if k is not None:
            self.count(k)
        if self._ctx is not None:
            ctx, self._ctx = self._ctx, None
            ctx.__exit__(None, None, None)
            self.nt = self.default

    def describe(self):
        """The choice in a few words, for the closing line of ``verbose >= 2``."""
        if self.policy == "limited":
            return f"BLAS threads {self.default} (limited already)"
        steps = ", ".join(f"{v} on {nt}" for nt, v in sorted(self.steps.items()) if v)
        calls = ", ".join(f"{k} {v}" for k, v in self.calls.items())
        return (f"BLAS threads (1 when the cores were busy, else {self.default}): {calls}"
                + (f"; steps {steps}" if steps else ""))

    def summary(self):
        """``Result.extra`` fields: ``blas_threads``, the BLAS threads of the last
        decision, and ``blas_choice``: the policy (``"auto"``, or ``"limited"`` when BLAS
        was limited already or has no thread count to set), the default threads, the
        threads of each one-shot phase (its last call), the steps on one thread and on
        the default, the busy tests made and the changes of the thread count."""
        return {"blas_threads": int(self.last),
                "blas_choice": {"policy": self.policy, "max": int(self.default),
                                **{k: int(v) for k, v in self.calls.items()},
                                "one_thread_steps": int(self.steps.get(1, 0)),
                                "default_steps": int(self.steps.get(self.default, 0))
                                if self.default > 1 else 0,
                                "tests": int(self.tests), "changes": int(self.changes)}}
