"""Thread-count helpers shared by the Cython front ends."""

_CONTROLLER = []


def single_threaded_blas():
    """Context limiting BLAS to one thread.

    Used around BLAS/LAPACK calls that run right before (or inside) marginkit's own OpenMP
    regions: OpenBLAS worker threads keep spinning for a while after a call, and on a
    machine with as many cores as OpenMP threads they take a core from the OpenMP team,
    whose barrier then waits at every iteration.
    """
    if not _CONTROLLER:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER.append(ThreadpoolController())  # after numpy/scipy's BLAS are loaded
    return _CONTROLLER[0].limit(limits=1, user_api="blas")
