"""Results files: ``Result.save`` and ``load_result`` (npz archive + JSON header, no pickle).

A results file is a zip archive of ``.npy`` members (``numpy.savez_compressed``): one
member ``__meta__`` holding the JSON header, and one member per array the header declares.

The header is ``{"__result__": 3, "fields": {field: node}}`` with one entry per field of
``Result`` and nodes of these kinds only::

    null, true/false, numbers, strings
    {"__float__": "nan" | "inf" | "-inf"}
    {"__array__": key, "dtype": "<f8", "shape": [n]}          (member ``key.npy``)
    {"__csr__": {"data": array, "indices": array, "indptr": array}, "shape": [n, d]}
    {"__seq__": [node, ...], "tuple": bool}
    {"__dict__": {name: node, ...}}
    {"__plugin__": [kind, registered name], "params": {"__dict__": ...},
     "fit": {"__dict__": ...}}                                  ("fit": optional)
    {"__certificate__": registered type, "fields": {constructor parameter: node}}
    {"__config__": {Config field: node}}

Loading an untrusted file is safe by construction:

* nothing is unpickled (``allow_pickle=False``) and no name in the file is resolved to
  code: plug-ins are looked up by their *registered* name and built with parameters their
  own table validates; certificates only of registered types, through their constructor,
  with their declared fields (typed and shape-checked); a ``Config`` through its own
  validation. Dict keys are data: only the fields of ``Result`` are set on the result, so
  a file cannot replace ``predict``, ``score``, ``decision_function`` or a
  certificate's ``verify``;
* sizes are checked before anything is read: the header member is at most
  ``MAX_HEADER_BYTES``; every array member must have exactly the size its dtype and shape
  imply and match what the header declares; members are read one at a time, each at most
  once, and their total is at most ``max_bytes``; members the header does not declare
  are refused without being read; nesting is limited to ``MAX_DEPTH`` levels;
* a sparse ``support_`` (or any CSR in the file) goes through the structural check of
  ``marginkit._validation.checked_csr`` before anything uses it;
* the archive starts at the first byte of the file (``open_archive``), and whatever the
  zip, zlib and ``.npy`` layers raise on a damaged member is a refusal naming it;
* what ``predict`` reads agrees with itself (``_Loader._check_model``): two distinct
  labels for a classifier, finite coefficients, support rows and their coefficients, and
  coefficients on a fitted feature map as many as the map has features.

Every refusal is a ``ValueError`` naming the file, the place in the header
(``r.certificate.fields.alpha``) and the problem.

A plug-in's ``"fit"`` holds the free choices of a fitted kernel approximation
(``saved_fit``: ``rff``'s ``seed_``, Nystroem's centres); ``load_result`` hands it to the
plug-in's ``restore_fit``, which checks every entry and recomputes the rest of the fit
within what is left of ``max_bytes``. Version 2 headers (plug-ins without their fit) are
still read.

Files of the first format (``{"__dict__": ...}`` headers whose arrays carry no dtype or
shape) are still read, under the same rules; their arrays are checked against the
``.npy`` headers of their members.
"""
import inspect
import io
import json
import math
import numbers
import os
import stat
import tokenize
import zipfile
import zlib

import numpy as np
import scipy.sparse as sp

__all__ = ["save_fields", "load_fields", "read_fields", "MAX_HEADER_BYTES", "MAX_BYTES",
           "MAX_DEPTH", "ARCHIVE_ERRORS", "open_archive"]

VERSION = 5
#: header versions read (2: plug-ins without their fit; 3: certificates that do not hold
#: the model the result predicts with (a kernel expansion or a separator: loaded with a
#: warning); 4: iterated Tikhonov's certificates of kernel models do not either; 1: see
#: the module docstring)
_VERSIONS = (2, 3, 4, 5)
#: largest JSON header accepted (a saved result's header is a few KiB)
MAX_HEADER_BYTES = 4 << 20
#: default limit on the total size of the arrays of one file (``load_result(max_bytes=)``)
MAX_BYTES = 1 << 30
#: deepest nesting of JSON containers accepted in a header
MAX_DEPTH = 64
#: dtype kinds an array member may have: bool, integers, floats, unicode strings (labels)
_ARRAY_KINDS = frozenset("biufU")
_GENERATORS = (np.random.Generator, np.random.RandomState)
_MAX_NDIM = 3
_NPY_HEADER_LIMIT = 10000
_READ_BLOCK = 16 << 20
_NPY_READERS = {(1, 0): np.lib.format.read_array_header_1_0,
                (2, 0): np.lib.format.read_array_header_2_0}
#: what the zip and zlib layers raise on a damaged archive: a member that does not
#: decompress or checksum, a local header that disagrees with the directory, a field out
#: of range, a feature ``zipfile`` does not implement (encryption, a newer zip version)
ARCHIVE_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError,
                  NotImplementedError, RuntimeError)


#: what a plug-in, certificate or Config constructor raises on values it refuses (an
#: integer beyond float64's range is an OverflowError of ``float``)
_CONSTRUCTOR_ERRORS = (TypeError, ValueError, OverflowError)


def _one_line(exc):
    """``exc`` as one line of a message: its type and its first line."""
    kind = type(exc)
    name = kind.__qualname__ if kind.__module__ == "builtins" else \
        f"{kind.__module__}.{kind.__qualname__}"
    text = str(exc).strip().splitlines()
    return f"{name}: {text[0]}" if text else name


def open_archive(path):
    """``zipfile.ZipFile(path)``, refused (``zipfile.BadZipFile``) unless the archive
    starts at the first byte of the file, as every archive marginkit writes does.

    ``zipfile`` finds an archive by its last end record and accepts bytes before it: a
    file cut short after a member that is itself an archive (a one-vs-rest model is a
    zip of results files) would read as that member, a valid file of other content."""
    zf = zipfile.ZipFile(path)
    start = min((info.header_offset for info in zf.infolist()), default=0)
    if start != 0:
        zf.close()
        raise zipfile.BadZipFile(f"its zip archive starts at byte {start}, not at the start "
                                 "of the file (a file cut short, or bytes before the archive)")
    return zf


class _Refusal(ValueError):
    """A problem at a place of the header; ``load_result`` adds the file name."""

    def __init__(self, where, problem):
        super().__init__(f"{where}: {problem}")


class _NotOurs(ValueError):
    """The archive is not a results file at all (its message is complete)."""


# ============================================================================ saving
def _check_writable(path):
    """``ValueError`` for a path that exists and is not a regular file (a FIFO, where the
    write would block until a reader comes; a directory; a device), as ``load_result`` and
    the CLI refuse them (found by review: ``save`` to a FIFO blocked)."""
    import os
    import stat

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except (OSError, TypeError, ValueError):
        return  # open() reports it
    if not stat.S_ISREG(mode):
        raise ValueError(f"{path} is not a regular file (a directory, a device or a FIFO); "
                         "save the result to a file")


def save_fields(fields, path):
    """Write a result's ``fields`` (field name -> value, every field of ``Result``) to
    ``path`` (``Result.save``)."""
    arrays = {}
    enc = _Encoder(arrays)
    fields = {name: enc.node(value, f"r.{name}") for name, value in fields.items()}
    header = json.dumps({"__result__": VERSION, "fields": fields}, allow_nan=False).encode()
    buf = io.BytesIO()
    np.savez_compressed(buf, __meta__=np.frombuffer(header, dtype=np.uint8), **arrays)
    _check_writable(path)
    with open(path, "wb") as fh:
        fh.write(buf.getvalue())


class _Encoder:
    def __init__(self, arrays):
        self.arrays = arrays

    def array(self, arr, where):
        if arr.dtype.kind == "O" and arr.size and all(isinstance(v, str) for v in arr.flat):
            # strings in an object array (pandas' labels; found by review: such a fit
            # could not be saved) are stored as a unicode array, read back as one
            arr = arr.astype(str)
        if arr.dtype.kind not in _ARRAY_KINDS:
            raise TypeError(f"cannot save {where}: arrays of dtype {arr.dtype} need pickle "
                            "(object arrays or custom objects); use pickle for this result")
        key = f"a{len(self.arrays)}"
        self.arrays[key] = arr
        return {"__array__": key, "dtype": arr.dtype.str, "shape": list(arr.shape)}

    def node(self, obj, where):
        from . import plugins
        from ._config import Config
        from .certificates import CERTIFICATE_TYPES, Certificate

        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, (int, np.integer)):
            return int(obj)
        if isinstance(obj, (float, np.floating)):
            f = float(obj)
            return f if math.isfinite(f) else {"__float__": repr(f)}
        if isinstance(obj, np.ndarray):
            return self.array(obj, where)
        if sp.issparse(obj):
            c = obj.tocsr()
            return {"__csr__": {part: self.array(np.asarray(getattr(c, part)), f"{where}.{part}")
                                for part in ("data", "indices", "indptr")},
                    "shape": list(c.shape)}
        if isinstance(obj, (list, tuple)):
            return {"__seq__": [self.node(v, f"{where}[{i}]") for i, v in enumerate(obj)],
                    "tuple": isinstance(obj, tuple)}
        if isinstance(obj, dict):
            return {"__dict__": {str(k): self.node(v, f"{where}.{k}") for k, v in obj.items()}}
        if isinstance(obj, Config):
            return {"__config__": self.config(obj, where)}
        if isinstance(obj, plugins.Plugin):
            if obj.name is None:
                raise TypeError(f"cannot save {where}: {obj!r} is not a registered plug-in "
                                "(register it, or use pickle for this result)")
            params = dict(obj.params)
            fit = obj.saved_fit() if callable(getattr(obj, "saved_fit", None)) else None
            if isinstance(params.get("random_state"), _GENERATORS):
                params["random_state"] = None  # a Generator's state is not data
            node = {"__plugin__": [obj.kind, _class_name(obj)],
                    "params": self.node(params, f"{where}.params")}
            if fit is not None:
                node["fit"] = self.node(dict(fit), f"{where}.fit")
            return node
        if isinstance(obj, Certificate):
            name = type(obj).__name__
            if CERTIFICATE_TYPES.get(name) is not type(obj):
                raise TypeError(f"cannot save certificate {name}: decorate it with "
                                "@certificate_type")
            fields = {}
            for param in _declared_fields(type(obj)):
                if not hasattr(obj, param):
                    raise TypeError(f"cannot save certificate {name}: its constructor "
                                    f"parameter {param!r} is not one of its attributes")
                fields[param] = self.node(getattr(obj, param), f"{where}.{param}")
            return {"__certificate__": name, "fields": fields}
        raise TypeError(
            f"cannot save {where}: {type(obj).__name__} cannot be stored without pickle "
            "(callable kernels or custom objects); use pickle for this result"
        )

    def config(self, cfg, where):
        out = {}
        for name in _config_fields():
            v = getattr(cfg, name)
            if name == "callback" or (name == "random_state" and not (v is None or isinstance(v, int))):
                v = None  # a function or a Generator's state is not data: not stored
            elif name == "kernel_params" and isinstance(v, dict) \
                    and isinstance(v.get("random_state"), _GENERATORS):
                v = {**v, "random_state": None}  # as a kernel's own (see the plug-ins)
            elif name in ("solver", "kernel", "smoother") and isinstance(v, str):
                # a name registered for an instance is stored as that instance (its class
                # and parameters): the name alone meant another plug-in in a process where
                # it is registered otherwise (found by review: an rbf instance of gamma=100
                # registered over "rbf" loaded as the built-in rbf, and verify was False)
                v = _registered_instance(name, v)
            if name in ("solver", "kernel", "smoother") and not (v is None or isinstance(v, str)):
                if getattr(v, "name", None) is None:
                    raise TypeError(f"cannot save {where}.{name}: {v!r} is not a registered "
                                    "plug-in (register it, or use pickle for this result)")
            out[name] = self.node(v, f"{where}.{name}")
        return out


def _class_name(obj):
    """The name a plug-in instance is saved under: its class's registered name when the
    registry resolves that name to the class itself (an instance registered under a name
    of its own is then rebuilt from the class and its parameters, in any process: found by
    review, a file with an instance's name and parameters was refused where the name is
    the instance), else the instance's own name."""
    from ._registry import get_plugin

    cls_name = getattr(type(obj), "name", None)
    if isinstance(cls_name, str) and cls_name != obj.name:
        try:
            if get_plugin(obj.kind, cls_name) is type(obj):
                return cls_name
        except ValueError:
            pass
    return obj.name


def _same_param(a, b):
    """Two parameter values equal (plug-ins by class and parameters)."""
    from .certificates import _same_value

    return _same_value(a, b)


def _registered_instance(kind, name):
    """The plug-in instance registered under ``name``, or ``name`` itself (a class, an
    unknown name, a callable)."""
    from ._registry import get_plugin
    from .plugins import Plugin

    try:
        obj = get_plugin(kind, name)
    except ValueError:
        return name
    return obj if isinstance(obj, Plugin) else name


def _config_fields():
    import dataclasses

    from ._config import Config

    return [f.name for f in dataclasses.fields(Config)]


# ============================================================================ loading
def load_fields(path, names, max_bytes=MAX_BYTES):
    """The fields (a dict) of a result stored by ``Result.save``, read safely from
    untrusted files: ``names`` are the fields a ``Result`` has (any other is refused),
    ``max_bytes`` the limit on the total size of the file's arrays. The exceptions are
    those of ``marginkit.load_result``, which builds the ``Result``."""
    return read_fields(path, names, max_bytes)[0]


def read_fields(path, names, max_bytes=MAX_BYTES):
    """``load_fields``, how much of ``max_bytes`` the file used (its arrays and what its
    kernels' fits recompute: a model file of several results shares one limit), and the
    file's format version (1 for the first format)."""
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, numbers.Integral):
        raise TypeError(f"max_bytes={max_bytes!r} must be an int >= 0 (bytes)")
    if max_bytes < 0:  # the right type, a value out of range: ValueError, as numpy's
        raise ValueError(f"max_bytes={max_bytes!r} must be >= 0 (bytes)")
    if isinstance(path, os.PathLike):
        path = os.fspath(path)  # named as the string it is in messages
    if isinstance(path, (str, bytes)) and os.path.exists(path) and not os.path.isdir(path) \
            and not stat.S_ISREG(os.stat(path).st_mode):
        # a pipe or a device: opening or reading it could block or never end
        raise ValueError(f"{path!r} is not a file written by Result.save (not a regular file)")
    try:
        zf = open_archive(path)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except (TypeError, AttributeError) as exc:
        # a file object that cannot be read as bytes (text mode, closed, no seek)
        raise ValueError(f"{path!r} is not a file written by Result.save: a binary file "
                         f"object open for reading is needed ({_one_line(exc)})") from None
    except (ValueError,) + ARCHIVE_ERRORS as exc:
        kind = "a single array, not an npz archive" if _is_npy(path) else _one_line(exc)
        raise ValueError(f"{path!r} is not a file written by Result.save ({kind})") from None
    try:
        with zf:
            loader = _Loader(zf, path, int(max_bytes), tuple(names))
            fields = loader.fields()
            return fields, loader.max_bytes - loader.budget, loader.version
    except _NotOurs as exc:
        raise ValueError(str(exc)) from None
    except _Refusal as exc:
        raise ValueError(f"{path!r}: corrupt Result.save header: {exc}") from None
    except ValueError as exc:
        raise ValueError(f"{path!r}: {exc}") from None
    except ARCHIVE_ERRORS + (KeyError, TypeError, OverflowError) as exc:
        # data no check above foresaw (members are read by _read_npy, which names them)
        raise ValueError(f"{path!r}: unreadable Result.save file ({_one_line(exc)})") from None


def _is_npy(path):
    """Whether ``path`` (a file name, or a binary file object read from its start) begins
    as a .npy file."""
    try:
        if hasattr(path, "read"):  # a file object (found by review: open() of it raised)
            path.seek(0)
            return path.read(6) == b"\x93NUMPY"
        with open(path, "rb") as fh:
            return fh.read(6) == b"\x93NUMPY"
    except (OSError, TypeError, ValueError, AttributeError):
        return False


def _depth_exceeds(obj, limit):
    """Whether parsed JSON nests containers deeper than ``limit`` (iterative walk)."""
    stack = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


class _Loader:
    def __init__(self, zf, path, max_bytes, names):
        self.zf = zf
        self.path = path
        self.names = names
        self.budget = max_bytes
        self.max_bytes = max_bytes
        infos = zf.infolist()
        self.members = {}
        for info in infos:
            if info.filename in self.members:
                raise _NotOurs(f"{path!r} is not a file written by Result.save (member "
                               f"{info.filename!r} appears twice)")
            self.members[info.filename] = info
        self.used = set()
        self.version = None
        self.dims = None

    # ------------------------------------------------------------------ members
    def _read_npy(self, name, where, want_dtype=None, want_shape=None, header=False):
        """The array of member ``name``: sizes checked before its data is read.

        Array members count against ``max_bytes``; the header member (``header=True``)
        against ``MAX_HEADER_BYTES``.
        """
        info = self.members.get(name)
        if info is None:
            raise _Refusal(where, f"names the array member {name!r}, which the file lacks")
        if name in self.used:
            raise _Refusal(where, f"refers to the array member {name!r} a second time")
        self.used.add(name)
        limit = MAX_HEADER_BYTES if header else self.budget
        if want_dtype is not None:  # what the header declares: refused before opening
            declared = want_dtype.itemsize * math.prod(want_shape)
            if declared > limit:
                raise _Refusal(where, self._too_big(declared, limit))
        if info.file_size > limit + _NPY_HEADER_LIMIT + 128:
            raise _Refusal(where, f"the member {name!r} holds {info.file_size} bytes, more "
                                  f"than the limit ({self._limit_text(limit)})")
        try:
            with self.zf.open(info) as fp:
                shape, fortran, dtype = self._npy_header(fp, name, where)
                if want_dtype is not None and (dtype != want_dtype or shape != want_shape):
                    raise _Refusal(where, f"the member {name!r} holds {dtype.str} {shape} but "
                                          f"the header declares {want_dtype.str} {want_shape}")
                nbytes = dtype.itemsize * math.prod(shape)
                if nbytes > limit:
                    raise _Refusal(where, self._too_big(nbytes, limit))
                if info.file_size != fp.tell() + nbytes:
                    raise _Refusal(where, f"the member {name!r} has {info.file_size} bytes, "
                                          f"but its .npy header implies {fp.tell() + nbytes}")
                if not header:
                    self.budget -= nbytes
                count = math.prod(shape)
                arr = np.empty(count, dtype=dtype)
                view = memoryview(arr.view(np.uint8)) if count else memoryview(b"")
                pos = 0
                while pos < nbytes:  # in pieces: no second copy of a large member
                    got = fp.readinto(view[pos:pos + _READ_BLOCK])
                    if not got:
                        raise _Refusal(where, f"the member {name!r} is truncated")
                    pos += got
        except ARCHIVE_ERRORS as exc:  # the zip or zlib layer: the member is damaged
            raise _Refusal(where, f"the member {name!r} cannot be read from the archive "
                                  f"({_one_line(exc)})") from None
        order = "F" if fortran else "C"
        return arr.reshape(shape, order=order)

    def _npy_header(self, fp, name, where):
        """Shape, Fortran order and dtype of the ``.npy`` member open in ``fp``, checked."""
        try:
            version = np.lib.format.read_magic(fp)
            read = _NPY_READERS.get(version)
            if read is None:
                raise _Refusal(where, f"the member {name!r} has .npy format version {version}")
            shape, fortran, dtype = read(fp, max_header_size=_NPY_HEADER_LIMIT)
        except (ValueError, TypeError, SyntaxError, RecursionError, tokenize.TokenError) as exc:
            if isinstance(exc, _Refusal):
                raise
            # numpy's header parser raises all of these on a damaged header
            raise _Refusal(where, f"the member {name!r} has no valid .npy header "
                                  f"({_one_line(exc)})") from None
        self._check_dtype(dtype, where)
        if len(shape) > _MAX_NDIM or any(s < 0 for s in shape):
            raise _Refusal(where, f"the member {name!r} has the shape {shape} (at most "
                                  f"{_MAX_NDIM} dimensions, none negative)")
        return tuple(int(s) for s in shape), fortran, dtype

    def _too_big(self, nbytes, limit):
        return (f"an array of {nbytes} bytes exceeds the limit ({self._limit_text(limit)}); "
                "pass a larger max_bytes to load_result if you trust the file")

    def _limit_text(self, limit):
        if self.version is None:
            return f"{MAX_HEADER_BYTES} bytes for the header"
        return f"{limit} bytes of max_bytes={self.max_bytes} left"

    def _check_dtype(self, dtype, where):
        if dtype.kind not in _ARRAY_KINDS or dtype.hasobject or dtype.names is not None \
                or dtype.subdtype is not None:
            raise _Refusal(where, f"arrays of dtype {dtype} are not accepted (numbers, bools "
                                  "or strings only; nothing that needs pickle)")

    # ------------------------------------------------------------------ header
    def fields(self):
        if "__meta__.npy" not in self.members:
            if "one_vs_rest.json" in self.members:
                raise _NotOurs(f"{self.path!r} is not a file written by Result.save: it is a "
                               "one-vs-rest model of 'marginkit fit -m' (more than two "
                               "classes); read it with marginkit.load_model(path)")
            raise _NotOurs(f"{self.path!r} is not a file written by Result.save (no header)")
        raw = self._read_npy("__meta__.npy", "the header", header=True)
        if raw.dtype != np.uint8 or raw.ndim != 1:
            raise _Refusal("the header", f"is a {raw.dtype} array of shape {raw.shape}, not bytes")
        try:
            meta = json.loads(raw.tobytes().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise _Refusal("the header", f"is not JSON ({type(exc).__name__}: {exc})") from None
        except RecursionError:  # deeper than the parser's own limit (~1000 levels)
            meta = None
        if meta is None or _depth_exceeds(meta, MAX_DEPTH):
            raise _Refusal("the header", f"nests containers deeper than {MAX_DEPTH} levels")
        if isinstance(meta, dict) and "__result__" in meta:
            version = meta["__result__"]
            if set(meta) != {"__result__", "fields"} or type(version) is not int \
                    or version not in _VERSIONS or not isinstance(meta["fields"], dict):
                raise _Refusal("the header", f"is not a Result.save header of a version "
                                             f"this marginkit reads {list(_VERSIONS)}")
            self.version = version
            given = meta["fields"]
        elif isinstance(meta, dict) and set(meta) == {"__dict__"} and isinstance(meta["__dict__"], dict):
            self.version = 1
            given = meta["__dict__"]
        else:
            raise _Refusal("the header", "is not a Result.save header")
        unknown = sorted(set(given) - set(self.names))
        if unknown:
            raise _Refusal("r", f"unknown field(s) {unknown[:5]}; a Result has {list(self.names)}")
        self.dims = {}
        fields = {name: _RESULT_FIELDS[name](self, given[name], f"r.{name}") for name in given}
        self._check_model(fields)
        unused = sorted(set(self.members) - self.used)
        if unused:
            raise _NotOurs(f"{self.path!r} is not a file written by Result.save (member "
                           f"{unused[0]!r} is not an array the header declares)")
        return fields

    def _check_model(self, fields):
        """What ``predict`` reads agrees with itself: the support and its coefficients, two
        distinct labels for a classifier, finite parameters, and coefficients on a kernel's
        fitted feature map as many as the map has features. (Each field alone is checked
        by its spec; a file consistent in itself but edited is not a damaged file.)"""
        support, coef = fields.get("support_"), fields.get("support_coef_")
        if support is not None and coef is not None and support.shape[0] != coef.shape[0]:
            raise _Refusal("r.support_", f"has {support.shape[0]} rows but support_coef_ has "
                                         f"{coef.shape[0]} entries")
        if coef is not None and fields.get("coef_") is None and fields.get("kernel") is None:
            raise _Refusal("r.kernel", "is missing: support_coef_ are the coefficients of "
                                       "kernel values, and no kernel is stored")
        if coef is not None and support is None and fields.get("coef_") is None and \
                not getattr(fields.get("kernel"), "precomputed", True) and \
                (fields.get("extra") or {}).get("feature_space_coef") is None:
            raise _Refusal("r.support_", "is missing: support_coef_ are the coefficients of "
                                         "kernel values on rows the file does not hold (only "
                                         "kernel='precomputed' takes K(X_new, X_train) instead)")
        classes = fields.get("classes_")
        if classes is not None and fields.get("task") != "regression" and (
                classes.shape != (2,) or classes[0] == classes[1]
                or (classes.dtype.kind == "f" and not np.isfinite(classes).all())):
            raise _Refusal("r.classes_", f"a classifier has two distinct labels, the file holds "
                                         f"{classes.tolist()!r:.80}")
        extra = fields.get("extra") or {}
        params = {"r.coef_": fields.get("coef_"), "r.intercept_": fields.get("intercept_"),
                  "r.support_": support, "r.support_coef_": coef,
                  "r.extra.feature_space_coef": extra.get("feature_space_coef")}
        fcoef = params["r.extra.feature_space_coef"]
        if fcoef is not None:
            if not (isinstance(fcoef, np.ndarray) and fcoef.ndim == 1 and fcoef.dtype.kind == "f"):
                got = f"{fcoef.dtype} {fcoef.shape}" if isinstance(fcoef, np.ndarray) \
                    else _kind(fcoef)
                raise _Refusal("r.extra.feature_space_coef",
                               f"expected a 1-D float array, got {got}")
            kernel = fields.get("kernel")
            # the width of a fitted approximation's map (nystroem, rff and their
            # subclasses); a plug-in's map, fitted or not, has no declared width (found by
            # review: a plug-in declaring fitted = True failed on its missing _n_outputs)
            outputs = getattr(kernel, "_n_outputs", None)
            if getattr(kernel, "fitted", False) and callable(outputs) and \
                    fcoef.shape[0] != outputs():
                raise _Refusal("r.extra.feature_space_coef",
                               f"has {fcoef.shape[0]} entries but the kernel's fitted feature "
                               f"map has {outputs()} features")
        for where, value in params.items():
            values = value.data if sp.issparse(value) else value
            if values is not None and not np.isfinite(values).all():
                raise _Refusal(where, "holds NaN or infinite values; a model with them "
                                      "predicts nothing")

    # ------------------------------------------------------------------ node kinds
    def array(self, node, where):
        if not isinstance(node, dict) or "__array__" not in node:
            raise _Refusal(where, f"expected an array, got {_kind(node)}")
        keys = {"__array__", "dtype", "shape"} if self.version >= 2 else {"__array__"}
        if set(node) != keys or not isinstance(node["__array__"], str):
            raise _Refusal(where, "malformed array node")
        want_dtype = want_shape = None
        if self.version >= 2:
            try:
                want_dtype = np.dtype(node["dtype"]) if isinstance(node["dtype"], str) else None
            except (TypeError, ValueError):
                want_dtype = None
            if want_dtype is None:
                raise _Refusal(where, f"declares an invalid dtype {node['dtype']!r}")
            self._check_dtype(want_dtype, where)
            shape = node["shape"]
            if not isinstance(shape, list) or len(shape) > _MAX_NDIM or not all(
                    type(s) is int and 0 <= s < 2**62 for s in shape):
                raise _Refusal(where, f"declares an invalid shape {shape!r}")
            want_shape = tuple(shape)
        return self._read_npy(node["__array__"] + ".npy", where, want_dtype, want_shape)

    def csr(self, node, where):
        if not isinstance(node, dict) or "__csr__" not in node or set(node) != {"__csr__", "shape"}:
            raise _Refusal(where, f"expected a CSR matrix, got {_kind(node)}")
        shape = node["shape"]
        if not (isinstance(shape, list) and len(shape) == 2
                and all(type(s) is int and 0 <= s < 2**62 for s in shape)):
            raise _Refusal(where, f"declares an invalid shape {shape!r}")
        parts = node["__csr__"]
        if self.version >= 2:
            if not isinstance(parts, dict) or set(parts) != {"data", "indices", "indptr"}:
                raise _Refusal(where, "malformed CSR node")
            arrays = {p: self.array(parts[p], f"{where}.{p}") for p in ("data", "indices", "indptr")}
        else:
            if not isinstance(parts, str):
                raise _Refusal(where, "malformed CSR node")
            arrays = {p: self._read_npy(f"{parts}.{p}.npy", f"{where}.{p}") for p in
                      ("data", "indices", "indptr")}
        if arrays["data"].dtype.kind != "f":
            raise _Refusal(f"{where}.data", f"has dtype {arrays['data'].dtype}; expected floats")
        if arrays["indptr"].shape != (shape[0] + 1,):
            # before the matrix below is built: its indptr has shape[0] + 1 entries
            raise _Refusal(f"{where}.indptr", f"has shape {arrays['indptr'].shape}; a CSR matrix "
                                              f"of {shape[0]} rows has {shape[0] + 1} entries")
        from ._validation import checked_csr

        M = sp.csr_matrix(tuple(shape), dtype=arrays["data"].dtype)
        M.data, M.indices, M.indptr = arrays["data"], arrays["indices"], arrays["indptr"]
        M.has_sorted_indices = False  # nothing about the structure is trusted
        M.has_canonical_format = False
        try:
            return checked_csr(M, name=where)
        except (ValueError, TypeError) as exc:
            raise _Refusal(where, f"is not a valid CSR matrix ({exc})") from None

    def data(self, node, where):
        """Plain data: scalars, strings, arrays, CSR matrices, lists, dicts of those."""
        if node is None or isinstance(node, (bool, str, int, float)):
            return node
        if isinstance(node, dict):
            if "__float__" in node:
                return _float_node(node, where)
            if "__array__" in node:
                return self.array(node, where)
            if "__csr__" in node:
                return self.csr(node, where)
            if "__seq__" in node:
                return self.seq(node, where, _Loader.data)
            if "__dict__" in node:
                return self.mapping(node, where, _Loader.data)
        raise _Refusal(where, f"expected plain data (numbers, strings, arrays, lists, dicts), "
                              f"got {_kind(node)}")

    def seq(self, node, where, item):
        """A list node; ``item(loader, node, where)`` decodes each entry."""
        if set(node) - {"__seq__", "tuple"} or not isinstance(node["__seq__"], list) \
                or not isinstance(node.get("tuple", False), bool):
            raise _Refusal(where, "malformed list node")
        out = [item(self, v, f"{where}[{i}]") for i, v in enumerate(node["__seq__"])]
        return tuple(out) if node.get("tuple") else out

    def mapping(self, node, where, item):
        """A dict node (keys are data); ``item(loader, node, where)`` decodes each value."""
        if set(node) != {"__dict__"} or not isinstance(node["__dict__"], dict):
            raise _Refusal(where, "malformed dict node")
        return {k: item(self, v, f"{where}.{k}") for k, v in node["__dict__"].items()}

    def plugin(self, node, where, kind):
        from ._registry import get_plugin
        from . import plugins

        keys = {"__plugin__", "params", "fit"} if self.version >= 3 else {"__plugin__", "params"}
        if not isinstance(node, dict) or "__plugin__" not in node \
                or not {"__plugin__", "params"} <= set(node) <= keys:
            raise _Refusal(where, f"expected a registered {kind} plug-in, got {_kind(node)}")
        spec = node["__plugin__"]
        if not (isinstance(spec, list) and len(spec) == 2 and all(isinstance(s, str) for s in spec)):
            raise _Refusal(where, "malformed plug-in node")
        got_kind, name = spec
        if got_kind != kind:
            raise _Refusal(where, f"expected a {kind} plug-in, got a {got_kind!r} one")
        try:
            cls = get_plugin(kind, name)
        except ValueError as exc:
            raise _Refusal(where, f"{exc}; import the package that registers it before "
                                  "load_result") from None
        params = node["params"]
        if not (isinstance(params, dict) and set(params) == {"__dict__"}
                and isinstance(params["__dict__"], dict)):
            raise _Refusal(f"{where}.params", "malformed parameters node")
        values = {k: self.param(v, f"{where}.params.{k}") for k, v in params["__dict__"].items()}
        if not isinstance(cls, type):
            # a name registered for an instance: that instance, when the stored
            # parameters are its own
            own = dict(getattr(cls, "params", {}) or {})
            if values and not (set(values) == set(own) and all(
                    _same_param(values[k], own[k]) for k in values)):
                raise _Refusal(where, f"{kind} {name!r} is an instance registered with "
                                      f"other parameters than the file's")
            return cls
        try:
            obj = cls(**values)  # the plug-in's parameter table validates every value
        except _CONSTRUCTOR_ERRORS as exc:
            raise _Refusal(where, f"{kind} {name!r} refused the parameters: {exc}") from None
        if not isinstance(obj, plugins.Plugin):
            raise _Refusal(where, f"{kind} {name!r} is not a marginkit plug-in")
        if "fit" in node:
            self.restore_fit(obj, node["fit"], f"{where}.fit")
        return obj

    def restore_fit(self, obj, node, where):
        """Fit ``obj`` from its saved fit (``Kernel.saved_fit``): the plug-in checks every
        entry and recomputes the rest within what is left of ``max_bytes``."""
        if not callable(getattr(obj, "restore_fit", None)):
            raise _Refusal(where, f"{obj!r} keeps no fit")
        if not isinstance(node, dict) or "__dict__" not in node:
            raise _Refusal(where, f"expected a dict, got {_kind(node)}")
        stored = self.mapping(node, where, _Loader.param)
        try:
            obj.restore_fit(stored, max_bytes=self.budget)
        except _CONSTRUCTOR_ERRORS as exc:
            raise _Refusal(where, f"not a fit of {obj!r}: {exc}") from None
        need = obj._restore_bytes(obj.__dict__) if hasattr(obj, "_restore_bytes") else 0
        self.budget -= min(int(need), self.budget)

    def param(self, node, where):
        """A plug-in parameter: plain data, or a registered plug-in (a base kernel)."""
        if isinstance(node, dict) and "__plugin__" in node:
            kind = node["__plugin__"][0] if isinstance(node["__plugin__"], list) and \
                node["__plugin__"] else None
            if kind not in ("solver", "kernel", "smoother", "stopping"):
                raise _Refusal(where, "malformed plug-in node")
            return self.plugin(node, where, kind)
        if isinstance(node, dict) and "__dict__" in node:
            return self.mapping(node, where, _Loader.param)
        if isinstance(node, dict) and "__seq__" in node:
            return self.seq(node, where, _Loader.param)
        return self.data(node, where)

    def certificate(self, node, where):
        from .certificates import CERTIFICATE_TYPES

        body = "fields" if self.version >= 2 else "state"
        if not isinstance(node, dict) or "__certificate__" not in node \
                or set(node) != {"__certificate__", body}:
            raise _Refusal(where, f"expected a certificate, got {_kind(node)}")
        name = node["__certificate__"]
        cls = CERTIFICATE_TYPES.get(name) if isinstance(name, str) else None
        if cls is None:
            raise ValueError(
                f"certificate type {name!r} is unknown; import the plug-in that defines it "
                "(a class decorated with @certificate_type) before load_result")
        given = node[body]
        if body == "state":  # first format: the instance dict, as a dict node
            if not (isinstance(given, dict) and set(given) == {"__dict__"}
                    and isinstance(given["__dict__"], dict)):
                raise _Refusal(f"{where}.state", "malformed certificate state")
            given = given["__dict__"]
        if not isinstance(given, dict):
            raise _Refusal(f"{where}.{body}", "malformed certificate fields")
        declared = _declared_fields(cls)
        unknown = sorted(set(given) - set(declared))
        if unknown:
            raise _Refusal(f"{where}.{body}", f"unknown field(s) {unknown[:5]} for {name}; its "
                                              f"fields are {list(declared)}")
        missing = [p for p, required in declared.items() if required and p not in given]
        if missing:
            raise _Refusal(f"{where}.{body}", f"{name} needs the field(s) {missing}")
        specs = _CERTIFICATE_FIELDS.get(name, {})
        outer, self.dims = self.dims, {}  # the certificate's dimensions are its own
        try:
            values = {k: specs.get(k, _cert_value)(self, v, f"{where}.{body}.{k}")
                      for k, v in given.items()}
        finally:
            self.dims = outer
        try:
            return cls(**values)
        except _CONSTRUCTOR_ERRORS as exc:
            raise _Refusal(where, f"{name} refused its fields: {exc}") from None

    def config(self, node, where):
        from ._compose import _instantiate, resolve_kernel
        from ._config import Config

        if not isinstance(node, dict) or set(node) != {"__config__"}:
            raise _Refusal(where, f"expected a Config, got {_kind(node)}")
        given = node["__config__"]
        if isinstance(given, dict) and set(given) == {"__dict__"}:  # first format
            given = given["__dict__"]
        if not isinstance(given, dict):
            raise _Refusal(where, "malformed Config node")
        names = _config_fields()
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise _Refusal(where, f"unknown Config field(s) {unknown[:5]}")
        values = {}
        for field, v in given.items():
            values[field] = _CONFIG_FIELDS[field](self, v, f"{where}.{field}")
        try:
            cfg = Config(**values)
            # the plug-ins' parameter tables validate the stored parameters
            _instantiate("solver", cfg.solver, cfg.solver_params)
            resolve_kernel(cfg.kernel, cfg.kernel_params)
        except _CONSTRUCTOR_ERRORS as exc:
            raise _Refusal(where, f"not a valid Config ({exc})") from None
        return cfg


def _kind(node):
    if isinstance(node, dict):
        marks = [k for k in node if k.startswith("__")]
        return f"a {marks[0].strip('_')} node" if marks else "a JSON object"
    if isinstance(node, list):
        return "a JSON list"
    return f"a {type(node).__name__}"


def _float_node(node, where):
    if set(node) != {"__float__"} or node["__float__"] not in ("nan", "inf", "-inf"):
        raise _Refusal(where, "malformed float node")
    return float(node["__float__"])


def _declared_fields(cls):
    """A certificate type's declared fields: its constructor's parameters (name ->
    required), unless the class lists them itself (``saved_fields``)."""
    own = getattr(cls, "saved_fields", None)
    if own is not None:
        return {name: True for name in own}
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        raise TypeError(f"certificate {cls.__name__}: its constructor takes *args/**kwargs; "
                        "list the fields it stores in a class attribute saved_fields")
    return {p.name: p.default is inspect.Parameter.empty for p in params}


# ----------------------------------------------------------------------- field specs
def _optional(spec):
    def check(loader, node, where):
        return None if node is None else spec(loader, node, where)
    return check


def _string(loader, node, where):
    if not isinstance(node, str):
        raise _Refusal(where, f"expected a string, got {_kind(node)}")
    return node


def _one_of(*options):
    def check(loader, node, where):
        if node not in options:
            raise _Refusal(where, f"expected one of {list(options)}, got {_kind(node)}")
        return node
    return check


def _integer(loader, node, where):
    if type(node) is not int or node < 0:
        raise _Refusal(where, f"expected an int >= 0, got {_kind(node)}")
    return node


def _number(loader, node, where):
    if isinstance(node, dict):
        return _float_node(node, where)
    if isinstance(node, bool) or not isinstance(node, (int, float)):
        raise _Refusal(where, f"expected a number, got {_kind(node)}")
    if isinstance(node, int) and abs(node) > 2**1023:  # JSON integers have no limit
        raise _Refusal(where, "expected a number, got an integer beyond float64's range")
    return node


def _boolean(loader, node, where):
    if not isinstance(node, bool):
        raise _Refusal(where, f"expected true or false, got {_kind(node)}")
    return node


def _vector(kinds="f", dim=None):
    """A 1-D array of the given dtype kinds; ``dim`` names its length (all the vectors of
    one object with the same name have the same length)."""
    def check(loader, node, where):
        arr = loader.array(node, where)
        if arr.ndim != 1 or arr.dtype.kind not in kinds:
            raise _Refusal(where, f"expected a 1-D array of kind {kinds!r}, got {arr.dtype} "
                                  f"{arr.shape}")
        _same_dim(loader, dim, arr.shape[0], where)
        return arr
    return check


def _same_dim(loader, dim, size, where):
    if dim is None:
        return
    seen = loader.dims.setdefault(dim, (size, where))
    if seen[0] != size:
        raise _Refusal(where, f"has length {size} but {seen[1]} has {seen[0]}")


def _dense_matrix(rows=None, cols=None):
    """A dense 2-D float array; ``rows`` and ``cols`` name its dimensions (as ``_vector``'s
    ``dim``: a vector of length t and a t x p matrix of one object agree)."""
    def check(loader, node, where):
        M = loader.array(node, where)
        if M.ndim != 2 or M.dtype.kind != "f":
            raise _Refusal(where, f"expected a dense 2-D float array, got {M.dtype} {M.shape}")
        _same_dim(loader, rows, M.shape[0], where)
        _same_dim(loader, cols, M.shape[1], where)
        return M
    return check


def _matrix(loader, node, where):
    M = loader.csr(node, where) if isinstance(node, dict) and "__csr__" in node \
        else loader.array(node, where)
    if M.ndim != 2 or M.dtype.kind != "f":
        raise _Refusal(where, f"expected a 2-D float matrix, got {M.dtype} {M.shape}")
    return M


def _pair(loader, node, where):
    if not isinstance(node, dict) or "__seq__" not in node:
        raise _Refusal(where, f"expected a pair of numbers, got {_kind(node)}")
    out = loader.seq(node, where, _number)
    if len(out) != 2:
        raise _Refusal(where, f"expected a pair of numbers, got {len(out)} of them")
    return out


def _data(loader, node, where):
    return loader.data(node, where)


def _data_dict(loader, node, where):
    if not isinstance(node, dict) or "__dict__" not in node:
        raise _Refusal(where, f"expected a dict, got {_kind(node)}")
    return loader.mapping(node, where, _Loader.data)


def _kernel(loader, node, where):
    return loader.plugin(node, where, "kernel")


def _certificate(loader, node, where):
    return loader.certificate(node, where)


def _config(loader, node, where):
    return loader.config(node, where)


def _cert_value(loader, node, where):
    """A field of a certificate type without a declared schema: plain data, a registered
    kernel or a Config."""
    if isinstance(node, dict) and "__plugin__" in node:
        return loader.plugin(node, where, "kernel")
    if isinstance(node, dict) and "__config__" in node:
        return loader.config(node, where)
    return loader.data(node, where)


_LABELS = _vector("biufU")

_RESULT_FIELDS = {
    "status": _string, "n_iter": _integer, "time_s": _number,
    "coef_": _optional(_vector()), "intercept_": _optional(_number),
    "dual_coef_": _optional(_vector()), "certificate": _optional(_certificate),
    "dual_vector": _optional(_vector()), "margin_bounds": _optional(_pair),
    "certified_mask": _optional(_vector("b")), "history": _optional(_data_dict),
    "classes_": _optional(_LABELS), "solver": _optional(_string),
    "config": _optional(_config), "kernel": _optional(_kernel),
    "support_": _optional(_matrix), "support_coef_": _optional(_vector()),
    "task": _optional(_one_of("classification", "regression")),
    "extra": _optional(_data_dict),
}

#: declared fields of the built-in certificate types (the others: ``_cert_value``); a
#: test checks these against the constructors
_CERTIFICATE_FIELDS = {
    "SeparatorCertificate": {
        "alpha": _vector(dim="n"), "value": _number, "kernel": _optional(_kernel),
        "classes": _optional(_LABELS), "config": _optional(_config),
        "coef": _optional(_vector(dim="d")), "support_coef": _optional(_vector()),
        "predictor": _optional(_string), "intercept": _optional(_number)},
    "InfeasibilityCertificate": {
        "p": _vector(dim="n"), "value": _number, "eps": _number, "kernel": _optional(_kernel),
        "classes": _optional(_LABELS), "config": _optional(_config)},
    "CertifiedPointsCertificate": {
        "value": _number, "mask": _vector("b", dim="n"), "r": _vector(dim="n"),
        "gamma": _number, "mu": _number, "scale": _optional(_string),
        "means": _vector(dim="d"), "inv_std": _vector(dim="d"), "formulation": _string,
        "t_bar": _number, "coef": _optional(_vector(dim="d")), "intercept": _number,
        "classes": _optional(_LABELS), "kernel": _optional(_kernel),
        "config": _optional(_config), "claim": _optional(_string),
        "weighted": _boolean},
    "NewtonDecrementCertificate": {
        "value": _number, "targets": _vector(dim="t"), "loss": _string, "lam": _number,
        "representation": _string, "chain": _dense_matrix(rows="t", cols="p"),
        "fit_intercept": _boolean, "kernel": _optional(_kernel), "classes": _optional(_LABELS),
        "train_index": _optional(_vector("iu")), "centres": _optional(_matrix),
        "projection": _optional(_matrix), "identity_map": _boolean,
        "config": _optional(_config), "prox_step": _optional(_integer),
        "weighted": _boolean, "predictor": _optional(_string),
        "support_coef": _optional(_vector()),
        "directions": _optional(_dense_matrix())},
}


def _plugin_spec(kind):
    def check(loader, node, where):
        if isinstance(node, str):
            from ._registry import get_plugin

            try:
                get_plugin(kind, node)
            except ValueError as exc:
                raise _Refusal(where, f"{exc}; import the package that registers it before "
                                      "load_result") from None
            return node
        return loader.plugin(node, where, kind)
    return check


def _stop_entry(loader, node, where):
    from ._compose import _instantiate

    if isinstance(node, str):
        spec = node
    elif isinstance(node, dict) and "__plugin__" in node:
        return loader.plugin(node, where, "stopping")
    elif isinstance(node, dict) and "__seq__" in node:
        pair = loader.seq(node, where, _Loader.param)
        if len(pair) != 2 or not isinstance(pair[0], str) or not isinstance(pair[1], dict):
            raise _Refusal(where, "expected a stopping rule (name, parameters) pair")
        spec = (pair[0], pair[1])
    else:
        raise _Refusal(where, f"expected a stopping rule, got {_kind(node)}")
    try:
        _instantiate("stopping", spec if isinstance(spec, str) else spec[0],
                     None if isinstance(spec, str) else spec[1])
    except _CONSTRUCTOR_ERRORS as exc:
        raise _Refusal(where, f"{exc}") from None
    return spec


def _stop(loader, node, where):
    if not isinstance(node, dict) or "__seq__" not in node:
        raise _Refusal(where, f"expected a list of stopping rules, got {_kind(node)}")
    return list(loader.seq(node, where, _stop_entry))


def _params_dict(loader, node, where):
    if not isinstance(node, dict) or "__dict__" not in node:
        raise _Refusal(where, f"expected a dict of parameters, got {_kind(node)}")
    return loader.mapping(node, where, _Loader.param)


def _seed(loader, node, where):
    # a Generator is not stored (None); the first format kept its repr (a string)
    return None if node is None or isinstance(node, str) else _integer(loader, node, where)


def _display_flag(loader, node, where):
    # how a run was displayed is not part of its result: a loaded Config shows no bar
    _boolean(loader, node, where)
    return False


def _callback(loader, node, where):
    # a function is not stored: None (the first format kept its repr)
    if node is not None and not isinstance(node, str):
        raise _Refusal(where, f"expected null, got {_kind(node)}")
    return None


_CONFIG_FIELDS = {
    "solver": _plugin_spec("solver"), "kernel": _plugin_spec("kernel"),
    "kernel_params": _optional(_params_dict), "smoother": _optional(_plugin_spec("smoother")),
    "stop": _optional(_stop), "max_iter": _optional(_integer),
    "random_state": _seed, "verbose": _integer, "progress_bar": _display_flag,
    "callback": _callback, "time_limit": _optional(_number),
    "memory_budget": _number, "warn": _optional(_boolean),
    "interrupt": _one_of("raise", "return"),
    "solver_params": _params_dict,
}
