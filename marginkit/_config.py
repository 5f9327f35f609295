"""``Config``: a frozen, validated description of one ``solve`` call.

The constraint table ``CONFIG_TABLE`` is declarative (field -> ``Param``); a test checks
that it covers exactly the dataclass fields and the keywords of ``marginkit.solve``.
"""
import dataclasses
import importlib.util
import numbers
from typing import Any, Optional

import numpy as np

from ._validation import Param


class _Constraint:
    """A constraint object of a ``CONFIG_TABLE`` row (the ``validator`` of its ``Param``),
    in the manner of scikit-learn's ``_param_validation``: ``value`` is accepted as it is
    or normalized (a stop spec becomes a tuple, a dict is copied), else a ``TypeError`` or
    ``ValueError`` names the field and what it takes (``str(constraint)``, as the messages
    before this table read)."""

    def __call__(self, value, name, owner):  # pragma: no cover - abstract
        raise NotImplementedError


class PluginSpec(_Constraint):
    """A registered name, a plug-in instance or class of ``kind`` (a kernel may also be
    any callable ``k(A, B)``)."""

    def __init__(self, kind):
        self.kind = kind

    def __str__(self):
        return (f"a registered name or a {self.kind.capitalize()} instance "
                f"(see marginkit.list_plugins()['{self.kind}'])")

    def __call__(self, value, name, owner):
        from . import plugins

        base = {"solver": plugins.Solver, "kernel": plugins.Kernel,
                "smoother": plugins.Smoother}[self.kind]
        if isinstance(value, str) or isinstance(value, base):
            return value
        if isinstance(value, type) and issubclass(value, base):
            return value
        if self.kind == "kernel" and callable(value) and not isinstance(value, type):
            return value
        raise TypeError(f"{owner}: {name}={value!r} must be {self}")


class StopSpec(_Constraint):
    """A rule name, a ``(name, params)`` pair, a ``StoppingRule`` instance, or a non-empty
    list or tuple of those; normalized to a tuple of entries."""

    def __str__(self):
        return "a rule name, a (name, params) pair, a StoppingRule instance, or a list of them"

    def _entry(self, spec, name, owner):
        from . import plugins

        if isinstance(spec, (str, plugins.StoppingRule)):
            return spec
        if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], str) \
                and isinstance(spec[1], dict):
            return (spec[0], dict(spec[1]))
        raise TypeError(
            f"{owner}: {name} entry {spec!r} must be a rule name, a (name, params) pair "
            "or a StoppingRule instance"
        )

    def __call__(self, value, name, owner):
        if isinstance(value, list):
            if not value:
                raise ValueError(f"{owner}: {name}=[] names no rule; pass None for the solver's "
                                 "defaults")
            return tuple(self._entry(s, name, owner) for s in value)
        if isinstance(value, tuple) and not (len(value) == 2 and isinstance(value[1], dict)):
            return tuple(self._entry(s, name, owner) for s in value)
        return (self._entry(value, name, owner),)


class ParamDict(_Constraint):
    """A dict of parameters keyed by name (copied)."""

    def __str__(self):
        return "a dict of parameters keyed by name (str)"

    def __call__(self, value, name, owner):
        if not isinstance(value, dict):
            raise TypeError(f"{owner}: {name} must be a dict of parameters, got "
                            f"{type(value).__name__}")
        bad = [k for k in value if not isinstance(k, str)]
        if bad:
            raise TypeError(f"{owner}: {name} keys must be parameter names (str), got {bad}")
        return dict(value)


class Seed(_Constraint):
    """An int >= 0 (as a Python int), a numpy Generator or RandomState."""

    def __str__(self):
        return "None, an int >= 0 or a numpy Generator"

    def __call__(self, value, name, owner):
        if isinstance(value, (np.random.Generator, np.random.RandomState)):
            return value
        if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
            raise TypeError(f"{owner}: {name}={value!r} must be {self}")
        if value < 0:
            raise ValueError(f"{owner}: {name}={value} must be >= 0")
        return int(value)


class Level(_Constraint):
    """An int >= 0 (a bool counts: ``verbose=True`` is level 1)."""

    def __str__(self):
        return "an int >= 0 (or a bool)"

    def __call__(self, value, name, owner):
        if not isinstance(value, (numbers.Integral, np.integer)):
            raise TypeError(f"{owner}: {name}={value!r} must be {self}")
        if value < 0:
            raise ValueError(f"{owner}: {name}={value} must be >= 0")
        return int(value)


class ProgressBarFlag(_Constraint):
    """A bool; True needs ``tqdm`` (an optional dependency)."""

    def __str__(self):
        return "a bool"

    def __call__(self, value, name, owner):
        if value and importlib.util.find_spec("tqdm") is None:
            raise ValueError(f"{owner}: {name}=True needs tqdm, which is not installed: "
                             "pip install tqdm (or marginkit[progress]); verbose=1 prints "
                             "progress lines without it")
        return bool(value)


class Callback(_Constraint):
    """A callable ``fn(state) -> bool``."""

    def __str__(self):
        return "a callable fn(state) -> bool"

    def __call__(self, value, name, owner):
        if not callable(value):
            raise TypeError(f"{owner}: {name} must be callable as fn(state) -> bool, got "
                            f"{value!r}")
        return value


CONFIG_TABLE = {
    "solver": Param("snkp", validator=PluginSpec("solver"),
                    doc="registry name or Solver instance"),
    "kernel": Param("linear", validator=PluginSpec("kernel"),
                    doc="registry name, Kernel instance or callable k(A, B)"),
    "kernel_params": Param(None, allow_none=True, validator=ParamDict(),
                           doc="parameters of the kernel (e.g. {'gamma': 0.5})"),
    "smoother": Param(None, allow_none=True, validator=PluginSpec("smoother"),
                      doc="registry name or Smoother instance; None: the solver's default"),
    "stop": Param(None, allow_none=True, validator=StopSpec(),
                  doc="rule name, (name, params), instance, or a list; None: solver defaults"),
    "max_iter": Param(None, types=numbers.Integral, low=1, allow_none=True,
                      doc="iteration cap; None: the solver's default"),
    "random_state": Param(None, allow_none=True, validator=Seed(),
                          doc="seed or numpy Generator (an integer also seeds a kernel "
                              "that draws at random and has no random_state of its own)"),
    "verbose": Param(0, validator=Level(), doc="0 silent, 1 progress lines, 2 every iteration"),
    "progress_bar": Param(False, types=bool, validator=ProgressBarFlag(),
                          doc="a tqdm progress bar of the run (needs tqdm)"),
    "callback": Param(None, allow_none=True, validator=Callback(),
                      doc="fn(state) called between iterations; returning True stops the run"),
    "time_limit": Param(None, types=numbers.Real, low=0, low_open=True, allow_none=True,
                        doc="wall-clock seconds from the start of the run, its set-up "
                        "included; adds the time_limit stopping rule"),
    "memory_budget": Param(2.0 * 2**30, types=numbers.Real, low=0, low_open=True,
                           doc="bytes a solver may use for kernel matrices and working "
                               "vectors"),
    "warn": Param(None, types=bool, allow_none=True,
                  doc="a marginkit.ConvergenceWarning when the run ends on max_iter or "
                      "time_limit without its claim; None: when verbose >= 1"),
    "interrupt": Param("raise", types=str, options=("raise", "return"),
                       doc="Ctrl-C: 'raise' KeyboardInterrupt (Python's convention) or "
                           "'return' the partial Result with status 'interrupted'"),
    "solver_params": Param(dataclasses.MISSING, validator=ParamDict(),
                           doc="parameters of the solver (e.g. {'eps': 1e-6})"),
}


@dataclasses.dataclass(frozen=True)
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
    progress_bar: bool = False
    callback: Any = None
    time_limit: Optional[float] = None
    memory_budget: float = 2.0 * 2**30
    warn: Optional[bool] = None
    interrupt: str = "raise"
    solver_params: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        # every field through its row of CONFIG_TABLE (frozen: set by object.__setattr__)
        for f in dataclasses.fields(self):
            value = CONFIG_TABLE[f.name].check(getattr(self, f.name), f.name, owner="Config")
            object.__setattr__(self, f.name, value)

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


#: the field names of ``Config``
FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(Config))
