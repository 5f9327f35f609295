# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The compiled LIBSVM line parser behind ``load_libsvm``.

``parse_block`` reads a buffer of whole lines (``label index:value ... [# comment]``) and
accepts only the plainest spelling of each token: a label and values made of the
characters ``0-9 + - . e E`` that ``strtod`` reads to their end and that are finite, and
feature indices made of digits, positive, strictly increasing, at most ``n_features``
(when given) and below 2**63. It reads them exactly as the pure-Python reader of
``_libsvm.py`` does (both parse decimal numbers correctly rounded). Anything else - an
error, or a spelling Python's ``float``/``int`` would accept but this parser does not
(``1_0``, ``+5`` as an index, ``inf``) - makes it return ``ok = False``: the caller then
reads the file with the pure-Python reader, which names the line of an error.
"""
import numpy as np

from libc.math cimport isfinite
from libc.stdint cimport int64_t
from libc.stdlib cimport strtod

cdef int64_t MAX_INDEX = 9223372036854775807


cdef inline bint is_space(unsigned char c) nogil:
    # the ASCII whitespace of bytes.split() (the newline ends a line before this is asked)
    return c == 32 or (9 <= c <= 13)


cdef inline bint is_number_char(unsigned char c) nogil:
    return (48 <= c <= 57) or c == 43 or c == 45 or c == 46 or c == 101 or c == 69


cdef inline bint read_number(const char* s, Py_ssize_t start, Py_ssize_t end,
                             double* out) nogil:
    """The number s[start:end] (end excluded), or False for any other token."""
    cdef Py_ssize_t i
    cdef char* stop
    if end <= start:
        return False
    for i in range(start, end):
        if not is_number_char(<unsigned char>s[i]):
            return False
    # the token is followed by a byte that is not a number character (whitespace, '#',
    # ':', a newline or the NUL that ends the buffer), so strtod stops at its end at most
    out[0] = strtod(s + start, &stop)
    return stop == s + end and isfinite(out[0])


def parse_block(bytes buf, int64_t n_features, bint as_float32):
    """Parse the whole lines of ``buf``.

    Returns ``(ok, values, indices, counts, labels, max_index)``: the entries of the
    block's rows (``values`` float64 or float32, ``indices`` 0-based int64), the number
    of entries of each row, the rows' labels and the largest 1-based index seen;
    ``ok`` is False (and the rest None) when a token is not one this parser reads.
    ``n_features`` < 0 means no limit.
    """
    cdef const char* s = buf
    cdef Py_ssize_t n = len(buf)
    cdef Py_ssize_t cap = buf.count(b":") + 1
    cdef Py_ssize_t max_rows = buf.count(b"\n") + 1
    cdef double[::1] vals = np.empty(cap)
    cdef int64_t[::1] inds = np.empty(cap, dtype=np.int64)
    cdef int64_t[::1] counts = np.empty(max_rows, dtype=np.int64)
    cdef double[::1] labels = np.empty(max_rows)
    cdef Py_ssize_t pos = 0, nnz = 0, rows = 0, start, colon, j, row_start
    cdef int64_t idx, prev, max_index = 0
    cdef double v
    cdef unsigned char c
    cdef bint ok = True
    with nogil:
        while pos < n and ok:
            # one line: skip leading whitespace
            while pos < n and s[pos] != b"\n" and is_space(<unsigned char>s[pos]):
                pos += 1
            if pos >= n or s[pos] == b"\n" or s[pos] == b"#":
                # blank or comment line
                while pos < n and s[pos] != b"\n":
                    pos += 1
                pos += 1
                continue
            start = pos
            while pos < n and not is_space(<unsigned char>s[pos]) and s[pos] != b"#":
                pos += 1
            if not read_number(s, start, pos, &v):
                ok = False
                break
            labels[rows] = v
            row_start = nnz
            prev = 0
            while True:
                while pos < n and s[pos] != b"\n" and is_space(<unsigned char>s[pos]):
                    pos += 1
                if pos >= n or s[pos] == b"\n" or s[pos] == b"#":
                    break
                start = pos
                colon = -1
                while pos < n and not is_space(<unsigned char>s[pos]) and s[pos] != b"#":
                    if s[pos] == b":" and colon < 0:
                        colon = pos
                    pos += 1
                if colon < 0:
                    ok = False
                    break
                if colon - start == 3 and s[start] == b"q" and s[start + 1] == b"i" \
                        and s[start + 2] == b"d":
                    # svmlight query id: not a feature; its value an integer (else the
                    # line-by-line reader names the line)
                    if colon + 1 == pos:
                        ok = False
                        break
                    for j in range(colon + 1, pos):
                        c = <unsigned char>s[j]
                        if not (48 <= c <= 57):
                            ok = False
                    if not ok:
                        break
                    continue
                if colon == start:
                    ok = False
                    break
                idx = 0
                for j in range(start, colon):
                    c = <unsigned char>s[j]
                    if not (48 <= c <= 57) or idx > (MAX_INDEX - (c - 48)) // 10:
                        ok = False
                        break
                    idx = 10 * idx + (c - 48)
                if not ok or idx <= prev or (n_features >= 0 and idx > n_features):
                    ok = False
                    break
                if not read_number(s, colon + 1, pos, &v):
                    ok = False
                    break
                vals[nnz] = v
                inds[nnz] = idx - 1
                nnz += 1
                prev = idx
            if not ok:
                break
            if prev > max_index:
                max_index = prev
            counts[rows] = nnz - row_start
            rows += 1
            while pos < n and s[pos] != b"\n":
                pos += 1  # a comment to the end of the line
            pos += 1
    if not ok:
        return False, None, None, None, None, 0
    values = np.asarray(vals[:nnz], dtype=np.float32 if as_float32 else np.float64)
    return (True, values, np.asarray(inds[:nnz]).copy(), np.asarray(counts[:rows]).copy(),
            np.asarray(labels[:rows]).copy(), max_index)
