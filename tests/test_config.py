import dataclasses
import inspect
import pickle

import numpy as np
import pytest

import marginkit as mk
from marginkit._config import CONFIG_TABLE


def test_table_matches_fields():
    fields = {f.name for f in dataclasses.fields(mk.Config)}
    assert fields == set(CONFIG_TABLE)
    for f in dataclasses.fields(mk.Config):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        spec = CONFIG_TABLE[f.name]
        if spec.default is not dataclasses.MISSING:
            assert spec.default == default, f.name


def test_solve_keywords_match_config_fields():
    # solve(X, y, config=None, **kwargs): every Config field is accepted as a keyword, and the
    # API contract's keywords are Config fields
    api_keywords = {"solver", "kernel", "kernel_params", "smoother", "stop", "max_iter",
                    "random_state", "verbose"}
    assert api_keywords <= set(CONFIG_TABLE)
    sig = inspect.signature(mk.solve)
    assert "config" in sig.parameters


def test_frozen_and_replace():
    cfg = mk.Config(solver="snkp", max_iter=10)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.max_iter = 3
    cfg2 = cfg.replace(max_iter=20)
    assert cfg2.max_iter == 20 and cfg.max_iter == 10
    with pytest.raises(TypeError, match="unknown field"):
        cfg.replace(maxiter=3)


@pytest.mark.parametrize("field,value,exc,match", [
    ("max_iter", 0, ValueError, "max_iter=0"),
    ("max_iter", 2.5, TypeError, "max_iter"),
    ("max_iter", True, TypeError, "max_iter"),
    ("verbose", -1, ValueError, "verbose"),
    ("time_limit", 0, ValueError, "time_limit"),
    ("time_limit", float("nan"), ValueError, "time_limit"),
    ("memory_budget", -5, ValueError, "memory_budget"),
    ("random_state", -1, ValueError, "random_state"),
    ("random_state", "seed", TypeError, "random_state"),
    ("kernel_params", [1], TypeError, "kernel_params"),
    ("solver", 3, TypeError, "solver"),
    ("callback", 3, TypeError, "callback"),
    ("stop", [], ValueError, "stop"),
    ("stop", [3], TypeError, "stop"),
])
def test_invalid_values_name_the_field(field, value, exc, match):
    with pytest.raises(exc, match=match):
        mk.Config(**{field: value})


def test_stop_spec_forms():
    cfg = mk.Config(stop="separated")
    assert cfg.stop == ("separated",)
    cfg = mk.Config(stop=("certified_points", {"fraction": 0.5}))
    assert cfg.stop == (("certified_points", {"fraction": 0.5}),)
    cfg = mk.Config(stop=["separated", ("dual_certificate", {"eps": 1e-3})])
    assert len(cfg.stop) == 2


def test_config_pickles_and_describes():
    cfg = mk.Config(solver="snkp", random_state=np.random.default_rng(0), solver_params={"a": 1})
    cfg2 = pickle.loads(pickle.dumps(cfg))
    assert cfg2.solver == "snkp" and cfg2.solver_params == {"a": 1}
    d = cfg.to_dict()
    assert d["solver"] == "snkp" and isinstance(d["random_state"], str)


def test_solver_params_default_is_a_fresh_empty_dict():
    # a plain frozen dataclass: the signature is the dataclass's own, the default a factory
    assert [p for p in inspect.signature(mk.Config).parameters] == \
        [f.name for f in dataclasses.fields(mk.Config)]
    assert mk.Config().solver_params == {} and mk.Config().solver_params is not mk.Config().solver_params


def test_rules_by_name_and_the_compatible_list():
    """Found by review: ``stop="max_iter"`` by name failed ("missing required parameter
    'n'") although n=None (the run's max_iter) is its documented meaning; and the list of
    rules compatible with ``snkp`` named ``tolerance``, whose default attribute it does not
    provide, among the ones that fit."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    res = mk.solve(X, y, solver="dcd", stop="max_iter", max_iter=7)
    assert res.status == "max_iter" and res.n_iter == 7
    with pytest.raises(ValueError, match=r"compatible rules for 'snkp': \[[^\]]*\]; with a "
                                         r"state attribute it provides .* \['tolerance'\]") as e:
        mk.solve(X, y, solver="snkp", stop=["tolerance"])
    assert "'tolerance'" not in str(e.value).split("; with")[0].split("compatible rules")[1]
    res = mk.solve(X, y, solver="snkp", stop=[("tolerance", {"attribute": "dual_norm",
                                                             "tol": 1e-3})])
    assert res.status in ("converged", "max_iter")


def test_a_plugin_rule_is_not_built_to_word_an_incompatibility():
    """Review of 360c41e: the compatible-rules message built every registered rule with
    its defaults; a plug-in rule whose constructor raises KeyError replaced the message
    with its KeyError."""
    from marginkit.plugins import StoppingRule

    class _Picky(StoppingRule):
        param_table = {}

        def __init__(self, **kw):
            raise KeyError("needs a config")

        requires = property(lambda self: ("x",))

        def check(self, state):
            return None

    mk.register("stopping", "picky_test")(_Picky)
    try:
        rng = np.random.default_rng(0)
        X = rng.standard_normal((30, 3))
        y = np.where(X[:, 0] > 0, 1, -1)
        with pytest.raises(ValueError, match="compatible rules for 'snkp'"):
            mk.solve(X, y, solver="snkp", stop="certified_points")
    finally:
        mk.reset_registry()
