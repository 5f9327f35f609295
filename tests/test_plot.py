"""marginkit.plot: figures are drawn from a Result, labelled, and refuse what they cannot show."""
import os
import sys

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import marginkit as mk  # noqa: E402
from marginkit import plot as mkplot  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from _surface_helpers import TOY, register_toy, separable_blobs  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


@pytest.fixture
def toy_result():
    register_toy()
    X, y = separable_blobs(40, seed=5)
    return mk.solve(X, y, solver=TOY, kernel="rbf"), X, y


def test_convergence_panels_are_labelled(toy_result, tmp_path):
    res, X, y = toy_result
    fig = mkplot.convergence(res)
    axes = fig.axes
    assert len(axes) == 1  # the toy records only the margin lower bound panel
    assert axes[-1].get_xlabel() == "iteration" and axes[0].get_ylabel() == "margin bounds"
    assert TOY in axes[0].get_title() and "separable" in axes[0].get_title()
    fig.savefig(tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 1000
    fig = mkplot.convergence(res, keys=["min_margin"])
    assert fig.axes[0].get_lines()[0].get_ydata().size == res.n_iter + 1
    with pytest.raises(ValueError, match=r"keys \['nope'\] are not in the history"):
        mkplot.convergence(res, keys=["nope"])


def test_decision_boundary_marks_certified_points(toy_result):
    res, X, y = toy_result
    ax = mkplot.decision_boundary(res, X, y)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "certified (separator): 40/40" in labels and "f(x) = 0" in labels
    assert ax.get_xlabel() == "feature 1" and ax.get_ylabel() == "feature 2"
    with pytest.raises(ValueError, match="needs 2-D data"):
        mkplot.decision_boundary(res, np.ones((3, 3)), [0, 1, 0])
    with pytest.raises(ValueError, match="3 labels"):
        mkplot.decision_boundary(res, X, y[:3])


def test_margin_needs_perceptron_history(toy_result):
    res, X, y = toy_result
    with pytest.raises(ValueError, match="margin_upper"):
        mkplot.margin(res)  # the toy records no upper bound
    with pytest.raises(TypeError, match="marginkit.Result"):
        mkplot.margin({"history": {}})


@pytest.mark.skipif("snkp" not in mk.list_plugins()["solver"], reason="snkp not registered")
def test_margin_interval_contains_final_bounds():
    X, y = separable_blobs(60, seed=2)
    res = mk.solve(X, y, solver="snkp", kernel="rbf")
    ax = mkplot.margin(res)
    lo, hi = res.history["margin_lower"], res.history["margin_upper"]
    assert lo[np.isfinite(lo)].size and np.all(lo[np.isfinite(lo)] <= hi[np.isfinite(lo)] + 1e-12)
    upper_line = ax.get_lines()[0]
    np.testing.assert_allclose(upper_line.get_ydata(), hi)
    assert ax.get_ylabel().startswith("normalized margin")


@pytest.mark.skipif("fista" not in mk.list_plugins()["solver"], reason="fista not registered")
def test_svm_convergence_and_certified_mask():
    X, y = mk.datasets.load_heart_scale()
    res = mk.solve(X, y, solver="fista")
    fig = mkplot.convergence(res)
    ylabels = [a.get_ylabel() for a in fig.axes]
    assert ylabels == ["error bounds and gaps", "objective", "certified points"]
    X2, y2 = separable_blobs(100, seed=7)
    res2 = mk.solve(X2, y2, solver="fista")
    ax = mkplot.decision_boundary(res2, X2, y2)
    n = int(res2.certified_mask.sum())
    assert n > 0
    assert f"certified correct: {n}/100" in [t.get_text() for t in ax.get_legend().get_texts()]
