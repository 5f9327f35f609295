"""One row block of a data matrix, for the nogil kernels (``_rows.pxd``).

A kernel that reads the rows of X takes one ``rows_t`` argument (a fused type over the
six classes below: dense C-order or CSR; float32 or float64 values; int32 or int64
column indices) instead of the arrays of each layout. Cython compiles the kernel once
per class, so the layout is chosen once per call, and the row helpers of ``_rows.pxd``
(``row_dot``, ``row_dot4``, ``row_axpy``, ``row_axpy_scaled`` (sc^2 x_i),
``row_scaled_dot`` and ``row_scaled_axpy`` (sc x_i), ``row_sqnorm_scaled``,
``row_sqnorm_scaled4``, ``row_prefetch``; ``row_start``, ``row_stop``, ``col`` for a loop
over the stored entries) are the same loops a kernel would write for that layout alone.

``row_block(X)`` packs a block that the input checks (``marginkit._validation``) have
already accepted; it copies nothing and checks only what the pointers need.
"""
import numpy as np
import scipy.sparse as sp

from libc.stdint cimport int32_t, int64_t


cdef class RowBlock:
    """Base class of the row blocks (see ``row_block``)."""

    @property
    def dense(self):
        """True for a dense (C-order) block, False for CSR."""
        return isinstance(self, (DenseRows32, DenseRows64))

    @property
    def shape(self):
        return (self.n, self.d)

    def __repr__(self):
        layout = "dense" if self.dense else "csr"
        return f"<{type(self).__name__} {layout} {self.n} x {self.d}>"

    def __reduce__(self):
        # the arrays, packed again on unpickling (the pointers are the process's own)
        return _from_arrays, (self.n, self.d, self.arrays)


cdef class DenseRows32(RowBlock):
    pass


cdef class DenseRows64(RowBlock):
    pass


cdef class CSRRows32I32(RowBlock):
    pass


cdef class CSRRows32I64(RowBlock):
    pass


cdef class CSRRows64I32(RowBlock):
    pass


cdef class CSRRows64I64(RowBlock):
    pass



#: the layouts of a ``rows_t`` argument, as Cython names a fused function's specializations
LAYOUTS = frozenset(("DenseRows32", "DenseRows64", "CSRRows32I32", "CSRRows32I64",
                     "CSRRows64I32", "CSRRows64I64"))


cdef class ByLayout:
    """A fused kernel whose only fused argument is its first, a row block, called through
    a table of its compiled specializations keyed by the block's class.

    Cython's own dispatch of a fused cdef-class argument imports this module once per
    candidate class on every call (``isinstance(arg, __import__(...).DenseRows32)``, then
    the next class): about 2 us for a dense float64 block and 5 us for a CSR one, paid at
    every iteration by the kernels a solver calls once per iteration. The table costs a
    dictionary lookup; the first call on a class fills its entry. ``__wrapped__`` is the
    fused function itself (``fn[DenseRows64]`` selects a specialization).
    """

    cdef readonly object __wrapped__
    cdef dict _table

    def __init__(self, fn):
        self.__wrapped__ = fn
        self._table = {}

    def __call__(self, *args, **kwargs):
        if not args:
            # the block passed by keyword: Cython's dispatch, which reads keywords
            return self.__wrapped__(**kwargs)
        rows = args[0]
        args = args[1:]
        cls = type(rows)
        fn = self._table.get(cls)
        if fn is None:
            # the layout a block is (a subclass of a layout is that layout, as Cython's
            # isinstance dispatch has it)
            layout = next((c for c in cls.__mro__ if c.__name__ in LAYOUTS
                           and c.__module__ == __name__), None)
            if layout is None:
                # Cython's dispatch and its TypeError for an argument of no layout (the
                # RowBlock base class included)
                return self.__wrapped__(rows, *args, **kwargs)
            fn = self._table[cls] = self.__wrapped__[layout]
        return fn(rows, *args, **kwargs)

    @property
    def __doc__(self):
        return self.__wrapped__.__doc__

    @property
    def __name__(self):
        return self.__wrapped__.__name__

    def __repr__(self):
        return f"<ByLayout {self.__wrapped__.__name__}>"

    def __reduce__(self):
        # by reference, as the fused function it replaces in its module pickles
        return _module_attribute, (self.__wrapped__.__module__, self.__wrapped__.__name__)


def _module_attribute(module, name):
    """``module.name`` (a ``ByLayout`` kernel on unpickling)."""
    import importlib

    return getattr(importlib.import_module(module), name)


def dispatch_by_layout(namespace):
    """Wrap (``ByLayout``) every fused function of a module's ``namespace`` (its
    ``globals()``) whose specializations are row-block layouts only; called at the end of
    each kernel module. Functions fused over other types too (a floating type, two row
    blocks) keep Cython's dispatch: they run once per block, not once per iteration."""
    for name, fn in list(namespace.items()):
        sig = getattr(fn, "__signatures__", None)
        if sig and LAYOUTS.issuperset(sig):
            namespace[name] = ByLayout(fn)

cdef inline const void* _first(a):
    # the address of a's first element (NULL when a is empty: nothing is read from it)
    cdef const unsigned char[::1] b
    if a.size == 0:
        return NULL
    b = a.reshape(-1).view(np.uint8)
    return &b[0]


def row_block(X):
    """The row block of ``X``: a C-contiguous 2-d float32/float64 ndarray, or a
    scipy.sparse CSR matrix (or array) with float32/float64 values and int32/int64
    indices (both index arrays of one type, contiguous). Nothing is copied: the block
    keeps references to X's arrays, which must not change while it is in use.

    Raises ``TypeError``/``ValueError`` naming ``X`` for any other input (the input
    checks of ``marginkit._validation`` produce one of the accepted forms).
    """
    cdef RowBlock blk
    if isinstance(X, np.ndarray):
        if X.ndim != 2:
            raise ValueError(f"X: a row block is 2-d, got an array of shape {X.shape}")
        if X.dtype == np.float64:
            blk = DenseRows64.__new__(DenseRows64)
            (<DenseRows64>blk).data = <const double*>_first(_c_order(X))
        elif X.dtype == np.float32:
            blk = DenseRows32.__new__(DenseRows32)
            (<DenseRows32>blk).data = <const float*>_first(_c_order(X))
        else:
            raise TypeError(f"X: a row block holds float32 or float64 values, got {X.dtype}")
        blk.n, blk.d = X.shape
        blk.arrays = (X,)
        return blk
    if not (sp.issparse(X) and X.format == "csr"):
        raise TypeError(f"X: a row block is a C-contiguous ndarray or a CSR matrix, got "
                        f"{type(X).__name__}")
    return _from_arrays(X.shape[0], X.shape[1], (X.data, X.indices, X.indptr))


def _from_arrays(Py_ssize_t n, Py_ssize_t d, tuple arrays):
    """The block of a checked dense array ``(X,)`` or of CSR arrays ``(data, indices,
    indptr)`` with n rows and d columns."""
    cdef RowBlock blk
    if len(arrays) == 1:
        return row_block(arrays[0])
    data, indices, indptr = arrays
    for name, a in (("data", data), ("indices", indices), ("indptr", indptr)):
        if a.ndim != 1 or not a.flags.c_contiguous:
            raise ValueError(f"X: the CSR array X.{name} is not a contiguous 1-d array")
    if indices.dtype != indptr.dtype or indices.dtype not in (np.int32, np.int64):
        raise TypeError(f"X: CSR indices and indptr of one type, int32 or int64, got "
                        f"{indices.dtype} and {indptr.dtype}")
    if indptr.shape[0] != n + 1:
        raise ValueError(f"X: indptr has {indptr.shape[0]} entries for {n} rows")
    _check_structure(n, d, data, indices, indptr)
    wide = indices.dtype == np.int64
    if data.dtype == np.float64:
        blk = CSRRows64I64.__new__(CSRRows64I64) if wide else CSRRows64I32.__new__(CSRRows64I32)
    elif data.dtype == np.float32:
        blk = CSRRows32I64.__new__(CSRRows32I64) if wide else CSRRows32I32.__new__(CSRRows32I32)
    else:
        raise TypeError(f"X: a row block holds float32 or float64 values, got {data.dtype}")
    _set_csr(blk, _first(data), _first(indices), _first(indptr))
    blk.n, blk.d = n, d
    blk.arrays = (data, indices, indptr)
    return blk


def _check_structure(Py_ssize_t n, Py_ssize_t d, data, indices, indptr):
    """The CSR structure the kernels read without bounds checks: indptr starts at 0,
    never decreases and ends within indices and data (of one length), and every column
    index of the rows is in [0, d). O(n) for the pointers and two vectorized reductions
    over the indices: what ``marginkit._validation.checked_csr`` establishes for the
    input, checked again here for any caller of ``row_block`` (a malformed block read
    out of bounds in compiled code)."""
    if indices.shape[0] != data.shape[0]:
        raise ValueError(f"X: the CSR arrays indices ({indices.shape[0]} entries) and data "
                         f"({data.shape[0]}) must have one length")
    if indptr[0] != 0 or indptr[n] > indices.shape[0] or \
            (n > 0 and np.any(indptr[1:] < indptr[:-1])):
        raise ValueError("X: CSR indptr must start at 0, never decrease and end within "
                         f"indices ({indices.shape[0]} entries); check the matrix with "
                         "marginkit's input validation (mk.solve checks it) or "
                         "scipy's X.check_format()")
    used = indices[:indptr[n]]
    if used.shape[0] and (used.min() < 0 or used.max() >= d):
        raise ValueError(f"X: a CSR column index is out of range [0, {d}); check the "
                         "matrix with scipy's X.check_format()")


def _c_order(X):
    if not X.flags.c_contiguous:
        raise ValueError("X: a dense row block is C-contiguous (np.ascontiguousarray(X))")
    return X


cdef void _set_csr(RowBlock blk, const void* data, const void* indices, const void* indptr):
    # the pointers of a CSR block, cast to the types of its class
    if isinstance(blk, CSRRows64I32):
        (<CSRRows64I32>blk).data = <const double*>data
        (<CSRRows64I32>blk).indices = <const int32_t*>indices
        (<CSRRows64I32>blk).indptr = <const int32_t*>indptr
    elif isinstance(blk, CSRRows64I64):
        (<CSRRows64I64>blk).data = <const double*>data
        (<CSRRows64I64>blk).indices = <const int64_t*>indices
        (<CSRRows64I64>blk).indptr = <const int64_t*>indptr
    elif isinstance(blk, CSRRows32I32):
        (<CSRRows32I32>blk).data = <const float*>data
        (<CSRRows32I32>blk).indices = <const int32_t*>indices
        (<CSRRows32I32>blk).indptr = <const int32_t*>indptr
    else:
        (<CSRRows32I64>blk).data = <const float*>data
        (<CSRRows32I64>blk).indices = <const int64_t*>indices
        (<CSRRows32I64>blk).indptr = <const int64_t*>indptr
