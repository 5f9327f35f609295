"""Read MNIST-style IDX files (``*-images-idx3-ubyte[.gz]``, ``*-labels-idx1-ubyte[.gz]``).

IDX format: two zero bytes, a type code (``0x08`` = unsigned byte), the number of
dimensions, then one big-endian uint32 per dimension, then the data in C order.
"""
import numpy as np

from ._libsvm import (_BLOCK, _DECOMPRESSION_ERRORS, _open_binary, _raise_corrupt,
                      find_data_file)

__all__ = ["load_mnist_idx"]

_IDX_TYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def _read_idx(name_or_path, what):
    """(path, array) of an IDX file, read as a stream: the header first, then exactly the
    bytes it declares, in blocks (memory is the data actually present, whatever the
    header claims; a file of zeros that decompresses to gigabytes is never read whole)."""
    path = find_data_file(name_or_path)
    try:
        with _open_binary(path) as fh:
            head = fh.read(4)
            if len(head) < 4 or head[0] != 0 or head[1] != 0 or head[2] not in _IDX_TYPES:
                raise ValueError(
                    f"{path}: not an IDX file (bad magic number {head.hex() or 'empty'}); "
                    f"pass the {what} file, e.g. "
                    f"t10k-{what}-idx{3 if what == 'images' else 1}-ubyte.gz"
                )
            ndim = head[3]
            if not 1 <= ndim <= 8:
                # (numpy's own refusal beyond 64 dimensions named neither file nor fix)
                raise ValueError(
                    f"{path}: an IDX header of {ndim} dimensions; {what} files have "
                    f"{3 if what == 'images' else 1} (pass the {what} file)")
            dims = fh.read(4 * ndim)
            if len(dims) < 4 * ndim:
                raise ValueError(f"{path}: truncated IDX header")
            shape = tuple(int(d) for d in np.frombuffer(dims, dtype=">u4", count=ndim))
            dtype = np.dtype(_IDX_TYPES[head[2]])
            count = int(np.prod(shape, dtype=object)) if shape else 1
            need = count * dtype.itemsize
            data = bytearray()  # grows with the data present, not with the claim
            while len(data) < need:
                block = fh.read(min(_BLOCK, need - len(data)))
                if not block:
                    raise ValueError(
                        f"{path}: truncated IDX data ({len(data)} bytes for shape {shape}, "
                        f"{need} expected)"
                    )
                data += block
    except _DECOMPRESSION_ERRORS as exc:
        _raise_corrupt(path, exc)
    return path, np.frombuffer(data, dtype=dtype, count=count).reshape(shape)


def load_mnist_idx(images, labels, scale=True, dtype=np.float64):
    """Load MNIST (or any IDX image/label pair) as a dense matrix and integer labels.

    Parameters
    ----------
    images, labels : str or os.PathLike
        Paths or names of the IDX files (plain or gzip), looked up like
        ``load_libsvm`` does (``$MARGINKIT_DATA``), e.g.
        ``"mnist/t10k-images-idx3-ubyte.gz"``.
    scale : bool, default True
        Divide pixel values by 255 (features in [0, 1]).
    dtype : {numpy.float64, numpy.float32}
        Floating type of ``X``.

    Returns
    -------
    X : ndarray of shape (n_samples, n_rows * n_cols)
        One flattened image per row.
    y : ndarray of int64, shape (n_samples,)

    Raises
    ------
    ValueError
        Not an IDX file, truncated data, or images and labels of different counts.

    Examples
    --------
    >>> from marginkit.datasets import load_mnist_idx
    >>> X, y = load_mnist_idx("mnist/t10k-images-idx3-ubyte.gz",
    ...                       "mnist/t10k-labels-idx1-ubyte.gz")  # doctest: +SKIP
    >>> X.shape, y[:5]  # doctest: +SKIP
    ((10000, 784), array([7, 2, 1, 0, 4]))
    """
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise TypeError(f"dtype={dtype} must be numpy.float32 or numpy.float64")
    ipath, imgs = _read_idx(images, "images")
    lpath, labs = _read_idx(labels, "labels")
    if imgs.ndim < 2:
        raise ValueError(f"{ipath}: expected an images file (3-D IDX), got shape {imgs.shape}")
    if labs.ndim != 1:
        raise ValueError(f"{lpath}: expected a labels file (1-D IDX), got shape {labs.shape}")
    if imgs.shape[0] != labs.shape[0]:
        raise ValueError(
            f"{ipath} has {imgs.shape[0]} images but {lpath} has {labs.shape[0]} labels; "
            "pass matching files"
        )
    if labs.dtype.kind == "f":
        # found by review: float labels were cast silently (0.5 -> 0, NaN -> -2^63)
        whole = np.isfinite(labs) & (labs == np.round(labs)) & (np.abs(labs) < 2.0 ** 62)
        if not whole.all():
            i = int(np.flatnonzero(~whole)[0])
            raise ValueError(f"{lpath}: label {i} is {float(labs[i])!r}, not an integer class "
                             "(a whole number below 2^62); an IDX labels file holds classes")
    if imgs.size == 0:
        raise ValueError(f"{ipath}: the images file holds no pixels (shape {imgs.shape})")
    if imgs.dtype.kind == "f":
        # found by review: NaN and infinite pixels of a float IDX file loaded as they were,
        # and a float64 pixel beyond float32's range became inf with dtype=np.float32
        finite = np.isfinite(imgs)
        if not finite.all():
            i = int(np.flatnonzero(~finite.ravel())[0])
            raise ValueError(f"{ipath}: pixel {i} is {float(imgs.ravel()[i])!r}; the images "
                             "must be finite numbers")
        top = float(np.max(np.abs(imgs)))
        if top > float(np.finfo(dtype).max):
            raise ValueError(f"{ipath}: a pixel of magnitude {top:.6g} overflows {dtype}; "
                             "load with dtype=np.float64")
    X = imgs.reshape(imgs.shape[0], -1).astype(dtype)
    if scale:
        X /= 255.0
    return X, labs.astype(np.int64)
