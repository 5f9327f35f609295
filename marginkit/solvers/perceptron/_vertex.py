"""The vertex methods of Ramdas & Pena 2014: ``perceptron``, ``normalized_perceptron``,
``nkp`` and ``nvn``.

Each iteration moves alpha (or p) toward one vertex e_j of the simplex, j the most
violated point: the classic and the normalized perceptron (sec. 2.1), the Normalized
Kernel Perceptron (sec. 4) and the Normalized von Neumann algorithm with exact line
search (sec. 5). They are written once, as ``VertexIteration`` over the row blocks of
``problem.executor``: the driver holds the scalars and makes every decision; the
n-vectors live on the blocks (``VertexBlock``). An iteration takes one column
G e_j = S X (s_j x_j): the block holding j returns the d-vector s_j x_j and every block
applies S_c X_c to it (in memory, the one block's ``op.column``, any kernel).

The paper's reference is in the package docstring (``marginkit.solvers.perceptron``).
"""

import numpy as np

from ..._registry import _register_builtin
from ...linalg._operator import FeatureOperator
from ._fast import VertexBlock, seq_dot
from ._blocks import _BlockDriver, _block_operator, _gnorm
from ._family import _FamilyState, _PerceptronFamily


def _k_vb(block, name, *args):
    """``block.v["vb"].<name>(*args)``: a pass of the block's ``VertexBlock``."""
    return getattr(block.v["vb"], name)(*args)


def _k_vb_get(block, name):
    """The block's piece of an n-vector (``alpha``, ``p``, ``best_p``, ``counts``)."""
    return getattr(block.v["vb"], name + "_arr")


def _k_vb_init(block, op, normalize, n_total):
    """Set up the block: ``op`` its Gram operator (the whole problem's, in memory) or None
    (a chunk of a dask array: the block's ``FeatureOperator``, linear kernel). Returns the
    global indices of the block's all-zero rows (then nothing is set up) or None."""
    if op is None:
        op = _block_operator(block, normalize)
        if not isinstance(op, FeatureOperator):
            return op
    block.v["vb"] = VertexBlock(op, block.offset, n_total)
    return None


class VertexIteration(_BlockDriver):
    """The vertex methods of Ramdas & Pena 2014 as one state machine over the blocks of an
    executor: ``kind`` is "perceptron" (sec. 2.1, classic, on the unnormalized Gram),
    "normalized_perceptron" (sec. 2.1, w in feature space), "nkp" (sec. 4) or "nvn"
    (sec. 5, exact line search). One column of G per iteration (the normalized
    perceptron: one pass S X w from scratch); argmins break ties to the lowest global
    index. G alpha is recomputed from scratch before a run may be declared separable, and
    G p before ||p||_G may be declared below a tolerance.

    References
    ----------
    A. Ramdas and J. Pena, "Margins, Kernels and Non-linear Smoothed Perceptrons",
    Proceedings of the 31st International Conference on Machine Learning (ICML), 2014;
    arXiv:1505.04123.
    """

    _call, _get = _k_vb, _k_vb_get

    def __init__(self, ex, kind, dual_tol, op=None):
        super().__init__(ex, dual_tol)
        self.kind = kind
        self.alpha_sum = 0.0
        self._sdj = 0.0
        self._fresh = False
        normalize = kind != "perceptron"
        self._adopt_blocks(ex.map(_k_vb_init, op, normalize, self.n), "vb")
        # the column of a single block is its operator's (any kernel)
        self._own_col = self.single and op is not None
        if kind == "perceptron":
            self._perc_stats(self._map("perc_stats"))
        elif kind == "normalized_perceptron":
            # w lives in the feature space of the operator (a feature map's d)
            self.w = np.zeros(max(ex.n_features if op is None else op.d, 1))
            self.imin, self.min_margin = 0, 0.0
            self._np_stats()
        elif kind == "nkp":
            self._set_margins(self._map("margin_stats"))
        else:
            self._gram("p", "gp")
            self._nvn_stats(self._map("nvn_sync"))

    # -- the blocks ------------------------------------------------------------------

    def _owner(self, j):
        return int(np.searchsorted(self.ex.offsets, j, side="right")) - 1

    def _call_owner(self, j, name, *args):
        if self._local is not None:
            return getattr(self._local, name)(*args)
        return self.ex.call(self._owner(j), _k_vb, name, *args)

    def _column_w(self, j):
        """None (the block's own column) or the d-vector s_j x_j."""
        return None if self._own_col else self._call_owner(j, "row", j)

    def _own_gram(self):
        return self._own_col

    counts_arr = property(lambda self: self.gather("counts"))

    def primal(self):
        """The weight vector sum_c X_c^T S_c alpha_c (blocks with a ``FeatureOperator``;
        the perceptron: its counts, alpha_i / sqrt(K_ii))."""
        name = "primal_over_sd" if self.kind == "perceptron" else "primal"
        return np.sum(self._map(name, "alpha"), axis=0)

    # -- shared pieces -----------------------------------------------------------------
    def _reduce(self, stats):
        """The stats of the block with the lowest minimum (ties: the first such block, so
        the lowest global index)."""
        if self.single:
            return stats[0]
        return stats[min(range(len(stats)), key=lambda c: (stats[c][0], c))]

    def _set_margins(self, stats):
        gmin, imin = self._reduce(stats)[:2]
        aga = self._sum([s[2] for s in stats])
        self._fresh = gmin > 0.0
        if self._fresh:
            # about to report "separable": recompute G alpha exactly
            self._gram("alpha", "ga")
            stats = self._map("margin_stats")
            gmin, imin = self._reduce(stats)[:2]
            aga = self._sum([s[2] for s in stats])
        self.imin, self.min_margin = imin, gmin
        self.alpha_norm = _gnorm(aga)
        return aga

    def _perc_stats(self, stats):
        """Most violated point (unnormalized margins), min_i (G alpha)_i (normalized),
        ||alpha||_G and ||alpha / sum(alpha)||_G."""
        m = min(s[2] for s in stats)
        if m > 0.0:
            self._gram("counts", "ga")
            stats = self._map("perc_stats")
            m = min(s[2] for s in stats)
        best = self._reduce(stats)
        self.imin, self._sdj = best[1], best[4]
        self.min_margin = m
        # ||alpha||_G^2 = counts^T Gu counts; p = alpha / sum(alpha) lies in the simplex
        self.alpha_norm = _gnorm(self._sum([s[3] for s in stats]))
        if self.alpha_sum > 0.0:
            self.cur_dual = self.alpha_norm / self.alpha_sum
            if self.cur_dual < self.dual_norm:
                self.dual_norm = self.cur_dual
                self._map("best_from_alpha", self.alpha_sum)

    def _np_stats(self):
        self.alpha_norm = _gnorm(seq_dot(self.w, self.w))
        if self.k > 0:
            self.cur_dual = self.alpha_norm
            if self.cur_dual < self.dual_norm:
                self.dual_norm = self.cur_dual
                self._map("copy", "best_p", "alpha")

    def _nvn_stats(self, stats):
        aga = self._set_margins(stats)
        if self.min_margin > 0.0:
            self._map("copy", "gp", "ga")
        # alpha = p and G alpha = G p: p . G p = alpha . G alpha
        self._set_dual(aga, self.dual_tol)

    # -- one iteration -----------------------------------------------------------------
    def step(self):
        j, kind = self.imin, self.kind
        if kind == "perceptron":
            self.alpha_sum += self._sdj
            stats = self._map("perc_update", j, self._column_w(j))
            self.k += 1
            self._perc_stats(stats)
        elif kind == "nkp":
            t = 1.0 / (self.k + 1)
            stats = self._map("nkp_update", j, self._column_w(j), t)
            self.k += 1
            aga = self._set_margins(stats)
            if self._fresh:
                self._map("sync_p")  # p = alpha, G p = the fresh G alpha
            self._set_dual(aga, self.dual_tol)
        elif kind == "normalized_perceptron":
            t = 1.0 / (self.k + 1)
            self.w *= 1.0 - t
            self.w = self._call_owner(j, "add_row", j, t, self.w)
            stats = self._map("np_update", j, t, self.w)
            self.min_margin, self.imin = self._reduce(stats)
            self.k += 1
            self._np_stats()
        else:  # nvn
            parts = self._map("nvn_column", j, self._column_w(j))
            a = self._sum([q[0] for q in parts])
            b = sum(q[1] for q in parts)
            c = sum(q[2] for q in parts)
            # ||(1-t) p + t e_j||_G^2 = (1-t)^2 a + 2 t (1-t) b + t^2 c, minimized over [0, 1]
            den = a - 2.0 * b + c
            t = (a - b) / den if den > 0.0 else 0.0
            t = min(max(t, 0.0), 1.0)
            stats = self._map("nvn_update", j, t)
            self.k += 1
            self._nvn_stats(stats)


class _VertexFamily(_PerceptronFamily):
    """The vertex solvers: one ``VertexIteration`` over the row blocks of
    ``problem.executor`` (in memory: one block with the problem's Gram operator, any
    kernel; on a dask array: the chunks, linear kernel)."""

    _kind = None

    def _kind_for(self, op):
        return self._kind

    def start(self, problem):
        op = self._operator(problem)
        kind = self._kind_for(op)
        return _FamilyState(VertexIteration(problem.executor, kind, self.params["eps"], op=op),
                            op, problem)


@_register_builtin("solver", "perceptron")
class Perceptron(_VertexFamily):
    """Classic kernel perceptron (Ramdas & Pena 2014, sec. 2.1, kernelized).

    Works on the unnormalized signed Gram Gu = Y K Y: with c_i the number of updates on
    point i, it updates the most violated point i = argmin_i (Gu c)_i while
    min_i (Gu c)_i <= 0. Mistake bound max_i K(x_i, x_i) / rho^2 (unnormalized margin).
    The certificate and ``dual_coef_`` use the normalized alpha_i = c_i sqrt(K(x_i, x_i)),
    so they verify with G; the raw counts are ``Result.extra["mistake_counts"]``.
    ``dual_norm`` is ||alpha / sum(alpha)||_G. Default ``max_iter``: 10_000.

    References
    ----------
    A. Ramdas and J. Pena, "Margins, Kernels and Non-linear Smoothed Perceptrons",
    Proceedings of the 31st International Conference on Machine Learning (ICML), 2014;
    arXiv:1505.04123.
    """

    _normalize = False
    _kind = "perceptron"

    def finalize(self, problem, state, status):
        fields = super().finalize(problem, state, status)
        fields["extra"] = {**(fields.get("extra") or {}),
                           "mistake_counts": np.array(state.core.counts_arr)}
        return fields


@_register_builtin("solver", "normalized_perceptron")
class NormalizedPerceptron(_VertexFamily):
    """Normalized Perceptron (Ramdas & Pena 2014, sec. 2.1): w_0 = 0,
    w_{k+1} = (1 - t_k) w_k + t_k y_i x_i / ||x_i||, t_k = 1/(k+1), i the most
    misclassified point. Finds a separator within 1/rho_2^2 iterations.

    With a kernel that has a feature map (``linear``), w lives in feature space and the
    margins Y X_2^T w are recomputed from w every iteration. Other kernels run the same
    iterates through G (then it coincides with ``nkp``). Default ``max_iter``: 10_000.

    References
    ----------
    A. Ramdas and J. Pena, "Margins, Kernels and Non-linear Smoothed Perceptrons",
    Proceedings of the 31st International Conference on Machine Learning (ICML), 2014;
    arXiv:1505.04123.
    """

    def _kind_for(self, op):
        # the chunks of a dask array (op None) hold feature operators
        return "normalized_perceptron" if op is None or isinstance(op, FeatureOperator) \
            else "nkp"


@_register_builtin("solver", "nkp")
class NKP(_VertexFamily):
    """Normalized Kernel Perceptron (Ramdas & Pena 2014, sec. 4): alpha_0 = 0,
    alpha_{k+1} = (1 - t_k) alpha_k + t_k p(alpha_k), t_k = 1/(k+1), p(alpha) = e_i with
    i = argmin_i (G alpha)_i. A subgradient method on L(alpha) = max_p <-alpha, p>_G +
    ||alpha||_G^2 / 2; separator within 1/rho_K^2 iterations. alpha (in the simplex)
    is also the dual p. Default ``max_iter``: 10_000.

    References
    ----------
    A. Ramdas and J. Pena, "Margins, Kernels and Non-linear Smoothed Perceptrons",
    Proceedings of the 31st International Conference on Machine Learning (ICML), 2014;
    arXiv:1505.04123.
    """

    _kind = "nkp"


@_register_builtin("solver", "nvn")
class NVN(_VertexFamily):
    """Normalized von Neumann with exact line search (Ramdas & Pena 2014, sec. 5), kernelized:
    p_0 = 1/n, w_k = G p_k kept with columns of G, j = argmin_j (G p_k)_j,
    theta = argmin_{[0,1]} ||(1-theta) p_k + theta e_j||_G, p_{k+1} = (1-theta) p_k + theta e_j.

    Stops with ||p||_G <= eps (``infeasible``) or G p > 0 (``separable``, alpha = p).
    Default ``max_iter``: 100_000.

    References
    ----------
    A. Ramdas and J. Pena, "Margins, Kernels and Non-linear Smoothed Perceptrons",
    Proceedings of the 31st International Conference on Machine Learning (ICML), 2014;
    arXiv:1505.04123.
    """

    default_stop = ("separated", "dual_certificate")
    default_max_iter = 100_000
    _kind = "nvn"
