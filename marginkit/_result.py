"""``Result`` (one type for every solver); its persistence is ``marginkit._persist``.

The certificates a result may carry live in ``marginkit.certificates``.
"""
import numpy as np
import scipy.sparse as sp

from ._persist import load_result, save_result
from .certificates import (CERTIFICATE_TYPES, Certificate, InfeasibilityCertificate,  # noqa: F401
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

        ``mk.load_result(path)`` reads it back (safely, also from untrusted sources: see
        ``marginkit._persist``). Only the fields of ``Result`` are stored (attributes
        added to the object are not). Results with a callable (unregistered) kernel or solver
        cannot be saved this way (pickle them instead); a ``random_state`` Generator or a
        ``callback`` in the config is stored as None.
        """
        save_result(self, path)


_RESULT_FIELDS = frozenset(Result._FIELDS)
_NO_FIELDS = dict.fromkeys(Result._FIELDS)

