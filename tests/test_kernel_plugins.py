"""Kernel plug-ins (subclasses of ``marginkit.plugins.Kernel`` defined outside marginkit)
get read-only views of their operands, so that they cannot modify the caller's data, and
the blocks they return are checked as a callable kernel's are (found by review: a plug-in
that normalized its operand in place rewrote the caller's X under every solver, and
malformed blocks surfaced as numpy's internals, some only at predict time)."""
import numpy as np
import pytest
import scipy.sparse as sp

import marginkit as mk
from marginkit.kernels.builtin import RBFKernel
from marginkit.plugins import Kernel

SOLVERS = ["snkp", "fista", "dcd", "iterated_tikhonov"]


def _data(n=20, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    return X, np.where(X[:, 0] > 0, 1, -1)


class InPlace(Kernel):
    """Normalizes its operand in place (dense: the rows; CSR: the stored values)."""

    def __call__(self, A, B=None):
        B = A if B is None else B
        if sp.issparse(A):
            A.data *= 2.0
        else:
            A /= np.linalg.norm(A, axis=1, keepdims=True)
        return np.asarray(A @ B.T)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("sparse", [False, True])
def test_a_plugin_cannot_write_into_the_callers_data(solver, sparse):
    X, y = _data()
    X = sp.csr_matrix(X) if sparse else X
    before = X.copy()
    with pytest.raises(ValueError, match="read-only"):
        mk.solve(X, y, solver=solver, kernel=InPlace(), max_iter=50)
    if sparse:
        assert (X != before).nnz == 0
    else:
        np.testing.assert_array_equal(X, before)


def _lin(A, B):
    return np.asarray(A @ B.T)


@pytest.mark.parametrize("returned,match", [
    (lambda A, B: _lin(A, B).ravel(), r"shape \(\d+,\)"),
    (lambda A, B: 1.0, r"shape \(\)"),
    (lambda A, B: None, r"shape \(\)"),
    (lambda A, B: _lin(B, A), r"must return K\(A, B\) of shape"),
    (lambda A, B: np.ones((A.shape[0], B.shape[0] + 1)), "must return K"),
    (lambda A, B: _lin(A, B)[..., None], "must return K"),
    (lambda A, B: _lin(A, B) * (1 + 5j), "complex"),
    (lambda A, B: _lin(A, B).astype(str), "dtype <U"),
    (lambda A, B: _lin(A, B) * np.nan, "NaN or infinity"),
])
@pytest.mark.parametrize("solver", SOLVERS)
def test_a_malformed_block_is_refused_naming_the_plugin(returned, match, solver):
    X, y = _data()
    K = type("Malformed", (Kernel,), {
        "__call__": lambda self, A, B=None: returned(A, A if B is None else B)})
    with pytest.raises(ValueError, match=f"kernel plug-in Malformed.*{match}"):
        mk.solve(X, y, solver=solver, kernel=K(), max_iter=50).predict(X[:5])


def test_a_sparse_block_is_made_dense_and_solves_as_the_dense_one():
    X, y = _data()
    dense = type("Dense", (Kernel,), {
        "__call__": lambda self, A, B=None: _lin(A, A if B is None else B)})
    sparse = type("Sparse", (Kernel,), {
        "__call__": lambda self, A, B=None: sp.csr_matrix(_lin(A, A if B is None else B))})
    a = mk.solve(X, y, solver="snkp", kernel=dense())
    b = mk.solve(X, y, solver="snkp", kernel=sparse())
    assert a.status == b.status == "separable"
    np.testing.assert_array_equal(a.dual_coef_, b.dual_coef_)
    assert b.certificate.verify(X, y)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


def test_plugin_operands_keep_their_type_and_the_builtins_are_not_wrapped():
    got = []

    class Spy(Kernel):
        def __call__(self, A, B=None):
            got.append((type(A), A is B, getattr(A, "flags", None)))
            return A @ (A if B is None else B).T

    X = sp.csr_matrix(np.eye(3))
    Spy()(X, X)
    assert got[-1][0] is sp.csr_matrix and got[-1][1]  # one object given twice stays one
    Spy()(np.eye(3))
    assert not got[-1][2].writeable
    from marginkit.plugins import _WRAPPERS

    assert RBFKernel.__call__ not in _WRAPPERS and Spy.__call__ in _WRAPPERS


def test_a_solver_plugin_reads_the_data_through_read_only_views():
    """``Problem.X`` and ``Problem.y`` are read-only views: a solver plug-in that writes
    into them raises instead of changing the caller's arrays (dense and CSR)."""
    from marginkit.plugins import Solver

    class Scribbler(Solver):
        def start(self, problem):
            X = problem.X
            (X.data if sp.issparse(X) else X)[...] = 0.0
            return None

        def finalize(self, problem, state, status):
            return {}

    X, y = _data()
    yc = y.copy()
    for data in (X, sp.csr_matrix(X)):
        before = data.copy()
        with pytest.raises(ValueError, match="read-only"):
            mk.solve(data, y, solver=Scribbler())
        assert abs(data - before).max() == 0 and np.array_equal(y, yc)


class _WriterMixin:
    def __call__(self, A, B=None):
        B = A if B is None else B
        A[0, 0] = 123.0  # a write into the operand
        return np.asarray(A @ B.T)


class _MixedIn(_WriterMixin, Kernel):
    pass


def test_a_call_inherited_from_a_mixin_is_guarded_too():
    """Found by review of the guard: a ``__call__`` from a class that is not a Kernel went
    unguarded, and ``verify``/``decision_function`` handed it the caller's X."""
    X, y = _data()
    before = X.copy()
    for call in (lambda: mk.solve(X, y, solver="snkp", kernel=_MixedIn()),
                 lambda: _MixedIn()(X, X),
                 lambda: _MixedIn().careful_block(X, X)):
        with pytest.raises(ValueError, match="read-only"):
            call()
    np.testing.assert_array_equal(X, before)


class _StaticDiag(Kernel):
    def __call__(self, A, B=None):
        B = A if B is None else B
        return np.asarray(A @ B.T)

    @staticmethod
    def diag(A):
        return np.einsum("ij,ij->i", A, A)


class _SklearnNames(Kernel):
    def __call__(self, X, Y=None):
        Y = X if Y is None else Y
        return np.asarray(X @ Y.T)


def test_static_methods_and_keyword_operands_of_plugins():
    """Found by review of the guard: a ``@staticmethod`` diag was passed the instance,
    ``k(A, Y=B)`` (scikit-learn's parameter names) was checked against the wrong
    operand, and ``k(A=A, B=B)`` went unchecked."""
    from marginkit.testing import check_plugin

    X, y = _data()
    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((5, 3)), rng.standard_normal((7, 3))
    np.testing.assert_allclose(_StaticDiag.diag(A), np.einsum("ij,ij->i", A, A))
    assert check_plugin(_StaticDiag()) and check_plugin(_SklearnNames())
    assert mk.solve(X, y, solver="dcd", kernel=_StaticDiag()).status == "certified"
    assert _SklearnNames()(A, Y=B).shape == (5, 7) and _SklearnNames()(X=A, Y=B).shape == (5, 7)
    bad = type("Bad", (Kernel,), {"__call__": lambda self, A, B=None: np.full(2, np.nan)})
    with pytest.raises(ValueError, match="kernel plug-in Bad"):
        bad()(A=A, B=B)


def test_blocks_of_other_dtypes_become_float64():
    """Found by review of the guard: a bool block (a PSD delta kernel) on float32 operands
    was refused, and int blocks passed on unconverted (they are float64 now, exact); a
    float32 plug-in's Gram matrix keeps float32's allowance in iterated_tikhonov (it was
    refused as not PSD)."""
    delta = type("Delta", (Kernel,), {"__call__": lambda self, A, B=None: (
        A[:, None, :] == (A if B is None else B)[None, :, :]).all(axis=2)})
    X, y = _data(30)
    for Xd in (X.astype(np.float32), X):
        assert delta()(Xd).dtype == np.float64
        assert mk.solve(Xd, y, solver="snkp", kernel=delta()).status == "separable"

    class RBF32(Kernel):
        def __call__(self, A, B=None):
            B = A if B is None else B
            d = (A ** 2).sum(1)[:, None] + (B ** 2).sum(1)[None, :] - 2 * A @ B.T
            return np.exp(-0.5 * np.maximum(d, 0)).astype(np.float32)

    res = mk.solve(X, y, solver="iterated_tikhonov", kernel=RBF32(), lam=1e-2, t=2)
    assert res.status == "converged" and res.certificate.verify(X, y)


def test_any_callable_call_is_guarded_and_its_operands_found():
    """Found by the second review of the guard: a ``__call__(self, *args)``, or one
    wrapped by a decorator without ``functools.wraps``, went unchecked (an asymmetric
    "kernel" a.b + g(a) - g(b) got "separable"); a partialmethod or a descriptor went
    unguarded; an operand passed by keyword after other parameters was missed."""
    import functools

    X, y = _data()
    g = np.arange(len(X), dtype=float)

    def skew(A, B):
        return np.asarray(A @ B.T) + A[:, :1] - B[:, 0][None, :]

    star = type("Star", (Kernel,), {"__call__": lambda self, *args: skew(
        args[0], args[0] if len(args) < 2 else args[1])})
    with pytest.raises(ValueError, match="kernel plug-in Star: K is not symmetric"):
        mk.solve(X, y, solver="snkp", kernel=star())

    def writes(self, A, B=None):
        A[0, 0] = 1.0
        return np.asarray(A @ (A if B is None else B).T)

    partial = type("Partial", (Kernel,), {
        "__call__": functools.partialmethod(lambda self, A, B=None, k=1: writes(self, A, B))})
    with pytest.raises(ValueError, match="read-only"):
        partial()(X.copy())

    class Gam(Kernel):
        def __call__(self, A, gamma=1.0, B=None):
            return gamma * np.asarray(A @ (A if B is None else B).T)

    assert Gam()(X, B=X[:5]).shape == (len(X), 5)
    del g


def test_blocks_keep_their_values_exactly():
    """Found by the second review: ints above 2^24 were rounded to float32 on float32
    operands (an asymmetry of 1 could vanish before the check), Python floats lost their
    last digits, and a list of strings was parsed as numbers."""
    from marginkit._validation import checked_block

    A = np.zeros((2, 1), dtype=np.float32)
    K = checked_block(np.array([[2 ** 24 + 1, 0], [0, 1]]), A, A, True, "k")
    assert K.dtype == np.float64 and K[0, 0] == 2 ** 24 + 1
    assert checked_block([[1 + 1e-12, 0.0], [0.0, 1.0]], A, A, True, "k")[0, 0] == 1 + 1e-12
    for strings in ([["1", "0"], ["0", "1"]], np.array([["1", "0"], ["0", "1"]], dtype=object)):
        with pytest.raises(ValueError, match="dtype <U|returned strings"):
            checked_block(strings, A, A, True, "k")
    with pytest.raises(ValueError, match="not symmetric"):
        checked_block(np.array([[2 ** 24, 2 ** 24 + 1], [2 ** 24, 2 ** 24]]), A, A, True, "k")


def test_each_kind_of_method_keeps_its_binding():
    """Found by the third review: the guard turned a classmethod into a method (called
    through the class or super() it computed K(B, B) silently), replaced properties
    (their setters stopped running), and a ``functools.wraps`` copy of a guarded method
    was taken for guarded. Classmethods stay classmethods, properties are left as they
    are, and a decorated copy is guarded in its own right; Fraction blocks are numbers."""
    import fractions
    import functools
    import pickle

    rng = np.random.default_rng(2)
    A, B = rng.standard_normal((3, 2)), rng.standard_normal((2, 2))

    class Lin(Kernel):
        @classmethod
        def __call__(cls, A, B=None):
            return np.asarray(A @ (A if B is None else B).T)

    class Scaled(Lin):
        @classmethod
        def __call__(cls, A, B=None):
            return 2.0 * super().__call__(A, B)

    np.testing.assert_allclose(Lin.__call__(A, B), A @ B.T)
    np.testing.assert_allclose(Scaled()(A, B), 2 * A @ B.T)

    def centring(call):
        @functools.wraps(call)
        def wrapper(self, A, B=None):
            A -= A.mean(axis=0)  # in place: must be refused
            return call(self, A, B)
        return wrapper

    class Centred(_StaticDiag):
        __call__ = centring(_StaticDiag.__call__)

    X = rng.standard_normal((6, 2))
    before = X.copy()
    with pytest.raises(ValueError, match="read-only"):
        Centred()(X)
    np.testing.assert_array_equal(X, before)

    exact = type("Exact", (Kernel,), {"__call__": lambda self, A, B=None: [
        [fractions.Fraction(int(i == j)) for j in range(len(A if B is None else B))]
        for i in range(len(A))]})
    np.testing.assert_array_equal(exact()(X), np.eye(6))
    k = _Partial()
    np.testing.assert_allclose(pickle.loads(pickle.dumps(k.__call__))(X), 2 * X @ X.T)


def _scaled_linear(self, A, B=None, k=1.0):
    return k * np.asarray(A @ (A if B is None else B).T)


class _Partial(Kernel):
    """A partialmethod ``__call__`` (its bound method pickles by name)."""
    __call__ = __import__("functools").partialmethod(_scaled_linear, k=2.0)


class _LinearPlugin(Kernel):
    """A plug-in with no feature map of its own."""

    name = "linear_plugin_test"
    param_table = {}

    def __call__(self, A, B=None):
        B = A if B is None else B
        return np.asarray(A) @ np.asarray(B).T


class _ShortMap(_LinearPlugin):
    """A plug-in whose feature map is one row short (a bug of the plug-in)."""

    def feature_map(self, A):
        return np.asarray(A)[:-1]


class _NormalizingMap(_LinearPlugin):
    """A plug-in whose feature map writes into its operand when it can."""

    def feature_map(self, A):
        A /= np.linalg.norm(A, axis=1, keepdims=True)
        return A


@pytest.mark.parametrize("solver", ["fista", "fista_svm", "pegasos", "dcd",
                                    "iterated_tikhonov", "snkp"])
def test_a_feature_map_of_other_rows_is_refused_naming_it(solver):
    """Found by review: a plug-in's feature map one row short reached the compiled loops
    of fista, fista_svm and pegasos, which read and wrote out of bounds (segfaults, heap
    corruption, hangs), and pegasos and iterated_tikhonov trained on rows paired with
    other labels (299 predictions for 300 rows). The map's rows are now checked where
    it is called (a plug-in's method, and a map assigned to an instance), and the
    compiled loops check X's rows against their vectors."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 4))
    y = np.where(X[:, 0] > 0, 1, -1)
    with pytest.raises(ValueError, match=r"feature_map returned shape \(299, 4\) for 300 rows"):
        mk.solve(X, y, solver=solver, kernel=_ShortMap(), max_iter=20)
    late = _LinearPlugin()
    late.feature_map = lambda A: np.asarray(A)[:-1]  # an instance's map: not guarded
    with pytest.raises(ValueError, match=r"feature_map returned shape \(299, 4\)"):
        mk.solve(X, y, solver=solver, kernel=late, max_iter=20)


def test_a_feature_map_gets_read_only_views_outside_solve_too():
    """Found by review: feature_map was given the caller's own array by verify, predict
    and decision_function (solve passed read-only views), so a plug-in's map could
    normalize the caller's X in place; it is now guarded as __call__ is."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((80, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    X0 = X.copy()
    with pytest.raises(ValueError, match="read-only"):
        mk.solve(X, y, solver="dcd", kernel=_NormalizingMap(), max_iter=20)
    with pytest.raises(ValueError, match="read-only"):
        _NormalizingMap().feature_map(X)
    np.testing.assert_array_equal(X, X0)


class _SquareMap(Kernel):
    """A plug-in map defined on three columns only (no n_features_in_)."""

    name = "square_map_test"
    param_table = {}

    def __call__(self, A, B=None):
        B = A if B is None else B
        return self.feature_map(A) @ self.feature_map(B).T

    def feature_map(self, A):
        A = np.asarray(A.toarray() if sp.issparse(A) else A, dtype=np.float64)
        if A.shape[1] != 3:
            raise ValueError(f"square_map needs 3 columns, got {A.shape[1]}")
        return np.hstack([A, A ** 2])


@pytest.mark.parametrize("solver", ["fista", "fista_svm", "dcd"])
def test_a_map_refusing_another_width_is_a_rejected_verdict(solver):
    """Found by review: a plug-in map without n_features_in_ that raises on another width
    of X let its ValueError out of a linear SVM certificate's verify, where the Nystroem,
    rff and Tikhonov checks reject."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((100, 3))
    y = np.where(X[:, 0] + X[:, 1] ** 2 > 1, 1, -1)
    cert = mk.solve(X, y, solver=solver, kernel=_SquareMap()).certificate
    assert cert.verify(X, y)
    for other in (X[:, :2], np.hstack([X, X]), sp.csr_matrix(X[:, :2])):
        v = cert.check(other, y)
        assert not v and "the feature map refuses X: square_map needs 3 columns" in v.reason


def test_a_nan_evaluation_slack_is_not_a_pass():
    """Found by review: the stored separator's check combined its blocks with Python's
    min, which skips a NaN against inf: a kernel whose evaluation bound is NaN passed
    (a model misclassifying every point scored +inf)."""
    from marginkit.certificates import stored_separator_margin
    from marginkit.kernels.builtin import RBFKernel

    class _NaNSlack(RBFKernel):
        def evaluation_slack(self, A, B):
            return np.nan, 0.0

    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 2))
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    sup, coef = X, y.copy()
    kern = RBFKernel(gamma=0.5)
    assert stored_separator_margin(X, y, kern, support=sup, support_coef=coef) > -np.inf
    low = stored_separator_margin(X, y, _NaNSlack(gamma=0.5), support=sup, support_coef=coef)
    assert not low > 0
    low = stored_separator_margin(X, -y, _NaNSlack(gamma=0.5), support=sup, support_coef=coef)
    assert not low > 0


def _normalize_if_writable(A):
    if isinstance(A, np.ndarray) and A.flags.writeable:
        A /= np.linalg.norm(A, axis=1, keepdims=True)
        return A
    return A / np.linalg.norm(A, axis=1, keepdims=True)


class _PropertyMap(_LinearPlugin):
    """A map reached through a property (not guarded as a class's methods are)."""

    def __call__(self, A, B=None):  # the kernel of the normalized rows, the map's
        a = np.asarray(A) / np.linalg.norm(A, axis=1, keepdims=True)
        b = a if B is None else np.asarray(B) / np.linalg.norm(B, axis=1, keepdims=True)
        return a @ b.T

    @property
    def feature_map(self):
        return _normalize_if_writable


class _SparseMap(_LinearPlugin):
    def feature_map(self, A):
        return sp.csr_matrix(A.toarray() if sp.issparse(A) else np.asarray(A))


class _ListMap(_LinearPlugin):
    def feature_map(self, A):
        return np.asarray(A.toarray() if sp.issparse(A) else A).tolist()


def test_maps_of_every_form_predict_and_never_write_into_x():
    """Review of the map guard: a map reached through a property wrote into the caller's
    X in predict and verify (only a class's methods were guarded); a sparse map's model
    certified but predict failed (np.asarray of a sparse matrix); a map returning a list
    of rows, which worked before, was refused. Every map call now reads X through a
    read-only view, sparse features predict, and a list of rows is read as check_X
    would."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    res = mk.solve(X, y, solver="dcd", kernel=_PropertyMap())
    Z = X.copy()
    res.predict(Z)
    assert res.certificate.verify(Z, y)
    np.testing.assert_array_equal(Z, X)
    for kernel in (_SparseMap(), _ListMap()):
        for solver in ("dcd", "fista", "iterated_tikhonov"):
            res = mk.solve(X, y, solver=solver, kernel=kernel)
            assert res.predict(X).shape == (200,)
            assert np.mean(res.predict(X) == y) > 0.9, (type(kernel).__name__, solver)


def test_a_slack_given_per_column_counts_with_its_largest_entry():
    """Review: a plug-in's evaluation_slack of one entry per column (shape (1, m), which
    broadcasts against K as its docstring allowed) crashed the kernel SVM check, which
    read it as one entry per row."""
    from marginkit.kernels.builtin import RBFKernel

    class _ColumnSlack(RBFKernel):
        def evaluation_slack(self, A, B):
            return np.full((1, B.shape[0]), 1e-3), 0.0

    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 2))
    y = np.where(X[:, 0] > 0, 1, -1)
    for solver in ("dcd", "fista"):
        res = mk.solve(X, y, solver=solver, kernel=_ColumnSlack(gamma=0.5))
        assert res.status == "certified" and res.certificate.verify(X, y)


@pytest.mark.parametrize("solver,separable", [("perceptron", True), ("isnkpvn", False),
                                               ("nvn", False)])
def test_a_map_refusing_another_width_is_rejected_by_the_perceptron_checks(solver,
                                                                           separable):
    """Review: the perceptron family's checks let a plug-in map's ValueError on X of
    another width escape verify, where the linear SVM check rejects (a separator and
    an infeasibility certificate here)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 3))
    y = np.where(X[:, 0] > 0, 1, -1) if separable else \
        np.where(X[:, 0] + X[:, 1] ** 2 > 1, 1, -1)
    cert = mk.solve(X, y, solver=solver, kernel=_SquareMap(), max_iter=20000).certificate
    assert cert is not None and cert.verify(X, y)
    for other in (X[:, :2], np.hstack([X, X])):
        v = cert.check(other, y)
        assert not v and "the feature map refuses X: square_map needs 3 columns" in v.reason


class _DroppingMap(_LinearPlugin):
    """A plug-in whose map drops a column its kernel function reads (a bug)."""

    def feature_map(self, A):
        A = np.asarray(A)
        return np.c_[np.zeros((A.shape[0], 1)), A[:, 1:]]


class _NegatedMap(_LinearPlugin):
    """Another map of the same kernel: -x gives the same products."""

    def feature_map(self, A):
        return -np.asarray(A)


@pytest.mark.parametrize("solver", ["snkp", "nvn", "isnkpvn", "dcd", "fista",
                                    "iterated_tikhonov"])
def test_a_map_that_disagrees_with_its_kernel_function_is_refused(solver):
    """Found by review: a plug-in whose map dropped a column that its kernel function
    read got an "infeasible" certificate on separable data (the proof checked through the
    map, predict through the function), and SVM and Tikhonov models whose predict missed
    40% of the training points. The solvers compare the two on rows spread over X."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    with pytest.raises(ValueError, match=r"kernel _DroppingMap: feature_map disagrees with "
                                         r"the kernel function on X: K\(x_0, x_0\)"):
        mk.solve(X, y, solver=solver, kernel=_DroppingMap())
    res = mk.solve(X, y, solver=solver, kernel=_NegatedMap())
    assert res.certificate is not None and res.certificate.verify(X, y)


class _DenseOnlyCall(_NegatedMap):
    """A kernel function written for sparse input only (``.multiply``): it raises on the
    dense rows the map check gives it, and the runs read only the map."""

    def __call__(self, A, B=None):
        B = A if B is None else B
        return np.asarray(A.multiply(A).sum(axis=1)) @ np.ones((1, B.shape[0]))


class _RareDrop(_LinearPlugin):
    """Drops the last column, which few rows use, but has a diag of its own."""

    def feature_map(self, A):
        return np.asarray(A)[:, :-1]

    def diag(self, A):
        return (np.asarray(A) ** 2).sum(axis=1)


def test_the_map_check_skips_a_function_that_cannot_evaluate_and_reads_diag_on_every_row():
    """Review of the map check: a plug-in whose kernel function raised AttributeError on
    dense rows was refused (only three exception types were caught), though the runs
    read only its map; a map that disagreed on 3% of the rows, off the sampled grid,
    passed. A function that raises is not compared; a plug-in's own diag is compared on
    every row."""
    from marginkit import _referee as R

    rng = np.random.default_rng(0)
    X = rng.standard_normal((1000, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    res = mk.solve(X, y, solver="dcd", kernel=_DenseOnlyCall())
    assert res.status == "certified" and res.certificate.verify(X, y)
    grid = set(np.linspace(0, 999, R.MAP_CHECK_ROWS).astype(np.int64).tolist())
    rare = np.array([i for i in range(3, 1000, 33) if i not in grid])
    Xr = np.column_stack([X, np.zeros(1000)])
    Xr[rare, -1] = 5.0
    with pytest.raises(ValueError, match=rf"_RareDrop: feature_map disagrees .* K\(x_{rare[0]}, "
                                         rf"x_{rare[0]}\)"):
        mk.solve(Xr, y, solver="dcd", kernel=_RareDrop())


def test_the_map_check_converts_only_the_rows_it_compares():
    """Review of the map check: a float32 map's whole feature matrix was converted to
    float64 to read 256 of its rows (765 MB for a 381 MB Phi)."""
    import tracemalloc

    from marginkit import _referee as R

    rng = np.random.default_rng(0)
    X = rng.standard_normal((100000, 50)).astype(np.float32)
    Phi = -X
    tracemalloc.start()
    try:
        R.check_map_agrees(_NegatedMap(), X, Phi)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < Phi.nbytes // 4  # the 256 x 256 blocks of the comparison, not n x 50


def _lin(A, B):
    return np.asarray(A, float) @ np.asarray(B, float).T


class _NegativeBound(Kernel):
    def __call__(self, A, B=None):
        return _lin(A, A if B is None else B)

    def careful_block(self, A, B):
        K = _lin(A, B)
        return K, -0.5 * np.abs(K)


def _lin_plus_ten(A, B):
    """A careful block of another kernel than the linear one: K + 10 I on square blocks
    of the same rows, with a bound of 0."""
    K = _lin(A, B)
    if A.shape == B.shape and np.array_equal(np.asarray(A), np.asarray(B)):
        K = K + 10 * np.eye(len(K))
    return K, np.zeros_like(K)


class _OtherKernel(Kernel):
    def __call__(self, A, B=None):
        return _lin(A, A if B is None else B)

    def careful_block(self, A, B):
        return _lin_plus_ten(A, B)


class _HonestCareful(Kernel):
    def __call__(self, A, B=None):
        return _lin(A, A if B is None else B)

    def careful_block(self, A, B):
        K = _lin(A, B)
        return K, 1e-15 * np.abs(K)


@pytest.mark.parametrize("kernel", [_NegativeBound(), _OtherKernel()])
def test_a_plugins_careful_block_is_checked_before_the_referee_reads_it(kernel):
    """Found by review: a negative error bound, or a careful block of another kernel than
    __call__'s (K + 10 I), made the referee confirm alpha = 1 as a separator of points that
    no linear separator through the origin separates. Both are refused by name; an honest
    careful_block still serves the referee."""
    from marginkit.certificates import SeparatorCertificate

    X = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    y = np.array([1, 1, -1, -1])
    cert = SeparatorCertificate(np.ones(4), 1.0, kernel, np.array([-1, 1]))
    with pytest.raises(ValueError, match=r"kernel plug-in _\w+: careful_block\(A, B\) "
                                         r"(returned an error bound E with negative|differs)"):
        cert.verify(X, y)
    honest = SeparatorCertificate(np.ones(4), 1.0, _HonestCareful(), np.array([-1, 1]))
    assert honest.verify(X, y) is False
    Xs = np.array([[1.0, 0.2], [2.0, -0.1], [-1.0, 0.3], [-2.0, 0.1]])
    r = mk.solve(Xs, y, solver="perceptron", kernel=_HonestCareful(), max_iter=100)
    assert r.status == "separable" and r.certificate.verify(Xs, y)


class _StaticOther(Kernel):
    def __call__(self, A, B=None):
        return _lin(A, A if B is None else B)

    careful_block = staticmethod(_lin_plus_ten)


class _LinearCallingItRBF(RBFKernel):
    def __call__(self, A, B=None):
        return _lin(A, A if B is None else B)


class _OneImplementation(Kernel):
    def careful_block(self, A, B):
        K = _lin(A, B)
        return K, 4e-16 * np.abs(K)

    def __call__(self, A, B=None):
        return self.careful_block(A, A if B is None else B)[0]


def _instance_override():
    k = _HonestCareful()
    k.careful_block = _OtherKernel().careful_block
    return k


@pytest.mark.parametrize("make", [_StaticOther, _LinearCallingItRBF, _instance_override])
def test_the_careful_block_check_has_no_way_around(make):
    """Found by review of the check: a careful_block declared as a staticmethod, set on
    the instance, or inherited from a built-in class by a subclass with its own __call__
    went unchecked, and the false separator verified."""
    from marginkit.certificates import SeparatorCertificate

    X = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    y = np.array([1, 1, -1, -1])
    cert = SeparatorCertificate(np.ones(4), 1.0, make(), np.array([-1, 1]))
    with pytest.raises(ValueError, match=r"careful_block\(A, B\) differs"):
        cert.verify(X, y)


def test_a_call_written_through_careful_block_serves_the_referee():
    """Found by review of the check: a __call__ written as careful_block(A, B)[0] recursed
    without end once the check called __call__ from inside careful_block."""
    Xs = np.array([[1.0, 0.2], [2.0, -0.1], [-1.0, 0.3], [-2.0, 0.1]])
    y = np.array([1, 1, -1, -1])
    r = mk.solve(Xs, y, solver="perceptron", kernel=_OneImplementation(), max_iter=100)
    assert r.status == "separable" and r.certificate.verify(Xs, y)
