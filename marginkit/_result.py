"""``Result`` (one type for every solver) and the certificates it may carry.

A certificate's ``verify(X, y)`` recomputes its claim from the data and the kernel
alone (not from any solver state), so a test, or a user, can check it independently.
"""
import io
import json
import zipfile

import numpy as np
import scipy.sparse as sp

__all__ = ["Result", "Certificate", "SeparatorCertificate", "InfeasibilityCertificate",
           "load_result", "certificate_type", "signed_normalized_gram_dot"]

CERTIFICATE_TYPES = {}


def certificate_type(cls):
    """Class decorator: make a certificate class restorable by ``load_result``."""
    CERTIFICATE_TYPES[cls.__name__] = cls
    return cls


# ---------------------------------------------------------------------------------
def _kernel_from_spec(kernel, kernel_params=None):
    from ._api import resolve_kernel

    return resolve_kernel(kernel, kernel_params)


def _labels_pm(y, classes):
    y = np.asarray(y).ravel()
    if classes is None:
        classes = np.unique(y)
    return np.where(y == classes[1], 1.0, -1.0)


def signed_normalized_gram_dot(X, ypm, kernel, v, normalize=True):
    """G v with G_ij = y_i y_j K_ij / sqrt(K_ii K_jj), recomputed from X in float64.

    Kernels with an explicit feature map go through Phi (never the n x n Gram); others
    form K(X, X) in float64.
    """
    v = np.asarray(v, dtype=np.float64)
    if getattr(kernel, "precomputed", False):
        K = np.asarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64)
        d = np.sqrt(np.diag(K)) if normalize else np.ones(K.shape[0])
        s = ypm / d
        return s * (K @ (s * v))
    fmap = getattr(kernel, "feature_map", None)
    if fmap is not None:
        Phi = fmap(X)
        Phi = Phi.astype(np.float64) if Phi.dtype != np.float64 else Phi
        if normalize:
            # unit rows without squaring raw entries (|x| > 1e154 would overflow, |x| < 1e-154
            # underflow): divide each row by its max |entry| first
            if sp.issparse(Phi):
                m = np.asarray(abs(Phi).max(axis=1).toarray(), dtype=np.float64).ravel()
                P = sp.diags(1.0 / np.where(m > 0, m, 1.0)) @ Phi
                nrm = np.sqrt(np.asarray(P.multiply(P).sum(axis=1)).ravel())
                with np.errstate(divide="ignore"):
                    Phi = sp.diags(1.0 / nrm) @ P  # zero rows -> inf/nan: never verifies
            else:
                m = np.abs(Phi).max(axis=1)
                P = Phi / np.where(m > 0, m, 1.0)[:, None]
                nrm = np.sqrt(np.einsum("ij,ij->i", P, P))
                with np.errstate(divide="ignore", invalid="ignore"):
                    Phi = P / nrm[:, None]
        s = ypm
        w = Phi.T @ (s * v)
        return s * np.asarray(Phi @ w).ravel()
    Xd = X.astype(np.float64) if X.dtype != np.float64 else X
    K = np.asarray(kernel(Xd, Xd), dtype=np.float64)
    d = np.sqrt(np.diag(K)) if normalize else np.ones(K.shape[0])
    s = ypm / d
    return s * (K @ (s * v))


class Certificate:
    """Base class: ``kind``, ``value`` and ``verify(X, y) -> bool``."""

    kind = None
    value = None

    def verify(self, X, y):  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}(kind={self.kind!r}, value={self.value!r})"


@certificate_type
class SeparatorCertificate(Certificate):
    """G alpha > 0: f = sum_i alpha_i y_i phi(x_i)/sqrt(K(x_i, x_i)) separates the data.

    ``value`` is min_i (G alpha)_i as computed by the solver (in float64).
    """

    kind = "separator"

    def __init__(self, alpha, value, kernel, classes=None):
        self.alpha = np.asarray(alpha, dtype=np.float64)
        self.value = float(value)
        self.kernel = kernel
        self.classes = classes

    def verify(self, X, y):
        from ._validation import check_X

        X = check_X(X)
        ypm = _labels_pm(y, self.classes)
        Ga = signed_normalized_gram_dot(X, ypm, self.kernel, self.alpha)
        return bool(np.all(Ga > 0))


@certificate_type
class InfeasibilityCertificate(Certificate):
    """p in the simplex with ||p||_G <= eps (Gordan's theorem in the RKHS, paper 000, sec. 5).

    ``value`` is ||p||_G = sqrt(p^T G p); ``eps`` the tolerance it was certified against.
    """

    kind = "infeasibility"

    def __init__(self, p, value, eps, kernel, classes=None):
        self.p = np.asarray(p, dtype=np.float64)
        self.value = float(value)
        self.eps = float(eps)
        self.kernel = kernel
        self.classes = classes

    def verify(self, X, y):
        from ._validation import check_X

        X = check_X(X)
        p = self.p
        if p.min() < 0 or abs(p.sum() - 1.0) > 1e-9:
            return False
        ypm = _labels_pm(y, self.classes)
        Gp = signed_normalized_gram_dot(X, ypm, self.kernel, p)
        norm = np.sqrt(max(float(p @ Gp), 0.0))
        # the recomputed norm must be within eps (with round-off slack of the recomputation)
        return bool(norm <= self.eps * (1 + 1e-6) + 1e-12)


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
