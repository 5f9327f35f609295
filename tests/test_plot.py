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


def _legend_labels(ax):
    legend = ax.get_legend()
    return [] if legend is None else [t.get_text() for t in legend.get_texts()]


@pytest.mark.skipif("dcd" not in mk.list_plugins()["solver"], reason="dcd not registered")
def test_dcd_convergence_draws_the_bound_where_it_was_computed():
    # dcd computes its error bound (and the certified points) at some iterations only:
    # the plot draws those points, says so, and shows the certified fraction there
    X, y = mk.datasets.load_heart_scale()
    res = mk.solve(X, y, solver="dcd")
    eb = np.asarray(res.history["error_bound"])
    known = np.flatnonzero(np.isfinite(eb))
    assert 0 < known.size < eb.size  # the case this test is about
    fig = mkplot.convergence(res)
    bounds, _, certified = fig.axes
    label = f"error bound (computed at {known.size} of {eb.size} iterations)"
    assert label in _legend_labels(bounds)
    line = bounds.get_lines()[_legend_labels(bounds).index(label)]
    np.testing.assert_array_equal(line.get_xdata(), known)
    np.testing.assert_allclose(line.get_ydata(), eb[known])
    assert line.get_marker() == "o"  # a lone point of a line is visible
    n = X.shape[0]
    assert _legend_labels(certified) == [
        f"fraction of the {n} training points certified (computed at {known.size} of "
        f"{eb.size} iterations)"]
    frac = certified.get_lines()[0]
    np.testing.assert_array_equal(frac.get_xdata(), known)
    np.testing.assert_allclose(frac.get_ydata(), np.asarray(res.history["n_certified"])[known] / n)
    assert frac.get_ydata()[-1] == res.certified_mask.sum() / n
    assert certified.get_ylim()[1] < 1.1 and certified.get_ylabel() == "certified points"
    for ax in fig.axes:  # every legend entry is a line with points
        for ln in ax.get_lines():
            assert np.isfinite(np.asarray(ln.get_ydata(), dtype=float)).all()


@pytest.mark.skipif("fista" not in mk.list_plugins()["solver"], reason="fista not registered")
def test_fista_certified_panel_is_a_fraction_where_the_bound_is_finite():
    X, y = mk.datasets.load_heart_scale()
    res = mk.solve(X, y, solver="fista")
    certified = mkplot.convergence(res).axes[2]
    eb = np.asarray(res.history["error_bound"])
    line = certified.get_lines()[0]
    np.testing.assert_array_equal(line.get_xdata(), np.flatnonzero(np.isfinite(eb)))
    assert 0 <= line.get_ydata().min() and line.get_ydata().max() <= 1
    assert line.get_ydata()[-1] == res.certified_mask.sum() / X.shape[0]


@pytest.mark.skipif("snkp" not in mk.list_plugins()["solver"], reason="snkp not registered")
def test_a_bound_that_does_not_exist_has_no_legend_entry():
    # XOR is not linearly separable: no lower bound on the margin at any iteration
    X, y = mk.datasets.make_xor(80, random_state=0)[:2]
    res = mk.solve(X, y, solver="snkp", max_iter=50)
    assert np.all(np.isneginf(res.history["margin_lower"]))
    ax = mkplot.margin(res)
    labels = _legend_labels(ax)
    assert not any("lower bound" in t for t in labels)
    assert r"upper bound on $\rho_K$" in labels
    assert [t.get_text() for t in ax.texts] == [
        r"lower bound: $-\infty$ at every iteration (no separator found)"]
    panel = mkplot.convergence(res).axes[-1]
    assert panel.get_ylabel() == "margin bounds"
    assert _legend_labels(panel) == [r"upper bound on $\rho_K$"]
    with pytest.raises(ValueError, match=r"\['margin_lower'\] have no finite value to plot"):
        mkplot.convergence(res, keys=["margin_lower"])


@pytest.mark.skipif("fista" not in mk.list_plugins()["solver"], reason="fista not registered")
def test_decision_boundary_of_fitted_estimators():
    pytest.importorskip("sklearn")
    from marginkit.sklearn import PerceptronClassifier, SVMClassifier

    rng = np.random.default_rng(3)
    centers = np.array([[0.0, 4.0], [4.0, 0.0], [-4.0, -1.0]])
    X = np.vstack([c + rng.standard_normal((40, 2)) for c in centers])
    y = np.repeat(np.array(["a", "b", "c"]), 40)
    clf = SVMClassifier(solver="fista").fit(X, y)
    ax = mkplot.decision_boundary(clf, X, y)
    both = np.logical_and.reduce([r.certified_mask for r in clf.results_])
    assert both.sum() > 0
    labels = _legend_labels(ax)
    assert labels == ["class a", "class b", "class c",
                      f"certified in all 3 one-vs-rest problems: {both.sum()}/120",
                      "boundaries between classes (largest one-vs-rest score)"]
    assert ax.get_title().startswith("SVMClassifier (fista), 3 one-vs-rest problems")
    # the shaded regions are the predicted classes: one filled level per class
    filled = [c for c in ax.collections if type(c).__name__ in ("QuadContourSet", "PathCollection")
              and getattr(c, "levels", None) is not None]
    assert any(np.array_equal(c.levels, [-0.5, 0.5, 1.5, 2.5]) for c in filled)

    two = y != "c"
    per = PerceptronClassifier(solver="snkp").fit(X[two], y[two])
    ax = mkplot.decision_boundary(per, X[two], y[two])
    assert per.result_.status == "separable"
    assert "certified (separator): 80/80" in _legend_labels(ax) and "f(x) = 0" in _legend_labels(ax)
    assert ax.get_title().startswith("PerceptronClassifier: snkp: separable")

    with pytest.raises(ValueError, match="not fitted yet; call fit"):
        mkplot.decision_boundary(SVMClassifier(), X, y)
    with pytest.raises(ValueError, match=r"labels \['c'\] that are not in the model's classes_"):
        mkplot.decision_boundary(per, X, y)
    with pytest.raises(TypeError, match="marginkit.Result or a fitted marginkit.sklearn"):
        mkplot.decision_boundary(object(), X, y)


def test_decision_boundary_checks_x_and_the_grid_first():
    """Found by review: a NaN in X was reported in the grid's rows, a finite X whose padded
    range overflows was called NaN, resolution=10**6 asked numpy for 7 TiB and
    resolution=0 said "X is empty"."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    y = np.where(X[:, 0] > 0, 1, -1)
    res = mk.solve(X, y, solver="fista")
    Z = X.copy()
    Z[3, 0] = np.nan
    for kw, message in ((dict(X=Z), r"row\(s\) \[3\]"), (dict(X=X * 6e307), "overflows"),
                        (dict(X=X, resolution=10**6), "resolution=1000000"),
                        (dict(X=X, resolution=0), "resolution=0"),
                        (dict(X=X[:0]), "no rows"), (dict(X=X, margin_frac="x"), "margin_frac"),
                        (dict(X=X, margin_frac=np.ones(2)), "margin_frac")):
        with pytest.raises(ValueError, match=message):
            mkplot.decision_boundary(res, y=y, **kw)
    plt.close("all")
