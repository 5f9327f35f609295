"""The command line: demo, fit, predict, bench, plugins; exit codes and one-line usage errors."""
import importlib.metadata
import gzip
import json
import lzma
import re
import zipfile
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import marginkit as mk
from marginkit import cli
from marginkit._registry import REGISTRIES

sys.path.insert(0, os.path.dirname(__file__))
from _surface_helpers import TOY, register_toy, separable_blobs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _libsvm_text(X, y):
    lines = []
    for row, label in zip(X, y):
        feats = " ".join(f"{j + 1}:{v:.6g}" for j, v in enumerate(row) if v != 0)
        lines.append(f"{label:+d} {feats}")
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture
def toy():
    return register_toy()


@pytest.fixture
def files(tmp_path):
    X, y = separable_blobs(60, seed=1)
    perm = np.random.default_rng(1).permutation(60)
    X, y = X[perm], y[perm]
    ypm = np.where(y == 1, 1, -1)
    train = tmp_path / "train.xz"
    train.write_bytes(lzma.compress(_libsvm_text(X[:40], ypm[:40])))
    test = tmp_path / "test"
    test.write_bytes(_libsvm_text(X[40:], ypm[40:]))
    return train, test


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_fit_reports_and_saves(capsys, toy, files, tmp_path):
    train, test = files
    model = tmp_path / "model.npz"
    code, out, err = run(capsys, "fit", str(train), "--test", str(test), "--solver", TOY,
                         "--param", "step=0.5", "--output", str(model))
    assert code == 0, err
    assert "status      separable" in out
    assert "separator" in out and "verified from the data" in out
    assert "train acc   1.0000" in out and "test acc    1.0000 (20 samples)" in out
    # the toy plug-in's certificate does not hold its model: read only on request
    assert "marginkit predict --allow-unbound reads it" in err
    with pytest.raises(ValueError, match="allow_unbound=True"):
        mk.load_result(model)
    with pytest.warns(UserWarning, match="built without the model"):
        res = mk.load_result(model, allow_unbound=True)
    assert res.status == "separable" and res.solver == TOY
    code, out, err = run(capsys, "predict", str(model), str(test))
    assert code != 0 and "allow_unbound" in err
    code, out, err = run(capsys, "predict", str(model), str(test), "--allow-unbound")
    assert code == 0 and "Accuracy = 100" in out


def test_fit_kernel_and_verbose(capsys, toy, files):
    train, _ = files
    code, out, err = run(capsys, "fit", str(train), "--solver", TOY, "--kernel", "rbf",
                         "--gamma", "0.5", "-vv")
    assert code == 0, err
    assert "kernel rbf" in out and f"[{TOY}] iter" in out and "stopped: separable" in out


@pytest.mark.parametrize("argv,match", [
    ([], "choose a command"),
    (["fit"], r"required: TRAIN \(see"),
    (["fit", "TRAIN", "--solver", "no_such_solver"], "argument --solver: unknown solver 'no_such_solver'"),
    (["fit", "TRAIN", "--solver", TOY, "--C", "abc"], "argument --C: 'abc' is not a number"),
    (["fit", "TRAIN", "--solver", TOY, "--C", "-1"], "argument --C: '-1' must be a positive"),
    (["fit", "TRAIN", "--solver", TOY, "--max-iter", "0"], "argument --max-iter"),
    (["fit", "TRAIN", "--solver", TOY, "--param", "nope"], "argument --param: 'nope' must be NAME=VALUE"),
    (["fit", "TRAIN", "--solver", TOY, "--param", "nope=1"], r"argument --param.*unknown parameter"),
    (["fit", "TRAIN", "--solver", TOY, "--param", "step=-1"], r"argument --param.*step=-1"),
    (["fit", "TRAIN", "--solver", TOY, "--kernel", "nokernel"], "argument --kernel: unknown kernel"),
    (["fit", "TRAIN", "--solver", TOY, "--kernel", "rbf", "--kernel-param", "gama=1"],
     r"argument --kernel-param.*unknown parameter"),
    (["fit", "missing_file", "--solver", TOY], "argument TRAIN: no data file 'missing_file'"),
    (["fit", "TRAIN", "--test", "missing_file", "--solver", TOY], "argument --test: no data file"),
    (["fit", "BAD", "--solver", TOY], "argument TRAIN: .*line 2: feature index 0"),
    (["fit", "TRAIN", "--solver", TOY, "--output", "/nonexistent/dir/m.npz"], "argument --output"),
    (["demo", "--solver", "no_such_solver"], "argument --solver: unknown solver"),
    (["bench", "--data"], "argument --data: expected one argument"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
])
def test_usage_errors_exit_2_with_one_line(capsys, toy, files, tmp_path, argv, match):
    train, _ = files
    bad = tmp_path / "bad.txt"
    bad.write_text("+1 1:1\n-1 0:2\n")
    argv = [str(train) if a == "TRAIN" else str(bad) if a == "BAD" else a for a in argv]
    code, out, err = run(capsys, *argv)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("marginkit") and ": error: " in lines[0]
    import re

    assert re.search(match, lines[0]), lines[0]
    assert "Traceback" not in err


def test_labels_and_solver_failures(capsys, toy, tmp_path, monkeypatch):
    one = tmp_path / "one"
    one.write_text("1 1:1\n1 1:2\n1 2:1\n")
    code, out, err = run(capsys, "fit", str(one), "--solver", TOY)
    assert code == 2 and err.count("\n") == 1
    assert f"argument TRAIN: the labels of {one} has a single class" in err

    def broken(self, problem):
        raise RuntimeError("core exploded")

    monkeypatch.setattr(mk.get_plugin("solver", TOY), "start", broken)
    single = tmp_path / "two"
    single.write_text("1 1:1\n-1 1:-1\n")
    code, out, err = run(capsys, "fit", str(single), "--solver", TOY)
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err
    assert f"solver '{TOY}' failed on {single}: RuntimeError: core exploded" in err
    with pytest.raises(RuntimeError, match="core exploded"):
        cli.main(["fit", str(single), "--solver", TOY, "--traceback"])
    # data the library refuses (a column it cannot scale: only a subnormal entry) is bad
    # input: exit code 2, one line
    tiny = tmp_path / "tiny"
    tiny.write_text("1 1:1 2:1e-320\n-1 1:-1\n")
    code, out, err = run(capsys, "fit", str(tiny))
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "failed on" in err and "ValueError: scale='std': column 1" in err


def test_demo_runs_registered_solvers(capsys, toy):
    code, out, err = run(capsys, "demo", "--solver", TOY, "--time-limit", "1")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["data", "solver", "kernel", "status"]
    rows = [ln for ln in lines if TOY in ln]
    # heart_scale always (bundled); rbf separates any set of distinct points
    hs = [ln for ln in rows if ln.startswith("heart_scale 270x13")]
    assert len(hs) == 2
    rbf = [ln for ln in hs if " rbf " in ln][0]
    assert "separable" in rbf and "separator" in rbf and " yes " in rbf
    assert "NO" not in out.split("note:")[0]
    # the legend says what a status, a certificate and the margin bounds mean
    assert cli.DEMO_LEGEND in out and "max_iter (none here) would mean no claim" in out
    # in two lines, the second one saying what the linear rows prove
    legend = cli.DEMO_LEGEND.splitlines()
    assert len(legend) == 2 and "certificate" in legend[0] and "margin bounds" in legend[0]
    assert legend[1].startswith("With the linear kernel neither data set is separable")


def test_demo_default_table_runs_what_is_registered(capsys):
    code, out, err = run(capsys, "demo", "--time-limit", "0.5")
    registered = set(mk.list_plugins()["solver"])
    demo_solvers = {s for solvers, *_ in cli.DEMO_JOBS for s in solvers}
    assert code == 0, out + err
    for name in demo_solvers & registered:
        assert f" {name} " in out
    if demo_solvers - registered:
        skipped = out.split("not registered (skipped):")[1].splitlines()[0]
        assert {s.strip() for s in skipped.split(",")} == demo_solvers - registered
    else:
        assert "not registered" not in out
    # every certificate the demo shows was re-checked from the data and held
    table = out.split("note:")[0]
    assert " NO " not in table


def test_demo_on_a_base_install_without_sklearn(tmp_path):
    """scikit-learn and matplotlib are optional: the demo must not need them."""
    if "snkp" not in mk.list_plugins()["solver"]:
        pytest.skip("snkp not registered")
    code = ("import sys; sys.modules['sklearn'] = None; sys.modules['matplotlib'] = None\n"
            "from marginkit.cli import main\n"
            "sys.exit(main(['demo', '--solver', 'snkp', '--solver', 'snkp', '--time-limit', '0.5']))")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = [ln for ln in proc.stdout.splitlines()
            if " snkp " in ln and ln.startswith(("heart_scale", "xor"))]
    assert len(rows) == 4  # heart_scale and xor, linear and rbf, each once
    assert all(" yes " in ln for ln in rows if "separable" in ln)
    # with the linear kernel (not separable) the dual_certificate rule at 1e-3 ends it
    # with a checked proof, as PerceptronClassifier's tol="auto"
    linear = [ln for ln in rows if " linear " in ln]
    assert len(linear) == 2 and all("infeasible" in ln and " yes " in ln for ln in linear)


def test_demo_rows_all_end_with_a_verified_claim(capsys):
    # the legend says there is no max_iter row: every row is a claim verify() confirmed
    code, out, err = run(capsys, "demo")
    assert code == 0, err
    rows = [ln for ln in out.splitlines() if ln.startswith(("heart_scale", "xor"))]
    assert len(rows) >= 20
    assert all(" yes " in ln and "max_iter" not in ln for ln in rows), \
        [ln for ln in rows if " yes " not in ln]


def test_plugins_lists_builtin_runtime_and_failed(capsys, toy):
    good = importlib.metadata.EntryPoint(
        "ep_smoother", "_plugin_fixtures:EntryPointSmoother", "marginkit.smoothers")
    bad = importlib.metadata.EntryPoint("ep_broken", "no_such_module_xyz:thing", "marginkit.smoothers")
    with pytest.warns(UserWarning, match="ep_broken"):
        REGISTRIES["smoother"].load_entry_points([good, bad])
    code, out, err = run(capsys, "plugins")
    assert code == 0
    assert "kernels (" in out and "linear" in out and "built-in (marginkit.kernels" in out
    assert f"{TOY}" in out and "registered at run time" in out
    assert "ep_smoother" in out
    assert "ep_broken" in out and "FAILED to load" in out and "ModuleNotFoundError" in out


def test_bench_is_wired(capsys):
    code, out, err = run(capsys, "bench", "--repeat", "many")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "marginkit bench: error: argument --repeat" in err
    with pytest.raises(SystemExit) as exc:
        cli.main(["bench", "--help"])
    assert exc.value.code == 0 and "--methods" in capsys.readouterr().out


def test_python_dash_m_is_the_same_program(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "marginkit", "fit", "x", "--solver"],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "argument --solver: expected one argument" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "marginkit", "--version"],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == f"marginkit {mk.__version__}"


# ------------------------------------------------------------- fit -m MODEL, predict, flags
def _cli(*argv, cwd):
    """``python -m marginkit ...`` in a subprocess, as a user runs it."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "marginkit", *map(str, argv)],
                          capture_output=True, text=True, env=env, cwd=cwd)


def _three_classes(path, n, seed, extra_feature=False, opener=open):
    """Three Gaussian blobs in 2-D, labels 1, 2, 3 (a third constant feature if asked)."""
    rng = np.random.default_rng(seed)
    centres = np.array([[3.0, 0.0], [0.0, 3.0], [-3.0, -3.0]])
    labels = rng.integers(0, 3, n)
    X = centres[labels] + rng.normal(size=(n, 2))
    with opener(path, "wt") as fh:
        for k, x in zip(labels, X):
            fh.write(f"{k + 1} 1:{x[0]:.6g} 2:{x[1]:.6g}" + (" 3:1" if extra_feature else "") + "\n")
    return path


def test_fit_m_then_predict_heart_scale(data_dir, tmp_path):
    data = Path(data_dir) / "heart_scale.xz"
    model, out = tmp_path / "heart.model", tmp_path / "heart.out"
    proc = _cli("fit", data, "-m", model, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "solver      dcd (kernel linear)" in proc.stdout  # the default solver
    assert f"saved       {model}" in proc.stdout
    res = mk.load_result(model)  # two classes: the model file is the Result itself
    assert res.solver == "dcd" and res.status == "certified"
    proc = _cli("predict", model, data, "-o", out, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    X, y = mk.datasets.load_libsvm(data)
    pred = res.predict(X)
    correct = int(np.sum(pred == y))
    assert proc.stdout == f"Accuracy = {100 * correct / 270:.2f}% ({correct}/270)\n"
    assert out.read_text().split("\n") == ["%.17g" % v for v in pred] + [""]
    assert set(out.read_text().split()) == {"1", "-1"}  # as svm-predict writes them


def test_multiclass_one_vs_rest_model(tmp_path):
    from marginkit._model_file import load_model

    train = _three_classes(tmp_path / "train.gz", 150, 0, opener=gzip.open)
    test = _three_classes(tmp_path / "test", 60, 1, extra_feature=True)
    model, out = tmp_path / "three.model", tmp_path / "three.out"
    proc = _cli("fit", train, "--test", test, "-m", model, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "labels [1, 2, 3] (one-vs-rest: 3 problems)" in proc.stdout
    assert len(re.findall(r"^class [123] +certified, certificate certified_points", proc.stdout,
                          re.M)) == 3
    assert "has 3 features, the training file 2; the extra columns are ignored" in proc.stderr
    m = load_model(model)
    assert m.classes_.tolist() == [1.0, 2.0, 3.0] and len(m.results) == 3
    assert all(r.classes_.tolist() == [0, 1] for r in m.results)
    proc = _cli("predict", model, test, "-o", out, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == (f"note: {test} has 3 features, the model 2; the extra columns "
                           "are ignored\n")
    X, y = mk.datasets.load_libsvm(test)
    pred = m.predict(X[:, :2])
    correct = int(np.sum(pred == y))
    assert correct >= 50  # well separated blobs
    assert proc.stdout == f"Accuracy = {100 * correct / 60:.2f}% ({correct}/60)\n"
    assert out.read_text().split() == ["%.17g" % v for v in pred]


def test_extra_test_features_are_refused_for_a_distance_kernel(tmp_path, capsys):
    """An rbf model measures every feature of x in K(x, x_i) = exp(-g ||x - x_i||^2):
    cutting the test file's extra columns predicted other points than the file's, with
    only a note (none under -q). Refused, for fit --test and predict; a linear or poly
    model still ignores them (no weight there)."""
    train = _three_classes(tmp_path / "train", 60, 0)
    test = _three_classes(tmp_path / "test", 30, 1, extra_feature=True)
    model = tmp_path / "rbf.model"
    argv = ["fit", str(train), "--solver", "dcd", "--kernel", "rbf", "--gamma", "0.5", "-q"]
    assert cli.main(argv + ["-m", str(model)]) == 0
    capsys.readouterr()
    assert cli.main(["predict", str(model), str(test), "-q"]) == 2
    assert "measures distances in them" in capsys.readouterr().err
    assert cli.main(argv + ["--test", str(test)]) == 2
    assert "measures distances in them" in capsys.readouterr().err
    for kernel in ("linear", "poly"):
        assert cli.main(["fit", str(train), "--kernel", kernel, "--test", str(test),
                         "-q"]) == 0


@pytest.fixture
def ovr_model(tmp_path):
    train = _three_classes(tmp_path / "train", 90, 0)
    model = tmp_path / "ovr.model"
    assert cli.main(["fit", str(train), "-m", str(model), "-q"]) == 0
    with zipfile.ZipFile(model) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    return train, model, members


def _rewrite(path, members):
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def _index(**changes):
    index = {"format": "marginkit one-vs-rest", "version": 1, "classes": [1.0, 2.0, 3.0],
             "results": ["class_0.npz", "class_1.npz", "class_2.npz"]}
    index.update(changes)
    return json.dumps(index).encode()


@pytest.mark.parametrize("edit,match", [
    (lambda m: {**m, "evil.py": b"import os"},
     r"corrupt one-vs-rest model: the archive holds member\(s\) \['evil.py'\] that "
     r"one_vs_rest.json does not name"),
    (lambda m: {k: v for k, v in m.items() if k != "class_2.npz"},
     r"the archive lacks the member\(s\) \['class_2.npz'\]"),
    (lambda m: {**m, "one_vs_rest.json": _index(results=["../x", "class_1.npz", "class_2.npz"])},
     r"'results' must be \['class_0.npz', ...\], one per class \(3\)"),
    (lambda m: {**m, "one_vs_rest.json": _index(classes=[1.0, 1.0, 3.0])},
     "'classes' must be distinct labels of one kind"),
    (lambda m: {**m, "one_vs_rest.json": _index(classes=[1.0, 2.0])},
     "'classes' must list at least 3 labels"),
    (lambda m: {**m, "one_vs_rest.json": _index(code="os.system")},
     r"expected the keys \['classes', 'format', 'results', 'version'\]"),
    (lambda m: {**m, "one_vs_rest.json": b"{not json"}, "member 'one_vs_rest.json': not valid JSON"),
    (lambda m: {**m, "class_1.npz": m["class_1.npz"][:200]},
     r"member 'class_1.npz' is not a file written by Result.save"),
    (lambda m: {**m, "class_1.npz": m["class_0.npz"], "class_0.npz": b"PK\x05\x06" + bytes(18)},
     r"member 'class_0.npz'"),
])
def test_predict_refuses_corrupt_models(capsys, ovr_model, tmp_path, edit, match):
    train, model, members = ovr_model
    bad = _rewrite(tmp_path / "bad.model", edit(dict(members)))
    code, out, err = run(capsys, "predict", str(bad), str(train))
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith(f"marginkit predict: error: argument MODEL: '{bad}'"), lines[0]
    assert re.search(match, lines[0]), lines[0]


def _flip_in_member(path, name, at=0.5):
    """Flip one byte inside the stored bytes of archive member ``name`` (its CRC fails)."""
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(name)
    raw = bytearray(path.read_bytes())
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    raw[start + int(at * (info.compress_size - 1))] ^= 0x01
    path.write_bytes(bytes(raw))


def _cut_after(path, name):
    """The file cut short right after member ``name`` (itself a zip archive)."""
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(name)
    end = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra) + \
        info.compress_size
    path.write_bytes(path.read_bytes()[:end])


@pytest.mark.parametrize("damage,match", [
    (lambda p: _flip_in_member(p, "class_1.npz"),
     r"member 'class_1.npz': cannot be read from the archive \(zipfile.BadZipFile: Bad CRC-32"),
    (lambda p: _flip_in_member(p, "one_vs_rest.json"),
     r"member 'one_vs_rest.json': cannot be read from the archive \(zipfile.BadZipFile"),
    (lambda p: _cut_after(p, "class_0.npz"),
     r"its zip archive starts at byte \d+, not at the start of the file"),
])
def test_predict_refuses_damaged_model_archives(capsys, ovr_model, tmp_path, damage, match):
    """The zip layer's own errors (a member's checksum) are one line naming the member; a
    model cut short after its first member is not read as that member (a two-class result
    of the labels 0/1, which zipfile finds by its end record)."""
    train, model, members = ovr_model
    bad = _rewrite(tmp_path / "bad.model", dict(members))
    damage(bad)
    code, out, err = run(capsys, "predict", str(bad), str(train))
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"marginkit predict: error: argument MODEL: '{bad}'"), lines[0]
    assert re.search(match, lines[0]), lines[0]


@pytest.mark.parametrize("changes,match", [
    ({"classes": [10**30, 2, 3]}, "'classes' must list at least 3 labels"),
    ({"classes": [2**64, 2, 3]}, "'classes' must list at least 3 labels"),
    ({"version": True}, "version True is not 'marginkit one-vs-rest' version 1"),
    ({"version": 1.0}, "version 1.0 is not 'marginkit one-vs-rest' version 1"),
])
def test_predict_refuses_index_values_of_other_types(capsys, ovr_model, tmp_path, changes,
                                                      match):
    """An integer label beyond float64's exact range (np.isfinite raised TypeError on it)
    and a version that only compares equal to 1 are refused in one line."""
    train, model, members = ovr_model
    bad = _rewrite(tmp_path / "bad.model", {**members, "one_vs_rest.json": _index(**changes)})
    code, out, err = run(capsys, "predict", str(bad), str(train))
    assert code == 2 and out == "" and "Traceback" not in err, err
    assert re.search(match, err), err


def _padded_result(raw, n):
    """A results file (bytes) with a history array of ``n`` zeros added (deflated small)."""
    import io

    with zipfile.ZipFile(io.BytesIO(raw)) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    header = json.loads(np.load(io.BytesIO(members["__meta__.npy"])).tobytes())
    header["fields"]["history"]["__dict__"]["pad"] = {"__array__": "pad", "dtype": "<f8",
                                                      "shape": [n]}
    for name, arr in (("__meta__.npy", np.frombuffer(json.dumps(header).encode(), np.uint8)),
                      ("pad.npy", np.zeros(n))):
        buf = io.BytesIO()
        np.save(buf, arr)
        members[name] = buf.getvalue()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return out.getvalue()


def test_predict_reads_a_one_vs_rest_model_within_one_limit(capsys, ovr_model, tmp_path,
                                                            monkeypatch):
    """Each member used to get load_result's whole limit: a 5.5 MB archive of six 0.9 MB
    members, each holding 900 MiB of deflated zeros, needed 5.4 GiB (a MemoryError
    traceback under a 4 GB address space). The members now share one limit, as the
    arrays of one results file do (a small limit here stands for the 1 GiB one)."""
    import marginkit._model_file as model_file

    train, model, members = ovr_model
    padded = {k: (_padded_result(v, 5000) if k.endswith(".npz") else v)
              for k, v in members.items()}
    bad = _rewrite(tmp_path / "bad.model", padded)
    assert cli.main(["predict", str(bad), str(train), "-q"]) == 0  # within the real limit
    capsys.readouterr()
    monkeypatch.setattr(model_file, "MAX_BYTES", 60_000)  # one member's 40 kB fit, not 3
    code, out, err = run(capsys, "predict", str(bad), str(train))
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert re.search(r"member 'class_1.npz': corrupt Result.save header: r\.history\.pad: an "
                     r"array of 40000 bytes exceeds the limit \(\d+ bytes of "
                     r"max_bytes=\d+ left\)", err), err


def test_predict_bad_input_is_one_line(capsys, ovr_model, tmp_path):
    train, model, _ = ovr_model
    unknown = tmp_path / "unknown"
    unknown.write_text("1 1:3\n7 1:0 2:3\n")
    cases = [
        (["predict", str(tmp_path / "none"), str(train)],
         f"argument MODEL: {tmp_path / 'none'}: No such file or directory"),
        (["predict", str(train), str(train)],
         "argument MODEL: .*is not a model file written by 'marginkit fit -m' or Result.save"),
        (["predict", str(model), str(tmp_path / "none")], "argument TEST: no data file"),
        (["predict", str(model), str(train), "-o", str(tmp_path / "no" / "out")],
         "argument -o/--output: .*No such file or directory"),
        (["predict", str(model)], "required: TEST"),
    ]
    for argv, match in cases:
        code, out, err = run(capsys, *argv)
        assert code == 2, (argv, out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in err, err
        assert re.search(match, lines[0]), lines[0]
    # fit --test reads a test file as predict does: a label that is not a class is
    # noted and its row counts as wrong (it was refused, where predict scored it)
    for argv in (["fit", str(train), "--test", str(unknown)],
                 ["predict", str(model), str(unknown)]):
        code, out, err = run(capsys, *argv)
        assert code == 0, (argv, err)
        assert err == (f"note: {unknown}: labels 7 are not classes of the model (1, 2, 3); "
                       "their 1 rows count as wrong in the accuracy\n"), err
    code, out, err = run(capsys, "fit", str(train), "--test", str(unknown), "-q")
    assert code == 0 and err == "" and out == ""


def test_predict_refuses_models_that_cannot_read_a_data_file(capsys, tmp_path):
    X, y = mk.datasets.load_heart_scale()
    pre = tmp_path / "pre.model"
    mk.solve((X @ X.T).toarray(), y, solver="snkp", kernel="precomputed", max_iter=20).save(pre)
    reg = tmp_path / "reg.model"
    mk.solve(X, y, solver="iterated_tikhonov", loss="squared", kernel="linear").save(reg)
    for path, match in [(pre, "cannot predict a data file: the model was fit with "
                              "kernel='precomputed'"),
                        (reg, "a regression result, not a classifier")]:
        code, out, err = run(capsys, "predict", str(path), str(tmp_path / "unused"))
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert match in err


def test_liblinear_flags(capsys, tmp_path, monkeypatch):
    train = tmp_path / "heart"
    X, y = mk.datasets.load_heart_scale()
    train.write_bytes(_libsvm_text(X.toarray(), y.astype(int)))
    model = tmp_path / "m"
    code, out, err = run(capsys, "fit", str(train), "-c", "1", "-m", str(model), "-q")
    assert code == 0 and out == "" and err == ""
    assert mk.load_result(model).config.solver_params["C"] == 1.0
    code, out, err = run(capsys, "fit", str(train), "-e", "1e-3")
    assert code == 0, err
    assert "status      converged" in out and "certified_points" in out
    for argv, match in [
        (["-s", "2"], "argument -s: marginkit solvers have names, not numbers: use --solver NAME"),
        (["--solver", "snkp", "-c", "1"], "argument -c/--C: solver 'snkp' has no C .*: dcd, "
                                          "fista, fista_svm"),
        (["--solver", "snkp", "-e", "0.1"], "argument -e: solver 'snkp' has no tolerance"),
        (["--solver", "isnkpvn", "-e", "2"], "argument -e: stopping 'dual_certificate': "
                                             "eps=2.0 is out of range"),
        (["-e", "abc"], "argument -e: 'abc' is not a number"),
        (["-v", "5"], r"^marginkit fit: error: argument -v: LIBLINEAR's -v N \(N-fold "
                      r"cross-validation\) is not a marginkit option; here -v means verbose "
                      r"\(-v, -vv, --verbose\)\. For cross-validation use --test TEST .*"
                      r"cross_val_score\(marginkit\.sklearn\.SVMClassifier"),
        (["-v5"], r"argument -v: LIBLINEAR's -v N"),
        # LIBSVM's shrinking and cache size: -h prints help, -m names the model file
        (["-h", "0"], r"argument -h: LIBSVM's -h 0/1 \(shrinking heuristics\) is not a "
                      r"marginkit option; .* --param shrinking=False"),
        (["-m", "100"], r"argument -m: LIBSVM's -m M \(kernel cache size in MB\) is not a "
                        r"marginkit option; here -m MODEL names the model file \(write -m "
                        r"\./M .*--memory-budget 100M"),
        (["-m", "40.5"], r"argument -m: LIBSVM's -m M"),
        (["-m100"], r"argument -m: LIBSVM's -m M"),
        (["-h0"], r"argument -h: LIBSVM's -h 0/1"),
        # the same at the end of a cluster of flags (-qh 0 is -q -h 0)
        (["-qh", "0"], r"argument -h: LIBSVM's -h 0/1"),
        (["-qh1"], r"argument -h: LIBSVM's -h 0/1"),
        (["-qv", "5"], r"argument -v: LIBLINEAR's -v N"),
        (["-vqm", "100"], r"argument -m: LIBSVM's -m M"),
        (["-qm=100"], r"argument -m: LIBSVM's -m M"),  # not a model file named "=100"
    ]:
        code, out, err = run(capsys, "fit", str(train), *argv)
        assert code == 2, (argv, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and re.search(match, lines[0]), err
    code, out, err = run(capsys, "predict", str(model), str(train), "-q")
    assert code == 0 and out == "" and err == ""
    # the refusal's advice runs; -h alone is help
    code, out, err = run(capsys, "fit", str(train), "--param", "shrinking=False")
    assert code == 0 and "status      certified" in out, err
    with pytest.raises(SystemExit) as exc:
        cli.main(["fit", "-h"])
    assert exc.value.code == 0 and "usage: marginkit fit" in capsys.readouterr().out
    # marginkit's own -v (verbose) keeps its spellings
    for flag in ("-v", "-vv", "--verbose"):
        code, out, err = run(capsys, "fit", str(train), flag)
        assert code == 0 and "status      certified" in out, (flag, err)
    # a cluster ending in -m with a model path is that path
    code, out, err = run(capsys, "fit", str(train), "-qm", str(model))
    assert code == 0 and out == "" and err == ""
    # joined by "=" it is the same path, as -m=PATH is (argparse 3.11 kept the "=")
    model.unlink()
    code, out, err = run(capsys, "fit", str(train), f"-qm={model}")
    assert code == 0 and out == "" and err == "" and model.exists()
    # -vv is marginkit's verbose 2 (LIBLINEAR has no -vv): a training file may follow it
    (tmp_path / "5").write_bytes(train.read_bytes())
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "fit", "-vv", "5")
    assert code == 0 and "status      certified" in out, err
    code, out, err = run(capsys, "fit", "-v", "5")  # LIBLINEAR's -v 5: refused, with the way
    assert code == 2 and "a training file named N: write ./N" in err
    code, out, err = run(capsys, "fit", "-v", "./5")
    assert code == 0 and "status      certified" in out, err


def test_help_texts_name_the_default_and_nothing_internal(capsys):
    texts = []
    for argv in (["--help"], ["fit", "--help"], ["predict", "--help"]):
        with pytest.raises(SystemExit):
            cli.main(argv)
        texts.append(capsys.readouterr().out)
    assert "predict" in texts[0]
    assert "default: dcd, the dual coordinate descent of LIBLINEAR" in " ".join(texts[1].split())
    assert "(default: 0, so the same command gives the same model" in " ".join(texts[1].split())
    assert "--memory-budget BYTES" in texts[1]
    assert "Accuracy = 85.01% (13841/16281)" in " ".join(texts[2].split())
    for text in texts:
        assert not re.search(r"shared/|issue \d|API\.md", text)


def test_predict_uses_a_kernel_approximation_model(capsys, tmp_path):
    """A kernel approximation's fitted map is kept in the model file (its seed or its
    centres): predict reads it and answers as the fitted model does, two classes and one
    vs rest alike; fit prints no note."""
    from marginkit._model_file import load_model

    X, y = mk.datasets.load_heart_scale()
    train = tmp_path / "heart"
    train.write_bytes(_libsvm_text(X.toarray(), y.astype(int)))
    labels3 = np.where(X.toarray()[:, 0] > 0.3, 3, y.astype(int))  # three classes
    train3 = tmp_path / "heart3"
    train3.write_bytes(_libsvm_text(X.toarray(), labels3))
    for k, (data, kernel) in enumerate(((train, "nystroem"), (train, "rff"),
                                        (train3, "nystroem"))):
        model, out_file = tmp_path / f"m{k}", tmp_path / f"p{k}"
        code, out, err = run(capsys, "fit", str(data), "--kernel", kernel, "-m", str(model))
        assert code == 0 and "note:" not in err, err
        code, out, err = run(capsys, "predict", str(model), str(data), "-o", str(out_file))
        assert code == 0, err
        assert float(out.split("Accuracy = ")[1].split("%")[0]) > 70.0, out
        Xd = mk.datasets.load_libsvm(str(data))[0]
        want = np.asarray(load_model(model).predict(Xd), dtype=np.float64)
        np.testing.assert_array_equal(np.loadtxt(out_file), want)


def _heart_file(tmp_path):
    X, y = mk.datasets.load_heart_scale()
    train = tmp_path / "heart"
    train.write_bytes(_libsvm_text(X.toarray(), y.astype(int)))
    return train


@pytest.mark.parametrize("text,value", [("1e10", 1e10), ("4096", 4096.0), ("512M", 512 * 2**20),
                                        ("4G", 4 * 2**30), ("8GiB", 8 * 2**30),
                                        ("1.5k", 1536.0), ("2tb", 2 * 2**40)])
def test_memory_budget_units(text, value):
    assert cli._bytes(text) == value


def test_memory_budget_option(capsys, tmp_path):
    """The library's messages say 'raise memory_budget': --memory-budget does (it was not an
    option, and --param memory_budget=... was refused as a solver parameter, under the
    prefix 'argument --param/--C')."""
    train = _heart_file(tmp_path)
    exact = ["fit", str(train), "--solver", "snkp", "--kernel", "rbf", "--max-iter", "50"]
    # the Gram matrix of 270 rows: 270**2 * 8 bytes = 570 KiB
    code, out, err = run(capsys, *exact, "--memory-budget", "100K")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "raise memory_budget" in err
    assert "marginkit fit takes it as --memory-budget BYTES (e.g. 8G)" in err
    model = tmp_path / "m"
    code, out, err = run(capsys, *exact, "--memory-budget", "1M", "-q", "-m", str(model))
    assert code == 0, err
    assert mk.load_result(model).config.memory_budget == 2**20
    for argv, match in [
        (["--param", "memory_budget=1e10"], r"^marginkit fit: error: argument --param: "
                                            r"memory_budget is a setting of the run, not a "
                                            r"parameter of solver 'snkp': use --memory-budget$"),
        (["--param", "max_iter=5"], "argument --param: max_iter .* use --max-iter$"),
        (["--param", "eps=-1"], r"^marginkit fit: error: argument --param: solver 'snkp': "
                                r"eps=-1 is out of range"),
        (["--memory-budget", "0"], "argument --memory-budget: '0' must be a positive number"),
        (["--memory-budget", "lots"], "argument --memory-budget: 'lots' is not a number of "
                                      "bytes"),
    ]:
        code, out, err = run(capsys, *exact, *argv)
        assert code == 2, (argv, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and re.search(match, lines[0]), err
        assert "--param/--C" not in err
    # -c is named alone, --param alone
    code, out, err = run(capsys, "fit", str(train), "--param", "C=-1")
    assert code == 2 and "argument --param: solver 'dcd': C=-1 is out of range" in err, err


def test_fit_is_repeatable_by_default(capsys, tmp_path):
    """dcd visits the coordinates in a random order; the command line seeds it with 0
    unless --random-state says otherwise, so the same command gives the same model and the
    same predictions (as LIBLINEAR's train does). The model files differ only in the
    measured time."""
    train = _heart_file(tmp_path)
    results, preds = [], []
    for k in range(3):
        model, out_file = tmp_path / f"m{k}", tmp_path / f"p{k}"
        assert cli.main(["fit", str(train), "-q", "-m", str(model)]) == 0
        assert cli.main(["predict", str(model), str(train), "-q", "-o", str(out_file)]) == 0
        results.append(mk.load_result(model))
        preds.append(out_file.read_text())
    for res, pred in zip(results[1:], preds[1:]):
        np.testing.assert_array_equal(res.coef_, results[0].coef_)
        assert res.intercept_ == results[0].intercept_ and res.n_iter == results[0].n_iter
        assert pred == preds[0]
    assert results[0].config.random_state == 0
    # kernels that draw at random take the run's seed (a kernel_params seed wins)
    for kernel in ("nystroem", "rff"):
        fits = []
        for k in range(2):
            model, out_file = tmp_path / f"{kernel}{k}", tmp_path / f"{kernel}p{k}"
            assert cli.main(["fit", str(train), "-q", "--solver", "fista", "--kernel", kernel,
                             "-m", str(model)]) == 0
            assert cli.main(["predict", str(model), str(train), "-q", "-o", str(out_file)]) == 0
            fits.append((mk.load_result(model), out_file.read_text()))
        (a, pa), (b, pb) = fits
        # the same draw; the map's BLAS products may round differently on other threads
        assert a.config.kernel_params["random_state"] == 0
        np.testing.assert_allclose(a.dual_coef_, b.dual_coef_, rtol=1e-9, atol=1e-12)
        assert np.mean(np.array(pa.split()) == np.array(pb.split())) > 0.99
    model = tmp_path / "seeded"
    assert cli.main(["fit", str(train), "-q", "--random-state", "7", "-m", str(model)]) == 0
    assert mk.load_result(model).config.random_state == 7
    capsys.readouterr()


def test_predict_counts_unknown_labels_as_wrong(capsys, ovr_model, tmp_path):
    """LIBLINEAR's predict writes the predictions of rows whose label the model does not
    know (e.g. 0, a placeholder of unlabeled data) and counts them wrong; so does marginkit
    predict, with a note naming the labels (it refused the file, writing nothing)."""
    from marginkit._model_file import load_model

    train, model, _ = ovr_model
    unknown, out_file = tmp_path / "unknown", tmp_path / "out"
    unknown.write_text("1 1:3\n7 1:0 2:3\n0 1:-3 2:-3\n0 1:3 2:0\n")
    code, out, err = run(capsys, "predict", str(model), str(unknown), "-o", str(out_file))
    assert code == 0, err
    X = mk.datasets.load_libsvm(str(unknown))[0]
    want = ["%.17g" % v for v in load_model(model).predict(X)]
    assert out_file.read_text().split() == want and want[0] == "1"
    assert out == "Accuracy = 25.00% (1/4)\n"
    assert err == (f"note: {unknown}: labels 0, 7 are not classes of the model (1, 2, 3); "
                   "their 3 rows count as wrong in the accuracy\n")
    code, out, err = run(capsys, "predict", str(model), str(unknown), "-q")
    assert code == 0 and out == "" and err == ""


def test_predict_placeholder_labels_of_a_binary_model(capsys, tmp_path):
    """All labels 0 (unlabeled data) with a two-class model: every row predicted, 0%."""
    train = _heart_file(tmp_path)
    model, out_file = tmp_path / "m", tmp_path / "out"
    assert cli.main(["fit", str(train), "-q", "-m", str(model)]) == 0
    X, _ = mk.datasets.load_heart_scale()
    unlabeled = tmp_path / "unlabeled"
    unlabeled.write_bytes(_libsvm_text(X.toarray()[:30], np.zeros(30, dtype=int)))
    code, out, err = run(capsys, "predict", str(model), str(unlabeled), "-o", str(out_file))
    assert code == 0, err
    assert out == "Accuracy = 0.00% (0/30)\n"
    assert "labels 0 are not classes of the model (-1, 1); their 30 rows count as wrong" in err
    want = mk.load_result(model).predict(mk.datasets.load_libsvm(str(unlabeled))[0])
    np.testing.assert_array_equal(np.loadtxt(out_file), want)


def test_predict_names_string_classes_quoted(capsys, tmp_path):
    """A model saved from Python with the string classes '-1', '1' cannot score a file of
    numbers: the note quotes the classes (it read 'labels -1, 1 are not classes of the
    model (-1, 1)'), and the predictions are written as the classes are."""
    train = _heart_file(tmp_path)
    X, y = mk.datasets.load_heart_scale()
    model, out_file = tmp_path / "m.mk", tmp_path / "out"
    mk.solve(X, np.where(y > 0, "1", "-1"), solver="dcd", random_state=0).save(str(model))
    code, out, err = run(capsys, "predict", str(model), str(train), "-o", str(out_file))
    assert code == 0, err
    assert "labels -1, 1 are not classes of the model ('-1', '1')" in err
    assert set(out_file.read_text().split()) == {"-1", "1"}


def test_bias_option_is_liblinear_B_1(capsys, tmp_path):
    """docs/svm.md: fista and dcd regularize the intercept as LIBLINEAR's -B 1 does (rows
    y_i (z_i, 1)). So -B 1 is accepted with them and changes nothing; other values, and -B
    with the other solvers, are refused saying so (the old message, 'marginkit adds no
    bias feature ... by centering the data', was wrong). -c and -e given again by --param
    are refused too (-c won silently)."""
    train = _heart_file(tmp_path)
    for solver in ("dcd", "fista"):
        plain, with_b = tmp_path / f"{solver}0", tmp_path / f"{solver}1"
        assert cli.main(["fit", str(train), "--solver", solver, "-q", "-m", str(plain)]) == 0
        code, out, err = run(capsys, "fit", str(train), "--solver", solver, "-B", "1", "-q",
                             "-m", str(with_b))
        assert code == 0 and out == "" and err == "", err
        a, b = mk.load_result(plain), mk.load_result(with_b)
        np.testing.assert_array_equal(a.coef_, b.coef_)
        assert a.intercept_ == b.intercept_
    for argv, match in [
        (["-B", "-1"], r"^marginkit fit: error: argument -B: -B -1 is not available: dcd and "
                       r"fista fit an intercept regularized as a feature of value 1, which is "
                       r"LIBLINEAR's -B 1 \(so -B 1 is accepted and changes nothing\)"),
        (["-B", "2", "--solver", "fista"], "argument -B: -B 2 is not available"),
        (["-B", "1.0000000000000002"], "argument -B: -B 1.0000000000000002 is not available"),
        (["-c", "1", "--param", "C=2"], r"argument -c/--C: C is also given by --param C=2; "
                                        "set it once"),
        (["--solver", "iterated_tikhonov", "-e", "1e-6", "--param", "tol=1e-4"],
         r"argument -e: tol is also given by --param tol=0.0001; set it once"),
        (["-B", "1", "--solver", "fista_svm"], r"argument -B: dcd and fista fit an intercept "
                                               r"regularized .*; solver 'fista_svm' does not "
                                               r"\(its intercept is unregularized, as LIBSVM's\)"),
        (["-B", "1", "--solver", "snkp"], "argument -B: .*; solver 'snkp' does not, so -B is "
                                          "accepted only with them, as -B 1$"),
        (["-B", "x"], "argument -B: 'x' is not a number"),
    ]:
        code, out, err = run(capsys, "fit", str(train), *argv)
        assert code == 2, (argv, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and re.search(match, lines[0]), err
        assert "centering" not in err


def test_fit_says_on_stderr_when_a_run_stops_at_its_budget(capsys, files):
    # as LIBLINEAR warns at its iteration limit: the library's reason, with the command
    # line's option; a run that ends on its claim says nothing
    train, _ = files
    code, out, err = run(capsys, "fit", str(train), "--solver", "fista", "--max-iter", "2")
    assert code == 0 and "status      max_iter" in out
    assert "note: fista stopped with status max_iter after 2 iterations before its " \
           "stopping rule certified_points" in err and "raise --max-iter (now 2)" in err
    code, out, err = run(capsys, "fit", str(train), "--solver", "fista")
    assert code == 0 and "status      certified" in out and "note:" not in err


@pytest.mark.parametrize("argv, says", [
    (["-w1", "2"], r"argument -w: LIBLINEAR.s -wi W .*class_weight=\{i: W\}"),
    (["-w-1", "0.5"], r"argument -w: "),
    (["-g", "0.5"], r"argument -g: LIBSVM's -g G is --gamma G"),
    (["-t", "2"], r"argument -t: .* --kernel NAME"),
    (["-C"], r"argument -C: .*GridSearchCV"),
    (["-n", "0.5"], r"argument -n: "),
    (["-b", "1"], r"argument -b: .*predict_proba"),
    # joined to their value, and at the end of a cluster of flags
    (["-g0.5"], r"argument -g: LIBSVM's -g G is --gamma G"),
    (["-qw1", "2"], r"argument -w: LIBLINEAR.s -wi W"),
    (["-qg", "0.5"], r"argument -g: LIBSVM's -g G is --gamma G"),
    (["-vt2"], r"argument -t: .* --kernel NAME"),
])
def test_fit_names_the_equivalent_of_liblinear_and_libsvm_options(capsys, files, argv, says):
    train, _ = files
    code, out, err = run(capsys, "fit", *argv, str(train))
    assert code == 2 and re.search(says, err), err
    assert str(train) not in err  # the option's value is not taken for the data file


def test_fit_with_a_model_as_second_argument_and_predict_with_swapped_files(capsys, files,
                                                                             tmp_path):
    train, test = files
    code, out, err = run(capsys, "fit", str(train), str(tmp_path / "m.model"))
    assert code == 2 and "the model file is given with -m MODEL" in err
    assert "see 'marginkit fit --help'" in err
    # an unknown option is not a model file
    code, out, err = run(capsys, "fit", str(train), "--max_iter", "5")
    assert code == 2 and "unrecognized arguments" in err and "-m MODEL" not in err
    model = tmp_path / "m.npz"
    assert run(capsys, "fit", str(train), "-m", str(model))[0] == 0
    code, out, err = run(capsys, "predict", str(test), str(model))
    assert code == 2 and "marginkit predict takes MODEL first" in err


def test_fit_quiet_drops_the_budget_note(capsys, files):
    train, _ = files
    code, out, err = run(capsys, "fit", str(train), "--solver", "fista", "--max-iter", "2", "-q")
    assert code == 0 and out == "" and "note:" not in err


def test_a_multiclass_model_file_is_read_by_load_model(capsys, tmp_path):
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    train = tmp_path / "iris.txt"
    lines = [f"{label} " + " ".join(f"{j + 1}:{v:g}" for j, v in enumerate(row))
             for row, label in zip(X, y)]
    train.write_text("\n".join(lines) + "\n")
    model = tmp_path / "iris.model"
    assert run(capsys, "fit", str(train), "-m", str(model))[0] == 0
    with pytest.raises(ValueError, match=r"one-vs-rest model of 'marginkit fit -m'.*"
                                         r"marginkit.load_model\(path\)"):
        mk.load_result(model)
    loaded = mk.load_model(model)
    assert len(loaded.results) == 3 and list(loaded.classes_) == [0, 1, 2]
    code, out, err = run(capsys, "predict", str(model), str(train), "-o", str(tmp_path / "p"))
    predicted = np.loadtxt(tmp_path / "p")
    np.testing.assert_array_equal(loaded.predict(X), predicted)


def test_fit_prints_library_warnings_as_notes_in_command_line_terms(capsys):
    # heart_scale (bundled, 270 rows): 8 n^2 = 583 kB of Gram rows do not fit 300 kB
    argv = ["fit", "heart_scale", "--solver", "fista", "--kernel", "rbf",
            "--memory-budget", "300000"]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    note = [ln for ln in err.splitlines() if "Gram matrix" in ln]
    assert len(note) == 1 and note[0].startswith("note: solver 'fista': the 270 x 270 Gram")
    assert "--solver dcd" in note[0] and "--kernel nystroem" in note[0]
    assert "raise --memory-budget" in note[0] and "UserWarning" not in err
    code, out, err = run(capsys, *argv, "-q")
    assert code == 0 and err == ""


def test_command_line_names_keep_rule_names_and_quoted_statuses():
    f = cli._command_line_names
    assert f("raise max_iter (now 3)") == "raise --max-iter (now 3)"
    assert f("raise n of the max_iter stopping rule (now 5)") == \
        "raise n of the max_iter stopping rule (now 5)"
    assert f("status 'max_iter' after") == "status 'max_iter' after"
    assert f("raise memory_budget to 8 GB; solver='dcd'") == "raise --memory-budget to 8 GB; --solver dcd"


def test_fit_refuses_model_paths_it_cannot_or_must_not_write(tmp_path):
    """Found by review: ``-m /dev/null`` ended in a traceback (exit 1), ``-m FIFO``
    blocked, ``-m TRAIN`` overwrote the training data, and ``--param C=1 --param C=2``
    kept the last value silently. Each is a usage error (exit 2, one line) before the
    solve."""
    train = _three_classes(tmp_path / "train.txt", 40, 0)
    before = train.read_bytes()
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    cases = [(["-m", os.devnull], "is not a regular file"),
             (["-m", fifo], "is not a regular file"),
             (["-m", tmp_path], "is not a regular file"),
             (["-m", train], "is the input file TRAIN"),
             (["--param", "eps=1e-3", "--param", "eps=1e-4"], "eps is given twice")]
    for argv, message in cases:
        proc = subprocess.run([sys.executable, "-m", "marginkit", "fit", str(train), "-q",
                               *map(str, argv)], capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep
                                       + os.environ.get("PYTHONPATH", "")), cwd=tmp_path)
        assert proc.returncode == 2 and message in proc.stderr, (argv, proc.stderr)
        assert "Traceback" not in proc.stderr
    assert train.read_bytes() == before


def test_predict_refuses_output_paths_it_cannot_or_must_not_write(tmp_path):
    """Found by review: ``predict MODEL TEST -o TEST`` replaced the test data with the
    labels and ``-o MODEL`` the model (exit 0), and ``-o FIFO`` blocked. Each is a usage
    error before the prediction, as fit's ``-m``."""
    train = _three_classes(tmp_path / "train.txt", 40, 0)
    test = _three_classes(tmp_path / "test.txt", 20, 1)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    model = tmp_path / "model.mk"
    subprocess.run([sys.executable, "-m", "marginkit", "fit", str(train), "-q", "-m",
                    str(model)], check=True, env=env, cwd=tmp_path, timeout=120)
    before = {p: p.read_bytes() for p in (test, model)}
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    for out, message in ((test, "is the input file TEST"), (model, "is the input file MODEL"),
                         (fifo, "a FIFO that nothing reads"),
                         (tmp_path, "is not a regular file")):
        proc = subprocess.run([sys.executable, "-m", "marginkit", "predict", str(model),
                               str(test), "-o", str(out)], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=120)
        assert proc.returncode == 2 and message in proc.stderr, (out, proc.stderr)
        assert "Traceback" not in proc.stderr
    assert all(p.read_bytes() == b for p, b in before.items())
    # a stream is an output (found by review: -o /dev/stdout was refused)
    proc = subprocess.run([sys.executable, "-m", "marginkit", "predict", str(model),
                           str(test), "-q", "-o", "/dev/stdout"], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0 and len(proc.stdout.split()) == 20, proc.stderr


def test_fit_refuses_to_overwrite_a_data_set_given_by_name(data_dir, tmp_path):
    """Found by review: TRAIN (or --test) given as a data-set name was compared with the
    model path as typed, and ``fit heart_scale -m $MARGINKIT_DATA/heart_scale.xz``
    replaced the data set with the model. The name is resolved as the loader does."""
    import shutil

    data = tmp_path / "data"
    data.mkdir()
    for name in ("heart_scale.xz", "australian_scale.xz"):
        shutil.copy(Path(data_dir) / name, data / name)
    before = (data / "heart_scale.xz").read_bytes()
    env = dict(os.environ, MARGINKIT_DATA=str(data),
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for argv in (["heart_scale"], ["australian_scale", "--test", "heart_scale"]):
        proc = subprocess.run([sys.executable, "-m", "marginkit", "fit", *argv, "-q", "-m",
                               str(data / "heart_scale.xz")], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=120)
        assert proc.returncode == 2 and "is the input file" in proc.stderr, proc.stderr
    assert (data / "heart_scale.xz").read_bytes() == before


def test_fit_refuses_gamma_given_twice(tmp_path):
    """Found by review: --gamma 1 with --kernel-param gamma=2 used 1 silently (the -c /
    --param C pair was refused already)."""
    train = _three_classes(tmp_path / "train.txt", 40, 0)
    proc = _cli("fit", train, "-q", "--kernel", "rbf", "--gamma", "1", "--kernel-param",
                "gamma=2", cwd=tmp_path)
    assert proc.returncode == 2 and "gamma is also given by --kernel-param" in proc.stderr


def test_fit_refuses_continuous_labels_and_aligns_long_class_labels(capsys, tmp_path):
    """Found by review: a regression file (continuous labels) ran one one-vs-rest problem
    per distinct value (2,999 solves for 3,000 rows, a 147 MB model) and said nothing;
    a class label of 12 characters or more ran into its line's text."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((90, 3))
    t = X[:, 0] + 0.1 * rng.standard_normal(90)
    path = tmp_path / "reg.txt"
    rows = [" ".join(f"{j + 1}:{x:.6g}" for j, x in enumerate(r)) for r in X]
    path.write_text("".join(f"{float(v)!r} {r}\n" for v, r in zip(t, rows)))
    code, out, err = run(capsys, "fit", str(path))
    assert code == 2 and "continuous" in err and "loss=squared" in err
    path.write_text("".join(f"{0.5 + float(v > 0)!r} {r}\n" for v, r in zip(t, rows)))
    code, out, err = run(capsys, "fit", str(path))  # two classes coded 0.5 and 1.5 (review)
    assert code == 2 and "continuous" in err and "0.5" in err
    labels = np.repeat([1234567890123, 2, 3], 30)
    path.write_text("".join(f"{c} " + " ".join(f"{j + 1}:{x:.6g}" for j, x in enumerate(r))
                            + "\n" for c, r in zip(labels, X + labels[:, None] % 7)))
    code, out, err = run(capsys, "fit", str(path))
    assert code == 0, err
    line = next(s for s in out.splitlines() if s.startswith("class 1234567890123"))
    assert line.startswith("class 1234567890123 ")
