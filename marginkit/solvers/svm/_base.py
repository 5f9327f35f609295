"""What the certified SVM solvers share: the parameters C, mu and scale (paper section 2.4),
their base class ``_CertifiedSVM``, and the claim protocol of their states
(``_ClaimOffers``)."""
import numbers

import math

import numpy as np

from ..._validation import Param
from ...plugins import Solver
from ._data import feature_map_refusal


_SCALES = ("std", "scale")


_COMMON_PARAMS = {
    "C": Param(None, types=numbers.Real, low=0, low_open=True, allow_none=True,
               doc="box bound gamma of the dual (None: 64/n)"),
    "mu": Param(None, types=numbers.Real, low=0, low_open=True, allow_none=True,
                doc="perturbation mu (None: n/128, or 1/(2C) with a given C; divided by "
                    "the largest sample weight in a weighted run)"),
    "scale": Param("std", types=str, options=_SCALES, allow_none=True,
                   doc="'std' (implicit centering and scaling), 'scale' (scaling only) or None"),
}


class _CertifiedSVM(Solver):
    """Base of the solvers whose runs end with a certified-points claim (``fista``,
    ``fista_svm``, ``dcd``): ``run_thresholds`` accepts exactly its subclasses.

    They solve the perturbed dual of the H-SVM (``formulation = "hsvm"``) or of the
    classical SVM (``"svm"``) over the boxes [0, C w_i] of any PSD kernel (an explicit
    feature map runs on Phi(X), an exact kernel on its Gram matrix, ``_kernel``) and stop,
    by default, at the first certified point.
    """

    requires = {}
    default_stop = (("certified_points", {"fraction": 0.0}),)
    #: per-point boxes gamma_i = C w_i (``run_box``)
    sample_weight = True
    #: the dual the claims are checked in: "hsvm" (intercept regularized) or "svm"
    formulation = "hsvm"

    def blocked_refusal(self, kernel):
        """Why this solver cannot run ``kernel`` on row chunks held by workers, or None
        (``_data.feature_map_refusal``)."""
        return feature_map_refusal(kernel)


class _ClaimOffers:
    """The claim protocol of the SVM states (``SolverState.certificate``): the
    certificate of a claim is the one ``finalize`` builds at the current iterate; after a
    refuted claim (``refuted``) the claim is offered again only once the error bound has
    halved, so that a bound the referee cannot confirm (its own rounding, a model it
    rejects) costs a few re-checks, not one per iteration; and the points offered then
    clear the bound by twice the referee's rounding term too (``claim_slack``: the rows of
    a kernel approximation carry an error the solver's own bound does not see). A
    refutation whose rounding term is above the slack is offered again at the next
    iterate, with that slack."""

    _offer_below = np.inf
    #: the referee's rounding term of the last refuted claim (``run_certificate`` keeps
    #: only the points with level - r_i > error bound + claim_slack)
    claim_slack = 0.0
    #: whether the state's certificates keep to ``claim_slack`` (``run_certificate``: the
    #: linear states); the others wait for the bound to halve after any refutation
    slack_masks = False

    def certificate(self, status):
        if status == "certified" and not self.error_bound <= self._offer_below:
            return None
        return (self._solver.finalize(self.problem, self, status) or {}).get("certificate")

    def refuted(self, status, verdict):
        rounding = float(getattr(verdict, "rounding", 0.0))
        if self.slack_masks and math.isfinite(rounding) and rounding > self.claim_slack:
            # the referee's rounding is new: offered again at the next iterate, with the
            # points that clear it (each such re-offer at least doubles the slack)
            self.claim_slack = 2.0 * rounding
            self._offer_below = self.error_bound
        else:
            self._offer_below = 0.5 * self.error_bound
