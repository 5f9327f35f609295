"""Issue 8: every bad input gets a clear error, nothing is lost or mutated, honest answers.

The cases live in ``tests/reliability_table.py`` (which also writes docs/reliability.md);
each runs against a pure-numpy reference solver (so the input checks are exercised
whatever is registered) and against every registered solver the case applies to.
"""
import importlib.metadata
import os
import re
import signal
import sys
import threading
import time
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import marginkit as mk
from marginkit import _validation as V
from marginkit._result import SeparatorCertificate
from marginkit._registry import REGISTRIES, PluginLoadWarning
from marginkit.plugins import Param, Solver, SolverState

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reliability_table as RT  # noqa: E402

REFERENCE = "reliability_reference"
REGISTERED = mk.list_plugins()["solver"]
#: solvers that divide by sqrt(K(x, x)) (paper 000's normalized Gram)
NORMALIZING = {"normalized_perceptron", "nkp", "snkp", "nvn", "snkpvn", "isnkpvn"}
STATUSES = {"separable", "infeasible", "certified", "converged", "max_iter", "time_limit",
            "callback", "interrupted"}
HOSTILE_MAX_ITER = 3000

KNOWN_BUGS = RT.KNOWN_BUGS


def _param(test, case, solver, *values, id):
    reason = KNOWN_BUGS.get((test, case, solver))
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(*values, id=id, marks=marks)


# ------------------------------------------------------------------ reference solver
class _RefState(SolverState):
    def __init__(self, problem):
        self.n_iter = 0
        self.problem = problem
        X, y, kernel = problem.X, problem.y, problem.kernel
        fmap = getattr(kernel, "feature_map", None)
        if getattr(kernel, "precomputed", False):
            K = np.asarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64)
            self.scores = K @ y
            self.coef = None
        elif fmap is not None:
            Phi = fmap(X)
            self.coef = np.asarray(Phi.T @ y, dtype=np.float64).ravel() / len(y)
            self.scores = None
        else:
            self.scores = np.asarray(kernel(X, X), dtype=np.float64) @ y
            self.coef = None

    def step(self):
        self.n_iter += 1


class ReferenceSolver(Solver):
    """Class-mean difference w = mean_i y_i phi(x_i), one pass, in numpy (for input checks)."""

    default_max_iter = 1
    param_table = {"unused": Param(0, doc="a parameter, for unknown-parameter messages")}

    def start(self, problem):
        return _RefState(problem)

    def finalize(self, problem, state, status):
        if state.coef is not None:
            return {"coef_": state.coef, "intercept_": 0.0}
        return {"dual_coef_": problem.y.copy(), "support_coef_": problem.y / len(problem.y),
                "support_": None if problem.kernel.precomputed else problem.X}


@pytest.fixture(autouse=True)
def _reference_registered():
    mk.register("solver", REFERENCE, overwrite=True)(ReferenceSolver)
    yield


def _solver_class(name):
    return ReferenceSolver if name == REFERENCE else mk.get_plugin("solver", name)


def _is_classifier(name):
    return getattr(_solver_class(name), "task", "classification") == "classification"


def _has_param(name, param):
    return param in getattr(_solver_class(name), "param_table", {})


def _targets(case):
    """Solvers a 'solve' case runs against (None: nothing registered applies, which fails
    the case: the built-in solvers are always registered)."""
    sel = case.solvers
    if sel == "none":
        return [REFERENCE]
    if sel.startswith("param:"):
        names = [s for s in REGISTERED if _has_param(s, sel[6:])]
    elif sel == "normalizing":
        names = [s for s in REGISTERED if s in NORMALIZING]
    else:
        names = [REFERENCE] + [s for s in REGISTERED if sel != "classifiers" or _is_classifier(s)]
    return names or [None]


def _applies(solver, case):
    """False when ``solver`` cannot take the case's kernel at all (a solver that needs a
    feature map given kernel='precomputed' or a callable): that pair is no case. Decided
    as composition decides it (``Solver.requires``); a kernel argument that is itself
    invalid keeps the pair (the refusal is what the case tests)."""
    from marginkit._api import resolve_kernel

    if solver in (None, REFERENCE):
        return True
    kw = case.build(None)
    if "kernel" not in kw:
        return True
    try:
        kernel = resolve_kernel(kw["kernel"], kw.get("kernel_params"))
    except (ValueError, TypeError):
        return True
    need = getattr(_solver_class(solver), "requires", {}).get("kernel", ())
    return all(getattr(kernel, a, None) is not None for a in need)


def _solve_params():
    out = []
    for case in RT.CASES:
        if case.entry != "solve" or case.expect not in ("ValueError", "TypeError", "accepted"):
            continue
        if case.isolated:  # run in a worker process by tests/test_inputs_hostile.py
            continue
        for solver in _targets(case):
            if case.solvers in ("precomputed", "callable") and not _applies(solver, case):
                continue
            out.append(pytest.param(case, solver, id=f"{case.id}-{solver}"))
    return out


def _snapshot(X):
    """Bytes and flags of an input, to prove it was not modified."""
    if sp.issparse(X):
        parts = [np.array(getattr(X, a), copy=True) for a in ("data", "indices", "indptr", "row", "col")
                 if hasattr(X, a)]
        return ("sparse", X.format, X.shape, [(p.dtype, p.tobytes()) for p in parts])
    if isinstance(X, np.ndarray):
        return ("dense", X.dtype, X.shape, X.tobytes(order="A"), X.flags.writeable,
                X.flags.c_contiguous, X.flags.f_contiguous)
    return ("other", repr(X))


# ------------------------------------------------------------------ rejected / accepted
@pytest.mark.parametrize("case,solver", _solve_params())
def test_solve_case(case, solver, tmp_path):
    assert solver is not None, f"no registered solver applies to case {case.id!r} ({case.solvers})"
    args = case.build(tmp_path)
    X, y = args.pop("X"), args.pop("y")
    args.setdefault("solver", solver)
    before = _snapshot(X)
    if case.expect in ("ValueError", "TypeError"):
        exc = {"ValueError": ValueError, "TypeError": TypeError}[case.expect]
        with pytest.raises(exc, match=case.match):
            mk.solve(X, y, **args)
    else:
        _check_accepted(X, y, args)
    assert _snapshot(X) == before, f"case {case.id}: the caller's input was modified"


def _plain(X):
    if sp.issparse(X):
        return X.toarray().astype(np.float64)
    return np.array(X, dtype=np.float64, order="C")


def _check_accepted(X, y, args):
    if args["solver"] != REFERENCE:
        args.setdefault("max_iter", 500)
        args.setdefault("random_state", 0)
    res = mk.solve(X, y, **args)
    Xp = _plain(X)
    ref = mk.solve(Xp, y, **args)
    assert res.status == ref.status
    assert list(res.classes_) == list(ref.classes_)
    single = V.check_X(X).dtype == np.float32
    rtol = 1e-4 if single else 1e-10
    for field in ("coef_", "dual_coef_"):
        a, b = getattr(res, field), getattr(ref, field)
        if a is None or b is None:
            assert a is None and b is None, field
            continue
        np.testing.assert_allclose(np.asarray(a, float), np.asarray(b, float), rtol=rtol,
                                   atol=rtol * np.abs(b).max(), err_msg=field)
    if res.certificate is not None:
        assert res.certificate.verify(X, y)
    np.testing.assert_array_equal(res.predict(X), ref.predict(Xp))


# ------------------------------------------------------------------ hostile but valid
def _hostile_params():
    out = []
    for case in RT.CASES:
        if case.expect != "honest":
            continue
        names = [s for s in REGISTERED if _is_classifier(s)]
        for solver in names or [None]:
            if not _applies(solver, case):
                continue
            out.append(_param("hostile", case.id, solver, case, solver, id=f"{case.id}-{solver}"))
    return out


def _assert_honest(res, X, y, truth, label):
    assert res.status in STATUSES, label
    if truth == "separable":
        assert res.status != "infeasible", f"{label}: separable data reported infeasible"
    else:
        assert res.status != "separable", f"{label}: infeasible data reported separable"
    if res.status == "separable":
        assert res.certificate is not None and res.certificate.kind == "separator", label
    if res.status == "infeasible":
        assert res.certificate is not None and res.certificate.kind == "infeasibility", label
    if res.certificate is not None:
        assert res.certificate.verify(X, y), f"{label}: certificate does not verify"
    for field in ("coef_", "dual_coef_", "dual_vector"):
        v = getattr(res, field)
        if v is not None:
            assert np.all(np.isfinite(np.asarray(v, dtype=float))), f"{label}: {field} not finite"
    pred = res.predict(X)
    assert set(np.unique(pred)) <= set(np.unique(y)), label
    if res.status == "separable":
        np.testing.assert_array_equal(pred, np.asarray(y), err_msg=f"{label}: separator misclassifies")
    if res.certified_mask is not None:
        m = np.asarray(res.certified_mask, dtype=bool)
        np.testing.assert_array_equal(pred[m], np.asarray(y)[m],
                                      err_msg=f"{label}: a certified point is misclassified")


@pytest.mark.parametrize("case,solver", _hostile_params())
def test_hostile_data_honest(case, solver, tmp_path):
    assert solver is not None, "no classification solver is registered"
    args = case.build(tmp_path)
    X, y = args.pop("X"), args.pop("y")
    before = _snapshot(X)
    try:
        res = mk.solve(X, y, solver=solver, max_iter=HOSTILE_MAX_ITER, random_state=0, **args)
    except ValueError as exc:
        if not case.allow_error:
            raise
        assert "X" in str(exc), f"{case.id}/{solver}: the refusal does not name X: {exc}"
        assert _snapshot(X) == before
        return
    _assert_honest(res, X, y, case.truth, f"{case.id}/{solver}")
    assert _snapshot(X) == before
    # the normalized family only sees directions, and the SVM family standardizes the columns
    # (scale="std"): scaling X must not change the answer
    scaled = case.id in ("huge", "tiny", "mixed_norms", "f32_huge", "f32_tiny", "f32_max",
                         "extreme_huge", "extreme_tiny")
    standardizes = _solver_class(solver).param_table.get("scale") is not None and \
        _solver_class(solver).param_table["scale"].default == "std"
    if scaled and (solver in NORMALIZING or (standardizes and case.id != "mixed_norms")):
        X0, y0 = RT.separable()
        X0 = X0.astype(np.asarray(X).dtype)
        base = mk.solve(X0, y0, solver=solver, max_iter=HOSTILE_MAX_ITER, random_state=0)
        assert res.status == base.status, (
            f"{case.id}/{solver}: status {res.status!r} on scaled data, {base.status!r} unscaled")
        if standardizes:
            np.testing.assert_array_equal(
                res.predict(X), base.predict(X0),
                err_msg=f"{case.id}/{solver}: standardized problem, different predictions")


@pytest.mark.parametrize("scale", [1.0, 1e300, 1e-300, 1e-160])
def test_certificate_verify_is_overflow_safe(scale):
    """verify() recomputes the normalized Gram without squaring raw entries: a uniform p on
    separable data is no infeasibility proof, and a true separator verifies, at any scale."""
    from marginkit._result import InfeasibilityCertificate

    X, y = RT.separable()
    Xs = X * scale
    kernel = mk.get_plugin("kernel", "linear")()
    classes = np.array([0, 1])
    p = np.full(6, 1 / 6)
    assert not InfeasibilityCertificate(p, 0.0, 1e-6, kernel, classes).verify(Xs, y)
    assert SeparatorCertificate(p, 0.1, kernel, classes).verify(Xs, y)
    Xx, yx = RT.xor()
    assert InfeasibilityCertificate(np.full(4, 0.25), 0.0, 1e-9, kernel, classes).verify(Xx * scale, yx)
    # a zero row can never be certified either way
    Xz = Xs.copy()
    Xz[0] = 0.0
    assert not SeparatorCertificate(p, 0.1, kernel, classes).verify(Xz, y)
    assert not SeparatorCertificate(p, 0.1, kernel, classes).verify(sp.csr_matrix(Xz), y)
    assert SeparatorCertificate(p, 0.1, kernel, classes).verify(sp.csr_matrix(Xs), y)


def test_duplicates_with_opposite_labels_certified_infeasible():
    """Solvers with a dual certificate must certify infeasibility (||p||_G = 0 exists)."""
    with_cert = [s for s in REGISTERED if _is_classifier(s) and any(
        "dual_certificate" in (r if isinstance(r, str) else r[0])
        for r in _solver_class(s)().default_stop)]
    assert with_cert, "no registered solver provides a dual certificate (nvn, snkpvn, isnkpvn)"
    X, y = RT._dup_opposite(None)["X"], RT._dup_opposite(None)["y"]
    for s in with_cert:
        res = mk.solve(X, y, solver=s, max_iter=20000, random_state=0)
        assert res.status == "infeasible", s
        assert res.certificate.verify(X, y), s


def _bad_values(spec):
    """Values a numeric parameter's row must refuse: NaN/inf when finite values are
    required, and the values just outside its declared range."""
    import numbers

    integral = spec.types in (numbers.Integral, int)
    bad = []
    if spec.finite and not integral:
        bad += [float("nan"), float("inf"), -float("inf")]
    if spec.low is not None:
        low = int(spec.low) if integral else spec.low
        bad.append(low - 1 if not spec.low_open else low)
    if spec.high is not None:
        high = int(spec.high) if integral else spec.high
        bad.append(high + 1 if not spec.high_open else high)
    return bad


def _numeric_params():
    """(kind, name, param, Param) for every bounded or finite real parameter of every plug-in
    (a parameter with nothing to refuse has no case)."""
    import numbers

    out = []
    for kind in ("solver", "kernel", "smoother", "stopping"):
        for name in mk.list_plugins()[kind]:
            obj = mk.get_plugin(kind, name)
            for pname, spec in getattr(obj, "param_table", {}).items():
                types = spec.types if isinstance(spec.types, tuple) else (spec.types,)
                if any(t in (numbers.Real, numbers.Integral, float, int) for t in types) \
                        and _bad_values(spec):
                    out.append(pytest.param(kind, name, pname, spec, id=f"{kind}-{name}-{pname}"))
    assert out, "no built-in plug-in has a numeric parameter"
    return out


@pytest.mark.parametrize("kind,name,pname,spec", _numeric_params())
def test_every_numeric_parameter_rejects_nan_and_out_of_range(kind, name, pname, spec):
    """Every registered plug-in's numeric parameters: NaN/inf (when finite is required) and
    values outside the declared range raise ValueError naming the parameter and its range."""
    cls = mk.get_plugin(kind, name)
    required = {k: (v.default if v.default is not Param.REQUIRED else 1)
                for k, v in cls.param_table.items() if v.default is Param.REQUIRED and k != pname}
    for value in _bad_values(spec):
        with pytest.raises(ValueError, match=re.escape(f"{pname}=")):
            cls(**required, **{pname: value})


# ------------------------------------------------------------------ LIBSVM and estimators
def _libsvm_params():
    return [pytest.param(c, id=c.id) for c in RT.CASES
            if c.entry == "load_libsvm" and not c.isolated]


@pytest.mark.parametrize("case", _libsvm_params())
def test_libsvm_case(case, tmp_path):
    from marginkit import datasets

    path = case.build(tmp_path)["path"]
    with pytest.raises(ValueError, match=case.match) as info:
        datasets.load_libsvm(path)
    assert os.path.basename(path) in str(info.value)


def test_libsvm_good_file_still_loads(tmp_path):
    from marginkit import datasets

    for compress, name in ((None, "ok.txt"), ("gzip", "ok.gz"), ("xz", "ok.xz")):
        path = RT._libsvm(RT.GOOD, name, compress)(tmp_path)["path"]
        X, y = datasets.load_libsvm(path)
        np.testing.assert_array_equal(X.toarray(), [[0.5, 0, 1.0], [0, 0.25, 0]])
        np.testing.assert_array_equal(y, [1, -1])


ESTIMATORS = ["PerceptronClassifier", "SVMClassifier", "IteratedTikhonovClassifier"]


def _estimator(name):
    """The estimator class; it must fit clean data (a failure here fails the test)."""
    pytest.importorskip("sklearn")  # an optional dependency
    import marginkit.sklearn as mks

    cls = getattr(mks, name)
    X, y = RT.separable()
    cls().fit(X, y)
    return cls


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in RT.CASES
                                  if c.entry == "estimator"])
@pytest.mark.parametrize("name", ESTIMATORS)
def test_estimator_case(case, name, tmp_path):
    cls = _estimator(name)
    args = case.build(tmp_path)
    X, y = args.pop("X"), args.pop("y")
    before = _snapshot(X)
    if case.expect in ("ValueError", "TypeError"):
        with pytest.raises(ValueError, match=case.match):
            cls().fit(X, y)
    else:
        est = cls().fit(X, y)
        assert list(est.classes_) == sorted(set(np.asarray(y).tolist()))
        assert set(est.predict(X)) <= set(est.classes_)
    assert _snapshot(X) == before


def _cli_params():
    out = []
    for c in RT.CASES:
        if c.entry != "cli":
            continue
        out.append(pytest.param(c, id=c.id))
    return out


@pytest.mark.parametrize("case", _cli_params())
def test_cli_case(case, tmp_path, capsys):
    from marginkit.cli import main

    argv = case.build(tmp_path)["argv"]
    solver = argv[argv.index("--solver") + 1]
    assert solver == "nope" or solver in mk.list_plugins()["solver"], f"{solver} not registered"
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, f"exit code {rc}, stderr: {err}"
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert re.search(case.match, err), err


@pytest.mark.parametrize("name", ["PerceptronClassifier", "SVMClassifier"])
@pytest.mark.parametrize("dtype,want", [
    (np.float64, np.float64),
    (np.float32, np.float32),
    (np.int8, np.float32),
    (np.bool_, np.float32),
])
@pytest.mark.filterwarnings("ignore:.*The model is the last iterate")  # ConvergenceWarning
def test_estimator_follows_the_dtype_rule(name, dtype, want, monkeypatch):
    """What the solver receives from an estimator: no 8x copy of small-int input, float
    input used without a copy (unless the estimator adds columns, as the perceptron's bias)."""
    cls = _estimator(name)
    import marginkit.sklearn as mks

    seen = []
    real = mks._solve

    def spy(X, y, **kw):
        seen.append(X)
        return real(X, y, **kw)

    monkeypatch.setattr(mks, "_solve", spy)
    X, y = RT.separable()
    Xd = (np.sign(X) if dtype in (np.int8, np.bool_) else X).astype(dtype)
    Xd = np.c_[Xd, np.ones(6, dtype=dtype)]
    est = cls(max_iter=50)
    est.fit(Xd, y)
    got = V.check_X(seen[0])
    assert got.dtype == want
    if got.shape == Xd.shape and dtype in (np.float64, np.float32):
        assert np.shares_memory(got, Xd), f"{name} copied {dtype.__name__} input"


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in RT.CASES
                                  if c.entry == "load_result"])
def test_load_result_case(case, tmp_path):
    path = case.build(tmp_path)["path"]
    exc = {"ValueError": ValueError, "FileNotFoundError": FileNotFoundError}[case.expect]
    with pytest.raises(exc, match=case.match):
        mk.load_result(path)


# ------------------------------------------------------------------ the generated document
def test_reliability_doc_up_to_date():
    path = os.path.normpath(RT.DOC_PATH)
    want = RT.render()
    msg = (f"docs/reliability.md is out of date with the cases in tests/reliability_table.py; "
           f"regenerate it with `{RT.REGENERATE}` and commit it")
    assert os.path.exists(path), msg
    with open(path, encoding="utf-8") as fh:
        assert fh.read() == want, msg


def test_case_ids_unique_and_every_case_runs():
    ids = [c.id for c in RT.CASES]
    assert len(ids) == len(set(ids))
    for c in RT.CASES:
        assert c.entry in ("solve", "load_libsvm", "estimator", "cli", "load_result")
        assert c.expect in ("ValueError", "TypeError", "UsageError", "FileNotFoundError",
                            "accepted", "honest")
        if c.expect not in ("accepted", "honest"):
            assert c.match
        if c.expect == "honest":
            assert c.truth in ("separable", "infeasible")


# ------------------------------------------------------------------ check_X: copies and dtypes
@pytest.mark.parametrize("make", [
    lambda X: X,
    lambda X: np.asfortranarray(X),
    lambda X: X.astype(np.float32),
    lambda X: RT._readonly(None)["X"],
    lambda X: sp.csr_matrix(X),
    lambda X: RT._csr_idx(np.int64)(None)["X"],
], ids=["c", "fortran", "float32", "readonly", "csr32", "csr64"])
def test_check_X_uses_input_in_place(make):
    X = make(RT.separable()[0])
    out = V.check_X(X)
    if sp.issparse(X):
        assert out is X
    else:
        assert np.shares_memory(out, X) and out.shape == X.shape


@pytest.mark.parametrize("dtype,want", [
    (np.bool_, np.float32), (np.int8, np.float32), (np.uint8, np.float32), (np.int16, np.float32),
    (np.uint16, np.float32), (np.float16, np.float32), (np.int32, np.float64),
    (np.uint32, np.float64), (np.int64, np.float64), (np.uint64, np.float64),
])
def test_check_X_dtype_rule(dtype, want):
    X = np.ones((3, 2), dtype=dtype)
    assert V.check_X(X).dtype == want
    if dtype != np.float16:  # scipy.sparse has no float16
        assert V.check_X(sp.csr_matrix(X)).dtype == want


def test_check_X_noncanonical_csr_private_copy():
    M = RT._noncanonical_csr(None)["X"]
    before = _snapshot(M)
    out = V.check_X(M)
    assert out is not M and out.has_canonical_format
    assert not np.shares_memory(out.data, M.data) and not np.shares_memory(out.indices, M.indices)
    np.testing.assert_array_equal(out.toarray(), RT.separable()[0])
    assert _snapshot(M) == before


@pytest.mark.parametrize("fmt", ["csc", "coo", "lil", "dok", "bsr", "dia"])
def test_check_X_sparse_formats_never_densified(fmt, monkeypatch):
    X = sp.random(50, 40, density=0.1, format=fmt, random_state=0)
    dense = X.toarray()

    def refuse(self, *a, **k):
        raise AssertionError("sparse input was densified")

    for cls in {type(X), sp.csr_matrix}:
        monkeypatch.setattr(cls, "toarray", refuse)
        monkeypatch.setattr(cls, "todense", refuse)
    out = V.check_X(X)
    monkeypatch.undo()
    assert sp.issparse(out) and out.format == "csr" and out.has_canonical_format
    assert out.indices.dtype in (np.int32, np.int64) and out.indptr.dtype == out.indices.dtype
    np.testing.assert_array_equal(out.toarray(), dense)


def test_check_gram_blockwise_matches_dense_symmetry():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((300, 5))
    K = A @ A.T
    assert V.check_gram(K) is K
    assert V.check_gram(sp.csr_matrix(K)) is not None
    K2 = K.copy()
    K2[250, 3] += 1e-3 * abs(K2[250, 3]) + 1e-3
    with pytest.raises(ValueError, match=r"not symmetric \(X\[3, 250\]|not symmetric \(X\[250, 3\]"):
        V.check_gram(K2)
    # float32 round-off of a symmetric product is accepted
    K32 = (A.astype(np.float32) @ A.astype(np.float32).T)
    V.check_gram(K32)


def test_check_gram_has_no_n_by_n_temporary():
    import tracemalloc

    rng = np.random.default_rng(2)
    A = rng.standard_normal((1500, 3))
    K = A @ A.T  # 18 MB
    tracemalloc.start()
    try:
        V.check_gram(K)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < K.nbytes / 4, f"check_gram peaked at {peak / 1e6:.1f} MB for an {K.nbytes / 1e6:.0f} MB Gram"


@pytest.mark.parametrize("poison", [None, np.nan, 1e308])
def test_check_X_finiteness_check_has_no_array_sized_temporary(poison):
    import tracemalloc

    X = np.random.default_rng(3).standard_normal((20000, 100))  # 16 MB
    if poison is not None:
        X[12345, 7] = poison
        X[12346, 7] = poison
    tracemalloc.start()
    try:
        if poison is not None and np.isnan(poison):
            with pytest.raises(ValueError, match=r"row\(s\) \[12345, 12346\]"):
                V.check_X(X)
        else:
            assert V.check_X(X) is X
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < X.nbytes / 8, f"check_X peaked at {peak / 1e6:.1f} MB for a {X.nbytes / 1e6:.0f} MB X"


def test_check_positive_diag_names_rows():
    with pytest.raises(ValueError, match=r"2 zero-norm point\(s\).*row\(s\) \[1, 3\]"):
        V.check_positive_diag([1.0, 0.0, 2.0, 0.0])
    np.testing.assert_array_equal(V.check_positive_diag(np.array([1, 2], np.float32)), [1.0, 2.0])


def test_check_y_maps_labels_and_keeps_classes():
    y = np.array(["b", "a", "b"])
    ypm, classes = V.check_y(y, 3)
    np.testing.assert_array_equal(ypm, [1.0, -1.0, 1.0])
    assert list(classes) == ["a", "b"]
    with pytest.raises(TypeError, match="cannot be compared"):
        V.check_y(np.array([1, "a", 2.0], dtype=object), 3)


def _check_y_general(y):
    """check_y through its general numpy code (no one-pass fast path)."""
    import unittest.mock

    with unittest.mock.patch.object(V, "two_labels", lambda y, out: None):
        return V.check_y(y, len(y))


@pytest.mark.parametrize("y", [
    [3.0, -1.5, 3.0], [0, 1, 1, 0], [5, 2], [-0.0, 0.0, 1.0], [0.0, 1.0], [1.0, 1.0, 2.0, 3.0],
    [1.0, np.nan], [np.inf, 1.0], [np.nan, np.nan], [2.0, 2.0], [7], [1.0, -np.inf, 1.0],
])
@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.float32])
def test_check_y_fast_path_agrees_with_the_general_code(y, dtype):
    # the one-pass path (two finite labels) gives what the numpy code gives, and leaves
    # every other case to it (same classes_, same error messages)
    arr = np.asarray(y)
    if dtype is np.int64 and not np.all(np.isfinite(arr)):
        return
    arr = arr.astype(dtype)
    try:
        want = _check_y_general(arr)
    except (TypeError, ValueError) as exc:
        with pytest.raises(type(exc), match=re.escape(str(exc))):
            V.check_y(arr, len(arr))
        return
    got = V.check_y(arr, len(arr))
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1].dtype == want[1].dtype and got[1].tolist() == want[1].tolist()


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("order", ["C", "F", "strided"])
def test_check_X_finds_the_nonfinite_rows_of_a_small_matrix(bad, order):
    X = np.arange(60, dtype=np.float64).reshape(12, 5)
    X[[3, 8], 2] = bad
    X = {"C": X, "F": np.asfortranarray(X), "strided": np.repeat(X, 2, axis=1)[:, ::2]}[order]
    with pytest.raises(ValueError, match=r"row\(s\) \[3, 8\]"):
        V.check_X(X)


# ------------------------------------------------------------------ interrupts and time limits
class _TwoPartState(SolverState):
    """A step that updates two fields; a SIGINT arrives between them."""

    def __init__(self, at):
        self.n_iter = 0
        self.a = self.b = 0
        self.at = at

    def step(self):
        self.a += 1
        if self.a == self.at:
            signal.raise_signal(signal.SIGINT)
        self.b += 1
        self.n_iter += 1


class TwoPartSolver(Solver):
    default_max_iter = 100
    param_table = {"at": Param(3, doc="iteration at which SIGINT arrives")}

    def start(self, problem):
        return _TwoPartState(self.params["at"])

    def finalize(self, problem, state, status):
        return {"extra": {"a": state.a, "b": state.b}}


_DEFAULT_SIGINT = pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread()
    or signal.getsignal(signal.SIGINT) is not signal.default_int_handler,
    reason="needs Python's default SIGINT handler in the main thread")


@_DEFAULT_SIGINT
def test_sigint_raises_and_leaves_the_handler():
    """Default: Python's convention, KeyboardInterrupt (here inside the step, where it
    arrives); no handler of marginkit's is left behind."""
    mk.register("solver", "two_part")(TwoPartSolver)
    X, y = RT.separable()
    with pytest.raises(KeyboardInterrupt):
        mk.solve(X, y, solver="two_part")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@_DEFAULT_SIGINT
def test_sigint_inside_a_step_does_not_cut_it():
    mk.register("solver", "two_part")(TwoPartSolver)
    X, y = RT.separable()
    handler = signal.getsignal(signal.SIGINT)
    res = mk.solve(X, y, solver="two_part", interrupt="return")
    assert res.status == "interrupted"
    # (the run loop's own record of its BLAS threads left out)
    extra = {k: v for k, v in res.extra.items() if k not in ("blas_threads", "blas_choice")}
    assert extra == {"a": 3, "b": 3} and res.n_iter == 3  # the step finished, state consistent
    assert signal.getsignal(signal.SIGINT) is handler  # the user's handler is back


@_DEFAULT_SIGINT
def test_second_sigint_aborts_at_once():
    class _State(_TwoPartState):
        def step(self):
            self.n_iter += 1
            if self.n_iter == 2:
                signal.raise_signal(signal.SIGINT)
                signal.raise_signal(signal.SIGINT)

    class Twice(TwoPartSolver):
        def start(self, problem):
            return _State(0)

    mk.register("solver", "twice")(Twice)
    X, y = RT.separable()
    with pytest.raises(KeyboardInterrupt):
        mk.solve(X, y, solver="twice", interrupt="return")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def _classifiers(test):
    names = [s for s in REGISTERED if _is_classifier(s)]
    return [_param(test, None, s, s, id=str(s)) for s in names or [None]]


def _interrupt_data():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((60, 4))
    y = (X[:, 0] + 0.5 * rng.standard_normal(60) > 0).astype(int)  # overlapping classes
    return X, y


@_DEFAULT_SIGINT
@pytest.mark.parametrize("solver", _classifiers("interrupt"))
def test_interrupt_real_solver_keeps_state(solver):
    """A Ctrl-C between iterations ends the run at the next boundary; the result is the
    same as stopping there with max_iter (nothing half-updated), and later runs are unaffected."""
    assert solver is not None, "no classification solver is registered"
    X, y = _interrupt_data()

    def cb(state):
        if state.n_iter == 3:
            signal.raise_signal(signal.SIGINT)
        return False

    stop = ("max_iter", {"n": 10**6})
    res = mk.solve(X, y, solver=solver, stop=stop, max_iter=10**6, random_state=0, callback=cb,
                   interrupt="return")
    assert res.status == "interrupted" and res.n_iter == 4
    ref = mk.solve(X, y, solver=solver, stop=stop, max_iter=4, random_state=0)
    assert ref.n_iter == 4
    for field in ("coef_", "dual_coef_", "dual_vector"):
        a, b = getattr(res, field), getattr(ref, field)
        if a is not None or b is not None:
            np.testing.assert_array_equal(a, b, err_msg=field)
    if res.certificate is not None:
        assert res.certificate.verify(X, y)
    again = mk.solve(X, y, solver=solver, stop=stop, max_iter=4, random_state=0)
    np.testing.assert_array_equal(again.dual_coef_, ref.dual_coef_)


@_DEFAULT_SIGINT
@pytest.mark.parametrize("solver", _classifiers("interrupt_raise"))
def test_ctrl_c_raises_and_leaves_plugins_and_later_runs_alone(solver):
    """Default: a Ctrl-C between iterations raises KeyboardInterrupt; the plug-in instances
    the run was given are as before, no BLAS limit is left open, and the next run is the
    same as a fresh one."""
    from marginkit.utils import _threads

    assert solver is not None, "no classification solver is registered"
    X, y = _interrupt_data()
    inst = mk.get_plugin("solver", solver)()
    kern = mk.get_plugin("kernel", "linear")()
    before = (dict(vars(inst)), dict(vars(kern)))

    def cb(state):
        if state.n_iter == 3:
            signal.raise_signal(signal.SIGINT)
        return False

    stop = ("max_iter", {"n": 10**6})
    with pytest.raises(KeyboardInterrupt):
        mk.solve(X, y, solver=inst, kernel=kern, stop=stop, max_iter=10**6, random_state=0,
                 callback=cb)
    assert (dict(vars(inst)), dict(vars(kern))) == before
    assert _threads._STATE["depth"] == 0
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    again = mk.solve(X, y, solver=inst, kernel=kern, stop=stop, max_iter=4, random_state=0)
    ref = mk.solve(X, y, solver=solver, stop=stop, max_iter=4, random_state=0)
    np.testing.assert_array_equal(again.dual_coef_, ref.dual_coef_)


def test_ctrl_c_inside_a_blas_limit_restores_the_thread_counts(monkeypatch):
    """A KeyboardInterrupt inside a BLAS thread limit (the Lipschitz bound of fista's
    start) leaves with the limit closed and the thread counts as before."""
    if "fista" not in REGISTERED:
        pytest.skip("fista is not registered")
    from threadpoolctl import threadpool_info

    import marginkit.solvers.svm._fista as svm
    from marginkit.utils import _threads

    X, y = _interrupt_data()
    mk.solve(X, y, solver="fista", max_iter=2)  # BLAS loaded and its libraries found
    counts = [(lib["filepath"], lib["num_threads"]) for lib in threadpool_info()]
    seen = []

    def interrupted(*args, **kw):
        seen.append(_threads._STATE["depth"])
        raise KeyboardInterrupt

    monkeypatch.setattr(svm, "lipschitz_bound", interrupted)
    # the run loop's BLAS choice on the default threads: fista's own limit is the only one
    monkeypatch.setattr(_threads, "busy_cores", lambda want, cores=None: False)
    with pytest.raises(KeyboardInterrupt):
        mk.solve(X, y, solver="fista")
    assert seen == [1] and _threads._STATE["depth"] == 0
    assert [(lib["filepath"], lib["num_threads"]) for lib in threadpool_info()] == counts


@pytest.mark.parametrize("solver", _classifiers("time_limit"))
def test_time_limit_real_solver(solver):
    assert solver is not None, "no classification solver is registered"
    X, y = _interrupt_data()
    res = mk.solve(X, y, solver=solver, stop=("max_iter", {"n": 10**9}), max_iter=10**9,
                   time_limit=0.05, random_state=0)
    assert res.status == "time_limit" and res.time_s >= 0.05 and res.n_iter > 0
    if res.certificate is not None:
        assert res.certificate.verify(X, y)


@_DEFAULT_SIGINT
def test_sigint_timer_during_long_real_run():
    """A real asynchronous Ctrl-C (another thread raises SIGINT) during a long run."""
    names = [s for s in REGISTERED if _is_classifier(s)]
    assert names, "no classification solver is registered"
    X, y = _interrupt_data()
    timers = []

    def cb(state):  # arm the timer once the loop runs (not during start())
        if state.n_iter == 0:
            t = threading.Timer(0.2, lambda: signal.raise_signal(signal.SIGINT))
            timers.append(t)
            t.start()
        return False

    try:
        res = mk.solve(X, y, solver=names[0], stop=("max_iter", {"n": 10**9}), max_iter=10**9,
                       callback=cb, interrupt="return")
    finally:
        for t in timers:
            t.cancel()
    assert res.status == "interrupted" and res.n_iter > 0


def _est_interrupt_params():
    return [_param("estimator_interrupt", None, n, n, id=n)
            for n in ("PerceptronClassifier", "SVMClassifier")]


@_DEFAULT_SIGINT
@pytest.mark.parametrize("name", _est_interrupt_params())
def test_ctrl_c_stops_a_one_vs_rest_fit(name, monkeypatch):
    """One Ctrl-C stops the whole estimator fit: no further one-vs-rest subproblem is solved
    (or KeyboardInterrupt propagates)."""
    cls = _estimator(name)
    import marginkit.sklearn as mks

    calls = []
    real = mks._solve

    def spy(X, y, **kw):
        calls.append(1)
        return real(X, y, **kw)

    monkeypatch.setattr(mks, "_solve", spy)

    def cb(state):
        if len(calls) == 1 and state.n_iter == 2:
            signal.raise_signal(signal.SIGINT)
        return False

    X, y = _interrupt_data()
    y = np.digitize(X[:, 0], [-0.5, 0.5])  # three classes
    est = cls(max_iter=10**5, callback=cb, stop=("max_iter", {"n": 10**5}))
    try:
        est.fit(X, y)
    except KeyboardInterrupt:
        pass
    assert len(calls) == 1, f"{len(calls)} subproblems solved after one Ctrl-C"


def test_dask_input_errors_name_global_rows():
    da = pytest.importorskip("dask.array")
    X, y = RT.separable()
    X[4, 1] = np.nan
    with pytest.raises(ValueError, match=r"NaN or infinity in row\(s\) \[4\]"):
        mk.solve(da.from_array(X, chunks=3), da.from_array(y, chunks=3), solver="snkp")


# ------------------------------------------------------------------ registry under stress
class _SlowEntryPoint:
    """Duck-typed entry point whose load takes a while and counts its calls."""

    def __init__(self, name, group, obj, delay=0.05):
        self.name, self.group, self.value = name, group, f"tests:{name}"
        self.obj, self.delay, self.calls = obj, delay, 0

    def load(self):
        self.calls += 1
        time.sleep(self.delay)
        return self.obj


def test_concurrent_first_lookup_loads_entry_point_once(monkeypatch):
    from _plugin_fixtures import NeverStop

    ep = _SlowEntryPoint("slow_never", "marginkit.stopping", NeverStop)
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None: [ep] if group == ep.group else [])
    mk.reset_registry()
    results, errors = [], []
    barrier = threading.Barrier(8)

    def work():
        try:
            barrier.wait()
            results.append(mk.get_plugin("stopping", "slow_never"))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and ep.calls == 1
    assert all(r is NeverStop for r in results) and len(results) == 8


def test_concurrent_register_and_lookup():
    errors = []

    def make(i):
        return type(f"Rule{i}", (mk.plugins.StoppingRule,), {"check": lambda s, st: None})

    def work(i):
        try:
            for k in range(20):
                mk.register("stopping", f"rule_{i}_{k}")(make(k))
                assert mk.get_plugin("stopping", f"rule_{i}_{k}").name == f"rule_{i}_{k}"
                mk.list_plugins()
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sum(n.startswith("rule_") for n in mk.list_plugins()["stopping"]) == 120


def test_entry_point_raising_at_import_is_isolated(monkeypatch, tmp_path):
    (tmp_path / "mk_broken_plugin.py").write_text("raise ZeroDivisionError('boom at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    eps = [importlib.metadata.EntryPoint("boom", "mk_broken_plugin:Solver", "marginkit.solvers")]
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None: [e for e in eps if e.group == group])
    mk.reset_registry()
    mk.register("solver", REFERENCE, overwrite=True)(ReferenceSolver)
    with pytest.warns(PluginLoadWarning, match="boom.*ZeroDivisionError"):
        names = mk.list_plugins()["solver"]
    assert "boom" not in names and REFERENCE in names
    X, y = RT.separable()
    assert mk.solve(X, y, solver=REFERENCE).status == "max_iter"  # the rest works
    with pytest.raises(ValueError, match=r"unknown solver 'boom' \(its entry point failed to load"):
        mk.solve(X, y, solver="boom")


def test_overwrite_required_to_replace_a_kernel():
    original = mk.get_plugin("kernel", "linear")

    class Twice(mk.plugins.Kernel):
        """The linear kernel of 2x (a subclass of LinearKernel may not redefine it)."""

        param_table = {}

        def feature_map(self, X):
            return 2.0 * V.check_X(X)

        def __call__(self, A, B=None):
            return 4.0 * np.asarray(A @ (A if B is None else B).T, dtype=np.float64)

    with pytest.raises(ValueError, match="already registered.*overwrite=True"):
        mk.register("kernel", "linear")(Twice)
    assert mk.get_plugin("kernel", "linear") is original
    X, y = RT.separable()
    before = mk.solve(X, y, solver=REFERENCE)
    mk.register("kernel", "linear", overwrite=True)(Twice)
    res = mk.solve(X, y, solver=REFERENCE)
    assert type(res.kernel) is Twice and res.status == before.status
    # alpha_i y_i K(x_i, x) / sqrt(K(x_i, x_i)): the scores double
    np.testing.assert_allclose(res.decision_function(X), 2.0 * before.decision_function(X))
    mk.reset_registry()
    assert mk.get_plugin("kernel", "linear") is original


def test_clean_input_emits_no_warnings():
    X, y = RT.separable()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = mk.solve(X, y, solver=REFERENCE)
    assert res.status == "max_iter" and res.n_iter == 1


@pytest.mark.parametrize("dtype", [">f8", "<f2", "<f8"])
def test_nonfinite_rows_of_any_float_layout(dtype):
    from marginkit._validation import _nonfinite_rows

    arr = np.array([[1.0, 2.0], [1.0, np.nan], [np.inf, 0.0]], dtype=dtype)
    assert list(_nonfinite_rows(arr)) == [1, 2]
    assert list(_nonfinite_rows(np.asfortranarray(arr))) == [1, 2]
    assert list(_nonfinite_rows(arr[:1])) == []


def test_a_sparse_dataframe_is_read_as_its_stored_entries():
    """Found by review: ``np.asarray`` densified a DataFrame of sparse columns (0.23 MiB
    of entries, 2.98 GiB dense). It is read as ``DataFrame.sparse.to_coo()``, as
    scikit-learn reads it: the same run as on the CSR matrix; a frame mixing sparse and
    dense columns is refused by name."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    S = sp.random(200, 50, density=0.1, random_state=0, format="csr")
    y = np.where(S @ rng.standard_normal(50) > 0, 1, -1)
    df = pd.DataFrame.sparse.from_spmatrix(S)
    got = mk.solve(df, y, solver="dcd", random_state=0)
    want = mk.solve(S, y, solver="dcd", random_state=0)
    assert got.status == want.status and np.array_equal(got.coef_, want.coef_)
    assert np.array_equal(got.predict(df), want.predict(S))
    assert sp.issparse(V.check_X(df))
    mixed = df.copy()
    mixed[0] = mixed[0].sparse.to_dense()
    with pytest.raises(TypeError, match="X is a DataFrame with sparse and dense columns"):
        mk.solve(mixed, y, solver="dcd")
    ones = pd.DataFrame({c: pd.arrays.SparseArray(np.ones(200), fill_value=1.0)
                         for c in range(3)})
    with pytest.raises(TypeError, match="X is a sparse DataFrame with fill value 1.0"):
        mk.solve(ones, y, solver="dcd")


def test_small_refusals_name_their_argument(tmp_path):
    """Found by review: a callback returning an array gave numpy's "truth value ... is
    ambiguous", load_result(None) an AttributeError about 'seek', and a separator's
    verify on X of another width a matmul error. Each names its cause now (a callback's
    None, bool or integer still decides as before)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 4))
    y = np.where(X[:, 0] > 0, 1, -1)
    for answer in (np.array([1, 2]), "False", {"loss": 1.0}):
        with pytest.raises(TypeError, match="callback returned a \\w+; return None or a bool"):
            mk.solve(X, y, solver="dcd", callback=lambda s, a=answer: a)
    assert mk.solve(X, y, solver="dcd", callback=lambda s: 1).status == "callback"
    assert mk.solve(X, y, solver="dcd", callback=lambda s: np.float64(0.0)).status != "callback"
    with pytest.raises(TypeError, match="path must be a file name"):
        mk.load_result(None)
    res = mk.solve(X, y, solver="snkp")
    res.save(tmp_path / "r.npz")
    assert mk.load_result(os.fsencode(tmp_path / "r.npz")).status == res.status
    with open(tmp_path / "r.npz", "rb") as fh:  # a file object, as before
        assert mk.load_result(fh).status == res.status
    import io

    with open(tmp_path / "r.npz", "r", encoding="latin-1") as fh:  # text mode
        with pytest.raises(ValueError, match="is not a file written by Result.save"):
            mk.load_result(fh)
    for junk in (io.BytesIO(b""), io.BytesIO(b"\x93NUMPY garbage")):
        with pytest.raises(ValueError, match="is not a file written by Result.save"):
            mk.load_result(junk)
    verdict = res.certificate.check(np.hstack([X, X]), y)
    assert not verdict and "coef has 4 entries, X 8 features" in verdict.reason
