"""ISNKPVN(gamma, eps) of Ramdas & Pena 2014 (sec. 6, algorithm box and Theorem 4):
SNKPVN restarted at shrinking accuracies, with the exact finish (``_finish``) alongside.

The iterations are ``SmoothedIteration``'s with ``gamma``; ``_IteratedState`` checks the
finish's candidates from scratch, like certificates, before the driver takes them.

References: ``ISNKPVN``.
"""
import numbers

import numpy as np

from ..._registry import _register_builtin
from ..._validation import Param
from ._family import _EPS, _FamilyState
from ._finish import _FINISH_CAP
from ._smoothed import SmoothedIteration, _SmoothedFamily


class _IteratedState(_FamilyState):
    """The state of ``isnkpvn``: after each step, a candidate of the exact finish is
    checked from scratch by the referee, like a certificate, and taken or refused."""

    def step(self):
        self.core.step()
        candidate = self.core.finish_state
        if candidate in ("separator", "certificate"):
            # the finish's p is taken only once checked like a certificate, from scratch
            p = np.array(self.core.finish_p(), dtype=np.float64)
            claim = "separable" if candidate == "separator" else "infeasible"
            if self._finish_holds(claim, p):
                self.core.accept_finish()
            else:
                self.core.refuse_finish()

    def _finish_holds(self, claim, p):
        """The finish's candidate p passes the referee as the certificate of ``claim``."""
        return bool(self.problem.check_certificate(self._certificate(claim, p)))

    def snapshot(self):
        snap = super().snapshot()
        snap["delta"] = float(self.core.delta)
        snap["outer"] = float(self.core.outer)
        return snap


@_register_builtin("solver", "isnkpvn")
class ISNKPVN(_SmoothedFamily):
    """Iterated SNKPVN(gamma, eps) (Ramdas & Pena 2014, sec. 6, algorithm box and Theorem 4).

    The box: q_0 = 1/n; outer loop t: delta_t = ||q_t||_G / gamma,
    q_{t+1} = SNKPVN(q_t, delta_t) (which halts on G alpha_k > 0 and returns p_k once
    ||p_k||_G < delta_t); halt when delta_t < eps, once that inner loop has returned.
    This solver runs the same iterates but stops on the first iterate with
    ||p_k||_G <= eps (the ``dual_certificate`` rule: p_k is already an eps-certificate),
    at or before the point where the box halts (the box needs an inner loop to return
    with delta_t < eps, often one more inner loop). One state machine: each ``step()`` is
    one inner SNKPVN iteration; the inner loop is restarted when ||p_k||_G < delta_t.
    Finds a separator in O(sqrt(n)/rho_K log(1/rho_K)) iterations, or an eps-certificate
    of infeasibility in O(min(sqrt(n)/eps, sqrt(n)/|rho_K|) log(1/eps)) (Theorem 4).

    The printed algorithm, iterate for iterate (up to round-off; tested against a numpy
    transcription of the box): ``finish=False, warm_restart=False`` with a kernel whose G
    is formed as a dense matrix, for which mu_0 = 2n as printed: a kernel without a
    feature map (``rbf``, ``poly``, ``laplacian``, ``spline``, a callable, or
    ``kernel="precomputed"``, e.g. K = X X^T for the linear kernel). Kernels with a
    feature map (``linear``, ``nystroem``, ``rff``) start from mu_0 = 2 lambda_#,
    lambda_# = ``gram_norm_bound`` (lambda_max(G) plus a round-off margin, at most n),
    which is the paper's n only when the bound is not formed (dense features with
    d > 512; CSR with d > 2048 or a row of more than 64 entries).

    Two refinements that keep the paper's invariant L_mu(alpha_k) <= -1/2 ||p_k||_G^2 (its
    appendix), hence its bounds: mu_0 = 2 lambda with lambda a bound on lambda_max(G)
    (``gram_norm_bound``; the paper's n is the worst case), and warm restarts: an inner
    loop restarts at the schedule index k_0 (mu_k0 = 2 mu_0 / ((k_0 + 1)(k_0 + 2))) the
    last one reached instead of k_0 = 0, once the restart's base case
    ||p_k0 - q||_G^2 <= mu_k0 ||p_k0 - q||_2^2 is checked (k_0 is lowered by 15% until it
    holds; it always does at 0).

    An exact finish (``finish=True``), an extension of the paper: alongside, every
    second step runs one major cycle of Wolfe's minimum-norm-point algorithm on the same
    problem, min_{p in simplex} ||p||_G (``MinNormPoint``: a corral S of at most 256
    vertices, new vertices priced by G p over all n points, one product with G and
    O(|S|^2) more a cycle), started at the most violated point. Its optimum p* answers
    exactly either way: G p* >= ||p*||_G^2 > 0 (a separator) unless ||p*||_G = 0 (a
    certificate), and few cycles reach it when the answer rests on few points (at most
    D + 1 affinely independent ones for the linear kernel on D features). A candidate
    (G p > 0, or ||p||_G <= eps) is checked from scratch in float64 like a certificate;
    if it holds, the outer loop restarts at q = alpha = p (k = 0: the paper's own start,
    so its invariant holds), which ends the run at once with that separator or
    certificate; if not, or when Wolfe's algorithm can no longer progress numerically (or
    S is full), the finish stops for good. The iterations are never changed otherwise,
    so the paper's bounds hold, at the cost of one more product with G every second step.

    Parameters
    ----------
    eps : float, default 1e-6
        Accuracy of the infeasibility certificate (``dual_tol``).
    shrink : float > 1, default 2.0
        The paper's gamma.
    warm_restart : bool, default True
        False restarts every inner loop at mu_0, as in the paper.
    finish : bool, default True
        Run the exact finish (it needs all rows in one block: in memory, or a dask array
        of one chunk; on several chunks True is a ValueError). False leaves the iterations
        alone: they are the printed algorithm's with ``warm_restart=False`` and mu_0 = 2n
        (see above). ``Result.extra`` reports ``finish`` ("off";
        "decided": the answer is the finish's; "stopped": it gave up; "running") and
        ``finish_steps`` (its major cycles).

    Default ``max_iter``: 100_000.

    References
    ----------
    A. Ramdas and J. Pena, "Margins, Kernels and Non-linear Smoothed Perceptrons",
    Proceedings of the 31st International Conference on Machine Learning (ICML), 2014;
    arXiv:1505.04123.

    P. Wolfe, "Finding the nearest point in a polytope", Mathematical Programming 11,
    128-149, 1976.
    """

    default_smoother = "l2"
    default_stop = ("separated", "dual_certificate")
    default_max_iter = 100_000
    param_table = {
        "eps": _EPS,
        "shrink": Param(2.0, types=numbers.Real, low=1, low_open=True,
                        doc="gamma > 1: delta_t = ||q_t||_G / gamma"),
        "warm_restart": Param(True, types=bool,
                              doc="restart the inner loop at the mu it reached (checked "
                                  "invariant) instead of mu_0"),
        "finish": Param(True, types=bool,
                        doc="alongside, Wolfe's min-norm-point algorithm; its checked "
                            "separator or certificate ends the run"),
    }

    _state = _IteratedState

    def _iteration(self, problem, ex, op):
        if self.params["finish"] and ex.n_chunks > 1:
            raise ValueError(
                f"solver 'isnkpvn': the exact finish (finish=True) is not blocked: Wolfe's "
                f"corral needs the rows of all of X in one block, and X is split into "
                f"{ex.n_chunks} chunks; pass finish=False to run the blocked ISNKPVN "
                "iterations without it (or one chunk, or X in memory)")
        return SmoothedIteration(ex, problem.smoother, None, None, self.params["eps"], op=op,
                                 gamma=self.params["shrink"], warm=self.params["warm_restart"],
                                 finish_cap=_FINISH_CAP if self.params["finish"] else 0)

    def finalize(self, problem, state, status):
        fields = super().finalize(problem, state, status)
        core = state.core
        fields["extra"] = {**(fields.get("extra") or {}),
                           "outer_iterations": int(core.outer), "delta": float(core.delta),
                           "finish": core.finish_outcome(),
                           "finish_steps": int(core.finish_steps)}
        return fields
