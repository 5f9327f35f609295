import importlib.metadata
import threading
import warnings

import pytest

import marginkit as mk
from marginkit._registry import REGISTRIES, PluginLoadWarning


def _ep(name, value, group):
    return importlib.metadata.EntryPoint(name=name, value=value, group=group)


def test_list_plugins_has_every_kind():
    plugins = mk.list_plugins()
    assert set(plugins) == {"solver", "smoother", "kernel", "stopping"}
    assert {"separated", "dual_certificate", "time_limit", "max_iter", "tolerance"} <= set(
        plugins["stopping"])


def test_register_decorator_and_lookup():
    @mk.register("stopping", "never_stop")
    class Never(mk.plugins.StoppingRule):
        def check(self, state):
            return None

    assert mk.get_plugin("stopping", "never_stop") is Never
    assert Never.name == "never_stop" and Never.kind == "stopping"
    assert "never_stop" in mk.list_plugins()["stopping"]


def test_duplicate_name_refused_unless_overwrite():
    class A(mk.plugins.StoppingRule):
        def check(self, state):
            return None

    class B(A):
        pass

    mk.register("stopping", "dup")(A)
    with pytest.raises(ValueError, match="already registered.*overwrite=True"):
        mk.register("stopping", "dup")(B)
    mk.register("stopping", "dup", overwrite=True)(B)
    assert mk.get_plugin("stopping", "dup") is B


def test_builtin_cannot_be_replaced_silently():
    class Other(mk.plugins.StoppingRule):
        def check(self, state):
            return None

    with pytest.raises(ValueError, match="already registered"):
        mk.register("stopping", "separated")(Other)


def test_unknown_name_lists_registered():
    with pytest.raises(ValueError, match=r"unknown stopping 'nope'.*registered stoppings: \["):
        mk.get_plugin("stopping", "nope")
    with pytest.raises(ValueError, match="not a plug-in kind"):
        mk.get_plugin("solvers", "x")


def test_reset_restores_builtins():
    mk.register("stopping", "temp")(type("T", (mk.plugins.StoppingRule,), {"check": lambda s, st: None}))
    assert "temp" in mk.list_plugins()["stopping"]
    mk.reset_registry()
    assert "temp" not in mk.list_plugins()["stopping"]
    assert "separated" in mk.list_plugins()["stopping"]


def test_entry_points_are_lazy_and_loaded_on_lookup(monkeypatch):
    calls = []
    eps = [_ep("ep_smoother", "tests._plugin_fixtures:EntryPointSmoother", "marginkit.smoothers")]

    def fake_entry_points(group=None):
        calls.append(group)
        return [e for e in eps if e.group == group]

    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)
    mk.reset_registry()
    assert calls == []  # nothing read at reset/import time
    cls = mk.get_plugin("smoother", "ep_smoother")
    assert calls == ["marginkit.smoothers"]
    assert cls.__name__ == "EntryPointSmoother" and cls.name == "ep_smoother"
    mk.get_plugin("smoother", "ep_smoother")
    assert calls == ["marginkit.smoothers"]  # cached


def test_broken_entry_point_warns_and_rest_works(monkeypatch):
    eps = [
        _ep("broken_one", "tests._plugin_fixtures:DoesNotExist", "marginkit.stopping"),
        _ep("never_ep", "tests._plugin_fixtures:NeverStop", "marginkit.stopping"),
    ]
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None: [e for e in eps if e.group == group])
    mk.reset_registry()
    with pytest.warns(PluginLoadWarning, match="broken_one"):
        names = mk.list_plugins()["stopping"]
    assert "never_ep" in names and "broken_one" not in names
    assert "broken_one" in REGISTRIES["stopping"].failed
    with pytest.raises(ValueError, match="failed to load"):
        mk.get_plugin("stopping", "broken_one")


def test_entry_point_cannot_shadow_builtin(monkeypatch):
    eps = [_ep("separated", "tests._plugin_fixtures:NeverStop", "marginkit.stopping")]
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None: [e for e in eps if e.group == group])
    mk.reset_registry()
    with pytest.warns(PluginLoadWarning, match="built-in"):
        cls = mk.get_plugin("stopping", "separated")
    assert cls.__name__ == "Separated"


def test_concurrent_lookups_are_safe():
    errors = []

    def work():
        try:
            for _ in range(200):
                mk.get_plugin("stopping", "separated")
                mk.list_plugins()
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_import_does_not_scan_entry_points():
    # after reset no registry has read its entry points yet
    mk.reset_registry()
    assert not any(reg._entry_points_loaded for reg in REGISTRIES.values())


def test_plugin_params_validated():
    rule = mk.get_plugin("stopping", "dual_certificate")(eps=1e-3)
    assert rule.eps == 1e-3 and rule.get_params() == {"eps": 1e-3}
    with pytest.raises(TypeError, match="unknown parameter.*valid parameters"):
        mk.get_plugin("stopping", "dual_certificate")(epsilon=1e-3)
    with pytest.raises(ValueError, match="eps=-1"):
        mk.get_plugin("stopping", "dual_certificate")(eps=-1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        repr(rule)
