"""Warnings and errors that marginkit raises, for users to catch or filter."""

__all__ = ["ConvergenceWarning"]


class ConvergenceWarning(UserWarning):
    """A run ended on its budget (``max_iter`` or ``time_limit``) without its claim.

    ``solve`` emits it when ``warn=True`` (or ``warn=None`` and ``verbose >= 1``); the
    scikit-learn estimators raise scikit-learn's own ``ConvergenceWarning`` instead.

    Examples
    --------
    >>> import warnings, numpy as np, marginkit as mk
    >>> X = np.array([[1.0, 0.0], [-1.0, 0.0], [0.5, 0.0], [-0.5, 0.0]])
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     res = mk.solve(X, [1, 0, 0, 1], solver="perceptron", max_iter=5, warn=True)
    >>> res.status, caught[0].category.__name__
    ('max_iter', 'ConvergenceWarning')
    """
