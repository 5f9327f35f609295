"""Thread-count helpers shared by the Cython front ends."""
import threading

_CONTROLLER = []
_LOCK = threading.Lock()
_STATE = {"depth": 0, "limit": None}


class _SingleThreadedBLAS:
    """Context limiting BLAS to one thread, safe when entered from several threads.

    The limit is process-wide (threadpoolctl sets the BLAS library's thread count): the
    first context to enter sets it, the last to leave restores the count saved by the
    first, whatever order overlapping contexts of other threads leave in.
    """

    def __enter__(self):
        with _LOCK:
            if _STATE["depth"] == 0:
                if not _CONTROLLER:
                    from threadpoolctl import ThreadpoolController

                    _CONTROLLER.append(ThreadpoolController())  # after BLAS is loaded
                limit = _CONTROLLER[0].limit(limits=1, user_api="blas")
                limit.__enter__()
                _STATE["limit"] = limit
            _STATE["depth"] += 1
        return self

    def __exit__(self, *exc):
        with _LOCK:
            _STATE["depth"] -= 1
            if _STATE["depth"] == 0:
                limit, _STATE["limit"] = _STATE["limit"], None
                limit.__exit__(None, None, None)
        return False


def single_threaded_blas():
    """Context limiting BLAS to one thread.

    Used around BLAS/LAPACK calls that run right before (or inside) marginkit's own OpenMP
    regions: OpenBLAS worker threads keep spinning for a while after a call, and on a
    machine with as many cores as OpenMP threads they take a core from the OpenMP team,
    whose barrier then waits at every iteration. While any such context is open, BLAS
    calls of other threads of the process run on one thread too.
    """
    return _SingleThreadedBLAS()
