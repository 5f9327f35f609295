"""Solver plug-ins: one package per family (``perceptron/``, ``svm/``, ``tikhonov/``), each
with its Cython core beside its Python modules (``<family>/_fast.pyx``; also
``svm/_kernel_fast.pyx`` for the SVM family's exact kernels).

Every module of this package is imported here so its ``@_register_builtin`` runs.
"""
import importlib
import pkgutil

for _mod in pkgutil.iter_modules(__path__):
    if not _mod.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_mod.name}")
