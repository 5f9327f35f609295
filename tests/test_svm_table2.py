"""benchmarks/svm_table2.py: a single-size run writes its JSON and plot; the ladder ends
at --max-n itself."""
import importlib.util
import json
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "svm_table2.py"


@pytest.fixture
def t2(monkeypatch):
    pytest.importorskip("sklearn")
    pytest.importorskip("liblinear")
    monkeypatch.syspath_prepend(str(_PATH.parent))
    spec = importlib.util.spec_from_file_location("svm_table2_bench", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_single_size_run_writes_json_and_plot(t2, tmp_path):
    out = tmp_path / "t2"
    t2.main(["--like", "higgs", "--min-n", "2000", "--max-n", "2000", "--n-test", "500",
             "--out", str(out)])
    data = json.loads(Path(str(out) + ".json").read_text())
    assert {r["n"] for r in data["rows"]} == {2000} and data["slopes"] == {}
    assert "dcd" in {r["method"] for r in data["rows"]}
    if "matplotlib" in sys.modules:
        assert Path(str(out) + ".png").stat().st_size > 0


def test_ladder_ends_at_max_n(t2, tmp_path):
    out = tmp_path / "t2"
    t2.main(["--like", "higgs", "--min-n", "1000", "--max-n", "2500", "--n-test", "300",
             "--out", str(out)])
    data = json.loads(Path(str(out) + ".json").read_text())
    assert sorted({r["n"] for r in data["rows"]}) == [1000, 2500]
    assert "dcd" in data["slopes"]
