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
"""
import numpy as np
import scipy.sparse as sp

__all__ = ["Block", "Executor", "local_executor"]


class Block:
    """One row block of X and y (rows ``offset .. offset + len``) with the block-local
    state of one run (``v``)."""

    def __init__(self, X, y, index=0, offset=0):
        self.X = X
        self.y = y
        self.index = index
        self.offset = offset
        self.v = {}

    def run(self, fn, *args):
        return fn(self, *args)


def _k_get(block, name):
    return np.asarray(block.v[name])


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

    def close(self):
        self._keep = []
        self.workers = []


def local_executor(X, y):
    """An ``Executor`` with one in-memory block: ``X`` (validated) and ``y``."""
    return Executor([Block(X, y)], [X.shape[0]], X.shape[1], X.dtype, sp.issparse(X))
