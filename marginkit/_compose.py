"""Composition of a run: the plug-ins of a ``Config`` resolved from the registries and
checked against each other before anything runs (``compose``), and the thresholds the
run's claims are checked against (``claim_thresholds``, read by the certificates).

Below the run loop (``marginkit._api``) and the certificates in the module graph: it
imports the plug-in base classes, the registries, ``Config`` and the referee's helpers.
"""
from . import plugins
from ._config import Config
from ._referee import stopping_rules
from ._registry import REGISTRIES, get_plugin

__all__ = ["compose", "resolve_kernel", "resolve_stop", "claim_thresholds"]


def _instantiate(kind, spec, params=None):
    params = params or {}  # read only (unpacked into the constructor's own dict)
    obj = REGISTRIES[kind].get(spec) if isinstance(spec, str) else spec
    if isinstance(obj, type):
        return obj(**params)
    if params:
        if isinstance(obj, plugins.Plugin):
            return type(obj)(**{**obj.params, **params})
        raise TypeError(f"{kind} parameters {sorted(params)} given for a plug-in instance {obj!r}")
    return obj


def resolve_kernel(kernel, kernel_params=None):
    """A Kernel instance from a name, class, instance or plain callable ``k(A, B)``."""
    if isinstance(kernel, str) or isinstance(kernel, type):
        return _instantiate("kernel", kernel, kernel_params)
    if isinstance(kernel, plugins.Kernel):
        return _instantiate("kernel", kernel, kernel_params)
    if callable(kernel):
        cls = get_plugin("kernel", "callable")
        return cls(function=kernel, **(kernel_params or {}))
    raise TypeError(f"kernel={kernel!r} must be a registered name, a Kernel or a callable k(A, B)")


def resolve_stop(stop):
    rules = []
    for spec in stop:
        if isinstance(spec, plugins.StoppingRule):
            rules.append(spec)
        elif isinstance(spec, str):
            rules.append(_instantiate("stopping", spec))
        else:
            name, params = spec
            rules.append(_instantiate("stopping", name, params))
    return rules


def _compatible(kind, attrs):
    names = []
    for name in REGISTRIES[kind].names():
        obj = REGISTRIES[kind].get(name)
        if all(hasattr(obj, a) for a in attrs):
            names.append(name)
    return names


def _rule_fits(cls, provides):
    """Whether the rule ``cls`` fits a solver that provides ``provides``: True, False, or
    "params" when what it requires depends on its parameters (``tolerance``'s
    ``attribute``) and its defaults do not fit."""
    req = getattr(cls, "requires", ())
    if isinstance(req, property):  # depends on the rule's parameters (e.g. tolerance)
        if cls.__module__.partition(".")[0] != "marginkit":
            return True  # a plug-in's rule is not built to word a message (review)
        try:
            req = cls().requires
        except (TypeError, ValueError):  # a required parameter: no defaults to try
            return "params"
        return True if set(req) <= provides else "params"
    return set(req) <= provides


def compose(config):
    """Resolve the plug-ins of ``config`` and check they fit together.

    Returns ``(solver, kernel, smoother, rules, max_iter)``, the kernel being the one the
    run works on (``Kernel.for_run``). Raises ``ValueError`` naming the missing piece and
    the compatible registered choices.
    """
    solver = _instantiate("solver", config.solver, config.solver_params)
    sname = solver.name or type(solver).__name__
    kernel = resolve_kernel(config.kernel, config.kernel_params)
    for_run = getattr(kernel, "for_run", None)
    if for_run is not None:
        # a kernel fitted to data is fitted on a private copy: the run's own
        kernel = for_run(config)

    need = getattr(solver, "requires", None) or {}  # read only
    smoother = None
    if "smoother" in need or config.smoother is not None:
        spec = config.smoother if config.smoother is not None else solver.default_smoother
        if spec is None:
            raise ValueError(f"solver {sname!r} needs a smoother; pass smoother=... "
                             f"(registered: {REGISTRIES['smoother'].names()})")
        smoother = _instantiate("smoother", spec)
        if "smoother" not in need and getattr(solver, "default_smoother", None) is None:
            # a smoother the solver never reads (found by review: taken silently)
            takers = [n for n in REGISTRIES["solver"].names()
                      if "smoother" in (getattr(REGISTRIES["solver"].get(n), "requires", None)
                                        or {})]
            raise ValueError(f"solver {sname!r} takes no smoother (smoother={spec!r}); pass "
                             f"smoother=None, or a solver that smooths: {takers}")
        missing = [a for a in need.get("smoother", ()) if not hasattr(smoother, a)]
        if missing:
            raise ValueError(
                f"solver {sname!r} needs a smoother with {missing} (closed-form minimizer over "
                f"the simplex); smoother {getattr(smoother, 'name', smoother)!r} lacks it. "
                f"Compatible smoothers: {_compatible('smoother', need.get('smoother', ()))}"
            )
    missing = [a for a in need.get("kernel", ()) if getattr(kernel, a, None) is None]
    if missing:
        raise ValueError(
            f"solver {sname!r} needs a kernel with {missing} (an explicit feature map); "
            f"kernel {getattr(kernel, 'name', kernel)!r} has none. Compatible kernels: "
            f"{_compatible('kernel', need.get('kernel', ()))}"
        )

    rules, max_iter = _rules_and_cap(config, solver)
    provides = {"n_iter", "elapsed", *solver.provides}
    for rule in rules:
        if callable(getattr(rule, "reset", None)):
            raise TypeError(
                f"stopping rule {rule.name or type(rule).__name__!r} defines reset(problem, "
                "state), which marginkit does not call: a rule reads the state and never "
                "writes into it; a solver reads what it needs of the rules from problem.stop "
                "(their params and triggers). Remove reset"
            )
        missing = [a for a in rule.requires if a not in provides]
        if missing:
            fits = {n: _rule_fits(REGISTRIES["stopping"].get(n), provides)
                    for n in REGISTRIES["stopping"].names()}
            ok = [n for n, f in fits.items() if f is True]
            other = [n for n, f in fits.items() if f == "params"]
            also = (f"; with a state attribute it provides ({sorted(provides)}) as their "
                    f"parameter: {other}") if other else ""
            raise ValueError(
                f"stopping rule {rule.name or type(rule).__name__!r} needs {missing}, which solver "
                f"{sname!r} does not provide; compatible rules for {sname!r}: {ok}{also}"
            )
    return solver, kernel, smoother, rules, max_iter


def _rules_and_cap(config, solver):
    """The stopping rules of a run of ``solver`` with ``config`` and its iteration cap."""
    stop = config.stop if config.stop is not None else tuple(solver.default_stop)
    rules = resolve_stop(stop)
    if config.time_limit is not None:
        rules.append(_instantiate("stopping", "time_limit", {"seconds": config.time_limit}))
    max_iter = config.max_iter if config.max_iter is not None else solver.default_max_iter
    return rules, int(max_iter)


def resolve_defaults(config, composed, executor, weights=None):
    """``(config, composed)`` with the solver's defaults that depend on the data set before
    the run and recorded in its config (``resolve_config``, given the rows of
    ``executor``: in memory, or the chunks of a dask array where they are held, and the
    sample weights, None for an unweighted run), the plug-ins composed again when it
    changed."""
    solver, kernel, _, rules, _ = composed
    resolve = getattr(solver, "resolve_config", None)
    if resolve is None:
        return config, composed
    resolved = resolve(config, executor, kernel, rules, weights)
    if resolved is config:
        return config, composed
    return resolved, compose(resolved)


def claim_thresholds(config):
    """The thresholds the claims of a run with ``config`` are checked against.

    Returns the dict of the solver's ``claim_thresholds(rules)`` (for a solver without
    that method: ``dual_tol``, the largest eps of the run's ``dual_certificate`` rules
    that give one, or ``{}``; a plug-in's ``dual_tol`` at most that eps), with the run's
    stopping rules resolved as ``compose`` resolves them. Raises ``ValueError`` when the
    configuration cannot be read (a certificate then cannot be checked against it).
    """
    if not isinstance(config, Config):
        raise ValueError(f"the run's configuration is a {type(config).__name__}, not a Config")
    try:
        solver = _instantiate("solver", config.solver, config.solver_params)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the run's configuration does not give the claim's threshold: {exc}") \
            from None
    rules = stopping_rules(config.stop, tuple(solver.default_stop))
    if rules is None:
        raise ValueError("the run's configuration does not give the claim's threshold: its "
                         "stopping rules cannot be read")
    # the eps the run's dual_certificate rules give: the threshold its user configured
    from .stopping import DualCertificate

    eps = [float(r.params["eps"]) for r in rules
           if isinstance(r, DualCertificate) and r.params.get("eps") is not None]
    fn = getattr(solver, "claim_thresholds", None)
    if fn is None:
        # a solver that defines none (a plug-in): the rules' eps (a certificate's own eps
        # is never read: a plug-in's 0.9999999 passed for separable data, found by review)
        return {"dual_tol": max(eps)} if eps else {}
    out = dict(fn(rules))
    if eps and "dual_tol" in out and type(solver).__module__.partition(".")[0] != "marginkit":
        # a plug-in's own threshold, at most what the user's rules allow (found by
        # review: claim_thresholds() of 0.9999999 beside a configured eps of 0.5)
        out["dual_tol"] = min(float(out["dual_tol"]), max(eps))
    return out
