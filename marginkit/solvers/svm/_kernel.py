"""``fista``, ``fista_svm`` and ``dcd`` on an exact kernel (any PSD kernel without an
explicit feature map: ``rbf``, ``poly``, ``laplacian``, ``spline``, ``precomputed``,
callables).

The SVM solvers (``_fista``, ``_dcd``) call ``start_fista`` / ``start_dcd`` when
the run's kernel is exact (``is_exact``). Row i of H~ is y_i (phi(x_i), 1), so the
perturbed duals of arXiv:2512.03947 (section 2.2) need the Gram matrix only:

* H-SVM (``fista``, ``dcd``): Q = Y (K + 1 1^T) Y + mu I over 0 <= r <= gamma, margin
  theta_i(r) = y_i (sum_j K_ij y_j r_j + t_bar), t_bar = y^T r;
* classical SVM (``fista_svm``): Q = Y K Y + mu I over {0 <= r <= gamma, y^T r = 0},
  the intercept the multiplier of the projection (as in the linear code).

The bound eps >= ||r - r*|| and the certified points (level - r_i > eps, level =
min(gamma_i, 1/mu)) are those of the linear case (docs/svm.md, "Exact kernels").

The Gram matrix is held as one n x n matrix (float64 for FISTA, float32 for DCD's moves)
when it fits in ``config.memory_budget``; otherwise FISTA's products run over Gram row
blocks computed on the fly and DCD reads kernel rows through an LRU cache (``_Gram``). The kernel sees
X as given (as LIBSVM does): ``scale`` does not apply to exact kernels.

References
----------
.. [1] "Data-Dependent Complexity of First-Order Methods for Support Vector Machines",
   arXiv:2512.03947 (2025), sections 2-4.
.. [2] A. Beck, "First-Order Methods in Optimization", SIAM, 2017, section 10.7.7.
.. [3] C.-J. Hsieh, K.-W. Chang, C.-J. Lin, S. S. Keerthi, S. Sundararajan, "A Dual
   Coordinate Descent Method for Large-scale Linear SVM", ICML 2008.
.. [4] C.-C. Chang, C.-J. Lin, "LIBSVM: A Library for Support Vector Machines", ACM
   Transactions on Intelligent Systems and Technology 2(3), 2011 (the kernel cache, the
   working sets by violation).
.. [5] T. Joachims, "Making Large-Scale SVM Learning Practical", in Advances in Kernel
   Methods - Support Vector Learning, MIT Press, 1999 (working sets).
"""
import math
import warnings

import numpy as np
import scipy.sparse as sp

from ... import _referee as R
from ...kernels.builtin import LinearKernel
from ...plugins import SolverState
from ...stopping import DeadlineReached, past
from . import _kernel_fast as _kf
from ._base import _ClaimOffers
from ...certificates import predictor_fingerprint
from ._kernel_certificate import KernelCertifiedPointsCertificate
from ._lipschitz import ritz_estimate
from ._projection import project_box_hyperplane
from ._thresholds import RAISE_MU, _box_scales, _gamma_mu as _svm_gamma_mu, certify_levels, \
    check_scales, run_box

__all__ = ["is_exact", "start_fista", "start_dcd", "EXACT_KERNEL_SCALE"]

#: relative accuracy assumed of a float64 Gram entry, in units of sqrt(K_ii K_jj) (the
#: built-in kernels' float64 tolerance, ``kernels.builtin._RBF_TOLERANCE``)
_KERNEL_TOL = 2.0 ** -36
#: the largest |K_ij| DCD's float32 rows take: 2 * 2^100, beyond sqrt(K_ii K_jj) for the
#: diagonals ``_rows_fit`` keeps float32 rows for (``_Gram._refuse_beyond_diagonal``)
_ROWS_LIMIT = 2.0 ** 101
_FLOAT64_MAX = float(np.finfo(np.float64).max)
#: fewest kernel columns the DCD cache must hold for the blocked path to run
_MIN_COLUMNS = 64
_U = R.UNIT
#: DCD moves between two looks at the certified-points estimate
_CHUNK = 256
#: the dtype of the Gram rows DCD stores (``_Gram``: its moves, and its fresh bound with
#: their rounding counted; the referee recomputes from X, y and the kernel)
DCD_ROWS = np.float32
#: Gram rows computed in one block of the kernel when DCD needs a row it does not hold:
#: into the held matrix (rows computed once and kept: larger blocks cost less per row), and
#: into the row cache (rows computed ahead of their use are often evicted before it when
#: the cache holds a part of the rows the pass reads: on a9a's first 20,000 rows with
#: half of them held, blocks of 64 rows computed 95,000 rows for 9,216 moves in 43 s,
#: blocks of 16 35,500 rows in 25 s; on MNIST 3 vs 5, whose rows read fit the cache, 16
#: took 4% more than 64)
_ROW_BLOCK = 64
#: the share of the points a fresh bound without the float32 rows' rounding would
#: certify that the bound with it must keep for DCD to take it (``_KernelDCDState._fresh``;
#: on a9a's first 10,000 rows at C = 1, 6,618 of 6,674: the product from the stored rows
#: instead of float64 kernel rows, 0.05 s instead of 0.45 s of a 2 s solve)
_STORED_SHARE = 0.97
_CACHED_ROW_BLOCK = 16

#: what ``scale`` means with an exact kernel (the message of a refused ``scale="scale"``)
EXACT_KERNEL_SCALE = (
    "with an exact kernel the kernel sees X as given (as LIBSVM does) and scale does not "
    "apply: scale='std' (the default) and None both run on X itself; to standardize, "
    "scale X beforehand (e.g. sklearn.preprocessing.StandardScaler) and pass scale=None")


def is_exact(kernel):
    """True for a kernel the SVM solvers run through its Gram matrix (no explicit feature
    map, not the linear kernel)."""
    return kernel is not None and not isinstance(kernel, LinearKernel) \
        and getattr(kernel, "feature_map", None) is None


def _dask_refusal(name):
    return (f"solver {name!r} with an exact kernel holds or recomputes the n x n Gram "
            "matrix in memory, which is not available for a dask array's row chunks: compute "
            "X into memory (X.compute()), or use kernel='nystroem' or 'rff' (an explicit "
            "feature map, blocked over the chunks)")


def _budget_refusal(n, budget, need):
    return (f"an exact kernel on n={n} points needs at least {need / 2**20:.3g} MiB for "
            f"Gram rows (memory_budget is {budget / 2**20:.3g} MiB); raise memory_budget or "
            "use kernel='nystroem' or kernel='rff' (a kernel approximation with an explicit "
            "feature map)")


def _rows_fit(diag):
    """Whether Gram rows stored in float32 keep each entry within a relative 2^-24 of
    the diagonal's scale: |K_ij| <= sqrt(K_ii K_jj) (PSD), so a diagonal within
    [2^-100, 2^100] (zeros aside: their rows are 0) neither overflows float32 (inf rows,
    moves on NaN) nor falls to its subnormals (entries rounded to a few bits or to 0)."""
    pos = diag[diag > 0.0]
    lim = 2.0 ** 100
    return pos.size == 0 or (float(pos.max()) <= lim and float(pos.min()) >= 1.0 / lim)


def _in_time(deadline):
    """``DeadlineReached`` when ``deadline`` (a run's ``problem.deadline``) has passed."""
    if past(deadline):
        raise DeadlineReached


class _Gram:
    """Access to the Gram matrix K(X, X) within ``budget`` bytes.

    Rows are computed in float64 (blocks of rows through the kernel's own block
    function) and stored as ``dtype``: float64 for FISTA, whose products K (y r) come from
    the stored rows and enter its error bound; float32 for DCD (LIBSVM's kernel cache is
    float too), which reads stored rows to choose and make its moves, whose numbers are
    never trusted: the fresh bound behind a claim accumulates K (y r) in float64 from the
    stored rows with their rounding counted (``stored_product``; from float64 kernel
    blocks when that term would cost the claim, or the bound makes none), and the referee
    recomputes from X, y and the kernel. A float32 row is each entry rounded
    once, |fl32(K_ij) - K_ij| <= 2^-24 |K_ij|: the moves then descend on a Q off by at
    most 2^-24 sqrt(Q_ii Q_jj) per entry, which may change the path but not what a claim
    needs (a fresh bound small enough at the point reached). On a9a (10,000 rows, RBF
    gamma 0.05, C 1) both make the same 4,352 moves and certify after one pass, test
    accuracy 84.98% against 84.97%; float32 storage halves the memory, the first touch
    of fresh pages and the row copies (the solve 4.5-5.6 s -> 3.6 s on one thread), and
    doubles the rows a budget holds.

    Held (``itemsize`` n^2 bytes fit): one n x n matrix whose rows are computed when first
    needed (DCD reads the rows of its working sets, the products read the rows of the
    support, FISTA's bound all of them). Blocked otherwise: products over row blocks of at
    most a quarter of the budget, DCD's rows through an LRU cache of kernel rows (the rest
    of the budget). A precomputed dense Gram is read in place for float64 rows (X itself)
    and its rows copied into the float32 store otherwise (DCD then makes the same moves
    on K as on the kernel that computed it). DCD keeps float64 rows when float32 rows
    with their float64 product block are not held within the budget and float64 rows
    are (8 n^2 bytes fit, or a dense precomputed Gram, read in place with no budget),
    and when the diagonal leaves [2^-100, 2^100] (``_rows_fit``).
    """

    def __init__(self, X, kernel, budget, name, dtype=np.float64):
        n = X.shape[0]
        self.n, self.kernel, self.name = n, kernel, name
        self.precomputed = bool(getattr(kernel, "precomputed", False))
        if self.precomputed and X.shape[1] != n:
            raise ValueError(f"kernel='precomputed': X must be the square Gram matrix "
                             f"K(X_train, X_train), got shape {X.shape}")
        if sp.issparse(X):
            self.X = X if X.dtype == np.float64 else X.astype(np.float64)
        else:
            self.X = np.asarray(X, dtype=np.float64)
        self.budget = float(budget)
        # X as the column operand of every row block, prepared once per solve (its CSC
        # form and squared norms) by kernels that can (the built-in RBF)
        self._columns = None
        if not self.precomputed and callable(getattr(kernel, "columns", None)):
            self._columns = kernel.columns(self.X)
        self.K = None
        self.cache = None
        self.computed_rows = 0
        self.products = 0
        self.diag = self._diagonal()
        self.sd = np.sqrt(np.maximum(self.diag, 0.0))
        self._check_psd_diag()
        self.dtype = np.dtype(dtype)
        # float64 rows instead of float32 ones when the float32 rows with their float64
        # product block are not held within the budget but float64 rows are: held
        # (8 n^2 bytes fit), or a dense precomputed Gram (the caller's matrix, read in
        # place: no budget); and for a diagonal outside float32's range (``_rows_fit``)
        dense_pre = self.precomputed and not sp.issparse(self.X)
        if self.dtype != np.float64 and (not _rows_fit(self.diag) or (
                float(self.dtype.itemsize) * n * n + 8.0 * n * min(n, _MIN_COLUMNS)
                > self.budget and (dense_pre or 8.0 * n * n <= self.budget))):
            self.dtype = np.dtype(np.float64)
        if dense_pre:
            # C-ordered (a private copy of other layouts: the coordinate moves read rows)
            self.X = np.ascontiguousarray(self.X)
            if self.dtype == np.float64:
                # read only, never written
                self.K = self.X
                self.have = np.ones(n, dtype=bool)
                self.slot = np.arange(n, dtype=np.int64)
                self._check_symmetric(np.arange(n), self.K)
        # float32 rows: the products run over float64 kernel blocks (``matvec``), of
        # ``self.rows`` rows each
        self.exact_rows = self.dtype == np.float64
        item = float(self.dtype.itemsize)
        least = 8.0 * n * min(n, _MIN_COLUMNS)  # the smallest float64 block of rows
        if self.K is not None:
            self.rows = n
        elif item * n * n + (0.0 if self.exact_rows else least) <= self.budget:
            self.K = np.empty((n, n), dtype=self.dtype)
            self.have = np.zeros(n, dtype=bool)
            self.slot = np.full(n, -1, dtype=np.int64)
            self.rows = min(n, max(_MIN_COLUMNS, int((self.budget - item * n * n)
                                                     // (8.0 * n))))
        else:
            need = least + item * n * min(n, _MIN_COLUMNS)
            if need > self.budget:
                raise ValueError(_budget_refusal(n, self.budget, need))
            self.rows = max(min(n, _MIN_COLUMNS), int(0.25 * self.budget // (8.0 * n)))
            self.cache = _RowCache(self, max(min(n, _MIN_COLUMNS), int(
                (self.budget - 8.0 * n * self.rows) // (item * n))))
        self.sd_norm = float(np.linalg.norm(self.sd))
        self.trace = float(np.sum(self.diag))

    @property
    def held(self):
        return self.K is not None

    def block(self, idx):
        """Rows idx of K (float64, len(idx) x n), checked finite and, on the square part
        K[idx, idx], symmetric."""
        X = self.X
        if self.precomputed:
            B = X[idx]
            Kb = B.toarray() if sp.issparse(B) else np.array(B)
        elif self._columns is not None:
            Kb = np.asarray(self.kernel.rows(X[idx], self._columns), dtype=np.float64)
        else:
            Kb = np.asarray(self.kernel(X[idx], X), dtype=np.float64)
        if Kb.shape != (len(idx), self.n):
            raise ValueError(f"the kernel returned a block of shape {Kb.shape} for "
                             f"{len(idx)} rows of X; it must return K(A, B) of shape "
                             f"({len(idx)}, {self.n})")
        # finite (NaN fails both comparisons), and within float32 rows' range
        lim = _FLOAT64_MAX if self.exact_rows else _ROWS_LIMIT
        if Kb.size and not (-lim <= Kb.min() and Kb.max() <= lim):
            if not np.all(np.isfinite(Kb)):
                raise ValueError("the Gram matrix K(X, X) has non-finite entries (NaN or "
                                 "infinity): rescale X or change the kernel's parameters")
            self._refuse_beyond_diagonal(idx, Kb)
        self._check_symmetric(idx, Kb)
        self.computed_rows += len(idx)
        return Kb

    def _refuse_beyond_diagonal(self, idx, Kb):
        """ValueError for a block with an entry |K_ij| > sqrt(K_ii K_jj): float32 rows are
        kept for a diagonal within [2^-100, 2^100] (``_rows_fit``), where a PSD kernel's
        entries stay below 2^100, so an entry beyond ``_ROWS_LIMIT`` shows a kernel that is
        not PSD on X, or whose ``diag`` disagrees with its blocks (it would overflow the
        float32 rows: moves on inf and NaN, found by review)."""
        i, j = np.unravel_index(int(np.argmax(np.abs(Kb))), Kb.shape)
        raise ValueError(
            f"solver {self.name!r}: the kernel is not positive semi-definite on X, or its "
            f"diag() disagrees with its Gram blocks: |K[{idx[i]}, {j}]| = "
            f"{abs(Kb[i, j]):.6g} > sqrt(K[{idx[i]}, {idx[i]}] K[{j}, {j}]) = "
            f"{self.sd[idx[i]] * self.sd[j]:.6g} (diag() gives the K(x_i, x_i) the solvers "
            "use)")

    def _check_symmetric(self, idx, Kb):
        sub = Kb[:, idx] if Kb.shape[0] == len(idx) else Kb[idx][:, idx]
        if sub.size == 0:
            return
        scale = np.sqrt(np.abs(np.diagonal(sub)))
        self._refuse_asymmetric(np.abs(sub - sub.T) > 1e-9 * np.outer(scale, scale) + 1e-300,
                                idx, idx)

    def _refuse_asymmetric(self, bad, rows, cols):
        """ValueError naming the first pair (rows[i], cols[j]) where ``bad`` is True: the
        symmetry checks of ``block`` and ``_check_across``."""
        if bad.any():
            i, j = np.unravel_index(int(np.argmax(bad)), bad.shape)
            raise ValueError(
                f"solver {self.name!r}: the kernel is not positive semi-definite on X: K is "
                f"not symmetric (K[{rows[i]}, {cols[j]}] != K[{cols[j]}, {rows[i]}]); a "
                "callable or precomputed kernel must give a symmetric Gram matrix")

    def _diagonal(self):
        if self.precomputed:
            return np.asarray(self.X.diagonal(), dtype=np.float64).ravel()
        d = np.asarray(self.kernel.diag(self.X), dtype=np.float64).ravel()
        if d.shape != (self.n,) or not np.all(np.isfinite(d)):
            raise ValueError(
                "the kernel's diagonal K(x_i, x_i) is not a finite n-vector (NaN or an "
                "overflow: entries of X too large for the kernel's parameters); rescale X or "
                "change the kernel's parameters")
        return d

    def _check_psd_diag(self):
        bad = np.flatnonzero(~(self.diag >= 0.0))
        if bad.size:
            i = int(bad[0])
            raise ValueError(
                f"solver {self.name!r}: the kernel is not positive semi-definite on X: "
                f"K(x_{i}, x_{i}) = {self.diag[i]:.6g} < 0 ({bad.size} such rows); use a "
                "PSD kernel (poly needs coef0 >= 0, a callable must return a Gram matrix)")

    def ensure(self, idx, deadline=None):
        """Held matrix: compute the rows of idx not yet held, in blocks of at most
        ``self.rows`` rows (the float64 block the budget leaves room for beside K: one
        block of all n rows, as FISTA's first product asks, would be a second n x n
        matrix and its symmetry check more). True when they are held.

        With ``deadline`` (a ``time.perf_counter()`` time: the run's time limit) the fill
        goes by blocks of at most a sixteenth of the rows and stops between two of them
        once it has passed: the rows of this call are then let go again (rows are held
        only when checked for symmetry against each other in one call) and the result
        is False."""
        missing = idx[~self.have[idx]]
        step = max(1, int(self.rows))
        if deadline is not None:
            step = min(step, max(_MIN_COLUMNS, -(-missing.size // 16)))
        for lo in range(0, missing.size, step):
            if past(deadline):
                self.have[missing[:lo]] = False
                self.slot[missing[:lo]] = -1
                return False
            part = missing[lo:lo + step]
            Kb = self.block(part)
            if lo:
                # the blocks of this call before it, as one block of all of them would
                # have been checked (``block`` checks its own square part)
                self._check_across(missing[:lo], part, Kb)
            self.K[part] = Kb
            self.have[part] = True
            self.slot[part] = part
        return True

    def _check_across(self, done, part, Kb):
        """K[part, done] (float64, from ``Kb``) against the stored K[done, part]: the
        symmetry check of ``block`` across row blocks, with room for the rounding of
        float32 storage (2^-24 of sqrt(K_ii K_jj) per entry, |K_ij| <= that bound)."""
        scale_p = np.sqrt(np.abs(self.diag[part]))
        tol = 1e-9 + (0.0 if self.K.dtype == np.float64 else 2.0 ** -23)
        for lo in range(0, done.size, 256):  # temporaries of len(part) x 256 entries
            d = done[lo:lo + 256]
            bad = np.abs(Kb[:, d] - self.K[d][:, part].T) > \
                tol * np.outer(scale_p, np.sqrt(np.abs(self.diag[d]))) + 1e-300
            self._refuse_asymmetric(bad, part, d)

    def store(self):
        """(rows, slot, stamp): K[i, :] is rows[slot[i]] when slot[i] >= 0 (the held
        matrix, or the row cache with its least-recently-used stamps; None when held)."""
        if self.K is not None:
            return self.K, self.slot, None
        return self.cache.store, self.cache.slot, self.cache.stamp

    def bring(self, need, cand, y, r, gamma, G):
        """Compute row ``need`` (not held) in one block with those of the coordinates of
        ``cand`` whose rows are not held that the greedy selection would pick next: half
        of the largest -y_i G_i where u_i = y_i r_i can grow and half of the largest
        y_i G_i where it can shrink (LIBSVM's order: ``_kernel_fast.fill_candidates``;
        the kernel's block function costs less per row on larger blocks). At most
        ``_ROW_BLOCK`` rows into the held matrix; at most ``_CACHED_ROW_BLOCK`` rows and
        an eighth of the row cache into it."""
        have = self.have if self.K is not None else self.cache.slot >= 0
        size = _ROW_BLOCK if self.K is not None else \
            min(_CACHED_ROW_BLOCK, self.cache.size // 8)
        half = max(0, (size - 1) // 2)
        out = np.empty(2 * half + 1, dtype=np.int64)
        m = _kf.fill_candidates(cand, have.view(np.uint8), y, r, gamma, G, int(need), half,
                                out)
        idx = out[:m]
        if self.K is not None:
            self.ensure(idx)
        else:
            self.cache.bring(idx)

    def matvec(self, v, deadline=None):
        """K v (float64); only the rows of v's nonzeros are read (K is symmetric). From
        the stored rows when they are float64, from float64 kernel blocks computed for
        the product (not stored) when the stored rows are float32.

        With ``deadline`` (the run's, ``problem.deadline``): ``DeadlineReached`` once it
        has passed between two blocks of rows that are computed for the product (a Gram
        matrix that is not held: one product is then about n^2 kernel entries); a product
        cut so is not counted in ``products``."""
        out = self._product(v, deadline)
        self.products += 1
        return out

    def _product(self, v, deadline):
        """The product of ``matvec``."""
        n = self.n
        S = np.flatnonzero(v)
        out = np.zeros(n)
        if not self.exact_rows:
            return self._blocks_product(v, S, deadline)
        if self.K is not None:
            if S.size > n // 2:
                S = np.arange(n)
            if not self.ensure(S, deadline):
                raise DeadlineReached
            if S.size == n:
                return self.K @ v
            for lo in range(0, S.size, 512):
                c = S[lo:lo + 512]
                out += v[c] @ self.K[c]
            return out
        for lo in range(0, S.size, self.rows):
            _in_time(deadline)
            c = S[lo:lo + self.rows]
            out += v[c] @ self.cache.rows(c)
        return out

    def _blocks_product(self, v, S, deadline=None):
        """sum_j v_j K[j, :] over the rows j in S, from float64 kernel blocks computed for
        the product (not stored), ``DeadlineReached`` past ``deadline`` between two."""
        out = np.zeros(self.n)
        # blocks of at most 16 MiB (reused by the allocator, not first touched again)
        for c in _chunks(S, max(1, min(self.rows, (1 << 21) // max(self.n, 1)))):
            _in_time(deadline)
            out += v[c] @ self.block(c)
        return out

    def stored_product(self, v):
        """K v (float64) from the rows DCD stores where they are held (float32 rows: the
        product accumulated in float64 from their exact float64 values), the rows of v's
        nonzeros that are not held computed for it in float64 (``block``, not kept):
        ``(out, extra, again)``.

        ``extra`` bounds the 2-norm of what the stored rows' rounding adds to the error
        ``rounding`` bounds: a stored entry is fl32(K~_ij), within 2^-24 |K~_ij| + 2^-150
        of the float64 entry K~_ij (round to nearest; 2^-150 below float32's normal
        range), so entry i of the product is off by at most
        2^-24 (|fl32(K~)| |v|)_i (1 + 2^-23) + 2^-150 sum_j |v_j| more, over the stored
        rows j. The sums |fl32(K~)| |v| are float64 sums of non-negative terms (relative
        error gamma_n, far below the 2^-20 added to the factor for n < 2^30). 0 for
        float64 rows.

        ``again()`` is the same product with the stored rows' part from float64 kernel
        blocks (the other rows' part reused): for a caller whose bound ``extra`` spoils.
        The stored rows are read once, with no kernel evaluation, where the float64
        product (``matvec``) recomputes every row of the support."""
        n = self.n
        S = np.flatnonzero(v)
        rows, slot, _ = self.store()
        held, missing = S[slot[S] >= 0], S[slot[S] < 0]
        rest = self._blocks_product(v, missing)
        out, mag = np.zeros(n), np.zeros(n)
        _kf.stored_product(held, rows, slot, v, out, mag)
        out += rest
        self.products += 1
        extra = 0.0
        if not self.exact_rows and held.size:
            vsum = float(np.sum(np.abs(v[held])))
            norm, err = R.scaled_norm(mag, overwrite=True)  # no underflow to 0
            extra = (2.0 ** -24 * (1.0 + 2.0 ** -20) * (norm + err)
                     + math.sqrt(n) * 2.0 ** -150 * vsum) * (1.0 + 2.0 ** -20)

        def again():
            self.products += 1
            return rest + self._blocks_product(v, held)

        return out, extra, again

    def rounding(self, a):
        """A bound on the error of a computed (K v)_i, i = 1..n, in the 2-norm, given
        a >= sum_j sqrt(K_jj) |v_j|: |K_ij| <= sqrt(K_ii K_jj) (PSD), so each entry is off
        by at most (gamma_n + tol) sqrt(K_ii) a (the sum's rounding and the entries')."""
        return (R.gamma(self.n + 4) + _KERNEL_TOL) * self.sd_norm * a


class _RowCache:
    """Kernel rows K[i, :] evaluated on demand (in blocks) and kept in least-recently-used
    order (LIBSVM's kernel cache): at most ``size`` rows in one (size, n) array ``store``;
    ``slot[i]`` is the row of the store holding K[i, :] (-1: not held), ``stamp`` the
    clock of each store row's last use (the DCD loop stamps the rows it reads)."""

    def __init__(self, gram, size):
        n = gram.n
        self.gram, self.size = gram, int(size)
        self.store = np.empty((self.size, n), dtype=gram.dtype)
        self.slot = np.full(n, -1, dtype=np.int64)
        self.owner = np.full(self.size, -1, dtype=np.int64)
        self.stamp = np.zeros(self.size, dtype=np.int64)
        self.clock = 0
        self.misses = 0

    def tick(self):
        """The clock of the next use (one per DCD call)."""
        self.clock += 1
        return self.clock

    def bring(self, idx):
        """Hold the rows idx (distinct, at most ``size``): the missing ones are computed
        in one block into free store rows, then into the least recently used ones not in
        idx."""
        idx = np.asarray(idx, dtype=np.int64)
        if idx.size > self.size:
            raise ValueError(f"the row cache holds {self.size} rows; {idx.size} were asked "
                             "for at once")
        held = self.slot[idx]
        missing = idx[held < 0]
        if missing.size:
            self.misses += missing.size
            # the free store rows first, then the least recently used ones, never those
            # of idx: the missing.size smallest ages (a partition, not a sort of the store)
            age = np.where(self.owner < 0, -1, self.stamp)
            age[held[held >= 0]] = np.iinfo(np.int64).max
            k = missing.size
            free = np.argpartition(age, k - 1)[:k] if k < self.size else np.arange(k)
            old = self.owner[free]
            self.slot[old[old >= 0]] = -1
            self.store[free] = self.gram.block(missing)
            self.owner[free] = missing
            self.slot[missing] = free
        self.stamp[self.slot[idx]] = self.tick()

    def rows(self, idx):
        """K[idx, :] as a (len(idx), n) array: the held rows copied, the others computed
        (not kept: the products read each row once)."""
        out = np.empty((idx.size, self.gram.n), dtype=self.store.dtype)
        s = self.slot[idx]
        hit = s >= 0
        out[hit] = self.store[s[hit]]
        if not hit.all():
            self.misses += int(np.count_nonzero(~hit))
            out[~hit] = self.gram.block(idx[~hit])
        return out


def _chunks(idx, step):
    """``idx`` in consecutive pieces of at most ``step`` entries."""
    return (idx[lo:lo + step] for lo in range(0, idx.size, step))


def _lambda_max(gram, augmented, seed=0, deadline=None):
    """An upper bound of the largest eigenvalue of K + 1 1^T (``augmented``) or K (the
    Hessians Y (.) Y have the same spectrum): Lanczos' Ritz value plus its residual (an
    eigenvalue lies within it; the largest one with high probability from a random start)
    plus the rounding of the products; the trace when ARPACK fails or ``deadline`` (the
    run's time limit) passes first, while a held Gram matrix is filled (``_Gram.ensure``)
    or during Lanczos (``ritz_estimate``): a run that cannot afford the estimate stops at
    its first check, the trace a valid bound of what it did."""
    n = gram.n
    trace = gram.trace + (n if augmented else 0.0)
    margin = 2.0 * (R.gamma(n + 4) + _KERNEL_TOL) * trace
    if n <= 2:
        return trace + margin

    def mv(v):
        out = gram.matvec(v, deadline)  # DeadlineReached past it: the trace below
        if augmented:
            out += np.sum(v)
        return out

    if gram.held and not gram.ensure(np.arange(n), deadline):
        return trace + margin
    est = ritz_estimate(mv, n, 1e-6, seed, deadline)
    if est is None:
        # no convergence, or no vector to start from (K v = 0 for every v: a Gram matrix
        # that is 0 in float64); the trace bounds the largest eigenvalue of a PSD matrix
        return trace + margin
    return min(est, trace) + margin


class _KernelRun(_ClaimOffers, SolverState):
    """What both kernel states share: the Gram access, the box, the certificate (the
    claim protocol of the linear states, ``_base._ClaimOffers``)."""

    kernel_run = True

    def _setup(self, problem, gram, gamma, mu, augmented):
        n = gram.n
        self.problem, self.gram = problem, gram
        # the run's deadline (None without a time limit): what a step may not outlast
        self.deadline = getattr(problem, "deadline", None)
        self.y = np.ascontiguousarray(problem.y, dtype=np.float64)
        self.gamma_scalar = gamma
        # the per-point boxes C w_i of a weighted run (``run_box``), C otherwise
        weights = getattr(problem, "sample_weight", None)
        self.weighted = weights is not None
        self.gamma = np.ascontiguousarray(run_box(gamma, weights, n))  # its kernels' layout
        self.mu = float(mu)
        self.level = certify_levels(self.gamma, self.mu)
        self._check_box(gram.name, gamma, weights)
        self.augmented = augmented
        self.n_iter = 0
        self.error_bound = np.inf
        self.n_certified = 0
        self.objective = 0.0
        self.last_refutation = None     # the referee's reason for the last refuted claim
        # why no claim of the run can be accepted (a lasting refutation), or None: the
        # certified-points rule then ends the run (status "max_iter", extra["failure"])
        self.failed = None

    def _check_box(self, name, C, weights):
        """Refuse boxes whose scale no certificate can resolve (the referee would refute
        every claim and the run would spend max_iter): a box C w_i that overflows float64,
        or dual variables below 2^-969 (``check_scales``, as on linear kernels)."""
        gmax, low = _box_scales(self.gamma, self.mu)
        if not math.isfinite(gmax):
            raise ValueError(
                f"{name}: the box C w_i overflows float64 (C = {C:.3g}, largest sample weight "
                f"{float(np.max(weights)):.3g}): reduce C or rescale the weights "
                "(sample_weight, and class_weight in the estimators)")
        if self.weighted:
            check_scales(name, None, gmax, self.mu, level=low, box_only=True, C=C)
        else:
            check_scales(name, None, gmax, self.mu, box_only=True)

    def count(self, r, eps):
        return int(np.count_nonzero(self.level - r > eps))

    def refuted(self, status, verdict):
        # the referee's reason is kept for the result (``extra["refuted"]``): a run whose
        # claims cannot be established (a precomputed or callable kernel that is not PSD
        # on the data, or too large for the referee's PSD test) ends with max_iter and
        # says why
        self.last_refutation = getattr(verdict, "reason", None)
        if getattr(verdict, "lasting", False):
            # the kernel on X, not the iterate: every later claim would be refuted alike
            # (each at the cost of a referee's check: a Cholesky factorization of the
            # Gram matrix for a callable kernel), so the run ends here and says why
            self.failed = ("the referee refuses every claim of this run, whatever the "
                           f"iterate: {self.last_refutation}")
        super().refuted(status, verdict)

    def fields(self, problem, status, r, t, formulation):
        X = problem.X
        u = self.y * r
        sup = np.flatnonzero(r > 0.0)
        finite = math.isfinite(self.error_bound)
        mask = (self.level - r > self.error_bound) if finite else np.zeros(r.shape[0], bool)
        fields = {"coef_": None, "intercept_": float(t), "dual_coef_": r.copy(),
                  "certified_mask": mask}
        if self.gram.precomputed:
            fields.update(support_=None, support_coef_=u.copy())
        else:
            rows = X[sup]
            fields.update(support_=rows.copy() if sp.issparse(rows) else np.array(rows),
                          support_coef_=u[sup].copy())
        if mask.any():
            fields["certificate"] = KernelCertifiedPointsCertificate(
                value=self.error_bound, mask=mask, r=r.copy(),
                gamma=self.gamma.copy() if self.weighted else self.gamma_scalar,
                mu=self.mu, formulation=formulation, intercept=float(t),
                kernel=problem.kernel, classes=problem.classes_, config=problem.config,
                claim="certified" if status == "certified" else None,
                predictor=predictor_fingerprint(fields["support_"], fields["support_coef_"]))
        fields["extra"] = {"gamma": self.gamma_scalar, "mu": self.mu,
                           "support_indices": sup, "gram": "held" if self.gram.held
                           else "blocked", "gram_rows": self.gram.dtype.name,
                           "kernel_products": self.gram.products,
                           "refuted": self.last_refutation}
        if self.failed:
            fields["extra"]["failure"] = self.failed
        return fields

    def snapshot(self):
        return {"objective": self.objective, "error_bound": self.error_bound,
                "n_certified": float(self.n_certified)}


def _gram_of(solver, problem, dtype=np.float64):
    name = solver.name or type(solver).__name__
    ex = problem.executor
    if getattr(ex, "client", None) is not None or ex.n_chunks > 1:
        raise ValueError(_dask_refusal(name))
    if solver.params.get("scale") == "scale":
        raise ValueError(f"solver {name!r}: scale='scale': " + EXACT_KERNEL_SCALE)
    budget = getattr(getattr(problem, "config", None), "memory_budget", 2.0 * 2**30)
    return _Gram(problem.X, problem.kernel, budget, name, dtype)


def _gamma_mu(solver, problem, n):
    return _svm_gamma_mu(solver.params, n, getattr(problem, "sample_weight", None))


# ---------------------------------------------------------------------------------- FISTA
class _KernelFistaState(_KernelRun):
    """Strongly convex FISTA (Beck 2017, sec. 10.7.7) on the kernel dual: one product
    K (y * r_{k+1}) per iteration; K (y * y_k) from the stored f_k = K (y r_k) and
    f_{k-1} by linearity, so the gradient at y_k is the exact one (up to rounding)."""

    def __init__(self, problem, gram, gamma, mu, augmented):
        self._setup(problem, gram, gamma, mu, augmented)
        n = gram.n
        lam = _lambda_max(gram, augmented, deadline=getattr(problem, "deadline", None))
        self.L = mu + lam
        self.kappa = self.L / mu
        if not (math.isfinite(self.L) and self.kappa <= 2.0 ** 900):
            raise ValueError(f"mu = {mu:.3g} is too small against the kernel's largest "
                             f"eigenvalue {lam:.3g}: the error bound would overflow; raise mu "
                             f"{RAISE_MU}")
        sk = math.sqrt(self.kappa)
        self.beta = (sk - 1.0) / (sk + 1.0)
        self.kappa_bound = max(self.kappa, (self.kappa - 1.0) * (1.0 + R.gamma(n + 8)))
        self.r, self.r_prev = np.zeros(n), np.zeros(n)
        self.f, self.f_prev = np.zeros(n), np.zeros(n)
        self.t = self.t_prev = 0.0      # y^T r_k, y^T r_{k-1}
        self.t_bar = 0.0                # classical SVM: L * lambda of the last projection
        self._lam = 0.0
        self._yk, self._v = np.zeros(n), np.zeros(n)
        self._a = (0.0, 0.0)            # sum_j sqrt(K_jj) r_j of r_k and r_{k-1}
        self._rsum = (0.0, 0.0)         # bounds of sum_j r_j of r_k and r_{k-1}

    def step(self):
        gram, y, L, mu, beta = self.gram, self.y, self.L, self.mu, self.beta
        dsq = _kf.fista_point(self.r, self.r_prev, self.f, self.f_prev, y, self.gamma,
                              self.t, self.t_prev, beta, L, mu, self.augmented, self._yk,
                              self._v)
        lam = self._lam
        if self.augmented:
            r_new = self._v.copy()
        else:
            r_new = np.empty(gram.n)
            # the linear solver's projection (per-point boxes)
            lam = project_box_hyperplane(self._v, y, self.gamma, r_new, lam)
            dsq = _kf.diff_sq(self._yk, r_new)
        # the one product of the step; past the run's deadline it raises, before the
        # state has changed (``_yk`` and ``_v`` are this step's scratch)
        f_new = gram.matvec(y * r_new, self.deadline)
        self._lam = lam
        if not self.augmented:
            self.t_bar = L * lam
        t_new = float(y @ r_new)
        # rounding: the gradient at y_k (K (y y_k) by linearity, the products' and the
        # entries' errors) and the step's own rounding (docs/svm.md, "Exact kernels")
        ak, ak1 = self._a
        a = (1.0 + beta) * ak + beta * ak1
        yk_norm = float(np.linalg.norm(self._yk))
        gnorm = math.sqrt(gram.n) * (1.0 + abs(self.t) + abs(self.t_bar)) + gram.sd_norm * a \
            + mu * yk_norm
        # t_k = y^T r_k (H-SVM) is a float64 sum, off by at most gamma_n sum r_k, and it
        # enters every coordinate of the gradient at y_k
        rk, rk1 = self._rsum
        dt = R.gamma(gram.n) * ((1.0 + beta) * rk + beta * rk1) if self.augmented else 0.0
        dg = gram.rounding(a) + 4.0 * _U * gnorm + math.sqrt(gram.n) * dt
        dv = 2.0 * _U * gnorm + _U * L * (yk_norm + math.sqrt(dsq))
        rho = (dg + dv) / mu * (1.0 + 1e-12)
        eps = self.kappa_bound * math.sqrt(dsq) * (1.0 + 1e-15) + rho
        rsum = float(np.sum(r_new))
        if not self.augmented:
            # the residual of y^T r = 0, spread over a free coordinate with room
            delta = abs(t_new) + R.gamma(gram.n) * rsum
            eps += (1.0 + self.kappa) * delta * (1.0 + 1e-15)
            room = np.minimum(r_new, self.gamma - r_new)
            if not np.any(room > delta):
                eps = np.inf
        self.r_prev, self.r = self.r, r_new
        self.f_prev, self.f = self.f, f_new
        self.t_prev, self.t = self.t, t_new
        self._a = (float(gram.sd @ r_new), ak)
        self._rsum = (rsum * (1.0 + R.gamma(gram.n)), rk)
        self.rounding = rho
        self.error_bound = eps
        self.n_certified = self.count(r_new, eps) if math.isfinite(eps) else 0
        wsq = float(self.r @ (y * f_new)) + (t_new * t_new if self.augmented else 0.0)
        self.objective = -0.5 * wsq + rsum - 0.5 * mu * float(r_new @ r_new)
        self.n_iter += 1

    def result_fields(self, problem, status):
        t = self.t if self.augmented else self.t_bar
        fields = self.fields(problem, status, self.r, t, "hsvm" if self.augmented else "svm")
        fields["extra"].update(L=self.L, kappa=self.kappa, t_bar=t)
        return fields


# ----------------------------------------------------------------- dual coordinate descent
class _KernelDCDState(_KernelRun):
    """Kernel dual coordinate descent with LIBSVM's selection (Hsieh et al. 2008 for the
    exact coordinate step and the shrinking rule; the gradient G = Q r - e kept, the
    moves chosen greedily over all active coordinates, pairs by LIBSVM's second-order
    rule, Chang and Lin 2011, Fan, Chen and Lin 2005): ``_kernel_fast.dcd_pairs``.

    One iteration is a pass: as many moves as there are active coordinates (an epoch of
    linear ``dcd``), so ``max_iter`` counts passes. A move reads the Gram rows of its
    coordinates only; a row not computed yet is computed then, in one block with those of
    the most violating active coordinates (the held matrix, or the row cache). A pass
    ends early when the estimate below would let the run's certified-points rule fire,
    or at the run's time limit (``problem.deadline``: the first pass computes most Gram
    rows, minutes on a large n).

    Shrinking (``shrinking=True``, LIBLINEAR's rule): at the end of a pass a coordinate
    at a bound whose gradient points out of the box by more than the largest violation
    of the previous pass leaves the active set; moves then update G on the active
    coordinates only. The bound ||p(r)|| / mu is taken from a fresh G over all n
    coordinates (recomputed from r with one product over the support rows, not the
    drifting one) whenever the drifting estimate over the active set would let the rule
    fire (and has halved since the last fresh bound that did not), or every iteration
    with ``bound_check="always"``; the fresh G replaces the drifting one, and a fresh
    bound that does not certify brings every coordinate back (the shrunk ones' G was
    stale)."""

    def __init__(self, problem, gram, gamma, mu, bound_check, certify_above,
                 shrinking=True):
        self._setup(problem, gram, gamma, mu, True)
        n = gram.n
        self.bound_check = bound_check
        self.certify_above = -1.0 if certify_above is None else float(certify_above)
        self.shrinking = bool(shrinking)
        self.r = np.zeros(n)
        self.G = -np.ones(n)
        self.qd = gram.diag + 1.0 + mu
        self._score = np.empty(n)
        self._keep = np.empty(n, dtype=np.int8)
        self._all = np.arange(n, dtype=np.int64)
        self.active = self._all
        self._bounds = (np.inf, -np.inf)  # the previous pass's max / min violation
        self._fresh_below = np.inf
        self.full_passes = 0
        self.moves = 0
        self.unshrinks = 0
        self.projected_gradient_gap = np.inf

    def _fresh(self):
        """The bound ||p(r)|| / mu (with the rounding of its computation) from a fresh G
        over all n coordinates, which replaces the drifting one: ``(eps, f, t)``, f = K u
        and t = y^T r for u = y * r.

        The product K u comes from the rows DCD stores (``_Gram.stored_product``: one
        read of the support's rows, no kernel evaluation) with their float32 rounding in
        the bound, for a claim only: when that bound certifies no more than
        ``certify_above`` points, more than a ``1 - _STORED_SHARE`` share fewer than it
        would without the rounding term (a small mu, a large n), or is not finite, the
        stored rows' part is computed again from float64 kernel rows, and the run goes on
        from the float64 G as it did before the stored rows' bound (the same moves). A
        claim is re-checked by the referee from X, y and the kernel before it is
        reported."""
        r, y, mu = self.r, self.y, self.mu
        u = y * r
        f, extra, again = self.gram.stored_product(u)
        eps, G, t = self._bound(f)
        if extra != 0.0:  # NaN included
            wide = eps + extra / mu * (1.0 + 1e-12)
            n_wide = self.count(r, wide)
            if math.isfinite(wide) and n_wide > self.certify_above and \
                    n_wide >= _STORED_SHARE * self.count(r, eps):
                eps = wide
            else:
                f = again()
                eps, G, t = self._bound(f)
        self.full_passes += 1
        self.G = G
        return eps, f, t

    def _bound(self, f):
        """(eps, G, t) at r from f = K (y r): eps = ||p(r)|| / mu with the rounding of the
        float64 product (``_Gram.rounding``) and of G (``_fresh`` adds the float32 rows'
        term to it)."""
        r, y, mu = self.r, self.y, self.mu
        t = float(y @ r)
        G = y * (f + t) + mu * r - 1.0
        pg = math.sqrt(_kf.projected_gradient_sq(G, r, self.gamma))
        a = float(self.gram.sd @ r)
        n = self.gram.n
        # t = y^T r, a float64 sum off by at most gamma_n sum r, is in every G_i
        rsum = float(np.sum(r)) * (1.0 + R.gamma(n))
        dG = self.gram.rounding(a) + math.sqrt(n) * R.gamma(4) * \
            (1.0 + abs(t) + self.gram.sd_norm * a) + 4.0 * _U * mu * float(np.linalg.norm(r)) \
            + math.sqrt(n) * R.gamma(n) * rsum
        return (pg + dG) / mu * (1.0 + 1e-12), G, t

    def _would_certify(self, est):
        return est <= self._fresh_below and self.count(self.r, est) > self.certify_above

    def _late(self):
        return past(self.deadline)

    def _unshrink(self):
        self.active = self._all
        self._bounds = (np.inf, -np.inf)
        self.unshrinks += 1

    def step(self):
        r, y, gamma, qd, mu = self.r, self.y, self.gamma, self.qd, self.mu
        gram = self.gram
        act = self.active
        score = self._score[:act.size]
        budget, done, stalled = act.size, 0, False
        while True:
            pgsq, hi, lo = _kf.active_violations(self.G, r, gamma, qd, act, score)
            est = math.sqrt(pgsq) / mu
            if done >= budget or stalled or self._late() or self._would_certify(est):
                break
            # _CHUNK moves between two looks at the estimate, whatever rows had to be
            # computed on the way
            chunk = min(budget - done, _CHUNK)
            made = 0
            while made < chunk:
                rows, slot, stamp = gram.store()
                clock = gram.cache.tick() if stamp is not None else 0
                m, need = _kf.dcd_pairs(act, rows, slot, r, self.G, y, gamma, qd, gram.diag,
                                        mu, chunk - made, stamp, clock)
                made += m
                if need < 0:
                    break
                gram.bring(need, act, y, r, gamma, self.G)
                if self._late():
                    break
            done += made
            stalled = made < chunk  # no move decreases the objective
        self.moves += done
        self.projected_gradient_gap = float(hi - lo)
        self.n_iter += 1
        if self.shrinking:
            upper, lower = self._bounds
            if math.isfinite(upper) or math.isfinite(lower):
                keep = self._keep[:act.size]
                if _kf.shrink_mask(self.G, r, gamma, act, upper, lower, keep) < act.size:
                    self.active = act[keep.view(bool)]
            self._bounds = (hi if hi > 0.0 else np.inf, lo if lo < 0.0 else -np.inf)
        if self.bound_check == "always" or self._would_certify(est) or \
                (done == 0 and self.active.size < gram.n):
            eps, f, t = self._fresh()
            self.error_bound = eps
            self.n_certified = self.count(r, eps)
            if not self.n_certified > self.certify_above:
                self._fresh_below = 0.5 * eps
                if self.active.size < gram.n:
                    self._unshrink()
            self.objective = -0.5 * (float(r @ (y * f)) + t * t) + float(np.sum(r)) \
                - 0.5 * mu * float(r @ r)
        else:
            self.error_bound = np.inf
            self.n_certified = 0

    def refuted(self, status, verdict):
        super().refuted(status, verdict)
        self._fresh_below = 0.5 * self.error_bound

    def snapshot(self):
        out = super().snapshot()
        out["projected_gradient_gap"] = self.projected_gradient_gap
        return out

    def result_fields(self, problem, status):
        t = float(self.y @ self.r)
        fields = self.fields(problem, status, self.r, t, "hsvm")
        fields["extra"].update(full_passes=self.full_passes, moves=self.moves,
                               kernel_rows=self.gram.computed_rows,
                               active=int(self.active.size), unshrinks=self.unshrinks)
        return fields


# ---------------------------------------------------------------------------- entry points
def start_fista(solver, problem, augmented):
    """The state of ``fista`` (``augmented``) or ``fista_svm`` on an exact kernel; warns
    when the Gram matrix is not held within ``memory_budget`` (``_recomputed_gram``)."""
    gram = _gram_of(solver, problem)
    if not gram.held:
        warnings.warn(_recomputed_gram(gram), UserWarning, stacklevel=3)
    gamma, mu = _gamma_mu(solver, problem, gram.n)
    state = _KernelFistaState(problem, gram, gamma, mu, augmented)
    state._solver = solver
    return state


def _recomputed_gram(gram):
    """What a FISTA run costs when its Gram matrix does not fit the budget: every product
    with K recomputes the rows its row cache does not hold, about n^2 kernel evaluations
    (a9a's 32,561 rows: 1.1e9 a product, minutes each on one core), and the step size's
    eigenvalue estimate takes tens of products before the first iteration."""
    n = gram.n
    need = 8.0 * n * n
    return (f"solver {gram.name!r}: the {n} x {n} Gram matrix (float64, {need / 2**30:.3g} "
            f"GiB) does not fit memory_budget ({gram.budget / 2**30:.3g} GiB), so every "
            f"product with K recomputes most of its rows (about {float(n) * n:.3g} kernel "
            "evaluations): two per iteration, and tens for the step size's eigenvalue "
            "estimate before the first one. solver='dcd' computes each row about once (a "
            "row cache, as LIBSVM's); kernel='nystroem' approximates K by an explicit "
            f"feature map; or raise memory_budget to at least {need:.3g} bytes")


def start_dcd(solver, problem, certify_above):
    """The state of ``dcd`` on an exact kernel."""
    gram = _gram_of(solver, problem, DCD_ROWS)
    gamma, mu = _gamma_mu(solver, problem, gram.n)
    state = _KernelDCDState(problem, gram, gamma, mu, solver.params["bound_check"],
                            certify_above, solver.params["shrinking"])
    state._solver = solver
    return state
