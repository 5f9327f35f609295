"""Build script: compiles every ``marginkit/**/*.pyx`` with one set of directives.

Environment switches
--------------------
MARGINKIT_DEBUG=1          bounds checks, wraparound and initialized checks on (debug builds).
MARGINKIT_NO_OPENMP=1      build without OpenMP (serial kernels).
MARGINKIT_BUILD_ONLY=glob  compile only the extensions whose dotted name matches ``glob``
                           (developer convenience for in-place rebuilds of one module).
"""
import fnmatch
import os
import sys
import tempfile
import warnings
from pathlib import Path

from setuptools import Extension, setup

ROOT = Path(__file__).parent.resolve()
DEBUG = os.environ.get("MARGINKIT_DEBUG", "0") not in ("", "0")

DIRECTIVES = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "initializedcheck": DEBUG,
    "cdivision": True,
    "nonecheck": False,
    "embedsignature": True,
}


def _openmp_flags():
    """Return (compile, link) flags for OpenMP, or empty lists when unavailable."""
    if os.environ.get("MARGINKIT_NO_OPENMP", "0") not in ("", "0"):
        return [], []
    if sys.platform == "win32":
        return ["/openmp"], []
    from setuptools._distutils.ccompiler import new_compiler
    from setuptools._distutils.sysconfig import customize_compiler

    cc = new_compiler()
    customize_compiler(cc)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "omp.c")
        with open(src, "w") as fh:
            fh.write("#include <omp.h>\nint main(void){return omp_get_max_threads() < 1;}\n")
        try:
            objs = cc.compile([src], output_dir=tmp, extra_postargs=["-fopenmp"])
            cc.link_executable(objs, os.path.join(tmp, "omp"), extra_postargs=["-fopenmp"])
        except Exception:  # noqa: BLE001 - any compiler failure means "no OpenMP"
            warnings.warn("OpenMP not available: marginkit is built with serial kernels.")
            return [], []
    return ["-fopenmp"], ["-fopenmp"]


def extensions():
    omp_c, omp_l = _openmp_flags()
    only = os.environ.get("MARGINKIT_BUILD_ONLY")
    exts = []
    for pyx in sorted((ROOT / "marginkit").rglob("*.pyx")):
        rel = pyx.relative_to(ROOT)
        name = ".".join(rel.with_suffix("").parts)
        if only and not fnmatch.fnmatch(name, only):
            continue
        exts.append(
            Extension(
                name,
                [str(rel)],
                # C headers beside the .pyx (cdef extern from "x.h"): a change rebuilds it
                depends=[str(h.relative_to(ROOT)) for h in sorted(pyx.parent.glob("*.h"))],
                define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
                # link libm directly: exp/log resolve to the current glibc versions
                libraries=[] if sys.platform == "win32" else ["m"],
                # no contraction of a * b + c into one fused multiply-add: compiled for a
                # target with FMA (aarch64 by default, x86-64 with -march) it would round
                # differently from the plain statements of the arithmetic that tests
                # compare kernels with bit for bit, and change results between builds
                extra_compile_args=["-O3", "-ffp-contract=off"] + omp_c
                + (["-O0", "-g"] if DEBUG else []),
                extra_link_args=omp_l,
            )
        )
    from Cython.Build import cythonize

    return cythonize(
        exts,
        compiler_directives=DIRECTIVES,
        nthreads=int(os.environ.get("MARGINKIT_BUILD_JOBS", "0")) or 0,
    )


setup(ext_modules=extensions())
