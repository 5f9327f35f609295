"""Kernel approximations with an explicit finite feature map: ``nystroem`` and ``rff``.

Both are kernels whose Gram block is K~(A, B) = Phi(A) Phi(B)^T for an (n, m) dense feature
map Phi, so every solver that works in feature space (the ``linear`` code paths, which
require ``feature_map``) runs on them unchanged, in O(n m) memory. Certificates produced
with them certify the *approximated* kernel K~, which is what ``kernel(A, B)`` returns and
what ``certificate.verify`` recomputes.

Fitting
-------
The feature map is data-independent once fitted: ``fit(X)`` draws the Nystroem centres
(uniformly, without replacement, among the rows of X) or the random Fourier frequencies,
and every later call reuses them, so ``feature_map(X_train)`` followed by
``kernel(X_new, X_train)`` or ``feature_map(X_new)`` are consistent. An unfitted kernel
fits itself on first use: ``feature_map(X)`` fits on X, and ``kernel(A, B)`` fits on B
(by convention the training side, as in ``K(X_new, X_train)``), or on A when B is None.
Call ``fit`` again to refit on other data. With an integer ``random_state`` the fit
depends only on the seed and on X, so refitting on the same training rows reproduces the
same map.

Runs
----
A run (``marginkit.solve``) never fits the instance it is given: it works on a private
copy (``for_run``). An unfitted instance gives an unfitted copy, which fits itself on the
run's training rows at first use: the centres or random features of *that* run, kept by
its ``Result.kernel``; the instance stays unfitted, so it can serve runs on other data,
from several threads at once. A fitted instance is honoured: the copy keeps its fit (the
user chose that map, e.g. fitted on more rows, or to share it between runs), and refitting
the instance later changes neither the copy nor a ``Result`` holding it. The copy also
enforces the run's ``memory_budget`` on the matrices it builds (the n x m feature matrix,
Nystroem's m x m matrices, the d x m random frequencies).
"""
import copy
import math
import numbers
import threading

import numpy as np
import scipy.sparse as sp

from .._executors import ExecutorRows
from .._referee import float64_block
from .._registry import _register_builtin
from .._validation import Param, check_random_state, check_X
from ..plugins import Kernel, referee_block
from ..linalg._norms import row_sqnorms
from ..utils._threads import BlasChoice
from .builtin import prepare_pair

#: float64's unit roundoff and smallest subnormal (the maps' rounding bounds)
_U = float(np.finfo(np.float64).eps) / 2
_ETA = 2.0 ** -1074

__all__ = ["NystroemFeatures", "NystroemKernel", "NystroemMap", "RandomFourierKernel",
           "draw_centre_index", "nystroem_projection", "nystroem_transform"]


def _check_random_state_param(value, name, owner):
    if isinstance(value, (np.random.Generator, np.random.RandomState)):
        return value
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
        raise TypeError(f"{owner}: {name}={value!r} must be None, an int >= 0 or a numpy Generator")
    if value < 0:
        raise ValueError(f"{owner}: {name}={value} must be >= 0")
    return int(value)


_RANDOM_STATE = Param(None, object, allow_none=True, validator=_check_random_state_param,
                      doc="seed or numpy Generator for the random draw of the feature map")
_N_COMPONENTS = Param(100, numbers.Integral, low=1, doc="number m of features")

# base kernels a Nystroem map can approximate (those computed from the features)
_NYSTROEM_BASES = ("rbf", "laplacian", "poly", "linear", "spline")


# a first use that fits an unfitted instance fits it once, whichever threads use it
# (reentrant: a Nystroem fit evaluates its base kernel, which may fit itself)
_LAZY_FIT = threading.RLock()


class _FittedFeatureMap(Kernel):
    """Shared behaviour: lazy fit, per-run copies, Phi(A) Phi(B)^T blocks,
    diag = ||Phi(a)||^2."""

    #: copies of the feature matrix ``feature_map`` holds at its peak (n x m arrays)
    _transform_copies = 1

    def _fit_state(self, X):  # pragma: no cover - abstract
        """The fitted attributes for the training rows X (a dict)."""
        raise NotImplementedError

    def _transform(self, X):  # pragma: no cover - abstract
        raise NotImplementedError

    def _n_outputs(self):  # pragma: no cover - abstract
        """The number m of features of the fitted map."""
        raise NotImplementedError

    @property
    def fitted(self):
        """True once ``fit`` (or a first use) has fixed the feature map."""
        return self.__dict__.get("n_features_in_") is not None

    def fit(self, X):
        """Fix the feature map on the training rows X; returns self. ``X`` may also be
        the rows of a run's blocks (``marginkit._executors.ExecutorRows``: a dask array's
        chunks, validated where they are held), of which the fit reads only the rows it
        draws."""
        if not isinstance(X, ExecutorRows):
            X = check_X(X, name="X")
        state = self._fit_state(X)
        state["n_features_in_"] = X.shape[1]
        self.__dict__.update(state)  # all at once: a reader sees one fit or the other
        return self

    def for_run(self, config=None):
        """The kernel one run works on: a private copy of this instance (see the module
        docstring, "Runs"), within ``config.memory_budget``."""
        run = copy.copy(self)
        run.params = dict(self.params)
        base = self.__dict__.get("base_kernel")
        if base is not None and hasattr(base, "for_run"):
            run.base_kernel = base.for_run(config)
        run._memory_budget = getattr(config, "memory_budget", None)
        return run

    def _check_budget(self, need, what, budget=None):
        if budget is None:
            budget = self.__dict__.get("_memory_budget")
        if budget is not None and need > budget:
            raise ValueError(
                f"{self._owner()}: {what} needs {need / 2**30:.3g} GiB; memory_budget is "
                f"{budget / 2**30:.3g} GiB; use fewer components "
                f"(n_components={self.n_components}) or raise memory_budget"
            )

    def referee_copy(self):
        """The kernel a referee evaluates for this one: a fresh instance built from the
        parameters, holding only what a fit with these parameters may choose freely
        (``_referee_state``), everything derived from it recomputed; an unfitted instance
        gives an unfitted copy. A stored fit that these parameters cannot have produced is
        a ``ValueError`` (a certificate whose map was edited certifies another kernel)."""
        fresh = type(self)(**self.params)
        if self.fitted:
            self._checked_n_features(self.__dict__["n_features_in_"])
            fresh.__dict__.update(fresh._referee_state(self.__dict__))
        return fresh

    def _checked_n_features(self, d):
        if isinstance(d, bool) or not isinstance(d, (numbers.Integral, np.integer)) or d < 1:
            raise ValueError(f"{self._owner()}: the fitted number of features "
                             f"{d!r} is not a positive integer")
        return int(d)

    #: the fitted attributes ``saved_fit`` returns: name -> required
    _saved_fit_fields = {}

    def saved_fit(self):
        """What a referee needs of the fit, as plain data (a dict), or None when the
        instance is unfitted: the free choices of the fit (``_referee_state``), which
        ``Result.save`` stores with the parameters; everything else is recomputed from
        them by ``restore_fit``."""
        if not self.fitted:
            return None
        return {name: self.__dict__[name] for name in self._saved_fit_fields
                if self.__dict__.get(name) is not None}

    def restore_fit(self, stored, max_bytes=None):
        """Fit this (unfitted) instance from ``stored``, a dict as ``saved_fit`` returns
        (read from an untrusted file by ``marginkit.load_result``): every entry checked,
        the rest of the fit recomputed as a referee does (``_referee_state``); returns
        self. ``max_bytes`` bounds the memory the recomputation needs. A ``ValueError``
        names what is wrong."""
        if not isinstance(stored, dict):
            raise ValueError(f"{self._owner()}: the saved fit is not a dict")
        fields = self._saved_fit_fields
        unknown = sorted(set(stored) - set(fields))
        if unknown:
            raise ValueError(f"{self._owner()}: unknown entries {unknown[:5]} in the saved "
                             f"fit; it holds {sorted(fields)}")
        missing = sorted(k for k, required in fields.items() if required and k not in stored)
        if missing:
            raise ValueError(f"{self._owner()}: the saved fit lacks {missing}")
        stored = dict(stored)
        stored["n_features_in_"] = self._checked_n_features(stored["n_features_in_"])
        need = self._restore_bytes(stored)
        if max_bytes is not None and need > max_bytes:
            raise ValueError(
                f"{self._owner()}: recomputing the saved fit needs {need:.0f} bytes, more "
                f"than the {max_bytes} bytes of max_bytes left; pass a larger max_bytes to "
                "load_result if you trust the file")
        self.__dict__.update(self._referee_state(stored))
        return self

    def _restore_bytes(self, stored):  # pragma: no cover - abstract
        """The bytes ``_referee_state(stored)`` allocates (entries already checked)."""
        raise NotImplementedError

    def _referee_state(self, stored):  # pragma: no cover - abstract
        """The fitted attributes a referee uses, from the ``stored`` ones (a dict)."""
        raise NotImplementedError

    def _fit_if_needed(self, X):
        if not self.fitted:
            with _LAZY_FIT:
                if not self.fitted:
                    self.fit(X)

    def feature_map(self, X):
        """Phi(X), a dense (n, n_components) array of X's float dtype (fits on X if unfitted)."""
        X = check_X(X, name="X", allow_empty=True)
        self._fit_if_needed(X)
        self._check_features(X)
        m = self._n_outputs()
        self._check_budget(
            self._transform_copies * float(X.shape[0]) * m * X.dtype.itemsize,
            f"the feature matrix of {X.shape[0]} rows x {m} components")
        return self._transform(X)

    def _check_features(self, X):
        if X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"{self._owner()}: X has {X.shape[1]} features but the feature map was fitted "
                f"on {self.n_features_in_}; call fit(X_train) again to refit"
            )

    def __call__(self, A, B=None):
        A, B, dtype = prepare_pair(A, B)
        self._fit_if_needed(B)
        PA = self.feature_map(A)
        PB = PA if B is A else self.feature_map(B)
        return np.ascontiguousarray(PA @ PB.T, dtype=dtype)

    def diag(self, A):
        A, _, dtype = prepare_pair(A)
        P = self.feature_map(A)
        return row_sqnorms(P, dtype=dtype)


@_register_builtin("kernel", "nystroem")
class NystroemKernel(_FittedFeatureMap):
    """Nystroem approximation of a base kernel on m uniformly sampled centres.

    Phi(X) = K(X, C) K_CC^{-1/2}, with C the m centres (rows of the training X drawn
    uniformly without replacement) and K_CC^{-1/2} = V diag(lambda^{-1/2}) V^T from the
    eigendecomposition of K(C, C); eigenvalues at or below ``m * eps * lambda_max``
    (numerically zero or negative) are dropped, which makes Phi Phi^T = K_XC K_CC^+ K_CX
    (`nystroem_projection`). With m = n the approximation is the exact kernel matrix of the
    training rows. The map is `NystroemMap`'s, which solvers use directly.

    Parameters
    ----------
    base : str or Kernel
        The kernel to approximate (a registered name among "rbf", "laplacian", "poly",
        "linear", "spline", or a Kernel instance computed from the features).
    base_params : dict or None
        Parameters of the base kernel when ``base`` is a name.
    n_components : int >= 1
        Number m of centres (capped at the number of training rows).
    random_state : None, int or numpy Generator

    References
    ----------
    C. K. I. Williams and M. Seeger, "Using the Nystroem method to speed up kernel
    machines", Advances in Neural Information Processing Systems 13 (NIPS 2000).
    """

    param_table = {
        "base": Param("rbf", object, validator=lambda v, n, o: _check_base(v, n, o),
                      doc="kernel to approximate (name or Kernel instance)"),
        "base_params": Param(None, dict, allow_none=True, doc="parameters of the base kernel"),
        "n_components": _N_COMPONENTS,
        "random_state": _RANDOM_STATE,
    }

    # K(X, C) and its product with K_CC^{-1/2}
    _transform_copies = 2

    def careful_features(self, X):
        """(Phi, Err): the rows K(x_i, C) P of float64 rows X for a referee, K(X, C) by the
        base kernel's careful path (``careful_block``), and per entry a bound on its
        distance to the map of the centres C and the normalization P as stored: the entry
        bounds E |P| and the product's rounding gamma_{m+2} |K| |P|. Found by review: the
        rows of a Nystroem map were taken as exact, and |P| = 2.5e6 of an ill-conditioned
        K_CC made a false "separable" claim verify."""
        X = float64_block(X)
        self._check_features(X)
        P = np.asarray(self.normalization_, dtype=np.float64)
        if isinstance(self.base_kernel, _FittedFeatureMap):
            # a base that is itself an approximation has no careful path of its own
            # (Kernel's default trusts a few ulps; found by review: an rff base's phase
            # rounding of 1e-10 against a bound of 1e-15, and a false "separable"
            # confirmed): its rows bound nothing, so no claim on them is certified
            Phi = self._transform(X)
            return Phi, np.full(Phi.shape, np.inf)
        return careful_nystroem_rows(self.base_kernel, X, self.components_, P)

    def __init__(self, **params):
        super().__init__(**params)
        self.base_kernel = _make_base(self.base, self.base_params, self._owner())
        self.n_features_in_ = None

    def _n_outputs(self):
        return self.components_.shape[0]

    def _fit_state(self, X):
        m = min(int(self.n_components), X.shape[0])
        # K_CC, its eigenvectors and K_CC^{-1/2}
        self._check_budget(3.0 * m * m * 8, f"the {m} x {m} matrices of the centres")
        fitted = NystroemMap(self.base_kernel, m, self.random_state).fit(X)
        return {"normalization_": fitted.projection_, "components_": fitted.centres_,
                "component_indices_": fitted.centre_index_,
                "n_components_kept_": fitted.n_components_kept_}

    def _transform(self, X):
        return nystroem_transform(self.base_kernel, X, self.components_, self.normalization_,
                                  dtype=X.dtype)

    _saved_fit_fields = {"n_features_in_": True, "components_": True, "base_kernel": False}

    def saved_fit(self):
        fit = super().saved_fit()
        base = fit and fit.get("base_kernel")
        if base is not None and getattr(base, "saved_fit", None) is None:
            del fit["base_kernel"]  # defined by the parameters (a kernel without a fit)
        return fit

    def _restore_bytes(self, stored):
        C = stored.get("components_")
        m = C.shape[0] if hasattr(C, "shape") and len(C.shape) == 2 else 0
        return 4.0 * m * m * 8  # K_CC, its eigenvectors, K_CC^{-1/2} and a product

    def _referee_state(self, stored):
        """The centres are the fit's free choice (any rows: an instance may be fitted on
        other data than a run's), at most ``n_components`` of them with the fitted number
        of features; the normalization is recomputed from them with the base kernel the
        parameters define."""
        C = stored.get("components_")
        d = stored.get("n_features_in_")
        if not (sp.issparse(C) or isinstance(C, np.ndarray)) or C.ndim != 2 \
                or C.dtype.kind not in "biuf":
            raise ValueError(f"{self._owner()}: the fitted centres are not a matrix")
        if not (1 <= C.shape[0] <= int(self.n_components)) or C.shape[1] != d:
            raise ValueError(
                f"{self._owner()}: the fit holds {C.shape[0]} centres of {C.shape[1]} "
                f"features; n_components={self.n_components} allows 1 to "
                f"{self.n_components} centres of the {d} fitted features")
        from ..certificates import _same_value

        base = stored.get("base_kernel", self.base_kernel)
        if not _same_value(base, self.base_kernel):
            raise ValueError(f"{self._owner()}: the fitted base kernel {base!r} is not the "
                             f"one the parameters define, {self.base_kernel!r}")
        if hasattr(base, "referee_copy"):  # an approximation itself: its fit, refereed
            self.base_kernel = base.referee_copy()
        C = float64_block(check_X(C, name="the fitted centres"))
        projection, kept = nystroem_projection(self.base_kernel(C, C))
        return {"components_": C, "normalization_": projection,
                "component_indices_": stored.get("component_indices_"),
                "n_components_kept_": kept, "n_features_in_": int(d)}


# ---------------------------------------------------------------- the Nystroem map itself
def nystroem_projection(Kcc):
    """The Nystroem normalization K_CC^{-1/2} of the Gram matrix of the centres.

    With K_CC = V diag(lambda) V^T (``numpy.linalg.eigh`` of the symmetrized matrix), the
    eigenvalues kept are those above the rounding level of the decomposition,

        lambda_i > m * eps * lambda_max        (eps = float64 machine epsilon),

    since a symmetric eigensolver is backward stable to about m eps ||K_CC||: an eigenvalue
    below that level cannot be told from zero (or is negative, for a kernel that is not
    positive semi-definite in floating point), and 1 / sqrt(lambda) of it would only amplify
    rounding. The result is P = V_+ diag(lambda_+^{-1/2}) V_+^T (m x m), so that
    Phi(X) = K(X, C) P satisfies Phi(A) Phi(B)^T = K(A, C) K_CC^+ K(C, B).

    Parameters
    ----------
    Kcc : array (m, m)
        The base kernel on the centres.

    Returns
    -------
    projection : ndarray (m, m), float64
    n_kept : int
        The numerical rank of K_CC (number of eigenvalues kept).

    References
    ----------
    C. K. I. Williams and M. Seeger, "Using the Nystroem method to speed up kernel
    machines", Advances in Neural Information Processing Systems 13 (NIPS 2000).
    """
    Kcc = np.asarray(Kcc, dtype=np.float64)
    if not np.isfinite(Kcc).all():
        raise ValueError("Nystroem: the base kernel's values K(C, C) at the centres are not "
                         "finite (they overflow float64): rescale X (e.g. to unit-norm rows) "
                         "or change the base kernel's parameters")
    lam, V = np.linalg.eigh(0.5 * (Kcc + Kcc.T))
    keep = lam > lam.shape[0] * np.finfo(np.float64).eps * max(lam[-1], 0.0)
    if not np.any(keep):
        raise ValueError("Nystroem: the base kernel's values K(C, C) at the centres are all "
                         "zero (or not positive); check the kernel and its parameters")
    Vk = V[:, keep]
    return (Vk / np.sqrt(lam[keep])) @ Vk.T, int(keep.sum())


def nystroem_transform(kernel, X, centres, projection, dtype=np.float64, block=4096):
    """Phi(X) = K(X, C) P, by row blocks of X (float64 rows: the map a referee evaluates),
    as an (n, m) array of ``dtype``."""
    out = np.empty((X.shape[0], projection.shape[1]), dtype=dtype)
    for start in range(0, X.shape[0], block):
        stop = min(start + block, X.shape[0])
        Kb = np.asarray(kernel(float64_block(X[start:stop]), centres), dtype=np.float64)
        out[start:stop] = Kb @ projection
    return out


def careful_nystroem_rows(kernel, X, centres, projection):
    """(Phi, Err) for a referee: the rows K(x_i, C) P of float64 rows X, K(X, C) by the
    kernel's careful path (``careful_block``, checked for a plug-in), and per entry a bound
    on the distance to the map of the centres and the normalization as given (exact
    numbers): the entry bounds E |P| and the product's rounding gamma_{m+2} |K| |P|."""
    from .._referee import gamma

    P = np.asarray(projection, dtype=np.float64)
    X = float64_block(X)
    absP = np.abs(P)
    n = X.shape[0]
    Phi = np.empty((n, P.shape[1]))
    err = np.empty((n, P.shape[1]))
    g = gamma(P.shape[0] + 2)
    with np.errstate(over="ignore", invalid="ignore"):
        for r0 in range(0, n, 4096):  # K and its bounds a block of rows at a time
            K, E = referee_block(kernel, X[r0:r0 + 4096], centres)
            K = np.asarray(K, dtype=np.float64)
            # the product as the run's map computes it (``nystroem_transform``, by the
            # same blocks of rows), within gamma_{m+2} |K| |P| of the exact product of K
            np.matmul(K, P, out=Phi[r0:r0 + 4096])
            # (g |K| + E) |P|: non-negative terms, within gamma_{m+2} of their sum
            A = g * np.abs(K)
            if E is not None:
                A += np.asarray(E, dtype=np.float64)
            np.matmul(A, absP, out=err[r0:r0 + 4096])
        err *= (1 + g) * (1 + 4 * _U)  # the bound's own rounding
    return Phi, err


def draw_centre_index(rng, n, n_components):
    """The row indices of the Nystroem centres among n rows: min(n_components, n) drawn
    uniformly without replacement from the Generator ``rng``, in increasing order."""
    return np.sort(rng.choice(n, size=min(int(n_components), n), replace=False))


class NystroemMap:
    """The Nystroem feature map of a kernel on m centres sampled uniformly, for any solver.

    ``fit(X)`` draws m = min(n_components, n) rows of X uniformly without replacement (in
    increasing row order) as the centres C and computes P = K_CC^{-1/2} with the cut-off
    of `nystroem_projection`; ``transform(X)`` returns Phi(X) = K(X, C) P, float64 (n, m).
    The ``nystroem`` kernel is this map with a kernel's interface (lazy fit, per-run
    copies, memory budget): on the same centres both give the same Phi.

    Parameters
    ----------
    kernel : Kernel
        Base kernel (``kernel(A, B)`` Gram blocks).
    n_components : int
        Number of centres m (capped at the number of rows).
    random_state : None, int or numpy Generator
        The draw of the centres.

    Attributes
    ----------
    centres_ : float64 array or CSR matrix (m, d)
    centre_index_ : ndarray (m,)
        Row indices of the centres in the fitted X.
    projection_ : ndarray (m, m)
        P, so that Phi(x) = K(x, C) @ projection_.
    n_components_kept_ : int
        Numerical rank of K_CC.

    References
    ----------
    C. K. I. Williams and M. Seeger, "Using the Nystroem method to speed up kernel
    machines", Advances in Neural Information Processing Systems 13 (NIPS 2000).
    """

    def __init__(self, kernel, n_components, random_state=None):
        self.kernel = kernel
        self.n_components = int(n_components)
        self.rng = check_random_state(random_state)

    def fit(self, X):
        """Draw the centres among the rows of X and compute the projection; returns self."""
        idx = draw_centre_index(self.rng, X.shape[0], self.n_components)
        self.centres_ = float64_block(X[idx])  # a copy (fancy indexing), in float64
        self.centre_index_ = idx
        Kcc = self.kernel(self.centres_, self.centres_)
        self.projection_, self.n_components_kept_ = nystroem_projection(Kcc)
        return self

    def transform(self, X, block=4096):
        """Phi(X) = K(X, C) P, a float64 (n, m) array."""
        return nystroem_transform(self.kernel, X, self.centres_, self.projection_, block=block)


class NystroemFeatures:
    """A `NystroemMap` fitted on the rows X of a fit, with its feature rows Phi(X), for
    several runs on the same X.

    ``marginkit.solve(X, y, solver="iterated_tikhonov", n_components=m, features=F)``
    runs on ``F.map_`` (its centres and projection) and ``F.features_`` instead of
    drawing m centres and mapping X again: the runs of a one-vs-rest fit (same X, one y
    per class) then fit the map and compute Phi(X) once. With the same kernel, m and an
    integer ``random_state`` as the runs', ``F`` draws the centres a run would draw, so
    each run's result is the one it would have without ``features``. The certificate of
    each run holds the centres and is checked as any other: ``verify`` recomputes the
    normalization and Phi from X, y, the kernel and the centres, never from ``F``.

    A run checks that ``F`` is the map of its own problem: the same kernel (class and
    parameters), ``n_components``, X (dtype and entries) and, for a run with an integer
    ``random_state``, the centres that seed draws; otherwise it raises ``ValueError``
    naming ``features``. ``F`` is read by the runs, never changed; it keeps a reference to X
    for that check (it is not part of a ``Result``).

    Parameters
    ----------
    kernel : Kernel
        Base kernel: the run's kernel, an instance (e.g.
        ``marginkit.get_plugin("kernel", "rbf")(gamma=0.1)`` for ``kernel="rbf",
        kernel_params={"gamma": 0.1}``).
    n_components : int
        Number of centres m (capped at the number of rows).
    random_state : None, int or numpy Generator
        The draw of the centres.

    Attributes
    ----------
    map_ : NystroemMap
        The fitted map.
    features_ : ndarray (n, m), float64, read-only
        Phi(X) = K(X, C) P.
    X_ : array or CSR matrix
        The rows the map was fitted on (a reference, for the runs' check).
    """

    def __init__(self, kernel, n_components, random_state=None):
        self.kernel = kernel
        self.n_components = int(n_components)
        self.random_state = random_state

    def fit(self, X):
        """Fit the map on X and compute Phi(X); returns self.

        The work runs on the BLAS and OpenMP threads a run's start would use (one thread
        when the cores are busy, else the default: ``marginkit.utils._threads.BlasChoice``),
        since it stands for the start of every run that takes the features."""
        X = check_X(X, name="X")
        blas = BlasChoice()
        try:
            # on busy cores the default threads of BLAS and of the kernel blocks' OpenMP
            # loops wait for each other at every barrier: several times one thread's time
            with blas.phase("start"):
                fitted = NystroemMap(self.kernel, self.n_components, self.random_state).fit(X)
                features = fitted.transform(X)
        finally:
            blas.close()
        # shared by the runs (and their certificates): none of them may change it
        for a in (features, fitted.projection_,
                  fitted.centres_.data if sp.issparse(fitted.centres_) else fitted.centres_):
            a.flags.writeable = False
        self.map_, self.features_, self.X_ = fitted, features, X
        # X is the caller's array (no copy): its digest now, so that rows edited in place
        # after fit are not taken for the ones Phi was computed from (found by review)
        self.X_digest_ = _rows_digest(X)
        return self

    def mismatch(self, kernel, n_components, X, centre_index=None):
        """Why these features are not those of a run with ``kernel``, ``n_components``
        and rows ``X`` (a sentence), or None when they are; ``centre_index``: the centres
        the run would draw itself (its seed's draw, ``draw_centre_index``), None when its
        draw is not reproducible (no integer ``random_state``)."""
        from ..certificates import _same_value

        if "map_" not in self.__dict__:
            return "the NystroemFeatures are not fitted; call fit(X) first"
        if n_components != self.n_components:
            return (f"they have n_components={self.n_components}, the run "
                    f"n_components={n_components!r}")
        if not _same_value(kernel, self.kernel):
            return f"they map the kernel {self.kernel!r}, the run's kernel is {kernel!r}"
        A = self.X_
        if A.shape != X.shape or sp.issparse(A) != sp.issparse(X) or A.dtype != X.dtype:
            def form(M):
                return f"{M.shape} ({M.dtype}, {'CSR' if sp.issparse(M) else 'dense'})"
            return f"they were fitted on rows of shape {form(A)}, the run's X is {form(X)}"
        if _rows_digest(X) != self.X_digest_:
            return ("they were fitted on other rows than the run's X (or X was changed "
                    "in place after fit: fit them again)")
        if centre_index is not None and not np.array_equal(centre_index,
                                                           self.map_.centre_index_):
            return (f"their centres are not those the run's random_state draws (they were "
                    f"drawn with random_state={self.random_state!r})")
        return None


def _rows_digest(X):
    """BLAKE2b of a checked matrix's shape, dtype and values, the same for the same
    matrix however it is stored: a CSR matrix by its non-zero entries (explicit zeros
    dropped, int64 indices), -0.0 as 0.0 (found by review: the same X with int64 indices,
    an explicit zero or -0.0 was refused)."""
    import hashlib

    h = hashlib.blake2b(digest_size=32)
    h.update(repr((X.shape, X.dtype.str, sp.issparse(X))).encode())
    zero = X.dtype.type(0)  # -0.0 + 0.0 is 0.0
    if sp.issparse(X):
        keep = X.data != 0
        kept = np.concatenate([[0], np.cumsum(keep, dtype=np.int64)])
        parts = (kept[X.indptr], X.indices[keep].astype(np.int64), X.data[keep] + zero)
    else:
        parts = (X[i:i + 4096] + zero for i in range(0, X.shape[0], 4096))  # row blocks
    for part in parts:
        h.update(memoryview(np.ascontiguousarray(part)).cast("B"))
    return h.hexdigest()


def _check_base(value, name, owner):
    if isinstance(value, str):
        if value not in _NYSTROEM_BASES:
            raise ValueError(
                f"{owner}: {name}={value!r} cannot be approximated; use one of "
                f"{list(_NYSTROEM_BASES)} or a Kernel instance"
            )
        return value
    if isinstance(value, Kernel):
        if getattr(value, "precomputed", False):
            raise ValueError(f"{owner}: {name} cannot be 'precomputed' (Nystroem needs features)")
        return value
    raise TypeError(f"{owner}: {name}={value!r} must be a kernel name or a Kernel instance")


def _make_base(base, base_params, owner):
    from .._registry import get_plugin

    if isinstance(base, str):
        return get_plugin("kernel", base)(**(base_params or {}))
    if base_params:
        return type(base)(**{**base.params, **base_params})
    return base


@_register_builtin("kernel", "rff")
class RandomFourierKernel(_FittedFeatureMap):
    """Random Fourier features (Rahimi and Recht) for the rbf or laplacian kernel.

    Phi(X) = sqrt(2 / m) cos(X W + b), b ~ U[0, 2 pi)^m, and the columns of W drawn from
    the kernel's spectral density: N(0, 2 gamma I) for exp(-gamma ||x - z||^2), and i.i.d.
    Cauchy(0, gamma) coordinates for exp(-gamma ||x - z||_1). E[Phi Phi^T] = K and the
    error decays like 1/sqrt(m).

    The draw is replayable: an integer ``random_state`` is its seed; otherwise (None, a
    Generator) the fit draws a seed from ``random_state`` and keeps it as ``seed_``, so a
    certificate's referee redraws the frequencies and offsets instead of trusting stored
    ones (``referee_copy``), as it recomputes a Nystroem fit's normalization from its
    centres.

    Parameters
    ----------
    base : {"rbf", "laplacian"}
    gamma : float > 0 or None
        None means 1 / n_features (fixed at fit time).
    n_components : int >= 1
        Number m of random features.
    random_state : None, int or numpy Generator

    References
    ----------
    A. Rahimi and B. Recht, "Random Features for Large-Scale Kernel Machines", Advances in
    Neural Information Processing Systems 20 (NIPS 2007).
    """

    param_table = {
        "base": Param("rbf", str, options=("rbf", "laplacian"), doc="kernel to approximate"),
        "gamma": Param(None, numbers.Real, low=0.0, low_open=True, allow_none=True,
                       doc="kernel width; None means 1 / n_features"),
        "n_components": _N_COMPONENTS,
        "random_state": _RANDOM_STATE,
    }

    def __init__(self, **params):
        super().__init__(**params)
        self.n_features_in_ = None

    def _n_outputs(self):
        return self.frequencies_.shape[1]

    _saved_fit_fields = {"n_features_in_": True, "seed_": True}

    def _restore_bytes(self, stored):
        m = int(self.n_components)
        return 8.0 * (stored["n_features_in_"] + 1) * m

    def check_frequencies_budget(self, d, budget=None):
        """ValueError naming memory_budget when the d x n_components random frequencies of
        a fit on d features exceed ``budget`` (the run's, when None: its fit's check)."""
        self._check_budget(float(d) * int(self.n_components) * 8,
                           f"the {d} x {self.n_components} random frequencies", budget)

    def _fit_state(self, X):
        d = X.shape[1]
        self.check_frequencies_budget(d)
        if isinstance(self.random_state, int):
            seed = self.random_state
        else:  # None or a Generator: the draw's own seed, kept so a referee can replay it
            seed = int(check_random_state(self.random_state).integers(0, 2**63))
        state = self._draw(seed, d)
        state["seed_"] = seed
        return state

    def _draw(self, seed, d):
        """The fitted map of ``seed`` on ``d`` features: gamma, frequencies and offsets."""
        m = int(self.n_components)
        gamma = 1.0 / d if self.gamma is None else float(self.gamma)
        rng = check_random_state(seed)
        if self.base == "rbf":
            # sqrt(2 gamma), the draw of every fit before; sqrt(2) sqrt(gamma) where 2 gamma
            # overflows (gamma near the largest double: the frequencies were inf)
            two = 2.0 * gamma
            scale = np.sqrt(two) if math.isfinite(two) else np.sqrt(2.0) * np.sqrt(gamma)
            W = rng.normal(scale=scale, size=(d, m))
        else:
            W = gamma * rng.standard_cauchy(size=(d, m))
        return {"gamma_": gamma, "frequencies_": W,
                "offsets_": rng.uniform(0.0, 2.0 * np.pi, size=m)}

    def _referee_state(self, stored):
        """The fit's only free choice is the seed of its draw: ``random_state`` itself when
        it is an integer, else the seed the fit drew from ``random_state`` (None, a
        Generator) and kept as ``seed_``. The frequencies, offsets and gamma are redrawn
        from it, never read from the fit: frequencies edited after the run (say scaled up,
        a narrower kernel) are not checked as if the spectral density had drawn them, and
        the certificate is checked on the map its parameters and seed define. A fit
        without a seed (pickled by an older version) is a ``ValueError``."""
        d = int(stored.get("n_features_in_"))
        seed = self.random_state
        kept = stored.get("seed_")
        if isinstance(seed, int) and kept is not None and (
                isinstance(kept, bool) or not isinstance(kept, (numbers.Integral, np.integer))
                or int(kept) != seed):
            raise ValueError(
                f"{self._owner()}: the fit's seed_={kept!r} is not its integer "
                f"random_state={seed}, which is the seed of its draw")
        if not isinstance(seed, int):
            seed = kept
            if isinstance(seed, bool) or not isinstance(seed, (numbers.Integral, np.integer)) \
                    or not 0 <= seed < 2**63:
                raise ValueError(
                    f"{self._owner()}: the fit keeps no seed of its random draw "
                    f"(seed_={seed!r}; random_state={self.random_state!r}), so its random "
                    "features cannot be redrawn; refit the kernel, or pass an integer "
                    "random_state")
            seed = int(seed)
        state = self._draw(seed, d)
        state.update(seed_=seed, n_features_in_=d)
        return state

    def feature_rounding(self, X, Phi):
        """Per entry of ``Phi = self.feature_map(X)`` (float64 rows X), a bound on its
        distance to sqrt(2 / m) cos(x_i W + b) for the stored frequencies W and offsets
        b: the phases' rounding gamma_{k+2} (|x_i| |W| + |b|) (k entries a row), passed
        through cos (1-Lipschitz) with cos's own rounding, and the scaling's. Found by
        review: at phases near 3e7 (gamma 1e6) the rows' rounding, 1e-9 relative, moved a
        lower margin bound above the exact margin."""
        from .._referee import gamma

        X = float64_block(X)
        W = np.asarray(self.frequencies_, dtype=np.float64)
        b = np.asarray(self.offsets_, dtype=np.float64)
        k = int(np.diff(X.indptr).max(initial=0)) if sp.issparse(X) else X.shape[1]
        with np.errstate(over="ignore", invalid="ignore"):
            # in place on one n x m array: sqrt(2/m) (gamma_{k+2} A + 4u)(1 + 4u) + 2u |Phi|,
            # with its own rounding (1 + 4u) + 8 eta
            err = np.asarray(abs(X) @ np.abs(W), dtype=np.float64)
            c = math.sqrt(2.0 / W.shape[1]) * (1 + 4 * _U)
            Phi = np.asarray(Phi, dtype=np.float64)
            for a in range(0, err.shape[0], 4096):  # (bounded temporaries)
                part = err[a:a + 4096]
                part += np.abs(b)
                part *= c * gamma(k + 2)
                part += c * 4 * _U
                part += 2 * _U * np.abs(Phi[a:a + 4096])
                part *= 1 + 4 * _U
                part += 8 * _ETA
            return err

    def _transform(self, X):
        dtype = X.dtype
        with np.errstate(over="ignore", invalid="ignore"):  # refused below, by row
            Z = X @ self.frequencies_.astype(dtype, copy=False)
            Z = np.asarray(Z, dtype=dtype)
            Z += self.offsets_.astype(dtype, copy=False)
            np.cos(Z, out=Z)
            Z *= dtype.type(np.sqrt(2.0 / self.frequencies_.shape[1]))
        if not math.isfinite(float(np.sum(Z, dtype=np.float64))):
            # cos of an overflowed x . w (found by review: at gamma = 1.7e308 every
            # feature was NaN, and the perceptrons called the rows all-zero)
            from .._validation import rows_of_X

            bad, where = rows_of_X(np.flatnonzero(~np.all(np.isfinite(Z), axis=1)))
            raise ValueError(
                f"{self._owner()}: the random features of row(s) {bad[:10].tolist()}"
                f"{' ...' if bad.size > 10 else ''} {where} are not finite: x . w overflows "
                f"{dtype} for frequencies drawn at gamma={self.gamma_!r}; choose a smaller "
                "gamma or rescale X")
        return np.ascontiguousarray(Z)
