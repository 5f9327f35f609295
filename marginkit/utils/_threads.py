"""Thread-count helpers shared by the Cython front ends."""
import threading

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
