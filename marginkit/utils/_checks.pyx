"""Single-pass kernels behind the common cases of ``marginkit._validation``.

Each one answers the question of the numpy expression it replaces (quoted in its
docstring) without the temporaries of that expression, or says that the input is not
the common case (the caller then runs the general numpy code, which also words the
error messages).
"""
from cython cimport floating
from libc.stdint cimport int64_t

ctypedef fused label_t:
    double
    int64_t


def all_finite(const floating[::1] a):
    """``np.isfinite(a).all()`` for a contiguous float vector (a 2-D array's ``ravel``)."""
    cdef Py_ssize_t i, n = a.shape[0]
    cdef double x
    cdef bint ok = True
    with nogil:
        for i in range(n):
            x = a[i]
            if x - x != 0.0:  # NaN or +-inf
                ok = False
                break
    return ok


def two_labels(const label_t[::1] y, double[::1] out):
    """Labels with exactly two distinct values lo < hi, neither NaN/inf nor a zero of
    either sign: fills ``out`` with ``np.where(y == hi, 1.0, -1.0)`` and returns
    ``(lo, hi)``; returns None (``out`` unspecified) for any other label vector."""
    cdef Py_ssize_t i, n = y.shape[0]
    cdef label_t a, b, x, hi
    cdef bint two = False
    cdef bint ok = n > 0
    if not ok:
        return None
    a = y[0]
    b = a
    with nogil:
        for i in range(n):
            x = y[i]
            if x == a:
                continue
            if two:
                if x != b:
                    ok = False
                    break
            else:
                b = x
                two = True
        if ok and two:
            if label_t is double:
                # NaN compares unequal to itself (a third value above); +-inf and the two
                # signed zeros are left to the general code
                if a - a != 0.0 or b - b != 0.0 or a == 0.0 or b == 0.0:
                    ok = False
            if ok:
                hi = a if a > b else b
                for i in range(n):
                    out[i] = 1.0 if y[i] == hi else -1.0
    if not (ok and two):
        return None
    return (b, a) if a > b else (a, b)
