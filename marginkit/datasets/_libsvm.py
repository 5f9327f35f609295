"""Read LIBSVM / svmlight files (plain, gzip or xz), and the bundled ``heart_scale``.

A line of such a file is ``label index:value index:value ... [# comment]`` with
1-based, strictly increasing feature indices. Files are looked up as given, then in
the folder named by the ``MARGINKIT_DATA`` environment variable (with or without a
``.xz``/``.gz`` suffix), then among the data files shipped with marginkit.

scikit-learn's compiled reader is used when it is installed (it is an optional
dependency); otherwise, and to explain any error it reports, a pure-Python reader
parses the file and names the offending line.
"""
import bz2
import gzip
import lzma
import os
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


def _read_bytes(path):
    try:
        with _open_binary(path) as fh:
            return fh.read()
    except (EOFError, lzma.LZMAError, OSError, gzip.BadGzipFile) as exc:
        if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError)):
            raise
        raise ValueError(f"{path}: corrupt or truncated compressed file ({exc})") from None


def _parse_value(tok, what, lineno, path):
    try:
        v = float(tok)
    except ValueError:
        raise ValueError(f"{path}, line {lineno}: bad {what} {tok!r} (expected a number)") from None
    if not np.isfinite(v):
        raise ValueError(f"{path}, line {lineno}: {what} {tok!r} is not finite")
    return v


def _parse_libsvm(data, path, n_features=None):
    """Pure-Python reader: (data, indices, indptr, labels, max_index); errors name the line."""
    values, indices, indptr, labels = [], [], [0], []
    max_index = 0
    text = data.decode("utf-8", errors="strict") if isinstance(data, bytes) else data
    lines = text.split("\n")
    # a file whose last line lacks the newline is fine; a line cut inside a token is not
    for lineno, raw in enumerate(lines, start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        toks = line.split()
        if ":" in toks[0]:
            raise ValueError(
                f"{path}, line {lineno}: missing label (the line starts with {toks[0]!r}); "
                "each line must be 'label index:value ...'"
            )
        labels.append(_parse_value(toks[0], "label", lineno, path))
        prev = 0
        for tok in toks[1:]:
            idx_s, sep, val_s = tok.partition(":")
            if idx_s == "qid" and sep:
                continue  # svmlight query id: not a feature
            if not sep or not val_s or not idx_s:
                raise ValueError(
                    f"{path}, line {lineno}: truncated or malformed entry {tok!r} "
                    "(expected index:value)"
                )
            try:
                idx = int(idx_s)
            except ValueError:
                raise ValueError(
                    f"{path}, line {lineno}: bad feature index {idx_s!r} in {tok!r} "
                    "(expected a positive integer)"
                ) from None
            if idx <= 0:
                raise ValueError(
                    f"{path}, line {lineno}: feature index {idx} in {tok!r} is not positive; "
                    "LIBSVM indices start at 1"
                )
            if idx <= prev:
                raise ValueError(
                    f"{path}, line {lineno}: feature indices must be strictly increasing "
                    f"({idx} follows {prev})"
                )
            if n_features is not None and idx > n_features:
                raise ValueError(
                    f"{path}, line {lineno}: feature index {idx} exceeds n_features={n_features}"
                )
            prev = idx
            values.append(_parse_value(val_s, "value", lineno, path))
            indices.append(idx - 1)
        max_index = max(max_index, prev)
        indptr.append(len(values))
    return values, indices, indptr, labels, max_index


def _load_fallback(path, n_features):
    raw = _read_bytes(path)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        lineno = raw[: exc.start].count(b"\n") + 1
        raise ValueError(
            f"{path}, line {lineno}: not a text file (undecodable byte); is it compressed "
            "with a format other than gzip, xz or bz2?"
        ) from None
    values, indices, indptr, labels, max_index = _parse_libsvm(raw, path, n_features)
    if not labels:
        raise ValueError(f"{path}: no samples (the file has no data lines)")
    n_cols = max_index if n_features is None else n_features
    index_dtype = np.int32 if max(n_cols, len(values)) < 2**31 - 1 else np.int64
    X = sp.csr_matrix(
        (np.asarray(values, dtype=np.float64), np.asarray(indices, dtype=index_dtype),
         np.asarray(indptr, dtype=index_dtype)),
        shape=(len(labels), n_cols),
    )
    return X, np.asarray(labels, dtype=np.float64)


def _load_sklearn(path, n_features):
    from sklearn.datasets import load_svmlight_file

    with _open_binary(path) as fh:
        X, y = load_svmlight_file(fh, n_features=n_features, dtype=np.float64, zero_based=False)
    return X, y


def load_libsvm(name_or_path, n_features=None):
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

    Returns
    -------
    X : scipy.sparse.csr_matrix of float64, shape (n_samples, n_features)
        Canonical CSR (sorted, unique indices); never densified.
    y : ndarray of float64, shape (n_samples,)
        The labels as written in the file (e.g. ``-1/+1``, ``0/1`` or ``2/4``).

    Raises
    ------
    FileNotFoundError
        The file or name was not found (the message lists where it was searched).
    ValueError
        Malformed content, with the file and line number: non-numeric tokens, zero or
        negative indices, decreasing indices, truncated ``index:`` entries, or a
        compressed file that is corrupt or does not match its suffix.

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
        n_features = int(n_features)
    path = find_data_file(name_or_path)
    try:
        import sklearn.datasets  # noqa: F401
    except ImportError:
        return _load_fallback(path, n_features)
    try:
        X, y = _load_sklearn(path, n_features)
    except (ValueError, EOFError, lzma.LZMAError, OSError, UnicodeDecodeError) as exc:
        if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError)):
            raise
        # the pure-Python reader names the line; if it accepts the file, report sklearn's error
        _load_fallback(path, n_features)
        raise ValueError(f"{path}: {exc}") from None
    if X.shape[0] == 0:
        raise ValueError(f"{path}: no samples (the file has no data lines)")
    if not (np.isfinite(X.data).all() and np.isfinite(y).all()):
        # scikit-learn's reader accepts 'nan'/'inf'; the pure-Python one names the line
        _load_fallback(path, n_features)
        raise ValueError(f"{path}: contains NaN or infinite values")
    X = sp.csr_matrix(X)
    if not X.has_canonical_format:
        X.sum_duplicates()
    return X, np.asarray(y, dtype=np.float64)


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
