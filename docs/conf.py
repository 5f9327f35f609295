"""Sphinx configuration of the marginkit documentation.

Build: ``python -m sphinx -W -b html docs docs/_build/html`` (``pip install marginkit[docs]``).
The user-guide pages of the algorithm families are Markdown (``docs/<family>.md``), read
by myst-parser; the user guide's table of contents lists those present at build time.
"""
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # document the checkout being built

import marginkit  # noqa: E402

project = "marginkit"
author = "marginkit developers"
copyright = "marginkit developers"
version = release = marginkit.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # MathJax 3 copied into _static/mathjax: math renders offline
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_parser",
    "matplotlib.sphinxext.plot_directive",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "examples", "Thumbs.db", ".DS_Store"]
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3

autodoc_default_options = {"show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks = set()

plot_html_show_formats = False
plot_html_show_source_link = False
plot_formats = [("png", 90)]
plot_rcparams = {"figure.max_open_warning": 0}

html_theme = "alabaster"
html_static_path = []
html_theme_options = {"description": "margin-based classifiers with certificates"}

#: family pages first, in this order; any other Markdown page of docs/ follows
FAMILY_PAGES = ("perceptron", "svm", "tikhonov", "kernels")
#: Markdown pages listed under "Benchmarks and reproductions" instead of the user guide
BENCHMARK_PAGES = ("benchmarks",)


def _user_guide_entries():
    present = {p.stem for p in HERE.glob("*.md")} - set(BENCHMARK_PAGES)
    ordered = [p for p in FAMILY_PAGES if p in present]
    return ordered + sorted(present - set(ordered))


def _benchmark_entries():
    return [p for p in BENCHMARK_PAGES if (HERE / f"{p}.md").is_file()]


def _rst_escape(text):
    for ch in "\\*`|_[]":
        text = text.replace(ch, "\\" + ch)
    return text


def _summary(obj):
    """The first paragraph of a docstring as one line of reST: its inline literals stay
    literals, the rest is escaped (``||x||``, ``*`` and ``_`` are plain text there)."""
    doc = (getattr(obj, "__doc__", None) or "").strip()
    first = " ".join(doc.split("\n\n")[0].split())
    parts = re.split(r"(``.+?``)", first)  # odd indices: the literals
    return "".join(p if i % 2 else _rst_escape(p) for i, p in enumerate(parts))


def _registry_table():
    """The built-in plug-ins of each kind: registry name, class, first docstring line."""
    from marginkit._registry import KINDS, REGISTRIES

    titles = {"solver": "Solvers", "smoother": "Smoothers", "kernel": "Kernels",
              "stopping": "Stopping rules"}
    out = []
    for kind in KINDS:
        reg = REGISTRIES[kind]
        reg.names()
        out += [titles[kind], "~" * len(titles[kind]), ""]
        for name in sorted(reg._builtin):
            obj = reg._builtin[name]
            path = f"{obj.__module__}.{getattr(obj, '__qualname__', name)}"
            out += [f"``{name}``", f"   ``{path}``: {_summary(obj)}", ""]
    return "\n".join(out)


def _dataset_functions():
    import marginkit.datasets as ds

    names = sorted(n for n in dir(ds) if not n.startswith("_") and callable(getattr(ds, n))
                   and getattr(getattr(ds, n), "__module__", "").startswith("marginkit.datasets"))
    return "\n\n".join(f".. autofunction:: marginkit.datasets.{n}" for n in names)


def _fill_generated(app, docname, source):
    if docname == "userguide":
        entries = "\n".join(f"   {name}" for name in _user_guide_entries())
        source[0] = source[0].replace("   USER_GUIDE_PAGES", entries)
    elif docname == "reproductions":
        entries = "\n".join(f"   {name}" for name in _benchmark_entries())
        source[0] = source[0].replace("   BENCHMARK_PAGES", entries)
    elif docname == "api":
        source[0] = source[0].replace("REGISTRY_TABLE", _registry_table())
        source[0] = source[0].replace("DATASET_FUNCTIONS", _dataset_functions())


def setup(app):
    app.connect("source-read", _fill_generated)
