"""The certified-points certificate of the exact-kernel SVM solvers.

This version carries the agreed constructor and a plain float64 recomputation of the
claim (the Gram matrix recomputed from X in row blocks, the projected gradient, the
margins); the full referee, with its proven rounding bound and PSD re-check, replaces
``check`` (docs/svm.md, "Exact kernels").
"""
import numpy as np
import scipy.sparse as sp

from ..certificates import Certificate, Verdict, certificate_type, kernel_mismatch, local_matrix, \
    labels_pm

__all__ = ["KernelCertifiedPointsCertificate"]

#: relative slack of this recomputation's comparisons (far above float64 rounding at the
#: sizes the exact kernels hold, far below any change of the claim)
_SLACK = 1e-9


def _as64(A):
    if sp.issparse(A):
        return sp.csr_matrix(A, dtype=np.float64)
    return np.ascontiguousarray(A, dtype=np.float64)


@certificate_type
class KernelCertifiedPointsCertificate(Certificate):
    """Points certified correctly classified by the current and the optimal kernel SVM.

    ``value`` is the solver's bound eps >= ||r - r*||, ``mask`` the points with
    min(gamma_i, 1/mu) - r_i > eps; ``r`` the dual vector, ``gamma`` the box (a float or an
    n-vector), ``formulation`` "hsvm" (Q = Y (K + 1 1^T) Y + mu I, intercept y^T r) or "svm"
    (Q = Y K Y + mu I on y^T r = 0, intercept the multiplier ``intercept``), ``kernel`` the
    exact kernel of the run. ``check(X, y)`` recomputes K from X (float64, row blocks),
    the margins theta_i, the projected gradient p(r) and eps_v = ||p(r)|| / mu (valid for
    any feasible r by strong convexity), and accepts when every certified point has
    level - r_i > eps_v and theta_i > 1 - mu level.
    """

    kind = "certified_points"

    def __init__(self, value, mask, r, gamma, mu, formulation, intercept, kernel,
                 classes=None, config=None, claim=None):
        self.value = float(value)
        self.mask = np.asarray(mask, dtype=bool)
        self.r = np.asarray(r, dtype=np.float64)
        self.gamma = gamma if np.ndim(gamma) == 0 else np.asarray(gamma, dtype=np.float64)
        self.mu = float(mu)
        self.formulation = formulation
        self.intercept = float(intercept)
        self.kernel = kernel
        self.classes = classes
        self.config = config
        self.claim = claim

    def check(self, X, y):
        kind = self.kind

        def reject(reason, **numbers):
            return Verdict.reject(kind, reason, **numbers)

        X = local_matrix(X)
        n = X.shape[0]
        ypm = labels_pm(y, self.classes)
        r, mask, mu = self.r, self.mask, self.mu
        if ypm.shape != (n,) or r.shape != (n,) or mask.shape != (n,):
            return reject(f"r, mask and y must have one entry per row of X ({n})")
        other = kernel_mismatch(self.kernel, self.config)
        if other is not None:
            return reject(other)
        gamma = np.broadcast_to(np.asarray(self.gamma, dtype=np.float64), (n,))
        if not (np.all(np.isfinite(r)) and np.all(r >= 0.0) and np.all(r <= gamma)):
            return reject("r is not in the box [0, gamma]")
        if not mask.any():
            return reject("no point is certified")
        if self.claim == "certified" and self.config is not None:
            from .svm import _stop_fraction

            solver = self.config.solver
            default = getattr(solver, "default_stop", None)
            if isinstance(solver, str):
                from .._registry import get_plugin

                default = get_plugin("solver", solver).default_stop
            fraction = _stop_fraction(self.config.stop, default)
            if fraction is None or not np.count_nonzero(mask) > fraction * n:
                return reject("fewer certified points than the run's certified_points rule needs")
        u = ypm * r
        precomputed = getattr(self.kernel, "precomputed", False)
        X64 = _as64(X)
        f = np.zeros(n)
        step = max(1, (1 << 22) // max(n, 1))
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            if precomputed:
                B = X64[lo:hi]
                Kb = B.toarray() if sp.issparse(B) else np.asarray(B)
            else:
                Kb = np.asarray(self.kernel(X64[lo:hi], X64), dtype=np.float64)
            if not np.all(np.isfinite(Kb)):
                return reject("the kernel has non-finite entries on X")
            f[lo:hi] = Kb @ u
        if self.formulation == "hsvm":
            t = float(np.sum(u))
            if not abs(t - self.intercept) <= _SLACK * (np.sum(r) + 1.0):
                return reject("the stored intercept is not y^T r")
            resid = 0.0
        else:
            t = self.intercept
            resid = abs(float(np.sum(u)))
        theta = ypm * (f + t)
        G = theta + mu * r - 1.0
        p = np.where(r <= 0.0, np.minimum(G, 0.0), np.where(r >= gamma, np.maximum(G, 0.0), G))
        eps_v = float(np.linalg.norm(p)) / mu
        if resid > 0.0:
            # off y^T r = 0 by resid: a feasible point within resid / sqrt(k) (k free
            # coordinates with room), Q's norm at most mu + trace(K)
            room = np.minimum(r, gamma - r)
            k = int(np.count_nonzero(room > resid))
            if k == 0:
                return reject("r is not on y^T r = 0 and no free coordinate absorbs it")
            trace = float(np.sum(self.kernel.diag(X64))) if not precomputed else \
                float(np.sum(X64.diagonal()))
            eps_v += (2.0 + trace / mu) * resid / np.sqrt(k)
        level = np.minimum(gamma, 1.0 / mu)
        gaps = level[mask] - r[mask]
        margin = float(gaps.min()) - eps_v * (1.0 + _SLACK)
        numbers = dict(value=eps_v, threshold=float(gaps.min()), margin=margin)
        if not margin > 0.0:
            return reject("a certified point has level - r_i <= eps_v", **numbers)
        floor = 1.0 - mu * level[mask]
        if not np.all(theta[mask] > floor + _SLACK * (1.0 + np.abs(theta[mask]))):
            return reject("a certified point has theta_i <= 1 - mu level", **numbers)
        return Verdict(True, kind, **numbers)
