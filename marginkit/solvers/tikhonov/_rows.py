"""The rows of a run and their data passes: the block kernels of iterated Tikhonov.

The solver is written once over ``problem.executor`` (``marginkit._executors``): the
state does the O(p) work and calls ``_k_tikhonov`` on each block's ``_BlockRows`` for
every pass over the rows, adding their partial sums in block order (``_block_sum``). In
memory there is one block holding all rows (the ``_fast`` passes on the whole
data); on a dask array the blocks are the chunks held by the workers, so the same
iterations run there. ``_Model`` is the O(p) description of the feature space.
"""
import numpy as np
import scipy.sparse as sp

from . import _fast
from ...linalg._norms import row_sqnorms
from ...utils._rows import row_block
from ._losses import _LOSSES, _loss_numpy


class _BlockRows:
    """The rows of Phi held by one block of a run (``block.v["tikhonov"]``) and the
    block-local n-vectors of the Newton iterations: z = Phi theta + b, the loss
    derivatives g and h, dz = Phi direction (+ its intercept) and the line search's trial
    predictions. Its methods are the data passes of one Newton iteration on these rows
    (the ``_fast`` passes); they return the block's partial sums, which the state
    adds in block order. In memory the single block holds all rows, so these are exactly
    the whole-data passes."""

    def __init__(self, Phi, y, loss_name, p, fit_intercept, weight=None):
        if Phi.shape[1] != p:
            raise ValueError(f"a row block has {Phi.shape[1]} features, the run {p}")
        self.sparse = sp.issparse(Phi)
        if not self.sparse:
            # the Cython passes read C-order rows: a private C copy of F-order input
            Phi = Phi if Phi.flags.c_contiguous else np.ascontiguousarray(Phi)
        self.Phi = Phi
        self.rows = row_block(Phi)
        self.y = np.ascontiguousarray(y, dtype=np.float64)
        self.loss = _LOSSES[loss_name]
        #: the block's sample weights (None: unweighted); g and h are then w_i l'(z_i)
        #: and w_i l''(z_i), the loss sums sum_i w_i l(z_i)
        self.weight = None if weight is None else np.ascontiguousarray(weight, dtype=np.float64)
        #: the rows of positive weight where some weight is 0 (``_weighted_loss``), once
        self._positive = None if self.weight is None or np.all(self.weight > 0) \
            else np.flatnonzero(self.weight > 0)
        self.p = p
        self.fit_intercept = fit_intercept
        n = Phi.shape[0]
        self.z = np.zeros(n)
        self.g = np.empty(n)
        self.h = np.empty(n)
        self.dz = np.zeros(n)
        self.zt = None
        #: ||phi_i||^2 (+ 1 for the intercept's column), once, and the rows' shares of
        #: the Hessian's trace: the preconditioner's sample (``precond_weights``)
        self._sqnorms = self._q = None

    def predict(self, w):
        """Phi w[:p] (+ w[p]) on the block's rows."""
        out = np.empty(self.Phi.shape[0])
        _fast.matvec(self.rows, np.ascontiguousarray(w[: self.p]), out)
        if self.fit_intercept:
            out += w[self.p]
        return out

    def rmatvec(self, g):
        out = np.empty(self.p)
        _fast.rmatvec(self.rows, g, out)
        return out

    def _weighted_gram(self, rows, h):
        Hp = np.empty((self.p, self.p))
        _fast.weighted_gram(rows, h, Hp)
        return Hp

    def derivatives(self, with_hessian):
        """At z: (loss sum, Phi^T g, sum g) and, ``with_hessian``, (Phi^T diag(h) Phi,
        Phi^T h, sum h) (None each otherwise)."""
        total = self.loss.derivatives(self.z, self.y, self.g, self.h)
        if self.weight is not None:
            w = self.weight
            total = self._weighted_loss(self.z)
            self.g *= w
            self.h *= w
        rg = self.rmatvec(self.g)
        gs = float(self.g.sum()) if self.fit_intercept else 0.0
        if not with_hessian:
            return total, rg, gs, None, None, None
        Hp = self._weighted_gram(self.rows, self.h)
        if not self.fit_intercept:
            return total, rg, gs, Hp, None, None
        return total, rg, gs, Hp, self.rmatvec(self.h), float(self.h.sum())

    def precond_weights(self):
        """Keep q_i = h_i ||(phi_i, 1)||^2, the rows' shares of the Hessian's trace, for
        the preconditioner's sample (``sampled_hessian``); return (the sum of its finite
        entries, the number of positive ones, the number of non-finite ones)."""
        if self._sqnorms is None:
            self._sqnorms = row_sqnorms(self.Phi) + float(self.fit_intercept)
        with np.errstate(over="ignore", invalid="ignore"):
            q = self.h * self._sqnorms
        finite = np.isfinite(q)
        self._q = np.where(finite, q, np.inf)
        pos = finite & (q > 0)
        return float(q[pos].sum()), int(np.count_nonzero(pos)), int(q.shape[0] - finite.sum())

    def _inclusion(self, c, base):
        """pi_i = min(1, c q_i + base) where q_i > 0 (1 where q_i is not finite, 0 where it
        is 0)."""
        q = self._q
        pi = np.zeros(q.shape[0])
        pos = q > 0
        with np.errstate(over="ignore", invalid="ignore"):
            pi[pos] = np.minimum(1.0, c * q[pos] + base)
        pi[np.isinf(q)] = 1.0
        return pi

    def inclusion_sums(self, c, base):
        """(sum_i pi_i, sum of q_i over the rows not taken whole) over the finite q_i: the
        expected sample size at scale c and its slope in c."""
        finite = np.isfinite(self._q)
        pi = self._inclusion(c, base)[finite]
        q = self._q[finite]
        return float(pi.sum()), float(q[pi < 1.0].sum())

    def sampled_hessian(self, c, base, seed, offset):
        """The Hessian sums of a sample of the block's rows, the preconditioner of the
        conjugate gradients: row i kept with probability pi_i = min(1, c q_i + base)
        (``precond_weights``; ``base``, the uniform share, keeps rows of every kind in
        the sample) and weighted by h_i / pi_i, an unbiased estimate of the block's sums
        that keeps the rows the Hessian is made of (Poisson sampling in proportion to the
        rows' shares of its trace). Row i's uniform draw is the i-th of
        the stream of ``seed`` (a counter-based generator, advanced to the block's first
        row ``offset``), so the sample does not depend on how the rows are split into
        blocks."""
        pi = self._inclusion(c, base)
        bits = np.random.Philox(key=seed)
        bits.advance(offset // 4)  # Philox draws four 64-bit words per step
        gen = np.random.Generator(bits)
        gen.random(offset % 4)
        rows = np.flatnonzero(gen.random(pi.shape[0]) < pi)
        return self._sub_hessian(rows, self.h[rows] / pi[rows])

    def _sub_hessian(self, rows, h):
        """The Hessian sums of the rows ``rows`` (block-local indices) with weights h."""
        h = np.ascontiguousarray(h, dtype=np.float64)
        sub = row_block(self.Phi[rows])
        Hp = self._weighted_gram(sub, h)
        if not self.fit_intercept:
            return Hp, None, None
        col = np.empty(self.p)
        _fast.rmatvec(sub, h, col)
        return Hp, col, float(h.sum())

    def hess_vec(self, v):
        """(Phi^T (h * (Phi v + b)), sum h * (Phi v + b)): the block's share of H v, in one
        pass over the rows (``_fast.hessian_matvec``)."""
        out = np.empty(self.p)
        b = float(v[self.p]) if self.fit_intercept else 0.0
        total = _fast.hessian_matvec(self.rows, np.ascontiguousarray(v[: self.p]), b, self.h,
                                     out)
        return out, total

    def set_direction(self, direction):
        self.dz = self.predict(direction)

    def trial(self, s):
        """Loss sum at the trial step w - s direction (its predictions kept for ``accept``)."""
        self.zt = self.z - s * self.dz
        if self.weight is not None:
            return self._weighted_loss(self.zt)
        return self.loss.loss_sum(self.zt, self.y)

    def _weighted_loss(self, z):
        """sum_i w_i l(z_i, y_i) over the rows of positive weight: a row of weight 0 is
        absent, whatever its loss (found by review: y = 1e160 on a row of weight 0 made
        0 * inf = NaN of the loss sum, and the run ended "Newton system not finite").
        Summed pairwise (numpy's sum): its rounding grows as log n, as the unweighted
        sums' compensated one does not at all (``_fast``; the line search's slack)."""
        pos = self._positive
        if pos is None:
            return float(np.sum(self.weight * _loss_numpy(self.loss.name, z, self.y)[0]))
        return float(np.sum(self.weight[pos]
                            * _loss_numpy(self.loss.name, z[pos], self.y[pos])[0]))

    def accept(self):
        self.z = np.ascontiguousarray(self.zt)
        self.zt = None

    def set_iterate(self, w):
        self.z = np.ascontiguousarray(self.predict(w))

    def rmatvec_y(self):
        return self.rmatvec(self.y)

    def gram(self):
        """Phi^T Phi (float64) and Phi^T y: the spectral filter's sums."""
        Phi = self.Phi
        G = np.asarray((Phi.T @ Phi).toarray() if self.sparse else Phi.T @ Phi, dtype=np.float64)
        return G, self.rmatvec(self.y)


def _k_tikhonov_setup(block, loss_name, p, fit_intercept, weight=None):
    """The block's rows (its X: Phi for the linear kernel, or the feature rows an in-memory
    run built) and sample weights as the run's ``_BlockRows``; returns the number of rows."""
    block.v["tikhonov"] = _BlockRows(block.X, block.y, loss_name, p, fit_intercept, weight)
    return block.X.shape[0]


def _k_row_length_sums(block):
    """(sum_i nnz_i^2, sum_i nnz_i) of the block's CSR rows (floats: no overflow)."""
    lengths = np.diff(block.v["tikhonov"].Phi.indptr).astype(np.float64)
    return float(lengths @ lengths), float(lengths.sum())


def _k_tikhonov(block, calls):
    """Run ``calls`` ((method, args) pairs) in order on the block's ``_BlockRows``; the
    last call's result."""
    rows = block.v["tikhonov"]
    out = None
    for name, args in calls:
        out = getattr(rows, name)(*args)
    return out


def _block_sum(parts):
    """The sum of per-block results in block order (one block: that block's array)."""
    acc = parts[0]
    for part in parts[1:]:
        acc = acc + part
    return acc


class _Model:
    """The O(d) description of a run's feature space: n rows, p features (q = p + 1 with
    an unpenalized intercept), lam; ``Phi`` is the in-memory feature matrix (None when the
    rows are held by the blocks of a distributed executor)."""

    kind = "primal"

    def __init__(self, n, p, fit_intercept, lam, sparse, Phi=None):
        self.n, self.p = int(n), int(p)
        self.fit_intercept = bool(fit_intercept)
        self.q = self.p + int(self.fit_intercept)
        self.lam = lam
        self.sparse = bool(sparse)
        self.Phi = Phi

    def zeros(self):
        return np.zeros(self.q)

    def penalty(self, w, w_prev):
        d = w[: self.p] - w_prev[: self.p]
        return 0.5 * self.lam * float(d @ d)

