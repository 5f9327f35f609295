"""``Result`` (one type for every solver) and its persistence.

The certificates a result may carry live in ``marginkit.certificates``.
"""
import io
import json
import zipfile

import numpy as np
import scipy.sparse as sp

from .certificates import (CERTIFICATE_TYPES, Certificate, InfeasibilityCertificate,
                           SeparatorCertificate, certificate_type, labels_pm)

__all__ = ["Result", "Certificate", "SeparatorCertificate", "InfeasibilityCertificate",
           "load_result", "certificate_type"]

_labels_pm = labels_pm


# ---------------------------------------------------------------------------------
class Result:
    """The outcome of ``marginkit.solve`` (same type for every solver).

    See ``shared/API.md`` for the fields. ``decision_function`` and ``predict`` work on
    new data: linear models through ``coef_``/``intercept_``, kernel models through the
    support rows they keep (``support_``, ``support_coef_``) and the kernel.
    """

    _FIELDS = ("status", "n_iter", "time_s", "coef_", "intercept_", "dual_coef_",
               "certificate", "dual_vector", "margin_bounds", "certified_mask", "history",
               "classes_", "solver", "config", "kernel", "support_", "support_coef_",
               "task", "extra")

    def __init__(self, **fields):
        if not fields.keys() <= _RESULT_FIELDS:
            raise TypeError(f"Result: unknown field(s) {sorted(set(fields) - _RESULT_FIELDS)}")
        attrs = self.__dict__
        attrs.update(_NO_FIELDS)  # every field, in the order of _FIELDS, then the given ones
        attrs.update(fields)
        if self.history is None:
            self.history = {}
        if self.extra is None:
            self.extra = {}
        if self.intercept_ is None and self.coef_ is not None:
            self.intercept_ = 0.0
        if self.task is None:
            self.task = "classification"

    def __repr__(self):
        cert = None if self.certificate is None else self.certificate.kind
        return (f"Result(solver={self.solver!r}, status={self.status!r}, n_iter={self.n_iter}, "
                f"certificate={cert!r}, time_s={self.time_s:.3g})")

    # -- prediction ---------------------------------------------------------
    def decision_function(self, X):
        """Real-valued scores; positive means ``classes_[1]``."""
        from ._validation import check_X

        X = check_X(X)
        if self.coef_ is not None:
            coef = np.asarray(self.coef_, dtype=np.float64)
            if X.shape[1] != coef.shape[0]:
                raise ValueError(
                    f"X has {X.shape[1]} features, the model was fit with {coef.shape[0]}"
                )
            out = X @ coef if not sp.issparse(X) else X.dot(coef)
            return np.asarray(out, dtype=np.float64).ravel() + float(self.intercept_ or 0.0)
        fcoef = (self.extra or {}).get("feature_space_coef")
        if fcoef is not None and getattr(self.kernel, "feature_map", None) is not None:
            # linear model on the kernel's fitted feature map (SVM family with an approximation)
            if getattr(self.kernel, "fitted", True) is False:
                raise ValueError(
                    "the kernel's feature map is not fitted (a loaded result keeps only its "
                    "parameters): call result.kernel.fit(X_train) first"
                )
            out = np.asarray(self.kernel.feature_map(X), dtype=np.float64) @ np.asarray(fcoef)
            return out.ravel() + float(self.intercept_ or 0.0)
        if self.support_coef_ is None or self.kernel is None:
            raise ValueError("this result has no model to evaluate (no coef_ or kernel support)")
        kernel = self.kernel
        if getattr(kernel, "precomputed", False):
            if X.shape[1] != self.support_coef_.shape[0]:
                raise ValueError(
                    f"with kernel='precomputed', X must be K(X_new, X_train) with "
                    f"{self.support_coef_.shape[0]} columns, got {X.shape[1]}"
                )
            K = X.toarray() if sp.issparse(X) else X
        else:
            if X.shape[1] != self.support_.shape[1]:
                raise ValueError(
                    f"X has {X.shape[1]} features, the model was fit with {self.support_.shape[1]}"
                )
            K = kernel(X, self.support_)
        return np.asarray(K, dtype=np.float64) @ self.support_coef_ + float(self.intercept_ or 0.0)

    def predict(self, X):
        """Labels (``classes_``) for classifiers, real values for regression results."""
        d = self.decision_function(X)
        if self.task == "regression" or self.classes_ is None:
            return d
        return np.asarray(self.classes_)[(d > 0).astype(int)]

    def score(self, X, y):
        """Accuracy for classifiers, R^2 for regression."""
        pred = self.predict(X)
        y = np.asarray(y).ravel()
        if self.task == "regression" or self.classes_ is None:
            ss = ((y - y.mean()) ** 2).sum()
            return 1.0 - ((y - pred) ** 2).sum() / ss if ss > 0 else 0.0
        return float(np.mean(pred == y))

    # -- persistence without pickle ----------------------------------------
    def save(self, path):
        """Store as a ``.npz`` file (arrays) with a JSON header; no pickle involved.

        Results with a callable (unregistered) kernel or solver cannot be saved this way
        (pickle them instead).
        """
        arrays = {}
        meta = _encode(self.__dict__, arrays, "r")
        buf = io.BytesIO()
        np.savez_compressed(buf, __meta__=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
                            **arrays)
        with open(path, "wb") as fh:
            fh.write(buf.getvalue())


_RESULT_FIELDS = frozenset(Result._FIELDS)
_NO_FIELDS = dict.fromkeys(Result._FIELDS)


def _encode(obj, arrays, key):
    """JSON-encode obj, moving arrays into ``arrays`` (keys derived from ``key``)."""
    from . import plugins
    from ._config import Config

    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        f = float(obj)
        return f if np.isfinite(f) else {"__float__": repr(f)}
    if isinstance(obj, np.ndarray):
        if obj.dtype == object:
            raise TypeError("cannot save object arrays without pickle")
        arrays[key] = obj
        return {"__array__": key}
    if sp.issparse(obj):
        c = obj.tocsr()
        for part in ("data", "indices", "indptr"):
            arrays[f"{key}.{part}"] = getattr(c, part)
        return {"__csr__": key, "shape": list(c.shape)}
    if isinstance(obj, (list, tuple)):
        return {"__seq__": [_encode(v, arrays, f"{key}.{i}") for i, v in enumerate(obj)],
                "tuple": isinstance(obj, tuple)}
    if isinstance(obj, dict):
        return {"__dict__": {str(k): _encode(v, arrays, f"{key}.{k}") for k, v in obj.items()}}
    if isinstance(obj, Config):
        return {"__config__": _encode(obj.to_dict(), arrays, key + ".config")}
    if isinstance(obj, plugins.Plugin):
        if obj.name is None:
            raise TypeError(f"cannot save {obj!r}: it is not a registered plug-in")
        return {"__plugin__": [obj.kind, obj.name], "params": _encode(obj.params, arrays, key + ".p")}
    if isinstance(obj, Certificate):
        name = type(obj).__name__
        if name not in CERTIFICATE_TYPES:
            raise TypeError(f"cannot save certificate {name}: decorate it with @certificate_type")
        return {"__certificate__": name, "state": _encode(obj.__dict__, arrays, key + ".c")}
    raise TypeError(
        f"cannot save {type(obj).__name__} without pickle (callable kernels or custom objects); "
        "use pickle for this result"
    )


def _decode(obj, arrays):
    from ._registry import get_plugin

    if isinstance(obj, list):
        return [_decode(v, arrays) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "__float__" in obj:
        return float(obj["__float__"])
    if "__array__" in obj:
        return arrays[obj["__array__"]]
    if "__csr__" in obj:
        k = obj["__csr__"]
        return sp.csr_matrix((arrays[k + ".data"], arrays[k + ".indices"], arrays[k + ".indptr"]),
                             shape=tuple(obj["shape"]))
    if "__seq__" in obj:
        seq = [_decode(v, arrays) for v in obj["__seq__"]]
        return tuple(seq) if obj.get("tuple") else seq
    if "__dict__" in obj:
        return {k: _decode(v, arrays) for k, v in obj["__dict__"].items()}
    if "__config__" in obj:
        return _decode(obj["__config__"], arrays)  # kept as a plain dict description
    if "__plugin__" in obj:
        kind, name = obj["__plugin__"]
        cls = get_plugin(kind, name)
        params = _decode(obj["params"], arrays)
        return cls(**params) if isinstance(cls, type) else cls
    if "__certificate__" in obj:
        cls = CERTIFICATE_TYPES.get(obj["__certificate__"])
        if cls is None:
            raise ValueError(
                f"certificate type {obj['__certificate__']!r} is unknown; import the plug-in "
                "that defines it (a class decorated with @certificate_type) before load_result"
            )
        cert = cls.__new__(cls)
        cert.__dict__.update(_decode(obj["state"], arrays))
        return cert
    return {k: _decode(v, arrays) for k, v in obj.items()}


def load_result(path):
    """Load a ``Result`` stored by ``Result.save`` (no pickle: ``allow_pickle=False``)."""
    try:
        data = np.load(path, allow_pickle=False)
        if not hasattr(data, "files"):  # a single .npy array, not an archive
            raise ValueError("a single array, not an npz archive")
        with data:
            arrays = {k: data[k] for k in data.files}
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise ValueError(f"{path!r} is not a file written by Result.save ({exc})") from None
    if "__meta__" not in arrays:
        raise ValueError(f"{path!r} is not a file written by Result.save (no header)")
    try:
        meta = json.loads(arrays.pop("__meta__").tobytes().decode())
        fields = _decode(meta, arrays)
        if not isinstance(fields, dict):
            raise TypeError("the header is not a dict of fields")
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path!r}: corrupt Result.save header ({type(exc).__name__}: {exc})") from None
    res = Result.__new__(Result)
    res.__dict__.update(fields)
    return res
