"""What a certified-points claim is measured against (paper sections 2.3-2.4).

* the run's gamma and mu (``C`` or 64/n, ``mu`` or n/128), its per-point boxes
  gamma_i = C w_i (``run_box``) and the levels min(gamma_i, 1/mu) below which a point's
  r_i must stay by more than the error bound to be certified (``certify_level``,
  ``certify_levels``; docs/svm.md, "Certified points");
* ``check_scales``: parameters and data whose scale would make the error bound
  meaningless in float64 are refused;
* ``run_thresholds``: the same thresholds read back from a run's configuration, for the
  referees (``_certificate``, ``_kernel_certificate``), never from numbers a certificate
  stores about itself.
"""
import math
import numbers

import numpy as np

from ._base import _CertifiedSVM
from ._rules import CertifiedPoints

#: how mu=None is raised, for the refusals of a mu too small
RAISE_MU = ("(with mu=None and a given C, mu is 1/(2C), divided by the largest sample weight "
            "in a weighted run: a smaller C raises it)")

#: the smallest scale of the dual variables at which float64 resolves their differences
#: (an ulp of r is then a normal number)
_LEVEL_FLOOR = 2.0 ** -969


def check_scales(name, data, gamma, mu, L=None, trace=None, level=None, box_only=False,
                 C=None, weight_max=None):
    """Refuse parameters and data whose scale makes the error bound meaningless (ValueError
    naming the scale): dual variables below 2^-969 (their differences would be subnormal),
    coefficients s * w_bar that can overflow, a condition number L / mu that overflows.
    ``trace`` = sum_i ||z_i||^2 (default: from ``data.zsq``); ``gamma`` is the largest
    box bound, ``level`` (default min(gamma, 1/mu)) the smallest positive level of a
    weighted run; ``box_only``: the dual variables' scale only (exact kernels, whose
    solvers check the data's own scales, ``data`` unused). ``C`` and ``weight_max`` (the
    largest sample weight of a weighted run, whose largest box is ``gamma`` = C w_max):
    a box that weights above 1 make too large is blamed on them."""
    weighted = level is not None
    if level is None:
        level = certify_level(gamma, mu)
    if not level >= _LEVEL_FLOOR and weighted:
        # (C itself when the caller gives it: gamma is the largest box C w_max; found by
        # review, "C = 1e+300" was printed for C = 1 and weights up to 1e300)
        which = f"C = {C:.3g}" if C is not None else f"the largest box C w_max = {gamma:.3g}"
        raise ValueError(
            f"{name}: the smallest positive box C w_i ({which}, times the point's "
            f"sample weight w_i when weights are given) with mu = {mu:.3g} puts dual "
            f"variables in [0, {level:.3g}], below 2^-969 = {_LEVEL_FLOOR:.2g}, where float64 "
            "cannot resolve their differences and the error bound would be meaningless; "
            "raise C (or the smallest positive sample weights) so that C w_i is at least "
            "1e-290, or give those points weight 0")
    if not level >= _LEVEL_FLOOR:
        raise ValueError(
            f"{name}: C = {gamma:.3g} and mu = {mu:.3g} put the dual variables in "
            f"[0, min(C, 1/mu)] = [0, {level:.3g}], below 2^-969 = {_LEVEL_FLOOR:.2g}, where "
            "float64 cannot resolve their differences and the error bound would be "
            "meaningless; choose C and 1/mu of at least 1e-290")
    if box_only:
        return
    trace = (data.zsq_sum if trace is None else float(trace)) + data.n
    smax = float(data.s.max(initial=0.0))
    with np.errstate(over="ignore"):
        coef_bound = smax * gamma * math.sqrt(data.n) * math.sqrt(trace)
    if not (math.isfinite(trace) and coef_bound < 2.0 ** 1020) and math.isfinite(trace) \
            and weight_max is not None and weight_max > 1.0:
        # found by review: weights of 1e307 were reported as "C = 2.13e+307 ... reduce C"
        # with the default C
        raise ValueError(
            f"{name}: the largest box C w_i = {gamma:.3g} (C = {C:.3g} times the largest "
            f"sample weight {weight_max:.3g}) with the scaled data (||Z~||_F^2 = {trace:.3g}, "
            f"largest 1/sigma = {smax:.3g}) gives coefficients that can overflow float64; "
            "rescale the weights (sample_weight, and class_weight in the estimators) or "
            "reduce C")
    if not (math.isfinite(trace) and coef_bound < 2.0 ** 1020):
        raise ValueError(
            f"{name}: the scaled data (||Z~||_F^2 = {trace:.3g}, largest 1/sigma = {smax:.3g}) "
            f"with C = {gamma:.3g} give coefficients that can overflow float64; rescale X "
            "or reduce C")
    if L is not None and not (math.isfinite(L) and L / mu <= 2.0 ** 900):
        raise ValueError(
            f"{name}: mu = {mu:.3g} is too small against ||Z~||_2^2 <= {L - mu:.3g}: the "
            f"condition number L / mu = {L / mu:.3g} makes the error bound overflow; raise mu "
            f"{RAISE_MU}")


def _gamma_mu(params, n, sample_weight=None):
    """(gamma, mu) of a run on n points: ``C`` or 64/n (paper section 2.4); ``mu``, or with
    mu=None 1/(2C) when C is given and n/128 when it is not, so that mu gamma = 1/2 as at
    the paper's defaults, whatever C and the kernel. A weighted run's mu=None is that
    divided by the largest weight w_max: mu C w_max = 1/2 for its largest box C w_max.

    The primal loss of point i is the hinge C w_i max(0, z) Huber-smoothed over
    violations z up to mu C w_i: with mu = 1/(2C) for every weight, a weight above 2 left
    the quadratic part z^2 / (2 mu) of violations up to w_i / 2 unchanged, and acted only
    on wider ones (heart_scale: ``class_weight={1: 5}``, ``{1: 10}`` and ``{1: 100}`` fit
    the same model). With w_max every zone is at most half a margin unit wide, as in an
    unweighted run, and the run depends on C and w through C w only.

    The solvers and the referee (``run_thresholds``) read mu here, from the run's
    parameters as given (the configuration keeps mu=None). In the primal the hinge is
    then Huber-smoothed over margin violations up to mu C = 1/2, and the level
    min(C, 1/mu) of the certified points is C. The paper's n/128 with a user C would
    smooth it over violations up to n C / 128 (254 at C = 1 on a9a's 32,561 rows) and
    make every C above 128/n the same model (the box never reached)."""
    C = params["C"]
    gamma = float(C) if C is not None else 64.0 / n
    if params["mu"] is not None:
        mu = float(params["mu"])
    elif C is None:
        mu = n / 128.0
    else:
        mu = 0.5 / gamma
    if params["mu"] is None and sample_weight is not None:
        w_max = float(np.max(sample_weight))
        mu = mu / w_max
        if not (math.isfinite(mu) and mu > 0.0):
            box = f"C={gamma:.3g}" if C is not None else f"the default C = 64/n = {gamma:.3g}"
            raise ValueError(
                f"{box} and the largest sample weight w_max = {w_max:.3g} put the default "
                f"perturbation mu = 1/(2 C w_max) = {mu:.3g} outside float64's positive "
                "range; rescale the weights (a run depends on C w only) or pass mu "
                "explicitly")
    if not math.isfinite(mu):
        raise ValueError(
            f"C={gamma:.3g} is too small for the default perturbation mu = 1/(2C), which "
            "overflows float64; pass a larger C or mu explicitly")
    return gamma, mu


def claim_shortfall(n_cert, fraction, n, sample_weight=None):
    """The referees' reason why ``n_cert`` certified points of n do not make the claim
    "certified" of the ``certified_points`` rule's ``fraction`` (None: the rules could
    not be read), or None when they do: more than fraction * n are needed, n counting the
    points that can be certified, those of positive weight, as the solvers count them."""
    if fraction is None:
        return "the run's stopping rules cannot be read from its configuration"
    n_pos = n if sample_weight is None else int(np.count_nonzero(sample_weight > 0))
    if not n_cert > fraction * n_pos:
        return (f"{n_cert} certified points, the claim needs more than fraction * n = "
                f"{fraction * n_pos:.6g}")
    return None


def stored_mismatch(stored, th, sample_weight=None):
    """The referees' reason for the first of a certificate's ``stored`` (name, value)
    pairs that is not the run's threshold ``th[name]`` (``run_thresholds``), or None. With
    weights given, a mu that differs may be theirs: a weighted run's mu=None depends on
    its largest weight (``_gamma_mu``)."""
    for name, mine in stored:
        if mine != th[name]:
            why = f"the certificate's {name}={mine!r} is not the run's {name}={th[name]!r}"
            if name == "mu" and sample_weight is not None:
                why += (" (with mu=None a weighted run's mu is 1/(2C) divided by its largest "
                        f"sample weight, {float(np.max(sample_weight)):.6g} in the weights "
                        "given: check with the run's weights)")
            return why
    return None


def stored_thresholds(gamma, mu, formulation):
    """(gamma, mu, formulation) a certificate stores, validated for a check without a
    run's configuration (``ValueError`` naming the one that cannot define a claim):
    gamma (a number, or None for a per-point box) and mu positive and finite, the
    formulation "hsvm" or "svm". Found by review: mu = 0 divided by zero in the
    referee, mu = -1 made a negative margin pass, formulation "foo" was read as one."""
    if not isinstance(formulation, str) or formulation not in ("hsvm", "svm"):
        raise ValueError(f"formulation={formulation!r:.40} is not 'hsvm' or 'svm'")
    if not (isinstance(mu, numbers.Real) and math.isfinite(mu) and mu > 0.0):
        raise ValueError(f"mu = {mu!r} is not a positive finite number")
    if gamma is not None and not (isinstance(gamma, numbers.Real) and math.isfinite(gamma)
                                  and gamma > 0.0):
        raise ValueError(f"gamma = {gamma!r} is not a positive finite number")
    return gamma, mu, formulation


def certify_level(gamma, mu):
    """min(gamma, 1/mu): a point with level - r_i > eps (eps >= ||r - r*||) is certified.

    Then r_i < gamma and r*_i < gamma, so theta_i(r) >= 1 - mu (r_i + eps) and
    theta_i(r*) >= 1 - mu r*_i, both > 1 - mu level >= 0 (docs/svm.md, "Certified
    points"). The paper's threshold gamma is this level when mu gamma <= 1 (its defaults:
    mu gamma = 1/2); for mu gamma > 1 the margin bound 1 - mu gamma is negative and
    gamma - r_i > eps would not mean that the point is correctly classified.
    """
    return min(float(gamma), 1.0 / float(mu))


def run_box(gamma, sample_weight, n):
    """The per-point box bounds of a run: gamma_i = C w_i (``sample_weight`` w, validated
    by ``solve``), or, for an unweighted run, C for every point as a read-only n-vector
    view of one number (stride 0: the kernels read one cached value instead of an
    n-vector per pass; float64).

    As LIBSVM's ``-wi`` and scikit-learn's ``SVC(sample_weight=...)``, a weight rescales
    the penalty of its point's slack: the dual box of point i is [0, C w_i]; a point of
    weight 0 has the box [0, 0], so r_i = 0 throughout and it is never certified.
    """
    if sample_weight is None:
        return np.broadcast_to(np.float64(gamma), (n,))
    with np.errstate(over="ignore"):  # an infinite box is refused by the solvers' checks
        return float(gamma) * np.asarray(sample_weight, dtype=np.float64)


def certify_levels(box, mu):
    """The per-point levels min(gamma_i, 1/mu) of ``certify_level`` (an n-vector; a view
    of one number for the one-number box of an unweighted run, as ``run_box``'s)."""
    if box.ndim == 1 and box.size and box.strides[0] == 0:
        return np.broadcast_to(np.minimum(box[0], 1.0 / float(mu)), box.shape)
    return np.minimum(box, 1.0 / float(mu))


def _box_scales(box, mu):
    """(largest gamma_i, smallest positive level) of a run's box: the scales of the
    rounding bounds and of ``check_scales``."""
    gmax = float(box.max(initial=0.0))
    low = float(np.where(box > 0.0, box, np.inf).min(initial=np.inf))  # smallest positive
    level = certify_level(low if low < np.inf else gmax, mu)
    return gmax, level


def _svm_solver_class(spec):
    """The registered certified SVM solver class (a ``_CertifiedSVM``) named (or
    instantiated) by ``spec``, or None."""
    from ..._registry import get_plugin

    if isinstance(spec, str):
        try:
            cls = get_plugin("solver", spec)
        except ValueError:
            return None
    else:
        cls = type(spec)
    if isinstance(cls, type) and issubclass(cls, _CertifiedSVM):
        return cls
    return None


def _stop_fraction(stop, default_stop):
    """The smallest ``fraction`` of the ``certified_points`` rules of a run's ``stop``
    (0.0 when there is none); None when the rules cannot be read."""
    from ..._referee import stopping_rules

    rules = stopping_rules(stop, default_stop)
    if rules is None:
        return None
    fractions = [float(r.params["fraction"]) for r in rules if isinstance(r, CertifiedPoints)]
    return min(fractions) if fractions else 0.0


def run_thresholds(config, n, sample_weight=None):
    """The thresholds of a certified-points claim from the run's configuration.

    ``config`` is a ``Config`` or, after ``load_result``, its dict form; ``n`` the number
    of training points, ``sample_weight`` the validated weights of a weighted run (their
    largest sets mu=None, ``_gamma_mu``). Returns a dict with gamma (``C`` or 64/n), mu
    (``_gamma_mu``), level = min(gamma, 1/mu), scale, formulation ("hsvm" for ``fista``
    and ``dcd``, "svm" for ``fista_svm``) and fraction (the ``certified_points`` rule's, None when
    the stopping rules cannot be read). The solver's parameters are validated by its own
    parameter table: invalid values raise ``ValueError``/``TypeError`` naming them.
    """
    from ..._config import Config

    if isinstance(config, Config):
        spec, sparams, stop = config.solver, dict(config.solver_params), config.stop
    elif isinstance(config, dict):
        spec = config.get("solver")
        sparams = config.get("solver_params") or {}
        stop = config.get("stop")
        if not isinstance(sparams, dict):
            raise TypeError(f"config['solver_params'] must be a dict, got {type(sparams).__name__}")
    else:
        raise TypeError(f"config must be a marginkit.Config or its dict form, got "
                        f"{type(config).__name__}")
    cls = _svm_solver_class(spec)
    if cls is None:
        raise ValueError(f"the run's solver {spec!r} is not one of the certified SVM solvers "
                         "(fista, fista_svm, dcd)")
    if not isinstance(spec, str):
        sparams = {**spec.params, **sparams}
    solver = cls(**sparams)  # validated by the solver's parameter table
    gamma, mu = _gamma_mu(solver.params, n, sample_weight)
    return {"gamma": gamma, "mu": mu, "level": certify_level(gamma, mu),
            "scale": solver.params["scale"],
            "formulation": solver.formulation,
            "fraction": _stop_fraction(stop, solver.default_stop)}


def rows_mismatch(r, n, precomputed=False):
    """Why a certificate of dual ``r`` cannot be checked on ``n`` rows, or None: it holds
    one r_i per row the run solved, and an estimator's fit solves the rows of positive
    weight only (before the defaults that count rows, C = 64/n, are compared)."""
    if not isinstance(r, np.ndarray) or r.ndim != 1:
        return None  # not a vector: the structural checks below say so
    m = r.shape[0]
    if m == n:
        return None
    rows = "K[w > 0][:, w > 0] (the Gram matrix of those rows)" if precomputed else "X[w > 0]"
    return (f"the certificate is of a run on {m} rows and X has {n}: check it on the rows "
            f"the run solved (an estimator's fit drops the rows of weight 0 first: {rows}, "
            "y[w > 0], sample_weight=w[w > 0])")
