"""Model files of the command line: what ``marginkit fit -m MODEL`` writes and
``marginkit predict MODEL TEST`` reads.

Two classes
    The model file is the ``Result`` itself, written by ``Result.save``:
    ``marginkit.load_result(MODEL)`` reads it.
More than two classes (one-vs-rest)
    A zip archive (members stored, not compressed again) of one ``Result.save`` file per
    class and a JSON member that lists the classes::

        one_vs_rest.json   {"format": "marginkit one-vs-rest", "version": 1,
                            "classes": [label, ...], "results": ["class_0.npz", ...]}
        class_0.npz        classes[0] against the rest (labels 0/1, 1 is the class)
        class_1.npz        ...

    ``predict`` takes, for each sample, the class of the largest decision value.

Loading is strict, as ``load_result`` is: the archive starts at the file's first byte and
must hold exactly the members the JSON member names (no other, none twice), the JSON
member has exactly the keys above (at most ``MAX_INDEX_BYTES``), the labels are distinct
strings or numbers (integers a float64 holds exactly), one per result; each result member
is copied (counted while copying) into a private temporary folder and read by
``load_result``, all of them within one limit of ``load_result``'s ``MAX_BYTES`` (their
arrays and what their kernels' fits recompute, as for one results file), and must be a
classifier of the labels 0/1 over the same number of features as the others. Every
refusal, including a member the zip or zlib layer cannot read, is a ``ValueError`` naming
the file and the member.
"""
import json
import math
import os
import stat
import tempfile
import zipfile

import numpy as np

from ._persist import ARCHIVE_ERRORS, MAX_BYTES, _one_line, open_archive

__all__ = ["Model", "load_model", "INDEX", "MAX_INDEX_BYTES"]

INDEX = "one_vs_rest.json"
FORMAT = "marginkit one-vs-rest"
VERSION = 1
#: largest JSON member accepted (a few bytes per class)
MAX_INDEX_BYTES = 1 << 20
_COPY_BLOCK = 1 << 20


def result_features(res):
    """Number of input features a result predicts on, or None when a model file cannot
    say (a precomputed kernel, a kernel approximation whose fit the file does not hold)."""
    if res.coef_ is not None:
        return int(np.asarray(res.coef_).shape[0])
    if res.support_ is not None and not getattr(res.kernel, "precomputed", False):
        return int(res.support_.shape[1])
    # a fitted feature map (rff, nystroem): its fit is in the file (``Result.save``)
    n_in = getattr(res.kernel, "n_features_in_", None)
    if isinstance(n_in, (int, np.integer)) and n_in > 0:
        return int(n_in)
    return None


def unpredictable_reason(res):
    """Why a loaded result cannot predict the rows of a data file (None if it can)."""
    if result_features(res) is not None:
        return None
    if getattr(res.kernel, "precomputed", False):
        return ("the model was fit with kernel='precomputed': it predicts from kernel values "
                "K(test, train), not from the features of a data file")
    name = getattr(res.kernel, "name", None) or type(res.kernel).__name__
    return (f"the model uses the kernel approximation {name!r}, and the file does not hold "
            "its fitted feature map (a file written before marginkit saved kernel fits); "
            "fit the model again to predict from a model file")


class Model:
    """A model of the command line (``load_model``): one result (two classes) or one
    result per class (one-vs-rest); ``results``, ``classes_``, ``predict(X)``."""

    def __init__(self, results, classes):
        self.results = list(results)
        self.classes_ = np.asarray(classes)
        self.one_vs_rest = len(self.results) > 1

    @classmethod
    def binary(cls, res):
        return cls([res], res.classes_)

    @property
    def n_features(self):
        return result_features(self.results[0])

    def unpredictable_reason(self):
        return unpredictable_reason(self.results[0])

    def predict(self, X):
        if not self.one_vs_rest:
            return self.results[0].predict(X)
        scores = np.column_stack([r.decision_function(X) for r in self.results])
        return self.classes_[np.argmax(scores, axis=1)]

    def save(self, path):
        """Write the model file (``Result.save`` for two classes, else the archive)."""
        if not self.one_vs_rest:
            self.results[0].save(path)
            return
        names = [f"class_{k}.npz" for k in range(len(self.results))]
        index = {"format": FORMAT, "version": VERSION,
                 "classes": [_label_node(c) for c in self.classes_], "results": names}
        text = json.dumps(index, allow_nan=False)
        with tempfile.TemporaryDirectory() as tmp:
            for name, res in zip(names, self.results):
                res.save(os.path.join(tmp, name))
            with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
                zf.writestr(INDEX, text)
                for name in names:
                    zf.write(os.path.join(tmp, name), arcname=name)


def _label_node(c):
    if isinstance(c, (bool, np.bool_)):
        return bool(c)
    if isinstance(c, (np.integer, int)):
        return int(c)
    if isinstance(c, (np.floating, float)):
        return float(c)
    return str(c)


def load_model(path, allow_unbound=False):
    """Read a model file of ``marginkit fit -m MODEL``.

    Two classes: any file written by ``Result.save`` (``load_result`` reads it too); more
    than two: the one-vs-rest archive of one result per class. The returned model has
    ``results`` (the ``Result`` of each class against the rest, or the one result),
    ``classes_`` and ``predict(X)`` (for one-vs-rest the class of the largest decision
    value, as ``marginkit predict`` does). Raises ``ValueError`` naming the file and the
    problem (the ``OSError`` of ``open`` for a missing or unreadable file); loading is as
    strict as ``load_result``'s (``allow_unbound`` as there).

    Example::

        model = marginkit.load_model("digits.model")
        labels = model.predict(X_test)
    """
    from ._result import load_result, read_result

    path = os.fspath(path)
    if os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode):
        raise ValueError(f"{path!r} is not a model file (not a regular file)")
    try:
        with open(path, "rb"):
            pass  # a missing or unreadable file: the OSError of open
        zf = open_archive(path)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except (ValueError,) + ARCHIVE_ERRORS as exc:
        raise ValueError(f"{path!r} is not a model file written by 'marginkit fit -m' or "
                         f"Result.save (not a zip archive it reads: {_one_line(exc)})") from None
    with zf:
        names = [info.filename for info in zf.infolist()]
        if INDEX not in names:
            zf.close()
            res = load_result(path, allow_unbound=allow_unbound)
            _check_classifier(res, repr(path))
            return Model.binary(res)
        index = _read_index(zf, path)
        expected = [INDEX] + index["results"]
        if sorted(names) != sorted(expected):
            missing = sorted(set(expected) - set(names))
            unnamed = sorted(set(names) - set(expected))
            twice = sorted({n for n in names if names.count(n) > 1})
            problem = (f"lacks the member(s) {missing[:5]}" if missing else
                       f"holds member(s) {unnamed[:5]} that {INDEX} does not name" if unnamed
                       else f"holds the member(s) {twice[:5]} twice")
            raise ValueError(f"{path!r}: corrupt one-vs-rest model: the archive {problem}")
        results = []
        budget = MAX_BYTES  # one limit for the whole model file, as for one results file
        with tempfile.TemporaryDirectory() as tmp:
            for k, name in enumerate(index["results"]):
                where = f"{path!r} member {name!r}"
                info = zf.getinfo(name)
                if info.file_size > budget:
                    raise ValueError(f"{where}: {info.file_size} bytes, more than the "
                                     f"{budget} bytes left of the model file's limit of "
                                     f"{MAX_BYTES} bytes")
                local = os.path.join(tmp, f"class_{k}.npz")
                _copy_member(zf, info, local, budget, where)
                try:
                    res, used = read_result(local, max_bytes=budget,
                                            allow_unbound=allow_unbound)
                except ValueError as exc:
                    raise ValueError(str(exc).replace(repr(local), where)) from None
                finally:
                    os.unlink(local)
                budget -= used
                _check_classifier(res, where, labels01=True)
                results.append(res)
    widths = {result_features(r) for r in results}
    if len(widths) != 1:
        raise ValueError(f"{path!r}: corrupt one-vs-rest model: its results predict on "
                         f"different numbers of features {sorted(w or 0 for w in widths)}")
    return Model(results, index["classes"])


def _read_index(zf, path):
    info = zf.getinfo(INDEX)
    where = f"{path!r} member {INDEX!r}"
    if info.file_size > MAX_INDEX_BYTES:
        raise ValueError(f"{where}: {info.file_size} bytes, more than the limit of "
                         f"{MAX_INDEX_BYTES}")
    raw = b"".join(_member_blocks(zf, info, where, MAX_INDEX_BYTES))
    if len(raw) > MAX_INDEX_BYTES:
        raise ValueError(f"{where}: more than {MAX_INDEX_BYTES} bytes")
    try:
        index = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ValueError(f"{where}: not valid JSON") from None
    keys = {"format", "version", "classes", "results"}
    if not isinstance(index, dict) or set(index) != keys:
        got = sorted(index) if isinstance(index, dict) else type(index).__name__
        raise ValueError(f"{where}: expected the keys {sorted(keys)}, got {got}")
    version = index["version"]
    if index["format"] != FORMAT or type(version) is not int or version != VERSION:
        raise ValueError(f"{where}: format {index['format']!r} version {index['version']!r} "
                         f"is not {FORMAT!r} version {VERSION}")
    classes, results = index["classes"], index["results"]
    if not isinstance(classes, list) or len(classes) < 3 or not all(map(_is_label, classes)):
        raise ValueError(f"{where}: 'classes' must list at least 3 labels (strings, or finite "
                         "numbers a float64 holds exactly)")
    if len(set(classes)) != len(classes) or len({type(c) is str for c in classes}) != 1:
        raise ValueError(f"{where}: 'classes' must be distinct labels of one kind")
    if results != [f"class_{k}.npz" for k in range(len(classes))]:
        raise ValueError(f"{where}: 'results' must be ['class_0.npz', ...], one per class "
                         f"({len(classes)})")
    return index


def _is_label(c):
    """A label of the index: a string, a finite float, or an integer a float64 holds
    exactly (the labels of a data file are float64 numbers)."""
    if isinstance(c, str):
        return True
    if isinstance(c, float):
        return math.isfinite(c)
    return isinstance(c, int) and not isinstance(c, bool) and abs(c) <= 2**53


def _member_blocks(zf, info, where, limit):
    """The bytes of the archive member ``info``, in blocks, at most ``limit`` + 1 of them
    (the caller refuses more); a member the zip or zlib layer cannot read (a checksum, a
    local header, a compression it does not implement) is a ``ValueError`` naming it."""
    total = 0
    try:
        with zf.open(info) as src:
            while total <= limit:
                block = src.read(min(_COPY_BLOCK, limit + 1 - total))
                if not block:
                    return
                total += len(block)
                yield block
    except ARCHIVE_ERRORS as exc:
        raise ValueError(f"{where}: cannot be read from the archive ({_one_line(exc)})") from None


def _copy_member(zf, info, dest, limit, where):
    total = 0
    with open(dest, "wb") as out:
        for block in _member_blocks(zf, info, where, limit):
            total += len(block)
            if total > limit:
                raise ValueError(f"{where}: decompresses to more than {limit} bytes")
            out.write(block)


def _check_classifier(res, where, labels01=False):
    if res.task != "classification" or res.classes_ is None:
        raise ValueError(f"{where}: a regression result, not a classifier (predict needs "
                         "class labels)")
    classes = np.asarray(res.classes_)
    if classes.shape != (2,):
        raise ValueError(f"{where}: a classifier needs 2 classes, the result has "
                         f"{classes.shape}")
    if labels01 and not (classes.dtype.kind in "biuf" and classes.tolist() == [0, 1]):
        raise ValueError(f"{where}: a one-vs-rest result has the labels [0, 1], this one "
                         f"{classes.tolist()}")
    if res.coef_ is None and res.support_coef_ is None and \
            (res.extra or {}).get("feature_space_coef") is None:
        raise ValueError(f"{where}: the result holds no model (no coef_ and no kernel "
                         "support)")
