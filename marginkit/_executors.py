"""Executors: where the row blocks of a problem live, and how block kernels run on them.

A blocked algorithm is written once, as a driver (the solver state: O(d) work between
iterations, the stopping decisions) plus block kernels ``kernel(block, *broadcast)`` that
read ``block.X`` / ``block.y``, keep their block-local vectors in ``block.v`` (a dict) and
return partial results. ``Executor.map`` runs a kernel on every block and returns the
results in block order; the driver reduces them in that fixed order, so a run is
deterministic for a given blocking.

In memory, ``Problem.executor`` is ``local_executor(X, y)``: one block holding the whole
data (the kernels parallelize inside a block with OpenMP). The Dask backend
(``marginkit._dask``) builds an ``Executor`` whose blocks are the row chunks of a dask
array, each held by a worker (a ``distributed`` actor): the same kernels then run where
the data are, and only their partial results travel.

A kernel approximation's features are rows too: ``Executor.derived`` evaluates a map
(Phi = feature_map(X)) on every block where the block is held, keeps the result beside
it, and returns an executor over those derived blocks, so the same solver runs on
Phi(X) in memory and on a cluster. ``ExecutorRows`` serves a fit (the Nystroem centres)
the few rows it draws, gathered from the blocks.
"""
import numpy as np
import scipy.sparse as sp

__all__ = ["Block", "Executor", "ExecutorRows", "local_executor"]


class Block:
    """One row block of X and y (rows ``offset .. offset + len``) with the block-local
    state of one run (``v``)."""

    def __init__(self, X, y, index=0, offset=0):
        self.X = X
        self.y = y
        self.index = index
        self.offset = offset
        self.v = {}
        #: derived blocks of the same rows (``Executor.derived``), by name
        self.views = {}

    def run(self, fn, *args):
        return fn(self, *args)


def _k_get(block, name):
    return np.asarray(block.v[name])


def _k_derive(block, name, fn, args):
    """Build the derived block ``name`` (rows ``fn(block, *args)``) beside ``block``; its
    shape, dtype and sparsity, or None when ``fn`` returns None (no derived rows)."""
    from ._validation import in_chunk

    with in_chunk(block.offset):  # a map's messages name rows of X, not of the block
        X = fn(block, *args)
    if X is None:
        return None
    view = Block(X, block.y, block.index, block.offset)
    block.views[name] = view
    return X.shape, X.dtype.str, sp.issparse(X)


def _k_in_view(block, name, fn, args):
    return fn(block.views[name], *args)


def _k_take(block, idx):
    return block.X[idx]


class _ViewHandle:
    """A derived block held by a remote block (an actor): ``run`` runs there on it."""

    def __init__(self, worker, name):
        self.worker = worker
        self.name = name

    def run(self, fn, *args):
        return self.worker.run(_k_in_view, self.name, fn, args)


class Executor:
    """The blocks of one run and the map primitives over them.

    ``map(fn, *args)`` calls ``fn(block, *args)`` on every block (concurrently on a
    cluster, with ``client``) and returns the results in block order. ``blocks`` are
    ``Block`` objects, or actors with the same ``run`` method (a ``client`` is then
    given: their calls return futures).
    """

    def __init__(self, blocks, sizes, n_features, dtype, sparse, client=None, keep=()):
        self.workers = blocks
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)])
        self.n_samples = int(self.offsets[-1])
        self.n_features = int(n_features)
        self.dtype = np.dtype(dtype)
        self.sparse = bool(sparse)
        self.client = client
        self._keep = list(keep)  # futures that keep the actors (and X) alive

    @property
    def shape(self):
        return (self.n_samples, self.n_features)

    @property
    def n_chunks(self):
        return len(self.workers)

    def map(self, fn, *args):
        out = [w.run(fn, *args) for w in self.workers]
        return out if self.client is None else [f.result() for f in out]

    def map_each(self, fn, args_per_chunk):
        """``fn(block_i, *args_per_chunk[i])`` for every block i."""
        out = [w.run(fn, *a) for w, a in zip(self.workers, args_per_chunk)]
        return out if self.client is None else [f.result() for f in out]

    def call(self, i, fn, *args):
        """``fn(block_i, *args)`` on one block."""
        out = self.workers[i].run(fn, *args)
        return out if self.client is None else out.result()

    def gather(self, name):
        """Concatenate the block-local vector ``block.v[name]`` (an n-vector)."""
        parts = self.map(_k_get, name)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def split(self, vec):
        """An n-vector cut into per-block pieces."""
        return [vec[self.offsets[i]:self.offsets[i + 1]] for i in range(self.n_chunks)]

    def derived(self, name, fn, *args):
        """An ``Executor`` over the blocks ``fn(block, *args)`` (same rows, other columns:
        Phi(X) of a feature map), each computed and kept where its block is held (in
        memory, or on the worker holding the chunk); None when ``fn`` returns None on
        every block (the rows themselves serve)."""
        shapes = self.map(_k_derive, name, fn, args)
        if all(s is None for s in shapes):
            return None
        if any(s is None for s in shapes):
            raise ValueError(f"the derived blocks {name!r} exist on some blocks only")
        widths = {s[0][1] for s in shapes}
        if len(widths) != 1:
            raise ValueError(f"the derived blocks {name!r} have different widths {sorted(widths)}")
        dtypes = {s[1] for s in shapes}
        dtype = np.float64 if len(dtypes) > 1 else np.dtype(dtypes.pop())
        if self.client is None:
            blocks = [w.views[name] for w in self.workers]  # in this process: the blocks
        else:
            blocks = [_ViewHandle(w, name) for w in self.workers]
        return Executor(blocks, self.sizes, widths.pop(), dtype, any(s[2] for s in shapes),
                        client=self.client, keep=self._keep)

    def close(self):
        self._keep = []
        self.workers = []


class ExecutorRows:
    """The rows of an executor's blocks as a feature map's ``fit`` reads them: ``shape``,
    ``dtype`` and ``rows[idx]`` (sorted row numbers, repeats allowed, or a boolean mask of
    one entry per row, as numpy reads it), the selected rows gathered from the blocks
    holding them (a numpy array, or CSR for sparse blocks). Nothing else of X travels."""

    ndim = 2

    def __init__(self, executor):
        self.executor = executor
        self.shape = executor.shape
        self.dtype = executor.dtype

    def __getitem__(self, idx):
        idx = _row_numbers(idx, self.shape[0])
        if idx.ndim != 1 or (idx.size and (idx[0] < 0 or idx[-1] >= self.shape[0]
                                            or np.any(np.diff(idx) < 0))):
            raise IndexError("ExecutorRows takes sorted row numbers within the rows")
        ex = self.executor
        cuts = np.searchsorted(idx, ex.offsets)
        parts = ex.map_each(_k_take, [(idx[cuts[i]:cuts[i + 1]] - ex.offsets[i],)
                                      for i in range(ex.n_chunks)])
        if ex.sparse:
            return sp.vstack([sp.csr_matrix(p) for p in parts], format="csr")
        return np.concatenate([np.asarray(p) for p in parts], axis=0)


def _row_numbers(idx, n):
    """``idx`` as int64 row numbers: integers as they are, a boolean mask of n entries as
    the rows it selects (never its 0/1 values as row numbers); an empty list selects no
    row; any other kind (floats, a slice) is an ``IndexError``."""
    a = np.asarray(idx)
    if a.dtype == np.bool_:
        if a.shape != (n,):
            raise IndexError(f"a boolean mask of ExecutorRows needs one entry per row ({n}), "
                             f"got shape {a.shape}")
        return np.flatnonzero(a).astype(np.int64)
    if a.size == 0:
        return np.zeros(0, dtype=np.int64)
    if a.dtype.kind not in "iu":
        raise IndexError(f"ExecutorRows takes integer row numbers or a boolean mask, got "
                         f"{a.dtype}")
    return a.astype(np.int64)


def local_executor(X, y):
    """An ``Executor`` with one in-memory block: ``X`` (validated) and ``y``."""
    return Executor([Block(X, y)], [X.shape[0]], X.shape[1], X.dtype, sp.issparse(X))
