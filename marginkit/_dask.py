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

A solver written against ``Problem.executor`` (``blocked = True``: fista, fista_svm,
pegasos, snkp, snkpvn, isnkpvn, iterated_tikhonov, or a third-party solver) runs here as
it is, its block kernels on the chunks (``BlockedDriver``); the vertex family's drivers
below perform the iterations of their in-memory solvers. Results agree with ``mk.solve``
on the same data up to the order of floating-point summation, except where
``docs/dask.md`` says otherwise at its top (``isnkpvn``'s exact finish needs one chunk,
pegasos's epoch order follows the chunks). ``dcd`` is sequential and refused.

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
    task = getattr(solver, "task", "classification")
    t0 = time.perf_counter()
    pool, classes = make_pool(X, y, task=task)
    try:
        problem = DaskProblem(pool=pool, classes_=classes, kernel=kernel, smoother=smoother,
                              params=dict(solver.params),
                              rng=check_random_state(config.random_state), config=config,
                              source=(X, y))
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

    @classmethod
    def refusal(cls, solver, kernel):
        """Why the driver cannot run ``solver`` with ``kernel`` (a message), or None: the
        per-solver drivers run the linear kernel only."""
        if getattr(kernel, "name", None) != "linear" or type(kernel).__name__ != "LinearKernel":
            return str(_unsupported(solver.name or type(solver).__name__, kernel))
        return None

    def check(self, problem):
        """Reject parameter combinations the driver does not reproduce (ValueError)."""


def _same_class(solver, name):
    from ._registry import get_plugin

    try:
        return type(solver) is get_plugin("solver", name)
    except ValueError:
        return False


# =====================================================================================
# Blocked solvers: the in-memory solver itself, on the chunks (``Solver.blocked``)
# =====================================================================================
@_driver("fista", "fista_svm", "pegasos", "iterated_tikhonov")
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


# =====================================================================================
# Perceptron / von Neumann family (Ramdas & Pena 2014), linear kernel: G a = S X (X^T S a)
# (snkp, snkpvn and isnkpvn are blocked solvers: they run on the pool as they are)
# =====================================================================================
def _zero_rows(chunk, offset):
    """Global indices of the chunk's all-zero rows (they cannot be normalized)."""
    from .utils._norms import row_sqnorms

    return np.flatnonzero(~(row_sqnorms(chunk.X) > 0)) + offset


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


def _k_obj(chunk, key, ops):
    """Run ``ops`` (a list of (method, args)) on ``chunk.v[key]``; the results per op."""
    obj = chunk.v[key]
    return [getattr(obj, name)(*args) for name, args in ops]


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
