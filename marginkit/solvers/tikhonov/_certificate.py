"""The certificate of an iterated Tikhonov run: the proximal chain, each link solved to
its target of Proposition 1 (Beugnot et al. 2021), re-checked from the data alone.

``NewtonDecrementCertificate`` stores the chain theta^1..theta^t; ``check(X, y)`` takes
the targets from the run's configuration (``run_targets``) and proves every link's
decrement below its target with ``_decrement_bound._link_bounds``.

The paper's reference is in the package docstring (``marginkit.solvers.tikhonov``).
"""
import math
import numbers

import numpy as np
import scipy.sparse as sp

from ... import _referee as R
from ..._validation import check_X
from ...certificates import Certificate, Verdict, certificate_type, local_matrix
from ...linalg._shared import reuse
from ._decrement_bound import _link_bounds
from ._representation import (ExactKernelMap, check_gram_budget, check_newton_budget,
                              exact_gram, gram_matrix)
from ._schedule import decrement_schedule, rule_schedule
from ...utils._memory import in_small_pages

#: how far a kernel expansion's stored coefficients may be from the referee's model of the
#: chain's last link: the RKHS norm of the difference, relative to ||theta^t||, when the
#: last target / sqrt(lam) is smaller (``_predictor_reason``)
_EXPANSION_RTOL = 1e-9
_U = np.finfo(np.float64).eps / 2


def run_targets(config, n_rows, prox_step):
    """The claim's numbers from the run's configuration (a ``Config``, or its dict form
    after ``load_result``): loss, lam (``lam`` or 1/n_rows, ``n_rows`` the rows of the
    run, as the solver sets it: t="auto"'s validation rows included), fit_intercept, the target
    of the Newton decrement of subproblem k = ``prox_step`` (the run's last one; None: t)
    under the schedule of the run's ``newton_decrement`` rule (the last one in ``stop``;
    tol None means the solver's tol), tol kappa^(k - T) / T with T = t (for t="auto",
    T = k, the t it chose: Proposition 1 for a run of k steps), and ``targets``, the
    targets of the subproblems 1..k (a tuple). Parameters
    are validated by the solver's and the rule's tables (``ValueError``/``TypeError``
    naming them)."""
    from ..._referee import stopping_rules

    cls, prm, stop = run_solver_params(config)
    rules = stopping_rules(stop, cls.default_stop)
    if rules is None:
        raise ValueError("the run's stopping rules cannot be read from its configuration")
    tol, kappa = rule_schedule(rules, prm["tol"])
    T = int(prm["t_max"]) if prm["t"] == "auto" else int(prm["t"])
    k = int(prox_step) if prox_step is not None else T
    if not (1 <= k <= T) or (prm["t"] != "auto" and k != T):
        raise ValueError(f"proximal step {prox_step!r} is not the run's last one (t={prm['t']!r})")
    # t="auto" chose t = k <= t_max: its chain is the one of a k-step run
    T = k
    lam = float(prm["lam"]) if prm["lam"] is not None else 1.0 / n_rows
    targets = tuple(float(v) for v in decrement_schedule(tol, T, kappa)[:k])
    return {"loss": prm["loss"], "lam": lam, "fit_intercept": bool(prm["fit_intercept"]),
            "target": targets[-1], "targets": targets, "n_components": prm["n_components"]}


def validation_size(n_all, fraction):
    """The number of held-out rows of t="auto": round(fraction n_all)."""
    return int(round(fraction * n_all))


def validation_split(n_all, fraction, rng):
    """(training rows, validation rows) of t="auto", both increasing: the first draw of
    the run's generator ``rng``, a permutation of the n_all rows, split after
    ``validation_size`` rows. The referee redraws it from an integer ``random_state``."""
    perm = rng.permutation(n_all)
    n_val = validation_size(n_all, fraction)
    return np.sort(perm[n_val:]), np.sort(perm[:n_val])


def _split_reason(config, idx, n_all):
    """None when ``idx`` (the certificate's ``train_index``) is the run's training rows,
    else why not: none for an integer t (the run trains on all the rows); for t="auto"
    the rows of ``validation_split`` redrawn from the configuration's integer
    ``random_state``, or, without one (a split that cannot be drawn again), as many
    rows as it keeps. Found by review: a chain fit on 6 chosen rows of 270, with their
    train_index, verified as the run's."""
    from ..._validation import check_random_state

    prm = run_solver_params(config)[1]
    if prm["t"] != "auto":
        return (None if idx is None else
                f"the run (t={prm['t']!r}) trains on all the rows; the certificate names a "
                "training split (train_index)")
    if idx is None:
        return "the run (t='auto') trains on a split of the rows; the certificate names none"
    keep = n_all - validation_size(n_all, prm["validation_fraction"])
    seed = config.get("random_state") if isinstance(config, dict) else config.random_state
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        expected = validation_split(n_all, prm["validation_fraction"],
                                    check_random_state(seed))[0]
        if not np.array_equal(idx, expected):
            return (f"train_index is not the training split that random_state={seed} draws "
                    f"from the {n_all} rows")
    elif idx.shape[0] != keep:
        return (f"train_index has {idx.shape[0]} rows; the run's split keeps {keep} of "
                f"{n_all} (validation_fraction={prm['validation_fraction']})")
    return None


def _centres_reason(config, C, X, n_all, n_components):
    """None when the Nystroem centres ``C`` are the rows of the training rows ``X`` that
    the run draws (the run's generator from an integer ``random_state``: t="auto"'s split
    first, then ``draw_centre_index``), or when the draw cannot be repeated (no integer
    ``random_state``); else why not. Found by review: one centre and a chain on it, in
    place of the run's 30, verified."""
    from ...certificates import predictor_fingerprint
    from ...kernels.approximation import draw_centre_index
    from ..._validation import check_random_state

    seed = config.get("random_state") if isinstance(config, dict) else config.random_state
    if not isinstance(seed, numbers.Integral) or isinstance(seed, bool):
        return None
    prm = run_solver_params(config)[1]
    rng = check_random_state(seed)
    if prm["t"] == "auto":
        validation_split(n_all, prm["validation_fraction"], rng)  # the run's first draw
    idx = draw_centre_index(rng, X.shape[0], n_components)
    drawn = R.read_X(local_matrix(X))[idx]
    if predictor_fingerprint(drawn, ()) != predictor_fingerprint(C, ()):
        return (f"the Nystroem centres are not the {idx.size} rows that random_state={seed} "
                "draws from the training rows")
    return None


def run_solver_params(config):
    """(solver class, validated solver parameters, stop) of the run's configuration (a
    ``Config`` or its dict form); ``ValueError`` when its solver is not iterated
    Tikhonov."""
    from ..._config import Config
    from ..._registry import get_plugin

    if isinstance(config, Config):
        spec, sparams, stop = config.solver, dict(config.solver_params), config.stop
    elif isinstance(config, dict):
        spec, sparams, stop = config.get("solver"), config.get("solver_params") or {}, \
            config.get("stop")
        if not isinstance(sparams, dict):
            raise TypeError("config['solver_params'] must be a dict")
    else:
        raise TypeError(f"config must be a marginkit.Config or its dict form, got "
                        f"{type(config).__name__}")
    cls = get_plugin("solver", spec) if isinstance(spec, str) else type(spec)
    # the solver's class through the registry (its module imports this one)
    base = get_plugin("solver", "iterated_tikhonov")
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise ValueError(f"the run's solver {spec!r} is not iterated_tikhonov")
    if not isinstance(spec, str):
        sparams = {**spec.params, **sparams}
    return cls, cls(**sparams).params, stop


@certificate_type
class NewtonDecrementCertificate(Certificate):
    """The proximal chain theta^1..theta^t of a run, each link solved to its target.

    What the chain certifies (``check(X, y)``): for every k = 1..t, theta^k solves the
    proximal subproblem centred at the chain's previous link,

        F_k(theta) = L_hat(theta) + lam/2 ||theta - theta^{k-1}||^2,

    to Newton decrement ||grad F_k(theta^k)||_{H_k(theta^k)^{-1}} <= eps_k (Eq. 19), where
    theta^0 = 0 is fixed by the referee (never read from the certificate, as the solver
    starts there; an intercept is unpenalized and takes no part in the centre) and eps_k =
    tol kappa^(k - T) / T is the target of step k under the run's configuration (tol, t,
    or for t="auto" the t it chose, and the ``newton_decrement`` rule's kappa), never the stored
    ``targets``. Because the first centre is the exact theta^0, link 1 is a decrement of
    the exact first subproblem; this is the hypothesis of Proposition 1 (Proposition 7
    with c = 1/2), whose induction starts there (Eq. 61). With kappa >= 1.4 and, for the
    logistic loss, tol <= sqrt(lam) / (2 R) (Assumption 5, R the self-concordance
    constant on the data), the proposition gives that theta^t has Newton decrement <= tol
    on the exact final subproblem, the one centred at the exact proximal iterate
    (Eq. 18); for the squared loss kappa >= 1 is enough (constant Hessian H >= lam I).
    That consequence and its conditions on tol and R are the paper's, not re-checked.

    Each link is recomputed from the data alone in float64 and long double with a proven
    upper bound (docs/tikhonov.md, "The certificate"), and that bound must be within the
    link's target; the Verdict of a chain that holds reports the last link (value,
    threshold, rounding) and the smallest margin over the links, a rejection the first
    link that fails, named in its reason. The loss, lam and fit_intercept also come from
    the configuration and must agree with the stored ones; the chain must have as many
    links as the run's last proximal step (t, or ``prox_step`` of t="auto"). Without a
    configuration (user code) the stored numbers and ``targets`` are used.

    ``coef`` (theta^t), ``coef_prev`` (theta^{t-1}; zeros when t = 1) and ``target``
    (eps_t) are views on ``chain`` and ``targets``. The training split of t="auto"
    (``train_index``) is drawn again from an integer ``random_state``; without one (a
    split that cannot be drawn again) only its size is checked. An integer t has none.

    Weighted runs: ``check(X, y, sample_weight=w)`` takes the weights as data and
    recomputes every link on the weighted risk 1/n sum_i w_i loss_i; a certificate of a
    weighted run (``weighted``) checked without weights is rejected with a message saying
    to pass them, and other weights are a recomputation for those weights.

    Parameters
    ----------
    value : float
        The solver's Newton decrement of the last link (information; never read).
    targets : float or array (t,)
        The targets eps_1..eps_t the run used (a float: the same for every link).
    loss : str
        The loss name.
    lam : float
        The proximal weight lambda.
    representation : {"gram", "primal"}
    chain : array (t, d)
        theta^1..theta^t, one row per proximal step: representer weights beta^k (d = n,
        theta = sum_i beta_i Phi(x_i)) for exact kernels (``representation="gram"``; the
        referee forms K in float64 and its eigen feature map, ``ExactKernelMap``), the
        feature-space coefficients otherwise, with the intercept last when
        ``fit_intercept`` (feature maps, Nystroem centres and the identity: linear
        kernel, dense, CSR or a dask array read chunk by chunk, in row blocks).
    kernel
        The run's kernel. With a configuration it must be the run's, and the referee
        derives the representation from it (with ``n_components``, Nystroem centres,
        whose normalization K_CC^{-1/2} it recomputes; the stored ``projection`` and
        ``identity_map`` are never read).
    predictor : str or None
        ``predictor_fingerprint`` of the model the result predicts with: (``support_``,
        ``support_coef_``) of an exact kernel (the training rows and beta^t) or of Nystroem
        centres, else (None, theta^t) (``coef_`` of the linear kernel,
        ``extra["feature_space_coef"]`` of another feature map). The referee recomputes it
        from X and the chain; ``load_result`` compares it (or theta^t itself) with the
        loaded model. None: a certificate that holds no model (format 4 and before, for
        kernel models), checked as a claim about the data only.
    support_coef : array (m,) or None
        A Nystroem model's coefficients of the centres, P theta^t as the solver computed
        it; the referee checks them against its own P theta^t (``_EXPANSION_RTOL``).
    directions : array (t, d) or None
        The run's Newton directions H^-1 grad F_k at theta^1..theta^t, in the chain's
        coordinates (None for exact kernels; NaN rows where the run has none): witnesses
        the check tries as its direction zeta before solving with a Hessian of its own.
        Any zeta gives a valid bound (docs/tikhonov.md, "The certificate"), so a wrong
        or hostile direction only loosens it; it is never a number of the claim.
    """

    kind = "newton_decrement"
    #: the first results-file format whose certificates of kernel models hold the model
    model_bound_since = 5

    def __init__(self, value, targets, loss, lam, representation, chain, fit_intercept,
                 kernel, classes, train_index=None, centres=None, projection=None,
                 identity_map=False, config=None, prox_step=None, weighted=False,
                 predictor=None, support_coef=None, directions=None):
        self.value = float(value)
        self.chain = np.array(chain, dtype=np.float64)
        if self.chain.ndim != 2 or self.chain.shape[0] < 1:
            raise ValueError(f"chain must be a (t, d) array of the t >= 1 proximal iterates, "
                             f"got shape {self.chain.shape}")
        t = self.chain.shape[0]
        targets = np.asarray(targets, dtype=np.float64)
        if targets.ndim > 1 or targets.size not in (1, t):
            raise ValueError(f"targets must be one number or one per link ({t}), got shape "
                             f"{targets.shape}")
        self.targets = np.broadcast_to(targets.ravel(), (t,)).copy()
        self.loss = loss
        self.lam = float(lam)
        self.representation = representation
        self.fit_intercept = bool(fit_intercept)
        self.kernel = kernel
        self.classes = classes
        self.train_index = train_index
        self.centres = centres
        self.projection = projection
        self.identity_map = bool(identity_map)
        #: the run's configuration (source of the targets), None for user code
        self.config = config
        #: the proximal step k of the returned iterate (t="auto" picks it)
        self.prox_step = prox_step
        #: whether the run was weighted (its check then needs the sample weights)
        self.weighted = bool(weighted)
        if predictor is not None and not isinstance(predictor, str):
            raise TypeError(f"predictor must be a fingerprint (str) or None, got "
                            f"{type(predictor).__name__}")
        self.predictor = predictor
        if support_coef is not None:
            support_coef = np.array(support_coef, dtype=np.float64)
            if support_coef.ndim != 1:
                raise ValueError(f"support_coef must be a vector, got shape "
                                 f"{support_coef.shape}")
        self.support_coef = support_coef
        #: the run's Newton directions at the chain's iterates, (t, q) or None: witnesses
        #: the check tries as its directions zeta (any zeta gives a valid bound; one the
        #: run solved to its residual tolerance gives a tight one without the referee's
        #: own Hessian), never numbers of the claim
        if directions is not None:
            d = np.asarray(directions)
            if d.dtype.kind not in "fiu" or d.ndim != 2:
                raise ValueError(
                    f"directions must be None or a 2-D float array (one Newton direction "
                    f"per link), got {d.dtype} of shape {d.shape}")
            directions = np.array(d, dtype=np.float64)
        self.directions = directions

    def _witness(self, k):
        """The run's Newton direction at link k (1-based), or None: none stored, an exact
        kernel's certificate (its chain is in representer weights, the referee's
        coordinates are its own eigen map's), or not a (t, d) array of reals (a witness
        that cannot be read is not tried; no conversion is attempted, found by review:
        a complex array warned and an object array of 10**400 raised)."""
        d = getattr(self, "directions", None)
        if d is None or self.representation == "gram" or not isinstance(d, np.ndarray) \
                or d.dtype.kind != "f" or d.shape != self.chain.shape:
            return None
        return np.asarray(d[k - 1], dtype=np.float64)

    def bound_value(self, attr):
        """What ``load_result`` compares with a result's field of the model (``coef`` with
        ``coef_``, ``intercept`` with ``intercept_``): the returned iterate split into its
        coefficients and, with ``fit_intercept``, its last entry, the intercept (found by
        review: a genuine linear run with an intercept was refused, its d + 1 entries
        compared with coef_'s d; a kernel model's intercept was not bound); other
        attributes as they are."""
        if attr == "coef":  # a model linear in X (coef_); other models: predictor_mismatch
            return self._last_theta() if self._maps_to_itself() else None
        if attr == "intercept":
            return float(self.chain[-1][-1]) if self.fit_intercept else 0.0
        return getattr(self, attr, None)

    def _last_theta(self):
        """theta^t without its intercept (beta^t for an exact kernel)."""
        return self.chain[-1][:-1] if self.fit_intercept else self.chain[-1]

    def _maps_to_itself(self):
        """Whether the run's model is linear in X (``coef_``): the linear kernel, or a
        feature map that returns its rows (probed as the solver probes it), without
        Nystroem centres. Derived from the kernel, as the referee derives the
        representation, never from the stored ``identity_map``."""
        from ...certificates import _or_linear
        from ...kernels.builtin import LinearKernel

        kernel = _or_linear(self.kernel)
        if self.centres is not None:
            return False
        if isinstance(kernel, LinearKernel):
            return True
        if getattr(kernel, "precomputed", False) or getattr(kernel, "feature_map", None) is None \
                or getattr(kernel, "fitted", True) is False:
            return False
        probe = np.zeros((1, self.chain.shape[1] - int(self.fit_intercept)))
        try:
            return kernel.feature_map(probe) is probe
        except Exception:  # a map that cannot take the probe is not the identity
            return False

    def holds_model(self):
        """Whether the certificate holds the model the result predicts with: a model linear
        in X (its coefficients and intercept are the chain's last link), or the
        fingerprint of a kernel model (``predictor``; format 4 and before hold none)."""
        return self.predictor is not None or self._maps_to_itself()

    def _split_mismatch(self, extra):
        """Why r.extra's ``train_index`` / ``split_rows`` (the columns of K(X_new,
        X_train) a precomputed t="auto" model reads) are not the run's, or None: the
        certificate's train_index, which its check recomputes from the configuration,
        and more rows than the highest index (found by review: a file whose
        extra['train_index'] was reversed verified and predicted from other columns)."""
        ti = extra.get("train_index")
        mine = getattr(self, "train_index", None)
        if ti is None and mine is None:
            return None
        if ti is None or mine is None or not np.array_equal(np.asarray(ti), np.asarray(mine)):
            return ("r.extra['train_index'] (the rows t='auto' trained on) is not its "
                    "certificate's (r.certificate.fields.train_index)")
        rows = extra.get("split_rows")
        if rows is not None and not (isinstance(rows, numbers.Integral)
                                     and int(rows) > int(np.max(mine, initial=-1))
                                     and int(rows) > len(mine)):
            return "r.extra['split_rows'] is not a number of rows the training split fits"
        return None

    def predictor_mismatch(self, model, fields):
        """None when ``model`` (``_result.predicting_model``: what ``decision_function``
        evaluates) is the chain's last link in the form the run's kernel predicts with,
        else why not (``load_result``): ``coef_`` for a model linear in X, the
        feature-space coefficients for another feature map (theta^t itself, compared
        entry by entry), the kernel expansion (``support_``, ``support_coef_``) of an
        exact kernel or Nystroem centres (by its fingerprint, ``predictor``, which the
        referee recomputes from X and the chain)."""
        from ...certificates import _or_linear, _same_value, predictor_fingerprint

        if model is None:
            return None
        why = self._split_mismatch((fields or {}).get("extra") or {})
        if why is not None:
            return why
        kind, value = model
        if kind in ("coef", "feature_space"):
            kernel = _or_linear(self.kernel)
            if kind == "coef" and not self._maps_to_itself():
                return ("the result predicts with r.coef_ on the rows of X, its certificate "
                        "checks a kernel model")
            if kind == "feature_space" and (self.centres is not None or getattr(
                    kernel, "feature_map", None) is None or getattr(kernel, "precomputed", False)):
                return ("the result predicts with r.extra['feature_space_coef'], its "
                        "certificate checks a kernel expansion (r.support_, r.support_coef_)")
            if not _same_value(self._last_theta(), np.asarray(value, dtype=np.float64)):
                return ("r.coef_ (or r.extra['feature_space_coef']) is not the last iterate "
                        "of its certificate's chain (r.certificate.fields.chain)")
            return None
        if self.predictor is None:
            return ("its certificate holds no fingerprint of the predictor it checks "
                    "(r.certificate.fields.predictor)")
        if predictor_fingerprint(*value) != self.predictor:
            return "r.support_ and r.support_coef_ are not the predictor its certificate checks"
        dual = fields.get("dual_coef_")
        if dual is not None and not _same_value(np.asarray(dual, dtype=np.float64),
                                                np.asarray(value[1], dtype=np.float64)):
            return "r.dual_coef_ is not r.support_coef_, the representer weights it checks"
        return None

    # views on the chain (settable: a new value replaces the stored array by a copy)
    @property
    def coef(self):
        """theta^t (beta^t for exact kernels): the returned iterate."""
        return self.chain[-1]

    @coef.setter
    def coef(self, value):
        chain = self.chain.copy()
        chain[-1] = value
        self.chain = chain

    @property
    def coef_prev(self):
        """theta^{t-1}, the centre of the last subproblem (theta^0 = 0 when t = 1)."""
        return self.chain[-2] if self.chain.shape[0] >= 2 else np.zeros(self.chain.shape[1])

    @coef_prev.setter
    def coef_prev(self, value):
        if self.chain.shape[0] < 2:
            raise AttributeError("a chain of one link has no stored centre: theta^0 = 0")
        chain = self.chain.copy()
        chain[-2] = value
        self.chain = chain

    @property
    def target(self):
        """eps_t, the target of the last link."""
        return float(self.targets[-1])

    @target.setter
    def target(self, value):
        targets = np.array(self.targets, dtype=np.float64)
        targets[-1] = value
        self.targets = targets

    def _targets(self, n_rows, t):
        config = getattr(self, "config", None)
        if config is None:
            targets = np.asarray(self.targets, dtype=np.float64)
            if targets.shape != (t,):
                raise ValueError(f"the certificate stores {targets.size} targets for a chain "
                                 f"of {t} links")
            return {"loss": self.loss, "lam": self.lam, "fit_intercept": self.fit_intercept,
                    "targets": tuple(float(v) for v in targets)}
        return run_targets(config, n_rows, t)

    def _labels(self, y):
        y = np.asarray(y).ravel()
        if self.loss == "logistic":
            from ...certificates import labels_pm

            return labels_pm(y, self.classes)
        return y.astype(np.float64)

    def recompute(self, X, y, sample_weight=None):
        """The Newton decrement of the last link recomputed from (X, y) (and the run's
        weights, which a weighted run needs), with this certificate's lam and loss
        (``bounds`` gives it with its proven upper bound)."""
        return self.bounds(X, y, sample_weight)[0]

    def bounds(self, X, y, sample_weight=None):
        """(recomputed decrement, proven upper bound) of the last link, theta^t on the
        subproblem centred at theta^{t-1}, with this certificate's lam and loss, and the
        run's weights (``ValueError`` without them for a weighted run: the numbers would
        be those of another problem). These are the numbers of the check's first pass
        (float64 partial sums of the gradient); the check sums the gradient in long double
        too when that pass cannot confirm a decrement it recomputes below target."""
        if sample_weight is None and getattr(self, "weighted", False):
            raise ValueError("the certificate is of a weighted run: pass its weights, "
                             "bounds(X, y, sample_weight=w)")
        blocks, yv, thetas, bs, _ = self._problem(X, y)
        weight = None if sample_weight is None else self._run_weights(y, sample_weight)
        return _link_bounds(blocks, yv, thetas, bs, thetas.shape[0], self.lam, self.loss,
                            self.fit_intercept, weight=weight)

    def _run_weights(self, y, sample_weight):
        """The validated weights of the run's training rows (``t="auto"`` trained on
        ``train_index`` of all the rows y labels)."""
        from ..._validation import check_sample_weight

        weight = check_sample_weight(sample_weight, np.asarray(y).ravel().shape[0])
        if self.train_index is not None:
            weight = weight[np.asarray(self.train_index)]
        return weight

    def _problem(self, X, y):
        """(row blocks of Phi, labels, the chain in feature space (t, p), intercepts (t,),
        the model's form): the form is how the run's model predicts, as the referee derives
        it: ``("support", rows, eigen map, K)`` (an exact kernel: the training rows, None for
        a precomputed Gram matrix, with beta^t), ``("nystroem", C, P, K_CC)`` (the centres
        and the referee's K_CC^{-1/2}) or ``("map",)`` (theta^t on a feature map).

        The map from the chain to the data is the referee's own: the kernel is the run's
        (``kernel_mismatch`` with the configuration), the representation follows from it
        and from the run's ``n_components`` (Nystroem centres; a Gram kernel's representer
        weights; a feature map's coefficients, the identity for the linear kernel), and a
        Nystroem normalization is recomputed from the stored centres, never read: the
        stored ``representation``, ``identity_map`` and ``projection`` are the solver's,
        for information. An exact kernel's eigen map is the referee's own decomposition of
        K with every eigen-direction (``ExactKernelMap``): theta^k = Phi^T beta^k has the
        components of beta^k along the small eigenvalues too, and their gradient counts."""
        from ...certificates import _or_linear, kernel_mismatch, referee_kernel
        from ...kernels.approximation import nystroem_projection
        from ...kernels.builtin import LinearKernel

        chain = np.asarray(self.chain)
        if chain.ndim != 2 or chain.shape[0] < 1 or chain.dtype.kind != "f":
            raise ValueError("the chain must be a (t, d) float array with t >= 1")
        budget = getattr(self.config, "memory_budget", None) if self.config is not None \
            and not isinstance(self.config, dict) else None
        budget = budget or 2.0 * 2**30
        check_newton_budget(chain.shape[1], chain.shape[0], budget,
                            "the Newton-decrement check")
        yv = self._labels(y)
        config = getattr(self, "config", None)
        kernel = _or_linear(self.kernel)
        n_components = None
        if config is not None:
            other = kernel_mismatch(kernel, config)
            if other is not None:
                raise ValueError(other)
            n_components = run_solver_params(config)[1]["n_components"]
            if (n_components is None) != (self.centres is None):
                raise ValueError(
                    f"the run's n_components={n_components!r} "
                    + ("needs the Nystroem centres; the certificate holds none"
                       if self.centres is None else "uses no Nystroem centres; the "
                       "certificate holds some"))
        precomputed = getattr(kernel, "precomputed", False)
        mapped = getattr(kernel, "feature_map", None) is not None and not precomputed
        representation = "primal" if (mapped or self.centres is not None) else "gram"
        if self.representation != representation:
            raise ValueError(f"the certificate's representation {self.representation!r} is "
                             f"not the run's, {representation!r}")
        idx = self.train_index
        if idx is not None:
            idx = np.asarray(idx)
            if idx.ndim != 1 or idx.dtype.kind not in "iu" or idx.size == 0 \
                    or np.any(np.diff(idx) <= 0) or idx[0] < 0 or idx[-1] >= yv.shape[0]:
                raise ValueError("train_index must be increasing row indices of X")
        n_all = yv.shape[0]
        shape = tuple(getattr(X, "shape", np.shape(X)))
        known = all(isinstance(d, (int, np.integer)) for d in shape)  # dask: nan unknown
        if precomputed and known and (len(shape) != 2 or shape[0] != shape[1]):
            # a column of K was broadcast into a square matrix, or numpy's matmul error
            # escaped (found by review)
            raise ValueError(f"kernel='precomputed' needs the square Gram matrix "
                             f"K(X_train, X_train) as X, got shape {shape}")
        if config is not None:
            why = _split_reason(config, idx, n_all)
            if why is not None:
                raise ValueError(why)
        if idx is not None:
            X = R.read_X(local_matrix(X))[idx]
            if precomputed:
                X = X[:, idx]
            yv = yv[idx]
        if representation == "gram":
            Xl = R.read_X(local_matrix(X))
            K, error = exact_gram(kernel, Xl, precomputed)
            check_gram_budget(K.shape[0], budget,
                              "the Newton-decrement check of an exact kernel",
                              role="referee")
            emap = ExactKernelMap(K, keep_basis=True, role="referee", entry_error=error)
            Phi = np.ascontiguousarray(emap.features)
            if chain.shape[1] != Phi.shape[0]:
                raise ValueError("the representer weights must have one entry per training row")
            # theta^k = Phi^T beta^k for every link
            form = ("support", None if precomputed else Xl, emap, K)
            return R.RowBlocks(Phi), yv, chain @ Phi, np.zeros(chain.shape[0]), form
        if self.centres is not None:
            C = R.float64_block(check_X(self.centres, name="the Nystroem centres"))
            d = X.shape[1]
            if C.shape[1] != d or (n_components is not None
                                   and not 1 <= C.shape[0] <= n_components):
                raise ValueError(
                    f"the certificate holds {C.shape[0]} Nystroem centres of {C.shape[1]} "
                    f"features; the run's n_components={n_components!r} allows at most "
                    f"that many centres of X's {d} features")
            if config is not None:
                why = _centres_reason(config, C, X, n_all, n_components)
                if why is not None:
                    raise ValueError(why)
            # P = K_CC^{-1/2}, as the run's map computed it from the same centres
            Kcc = gram_matrix(kernel, C, C)
            P, _ = reuse(Kcc, "referee nystroem", nystroem_projection)
            form = ("nystroem", C, P, Kcc)

            def fmap(B):
                return gram_matrix(kernel, B, C) @ P
        elif isinstance(kernel, LinearKernel):
            fmap, form = None, ("map",)
        else:
            # a kernel approximation's fit rebuilt from its parameters (and fitted on all
            # the training rows when a loaded result keeps its parameters only)
            fmap, form = referee_kernel(kernel, X).feature_map, ("map",)
        blocks = R.RowBlocks(X, fmap)
        p = chain.shape[1] - int(self.fit_intercept)
        bs = chain[:, p] if self.fit_intercept else np.zeros(chain.shape[0])
        return blocks, yv, np.ascontiguousarray(chain[:, :p]), bs, form

    def _predictor_reason(self, form, thetas, slack=0.0):
        """None when the stored fingerprint of the model (``predictor``) is the one of the
        chain's last link in the run's form (``_problem``), else why not.

        The fingerprint binds the coefficients c of a kernel expansion entry by entry, the
        chain only through theta: c differs from the referee's model of theta^t, c* =
        V V^T beta^t (an exact kernel's beta in the span of the eigen-directions the
        referee's map keeps: all but an eigenvalue computed as exactly 0) or P theta^t
        (Nystroem centres, the referee's own P = K_CC^{-1/2}), by a residual r that the
        referee's eigendecomposition does not see (found by review: a vector of the
        numerical null space of K_CC, or of K when its map dropped small eigenvalues,
        added to c changed the predictions at new points while theta stayed the same).
        What r changes at any x is at most sqrt(k(x, x)) ||r||_K, ||r||_K^2 = r^T K r
        (Cauchy-Schwarz in the RKHS), so the referee bounds ||r||_K from above in float64,

            ||r||_K^2 <= fl(r^T K r) + (4 n + 1000) u ||K||_F ||r||^2

        (the rounding of the quadratic form, n terms, and of K's entries, with room), and
        requires it within ``slack`` (the check passes eps_t / sqrt(lam), eps_t the last
        link's target) or ``_EXPANSION_RTOL`` ||theta^t||, the larger. The claim itself
        leaves that much open: H >= lam I, so a decrement <= eps_t puts theta^t within
        about 2 eps_t / sqrt(lam) of the subproblem's optimum in RKHS norm, and the model
        predicts within sqrt(k(x, x)) times the sum at any x. c* depends on the
        eigenvectors near a cut-off (K_CC's; K's, when its map was truncated), which rotate
        with BLAS threads or machines (found by review: genuine runs refused when the
        solver's decomposition was of K plus a perturbation of 0.25-0.5 n u ||K||; with the
        slack, none up to 2 n u ||K|| in 25 problems each); a null vector large enough to matter is refused, however its
        quadratic form rounds. An exact kernel's map keeps every direction of a non-zero
        eigenvalue, so there r is rounding, and a vector of K's numerical null space added
        to beta^t moves theta^t by its norm in K_abs = V |S| V^T: the decrement of the last
        link sees it (by at least sqrt(lam) times that norm; added to every link, link 1
        sees it, theta^0 = 0 being fixed)."""
        from ...certificates import predictor_fingerprint

        if self.predictor is None:
            return None  # a certificate that holds no model: the claim about the data only
        if form[0] in ("support", "nystroem"):
            if form[0] == "support":
                support, emap, K = form[1], form[2], form[3]
                c = self.chain[-1]
                V = emap.eigenvectors()  # orthonormal columns, every kept direction
                ref = V @ (V.T @ c)
                what = "the representer weights beta^t of the chain's last link"
            else:
                support, P, K = form[1], form[2], form[3]
                c = self.support_coef
                if c is None or c.shape != (support.shape[0],) or not np.all(np.isfinite(c)):
                    return ("the certificate holds no finite coefficients of its "
                            f"{support.shape[0]} Nystroem centres (support_coef)")
                if thetas.shape[1] != P.shape[1]:
                    return (f"the chain has {thetas.shape[1]} coefficients, the Nystroem map "
                            f"of its centres {P.shape[1]}")
                ref = P @ thetas[-1]
                what = "the stored coefficients of the Nystroem centres (support_coef)"
            r = c - ref
            quad = float(r @ (K @ r))
            room = (4 * K.shape[0] + 1000) * _U * float(np.linalg.norm(K)) * float(r @ r)
            gap = math.sqrt(max(quad, 0.0) + room)
            allowed = max(_EXPANSION_RTOL * float(np.linalg.norm(thetas[-1])), slack)
            if not gap <= allowed:
                return (f"{what} are not the model of theta^t the referee derives (its "
                        f"eigen map of the kernel): the difference has RKHS norm up to "
                        f"{gap:.3g} > {allowed:.3g}, the larger of {_EXPANSION_RTOL:g} "
                        "||theta^t|| and the last link's target / sqrt(lam)")
            beta = c
        else:
            support, beta = None, thetas[-1]
        if predictor_fingerprint(support, beta) != self.predictor:
            return ("the stored predictor (fingerprint) is not the model of the chain's last "
                    "link on X")
        return None

    @in_small_pages
    def check(self, X, y, sample_weight=None):
        """The verdict on the chain from (X, y) (and the run's weights, which a weighted
        run needs). An exact kernel's claim is about every eigen-direction of the
        referee's own decomposition of K (``ExactKernelMap``): no cut-off of the spectrum,
        so no other cut to try (two decompositions of K differ by rounding in every
        direction, not by which directions they keep)."""
        from ...certificates import NotPositiveSemidefiniteError, as_data

        kind = self.kind
        # X that is not a finite numeric matrix raises (check_X names it), as in the
        # other certificates' checks, before any verdict; data that can be read but do
        # not fit the claim are a rejection. The validated X is read from here on (a list
        # reached X.shape as a list: AttributeError, found by review)
        X = as_data(X, self)
        if self.loss == "logistic":
            # labels outside the run's classes raise (labels_pm's ValueError), as in every
            # certificate's check (a strict verify)
            self._labels(y)
        if sample_weight is None and getattr(self, "weighted", False):
            return Verdict.reject(
                kind, "the certificate is of a weighted run: pass its weights, check(X, y, "
                "sample_weight=w) (verify likewise)")
        try:
            blocks, yv, thetas, bs, form = self._problem(X, y)
        except (NotPositiveSemidefiniteError, R.UnreadableX):
            # a kernel that is not PSD on the data, or an X that cannot be read (a dask
            # array's chunk with NaN), is an error, not a verdict
            raise
        except ValueError as exc:
            return Verdict.reject(kind, f"the data do not define the claim: {exc}")
        n = blocks.n
        if yv.shape != (n,):
            return Verdict.reject(kind, f"y has {yv.shape[0]} entries, X {n} rows")
        weight = None
        if sample_weight is not None:
            try:
                weight = self._run_weights(y, sample_weight)
            except (TypeError, ValueError) as exc:
                return Verdict.reject(kind, str(exc))
        t = thetas.shape[0]
        step = getattr(self, "prox_step", None)
        if step is not None and step != t:
            return Verdict.reject(
                kind, f"the chain has {t} links but prox_step is {step!r}")
        try:
            # lam=None is 1/n of all the run's rows (t="auto" trains on a split of them)
            n_rows = n if self.train_index is None else np.asarray(y).ravel().shape[0]
            th = self._targets(n_rows, t)
        except (TypeError, ValueError) as exc:
            return Verdict.reject(
                kind, f"the run's configuration does not define the claim: {exc}")
        for name in ("loss", "lam", "fit_intercept"):
            if getattr(self, name) != th[name]:
                return Verdict.reject(
                    kind, f"the certificate's {name}={getattr(self, name)!r} is not the run's "
                    f"{name}={th[name]!r}")
        if not np.all(np.isfinite(self.chain)):
            return Verdict.reject(kind, "the coefficients are not finite")
        if not 0.0 < th["lam"] < math.inf:
            return Verdict.reject(kind, f"lam={th['lam']!r} must be positive and finite")
        with np.errstate(over="ignore", invalid="ignore"):
            why = self._predictor_reason(form, thetas,
                                         th["targets"][-1] / math.sqrt(th["lam"]))
        if why is not None:
            return Verdict.reject(kind, why)
        margin, steer, last = math.inf, {}, None
        # the last link first: its verdict is the one reported (its recomputed decrement,
        # no shortcut), and its Hessian steers the directions of the earlier links
        for k in [t, *range(1, t)]:
            target = th["targets"][k - 1]
            try:
                central, nu_up = _link_bounds(blocks, yv, thetas, bs, k, th["lam"], th["loss"],
                                              th["fit_intercept"],
                                              enough=target if k < t else None, steer=steer,
                                              weight=weight, witness=self._witness(k),
                                              target=target)
                if k < t and not nu_up <= target:
                    # steered by the last link's Hessian the bound may be too loose: the
                    # link's own Hessian before any verdict
                    central, nu_up = _link_bounds(blocks, yv, thetas, bs, k, th["lam"],
                                                  th["loss"], th["fit_intercept"],
                                                  weight=weight)
                if not nu_up <= target and central < target and R.LONG_UNIT < R.UNIT:
                    # recomputed within the target, not proven: the float64 sums' rounding
                    # may be the bound's floor (large residuals that cancel), the gradient
                    # in long double before any verdict (where long double is wider)
                    central, nu_up = _link_bounds(blocks, yv, thetas, bs, k, th["lam"],
                                                  th["loss"], th["fit_intercept"],
                                                  steer=steer if k == t else None,
                                                  weight=weight, precise=True,
                                                  witness=self._witness(k), target=target)
            except R.UnreadableX:
                raise
            except ValueError as exc:
                return Verdict.reject(kind, f"the data do not define the claim: {exc}")
            except OverflowError:
                return Verdict.reject(
                    kind, f"link {k} of {t}: the bound of the recomputed Newton decrement "
                    "overflows float64 (sample weights or entries of X too large); rescale them",
                    value=math.inf, threshold=target, rounding=math.inf)
            rounding = nu_up - central if math.isfinite(nu_up) else math.inf
            margin = min(margin, target - nu_up)
            if not nu_up <= target:
                return Verdict(
                    False, kind, value=central, threshold=target, rounding=rounding,
                    margin=target - nu_up,
                    reason=f"link {k} of {t} (theta^{k} on the subproblem centred at "
                           f"theta^{k - 1}): Newton decrement above its target (with the "
                           "rounding bound)")
            if k == t:
                last = (central, target, rounding)
        central, target, rounding = last
        return Verdict(True, kind, value=central, threshold=target, rounding=rounding,
                             margin=margin)

