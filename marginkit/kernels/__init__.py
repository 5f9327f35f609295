"""Kernel plug-ins (Gram blocks in Cython).

Every module of this package is imported here so its ``@_register_builtin`` runs.
"""
import importlib
import pkgutil

for _mod in pkgutil.iter_modules(__path__):
    if not _mod.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_mod.name}")
