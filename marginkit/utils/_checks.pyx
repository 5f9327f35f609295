"""The single-pass label check behind the common case of ``marginkit._validation.check_y``.

``two_labels`` answers the question of the numpy code it replaces (quoted in its
docstring) in one pass over y, or says that the labels are not the common case (the
caller then runs the general numpy code, which also words the error messages).
"""
from libc.stdint cimport int64_t

ctypedef fused label_t:
    double
    int64_t


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
