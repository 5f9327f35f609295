"""A third-party blocked solver: L2-regularized logistic regression by gradient descent.

Written once against ``problem.executor``: the state (the driver) keeps the d-vector w
and does the O(d) work between iterations; the block kernel ``_k_gradient`` reads one
row block (``block.X``, ``block.y``) and returns its partial sums, which the driver adds
in block order. ``blocked = True`` tells marginkit that the solver runs on the row
blocks of any executor: in memory (one block) and on a dask array (its chunks, on the
workers that hold them), with no code of marginkit's for this solver.
"""
import numbers

import numpy as np

import marginkit as mk
from marginkit.plugins import Param, Solver, SolverState


def _k_gradient(block, w, b):
    """The block's share of the loss sum and of its gradient in (w, b)."""
    z = block.y * (block.X @ w + b)               # margins y_i (w . x_i + b)
    loss = np.logaddexp(0.0, -z).sum()            # sum of log(1 + exp(-z_i))
    g = -block.y * np.exp(-np.logaddexp(0.0, z))  # d loss_i / d f(x_i) = -y_i sigmoid(-z_i)
    return loss, block.X.T @ g, g.sum()


class LogisticState(SolverState):
    def __init__(self, ex, lam, step):
        self.ex, self.lam, self.step_size = ex, lam, step
        self.w, self.b = np.zeros(ex.shape[1]), 0.0
        self.objective, self.grad_norm = np.inf, np.inf

    def step(self):
        n = self.ex.shape[0]
        parts = self.ex.map(_k_gradient, self.w, self.b)  # one result per block, in order
        loss, gw, gb = parts[0][0], np.array(parts[0][1], dtype=float), parts[0][2]
        for p in parts[1:]:
            loss, gw, gb = loss + p[0], gw + p[1], gb + p[2]
        gw = gw / n + self.lam * self.w
        gb = gb / n
        self.objective = loss / n + 0.5 * self.lam * float(self.w @ self.w)
        self.grad_norm = float(np.sqrt(gw @ gw + gb * gb))
        self.w = self.w - self.step_size * gw
        self.b -= self.step_size * gb

    def snapshot(self):
        return {"objective": self.objective, "grad_norm": self.grad_norm}


@mk.register("solver", "blocked_logistic")
class BlockedLogistic(Solver):
    """lam/2 ||w||^2 + (1/n) sum_i log(1 + exp(-y_i (w . x_i + b))), fixed step."""

    blocked = True  # runs on the row blocks of any executor, a dask array's chunks too
    provides = ("objective", "grad_norm")
    default_max_iter = 200
    param_table = {
        "lam": Param(1e-2, types=numbers.Real, low=0, low_open=True, doc="regularization"),
        "step": Param(1.0, types=numbers.Real, low=0, low_open=True, doc="step size"),
    }

    def start(self, problem):
        return LogisticState(problem.executor, float(self.lam), float(self.step))

    def finalize(self, problem, state, status):
        return {"coef_": state.w, "intercept_": state.b}
