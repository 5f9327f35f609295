"""Preconditioned conjugate gradients for the Newton systems of large dense feature maps
(``newton_solver="cg"``): Hessian-vector products instead of the (q, q) Hessian, memory
O(n m) for an (n, m) map, preconditioned with the Hessian of a uniform row subsample
(the role of the Nystroem centres in FALKON-type solvers).

References
----------
A. Rudi, L. Carratino and L. Rosasco, "FALKON: An Optimal Large Scale Kernel Method",
Advances in Neural Information Processing Systems 30 (NIPS 2017).
"""
import numpy as np
import scipy.linalg as sla

from ._newton import _finite
from ._rows import _k_tikhonov


class _PreconditionedCG:
    """The CG solver of ``_GuardedNewton`` (its ``_hessian`` and ``_hess_vec``, the
    state's ``rows``, ``model`` and ``decrement_target``)."""

    def _init_precond(self, rng):
        """Draw the preconditioner's row subsample: min(n, max(2 p, 1000)) rows, uniformly."""
        mdl, rows = self.model, self.rows
        s = min(mdl.n, max(2 * mdl.p, 1000))
        rows_cg = np.sort(rng.choice(mdl.n, size=s, replace=False))
        off = rows.offsets
        # the subsample's rows block by block (block-local indices)
        self._precond_rows = [rows_cg[(rows_cg >= off[i]) & (rows_cg < off[i + 1])] - off[i]
                              for i in range(rows.n_chunks)]
        self._precond_size = s

    def _pcg(self, grad):
        """H^{-1} grad by conjugate gradients preconditioned with the Hessian of a
        uniform row subsample (the Nystroem centres' role in FALKON-type solvers).

        The preconditioner (one pass over the subsample's rows and a Cholesky factor) is
        formed at the first Newton iteration and kept while the Hessian it was formed at
        still serves: it is formed again once a solve needs more than twice the CG
        iterations (plus 5) of the solve right after it was formed. Only the speed of CG
        depends on it: every solve runs to the same residual tolerance."""
        mdl = self.model
        if self._precond is None or self._precond_last > 2 * self._precond_base + 5:
            calls = [(self._pending + [("sub_hessian", (rows,))],)
                     for rows in self._precond_rows]
            self._pending = []
            parts = self.rows.map_each(_k_tikhonov, calls)
            P = self._hessian(parts, self._precond_size)
            self._precond = sla.cho_factor(_finite(P), lower=True, check_finite=False)
            self._precond_base = None
        cho = self._precond
        gnorm = float(np.linalg.norm(grad))
        # inexact Newton: relative accuracy min(0.1, ||grad||) and, near the target, an
        # absolute accuracy making the decrement error a small fraction of the target
        atol = 1e-3 * self.decrement_target * np.sqrt(self.lam)
        stop = max(min(0.1, np.sqrt(gnorm)) * gnorm, atol)
        x = np.zeros_like(grad)
        r = grad.copy()
        zr = sla.cho_solve(cho, r, check_finite=False)
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
            zr = sla.cho_solve(cho, r, check_finite=False)
            rz_new = float(r @ zr)
            p = zr + (rz_new / rz) * p
            rz = rz_new
        self._precond_last = its
        if self._precond_base is None:
            self._precond_base = its
        return x
