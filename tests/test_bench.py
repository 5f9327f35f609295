"""The benchmark suite and ``marginkit bench`` must not rot.

* one asv benchmark runs through asv's own runner (``asv run --python=same --quick``)
  against a temporary copy of ``asv_bench/asv.conf.json``;
* every benchmark module imports, and one case of each runs setup + its function with
  the ``fast`` profile;
* ``marginkit bench --quick`` runs end to end and writes its JSON;
* the preprocessing the comparison promises (std scaling without centring, stratified
  70/30 split, LIBLINEAR's scores) is checked against independent computations.
No timing is asserted.
"""
import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import marginkit as mk
from marginkit import _bench

ROOT = Path(__file__).resolve().parents[1]
ASV_DIR = ROOT / "asv_bench"


@pytest.fixture
def benchmarks(monkeypatch):
    """The ``benchmarks`` package of asv_bench, imported with the fast profile."""
    monkeypatch.setenv("MARGINKIT_BENCH_PROFILE", "fast")
    monkeypatch.syspath_prepend(str(ASV_DIR))
    for name in [m for m in sys.modules if m == "benchmarks" or m.startswith("benchmarks.")]:
        monkeypatch.delitem(sys.modules, name)
    pkg = importlib.import_module("benchmarks")
    assert Path(pkg.__file__).resolve().parent == ASV_DIR / "benchmarks"
    return pkg


def _module(name):
    return importlib.import_module(f"benchmarks.{name}")


def test_common_profile_and_generators(benchmarks):
    common = _module("common")
    assert not common.FULL and common.size(1, 2) == 1
    X, y = common.separable(400, 5, margin=0.1, seed=0)
    # every point is at normalized distance >= margin from some hyperplane: the LP agrees
    feas = _module("feasibility")
    Xa = np.hstack([X, np.ones((400, 1))])
    status, v = feas.linprog_feasibility(Xa, y)
    assert status == "separable" and np.all(y * (Xa @ v) > 0)
    Xn, yn = common.noisy(400, 5, flip=0.05, seed=0)
    assert feas.linprog_feasibility(np.hstack([Xn, np.ones((400, 1))]), yn)[0] == "infeasible"
    Xc, yc = common.random_csr(300, 50, 7, seed=0)
    assert sp.isspmatrix_csr(Xc) and np.all(np.diff(Xc.indptr) == 7) and Xc.has_sorted_indices
    assert set(np.unique(yc)) == {-1.0, 1.0}


@pytest.mark.parametrize("kind", ["separable", "noisy", "overlap"])
def test_feasibility_instances_have_the_intended_answer(benchmarks, kind):
    feas = _module("feasibility")
    Xa, y = feas.instance(kind, 1500)
    status, _ = feas.linprog_feasibility(Xa, y)
    assert status == ("separable" if kind == "separable" else "infeasible")


def test_one_case_of_each_module_runs(benchmarks):
    feas = _module("feasibility")
    b = feas.FeasibilityHighs()
    b.setup("noisy", feas.SIZES[0])
    b.time_linprog_highs("noisy", feas.SIZES[0])

    if "snkp" not in mk.list_plugins()["solver"]:
        pytest.skip("solver 'snkp' is not registered")
    perc = _module("perceptron")
    b = perc.PerceptronFamily()
    args = ("snkp", "separable", "float64", "linear")
    b.setup(*args)
    b.time_solve(*args)
    assert b.track_n_iter(*args) >= 1
    assert 0.5 <= b.track_test_accuracy(*args) <= 1.0
    assert b.track_decided(*args) in (0.0, 1.0)

    mem = _module("memory")
    if "dcd" in mk.list_plugins()["solver"]:
        b = mem.SolveMemoryCSR()
        args = ("dcd", mem.SIZES[0], mem.NNZ_PER_ROW[0])
        b.setup(*args)
        ratio = b.track_traced_peak_ratio(*args)
        assert np.isfinite(ratio) and ratio >= 0


def test_unregistered_solver_is_skipped_in_setup(benchmarks):
    perc = _module("perceptron")
    with pytest.raises(NotImplementedError, match="not registered"):
        perc.PerceptronFamily().setup("no_such_solver", "separable", "float64", "linear")


def test_memory_probes_see_a_known_allocation(benchmarks):
    mem = _module("memory")
    n = 2_000_000
    traced = mem.traced_peak(lambda: np.ones(n).sum())
    assert 8 * n <= traced < 8 * n + 1_000_000
    if os.path.exists("/proc/self/clear_refs"):
        grown = mem.rss_growth(lambda: np.ones(n).sum())
        assert grown >= 0.9 * 8 * n


@pytest.mark.skipif(shutil.which("asv") is None, reason="asv is not installed")
def test_one_benchmark_through_asvs_runner(tmp_path):
    """``asv run --python=same --quick`` on one benchmark, results kept in tmp_path."""
    conf = json.loads((ASV_DIR / "asv.conf.json").read_text())
    assert conf["repo"] == ".." and conf["benchmark_dir"] == "benchmarks"
    conf.update(repo=str(ROOT), benchmark_dir=str(ASV_DIR / "benchmarks"),
                results_dir=str(tmp_path / "results"), html_dir=str(tmp_path / "html"),
                env_dir=str(tmp_path / "env"))
    cfg = tmp_path / "asv.conf.json"
    cfg.write_text(json.dumps(conf))
    env = dict(os.environ, HOME=str(tmp_path), MARGINKIT_BENCH_PROFILE="fast",
               ASV_PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    subprocess.run(["asv", "machine", "--yes", "--machine", "ci", "--config", str(cfg)],
                   env=env, cwd=tmp_path, check=True, capture_output=True, timeout=120)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout: asv cannot name the commit")
    # --python=same stores results only with an explicit commit hash
    out = subprocess.run(
        ["asv", "run", "--python=same", "--quick", "--show-stderr", "--machine", "ci",
         "--set-commit-hash", head.stdout.strip(),
         "--config", str(cfg), "--bench", r"FeasibilityHighs\.time_linprog_highs"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    assert "feasibility.FeasibilityHighs.time_linprog_highs" in text and "failed" not in text
    stored = list((tmp_path / "results" / "ci").glob("*.json"))
    stored = [p for p in stored if p.name != "machine.json"]
    assert stored, text
    result = json.loads(stored[0].read_text())["results"]
    (key,) = [k for k in result if k.endswith("time_linprog_highs")]
    assert all(t is not None and t > 0 for t in result[key][0])

    # the dashboard: asv publish writes it, and served over HTTP (what asv preview does) it
    # lists the benchmark and serves its graph data
    out = subprocess.run(["asv", "publish", "--config", str(cfg)], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    html = tmp_path / "html"
    index = json.loads(_served(html, "index.json"))
    assert head.stdout.strip() in index["revision_to_hash"].values()
    assert any(name.endswith("time_linprog_highs") for name in index["benchmarks"])
    graphs = list((html / "graphs").rglob("*time_linprog_highs*.json"))
    assert graphs
    points = json.loads(_served(html, graphs[0].relative_to(html).as_posix()))
    assert points and all(p[1] is not None for p in points)
    assert b"airspeed velocity" in _served(html, "index.html")
    # the terminal view of the stored commit
    out = subprocess.run(["asv", "show", head.stdout.strip()[:8], "--config", str(cfg),
                          "--machine", "ci"], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and "time_linprog_highs" in out.stdout, out.stdout + out.stderr


def _served(folder, path):
    """The bytes of ``path`` served over HTTP from ``folder`` on a free local port."""
    import functools
    import http.server
    import threading
    import urllib.request

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(folder))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            url = f"http://127.0.0.1:{server.server_address[1]}/{path}"
            with urllib.request.urlopen(url, timeout=30) as response:
                return response.read()
        finally:
            server.shutdown()


# ------------------------------------------------------------------ marginkit bench
def test_bench_quick_end_to_end(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("MARGINKIT_DATA", raising=False)
    out = tmp_path / "bench.json"
    code = _bench.main(["--quick", "--json", str(out), "--repeat", "2"])
    text = capsys.readouterr().out
    assert code == 0
    report = json.loads(out.read_text())
    assert report["meta"]["repeat"] == 2 and [d["name"] for d in report["datasets"]] == ["synthetic"]
    rows = {r["method"]: r for r in report["rows"]}
    assert set(rows) == {m.name for m in _bench.default_methods()} - {"libsvm[linear]"}
    for row in rows.values():
        assert ("median_s" in row) or row.get("skipped") or row.get("error")
        assert "error" not in row, row
        if "median_s" in row:
            assert len(row["times"]) == 2 and row["min_s"] <= row["median_s"] <= row["max_s"]
            assert 0.0 <= row["test_accuracy"] <= 1.0
            assert f"| synthetic | {row['method']} |" in text
    ref = _bench._reference_row(report["rows"])
    if ref is not None:
        assert ref["ratio"] == 1.0
        for row in report["rows"]:
            if "median_s" in row:
                assert row["ratio"] == pytest.approx(row["median_s"] / ref["median_s"])
    if "fista" in mk.list_plugins()["solver"]:
        assert rows["mk:fista"]["input"] == "X (unscaled) + scale='std'"
        assert rows["mk:fista"]["test_accuracy"] > 0.7
    if "dcd" in mk.list_plugins()["solver"]:
        assert rows["mk:dcd[scale]"]["input"] == "X (unscaled) + scale='scale'"


def test_bench_quick_through_the_command_line(tmp_path):
    out = tmp_path / "b.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("MARGINKIT_DATA", None)
    proc = subprocess.run([sys.executable, "-m", "marginkit", "bench", "--quick", "--repeat", "1",
                           "--methods", "liblinear,mk:dcd,Perceptron", "--json", str(out)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "| data set | method |" in proc.stdout
    assert [r["method"] for r in json.loads(out.read_text())["rows"]] == \
        ["mk:dcd", "liblinear", "Perceptron"]


def test_bench_real_data_quick(data_dir, tmp_path, capsys):
    code = _bench.main(["--quick", "--methods", "liblinear,mk:fista", "--repeat", "1",
                        "--json", str(tmp_path / "r.json")])
    assert code == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert "heart_scale" in [d["name"] for d in report["datasets"]]


@pytest.mark.parametrize("argv, match", [
    (["--data", "nope"], "unknown data set"),
    (["--methods", "nope"], "unknown method"),
    (["--repeat", "0"], "--repeat must be >= 1"),
])
def test_bench_usage_errors(argv, match, capsys):
    assert _bench.main(argv) == 2
    assert match in capsys.readouterr().err


def test_std_scale_is_division_by_training_std_without_centring():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 6)) * [1, 2, 3, 4, 5, 0] + 3.0
    sigma = _bench.train_std(X)
    assert sigma[-1] == 1.0  # constant feature: left as is
    assert np.allclose(sigma[:-1], X[:, :-1].std(axis=0))
    Xs = _bench.std_scale(X, sigma)
    assert np.allclose(Xs[:, :-1].std(axis=0), 1.0)
    assert np.allclose(Xs.mean(axis=0), X.mean(axis=0) / sigma)  # not centred
    S = sp.random(40, 8, density=0.3, random_state=1, format="csr")
    S_before = S.copy()
    sig = _bench.train_std(S)
    Ss = _bench.std_scale(S, sig)
    assert sp.isspmatrix_csr(Ss) and Ss.nnz == S.nnz  # sparsity kept
    assert np.allclose(Ss.toarray(), S.toarray() / sig)
    assert np.allclose(sig[S.toarray().std(axis=0) > 0], S.toarray().std(axis=0)[S.toarray().std(axis=0) > 0])
    assert (S != S_before).nnz == 0


def test_stratified_split_is_stratified_and_seeded():
    y = np.array([1.0] * 70 + [-1.0] * 30)
    tr, te = _bench.stratified_split(y, seed=3)
    assert len(te) == 30 and len(tr) == 70 and not set(tr) & set(te)
    assert (y[te] == 1).sum() == 21 and (y[te] == -1).sum() == 9
    tr2, te2 = _bench.stratified_split(y, seed=3)
    assert np.array_equal(te, te2)


def test_rounds_rotate_the_order_of_the_methods():
    calls = []

    class Recorder(_bench.Method):
        def __init__(self, name):
            self.name = name

        def fit(self, ds, prepared):
            calls.append(self.name)

        def finish(self, ds, prepared, model):
            return _bench.Fit(np.zeros(1), "done")

    ds = _bench.load_dataset("synthetic")
    out, errors = _bench.time_methods([Recorder(c) for c in "ABC"], ds, repeat=4, budget=60)
    assert not errors and all(len(out[c][0]) == 4 for c in "ABC")
    assert "".join(calls) == "ABC" "BCA" "CAB" "ABC"


def test_dcd_scale_method_fits_liblinears_input():
    """``mk:dcd[scale]`` solves on X Diag(sigma)^-1, the very matrix LIBLINEAR is given."""
    ds = _bench.load_dataset("synthetic")
    method = _bench.MarginkitMethod("mk:dcd[scale]", "dcd", scale="scale", random_state=0)
    prep = method.prepare(ds)
    fit = method.finish(ds, prep, method.fit(ds, prep))
    direct = mk.solve(ds.Xs_train, ds.y_train, solver="dcd", scale=None, random_state=0)
    assert np.allclose(fit.decision, ds.Xs_test @ direct.coef_.ravel() + direct.intercept_,
                       rtol=1e-9, atol=1e-9)


def test_liblinear_scores_agree_with_liblinear_predict():
    liblinearutil = pytest.importorskip("liblinear.liblinearutil")
    ds = _bench.load_dataset("synthetic")
    method = _bench.LiblinearOfficial()
    prep = method.prepare(ds)
    model = method.fit(ds, prep)
    fit = method.finish(ds, prep, model)
    labels, _, _ = liblinearutil.predict(ds.y_test, ds.Xs_test, model, "-q")
    assert np.array_equal(np.where(fit.decision > 0, 1.0, -1.0), np.asarray(labels))
    assert fit.status == "converged" and fit.n_iter >= 1
    # C = 64 / n_train, as in paper 001, sec. 5.1
    assert model.param.C == pytest.approx(64.0 / ds.n_train)


def test_bench_refuses_bad_arguments_before_any_work(tmp_path):
    """Found by review: --seed -1 gave an empty table (exit 0), --budget nan was taken,
    --json naming a FIFO blocked and a directory gave a traceback after the whole run."""
    from marginkit import _bench

    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    for argv in (["--seed", "-1"], ["--budget", "nan"], ["--budget", "0"],
                 ["--json", str(fifo)], ["--json", str(tmp_path)],
                 ["--json", str(tmp_path / "missing" / "out.json")]):
        assert _bench.main(["--quick", *argv]) == 2, argv


def test_bench_refuses_a_report_path_that_is_an_input_or_an_empty_selection(
        tmp_path, monkeypatch, capsys):
    """Found by review: --json naming a data file of the run (here through a symbolic link,
    or the suffix-less name the loader tries first) overwrote the data set with the
    report's checkpoint, and "--data ," / "--methods ," gave an empty table; all exit 0."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "heart_scale.xz").write_bytes(b"not touched")
    (tmp_path / "link.xz").symlink_to(data / "heart_scale.xz")
    monkeypatch.setenv("MARGINKIT_DATA", str(data))
    for out in (data / "heart_scale.xz", tmp_path / "link.xz", data / "heart_scale"):
        argv = ["--data", "synthetic,heart_scale", "--methods", "mk:fista", "--repeat", "1",
                "--json", str(out)]
        assert _bench.main(argv) == 2, out
        assert "is an input file of data set heart_scale" in capsys.readouterr().err
    assert (data / "heart_scale.xz").read_bytes() == b"not touched"
    assert not (data / "heart_scale").exists()
    for argv, match in ((["--data", ","], "--data ',' names no data set"),
                        (["--data", " "], "--data ' ' names no data set"),
                        (["--data", "synthetic", "--methods", ","], "--methods ',' names no method")):
        assert _bench.main(["--repeat", "1", *argv]) == 2, argv
        assert match in capsys.readouterr().err
