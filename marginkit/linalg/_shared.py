"""Decompositions reused within a block of runs on the same data.

The one-vs-rest runs of an estimator differ by y only: an exact kernel's Gram matrix, or
the Gram matrix of Nystroem centres drawn from the same seed, is the same matrix in every
run, and so is its eigendecomposition. Within ``shared_decompositions`` a decomposition
computed by ``reuse`` is kept under its role (the solver's and the referee's are kept
apart: each recomputes its own once) and the digest of the matrix's bytes, and a later
call on the same bytes gets the arrays computed then (read-only): the result of the same
function on the same matrix in the same process, nothing else.
"""
import contextlib
import contextvars
import hashlib

import numpy as np


class _Decompositions:
    """Per role, the last value computed, with the digest of the matrix it came from;
    values taking more than ``budget`` / 4 bytes are not kept."""

    def __init__(self, budget):
        self.budget = float(budget)
        self.last = {}

    def get(self, role, key):
        hit = self.last.get(role)
        return hit[1] if hit is not None and hit[0] == key else None

    def put(self, role, key, value):
        arrays = [v for v in (value if isinstance(value, tuple) else (value,))
                  if isinstance(v, np.ndarray)]
        if sum(a.nbytes for a in arrays) > self.budget / 4:
            return
        for a in arrays:
            a.setflags(write=False)
        self.last[role] = (key, value)


_SHARED = contextvars.ContextVar("marginkit_shared_decompositions", default=None)


@contextlib.contextmanager
def shared_decompositions(budget):
    """Within the block (in this thread's context), ``reuse`` keeps the last
    decomposition of each role while it takes at most ``budget`` / 4 bytes (a run's
    ``memory_budget``); they are freed at the end of the block."""
    token = _SHARED.set(_Decompositions(budget))
    try:
        yield
    finally:
        _SHARED.reset(token)


def reuse(K, role, compute):
    """``compute(K)``, or within ``shared_decompositions`` the value it gave for a matrix
    of the same shape, dtype and bytes under the same ``role``."""
    cache = _SHARED.get()
    if cache is None:
        return compute(K)
    K = np.ascontiguousarray(K)
    key = (K.shape, K.dtype.str,
           hashlib.blake2b(memoryview(K).cast("B"), digest_size=32).digest())
    hit = cache.get(role, key)
    if hit is None:
        hit = compute(K)
        cache.put(role, key, hit)
    return hit
