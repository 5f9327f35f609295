"""scikit-learn estimators over ``marginkit.solve`` (``pip install marginkit[sklearn]``).

``PerceptronClassifier``, ``SVMClassifier``, ``IteratedTikhonovClassifier`` and
``IteratedTikhonovRegressor`` follow the scikit-learn estimator contract (``fit``,
``predict``, ``decision_function``, ``score``, ``get_params``/``set_params``,
``clone``, pickling) and pass ``sklearn.utils.estimator_checks``. More than two
classes are handled one-vs-rest: one ``marginkit.solve`` per class, class ``c``
against the rest, and ``predict`` takes the largest decision value.

Each estimator keeps the ``marginkit.Result`` of its fit in ``result_`` (for more
than two classes, ``result_`` is the list of one-vs-rest results, in ``classes_``
order), with the certificate, margin bounds and per-iteration history.

Hyper-parameters are validated when ``fit`` runs, by the same tables as
``marginkit.solve`` (``marginkit.Config`` and each solver's ``param_table``), so an
invalid value raises the same ``ValueError``/``TypeError`` naming the parameter.
Parameters left at ``None`` take the solver's own default.

Plug-in instances are hyper-parameters like any other (``SVMClassifier(solver=
mk.get_plugin("solver", "fista")(C=0.5))``): ``get_params(deep=True)`` lists their
parameters as ``solver__C``, ``set_params``/``GridSearchCV`` change them, ``clone`` copies
them, and ``fit`` solves with a copy, so a later ``set_params`` leaves ``result_`` as it
was solved. A solver instance keeps its own parameters unless the estimator's
hyper-parameter of the same name (``C``, ``mu``, ``scale``...) is moved from its default;
one parameter set to two different values in both places raises ``ValueError``.

Sample and class weights
------------------------
``SVMClassifier`` and ``PerceptronClassifier`` take ``class_weight`` (None,
``"balanced"``: n / (n_classes * bincount(y)), as scikit-learn, or a dict) and
``fit(X, y, sample_weight=None)``; the weight of sample i is
``sample_weight[i] * class_weight[y_i]`` (scikit-learn's ``compute_sample_weight`` on
the labels of ``fit``). Rows of weight 0 are dropped before solving (a zero weight is
the row's removal: the training set, and with it the scaling statistics and the
defaults C = 64/n, mu = n/128, are those of the remaining rows). One-vs-rest: every
binary sub-problem sees sample i with that same weight, as
``OneVsRestClassifier(SVC()).fit(X, y, sample_weight=w)`` passes the weights to each
binary fit (LIBLINEAR's own one-vs-rest weights only the positive class instead).

* ``SVMClassifier``: point i gets the dual box [0, C w_i], as LIBSVM's ``-wi`` and
  ``SVC(sample_weight=...)`` (mu=None is 1/(2 C w_max), w_max the largest weight, so that
  the weights act as there: ``SVMClassifier``'s ``mu``); the certificate of a
  weighted fit is checked with its weights on the rows solved: with
  ``w = clf.sample_weight_`` and ``keep = w > 0``,
  ``result_.certificate.verify(X[keep], y[keep], sample_weight=w[keep])``.
* ``PerceptronClassifier``: positive weights do not change whether the point set is
  separable, nor its certificates (Gordan's alternative holds for ``p`` and for any
  positive rescaling of it): the weighted fit drops the rows of weight 0 and solves the
  same feasibility problem on the others; the weights themselves change nothing else.
* ``IteratedTikhonovClassifier`` (``class_weight`` too) and ``IteratedTikhonovRegressor``
  (``sample_weight`` only): the weighted empirical risk 1/n sum_i w_i loss_i (n rows),
  the Newton decrement certificate recomputed with the weights.
"""
import contextlib
import functools
import inspect
import math
import numbers
import threading
import warnings
import weakref

import numpy as np
import scipy.sparse as sp
from scipy.special import expit, log_expit, logsumexp

try:
    from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.utils.metaestimators import available_if
    from sklearn.utils.multiclass import check_classification_targets
    from sklearn.utils.validation import check_is_fitted, column_or_1d
except ImportError as exc:  # pragma: no cover - exercised without scikit-learn only
    raise ImportError(
        "marginkit.sklearn needs scikit-learn; install it with "
        "'pip install marginkit[sklearn]' (marginkit.solve works without it)"
    ) from exc

try:
    from sklearn.utils.validation import validate_data as _sk_validate_data
except ImportError:  # scikit-learn < 1.6
    _sk_validate_data = None

# scikit-learn's own validation of sample weights (what its estimators and checks use)
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.validation import _check_sample_weight

from ._api import compose, resolve_kernel, unfinished_result, with_dual_certificate
from ._api import solve as _solve
from ._config import Config
from .plugins import Plugin
from .stopping import AUTO_DUAL_TOL
from ._validation import (Param, _float_dtype_for, _show, check_missing_labels, check_params,
                          check_known_columns, check_sample_weight, check_sparse_structure,
                          checked_csr, dask_array_of, label_count)
from .linalg._shared import shared_decompositions
from .utils._sparse import sparse_copy

__all__ = ["PerceptronClassifier", "SVMClassifier", "IteratedTikhonovClassifier",
           "IteratedTikhonovRegressor", "expected_failed_checks"]

_DTYPES = [np.float64, np.float32]


def _dtypes_for(X):
    dtype = getattr(X, "dtype", None)
    if isinstance(dtype, np.dtype) and dtype.kind in "biu":
        try:
            return [_float_dtype_for(dtype, "X")]
        except TypeError:
            return _DTYPES
    return _DTYPES


def _refuse_non_numbers(X):
    """Dates, durations and structured records are refused as ``solve`` refuses them:
    numpy's conversion reads them as numbers (seconds since 1970, a record's bytes),
    which scikit-learn's validation accepts (found by review: a model fitted on
    datetime64 X without a word). A DataFrame's columns are checked one by one."""
    dtypes = getattr(X, "dtypes", None)
    if dtypes is not None and not isinstance(dtypes, np.dtype):
        for col, dt in getattr(dtypes, "items", lambda: ())():
            # (pandas' timezone-aware dates are not a numpy dtype, but of kind "M")
            if getattr(dt, "kind", None) in ("m", "M", "V"):
                raise TypeError(f"X's column {col!r} has non-numeric dtype {dt}; pass "
                                "numbers (for example the dates' ordinals or differences "
                                "in seconds)")
    dtype = getattr(X, "dtype", None)
    if dtype is None and isinstance(X, (list, tuple)) and X:
        # rows of numpy dates in a list (found by review): their kind, from the first row
        first = X[0]
        first = first[0] if isinstance(first, (list, tuple)) and first else first
        dtype = getattr(first, "dtype", None)
    if isinstance(dtype, np.dtype) and dtype.kind in "mMV":
        _float_dtype_for(dtype, "X")


def _validate(estimator, X, y="no_validation", reset=True, y_numeric=False):
    """X (and y) through scikit-learn's public validation: CSR kept, float32/64 kept.

    Other dtypes follow marginkit's rule (``marginkit._validation``): bool and small
    integers become float32, other numbers float64.
    """
    if dask_array_of(X) is not None:
        # the estimators fit in memory: the chunks computed one at a time and stacked,
        # sparse ones kept sparse (numpy's conversion, scikit-learn's, makes a scalar of
        # a dask array of sparse chunks)
        from .certificates import local_matrix

        X = local_matrix(X)
    _refuse_non_numbers(X)
    if sp.issparse(X):
        # before scikit-learn's validation: its conversions run scipy's C++ code, which
        # trusts the index arrays
        n_labels = None if isinstance(y, str) else label_count(y)
        if X.format == "csr":
            # canonical (duplicates summed, indices sorted, no entries past indptr[-1]),
            # checked rather than read from scipy's cached flags: what the estimator's own
            # passes read (the appended intercept column, gamma="scale") is the matrix
            # solve reads (found by review: sp.hstack read stale entries past indptr[-1]
            # as the intercept column, and a stale has_canonical_format flag left
            # duplicates out of gamma's variance: other models, silently)
            X = checked_csr(X, "X")
        else:  # checked_csr checks the structure (once: found by review)
            if n_labels not in (None, X.shape[0]):
                # y's length against the declared rows before the conversion to CSR, whose
                # row pointers cost 8 bytes a declared row (as marginkit.solve does)
                raise ValueError("Found input variables with inconsistent numbers of "
                                 f"samples: [{X.shape[0]}, {n_labels}]")
            # converted here: a conversion beyond memory is a ValueError naming X (found
            # by review: numpy's MemoryError for 8 TiB of row pointers in predict)
            X = checked_csr(X, "X")
    if not y_numeric and not (isinstance(y, str) and y == "no_validation") \
            and y is not None and not sp.issparse(y) and dask_array_of(y) is None:
        # before scikit-learn's label checks, which read NaT as a date and pandas' NA as
        # "ambiguous" (labels numpy cannot hold in one array are left to them)
        try:
            labels = np.asarray(y)
        except (TypeError, ValueError):
            labels = None
        if labels is not None:
            check_missing_labels(labels, "y")
    kw = dict(accept_sparse="csr", dtype=_dtypes_for(X))
    if not sp.issparse(X) and not isinstance(X, np.ndarray):
        # a DataFrame or a list is converted anyway: into rows, the layout an ndarray of
        # the same numbers would usually have, so that both give the same scores
        kw["order"] = "C"
    if _sk_validate_data is not None:
        if isinstance(y, str) and y == "no_validation":
            return _sk_validate_data(estimator, X, reset=reset, **kw)
        return _sk_validate_data(estimator, X, y, reset=reset, y_numeric=y_numeric, **kw)
    from sklearn.utils.validation import check_array, check_X_y

    no_y = isinstance(y, str) and y == "no_validation"
    # feature_names_in_ of a DataFrame, read before the conversion drops the names
    # (BaseEstimator's method up to scikit-learn 1.5, where validate_data does not exist)
    check_names = getattr(estimator, "_check_feature_names", None)
    if check_names is not None:
        check_names(X, reset=reset)
    if no_y:
        X = check_array(X, **kw)
    else:
        X, y = check_X_y(X, y, y_numeric=y_numeric, **kw)
    if reset:
        estimator.n_features_in_ = X.shape[1]
    elif X.shape[1] != estimator.n_features_in_:
        raise ValueError(
            f"X has {X.shape[1]} features, but {type(estimator).__name__} is expecting "
            f"{estimator.n_features_in_} features as input."
        )
    return X if no_y else (X, y)



def _lazy_rows(estimator, method, X, n_outputs, dtype):
    """``method`` (one of ``estimator``'s in-memory methods) of a dask array ``X``: a lazy
    dask array with one block per row chunk, each computed where the chunk is by the
    in-memory method (which validates it). ``n_outputs`` > 1: 2-D results."""
    from ._dask import _check_sparse_sources

    check_is_fitted(estimator)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features), got a {X.ndim}-D dask array")
    check_known_columns(X)
    n_in = getattr(estimator, "n_features_in_", None)
    if n_in is not None and X.shape[1] != n_in:
        raise ValueError(f"X has {X.shape[1]} features, but {type(estimator).__name__} is "
                         f"expecting {n_in} features as input")
    _check_sparse_sources(X)  # before dask slices a scipy.sparse matrix in the graph
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})  # row chunks only: each block holds whole rows
    if n_outputs == 1:
        return X.map_blocks(_declared_block_method, method, drop_axis=1, dtype=dtype,
                            meta=np.empty((0,), dtype))
    return X.map_blocks(_declared_block_method, method, chunks=(X.chunks[0], (n_outputs,)),
                        dtype=dtype, meta=np.empty((0, 0), dtype))


def _declared_block_method(block, method, block_info=None):
    """``method(block)`` of a block that is the one its dask array declares; rows whose
    scores are not finite are named by their row in X (found by review: the chunk's own
    row numbers were given)."""
    from ._dask import _check_declared_block, chunk_first_row
    from ._validation import in_chunk

    if not block_info:
        return method(block)
    _check_declared_block(block, block_info)
    with in_chunk(chunk_first_row(block_info)):
        return method(block)


def _warn_unfinished(estimator, results, classes=None, stacklevel=4):
    """A ``ConvergenceWarning`` when a fit (any one-vs-rest fit, ``classes`` in the order
    of ``results``) ended on its budget (``max_iter``, ``time_limit``) without its claim;
    ``marginkit._api.unfinished`` decides which ends those are."""
    reasons = [(i, unfinished_result(r)) for i, r in enumerate(results)]
    reasons = [(i, why) for i, why in reasons if why is not None]
    if not reasons:
        return
    i, why = reasons[0]
    res = results[i]
    name = type(estimator).__name__
    where = ""
    if classes is not None:
        which = [classes[j].item() if hasattr(classes[j], "item") else classes[j]
                 for j, _ in reasons]
        where = (f" in {len(reasons)} of the {len(results)} one-vs-rest fits (classes "
                 f"{which}); class {which[0]!r} against the rest:")
    warnings.warn(
        f"{name}:{where} solver {res.solver!r} stopped with status {res.status!r} after "
        f"{res.n_iter} iterations, {why}. The model is the last iterate, with no certificate "
        "of its claim (status_ and result_ say so).",
        ConvergenceWarning, stacklevel=stacklevel)


def _solver_class(name):
    """The registered solver class of ``name``, or None (an unknown name is refused by
    ``compose`` with the registry's message)."""
    from ._registry import get_plugin

    try:
        return get_plugin("solver", name)
    except (KeyError, ValueError, TypeError):
        return None


def _same_value(a, b):
    """Whether two hyper-parameter values are the same (None, numbers, strings)."""
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return a is b


def _fresh(spec):
    """A copy of a plug-in instance, built from its parameters as scikit-learn's
    ``clone`` builds it; names, classes, callables and None unchanged."""
    if isinstance(spec, Plugin):
        return type(spec)(**spec.get_params())
    return spec


class _MarginKitEstimator(BaseEstimator):
    """Shared machinery: config from hyper-parameters, one or several solves."""

    #: registry name used when the estimator has no ``solver`` hyper-parameter
    _solver_name = None
    #: hyper-parameters that are solver parameters (passed when not None)
    _solver_keys = ()
    #: solver parameters passed even when None (None is a valid value for them)
    _always_keys = ()
    #: hyper-parameters of the estimator itself (not of the solver): name -> Param
    _own_params = {}

    def _prepare(self, X):
        """The matrix the solver sees (the estimator may add columns)."""
        return X

    def _solver_spec(self):
        return getattr(self, "solver", None) or self._solver_name

    def _solver_params(self, spec):
        """The estimator's solver hyper-parameters for a run of ``spec``.

        With a registry name, each one that is not None (and the ``_always_keys``) is
        passed. With a solver instance, its own parameters hold unless the estimator's
        hyper-parameter was moved from its default; one parameter set to two different
        values, on the estimator and on the instance, is refused rather than one of them
        silently ignored.
        """
        instance = isinstance(spec, Plugin)
        defaults = inspect.signature(type(self).__init__).parameters
        params = {}
        for k in self._solver_keys:
            v = getattr(self, k)
            if v is None and k not in self._always_keys:
                continue
            if instance:
                if v == defaults[k].default:
                    continue
                row = spec.param_table.get(k)
                mine = spec.params.get(k)
                if row is not None and mine != row.default and mine != v:
                    raise ValueError(
                        f"{type(self).__name__}: {k}={v!r} is given to the estimator and "
                        f"{k}={mine!r} to its solver {spec!r}; set {k} in one place only"
                    )
            params[k] = v
        return params

    def _config(self):
        # plug-in instances are copied: a later set_params on the hyper-parameter (e.g.
        # GridSearchCV's solver__C) must not change the configuration of a fitted result
        spec = _fresh(self._solver_spec())
        solver_params = self._solver_params(spec)
        own = {k: getattr(self, k) for k in self._own_params}
        check_params({k: self._own_params[k] for k in own}, own, owner=type(self).__name__)
        extra = getattr(self, "solver_params", None)
        if extra is not None:
            if not isinstance(extra, dict):
                raise TypeError(f"solver_params={extra!r} must be a dict of solver parameters or None")
            defaults = inspect.signature(type(self).__init__).parameters
            for k, v in extra.items():
                # a hyper-parameter moved from its default and set again in solver_params:
                # refused, as with a solver instance, rather than one of them ignored
                if k in solver_params and k in defaults and \
                        not _same_value(getattr(self, k), defaults[k].default) and \
                        not _same_value(solver_params[k], v):
                    raise ValueError(
                        f"{type(self).__name__}: {k}={getattr(self, k)!r} is given to the "
                        f"estimator and {k}={v!r} in solver_params; set {k} in one place only")
            solver_params.update(extra)
        stop = getattr(self, "stop", None)
        stop = type(stop)(map(_fresh, stop)) if isinstance(stop, (list, tuple)) else _fresh(stop)
        # None: the configuration's default budget
        budget = {} if self.memory_budget is None else {"memory_budget": self.memory_budget}
        cfg = Config(solver=spec, kernel=_fresh(self.kernel), kernel_params=self.kernel_params,
                     smoother=_fresh(getattr(self, "smoother", None)),
                     stop=stop, max_iter=self.max_iter,
                     random_state=self.random_state, verbose=self.verbose,
                     progress_bar=self.progress_bar, callback=self.callback,
                     solver_params=solver_params, warn=False, **budget)
        # warn=False: fit raises scikit-learn's ConvergenceWarning itself (once per fit)
        solver = compose(cfg)[0]  # unknown names and invalid solver/kernel parameters raise here
        self._task = getattr(solver, "task", "classification")
        return cfg

    def _fit_config(self, cfg, n_samples):
        """The configuration of a fit on ``n_samples`` rows (parameters that depend on n)."""
        return cfg

    def _set_fit_info(self, results):
        self.results_ = results
        self.n_iter_ = (results[0].n_iter if len(results) == 1
                        else np.array([r.n_iter for r in results]))
        self.status_ = (results[0].status if len(results) == 1 else [r.status for r in results])

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _more_tags(self):  # scikit-learn < 1.6
        return {"X_types": ["2darray", "sparse"]}


def _fit_weights(estimator, X, y, sample_weight):
    """The per-sample weights of a fit: ``sample_weight`` (scikit-learn's
    ``_check_sample_weight``: shape (n,), finite, >= 0) times the weights of
    ``class_weight`` on the labels ``y`` (``compute_sample_weight``), then marginkit's
    check (not all zero). None when neither is given."""
    class_weight = getattr(estimator, "class_weight", None)
    if sample_weight is None and class_weight is None:
        return None
    w = np.ones(X.shape[0])
    if sample_weight is not None:
        w = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True,
                                 copy=True)
    if class_weight is not None:
        if not (isinstance(class_weight, str) and class_weight == "balanced"
                or isinstance(class_weight, dict)):
            raise ValueError(f"class_weight={_show(class_weight)} must be None, 'balanced' or "
                             "a dict {class label: weight}")
        if isinstance(class_weight, dict):
            # each weight on its own (found by review: NaN, -1 and all-zero weights were
            # reported as sample_weight's, a string '2' and True were taken as numbers)
            for label, cw in class_weight.items():
                if isinstance(cw, (bool, np.bool_)) or not isinstance(cw, numbers.Real) or \
                        not (math.isfinite(float(cw)) and float(cw) >= 0):
                    raise ValueError(f"class_weight[{label!r}]={_show(cw)}: class weights must "
                                     "be finite numbers >= 0")
            if all(float(class_weight.get(c, 1.0)) == 0 for c in np.unique(y).tolist()):
                raise ValueError("class_weight gives every class of y the weight 0; give some "
                                 "class a positive weight")
        w = w * compute_sample_weight(class_weight, y)
    return check_sample_weight(w, X.shape[0])


#: the kernels whose gamma an estimator sets as scikit-learn's ``SVC(gamma="scale")`` does
#: when none is given (``_with_scale_gamma``)
SCALE_GAMMA_KERNELS = ("rbf", "poly")


def _with_scale_gamma(cfg, X, sample_weight=None):
    """``cfg`` with gamma = 1 / (n_features X.var()) (1 when X.var() is 0) for a kernel
    named ``"rbf"`` or ``"poly"`` given without a gamma: scikit-learn's ``SVC`` default
    ``gamma="scale"``, on the training rows (those of positive weight), each counted with
    its weight, ``sample_weight`` times ``class_weight`` (integer weights are repeated
    rows, as everywhere in the estimators; ``SVC`` ignores the weights there). A
    variance within rounding of 0 (X constant) gives 1, as in ``SVC``; a gamma outside
    float64's positive range (X near its limits) is refused, naming the fix. The kernels'
    own gamma=None, 1 / n_features, is SVC's former ``"auto"``, which fits the digits 3.5
    points worse. Any other configuration is returned as it is."""
    params = dict(cfg.kernel_params or {})
    if not (isinstance(cfg.kernel, str) and cfg.kernel in SCALE_GAMMA_KERNELS) or \
            params.get("gamma") is not None:
        return cfg
    var, top = _variance(X, sample_weight)
    if var <= (64 * np.finfo(np.float64).eps * top) ** 2:
        gamma = 1.0  # constant X: its computed spread is the mean's rounding
    else:
        with np.errstate(over="ignore", divide="ignore"):
            gamma = 1.0 / (X.shape[1] * var)
    if not (np.isfinite(gamma) and gamma > 0.0):
        raise ValueError(
            f"kernel {cfg.kernel!r} without a gamma takes SVC's gamma='scale', "
            f"1 / (n_features X.var()) = 1 / ({X.shape[1]} * {var:.3g}), which is outside "
            "float64's range on this X; rescale X or pass kernel_params={'gamma': ...}")
    params["gamma"] = float(gamma)
    return cfg.replace(kernel_params=params)


def _variance(X, w=None):
    """``(variance, largest magnitude)`` of all n * d entries of X (implicit zeros of a
    CSR matrix included, duplicates summed as scipy reads them), row i counted w_i times,
    in float64 by two passes over row blocks of a dense X (no float64 copy of it; a CSR
    matrix's stored values are copied). The weights count relative to the largest: the
    variance does not change, and the sum of huge finite weights (1e307 each) no longer
    overflows (found by review: the refusal then blamed X)."""
    n, d = X.shape
    w = np.ones(n) if w is None else np.asarray(w, dtype=np.float64)
    wmax = float(np.max(w, initial=0.0))
    if wmax > 0.0:
        w = w / wmax
    count = float(np.sum(w)) * d
    if sp.issparse(X):
        if not X.has_canonical_format:
            X = X.copy()
            X.sum_duplicates()
        data = X.data.astype(np.float64)
        top = float(np.max(np.abs(data), initial=0.0))
        wd = np.repeat(w, np.diff(X.indptr))  # the weight of each stored entry
        mean = float(wd @ data) / count
        zeros = float(w @ (d - np.diff(X.indptr)))  # weighted count of implicit zeros
        return (float(wd @ (data - mean) ** 2) + zeros * mean * mean) / count, top
    step = max(1, (1 << 20) // max(d, 1))
    blocks = [slice(lo, lo + step) for lo in range(0, n, step)]
    top = max(float(np.max(np.abs(X[b]), initial=0.0)) for b in blocks)
    with np.errstate(over="ignore"):
        mean = sum(float(w[b] @ np.sum(X[b], axis=1, dtype=np.float64))
                   for b in blocks) / count
        return sum(float(w[b] @ np.sum((np.asarray(X[b], dtype=np.float64) - mean) ** 2,
                                       axis=1)) for b in blocks) / count, top


def _precomputed(estimator):
    """Whether the estimator's kernel is ``"precomputed"`` (X the Gram matrix)."""
    try:
        kernel = resolve_kernel(_fresh(estimator.kernel), estimator.kernel_params)
    except (TypeError, ValueError, KeyError):
        return False  # the fit itself reports the kernel's error
    return bool(getattr(kernel, "precomputed", False))


def _computed(a):
    """A dask array computed (labels or weights of unknown length, for a score), anything
    else as it is."""
    return np.asarray(a.compute()) if dask_array_of(a) is not None else a


def _dask_score(estimator, metric, X, y, sample_weight):
    """``metric(y, estimator.predict(X))`` of a dask array X, predicted first (its sizes
    measured when unknown), y and the weights computed when they are dask arrays (found
    by review: dask's "Cannot call len()" on X[mask], y[mask])."""
    from ._referee import known_row_chunks

    pred = np.asarray(estimator.predict(known_row_chunks(X)).compute())
    return float(metric(_computed(y), pred, sample_weight=_computed(sample_weight)))


def _slots(estimator):
    """The ``__slots__`` names of ``estimator``'s class and its bases."""
    names = []
    for cls in type(estimator).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        names += [slots] if isinstance(slots, str) else [n for n in slots if n != "__dict__"]
    return names


def _snapshot(estimator):
    """A shallow copy of ``estimator`` made by one copy of its attribute dictionary (and
    of its slots, for a subclass that has them): the fitted state of one fit, whatever
    another thread publishes meanwhile."""
    view = object.__new__(type(estimator))
    view.__dict__ = dict(estimator.__dict__)
    for name in _slots(estimator):
        if hasattr(estimator, name):
            setattr(view, name, getattr(estimator, name))
    return view


def _on_one_fit(method):
    """A prediction method run on a ``_snapshot`` of the estimator, so that it reads the
    classes, width and results of one fit (found by review: a predict of one thread
    during a refit in another paired the new classes_ with the old results and inverted
    every label)."""
    @functools.wraps(method)
    def read(self, *args, **kwargs):
        return method(_snapshot(self), *args, **kwargs)
    return read


#: one re-entrant lock per estimator instance, serializing its fits, keyed by identity
#: (not equality: estimators whose __eq__ compares parameters, clones among them, shared
#: one lock and deadlocked; found by review) and dropped when the estimator is
_FIT_LOCKS = {}
_FIT_LOCKS_GUARD = threading.Lock()


def _fit_lock(estimator):
    key = id(estimator)
    with _FIT_LOCKS_GUARD:
        lock = _FIT_LOCKS.get(key)
        if lock is None:
            lock = _FIT_LOCKS[key] = threading.RLock()
            try:
                weakref.finalize(estimator, _FIT_LOCKS.pop, key, None)
            except TypeError:  # not weakly referenceable: the entry stays (a lock)
                pass
    return lock


_UNSET = object()


@contextlib.contextmanager
def _fitted_at_once(estimator):
    """A private copy of ``estimator`` (``_snapshot``) for a fit to set its attributes on
    (classes_, n_features_in_, then the results, along the way; a refit may also remove
    some, as feature_names_in_), whose changes become ``estimator``'s in one assignment of
    its attribute dictionary when the fit returns; nothing is published when it raises or is
    interrupted (``KeyboardInterrupt``). A refit that stopped half-way would pair the new
    data's classes and width with the old results, and so would a ``predict`` of another
    thread during a refit (found by review: every label of a two-class model inverted).

    Fits of one estimator are serialized (``_fit_lock``: two threads refitting it mixed
    the attributes of both fits, found by review); what else is set on it during a fit
    (a callback's attribute, ``set_params`` from another thread) is kept unless the fit
    itself changed that attribute."""
    lock = _fit_lock(estimator)
    if getattr(_FITTING, "ids", None) and id(estimator) in _FITTING.ids:
        # a fit of this estimator from within its own fit (a callback): the two would
        # publish over each other (found by review: a model of 3 features with
        # n_features_in_ 5 that predicted on neither)
        raise RuntimeError(f"{type(estimator).__name__}.fit was called during a fit of the "
                           "same estimator (from its callback?); fit a clone instead "
                           "(sklearn.base.clone)")
    with lock:
        _FITTING.ids = getattr(_FITTING, "ids", set()) | {id(estimator)}
        try:
            yield from _fit_and_publish(estimator)
        finally:
            _FITTING.ids = _FITTING.ids - {id(estimator)}


#: the estimators this thread is fitting (``_fitted_at_once``)
_FITTING = threading.local()


def _fit_and_publish(estimator):
    """``_fitted_at_once``'s body, under the estimator's fit lock: yields the private
    copy, then publishes what the fit changed."""
    before = dict(estimator.__dict__)
    slots_before = {n: getattr(estimator, n, _UNSET) for n in _slots(estimator)}
    work = _snapshot(estimator)
    yield work
    now = dict(estimator.__dict__)
    now.update({k: v for k, v in work.__dict__.items() if before.get(k, _UNSET) is not v})
    for k in set(before) - set(work.__dict__):
        now.pop(k, None)
    estimator.__dict__ = now
    for name, old in slots_before.items():
        new = getattr(work, name, _UNSET)
        if new is old:
            continue
        if new is _UNSET:
            if hasattr(estimator, name):
                delattr(estimator, name)
        else:
            setattr(estimator, name, new)


def _drop_rows(estimator, X, keep):
    """X without the rows of weight 0 (``keep`` False); with ``kernel="precomputed"``
    (X = K(X, X)) without their columns too, which are remembered so that prediction reads
    the same columns of K(X_new, X_train)."""
    if _precomputed(estimator):
        estimator._gram_columns = np.flatnonzero(keep)
        return X[keep][:, keep]
    return X[keep]


#: why an estimator has no ``coef_``: its model is not linear in X (both kinds of
#: estimator say it the same way; found by review: the regressor's linear kernel with
#: ``n_components`` was told to use kernel='linear')
_NOT_LINEAR_IN_X = (
    "coef_ and intercept_ exist for models linear in X (kernel='linear' without a kernel "
    "approximation); this model is not: see result_.support_ and result_.support_coef_ (a "
    "kernel expansion), or result_.extra['feature_space_coef'] (linear in a feature map)")


def _kept_columns(estimator, X):
    """K(X_new, X_train) restricted to the columns of the rows the fit solved (X itself
    unless a precomputed fit dropped rows of weight 0)."""
    cols = getattr(estimator, "_gram_columns", None)
    return X if cols is None else X[:, cols]


class _MarginClassifier(ClassifierMixin, _MarginKitEstimator):
    #: whether ``fit_intercept`` appends a column ``intercept_scaling`` to X, whose
    #: weight ``coef_`` then reports in ``intercept_`` (the perceptrons); the other
    #: estimators' intercept is the solver's own (found by review: the iterated Tikhonov
    #: classifier's coef_ raised AttributeError for a missing intercept_scaling)
    _intercept_column = False

    def _fit(self, X, y, sample_weight=None):
        cfg = self._config()
        X, y = _validate(self, X, y)
        check_classification_targets(y)
        self.classes_ = np.unique(y)
        if self.classes_.size < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of at least 2 classes; the data contain "
                f"one class ({self.classes_.tolist()})"
            )
        w = _fit_weights(self, X, y, sample_weight)
        self.sample_weight_ = w
        self._gram_columns = None
        if w is not None and not (w > 0).all():
            # a weight of 0 is the row's removal
            keep = w > 0
            X, y, w = _drop_rows(self, X, keep), y[keep], w[keep]
            left = np.unique(y)
            if left.size < 2:
                raise ValueError(f"{type(self).__name__}: the samples of positive weight "
                                 "are of one class; the classifier needs two")
            if left.size < self.classes_.size:
                gone = [c for c in self.classes_.tolist() if c not in set(left.tolist())]
                raise ValueError(
                    f"{type(self).__name__}: class(es) {gone} have no sample of positive "
                    "weight (sample_weight times class_weight); one-vs-rest fits one "
                    "problem per class of y: give them a positive weight or remove their "
                    "samples from y")
        cfg = _with_scale_gamma(cfg, X, w)
        # the constant column of this fit, which predict appends (not the hyper-parameters
        # of a later set_params: found by review, intercept_scaling changed after fit gave
        # predict another model than the certified one)
        self._column = self._fit_column()
        if self._column is not None:
            # the value the fit's dtype holds (float32 X: 1e30 is 1.0000000150474662e30),
            # which predict then appends exactly whatever X's dtype (review: a float64 fit
            # predicting float32 X appended float32(1e30), scores off by 2.6e20)
            with np.errstate(over="ignore"):
                held = float(X.dtype.type(self._column))
            if not (np.isfinite(held) and held != 0.0):
                # found by review: 1e39 overflowed a float32 column (the refusal then
                # blamed X for infinities it does not hold) and 1e-46 became 0 (no
                # intercept, silently)
                raise ValueError(
                    f"{type(self).__name__}: intercept_scaling={self._column!r} is "
                    f"{'0' if np.isfinite(held) else 'infinite'} as an entry of X's dtype "
                    f"{X.dtype}, the constant column fit_intercept appends; pass a value "
                    f"within its range ({np.finfo(X.dtype).tiny:.3g} to "
                    f"{np.finfo(X.dtype).max:.3g}), or X in float64")
            self._column = held
        X = self._solver_rows(cfg, self._prepare(X))
        # the weights of the run (solve refuses them where its solver does not take them)
        w = None if w is None else self._run_weights(w)
        kw = {} if w is None else {"sample_weight": w}
        cfg = self._fit_config(cfg, X.shape[0])
        pairs = [self.classes_[1]] if self.classes_.size == 2 else list(self.classes_)
        if len(pairs) > 1:
            # what the one-vs-rest runs share (they differ by y only)
            kw.update(self._shared_inputs(cfg, X))
        results = []
        # one-vs-rest runs decompose an exact kernel's Gram matrix once, not once per class
        shared = shared_decompositions(cfg.memory_budget) if len(pairs) > 1 \
            else contextlib.nullcontext()
        with shared:
            for c in pairs:
                self._fit_one(X, y, c, pairs, cfg, kw, results)
                if len(results) == 1 and len(pairs) > 1:
                    # what the first one-vs-rest run learned about X alone
                    cfg = self._follow_config(cfg, results[0])
        _warn_unfinished(self, results, pairs if len(pairs) > 1 else None)
        self._set_fit_info(results)
        self.result_ = results[0] if len(results) == 1 else results
        return self

    def _fit_one(self, X, y, c, pairs, cfg, kw, results):
        """The run of class c against the rest (of classes_[1] for two classes), appended
        to ``results``."""
        if cfg.verbose and len(pairs) > 1:
            # the progress lines of each one-vs-rest run under the class it separates
            label = c.item() if hasattr(c, "item") else c
            print(f"{type(self).__name__}: class {label!r} against the rest "
                  f"({len(results) + 1} of {len(pairs)})", flush=True)
        if self._task == "regression":
            # a regression loss (squared) fit to +-1 targets: least-squares classification
            results.append(_solve(X, np.where(y == c, 1.0, -1.0), config=cfg, **kw))
        elif len(pairs) == 1:
            # two classes: solve maps classes_[1] to +1, and the result (its
            # certificate) keeps the estimator's own labels
            results.append(_solve(X, y, config=cfg, **kw))
        else:
            # one-vs-rest labels 0/1: solve maps 1 (class c) to +1
            results.append(_solve(X, (y == c).astype(np.int8), config=cfg, **kw))

    def _run_weights(self, w):
        """The weights given to ``solve`` (all positive here)."""
        return w

    def _shared_inputs(self, cfg, X):
        """Keyword arguments of ``solve`` computed once for all one-vs-rest runs on X."""
        return {}

    def _solver_rows(self, cfg, X):
        """The matrix given to ``solve`` for the training rows X (the same rows)."""
        return X

    def _follow_config(self, cfg, first):
        """The configuration of the one-vs-rest runs after the first, given its result
        ``first`` (they differ from it by y only)."""
        return cfg

    @_on_one_fit
    def decision_function(self, X):
        """Signed scores: shape (n_samples,) for two classes (positive means
        ``classes_[1]``), else (n_samples, n_classes) one-vs-rest scores."""
        Xd = dask_array_of(X, "X")
        if Xd is not None:
            check_is_fitted(self)
            n = 1 if len(self.classes_) == 2 else len(self.classes_)
            return _lazy_rows(self, self.decision_function, Xd, n, np.float64)
        check_is_fitted(self)
        X = self._prepare(_kept_columns(self, _validate(self, X, reset=False)))
        scores = [r.decision_function(X) for r in self.results_]
        return scores[0] if len(scores) == 1 else np.column_stack(scores)

    @_on_one_fit
    def _linear_parts(self):
        check_is_fitted(self)
        coefs = [r.coef_ for r in self.results_]
        if any(c is None for c in coefs):
            raise AttributeError(_NOT_LINEAR_IN_X)
        W = np.vstack([np.asarray(c, dtype=np.float64).ravel() for c in coefs])
        b = np.array([float(r.intercept_ or 0.0) for r in self.results_])
        column = self._fitted_column()
        if column is not None:
            b = b + W[:, -1] * column
            W = W[:, :-1]
        return W, b

    def _fit_column(self):
        """The value of the constant column ``fit_intercept`` appends to X (the
        perceptrons), or None."""
        if self._intercept_column and getattr(self, "fit_intercept", False):
            return float(self.intercept_scaling)
        return None

    def _fitted_column(self):
        """``_fit_column`` as the fit saw it (its hyper-parameters then)."""
        return self.__dict__["_column"] if "_column" in self.__dict__ else self._fit_column()

    @property
    def coef_(self):
        """Weights of the linear model(s), shape (1, n_features) for two classes, else
        (n_classes, n_features); only for ``kernel="linear"``."""
        return self._linear_parts()[0]

    @property
    def intercept_(self):
        """Offsets of the linear model(s), shape (1,) or (n_classes,)."""
        return self._linear_parts()[1]

    def score(self, X, y, sample_weight=None):
        """Mean accuracy on (X, y), as scikit-learn's; a dask array X is predicted first
        (its rows may be of unknown number: found by review)."""
        if dask_array_of(X, "X") is None:
            return super().score(X, y, sample_weight=sample_weight)
        from sklearn.metrics import accuracy_score

        return _dask_score(self, accuracy_score, X, y, sample_weight)

    @_on_one_fit
    def predict(self, X):
        """Class labels (from ``classes_``); for a dask array X, a lazy dask array."""
        Xd = dask_array_of(X, "X")
        if Xd is not None:
            check_is_fitted(self)
            return _lazy_rows(self, self.predict, Xd, 1, self.classes_.dtype)
        d = self.decision_function(X)
        if d.ndim == 1:
            return self.classes_[(d > 0).astype(int)]
        return self.classes_[np.argmax(d, axis=1)]


# ----------------------------------------------------------------------------- perceptron
class PerceptronClassifier(_MarginClassifier):
    """Perceptron / von Neumann family (Ramdas & Pena 2014): separator or infeasibility certificate.

    Parameters
    ----------
    solver : str or Solver, default "snkp"
        ``perceptron``, ``normalized_perceptron``, ``nkp``, ``snkp`` (smoothed normalized
        kernel perceptron, Ramdas & Pena 2014 sec. 4), ``nvn``, ``snkpvn``, ``isnkpvn`` (also give
        an infeasibility certificate ``||p||_G <= eps``, Ramdas & Pena 2014 sec. 5-6), or any
        registered solver. The separating-only solvers (``snkp``, the default, ...) stop
        on a separator, or, through ``tol``, on a certificate that none with a normalized
        margin above ``tol`` exists. ``isnkpvn`` ends either way at its own tolerance
        eps, which is ``tol`` here (``solver_params={"eps": ...}`` sets another; the
        solver's own default, with ``tol=None``, is 1e-6): a certified separator
        (``"separable"``) or a certificate that no separator of this kernel has a
        normalized margin above eps (``"infeasible"``: classes that overlap, or that a
        thinner margin than eps separates), the latter in ``O(sqrt(n) / max(abs(rho), eps)
        log(1/eps))`` iterations on overlapping data (Theorem 4; on a9a 70 iterations at
        eps = 1e-3, 124 at 1e-6, under a second; on madelon 236 iterations, 1.5 s, at
        1e-3, where 1e-6 was not reached in 100,000 iterations and 8 minutes). Data
        separable only with a margin below 1e-3 need a smaller ``tol`` (or ``tol=None``)
        to end ``"separable"``.
    kernel : str, Kernel or callable, default "linear"
    kernel_params : dict, optional
        e.g. ``{"gamma": 0.5}`` for ``"rbf"``. ``"rbf"`` and ``"poly"`` without a gamma
        take scikit-learn's ``SVC`` default ``gamma="scale"``: 1 / (n_features X.var())
        on the training X (1 when X.var() is 0), the value used in
        ``result_.config.kernel_params["gamma"]`` (``mk.solve``'s kernels take
        1 / n_features, SVC's former ``"auto"``).
    fit_intercept : bool, default True
        Append the constant feature ``intercept_scaling`` to every sample (homogeneous
        coordinates), so that separators ``f(x) = <w, phi(x)> + b`` with an offset are
        found by the paper's homogeneous algorithms; it also keeps every row nonzero,
        which the normalized Gram ``K_ij / sqrt(K_ii K_jj)`` needs. ``result_`` (and its
        certificate) then refers to the augmented matrix ``[X, intercept_scaling]``.
        False: the homogeneous problem of Ramdas & Pena 2014 on ``X`` as given (rows with
        ``K(x, x) = 0`` are rejected by the solvers).
    intercept_scaling : float, default 1.0
    tol : float in (0, 1), "auto" or None, default "auto"
        With the default rules (``stop=None``) of a solver whose rules certify no
        infeasibility (``perceptron``, ``normalized_perceptron``, ``nkp``, ``snkp``), the
        fit also ends when the solver holds a point p of the simplex with ``||p||_G <=
        tol`` (the ``dual_certificate`` rule): status ``"infeasible"``, and a certificate,
        re-checked on the data, that no classifier of this kernel separates the classes
        with a normalized margin above ``tol`` (Lemma 3: every margin is at most
        ||p||_G). On overlapping classes the fit then ends after a few hundred
        iterations instead of running to ``max_iter`` (a9a: ``snkp`` ends after 160
        iterations, 0.15 s, and its iterate tests at 85.0%; ``||p_k||_G`` falls about as
        1/k^2). On separable data whose normalized margin is above ``tol`` it cannot
        fire: those end with a separator. None: the solver's own rules only (a
        separator or ``max_iter``). The solvers whose rules certify infeasibility already
        (``nvn``, ``snkpvn``, ``isnkpvn``) take ``tol`` as their own tolerance (``eps``,
        ``delta``: ``Solver.dual_tol_param``). A solver's own tolerance given by the user
        (in ``solver_params``, or on a solver instance) wins: ``tol="auto"`` then certifies
        at it, for the separating solvers too. ``"auto"``: ``tol=1e-3`` where it can act,
        else the solver's own rules: with an explicit ``stop``, with a solver whose own
        rules hold a ``dual_certificate`` that ``tol`` cannot set (an eps of their own),
        and with a plug-in solver that does not provide ``dual_norm``
        (``Solver.provides``; the rule reads ``||p||_G`` of the solver's point p from the
        run's state, and the solver certifies the claim). A number is never ignored: in
        those three cases, and when it differs from a tolerance the user gave the solver,
        ``fit`` raises ``ValueError`` saying what to set instead.
    smoother : str, optional
        Prox-function of the smoothed solvers (``"entropy"``, ``"l2"``); None: the
        solver's default.
    stop : stopping specification, optional
        As in ``marginkit.solve``; None: the solver's own rules.
    max_iter : int, optional
        Iteration cap per binary problem; None: the solver's default.
    random_state : int, Generator or None
    verbose : int, default 0
        As in ``marginkit.solve``: 1 prints progress lines (iteration, seconds, the
        solver's progress measures) on stdout, 2 every iteration.
    callback : callable, optional
        ``fn(state) -> bool`` between iterations; True stops the run.
    solver_params : dict, optional
        Further solver parameters (``{"eps": 1e-6}`` for ``isnkpvn``).
    class_weight : None, "balanced" or dict, default None
        Only which samples have weight 0 matters (see Notes).
    progress_bar : bool, default False
        A ``tqdm`` progress bar of each solve on stderr, in place of ``verbose``'s lines
        (one bar per binary problem of a one-vs-rest fit); needs ``tqdm``
        (``pip install marginkit[progress]``), and ``fit`` says so when it is missing.
    memory_budget : float or None, default None
        Bytes a solve may hold for the Gram matrix or a kernel approximation
        (``marginkit.solve``'s ``memory_budget``); None: its default, 2 GiB. A fit that
        needs more is refused with a message saying how much it needs.

    Attributes
    ----------
    classes_ : ndarray
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        The column names of a pandas DataFrame given to ``fit`` (only when they are all
        strings); ``predict`` and ``decision_function`` then refuse a DataFrame whose
        columns differ and warn on an array, as scikit-learn's estimators do.
    result_ : marginkit.Result or list of Result
        The solve of the last fit (a list, one per class, for more than two classes).
        With ``fit_intercept=True`` (the default) it was solved on X with the intercept
        column ``intercept_scaling`` appended, so its ``predict`` and its certificate's
        ``verify`` read that X, ``np.hstack([X, np.full((n, 1), intercept_scaling)])``;
        the estimator's own ``predict`` and ``decision_function`` take X as given.
    sample_weight_ : ndarray of shape (n_samples,) or None
        ``sample_weight`` times ``class_weight`` (None when neither was given).
    results_ : list of Result
    n_iter_ : int or ndarray
    status_ : str or list of str
        ``"separable"`` (a separator was certified), ``"infeasible"`` (the classes
        cannot be separated with this kernel, certified), ``"max_iter"``...

    Notes
    -----
    **Weights only select rows.** The family solves the feasibility problem "is there
    f with y_i f(x_i) > 0 for all i", which positive weights do not change:
    ``fit(X, y, sample_weight=w)`` (and ``class_weight``) drops the rows of weight 0 and
    solves the unweighted problem on the others; any positive weights give the same
    model as weights of one. This is a separability solver, not an error minimizer. On
    data that are not separable the separating solvers (``perceptron``,
    ``normalized_perceptron``, ``nkp``, ``snkp``, the default) end at ``tol`` with
    ``status_ == "infeasible"`` and its certificate (``result_.certificate``: a convex
    combination p of the points with ``||p||_G <= tol``, re-checked on the data), or,
    with ``tol=None``, run to ``max_iter`` (``ConvergenceWarning``); the model is their
    last iterate. ``solver="isnkpvn"`` ends with its certificate after few iterations
    (70 on a9a at the default ``tol``), its last iterate carrying no accuracy claim (on a9a it scores about
    chance). No accuracy is claimed for a model of overlapping classes: for one, use
    ``SVMClassifier`` or ``IteratedTikhonovClassifier``.
    scikit-learn's accuracy thresholds on overlapping data are not this estimator's
    claim (``poor_score`` tag).

    References
    ----------
    A. Ramdas and J. Peña, "Margins, Kernels and Non-linear Smoothed Perceptrons",
    Proceedings of the 31st International Conference on Machine Learning (ICML 2014);
    arXiv:1505.04123.

    Examples
    --------
    >>> import numpy as np
    >>> from marginkit.sklearn import PerceptronClassifier
    >>> X = np.array([[0.0, 1.0], [1.0, 0.1], [2.0, 2.0], [-1.0, -2.0]])
    >>> y = np.array(["no", "no", "yes", "yes"])
    >>> clf = PerceptronClassifier(kernel="rbf", kernel_params={"gamma": 1.0}).fit(X, y)
    >>> clf.predict(X).tolist(), clf.result_.status
    (['no', 'no', 'yes', 'yes'], 'separable')
    """

    _own_params = {
        "fit_intercept": Param(True, types=bool, doc="append a constant feature (intercept)"),
        "intercept_scaling": Param(1.0, types=numbers.Real, low=0, low_open=True,
                                   doc="value of the constant feature"),
        "tol": Param("auto", types=numbers.Real, options=("auto",), low=0, low_open=True,
                     high=1, high_open=True, allow_none=True,
                     doc="end with an infeasibility certificate once ||p||_G <= tol "
                         "('auto': 1e-3 where the solver's rules allow it)"),
    }

    #: the eps of ``tol="auto"``
    AUTO_TOL = AUTO_DUAL_TOL

    def _config(self):
        """The hyper-parameters' configuration; with ``stop=None`` and a ``tol``, the
        solver's own rules plus ``dual_certificate(eps=tol)`` where they have none.

        ``tol="auto"`` adds the rule (eps = ``AUTO_TOL``) where it can act and leaves the
        solver's own rules otherwise; a number given for ``tol`` acts, or is refused with
        what to do instead (it is never ignored)."""
        cfg = super()._config()
        tol = self.tol
        if tol is None:
            return cfg
        auto = isinstance(tol, str)
        shown = f"{type(self).__name__}: tol={tol!r}"
        if self.stop is not None:
            if auto:
                return cfg  # an explicit stop is the user's: nothing is added
            raise ValueError(
                f"{shown} adds a rule to the solver's default rules (stop=None), and stop="
                f"{self.stop!r} is given: put ('dual_certificate', {{'eps': {tol!r}}}) in stop, "
                "or pass tol=None")
        added, why, sname = with_dual_certificate(cfg, self.AUTO_TOL if auto else float(tol),
                                                  own_tolerance=True)
        if why == "given":
            solver = compose(cfg)[0]
            param = solver.dual_tol_param
            if auto or solver.params[param] == float(tol):
                return added  # at the tolerance the user gave the solver
            raise ValueError(
                f"{shown}: the own tolerance on ||p||_G of solver {sname!r} ({param}) is "
                f"given already, in solver_params or on the solver instance: set "
                f"{param}={tol!r} there, or pass tol=None or 'auto' to keep it")
        if why == "own":
            if auto:
                return cfg
            raise ValueError(
                f"{shown}: solver {sname!r} certifies infeasibility with its own rules "
                "(a dual_certificate rule) at a tolerance tol cannot set (the rule has its "
                "own eps, or the solver names no dual_tol_param): pass tol=None or 'auto' "
                "for those rules, or stop=[..., ('dual_certificate', {'eps': ...})]")
        if why is not None:
            missing = why
            if auto:
                return cfg
            raise ValueError(
                f"{shown} adds the dual_certificate rule, which reads {', '.join(missing)} "
                f"(||p||_G of the solver's point p of the simplex) from the run's state; "
                f"solver {sname!r} does not provide it (Solver.provides): pass tol=None or "
                "'auto' for the solver's own stopping rules, or give the solver's state a "
                f"{missing[0]} attribute and list it in provides")
        return added

    _intercept_column = True  # fit_intercept appends the column intercept_scaling

    def __init__(self, solver="snkp", kernel="linear", kernel_params=None, fit_intercept=True,
                 intercept_scaling=1.0, tol="auto", smoother=None, stop=None, max_iter=None,
                 random_state=None, verbose=0, callback=None, solver_params=None,
                 class_weight=None, progress_bar=False,
                 memory_budget=None):
        self.solver = solver
        self.class_weight = class_weight
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.smoother = smoother
        self.stop = stop
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state
        self.verbose = verbose
        self.progress_bar = progress_bar
        self.memory_budget = memory_budget
        self.callback = callback
        self.solver_params = solver_params

    def _prepare(self, X):
        column = self._fitted_column()
        if column is None:
            return X
        if _precomputed(self):
            raise ValueError(
                f"{type(self).__name__}(kernel='precomputed'): fit_intercept=True appends a "
                "constant feature to X, which is the Gram matrix here; pass "
                "fit_intercept=False (for an intercept in the feature space, add "
                "intercept_scaling**2 to every entry of K(X, X) and of K(X_new, X_train))")
        # the fitted value exactly: in X's dtype when it holds it, else in float64; an
        # estimator fitted before the value was recorded (a pickle without ``_column``)
        # appends it in X's dtype, as its fit did
        dtype = X.dtype
        if "_column" in self.__dict__:
            with np.errstate(over="ignore"):
                if float(X.dtype.type(column)) != column:
                    dtype = np.dtype(np.float64)
        col = np.full((X.shape[0], 1), column, dtype=dtype)
        if sp.issparse(X):
            return sp.hstack([X, sp.csr_matrix(col)], format="csr")
        return np.hstack([X, col])

    def fit(self, X, y, sample_weight=None):
        """Solve the separation problem (one-vs-rest for more than two classes).

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features)
        y : array-like, shape (n_samples,)
        sample_weight : array-like, shape (n_samples,), optional
            Rows of weight 0 are dropped; positive weights do not change the
            separability problem (see Notes).

        Returns
        -------
        self
        """
        with _fitted_at_once(self) as work:
            work._fit(X, y, sample_weight)
        return self

    def _run_weights(self, w):
        return None  # positive weights: the same feasibility problem

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.poor_score = True
        return tags


# ----------------------------------------------------------------------------- SVM
class SVMClassifier(_MarginClassifier):
    """SVM family (arXiv:2512.03947): hinge-loss SVM with a certified stop.

    Parameters
    ----------
    solver : str or Solver, default "fista"
        ``fista`` (perturbed H-SVM dual with a box constraint, arXiv:2512.03947 sec. 3),
        ``fista_svm`` (classical SVM with unregularized intercept), ``dcd`` (dual
        coordinate descent on the same dual as ``fista``, sec. 4), ``pegasos``, ``"auto"``,
        or any registered solver. ``"auto"``: ``dcd``, for every kernel (through the
        rows of a feature map for ``linear``, ``nystroem`` and ``rff``, through a kernel
        row cache for Gram kernels such as ``rbf``, callables and ``precomputed``). Both
        solve the same perturbed dual with the same certified stop; on 7,000 MNIST rows
        ``dcd`` certifies each one-vs-rest problem in about 40 epochs where ``fista``
        needs about 300 iterations of two full products each, and on an RBF kernel it
        certifies after one pass over the points where ``fista`` needs about 50 products
        with the Gram matrix (``result_.solver`` names the one that ran).
    C : float, optional
        **LIBSVM's -c**: the bound of the dual variables, ``0 <= r_i <= C``, i.e. the
        weight of each point's hinge loss in ``1/2 ||w||^2 + C sum_i hinge_i``, as in
        ``sklearn.svm.SVC(C=...)`` and ``LinearSVC(loss="hinge", C=...)``.
        C=None is the paper's default 64/n (arXiv:2512.03947, sec. 2.4), LIBSVM's
        ``-c 64/n``: 0.24 on 270 points, 0.002 on 32,561, far below scikit-learn's
        default C=1.0 (a much more regularized model); pass ``C=1.0`` for that default.
        ``pegasos`` minimizes lam/2 ||w||^2 + 1/n sum_i hinge_i, which is this objective
        scaled by lam with lam = 1/(C n): ``C`` given with ``solver="pegasos"`` sets
        lam = 1/(C n) for the n training rows of each fit (C=None: pegasos' own default
        lam = 1/64, i.e. C = 64/n); passing both C and lam is refused.
    mu : float, optional
        Perturbation of the dual, ``- mu/2 ||r||^2`` in its objective; None is the
        paper's default n/128 (mu C = 1/2 at the default C), and 1/(2C) with a given C
        (any kernel), so that mu C = 1/2 there too. In the primal it replaces the hinge
        of a margin violation s = 1 - y_i f(x_i) by a Huber-smoothed hinge,
        ``s^2 / (2 mu)`` for ``0 <= s <= mu C`` and ``C s - mu C^2 / 2`` beyond (slope C,
        LIBSVM's, for large violations): at mu C = 1/2 the quadratic zone is half the
        margin (mu C w_i for a point of weight w_i: with weights, mu=None is 1/(2 C w_max),
        w_max the largest weight, so that every zone is at most half the margin and the
        weights act as in ``SVC``: docs/svm.md, "What C means"). A smaller mu (``mu=1e-4``) gives
        LIBSVM's model more closely, at the cost of more iterations. ``fista`` and
        ``dcd`` regularize the intercept (as LIBLINEAR ``-B 1`` and ``LinearSVC`` do),
        ``fista_svm`` leaves it free (as LIBSVM and ``SVC`` do); with ``scale="std"`` C
        applies to the standardized features (on sparse 0/1 features with a large C,
        ``scale=None`` is LIBLINEAR's setting and much faster for ``dcd``: docs/svm.md).
    scale : {"std", "scale", None}, default "std"
        ``"std"``: the solver centres and scales the features implicitly (without
        forming the scaled matrix, arXiv:2512.03947 sec. 5.1) and reports ``coef_`` in the
        original feature space; ``"scale"``: divides them by their standard deviation
        without centring; None: the features as given.
    kernel, kernel_params, stop, max_iter, random_state, verbose, callback, solver_params
        As in ``PerceptronClassifier``.
    class_weight : None, "balanced" or dict, default None
        Per-class weights, multiplied into the sample weights: ``"balanced"`` gives class
        c the weight n / (n_classes * n_c), as scikit-learn's ``SVC(class_weight=...)``.
    progress_bar : bool, default False
        As in ``PerceptronClassifier``.
    memory_budget : float or None, default None
        As in ``PerceptronClassifier``.

    Attributes
    ----------
    classes_, n_features_in_, result_, results_, n_iter_, status_
        As in ``PerceptronClassifier``; ``result_.certified_mask`` marks the training
        points certified correctly classified.
    sample_weight_ : ndarray of shape (n_samples,) or None
        The weights of the fit, ``sample_weight`` times ``class_weight`` (None when
        neither was given).
    support_, support_vectors_, dual_coef_, n_support_, intercept_
        As ``sklearn.svm.SVC`` names them, for the solvers with a dual vector r (``fista``,
        ``fista_svm``, ``dcd``): ``support_`` the indices of the training points with
        r_i > 0 in any of the binary problems, ``support_vectors_`` those rows (for
        exact kernels; None for ``kernel="precomputed"`` and for models linear in X or
        in a feature map, which keep ``coef_`` instead), ``dual_coef_`` y_i r_i on them, ``n_support_`` the
        number of them in each class, ``intercept_`` the intercepts. The layout is
        one-vs-rest: ``dual_coef_`` has one row per binary problem (one for two classes,
        ``n_classes`` otherwise, row k for class ``classes_[k]`` against the rest) and
        ``decision_function(X)[:, k] = K(X, support_vectors_) @ dual_coef_[k] +
        intercept_[k]``; SVC's is one-vs-one (``n_classes - 1`` rows, n(n-1)/2
        intercepts).

    Notes
    -----
    With sample weights w (``fit(X, y, sample_weight=w)``, times ``class_weight``), point
    i gets the dual box ``0 <= r_i <= C w_i``, as LIBSVM's ``-wi`` and
    ``SVC(sample_weight=...)``: the primal weights point i's (smoothed) hinge loss by
    C w_i. The perturbation mu is the same for all points; a point is certified when
    min(C w_i, 1/mu) - r_i exceeds the error bound, so a point of small weight is
    certified less easily. Rows of weight 0 are dropped before solving. The certificate
    of a weighted fit is checked with its weights on the rows solved: with
    ``w = clf.sample_weight_`` (class weights included) and ``keep = w > 0``,
    ``result_.certificate.verify(X[keep], y[keep], sample_weight=w[keep])`` (with
    ``kernel="precomputed"``, ``X[keep][:, keep]``: the fit removes the rows of weight 0
    from both sides of the Gram matrix, and prediction reads the columns of the rows kept).

    A dense X with at most a quarter of non-zero entries is solved, by ``fista``,
    ``fista_svm`` and ``dcd`` on the linear kernel, as a CSR copy of its non-zeros (as
    LIBLINEAR does; the same problem, a third of the time on MNIST) when the copy fits
    ``memory_budget``; ``verbose=1`` says so (docs/svm.md, "Dense rows that are mostly
    zeros").

    Integer weights are not row repetition for the defaults: repeating rows changes n,
    hence C = 64/n, mu = n/128 and the scaling statistics of ``scale="std"``, and the
    perturbation mu/2 r_i^2 of one point of weight 2 is not that of two copies; the
    weighted problem equals the repeated one for given C and scale=None as mu -> 0.

    References
    ----------
    "Data-Dependent Complexity of First-Order Methods for Support Vector Machines",
    arXiv:2512.03947 (2025).

    Examples
    --------
    >>> from marginkit.datasets import load_heart_scale
    >>> from marginkit.sklearn import SVMClassifier
    >>> X, y = load_heart_scale()
    >>> clf = SVMClassifier().fit(X, y)
    >>> clf.result_.status, clf.result_.certificate.verify(X, y)
    ('certified', True)
    >>> bool(clf.score(X, y) > 0.8)
    True
    """

    _solver_keys = ("C", "mu", "scale")
    _always_keys = ("scale",)

    def _solver_spec(self):
        spec = self.solver
        if isinstance(spec, str) and spec == "auto":
            # dcd runs on the rows of a feature map or on a Gram kernel's row cache
            return "dcd"
        return spec

    def _solver_params(self, spec):
        params = super()._solver_params(spec)
        self._lam_from_C = None
        cls = type(spec) if isinstance(spec, Plugin) else \
            spec if isinstance(spec, type) else _solver_class(spec)
        table = getattr(cls, "param_table", None) or {}
        if "C" in params and "C" not in table and "lam" in table:
            # pegasos' lam/2 ||w||^2 + 1/n sum hinge is 1/(lam n) times
            # 1/2 ||w||^2 + 1/(lam n) sum hinge: C = 1/(lam n), set once n is known
            C = params.pop("C")
            mine = spec.params.get("lam") if isinstance(spec, Plugin) else None
            extra = self.solver_params.get("lam") if isinstance(self.solver_params, dict) \
                else None
            if C is not None and (extra is not None or (
                    mine is not None and mine != table["lam"].default)):
                raise ValueError(
                    f"{type(self).__name__}: C={C!r} and lam are both given to solver "
                    f"{getattr(cls, 'name', None) or spec!r}, whose lam is 1/(C n); set one "
                    "of them")
            self._lam_from_C = C
        if cls is not None and table:
            foreign = [k for k in params if k not in table]
            if foreign:
                name = getattr(cls, "name", None) or spec
                if "scale" in table:
                    # an SVM solver without some of the estimator's parameters (pegasos: mu)
                    raise TypeError(
                        f"{type(self).__name__}: solver {name!r} takes no "
                        f"{', '.join(foreign)} (its parameters: {sorted(table)}); leave "
                        f"{', '.join(foreign)} at None")
                raise TypeError(
                    f"{type(self).__name__}: solver {name!r} takes no {', '.join(foreign)}, "
                    f"which {type(self).__name__} passes to its solver: it runs the SVM "
                    "solvers (fista, fista_svm, dcd, pegasos, or a plug-in taking C, mu and "
                    "scale); for the perceptron family use PerceptronClassifier, for "
                    "iterated_tikhonov IteratedTikhonovClassifier")
        return params

    def _solver_rows(self, cfg, X):
        """A CSR copy of a dense X with at most ``SPARSE_COPY_DENSITY`` (a quarter) of
        non-zero entries, for the linear kernel and the solvers that read the rows in
        every iteration (``Solver.sparse_rows``: ``fista``, ``fista_svm``, ``dcd``), when
        it fits
        ``memory_budget``: they then read the non-zeros only, as LIBLINEAR does (MNIST,
        19% non-zero: a third of the time). The problem is the same; X itself is not
        modified, and ``solve`` on the dense X is not changed."""
        if not isinstance(X, np.ndarray) or X.ndim != 2:
            return X
        solver, kernel = compose(cfg)[:2]
        if not getattr(solver, "sparse_rows", False) or getattr(kernel, "name", None) != "linear":
            return X
        copy = sparse_copy(X, budget=cfg.memory_budget)
        if copy is None:
            return X
        if cfg.verbose:
            size = copy.data.nbytes + copy.indices.nbytes + copy.indptr.nbytes
            print(f"{type(self).__name__}: X has {copy.nnz / X.size:.1%} non-zero entries; "
                  f"the solver reads a CSR copy of them ({size / 2**20:.1f} MiB)", flush=True)
        return copy

    def _follow_config(self, cfg, first):
        """The first run's bound of ||Z~||_2^2 for the others (``fista``/``fista_svm``'s
        ``gram_norm``: it depends on the rows of X and their scaling only), when the
        feature space is X itself (the linear kernel; a random feature map may be drawn
        anew for each run) and the bound was not given, nor the trace that stands for it
        when the first run's estimate failed or was cut by its time limit."""
        bound = (first.extra or {}).get("gram_norm")
        solver, kernel = compose(cfg)[:2]
        if (bound is None or (first.extra or {}).get("lipschitz_method") == "trace"
                or "gram_norm" not in solver.param_table
                or solver.params.get("gram_norm") is not None
                or getattr(kernel, "name", None) != "linear"):
            return cfg
        return cfg.replace(solver_params={**cfg.solver_params, "gram_norm": bound})

    def _fit_config(self, cfg, n_samples):
        C = getattr(self, "_lam_from_C", None)
        if C is None:
            return cfg
        check_params({"C": Param(None, types=numbers.Real, low=0, low_open=True)}, {"C": C},
                     owner=type(self).__name__)
        return cfg.replace(solver_params={**cfg.solver_params, "lam": 1.0 / (C * n_samples)})

    def __init__(self, solver="fista", C=None, mu=None, scale="std", kernel="linear",
                 kernel_params=None, stop=None, max_iter=None, random_state=None, verbose=0,
                 callback=None, solver_params=None, class_weight=None, progress_bar=False,
                 memory_budget=None):
        self.solver = solver
        self.class_weight = class_weight
        self.C = C
        self.mu = mu
        self.scale = scale
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.stop = stop
        self.max_iter = max_iter
        self.random_state = random_state
        self.verbose = verbose
        self.progress_bar = progress_bar
        self.memory_budget = memory_budget
        self.callback = callback
        self.solver_params = solver_params

    def fit(self, X, y, sample_weight=None):
        """Fit the SVM (one-vs-rest for more than two classes).

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features)
        y : array-like, shape (n_samples,)
        sample_weight : array-like, shape (n_samples,), optional
            Per-sample weights: point i gets the dual box [0, C w_i] (see Notes).

        Returns
        -------
        self
        """
        with _fitted_at_once(self) as work:
            work._fit(X, y, sample_weight)
            work._set_support()
        return self

    def _set_support(self):
        """SVC's support attributes from the results' dual vectors (one-vs-rest rows)."""
        for name in ("support_", "support_vectors_", "dual_coef_", "n_support_"):
            self.__dict__.pop(name, None)
        results = self.results_
        if any(r.dual_coef_ is None for r in results):
            return
        sup = np.unique(np.concatenate([np.flatnonzero(r.dual_coef_ > 0) for r in results]))
        rows = None
        for r in results:
            own = np.flatnonzero(r.dual_coef_ > 0)
            if r.support_ is None or r.support_.shape[0] != own.size:
                rows = None
                break
            part = r.support_
            rows = part if rows is None else (sp.vstack([rows, part]).tocsr()
                                              if sp.issparse(part) else np.vstack([rows, part]))
        if rows is not None:
            # the rows of each problem's support, stacked; keep the first copy of each index
            allidx = np.concatenate([np.flatnonzero(r.dual_coef_ > 0) for r in results])
            _, first = np.unique(allidx, return_index=True)
            rows = rows[first]
        coef = np.zeros((len(results), sup.size))
        pairs = [self.classes_[1]] if len(results) == 1 else list(self.classes_)
        for k, (r, c) in enumerate(zip(results, pairs)):
            yk = np.where(self._train_labels == c, 1.0, -1.0)
            coef[k] = (yk * r.dual_coef_)[sup]
        labels = self._train_labels[sup]
        self.support_ = self._kept[sup]  # indices into the rows given to fit
        self.support_vectors_ = rows
        self.dual_coef_ = coef
        self.n_support_ = np.array([int(np.sum(labels == c)) for c in self.classes_],
                                   dtype=np.int32)

    def _fit(self, X, y, sample_weight=None):
        out = super()._fit(X, y, sample_weight)
        # the training labels of the rows solved (rows of weight 0 are removed), for
        # n_support_, and their indices among the rows given
        labels = np.asarray(y).ravel()
        w = self.sample_weight_
        self._kept = np.arange(labels.size) if w is None else np.flatnonzero(w > 0)
        self._train_labels = labels[self._kept]
        return out

    @property
    def intercept_(self):
        """Offsets: shape (1,) for two classes, else (n_classes,) (one-vs-rest)."""
        return self._intercepts()

    @_on_one_fit
    def _intercepts(self):
        check_is_fitted(self)
        if all(r.coef_ is not None for r in self.results_):
            return self._linear_parts()[1]
        return np.array([float(r.intercept_ or 0.0) for r in self.results_])


# ----------------------------------------------------------------------------- Tikhonov
#: ``n_components="auto"``: the exact kernel on at most this many rows
AUTO_EXACT_ROWS = 256
#: ``n_components="auto"``: at most this many Nystroem centres
AUTO_MAX_CENTRES = 1000


def auto_components(n_samples):
    """The Nystroem size of ``n_components="auto"`` for a fit on ``n_samples`` rows: None
    (the exact kernel) up to ``AUTO_EXACT_ROWS`` rows, else ``min(AUTO_MAX_CENTRES,
    ceil(4 sqrt(n)))``. Of the order sqrt(n), the number of uniformly sampled centres with
    which Nystroem regularized least squares keeps the exact estimator's learning rate
    (Rudi, Camoriano and Rosasco 2015); the Newton iterations then cost O(n m^2) instead
    of the exact kernel's O(n^3), and the memory O(n m) instead of O(n^2)."""
    if n_samples <= AUTO_EXACT_ROWS:
        return None
    return min(AUTO_MAX_CENTRES, math.ceil(4.0 * math.sqrt(n_samples)))


class _TikhonovParams:
    _solver_name = "iterated_tikhonov"
    _solver_keys = ("loss", "t", "lam", "tol")
    _own_params = {
        "n_components": Param("auto", types=numbers.Integral, options=("auto",), low=1,
                              allow_none=True,
                              doc="Nystroem centres: 'auto', an int, or None (exact kernel)"),
        "fit_intercept": Param("auto", types=bool, options=("auto", True, False),
                               doc="unpenalized intercept: 'auto' (with kernel='linear'), "
                                   "True or False"),
    }

    def _intercept_config(self, cfg):
        """``fit_intercept`` resolved into the solver parameters: ``"auto"`` is True for
        ``kernel="linear"`` (a model linear in X has an intercept, as scikit-learn's
        ``LogisticRegression`` and ``Ridge``), except with ``method="spectral_filter"``
        (the closed form has none), and False for other kernels (Beugnot et al.'s
        theta(x) in the RKHS); given in ``solver_params`` too, the two must agree."""
        fi = self.fit_intercept
        fi = fi if isinstance(fi, str) else bool(fi)  # checked by _config: a bool
        if "fit_intercept" in cfg.solver_params:
            if fi != "auto" and fi != cfg.solver_params["fit_intercept"]:
                raise ValueError(
                    f"{type(self).__name__}: fit_intercept={fi!r} is given to the estimator "
                    f"and fit_intercept={cfg.solver_params['fit_intercept']!r} in "
                    "solver_params; set it in one place only")
            return cfg
        if fi == "auto":
            linear = getattr(compose(cfg)[1], "name", None) == "linear"
            fi = linear and cfg.solver_params.get("method") != "spectral_filter"
        return cfg.replace(solver_params={**cfg.solver_params, "fit_intercept": fi})

    def _fit_config(self, cfg, n_samples):
        """``fit_intercept`` and ``n_components`` resolved for a fit on ``n_samples`` rows
        (``auto_components`` for a kernel with neither a feature map nor a precomputed
        Gram matrix)."""
        cfg = self._intercept_config(cfg)
        m = self.n_components
        if "n_components" in cfg.solver_params:  # given in solver_params
            if m != "auto":
                raise ValueError(
                    f"{type(self).__name__}: n_components={m!r} is given to the estimator and "
                    f"n_components={cfg.solver_params['n_components']!r} in solver_params; "
                    "set it in one place only")
            return cfg
        if m == "auto":
            kernel = compose(cfg)[1]
            gram = (getattr(kernel, "feature_map", None) is None
                    and not getattr(kernel, "precomputed", False))
            m = auto_components(n_samples) if gram else None
            if m is not None and cfg.verbose:
                print(f"{type(self).__name__}: n_components='auto': the kernel is "
                      f"approximated by Nystroem with {m} centres on {n_samples} rows; "
                      "n_components=None solves with the exact kernel", flush=True)
            if m is None and gram and cfg.solver_params.get("fit_intercept"):
                # the exact kernel's Newton system has no intercept: every row a centre,
                # the same span (Phi Phi^T = K on the rows), with the intercept
                m = n_samples
        if m is None:
            return cfg
        return cfg.replace(solver_params={**cfg.solver_params, "n_components": m})

    def _shared_inputs(self, cfg, X):
        """The Nystroem map and its feature rows, fitted once on X for all one-vs-rest runs
        (``solve(..., features=NystroemFeatures)``): with an integer ``random_state`` the
        centres every run would draw, so each class's result is the one of its own
        ``solve``; with None one draw per fit instead of one per class."""
        from .kernels.approximation import NystroemFeatures

        solver, kernel = compose(cfg)[:2]
        m = solver.params.get("n_components")
        if (m is None or not getattr(solver, "takes_features", False)
                or solver.params.get("t") == "auto" or getattr(kernel, "precomputed", False)
                or dask_array_of(X) is not None):
            return {}
        return {"features": NystroemFeatures(kernel, m, cfg.random_state).fit(X)}


class IteratedTikhonovClassifier(_TikhonovParams, _MarginClassifier):
    """Iterated Tikhonov regularization with the logistic loss (Beugnot et al. 2021).

    Parameters
    ----------
    t : int, default 3
        Number of Tikhonov iterations (Beugnot et al. 2021: iterating t times raises the
        qualification of the method).
    lam : float, optional
        Regularization parameter; None: the solver's default.
    loss : {"logistic", "squared"}, default "logistic"
        ``"squared"`` fits the +-1 labels by least squares (the squared loss of Beugnot
        et al. 2021 on classification targets) and classifies by the sign; it defines no
        probabilities (no ``predict_proba``).
    kernel : str, Kernel or callable, default "rbf"
    kernel_params : dict, optional
        As in ``PerceptronClassifier``: ``"rbf"`` and ``"poly"`` without a gamma take
        ``SVC``'s ``gamma="scale"``, 1 / (n_features X.var()) on the training X.
    n_components : "auto", int or None, default "auto"
        Nystroem approximation of a kernel without a feature map (``"rbf"``, ``"poly"``,
        ...): theta lives in the span of ``n_components`` centres sampled uniformly
        (``random_state``), memory O(n m) and Newton iterations O(n m^2). ``"auto"``: the
        exact kernel on at most 256 rows, else ``min(1000, ceil(4 sqrt(n)))`` centres (the
        order sqrt(n) that keeps the exact estimator's learning rate, Rudi et al. 2015);
        the linear kernel and precomputed Gram matrices are always exact; with
        ``solver_params={"fit_intercept": True}`` (which the exact kernel's Newton system
        does not have) every one of at most 256 rows is a centre, the exact kernel's span
        with the intercept. **None: the
        exact kernel** (memory O(n^2), time O(n^3): the digits' 1,437 rows take about 80
        times as long as with ``"auto"``, for the same test accuracy there). The
        certificate (``result_.certificate``) is then that of the problem solved, the
        approximate kernel's; ``result_.config.solver_params["n_components"]`` is the
        size used.
    tol : float, optional
        Target Newton decrement of the final subproblem (the claim "converged"); None:
        set from the data before each fit, 1e-8 on data of unit or larger scale and
        proportionally smaller on data scaled down (the solver's ``tol``), the value used
        in ``result_.config.solver_params["tol"]``.
    max_iter, random_state, verbose, callback, solver_params
        As in ``PerceptronClassifier``.
    class_weight : None, "balanced" or dict, default None
        Per-class weights multiplied into the sample weights (as ``SVMClassifier``).
    progress_bar : bool, default False
        As in ``PerceptronClassifier``.
    memory_budget : float or None, default None
        As in ``PerceptronClassifier``.
    fit_intercept : "auto", bool, default "auto"
        An unpenalized intercept b, theta(x) = <theta, Phi(x)> + b, outside the proximal
        term. ``"auto"``: True for ``kernel="linear"`` (a model linear in X, as
        ``LogisticRegression``), False for other kernels (Beugnot et al.'s theta(x), which
        has none) and for ``method="spectral_filter"``. With an exact Gram kernel True
        needs Nystroem (``n_components``; "auto" makes every one of at most 256 rows a
        centre). Also accepted in ``solver_params``; given in both, the two must agree.

    Attributes
    ----------
    classes_, n_features_in_, result_, results_, n_iter_, status_, sample_weight_
        As in ``SVMClassifier``.

    Notes
    -----
    With the logistic loss the decision value f(x) is a log-odds, and ``predict_proba``
    returns sigma(f(x)) = 1 / (1 + exp(-f(x))) for ``classes_[1]`` (two classes), or the
    one-vs-rest sigma(f_c(x)) normalized to sum to 1 per row, as scikit-learn's
    one-vs-rest logistic regression does. With ``t=1`` and
    ``solver_params={"fit_intercept": True}`` the model is L2-regularized logistic
    regression with scikit-learn's ``C = 1 / (n lam)`` (the default for
    ``kernel="linear"``, whose ``fit_intercept="auto"`` is True).

    ``fit(X, y, sample_weight=w)`` minimizes the weighted empirical risk
    ``1/n sum_i w_i loss(y_i, theta(x_i))`` (n the number of rows of positive weight:
    rows of weight 0 are dropped) in place of Beugnot et al. 2021's mean (Eq. 4); with
    ``t=1`` and ``fit_intercept`` it is scikit-learn's ``LogisticRegression(C=1 / (n
    lam)).fit(X, y, sample_weight=w)``. With the default lam = 1/n, integer weights are
    row repetition (the objective is that of the repeated rows times N/n). It needs an
    integer ``t`` and the Newton method. Large weights enlarge the referee's rounding
    bound in proportion: a fit whose certificate cannot be confirmed at the default tol
    says so (``ConvergenceWarning``); raise ``tol``.

    References
    ----------
    G. Beugnot, J. Mairal and A. Rudi, "Beyond Tikhonov: Faster Learning with
    Self-Concordant Losses via Iterative Regularization", Advances in Neural Information
    Processing Systems 34 (NeurIPS 2021).

    A. Rudi, R. Camoriano and L. Rosasco, "Less is More: Nystrom Computational
    Regularization", Advances in Neural Information Processing Systems 28 (NIPS 2015).
    """

    def __init__(self, t=3, lam=None, loss="logistic", kernel="rbf", kernel_params=None,
                 n_components="auto", tol=None, max_iter=None, random_state=None, verbose=0,
                 callback=None, solver_params=None, class_weight=None, progress_bar=False,
                 memory_budget=None, fit_intercept="auto"):
        self.class_weight = class_weight
        self.fit_intercept = fit_intercept
        self.n_components = n_components
        self.t = t
        self.lam = lam
        self.loss = loss
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state
        self.verbose = verbose
        self.progress_bar = progress_bar
        self.memory_budget = memory_budget
        self.callback = callback
        self.solver_params = solver_params

    def fit(self, X, y, sample_weight=None):
        """Fit (one-vs-rest for more than two classes); returns self. ``sample_weight``
        (times ``class_weight``) weights the empirical risk (see Notes)."""
        with _fitted_at_once(self) as work:
            work._fit(X, y, sample_weight)
            work._fitted_loss = work.results_[0].config.solver_params.get("loss", "logistic")
        return self

    def _check_proba(self):
        # what was fitted decides; before fit, the hyper-parameters
        loss = getattr(self, "_fitted_loss", None) if hasattr(self, "results_") else None
        if loss is None:
            extra = self.solver_params if isinstance(self.solver_params, dict) else {}
            loss = extra.get("loss", self.loss)
        if loss != "logistic":
            raise AttributeError(
                f"predict_proba is defined for loss='logistic' (the model's decision value is "
                f"then a log-odds); this model has loss={loss!r}, whose decision values are not "
                "probabilities: use decision_function, or sklearn.calibration."
                "CalibratedClassifierCV for calibrated probabilities"
            )
        return True

    @available_if(_check_proba)
    @_on_one_fit
    def predict_proba(self, X):
        """Class probabilities, shape (n_samples, n_classes), columns in ``classes_`` order.

        The logistic loss makes the decision value f(x) a log-odds: P(y = classes_[1] | x)
        = sigma(f(x)), sigma(z) = 1 / (1 + exp(-z)), for two classes. For more than two,
        each one-vs-rest model gives sigma(f_c(x)) and the row is normalized to sum to 1,
        as scikit-learn's one-vs-rest logistic regression does. Only for
        ``loss="logistic"`` (an AttributeError otherwise).
        """
        Xd = dask_array_of(X, "X")
        if Xd is not None:
            check_is_fitted(self)
            return _lazy_rows(self, self.predict_proba, Xd, len(self.classes_), np.float64)
        d = self.decision_function(X)
        if d.ndim == 1:
            return np.column_stack([expit(-d), expit(d)])
        P = expit(d)
        return P / P.sum(axis=1, keepdims=True)

    @available_if(_check_proba)
    @_on_one_fit
    def predict_log_proba(self, X):
        """Logarithm of ``predict_proba``, computed in log space (log-sigmoid and
        log-sum-exp), so that confident predictions keep their small log-probabilities
        instead of rounding to log(0)."""
        Xd = dask_array_of(X, "X")
        if Xd is not None:
            check_is_fitted(self)
            return _lazy_rows(self, self.predict_log_proba, Xd, len(self.classes_), np.float64)
        d = self.decision_function(X)
        if d.ndim == 1:
            return np.column_stack([log_expit(-d), log_expit(d)])
        L = log_expit(d)
        return L - logsumexp(L, axis=1, keepdims=True)


class IteratedTikhonovRegressor(_TikhonovParams, RegressorMixin, _MarginKitEstimator):
    """Iterated Tikhonov regularization for regression (Beugnot et al. 2021, squared loss).

    Parameters
    ----------
    t : int, default 3
    lam : float, optional
    loss : str, default "squared"
    kernel : str, Kernel or callable, default "rbf"
    kernel_params : dict, optional
        As in ``IteratedTikhonovClassifier`` (``gamma="scale"`` for ``"rbf"`` and
        ``"poly"``).
    n_components : "auto", int or None, default "auto"
        As in ``IteratedTikhonovClassifier`` (None: the exact kernel).
    tol, max_iter, random_state, verbose, callback, solver_params, progress_bar, memory_budget
        As in ``IteratedTikhonovClassifier``.
    fit_intercept : "auto", bool, default "auto"
        As in ``IteratedTikhonovClassifier``: ``"auto"`` is True for ``kernel="linear"``
        (with ``t=1``, scikit-learn's ``Ridge(alpha=n lam)``), False for other kernels.

    Attributes
    ----------
    n_features_in_ : int
    result_ : marginkit.Result
    coef_ : ndarray of shape (n_features,)
        The linear model's weights, for ``kernel="linear"`` only (as ``Ridge``).
    intercept_ : float
        Its offset (0.0 without an intercept).
    n_iter_ : int
    sample_weight_ : ndarray or None
        The ``sample_weight`` of the fit.

    Notes
    -----
    ``fit(X, y, sample_weight=w)`` minimizes 1/n sum_i w_i (y_i - theta(x_i))^2 / 2 over
    the rows of positive weight (rows of weight 0 are dropped, n counts the others), as
    ``IteratedTikhonovClassifier`` does with its loss.

    References
    ----------
    G. Beugnot, J. Mairal and A. Rudi, "Beyond Tikhonov: Faster Learning with
    Self-Concordant Losses via Iterative Regularization", Advances in Neural Information
    Processing Systems 34 (NeurIPS 2021).
    """

    def __init__(self, t=3, lam=None, loss="squared", kernel="rbf", kernel_params=None,
                 n_components="auto", tol=None, max_iter=None, random_state=None, verbose=0,
                 callback=None, solver_params=None, progress_bar=False,
                 memory_budget=None, fit_intercept="auto"):
        self.fit_intercept = fit_intercept
        self.n_components = n_components
        self.t = t
        self.lam = lam
        self.loss = loss
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state
        self.verbose = verbose
        self.progress_bar = progress_bar
        self.memory_budget = memory_budget
        self.callback = callback
        self.solver_params = solver_params

    def fit(self, X, y, sample_weight=None):
        """Fit the regression function; returns self. ``sample_weight`` weights the
        empirical risk (see Notes)."""
        with _fitted_at_once(self) as work:
            work._fit_regression(X, y, sample_weight)
        return self

    def _fit_regression(self, X, y, sample_weight):
        cfg = self._config()
        if self._task != "regression":
            raise ValueError(
                f"{type(self).__name__}: the solver with loss={self.loss!r} is a classifier; "
                "use loss='squared' here, or IteratedTikhonovClassifier for classification"
            )
        X, y = _validate(self, X, y, y_numeric=True)
        y = column_or_1d(y, warn=True).astype(np.float64)
        w = _fit_weights(self, X, y, sample_weight)
        self.sample_weight_ = w
        self._gram_columns = None
        kw = {}
        if w is not None:
            if not (w > 0).all():  # a weight of 0 is the row's removal
                X, y, w = _drop_rows(self, X, w > 0), y[w > 0], w[w > 0]
            kw["sample_weight"] = w
        cfg = _with_scale_gamma(cfg, X, w)
        res = _solve(X, y, config=self._fit_config(cfg, X.shape[0]), **kw)
        _warn_unfinished(self, [res], stacklevel=3)
        self._set_fit_info([res])
        self.result_ = res
        return self

    def score(self, X, y, sample_weight=None):
        """R^2 on (X, y), as scikit-learn's; a dask array X is predicted first (its rows
        may be of unknown number: found by review)."""
        if dask_array_of(X, "X") is None:
            return super().score(X, y, sample_weight=sample_weight)
        from sklearn.metrics import r2_score

        return _dask_score(self, r2_score, X, y, sample_weight)

    @_on_one_fit
    def predict(self, X):
        """Predicted values, shape (n_samples,); for a dask array X, a lazy dask array."""
        Xd = dask_array_of(X, "X")
        if Xd is not None:
            check_is_fitted(self)
            return _lazy_rows(self, self.predict, Xd, 1, np.float64)
        check_is_fitted(self)
        X = _kept_columns(self, _validate(self, X, reset=False))
        return self.result_.decision_function(X)

    def _linear_result(self):
        check_is_fitted(self)
        if self.result_.coef_ is None:
            raise AttributeError(_NOT_LINEAR_IN_X)
        return self.result_

    @property
    def coef_(self):
        """Weights of the linear model, shape (n_features,) as ``Ridge``'s; only for
        ``kernel="linear"`` (found by review: the attribute did not exist)."""
        return np.asarray(self._linear_result().coef_, dtype=np.float64).ravel()

    @property
    def intercept_(self):
        """Offset of the linear model (0.0 without an intercept)."""
        return float(self._linear_result().intercept_ or 0.0)


def expected_failed_checks(estimator):
    """Checks of ``sklearn.utils.estimator_checks`` an estimator may fail, and why.

    For ``parametrize_with_checks(..., expected_failed_checks=expected_failed_checks)``
    and ``check_estimator(est, expected_failed_checks=expected_failed_checks(est))``
    (scikit-learn >= 1.6). Returns ``{check name: reason}``.

    * ``PerceptronClassifier``: ``check_non_transformer_estimators_n_iter`` wants
      ``n_iter_ >= 1``, but the perceptron / von Neumann solvers check their
      certificates before the first step (Ramdas & Pena 2014's algorithm boxes: "if
      G alpha_k > 0, halt"), so an easy one-vs-rest problem can be certified at
      iteration 0 and ``n_iter_`` honestly reports 0.
    * ``PerceptronClassifier``, the two ``check_sample_weight_equivalence_on_*_data``
      checks (integer weights against repeated rows): a positive weight does not change
      the feasibility problem, repeated rows do change the iterates (the normalized
      Gram matrix gains rows); both models separate the same points when certified, but
      their decision values differ.
    * ``SVMClassifier``, the same two checks: a weight w_i is the box [0, C w_i] of one
      dual variable, and k copies of a row are k variables in [0, C]; the two problems
      agree only for a given C, ``scale=None`` and mu -> 0 (the defaults C = 64/n,
      mu = n/128 and the statistics of ``scale="std"`` depend on the rows, and the
      perturbation mu/2 r_i^2 of one variable is not that of k), and the certified stop
      returns an iterate within its error bound of each optimum, not the optimum to
      1e-7. Zero weights are exact: those rows are removed before solving.
    * The iterated Tikhonov estimators pass them: with the default lam = 1/n the
      weighted objective 1/n (sum_i w_i loss_i + ||theta - theta^k||^2 / 2) has the
      minimizer of the same objective over the repeated rows (1/N instead of 1/n).
    * ``IteratedTikhonovClassifier``, ``check_class_weight_classifiers``: a model
      theta(x) without intercept (``fit_intercept=False``; ``"auto"`` with a kernel other
      than linear) returns to 0 far from the points of a heavily weighted class, so that
      class does not take the whole test set (``fit_intercept=True`` passes the check's
      test; so does the default rbf kernel since it takes ``gamma="scale"``, wide enough
      on the check's data).
    """
    out = {}
    if isinstance(estimator, PerceptronClassifier):
        out["check_non_transformer_estimators_n_iter"] = (
            "a certificate can hold at iteration 0 (checked before the first step); "
            "n_iter_ then reports 0 iterations")
        why = ("positive weights leave the separability problem unchanged, repeated rows "
               "change the iterates: decision values differ")
    elif isinstance(estimator, SVMClassifier):
        why = ("a weight is one dual variable's box [0, C w_i], k copies are k variables: "
               "equal only for a given C, scale=None and mu -> 0, and the certified stop "
               "is within its error bound of the optimum, not 1e-7")
    elif isinstance(estimator, IteratedTikhonovClassifier):
        extra = estimator.solver_params if isinstance(estimator.solver_params, dict) else {}
        fi = extra.get("fit_intercept", estimator.fit_intercept)
        if fi is True or (fi == "auto" and estimator.kernel == "linear"):
            return out  # a model with an intercept passes
        out["check_class_weight_classifiers"] = (
            "a model without intercept (fit_intercept=False, Beugnot et al.'s theta(x); "
            "the default for kernels other than linear): away from the heavy class's points "
            "the decision values return to 0, so a class weight of 1000 does not make that "
            "class win the whole plane; with fit_intercept=True it does (the default rbf "
            "with gamma='scale' passes on the check's data)")
        return out
    else:
        return out
    for kind in ("dense", "sparse"):
        out[f"check_sample_weight_equivalence_on_{kind}_data"] = why
    return out
