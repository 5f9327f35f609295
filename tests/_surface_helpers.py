"""A small kernel perceptron written as a third party would (plain numpy), used by the
tests of the users' surface (CLI, estimators, plots) so they do not depend on which
built-in solvers have landed. Registered under the test-only name ``toy_perceptron``.
"""
import numpy as np
import scipy.sparse as sp

import marginkit as mk
from marginkit._result import SeparatorCertificate
from marginkit.plugins import Param, Solver, SolverState

TOY = "toy_perceptron"


def normalized_gram(X, y, kernel):
    Xd = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    K = np.asarray(kernel(Xd, Xd), dtype=np.float64)
    d = np.sqrt(np.maximum(np.diag(K), 1e-300))
    return (y[:, None] * y[None, :]) * K / np.outer(d, d), d


class _State(SolverState):
    def __init__(self, G, step):
        self.G = G
        self.step_size = step
        self.alpha = np.zeros(G.shape[0])
        self.Ga = np.zeros(G.shape[0])
        self.n_iter = 0
        self.min_margin = -1.0  # alpha = 0 separates nothing

    def step(self):
        i = int(np.argmin(self.Ga))
        self.alpha[i] += self.step_size
        self.Ga += self.step_size * self.G[:, i]
        self.n_iter += 1
        self.min_margin = float(self.Ga.min())

    def snapshot(self):
        norm = float(np.sqrt(max(self.alpha @ self.Ga, 0.0)))
        return {"min_margin": self.min_margin,
                "margin_lower": self.min_margin / norm if norm > 0 else 0.0}


class ToyPerceptron(Solver):
    """Classical kernel perceptron on the normalized Gram G (update the worst point)."""

    provides = ("min_margin",)
    default_stop = ("separated",)
    default_max_iter = 2000
    param_table = {"step": Param(1.0, types=float, low=0, low_open=True, doc="update size")}

    def start(self, problem):
        self.G, self.d = normalized_gram(problem.X, problem.y, problem.kernel)
        return _State(self.G, self.params["step"])

    def finalize(self, problem, state, status):
        alpha, y, d = state.alpha, problem.y, self.d
        coef = alpha * y / d
        norm = float(np.sqrt(max(alpha @ state.Ga, 0.0)))
        lower = state.min_margin / norm if norm > 0 else 0.0
        out = {"dual_coef_": alpha, "margin_bounds": (lower, 1.0)}
        if status == "separable":
            out["certificate"] = SeparatorCertificate(alpha, state.min_margin, problem.kernel,
                                                      problem.classes_)
        if getattr(problem.kernel, "feature_map", None) is not None:
            Phi = problem.kernel.feature_map(problem.X)
            out["coef_"] = np.asarray(Phi.T @ coef).ravel()
            out["intercept_"] = 0.0
        else:
            keep = alpha > 0
            Xd = problem.X.toarray() if sp.issparse(problem.X) else np.asarray(problem.X)
            out["support_"] = Xd[keep]
            out["support_coef_"] = coef[keep]
        return out


def register_toy():
    mk.register("solver", TOY, overwrite=True)(ToyPerceptron)
    return TOY


def separable_blobs(n=60, seed=0, d=2):
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], n // 2)
    X = rng.normal(scale=0.5, size=(n, d)) + np.where(y[:, None] == 1, 2.0, -2.0)
    return X, y
