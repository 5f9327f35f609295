"""How iterated Tikhonov represents theta (Beugnot et al. 2021, Eq. 6 and section 3.2).

* primal: kernels with an explicit ``feature_map`` (``linear``: Phi = X itself, dense or
  CSR, never densified; approximations such as Nystroem: an (n, m) array). Newton
  systems are (d, d).
* exact kernels (and ``kernel="precomputed"``): the representer theorem in an
  orthonormal basis, ``ExactKernelMap`` (Newton on theta = |S|^{1/2} V^T beta coordinates,
  every eigen-direction of K,
  memory O(n^2), refused beyond ``memory_budget`` by ``check_gram_budget``).
* Nystroem (``n_components``): theta in the span of m sampled centres, memory O(n m);
  or the centres and rows of a ``NystroemFeatures`` fitted once and shared by several
  runs on the same X (``solve(..., features=F)``).

``training_features`` builds the rows the Newton iterations run on, ``validation_features``
the held-out rows of ``t="auto"``, and ``blocked_limits`` says what cannot run on rows
held in blocks by workers.

The paper's reference is in the package docstring (``marginkit.solvers.tikhonov``).

References
----------
N. J. Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., SIAM, 2002.
"""
import numbers

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from ..._executors import local_executor
from ..._referee import feature_rows, float64_block, map_rows
from ..._validation import check_X
from ...kernels.approximation import NystroemFeatures, NystroemMap, draw_centre_index
from ...linalg._shared import reuse

#: n x n float64 matrices an exact-kernel run holds at its peak: K, its eigenvectors and
#: the feature map Phi = V |S|^{1/2} with its projection, the Newton systems on the n
#: coefficients (Hessian, Cholesky factor) and the referee's own decomposition and
#: systems beside the solver's state. Measured (tracemalloc, rbf, n = 400, 1,000 and
#: 2,000): a peak of 11.6, 10.3 and 10.1 such matrices for one solve, 11.5 and 12.1 for
#: the estimator's one-vs-rest runs (a decomposition kept between them, n = 400, 1,000);
#: the check counted 3 (the Gram path alone), so a run within the budget could take
#: 3.4-4 times it
_GRAM_COPIES = 13
#: the same for the referee's check alone (``NewtonDecrementCertificate``: K, its
#: decomposition and feature map, the Newton systems of its links): a peak of 7.0-7.1
#: such matrices measured at n = 400, 1,000 and 2,000 (a run's 13 would refuse to check
#: a result that a run within the budget made before the whole run was counted)
_REFEREE_COPIES = 8


def check_gram_budget(n, budget, what="iterated_tikhonov with an exact kernel",
                      role="run"):
    """Refuse an exact-kernel run whose n x n matrices exceed ``budget`` bytes: the whole
    run's ``_GRAM_COPIES`` of them, or the referee's ``_REFEREE_COPIES`` (``role``)."""
    copies = _REFEREE_COPIES if role == "referee" else _GRAM_COPIES
    need = copies * 8.0 * float(n) * float(n)
    if need > budget:
        raise ValueError(
            f"{what} forms the {n} x {n} Gram matrix, its eigendecomposition and Newton "
            f"systems of {n} coefficients: needs {need / 2**30:.3g} GiB, memory_budget is "
            f"{budget / 2**30:.3g} GiB; use n_components (Nystroem), a kernel approximation "
            "(nystroem/rff) or raise memory_budget")


_UNIT64 = np.finfo(np.float64).eps / 2
_UNIT32 = float(np.finfo(np.float32).eps) / 2

#: (q, q) float64 matrices of one Newton system: the Hessian (or the preconditioner's),
#: its Cholesky factor, and the referee's (its Hessian and factor)
_NEWTON_COPIES = 3


def check_newton_budget(q, t, budget, what="iterated_tikhonov"):
    """Refuse a run whose (q, q) Newton systems or whose chain of t links of q
    coefficients exceed ``budget`` bytes (found by review: kernel="linear" on 200,000
    sparse features asked for a 298 GiB Hessian, t=10**9 for 7.45 GiB of targets).
    ``q`` None: before the coefficients are known, the chain at one per link."""
    need = _NEWTON_COPIES * 8.0 * float(q) * float(q) if q is not None else 0.0
    if need > budget:
        raise ValueError(
            f"{what} forms {q} x {q} Newton systems (the Hessian, its Cholesky factor, the "
            f"referee's): needs {need / 2**30:.3g} GiB, memory_budget is "
            f"{budget / 2**30:.3g} GiB; for data with many features use solver='dcd' or "
            "'fista' (linear SVMs, memory O(nnz)), a kernel with n_components (Nystroem), or "
            "raise memory_budget")
    chain = 8.0 * float(t) * (float(q if q is not None else 1) + 4.0)
    if chain > budget:
        each = f" of {q} coefficients" if q is not None else ""
        raise ValueError(
            f"{what} keeps a chain of t={t} proximal steps{each}: needs "
            f"{'at least ' if q is None else ''}{chain / 2**30:.3g} GiB, memory_budget is "
            f"{budget / 2**30:.3g} GiB; take a smaller t (or t_max) or raise memory_budget")


def _decompose(K, role, entry_error):
    """(eigenvalues ascending, eigenvectors, rounding level) of the symmetric part of K,
    with ExactKernelMap's checks; one decomposition of the same K per ``role`` within
    ``linalg._shared.shared_decompositions`` (then read-only arrays)."""
    return reuse(np.asarray(K, dtype=np.float64), (role, entry_error),
                 lambda K: _eigen(K, entry_error))


def _eigen(K, entry_error):
    from ...certificates import NotPositiveSemidefiniteError

    n = K.shape[0]
    K = 0.5 * (K + K.T)
    if not np.all(np.isfinite(K)):
        raise ValueError("the Gram matrix has non-finite entries (kernel values overflow "
                         "float64); rescale X or the kernel parameters")
    s, V = sla.eigh(K)
    del K
    top = float(np.max(np.abs(s))) if s.size else 0.0
    tol = 64.0 * n * _UNIT64 * top + entry_error
    if s.size and s[0] < -tol:
        raise NotPositiveSemidefiniteError(
            f"the kernel is not positive semi-definite on the data: its Gram matrix has "
            f"the eigenvalue {s[0]:.3g} (largest {s[-1]:.3g}, rounding level {tol:.3g}); "
            "iterated_tikhonov needs a positive semi-definite kernel")
    if not np.any(s > tol):
        raise ValueError("the Gram matrix is zero on the data; check the kernel and its "
                         "parameters")
    return s, V, tol


class ExactKernelMap:
    """An exact kernel as a feature map on the training rows (the representer theorem
    in an orthonormal basis): K = V S V^T (``scipy.linalg.eigh``), Phi = V |S|^{1/2} and
    ``projection_`` = V |S|^{-1/2}, so that Phi(x) = k(x, X_train) projection_ reproduces
    Phi on the training rows and theta = Phi^T beta for beta = projection_ theta.

    Every eigen-direction is kept (all but those whose computed eigenvalue is exactly 0,
    where Phi's column is 0): the problem solved, and checked, is the one of the positive
    semi-definite K_abs = V |S| V^T, within the rounding of the decomposition of the
    computed K (eigh is backward stable to about n u ||K||, Higham section 10.2; an
    eigenvalue |s| <= ``rounding_level`` is rounding, its sign included, and counts with
    |s|). Dropping the small eigenvalues instead is not within rounding of the certified
    quantity (found by review): the decrement moves by about sqrt(s) |v^T l'(z)| /
    (n sqrt(lam)) when an eigenvalue s is dropped, not by s, and a decrement of 4.4e-9
    was claimed where the kernel's own problem had 4.0e-6. The rounding level
    64 n u max|s| (+ the rounding of K's entries) remains the test of positive
    semi-definiteness: an eigenvalue below minus that level means the kernel is not
    positive semi-definite on the data (``NotPositiveSemidefiniteError``).

    Newton's method then runs on theta (p = the number of non-zero eigenvalues, about n):
    the Hessian Phi^T D Phi / n + lam I is at least lam I, and its decrement is computed
    by a Cholesky solve, accurate to about cond(H) u relative. Each column of Phi carries
    its factor sqrt(|s|), so the gradient, the Hessian's couplings and their rounding in a
    small eigen-direction all scale with it, and beta = V |S|^{-1/2} theta does not
    amplify rounding. The n-dimensional form of the same Newton step (beta, with the
    Woodbury identity) subtracts two nearly equal terms and divides by lam: with an
    ill-conditioned K (poly kernel, large inputs) its decrement was off by orders of
    magnitude (1.2e-9 reported for 0.136).

    ``keep_basis=True`` keeps the eigenvectors (``eigenvectors()`` is then a view of
    them, and ``projection_`` is formed when read). ``role``: whose decomposition it is
    (``"solver"``, ``"referee"``), which ``linalg._shared.shared_decompositions`` keeps
    apart.
    """

    def __init__(self, K, centres=None, keep_basis=False, role="solver", entry_error=0.0):
        K = np.asarray(K, dtype=np.float64)
        s, V, tol = _decompose(K, role, entry_error)
        self.spectrum_ = s
        self.rounding_level = tol
        self.centres_ = centres
        self._kept = np.flatnonzero(s != 0.0)
        self.eigenvalues_ = np.abs(s[self._kept])
        self._basis = V if keep_basis else None
        self.features = V[:, self._kept] * np.sqrt(self.eigenvalues_)
        self._projection = None if keep_basis else self._project(V)

    def _project(self, V):
        return V[:, self._kept] / np.sqrt(self.eigenvalues_)

    @property
    def projection_(self):
        """V |S|^{-1/2} (n, p): formed when read for a map that keeps its basis (the
        referee's, which does not read it: one n x p matrix less)."""
        return self._projection if self._projection is not None else self._project(self._basis)

    def eigenvectors(self):
        """V (n, p), orthonormal columns: a view of the kept basis, or Phi |S|^{-1/2}."""
        if self._basis is not None:
            return self._basis[:, self._kept]
        return self.features / np.sqrt(self.eigenvalues_)


def exact_gram(kernel, X, precomputed):
    """(K of the training rows X in float64, a bound on the spectral norm of the rounding
    of its entries as given): 0 for float64 entries, u_32 ||K||_F (>= ||E||_2 for
    |E_ij| <= u_32 |K_ij|) for float32 entries, those of a precomputed Gram matrix (X
    itself) in float32 or of a kernel whose values are float32
    (``Kernel.returned_gram``: a callable that returns float32; found by review: such a
    kernel's Gram matrix, eigenvalues down to -4.8e-6 of 660 by its own rounding, was
    refused at float64's level). A kernel's rows are given in float64. Found by review
    too: a float32 Gram of rank 3, its eigenvalues down to -4e-7 by its own rounding, was
    refused as not positive semi-definite at float64's level; a first fix, the level
    64 n u_32 max|s|, let eigenvalues of -3 pass at n = 1000."""
    if precomputed:
        K = X.toarray() if sp.issparse(X) else X
    else:
        K = kernel.returned_gram(X.astype(np.float64) if X.dtype != np.float64 else X)
    given = np.asarray(K).dtype
    K = np.asarray(K, dtype=np.float64)
    if given != np.float32:
        return K, 0.0
    _check_float32_psd(K)
    return K, _UNIT32 * float(np.linalg.norm(K)) * (1.0 + 1e-6)


def _check_float32_psd(K):
    """NotPositiveSemidefiniteError unless K (float32 entries) is within its own rounding
    of a positive semi-definite matrix. u_32 ||K||_F alone is loose where K's entries differ
    in size (found by review: 1e8 added to K[0, 0] let a negative 2 x 2 minor, eigenvalue
    -4.7, pass). The rounding of a PSD K* (|E_ij| <= u_32 |K*_ij| <= u_32 sqrt(K*_ii K*_jj))
    moves S = D^-1/2 K D^-1/2, D = diag(K), by at most n u_32 (1 + 2 u_32) in norm, and
    S* is congruent to a PSD matrix: S + c I must be positive definite for
    c = n u_32 (1 + 1e-3) + 64 n^2 u (Cholesky's own rounding); a zero diagonal entry
    needs a zero row."""
    from ...certificates import NotPositiveSemidefiniteError

    n = K.shape[0]
    d = np.diagonal(K).copy()
    zero = d <= 0.0
    if np.any(K[zero] != 0.0):
        i = int(np.flatnonzero(zero & np.any(K != 0.0, axis=1))[0])
        raise NotPositiveSemidefiniteError(
            f"the kernel is not positive semi-definite on the data: K[{i}, {i}] = 0 and row "
            f"{i} is not zero; iterated_tikhonov needs a positive semi-definite kernel")
    inv = np.where(zero, 0.0, 1.0 / np.sqrt(np.where(zero, 1.0, d)))
    S = K * inv[:, None] * inv[None, :]
    S[np.diag_indices(n)] = np.where(zero, 1.0, np.diagonal(S))
    S[np.diag_indices(n)] += n * _UNIT32 * (1.0 + 1e-3) + 64.0 * n * n * _UNIT64
    try:
        sla.cholesky(S, lower=True, check_finite=False, overwrite_a=True)
    except np.linalg.LinAlgError:
        raise NotPositiveSemidefiniteError(
            "the kernel is not positive semi-definite on the data: its float32 Gram matrix, "
            "scaled to a unit diagonal, has an eigenvalue below -n u_32, beyond the "
            "rounding of float32 entries; iterated_tikhonov needs a positive semi-definite "
            "kernel") from None


def gram_matrix(kernel, A, B=None):
    """K(A, B) in float64 (float32 rows converted first: the kernel's float32 arithmetic
    would not be positive semi-definite to float64 accuracy)."""
    def up(M):
        if sp.issparse(M):
            return M.astype(np.float64) if M.dtype != np.float64 else M
        return np.asarray(M, dtype=np.float64)

    A = up(A)
    B = A if B is None else up(B)
    return np.asarray(kernel(A, B), dtype=np.float64)


class TrainingFeatures:
    """The rows the Newton iterations of one run work on: ``rows`` (an executor whose
    blocks hold Phi), ``Phi`` (the in-memory feature matrix, None when the rows are held
    by the blocks of a distributed executor), and the map that made them: ``nystroem``
    (a fitted ``NystroemMap``), ``exact`` (an ``ExactKernelMap``) or neither, with
    ``identity_map`` when Phi is X itself."""

    def __init__(self, rows, Phi, nystroem=None, exact=None, identity_map=False):
        self.rows = rows
        self.Phi = Phi
        self.nystroem = nystroem
        self.exact = exact
        self.identity_map = identity_map


def training_features(problem, params, train_index, blocked):
    """The ``TrainingFeatures`` of a run: the problem's rows (``train_index``: the training
    split of t="auto", or None) in the representation ``params`` and the kernel ask for.
    ``blocked``: the rows are held by the blocks of a distributed executor (the linear
    kernel on the blocks' own rows, ``blocked_limits``)."""
    if blocked:
        return TrainingFeatures(problem.executor, None, identity_map=True)
    kernel, X, y = problem.kernel, problem.X, problem.y
    precomputed = getattr(kernel, "precomputed", False)
    m = params["n_components"]
    nystroem = exact = None
    identity_map = False
    Xtr = X if train_index is None else X[train_index]
    ytr = y if train_index is None else y[train_index]
    if precomputed and train_index is not None:
        Xtr = Xtr[:, train_index]
    ytr = np.ascontiguousarray(ytr, dtype=np.float64)
    given = getattr(problem, "features", None)
    if given is not None:
        nystroem, Phi = _given_features(problem, given, kernel, m, X,
                                        precomputed or train_index is not None)
    elif m is not None:
        if precomputed:
            raise ValueError("n_components (Nystroem) needs the data X, not "
                             "kernel='precomputed'")
        nystroem = NystroemMap(kernel, m, problem.rng).fit(Xtr)
        Phi = nystroem.transform(Xtr)
    elif getattr(kernel, "feature_map", None) is not None and not precomputed:
        # a map evaluated on float32 rows computes in float32: a non-linear map is
        # evaluated on float64 rows (the problem solved is the one the referee
        # checks) (an identity map then runs on X itself, as the linear kernel does)
        linear = getattr(kernel, "name", None) == "linear"
        identity_map = linear or _returns_its_rows(kernel, Xtr)
        if linear:
            Phi = map_rows(kernel, Xtr)
        else:  # by row blocks: no float64 copy of a float32 X
            Phi = Xtr if identity_map else feature_rows(kernel, Xtr)
        Phi = check_X(Phi, name="feature_map(X)")
    else:
        # exact kernel (or precomputed Gram): Newton on theta in the eigenbasis of K
        if params["fit_intercept"]:
            raise ValueError(
                "fit_intercept=True needs a kernel with a feature map (linear) or "
                "n_components (Nystroem); with a Gram kernel add a constant to the "
                "kernel instead")
        budget = getattr(getattr(problem, "config", None), "memory_budget", 2.0 * 2**30)
        check_gram_budget(Xtr.shape[0], budget)
        K, error = exact_gram(kernel, Xtr, precomputed)
        centres = None if precomputed else Xtr
        exact = ExactKernelMap(K, centres, entry_error=error)
        del K
        Phi = np.ascontiguousarray(exact.features)
    # the training rows as given (linear kernel, no split): the problem's own blocks; any
    # other feature rows: one in-memory block of Phi
    rows = problem.executor if Phi is X else local_executor(Phi, ytr)
    return TrainingFeatures(rows, Phi, nystroem, exact, identity_map)


def _given_features(problem, given, kernel, m, X, refused):
    """The map and rows of ``solve(..., features=given)``: a ``NystroemFeatures`` fitted
    on the run's X with its kernel and ``n_components`` (ValueError naming ``features``
    otherwise; ``refused``: kernel="precomputed" or t="auto"). The run's generator draws
    the centres its own map would draw, so that what it draws next (the CG
    preconditioner's rows) is what it would be without ``features``; with an integer
    ``random_state`` that draw must be the centres of ``given``."""
    if not isinstance(given, NystroemFeatures):
        raise TypeError(f"features={type(given).__name__} must be a fitted NystroemFeatures "
                        "(marginkit.kernels.approximation) or None")
    if m is None or refused:
        raise ValueError(
            "features (a NystroemFeatures) is taken by iterated_tikhonov with n_components, "
            "a kernel on the data X (not 'precomputed') and an integer t (t='auto' holds out "
            "a validation split of the rows); pass features=None")
    drawn = draw_centre_index(problem.rng, X.shape[0], m)
    seed = getattr(getattr(problem, "config", None), "random_state", None)
    reproducible = isinstance(seed, numbers.Integral) and not isinstance(seed, bool)
    why = given.mismatch(kernel, m, X, drawn if reproducible else None)
    if why is not None:
        raise ValueError(f"features is not this run's Nystroem map: {why}; fit "
                         "NystroemFeatures(kernel, n_components, random_state) on this X with "
                         "the run's values, or pass features=None")
    return given.map_, given.features_


def _returns_its_rows(kernel, X):
    """Whether ``kernel.feature_map`` is the identity (returns the float64 rows it is
    given), probed on one row once an unfitted map is fitted on all of X."""
    if getattr(kernel, "fitted", True) is False:
        kernel.fit(X)
    probe = float64_block(X[:1])
    try:
        return kernel.feature_map(probe) is probe
    except Exception:
        # a map that fails on one row is not the identity; its evaluation on all rows
        # (``feature_rows``, then ``check_X``) reports what is wrong with it
        return False


def validation_features(kernel, X, val_index, train_index, features):
    """Phi of the held-out rows ``val_index`` of X in the representation of ``features``
    (the ``TrainingFeatures`` fitted on the rows ``train_index``)."""
    Xv = X[val_index]
    if features.nystroem is not None:
        return features.nystroem.transform(Xv)
    if features.exact is not None:
        if getattr(kernel, "precomputed", False):
            Kv = Xv[:, train_index]
            Kv = np.asarray(Kv.toarray() if sp.issparse(Kv) else Kv, dtype=np.float64)
        else:
            Kv = gram_matrix(kernel, Xv, X[train_index])
        return Kv @ features.exact.projection_
    if features.identity_map:
        return check_X(map_rows(kernel, Xv), name="feature_map(X)")
    return check_X(feature_rows(kernel, Xv), name="feature_map(X)")


def blocked_limits(params, kernel):
    """Why iterated Tikhonov cannot run with ``params`` and ``kernel`` on rows held in
    blocks by a distributed executor (the chunks of a dask array), or None.

    On row blocks every data pass of a Newton iteration is a sum over rows (z = Phi theta,
    Phi^T g, Phi^T diag(h) Phi, H v, the loss), which each block computes on its own rows:
    that needs the rows' features where the rows are. With the linear kernel they are the
    rows themselves. A Gram kernel's Newton system couples every pair of rows (the n x n
    matrix K and its eigendecomposition) and cannot be split by rows; t="auto" draws a
    validation split of the rows, and Nystroem (``n_components``) a sample of centres
    and a map fitted on them, which the blocked path does not do."""
    from ...kernels.builtin import LinearKernel

    if type(kernel) is not LinearKernel:
        name = getattr(kernel, "name", None) or type(kernel).__name__
        return (f"kernel {name!r} is not supported: a Gram kernel's Newton systems couple all "
                "rows (the n x n kernel matrix) and cannot be split into row chunks, and a "
                "kernel approximation's feature map is not evaluated on the chunks; use "
                "kernel='linear' (on explicit features), or compute X into memory "
                "(X.compute())")
    bad = []
    if params["t"] == "auto":
        bad.append("t='auto' (it holds out a random validation split of the rows; pass an "
                   "integer t)")
    if params["n_components"] is not None:
        bad.append("n_components (Nystroem centres are sampled and mapped in memory; compute "
                   "X into memory)")
    return "; ".join(bad) or None
