"""Thread-count helpers shared by the Cython front ends."""
import math
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
        with _LOCK:
            if _STATE["depth"] == 0:
                if _STATE["libs"] is None:
                    _STATE["libs"] = _blas_libraries()  # after BLAS is loaded
                libs = _STATE["libs"]
                saved = [lib.get_num_threads() for lib in libs]
                _set_counts([(lib, 1) for lib, n in zip(libs, saved) if n is not None])
                _STATE["saved"] = saved
            _STATE["depth"] += 1
        return self

    def __exit__(self, *exc):
        with _LOCK:
            _STATE["depth"] -= 1
            if _STATE["depth"] == 0:
                saved, _STATE["saved"] = _STATE["saved"], ()
                _set_counts([(lib, n) for lib, n in zip(_STATE["libs"], saved)
                             if n is not None and n != 1 and lib.get_num_threads() == 1])
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
        the passes would use (``_svm_fast.fista_threads``, read at each iteration)."""
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
