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
import numbers
import threading

import numpy as np
import scipy.sparse as sp

from .._registry import _register_builtin
from .._validation import Param, check_random_state, check_X
from ..plugins import Kernel
from .builtin import prepare_pair

__all__ = ["NystroemKernel", "RandomFourierKernel"]


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
        """Fix the feature map on the training rows X; returns self."""
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

    def _check_budget(self, need, what):
        budget = self.__dict__.get("_memory_budget")
        if budget is not None and need > budget:
            raise ValueError(
                f"{self._owner()}: {what} needs {need / 2**30:.3g} GiB; memory_budget is "
                f"{budget / 2**30:.3g} GiB; use fewer components "
                f"(n_components={self.n_components}) or raise memory_budget"
            )

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
        return np.einsum("ij,ij->i", P, P).astype(dtype, copy=False)


@_register_builtin("kernel", "nystroem")
class NystroemKernel(_FittedFeatureMap):
    """Nystroem approximation of a base kernel on m uniformly sampled centres.

    Phi(X) = K(X, C) K_CC^{-1/2}, with C the m centres (rows of the training X drawn
    uniformly without replacement) and K_CC^{-1/2} = V diag(lambda^{-1/2}) V^T from the
    eigendecomposition of K(C, C); eigenvalues below ``m * eps * lambda_max`` (numerically
    zero or negative) are dropped, which makes Phi Phi^T = K_XC K_CC^+ K_CX. With m = n the
    approximation is the exact kernel matrix of the training rows.

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

    def __init__(self, **params):
        super().__init__(**params)
        self.base_kernel = _make_base(self.base, self.base_params, self._owner())
        self.n_features_in_ = None

    def _n_outputs(self):
        return self.components_.shape[0]

    def _fit_state(self, X):
        n = X.shape[0]
        m = min(int(self.n_components), n)
        # K_CC, its eigenvectors and K_CC^{-1/2}
        self._check_budget(3.0 * m * m * 8, f"the {m} x {m} matrices of the centres")
        rng = check_random_state(self.random_state)
        idx = np.sort(rng.choice(n, size=m, replace=False))
        centres = X[idx]
        if not sp.issparse(centres):
            centres = np.ascontiguousarray(centres)
        Kcc = np.asarray(self.base_kernel(centres, centres), dtype=np.float64)
        if not np.isfinite(Kcc).all():
            raise ValueError("Nystroem: the base kernel's values K(C, C) at the centres are not "
                             "finite (they overflow float64): rescale X (e.g. to unit-norm rows) "
                             "or change the base kernel's parameters")
        lam, V = np.linalg.eigh(Kcc)
        keep = lam > m * np.finfo(np.float64).eps * max(lam.max(), 0.0)
        scale = np.zeros_like(lam)
        scale[keep] = 1.0 / np.sqrt(lam[keep])
        # K_CC^{-1/2} restricted to the numerically positive eigenspace
        return {"normalization_": (V * scale) @ V.T, "components_": centres,
                "component_indices_": idx, "n_components_kept_": int(keep.sum())}

    def _transform(self, X):
        Kxc = self.base_kernel(X, self.components_)  # float64 (the centres are float64 or X's)
        return np.ascontiguousarray(Kxc @ self.normalization_.astype(Kxc.dtype, copy=False),
                                    dtype=X.dtype)


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

    Parameters
    ----------
    base : {"rbf", "laplacian"}
    gamma : float > 0 or None
        None means 1 / n_features (fixed at fit time).
    n_components : int >= 1
        Number m of random features.
    random_state : None, int or numpy Generator
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

    def _fit_state(self, X):
        d, m = X.shape[1], int(self.n_components)
        self._check_budget(float(d) * m * 8, f"the {d} x {m} random frequencies")
        gamma = 1.0 / d if self.gamma is None else float(self.gamma)
        rng = check_random_state(self.random_state)
        if self.base == "rbf":
            W = rng.normal(scale=np.sqrt(2.0 * gamma), size=(d, m))
        else:
            W = gamma * rng.standard_cauchy(size=(d, m))
        return {"gamma_": gamma, "frequencies_": W,
                "offsets_": rng.uniform(0.0, 2.0 * np.pi, size=m)}

    def _transform(self, X):
        dtype = X.dtype
        Z = X @ self.frequencies_.astype(dtype, copy=False)
        Z = np.asarray(Z, dtype=dtype)
        Z += self.offsets_.astype(dtype, copy=False)
        np.cos(Z, out=Z)
        Z *= dtype.type(np.sqrt(2.0 / self.frequencies_.shape[1]))
        return np.ascontiguousarray(Z)
