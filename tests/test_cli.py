"""The command line: demo, fit, bench, plugins; exit codes and one-line usage errors."""
import importlib.metadata
import lzma
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
    res = mk.load_result(model)
    assert res.status == "separable" and res.solver == TOY


def test_fit_kernel_and_verbose(capsys, toy, files):
    train, _ = files
    code, out, err = run(capsys, "fit", str(train), "--solver", TOY, "--kernel", "rbf",
                         "--gamma", "0.5", "-vv")
    assert code == 0, err
    assert "kernel rbf" in out and f"[{TOY}] iter" in out and "stopped: separable" in out


@pytest.mark.parametrize("argv,match", [
    ([], "choose a command"),
    (["fit"], "required: TRAIN, --solver"),
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
    three = tmp_path / "three"
    three.write_text("1 1:1\n2 1:2\n3 2:1\n")
    code, out, err = run(capsys, "fit", str(three), "--solver", TOY)
    assert code == 2 and err.count("\n") == 1
    assert f"argument TRAIN: the labels of {three} has 3 classes" in err

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
    rows = [ln for ln in proc.stdout.splitlines() if " snkp " in ln]
    assert len(rows) == 4  # heart_scale and xor, linear and rbf, each once
    assert all(" yes " in ln for ln in rows if "separable" in ln)


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
