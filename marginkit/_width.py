"""The memory ``X``'s number of columns alone costs, checked against ``memory_budget``
before a solve (``marginkit.solve``) and before a referee reads X
(``marginkit.certificates``): vectors of the input space, the column pointers of a
kernel's sparse products, an rff map's frequencies."""
import scipy.sparse as sp

from .kernels.builtin import LinearKernel


#: float64 vectors of n_features entries a solve keeps at its peak, or their equivalent:
#: the solver's (iterates, gradients, per-block partial sums) and its referee's, whose
#: long-double sums count two each; what ``memory_budget`` is checked against. Measured:
#: a linear fista, fista_svm or dcd run on 4,194,304 columns (40 rows) peaked at 246 bytes
#: a column, 31 vectors (found by review: 8 were counted, and a fista run at the width
#: the check allowed peaked at 7.2 GiB against 2 GiB); 40 leaves room
_FEATURE_VECTORS = 40


#: int64 arrays of n_features + 1 entries an exact kernel or a kernel approximation keeps
#: for CSR input: the column pointers of the transposed (CSC) operand of its sparse
#: products, one held for a whole solve and one per block of rows being computed
_KERNEL_COLUMN_ARRAYS = 2


def _transposes_columns(kernel):
    """Whether a built-in kernel's products of CSR operands go through a CSC copy
    (O(n_features) column pointers): rbf, poly and spline, and a Nystroem map of one of
    them (laplacian merges rows; rff multiplies by its frequencies, budgeted at its fit)."""
    from .kernels.builtin import PolynomialKernel, RBFKernel, SplineKernel

    base = getattr(kernel, "base_kernel", None)  # a Nystroem map: its base kernel's products
    if base is not None:
        return _transposes_columns(base)
    return isinstance(kernel, (RBFKernel, PolynomialKernel, SplineKernel))


def _check_kernel_column_budget(X, budget, kernel):
    """A CSR X whose number of columns alone exceeds ``budget`` in the sparse products of
    a kernel that transposes its operands (O(n_features) memory each, however few the
    stored entries)."""
    need = _KERNEL_COLUMN_ARRAYS * 8.0 * (X.shape[1] + 1)
    if need > budget:
        name = getattr(kernel, "name", None) or type(kernel).__name__
        raise ValueError(
            f"X has {X.shape[1]} columns: the sparse products of kernel {name!r} keep arrays "
            f"of one int64 per column (~{need / 2**30:.3g} GiB for {_KERNEL_COLUMN_ARRAYS} "
            f"of them), above memory_budget = {budget / 2**30:.3g} GiB; drop the empty "
            "columns (e.g. X[:, X.getnnz(axis=0) > 0]) or raise memory_budget")


def check_width_budget(X, kernel, budget=None):
    """ValueError naming memory_budget when X's number of columns alone exceeds
    ``budget`` (None: the default ``Config``'s): in the vectors of the input space (the
    linear kernel, None), an rff map's frequencies or the column pointers of a kernel's
    sparse products (CSR X). Before a solve, and before a referee reads X
    (``certificates.as_data``, ``certificates.margin_bounds``: found by review, verify on
    a CSR X of 2^31 declared columns allocated 16 GiB arrays). Nothing for a precomputed
    Gram matrix (its columns are rows) or an object that is not a matrix (its
    validation names it)."""
    if len(getattr(X, "shape", ())) != 2 or getattr(kernel, "precomputed", False):
        return
    if budget is None:
        from ._config import Config

        budget = Config().memory_budget
    frequencies = getattr(kernel, "check_frequencies_budget", None)
    if kernel is None or isinstance(kernel, LinearKernel):
        _check_feature_budget(X, budget)
    elif callable(frequencies):
        # an rff map's d x n_components frequencies: its fit's own check, made before the
        # run or a referee's refit on X reaches it (found by review: a referee refitting
        # an rff map on 6 million columns took 4.6 GB past a 2 GiB budget)
        frequencies(X.shape[1], budget)
    elif _sparse(X) and _transposes_columns(kernel):
        _check_kernel_column_budget(X, budget, kernel)


def _sparse(X):
    """Whether X is sparse: a scipy.sparse matrix, or a dask array of sparse chunks (its
    ``_meta``; found by review: a dask array of CSR chunks of 2^30 columns ran a Nystroem
    fit to 5.1 GiB past a 2 GiB budget, unchecked)."""
    return sp.issparse(X) or sp.issparse(getattr(X, "_meta", None))


def _check_feature_budget(X, budget):
    need = _FEATURE_VECTORS * 8.0 * X.shape[1]
    if need > budget:
        raise ValueError(
            f"X has {X.shape[1]} columns: the solvers and their referees keep vectors of one "
            "float64 per column "
            f"(~{need / 2**30:.3g} GiB for {_FEATURE_VECTORS} of them), above memory_budget = "
            f"{budget / 2**30:.3g} GiB; drop the empty columns (e.g. X[:, X.getnnz(axis=0) > 0] "
            "for CSR input) or raise memory_budget"
        )
