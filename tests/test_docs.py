"""The documentation: its examples run, the example plug-in package works through its
entry point, and ``sphinx-build -W`` passes."""
import doctest
import importlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import marginkit as mk
from marginkit._registry import REGISTRIES

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PLUGIN_PKG = DOCS / "examples" / "plugin_package"
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


DOCTEST_RST_PAGES = ("quickstart.rst", "plugins.rst", "api.rst")


@pytest.mark.parametrize("page", DOCTEST_RST_PAGES)
def test_doc_page_examples_run(page, tmp_path, monkeypatch):
    pytest.importorskip("sklearn")  # the quickstart's estimator section
    if page == "quickstart.rst":
        pytest.importorskip("matplotlib")  # its plot section
        monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(tmp_path)  # the examples' files are written there
    if page == "plugins.rst":  # the page's example package, as if pip-installed
        monkeypatch.syspath_prepend(str(PLUGIN_PKG))
        monkeypatch.delitem(sys.modules, "marginkit_tempered", raising=False)
        installed, real = _tempered_entry_point(), importlib.metadata.entry_points

        def entry_points(**select):
            if select.get("group") == installed[0].group:
                return installed
            return real(**select)
        monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
        mk.reset_registry()  # the next lookup scans the entry points again
    needed = {"quickstart.rst": ("isnkpvn", "snkp", "fista", "dcd"), "plugins.rst": ("snkp",),
              "api.rst": ("snkp", "fista")}
    missing = [s for s in needed[page] if s not in mk.list_plugins()["solver"]]
    if missing:
        pytest.skip(f"solvers {missing} not registered")
    result = doctest.testfile(str(DOCS / page), module_relative=False, optionflags=FLAGS,
                              raise_on_error=False, verbose=False)
    assert result.attempted > 5
    assert result.failed == 0, f"{result.failed} example(s) of docs/{page} failed (see output)"


@pytest.mark.parametrize("module", ["marginkit", "marginkit._api", "marginkit._config",
                                    "marginkit.datasets._libsvm", "marginkit.datasets._mnist",
                                    "marginkit.datasets._clusters",
                                    "marginkit.sklearn", "marginkit._registry"])
def test_docstring_examples_run(module):
    if module == "marginkit.sklearn":
        pytest.importorskip("sklearn")
    mod = importlib.import_module(module)
    result = doctest.testmod(mod, optionflags=FLAGS, verbose=False)
    assert result.failed == 0


_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
MD_PAGES = [ROOT / "README.md"] + sorted(DOCS.glob("*.md"))
#: pages whose examples start a cluster or read the benchmark data (run with -m slow)
SLOW_PAGES = {"dask.md"}


def _python_blocks(path):
    return [body for lang, body in _FENCE.findall(path.read_text()) if lang in ("python", "pycon")]


def _md_params():
    pages = [p for p in MD_PAGES if _python_blocks(p)]
    return [pytest.param(p, id=p.name, marks=[pytest.mark.slow] if p.name in SLOW_PAGES else [])
            for p in pages]


def test_every_python_block_is_an_example_a_test_runs():
    """A Python block of a Markdown page is a doctest session (``>>>``), so the test below
    runs it and compares what it prints; an rst page's examples are doctests too."""
    for page in MD_PAGES:
        for body in _python_blocks(page):
            assert body.lstrip().startswith(">>>"), (
                f"{page.name}: a Python block that is not a doctest session:\n{body[:200]}")
    for page in DOCS.glob("*.rst"):
        text = page.read_text()
        assert not re.search(r"code-block:: *(python|pycon)", text), page.name
        if ">>>" in text:
            assert page.name in DOCTEST_RST_PAGES, f"docs/{page.name} has examples no test runs"


@pytest.mark.parametrize("page", _md_params())
def test_markdown_page_examples_run(page):
    """The Python blocks of a page, in order and in one namespace, print what they show."""
    pytest.importorskip("sklearn")
    if page.name == "dask.md":
        pytest.importorskip("distributed")
    text = "\n".join(_python_blocks(page))
    test = doctest.DocTestParser().get_doctest(text, {"__name__": "__docs__"}, page.name,
                                                str(page), 0)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted > 0
    assert result.failed == 0, f"{result.failed} example(s) of {page.name} failed (see output)"


def _tempered_entry_point():
    """EntryPoint objects built from the example package's pyproject.toml."""
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        tomllib = pytest.importorskip("tomli")
    meta = tomllib.loads((PLUGIN_PKG / "pyproject.toml").read_text())
    group = "marginkit.smoothers"
    eps = meta["project"]["entry-points"][group]
    return [importlib.metadata.EntryPoint(name, value, group) for name, value in eps.items()]


def _solve_with_tempered():
    X, y = mk.datasets.make_separable(120, margin=0.1, random_state=0)[:2]
    res = mk.solve(X, y, solver="snkp", smoother="tempered_entropy")
    assert res.status == "separable" and res.certificate.verify(X, y)
    assert res.config.smoother == "tempered_entropy"
    return X, y, res


@pytest.fixture
def plugin_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGIN_PKG))
    yield
    sys.modules.pop("marginkit_tempered", None)


def test_example_plugin_through_entry_points(plugin_on_path):
    if "snkp" not in mk.list_plugins()["solver"]:
        pytest.skip("snkp not registered")
    eps = _tempered_entry_point()
    assert [ep.name for ep in eps] == ["tempered_entropy"]
    REGISTRIES["smoother"].load_entry_points(eps)
    assert "tempered_entropy" in mk.list_plugins()["smoother"]
    X, y, res = _solve_with_tempered()
    # at temperature 1 the smoother is the built-in entropy: same iterates, same model
    cls = mk.get_plugin("smoother", "tempered_entropy")
    a = mk.solve(X, y, solver="snkp", smoother=cls(temperature=1.0))
    b = mk.solve(X, y, solver="snkp", smoother="entropy")
    assert a.n_iter == b.n_iter
    np.testing.assert_allclose(a.dual_coef_, b.dual_coef_, rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="temperature=0.5"):
        cls(temperature=0.5)


@pytest.mark.slow
def test_example_plugin_installed_with_pip(tmp_path, monkeypatch):
    """pip-installs the example package into a folder and finds it by its metadata."""
    if "snkp" not in mk.list_plugins()["solver"]:
        pytest.skip("snkp not registered")
    src = tmp_path / "src"
    shutil.copytree(PLUGIN_PKG, src)  # building writes build/ and *.egg-info beside the sources
    target = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--quiet",
         "--disable-pip-version-check", "--target", str(target), str(src)],
        capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"pip could not build the example package here: {proc.stderr[-500:]}")
    dists = [d for d in importlib.metadata.distributions(path=[str(target)])
             if d.metadata["Name"] == "marginkit-tempered"]
    assert len(dists) == 1
    eps = [ep for ep in dists[0].entry_points if ep.group == "marginkit.smoothers"]
    assert [ep.name for ep in eps] == ["tempered_entropy"]
    monkeypatch.syspath_prepend(str(target))
    try:
        REGISTRIES["smoother"].load_entry_points(eps)
        _solve_with_tempered()
    finally:
        sys.modules.pop("marginkit_tempered", None)


def test_sphinx_build_without_warnings(tmp_path):
    pytest.importorskip("sphinx")
    pytest.importorskip("numpydoc")
    pytest.importorskip("myst_parser")
    pytest.importorskip("matplotlib")  # the plots page draws its figures at build time
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(tmp_path / "doctrees"), str(DOCS), str(tmp_path / "html")],
        capture_output=True, text=True, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    html = (tmp_path / "html")
    for page in ("index", "quickstart", "userguide", "plots", "plugins", "api", "reproductions"):
        assert (html / f"{page}.html").is_file()
    for md in DOCS.glob("*.md"):  # every family page is in the user guide
        assert (html / f"{md.stem}.html").is_file()
    assert len(list((html / "_images").glob("plots-*.png"))) == 4
    api = (html / "api.html").read_text()
    for name in ("marginkit.solve", "PerceptronClassifier", "load_libsvm", "decision_boundary"):
        assert name in api
    # a docstring line "text : text" in a numpydoc section becomes a bold fake parameter
    # whose ``literals`` are shown with their backquotes: none on the page
    fake = re.findall(r"<strong>[^<]*``[^<]*</strong>", api)
    assert not fake, fake
    assert "``" not in re.sub(r"<[^>]+>", "", api)
    # the plug-in table keeps the docstrings' literals as code, not as backquoted text
    table = api.split('id="built-in-plug-ins"', 1)[1].split("</section>", 1)[0]
    assert "<code" in table and "`" not in re.sub(r"<[^>]+>", "", table)

    # math renders offline: pages load the bundled MathJax, none a CDN
    pages = {p.name: p.read_text() for p in html.glob("*.html")}
    scripts = {name: re.findall(r'<script[^>]*\bsrc="([^"]+)"', text) for name, text in pages.items()}
    assert "_static/mathjax/tex-chtml.js" in scripts["perceptron.html"]
    assert (html / "_static" / "mathjax" / "tex-chtml.js").is_file()
    remote = {name: [s for s in srcs if "//" in s] for name, srcs in scripts.items()}
    assert not any(remote.values()), remote

    # links: with -W the html build already fails on a broken cross-reference, and myst
    # resolves every Markdown link itself, [text](page.md#heading), (#heading) and
    # (path/to/file) alike, warning when the page, heading or file is missing
    # (myst.xref_missing). linkcheck adds reST's `text <path>`_ links, which it looks up
    # on disk. External links are left out: CI has no network.
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "linkcheck",
         "-D", "linkcheck_ignore=^https?://", "-d", str(tmp_path / "doctrees"), str(DOCS),
         str(tmp_path / "linkcheck")],
        capture_output=True, text=True, env=env, cwd=ROOT)
    report = tmp_path / "linkcheck" / "output.txt"
    assert proc.returncode == 0, proc.stderr[-4000:] + (report.read_text() if report.is_file() else "")


def _documented_attributes(doc):
    """Names of a numpydoc "Attributes" section (``name : type``, ``a, b : type``)."""
    section = doc.split("Attributes\n    ----------\n", 1)[1]
    names = re.findall(r"^    (\w+(?:, \w+)*) :", section, re.M)
    return {n for entry in names for n in entry.split(", ")}


def test_api_reference_documents_every_field_status_and_certificate_kind():
    from marginkit._api import _LOOP_STATUSES
    from marginkit.certificates import CERTIFICATE_TYPES, CLAIM_KINDS

    assert _documented_attributes(mk.Result.__doc__) == set(mk.Result._FIELDS)
    api = (DOCS / "api.rst").read_text()
    statuses = set(_LOOP_STATUSES) | set(CLAIM_KINDS)
    statuses |= {getattr(mk.get_plugin("stopping", name), "status", None)
                 for name in mk.list_plugins()["stopping"]} - {None}
    table = api.split("\nStatuses\n", 1)[1].split("\nCertificates\n", 1)[0]
    documented = set(re.findall(r'^   \* - ``"(\w+)"``', table, re.M))
    assert documented == statuses
    for status in statuses:
        assert f'``"{status}"``' in mk.Result.__doc__, status
    kinds = api.split("\nCertificates\n", 1)[1]
    rows = dict(re.findall(r'^   \* - ``"(\w+)"``\n     - :class:`~([\w.]+)`', kinds, re.M))
    assert rows.keys() == {cls.kind for cls in CERTIFICATE_TYPES.values()}
    for kind, path in rows.items():
        module, name = path.rsplit(".", 1)
        assert getattr(importlib.import_module(module), name).kind == kind
        assert f".. autoclass:: {path}" in kinds, f"{path} has no entry of its own"


def _status_certificates():
    """status -> the certificate cell of docs/api.rst's status table ("as for" resolved)."""
    api = (DOCS / "api.rst").read_text()
    table = api.split("\nStatuses\n", 1)[1].split("\nCertificates\n", 1)[0]
    rows = re.findall(r'^   \* - ``"(\w+)"``\n((?:     .*\n)+)', table, re.M)
    cells = {}
    for status, body in rows:
        cell = " ".join(body.split("     - ")[-1].split())
        ref = re.fullmatch(r'as for ``"(\w+)"``', cell)
        cells[status] = cells[ref.group(1)] if ref else cell
    return cells


def _heart():
    return mk.datasets.load_heart_scale()


def _xor():
    return mk.datasets.make_xor(200, random_state=0)[:2]


_FRACTION_999 = [("certified_points", {"fraction": 0.999})]

#: (data, solve's keywords, the status and certificate kind the run returns)
_STATUS_RUNS = [
    (_xor, dict(solver="snkp", kernel="rbf", kernel_params={"gamma": 2.0}),
     "separable", "separator"),
    (_xor, dict(solver="isnkpvn"), "infeasible", "infeasibility"),
    (_heart, dict(solver="fista"), "certified", "certified_points"),
    (_heart, dict(solver="iterated_tikhonov"), "converged", "newton_decrement"),
    (_heart, dict(solver="fista", stop=[("tolerance", {"tol": 0.05, "attribute": "error_bound"})]),
     "converged", "certified_points"),
    (_heart, dict(solver="dcd", C=1.0, bound_check="always",
                  stop=[("tolerance", {"tol": 0.01, "attribute": "error_bound"})]),
     "converged", "certified_points"),
    (_heart, dict(solver="dcd", stop="liblinear", random_state=0), "converged", None),
    (_heart, dict(solver="fista_svm", max_iter=300, stop=_FRACTION_999),
     "max_iter", "certified_points"),
    (_heart, dict(solver="dcd", max_iter=300, bound_check="always", stop=_FRACTION_999,
                  random_state=0), "max_iter", "certified_points"),
    (_heart, dict(solver="fista", stop=_FRACTION_999, callback=lambda st: st.n_iter >= 200),
     "callback", "certified_points"),
    (_heart, dict(solver="snkp", max_iter=50), "max_iter", None),
    (_heart, dict(solver="iterated_tikhonov", max_iter=2), "max_iter", None),
    (_heart, dict(solver="pegasos", random_state=0), "max_iter", None),
]


@pytest.mark.parametrize("data,kw,status,kind", _STATUS_RUNS,
                         ids=[f"{kw['solver']}-{status}-{kind}" for _, kw, status, kind
                              in _STATUS_RUNS])
def test_status_table_gives_the_certificate_real_runs_return(data, kw, status, kind):
    """docs/api.rst's status table names, for each status, the certificate kinds its runs
    carry (the SVM solvers keep a certified_points certificate on any status), and a
    certificate returned verifies on the training data."""
    X, y = data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mk.ConvergenceWarning)
        res = mk.solve(X, y, **kw)
    got = None if res.certificate is None else res.certificate.kind
    assert (res.status, got) == (status, kind)
    if res.certificate is not None:
        assert res.certificate.verify(X, y)
    cell = _status_certificates()[status]
    assert (f'``"{kind}"``' if kind else "``None``") in cell, (status, kind, cell)
    assert f'``"{status}"``' in mk.Result.__doc__
    if kind is not None:
        assert f'"{kind}"' in mk.Result.__doc__


def test_dcd_error_bound_history_as_the_plots_page_says():
    """docs/plots.rst: dcd's default (lazy) history holds the error bound at the epoch that
    certifies, the last one; ``bound_check="always"`` at every epoch."""
    X, y = _heart()
    lazy = mk.solve(X, y, solver="dcd", random_state=0)
    full = mk.solve(X, y, solver="dcd", bound_check="always", random_state=0)
    assert lazy.status == full.status == "certified"
    finite = np.isfinite(lazy.history["error_bound"])
    assert np.flatnonzero(finite).tolist() == [lazy.n_iter]
    assert np.isfinite(full.history["error_bound"]).all()
    assert np.isfinite(full.history["n_certified"]).all()
    assert 'bound_check="always"' in (DOCS / "plots.rst").read_text()


#: what a reader cannot follow: tracker numbers, the project's working folders and notes,
#: and the papers by their folder numbers instead of a citation
INTERNAL_REFERENCE = re.compile(
    r"\bissues? (?:#?\d|show\b|\"\w)|shared/|\bAPI\.md\b|KNOWN_BUGS|\bpapers? 00\d|\bthe brief\b",
    re.I)


def _internal_references(text, where):
    return [f"{where}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
            for m in INTERNAL_REFERENCE.finditer(text)]


def test_no_internal_references_where_users_read():
    """The README, the packaging files, the docs (and their example package), every source
    file of the package (Python, Cython, C headers), the benchmark scripts that reproduce
    the documented results, and every ``--help`` text cite papers and say things in full."""
    found = []
    files = [ROOT / "README.md", ROOT / "pyproject.toml", ROOT / "setup.py",
             *(p for ext in ("md", "rst", "py", "toml", "txt") for p in DOCS.rglob(f"*.{ext}")),
             *(p for ext in ("py", "pyx", "pxd", "h") for p in (ROOT / "marginkit").rglob(f"*.{ext}")),
             *(p for d in (ROOT / "benchmarks", ROOT / "asv_bench" / "benchmarks")
               for ext in ("py", "md") for p in d.rglob(f"*.{ext}"))]
    for path in files:
        if "_build" not in path.parts:
            found += _internal_references(path.read_text(), path.relative_to(ROOT))
    for cmd in ([], ["demo"], ["fit"], ["predict"], ["bench"], ["plugins"]):
        proc = subprocess.run([sys.executable, "-m", "marginkit", *cmd, "--help"], cwd=ROOT,
                              capture_output=True, text=True)
        if proc.returncode == 0:  # a command this version does not have exits 2
            found += _internal_references(proc.stdout, " ".join(["marginkit", *cmd, "--help"]))
    assert not found, "\n".join(found)


def test_internal_reference_pattern_catches_what_it_should():
    for bad in ("see issue 6", "(issue \"Scale-out\")", "shared/API.md", "KNOWN_BUGS.md", "API.md",
                "paper 000, sec. 4", "Papers 001", "the brief asks"):
        assert INTERNAL_REFERENCE.search(bad), bad
    for fine in ("a known issue of LIBLINEAR", "Ramdas & Pena 2014, sec. 4",
                 "arXiv:2512.03947", "shared by all points"):
        assert not INTERNAL_REFERENCE.search(fine), fine


def test_import_from_an_unbuilt_source_folder_says_how_to_build(tmp_path):
    """The checkout of a non-editable ``pip install .`` has the sources but not the
    compiled extensions: importing marginkit from there explains instead of failing on
    the first missing module."""
    def copy(dst, keep_compiled):
        ignore = shutil.ignore_patterns("__pycache__", *(() if keep_compiled else ("*.so", "*.pyd")))
        shutil.copytree(ROOT / "marginkit", dst / "marginkit", ignore=ignore)

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    src = tmp_path / "src"
    copy(src, keep_compiled=False)
    proc = subprocess.run([sys.executable, "-c", "import marginkit"], cwd=src, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert re.fullmatch(
        re.escape(f"ImportError: marginkit is imported from its source folder {src.resolve()}, "
                  "whose compiled extensions are not built: run pip install -e . (or build in "
                  "place with python setup.py build_ext --inplace), or import it from another "
                  "folder (missing compiled module marginkit.") + r"[\w.]+\)", last), last
    assert "Traceback" in proc.stderr and proc.stderr.count("Traceback") == 1  # no chained error
    built = tmp_path / "built"
    copy(built, keep_compiled=True)
    proc = subprocess.run([sys.executable, "-c", "import marginkit; print(marginkit.solve)"],
                          cwd=built, env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and "function solve" in proc.stdout, proc.stderr
