"""marginkit: margin-based classifiers that return certificates.

>>> import marginkit as mk
>>> sorted(mk.list_plugins())
['kernel', 'smoother', 'solver', 'stopping']
"""
from . import plugins
from ._api import solve
from ._config import Config
from ._registry import get_plugin, list_plugins, register, reset_registry
from ._result import Certificate, Result, load_result

__version__ = "0.1.0"

# built-in plug-ins register themselves on import
from . import kernels, smoothers, stopping, solvers  # noqa: E402,F401
from . import datasets  # noqa: E402,F401

__all__ = ["solve", "Config", "Result", "Certificate", "load_result", "register",
           "list_plugins", "get_plugin", "reset_registry", "plugins", "datasets", "__version__"]
