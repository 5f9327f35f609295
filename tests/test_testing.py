"""marginkit.testing.check_plugin: passes on every built-in, fails on broken plug-ins."""
import numpy as np
import pytest

import marginkit as mk
from marginkit.testing import check_plugin

BUILTINS = [(kind, name) for kind, names in mk.list_plugins().items() for name in names
            if not (kind == "kernel" and name == "callable")
            and not (kind == "stopping" and name in ("max_iter", "time_limit"))]


def _dot(A, B):
    return np.asarray(A) @ np.asarray(B).T


@pytest.mark.parametrize("kind,name", BUILTINS)
def test_builtins_pass(kind, name):
    assert check_plugin(mk.get_plugin(kind, name))


def test_instances_with_required_params():
    assert check_plugin(mk.get_plugin("stopping", "max_iter")(n=3))
    assert check_plugin(mk.get_plugin("stopping", "time_limit")(seconds=1.0))
    if "callable" in mk.list_plugins()["kernel"]:
        assert check_plugin(mk.get_plugin("kernel", "callable")(function=_dot))


class NotASimplex(mk.plugins.Smoother):
    def argmin_simplex(self, g, mu, q=None):
        return np.full(len(g), 0.5)

    def value(self, p, q=None):
        return 0.0


class NotAMinimizer(mk.plugins.Smoother):
    def argmin_simplex(self, g, mu, q=None):
        return np.full(len(g), 1.0 / len(g))

    def value(self, p, q=None):
        return 0.5 * float(np.sum((np.asarray(p) - 1.0 / len(p)) ** 2))


class WrongShape(mk.plugins.Kernel):
    def __call__(self, A, B=None):
        B = A if B is None else B
        return np.ones((len(A), len(A)))


class NotPSD(mk.plugins.Kernel):
    def __call__(self, A, B=None):
        B = A if B is None else B
        return -np.asarray(A) @ np.asarray(B).T

    def diag(self, A):
        return -np.einsum("ij,ij->i", A, A)


@pytest.mark.parametrize("bad,match", [
    (NotASimplex, "not a point of the simplex"),
    (NotAMinimizer, "not a minimizer"),
    (WrongShape, "shape"),
    (NotPSD, "positive semi-definite"),
    (object(), "is not a Solver, Smoother, Kernel or StoppingRule"),
])
def test_broken_plugins_fail_with_a_reason(bad, match):
    with pytest.raises(AssertionError, match=match):
        check_plugin(bad)
