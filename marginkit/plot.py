"""Plots of a ``marginkit.Result`` (``pip install marginkit[plot]``: matplotlib).

* ``convergence(result)``: the per-iteration history, one panel per kind of quantity:
  error bounds and gaps (log scale), objective values, certified counts, margin bounds.
* ``margin(result)``: the interval ``[lower, upper]`` on the normalized margin rho_K
  closing over the iterations (perceptron / von Neumann family, Ramdas & Pena 2014).
* ``decision_boundary(model, X, y)``: the decision function of a model fit on 2-D data
  (a Result or a fitted ``marginkit.sklearn`` classifier; more than two classes: the
  region of each class), its boundary, the training points and the points the
  certificate covers.

Only what a result holds is drawn: an entry that is infinite at every iteration (a margin
lower bound before any separator, an error bound not computed yet) has no line and no
legend entry, and an entry known at some iterations only says so in its label.

Each function returns the matplotlib ``Figure`` (``convergence``) or ``Axes`` it drew
on, so it can be saved (``fig.savefig("conv.png")``) or adjusted.
"""
import math

import numpy as np

__all__ = ["convergence", "margin", "decision_boundary", "HISTORY_PANELS"]

#: panel title -> (history keys, y-axis scale); a panel is drawn when its keys are present
HISTORY_PANELS = (
    ("error bounds and gaps", ("error_bound", "dual_norm", "decrement", "projected_gradient_gap",
                               "gap", "target"), "log"),
    ("objective", ("objective", "empirical_risk"), "linear"),
    ("certified points", ("n_certified",), "linear"),
    ("margin bounds", ("margin_lower", "margin_upper"), "linear"),
)

_LABELS = {
    "error_bound": "error bound",
    "dual_norm": r"$\|p\|_G$ (dual norm)",
    "decrement": "Newton decrement",
    "projected_gradient_gap": "projected-gradient gap",
    "gap": "duality gap",
    "target": "decrement target",
    "objective": "objective",
    "empirical_risk": "empirical risk",
    "n_certified": "certified training points",
    "margin_lower": r"lower bound on $\rho_K$",
    "margin_upper": r"upper bound on $\rho_K$",
    "min_margin": r"$\min_i (G\alpha)_i$",
}


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - only without matplotlib
        raise ImportError(
            "marginkit.plot needs matplotlib; install it with 'pip install marginkit[plot]'"
        ) from exc
    return plt


def _check_result(result):
    from ._result import Result

    if not isinstance(result, Result):
        raise TypeError(f"result must be a marginkit.Result, got {type(result).__name__}")


def _title(result):
    return f"{result.solver}: {result.status} after {result.n_iter} iterations"


def _series(hist, key, scale, n_samples):
    """What ``convergence`` draws for ``key``: ``(iterations, values, label)`` or None when
    the history has no point to draw (no legend entry for a line that is not there).

    A log-scale series keeps its finite positive values; a linear one its finite values.
    ``n_certified`` is drawn as the fraction of the ``n_samples`` training points (when
    known), at the iterations where it was computed: where the history's error bound is
    finite (dcd computes its bound, and so the certified points, at some iterations only;
    elsewhere it records 0 with an infinite bound). A series drawn at only some of the
    iterations says so in its label, and gets markers when its points are sparse."""
    v = hist[key]
    it = np.arange(v.size)
    label = _LABELS.get(key, key)
    ok = np.isfinite(v)
    if key == "n_certified" and "error_bound" in hist and hist["error_bound"].size == v.size:
        ok &= np.isfinite(hist["error_bound"])
    if key == "n_certified" and n_samples:
        v = v / n_samples
        label = f"fraction of the {n_samples} training points certified"
    if scale == "log":
        ok &= v > 0
    k = int(ok.sum())
    if k == 0:
        return None
    if k < v.size:
        what = "computed" if key in ("n_certified", "error_bound") else "finite"
        label += f" ({what} at {k} of {v.size} iterations)"
    return it[ok], v[ok], label


def _n_samples(result):
    """The number of training points, when the result says it (SVM family)."""
    for field in (result.certified_mask, result.dual_coef_):
        if field is not None and np.ndim(field) == 1:
            return int(np.shape(field)[0])
    return None


def convergence(result, keys=None, fig=None):
    """Plot the history of a run against the iteration number.

    Parameters
    ----------
    result : marginkit.Result
    keys : list of str, optional
        History entries to draw (one panel each). Default: the panels of
        ``HISTORY_PANELS`` whose entries the solver recorded (e.g. ``error_bound``,
        ``objective`` and ``n_certified`` for the SVM family; ``dual_norm`` and the margin
        bounds for the perceptron family; the Newton decrement for iterated Tikhonov);
        other recorded entries (``mu``, ``delta``, ...) are drawn when asked for.
    fig : matplotlib Figure, optional
        Figure to draw on (cleared); a new one by default.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        When the result has no history to draw, or a requested key is missing.

    Notes
    -----
    Only what the history holds is drawn: infinite or undefined entries (an error bound
    before it is first computed, a margin lower bound of -inf before a separator is
    found) are left out, an entry with no finite value gets no line and no legend entry,
    and an entry known at some iterations only says so in its legend label (``dcd``
    computes its error bound, and with it the certified points, only at some
    iterations: those are drawn as markers; by default only at the epoch that certifies,
    a single marker, and ``mk.solve(..., solver="dcd", bound_check="always")`` computes
    it at every epoch for a curve). The certified-points panel shows the fraction of the
    training points certified, at the iterations where it was computed.
    """
    _check_result(result)
    plt = _pyplot()
    hist = {k: np.asarray(v, dtype=float).ravel() for k, v in (result.history or {}).items()}
    if not hist:
        raise ValueError(f"result of {result.solver!r} has no history to plot")
    n_samples = _n_samples(result)
    if keys is not None:
        missing = [k for k in keys if k not in hist]
        if missing:
            raise ValueError(f"keys {missing} are not in the history; recorded: {sorted(hist)}")
        panels = [(_LABELS.get(k, k), (k,), "log" if np.all(hist[k] > 0) else "linear") for k in keys]
    else:
        panels = [(t, tuple(k for k in ks if k in hist), s) for t, ks, s in HISTORY_PANELS]
        panels = [p for p in panels if p[1]]
        if not panels:  # a solver recording none of the usual quantities: draw what it has
            panels = [(_LABELS.get(k, k), (k,), "linear") for k in sorted(hist)]
    drawn = []
    for title, ks, scale in panels:
        series = [s for s in (_series(hist, k, scale, n_samples) for k in ks) if s is not None]
        if series:
            drawn.append((title, ks, scale, series))
        elif keys is not None:
            raise ValueError(f"history entries {list(ks)} have no finite value to plot")
    if not drawn:
        raise ValueError(f"the history of {result.solver!r} has no finite value to plot "
                         f"(recorded: {sorted(hist)})")
    if fig is None:
        fig = plt.figure(figsize=(6.4, 2.4 * len(drawn) + 0.6))
    else:
        fig.clf()
    axes = fig.subplots(len(drawn), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (title, ks, scale, series) in zip(axes, drawn):
        for it, v, label in series:
            sparse = v.size < 3 or 2 * v.size < it[-1] - it[0] + 1
            style = {"marker": "o", "ms": 4} if sparse else {}
            (ax.semilogy if scale == "log" else ax.plot)(it, v, label=label, **style)
        if "margin_lower" in ks:
            ax.axhline(0.0, color="0.6", lw=0.8, ls=":")
        if "n_certified" in ks and n_samples:
            ax.set_ylim(-0.03, 1.03)
        ax.set_ylabel(title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small", loc="best")
    axes[-1].set_xlabel("iteration")
    axes[0].set_title(_title(result))
    fig.tight_layout()
    return fig


def margin(result, ax=None):
    """The margin interval closing over the iterations (perceptron / von Neumann family).

    Draws the lower and upper bounds on the normalized margin
    ``rho_K = max_{||f||=1} min_i y_i f(x_i) / sqrt(K(x_i, x_i))`` (Ramdas & Pena 2014) recorded
    each iteration, the band between them, and the zero line: a lower bound above zero
    certifies separability, an upper bound below or at zero certifies infeasibility.

    Parameters
    ----------
    result : marginkit.Result
        Its history must have ``margin_lower`` and ``margin_upper``.
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes
    """
    _check_result(result)
    plt = _pyplot()
    hist = result.history or {}
    if "margin_lower" not in hist or "margin_upper" not in hist:
        raise ValueError(
            f"margin() needs a history with 'margin_lower' and 'margin_upper' (perceptron / "
            f"von Neumann family); {result.solver!r} recorded {sorted(hist)}"
        )
    lo = np.asarray(hist["margin_lower"], dtype=float)
    hi = np.asarray(hist["margin_upper"], dtype=float)
    it = np.arange(lo.size)
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 4.0))
    finite = np.concatenate([lo[np.isfinite(lo)], hi[np.isfinite(hi)], [0.0]])
    span = float(finite.max() - finite.min()) or 1.0
    bottom = float(finite.min()) - 0.08 * span
    top = float(finite.max()) + 0.08 * span
    # no lower bound yet (-inf): the band reaches the bottom of the axes
    lo_band = np.where(np.isfinite(lo), lo, bottom)
    hi_band = np.where(np.isfinite(hi), hi, top)
    ax.fill_between(it, lo_band, hi_band, color="C0", alpha=0.2, label=r"interval containing $\rho_K$")
    # a bound gets a line (and a legend entry) only where it exists: the lower bound is
    # -inf until a separator is found, the upper bound is +inf where none is known
    missing = []
    ok = np.isfinite(hi)
    if ok.any():
        ax.plot(it, hi, color="C0", marker="." if ok.sum() < 3 else None,
                label=r"upper bound on $\rho_K$" + ("" if ok.all() else r" ($+\infty$ elsewhere)"))
    else:
        missing.append(r"upper bound: $+\infty$ at every iteration")
    ok = np.isfinite(lo)
    if ok.any():
        ax.plot(it[ok], lo[ok], color="C1", marker="." if ok.sum() < 3 else None,
                label=r"lower bound on $\rho_K$" + ("" if ok.all() else r" ($-\infty$ before)"))
    else:
        missing.append(r"lower bound: $-\infty$ at every iteration (no separator found)")
    if missing:
        ax.text(0.02, 0.02, "\n".join(missing), transform=ax.transAxes, fontsize="small",
                va="bottom", ha="left", color="0.25")
    ax.set_ylim(bottom, top)
    ax.axhline(0.0, color="0.4", lw=0.8, ls=":")
    ax.set_xlabel("iteration")
    ax.set_ylabel(r"normalized margin $\rho_K$")
    ax.set_title(_title(result))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="best")
    return ax


def _certified(result, n):
    """The training points ``result``'s certificate covers, as a mask of length n (None
    when it covers none or its mask is for other data)."""
    if result.certified_mask is not None:
        mask = np.asarray(result.certified_mask, dtype=bool)
        return mask if mask.shape == (n,) else None
    cert = result.certificate
    if cert is not None and cert.kind == "separator":
        return np.ones(n, dtype=bool)
    return None


def _check_estimator(model):
    """``model`` is a Result or a marginkit.sklearn classifier, else a TypeError."""
    from ._result import Result

    if isinstance(model, Result):
        return
    try:
        from .sklearn import _MarginClassifier
    except ImportError:  # no scikit-learn: no estimator can be one of ours
        _MarginClassifier = ()
    if not isinstance(model, _MarginClassifier):
        raise TypeError("result must be a marginkit.Result or a fitted marginkit.sklearn "
                        f"classifier, got {type(model).__name__}")


def _model_of(model, n):
    """``(decision_function, classes, certified mask, mask label, title)`` of a Result or
    a fitted marginkit estimator (``marginkit.sklearn``)."""
    from ._result import Result

    if isinstance(model, Result):
        if model.classes_ is None:
            raise ValueError("decision_boundary() needs a classifier result (classes_ is None)")
        mask = _certified(model, n)
        label = None
        if mask is not None:
            label = "certified correct" if model.certified_mask is not None else "certified (separator)"
        return model.decision_function, np.asarray(model.classes_), mask, label, _title(model)
    _check_estimator(model)
    results = getattr(model, "results_", None)
    if results is None or not hasattr(model, "classes_"):
        raise ValueError(f"this {type(model).__name__} is not fitted yet; call fit(X, y) first")
    classes = np.asarray(model.classes_)
    masks = [_certified(r, n) for r in results]
    # one-vs-rest: a point is certified when every binary problem certifies it (its own
    # class's score proved positive, every other class's proved negative), which proves
    # the argmax; two classes: the one problem's certificate
    mask = None if any(m is None for m in masks) else np.logical_and.reduce(masks)
    label = None
    if mask is not None:
        if len(results) > 1:
            label = f"certified in all {len(results)} one-vs-rest problems"
        elif results[0].certified_mask is not None:
            label = "certified correct"
        else:
            label = "certified (separator)"
    if len(results) == 1:
        title = f"{type(model).__name__}: {_title(results[0])}"
    else:
        statuses = sorted({r.status for r in results})
        title = (f"{type(model).__name__} ({results[0].solver}), {len(results)} one-vs-rest "
                 f"problems: {', '.join(statuses)}")
    return model.decision_function, classes, mask, label, title


def decision_boundary(result, X, y, ax=None, resolution=200, margin_frac=0.1):
    """The decision regions of a 2-D classifier, its boundary and the certified points.

    Parameters
    ----------
    result : marginkit.Result or fitted marginkit.sklearn classifier
        A classifier fit on 2-D data (its ``decision_function`` is evaluated on a grid):
        a ``Result`` of ``solve``, or an estimator of ``marginkit.sklearn``
        (``SVMClassifier``, ``PerceptronClassifier``, ``IteratedTikhonovClassifier``),
        with two classes or more (one-vs-rest).
    X : array-like or sparse matrix, shape (n_samples, 2)
    y : array-like, shape (n_samples,)
        Labels (from the model's ``classes_``).
    ax : matplotlib Axes, optional
    resolution : int, default 200
        Grid points per axis.
    margin_frac : float, default 0.1
        Extra room around the data, as a fraction of its range.

    Returns
    -------
    matplotlib.axes.Axes

    Notes
    -----
    Two classes: the decision function f is shaded (colour bar) and its zero level set
    drawn. More classes: each class's region (where its one-vs-rest score is the largest)
    is shaded in the colour of its points, and the boundaries between regions are drawn.
    Certified points are circled when ``X`` is the training data: all points when the
    certificate is a separator (every ``y_i f(x_i) > 0`` is proved), or
    ``certified_mask`` (SVM family); for one-vs-rest, the points certified in every
    binary problem (which proves the predicted class).
    """
    _check_estimator(result)
    plt = _pyplot()
    import scipy.sparse as sp

    if sp.issparse(X):
        # its structure and width before anything reads or densifies it (found by
        # review: a column index out of range crashed scipy's toarray, a 3 x 2e9 matrix
        # asked for 45 GiB before the shape was checked)
        from ._validation import checked_csr

        if X.ndim != 2 or X.shape[1] != 2:
            raise ValueError(f"decision_boundary() needs 2-D data, X has shape {X.shape}")
        X = checked_csr(X).toarray()
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[1] != 2:
        raise ValueError(f"decision_boundary() needs 2-D data, X has shape {X.shape}")
    # the grid is built from X, resolution and margin_frac: each checked first (found by
    # review: a NaN in X was reported in the grid's rows, resolution=10**6 asked numpy for
    # 7 TiB, an overflowing span was called a NaN in X)
    bad = np.flatnonzero(~np.isfinite(X).all(axis=1))
    if bad.size:
        raise ValueError(f"X contains NaN or infinity in row(s) {bad[:10].tolist()}; "
                         "remove or impute them")
    if isinstance(resolution, bool) or not isinstance(resolution, (int, np.integer)) \
            or not 2 <= resolution <= 4096:
        raise ValueError(f"resolution={resolution!r} must be an int in [2, 4096] (the grid "
                         "has resolution^2 points)")
    if X.shape[0] == 0:
        raise ValueError("X has no rows; pass the points to draw")
    if isinstance(margin_frac, bool) or not isinstance(margin_frac, (int, float, np.integer,
                                                                     np.floating)) \
            or not (math.isfinite(margin_frac) and margin_frac >= 0):
        raise ValueError(f"margin_frac={margin_frac!r} must be a finite number >= 0")
    with np.errstate(over="ignore", invalid="ignore"):
        span = X.max(axis=0) - X.min(axis=0)
        edges = np.abs(X).max(axis=0) + (1.0 + margin_frac) * span
    if not np.all(np.isfinite(edges)):
        raise ValueError("X's range overflows float64 once padded by margin_frac; rescale X "
                         "for the plot")
    y = np.asarray(y).ravel()
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"y has {y.shape[0]} labels, X has {X.shape[0]} rows")
    decision, classes, mask, mask_label, title = _model_of(result, X.shape[0])
    unknown = np.setdiff1d(np.unique(y), classes)
    if unknown.size:
        raise ValueError(f"y has labels {unknown[:10].tolist()} that are not in the model's "
                         f"classes_ {classes[:10].tolist()}; pass the labels the model was fit on")
    if ax is None:
        _, ax = plt.subplots(figsize=(5.6, 5.0))
    lo, hi = X.min(axis=0), X.max(axis=0)
    pad = margin_frac * np.where(hi > lo, hi - lo, 1.0)
    gx = np.linspace(lo[0] - pad[0], hi[0] + pad[0], resolution)
    gy = np.linspace(lo[1] - pad[1], hi[1] + pad[1], resolution)
    xx, yy = np.meshgrid(gx, gy)
    d = np.asarray(decision(np.column_stack([xx.ravel(), yy.ravel()])), dtype=float)
    if classes.size == 2:
        d = d.reshape(xx.shape)
        lim = float(np.max(np.abs(d))) or 1.0
        cs = ax.contourf(xx, yy, d, levels=np.linspace(-lim, lim, 21), cmap="RdBu_r", alpha=0.45)
        ax.contour(xx, yy, d, levels=[0.0], colors="k", linewidths=1.5)
        cbar = ax.figure.colorbar(cs, ax=ax)
        cbar.set_label("decision function f(x)")
        colors = [("C0", "o"), ("C3", "s")]
        boundary = "f(x) = 0"
    else:
        from matplotlib.colors import ListedColormap

        k = classes.size
        palette = [plt.get_cmap("tab10")(i % 10) for i in range(k)]
        region = np.argmax(d.reshape(xx.size, k), axis=1).reshape(xx.shape)
        ax.contourf(xx, yy, region, levels=np.arange(k + 1) - 0.5, cmap=ListedColormap(palette),
                    alpha=0.3)
        ax.contour(xx, yy, region, levels=np.arange(k - 1) + 0.5, colors="k", linewidths=1.2)
        colors = [(palette[i], "osD^v<>ph*"[i % 10]) for i in range(k)]
        boundary = "boundaries between classes (largest one-vs-rest score)"
    for c, (color, marker) in zip(classes, colors):
        sel = y == c
        ax.scatter(X[sel, 0], X[sel, 1], color=color, marker=marker, s=22, edgecolors="none",
                   label=f"class {c}")
    if mask is not None and mask.any():
        ax.scatter(X[mask, 0], X[mask, 1], s=70, facecolors="none", edgecolors="k",
                   linewidths=0.8, label=f"{mask_label}: {int(mask.sum())}/{X.shape[0]}")
    ax.plot([], [], color="k", lw=1.5, label=boundary)
    ax.set_xlabel("feature 1")
    ax.set_ylabel("feature 2")
    ax.set_title(title)
    ax.legend(fontsize="small", loc="best", framealpha=0.8)
    return ax
