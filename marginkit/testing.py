"""Helpers for plug-in authors: ``check_plugin(obj)`` tests the contract of a plug-in.

>>> import marginkit as mk
>>> from marginkit.testing import check_plugin
>>> check_plugin(mk.get_plugin("smoother", "entropy"))
True
"""
import pickle

import numpy as np

from . import plugins
from ._validation import Param

__all__ = ["check_plugin"]


def _fail(owner, message):
    raise AssertionError(f"{owner}: {message}")


def _kind_of(obj):
    cls = obj if isinstance(obj, type) else type(obj)
    for kind, base in (("solver", plugins.Solver), ("smoother", plugins.Smoother),
                       ("kernel", plugins.Kernel), ("stopping", plugins.StoppingRule)):
        if issubclass(cls, base):
            return kind
    return None


def _instance(obj, owner):
    if not isinstance(obj, type):
        return obj
    table = getattr(obj, "param_table", {}) or {}
    required = [k for k, p in table.items() if p.default is Param.REQUIRED]
    if required:
        _fail(owner, f"cannot be checked without its required parameters {required}; "
                     "pass an instance instead of the class")
    return obj()


def _check_common(inst, owner):
    table = getattr(type(inst), "param_table", {}) or {}
    if not isinstance(table, dict):
        _fail(owner, "param_table must be a dict name -> Param")
    for name, spec in table.items():
        if not isinstance(spec, Param):
            _fail(owner, f"param_table[{name!r}] is {type(spec).__name__}, expected Param")
    params = inst.get_params()
    if set(params) != set(table):
        _fail(owner, f"get_params() keys {sorted(params)} differ from param_table {sorted(table)}")
    clone = type(inst)(**params)
    if clone.get_params().keys() != params.keys():
        _fail(owner, "re-creating the plug-in from get_params() changed its parameters")
    try:
        again = pickle.loads(pickle.dumps(inst))
    except Exception as exc:  # noqa: BLE001 - report any pickling failure
        _fail(owner, f"does not pickle ({type(exc).__name__}: {exc})")
    if type(again) is not type(inst):
        _fail(owner, "pickle round trip changed the type")


def _check_smoother(sm, owner, rng):
    for n in (1, 2, 7, 50):
        g = rng.standard_normal(n) * 3
        q = rng.random(n)
        q /= q.sum()
        for mu in (1e-3, 0.5, 10.0):
            p = np.asarray(sm.argmin_simplex(g, mu, q), dtype=float)
            if p.shape != (n,):
                _fail(owner, f"argmin_simplex returned shape {p.shape}, expected ({n},)")
            if not np.all(np.isfinite(p)) or p.min() < -1e-12 or abs(p.sum() - 1) > 1e-9:
                _fail(owner, f"argmin_simplex is not a point of the simplex (min {p.min():.3g}, "
                             f"sum {p.sum():.12g}) for n={n}, mu={mu}")
            obj = g @ p + mu * float(sm.value(p, q))
            # no random point of the simplex may do better than the claimed minimizer
            cand = rng.dirichlet(np.ones(n), size=64)
            vals = cand @ g + mu * np.array([float(sm.value(c, q)) for c in cand])
            if vals.min() < obj - 1e-8 * (1 + abs(obj)):
                _fail(owner, f"argmin_simplex is not a minimizer of <g, p> + mu d(p) "
                             f"(found {vals.min():.6g} < {obj:.6g}, n={n}, mu={mu})")


def _kernel_call(owner, what, fn, *args):
    """``fn(*args)``; a ``ValueError`` (a plug-in's block refused by ``Kernel``'s checks,
    or a write into its read-only operands) fails the check with its message."""
    try:
        return fn(*args)
    except ValueError as exc:
        _fail(owner, f"{what} raised ValueError: {exc}")


def _check_kernel(k, owner, rng):
    if getattr(k, "precomputed", False):
        return
    A = rng.standard_normal((6, 3))
    B = rng.standard_normal((4, 3))
    A0, B0 = A.copy(), B.copy()
    K = np.asarray(_kernel_call(owner, "k(A, B)", k, A, B))
    if K.shape != (6, 4):
        _fail(owner, f"k(A, B) has shape {K.shape}, expected (6, 4)")
    if not np.all(np.isfinite(K)):
        _fail(owner, "k(A, B) is not finite")
    if not (np.array_equal(A, A0) and np.array_equal(B, B0)):
        _fail(owner, "k(A, B) modified its inputs")
    KA = np.asarray(_kernel_call(owner, "k(A, A)", k, A, A), dtype=float)
    if not np.allclose(KA, KA.T, rtol=1e-10, atol=1e-12):
        _fail(owner, "k(A, A) is not symmetric")
    lam = np.linalg.eigvalsh((KA + KA.T) / 2)
    if lam.min() < -1e-8 * max(1.0, abs(lam).max()):
        _fail(owner, f"k(A, A) is not positive semi-definite (eigenvalue {lam.min():.3g})")
    d = np.asarray(_kernel_call(owner, "diag(A)", k.diag, A), dtype=float)
    if not np.allclose(d, np.diag(KA), rtol=1e-10, atol=1e-12):
        _fail(owner, "diag(A) differs from the diagonal of k(A, A)")
    fmap = getattr(k, "feature_map", None)
    if fmap is not None:
        Phi = np.asarray(fmap(A), dtype=float)
        if not np.allclose(Phi @ Phi.T, KA, rtol=1e-8, atol=1e-10):
            _fail(owner, "feature_map(A) @ feature_map(A).T differs from k(A, A)")


def _check_stopping(rule, owner):
    req = rule.requires
    if not isinstance(req, tuple) or not all(isinstance(r, str) for r in req):
        _fail(owner, f"requires must be a tuple of state attribute names, got {req!r}")
    if not isinstance(rule.status, str) or not rule.status:
        _fail(owner, "status must be a non-empty string")
    if not callable(getattr(rule, "check", None)):
        _fail(owner, "has no check(state) method")


def _check_solver(solver, owner):
    from ._api import solve
    from ._registry import list_plugins

    if not isinstance(solver.requires, dict) or not set(solver.requires) <= {"smoother", "kernel"}:
        _fail(owner, f"requires must map 'smoother'/'kernel' to attribute names, got {solver.requires!r}")
    if not all(isinstance(p, str) for p in solver.provides):
        _fail(owner, "provides must be a tuple of state attribute names")
    if getattr(solver, "task", "classification") != "classification":
        return
    # a small separable problem every classifier must handle
    X = np.array([[2.0, 1.0], [1.5, 2.0], [1.0, 0.5], [-2.0, -1.0], [-1.0, -2.0], [-0.5, -1.5]])
    y = np.array([1, 1, 1, 0, 0, 0])
    X0 = X.copy()
    kernel = "linear" if "linear" in list_plugins()["kernel"] else None
    res = solve(X, y, solver=solver, kernel=kernel, max_iter=2000, random_state=0)
    if not np.array_equal(X, X0):
        _fail(owner, "solve modified the caller's X")
    if res.status not in {"separable", "infeasible", "certified", "converged", "max_iter"}:
        _fail(owner, f"unexpected status {res.status!r}")
    if res.certificate is not None and not res.certificate.verify(X, y):
        _fail(owner, f"its {res.certificate.kind} certificate does not verify from the data")
    pred = res.predict(X)
    if pred.shape != y.shape:
        _fail(owner, "predict returned the wrong shape")
    pickle.loads(pickle.dumps(res))


def check_plugin(obj, random_state=0):
    """Check that ``obj`` (a plug-in class or instance) honours the marginkit contract.

    Checks per kind: the parameter table and ``get_params`` round trip, pickling; smoothers
    return a point of the simplex that no sampled point beats; kernels give finite,
    symmetric, positive semi-definite blocks of the right shape and a consistent ``diag`` /
    ``feature_map``, without modifying their inputs; stopping rules declare ``requires`` and
    ``status``; solvers declare ``requires``/``provides`` and, for classifiers, solve a small
    separable problem with a certificate that verifies from the data.

    Returns True; raises ``AssertionError`` naming the plug-in and the broken promise.
    """
    kind = _kind_of(obj)
    owner = f"plug-in {getattr(obj, 'name', None) or getattr(obj, '__name__', type(obj).__name__)!r}"
    if kind is None:
        _fail(owner, "is not a Solver, Smoother, Kernel or StoppingRule (see marginkit.plugins)")
    rng = np.random.default_rng(random_state)
    inst = _instance(obj, owner)
    _check_common(inst, owner)
    if kind == "smoother":
        _check_smoother(inst, owner, rng)
    elif kind == "kernel":
        _check_kernel(inst, owner, rng)
    elif kind == "stopping":
        _check_stopping(inst, owner)
    else:
        _check_solver(inst, owner)
    return True
