"""Hostile inputs cannot crash, hang or exhaust the process (issue items 1, 8, 9, 13).

The cases live in ``tests/_hostile_worker.py`` and run in worker processes (a segfault,
a hang past the alarm or an exhausted address space ends a worker, and fails the case
that caused it, not the test run): every structural defect of a sparse matrix against
every solver, built-in kernel, prediction, certificate check, estimator and Dask solve;
tampered results files; LIBSVM files of zeros, huge lines and huge indices; the command
line. The cases that measure memory run in a worker of their own; each measurement
starts from a reset peak (Linux's ``/proc/self/clear_refs``), so it is that case's.
"""
import json
import os
import re
import signal
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

import marginkit as mk
from marginkit import _validation as V

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _hostile_worker as W  # noqa: E402

#: the tree under test: the workers import the marginkit this process imports
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(mk.__file__)))
WORKER = os.path.abspath(W.__file__)
MEM_MIB = 1536  # address space a worker may add to what its imports reserved

CASES = W.cases()
BY_ID = {c.id: c for c in CASES + W.SLOW_CASES}


def _run_workers(ids, tmp):
    """Run the cases ``ids`` in workers: on a crash the case in progress is recorded and a
    new worker goes on with the next one. Returns id -> outcome dict."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    results, pending = {}, list(ids)
    while pending:
        try:
            proc = subprocess.run([sys.executable, WORKER, str(tmp), str(MEM_MIB), *pending],
                                  capture_output=True, text=True, env=env, cwd=str(tmp),
                                  timeout=W.ALARM_S * len(pending) + 120)
            out, code, err = proc.stdout, proc.returncode, proc.stderr
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            code, err = "timeout", ""
        started = None
        for line in out.splitlines():
            tag, _, rest = line.partition(" ")
            if tag == "begin":
                started = rest
            elif tag == "end":
                cid, _, payload = rest.partition(" ")
                results[cid] = json.loads(payload)
                started = None
        crash = {"crash": _describe(code), "stderr": err[-3000:]}
        if started is None:  # finished, or died outside a case (at import): no retry
            for i in pending:
                results.setdefault(i, crash)
            break
        results[started] = crash
        pending = [i for i in pending if i not in results]
    return results


def _describe(code):
    if isinstance(code, int) and code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit status {code}"


@pytest.fixture(scope="module")
def hostile_files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    W.prepare_files(str(tmp))
    return tmp


@pytest.fixture(scope="module")
def outcomes(hostile_files):
    """Every case of the default run, once: the measured ones (memory, time) in a worker
    of their own, the others in another (each worker restarted after a crash)."""
    tmp = hostile_files
    results = _run_workers([c.id for c in CASES if c.measured], tmp)
    results.update(_run_workers([c.id for c in CASES if not c.measured], tmp))
    return results


def _check(case, got):
    assert "crash" not in got, f"{case.id}: the worker died ({got['crash']}):\n{got['stderr']}"
    if case.raises is None:
        assert got["exc"] is None, f"{case.id}: raised {got['exc']}: {got.get('msg')}"
        if got["value"].startswith("'skip:"):
            pytest.skip(got["value"])
    else:
        assert got["exc"] == case.raises, (
            f"{case.id}: expected {case.raises}, got "
            f"{'a return value ' + got['value'] if got['exc'] is None else got['exc']}: "
            f"{got.get('msg', '')}")
        assert re.search(case.match, got["msg"]), f"{case.id}: message {got['msg']!r}"
    if case.max_rss_mib is not None:
        assert got["rss_growth_mib"] <= case.max_rss_mib, (
            f"{case.id}: peak memory grew by {got['rss_growth_mib']:.0f} MiB")
    if case.max_seconds is not None:
        assert got["seconds"] <= case.max_seconds, f"{case.id}: took {got['seconds']:.1f} s"


@pytest.mark.parametrize("cid", [c.id for c in CASES])
def test_hostile_case(cid, outcomes):
    _check(BY_ID[cid], outcomes[cid])


@pytest.mark.slow
@pytest.mark.parametrize("cid", [c.id for c in W.SLOW_CASES])
def test_hostile_case_slow(cid, hostile_files):
    _check(BY_ID[cid], _run_workers([cid], hostile_files)[cid])  # each alone, measured


def test_every_solver_and_kernel_is_covered():
    """The structural cases follow the registry: a new solver or kernel gets them too."""
    ids = {c.id for c in CASES}
    for s in mk.list_plugins()["solver"]:
        assert f"csr:col_too_large:solve:{s}" in ids
    for k in mk.list_plugins()["kernel"]:
        if k not in ("precomputed", "callable"):
            assert f"csr:indptr_decreasing:kernel:{k}:B" in ids


# ------------------------------------------------------------------ in-process checks
def _canonical_reference(M):
    ref = sp.csr_matrix((M.data.copy(), M.indices.copy(), M.indptr.copy()), shape=M.shape)
    ref.has_sorted_indices = False
    ref.sum_duplicates()
    return ref


@pytest.mark.parametrize("block", [3, 7, 1 << 20])
def test_canonical_scan_across_blocks(block, monkeypatch):
    """The blocked scan finds unsorted or duplicate indices wherever they fall, block
    boundaries and empty rows included, and forgives the drop at every row start."""
    monkeypatch.setattr(V, "_SCAN_BLOCK", block)
    rng = np.random.default_rng(3)
    dense = rng.normal(size=(30, 9)) * (rng.random((30, 9)) < 0.5)
    dense[[4, 5, 17]] = 0.0  # empty rows
    M = sp.csr_matrix(dense)
    assert V._sorted_unique(M.indices, M.indptr)
    for k in range(M.nnz - 1):
        row = np.searchsorted(M.indptr, k, side="right") - 1
        if M.indptr[row + 1] - 1 == k:
            continue  # k is the last entry of its row: swapping with k + 1 crosses rows
        bad = M.indices.copy()
        bad[k], bad[k + 1] = bad[k + 1], bad[k]
        assert not V._sorted_unique(bad, M.indptr), k
        dup = M.indices.copy()
        dup[k + 1] = dup[k]
        assert not V._sorted_unique(dup, M.indptr), k


def test_checked_csr_keeps_valid_input_and_never_modifies():
    X = sp.random(50, 8, density=0.3, format="csr", random_state=0)
    assert V.checked_csr(X) is X  # canonical, int32: used in place
    M = X.copy()
    M.indices = M.indices.copy()
    a = int(M.indptr[2])
    M.indices[a], M.indices[a + 1] = M.indices[a + 1], M.indices[a]
    before = M.indices.copy()
    out = V.checked_csr(M)
    np.testing.assert_array_equal(M.indices, before)  # the caller's arrays are untouched
    assert out is not M and out.has_canonical_format
    np.testing.assert_array_equal(out.toarray(), M.toarray())


def test_structure_check_is_cheap():
    """O(nnz) numpy on rcv1-sized CSR (20242 x 47236, 1.5M stored entries): a few ms,
    nothing next to one solve."""
    import time

    rng = np.random.default_rng(0)
    n, d, k = 20242, 47236, 74
    indptr = np.arange(0, n * k + 1, k, dtype=np.int32)
    idx = np.sort(rng.integers(0, d // k, size=(n, k)) + np.arange(k) * (d // k), axis=1)
    M = sp.csr_matrix((rng.random(n * k), idx.ravel().astype(np.int32), indptr), shape=(n, d))
    V.checked_csr(M)
    t = time.perf_counter()
    for _ in range(5):
        V.checked_csr(M)
    assert (time.perf_counter() - t) / 5 < 0.05


def test_huge_int_message_never_prints_the_digits():
    import numbers

    spec = V.Param(1.0, numbers.Real, low=0)
    with pytest.raises(ValueError, match=r"x=~1e5000 \(an int\) is out of range"):
        spec.check(10**5000, "x")  # repr() of this int would itself raise
    with pytest.raises(ValueError, match=r"x=~-1e400 \(an int\)"):
        spec.check(-10**400, "x")


def test_xarray_dask_backed_takes_the_dask_path():
    xr = pytest.importorskip("xarray")
    da = pytest.importorskip("dask.array")
    X, y = W._data()
    Xd = xr.DataArray(da.from_array(X, chunks=(20, -1)), dims=("s", "f"))
    res = mk.solve(Xd, y, solver="snkp", max_iter=200)
    ref = mk.solve(X, y, solver="snkp", max_iter=200)
    assert res.status == ref.status == "separable"
    with pytest.raises(TypeError, match="X is a dask array; this entry point needs numpy"):
        V.check_X(Xd)


# ------------------------------------------------------------------ results files
def test_certificate_schemas_match_the_constructors():
    """The declared fields of the built-in certificate types are their constructors'
    parameters (a field added to a certificate must be added to its schema)."""
    import inspect

    from marginkit import _persist
    from marginkit.certificates import CERTIFICATE_TYPES

    for name, spec in _persist._CERTIFICATE_FIELDS.items():
        cls = CERTIFICATE_TYPES[name]
        params = list(inspect.signature(cls.__init__).parameters)[1:]
        assert sorted(spec) == sorted(params), name
    assert set(_persist._RESULT_FIELDS) == set(mk.Result._FIELDS)


@pytest.mark.parametrize("kw", [
    dict(solver="isnkpvn", kernel="rbf", kernel_params={"gamma": 0.5}, eps=1e-5,
         stop=[("dual_certificate", {}), "separated"], max_iter=400, random_state=3),
    dict(solver="fista", C=2.0, stop=[("certified_points", {"fraction": 0.5})], time_limit=30.0),
    dict(solver="snkp", kernel="nystroem", kernel_params={"base": "rbf", "n_components": 12},
         random_state=np.random.default_rng(0), memory_budget=2.0**28),
])
def test_saved_config_comes_back_as_a_validated_config(kw, tmp_path):
    X, y = W._data()
    res = mk.solve(X, y, **kw)
    res.save(tmp_path / "r.npz")
    back = mk.load_result(tmp_path / "r.npz")
    assert isinstance(back.config, mk.Config)
    for field in ("solver", "kernel", "kernel_params", "solver_params", "max_iter",
                  "time_limit", "memory_budget", "verbose", "smoother"):
        assert getattr(back.config, field) == getattr(res.config, field), field
    assert back.config.stop == res.config.stop
    seed = res.config.random_state
    assert back.config.random_state == (seed if isinstance(seed, int) else None)
    again = mk.solve(X, y, config=back.config.replace(random_state=0))  # usable as it is
    assert again.status in ("separable", "infeasible", "certified", "max_iter")


def test_a_loaded_file_is_only_data(tmp_path):
    """Methods come from the classes: a loaded result and certificate have no instance
    attribute beyond their fields, whatever the file said."""
    X, y = W._data()
    res = mk.solve(X, y, solver="snkp", kernel="rbf", max_iter=500)
    res.save(tmp_path / "r.npz")
    back = mk.load_result(tmp_path / "r.npz")
    assert set(back.__dict__) == set(mk.Result._FIELDS)
    assert set(back.certificate.__dict__) <= {"alpha", "value", "kernel", "classes"} | set(
        res.certificate.__dict__)
    assert back.certificate.verify(X, y)
    np.testing.assert_array_equal(back.predict(X), res.predict(X))


def test_load_result_limits(tmp_path):
    X, y = W._data()
    res = mk.solve(X, y, solver="snkp", kernel="rbf", max_iter=500)
    res.save(tmp_path / "r.npz")
    with pytest.raises(ValueError, match=r"r\.\w+(\.\w+)?: an array of \d+ bytes exceeds the "
                                         r"limit \(\d+ bytes of max_bytes=1000 left\); pass a "
                                         r"larger max_bytes"):
        mk.load_result(tmp_path / "r.npz", max_bytes=1000)
    with pytest.raises(TypeError, match="max_bytes"):
        mk.load_result(tmp_path / "r.npz", max_bytes=1.5)
    with pytest.raises(ValueError, match=r"max_bytes=-1 must be >= 0"):
        mk.load_result(tmp_path / "r.npz", max_bytes=-1)
    assert mk.load_result(tmp_path / "r.npz", max_bytes=10**6).status == res.status


def test_first_format_files_still_load(tmp_path):
    """A file of the first format (a __dict__ header, arrays without declarations)."""
    import json

    X, y = W._data()
    res = mk.solve(X, y, solver="isnkpvn", max_iter=2000)
    header = {"__dict__": {
        "status": res.status, "n_iter": res.n_iter, "time_s": res.time_s,
        "coef_": {"__array__": "r.coef_"}, "intercept_": 0.0,
        "margin_bounds": {"__seq__": [float(res.margin_bounds[0]), float(res.margin_bounds[1])],
                          "tuple": True},
        "classes_": {"__array__": "r.classes_"}, "solver": "isnkpvn", "kernel":
            {"__plugin__": ["kernel", "linear"], "params": {"__dict__": {}}},
        "config": {"__config__": {"__dict__": {"solver": "isnkpvn", "kernel": "linear",
                                               "callback": "<function f>", "random_state": None,
                                               "solver_params": {"__dict__": {}}}}},
        "certificate": {"__certificate__": "SeparatorCertificate", "state": {"__dict__": {
            "alpha": {"__array__": "r.certificate.c.alpha"}, "value": res.certificate.value,
            "kernel": {"__plugin__": ["kernel", "linear"], "params": {"__dict__": {}}},
            "classes": {"__array__": "r.certificate.c.classes"}}}},
        "history": {"__dict__": {}}, "extra": {"__dict__": {}}, "task": "classification"}}
    np.savez_compressed(tmp_path / "old.npz",
                        __meta__=np.frombuffer(json.dumps(header).encode(), dtype=np.uint8),
                        **{"r.coef_": res.coef_, "r.classes_": res.classes_,
                           "r.certificate.c.alpha": res.certificate.alpha,
                           "r.certificate.c.classes": res.certificate.classes})
    # its certificate holds no copy of the separator: loaded, with a warning saying so
    with pytest.raises(ValueError, match=r"earlier marginkit \(format 1\).*allow_unbound"):
        mk.load_result(tmp_path / "old.npz")
    with pytest.warns(UserWarning, match=r"written by an earlier marginkit \(format 1\)"):
        back = mk.load_result(tmp_path / "old.npz", allow_unbound=True)
    np.testing.assert_array_equal(back.predict(X), res.predict(X))
    assert back.certificate.verify(X, y) and isinstance(back.config, mk.Config)


def test_csr_duplicates_that_sum_past_the_range_are_named():
    """Found by review: finite duplicate entries whose sum overflows were refused as
    "contains NaN or infinity ... remove or impute them"."""
    X = sp.csr_matrix((np.array([1e308, 1e308, 1.0]), np.array([0, 0, 1]),
                       np.array([0, 2, 3])), shape=(2, 2))
    with pytest.raises(ValueError, match="duplicate entries of row 0 sum beyond float64"):
        mk.solve(X, np.array([1, -1]), solver="dcd")


def test_save_refuses_a_fifo_and_stores_object_string_labels(tmp_path):
    """Found by review: Result.save to a FIFO blocked (load_result and the CLI refuse
    one), and a fit on object-dtype string labels (pandas' labels) could not be saved
    ("arrays of dtype object need pickle"); tuple labels gave numpy's broadcasting error."""
    from marginkit.sklearn import SVMClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = np.where(X[:, 0] > 0, "x", "y").astype(object)
    res = SVMClassifier().fit(X, y).result_
    fifo = tmp_path / "r.npz"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        res.save(fifo)
    res.save(tmp_path / "s.npz")
    back = mk.load_result(tmp_path / "s.npz")
    assert back.classes_.tolist() == ["x", "y"] and back.certificate.verify(X, y)
    assert np.array_equal(back.predict(X), res.predict(X))
    tuples = np.empty(40, dtype=object)
    tuples[:] = [(1, 2) if v == "x" else (3, 4) for v in y]
    with pytest.raises(TypeError, match="label of type tuple"):
        mk.solve(X, tuples)


def test_a_huge_declared_sparse_shape_is_refused_before_its_conversion():
    """Found by review: a COO matrix of 40 entries declared with 1.5e8 rows took 1.7 GiB
    (its CSR row pointers) before y's length was compared, and one declared with 2^40
    rows raised numpy's MemoryError instead of an error naming X."""
    import resource

    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 4))
    y = np.where(X[:, 0] > 0, 1, -1)
    C = sp.coo_matrix(X)
    tall = sp.coo_matrix((C.data, (C.row, C.col)), shape=(150_000_000, 4))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ValueError, match="y has 40 entries but X has 150000000 rows"):
        mk.solve(tall, y, solver="fista")
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before  # KiB on Linux
    assert grown < 256 * 1024
    huge = sp.coo_matrix((C.data, (C.row, C.col)), shape=(2 ** 40, 4))
    res = mk.solve(X, y, solver="dcd")
    for call in (res.predict, lambda Z: res.certificate.check(Z, np.ones(40))):
        with pytest.raises(ValueError, match=r"X \(COO, shape \(1099511627776, 4\).*row pointers"):
            call(huge)


def test_csr_arrays_of_non_native_byte_order_together():
    """Found by review: CSR arrays all of non-native byte order (data and indices set
    after construction) reached scipy's constructor, which refuses such a dtype; either
    order alone was handled."""
    from marginkit._validation import check_X

    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 4))
    y = np.where(X[:, 0] > 0, 1, -1)
    S = sp.csr_matrix(X)
    M = sp.csr_matrix(S.shape)
    M.data, M.indices, M.indptr = (S.data.astype(">f8"), S.indices.astype(">i4"),
                                   S.indptr.astype(">i4"))
    Z = check_X(M)
    assert Z.data.dtype.isnative and (Z != S).nnz == 0 and M.data.dtype == np.dtype(">f8")
    a = mk.solve(M, y, solver="dcd", random_state=0)
    b = mk.solve(S, y, solver="dcd", random_state=0)
    np.testing.assert_array_equal(a.coef_, b.coef_)


@pytest.mark.parametrize("make", ["SVMClassifier", "PerceptronClassifier",
                                  "IteratedTikhonovClassifier"])
def test_the_estimators_compare_y_with_a_huge_declared_shape_before_converting(make):
    """Found by review: the estimators' fit converted a COO matrix declared with 1.5e8
    rows to CSR (1.2 GiB of row pointers) before scikit-learn compared y's length, which
    ``solve`` compares first."""
    import tracemalloc

    import marginkit.sklearn as mks

    rng = np.random.default_rng(0)
    C = sp.coo_matrix(rng.standard_normal((40, 4)))
    tall = sp.coo_matrix((C.data, (C.row, C.col)), shape=(150_000_000, 4))
    y = np.r_[np.ones(20), -np.ones(20)]
    for labels in (y, y[:, None], list(y)):
        tracemalloc.start()  # numpy's buffers are traced
        try:
            with pytest.raises(ValueError,
                               match=r"inconsistent numbers of samples: \[150000000, 40\]"):
                getattr(mks, make)().fit(tall, labels)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 64 << 20


def test_ragged_labels_beside_a_non_csr_matrix_get_the_labels_error():
    rng = np.random.default_rng(0)
    X = sp.coo_matrix(rng.standard_normal((3, 4)))
    with pytest.raises(ValueError, match="y"):
        mk.solve(X, [[1], [1, -1], [-1]], solver="dcd")


def test_a_dia_matrix_of_non_native_byte_order():
    """Found by review: DIA data or offsets of non-native byte order reached scipy's
    conversion, which refuses such dtypes ("scipy.sparse does not support dtype >f8")."""
    from marginkit.sklearn import SVMClassifier

    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 4))
    y = np.where(X[:, 0] > 0, 1, -1)
    M = sp.dia_matrix(X)
    M.data, M.offsets = M.data.astype(">f8"), M.offsets.astype(">i4")
    a = mk.solve(M, y, solver="dcd", random_state=0)
    b = mk.solve(X, y, solver="dcd", random_state=0)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-12, atol=0)
    np.testing.assert_array_equal(a.predict(M), b.predict(X))
    assert a.certificate.check(M, y).ok
    clf = SVMClassifier(random_state=0).fit(M, y)
    np.testing.assert_array_equal(clf.predict(M), clf.predict(X))
    assert M.data.dtype == np.dtype(">f8") and M.offsets.dtype == np.dtype(">i4")


@pytest.mark.parametrize("column", [2.7, 2.0, 2 ** 40, -1, 5])
def test_lil_columns_are_checked(column):
    """Found by review: a LIL row's column 2.7 (set through X.rows) was cut to 2 by scipy's
    conversion, moving its value to another feature, silently; 2**40 gave a bare
    OverflowError."""
    from marginkit.sklearn import SVMClassifier

    rng = np.random.default_rng(0)
    Xd = rng.standard_normal((40, 5))
    y = np.where(Xd[:, 0] > 0, 1, -1)
    L = sp.lil_matrix(Xd)
    L.rows[3] = list(L.rows[3])
    L.rows[3][1] = column
    for call in (lambda: mk.solve(L, y, solver="dcd"), lambda: SVMClassifier().fit(L, y)):
        with pytest.raises(ValueError, match=rf"X \(LIL\): row 3 has the column {column!r}"):
            call()


@pytest.mark.parametrize("key", [(1.5, 2), (1, 2 ** 40), (1, 7), (-1, 0)])
def test_dok_keys_are_checked(key):
    """Found by review: a DOK key (1.5, 2) put in through scipy's private dict was cut to
    row 1, and one beyond int32 gave a bare OverflowError."""
    rng = np.random.default_rng(0)
    Xd = rng.standard_normal((40, 3))
    y = np.where(Xd[:, 0] > 0, 1, -1)
    D = sp.dok_matrix(Xd)
    if not hasattr(D, "_dict"):
        pytest.skip("this scipy keeps DOK entries elsewhere")
    D._dict[key] = 3.0
    with pytest.raises(ValueError, match=r"X \(DOK\): the key .* is not a pair of integer"):
        mk.solve(D, y, solver="dcd")


@pytest.mark.parametrize("value", ["abc", [1.0, 2.0], "1.5", b"2", np.complex128(5 + 7j),
                                   np.timedelta64(3, "s")])
def test_dok_values_are_checked(value):
    """Found by review: a string value put in through scipy's private dict gave numpy's
    "could not convert string to float", naming neither X nor the entry; a string numpy
    reads as a number ('1.5') was taken as that number, a complex one as its real part,
    a timedelta as its count."""
    from marginkit.sklearn import SVMClassifier

    Xd = np.random.default_rng(0).standard_normal((40, 3))
    y = np.where(Xd[:, 0] > 0, 1, -1)
    D = sp.dok_matrix(Xd)
    if not hasattr(D, "_dict"):
        pytest.skip("this scipy keeps DOK entries elsewhere")
    D._dict[(2, 1)] = value
    for call in (lambda: mk.solve(D, y, solver="dcd"), lambda: SVMClassifier().fit(D, y)):
        with pytest.raises(ValueError, match=r"X \(DOK\): the entry at \(2, 1\) is .*not a "
                                             "number"):
            call()


def test_dok_values_the_dtype_cannot_hold_are_refused():
    """Found by review: 2.75 in an integer DOK was read as 2, 2.5 in a boolean one as
    True; numbers it holds (a bool, numpy integers, a Fraction in a float matrix) pass."""
    from fractions import Fraction

    from marginkit._validation import check_X

    for dtype, bad, good in ((np.int64, 2.75, np.int32(3)), (bool, 2.5, True),
                             (np.float64, 1 + 1j, Fraction(1, 3))):
        D = sp.dok_matrix((3, 2), dtype=dtype)
        if not hasattr(D, "_dict"):
            pytest.skip("this scipy keeps DOK entries elsewhere")
        D._dict[(0, 0)] = good
        check_X(D)
        D._dict[(1, 1)] = bad
        with pytest.raises(ValueError, match=r"X \(DOK\): the entry at \(1, 1\)"):
            check_X(D)


def test_result_score_checks_the_length_of_y():
    """Found by review: Result.score broadcast a single label against every prediction
    (0.43 for y[:1]) and raveled a y of shape (n, 2) into 2n labels."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    res = mk.solve(X, y, solver="dcd")
    assert res.score(X, y) == res.score(X, y[:, None])
    for bad in (y[:1], 1, np.column_stack([y, y])):
        with pytest.raises(ValueError, match="score needs one label per row of X"):
            res.score(X, bad)


def test_a_fraction_is_a_number_for_every_real_parameter():
    """Found by review: memory_budget=Fraction(1, 3) passed validation and then broke the
    formatting of a later message (TypeError from Fraction.__format__); real parameters
    are now floats once checked."""
    from fractions import Fraction

    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    with pytest.raises(ValueError, match="memory_budget"):
        mk.solve(X, y, solver="dcd", memory_budget=Fraction(1, 3))
    res = mk.solve(X, y, solver="dcd", C=Fraction(1, 2))
    assert res.status == "certified" and res.certificate.verify(X, y)


def test_the_estimators_predict_on_a_huge_declared_shape_names_x():
    """Found by review: predict, decision_function and score of a fitted estimator on a
    COO matrix declared with 2^40 rows raised numpy's MemoryError (8 TiB of row
    pointers), naming neither X nor the shape."""
    from marginkit.sklearn import SVMClassifier

    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 4))
    y = np.where(X[:, 0] > 0, 1, -1)
    clf = SVMClassifier().fit(X, y)
    C = sp.coo_matrix(X)
    huge = sp.coo_matrix((C.data, (C.row, C.col)), shape=(2 ** 40, 4))
    for call in (clf.predict, clf.decision_function):
        with pytest.raises(ValueError, match=r"X \(COO, shape \(1099511627776, 4\).*row pointers"):
            call(huge)


@pytest.mark.parametrize("dtype,a,b,want", [
    (np.int8, 100, 100, 200.0), (np.uint8, 200, 100, 300.0), (np.int16, 30000, 30000, 60000.0),
    (np.int16, 16384 * 1024, 2, 16777218.0), (np.bool_, True, True, 1.0)])
def test_integer_duplicates_are_summed_as_floats(dtype, a, b, want):
    """Review: duplicate entries of an integer COO matrix were summed in their own dtype
    by the conversion to CSR (int8 100 + 100 = -56), so a COO X and the same entries as
    dense floats disagreed. They are summed in float64 (then rounded once to float32 for
    small integers: 16384 * 1024 + 2 stays exact), in every format; bools are or-ed, as
    scipy reads them."""
    from marginkit._validation import checked_csr

    if dtype is np.int16 and a > 2 ** 15:
        dtype = np.int32
    C = sp.coo_matrix((np.array([a, b], dtype=dtype), ([0, 0], [0, 0])), shape=(2, 2))
    R = sp.csr_matrix((2, 2), dtype=dtype)
    R.data, R.indices, R.indptr = (np.array([a, b], dtype=dtype), np.array([0, 0], np.int32),
                                   np.array([0, 2, 2], np.int32))
    for M in (C, R):
        got = checked_csr(M)
        assert float(got.toarray()[0, 0]) == want, (type(M).__name__, got.dtype)


def test_bools_are_integer_indices_in_lil_and_dok_alike():
    """Review: a LIL column [True] alone was refused while [True, 2] was accepted (read as
    column 1); DOK keys likewise. A bool is an integer, as Python reads it."""
    L = sp.lil_matrix((1, 4))
    L.rows[0], L.data[0] = [True], [5.0]
    from marginkit._validation import checked_csr

    assert checked_csr(L).toarray().tolist() == [[0.0, 5.0, 0.0, 0.0]]
    L.rows[0], L.data[0] = [True, 2], [5.0, 5.0]
    assert checked_csr(L).toarray().tolist() == [[0.0, 5.0, 5.0, 0.0]]


def test_score_on_a_dask_array_of_unknown_chunk_sizes():
    """Review: Result.score on X[dask_mask] compared y with predictions of unknown length."""
    da = pytest.importorskip("dask.array")
    import dask

    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 3))
    y = np.where(X[:, 0] > 0, 1, -1)
    res = mk.solve(X, y, solver="dcd")
    D = da.from_array(X, chunks=(20, 3))
    keep = D[:, 1] > 0
    with dask.config.set(scheduler="synchronous"):
        got = res.score(D[keep], y[X[:, 1] > 0])
    assert got == res.score(X[X[:, 1] > 0], y[X[:, 1] > 0])


def test_a_sparse_precomputed_test_gram_is_not_densified():
    """predict of a kernel='precomputed' model multiplies a sparse K(X_new, X_train) as it
    is (found by review: toarray made a 3 GiB copy of a 0.5 MB CSR); the scores are those
    of the dense matrix."""
    import tracemalloc

    from marginkit.sklearn import PerceptronClassifier, SVMClassifier

    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 5))
    y = np.where(X @ rng.standard_normal(5) > 0, 1, -1)
    res = mk.solve(sp.csr_matrix(X @ X.T), y, solver="snkp", kernel="precomputed")
    K = sp.random(300_000, 200, density=1e-4, format="csr", random_state=0)
    small = K[:500]
    assert np.allclose(res.decision_function(small), res.decision_function(small.toarray()))
    estimators = [SVMClassifier(kernel="precomputed").fit(X @ X.T, y),
                  PerceptronClassifier(kernel="precomputed", fit_intercept=False).fit(X @ X.T, y)]
    for f in [res.decision_function] + [e.predict for e in estimators]:
        tracemalloc.start()
        try:
            f(K)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 64 * 2**20  # a dense K would be 458 MiB


@pytest.mark.parametrize("solver", ["snkp", "fista", "iterated_tikhonov"])
def test_scores_that_overflow_are_an_error_not_a_class(solver):
    """A polynomial model at rows of 1e120..1e300: its scores overflow to NaN, which
    predict turned into classes_[0] (found by review); now a ValueError naming the rows,
    and finite rows still predict."""
    from marginkit.sklearn import IteratedTikhonovClassifier, SVMClassifier

    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 3))
    y = np.where(X[:, 0] * X[:, 1] > 0, "pos", "neg")
    far = np.array([[1.0, 0.5, 0.0], [1e200, -1e200, 1.0], [1e300, 1e300, 1e300]])
    res = mk.solve(X, y, solver=solver, kernel="poly", kernel_params={"degree": 3})
    with pytest.raises(ValueError, match=r"not finite on 2 row\(s\) of X \(first: \[1, 2\]\)"):
        res.predict(far)
    assert res.predict(far[:1]).shape == (1,)
    est = SVMClassifier if solver == "fista" else IteratedTikhonovClassifier
    if solver != "snkp":
        fitted = est(kernel="poly", kernel_params={"degree": 3}).fit(X, y)
        for method in ("predict", "decision_function") + \
                (("predict_proba",) if solver == "iterated_tikhonov" else ()):
            with pytest.raises(ValueError, match="not finite"):
                getattr(fitted, method)(far)


@pytest.mark.parametrize("noise", [float("nan"), float("inf"), -1.0, True])
def test_make_source_capacity_checks_noise(noise):
    with pytest.raises(ValueError, match="noise=.* must be a finite number >= 0"):
        mk.datasets.make_source_capacity(20, 0.25, 2.0, loss="squared", noise=noise)


@pytest.mark.parametrize("solver", ["fista", "dcd", "iterated_tikhonov"])
def test_a_spline_diagonal_that_overflows_is_named(solver):
    """order 1 + 1e-7 on 200 features: K(x, x) = (1 + w zeta(order))^200 overflows, and
    Python's power raised a bare OverflowError (found by review)."""
    rng = np.random.default_rng(0)
    X = rng.random((20, 200))
    y = np.where(X[:, 0] > 0.5, 1, -1)
    with pytest.raises(ValueError, match=r"kernel 'spline': K\(x, x\) = .* overflows float64"):
        mk.solve(X, y, solver=solver, kernel="spline", kernel_params={"order": 1.0000001})


def test_infinite_scores_are_refused():
    """One overflowing term makes a sum infinite with that term's sign, not the exact
    sum's (found by review: +inf where the exact poly-3 score was negative); a linear
    model's infinite scores are refused alike."""
    rng = np.random.default_rng(0)
    X = 1e-3 * rng.standard_normal((200, 2))
    y = np.where(X[:, 0] > 0, 1, -1)
    res = mk.solve(X, y, solver="dcd")
    far = np.array([[1e306, 0.0], [-1e306, 0.0], [1e-3, 0.0]])
    assert abs(res.coef_[0]) > 1e3  # so that the first two rows' scores overflow
    with pytest.raises(ValueError, match=r"not finite on 2 row\(s\) of X \(first: \[0, 1\]\)"):
        res.predict(far)
    assert res.predict(far[2:]).shape == (1,)


def test_nan_scores_of_a_dask_chunk_are_named_by_their_row_in_x():
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 3))
    y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
    res = mk.solve(X, y, solver="snkp", kernel="poly", kernel_params={"degree": 3})
    T = rng.standard_normal((40, 3))
    T[35] = [1e200, -1e200, 1.0]
    with pytest.raises(ValueError, match=r"first: \[35\]"):
        res.predict(T)
    with pytest.raises(ValueError, match=r"first: \[35\]"):
        res.predict(da.from_array(T, chunks=(10, 3))).compute(scheduler="synchronous")


@pytest.mark.parametrize("solver, kernel", [("snkp", "linear"), ("fista", "linear"),
                                            ("nvn", "linear"), ("dcd", "rbf"),
                                            ("iterated_tikhonov", "linear")])
def test_a_referee_checks_the_width_of_x_against_the_memory_budget(solver, kernel):
    # found by review: verify on a valid CSR X of 30 rows and 2^31 declared columns (solve
    # refuses it at once) allocated arrays of one float64 per column, 16 GiB each, and
    # grew until the machine ran out of memory
    rng = np.random.default_rng(0)
    Xd = rng.normal(size=(30, 6))
    y = np.where(Xd[:, 0] > 0, 1, -1)
    Xd[:, 0] += 0.5 * y
    res = mk.solve(Xd, y, solver=solver, kernel=kernel, max_iter=2000)
    if res.certificate is None:
        pytest.skip(f"{solver} ended {res.status} without a certificate")
    C = sp.csr_matrix(Xd)
    wide = sp.csr_matrix((C.data, C.indices.astype(np.int64), C.indptr.astype(np.int64)),
                         shape=(30, 2**31))
    with pytest.raises(ValueError, match=r"X has 2147483648 columns.*memory_budget"):
        res.certificate.verify(wide, y)
    assert res.certificate.verify(Xd, y)


def test_the_width_check_covers_rff_refits_and_margin_bounds():
    # review of the referees' width check: an unfitted rff map refitted by the referee on
    # 6 million columns took 4.6 GB past the 2 GiB budget, and margin_bounds asked for
    # 32 GiB on 2^31 columns
    from marginkit.certificates import InfeasibilityCertificate, margin_bounds

    X = sp.csr_matrix((np.array([1.0, 1.0]), np.array([0, 0]), np.array([0, 1, 2])),
                      shape=(2, 6_000_000))
    y = np.array([1, 0])
    kern = mk.get_plugin("kernel", "rff")(random_state=0)
    cert = InfeasibilityCertificate(np.array([0.5, 0.5]), 0.0, 1e-3, kern,
                                    classes=np.array([0, 1]))
    with pytest.raises(ValueError, match=r"6000000 x 100 random frequencies.*memory_budget"):
        cert.verify(X, y)
    wide = sp.csr_matrix(X, shape=(2, 2**31))
    linear = mk.get_plugin("kernel", "linear")()
    with pytest.raises(ValueError, match=r"X has 2147483648 columns.*memory_budget"):
        margin_bounds(wide, np.array([1.0, -1.0]), linear, np.ones(2), np.ones(2))
    narrow = sp.csr_matrix((np.array([1.0, 2.0]), np.array([0, 0]), np.array([0, 1, 2])),
                           shape=(2, 3))
    low, up = margin_bounds(narrow, np.array([1.0, -1.0]), linear, np.ones(2), np.ones(2))
    assert low <= up


@pytest.mark.parametrize("kind", ["datetime", "timedelta", "record", "frame", "list",
                                  "frame_tz"])
def test_the_estimators_refuse_dates_durations_and_records(kind):
    """numpy reads dates as seconds since 1970 and scikit-learn's validation accepts
    them: the estimators refuse what solve refuses, naming X (and a DataFrame's column)."""
    from marginkit.sklearn import PerceptronClassifier, SVMClassifier

    y = np.array([0, 1] * 10)
    dates = np.arange(40).reshape(20, 2).astype("datetime64[s]")
    X = {"datetime": dates, "timedelta": dates - dates[0, 0],
         "record": np.zeros(20, dtype=[("a", float), ("b", float)])}.get(kind)
    if kind == "list":  # rows of numpy dates (found by review)
        X = [list(row) for row in dates]
    if kind in ("frame", "frame_tz"):
        pd = pytest.importorskip("pandas")
        X = pd.DataFrame({"a": np.arange(20.0), "when": pd.date_range(
            "2020", periods=20, tz="UTC" if kind == "frame_tz" else None)})
    for est in (SVMClassifier(), PerceptronClassifier()):
        with pytest.raises(TypeError, match=r"X('s column 'when')? has non-numeric dtype"):
            est.fit(X, y)
    fitted = SVMClassifier().fit(np.arange(40.0).reshape(20, 2), y)
    if kind not in ("frame", "frame_tz"):
        with pytest.raises(TypeError, match="X has non-numeric dtype"):
            fitted.predict(X)
