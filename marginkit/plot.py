"""Plots of a ``marginkit.Result`` (``pip install marginkit[plot]``: matplotlib).

* ``convergence(result)``: the per-iteration history, one panel per kind of quantity:
  error bounds and gaps (log scale), objective values, certified counts, margin bounds.
* ``margin(result)``: the interval ``[lower, upper]`` on the normalized margin rho_K
  closing over the iterations (perceptron / von Neumann family, Ramdas & Pena 2014).
* ``decision_boundary(result, X, y)``: the decision function of a model fit on 2-D
  data, its zero level set, the training points and the points the certificate covers.

Each function returns the matplotlib ``Figure`` (``convergence``) or ``Axes`` it drew
on, so it can be saved (``fig.savefig("conv.png")``) or adjusted.
"""
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
    """
    _check_result(result)
    plt = _pyplot()
    hist = {k: np.asarray(v, dtype=float) for k, v in (result.history or {}).items()}
    if not hist:
        raise ValueError(f"result of {result.solver!r} has no history to plot")
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
    if fig is None:
        fig = plt.figure(figsize=(6.4, 2.4 * len(panels) + 0.6))
    else:
        fig.clf()
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (title, ks, scale) in zip(axes, panels):
        for k in ks:
            v = hist[k]
            it = np.arange(v.size)
            if scale == "log":
                ok = v > 0
                if not ok.any():
                    continue
                ax.semilogy(it[ok], v[ok], label=_LABELS.get(k, k))
            else:
                ax.plot(it, v, label=_LABELS.get(k, k))
        if "margin_lower" in ks:
            ax.axhline(0.0, color="0.6", lw=0.8, ls=":")
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
    ax.plot(it, hi, color="C0", label=r"upper bound on $\rho_K$")
    ok = np.isfinite(lo)
    ax.plot(it[ok], lo[ok], color="C1", marker="." if ok.sum() < 3 else None,
            label=r"lower bound on $\rho_K$" + ("" if ok.all() else r" ($-\infty$ before)"))
    ax.set_ylim(bottom, top)
    ax.axhline(0.0, color="0.4", lw=0.8, ls=":")
    ax.set_xlabel("iteration")
    ax.set_ylabel(r"normalized margin $\rho_K$")
    ax.set_title(_title(result))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="best")
    return ax


def _certified(result, n):
    if result.certified_mask is not None:
        return np.asarray(result.certified_mask, dtype=bool), "certified correct"
    cert = result.certificate
    if cert is not None and cert.kind == "separator":
        return np.ones(n, dtype=bool), "certified (separator)"
    return np.zeros(n, dtype=bool), None


def decision_boundary(result, X, y, ax=None, resolution=200, margin_frac=0.1):
    """The decision function of a 2-D classifier, its zero level set and certified points.

    Parameters
    ----------
    result : marginkit.Result
        A classifier fit on 2-D data (``result.decision_function`` is evaluated on a grid).
    X : array-like or sparse matrix, shape (n_samples, 2)
    y : array-like, shape (n_samples,)
        Labels (``result.classes_``).
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
    Certified points are circled: all points when the certificate is a separator
    (every ``y_i f(x_i) > 0`` is proved), or ``result.certified_mask`` (SVM family).
    """
    _check_result(result)
    plt = _pyplot()
    import scipy.sparse as sp

    X = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[1] != 2:
        raise ValueError(f"decision_boundary() needs 2-D data, X has shape {X.shape}")
    y = np.asarray(y).ravel()
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"y has {y.shape[0]} labels, X has {X.shape[0]} rows")
    if result.classes_ is None:
        raise ValueError("decision_boundary() needs a classifier result (classes_ is None)")
    if ax is None:
        _, ax = plt.subplots(figsize=(5.6, 5.0))
    lo, hi = X.min(axis=0), X.max(axis=0)
    pad = margin_frac * np.where(hi > lo, hi - lo, 1.0)
    gx = np.linspace(lo[0] - pad[0], hi[0] + pad[0], resolution)
    gy = np.linspace(lo[1] - pad[1], hi[1] + pad[1], resolution)
    xx, yy = np.meshgrid(gx, gy)
    d = result.decision_function(np.column_stack([xx.ravel(), yy.ravel()])).reshape(xx.shape)
    lim = float(np.max(np.abs(d))) or 1.0
    cs = ax.contourf(xx, yy, d, levels=np.linspace(-lim, lim, 21), cmap="RdBu_r", alpha=0.45)
    ax.contour(xx, yy, d, levels=[0.0], colors="k", linewidths=1.5)
    cbar = ax.figure.colorbar(cs, ax=ax)
    cbar.set_label("decision function f(x)")
    classes = np.asarray(result.classes_)
    for c, color, marker in ((classes[0], "C0", "o"), (classes[1], "C3", "s")):
        sel = y == c
        ax.scatter(X[sel, 0], X[sel, 1], c=color, marker=marker, s=22, edgecolors="none",
                   label=f"class {c}")
    mask, label = _certified(result, X.shape[0])
    if label is not None and mask.any():
        ax.scatter(X[mask, 0], X[mask, 1], s=70, facecolors="none", edgecolors="k",
                   linewidths=0.8, label=f"{label}: {int(mask.sum())}/{X.shape[0]}")
    ax.plot([], [], color="k", lw=1.5, label="f(x) = 0")
    ax.set_xlabel("feature 1")
    ax.set_ylabel("feature 2")
    ax.set_title(_title(result))
    ax.legend(fontsize="small", loc="best", framealpha=0.8)
    return ax
