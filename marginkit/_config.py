"""``Config``: a frozen, validated description of one ``solve`` call.

The constraint table ``CONFIG_TABLE`` is declarative (field -> ``Param``); a test checks
that it covers exactly the dataclass fields and the keywords of ``marginkit.solve``.
"""
import dataclasses
import inspect
import numbers
from typing import Any, Optional

import numpy as np

from ._validation import Param


def _check_plugin_spec(kind):
    def check(value, name, owner):
        if isinstance(value, str):
            return value
        from . import plugins

        base = {"solver": plugins.Solver, "kernel": plugins.Kernel,
                "smoother": plugins.Smoother}[kind]
        if kind == "kernel" and callable(value) and not isinstance(value, type):
            return value  # a plug-in instance or any callable k(A, B)
        if isinstance(value, base):
            return value
        if isinstance(value, type) and issubclass(value, base):
            return value
        raise TypeError(
            f"{owner}: {name}={value!r} must be a registered name or a {base.__name__} "
            f"instance (see marginkit.list_plugins()['{kind}'])"
        )

    return check


def _check_stop(value, name, owner):
    from . import plugins

    def one(spec):
        if isinstance(spec, str) or isinstance(spec, plugins.StoppingRule):
            return spec
        if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], str) \
                and isinstance(spec[1], dict):
            return (spec[0], dict(spec[1]))
        raise TypeError(
            f"{owner}: {name} entry {spec!r} must be a rule name, a (name, params) pair "
            "or a StoppingRule instance"
        )

    if isinstance(value, list):
        if not value:
            raise ValueError(f"{owner}: {name}=[] names no rule; pass None for the solver's defaults")
        return tuple(one(s) for s in value)
    if isinstance(value, tuple) and not (len(value) == 2 and isinstance(value[1], dict)):
        return tuple(one(s) for s in value)
    return (one(value),)


def _check_dict(value, name, owner):
    if not isinstance(value, dict):
        raise TypeError(f"{owner}: {name} must be a dict of parameters, got {type(value).__name__}")
    bad = [k for k in value if not isinstance(k, str)]
    if bad:
        raise TypeError(f"{owner}: {name} keys must be parameter names (str), got {bad}")
    return dict(value)


def _check_random_state(value, name, owner):
    if type(value) is int and value >= 0:  # the common case, without the ABC checks
        return value
    if isinstance(value, (np.random.Generator, np.random.RandomState)):
        return value
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
        raise TypeError(f"{owner}: {name}={value!r} must be None, an int >= 0 or a numpy Generator")
    if value < 0:
        raise ValueError(f"{owner}: {name}={value} must be >= 0")
    return int(value)


def _check_verbose(value, name, owner):
    if type(value) is int and value >= 0:  # the common case, without the ABC check
        return value
    if not isinstance(value, (numbers.Integral, np.integer)):
        raise TypeError(f"{owner}: {name}={value!r} must be an int >= 0 (or a bool)")
    if value < 0:
        raise ValueError(f"{owner}: {name}={value} must be >= 0")
    return int(value)


def _check_callback(value, name, owner):
    if not callable(value):
        raise TypeError(f"{owner}: {name} must be callable as fn(state) -> bool, got {value!r}")
    return value


CONFIG_TABLE = {
    "solver": Param("snkp", validator=_check_plugin_spec("solver"),
                    doc="registry name or Solver instance"),
    "kernel": Param("linear", validator=_check_plugin_spec("kernel"),
                    doc="registry name, Kernel instance or callable k(A, B)"),
    "kernel_params": Param(None, allow_none=True, validator=_check_dict,
                           doc="parameters of the kernel (e.g. {'gamma': 0.5})"),
    "smoother": Param(None, allow_none=True, validator=_check_plugin_spec("smoother"),
                      doc="registry name or Smoother instance; None: the solver's default"),
    "stop": Param(None, allow_none=True, validator=_check_stop,
                  doc="rule name, (name, params), instance, or a list; None: solver defaults"),
    "max_iter": Param(None, types=numbers.Integral, low=1, allow_none=True,
                      doc="iteration cap; None: the solver's default"),
    "random_state": Param(None, allow_none=True, validator=_check_random_state,
                          doc="seed or numpy Generator"),
    "verbose": Param(0, validator=_check_verbose, doc="0 silent, 1 progress lines, 2 every iteration"),
    "callback": Param(None, allow_none=True, validator=_check_callback,
                      doc="fn(state) called between iterations; returning True stops the run"),
    "time_limit": Param(None, types=numbers.Real, low=0, low_open=True, allow_none=True,
                        doc="wall-clock seconds; adds the time_limit stopping rule"),
    "memory_budget": Param(2.0 * 2**30, types=numbers.Real, low=0, low_open=True,
                           doc="bytes a solver may use for kernel matrices and working "
                               "vectors"),
    "interrupt": Param("raise", types=str, options=("raise", "return"),
                       doc="Ctrl-C: 'raise' KeyboardInterrupt (Python's convention) or "
                           "'return' the partial Result with status 'interrupted'"),
    "solver_params": Param(dataclasses.MISSING, validator=_check_dict,
                           doc="parameters of the solver (e.g. {'eps': 1e-6})"),
}


class _FreshDict:
    """The default of solver_params: a new empty dict per instance (shown as ``{}``)."""

    def __repr__(self):
        return "{}"


_FRESH_DICT = _FreshDict()


@dataclasses.dataclass(frozen=True, init=False)
class Config:
    """Everything that defines a ``marginkit.solve`` run (frozen and validated).

    ``mk.solve(X, y, config=cfg)`` and ``mk.solve(X, y, **fields)`` are the same call;
    unknown keywords of ``solve`` become ``solver_params``.

    Examples
    --------
    >>> import marginkit as mk
    >>> cfg = mk.Config(solver="isnkpvn", kernel="rbf", kernel_params={"gamma": 0.5})
    >>> cfg.replace(max_iter=100).max_iter
    100
    """

    solver: Any = "snkp"
    kernel: Any = "linear"
    kernel_params: Optional[dict] = None
    smoother: Any = None
    stop: Any = None
    max_iter: Optional[int] = None
    random_state: Any = None
    verbose: int = 0
    callback: Any = None
    time_limit: Optional[float] = None
    memory_budget: float = 2.0 * 2**30
    interrupt: str = "raise"
    solver_params: dict = dataclasses.field(default_factory=dict)

    def __init__(self, solver="snkp", kernel="linear", kernel_params=None, smoother=None,
                 stop=None, max_iter=None, random_state=None, verbose=0, callback=None,
                 time_limit=None, memory_budget=2.0 * 2**30, interrupt="raise",
                 solver_params=_FRESH_DICT):
        # what the dataclass __init__ of a frozen class does (every field set, then
        # __post_init__), the fields written in one update of the instance dict instead
        # of one object.__setattr__ each; the defaults are checked against the fields below
        if solver_params is _FRESH_DICT:
            solver_params = {}
        self.__dict__.update(solver=solver, kernel=kernel, kernel_params=kernel_params,
                             smoother=smoother, stop=stop, max_iter=max_iter,
                             random_state=random_state, verbose=verbose, callback=callback,
                             time_limit=time_limit, memory_budget=memory_budget,
                             interrupt=interrupt, solver_params=solver_params)
        self.__post_init__()

    def __post_init__(self):
        fields = self.__dict__  # what the frozen __init__ wrote (object.__setattr__)
        for name, spec, default in _FIELD_SPECS:
            value = fields[name]
            if value is not default:  # the default itself passed its row once, at import
                fields[name] = spec.check(value, name, owner="Config")

    def replace(self, **changes):
        """A modified copy (validated again)."""
        unknown = sorted(set(changes) - FIELD_NAMES)
        if unknown:
            raise TypeError(f"Config.replace: unknown field(s) {unknown}; fields: {sorted(CONFIG_TABLE)}")
        return dataclasses.replace(self, **changes)

    def to_dict(self):
        """JSON-friendly description (plug-in instances by their repr)."""
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "callback":
                v = None if v is None else repr(v)
            elif f.name == "random_state" and not (v is None or isinstance(v, int)):
                v = repr(v)
            elif f.name in ("solver", "kernel", "smoother") and not (v is None or isinstance(v, str)):
                v = getattr(v, "name", None) or repr(v)
            elif f.name == "stop" and v is not None:
                v = [s if isinstance(s, (str, tuple)) else repr(s) for s in v]
            out[f.name] = v
        return out


#: the field names of ``Config``; per field its row of ``CONFIG_TABLE`` and its default
#: when the row accepts that default unchanged (checked here, once: a field still holding
#: the default object needs no check per instance), else a marker no value is
FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(Config))


def _check_init_signature():
    # Config.__init__ takes the fields in their order with their defaults
    params = list(inspect.signature(Config.__init__).parameters.values())[1:]
    fields = dataclasses.fields(Config)
    assert [p.name for p in params] == [f.name for f in fields], "Config.__init__ fields"
    for p, f in zip(params, fields):
        if f.default is not dataclasses.MISSING:
            assert p.default == f.default, f"Config.__init__ default of {f.name}"
        else:
            assert p.default is _FRESH_DICT and f.default_factory is dict, f.name


_check_init_signature()
_NO_DEFAULT = object()


def _checked_default(f):
    if f.default is dataclasses.MISSING:
        return _NO_DEFAULT
    checked = CONFIG_TABLE[f.name].check(f.default, f.name, owner="Config")
    return f.default if checked is f.default else _NO_DEFAULT


_FIELD_SPECS = tuple((f.name, CONFIG_TABLE[f.name], _checked_default(f))
                     for f in dataclasses.fields(Config))
