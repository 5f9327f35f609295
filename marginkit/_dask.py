"""Dask backend of ``marginkit.solve``: the same iterations on a row-chunked ``dask.array``.

``mk.solve(X, y, ...)`` with a ``dask.array.Array`` ``X`` builds its problem here
(``dask_problem``) and runs it with the in-memory run loop. The data stay
on the workers: ``X`` is persisted once, and each row chunk is held by one long-lived
worker object (a ``distributed`` actor pinned to the worker that holds the chunk). An
iteration of a linear solver is one call per chunk, which computes the chunk's share of
a d-vector (``X_c^T u_c``) plus a few scalars; the client adds the chunk shares in chunk
order, makes the stopping decision with the same ``StoppingRule`` plug-ins as the
in-memory solvers, and broadcasts the next d-vector. The dual variables (``r``,
``alpha``, ``p``, length n) live on the workers beside their chunk of ``X``; only the
final ones are gathered (``dual_coef_`` is an n-vector). ``X`` is never gathered.

Without a ``distributed`` client the chunks are computed once by dask's default scheduler
into the calling process and the same chunk objects run there (useful for tests and for
data that fit in memory but arrive as a dask array).

A solver written against ``Problem.executor`` (``blocked = True``: fista, fista_svm,
pegasos, perceptron, normalized_perceptron, nkp, nvn, snkp, snkpvn, isnkpvn,
iterated_tikhonov, or a third-party solver) runs here as it is, its block kernels on the
chunks (``BlockedDriver``). Results agree with ``mk.solve``
on the same data up to the order of floating-point summation, except where
``docs/dask.md`` says otherwise at its top (``isnkpvn``'s exact finish needs one chunk,
pegasos's epoch order follows the chunks). ``dcd`` is sequential and refused. The SVM
family also runs kernel approximations (``nystroem``, ``rff``): the map is fitted on the
rows it draws, gathered from the chunks, and evaluated on each chunk where it is held
(``Executor.derived``).

``Result.decision_function`` / ``predict`` of a dask array are ``decision_function`` /
``predict`` here: lazy maps of the in-memory model over the row chunks.
"""
import contextlib
import dataclasses
import numbers
import time

import numpy as np
import scipy.sparse as sp

from ._executors import Block, Executor
from ._validation import (check_chunk_shape, check_known_columns, check_known_row_chunks,
                          check_sparse_structure, check_X, check_y, dask_array_of,
                          has_nan_label, without_empty_row_chunks)

__all__ = ["dask_problem", "decision_function", "predict", "SUPPORTED_SOLVERS", "ChunkPool"]

#: solver name -> driver class (filled by ``_driver`` below)
SUPPORTED_SOLVERS = {}


def _driver(*names):
    def deco(cls):
        for name in names:
            SUPPORTED_SOLVERS[name] = cls
        return cls

    return deco


def _import_dask():
    try:
        import dask  # noqa: F401
        import dask.array  # noqa: F401
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError(
            "X is a dask array but dask is not installed; install the extra with "
            "`pip install 'marginkit[dask]'` (dask[array] and distributed)"
        ) from None


def _default_client():
    """The current ``distributed`` client, or None (no distributed, or no client created)."""
    try:
        from distributed import default_client
    except ImportError:
        return None
    try:
        return default_client()
    except ValueError:
        return None


# ------------------------------------------------------------------------------- prediction
def decision_function(result, X, n_features=None):
    """``result.decision_function`` of a dask array ``X``: a lazy dask array, one block per
    row chunk of ``X`` (numpy or scipy.sparse chunks), each block scored where it is
    computed by the in-memory ``Result.decision_function`` (which validates the chunk).
    Nothing is computed here; ``n_features`` (when the model knows it) is checked now."""
    _import_dask()
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features), got a {X.ndim}-D dask array")
    check_known_columns(X)
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"X has {X.shape[1]} features, the model was fit with {n_features}")
    _check_sparse_sources(X)
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})  # row chunks only: each block holds whole rows
    X = without_empty_row_chunks(X)
    return X.map_blocks(_block_scores, result, drop_axis=1, dtype=np.float64,
                        meta=np.empty((0,), dtype=np.float64))


def predict(result, X, n_features=None):
    """``result.predict`` of a dask array ``X``: lazy labels (``classes_``) or, for
    regression, the lazy decision function."""
    scores = decision_function(result, X, n_features)
    if result.task == "regression" or result.classes_ is None:
        return scores
    classes = np.asarray(result.classes_)
    return scores.map_blocks(_block_labels, classes, dtype=classes.dtype,
                             meta=np.empty((0,), dtype=classes.dtype))


def _block_scores(block, result, block_info=None):
    """The scores of one row chunk; rows of NaN/inf, and rows whose scores are not
    finite, are named by their row in X (found by review: the chunk's own row numbers
    were given)."""
    from ._validation import check_X, in_chunk, rows_of_X

    first = 0
    if block_info:
        _check_declared_block(block, block_info)
        first = chunk_first_row(block_info)
    with in_chunk(first):
        try:
            X = check_X(block)
        except ValueError as exc:
            if "NaN or infinity" not in str(exc) or not block_info:
                raise
            rows, where = rows_of_X(_nonfinite_rows(block))
            raise ValueError(f"X contains NaN or infinity in row(s) {rows[:10].tolist()}"
                             f"{' ...' if rows.size > 10 else ''} {where}; remove or impute "
                             "them") from None
        return result._checked_scores(X)


def chunk_first_row(block_info):
    """The first row of a ``map_blocks`` block in its array, or None where the chunk
    sizes are unknown (dask gives NaN there)."""
    first = block_info[0]["array-location"][0][0]
    return int(first) if isinstance(first, numbers.Integral) or float(first).is_integer() \
        else None


def _check_declared_block(block, block_info):
    """``check_chunk_shape`` of a block given to a ``map_blocks`` function."""
    info = block_info[0]
    check_chunk_shape(np.shape(block), tuple(hi - lo for lo, hi in info["array-location"]),
                      info["chunk-location"][0])


def _block_labels(scores, classes):
    return classes[(scores > 0).astype(int)]


# ---------------------------------------------------------------------------------- workers
class ChunkWorker(Block):
    """One row chunk of X and y (a ``Block``), created once per chunk on the worker holding
    the chunk; its structure is checked here, before any compiled code reads it."""

    def __init__(self, X, y, index, offset=0):
        super().__init__(None, None, index, offset)
        self.bad_rows = None
        self.error = None
        try:
            # messages name the chunk and the row of X
            self.X = check_X(X, name=f"X chunk {index}", row_offset=offset)
        except (ValueError, TypeError) as exc:
            # reported by make_pool in chunk order: NaN/inf rows for all chunks at once,
            # with global row numbers, any other problem for the first chunk that has one
            if isinstance(exc, ValueError) and "NaN or infinity" in str(exc):
                self.bad_rows = _nonfinite_rows(X) + offset
            else:
                self.error = exc
        self.y_raw = y


#: the executor over the chunks of a run (``marginkit._executors.Executor``)
ChunkPool = Executor


def _nonfinite_rows(X):
    if sp.issparse(X):
        X = X.tocsr()
        rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
        return np.unique(rows[~np.isfinite(X.data)])
    return np.flatnonzero(~np.isfinite(np.asarray(X)).all(axis=1))


def _k_bad_rows(chunk):
    return chunk.bad_rows, chunk.error


def _k_shape(chunk):
    return chunk.X.shape, chunk.X.dtype.str, sp.issparse(chunk.X)


def _k_check_y(chunk, task):
    """Chunk-wise part of ``check_y``: shape, dtype and the chunk's distinct labels."""
    y = chunk.y_raw
    if sp.issparse(y):
        raise TypeError("y is sparse; pass a 1-D dense array of labels")
    y = np.asarray(y)
    if y.ndim == 2 and 1 in y.shape:
        y = y.ravel()
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D, got a chunk of shape {y.shape}")
    if y.shape[0] != chunk.X.shape[0]:
        raise ValueError(
            f"y chunk {chunk.index} has {y.shape[0]} entries but X chunk {chunk.index} has "
            f"{chunk.X.shape[0]} rows; pass one label per row of X"
        )
    if task == "regression":
        chunk.y, _ = check_y(y, y.shape[0], task="regression")
        return None
    if y.dtype.kind == "c":
        raise TypeError("y is complex; pass real labels")
    if y.dtype.kind == "f" and not np.isfinite(y).all():
        raise ValueError("y contains NaN or infinity; every sample needs a label")
    if y.dtype.kind == "O" and has_nan_label(y):
        raise ValueError("y contains NaN or another missing label (NaT, None, pandas NA); "
                         "every sample needs a label")
    if y.dtype.kind in "Mm" and np.isnat(y).any():
        raise ValueError("y contains NaT (a missing date or duration); every sample needs a "
                         "label")
    chunk.y_raw = y
    return np.unique(y)


def _k_set_labels(chunk, positive):
    chunk.y = np.where(chunk.y_raw == positive, 1.0, -1.0)
    chunk.y_raw = None


def _check_sparse_sources(X):
    """The scipy.sparse matrices a dask graph holds as data (``da.from_array(csr)``) have
    their structure checked before the graph runs: dask slices them with scipy's C++
    code, which trusts the index arrays, before any chunk reaches a ``ChunkWorker``."""
    for value in X.__dask_graph__().values():
        value = getattr(value, "value", value)  # a literal may be wrapped in a data node
        if sp.issparse(value):
            check_sparse_structure(value, name="the sparse matrix behind the dask array X")


def _split_numpy_y(y, sizes):
    offs = np.concatenate([[0], np.cumsum(sizes)])
    return [y[offs[i]:offs[i + 1]] for i in range(len(sizes))]


def make_pool(X, y, task="classification"):
    """Persist ``X`` (row chunks), build one ``ChunkWorker`` per chunk, validate ``y``.

    Returns ``(pool, classes_)``. ``y`` may be a numpy array (cut to the row chunks of X
    and shipped with them) or a dask array (rechunked like X and persisted).
    """
    _import_dask()
    import dask

    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features), got a {X.ndim}-D dask array")
    _check_sparse_sources(X)
    check_known_row_chunks(X, "X")
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})  # row chunks only: each chunk holds whole rows
    X = without_empty_row_chunks(X)
    sizes = [int(c) for c in X.chunks[0]]
    offs = np.concatenate([[0], np.cumsum(sizes)])
    n = int(sum(sizes))
    if n == 0 or X.shape[1] == 0:
        raise ValueError(f"X is empty (shape {X.shape}); pass at least one sample and one feature")

    y_dask = dask_array_of(y, "y")
    y_is_dask = y_dask is not None
    if y_is_dask:
        y = y_dask
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.ndim != 1:
            raise ValueError(f"y must be 1-D, got shape {y.shape}")
        check_known_row_chunks(y, "y")
        if y.shape[0] != n:
            raise ValueError(
                f"y has {y.shape[0]} entries but X has {n} rows; pass one label per row of X"
            )
        y = y.rechunk((tuple(sizes),))
        classes = None
    else:
        ypm, classes = check_y(y, n, task=task)
        y_parts = _split_numpy_y(ypm, sizes)

    client = _default_client()
    if client is None:
        x_blocks = X.to_delayed()[:, 0].tolist()
        if y_is_dask:
            x_vals, y_vals = dask.compute(x_blocks, y.to_delayed().tolist())
        else:
            (x_vals,), y_vals = dask.compute(x_blocks), y_parts
        workers = [ChunkWorker(xb, yb, i, offs[i])
                   for i, (xb, yb) in enumerate(zip(x_vals, y_vals))]
        keep = []
    else:
        from distributed import futures_of, wait

        Xp = client.persist(X)
        xf = sorted(futures_of(Xp), key=lambda f: f.key[1])
        wait(xf)
        if y_is_dask:
            yp = client.persist(y)
            yf = sorted(futures_of(yp), key=lambda f: f.key[1])
            wait(yf)
        else:
            yf = y_parts
        who = client.who_has(xf)
        afuts = []
        for i, f in enumerate(xf):
            where = list(who.get(f.key, ()))
            afuts.append(client.submit(ChunkWorker, f, yf[i], i, int(offs[i]), actor=True,
                                       workers=where or None, allow_other_workers=not where,
                                       pure=False))
        workers = [a.result() for a in afuts]
        keep = afuts  # the persisted chunks are referenced by the actors themselves
    calls = [w.run(_k_bad_rows) for w in workers]
    found = calls if client is None else [f.result() for f in calls]
    errors = [e for _, e in found if e is not None]
    if errors:
        raise errors[0]
    bad = [b for b, _ in found if b is not None]
    if bad:
        bad = np.concatenate(bad)
        raise ValueError(
            f"X contains NaN or infinity in row(s) {bad[:10].tolist()}"
            f"{' ...' if bad.size > 10 else ''}; remove or impute them")
    calls = [w.run(_k_shape) for w in workers]
    shapes = calls if client is None else [f.result() for f in calls]
    for i, (shape, _, _) in enumerate(shapes):
        # a chunk computed by the graph must be the block the array declares: the
        # drivers size every d-vector and row offset from the declaration
        check_chunk_shape(shape, (sizes[i], X.shape[1]), i)
    dtypes = {s[1] for s in shapes}
    dtype = np.float64 if len(dtypes) > 1 else np.dtype(dtypes.pop())
    sparse = any(s[2] for s in shapes)
    pool = ChunkPool(workers, [s[0][0] for s in shapes], X.shape[1], dtype, sparse,
                     client=client, keep=keep)
    if y_is_dask:
        uniq = pool.map(_k_check_y, task)
        if task != "regression":
            classes = np.unique(np.concatenate(uniq))
            if classes.size < 2:
                raise ValueError(f"y has a single class {classes.tolist()}; a classifier needs "
                                 "two distinct labels")
            if classes.size > 2:
                raise ValueError(
                    f"y has {classes.size} classes {classes[:10].tolist()}; solve() is binary: "
                    "use the marginkit.sklearn estimators (one-vs-rest) for more classes"
                )
            pool.map(_k_set_labels, classes[1])
    else:
        pool.map(_k_adopt_y)
    return pool, classes


def _k_adopt_y(chunk):
    chunk.y = np.asarray(chunk.y_raw, dtype=np.float64)
    chunk.y_raw = None


# ---------------------------------------------------------------------------------- problem
@dataclasses.dataclass
class DaskProblem:
    """The problem handed to a dask driver's ``start``: like ``marginkit._api.Problem``, with
    ``X`` replaced by the ``ChunkPool`` (``pool``) that holds the data on the workers."""

    pool: object
    classes_: object
    kernel: object
    smoother: object
    params: dict
    rng: np.random.Generator
    config: object
    source: tuple = None  # (X, y) as the caller passed them (dask arrays)
    setup_s: float = 0.0  # seconds to validate and persist the chunks on the workers

    @property
    def X(self):
        return self.pool

    @property
    def executor(self):
        return self.pool

    def referee_data(self, blocked=False):
        """``(X, labels)`` for a referee: with ``blocked`` the chunks where they are held
        (``PoolBlocks``: the check's passes run there); otherwise the caller's dask array,
        read one chunk at a time."""
        X, y = self.source
        if hasattr(y, "__dask_graph__"):
            y = y.compute()
        return (PoolBlocks(self.pool) if blocked else X), y

    def check_certificate(self, certificate):
        """The referee's ``Verdict`` on ``certificate`` for the training data (its passes
        over row blocks run on the chunks, see ``referee_data``)."""
        return certificate.check(*self.referee_data(getattr(certificate, "blocked", False)))

    def summary(self):
        """What ``Result.extra["dask"]`` records about the run's data on the workers."""
        return {"n_chunks": len(self.pool.sizes), "setup_s": self.setup_s,
                "distributed": self.pool.client is not None}

    @property
    def n_samples(self):
        return self.pool.n_samples

    @property
    def n_features(self):
        return self.pool.n_features

    @property
    def dtype(self):
        return self.pool.dtype

    @property
    def sparse(self):
        return self.pool.sparse


def _k_referee(chunk, fn, per_block, common):
    return fn(chunk.X, *per_block, *common)


class PoolBlocks:
    """The chunks of a ``ChunkPool`` as the row blocks of ``marginkit.certificates``: the
    referee's block functions run on the workers holding the chunks, only their (d-vector
    and scalar) results come back, in chunk order."""

    def __init__(self, pool):
        self.pool = pool
        self.n_samples, self.n_features = pool.shape

    def map(self, fn, per_block=(), common=()):
        pieces = [self.pool.split(np.asarray(v)) for v in per_block]
        args = [(fn, tuple(p[i] for p in pieces), tuple(common))
                for i in range(self.pool.n_chunks)]
        return self.pool.map_each(_k_referee, args)


def _blocked_solvers():
    """Names of the registered solvers that run on the row blocks of any executor."""
    from ._registry import get_plugin, list_plugins

    return {name for name in list_plugins()["solver"]
            if getattr(get_plugin("solver", name), "blocked", False)}


def _unsupported(solver_name, kernel):
    names = sorted(set(SUPPORTED_SOLVERS) | _blocked_solvers())
    return ValueError(
        f"solver {solver_name!r} with kernel {getattr(kernel, 'name', kernel)!r} is not supported "
        f"on dask arrays; supported on dask arrays (kernel='linear'; fista, fista_svm and "
        f"pegasos also 'nystroem' and 'rff'): {names}. "
        "Compute X into memory (X.compute()) to use the other solvers"
    )


@contextlib.contextmanager
def dask_problem(X, y, config, composed):
    """The problem and the runner of ``marginkit.solve`` for a dask array ``X``: a context
    yielding ``(problem, driver, config, composed)``; ``marginkit.solve`` runs the driver
    as it runs an in-memory solver. The chunks are persisted on the workers on entry and
    released on exit; the solver's defaults that depend on the data are set from them
    there (``_compose.resolve_defaults``, as in memory), so the config and the composed
    plug-ins yielded are the run's.

    Parameters
    ----------
    X : dask.array.Array, shape (n_samples, n_features)
        Row-chunked (column chunks are merged); chunks are numpy arrays or scipy.sparse
        matrices, float32 or float64. Persisted once on the workers, never gathered.
    y : numpy array or dask.array.Array, shape (n_samples,)
    config : marginkit.Config
    composed : ``(solver, kernel, smoother, rules, max_iter)``, ``compose(config)``

    Raises
    ------
    ValueError
        A solver that does not run on row chunks (it names the alternatives), or a
        parameter combination its driver does not reproduce.
    """
    from ._compose import resolve_defaults
    from ._validation import check_random_state

    solver, kernel, _, _, _ = composed
    sname = solver.name or type(solver).__name__
    reason = getattr(type(solver), "not_blocked", None)
    if getattr(type(solver), "blocked", None) is False and reason:
        raise ValueError(reason)  # a sequential solver says why and names the alternatives
    driver_cls = SUPPORTED_SOLVERS.get(sname)
    if driver_cls is None and BlockedDriver.matches(solver):
        driver_cls = BlockedDriver  # a solver written against Problem.executor
    if driver_cls is None or not driver_cls.matches(solver):
        raise _unsupported(sname, kernel)
    why = driver_cls.refusal(solver, kernel)
    if why:
        raise ValueError(why)
    t0 = time.perf_counter()
    pool, classes = make_pool(X, y, task=getattr(solver, "task", "classification"))
    try:
        config, composed = resolve_defaults(config, composed, pool)
        solver, kernel, smoother, _, _ = composed
        problem = DaskProblem(pool=pool, classes_=classes, kernel=kernel, smoother=smoother,
                              params=dict(solver.params),
                              rng=check_random_state(config.random_state), config=config,
                              source=(X, y), setup_s=time.perf_counter() - t0)
        driver = driver_cls(solver)
        driver.check(problem)
        yield problem, driver, config, composed
    finally:
        pool.close()


class Driver:
    """Base of the dask drivers: ``start`` / ``finalize`` mirroring one in-memory Solver."""

    def __init__(self, solver):
        self.solver = solver
        self.name = solver.name

    @classmethod
    def matches(cls, solver):
        """Whether this driver reproduces ``solver`` (a subclass with other iterations would not)."""
        return True

    @classmethod
    def refusal(cls, solver, kernel):
        """Why the driver cannot run ``solver`` with ``kernel`` (a message), or None: the
        per-solver drivers run the linear kernel only."""
        if getattr(kernel, "name", None) != "linear" or type(kernel).__name__ != "LinearKernel":
            return str(_unsupported(solver.name or type(solver).__name__, kernel))
        return None

    def check(self, problem):
        """Reject parameter combinations the driver does not reproduce (ValueError)."""


# =====================================================================================
# Blocked solvers: the in-memory solver itself, on the chunks (``Solver.blocked``)
# =====================================================================================
@_driver("fista", "fista_svm", "pegasos", "iterated_tikhonov", "perceptron",
         "normalized_perceptron", "nkp", "nvn")
class BlockedDriver(Driver):
    """A solver written against ``Problem.executor`` (class attribute ``blocked = True``):
    its own ``start`` / ``finalize`` run with the ``ChunkPool`` as the executor, its block
    kernels on the workers that hold the chunks. Nothing here is specific to a solver.
    ``solver.blocked_refusal(kernel)`` (when the solver has it) names what it cannot do
    on row chunks; without it the solver runs the linear kernel there."""

    @classmethod
    def matches(cls, solver):
        return getattr(type(solver), "blocked", False) is True

    @classmethod
    def refusal(cls, solver, kernel):
        why = getattr(solver, "blocked_refusal", None)
        if why is None:
            return super().refusal(solver, kernel)
        why = why(kernel)
        return f"{solver.name} on dask arrays: {why}" if why else None

    def start(self, problem):
        return self.solver.start(problem)

    def finalize(self, problem, state, status):
        return self.solver.finalize(problem, state, status)
