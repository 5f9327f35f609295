"""Peak memory of ``solve`` on CSR input against the input's size.

Target: peak <= 1.5 x (bytes of data + indices + indptr) + O(n + d): no densifying,
no hidden copies. Input: seeded random CSR with 5 or 50 (``fast``: 20) nonzeros per row out
of d = 1000 columns (a9a has 14 of 123, rcv1 74 of 47,236), float64 values, int32
indices, 5% label noise. Read the ratios together: solve's extra memory is
a x input + b x 8 (n + d) bytes; a ratio that stays put when the density changes is
``a`` (a copy of the input), one that falls tenfold is O(n + d).

Three views of the same solve:

* ``peakmem_solve``: asv's own number, the process's peak RSS; it includes the
  interpreter, the imported libraries and the input itself, so read it as a curve
  over ``n``, not as the solver's share.
* ``track_traced_peak_ratio``: the peak of the memory traced by ``tracemalloc``
  (every numpy array, Python object and buffer allocated through Python's or numpy's
  allocators) during ``solve``, divided by the input's bytes. Misses C-level
  ``malloc`` in compiled code.
* ``track_rss_peak_ratio``: growth of the peak resident set (``VmHWM``, reset through
  ``/proc/self/clear_refs``; Linux only) during ``solve``, divided by the input's
  bytes. Sees every touched page, including C ``malloc`` and BLAS/OpenMP buffers.

``track_excess_vectors`` reports (traced peak - 1.5 x input) / (8 (n + d)): how many
float64 vectors of length n + d the solver needs beyond the 1.5 x budget. It should
stay bounded (not grow with n); a negative value is under budget.
"""
import ctypes
import gc
import os
import tracemalloc

import marginkit as mk

from . import common

SOLVERS = ["fista", "fista_svm", "dcd", "pegasos", "snkp", "isnkpvn"]
SIZES = [10_000, 40_000, 160_000] if common.FULL else [2_000, 8_000]
# two densities tell the two terms apart: a copy of the input scales with nnz,
# O(n + d) work vectors do not
NNZ_PER_ROW = [5, 50] if common.FULL else [20]
D = 1000


def input_bytes(X):
    return X.data.nbytes + X.indices.nbytes + X.indptr.nbytes


def _vm(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise OSError(field)


def _release_free_heap():
    """Give freed heap pages back to the OS (glibc), so reused pages do not hide growth."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def rss_growth(fn):
    """Growth of the peak RSS (bytes) while ``fn()`` runs; raises OSError off Linux."""
    gc.collect()
    _release_free_heap()
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # reset VmHWM to the current RSS
    base = _vm("VmRSS")
    fn()
    return _vm("VmHWM") - base


def traced_peak(fn):
    """Peak bytes traced by tracemalloc while ``fn()`` runs (above the start level)."""
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start, _ = tracemalloc.get_traced_memory()
        fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - start


class SolveMemoryCSR:
    """Memory of solve on CSR input of growing n (fixed iteration count)."""

    version = "memory-1"
    params = (SOLVERS, SIZES, NNZ_PER_ROW)
    param_names = ["solver", "n", "nnz_per_row"]
    timeout = 600

    def setup(self, solver, n, nnz_per_row):
        common.require_solver(solver)
        self.X, self.y = common.random_csr(n, D, nnz_per_row, seed=7)
        # a fixed, small number of iterations: memory, not convergence, is measured here
        self.kwargs = dict(solver=solver, max_iter=common.size(20, 50), random_state=0)

    def _solve(self):
        mk.solve(self.X, self.y, **self.kwargs)

    def peakmem_solve(self, solver, n, nnz_per_row):
        self._solve()

    def track_traced_peak_ratio(self, solver, n, nnz_per_row):
        return traced_peak(self._solve) / input_bytes(self.X)

    track_traced_peak_ratio.unit = "x input"

    def track_rss_peak_ratio(self, solver, n, nnz_per_row):
        if not os.path.exists("/proc/self/clear_refs"):
            raise NotImplementedError("VmHWM reset needs Linux /proc")
        return rss_growth(self._solve) / input_bytes(self.X)

    track_rss_peak_ratio.unit = "x input"

    def track_excess_vectors(self, solver, n, nnz_per_row):
        peak = traced_peak(self._solve)
        return (peak - 1.5 * input_bytes(self.X)) / (8.0 * (n + D))

    track_excess_vectors.unit = "vectors of n+d"


if __name__ == "__main__":
    # cd asv_bench && python -m benchmarks.memory [solvers] [n,n] [nnz,nnz]
    import sys

    _solvers = sys.argv[1].split(",") if len(sys.argv) > 1 else SOLVERS
    _sizes = [int(a) for a in sys.argv[2].split(",")] if len(sys.argv) > 2 else SIZES
    _nnz = [int(a) for a in sys.argv[3].split(",")] if len(sys.argv) > 3 else NNZ_PER_ROW
    print("| solver | n | nnz/row | input (MB) | traced extra (MB) | traced / input | "
          "RSS growth / input | excess vectors of n+d |")
    print("|---|---|---|---|---|---|---|---|")
    for _s in _solvers:
        for _n in _sizes:
            for _k in _nnz:
                _b = SolveMemoryCSR()
                try:
                    _b.setup(_s, _n, _k)
                except NotImplementedError as _exc:
                    print(f"| {_s} | {_n} | {_k} | skipped: {_exc} |||||")
                    continue
                _inp = input_bytes(_b.X)
                _b._solve()  # warm-up: imports and lazily built caches
                _tr = traced_peak(_b._solve)
                _rss = rss_growth(_b._solve) if os.path.exists("/proc/self/clear_refs") else float("nan")
                print(f"| {_s} | {_n} | {_k} | {_inp / 1e6:.2f} | {_tr / 1e6:.2f} | {_tr / _inp:.2f} | "
                      f"{_rss / _inp:.2f} | {(_tr - 1.5 * _inp) / (8.0 * (_n + D)):.1f} |", flush=True)
