"""Runs allocate their working arrays without numpy's huge-page advice.

numpy advises the kernel to back every allocation of 4 MiB or more with transparent huge
pages (``madvise(MADV_HUGEPAGE)``). Where the kernel's ``defrag`` setting is
``madvise`` (the usual default), the first touch of such memory then compacts physical
memory synchronously to find 2 MiB pages. Measured on a 2-core, 24 GiB machine, in a
new process: filling a fresh 400 MB float32 array took 1.0-1.1 s of system time (0.07 s
for later arrays of the same size, once pages had been compacted), against 0.15 s with
the kernel's default pages; a kernel SVM's held Gram matrix of 10,000 rows spent a third
of its solve there, and ``dcd`` on 2 million rows of 28 features 0.56 of its 1.9 s (its
n-vectors and temporaries).

``small_pages()`` turns the advice off while a run, or a certificate's check, allocates,
and restores the caller's setting when the last one active in the process ends
(numpy's switch is process-wide; runs in several threads share one count). Without the
switch (a numpy that does not have it) it does nothing.
"""
import functools
import importlib
import threading


def _find_switch():
    """numpy's ``_set_madvise_hugepage(enabled) -> previous`` (numpy >= 1.20), or None."""
    for name in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            return getattr(importlib.import_module(name), "_set_madvise_hugepage")
        except (ImportError, AttributeError):
            continue
    return None


_SWITCH = _find_switch()
_LOCK = threading.Lock()
_active = 0      # runs and checks inside ``small_pages`` now, in all threads
#: the setting the runs found (at first numpy's at import), restored when the count
#: returns to 0
_saved = None
if _SWITCH is not None:
    _saved = _SWITCH(True)
    _SWITCH(_saved)


class small_pages:
    """Context manager: no huge-page advice for numpy's allocations inside the block (see
    the module). Entering undoes what it did when an exception (Ctrl-C) interrupts it,
    so that neither the count nor the switch is left off for good (found by review: an
    increment before a generator's ``try`` leaked the count after a few hundred
    interrupts, and an interrupted switch left the advice off). Leaving by ``__exit__``
    can still be interrupted as it starts (Python delivers a pending Ctrl-C there):
    marginkit's runs and checks go through ``in_small_pages``, which leaves inline."""

    def __enter__(self):
        global _active, _saved
        if _SWITCH is None:
            return self
        counted = False
        try:
            with _LOCK:
                if _active == 0:
                    _saved = _SWITCH(False)
                _active += 1
                counted = True
        except BaseException:
            # interrupted (Ctrl-C) after switching or counting: undo what was done; the
            # setting to restore is the one the last runs found when the interruption
            # came before it was stored
            with _LOCK:
                if counted:
                    _active -= 1
                if _active == 0:
                    _SWITCH(_saved)
            raise
        return self

    def __exit__(self, *exc):
        global _active
        if _SWITCH is not None:
            with _LOCK:
                _active -= 1
                if _active == 0:
                    _SWITCH(_saved)
        return False


def in_small_pages(fn):
    """Decorator: ``fn`` runs inside ``small_pages()``. The way out is written inline in
    a ``finally`` clause rather than as a call of ``__exit__``: Python delivers a pending
    Ctrl-C when a Python function starts, so an interrupt landing as ``__exit__`` began
    left the count and the switch off (found by review: 246 of 3,000 interrupts of an
    empty block); inline, the count goes down before any call can be interrupted."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        global _active
        small_pages().__enter__()
        try:
            return fn(*args, **kwargs)
        finally:
            if _SWITCH is not None:
                with _LOCK:
                    _active -= 1
                    if _active == 0:
                        _SWITCH(_saved)
    return wrapper
