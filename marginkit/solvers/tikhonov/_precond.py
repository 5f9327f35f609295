"""Preconditioned conjugate gradients for the Newton systems of large dense feature maps
(``newton_solver="cg"``): Hessian-vector products instead of the (q, q) Hessian, memory
O(n m) for an (n, m) map, preconditioned with the Hessian of a row sample drawn in
proportion to the rows' shares of the Hessian (the role of the Nystroem centres in
FALKON-type solvers).

References
----------
A. Rudi, L. Carratino and L. Rosasco, "FALKON: An Optimal Large Scale Kernel Method",
Advances in Neural Information Processing Systems 30 (NIPS 2017).
"""
import numpy as np
import scipy.linalg as sla
from scipy.linalg import blas

from ._newton import _finite
from ._rows import _k_tikhonov


def _apply(L, r):
    """(L L^T)^{-1} r by two triangular solves on the lower factor L (Fortran order): the
    preconditioner's solve, as LAPACK's potrs, without scipy's ``cho_solve`` checks and
    copies (on 785 columns 0.16 ms a call instead of 0.5-0.9 ms, next to 2.5-3.7 ms for
    a Hessian-vector product)."""
    return blas.dtrsv(L, blas.dtrsv(L, r, lower=1), lower=1, trans=1)


class _PreconditionedCG:
    """The CG solver of ``_GuardedNewton`` (its ``_hessian`` and ``_hess_vec``, the
    state's ``rows``, ``model`` and ``decrement_target``)."""

    def _init_precond(self, rng):
        """The preconditioner's sample: min(n, max(4 p, 2000)) rows expected (on MNIST's
        7,000 x 784, 4 p rows instead of 2 p: a third fewer CG products for twice the cost
        of forming it), drawn afresh from ``rng`` each time it is formed."""
        mdl = self.model
        self._precond_size = min(mdl.n, max(4 * mdl.p, 2000))
        self._precond_rng = rng

    def _sampled_hessian(self):
        """The Hessian of the preconditioner's sample (``_BlockRows.sampled_hessian``),
        rows kept with probabilities min(1, c q_i + base): half the sample s uniform over
        the rows of q_i > 0 (base = s / (2 n_+)), half in proportion to q_i. The share in
        proportion alone missed whole groups of rows (found by review: half the rows large
        in 10 columns, the other half small in 90 others, drew almost none of the small
        ones, and CG took 2,882 products where a uniform sample took 25). c makes the
        expected size s, by Newton's method on the concave, piecewise linear f(c) =
        sum_i min(1, c q_i + base) from below (where it stays), to within 0.1% of s or 30
        steps (the uniform half is there whatever c is); every row of q_i > 0 when there
        are at most s. Two floats per block and step: the sample does not depend on how
        the rows are split into blocks."""
        rows = self.rows
        parts = rows.map(_k_tikhonov, self._pending + [("precond_weights", ())])
        self._pending = []
        total = sum(part[0] for part in parts)
        n_pos = sum(part[1] for part in parts)
        budget = self._precond_size - sum(part[2] for part in parts)
        base = c = 0.0
        if n_pos <= budget:
            c = np.inf
        elif budget > 0:
            base = 0.5 * budget / n_pos
            c = 0.5 * budget / total if 0.0 < total < np.inf else 0.0
            for _ in range(30 if c > 0.0 else 0):
                sums = rows.map(_k_tikhonov, [("inclusion_sums", (c, base))])
                size = sum(part[0] for part in sums)
                slope = sum(part[1] for part in sums)
                if size >= 0.999 * budget or not slope > 0:
                    break
                c += (budget - size) / slope
        seed = int(self._precond_rng.integers(2**63))
        calls = [([("sampled_hessian", (c, base, seed, int(rows.offsets[i])))],)
                 for i in range(rows.n_chunks)]
        return self._hessian(rows.map_each(_k_tikhonov, calls), self.model.n)

    def _pcg(self, grad):
        """H^{-1} grad by conjugate gradients preconditioned with the Hessian of a row
        sample (``_sampled_hessian``; the Nystroem centres' role in FALKON-type solvers).

        The preconditioner (one pass over the sample's rows and a Cholesky factor) is
        formed at the first Newton iteration and kept while the Hessian it was formed at
        still serves: it is formed again once a solve needs more than twice the CG
        iterations (plus 5) of the solve right after it was formed. Only the speed of CG
        depends on it: every solve runs to the same residual tolerance."""
        mdl = self.model
        if self._precond is None or self._precond_last > 2 * self._precond_base + 5:
            P = self._sampled_hessian()
            # its lower Cholesky factor L, in the column order the BLAS reads in place
            L = sla.cho_factor(_finite(P), lower=True, check_finite=False)[0]
            self._precond = np.asfortranarray(L)
            self._precond_base = None
        L = self._precond
        gnorm = float(np.linalg.norm(grad))
        # inexact Newton: relative accuracy min(0.1, sqrt(||grad||)) and, near the target,
        # an absolute accuracy: with H >= lam I the residual r costs the decrement^2 at
        # most ||r||^2 / lam, under 1e-3 target^2, and the next iterate's gradient is
        # about r, its decrement under 0.03 target (on MNIST's 7,000 rows, one-vs-rest:
        # 1,584 Hessian products instead of 1,733 with 1e-3, the same claims)
        atol = 3e-2 * self.decrement_target * np.sqrt(self.lam)
        stop = max(min(0.1, np.sqrt(gnorm)) * gnorm, atol)
        x = np.zeros_like(grad)
        r = grad.copy()
        zr = _apply(L, r)
        p = zr.copy()
        rz = float(r @ zr)
        its = 0
        for its in range(10 * mdl.q + 100):
            if np.linalg.norm(r) <= stop:
                break
            Hp = self._hess_vec(p)
            a = rz / float(p @ Hp)
            x += a * p
            r -= a * Hp
            zr = _apply(L, r)
            rz_new = float(r @ zr)
            p = zr + (rz_new / rz) * p
            rz = rz_new
        self._precond_last = its
        if self._precond_base is None:
            self._precond_base = its
        return x
