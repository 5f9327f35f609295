"""The kernel-SVM benchmark harness (benchmarks/kernel_svm.py) on its synthetic data: the
peers run and agree, marginkit's solvers run or are skipped with the solver's reason."""
import importlib.util
import json
import os

import numpy as np
import pytest

import marginkit as mk

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                     "benchmarks", "kernel_svm.py")


@pytest.fixture(scope="module")
def ks():
    spec = importlib.util.spec_from_file_location("kernel_svm_bench", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_peers_and_marginkit_rows(ks, tmp_path):
    pytest.importorskip("sklearn")
    pytest.importorskip("libsvm")
    names = ["libsvm", "sklearn", "mk:fista_svm", "mk:dcd"]
    out = str(tmp_path / "ks")
    (report,) = ks.main(["--data", "synthetic", "--reps", "2", "--gamma", "0.5",
                         "--methods", ",".join(names), "--out", out])
    rows = {r["method"]: r for r in report["rows"]}
    assert list(rows) == names
    lib, skl = rows["libsvm"], rows["sklearn"]
    for row in (lib, skl):
        assert len(row["times_s"]) == 2 and row["time_s"] > 0
        assert row["accuracy"] > 0.9          # two rings: RBF separates them
    # LIBSVM and scikit-learn's SVC (LIBSVM inside) solve the same problem
    assert abs(lib["accuracy"] - skl["accuracy"]) < 0.01
    assert abs(lib["n_support"] - skl["n_support"]) <= 3
    assert lib["time_vs_libsvm"] == 1.0
    for name in ("mk:fista_svm", "mk:dcd"):
        row = rows[name]
        if "skipped" in row:
            assert "refuses the exact kernel" in row["skipped"]
        else:
            assert row["status"] and 0.0 <= row["accuracy"] <= 1.0
            assert "verify_s" not in row or row["verified"] in (True, False)
    saved = json.loads(open(out + ".json").read())
    assert saved["reports"][0]["gamma"] == 0.5 and saved["meta"]["threads"] == 1
    text = open(out + ".md").read()
    assert "| libsvm |" in text and "| mk:dcd |" in text


def test_unknown_names_are_refused(ks):
    with pytest.raises(ValueError, match="unknown method"):
        ks.methods(["libsvm", "svmlight"])
    with pytest.raises(ValueError, match="unknown data set"):
        ks.load("nonesuch")


def test_marginkit_rows_with_their_own_mu(ks):
    a, b = ks.methods(["mk:dcd@0.01", "mk:dcd"], mu=None)
    assert (a.name, a.solver, a.mu) == ("mk:dcd@0.01", "dcd", 0.01)
    assert (b.solver, b.mu) == ("dcd", None)
    with pytest.raises(ValueError, match="must be a number"):
        ks.methods(["mk:dcd@small"])
    with pytest.raises(ValueError, match="unknown method"):
        ks.methods(["mk:svmlight@0.1"])


def test_default_gamma(ks):
    X, y, _, _, _ = ks.load("synthetic")
    assert ks.default_gamma("a9a10k", X) == 0.05
    assert ks.default_gamma("synthetic", X) == pytest.approx(1.0 / (X.shape[1] * X.var()))


def test_thundersvm_reads_dense_copies(ks):
    pytest.importorskip("thundersvm")
    X, y, Xt, yt, _ = ks.load("synthetic")
    import scipy.sparse as sp

    data = {"X": sp.csr_matrix(X), "y": y, "Xt": sp.csr_matrix(Xt), "yt": yt}
    m = ks.ThunderSVC("thundersvm")
    est = m.prepare(data, 0.5, 1.0, 1)
    assert isinstance(data["X_dense"], np.ndarray)
    res = m.finish(data, est, m.fit(data, est))
    assert res["accuracy"] > 0.9
