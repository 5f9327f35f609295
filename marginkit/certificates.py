"""Certificates: the claims a run makes, and the referee that checks them.

A certificate is what a status claims ("separable", "infeasible", "certified",
"converged" with a Newton decrement), in a form anyone can check from the data alone.
``Certificate.check(X, y)`` recomputes the claim from X, y and the kernel by a
numerically careful path of its own (float64, never the solver's fast path, never a
number the certificate stores about itself) against the thresholds of the run's
configuration, and returns a ``Verdict``; ``verify(X, y)`` is ``bool(check(X, y))``.

The run loop (``marginkit.solve``) uses the same referee before it stops on a claim:
when a stopping rule returns a claim, the solver's state builds the certificate of that
claim (``SolverState.certificate(status)``) and the run stops only if it verifies on
the training data; otherwise the run goes on. Every certificate a ``Result`` carries
has passed this check.
"""
import math

import numpy as np

__all__ = ["Certificate", "Verdict", "NotPositiveSemidefiniteError", "certificate_type",
           "CERTIFICATE_TYPES", "CLAIM_KINDS", "labels_pm"]

#: statuses that are claims, and the kind of certificate each needs
CLAIM_KINDS = {"separable": "separator", "infeasible": "infeasibility",
               "certified": "certified_points"}

#: certificate class name -> class (what ``load_result`` may restore)
CERTIFICATE_TYPES = {}


def certificate_type(cls):
    """Class decorator: make a certificate class restorable by ``load_result``."""
    CERTIFICATE_TYPES[cls.__name__] = cls
    return cls


class NotPositiveSemidefiniteError(ValueError):
    """The kernel is not positive semi-definite on the data: p^T G p < 0 beyond round-off.

    Gordan's theorem in the kernel's feature space (the infeasibility certificate) needs a
    PSD kernel; a run that meets such a kernel stops with this error instead of a claim.
    """


class Verdict:
    """What the referee found: truthy exactly when the claim holds.

    Attributes
    ----------
    ok : bool
        The claim holds, beyond the rounding error of its recomputation.
    kind : str
        The certificate's kind.
    value : float
        The recomputed measure (min_i (G alpha)_i, ||p||_G, the error bound, the Newton
        decrement...), never the certificate's own number.
    threshold : float
        What the claim compares the measure with, from the run's configuration.
    rounding : float
        A bound on the recomputation's own rounding error.
    margin : float
        How far the claim clears its threshold after the rounding bound (> 0 iff ``ok``
        for claims that compare one measure with one threshold; the smallest such margin
        over the points for per-point claims).
    reason : str
        Why the claim failed ("" when it holds).
    """

    __slots__ = ("ok", "kind", "value", "threshold", "rounding", "margin", "reason")

    def __init__(self, ok, kind, value=math.nan, threshold=math.nan, rounding=0.0,
                 margin=math.nan, reason=""):
        self.ok = bool(ok)
        self.kind = kind
        self.value = float(value)
        self.threshold = float(threshold)
        self.rounding = float(rounding)
        self.margin = float(margin)
        self.reason = "" if self.ok else (reason or "the claim does not hold")

    @classmethod
    def reject(cls, kind, reason, **numbers):
        return cls(False, kind, reason=reason, **numbers)

    def __bool__(self):
        return self.ok

    def __repr__(self):
        head = "holds" if self.ok else f"rejected: {self.reason}"
        return (f"Verdict({self.kind}: {head}; value={self.value:.6g}, "
                f"threshold={self.threshold:.6g}, rounding={self.rounding:.3g}, "
                f"margin={self.margin:.3g})")


class Certificate:
    """Base class: ``kind``, ``value``, ``check(X, y) -> Verdict``, ``verify(X, y) -> bool``.

    ``value`` is the solver's own number, for information; the referee never reads it.
    """

    kind = None
    value = None

    def check(self, X, y):  # pragma: no cover - abstract
        """Recompute the claim from X, y and the kernel; return a ``Verdict``."""
        raise NotImplementedError

    def verify(self, X, y):
        """True when the claim holds on (X, y): ``bool(self.check(X, y))``."""
        return bool(self.check(X, y))

    def __repr__(self):
        return f"{type(self).__name__}(kind={self.kind!r}, value={self.value!r})"


def local_matrix(X):
    """X as an in-memory matrix: a dask array is computed chunk by chunk (row blocks
    stacked, sparse chunks kept sparse); anything else is returned as it is."""
    if not hasattr(X, "__dask_graph__"):
        return X
    import scipy.sparse as sp

    blocks = [b.compute() for b in X.blocks]  # one chunk in flight at a time
    if any(sp.issparse(b) for b in blocks):
        return sp.vstack([sp.csr_matrix(b) for b in blocks], format="csr")
    return np.concatenate(blocks, axis=0)


def labels_pm(y, classes):
    """Labels as +-1 floats (``classes[1]`` is +1); a label outside ``classes`` raises.

    ``classes=None`` takes the two distinct labels of ``y`` (sorted).
    """
    y = np.asarray(y).ravel()
    if classes is None:
        classes = np.unique(y)
        if classes.size != 2:
            raise ValueError(f"y has {classes.size} distinct labels; a certificate needs two")
    classes = np.asarray(classes)
    pos = y == classes[1]
    neg = y == classes[0]
    unknown = ~(pos | neg)
    if unknown.any():
        bad = np.unique(y[unknown])[:5].tolist()
        raise ValueError(
            f"y holds label(s) {bad} that are not among the run's classes "
            f"{classes.tolist()}; pass the labels the model was fit on"
        )
    return np.where(pos, 1.0, -1.0)


# ------------------------------------------------------------------ perceptron family
def signed_normalized_gram_dot(X, ypm, kernel, v, normalize=True):
    """G v with G_ij = y_i y_j K_ij / sqrt(K_ii K_jj), recomputed from X in float64.

    Kernels with an explicit feature map go through Phi (never the n x n Gram); others
    form K(X, X) in float64.
    """
    import scipy.sparse as sp

    v = np.asarray(v, dtype=np.float64)
    if getattr(kernel, "precomputed", False):
        K = np.asarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64)
        d = np.sqrt(np.diag(K)) if normalize else np.ones(K.shape[0])
        s = ypm / d
        return s * (K @ (s * v))
    fmap = getattr(kernel, "feature_map", None)
    if fmap is not None:
        Phi = fmap(X)
        Phi = Phi.astype(np.float64) if Phi.dtype != np.float64 else Phi
        if normalize:
            # unit rows without squaring raw entries (|x| > 1e154 would overflow, |x| < 1e-154
            # underflow): divide each row by its max |entry| first
            if sp.issparse(Phi):
                m = np.asarray(abs(Phi).max(axis=1).toarray(), dtype=np.float64).ravel()
                P = sp.diags(1.0 / np.where(m > 0, m, 1.0)) @ Phi
                nrm = np.sqrt(np.asarray(P.multiply(P).sum(axis=1)).ravel())
                with np.errstate(divide="ignore"):
                    Phi = sp.diags(1.0 / nrm) @ P  # zero rows -> inf/nan: never verifies
            else:
                m = np.abs(Phi).max(axis=1)
                P = Phi / np.where(m > 0, m, 1.0)[:, None]
                nrm = np.sqrt(np.einsum("ij,ij->i", P, P))
                with np.errstate(divide="ignore", invalid="ignore"):
                    Phi = P / nrm[:, None]
        s = ypm
        w = Phi.T @ (s * v)
        return s * np.asarray(Phi @ w).ravel()
    Xd = X.astype(np.float64) if X.dtype != np.float64 else X
    K = np.asarray(kernel(Xd, Xd), dtype=np.float64)
    d = np.sqrt(np.diag(K)) if normalize else np.ones(K.shape[0])
    s = ypm / d
    return s * (K @ (s * v))


@certificate_type
class SeparatorCertificate(Certificate):
    """G alpha > 0: f = sum_i alpha_i y_i phi(x_i)/sqrt(K(x_i, x_i)) separates the data.

    ``value`` is min_i (G alpha)_i as computed by the solver (in float64).
    """

    kind = "separator"

    def __init__(self, alpha, value, kernel, classes=None):
        self.alpha = np.asarray(alpha, dtype=np.float64)
        self.value = float(value)
        self.kernel = kernel
        self.classes = classes

    def check(self, X, y):
        from ._validation import check_X

        X = check_X(local_matrix(X))
        ypm = labels_pm(y, self.classes)
        Ga = signed_normalized_gram_dot(X, ypm, self.kernel, self.alpha)
        low = float(np.min(Ga))
        return Verdict(bool(np.all(Ga > 0)), self.kind, value=low, threshold=0.0, margin=low,
                       reason="G alpha > 0 fails")


@certificate_type
class InfeasibilityCertificate(Certificate):
    """p in the simplex with ||p||_G <= eps (Gordan's theorem in the RKHS, paper 000, sec. 5).

    ``value`` is ||p||_G = sqrt(p^T G p); ``eps`` the tolerance it was certified against.
    """

    kind = "infeasibility"

    def __init__(self, p, value, eps, kernel, classes=None):
        self.p = np.asarray(p, dtype=np.float64)
        self.value = float(value)
        self.eps = float(eps)
        self.kernel = kernel
        self.classes = classes

    def check(self, X, y):
        from ._validation import check_X

        X = check_X(local_matrix(X))
        p = self.p
        if p.min() < 0 or abs(p.sum() - 1.0) > 1e-9:
            return Verdict.reject(self.kind, "p is not in the simplex")
        ypm = labels_pm(y, self.classes)
        Gp = signed_normalized_gram_dot(X, ypm, self.kernel, p)
        norm = np.sqrt(max(float(p @ Gp), 0.0))
        # the recomputed norm must be within eps (with round-off slack of the recomputation)
        bound = self.eps * (1 + 1e-6) + 1e-12
        return Verdict(bool(norm <= bound), self.kind, value=norm, threshold=self.eps,
                       margin=bound - norm, reason="||p||_G > eps")
