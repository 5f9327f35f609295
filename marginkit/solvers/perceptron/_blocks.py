"""The row-block driver the vertex and smoothed iterations share.

Both drivers are written once over the row blocks of ``problem.executor``: the driver
holds the scalars and makes every decision; the n-vectors live on the blocks (a
``VertexBlock`` or ``SmoothedBlock`` of ``_fast`` in ``block.v``), whose
passes return partial sums reduced here in block order. In memory there is one block
with the problem's Gram operator (any kernel), called directly; on a dask array each
block is a chunk held by a worker, with its own ``FeatureOperator`` (linear kernel).
"""
import math

import numpy as np

from ..._executors import Block
from ...linalg._operator import FeatureOperator


def _gnorm(sq):
    """sqrt of a squared G-norm, 0 for round-off below zero."""
    return math.sqrt(sq) if sq > 0.0 else 0.0


def _block_operator(block, normalize):
    """The ``FeatureOperator`` of a chunk's rows (linear kernel), or the global indices of
    the chunk's all-zero rows when it has some (they cannot be normalized). The norms
    are the operator's own (``row_norms``: a row of 1e-170 has a norm, though its square
    underflows; found by review: Dask called such rows all-zero, in memory they solve)."""
    from ...linalg._norms import row_norms

    bad = np.flatnonzero(~(row_norms(block.X) > 0)) + block.offset
    return bad if bad.size else FeatureOperator(block.X, block.y, normalize)


class _BlockDriver:
    """What the vertex and smoothed drivers share: the passes of their blocks (the object
    ``block.v[key]`` a block kernel ``_call(block, name, *args)`` runs a method of), called
    directly on one local block and mapped over the executor otherwise; G products
    reduced over the blocks; n-vectors gathered in block order; the best p and the margin
    bounds."""

    _call = _get = None  # the module-level block kernels (set by the subclasses)

    def __init__(self, ex, dual_tol):
        """The scalars both drivers keep: before the first iteration nothing is known
        about the margins (min G alpha = inf) or the dual (||p||_G = inf)."""
        self.ex = ex
        self.n = ex.n_samples
        self.single = ex.n_chunks == 1
        self.dual_tol = float(dual_tol)
        self.k = 0
        self.imin = 0
        self.mu = 0.0
        self.min_margin = math.inf
        self.alpha_norm = 0.0
        self.cur_dual = math.inf
        self.dual_norm = math.inf

    def _adopt_blocks(self, bad, key):
        """Raise on the all-zero rows the blocks' set-up found (``bad``: one array or None
        per block); then keep the single local block's object, if any, to call directly."""
        bad = [b for b in bad if b is not None]
        if bad:
            bad = np.concatenate(bad)
            raise ValueError(
                f"row(s) {bad[:10].tolist()}{' ...' if bad.size > 10 else ''} of X have "
                "K(x, x) = 0 (all-zero feature rows); the normalized Gram is undefined there: "
                "remove those rows or use a kernel with K(x, x) > 0")
        ex = self.ex
        self._local = ex.workers[0].v[key] \
            if self.single and ex.client is None and isinstance(ex.workers[0], Block) else None

    def _map(self, name, *args):
        if self._local is not None:
            return [getattr(self._local, name)(*args)]
        return self.ex.map(type(self)._call, name, *args)

    def _sum(self, parts):
        return parts[0] if self.single else sum(parts)

    def _own_gram(self):
        """Whether the single block's operator gives G products itself."""
        return False

    def _gram(self, src, dst):
        """dst = G src: the block's own product, or X_c^T S_c src reduced over the blocks
        and S_c X_c w applied on each."""
        if self._own_gram():
            self._map("gram", src, dst)
        else:
            self._map("fdot", dst, np.sum(self._map("primal", src), axis=0))

    def gather(self, name):
        """The n-vector ``name`` of the blocks, in block order."""
        parts = self.ex.map(type(self)._get, name)
        return parts[0] if self.single else np.concatenate(parts)

    alpha_arr = property(lambda self: self.gather("alpha"))
    p_arr = property(lambda self: self.gather("p"))
    best_p_arr = property(lambda self: self.gather("best_p"))

    def _set_dual(self, pgp, fresh_below):
        """cur_dual = ||p||_G; keep the best p. Fresh G p near the tolerance."""
        self.cur_dual = _gnorm(pgp)
        if self.cur_dual <= fresh_below:
            self._gram("p", "gp")
            self.cur_dual = _gnorm(self._sum(self._map("dot", "p", "gp")))
        if self.cur_dual < self.dual_norm:
            self.dual_norm = self.cur_dual
            self._map("copy", "best_p", "p")

    def margin_bounds(self):
        """(lower, upper) on rho_K (Ramdas & Pena 2014, Lemma 3): min(G alpha)/||alpha||_G
        and the best ||p||_G."""
        lower = self.min_margin / self.alpha_norm \
            if (self.min_margin > 0 and self.alpha_norm > 0) else -np.inf
        return lower, self.dual_norm
