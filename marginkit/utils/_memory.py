"""Large working arrays in memory of their own, without huge-page advice.

numpy advises the kernel to back every allocation of 4 MiB or more with transparent huge
pages (``madvise(MADV_HUGEPAGE)``). Where the kernel's ``defrag`` setting is
``madvise`` (the usual default), the first touch of such memory then compacts physical
memory synchronously to find 2 MiB pages: measured on a 24 GiB machine, writing a fresh
400 MB float32 array took 1.0-1.1 s of system time in a new process (0.07 s on later
allocations of the same size, once pages had been compacted), against 0.15 s with 4 KiB
pages. For a kernel SVM's Gram store, filled once per solve, that stall was a third of a
10,000-row solve. ``zeros`` maps such arrays anonymously (``mmap``), with no advice: the
kernel's default pages, zero-filled on first touch, the way C programs' ``malloc`` gets
them. The memory returns to the system when the array and its views are gone.
"""
import math
import mmap

import numpy as np

#: numpy's own threshold for the huge-page advice; smaller arrays come from ``np.zeros``
ADVISED_BYTES = 4 << 20


def zeros(shape, dtype=np.float64):
    """A zero-filled C-ordered array of ``shape`` and ``dtype``: ``np.zeros`` below
    ``ADVISED_BYTES``, else an anonymous memory map of its own (no huge-page advice)."""
    shape = tuple(int(s) for s in np.atleast_1d(shape))
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < ADVISED_BYTES:
        return np.zeros(shape, dtype=dtype)
    try:
        buf = mmap.mmap(-1, nbytes)
    except OSError as exc:
        raise MemoryError(f"cannot map {nbytes} bytes for an array of shape {shape}: "
                          f"{exc}") from None
    return np.frombuffer(buf, dtype=dtype).reshape(shape)
