"""Dask backend of ``marginkit.solve``: the same iterations on a row-chunked ``dask.array``.

``mk.solve(X, y, ...)`` with a ``dask.array.Array`` ``X`` dispatches here. The data stay
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

A blocked solver (``blocked = True``: ``snkp``, ``snkpvn``, ``isnkpvn``) runs as it is,
its block kernels on the chunks. The per-solver drivers below perform exactly the
iterations of the other in-memory solvers (``marginkit/solvers``); results agree with
``mk.solve`` on the same data up to the order of floating-point summation, except where
``docs/dask.md`` says otherwise at its top (``isnkpvn``'s exact finish needs one chunk,
pegasos's chunk-wise epochs, FISTA without the long-double fallback bound).

``Result.decision_function`` / ``predict`` of a dask array are ``decision_function`` /
``predict`` here: lazy maps of the in-memory model over the row chunks.
"""
import dataclasses
import time

import numpy as np
import scipy.sparse as sp

from ._executors import Block, Executor
from ._validation import (check_sparse_structure, check_X, check_y, dask_array_of,
                          has_nan_label)
from .solvers import svm
from .solvers.tikhonov import _GuardedNewton

__all__ = ["solve", "decision_function", "predict", "SUPPORTED_SOLVERS", "ChunkPool"]

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
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"X has {X.shape[1]} features, the model was fit with {n_features}")
    _check_sparse_sources(X)
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})  # row chunks only: each block holds whole rows
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


def _block_scores(block, result):
    return result.decision_function(block)


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
        raise ValueError("y contains NaN; every sample needs a label")
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
    if any(np.isnan(c) for c in X.chunks[0]):
        raise ValueError("X has unknown chunk sizes; call X.compute_chunk_sizes() first")
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})  # row chunks only: each chunk holds whole rows
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
        if tuple(shape) != (sizes[i], X.shape[1]):
            raise ValueError(
                f"X chunk {i} has shape {tuple(shape)} but the dask array declares "
                f"{(sizes[i], X.shape[1])} for it; build the array with the shape and chunks "
                "its blocks really have")
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
        f"on dask arrays; supported on dask arrays (kernel='linear' only): {names}. "
        "Compute X into memory (X.compute()) to use the other solvers"
    )


def solve(X, y, config):
    """``marginkit.solve`` for a dask array ``X`` (called by ``marginkit.solve``).

    Parameters
    ----------
    X : dask.array.Array, shape (n_samples, n_features)
        Row-chunked (column chunks are merged); chunks are numpy arrays or scipy.sparse
        matrices, float32 or float64. Persisted once on the workers, never gathered.
    y : numpy array or dask.array.Array, shape (n_samples,)
    config : marginkit.Config

    Returns
    -------
    Result
        The same fields as the in-memory ``solve``.
    """
    from ._api import compose, finish_fields, run
    from ._result import Result
    from ._validation import check_random_state

    solver, kernel, smoother, rules, max_iter = compose(config)
    sname = solver.name or type(solver).__name__
    driver_cls = SUPPORTED_SOLVERS.get(sname)
    # a blocked solver runs as it is, its block kernels on the chunks
    blocked = driver_cls is None and bool(getattr(solver, "blocked", False))
    if (driver_cls is None and not blocked) or getattr(kernel, "name", None) != "linear" \
            or type(kernel).__name__ != "LinearKernel":
        raise _unsupported(sname, kernel)
    if not blocked and not driver_cls.matches(solver):
        raise _unsupported(sname, kernel)
    task = getattr(solver, "task", "classification")
    t0 = time.perf_counter()
    pool, classes = make_pool(X, y, task=task)
    try:
        problem = DaskProblem(pool=pool, classes_=classes, kernel=kernel, smoother=smoother,
                              params=dict(solver.params),
                              rng=check_random_state(config.random_state), config=config,
                              source=(X, y))
        if blocked:
            driver = solver
        else:
            driver = driver_cls(solver)
            driver.check(problem)
        state, status, history, elapsed, accepted = run(problem, driver, rules, max_iter, config)
        fields = driver.finalize(problem, state, status) or {}
        fields["status"] = status
        finish_fields(problem, fields, accepted)
    finally:
        pool.close()
    fields.setdefault("status", status)
    fields.setdefault("n_iter", int(state.n_iter))
    fields.setdefault("time_s", elapsed)
    fields.setdefault("classes_", classes)
    fields.setdefault("solver", sname)
    fields.setdefault("config", config)
    fields.setdefault("kernel", kernel)
    fields.setdefault("task", task)
    hist = fields.pop("history", None) or {}
    history.update(hist)
    fields["history"] = history
    res = Result(**fields)
    res.extra.setdefault("dask", {"n_chunks": len(pool.sizes), "setup_s": time.perf_counter() - t0 - elapsed,
                                  "distributed": pool.client is not None})
    return res


class Driver:
    """Base of the dask drivers: ``start`` / ``finalize`` mirroring one in-memory Solver."""

    def __init__(self, solver):
        self.solver = solver
        self.name = solver.name

    @classmethod
    def matches(cls, solver):
        """Whether this driver reproduces ``solver`` (a subclass with other iterations would not)."""
        return True

    def check(self, problem):
        """Reject parameter combinations the driver does not reproduce (ValueError)."""


def _same_class(solver, name):
    from ._registry import get_plugin

    try:
        return type(solver) is get_plugin("solver", name)
    except ValueError:
        return False


# =====================================================================================
# SVM family (arXiv:2512.03947): scaling statistics, power iteration, fista, pegasos
# =====================================================================================
def _k_column_max(chunk):
    """Largest |x| per column of the chunk (float64)."""
    X, d = chunk.X, chunk.X.shape[1]
    cm = np.zeros(d)
    if sp.issparse(X):
        if X.nnz:
            np.maximum.at(cm, X.indices, np.abs(X.data))
    elif X.shape[0]:
        cm = np.abs(X).max(axis=0).astype(np.float64)
    return cm


def _k_scaled_sums(chunk, inv):
    """Column sums of x * inv (inv: inverse powers of two, exact) and stored-entry counts."""
    X, d = chunk.X, chunk.X.shape[1]
    if sp.issparse(X):
        return (np.bincount(X.indices, weights=X.data * inv[X.indices], minlength=d),
                np.bincount(X.indices, minlength=d).astype(np.float64))
    return (np.asarray(X, dtype=np.float64) * inv).sum(axis=0), np.full(d, float(X.shape[0]))


def _k_scaled_sqdev(chunk, inv, mean):
    """sum over the chunk's stored entries of (x * inv - mean)^2 per column."""
    X, d = chunk.X, chunk.X.shape[1]
    if sp.issparse(X):
        dev = X.data * inv[X.indices] - mean[X.indices]
        return np.bincount(X.indices, weights=dev * dev, minlength=d)
    dev = np.asarray(X, dtype=np.float64) * inv - mean
    return np.einsum("ij,ij->j", dev, dev)


def scaling_statistics(pool, scale):
    """``marginkit.solvers.svm.scaling_statistics`` computed chunk-wise, the same three
    passes (column maxima; sums of x / safe_j; squared deviations, implicit zeros
    included; safe_j the power of two at or above the column's largest magnitude) and
    the same test of a constant column, so that a dask run and an in-memory run define
    the same problem up to the order of summation."""
    from ._referee import pow2_at_least, scaling_tail

    n, d = pool.shape
    if scale is None:
        return np.zeros(d), np.ones(d)
    cm = np.max(pool.map(_k_column_max), axis=0)
    safe = pow2_at_least(cm)
    inv = 1.0 / safe
    parts = pool.map(_k_scaled_sums, inv)
    means = np.sum([q[0] for q in parts], axis=0) / n
    cnt = np.sum([q[1] for q in parts], axis=0)
    ss = np.sum(pool.map(_k_scaled_sqdev, inv, means), axis=0) + (n - cnt) * means * means
    return scaling_tail(cm, safe, means, ss, n, scale)


def _k_svm_setup(chunk, m, s, scale):
    """The chunk as ``marginkit.solvers.svm._Data`` holds it, built by that class itself
    with the global statistics (m, s) in place of the chunk's own, so the per-row
    constants (c, xsq, ...) follow the in-memory conventions exactly."""
    data = svm._Data(chunk.X, scale, stats=(m, s))
    chunk.v.update(data=data, args=data.args, c=data.c, xsq=data.xsq)


def _k_power(chunk, vs, offset):
    """t = X_c v_s + offset (per row); returns e^T t, ||t||^2 and X_c^T t (float64), the
    chunk's share of one pass of ``svm.feature_matrix_norm2``."""
    X = chunk.X
    t = np.asarray(X @ vs, dtype=np.float64).ravel() + offset
    acc = np.asarray(X.T @ t, dtype=np.float64).ravel()
    return float(t.sum()), float(t @ t), acc


def feature_matrix_norm2(pool, m, s, augmented, tol=1e-10, max_iter=10_000, seed=0):
    """``marginkit.solvers.svm.feature_matrix_norm2`` on the chunks: each power iteration
    is one map (Z~ v and Z~^T Z~ v per chunk) and a reduction of d + 2 numbers."""
    d = pool.n_features
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(d + (1 if augmented else 0))
    v /= np.linalg.norm(v)
    lam_old = 0.0
    lam = 0.0
    for it in range(1, max_iter + 1):
        vw = v[:d]
        vt = v[d] if augmented else 0.0
        vs = s * vw
        offset = vt - float(m @ vs)
        parts = pool.map(_k_power, vs, offset)
        tsum = float(sum(p[0] for p in parts))
        tsq = float(sum(p[1] for p in parts))
        acc = np.sum([p[2] for p in parts], axis=0)
        lam = tsq
        out = s * (acc - m * tsum)
        if augmented:
            out = np.append(out, tsum)
        nrm = np.linalg.norm(out)
        if nrm == 0.0:
            return 0.0, it
        v = out / nrm
        if it > 1 and abs(lam - lam_old) <= tol * lam:
            break
        lam_old = lam
    return float(lam), it


def _k_gram_cost(chunk):
    """The chunk's (nnz, multiply-adds of its Gram pass): ``svm.gram_cost``."""
    return svm.gram_cost(chunk.v["data"])


def _k_gram(chunk):
    """The chunk's (Z_c^T Z_c, Z_c^T e, sum ||s * x_i||^2, sum ||z_i||^2): Gram matrices
    add over row chunks (``svm._gram_blocks``)."""
    data = chunk.v["data"]
    G, zte = svm._gram_blocks(data)
    return G, zte, float(np.sum(data.xsq)), float(np.sum(data.zsq))


def lipschitz_bound(pool, data, augmented, memory_budget, tol=1e-10, seed=0):
    """``marginkit.solvers.svm.lipschitz_bound`` on the chunks: the Gram matrix is the sum
    of the chunks' Gram matrices (one map), the same eigenvalue bound follows; otherwise
    Lanczos with one map per product (``_k_power``). Same decision rule as in memory."""
    n, d = pool.n_samples, pool.n_features
    p = d + (1 if augmented else 0)
    if p == 0 or n == 0:
        return 0.0, {"method": "gram", "passes": 0}
    costs = pool.map(_k_gram_cost)
    nnz = float(sum(c[0] for c in costs))
    cost = float(sum(c[1] for c in costs))
    gram = svm.gram_is_cheap(p, nnz, cost, memory_budget)
    parts = pool.map(_k_gram if gram else _k_gram_sums)
    F = float(sum(q[2] for q in parts))
    trace = float(sum(q[3] for q in parts)) + (n if augmented else 0.0)
    if gram:
        # summed chunk by chunk: one p x p matrix on the client besides the chunks' own
        G, zte = parts[0][0].copy(), parts[0][1].copy()
        for q in parts[1:]:
            G += q[0]
            zte += q[1]
        G = svm._augment(G, zte, n, augmented)
        return svm.top_eigenvalue_bound(G, n, F, data.M, trace, augmented), {
            "method": "gram", "passes": 0}
    m, s = data.m, data.s

    def matvec(v):
        vs = s * v[:d]
        offset = (v[d] if augmented else 0.0) - float(m @ vs)
        pr = pool.map(_k_power, vs, offset)
        tsum = float(sum(q[0] for q in pr))
        acc = np.sum([q[2] for q in pr], axis=0)
        out = s * (acc - m * tsum)
        return np.append(out, tsum) if augmented else out

    lam, passes = svm.lanczos_bound(matvec, p, n, F, data.M, trace, augmented, tol, seed)
    return lam, {"method": "lanczos", "passes": passes}


def _k_gram_sums(chunk):
    """The chunk's sums of ||s * x_i||^2 and ||z_i||^2 (for the rounding margin)."""
    data = chunk.v["data"]
    return None, None, float(np.sum(data.xsq)), float(np.sum(data.zsq))


def _k_rounding_sums(chunk):
    """The chunk's sum xsq, sum sqrt(xsq), max sqrt(xsq), longest row and sum zsq: the
    data's constants of the rounding bound (``svm._RoundingConstants``)."""
    data = chunk.v["data"]
    xi = np.sqrt(data.xsq)
    longest = int(np.diff(data.indptr).max(initial=0)) if data.sparse else data.d
    return (float(np.sum(data.xsq)), float(np.sum(xi)), float(xi.max(initial=0.0)), longest,
            float(np.sum(data.zsq)))


class _ScaledData:
    """Client side of ``svm._Data``: the statistics and the map back to the input space."""

    def __init__(self, n, d, scale, m, s):
        self.n, self.d, self.scale = n, d, scale
        self.m, self.s = m, s
        self.s2 = s * s
        sm = s * m
        self.M = float(sm @ sm)  # as svm._Data (s^2 m without forming s^2)
        self.sparse = False
        self.sums = None

    def w_bar(self, a, b):
        return self.s * (a - self.m * b)

    def original(self, w_bar, t_bar):
        coef = self.s * w_bar
        return coef, float(t_bar - self.m @ coef)


def _svm_data(problem, scale):
    pool = problem.pool
    m, s = scaling_statistics(pool, scale)
    data = _ScaledData(pool.n_samples, pool.n_features, scale, m, s)
    svm._Data.check_inverse_spread(s, scale)
    pool.map(_k_svm_setup, m, s, scale)
    parts = pool.map(_k_rounding_sums)
    data.sums = (sum(q[0] for q in parts), sum(q[1] for q in parts),
                 max(q[2] for q in parts), max(q[3] for q in parts))
    data.trace_z = sum(q[4] for q in parts)
    return data


# ---------------------------------------------------------------------------------- fista
def _k_fista_init(chunk):
    n = chunk.X.shape[0]
    chunk.v.update(r_prev=np.zeros(n), r=np.zeros(n), r_buf=np.zeros(n))


def _k_fista_step(chunk, v, offset, by, beta, L, mu, gamma, level, unit):
    """One FISTA pass over the chunk (``_svm_fast.fista_hsvm_step``); the error bound and
    the certified count need the global ||y_k - r_{k+1}||, so the kernel runs with
    kappa = 1 and no rounding term (its eps is then the chunk's ||y_k - r_{k+1}||, summed
    in units of ``unit``) and counting is separate. Returns ||y_k - r_{k+1}||^2 / unit^2."""
    from .solvers import _svm_fast as f

    cv = chunk.v
    a_new = np.zeros(v.shape[0])
    r_new = cv["r_buf"]
    b_new, dnorm, _, rsum, rsq = f.fista_hsvm_step(
        *cv["args"], chunk.y, cv["r_prev"], cv["r"], v, offset, by, cv["c"],
        beta, L, mu, gamma, 1.0, level, r_new, a_new, unit, 0.0)
    cv["r_buf"], cv["r_prev"], cv["r"] = cv["r_prev"], cv["r"], r_new
    rmin = float(r_new.min()) if r_new.size else np.inf
    dn = dnorm / unit  # exact (a power of two)
    return a_new, b_new, dn * dn, rsum, rsq, rmin


def _k_count_certified(chunk, level, eps):
    return int(np.count_nonzero(level - chunk.v["r"] > eps))


def _k_free_with_room(chunk, gamma, delta):
    r = chunk.v["r"]
    return int(np.count_nonzero(np.minimum(r, gamma - r) > delta))


class _DaskFistaState(svm._ClaimOffers):
    """``svm._FistaState`` (H-SVM) with r, r_prev on the workers; a, b on the client.

    The error bound is the in-memory one, kappa ||y_k - r_{k+1}|| plus the rounding term
    ``svm.fista_rounding`` (docs/svm.md section 2), without the long-double fallback of
    the in-memory state (it would need two more maps per iteration)."""

    def __init__(self, pool, data, gamma, mu, L, power_iterations, augmented=True):
        from ._referee import gamma as gamma_k, pow2_at_least

        d = data.d
        self.pool, self.data = pool, data
        self.gamma, self.mu, self.L = gamma, mu, L
        self.level = svm.certify_level(gamma, mu)
        self.kappa = L / mu
        sk = np.sqrt(self.kappa)
        self.beta = (sk - 1.0) / (sk + 1.0)
        self.augmented = augmented
        n = pool.n_samples
        self.kappa_bound = max(self.kappa, (self.kappa - 1.0) * (1.0 + gamma_k(n + 8)))
        self.unit = float(pow2_at_least(gamma))
        self.rc = svm._RoundingConstants(data, gamma, sums=data.sums)
        self._sums = ((0.0, 0.0), (0.0, 0.0))
        self.rounding = 0.0
        self.t_bar = 0.0
        self._lam = 0.0  # warm start of the projection's multiplier (fista_svm)
        self.power_iterations = power_iterations
        self.a_prev, self.a = np.zeros(d), np.zeros(d)
        self.b_prev = self.b = 0.0
        self.n_iter = 0
        self.error_bound = np.inf
        self.n_certified = 0
        self.objective = 0.0
        pool.map(_k_fista_init)

    def _extrapolated(self):
        beta = self.beta
        v = np.multiply(self.a, 1.0 + beta)
        v -= beta * self.a_prev
        v *= self.data.s2
        by = (1.0 + beta) * self.b - beta * self.b_prev
        offset = -float(self.data.m @ v) + by * self.data.M + (by if self.augmented else 0.0)
        return v, by, offset

    def step(self):
        rk, rk1 = self._sums
        v, by, offset = self._extrapolated()
        if self.augmented:
            parts = self.pool.map(_k_fista_step, v, offset, by, self.beta, self.L, self.mu,
                                  self.gamma, self.level, self.unit)
            rho = svm.fista_rounding(self.rc, self.beta, self.L, self.mu, rk, rk1, True)
        else:
            parts = self._svm_step(v, offset, by)
            rho = svm.fista_rounding(self.rc, self.beta, self.L, self.mu, rk, rk1, False,
                                     self.t_bar)
        a_new = np.sum([p[0] for p in parts], axis=0)
        b_new = float(sum(p[1] for p in parts))
        rsum = float(sum(p[3] for p in parts))
        rsq = float(sum(p[4] for p in parts))
        rmin = min(p[5] for p in parts)
        eps = self.kappa_bound * (np.sqrt(sum(p[2] for p in parts)) * self.unit) + rho
        if not self.augmented:
            # the residual of y^T r = 0 (docs/svm.md section 3)
            delta = abs(b_new) + self.rc.gK * rsum
            eps += (1.0 + self.kappa) * delta * (1.0 + 1e-15)
        # a second map only once some point can be certified (level - min r > eps)
        ncert = 0
        if self.level - rmin > eps:
            if not self.augmented and delta > 0 and \
                    sum(self.pool.map(_k_free_with_room, self.gamma, delta)) == 0:
                eps = np.inf
            else:
                ncert = int(sum(self.pool.map(_k_count_certified, self.level, eps)))
        self._sums = ((rsum, rsq), rk)
        self.rounding = rho
        self.a_prev, self.a = self.a, a_new
        self.b_prev, self.b = self.b, b_new
        self.error_bound = float(eps)
        self.n_certified = ncert
        w = self.data.w_bar(self.a, self.b)
        wsq = float(w @ w) + (self.b * self.b if self.augmented else 0.0)
        self.objective = -0.5 * wsq + rsum - 0.5 * self.mu * rsq
        self.n_iter += 1

    def snapshot(self):
        return {"objective": self.objective, "error_bound": self.error_bound,
                "n_certified": float(self.n_certified)}

    # -- classical SVM: projection onto {0 <= r <= gamma, y^T r = 0} ------------------
    def _svm_step(self, v, offset, by):
        """Gradient pass, exact projection, scatter (``svm._FistaState.step``, fista_svm).

        ``project_box_hyperplane`` finds the root of the piecewise-linear, non-increasing
        phi(lam) = y^T proj_[0, gamma](v - lam y) by Newton steps lam + phi / n_free inside a
        bracket (to the nearest breakpoint where no coordinate is free, bisection when a
        step leaves the bracket), warm-started from the previous multiplier. Here each
        evaluation of phi and n_free is one map (2 numbers per chunk), and the nearest
        breakpoint one map (1 number); the decisions are the same.
        """
        pool, gamma = self.pool, self.gamma
        pool.map(_k_fsvm_gradient, v, offset, by, self.beta, self.L, self.mu)
        lam, lo, hi = self._lam, -np.inf, np.inf
        for _ in range(200):
            parts = pool.map(_k_fsvm_phi_slope, lam, gamma)
            ph = sum(p[0] for p in parts)
            nf = sum(p[1] for p in parts)
            if ph == 0.0:
                break
            if ph > 0.0:
                lo = lam
            else:
                hi = lam
            if nf > 0:
                lam_new = lam + ph / nf
            else:
                near = pool.map(_k_fsvm_next_breakpoint, lam, gamma, ph > 0.0)
                lam_new = min(near) if ph > 0.0 else max(near)
            if not (lo < lam_new < hi):
                if np.isfinite(lo) and np.isfinite(hi):
                    lam_new = 0.5 * (lo + hi)
                else:
                    break  # phi constant and nonzero beyond every breakpoint: infeasible
            if abs(lam_new - lam) <= 1e-15 * (abs(lam) + gamma):
                lam = lam_new
                break
            lam = lam_new
        self._lam = lam
        self.t_bar = self.L * lam
        return pool.map(_k_fsvm_finish, lam, gamma, self.unit)


def _k_fsvm_gradient(chunk, v, offset, by, beta, L, mu):
    """``fista_gradient_pass`` on the chunk; keeps y_k and the point to project."""
    from .solvers import _svm_fast as f

    cv = chunk.v
    n = chunk.X.shape[0]
    yk, vproj = np.empty(n), np.empty(n)
    f.fista_gradient_pass(*cv["args"], chunk.y, cv["r_prev"], cv["r"], v, offset, by, cv["c"],
                          beta, L, mu, yk, vproj)
    cv.update(yk=yk, vproj=vproj)


def _k_fsvm_phi_slope(chunk, lam, gamma):
    """The chunk's share of phi(lam) and of the number of free coordinates."""
    y, v = chunk.y, chunk.v["vproj"]
    t = v - lam * y
    free = (t > 0.0) & (t < gamma)
    ph = float(np.sum(y * np.where(t >= gamma, gamma, np.where(free, t, 0.0))))
    return ph, int(np.count_nonzero(free))


def _k_fsvm_next_breakpoint(chunk, lam, gamma, upward):
    """The chunk's nearest breakpoint (y_i v_i or y_i (v_i - gamma)) strictly above (below) lam."""
    y, v = chunk.y, chunk.v["vproj"]
    bp = np.concatenate([y * v, y * (v - gamma)])
    if upward:
        bp = bp[bp > lam]
        return float(bp.min()) if bp.size else np.inf
    bp = bp[bp < lam]
    return float(bp.max()) if bp.size else -np.inf


def _k_fsvm_finish(chunk, lam, gamma, unit):
    """r_{k+1} = proj(v - lam y), its scatter X^T (y r) and the chunk's sums."""
    from .solvers import _svm_fast as f

    cv = chunk.v
    y = chunk.y
    r_new = cv["r_buf"]
    np.clip(cv["vproj"] - lam * y, 0.0, gamma, out=r_new)
    a_new = np.zeros(chunk.X.shape[1])
    b_new = f.scatter_dual(*cv["args"], y, r_new, a_new)
    diff = (cv["yk"] - r_new) / unit  # in units of the scale of r (exact): no underflow
    cv["r_buf"], cv["r_prev"], cv["r"] = cv["r_prev"], cv["r"], r_new
    cv["yk"] = cv["vproj"] = None
    rmin = float(r_new.min()) if r_new.size else np.inf
    return a_new, b_new, float(diff @ diff), float(r_new.sum()), float(r_new @ r_new), rmin


@_driver("fista", "fista_svm")
class FistaDriver(Driver):
    """``fista`` (strongly convex FISTA on the perturbed H-SVM dual, arXiv:2512.03947 sec. 2.3) and
    ``fista_svm`` (classical SVM, appendix C: exact projection onto the box and y^T r = 0)."""

    @classmethod
    def matches(cls, solver):
        return _same_class(solver, "fista") or _same_class(solver, "fista_svm")

    def start(self, problem):
        from .solvers.svm import _gamma_mu

        self.augmented = self.solver.name == "fista"
        data = _svm_data(problem, self.solver.params["scale"])
        gamma, mu = _gamma_mu(self.solver.params, data.n)
        budget = getattr(getattr(problem, "config", None), "memory_budget", 2.0 * 2**30)
        lam, info = lipschitz_bound(problem.pool, data, self.augmented, budget)
        svm.check_scales(self.name, data, gamma, mu, mu + lam, trace=data.trace_z)
        self._data = data
        state = _DaskFistaState(problem.pool, data, gamma, mu, mu + lam, info["passes"],
                                self.augmented)
        state.lipschitz_method = info["method"]
        state._solver = self
        return state

    def finalize(self, problem, state, status):
        from .solvers.svm import CertifiedPointsCertificate

        data = self._data
        w_bar = data.w_bar(state.a, state.b)
        t_bar = state.b if self.augmented else state.t_bar
        coef, intercept = data.original(w_bar, t_bar)
        r = problem.pool.gather("r")
        mask = state.level - r > state.error_bound
        fields = {"coef_": coef, "intercept_": intercept, "dual_coef_": r,
                  "certified_mask": mask}
        if mask.any():
            fields["certificate"] = CertifiedPointsCertificate(
                state.error_bound, mask, r.copy(), state.gamma, state.mu, data.scale, data.m,
                data.s, "hsvm" if self.augmented else "svm", t_bar, coef, intercept,
                problem.classes_, kernel=problem.kernel, config=problem.config,
                claim="certified" if status == "certified" else None)
        fields["extra"] = dict(L=state.L, kappa=state.kappa, gamma=state.gamma, mu=state.mu,
                               power_iterations=state.power_iterations,
                               lipschitz_method=state.lipschitz_method, t_bar=t_bar)
        return fields


# -------------------------------------------------------------------------------- pegasos
def chunkwise_permutation(rng, sizes):
    """The order in which the dask ``pegasos`` visits the samples in one epoch.

    Chunks are visited in their order 0, 1, ...; inside chunk c the rows follow
    ``rng.permutation(sizes[c])`` (drawn chunk after chunk from the run's generator).
    Returned as global row indices, so an in-memory run that visits samples in this order
    (a ``numpy.random.Generator`` whose ``permutation(n)`` returns it) performs exactly
    the same Pegasos steps.
    """
    out = []
    start = 0
    for nc in sizes:
        out.append(start + np.random.Generator.permutation(rng, int(nc)))
        start += int(nc)
    return np.concatenate(out).astype(np.int64)


class _FixedOrder:
    """A stand-in generator whose ``permutation`` returns a given order."""

    def __init__(self, order):
        self.order = order

    def permutation(self, n):
        assert n == self.order.shape[0]
        return self.order


def _k_pegasos_epoch(chunk, order, s2a, st, lam):
    """Pegasos steps over the chunk's rows in ``order``: one step of the in-memory
    ``svm._PegasosState`` on the chunk (its ``pegasos_epoch`` call), with the d-vector
    s2a and the 6 scalars st passed from chunk to chunk."""
    state = svm._PegasosState(chunk.v["data"], chunk.y, lam, _FixedOrder(order))
    state.s2a = np.array(s2a, dtype=np.float64)
    state.st = np.array(st, dtype=np.float64)
    state.step()
    return state.s2a, state.st


class _DaskPegasosState(svm._PegasosState):
    """``svm._PegasosState`` with chunk-wise epochs: w (a d-vector and 6 scalars) is passed
    from chunk to chunk; each chunk runs its rows in the order of ``chunkwise_permutation``."""

    def __init__(self, pool, data, lam, rng):
        super().__init__(data, None, lam, rng)  # the labels stay on the workers
        self.pool = pool

    def step(self):
        pool = self.pool
        order = chunkwise_permutation(self.rng, pool.sizes)
        for c in range(pool.n_chunks):
            local = order[pool.offsets[c]:pool.offsets[c + 1]] - pool.offsets[c]
            self.s2a, self.st = pool.call(c, _k_pegasos_epoch, local, self.s2a, self.st,
                                          self.lam)
        self.n_iter += 1


@_driver("pegasos")
class PegasosDriver(Driver):
    """``pegasos`` with chunk-wise epochs (see ``chunkwise_permutation``)."""

    @classmethod
    def matches(cls, solver):
        return _same_class(solver, "pegasos")

    def start(self, problem):
        data = _svm_data(problem, self.solver.params["scale"])
        self._data = data
        return _DaskPegasosState(problem.pool, data, float(self.solver.params["lam"]),
                                 problem.rng)

    def finalize(self, problem, state, status):
        w_bar = state.w_bar()
        bias = float(state.st[4])
        coef, intercept = self._data.original(w_bar, bias)
        return {"coef_": coef, "intercept_": intercept}


# =====================================================================================
# Perceptron / von Neumann family (Ramdas & Pena 2014), linear kernel: G a = S X (X^T S a)
# (snkp, snkpvn and isnkpvn are blocked solvers: they run on the pool as they are)
# =====================================================================================
def _zero_rows(chunk, offset):
    """Global indices of the chunk's all-zero rows (they cannot be normalized)."""
    from .utils._operator import _row_sqnorms

    return np.flatnonzero(~(_row_sqnorms(chunk.X) > 0)) + offset


def _gnorm(sq):
    return float(np.sqrt(sq)) if sq > 0.0 else 0.0


class _DaskFamilyState:
    """``perceptron._FamilyState`` over a ``_DaskVertexCore``."""

    #: the chunk kernel reading alpha, p and best p (``_k_v_get``)
    get = None

    def __init__(self, core):
        self.core = core
        self.n_iter = 0
        self.elapsed = 0.0
        self.problem = None
        self._refuted = {}

    def certificate(self, status):
        """As ``perceptron._FamilyState.certificate``: alpha or the best p gathered from the
        chunks (an n-vector), bound to the run's configuration; None for a claim whose
        measure has not improved 2x since it was last refuted."""
        from .certificates import InfeasibilityCertificate, SeparatorCertificate

        core, pb = self.core, self.problem
        last = self._refuted.get(status)
        core.flush()
        if status == "separable":
            if last is not None and float(core.min_margin) <= 2 * last:
                return None
            alpha = np.concatenate(pb.pool.map(self.get, "alpha"))
            return SeparatorCertificate(alpha, core.min_margin, pb.kernel, pb.classes_,
                                        config=pb.config)
        if status == "infeasible":
            if last is not None and float(core.dual_norm) >= last / 2:
                return None
            p = np.concatenate(pb.pool.map(self.get, "best_p"))
            return InfeasibilityCertificate(p, float(core.dual_norm), float(core.dual_tol),
                                            pb.kernel, pb.classes_, config=pb.config)
        return None

    def refuted(self, status, verdict):
        core = self.core
        self._refuted[status] = float(core.min_margin if status == "separable" else core.dual_norm)

    def step(self):
        self.core.step()
        self.n_iter += 1

    min_margin = property(lambda self: self.core.min_margin)
    dual_norm = property(lambda self: self.core.dual_norm)
    dual_tol = property(lambda self: self.core.dual_tol)
    alpha_norm = property(lambda self: self.core.alpha_norm)
    mu = property(lambda self: self.core.mu)

    def snapshot(self):
        lower, upper = self.core.margin_bounds()
        snap = {"min_margin": float(self.core.min_margin), "dual_norm": float(self.core.dual_norm),
                "mu": float(self.core.mu), "margin_lower": float(lower),
                "margin_upper": float(upper)}
        return snap


def _family_fields(problem, core, get, status, primal_op):
    """Result fields of a perceptron-family run on chunks: ``perceptron.family_fields``
    on the chunks' alpha, p and best p (read with the chunk kernel ``get``), and
    coef_ = sum over chunks of ``primal_op`` (no intercept)."""
    from .solvers.perceptron import family_fields

    pool = problem.pool
    core.flush()
    alpha = np.concatenate(pool.map(get, "alpha"))
    fields = family_fields(problem, status, core, alpha, np.concatenate(pool.map(get, "p")),
                           lambda: np.concatenate(pool.map(get, "best_p")))
    w = np.sum(core._map([(primal_op, ("alpha",))]), axis=0)
    fields.update(coef_=np.asarray(w, dtype=np.float64), intercept_=0.0)
    return fields


# =====================================================================================
# iterated_tikhonov (Beugnot et al. 2021), linear kernel, damped Newton with Cholesky systems
# =====================================================================================
def _k_obj(chunk, key, ops):
    """Run ``ops`` (a list of (method, args)) on ``chunk.v[key]``; the results per op."""
    obj = chunk.v[key]
    return [getattr(obj, name)(*args) for name, args in ops]


class _ITChunk:
    """Chunk side of ``tikhonov._TikhonovState`` (primal, linear kernel): the chunk's rows
    of z = X theta (+ b), z_prev, the loss derivatives g, h and dz = X direction."""

    def __init__(self, chunk, loss_name, p, fit_intercept):
        from .solvers import tikhonov as tk

        X = chunk.X
        self.y = np.ascontiguousarray(chunk.y, dtype=np.float64)
        self.sparse = sp.issparse(X)
        if self.sparse:
            self.X = X
            self._args = (X.data, X.indices, X.indptr)
        else:
            self.X = X if X.flags.c_contiguous else np.ascontiguousarray(X)
        self.loss = tk._LOSSES[loss_name]
        self.p = p
        self.fit_intercept = fit_intercept
        n = X.shape[0]
        self.z = np.zeros(n)
        self.z_prev = np.zeros(n)
        self.g = np.empty(n)
        self.h = np.empty(n)
        self.dz = np.zeros(n)
        self.zt = None

    def _rmatvec(self, g):
        from .solvers import _tikhonov_fast as fast

        out = np.empty(self.p)
        if self.sparse:
            fast.csr_rmatvec(*self._args, g, out)
        else:
            fast.dense_rmatvec(self.X, g, out)
        return out

    def _predict(self, w):
        from .solvers import _tikhonov_fast as fast

        out = np.empty(self.X.shape[0])
        if self.sparse:
            fast.csr_matvec(*self._args, w[: self.p], out)
        else:
            fast.dense_matvec(self.X, np.ascontiguousarray(w[: self.p]), out)
        if self.fit_intercept:
            out += w[self.p]
        return out

    def evaluate(self, with_hessian):
        """Loss sum and the chunk's shares of the gradient and of the Hessian."""
        from .solvers import _tikhonov_fast as fast

        total = self.loss.derivatives(self.z, self.y, self.g, self.h)
        rg, gs = self._rmatvec(self.g), float(self.g.sum())
        if not with_hessian:
            return total, rg, gs, None, None, None
        Hp = np.empty((self.p, self.p))
        if self.sparse:
            fast.csr_weighted_gram(*self._args, self.h, Hp)
        else:
            fast.dense_weighted_gram(self.X, self.h, Hp)
        rh = self._rmatvec(self.h) if self.fit_intercept else None
        return total, rg, gs, Hp, rh, float(self.h.sum())

    def set_direction(self, direction):
        self.dz = self._predict(direction)

    def trial(self, s):
        self.zt = self.z - s * self.dz
        return self.loss.loss_sum(self.zt, self.y)

    def accept(self):
        self.z = np.ascontiguousarray(self.zt)
        self.zt = None

    def save_prev(self):
        self.z_prev = self.z.copy()


def _k_it_init(chunk, loss_name, p, fit_intercept):
    chunk.v["it"] = _ITChunk(chunk, loss_name, p, fit_intercept)


class _DaskTikhonovState(_GuardedNewton):
    """``tikhonov._TikhonovState`` (method="newton", Cholesky, linear kernel) on the chunks:
    each Newton iteration maps the loss derivatives, X^T g and X^T diag(h) X (d + d^2
    numbers), solves the (d, d) system on the client, and evaluates the line search
    trials with one map (a loss sum) each."""

    def __init__(self, pool, params):
        from .solvers.tikhonov import _LOSSES, decrement_schedule

        self.pool = pool
        self.loss_name = params["loss"]
        self.loss = _LOSSES[self.loss_name]
        self.auto = False
        self.t_sched = params["t"]
        self.n_prox = self.t_sched
        self.tol = params["tol"]
        self.decrement_targets = decrement_schedule(self.tol, self.t_sched)
        self.method = "newton"
        self.newton_solver = "cholesky"
        self.n_iter = 0
        self.elapsed = 0.0
        self.done = False
        self.failed = None
        self.train_index = None
        n = pool.n_samples
        self.lam = float(params["lam"] if params["lam"] is not None else 1.0 / n)
        self.identity_map = True
        self.fit_intercept = bool(params["fit_intercept"])
        self.n, self.p = n, pool.n_features
        self.q = self.p + int(self.fit_intercept)
        self._queue = []
        self._hessian = None
        pool.map(_k_it_init, self.loss_name, self.p, self.fit_intercept)
        self.w = np.zeros(self.q)
        self.w_prev = np.zeros(self.q)
        self.objective = self.empirical_risk = self.penalty = np.nan
        self.decrement = np.inf
        self.direction = np.zeros(self.q)
        self.prox_step = 1
        self.newton_iter = 0
        self.prox_decrement = []
        self.prox_newton_iter = []
        self.prox_risk = []
        self.prox_coef = []
        self.validation_loss = []
        self._evaluate()

    def _map(self, ops):
        allops = self._queue + ops
        self._queue = []
        return [res[-1] for res in self.pool.map(_k_obj, "it", allops)]

    @property
    def decrement_target(self):
        return float(self.decrement_targets[min(self.prox_step, len(self.decrement_targets)) - 1])

    def _penalty(self, w, w_prev):
        d = w[: self.p] - w_prev[: self.p]
        return 0.5 * self.lam * float(d @ d)

    def _evaluate_unsafe(self):
        import scipy.linalg as sla

        from .solvers.tikhonov import _finite

        p, n, lam = self.p, self.n, self.lam
        const = self.loss_name == "squared" and self._hessian is not None
        parts = self._map([("evaluate", (not const,))])
        total = sum(x[0] for x in parts)
        self.empirical_risk = total / n
        self.penalty = self._penalty(self.w, self.w_prev)
        grad = np.empty(self.q)
        grad[:p] = np.sum([x[1] for x in parts], axis=0) / n + lam * (self.w[:p] - self.w_prev[:p])
        if self.fit_intercept:
            grad[p] = sum(x[2] for x in parts) / n
        self.grad = grad
        if const:
            cho = self._hessian
        else:
            H = np.empty((self.q, self.q))
            Hp = np.sum([x[3] for x in parts], axis=0)
            Hp /= n
            Hp.flat[:: p + 1] += lam
            H[:p, :p] = Hp
            if self.fit_intercept:
                col = np.sum([x[4] for x in parts], axis=0) / n
                H[:p, p] = col
                H[p, :p] = col
                H[p, p] = sum(x[5] for x in parts) / n
            cho = sla.cho_factor(_finite(H), lower=True, check_finite=False)
            if self.loss_name == "squared":
                self._hessian = cho
        self.direction = sla.cho_solve(cho, grad, check_finite=False)
        self._queue.append(("set_direction", (self.direction,)))
        dec2 = float(self.grad @ self.direction)
        self.objective = self.empirical_risk + self.penalty
        self.decrement = float(np.sqrt(max(dec2, 0.0)))

    def _objective_at(self, s):
        risk = sum(self._map([("trial", (s,))])) / self.n
        return risk + self._penalty(self.w - s * self.direction, self.w_prev)

    def _finish_prox_step(self):
        k = self.prox_step
        self.prox_decrement.append(self.decrement)
        self.prox_newton_iter.append(self.newton_iter)
        self.prox_risk.append(self.empirical_risk)
        self.prox_coef.append(self.w.copy())
        if k >= self.n_prox:
            self.done = True
            return
        self.w_prev = self.w.copy()
        self._queue.append(("save_prev", ()))
        self.prox_step = k + 1
        self.newton_iter = 0
        self._evaluate()

    def step(self):
        self.n_iter += 1
        if self.done:
            return
        if self.decrement <= self.decrement_target:
            self._finish_prox_step()
            if self.done:
                return
        self._newton_iteration()

    def _accept(self, s):
        self.w = self.w - s * self.direction
        self._queue.append(("accept", ()))

    def snapshot(self):
        return {"objective": float(self.objective), "empirical_risk": float(self.empirical_risk),
                "decrement": float(self.decrement), "prox_step": float(self.prox_step),
                "target": self.decrement_target}

    def certificate(self, status):
        """The certificate of "converged" at the current iterate: the proximal chain up to
        it (as in memory)."""
        from .solvers.tikhonov import NewtonDecrementCertificate

        if status != "converged":
            return None
        problem = self.problem
        return NewtonDecrementCertificate(
            self.decrement, self.decrement_targets[: self.prox_step], self.loss_name, self.lam,
            "primal", np.array(self._chain()), self.fit_intercept, problem.kernel,
            problem.classes_, None, None, None, True, config=problem.config,
            prox_step=self.prox_step)


@_driver("iterated_tikhonov")
class TikhonovDriver(Driver):
    """``iterated_tikhonov`` with the linear kernel, integer t, method="newton" and Cholesky
    Newton systems (Beugnot et al. 2021, Definition 1 and Proposition 1)."""

    @classmethod
    def matches(cls, solver):
        return _same_class(solver, "iterated_tikhonov")

    def check(self, problem):
        prm = self.solver.params
        bad = []
        if prm["t"] == "auto":
            bad.append("t='auto' (pass an integer t)")
        if prm["method"] != "newton":
            bad.append("method='spectral_filter' (use method='newton')")
        if prm["n_components"] is not None:
            bad.append("n_components (Nystroem)")
        ns = prm["newton_solver"]
        if ns == "auto":
            p, n = problem.n_features, problem.n_samples
            ns = "cg" if (not problem.sparse and p >= 512 and n >= 4 * p) else "cholesky"
        if ns == "cg":
            bad.append("newton_solver='cg' (pass newton_solver='cholesky')")
        if bad:
            raise ValueError("iterated_tikhonov on dask arrays supports the linear kernel with "
                             "an integer t, method='newton' and Cholesky Newton systems; not "
                             + ", ".join(bad))

    def start(self, problem):
        return _DaskTikhonovState(problem.pool, self.solver.params)

    def finalize(self, problem, state, status):
        from .solvers.tikhonov import NewtonDecrementCertificate

        p = state.p
        t_used = state.n_prox
        w, w_prev = state.w, state.w_prev
        state._record_last_prox_step()
        fields = {"task": self.solver.task,
                  "coef_": w[:p].copy(),
                  "intercept_": float(w[p]) if state.fit_intercept else 0.0}
        target = state.decrement_target
        # a certificate only when the last target was met (as in memory)
        fields["certificate"] = state.certificate(status)
        fields["history"] = {
            "prox_decrement": np.asarray(state.prox_decrement, dtype=np.float64),
            "prox_newton_iter": np.asarray(state.prox_newton_iter, dtype=np.int64),
            "prox_empirical_risk": np.asarray(state.prox_risk, dtype=np.float64),
        }
        if state.failed:
            fields["coef_"] = np.where(np.isfinite(fields["coef_"]), fields["coef_"], 0.0)
        fields["extra"] = {"t": int(t_used), "lam": state.lam, "loss": state.loss_name,
                           "failure": state.failed,
                           "decrement": state.decrement, "target": target,
                           "newton_solver": state.newton_solver}
        if self.solver.params["keep_path"]:
            steps = list(state.prox_coef[: t_used - 1]) + [w]
            fields["extra"]["path"] = np.array([v[:p].copy() for v in steps])
            fields["extra"]["path_intercept"] = np.array(
                [float(v[p]) if state.fit_intercept else 0.0 for v in steps])
        return fields


# ------------------------------------------------------------ vertex methods (columns G e_j)
class _VChunk:
    """Chunk side of the vertex methods (``PerceptronCore``, ``NormalizedPerceptronCore``,
    ``NKPCore``, ``NVNCore``): G e_j = S X (s_j x_j) through the d-vector s_j x_j, whose
    row x_j comes back from the chunk holding j with the chunk's argmin."""

    def __init__(self, chunk, offset, n, normalize):
        from .utils._operator import FeatureOperator

        self.op = FeatureOperator(chunk.X, chunk.y, normalize)
        self.X = chunk.X
        self.offset = offset
        self.scale = self.op.scale
        self.sd = self.op.sqrt_diag
        nc = chunk.X.shape[0]
        self.alpha = np.zeros(nc)
        self.ga = np.zeros(nc)
        self.p = np.full(nc, 1.0 / n)
        self.gp = np.zeros(nc)
        self.best_p = self.p.copy()
        self.counts = np.zeros(nc)
        self.col = np.zeros(nc)

    def _row(self, i):
        X = self.X
        if sp.issparse(X):
            a, b = X.indptr[i], X.indptr[i + 1]
            return ("csr", X.indices[a:b].copy(), np.asarray(X.data[a:b], dtype=np.float64))
        return ("dense", None, np.asarray(X[i], dtype=np.float64))

    def argmin(self, name, by_sd=False):
        """(min of ``name`` [or of name / sqrt(K_ii)], global argmin of ``name``, its row,
        s_j, sqrt(K_jj), gp_j, alpha . ga, p . gp)."""
        v = getattr(self, name)
        if v.size == 0:
            return (np.inf, -1, None, 0.0, 0.0, 0.0, 0.0, 0.0, np.inf)
        i = int(np.argmin(v))
        crit = float(np.min(v / self.sd)) if by_sd else float(v[i])
        return (float(v[i]), self.offset + i, self._row(i), float(self.scale[i]),
                float(self.sd[i]), float(self.gp[i]), float(self.alpha @ self.ga),
                float(self.p @ self.gp), crit)

    def column(self, w):
        self.col = self.op.features_dot(w)

    def owner_add(self, name, j, value):
        i = j - self.offset
        if 0 <= i < self.alpha.shape[0]:
            getattr(self, name)[i] += value

    def scale_vec(self, name, factor):
        setattr(self, name, getattr(self, name) * factor)

    def mix(self, name, c1, c2, src):
        # name = c1 * name + c2 * src (the cores' (1 - t) ga + t col)
        setattr(self, name, c1 * getattr(self, name) + c2 * getattr(self, src))

    def add(self, name, src):
        setattr(self, name, getattr(self, name) + getattr(self, src))

    def copy(self, dst, src):
        setattr(self, dst, getattr(self, src).copy())

    def fdot(self, name, w):
        setattr(self, name, self.op.features_dot(w))

    def primal(self, name):
        return self.op.primal(getattr(self, name))

    def primal_over_sd(self, name):
        return self.op.primal(getattr(self, name) / self.sd)

    def dot(self, a, b):
        return float(getattr(self, a) @ getattr(self, b))

    def best_from_alpha(self, alpha_sum):
        self.best_p = self.alpha / alpha_sum


def _k_v_init(chunk, offset, n, normalize):
    """Set up the chunk, or return the global indices of its all-zero rows."""
    bad = _zero_rows(chunk, offset)
    if not bad.size:
        chunk.v["vx"] = _VChunk(chunk, offset, n, normalize)
    return bad


def _add_row(w, row, c):
    """w += c * x_j (``FeatureOperator.add_row`` with c = coefficient * s_j)."""
    kind, idx, vals = row
    if kind == "csr":
        w[idx] += c * vals
    else:
        w += c * vals


class _DaskVertexCore:
    """The vertex methods of Ramdas & Pena 2014 on the chunks; one map per iteration (the column
    G e_j through the row x_j returned by the previous map with the argmin)."""

    def __init__(self, pool, kind, dual_tol):
        self.pool = pool
        self.kind = kind  # "perceptron", "normalized_perceptron", "nkp", "nvn"
        self.n = pool.n_samples
        self.d = pool.n_features
        self.dual_tol = dual_tol
        self.k = 0
        self.min_margin = np.inf
        self.alpha_norm = 0.0
        self.cur_dual = np.inf
        self.dual_norm = np.inf
        self.mu = 0.0
        self.alpha_sum = 0.0
        self._counts_ga = 0.0
        self._queue = []
        normalize = kind != "perceptron"
        bad = np.concatenate(pool.map_each(_k_v_init, [(pool.offsets[i], self.n, normalize)
                                                       for i in range(pool.n_chunks)]))
        if bad.size:
            raise ValueError(
                f"row(s) {bad[:10].tolist()}{' ...' if bad.size > 10 else ''} of X have "
                "K(x, x) = 0 (all-zero feature rows); the normalized Gram is undefined there: "
                "remove those rows or use a kernel with K(x, x) > 0")
        if kind == "normalized_perceptron":
            self.w = np.zeros(self.d)
        if kind == "nvn":
            self._matvec("p", "gp")
            self._queue += [("copy", ("alpha", "p")), ("copy", ("ga", "gp"))]
            self._margins(self._argmin("ga"))
            pgp = self._pgp
            if self.min_margin > 0.0:
                self._queue.append(("copy", ("gp", "ga")))
                pgp = self._aga
            self._dual(self.dual_tol, pgp)
        elif kind == "perceptron":
            self._perceptron_stats(self._argmin("ga", by_sd=True))
        elif kind == "normalized_perceptron":
            self._np_stats(self._argmin("ga"))
        else:
            self._margins(self._argmin("ga"))

    # -- communication -------------------------------------------------------------
    def _map(self, ops):
        allops = self._queue + ops
        self._queue = []
        return [res[-1] for res in self.pool.map(_k_obj, "vx", allops)]

    def _matvec(self, src, dst):
        w = np.sum(self._map([("primal", (src,))]), axis=0)
        self._queue.append(("fdot", (dst, w)))

    def _argmin(self, name, by_sd=False, ops=()):
        parts = self._map(list(ops) + [("argmin", (name, by_sd))])
        best = min(range(len(parts)), key=lambda c: (parts[c][0], c))
        info = parts[best]
        self.imin, self._row, self._sj, self._sdj, self._gpj = info[1], info[2], info[3], \
            info[4], info[5]
        self._aga = sum(p[6] for p in parts)
        self._pgp = sum(p[7] for p in parts)
        self._crit = min(p[8] for p in parts)
        return info[0]

    def _column_w(self):
        w = np.zeros(self.d)
        _add_row(w, self._row, 1.0 * self._sj)
        return w

    def flush(self):
        if self._queue:
            self._map([("dot", ("p", "p"))])

    # -- shared pieces of _Core ------------------------------------------------------
    def _margins(self, gmin):
        self.min_margin = gmin
        if self.min_margin > 0.0:
            self._matvec("alpha", "ga")
            self.min_margin = self._argmin("ga")
        self.alpha_norm = _gnorm(self._aga)

    def _dual(self, fresh_below, pgp):
        self.cur_dual = _gnorm(pgp)
        if self.cur_dual <= fresh_below:
            self._matvec("p", "gp")
            self.cur_dual = _gnorm(sum(self._map([("dot", ("p", "gp"))])))
        if self.cur_dual < self.dual_norm:
            self.dual_norm = self.cur_dual
            self._queue.append(("copy", ("best_p", "p")))

    def _perceptron_stats(self, _):
        m = self._crit
        if m > 0.0:
            self._matvec("counts", "ga")
            self._argmin("ga", by_sd=True)
            m = self._crit
            self._counts_ga = sum(self._map([("dot", ("counts", "ga"))]))
        self.min_margin = m
        sq = self._counts_ga
        self.alpha_norm = _gnorm(sq)
        if self.alpha_sum > 0.0:
            self.cur_dual = self.alpha_norm / self.alpha_sum
            if self.cur_dual < self.dual_norm:
                self.dual_norm = self.cur_dual
                self._queue.append(("best_from_alpha", (self.alpha_sum,)))

    def _np_stats(self, gmin):
        self.min_margin = gmin
        self.alpha_norm = _gnorm(float(self.w @ self.w))
        if self.k > 0:
            self.cur_dual = self.alpha_norm
            if self.cur_dual < self.dual_norm:
                self.dual_norm = self.cur_dual
                self._queue.append(("copy", ("best_p", "alpha")))

    # -- steps -----------------------------------------------------------------------
    def step(self):
        j = self.imin
        if self.kind == "perceptron":
            sdj = self._sdj
            self.alpha_sum += sdj
            w = self._column_w()
            ops = [("owner_add", ("counts", j, 1.0)), ("owner_add", ("alpha", j, sdj)),
                   ("column", (w,)), ("add", ("ga", "col"))]
            self.k += 1
            parts = self._map(ops + [("dot", ("counts", "ga"))])
            self._counts_ga = sum(parts)
            self._argmin("ga", by_sd=True)
            self._perceptron_stats(None)
        elif self.kind == "normalized_perceptron":
            t = 1.0 / (self.k + 1)
            self.w = self.w * (1.0 - t)
            _add_row(self.w, self._row, t * self._sj)
            ops = [("scale_vec", ("alpha", 1.0 - t)), ("owner_add", ("alpha", j, t)),
                   ("fdot", ("ga", self.w)), ("copy", ("p", "alpha"))]
            self.k += 1
            self._np_stats(self._argmin("ga", ops=ops))
        elif self.kind == "nkp":
            t = 1.0 / (self.k + 1)
            w = self._column_w()
            ops = [("column", (w,)), ("scale_vec", ("alpha", 1.0 - t)),
                   ("mix", ("ga", 1.0 - t, t, "col")), ("owner_add", ("alpha", j, t))]
            self.k += 1
            self._margins(self._argmin("ga", ops=ops))
            self._queue += [("copy", ("p", "alpha")), ("copy", ("gp", "ga"))]
            self._dual(self.dual_tol, self._aga)
        else:  # nvn
            w = self._column_w()
            parts = self._map([("column", (w,)), ("dot", ("p", "gp"))])
            a = sum(parts)
            b = self._gpj
            c = self._sj * _row_dot(self._row, w)
            den = a - 2.0 * b + c
            t = (a - b) / den if den > 0.0 else 0.0
            t = min(max(t, 0.0), 1.0)
            ops = [("scale_vec", ("p", 1.0 - t)), ("mix", ("gp", 1.0 - t, t, "col")),
                   ("owner_add", ("p", j, t)), ("copy", ("alpha", "p")), ("copy", ("ga", "gp"))]
            self.k += 1
            self._margins(self._argmin("ga", ops=ops))
            if self.min_margin > 0.0:
                self._queue.append(("copy", ("gp", "ga")))
                pgp = self._aga
            else:
                pgp = self._pgp
            self._dual(self.dual_tol, pgp)

    def margin_bounds(self):
        lower = self.min_margin / self.alpha_norm if (self.min_margin > 0 and self.alpha_norm > 0) \
            else -np.inf
        return lower, self.dual_norm


def _row_dot(row, w):
    kind, idx, vals = row
    if kind == "csr":
        acc = 0.0
        for k in range(vals.shape[0]):
            acc += vals[k] * w[idx[k]]
        return acc
    return float(vals @ w)


@_driver("perceptron", "normalized_perceptron", "nkp", "nvn")
class VertexPerceptronDriver(Driver):
    """``perceptron``, ``normalized_perceptron``, ``nkp`` and ``nvn`` (Ramdas & Pena 2014, secs. 2.1,
    4 and 5) with the linear kernel: one column G e_j per iteration."""

    _NAMES = ("perceptron", "normalized_perceptron", "nkp", "nvn")

    @classmethod
    def matches(cls, solver):
        return any(_same_class(solver, name) for name in cls._NAMES)

    def start(self, problem):
        core = _DaskVertexCore(problem.pool, self.solver.name, self.solver.params["eps"])
        state = _DaskFamilyState(core)
        state.get = _k_v_get
        return state

    def finalize(self, problem, state, status):
        core, pool = state.core, problem.pool
        op = "primal_over_sd" if core.kind == "perceptron" else "primal"
        fields = _family_fields(problem, core, _k_v_get, status, op)
        if core.kind == "perceptron":
            fields["extra"] = {"mistake_counts": np.concatenate(pool.map(_k_v_get, "counts"))}
        return fields


def _k_v_get(chunk, name):
    return np.array(getattr(chunk.v["vx"], name), dtype=np.float64)
