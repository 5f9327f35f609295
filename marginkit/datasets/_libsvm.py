"""Read LIBSVM / svmlight files (plain, gzip or xz), and the bundled ``heart_scale``.

A line of such a file is ``label index:value index:value ... [# comment]`` with
1-based, strictly increasing feature indices. Files are looked up as given, then in
the folder named by the ``MARGINKIT_DATA`` environment variable (with or without a
``.xz``/``.gz`` suffix), then among the data files shipped with marginkit.

The text is read in blocks and parsed as a stream by a compiled parser
(``_libsvm_fast``), so memory is the output CSR matrix plus one block whatever the file (a NUL
byte, binary data or a line longer than ``MAX_LINE_BYTES`` is refused at once). When the
compiled parser meets anything but the plainest valid spelling, a pure-Python reader
parses the stream again: it names the line of an error, and reads what Python's ``float``
and ``int`` accept that the compiled parser does not (``1_0``, ``+5``), to the same result.
"""
import bz2
import gzip
import lzma
import math
import os
import zlib
from array import array
from pathlib import Path

import numpy as np
import scipy.sparse as sp

__all__ = ["load_libsvm", "load_heart_scale", "find_data_file", "DATA_ENV"]

#: environment variable naming the folder of benchmark data files
DATA_ENV = "MARGINKIT_DATA"
_BUNDLED = Path(__file__).resolve().parent / "data"
_SUFFIXES = ("", ".xz", ".gz", ".bz2")
_MAGIC = {
    "gzip": b"\x1f\x8b",
    "xz": b"\xfd7zXZ\x00",
    "bz2": b"BZh",
}
_EXT_COMPRESSION = {".gz": "gzip", ".xz": "xz", ".bz2": "bz2"}


def find_data_file(name_or_path):
    """Return the ``Path`` of a data file given by path or by name.

    Parameters
    ----------
    name_or_path : str or os.PathLike
        An existing file, or a name looked up in ``$MARGINKIT_DATA`` and then among the
        bundled files, each time as given and with the suffixes ``.xz``, ``.gz``, ``.bz2``.

    Raises
    ------
    FileNotFoundError
        Naming the places searched.
    """
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise TypeError(
            f"name_or_path={name_or_path!r} must be a file path or a data set name (str)"
        )
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return path
    folders = []
    env = os.environ.get(DATA_ENV)
    if env:
        folders.append(Path(env).expanduser())
    folders.append(_BUNDLED)
    if not path.is_absolute():
        for folder in folders:
            for suffix in _SUFFIXES:
                cand = folder / (str(path) + suffix)
                if cand.is_file():
                    return cand
    where = ", ".join(str(f) for f in folders)
    hint = "" if env else f" (set {DATA_ENV} to the folder of your data files)"
    raise FileNotFoundError(
        f"no data file {str(name_or_path)!r}: not a file, and not found with suffixes "
        f"{[s for s in _SUFFIXES if s]} in {where}{hint}"
    )


def _compression_of(path):
    """'gzip', 'xz', 'bz2' or None, from the magic bytes; extension mismatches raise."""
    with open(path, "rb") as fh:
        head = fh.read(6)
    found = None
    for kind, magic in _MAGIC.items():
        if head.startswith(magic):
            found = kind
            break
    expected = _EXT_COMPRESSION.get(path.suffix.lower())
    if expected is not None and found != expected:
        raise ValueError(
            f"{path}: the name ends in {path.suffix!r} but the file is "
            f"{'not compressed' if found is None else found + '-compressed'}; "
            f"rename it or recompress it with {expected}"
        )
    return found


def _open_binary(path):
    kind = _compression_of(path)
    if kind == "gzip":
        return gzip.open(path, "rb")
    if kind == "xz":
        return lzma.open(path, "rb")
    if kind == "bz2":
        return bz2.open(path, "rb")
    return open(path, "rb")


#: errors of the decompressors on corrupt or truncated input (BadGzipFile is an OSError)
_DECOMPRESSION_ERRORS = (EOFError, lzma.LZMAError, zlib.error, OSError)

#: the decompressed text is read in blocks of this many bytes
_BLOCK = 1 << 20
#: the compiled reader parses the text in blocks of about this many bytes
_PARSE_BLOCK = 4 << 20
#: a line longer than this is refused (a dense row of a million features is ~20 MiB)
MAX_LINE_BYTES = 64 << 20
#: the largest feature index (int64 column indices)
_MAX_INDEX = 2**63 - 1


def _raise_corrupt(path, exc):
    if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError)):
        raise exc
    raise ValueError(f"{path}: corrupt or truncated compressed file ({exc})") from None


class _Refused(ValueError):
    """A problem found while reading the text itself (raised through scikit-learn's
    reader unchanged)."""


class _Lines:
    """The lines of a binary stream, read in blocks: memory is one block plus the line
    being assembled, whatever the size of the (decompressed) file.

    A NUL byte (binary data, or a file of zeros) is refused as soon as its block is read,
    and so is a line longer than ``MAX_LINE_BYTES``. Iterating yields the lines as
    ``bytes`` without their newline; ``read`` exists so that scikit-learn's reader takes
    the object for a file (it only iterates).
    """

    def __init__(self, fh, path):
        self.fh = fh
        self.path = path

    def read(self, size=-1):  # pragma: no cover - never called by the readers
        raise OSError("read() is not supported; iterate over the lines")

    def __iter__(self):
        pending, pending_len = [], 0  # pieces of the line not yet ended
        lineno, offset = 1, 0
        while True:
            block = self.fh.read(_BLOCK)
            if not block:
                break
            nul = block.find(b"\0")
            if nul >= 0:
                line = lineno + block.count(b"\n", 0, nul)
                raise _Refused(
                    f"{self.path}, line {line}: not a text file (a NUL byte at offset "
                    f"{offset + nul}); a LIBSVM file is text lines 'label index:value ...'"
                )
            lines = block.split(b"\n")
            tail = lines.pop()
            if lines:
                if pending:
                    pending.append(lines[0])
                    lines[0] = b"".join(pending)
                    pending, pending_len = [], 0
                lineno += len(lines)
                yield from lines
            if tail:
                pending.append(tail)
                pending_len += len(tail)
                if pending_len > MAX_LINE_BYTES:
                    raise _Refused(
                        f"{self.path}, line {lineno}: longer than {MAX_LINE_BYTES >> 20} MiB "
                        "without a newline; not a LIBSVM file (one sample per line)"
                    )
            offset += len(block)
        if pending:
            yield b"".join(pending)


def _text(tok):
    return tok.decode("utf-8", errors="replace")


def _parse_value(tok, what, lineno, path):
    try:
        if b"_" in tok:  # Python's float() reads "1_0" as 10; LIBSVM's strtod does not
            raise ValueError(tok)
        v = float(tok)
    except ValueError:
        raise _Refused(f"{path}, line {lineno}: bad {what} {_text(tok)!r} (expected a number)") from None
    if not math.isfinite(v):
        raise _Refused(f"{path}, line {lineno}: {what} {_text(tok)!r} is not finite")
    return v


def _parse_lines(lines, path, n_features=None, keep=True):
    """Pure-Python streaming reader: errors name the line.

    Returns ``(values, indices, indptr, labels, max_index)`` as ``array.array`` buffers
    (8 bytes per entry: the output CSR's size, no Python object per entry kept), or,
    with ``keep=False``, only checks the text.
    """
    values, indices, indptr, labels = array("d"), array("q"), array("q", [0]), array("d")
    max_index = 0
    for lineno, raw in enumerate(lines, start=1):
        toks = raw.split(b"#", 1)[0].split()
        if not toks:
            continue
        if b":" in toks[0]:
            raise _Refused(
                f"{path}, line {lineno}: missing label (the line starts with {_text(toks[0])!r}); "
                "each line must be 'label index:value ...'"
            )
        label = _parse_value(toks[0], "label", lineno, path)
        prev = 0
        for tok in toks[1:]:
            idx_s, sep, val_s = tok.partition(b":")
            if idx_s == b"qid" and sep:
                if not val_s.isdigit():  # svmlight query id: a non-negative integer
                    raise _Refused(
                        f"{path}, line {lineno}: bad query id {_text(tok)!r} (expected "
                        "qid:<non-negative integer>)"
                    )
                continue  # not a feature
            if not sep or not val_s or not idx_s:
                raise _Refused(
                    f"{path}, line {lineno}: truncated or malformed entry {_text(tok)!r} "
                    "(expected index:value)"
                )
            try:
                if b"_" in idx_s:  # int() reads "1_0" as 10; LIBSVM's strtol does not
                    raise ValueError(idx_s)
                idx = int(idx_s)
            except ValueError:
                raise _Refused(
                    f"{path}, line {lineno}: bad feature index {_text(idx_s)!r} in "
                    f"{_text(tok)!r} (expected a positive integer)"
                ) from None
            if idx <= 0:
                raise _Refused(
                    f"{path}, line {lineno}: feature index {idx} in {_text(tok)!r} is not "
                    "positive; LIBSVM indices start at 1"
                )
            if idx > _MAX_INDEX:
                raise _Refused(
                    f"{path}, line {lineno}: feature index {_text(idx_s)} is too large "
                    "(the largest supported index is 2**63 - 1)"
                )
            if idx <= prev:
                raise _Refused(
                    f"{path}, line {lineno}: feature indices must be strictly increasing "
                    f"({idx} follows {prev})"
                )
            if n_features is not None and idx > n_features:
                raise _Refused(
                    f"{path}, line {lineno}: feature index {idx} exceeds n_features={n_features}"
                )
            prev = idx
            value = _parse_value(val_s, "value", lineno, path)
            if keep:
                values.append(value)
                indices.append(idx - 1)
        max_index = max(max_index, prev)
        if keep:
            labels.append(label)
            indptr.append(len(values))
    return values, indices, indptr, labels, max_index


def _scan(path, n_features, keep):
    """Run the pure-Python reader over the file (streaming, bounded memory)."""
    try:
        with _open_binary(path) as fh:
            return _parse_lines(_Lines(fh, path), path, n_features, keep=keep)
    except _DECOMPRESSION_ERRORS as exc:
        _raise_corrupt(path, exc)


def _load_fallback(path, n_features):
    """The pure-Python reader: a CSR matrix of int64 or int32 indices and the labels."""
    values, indices, indptr, labels, max_index = _scan(path, n_features, keep=True)
    if not labels:
        raise ValueError(f"{path}: no samples (the file has no data lines)")
    n_cols = max_index if n_features is None else n_features
    data = np.frombuffer(values, dtype=np.float64)
    ind, ptr = np.frombuffer(indices, dtype=np.int64), np.frombuffer(indptr, dtype=np.int64)
    if max(n_cols, ind.size) < 2**31 - 1:
        ind, ptr = ind.astype(np.int32), ptr.astype(np.int32)
    X = sp.csr_matrix((len(labels), n_cols), dtype=np.float64)
    # the arrays just parsed are valid canonical CSR: no constructor pass over them
    X.data, X.indices, X.indptr = data, ind, ptr
    X.has_canonical_format = True
    return X, np.frombuffer(labels, dtype=np.float64).copy()


class _Growing:
    """A 1-D array filled block by block: grown in place by ``ndarray.resize`` (for large
    arrays the allocator remaps the pages instead of copying them), so that memory is
    the output plus one block, never a list of blocks and their concatenation."""

    def __init__(self, dtype):
        self.buf = np.empty(1 << 16, dtype=dtype)
        self.size = 0

    def extend(self, values):
        end = self.size + values.size
        if end > self.buf.size:
            if values.dtype.itemsize > self.buf.dtype.itemsize:
                self.buf = self.buf.astype(values.dtype)  # 64-bit indices from here on
            # (numpy zero-fills the new part: a quarter more at a time bounds the excess)
            self.buf.resize(max(end, self.buf.size + self.buf.size // 4), refcheck=False)
        elif values.dtype.itemsize > self.buf.dtype.itemsize:
            self.buf = self.buf.astype(values.dtype)
        self.buf[self.size:end] = values
        self.size = end

    def result(self):
        self.buf.resize(self.size, refcheck=False)
        return self.buf


def _load_compiled(path, n_features, as_float32):
    """The compiled reader (``_libsvm_fast.parse_block``) over the stream, block by block;
    None when it meets anything it does not read (an error, a NUL byte, an unusual
    spelling of a number, an over-long line): the pure-Python reader then decides."""
    from ._libsvm_fast import parse_block

    nf = -1 if n_features is None else n_features
    values = _Growing(np.float32 if as_float32 else np.float64)
    indices, counts, labels = _Growing(np.int32), _Growing(np.int64), _Growing(np.float64)
    max_index = 0

    def take(text):
        nonlocal max_index
        ok, vals, inds, cnts, labs, top = parse_block(text, nf, as_float32)
        if ok:
            values.extend(vals)
            # 32-bit column indices while they fit
            indices.extend(inds.astype(np.int32) if top < 2**31 - 1 else inds)
            counts.extend(cnts)
            labels.extend(labs)
            max_index = max(max_index, top)
        return ok

    pending = []  # the pieces of an unfinished line
    try:
        with _open_binary(path) as fh:
            while True:
                block = fh.read(_PARSE_BLOCK)
                if not block:
                    break
                if b"\0" in block:
                    return None
                cut = block.rfind(b"\n")
                if cut < 0:
                    pending.append(block)
                    if sum(map(len, pending)) > MAX_LINE_BYTES:
                        return None
                    continue
                text = b"".join(pending + [block[:cut + 1]])
                pending = [block[cut + 1:]]
                if not take(text):
                    return None
            if any(pending) and not take(b"".join(pending)):
                return None
    except _DECOMPRESSION_ERRORS as exc:
        _raise_corrupt(path, exc)
    if counts.size == 0:
        return None  # no samples: the pure-Python reader says so
    n_cols = max_index if n_features is None else n_features
    counts = counts.result()
    indptr = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    indices = indices.result()
    if max(n_cols, indices.size) < 2**31 - 1:
        indptr = indptr.astype(np.int32)
    else:
        indices = indices.astype(np.int64, copy=False)
    X = sp.csr_matrix((counts.size, n_cols), dtype=values.buf.dtype)
    # strictly increasing indices per row, checked by the parser: canonical CSR
    X.data, X.indices, X.indptr = values.result(), indices, indptr
    X.has_canonical_format = True
    return X, labels.result()


def load_libsvm(name_or_path, n_features=None, dtype=np.float64):
    """Load a LIBSVM / svmlight file as a CSR matrix and its labels.

    Parameters
    ----------
    name_or_path : str or os.PathLike
        A path to a plain, ``.gz``, ``.xz`` (or ``.bz2``) file, or a data set name looked
        up in the folder ``$MARGINKIT_DATA`` (``"a9a"`` finds ``a9a.xz``) and then among
        the files bundled with marginkit (``"heart_scale"``). Compression is detected
        from the file's content; a suffix that contradicts it is an error.
    n_features : int, optional
        Number of columns; needed when a test file lacks the highest features of its
        training file (``load_libsvm("a9a.t", n_features=123)``). Indices above it are
        an error.
    dtype : {numpy.float64, numpy.float32}
        The dtype of ``X.data`` (float32 halves the values' memory; each value is read
        into float64, then rounded to float32; a value beyond float32's range is an error).

    Returns
    -------
    X : scipy.sparse.csr_matrix of ``dtype``, shape (n_samples, n_features)
        Canonical CSR (sorted, unique indices); never densified. Column indices are
        int32 when they fit, int64 otherwise (feature indices up to 2**63 - 1 are read).
    y : ndarray of float64, shape (n_samples,)
        The labels as written in the file (e.g. ``-1/+1``, ``0/1`` or ``2/4``).

    Raises
    ------
    FileNotFoundError
        The file or name was not found (the message lists where it was searched).
    ValueError
        Malformed content, with the file and line number: non-numeric tokens, zero or
        negative indices, decreasing indices, truncated ``index:`` entries, a NUL byte
        (binary data), a line longer than ``MAX_LINE_BYTES`` (64 MiB), or a compressed
        file that is corrupt or does not match its suffix. The text is parsed as a
        stream: memory stays a small multiple of the returned matrix.

    Examples
    --------
    >>> from marginkit.datasets import load_libsvm
    >>> X, y = load_libsvm("heart_scale")
    >>> X.shape, sorted(set(y.tolist()))
    ((270, 13), [-1.0, 1.0])
    """
    if n_features is not None:
        if isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)):
            raise TypeError(f"n_features={n_features!r} must be None or a positive int")
        if n_features < 1:
            raise ValueError(f"n_features={n_features} must be >= 1")
        if n_features > np.iinfo(np.int64).max:
            # found by review: 2**70 raised OverflowError inside the compiled parser
            raise ValueError(f"n_features={n_features} is beyond the largest column index a "
                             f"sparse matrix can hold ({np.iinfo(np.int64).max}); pass the "
                             "number of columns of the training data")
        n_features = int(n_features)
    try:
        as_float32 = np.dtype(dtype) == np.float32
        ok = as_float32 or np.dtype(dtype) == np.float64
    except TypeError:
        ok = False
    if not ok:
        raise ValueError(f"dtype={dtype!r} must be numpy.float64 or numpy.float32")
    path = find_data_file(name_or_path)
    try:
        found = _load_compiled(path, n_features, as_float32)
        if found is None:
            X, y = _load_fallback(path, n_features)
            if as_float32:
                X = X.astype(np.float32)
            found = X, y
    except _Refused as exc:
        raise ValueError(str(exc)) from None
    X = found[0]
    if as_float32 and not np.isfinite(X.data).all():
        k = int(np.flatnonzero(~np.isfinite(X.data))[0])
        row = int(np.searchsorted(X.indptr, k, side="right")) - 1
        raise ValueError(
            f"{path}: the value of feature {int(X.indices[k]) + 1} in sample {row} (0-based) "
            "overflows float32; load with dtype=np.float64 or rescale the file")
    return found


def load_heart_scale():
    """LIBSVM's ``heart_scale`` (270 samples, 13 features scaled to [-1, 1], labels -1/+1).

    The copy shipped with LIBSVM, bundled with marginkit (no download, no environment).

    Returns
    -------
    X : scipy.sparse.csr_matrix of float64, shape (270, 13)
    y : ndarray of float64, shape (270,)

    Examples
    --------
    >>> from marginkit.datasets import load_heart_scale
    >>> X, y = load_heart_scale()
    >>> X.shape, int((y == 1).sum())
    ((270, 13), 120)
    """
    return load_libsvm(_BUNDLED / "heart_scale", n_features=13)
