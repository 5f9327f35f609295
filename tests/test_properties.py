"""Property tests (hypothesis) for issue 8: over random shapes, dtypes, sparse formats,
sparsity, poisoned values and labels, ``solve`` and the estimators either raise the
documented error (``ValueError``/``TypeError`` naming the problem) or return a ``Result``
whose certificate verifies from the data alone; the caller's input is never modified.

An independent oracle says which error (if any) each input must produce. Default runs
are small (``max_examples`` per solver); ``-m slow`` runs a larger sweep.
"""
import re

import numpy as np
import pytest
import scipy.sparse as sp

import marginkit as mk
import marginkit._api  # noqa: F401 - compose
from marginkit import _validation as V

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

NORMALIZING = {"normalized_perceptron", "nkp", "snkp", "nvn", "snkpvn", "isnkpvn"}
#: solvers that may reject zero rows although they do not normalize (a zero point can never
#: satisfy y_i <w, x_i> > 0, so the homogeneous perceptron problem is infeasible anyway)
MAY_REJECT_ZERO_ROWS = {"perceptron"}
STATUSES = {"separable", "infeasible", "certified", "converged", "max_iter", "time_limit",
            "callback", "interrupted"}
CLASSIFIERS = [s for s in mk.list_plugins()["solver"]
               if getattr(mk.get_plugin("solver", s), "task", "classification") == "classification"]
FAST = settings(max_examples=15, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SLOW = settings(max_examples=200, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

DTYPES = [np.float64, np.float32, np.int8, np.int64, np.bool_]
FORMATS = ["dense", "fortran", "readonly", "csr", "csc", "coo", "csr64"]


@st.composite
def problems(draw, max_n=12, max_d=4, float_labels=True):
    n = draw(st.integers(1, max_n))
    d = draw(st.integers(1, max_d))
    dtype = draw(st.sampled_from(DTYPES))
    if dtype in (np.float64, np.float32):
        scale = draw(st.sampled_from([1e-6, 1.0, 1e6]))
        elems = st.floats(-10, 10, allow_nan=False, width=32)
        X = draw(hnp.arrays(np.float64, (n, d), elements=elems)) * scale
        poison = draw(st.sampled_from([None] * 8 + [np.nan, np.inf, -np.inf]))
        if poison is not None:
            X[draw(st.integers(0, n - 1)), draw(st.integers(0, d - 1))] = poison
        X = X.astype(dtype)
    elif dtype == np.bool_:
        X = draw(hnp.arrays(np.bool_, (n, d)))
    else:
        X = draw(hnp.arrays(dtype, (n, d), elements=st.integers(-100, 100)))
    density = draw(st.sampled_from([1.0, 0.5, 0.1]))
    if density < 1.0:
        keep = draw(hnp.arrays(np.bool_, (n, d), elements=st.booleans()))
        X = np.where(keep | (np.arange(d) == 0), X, np.zeros((), dtype=X.dtype)).astype(X.dtype)
    fmt = draw(st.sampled_from(FORMATS))
    label_sets = [("a", "b"), (0, 1), (-1, 1), ("a", "b", "c")]
    if float_labels:  # solve takes any two labels; estimators follow scikit-learn (no continuous y)
        label_sets.append((2.5, 7.0))
    labels = draw(st.sampled_from(label_sets))
    y = np.array(draw(st.lists(st.sampled_from(labels), min_size=n, max_size=n)))
    return _format(X, fmt), y


def _format(X, fmt):
    if fmt == "dense":
        return X
    if fmt == "fortran":
        return np.asfortranarray(X)
    if fmt == "readonly":
        X = X.copy()
        X.flags.writeable = False
        return X
    if fmt == "csr64":
        M = sp.csr_matrix(X)
        M.indices = M.indices.astype(np.int64)
        M.indptr = M.indptr.astype(np.int64)
        return M
    return {"csr": sp.csr_matrix, "csc": sp.csc_matrix, "coo": sp.coo_matrix}[fmt](X)


def _dense64(X):
    return (X.toarray() if sp.issparse(X) else np.asarray(X)).astype(np.float64)


def expected_error(X, y, solver, kernel="linear"):
    """(type, regex, required) solve must raise for this input, or None; independent of marginkit.

    ``required=False``: the error is allowed but a verified ``Result`` is fine too.
    """
    D = _dense64(X) if not (sp.issparse(X) and X.dtype == np.bool_) else X.toarray().astype(float)
    if not np.isfinite(D).all():
        return ValueError, r"X contains NaN or infinity in row\(s\)", True
    k = len(set(np.asarray(y).tolist()))
    if k == 1:
        return ValueError, r"y has a single class", True
    if k > 2:
        return ValueError, r"y has 3 classes.*one-vs-rest", True
    zero = np.flatnonzero(~(np.abs(D).sum(axis=1) > 0))
    if zero.size and kernel == "linear" and solver in NORMALIZING | MAY_REJECT_ZERO_ROWS:
        return (ValueError, rf"row\(s\) \[{zero[0]}[\],].*K\(x, x\) = 0|zero-norm",
                solver in NORMALIZING)
    return None


def _snapshot(X):
    if sp.issparse(X):
        return [np.array(getattr(X, a), copy=True).tobytes()
                for a in ("data", "indices", "indptr", "row", "col") if hasattr(X, a)]
    return (X.tobytes(order="A"), X.flags.writeable, X.flags.f_contiguous)


def _kernel_for(solver, kernel):
    try:
        mk._api.compose(mk.Config(solver=solver, kernel=kernel))
    except ValueError:
        return "linear"  # this solver works in feature space only
    return kernel


def check_solve(X, y, solver, kernel="linear"):
    before = _snapshot(X)
    kernel = _kernel_for(solver, kernel)
    want = expected_error(X, y, solver, kernel)
    kw = dict(solver=solver, kernel=kernel, max_iter=200, random_state=0)
    if want is not None and want[2]:
        with pytest.raises(want[0], match=want[1]):
            mk.solve(X, y, **kw)
    else:
        try:
            res = mk.solve(X, y, **kw)
        except ValueError as exc:
            if want is None:
                raise
            assert re.search(want[1], str(exc)), str(exc)
            assert _snapshot(X) == before
            return
        assert res.status in STATUSES
        assert set(np.asarray(res.classes_).tolist()) == set(np.asarray(y).tolist())
        if res.status == "separable":
            assert res.certificate is not None and res.certificate.kind == "separator"
        if res.status == "infeasible":
            assert res.certificate is not None and res.certificate.kind == "infeasibility"
        if res.certificate is not None:
            assert res.certificate.verify(X, y), f"{solver}: {res.certificate!r} does not verify"
        for f in ("coef_", "dual_coef_", "dual_vector"):
            v = getattr(res, f)
            if v is not None:
                assert np.isfinite(np.asarray(v, dtype=float)).all(), f
        pred = res.predict(X)
        assert set(np.asarray(pred).tolist()) <= set(np.asarray(y).tolist())
        if res.status == "separable":
            np.testing.assert_array_equal(pred, y)
    assert _snapshot(X) == before


@pytest.mark.parametrize("solver", CLASSIFIERS or [None])
@FAST
@given(problem=problems(), kernel=st.sampled_from(["linear", "rbf"]))
def test_solve_clear_error_or_verified_result(solver, problem, kernel):
    assert solver is not None, "no classification solver is registered"
    check_solve(*problem, solver, kernel)


def _sweep_params():
    # the float32 + rbf false-infeasibility bug (case f32_near_duplicates_rbf of
    # tests/reliability_table.py, routed) can be hit by the random sweep: non-strict there
    reason = ("float32 + rbf false 'infeasible' (tracked as case f32_near_duplicates_rbf "
              "in tests/reliability_table.py)")
    return [pytest.param(s, marks=[pytest.mark.xfail(strict=False, reason=reason)]
                         if s in ("isnkpvn", "nvn", "snkpvn") else [])
            for s in CLASSIFIERS or [None]]


@pytest.mark.slow
@pytest.mark.parametrize("solver", _sweep_params())
@SLOW
@given(problem=problems(max_n=40, max_d=8), kernel=st.sampled_from(["linear", "rbf"]))
def test_solve_property_sweep(solver, problem, kernel):
    assert solver is not None, "no classification solver is registered"
    check_solve(*problem, solver, kernel)


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(problem=problems())
def test_check_X_keeps_values_and_input(problem):
    X, _ = problem
    before = _snapshot(X)
    D = _dense64(X)
    if not np.isfinite(D).all():
        with pytest.raises(ValueError, match="NaN or infinity"):
            V.check_X(X)
        return
    out = V.check_X(X)
    assert out.dtype in (np.float32, np.float64)
    if sp.issparse(out):
        assert out.format == "csr" and out.has_canonical_format
        assert out.indices.dtype == out.indptr.dtype and out.indices.dtype in (np.int32, np.int64)
    np.testing.assert_array_equal(_dense64(out), D.astype(out.dtype).astype(np.float64))
    assert _snapshot(X) == before


ESTIMATORS = ["PerceptronClassifier", "SVMClassifier"]


@pytest.mark.filterwarnings("ignore:.*The model is the last iterate")  # ConvergenceWarning
@pytest.mark.parametrize("name", ESTIMATORS)
@settings(max_examples=10, deadline=None, derandomize=True, database=None)
@given(problem=problems(max_n=10, max_d=3, float_labels=False))
def test_estimator_clear_error_or_valid_model(name, problem):
    pytest.importorskip("sklearn")  # an optional dependency
    import marginkit.sklearn as mks

    X, y = problem
    before = _snapshot(X)
    D = _dense64(X)
    est = getattr(mks, name)(max_iter=200, random_state=0)
    k = len(set(y.tolist()))
    if not np.isfinite(D).all() or k < 2:
        with pytest.raises(ValueError):
            est.fit(X, y)
    else:
        try:
            est.fit(X, y)
        except ValueError as exc:
            # the normalized family rejects zero-norm rows by name
            assert "K(x, x) = 0" in str(exc) or "zero-norm" in str(exc), str(exc)
            assert (np.abs(D).sum(axis=1) == 0).any()
        else:
            assert set(est.classes_.tolist()) == set(y.tolist())
            assert set(est.predict(X).tolist()) <= set(y.tolist())
    assert _snapshot(X) == before


# ------------------------------------------------------------------ LIBSVM reader fuzzing
# non-finite values ("1:nan", "1:1e400") are the case libsvm_nonfinite of
# tests/reliability_table.py
_TOKENS = ["1", "-1", "+1", "0", "2.5", "1:0.5", "2:1", "3:-2e3", "10:1", "0:1", "-2:1", "2:",
           ":1", "x:1", "1:abc", "qid:3", "#", "# c", " ", "  ", "\t", "\n", "\r\n", "1:1:1",
           "é", "\x00"]


def _loader():
    from marginkit.datasets import load_libsvm

    return load_libsvm


def _check_load(load, path):
    try:
        X, y = load(str(path))
    except ValueError as exc:
        msg = str(exc)
        assert path.name in msg, msg  # names the file
        assert ("line " in msg or "no samples" in msg or "compressed" in msg
                or "not a text file" in msg), msg
        return
    assert sp.issparse(X) and X.shape[0] == y.shape[0] >= 1
    assert np.isfinite(y).all() and np.isfinite(X.data).all()
    assert X.has_canonical_format and (X.indices >= 0).all()


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(tokens=st.lists(st.sampled_from(_TOKENS), min_size=1, max_size=30))
def test_libsvm_reader_clear_error_or_valid_matrix(tokens, tmp_path_factory):
    """Any text: a valid CSR matrix and labels, or a ValueError naming the file and line."""
    load = _loader()
    path = tmp_path_factory.mktemp("fuzz") / "data.txt"
    path.write_bytes(" ".join(tokens).encode("utf-8"))
    _check_load(load, path)


@settings(max_examples=30, deadline=None, derandomize=True, database=None)
@given(data=st.binary(min_size=1, max_size=200),
       suffix=st.sampled_from(["", ".gz", ".xz", ".bz2"]))
def test_libsvm_reader_binary_garbage(data, suffix, tmp_path_factory):
    load = _loader()
    path = tmp_path_factory.mktemp("fuzz") / f"data{suffix}"
    path.write_bytes(data)
    _check_load(load, path)
