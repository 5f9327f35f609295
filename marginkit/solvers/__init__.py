"""Solver plug-ins: one front module (``<family>.py``) and one Cython core per family.

Every module of this package is imported here so its ``@_register_builtin`` runs.
"""
import importlib
import pkgutil

for _mod in pkgutil.iter_modules(__path__):
    if not _mod.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_mod.name}")

# the exact-kernel certificate type (a private module): registered for ``load_result``
from .svm import _kernel_certificate  # noqa: E402,F401
