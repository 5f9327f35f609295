"""``Result`` (one type for every solver); its persistence is ``marginkit._persist``.

The certificates a result may carry live in ``marginkit.certificates``.
"""
import os
import warnings

import numpy as np
import scipy.sparse as sp

from . import _persist
from .certificates import (CERTIFICATE_TYPES, Certificate, InfeasibilityCertificate,  # noqa: F401
                           SeparatorCertificate, certificate_type, labels_pm)

__all__ = ["Result", "Certificate", "SeparatorCertificate", "InfeasibilityCertificate",
           "load_result", "certificate_type"]

_labels_pm = labels_pm


# ---------------------------------------------------------------------------------
#: entries of the kernel blocks K(X, support) a kernel model's scores form at a time
#: (64 MiB of float64)
_SCORE_BLOCK = 1 << 23

class Result:
    """The outcome of ``marginkit.solve`` (same type for every solver).

    ``decision_function`` and ``predict`` work on new data: linear models through
    ``coef_``/``intercept_``, kernel models through the support rows they keep
    (``support_``, ``support_coef_``) and the kernel. Results pickle; ``save`` and
    ``marginkit.load_result`` store them without pickle. A field a solver does not define
    is ``None`` (``history`` and ``extra``: empty dicts).

    Attributes
    ----------
    status : str
        Why the run ended. A claim, re-checked from the training data before it is
        reported: ``"separable"`` (a separator, ``certificate.kind == "separator"``),
        ``"infeasible"`` (no separator has a normalized margin above the run's eps,
        ``"infeasibility"``), ``"certified"``
        (SVM family: points certified correctly classified, ``"certified_points"``);
        ``"converged"`` (a tolerance met, re-checked when it carries a certificate:
        iterated Tikhonov's a ``"newton_decrement"`` one, the SVM solvers' a
        ``"certified_points"`` one when their last iterate certifies a point, other
        solvers' none); or a limit without a claim: ``"max_iter"``, ``"time_limit"``,
        ``"callback"`` (the callback returned True), ``"interrupted"`` (Ctrl-C ended the
        run and the partial result was returned), where the SVM solvers too keep a
        ``"certified_points"`` certificate when their last iterate certifies a point.
    n_iter : int
        Iterations run.
    time_s : float
        Wall-clock seconds of the run: the solver's start-up and its iterations (the
        clock of ``time_limit``).
    coef_ : ndarray (n_features,) or None
        The linear model in the original feature space (None for non-linear kernels).
    intercept_ : float or None
        The intercept of the model (0.0 for homogeneous linear models; None means 0).
    dual_coef_ : ndarray or None
        The dual / representer vector: alpha for the perceptron family, r for the SVM
        duals, beta for kernel iterated Tikhonov.
    certificate : Certificate or None
        The certificate of the run's result (its ``kind``, ``value``, ``check(X, y)`` and
        ``verify(X, y)``), verified on the training data: always one for a claim (the
        claim's kind); for another status the SVM solvers' ``"certified_points"``
        certificate of the points their last iterate certifies (None when there are
        none), iterated Tikhonov's ``"newton_decrement"`` one for ``"converged"``, else
        None.
    dual_vector : ndarray (n_samples,) or None
        Perceptron / von Neumann family: the last p in the simplex (the infeasibility
        witness when ``status == "infeasible"``).
    margin_bounds : (float, float) or None
        ``(lower, upper)`` bounds on the normalized margin rho_K when the solver gives
        them (perceptron / von Neumann family), else None.
    certified_mask : ndarray of bool (n_samples,) or None
        SVM family: the training points certified correctly classified.
    history : dict of str to ndarray
        Per-iteration records, as the solver knows them (``objective``, ``error_bound``,
        ``n_certified``, ``margin_lower``, ``margin_upper``, ``dual_norm``,
        ``decrement``...).
    classes_ : ndarray (2,) or None
        The original labels; ``classes_[1]`` is the +1 class. None for regression.
    solver : str or Solver
        The solver, by registry name (or the instance given).
    config : Config
        The run's full configuration (``solve``'s keywords).
    kernel : Kernel or None
        The kernel the run used (fitted, for ``nystroem``/``rff``).
    support_, support_coef_ : ndarray or None
        Kernel models: the training rows the model keeps and their coefficients (``decision_function(X) = K(X, support_) @ support_coef_ +
        intercept_``).
    task : {"classification", "regression"}
        What the solver fits (``predict`` returns labels or real values).
    extra : dict
        Solver-specific information (e.g. ``gamma``, ``mu`` and ``L`` of the SVM family,
        the chosen ``t`` of iterated Tikhonov).
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
        """Real-valued scores; positive means ``classes_[1]``.

        ``X`` may be a dask array (row chunks of numpy arrays or scipy.sparse matrices):
        the scores are then a lazy dask array with one block per row chunk, computed
        where the chunks are (``.compute()`` or ``client.compute`` runs them)."""
        from ._validation import check_X, dask_array_of

        Xd = dask_array_of(X)
        if Xd is not None:
            from ._dask import decision_function

            return decision_function(self, Xd, self._n_features())
        return self._checked_scores(check_X(X))

    def _checked_scores(self, X):
        """The scores of a checked in-memory X, non-finite ones refused by row (rows of
        the caller's X where X is a chunk of it: ``_validation.in_chunk``)."""
        with np.errstate(over="ignore", invalid="ignore"):  # reported below, by row
            scores = self._scores(X)
        return _finite_scores(scores)

    def _scores(self, X):
        """``decision_function`` of a checked in-memory X."""
        # the model to evaluate, in the order load_result binds (``predicting_model``)
        kind, value = predicting_model(self.__dict__) or (None, None)
        if kind == "coef":
            coef = np.asarray(value, dtype=np.float64)
            if X.shape[1] != coef.shape[0]:
                raise ValueError(
                    f"X has {X.shape[1]} features, the model was fit with {coef.shape[0]}"
                )
            out = X @ coef if not sp.issparse(X) else X.dot(coef)
            return np.asarray(out, dtype=np.float64).ravel() + float(self.intercept_ or 0.0)
        if kind != "coef" and X.dtype != np.float64:
            # a kernel (or feature map) evaluated on float32 rows computes in float32, and
            # its rounding could change the sign of a margin the certificate established
            # in float64 (found by review: a poly-kernel separator verified and predict
            # misclassified a training point); float64 rows give the referee's accuracy
            X = X.astype(np.float64)
        if kind == "feature_space":
            # linear model on the kernel's fitted feature map (an approximation's, a
            # plug-in's)
            support = self.support_
            if support is not None and X.shape[1] != support.shape[1]:
                # (a map of fixed width read any X: found by review)
                raise ValueError(
                    f"X has {X.shape[1]} features, the model was fit with {support.shape[1]}")
            out = np.asarray(self._features(X) @ np.asarray(value, dtype=np.float64),
                             dtype=np.float64)
            return out.ravel() + float(self.intercept_ or 0.0)
        if self.support_coef_ is None or self.kernel is None:
            raise ValueError("this result has no model to evaluate (no coef_ or kernel support)")
        kernel = self.kernel
        if getattr(kernel, "precomputed", False):
            extra = self.extra or {}
            train, rows = extra.get("train_index"), extra.get("split_rows")
            if train is not None and rows is not None and X.shape[1] == rows and \
                    rows != self.support_coef_.shape[0] and \
                    int(np.max(train, initial=-1)) < rows:
                # K(X_new, X_train) of all the run's rows: the model's are train_index
                X = X[:, np.asarray(train)]
            if X.shape[1] != self.support_coef_.shape[0]:
                raise ValueError(
                    f"with kernel='precomputed', X must be K(X_new, X_train) with "
                    f"{self.support_coef_.shape[0] if rows is None else rows} columns, got "
                    f"{X.shape[1]}"
                    + ("" if train is None else " (the model reads the columns of "
                       "extra['train_index'], the rows t='auto' trained on)"))
            # a sparse K stays sparse: its product with the coefficients needs no dense
            # n_test x n_train copy (found by review: 3 GiB for a 0.5 MB CSR)
            K = X if sp.issparse(X) else np.asarray(X, dtype=np.float64)
        else:
            if X.shape[1] != self.support_.shape[1]:
                raise ValueError(
                    f"X has {X.shape[1]} features, the model was fit with {self.support_.shape[1]}"
                )
            if getattr(kernel, "feature_map", None) is not None:
                # through the map, as the referee checks the model (w = Phi(support)^T c,
                # ``certificates.stored_separator_margin``): a map and a function that
                # differ (a plug-in's within its map check's tolerance, a map set on an
                # instance) gave a verified separator that predict got wrong (found by
                # review)
                w = np.asarray(self._features(self.support_).T @ np.asarray(
                    self.support_coef_, dtype=np.float64)).ravel()
                out = np.asarray(self._features(X) @ w, dtype=np.float64)
                return out.ravel() + float(self.intercept_ or 0.0)
            # K(X, support) by row blocks of at most _SCORE_BLOCK entries (found by review:
            # 150,000 test rows against 3,000 support rows asked for one 3.35 GiB block);
            # a row's entries do not depend on the other rows of its block
            coef = np.asarray(self.support_coef_, dtype=np.float64)
            rows = max(1, _SCORE_BLOCK // max(1, self.support_.shape[0]))
            out = np.empty(X.shape[0])
            for lo in range(0, X.shape[0], rows):
                K = np.asarray(kernel(X[lo:lo + rows], self.support_), dtype=np.float64)
                out[lo:lo + rows] = np.asarray(K @ coef, dtype=np.float64).ravel()
            return out + float(self.intercept_ or 0.0)
        out = np.asarray(K @ np.asarray(self.support_coef_, dtype=np.float64), dtype=np.float64)
        return out.ravel() + float(self.intercept_ or 0.0)

    def _features(self, X):
        """Phi(X) of the result's kernel map in float64 (dense, or CSR as a sparse map
        gives it), computed as the referee computes it (``certificates._features``)."""
        if getattr(self.kernel, "fitted", True) is False:
            raise ValueError(
                "the kernel's feature map is not fitted (a loaded result keeps only its "
                "parameters): call result.kernel.fit(X_train) first")
        from .certificates import _features

        return _features(self.kernel, X)

    def _n_features(self):
        """The number of columns the model reads, when it says so without computing."""
        if self.coef_ is not None:
            return int(np.shape(self.coef_)[0])
        if getattr(self.kernel, "precomputed", False):
            if (self.extra or {}).get("split_rows") is not None:
                # K(X_new, X_train) of all the run's rows or of the rows t="auto" trained
                # on: both are read (decision_function), so no one width (found by review)
                return None
            return None if self.support_coef_ is None else int(np.shape(self.support_coef_)[0])
        if self.support_ is not None and getattr(self.kernel, "feature_map", None) is None:
            return int(self.support_.shape[1])
        return None

    def predict(self, X):
        """Labels (``classes_``) for classifiers, real values for regression results
        (a lazy dask array for a dask ``X``, as ``decision_function``)."""
        from ._validation import dask_array_of

        Xd = dask_array_of(X)
        if Xd is not None:
            from ._dask import predict

            return predict(self, Xd, self._n_features())
        d = self.decision_function(X)
        if self.task == "regression" or self.classes_ is None:
            return d
        return np.asarray(self.classes_)[(d > 0).astype(int)]

    def score(self, X, y):
        """Accuracy for classifiers, R^2 for regression."""
        pred = self.predict(X)
        if hasattr(pred, "compute"):  # a dask array X: lazy labels, maybe of unknown length
            pred = np.asarray(pred.compute())
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y.ravel()
        if y.shape != pred.shape:
            # (found by review: one label broadcast against every prediction)
            raise ValueError(f"y has shape {y.shape}; score needs one label per row of X "
                             f"({pred.shape[0]} rows)")
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
        _persist.save_fields({name: self.__dict__.get(name) for name in self._FIELDS}, path)


_RESULT_FIELDS = frozenset(Result._FIELDS)
_NO_FIELDS = dict.fromkeys(Result._FIELDS)


def load_result(path, max_bytes=_persist.MAX_BYTES, allow_unbound=False):
    """Load a ``Result`` stored by ``Result.save``; safe on untrusted files.

    Parameters
    ----------
    path : str or os.PathLike
    max_bytes : int
        Limit on the total size of the file's arrays (1 GiB by default), checked before
        any of them is read; raise it for results with larger supports.
    allow_unbound : bool, default False
        Load a result whose certificate does not hold the model the result predicts with
        (files of format 3 and before, 4 and before for iterated Tikhonov kernel models,
        a plug-in's certificate built without its model, or a file edited so): its
        ``verify(X, y)`` then checks the claim about the data, not the model, and the
        load warns. By default such a file is refused: nothing in a file tells an old
        format or a plug-in's certificate from an edit that removed the model's copy (found
        by review: a certificate's copy removed and the model negated loaded with a
        warning, ``verify`` True, training accuracy 0).

    Raises
    ------
    FileNotFoundError, PermissionError, IsADirectoryError
        As ``open`` does.
    ValueError
        Anything else: not a results file, a header outside the schema, a member whose
        size disagrees with its header or exceeds the limits, an unknown plug-in or
        certificate type (import the package that registers it first). The message
        names the file and the place in the header.

    Notes
    -----
    What a loaded result claims is what its certificate's ``verify(X, y)`` recomputes
    from the data. The fields bound to the certificate (``certified_mask``, ``dual_coef_``,
    ``dual_vector``, the model ``predict`` uses) are compared with it on load; the other
    numbers (``margin_bounds``, ``certificate.value``, ``history``, ``time_s``) are the
    file's, for information. The margin bounds of the loaded variables are recomputed
    from the data by ``marginkit.certificates.margin_bounds(X, labels_pm(y, r.classes_),
    r.kernel, r.dual_coef_, r.dual_vector, memory_budget=r.config.memory_budget)``.
    """
    return read_result(path, max_bytes, allow_unbound)[0]


def read_result(path, max_bytes=_persist.MAX_BYTES, allow_unbound=False):
    """``load_result``, and how much of ``max_bytes`` the file used (``read_fields``)."""
    if not isinstance(allow_unbound, bool):
        raise TypeError(f"allow_unbound must be True or False, got {allow_unbound!r}")
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, (str, os.PathLike)) and not hasattr(path, "read"):
        raise TypeError(f"path must be a file name (str or os.PathLike) or a binary file "
                        f"object, got {type(path).__name__}")
    fields, used, version = _persist.read_fields(path, Result._FIELDS, max_bytes=max_bytes)
    _bind_config_to_certificate(fields, path)
    _bind_status_to_certificate(fields, path)
    _bind_model_to_certificate(fields, path, version, allow_unbound)
    _bind_variables_to_certificate(fields, path)
    return Result(**fields), used


class _RunOrigin:
    """The fields of a run (``solve``) where the binding functions below take a file's
    path: a run's result is held to what ``load_result`` requires of a file, and a
    mismatch is its solver's."""

    def __init__(self, solver):
        self.solver = solver


def _refusal(origin, what):
    """The error for fields that do not hold what their certificate checks (``what``): a
    file's (``ValueError``: it was edited), or a run's (``TypeError`` naming the solver
    whose ``finalize`` returned them)."""
    if isinstance(origin, _RunOrigin):
        return TypeError(f"solver {origin.solver!r} returned a result whose {what}: a "
                         "solver's finalize() must return the model and variables its "
                         "certificate checks")
    name = os.fspath(origin) if isinstance(origin, os.PathLike) else origin
    return ValueError(f"{name!r}: {what}; the file was edited")


def bind_run_fields(fields, solver):
    """A run's fields held to what ``load_result`` requires of a file's: the model the
    result predicts with and the variables it reports are those its certificate checks
    (found by review: a plug-in whose finalize returned another coef_ than its
    certificate's had its "separable" claim reported, predict right on half the training
    points, and the saved result refused on load). ``TypeError`` naming ``solver``
    otherwise."""
    origin = _RunOrigin(solver)
    _bind_model_to_certificate(fields, origin)
    _bind_variables_to_certificate(fields, origin)


def _bind_config_to_certificate(fields, path):
    """A certificate's thresholds are the run's: the configuration a certificate checks
    its claim with (its ``config``) is the result's ``config``, one object after loading,
    as ``solve`` returns them. Found by review: the file keeps both, and a certificate
    whose own copy was edited (a Newton-decrement tol of 1e300) or removed (its stored
    targets of 1e300 then read) verified any model. A certificate whose configuration is
    not the result's is refused; one without a configuration takes the result's (files
    of the first formats, plug-ins' certificates built without one). A result without a
    configuration (never one of ``solve``'s) loads with a warning that its certificate's
    thresholds are its own. Both copies edited alike cannot be told from the run's: the
    thresholds a certificate is checked with are those ``r.config`` shows."""
    cert = fields.get("certificate")
    if cert is None or not hasattr(cert, "config"):
        return  # a plug-in's certificate type that reads no configuration
    name = os.fspath(path) if isinstance(path, os.PathLike) else path
    run, own = fields.get("config"), cert.config
    if run is None:
        # never so in a file of solve's: the thresholds are the certificate's alone
        which = ("neither the result nor its certificate holds a run's configuration: the "
                 "certificate is checked against its own stored thresholds"
                 if own is None else "the result holds no configuration: its certificate is "
                 "checked against its own copy, which nothing else in the file confirms")
        warnings.warn(f"{name!r}: {which} ({type(cert).__name__})", UserWarning,
                      stacklevel=4)
        return
    if own is not None and not _same_config(run, own):
        raise ValueError(f"{name!r}: r.config is not the configuration its certificate "
                         "checks its claim with (r.certificate.fields.config); the file was "
                         "edited")
    cert.config = run


def _same_config(a, b):
    """Two configurations (``Config``, or their dict form) with equal fields."""
    import dataclasses

    from ._config import Config
    from .certificates import _same_value

    if not (isinstance(a, Config) and isinstance(b, Config)):
        return _same_value(a, b)
    return all(_same_value(getattr(a, f.name), getattr(b, f.name))
               for f in dataclasses.fields(Config))


def _bind_status_to_certificate(fields, path):
    """A loaded status that is a claim is the claim its certificate checks: a certificate
    of the claim's kind is required (``ValueError`` otherwise), and a certified-points
    certificate under the status "certified" checks that claim (more than the configured
    fraction of the points), whatever its stored ``claim`` says. Without this, a file
    whose status was edited from "max_iter" to "certified" loaded with a certificate that
    verifies: the one of the points it certifies, not of the status."""
    from .certificates import CLAIM_KINDS

    status = fields.get("status")
    kind = CLAIM_KINDS.get(status)
    if kind is None:
        # a status that is a claim of its solver only ("converged" of iterated Tikhonov,
        # always with its Newton-decrement certificate: found by review, a file with the
        # certificate removed and the model negated loaded as "converged")
        # (the solver named by the result or by its configuration: review, a file whose
        # solver field was renamed skipped the check)
        config = fields.get("config")
        kind = _solver_claims(fields.get("solver")).get(status) or \
            _solver_claims(getattr(config, "solver", None)).get(status)
    if kind is None:
        return
    cert = fields.get("certificate")
    if getattr(cert, "kind", None) != kind:
        have = "none" if cert is None else f"a {getattr(cert, 'kind', None)!r} certificate"
        name = os.fspath(path) if isinstance(path, os.PathLike) else path
        raise ValueError(f"{name!r}: the status {status!r} needs a {kind!r} "
                         f"certificate, the file holds {have}")
    if status == "certified" and hasattr(cert, "claim"):
        cert.claim = "certified"


def _solver_claims(solver):
    """``certified_statuses`` of a solver: a registered name or a plug-in instance ({} for
    anything else)."""
    from ._registry import get_plugin
    from .plugins import Solver

    if isinstance(solver, Solver):
        cls = type(solver)
    elif not isinstance(solver, str):
        return {}
    else:
        try:
            cls = get_plugin("solver", solver)
        except (KeyError, ValueError, TypeError):
            return {}
    claims = getattr(cls, "certified_statuses", None)
    return dict(claims) if isinstance(claims, dict) else {}


#: a certificate's attribute -> the result field that predicts with it (both kept by a run)
_CERTIFIED_MODEL = {"kernel": "kernel", "intercept": "intercept_", "coef": "coef_",
                    "classes": "classes_", "support_coef": "support_coef_"}
#: the first format version whose certificates hold the model the result predicts with
#: (a certificate type's own ``model_bound_since`` when later)
_MODEL_BOUND_SINCE = 4


def _finite_scores(scores):
    """``scores`` when finite, else ``ValueError`` naming the rows (as rows of the
    caller's X: ``_validation.rows_of_X``): a polynomial model's scores on rows of 1e120
    overflowed to NaN, which ``predict`` turned into the first class (found by review).
    An infinite score is refused too: a sum with one overflowing term has that term's
    sign, not always the exact sum's, and a regression's value is no number."""
    from ._validation import rows_of_X

    bad, where = rows_of_X(np.flatnonzero(~np.isfinite(scores)))
    if bad.size:
        raise ValueError(
            f"the decision function is not finite on {bad.size} row(s) {where} (first: "
            f"{bad[:10].tolist()}): the model's values overflow float64 there (a kernel's "
            "entries, or the products with the coefficients); rescale these rows as the "
            "training data were scaled, or choose parameters whose values stay finite")
    return scores


def predicting_model(fields):
    """The model ``Result.decision_function`` evaluates for these fields (a result's
    fields, or its ``__dict__``), the one definition of their order: ``("coef", coef_)``,
    ``("feature_space", extra["feature_space_coef"])`` (a kernel with a feature map),
    ``("support", (support_, support_coef_))``, or None (no model)."""
    if fields.get("coef_") is not None:
        return "coef", fields["coef_"]
    fcoef = (fields.get("extra") or {}).get("feature_space_coef")
    if fcoef is not None and getattr(fields.get("kernel"), "feature_map", None) is not None:
        return "feature_space", fcoef
    if fields.get("support_coef_") is not None:
        return "support", (fields.get("support_"), fields["support_coef_"])
    return None


def _bind_model_to_certificate(fields, path, version=_persist.VERSION, allow_unbound=False):
    """The loaded model is the one its certificate checks: the kernel (parameters and
    fit), the intercept, the feature-space coefficients and the labels a certificate holds
    are those the result predicts with, where both are stored. Without this, a file whose
    ``intercept_`` (or ``coef_``, the fit of ``kernel``, ``classes_``, a kernel model's
    ``support_`` or ``support_coef_``) was edited loaded with a certificate that verifies:
    the one of the model it certifies, not of the model that predicts. A certificate that
    binds a kernel model's rows and coefficients does so through ``predictor_mismatch``
    (a fingerprint its referee recomputes from X, y and its variables), given the model
    ``decision_function`` evaluates (``predicting_model``). A certificate that holds no
    model (files of format ``version`` 3 and before, a plug-in's certificate built
    without one, or one whose copy was removed) loads with a warning that it checks the
    claim about the data, not the model the result predicts with."""
    cert = fields.get("certificate")
    if fields.get("coef_") is None and fields.get("support_coef_") is None and \
            (fields.get("extra") or {}).get("feature_space_coef") is None:
        return  # no model predicts: a certificate kept on its own
    from .certificates import _or_linear

    # a certificate that holds the predicting model holds its kernel, labels and intercept
    # too: one of them removed from it (None) would leave that part of the model unbound
    holds = getattr(cert, "holds_model", None)
    binding = callable(holds) and holds()
    if binding and getattr(cert, "classes", None) is not None and \
            fields.get("task") not in (None, "classification"):
        raise _refusal(path, f"r.task is {fields.get('task')!r}, its certificate checks a "
                             "classifier")
    for attr, field in _CERTIFIED_MODEL.items():
        bound = getattr(cert, "bound_value", None)
        certified = bound(attr) if callable(bound) else getattr(cert, attr, None)
        used = fields.get(field)
        if field == "intercept_" and used is None:
            used = 0.0  # what decision_function adds for a missing intercept_
        if binding and attr in ("kernel", "classes", "intercept"):
            if attr == "kernel":  # None is the linear kernel, on either side
                certified, used = _or_linear(certified), _or_linear(used)
            if (certified is None) != (used is None):
                raise _refusal(path, f"r.{field} and its certificate's {attr} are not both "
                                     "given")
        if certified is None or used is None:
            continue
        if not _same_model(certified, used):
            raise _refusal(path, f"r.{field} is not the {attr} its certificate checks "
                                 f"(r.certificate.fields.{attr})")
    # the model decision_function evaluates is the one the certificate holds
    mismatch = getattr(cert, "predictor_mismatch", None)
    if callable(mismatch) and callable(holds):
        if not holds() and predicting_model(fields) is not None:
            if isinstance(path, _RunOrigin):
                return  # a plug-in's certificate of the claim alone (documented)
            name = os.fspath(path) if isinstance(path, os.PathLike) else path
            why = (f"was written by an earlier marginkit (format {version})"
                   if version < getattr(cert, "model_bound_since", _MODEL_BOUND_SINCE) else
                   "holds a certificate built without the model (a plug-in's, or edited)")
            if not allow_unbound:
                raise ValueError(
                    f"{name!r} {why}: its {type(cert).__name__} does not hold the model the "
                    "result predicts with, so its claim is not about that model; refused "
                    "(the file may have been edited to remove the model's copy). Loaded "
                    "with allow_unbound=True (marginkit.load_result, marginkit.load_model; "
                    "'marginkit predict --allow-unbound'), its certificate checks the claim "
                    "about the data only; or fit again")
            warnings.warn(
                f"{name!r} {why}: its {type(cert).__name__} checks the run's variables "
                "(its claim about the data), not the model the result predicts with; fit "
                "again to have both checked", UserWarning, stacklevel=4)
            return
        why = mismatch(predicting_model(fields), fields)
        if why is not None:
            raise _refusal(path, why)


#: a certificate's variables -> the result field that reports them (both kept by a run)
_CERTIFIED_VARIABLES = {"mask": "certified_mask", "r": "dual_coef_", "alpha": "dual_coef_",
                        "p": "dual_vector"}


def _bind_variables_to_certificate(fields, path):
    """The run's variables a result reports are the ones its certificate checks: the
    points it certifies (``certified_mask``, the certificate's ``mask``), the dual vector
    of an SVM (``dual_coef_``, its ``r``) or of a separator (its ``alpha``), and an
    infeasibility proof (``dual_vector``, its ``p``), where both are stored. Found by
    review: a file whose ``certified_mask`` was set to all True (12 of the points it then
    listed misclassified) or whose ``dual_coef_`` was negated loaded silently with a
    certificate that verifies."""
    cert = fields.get("certificate")
    if cert is None:
        return
    for attr, field in _CERTIFIED_VARIABLES.items():
        held, shown = getattr(cert, attr, None), fields.get(field)
        if held is None or shown is None:
            continue
        if not np.array_equal(np.asarray(held), np.asarray(shown)):
            raise _refusal(path, f"r.{field} is not the {attr} its certificate checks "
                                 f"(r.certificate.fields.{attr})")


def _same_model(a, b):
    """Equal values, plug-ins by parameters and by their fit (``saved_fit``: an rff seed,
    Nystroem centres), matrices entry by entry (dense or sparse)."""
    from .certificates import _same_value

    if sp.issparse(a) or sp.issparse(b):  # the same matrix, stored dense or sparse
        if not all(sp.issparse(v) or isinstance(v, np.ndarray) and v.ndim == 2 for v in (a, b)):
            return False
        return a.shape == b.shape and (sp.csr_matrix(a) != sp.csr_matrix(b)).nnz == 0
    if isinstance(a, dict) and isinstance(b, dict):
        return set(a) == set(b) and all(_same_model(a[k], b[k]) for k in a)
    if not _same_value(a, b):
        return False
    fit_a, fit_b = (getattr(v, "saved_fit", None) for v in (a, b))
    return not callable(fit_a) or not callable(fit_b) or _same_model(fit_a(), fit_b())
