"""Input checks shared by ``solve``, ``Config``, plug-ins, estimators, the CLI and loaders.

Policy
------
* Every rejection is a ``ValueError`` or ``TypeError`` that names the argument and the fix.
* The caller's arrays are never modified; copies are made only when the dtype or layout
  must change (documented per function) and sparse input is never densified.
* dtype rule (``check_X``): float32 and float64 are kept as they are (no copy). bool,
  int8, uint8, int16, uint16 and float16 become float32 (exact for those ranges), so a
  large int8 matrix grows 4x, not 8x. Every other integer type (int32, uint32, int64,
  uint64) and longdouble becomes float64 (int64 beyond 2**53 is rounded). Complex,
  object, string and datetime arrays are rejected with a ``TypeError``.
* Sparse input (CSR, CSC, COO, BSR, DIA, LIL, DOK, sparse arrays too) has its structure
  checked first (``checked_csr``: index arrays of consistent lengths, monotone indptr,
  every index in range; O(nnz) numpy, before scipy's C++ or marginkit's kernels read
  them), then becomes a canonical CSR matrix with int32 or int64 indices: duplicates
  summed, indices sorted, in a private copy when the caller's matrix is not already
  canonical CSR. Compiled code may assume canonical input after ``check_X``.
* The full table of bad inputs and what marginkit does is ``docs/reliability.md``,
  generated from the test cases in ``tests/reliability_table.py``.
"""
import contextlib
import contextvars
import itertools
import math
import numbers
import warnings

import numpy as np
import scipy.sparse as sp

from .utils._checks import two_labels

#: the first row, in the caller's X, of the rows at hand: set around the work on one dask
#: chunk (``in_chunk``), None where dask does not know the chunk's place (unknown chunk
#: sizes); 0 outside, where the rows at hand are X's
CHUNK_FIRST_ROW = contextvars.ContextVar("marginkit_chunk_first_row", default=0)


@contextlib.contextmanager
def in_chunk(first):
    """Rows named by messages within are rows of a chunk whose first row in X is
    ``first`` (None: unknown)."""
    token = CHUNK_FIRST_ROW.set(first)
    try:
        yield
    finally:
        CHUNK_FIRST_ROW.reset(token)


def rows_of_X(rows):
    """``rows`` of the block at hand as rows of the caller's X, and the words that name
    them: "of X", or, where the chunk's place is unknown, words that say so (found by
    review: a chunk's own row numbers were named as rows of X)."""
    first = CHUNK_FIRST_ROW.get()
    if first is None:
        return rows, "of a chunk of X (its place in X unknown: dask's chunk sizes are unknown)"
    return rows + first, "of X"

_MISSING = object()
_FLOAT_DTYPES = frozenset((np.dtype(np.float32), np.dtype(np.float64)))
_LABEL_DTYPES = frozenset((np.dtype(np.float64), np.dtype(np.int64)))


class Param:
    """One row of a declarative parameter table.

    Parameters
    ----------
    default : object
        Default value (``Param.REQUIRED`` for none).
    types : type or tuple of types
        Accepted Python types (``numbers.Real`` accepts ints and numpy scalars).
    low, high : float, optional
        Bounds; ``low_open``/``high_open`` make them strict.
    options : tuple, optional
        Allowed values (strings).
    allow_none : bool
        ``None`` is a valid value.
    finite : bool
        Reject nan/inf for real values.
    doc : str
        One line, used in error messages and docs.
    """

    REQUIRED = _MISSING

    def __init__(self, default=_MISSING, types=object, low=None, high=None, low_open=False,
                 high_open=False, options=None, allow_none=False, finite=True, doc="",
                 validator=None):
        self.default = default
        self.types = types
        self.low = low
        self.high = high
        self.low_open = low_open
        self.high_open = high_open
        self.options = options
        self.allow_none = allow_none
        self.finite = finite
        self.doc = doc
        self.validator = validator

    def describe(self):
        """The accepted values in words: "a number in (0, 1), 'auto' or None"."""
        alts = []
        if self.low is not None or self.high is not None:
            # an infinite end is in the range only when the value need not be finite
            lo = "(" if self.low_open or (self.low is None and self.finite) else "["
            hi = ")" if self.high_open or (self.high is None and self.finite) else "]"
            alts.append(f"a number in {lo}{self.low if self.low is not None else '-inf'}, "
                        f"{self.high if self.high is not None else 'inf'}{hi}")
        if self.options is not None:
            alts.extend(repr(o) for o in self.options)
        if self.allow_none:
            alts.append("None")
        if not alts:
            return "a valid value"
        return alts[0] if len(alts) == 1 else ", ".join(alts[:-1]) + " or " + alts[-1]

    def check(self, value, name, owner=""):
        """``value`` validated (and normalized by ``validator``), or a ``TypeError`` /
        ``ValueError`` naming ``owner`` and ``name``."""
        if value is None:
            if self.allow_none:
                return None
            raise TypeError(f"{_where(owner)}{name}=None is not allowed; pass {self.describe()}")
        if self.types is bool and isinstance(value, np.bool_):
            value = bool(value)  # numpy's bool (a mask's entry) is a bool
        if self.options is not None and isinstance(value, str):
            if value not in self.options:
                ranged = self.low is not None or self.high is not None
                raise ValueError(
                    f"{_where(owner)}{name}={_show(value)} is not valid; use "
                    f"{self.describe() if ranged else f'one of {list(self.options)}'}")
            return value
        real = isinstance(value, numbers.Real)
        if self.types is not object and not isinstance(value, self.types) \
                and not (self.types is numbers.Real and real):
            tnames = self.types if isinstance(self.types, tuple) else (self.types,)
            raise TypeError(
                f"{_where(owner)}{name}={_show(value)} has type {type(value).__name__}; expected "
                f"{' or '.join(t.__name__ for t in tnames)} ({self.describe()})"
            )
        if isinstance(value, bool) and self.types in (numbers.Real, numbers.Integral, int, float):
            raise TypeError(f"{_where(owner)}{name}={_show(value)} is a bool; pass a number ({self.describe()})")
        if real and not isinstance(value, bool):
            try:
                v = float(value)
            except OverflowError:  # an int beyond float64's range (10**400)
                raise ValueError(
                    f"{_where(owner)}{name}={_show(value)} is out of range: too large for a "
                    f"float64; use {self.describe()}") from None
            if self.finite and not math.isfinite(v):
                raise ValueError(f"{_where(owner)}{name}={_show(value)} must be finite ({self.describe()})")
            if self.low is not None and (v < self.low or (self.low_open and v == self.low)):
                raise ValueError(f"{_where(owner)}{name}={_show(value)} is out of range; use {self.describe()}")
            if self.high is not None and (v > self.high or (self.high_open and v == self.high)):
                raise ValueError(f"{_where(owner)}{name}={_show(value)} is out of range; use {self.describe()}")
            if not isinstance(value, numbers.Integral):
                # a float (Fraction, numpy's floats: found by review, a Fraction broke the
                # formatting of a later message)
                value = v
        elif self.options is not None and not isinstance(value, str) and \
                not any(value is o for o in self.options):  # True/False may be options
            raise TypeError(f"{_where(owner)}{name}={_show(value)}: use one of {list(self.options)}")
        if self.validator is not None:
            value = self.validator(value, name, _owner_name(owner))
        return value


def _show(value):
    """repr(value) for messages, short: an int of many digits as its order of magnitude
    (Python refuses to print ints of more than 4300 digits at all)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 100:
        digits = int(value.bit_length() * math.log10(2))
        return f"~{'-' if value < 0 else ''}1e{digits} (an int)"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _owner_name(owner):
    # a plug-in passes itself (its name is built on the error paths only)
    return owner if isinstance(owner, str) else owner._owner()


def _where(owner):
    owner = _owner_name(owner)
    return f"{owner}: " if owner else ""


def check_params(table, params, owner=""):
    """Validate ``params`` against ``table``; return a full dict with defaults filled in.

    ``owner`` (a name, or a plug-in whose ``_owner()`` gives it) prefixes the messages.
    """
    if not params.keys() <= table.keys():
        unknown = sorted(set(params) - set(table))
        # a plug-in's ``param_hints``: what to pass instead of a parameter users bring
        # from elsewhere (pegasos' C)
        hints = None if isinstance(owner, str) else getattr(owner, "param_hints", None)
        said = "".join(f"; {hints[k]}" for k in unknown if isinstance(hints, dict) and k in hints)
        raise TypeError(
            f"{_owner_name(owner)}: unknown parameter(s) {unknown}; valid parameters: "
            f"{sorted(table)}{said}"
        )
    out = {}
    for name, spec in table.items():
        if name in params:
            out[name] = spec.check(params[name], name, owner)
        elif spec.default is _MISSING:
            raise TypeError(f"{_owner_name(owner)}: missing required parameter {name!r} ({spec.doc})")
        else:
            out[name] = spec.default
    return out


# --------------------------------------------------------------------------- arrays
_SMALL_INTS = (np.int8, np.uint8, np.int16, np.uint16, np.bool_, np.float16)


def _float_dtype_for(dtype, name):
    if dtype.kind == "c":
        raise TypeError(f"{name} is complex ({dtype}); pass real values, e.g. {name}.real")
    if dtype.kind == "O":
        raise TypeError(
            f"{name} has dtype object; convert it to a numeric array, e.g. np.asarray({name}, dtype=float)"
        )
    if dtype.kind in "USVmM":
        raise TypeError(f"{name} has non-numeric dtype {dtype}; pass numbers")
    if dtype in (np.float32, np.float64):
        return dtype
    if dtype.type in _SMALL_INTS:
        return np.dtype(np.float32)
    if dtype.kind in "iub" or dtype.kind == "f":
        return np.dtype(np.float64)
    raise TypeError(f"{name} has unsupported dtype {dtype}; pass float32 or float64")


_NO_ROWS = np.empty(0, dtype=np.intp)
_NO_ROWS.flags.writeable = False


def _nonfinite_rows(arr):
    """Indices of the rows holding NaN/inf, without an array-sized temporary.

    A sum is finite exactly when every entry is, unless finite entries overflow it; only
    then (or when some entry is not finite) are the rows scanned, in ~1 MiB blocks.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        if np.isfinite(np.sum(arr, dtype=np.float64)):
            return _NO_ROWS
    step = max(1, 2**17 // max(arr.shape[1], 1))
    bad = [r + np.flatnonzero(~np.isfinite(arr[r:r + step]).all(axis=1))
           for r in range(0, arr.shape[0], step)]
    return np.concatenate(bad)


def dask_array_of(obj, name="X"):
    """``obj`` as a dask array when it is one, or an xarray object backed by one; else None.

    Objects with a ``__dask_graph__`` method that returns None (an xarray DataArray on a
    numpy array) are in-memory arrays; a dask collection that is not an array (a
    DataFrame, a bag) is refused.
    """
    if type(obj) is np.ndarray or not hasattr(obj, "__dask_graph__"):
        return None
    if obj.__dask_graph__() is None:
        return None
    import dask.array as da

    if isinstance(obj, da.Array):
        return obj
    data = getattr(obj, "data", None)
    if isinstance(data, da.Array):
        return data
    raise TypeError(f"{name} is a dask collection of type {type(obj).__name__}, not an array; "
                    f"pass a dask.array.Array (or {name}.to_dask_array())")


def check_known_row_chunks(a, name="X"):
    """Refuse a dask array whose row (or column) chunk sizes are unknown (``nan``: what
    indexing by a dask mask, ``X[mask]``, leaves), before any count is derived from
    them."""
    if any(np.isnan(c) for axis in a.chunks[:2] for c in axis):  # rows, or columns
        raise ValueError(f"{name} is a dask array of unknown chunk sizes (what indexing it by "
                         f"a dask mask leaves); call {name} = {name}.compute_chunk_sizes() "
                         f"first")


def check_known_columns(X, name="X"):
    """Refuse a dask array whose number of columns is unknown (``nan``: columns selected
    by a dask mask) where a lazy result is built on it (found by review: "X has nan
    features, the model was fit with 4")."""
    if X.ndim == 2 and any(np.isnan(c) for c in X.chunks[1]):
        raise ValueError(f"{name} is a dask array of an unknown number of columns (what "
                         f"indexing its columns by a dask mask leaves); call {name} = "
                         f"{name}.compute_chunk_sizes() first")


def without_empty_row_chunks(X):
    """A dask array ``X`` with its empty row chunks merged away (the same rows: what
    filtering rows, ``X[mask]``, often leaves), so that every row block marginkit reads
    holds rows; ``X`` itself when it has none (or no rows at all)."""
    rows = X.chunks[0]
    if any(c == 0 for c in rows) and sum(rows) > 0:
        return X.rechunk({0: tuple(c for c in rows if c > 0)})
    return X


def check_chunk_shape(shape, declared, index, name="X"):
    """A dask chunk as computed must be the block its array declares (found by review: a
    chunk of other rows than declared gave numpy's broadcast errors in checks, and
    predictions of other length than X's declared rows); sizes the array does not know
    (NaN: rows selected by a dask mask) are not compared."""
    shape, declared = tuple(shape), tuple(declared)
    if len(shape) != len(declared) or any(
            size == size and got != size for got, size in zip(shape, declared)):
        raise ValueError(
            f"{name} chunk {index} has shape {tuple(shape)} but the dask array declares "
            f"{tuple(declared)} for it; build the array with the shape and chunks its "
            "blocks really have")


def _sparse_frame_as_coo(X, name):
    """A pandas DataFrame whose columns are all sparse as the COO matrix of its stored
    entries (``DataFrame.sparse.to_coo``, as scikit-learn reads it), X itself otherwise.
    Found by review: ``np.asarray`` densified a 20,000 x 20,000 frame of 20,000 entries
    (0.23 MiB) into 2.98 GiB. A frame that mixes sparse and dense columns is refused."""
    dtypes = getattr(X, "dtypes", None)
    if dtypes is None or getattr(X, "ndim", 0) != 2 or not hasattr(dtypes, "__iter__"):
        return X
    sparse = [type(dt).__name__ == "SparseDtype" for dt in dtypes]
    if not any(sparse):
        return X
    if not all(sparse):
        raise TypeError(f"{name} is a DataFrame with sparse and dense columns; make every "
                        f"column sparse or pass {name}.sparse.to_coo() / a dense copy")
    fills = [dt.fill_value for dt in dtypes if not _is_zero(dt.fill_value)]
    if fills:
        raise TypeError(f"{name} is a sparse DataFrame with fill value {fills[0]!r}; a "
                        "sparse matrix leaves out zeros only: pass a frame filled with 0 or "
                        f"a dense copy ({name}.sparse.to_dense())")
    try:
        return X.sparse.to_coo()
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} is a sparse DataFrame whose columns do not make one sparse "
                        f"matrix ({exc}); give its columns one numeric dtype") from None


def _is_zero(value):
    """A fill value that is the number 0 (pandas' NA compares to neither)."""
    try:
        return bool(value == 0)
    except (TypeError, ValueError):
        return False


def check_X(X, name="X", allow_empty=False, dtypes=("float64", "float32"), row_offset=0):
    """Validate a feature matrix; return a float32/float64 ndarray or canonical CSR matrix.

    Dense input keeps its memory (no copy) when it is already float32/float64; Fortran
    order is accepted as is. Sparse input of any format has its structure checked
    (``checked_csr``) and becomes CSR (a private copy only when the format, dtype or
    canonical form must change); it is never densified. ``row_offset`` is added to the
    row numbers of structure errors and of rows that are not finite (X is a row block of
    a larger matrix).
    """
    if type(X) is np.ndarray and X.ndim == 2 and X.dtype in _FLOAT_DTYPES:
        # kept as it is: no conversion to check
        return _checked_dense(X, name, allow_empty, row_offset)
    if X is None:
        raise TypeError(f"{name} is None; pass an array of shape (n_samples, n_features)")
    X = _sparse_frame_as_coo(X, name)
    if sp.issparse(X):
        if X.ndim != 2:
            raise ValueError(f"{name} must be 2-D, got {X.ndim}-D")
        dtype = _float_dtype_for(_sparse_dtype(X, name), name)
        Xc = checked_csr(X, name, row_offset)  # structure checked before scipy's own C++ reads it
        if Xc.dtype != dtype:
            Xc = Xc.astype(dtype)
        with np.errstate(over="ignore", invalid="ignore"):
            # a sum is finite exactly when every entry is, unless finite entries overflow
            # it: the entry-wise test (a temporary the length of the nonzeros) only then
            finite = (np.isfinite(np.sum(Xc.data, dtype=np.float64))
                      or np.all(np.isfinite(Xc.data)))
        if not finite:
            bad = np.unique(np.repeat(np.arange(Xc.shape[0]), np.diff(Xc.indptr))[~np.isfinite(Xc.data)])
            bad += row_offset
            raise ValueError(
                f"{name} contains NaN or infinity in row(s) {bad[:10].tolist()}"
                f"{' ...' if bad.size > 10 else ''}; remove or impute them"
            )
        if not allow_empty and (Xc.shape[0] == 0 or Xc.shape[1] == 0):
            raise ValueError(f"{name} is empty (shape {Xc.shape}); pass at least one sample and one feature")
        return Xc
    if dask_array_of(X, name) is not None:
        raise TypeError(f"{name} is a dask array; this entry point needs numpy or scipy.sparse input")
    try:
        arr = np.asarray(X)
    except (ValueError, TypeError) as exc:
        raise ValueError(
            f"{name} could not be converted to an array ({exc}); pass a 2-D array of numbers "
            "with the same number of features in every row"
        ) from None
    dtype = _float_dtype_for(arr.dtype, name)
    if arr.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D (n_samples, n_features), got shape {arr.shape}; "
            f"use {name}.reshape(-1, 1) for a single feature"
        )
    if arr.dtype != dtype:  # a copy either way: made in row order, the layout rows are read in
        arr = arr.astype(dtype, order="C")
    return _checked_dense(arr, name, allow_empty, row_offset)


# --------------------------------------------------------------------------- sparse structure
#: entries per block of the canonical-order scan (bounds its temporaries to ~1 MiB)
_SCAN_BLOCK = 1 << 20
_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


def _sparse_dtype(X, name):
    data = getattr(X, "data", None)
    if X.format in ("csr", "csc", "bsr", "coo", "dia") and not isinstance(data, np.ndarray):
        raise TypeError(f"{name} ({X.format.upper()}): data is a {type(data).__name__}, not a "
                        "numpy array; rebuild the matrix from numpy arrays")
    return X.dtype


def _index_array(arr, name, label, part):
    """``arr`` as a 1-D integer ndarray (no copy), or a clear error."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"{name} ({label}): {part} is a {type(arr).__name__}, not a numpy array; "
                        "rebuild the matrix from numpy arrays")
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name} ({label}): {part} has dtype {arr.dtype}; the index arrays of a "
                        "sparse matrix must be integers")
    if arr.ndim != 1:
        raise ValueError(f"{name} ({label}): {part} must be 1-D, got shape {arr.shape}")
    return arr


def _data_array(arr, name, label, ndim=1):
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"{name} ({label}): data is a {type(arr).__name__}, not a numpy array; "
                        "rebuild the matrix from numpy arrays")
    if arr.ndim != ndim:
        raise ValueError(f"{name} ({label}): data must be {ndim}-D, got shape {arr.shape}")
    return arr


def _first_out_of_range(idx, high):
    """Position of the first entry of ``idx`` outside [0, high), or -1 (min/max first:
    no temporary unless something is out of range)."""
    if idx.size == 0 or (int(idx.min()) >= 0 and int(idx.max()) < high):
        return -1
    for a in range(0, idx.size, _SCAN_BLOCK):
        blk = idx[a:a + _SCAN_BLOCK]
        bad = np.flatnonzero((blk < 0) | (blk >= high))
        if bad.size:
            return a + int(bad[0])
    return -1  # pragma: no cover - min/max said otherwise


def _check_pointers(indptr, n_major, n_stored, name, label, major, offset=0):
    """indptr of a compressed format: n_major + 1 entries, starts at 0, non-decreasing,
    ends at most at the number of stored entries. Returns the number of entries used.
    ``offset`` is added to the row named in a message (a row block of a larger matrix)."""
    if indptr.shape[0] != n_major + 1:
        raise ValueError(
            f"{name} ({label}): indptr has {indptr.shape[0]} entries, expected "
            f"n_{major}s + 1 = {n_major + 1}; rebuild the matrix with a matching shape")
    if int(indptr[0]) != 0:
        raise ValueError(f"{name} ({label}): indptr[0] = {int(indptr[0])}, expected 0")
    if n_major:
        down = indptr[1:] < indptr[:-1]  # n_major booleans
        if down.any():
            i = int(np.argmax(down))
            raise ValueError(
                f"{name} ({label}): indptr decreases at {major} {i + offset} (indptr[{i}] = "
                f"{int(indptr[i])} > indptr[{i + 1}] = {int(indptr[i + 1])}); the {major} "
                "pointers must be non-decreasing")
    used = int(indptr[-1])
    if used > n_stored:
        raise ValueError(
            f"{name} ({label}): indptr[-1] = {used} (the number of stored entries) exceeds "
            f"the length {n_stored} of indices and data")
    return used


def _sorted_unique(indices, indptr):
    """True when every row's indices are strictly increasing (sorted, no duplicates).

    Blocked: each block compares neighbours (a temporary of at most ``_SCAN_BLOCK``
    booleans) and forgives the pairs that straddle a row boundary.
    """
    nnz = indices.shape[0]
    starts = indptr[1:-1]  # positions where rows 1.. begin (non-decreasing)
    for a in range(0, nnz - 1, _SCAN_BLOCK):
        b = min(a + _SCAN_BLOCK, nnz - 1)
        ok = indices[a:b] < indices[a + 1:b + 1]  # pair (k, k + 1) for k in [a, b)
        # the pairs whose k + 1 starts a new row compare two rows: not an order violation
        lo = np.searchsorted(starts, a + 1, side="left")
        hi = np.searchsorted(starts, b, side="right")
        ok[starts[lo:hi] - (a + 1)] = True
        if not ok.all():
            return False
    return True


def _checked_compressed(X, name, label, csr=True, row_offset=0):
    """(data, indices, indptr, canonical) of a CSR/CSC matrix whose structure is valid.

    Checks, in O(nnz) numpy and without copying the data: indptr has n + 1 entries,
    starts at 0 and never decreases; indices and data have the same length, at least
    indptr[-1] (entries past indptr[-1] are not part of the matrix, as in scipy's
    ``prune``: the arrays returned are views that stop there); every index is in
    [0, n_minor). ``canonical`` tells whether every row is sorted without duplicates.
    The index arrays end with one dtype, int32 or int64 (int32 indices with int64 indptr:
    indptr is cast when its values fit, else indices; other integer types become int64);
    non-contiguous arrays become contiguous copies.
    """
    major, minor = ("row", "column") if csr else ("column", "row")
    n_major, n_minor = X.shape if csr else X.shape[::-1]
    data = _data_array(X.data, name, label)
    indices = _index_array(X.indices, name, label, "indices")
    indptr = _index_array(X.indptr, name, label, "indptr")
    if indices.shape[0] != data.shape[0]:
        raise ValueError(
            f"{name} ({label}): indices has {indices.shape[0]} entries but data has "
            f"{data.shape[0]}; they must have the same length")
    used = _check_pointers(indptr, n_major, indices.shape[0], name, label, major,
                           row_offset if csr else 0)
    if used < indices.shape[0]:
        data, indices = data[:used], indices[:used]
    k = _first_out_of_range(indices, n_minor)
    if k >= 0:
        i = int(np.searchsorted(indptr, k, side="right")) - 1 + (row_offset if csr else 0)
        raise ValueError(
            f"{name} ({label}): {minor} index {int(indices[k])} of {major} {i} is out of "
            f"range [0, {n_minor}) (stored entry {k}); the matrix has {n_minor} {minor}s: "
            "fix the index arrays or the shape")
    if indices.dtype in _INDEX_DTYPES and indptr.dtype in _INDEX_DTYPES:
        if indptr.dtype != indices.dtype:
            # one index dtype for both: cast indptr (n + 1 entries) when its values fit
            if indices.dtype == np.int64 or used <= np.iinfo(np.int32).max:
                indptr = indptr.astype(indices.dtype)
            else:
                indices = indices.astype(np.int64)
    else:  # other integer types (range-checked above): int64
        indices, indptr = indices.astype(np.int64), indptr.astype(np.int64)
    data, indices, indptr = (np.ascontiguousarray(a) for a in (data, indices, indptr))
    return data, indices, indptr, _sorted_unique(indices, indptr)


def _check_coo(X, name):
    label = "COO"
    data = _data_array(X.data, name, label)
    rows = _index_array(X.row, name, label, "row")
    cols = _index_array(X.col, name, label, "col")
    for part, idx, high in (("row", rows, X.shape[0]), ("column", cols, X.shape[1])):
        if idx.shape[0] != data.shape[0]:
            raise ValueError(f"{name} ({label}): the {part} indices have {idx.shape[0]} entries "
                             f"but data has {data.shape[0]}; they must have the same length")
        k = _first_out_of_range(idx, high)
        if k >= 0:
            raise ValueError(
                f"{name} ({label}): {part} index {int(idx[k])} of stored entry {k} is out of "
                f"range [0, {high}); fix the index arrays or the shape")


def _check_bsr(X, name):
    label = "BSR"
    data = _data_array(X.data, name, label, ndim=3)
    R, C = data.shape[1:]
    n, d = X.shape
    if R < 1 or C < 1 or n % R or d % C:
        raise ValueError(f"{name} ({label}): block size {(R, C)} does not divide the shape {X.shape}")
    indices = _index_array(X.indices, name, label, "indices")
    indptr = _index_array(X.indptr, name, label, "indptr")
    if data.shape[1:] != (R, C) or data.shape[0] != indices.shape[0]:
        raise ValueError(
            f"{name} ({label}): data has shape {data.shape}, expected "
            f"({indices.shape[0]}, {R}, {C}) for {indices.shape[0]} blocks of {(R, C)}")
    used = _check_pointers(indptr, n // R, indices.shape[0], name, label, "block row")
    k = _first_out_of_range(indices[:used], d // C)
    if k >= 0:
        raise ValueError(
            f"{name} ({label}): block column index {int(indices[k])} of stored block {k} is "
            f"out of range [0, {d // C}); fix the index arrays or the shape")


def _check_dia(X, name):
    label = "DIA"
    data = _data_array(X.data, name, label, ndim=2)
    offsets = _index_array(X.offsets, name, label, "offsets")
    if offsets.shape[0] != data.shape[0]:
        raise ValueError(f"{name} ({label}): {offsets.shape[0]} offsets for {data.shape[0]} "
                         "rows of diagonal data; they must match")
    if np.unique(offsets).shape[0] != offsets.shape[0]:
        raise ValueError(f"{name} ({label}): the offsets repeat a diagonal")


def _check_lil(X, name):
    label = "LIL"
    n = X.shape[0]
    rows, data = X.rows, X.data
    for part, arr in (("rows", rows), ("data", data)):
        if not isinstance(arr, np.ndarray) or arr.shape != (n,):
            raise ValueError(f"{name} ({label}): {part} must be an array of {n} lists "
                             f"(one per row)")
    for i in range(n):
        r, v = rows[i], data[i]
        if not isinstance(r, list) or not isinstance(v, list) or len(r) != len(v):
            raise ValueError(f"{name} ({label}): row {i} has column and value lists of "
                             "different lengths")
    # the column entries: integers in [0, d) (found by review: scipy's conversion cut a
    # column 2.7 to 2, moving the value to another feature, and a column beyond int32
    # gave a bare OverflowError)
    d = X.shape[1]
    flat = list(itertools.chain.from_iterable(rows))
    if not flat:
        return
    cols = np.asarray(flat)
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=n)
    if cols.dtype.kind not in "biu":  # (a bool is an integer, as Python reads it)
        bad = np.array([not isinstance(c, numbers.Integral) or not 0 <= c < d for c in flat])
    else:
        cols = cols.astype(np.int64) if cols.dtype.kind == "b" else cols
        bad = (cols < 0) | (cols >= d)
    if bad.any():
        k = int(np.argmax(bad))
        row = int(np.searchsorted(np.cumsum(lengths), k, side="right"))
        raise ValueError(f"{name} ({label}): row {row} has the column {flat[k]!r}; columns "
                         f"must be integers in [0, {d}): fix X.rows or the shape")


def with_native_byte_order(X):
    """A DIA matrix whose data or offsets are of non-native byte order, as a new matrix
    on native copies (scipy's conversions refuse such dtypes where the other formats'
    take them; found by review); any other X as it is."""
    if X.format != "dia" or (X.data.dtype.isnative and X.offsets.dtype.isnative):
        return X
    native = [a.astype(a.dtype.newbyteorder("=")) for a in (X.data, X.offsets)]
    return type(X)((native[0], native[1]), shape=X.shape)


def _check_dok(X, name):
    """Every key an integer pair within the shape (found by review: a key (1.5, 2) put in
    through scipy's private dict was cut to row 1, and one beyond int32 gave a bare
    OverflowError)."""
    keys = list(X.keys())
    if not keys:
        return
    try:
        arr = np.array(keys)
    except (TypeError, ValueError):  # ragged keys: the loop below names one
        arr = None
    if arr is not None and arr.dtype.kind in "biu" and arr.shape == (len(keys), 2) and \
            np.all((arr.astype(np.int64) >= 0) & (arr.astype(np.int64) < np.array(X.shape))):
        return  # (a bool is an integer, as Python reads it)
    for k in keys:
        if not (isinstance(k, tuple) and len(k) == 2 and all(
                isinstance(i, numbers.Integral) and 0 <= i < n for i, n in zip(k, X.shape))):
            raise ValueError(f"{name} (DOK): the key {k!r} is not a pair of integer indices "
                             f"within the shape {X.shape}; fix the matrix's keys")


#: value types a float DOK holds as numbers (to the float's rounding): the fast path of
#: ``_check_dok_values`` (check_X of 200,000 entries: 0.17 s, against 0.8 s by the value loop)
_EXACT_IN_FLOAT = frozenset((float, int, bool, np.float64, np.float32, np.float16,
                             np.int64, np.int32, np.int16, np.int8, np.uint64, np.uint32,
                             np.uint16, np.uint8, np.bool_))


def _check_dok_values(X, name):
    """Every value a number of the matrix's dtype (found by review: a string put in through
    scipy's private dict gave numpy's "could not convert string to float" naming neither
    X nor the entry)."""
    _check_dok(X, name)
    # numbers that the matrix's dtype holds as they are: numpy reads the string '1.5' as
    # 1.5, drops a complex value's imaginary part, reads 2.75 as 2 in an integer matrix
    # and a timedelta as its count (found by review)
    cast = X.dtype.type
    if X.dtype.kind == "f" and {type(v) for v in X.values()} <= _EXACT_IN_FLOAT:
        return  # every value a real number a float matrix holds (to its rounding)
    for k, v in X.items():
        try:
            if isinstance(v, (numbers.Number, np.number, np.bool_)) and \
                    not isinstance(v, (np.timedelta64, np.datetime64)) and np.ndim(v) == 0:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # (numpy's ComplexWarning)
                    c = cast(v)
                if complex(c) == complex(v) or (c != c and v != v):
                    continue
        except (TypeError, ValueError, OverflowError, ArithmeticError):
            pass
        raise ValueError(f"{name} (DOK): the entry at {tuple(map(int, k))} is {v!r}, not a "
                         f"number of the matrix's dtype {X.dtype}; fix the matrix's values")


_FORMAT_CHECKS = {"coo": _check_coo, "bsr": _check_bsr, "dia": _check_dia, "lil": _check_lil,
                  "dok": _check_dok_values}


def check_sparse_structure(X, name="X", row_offset=0):
    """Raise a clear error when the index arrays of the sparse matrix X are inconsistent.

    What ``checked_csr`` checks, without converting anything: for code that hands X to
    scipy (slicing, conversions) rather than to marginkit's kernels.
    """
    if X.ndim != 2:
        return  # not a matrix: the caller's own shape check words the error
    fmt = X.format
    if fmt in ("csr", "csc"):
        _checked_compressed(X, name, fmt.upper(), csr=fmt == "csr", row_offset=row_offset)
    elif fmt in _FORMAT_CHECKS:
        _FORMAT_CHECKS[fmt](X, name)


def _csr_from(template, data, indices, indptr, shape, canonical):
    """A CSR matrix (the class of ``template``: matrix or array) on the given arrays,
    without scipy's constructor re-reading or down-casting them (non-native byte order
    made native: scipy refuses such dtypes; found by review)."""
    arrays = [a if a.dtype.isnative else a.astype(a.dtype.newbyteorder("="))
              for a in (data, indices, indptr)]
    data, indices, indptr = arrays
    M = (sp.csr_array if isinstance(template, sp.sparray) else sp.csr_matrix)(shape, dtype=data.dtype)
    M.data, M.indices, M.indptr = data, indices, indptr
    M.has_sorted_indices = canonical
    M.has_canonical_format = canonical
    return M


def checked_csr(X, name="X", row_offset=0):
    """A scipy.sparse matrix of any format as CSR whose structure has been checked.

    The check comes before anything reads the index arrays (scipy's own conversions and
    canonical-format tests are C++ that trusts them): for CSR and CSC, indptr of length
    n + 1 starting at 0 and non-decreasing, ``len(indices) == len(data) >= indptr[-1]``
    (entries past ``indptr[-1]`` are ignored, as scipy does), every index in range; the
    analogous checks for COO, BSR, DIA and LIL. O(nnz) vectorized numpy, no copy of the
    data. A ``ValueError``/``TypeError`` names the argument, the format and the first bad
    position (``row_offset`` is added to row numbers: X is a row block of a larger matrix).

    Returns the caller's matrix when it is already canonical CSR (sorted indices, no
    duplicates, int32/int64 indices, contiguous arrays), else a private CSR copy or view
    that is; the caller's arrays are never modified.
    """
    fmt = X.format
    if fmt == "csr":
        Xc, label = X, "CSR"
    else:
        check_sparse_structure(X, name, row_offset)
        try:
            if X.dtype.kind in "iu" and fmt in ("coo", "csc", "bsr") and \
                    not getattr(X, "has_canonical_format", False):
                # duplicates (possible in these formats) are summed by the conversion, in
                # X's own dtype, where integers wrap (found by review: int8 100 + 100 gave
                # -56): summed in float64 (exact below 2^53), then rounded once to the float
                # dtype they become (bools are or-ed, as scipy reads them)
                target = _float_dtype_for(X.dtype, name)
                Xc = with_native_byte_order(X).astype(np.float64).tocsr().astype(target)
            else:
                Xc = with_native_byte_order(X).tocsr()
            label = f"CSR converted from {fmt.upper()}"
        except MemoryError:
            raise ValueError(
                f"{name} ({fmt.upper()}, shape {X.shape}, {X.nnz} stored entries): its CSR "
                f"form, {X.shape[0] + 1:.3g} row pointers (4 or 8 bytes each) and a copy of "
                "its entries (as floats for integer data), needs more memory than this "
                "machine gives; check the declared shape") from None
        except OverflowError as exc:  # scipy's index arrays (a DOK key beyond int32, say)
            raise ValueError(f"{name} ({fmt.upper()}, shape {X.shape}): scipy cannot convert "
                             f"its indices to CSR ({exc}); check the indices and the "
                             "shape") from None
    data, indices, indptr, canonical = _checked_compressed(Xc, name, label, row_offset=row_offset)
    same = data is Xc.data and indices is Xc.indices and indptr is Xc.indptr
    if same and canonical and Xc is X:
        return X
    Xc = _csr_from(X, data, indices, indptr, X.shape, canonical)
    if not canonical:
        # private arrays (sum_duplicates works in place); integer data summed in float64
        # (in their own dtype the sum would wrap), then rounded once to their float dtype
        target = _float_dtype_for(Xc.dtype, name) if Xc.dtype.kind in "iu" else None
        Xc = Xc.astype(np.float64) if target is not None else Xc.copy()
        Xc.has_sorted_indices = False
        with np.errstate(over="ignore"):
            Xc.sum_duplicates()  # sorts the indices too; the structure is valid by now
        if target is not None:
            Xc = Xc.astype(target)
        if Xc.nnz and not np.isfinite(Xc.data).all() and np.isfinite(data).all():
            # finite entries whose duplicates sum past float64's range (found by review:
            # the message said "contains NaN or infinity")
            row = int(np.searchsorted(Xc.indptr, np.flatnonzero(~np.isfinite(Xc.data))[0],
                                      side="right") - 1) + row_offset
            raise ValueError(f"{name} ({label}): the duplicate entries of row {row} sum "
                             f"beyond {Xc.data.dtype}'s range (scipy adds duplicates); "
                             "rescale X or remove the duplicates")
    return Xc


def _checked_dense(arr, name, allow_empty, row_offset=0):
    """The checks of a 2-D float32/float64 ndarray (``check_X``): not empty, finite,
    C or Fortran contiguous (a contiguous copy otherwise); ``row_offset`` is added to
    the row numbers of the rows that are not finite."""
    if not allow_empty and (arr.shape[0] == 0 or arr.shape[1] == 0):
        raise ValueError(f"{name} is empty (shape {arr.shape}); pass at least one sample and one feature")
    bad = _nonfinite_rows(arr) + row_offset
    if bad.size:
        raise ValueError(
            f"{name} contains NaN or infinity in row(s) {bad[:10].tolist()}"
            f"{' ...' if bad.size > 10 else ''}; remove or impute them"
        )
    if not (arr.flags.c_contiguous or arr.flags.f_contiguous):
        arr = np.ascontiguousarray(arr)
    return arr


def _first_asymmetry(blk, blkT, tol, row0):
    i, j = np.argwhere(np.abs(blk - blkT) > tol)[0]
    return row0 + int(i), int(j), float(blk[i, j]), float(blkT[i, j])


def check_gram(K, name="X", rtol=None):
    """Check a precomputed Gram matrix (already validated by ``check_X``).

    The matrix must be square, symmetric (to ``rtol`` relative and ``1e-8 max|K|``
    absolute tolerance) and have a non-negative diagonal. Dense matrices are compared in
    row blocks (no n x n temporary); sparse ones through their nonzeros (never
    densified). Returns ``K`` unchanged.
    """
    n, m = K.shape
    if n != m:
        raise ValueError(
            f"kernel='precomputed' needs {name} to be the square (n, n) Gram matrix K(X, X), "
            f"got shape {K.shape}"
        )
    if rtol is None:
        rtol = 1e-6 if K.dtype == np.float64 else 1e-4
    if sp.issparse(K):
        amax = float(np.abs(K.data).max()) if K.nnz else 0.0
        atol = 1e-8 * max(1.0, amax)
        D = (K - K.T).tocoo()
        if D.nnz:
            A = abs(K).maximum(abs(K.T)).tocsr()
            bound = atol + rtol * np.asarray(A[D.row, D.col]).ravel()
            bad = np.flatnonzero(np.abs(D.data) > bound)
            if bad.size:
                i, j = int(D.row[bad[0]]), int(D.col[bad[0]])
                raise ValueError(
                    f"kernel='precomputed': the Gram matrix {name} is not symmetric "
                    f"({name}[{i}, {j}] = {K[i, j]:.6g} but {name}[{j}, {i}] = {K[j, i]:.6g}); "
                    f"pass K(X, X), e.g. (K + K.T) / 2"
                )
        diag = np.asarray(K.diagonal()).ravel()
    else:
        amax = max(float(K.max()), -float(K.min())) if K.size else 0.0  # no |K| temporary
        atol = 1e-8 * max(1.0, amax)
        step = max(1, 2**17 // max(n, 1))  # row blocks of ~1 MiB temporaries
        for r in range(0, n, step):
            blk = K[r:r + step]
            blkT = K[:, r:r + step].T
            tol = atol + rtol * np.maximum(np.abs(blk), np.abs(blkT))
            if (np.abs(blk - blkT) > tol).any():
                i, j, a, b = _first_asymmetry(blk, blkT, tol, r)
                raise ValueError(
                    f"kernel='precomputed': the Gram matrix {name} is not symmetric "
                    f"({name}[{i}, {j}] = {a:.6g} but {name}[{j}, {i}] = {b:.6g}); "
                    f"pass K(X, X), e.g. (K + K.T) / 2"
                )
        diag = np.diagonal(K)
    neg = np.flatnonzero(diag < 0)
    if neg.size:
        raise ValueError(
            f"kernel='precomputed': the Gram matrix {name} has negative diagonal entries "
            f"K(x, x) < 0 at row(s) {neg[:10].tolist()}{' ...' if neg.size > 10 else ''}; "
            "a kernel matrix is positive semi-definite: pass K(X, X)"
        )
    return K


def check_positive_diag(kdiag, name="X", kernel=None):
    """Rows must have K(x_i, x_i) > 0 where a solver normalizes by sqrt(K(x_i, x_i)).

    The perceptron / von Neumann family works with the normalized Gram matrix
    G_ij = y_i y_j K_ij / sqrt(K_ii K_jj) (Ramdas & Pena 2014, sec. 3), undefined for zero-norm
    points. Raises ``ValueError`` naming the rows (first ten) and the fixes; returns the
    diagonal as float64.
    """
    d = np.asarray(kdiag, dtype=np.float64).ravel()
    bad = np.flatnonzero(~(d > 0))
    if bad.size:
        kname = f" under kernel {kernel!r}" if kernel is not None else ""
        raise ValueError(
            f"{name} has {bad.size} zero-norm point(s) (K(x, x) = 0{kname}) at row(s) "
            f"{bad[:10].tolist()}{' ...' if bad.size > 10 else ''}; this solver normalizes by "
            "sqrt(K(x, x)): remove those rows, append a constant feature, or use a kernel "
            "with K(x, x) > 0 (e.g. 'rbf')"
        )
    return d


def label_count(y):
    """The number of labels in ``y`` when its shape tells it without a conversion (a 1-D
    sequence, or a column), else None: compared with a sparse X's declared rows before
    that X is converted, as a conversion to CSR costs 8 bytes a declared row."""
    try:
        shape = np.shape(y)
    except (TypeError, ValueError):  # ragged: check_y says what is wrong with it
        return None
    if len(shape) == 1 or (len(shape) == 2 and shape[1] == 1):
        # an int; not a dask array's unknown (NaN) length
        return shape[0] if isinstance(shape[0], numbers.Integral) else None
    return None


def check_y(y, n_samples, task="classification", name="y"):
    """Validate labels. Classification: two distinct labels -> (y in {-1, +1} float64, classes_).

    ``classes_[1]`` is mapped to +1. Regression: finite float64 vector, ``classes_`` None.
    """
    if type(y) is np.ndarray:
        arr = y  # neither None, dask nor sparse: the conversion below is the identity
    else:
        if y is None:
            raise TypeError(f"{name} is None; pass one label per sample")
        if dask_array_of(y, name) is not None:
            raise TypeError(f"{name} is a dask array; pass numpy input here")
        if sp.issparse(y):
            raise TypeError(f"{name} is sparse; pass a 1-D dense array of labels")
        arr = np.asarray(y)
    if arr.ndim == 2 and 1 in arr.shape:
        arr = arr.ravel()
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.shape[0] != n_samples:
        raise ValueError(
            f"{name} has {arr.shape[0]} entries but X has {n_samples} rows; pass one label per row of X"
        )
    if task == "regression":
        if arr.dtype.kind not in "iufb":
            raise TypeError(f"{name} must be numeric for regression, got dtype {arr.dtype}")
        out = arr.astype(np.float64)
        if not np.isfinite(out).all():
            raise ValueError(f"{name} contains NaN or infinity; remove those samples")
        return out, None
    if arr.dtype.kind == "c":
        raise TypeError(f"{name} is complex; pass real labels")
    if arr.dtype in _LABEL_DTYPES and arr.flags.c_contiguous:
        # the usual case in one pass: two finite labels (see utils._checks.two_labels)
        ypm = np.empty(arr.shape[0])
        lohi = two_labels(arr, ypm)
        if lohi is not None:
            return ypm, np.array(lohi, dtype=arr.dtype)
    check_missing_labels(arr, name)
    classes = is_hi = None
    if arr.dtype.kind in "biuf" and arr.size:
        # two labels (the usual case) without sorting: min, max and one comparison pass,
        # the same classes_ as np.unique (a solve of a small problem spent most of its
        # label check in the sort). min and max propagate NaN and reach +-inf, so both
        # are finite exactly when every label is: the entry-wise test only otherwise
        lo, hi = np.minimum.reduce(arr), np.maximum.reduce(arr)
        if arr.dtype.kind == "f" and not (math.isfinite(lo) and math.isfinite(hi)) \
                and not np.isfinite(arr).all():
            raise ValueError(f"{name} contains NaN or infinity; every sample needs a label")
        if lo != hi:
            eq_hi = arr == hi
            if (eq_hi | (arr == lo)).all():
                classes = np.array([lo, hi], dtype=arr.dtype)
                is_hi = eq_hi  # the labels mapped to +1
    try:
        if classes is None:
            classes = np.unique(arr)
    except TypeError as exc:
        raise TypeError(f"{name} has labels that cannot be compared ({exc}); use one label type") from None
    if classes.size < 2:
        raise ValueError(
            f"{name} has a single class {classes.tolist()}; a classifier needs two distinct labels"
        )
    if classes.size > 2:
        raise ValueError(
            f"{name} has {classes.size} classes {classes[:10].tolist()}; solve() is binary: "
            "use the marginkit.sklearn estimators (one-vs-rest) for more classes"
        )
    ypm = np.where(arr == classes[1] if is_hi is None else is_hi, 1.0, -1.0)
    return ypm, classes


def check_missing_labels(arr, name="y"):
    """ValueError when the labels ``arr`` (an ndarray) hold a missing value: NaN, NaT,
    None or pandas' NA in an object array, NaT in a datetime or timedelta array (taken
    as a class, NaT split the run from its referee: found by review)."""
    if arr.dtype.kind == "O" and has_nan_label(arr):
        raise ValueError(f"{name} contains NaN or another missing label (NaT, None, pandas "
                         "NA); every sample needs a label")
    if arr.dtype.kind == "O":
        odd = next((v for v in arr.ravel() if isinstance(v, (tuple, list, dict, set,
                                                            np.ndarray))), None)
        if odd is not None:
            # found by review: tuple labels gave numpy's "operands could not be broadcast"
            raise TypeError(f"{name} holds a label of type {type(odd).__name__} ({odd!r:.40}); "
                            "a label is a number or a string")
    if arr.dtype.kind in "Mm" and np.isnat(arr).any():
        raise ValueError(f"{name} contains NaT (a missing date or duration); every sample "
                         "needs a label")


def has_nan_label(arr):
    """An object-dtype label vector holds a missing value: a NaN or NaT (a value that
    differs from itself: it would otherwise become a class of its own, or several), None,
    or pandas' NA (whose comparisons are neither true nor false)."""
    return any(_missing_label(v) for v in arr.ravel())


def _missing_label(v):
    if v is None:
        return True
    if isinstance(v, (str, bytes)):
        return False
    try:
        return bool(v != v)
    except (TypeError, ValueError):
        return type(v).__name__ == "NAType"


def check_random_state(random_state, name="random_state"):
    """Return a ``numpy.random.Generator`` (ints/None seed a new one; Generators pass through)."""
    if type(random_state) is int and random_state >= 0:  # the common case, without ABC checks
        return np.random.default_rng(random_state)
    if random_state is None or isinstance(random_state, (numbers.Integral, np.integer)):
        if isinstance(random_state, bool):
            raise TypeError(f"{name} must be None, an int or a numpy Generator, got a bool")
        if random_state is not None and random_state < 0:
            raise ValueError(f"{name}={random_state} must be >= 0")
        return np.random.default_rng(random_state)
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**31 - 1))
    raise TypeError(
        f"{name}={random_state!r} must be None, an int or a numpy Generator"
    )


def check_sample_weight(sample_weight, n_samples, name="sample_weight"):
    """Validate per-sample weights: a float64 copy of shape (n_samples,), finite, >= 0 and
    not all zero (the caller's array is never modified). TypeError/ValueError naming
    ``name`` otherwise."""
    if sample_weight is None:
        raise TypeError(f"{name} is None; pass one weight per sample or leave it out")
    if dask_array_of(sample_weight, name) is not None:
        raise TypeError(f"{name} is a dask array; pass a numpy array of weights")
    if sp.issparse(sample_weight):
        raise TypeError(f"{name} is sparse; pass a 1-D dense array of weights")
    arr = np.asarray(sample_weight)
    if arr.dtype.kind not in "iufb":
        raise TypeError(f"{name} must be numeric, got dtype {arr.dtype}")
    if arr.ndim == 2 and 1 in arr.shape:
        arr = arr.ravel()
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.shape[0] != n_samples:
        raise ValueError(f"{name} has {arr.shape[0]} entries but X has {n_samples} rows; "
                         "pass one weight per row of X")
    out = np.array(arr, dtype=np.float64)  # a copy: never the caller's array
    if not np.isfinite(out).all():
        raise ValueError(f"{name} contains NaN or infinity; pass finite weights")
    if (out < 0).any():
        i = int(np.flatnonzero(out < 0)[0])
        raise ValueError(f"{name} must be >= 0; sample {i} has weight {out[i]!r}")
    if not (out > 0).any():
        raise ValueError(f"{name} is zero for every sample; at least one weight must be "
                         "positive")
    out.flags.writeable = False
    return out


def checked_block(K, A, B, same, who):
    """The block ``K`` a user's function returned for K(A, B) (``same``: B is A), checked
    and as an array: real numbers (a sparse block densified: it is len(A) x len(B) dense
    anyway), of shape (len(A), len(B)), finite, and for K(A, A) symmetric; float32 when
    the function's values are float32, float64 otherwise. ``who`` names the function in
    the messages."""
    if sp.issparse(K):
        # its shape and structure before scipy's toarray reads the index arrays (C++ that
        # trusts them: a column index out of range crashed the process, an empty block of
        # the wrong shape asked for terabytes; found by review)
        want = (A.shape[0], B.shape[0])
        if K.shape != want:
            raise ValueError(
                f"{who} returned a sparse block of shape {K.shape} for A with {want[0]} rows "
                f"and B with {want[1]} rows; it must return K(A, B) of shape {want}")
        K = checked_csr(K, f"the block {who} returned").toarray()
    try:
        K = np.asarray(K)  # its own type first: a list of strings is not parsed as numbers
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{who} returned a non-numeric block ({exc})") from None
    if K.dtype == object:
        # numbers of any kind (Fraction, Decimal, Python or numpy scalars), not strings
        if any(isinstance(v, (str, bytes)) for v in K.flat):
            raise ValueError(f"{who} returned strings; return a float array")
        try:
            K = K.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{who} returned a non-numeric block ({exc})") from None
    if K.dtype.kind == "c":  # a cast to float would drop the imaginary part silently
        raise ValueError(f"{who} returned a complex block; a kernel is real: return a "
                         "float array (e.g. K.real when the imaginary part is 0)")
    if K.dtype.kind not in "biuf":
        raise ValueError(f"{who} returned dtype {K.dtype}; return a float array")
    # float32 values stay float32 (the function's own precision, read by the symmetry
    # check below and the referee's allowance); any other numbers become float64, which
    # holds bool, int up to 2^53 and float16 exactly (found by review: a bool block on
    # float32 operands was refused, an int one passed on unconverted)
    returned = K.dtype
    K = K.astype(np.float32 if returned == np.float32 else np.float64, copy=False)
    want = (A.shape[0], B.shape[0])
    if K.shape != want:
        raise ValueError(
            f"{who} returned a block of shape {K.shape} for A with {want[0]} rows and B "
            f"with {want[1]} rows; it must return K(A, B) of shape {want}")
    if not np.isfinite(K).all():
        raise ValueError(f"{who} returned NaN or infinity in its {want} block; the kernel "
                         "must be finite")
    if same:
        # K(A, A) must be symmetric, as dcd and a precomputed Gram require (found by
        # review: the perceptron family certified claims about a "kernel" a.b + g(a) -
        # g(b)); to 1e-9 of sqrt(K_ii K_jj) (1e-5 for a float32 block), a kernel's
        # rounding passes
        scale = np.sqrt(np.abs(np.diagonal(K)).astype(np.float64))
        rel = 1e-5 if np.float32 in (K.dtype, returned) else 1e-9
        for lo in range(0, K.shape[0], 256):  # temporaries of 256 rows, not n x n
            hi = lo + 256
            bad = np.abs(K[lo:hi] - K[:, lo:hi].T) > \
                rel * np.outer(scale[lo:hi], scale) + 1e-300
            if not bad.any():
                continue
            i, j = np.argwhere(bad)[0]
            i += lo
            raise ValueError(
                f"{who}: K is not symmetric (K(A, A)[{i}, {j}] = {K[i, j]:.17g} but "
                f"[{j}, {i}] = {K[j, i]:.17g}); a kernel must give a symmetric Gram matrix")
    return K
