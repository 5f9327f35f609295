"""Plug-in registries: one per kind, decorator registration, lazy entry points.

Modelled on xarray's backend plug-ins: entry points are read on the first lookup
(never at import), cached, a broken plug-in is a warning, and a duplicate name is
refused unless ``overwrite=True``.
"""
import importlib.metadata
import threading
import warnings

from .utils._text import exception_text

KINDS = ("solver", "smoother", "kernel", "stopping")
ENTRY_POINT_GROUPS = {
    "solver": "marginkit.solvers",
    "smoother": "marginkit.smoothers",
    "kernel": "marginkit.kernels",
    "stopping": "marginkit.stopping",
}


#: kind -> the name of its base class in ``marginkit.plugins``
BASES = {"solver": "Solver", "smoother": "Smoother", "kernel": "Kernel",
         "stopping": "StoppingRule"}


class PluginLoadWarning(UserWarning):
    """A third-party plug-in could not be loaded; the rest of marginkit works."""


def _check_kind(kind):
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} is not a plug-in kind; use one of {list(KINDS)}")


class Registry:
    """Name -> plug-in class for one kind, with lazily loaded entry points."""

    def __init__(self, kind):
        _check_kind(kind)
        self.kind = kind
        self.group = ENTRY_POINT_GROUPS[kind]
        self._builtin = {}
        self._items = {}
        self._entry_points_loaded = False
        self.failed = {}  # entry-point name -> "error message"
        self._lock = threading.RLock()

    # -- registration -------------------------------------------------------
    def _named(self, obj, name):
        """Whether ``obj`` already has its name: it is a built-in of any kind, or is
        registered here under another name (the new name is then an alias)."""
        for reg in REGISTRIES.values():
            if any(v is obj for v in reg._builtin.values()):
                return True
        return any(v is obj for key, v in self._items.items() if key != name)

    def check_plugin(self, name, obj):
        """Refuse an ``obj`` that is neither a subclass of this kind's base class
        (``marginkit.plugins.Solver``, ...) nor an instance of one: found by review, ``int``
        or a Kernel registered as a solver failed later, inside ``solve``, with an
        AttributeError."""
        from . import plugins

        base = getattr(plugins, BASES[self.kind])
        if isinstance(obj, base) or (isinstance(obj, type) and issubclass(obj, base)):
            return
        if isinstance(obj, type):
            module = "" if obj.__module__ == "builtins" else obj.__module__ + "."
            what = f"the class {module}{obj.__qualname__}"
        else:
            what = f"a {type(obj).__name__} object"
        other = getattr(obj, "kind", None)
        if isinstance(obj, (plugins.Plugin, type)) and other in KINDS:
            what += f" (a {other} plug-in)"
        raise TypeError(f"cannot register {what} as the {self.kind} {name!r}: a {self.kind} "
                        f"must be a subclass of marginkit.plugins.{base.__name__} (or an "
                        "instance of one)")

    def add(self, name, obj, overwrite=False, _builtin=False):
        """Register ``obj`` under ``name``.

        The first registration names a plug-in (``obj.name``, ``obj.kind``: what results,
        errors and save files report). Registering a plug-in that already has its name
        (a built-in, or a plug-in registered here under another name) adds an alias: the
        name resolves to it, and the name it reports is unchanged. A taken name is
        replaced only with ``overwrite=True``, which changes the registry entry only
        (never the class object it held, built-in or not).
        """
        if not isinstance(name, str) or not name:
            raise TypeError(f"plug-in name must be a non-empty string, got {name!r}")
        self.check_plugin(name, obj)
        with self._lock:
            if name in self._items and not overwrite and self._items[name] is not obj:
                raise ValueError(
                    f"a {self.kind} named {name!r} is already registered; "
                    "pass overwrite=True to replace it"
                )
            if not self._named(obj, name):
                try:
                    obj.name = name
                    obj.kind = self.kind
                except (AttributeError, TypeError):  # e.g. a builtin function
                    pass
            self._items[name] = obj
            if _builtin:
                self._builtin[name] = obj

    def remove(self, name):
        with self._lock:
            self._items.pop(name, None)

    def reset(self):
        """Back to the built-in plug-ins; entry points are read again on next lookup."""
        with self._lock:
            self._items = dict(self._builtin)
            self._entry_points_loaded = False
            self.failed = {}

    # -- entry points -------------------------------------------------------
    def load_entry_points(self, entry_points=None):
        """Load the entry points of this kind's group (once), or the ones given."""
        with self._lock:
            scanning = entry_points is None
            if scanning:
                if self._entry_points_loaded:
                    return
                self._entry_points_loaded = True
                entry_points = importlib.metadata.entry_points(group=self.group)
            for ep in entry_points:
                if ep.name in self._items and ep.name not in self.failed:
                    if self._items[ep.name] is not self._builtin.get(ep.name):
                        continue
                    warnings.warn(
                        f"entry point {ep.value!r} ({self.group}) uses the built-in "
                        f"name {ep.name!r}; the built-in is kept",
                        PluginLoadWarning,
                        stacklevel=3,
                    )
                    continue
                try:
                    obj = ep.load()
                    self.check_plugin(ep.name, obj)  # not a plug-in of this kind: a warning
                except KeyboardInterrupt:
                    if scanning:  # the rest are read on the next lookup
                        self._entry_points_loaded = False
                    raise
                except BaseException as exc:  # noqa: BLE001 - SystemExit too: a broken
                    # third-party plug-in warns, it never ends the process
                    text = exception_text(exc)
                    self.failed[ep.name] = f"{type(exc).__name__}: {text}"
                    warnings.warn(
                        f"could not load {self.kind} plug-in {ep.name!r} from entry point "
                        f"{ep.value!r}: {type(exc).__name__}: {text}",
                        PluginLoadWarning,
                        stacklevel=3,
                    )
                    continue
                self.add(ep.name, obj, overwrite=True)

    # -- lookup -------------------------------------------------------------
    def names(self):
        self.load_entry_points()
        with self._lock:
            return sorted(self._items)

    def get(self, name):
        self.load_entry_points()
        with self._lock:
            try:
                return self._items[name]
            except KeyError:
                pass
            extra = ""
            if name in self.failed:
                extra = f" (its entry point failed to load: {self.failed[name]})"
            raise ValueError(
                f"unknown {self.kind} {name!r}{extra}; registered {self.kind}s: "
                f"{sorted(self._items)}"
            )


REGISTRIES = {kind: Registry(kind) for kind in KINDS}


def register(kind, name, overwrite=False):
    """Class decorator registering a plug-in.

    The object must be a subclass of the kind's base class in ``marginkit.plugins``
    (``Solver``, ``Smoother``, ``Kernel``, ``StoppingRule``) or an instance of one; anything
    else raises ``TypeError``.

    Examples
    --------
    >>> import marginkit as mk
    >>> @mk.register("stopping", "never", overwrite=True)
    ... class Never(mk.plugins.StoppingRule):
    ...     def check(self, state):
    ...         return None
    """
    _check_kind(kind)

    def decorator(obj):
        REGISTRIES[kind].add(name, obj, overwrite=overwrite)
        return obj

    return decorator


def _register_builtin(kind, name):
    def decorator(obj):
        REGISTRIES[kind].add(name, obj, _builtin=True)
        return obj

    return decorator


def get_plugin(kind, name):
    """Return the plug-in class (or callable) registered under ``name``."""
    _check_kind(kind)
    return REGISTRIES[kind].get(name)


def list_plugins():
    """``{"solver": [...], "smoother": [...], "kernel": [...], "stopping": [...]}``."""
    return {kind: REGISTRIES[kind].names() for kind in KINDS}


def failed_plugins():
    """``{kind: {name: error}}`` for entry points that failed to load."""
    for reg in REGISTRIES.values():
        reg.load_entry_points()
    return {kind: dict(reg.failed) for kind, reg in REGISTRIES.items()}


def reset_registry():
    """Restore the built-in plug-ins of every kind (for tests)."""
    for reg in REGISTRIES.values():
        reg.reset()
