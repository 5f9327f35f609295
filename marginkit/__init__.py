"""marginkit: margin-based classifiers that return certificates.

>>> import marginkit as mk
>>> sorted(mk.list_plugins())
['kernel', 'smoother', 'solver', 'stopping']
"""
from pathlib import Path as _Path


def _unbuilt_extension(exc):
    """The ``ModuleNotFoundError`` is one of marginkit's compiled modules whose Cython
    source sits beside this file: marginkit is imported from a source folder that was
    never built in place (e.g. the checkout of a ``pip install .``, not editable)."""
    name = getattr(exc, "name", None) or ""
    if not name.startswith(__name__ + "."):
        return False
    rel = name.split(".")[1:]
    return _Path(__file__).parent.joinpath(*rel[:-1], rel[-1] + ".pyx").is_file()


try:
    from . import plugins
    from ._api import solve
    from ._config import Config
    from ._registry import get_plugin, list_plugins, register, reset_registry
    from ._result import Certificate, Result, load_result
    from ._model_file import load_model
    from .exceptions import ConvergenceWarning

    # built-in plug-ins register themselves on import
    from . import kernels, smoothers, stopping, solvers  # noqa: F401
    from . import datasets  # noqa: F401
except ModuleNotFoundError as _exc:
    if not _unbuilt_extension(_exc):
        raise
    raise ImportError(
        f"marginkit is imported from its source folder {_Path(__file__).resolve().parent.parent}, "
        "whose compiled extensions are not built: run pip install -e . (or build in place "
        "with python setup.py build_ext --inplace), or import it from another folder "
        f"(missing compiled module {_exc.name})"
    ) from None

__version__ = "0.1.0"

__all__ = ["solve", "Config", "Result", "Certificate", "load_result", "load_model", "register",
           "list_plugins", "get_plugin", "reset_registry", "plugins", "datasets", "ConvergenceWarning",
           "__version__"]
