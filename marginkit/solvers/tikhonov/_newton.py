"""The damped Newton method on one proximal subproblem (Beugnot et al. 2021, section 4).

Subproblem k, F_k(theta) = L_hat(theta) + lam/2 ||theta - theta^{k-1}||^2, is solved by
Newton steps with Armijo backtracking, stopped on the Newton decrement
nu = ||grad||_{H^{-1}} (Eq. 19). The Newton system is the (q, q) Hessian
Phi^T D Phi / n + lam I (intercept unpenalized), factored by Cholesky, or solved by the
conjugate gradients of ``_precond``; the same code serves every representation
(``_representation``: the identity, a feature map, Nystroem, or an exact kernel in its
eigenbasis) since all of them give rows of Phi.

The paper's reference is in the package docstring (``marginkit.solvers.tikhonov``).
"""
import warnings

import numpy as np
import scipy.linalg as sla

from ._rows import _block_sum, _k_tikhonov


def _finite(M):
    """M itself, or LinAlgError when an entry overflowed (LAPACK would not notice)."""
    if not np.isfinite(M).all():
        raise np.linalg.LinAlgError("non-finite Newton system")
    return M



class _GuardedNewton:
    """The guarded damped Newton iteration of ``_TikhonovState`` (which provides
    ``rows``, ``model``, ``lam``, ``w``, ``w_prev``, ``newton_solver`` and ``loss_name``):
    ``_evaluate`` (Newton quantities at the current iterate through ``_evaluate_unsafe``; a
    numerically singular or non-finite Newton system, e.g. squares of entries overflowing
    float64, ends the run honestly) and the damped step ``_newton_iteration``. The data
    passes go through ``_map``, which sends the calls queued in ``_pending`` along."""

    def _evaluate(self):
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                self._evaluate_unsafe()
            ok = np.isfinite(self.decrement) and np.all(np.isfinite(self.direction)) \
                and np.isfinite(self.objective)
        except (np.linalg.LinAlgError, ValueError):
            ok = False
        if not ok:
            # the squared loss reads y's magnitude too (found by review: y = 1e200 x_0
            # on well-scaled X was blamed on X)
            which = "X or y" if getattr(self, "loss_name", None) == "squared" else "X"
            if getattr(self, "weighted", False):
                # large sample weights scale the risk's Hessian as large entries of X do
                self.failed = ("the Newton system is not numerically positive definite or "
                               f"not finite (entries of {which} or sample weights too large "
                               f"or too small for float64?); rescale {which}, or divide the "
                               "weights (sample_weight, and class_weight in the estimators) "
                               "and lam by the same factor")
            else:
                self.failed = ("the Newton system is not numerically positive definite or "
                               f"not finite (entries of {which} too large or too small for "
                               f"float64?); rescale {which}")
            warnings.warn(f"iterated_tikhonov: {self.failed}", RuntimeWarning, stacklevel=2)
            self.decrement = np.inf
            self.done = True

    def _newton_iteration(self):
        """One damped Newton step on the current subproblem: Armijo backtracking along
        -direction from s = 1 (halving, at most 40 times), with room for round-off near the
        optimum; when no step passes (the round-off floor) the full step. The subclass's
        ``_objective_at(s)`` evaluates a trial step, ``_accept(s)`` takes the last one."""
        dec2 = self.decrement ** 2
        f0 = self.objective
        s, accepted = 1.0, False
        for _ in range(40):
            f = self._objective_at(s)
            if f <= f0 - 0.25 * s * dec2 + 16 * np.finfo(float).eps * abs(f0):
                accepted = True
                break
            s *= 0.5
        if not accepted:
            s = 1.0
            self._objective_at(s)
        self._accept(s)
        self.step_size = s
        self.newton_iter += 1
        self._evaluate()

    def _map(self, name, *args):
        """``name(*args)`` on every block's rows, after the calls queued in ``_pending``
        (they ride along: one map per data pass); the results in block order."""
        calls = self._pending + [(name, args)]
        self._pending = []
        return self.rows.map(_k_tikhonov, calls)

    def _risk(self):
        """L_hat at the blocks' current predictions (theta^0 = 0 before any step)."""
        return sum(self._map("trial", 0.0)) / self.model.n

    def _evaluate_unsafe(self):
        mdl = self.model
        p, n, lam = mdl.p, mdl.n, self.lam
        const = self.newton_solver == "cholesky" and self.loss_name == "squared" \
            and self._const_factor is not None
        # one pass over the rows: the loss, Phi^T g and (unless the squared loss's constant
        # Hessian is factored already, or CG uses products) the Hessian sums
        parts = self._map("derivatives", self.newton_solver == "cholesky" and not const)
        total = sum(part[0] for part in parts)
        self.empirical_risk = total / n
        self.penalty = mdl.penalty(self.w, self.w_prev)
        grad = np.empty(mdl.q)
        grad[:p] = _block_sum([part[1] for part in parts]) / n \
            + lam * (self.w[:p] - self.w_prev[:p])
        if mdl.fit_intercept:
            grad[p] = sum(part[2] for part in parts) / n
        self.grad = grad
        if self.newton_solver == "cholesky":
            if const:
                cho = self._const_factor
            else:
                H = self._hessian([part[3:] for part in parts], n)
                cho = sla.cho_factor(_finite(H), lower=True, check_finite=False)
                if self.loss_name == "squared":
                    self._const_factor = cho
            self.direction = sla.cho_solve(cho, grad, check_finite=False)
        else:
            self.direction = self._pcg(grad)
        # dz = Phi direction, computed on the blocks with the next pass (the line search)
        self._pending.append(("set_direction", (self.direction,)))
        dec2 = float(self.grad @ self.direction)
        self.objective = self.empirical_risk + self.penalty
        self.decrement = float(np.sqrt(max(dec2, 0.0)))

    def _hessian(self, parts, n_rows):
        """The (q, q) Hessian Phi^T D Phi / n_rows + lam I (intercept row and column
        unpenalized) from the blocks' (Phi^T diag(h) Phi, Phi^T h, sum h)."""
        mdl, p = self.model, self.model.p
        H = np.empty((mdl.q, mdl.q))
        Hp = _block_sum([part[0] for part in parts]) / n_rows
        Hp.flat[:: p + 1] += self.lam
        H[:p, :p] = Hp
        if mdl.fit_intercept:
            col = _block_sum([part[1] for part in parts]) / n_rows
            H[:p, p] = col
            H[p, :p] = col
            H[p, p] = sum(part[2] for part in parts) / n_rows
        return H

    def _hess_vec(self, v):
        """H v without forming H: Phi^T (h * (Phi v + b)) / n + lam v, one pass."""
        mdl = self.model
        parts = self._map("hess_vec", v)
        out = np.empty(mdl.q)
        out[: mdl.p] = _block_sum([part[0] for part in parts]) / mdl.n + self.lam * v[: mdl.p]
        if mdl.fit_intercept:
            out[mdl.p] = sum(part[1] for part in parts) / mdl.n
        return out

    def _objective_at(self, s):
        """Objective of the current subproblem at w - s * direction (line search); keeps
        the trial predictions for ``_accept``."""
        mdl = self.model
        risk = sum(self._map("trial", s)) / mdl.n
        return risk + mdl.penalty(self.w - s * self.direction, self.w_prev)

    def _accept(self, s):
        self.w = self.w - s * self.direction
        self._pending.append(("accept", ()))
