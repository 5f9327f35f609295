"""Hostile inputs tried against marginkit, run by ``tests/test_inputs_hostile.py`` in a
separate process: a segfault, a hang or an exhausted memory ends that process, not the
test run, and shows up as the failure of the case that caused it.

Each ``Case`` is one call on one hostile input; ``raises`` and ``match`` say what
marginkit must do (raise that exception with a message matching the pattern), or
``raises=None``: return normally (the case's function asserts what it must return).

Run as ``python tests/_hostile_worker.py TMPDIR MEM_MIB ID [ID ...]``: the cases run in
the given order under an address-space limit of MEM_MIB MiB and an alarm of
``ALARM_S`` seconds each (its default action ends the process, even inside compiled
code); for each the worker prints ``begin ID`` and then ``end ID {json}`` with the
outcome, the time it took and the growth of the peak resident memory.
"""
import dataclasses
import gzip
import io
import json
import lzma
import os
import resource
import signal
import sys
import time
import zipfile
from typing import Callable, Optional

import numpy as np
import scipy.sparse as sp

ALARM_S = 60
N, D, ROW = 40, 5, 23  # the matrices: N x D, corrupted in row ROW (in chunk 1 of 2)


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    run: Callable
    raises: Optional[str] = "ValueError"
    match: str = ""
    measured: bool = False  # run in the worker of the measured cases (memory, time)
    max_rss_mib: Optional[float] = None
    max_seconds: Optional[float] = None


# ------------------------------------------------------------------------------ data
def _data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, D))
    X[np.abs(X) < 0.3] = 0.0  # some zeros: CSR rows of different lengths
    X[:, 0] += np.where(np.arange(N) % 2, 2.0, -2.0)  # separable through the origin
    y = (np.arange(N) % 2).astype(int)
    return X, y


def _entry(M, row):
    """Position of the second stored entry of ``row`` (rows have at least two)."""
    return int(M.indptr[row]) + 1


def _csr_defect(kind, M, row, in_place=False):
    """The CSR matrix M with one structural defect in ``row``: a copy, or M itself with
    new arrays (``in_place``: a matrix corrupted after something took a reference to it).
    ``col_too_large`` copies go through scipy's constructor, which does not check."""
    k = _entry(M, row)
    indices, indptr, data = M.indices.copy(), M.indptr.copy(), M.data
    if kind in ("col_too_large", "col_negative"):
        indices[k] = 1_000_000 if kind == "col_too_large" else -7
    elif kind == "indptr_decreasing":
        indptr[row] = 10**6
    elif kind == "indptr_past_end":
        indptr[row + 1:] += 10**6
    elif kind == "lengths_differ":
        data = data[:-3]
    elif kind == "indptr_short":
        indptr = indptr[:-2]
    elif kind == "indptr_start":
        indptr[0] = 1
    elif kind == "float_indices":
        indices = indices.astype(np.float64)
    else:
        raise KeyError(kind)
    if not in_place:
        if kind == "col_too_large":
            return sp.csr_matrix((data, indices, indptr), shape=M.shape)
        M = M.copy()
    M.indices, M.indptr, M.data = indices, indptr, data
    return M


#: CSR defect -> (exception, message pattern for the defect in row ROW)
CSR_DEFECTS = {
    "col_too_large": ("ValueError", rf"\(CSR\): column index 1000000 of row {ROW} is out of "
                                    rf"range \[0, {D}\)"),
    "col_negative": ("ValueError", rf"\(CSR\): column index -7 of row {ROW} is out of range"),
    "indptr_decreasing": ("ValueError", rf"\(CSR\): indptr decreases at row {ROW} "),
    "indptr_past_end": ("ValueError", r"\(CSR\): indptr\[-1\] = \d+ \(the number of stored "
                                      r"entries\) exceeds the length \d+ of indices and data"),
    "lengths_differ": ("ValueError", r"\(CSR\): indices has \d+ entries but data has \d+"),
    "indptr_short": ("ValueError", r"\(CSR\): indptr has \d+ entries, expected n_rows \+ 1"),
    "indptr_start": ("ValueError", r"\(CSR\): indptr\[0\] = 1, expected 0"),
    "float_indices": ("TypeError", r"\(CSR\): indices has dtype float64; the index arrays"),
}


def _other_defect(kind):
    X, _ = _data()
    if kind == "csc_row_too_large":
        M = sp.csc_matrix(X)
        M.indices = M.indices.copy()
        M.indices[3] = 1_000_000
        return M
    if kind == "coo_row_too_large":
        M = sp.coo_matrix(X)
        M.row[5] = 1_000_000
        return M
    if kind == "coo_lengths_differ":
        M = sp.coo_matrix(X)
        M.data = M.data[:-2]
        return M
    if kind == "bsr_bad_block":
        M = sp.bsr_matrix(np.hstack([X, X[:, :1]]), blocksize=(2, 2))
        M.indices = M.indices.copy()
        M.indices[4] = 50
        return M
    if kind == "dia_offsets":
        M = sp.dia_matrix(X)
        M.offsets = M.offsets[:-1]
        return M
    if kind == "lil_lengths":
        M = sp.lil_matrix(X)
        M.data[ROW] = M.data[ROW][:-1]
        return M
    raise KeyError(kind)


OTHER_DEFECTS = {
    "csc_row_too_large": ("ValueError", r"\(CSC\): row index 1000000 of column 0 is out of "
                                        rf"range \[0, {N}\)"),
    "coo_row_too_large": ("ValueError", r"\(COO\): row index 1000000 of stored entry 5 is out "
                                        rf"of range \[0, {N}\)"),
    "coo_lengths_differ": ("ValueError", r"\(COO\): the row indices have \d+ entries but data"),
    "bsr_bad_block": ("ValueError", r"\(BSR\): block column index 50 of stored block 4 is out "
                                    r"of range \[0, 3\)"),
    "dia_offsets": ("ValueError", r"\(DIA\): \d+ offsets for \d+ rows of diagonal data"),
    "lil_lengths": ("ValueError", rf"\(LIL\): row {ROW} has column and value lists of "
                                  "different lengths"),
}


def _bad(kind):
    if kind in CSR_DEFECTS:
        X, _ = _data()
        return _csr_defect(kind, sp.csr_matrix(X), ROW)
    return _other_defect(kind)


def _snapshot(M):
    parts = []
    for a in ("data", "indices", "indptr", "row", "col", "offsets"):
        v = getattr(M, a, None)
        if isinstance(v, np.ndarray) and v.dtype != object:
            parts.append((a, v.dtype.str, v.shape, v.tobytes()))
    return parts


def _untouched(fn):
    """fn(M) on a hostile matrix, checking that M's arrays are not modified."""
    def run(kind):
        M = _bad(kind)
        before = _snapshot(M)
        try:
            return fn(M)
        finally:
            assert _snapshot(M) == before, "the caller's matrix was modified"
    return run


# ------------------------------------------------------------------------ entry points
def _solve(solver, kernel="linear"):
    def fn(M):
        import marginkit as mk

        return mk.solve(M, _data()[1], solver=solver, kernel=kernel, max_iter=20).status
    return fn


def _kernel_call(name, side):
    def fn(M):
        import marginkit as mk

        k = mk.get_plugin("kernel", name)()
        good = _data()[0]
        if side == "A":
            return k(M, good).shape
        if side == "B":
            return k(good, M).shape
        return k.diag(M).shape
    return fn


def _predict(kernel):
    def fn(M):
        import marginkit as mk

        X, y = _data()
        res = mk.solve(X, y, solver="snkp", kernel=kernel, max_iter=200)
        return res.predict(M).shape
    return fn


def _verify(M):
    import marginkit as mk

    X, y = _data()
    res = mk.solve(X, y, solver="snkp", max_iter=200)
    assert res.certificate is not None
    return res.certificate.verify(M, y)


def _estimator(name, method):
    def fn(M):
        import marginkit.sklearn as mks

        X, y = _data()
        est = getattr(mks, name)(max_iter=50)
        if method == "fit":
            est.fit(M, y)
            return "fitted"
        est.fit(X, y)
        return est.predict(M).shape
    return fn


def _dask_from_array(kind, solver):
    """A dask array on a corrupt CSR matrix: dask copies and slices the matrix with
    scipy's C++ code, so marginkit checks the matrices a graph holds before running it."""
    def run(_kind):
        import dask.array as da
        import marginkit as mk

        M = _bad(kind)
        before = _snapshot(M)
        Xd = da.from_array(M, chunks=(N // 2, -1), asarray=False)
        try:
            return mk.solve(Xd, _data()[1], solver=solver, max_iter=20).status
        finally:
            assert _snapshot(M) == before, "the caller's matrix was modified"
    return run


#: the defects ``da.from_array`` lets through (it refuses inconsistent lengths itself,
#: and its copy casts float indices to integers)
FROM_ARRAY_PASSES = ("col_too_large", "col_negative", "indptr_decreasing")


def _dask_chunk(kind, solver):
    """A dask array whose chunk 1 (rows N/2..N-1) is computed corrupt by the graph."""
    def run(_kind):
        import dask.array as da
        import marginkit as mk

        X, y = _data()

        def corrupt(block, block_info=None):
            if block_info is not None and block_info[0]["chunk-location"][0] == 1:
                return _csr_defect(kind, block, ROW - N // 2)
            return block

        Xd = da.from_array(sp.csr_matrix(X), chunks=(N // 2, -1), asarray=False)
        Xd = Xd.map_blocks(corrupt, dtype=np.float64)
        return mk.solve(Xd, y, solver=solver, max_iter=20).status
    return run


def _dask_wrong_shape(solver):
    def run(_kind):
        import dask
        import dask.array as da
        import marginkit as mk

        blocks = [da.from_delayed(dask.delayed(np.ones)((N // 2, D + 2)), shape=(N // 2, D),
                                  dtype=np.float64) for _ in range(2)]
        return mk.solve(da.concatenate(blocks), _data()[1], solver=solver, max_iter=20).status
    return run


def _corrupt_feature_map(solver):
    """A third-party kernel whose feature map returns a corrupt CSR matrix."""
    def run(_):
        import marginkit as mk
        from marginkit.plugins import Kernel

        class CorruptMap(Kernel):
            param_table = {}

            def feature_map(self, X):
                return _csr_defect("col_too_large", sp.csr_matrix(np.asarray(X)), ROW)

            def __call__(self, A, B=None):
                A = np.asarray(A)
                return A @ np.asarray(A if B is None else B).T

            def diag(self, A):
                return (np.asarray(A) ** 2).sum(axis=1)

        mk.register("kernel", "corrupt_map", overwrite=True)(CorruptMap)
        X, y = _data()
        return mk.solve(X, y, solver=solver, kernel="corrupt_map", max_iter=20).status
    return run


def _corrupt_kernel_block(kind, where):
    """A kernel function whose Gram blocks are CSR matrices with the defect ``kind``
    (before its check, scipy's toarray read them: a segfault; found by review): a
    callable to a solver or an estimator, a plug-in's ``__call__``, or a callable that
    turns corrupt after the fit, at predict."""
    def run(_):
        import marginkit as mk
        from marginkit.plugins import Kernel

        broken = [where != "predict"]

        def kernel(A, B):
            A, B = (M.toarray() if sp.issparse(M) else np.asarray(M) for M in (A, B))
            M = sp.csr_matrix(A @ B.T)
            return _csr_defect(kind, M, 1, in_place=True) if broken[0] else M

        X, y = _data()
        if where == "plugin":
            class CorruptBlocks(Kernel):
                param_table = {}

                def __call__(self, A, B=None):
                    return kernel(A, A if B is None else B)

            return mk.solve(X, y, solver="snkp", kernel=CorruptBlocks(), max_iter=20).status
        if where == "SVMClassifier":
            from marginkit.sklearn import SVMClassifier

            return SVMClassifier(kernel=kernel, max_iter=20).fit(X, y).result_.status
        if where == "predict":
            res = mk.solve(X, y, solver="snkp", kernel=kernel, max_iter=200)
            broken[0] = True
            return res.predict(X).shape
        return mk.solve(X, y, solver=where, kernel=kernel, max_iter=20).status
    return run


def _plot_boundary(kind):
    """``plot.decision_boundary`` on a two-column CSR X with the defect ``kind`` (scipy's
    toarray read it before any check: a segfault; found by review)."""
    def run(_):
        import matplotlib

        matplotlib.use("Agg")
        import marginkit as mk
        from marginkit.plot import decision_boundary

        rng = np.random.default_rng(0)
        X = rng.standard_normal((40, 2))
        res = mk.solve(X, np.where(X[:, 0] > 0, 1, -1), solver="snkp")
        M = _csr_defect(kind, sp.csr_matrix(X), 1)
        return type(decision_boundary(res, M, np.where(X[:, 0] > 0, 1, -1))).__name__
    return run


def _registered(kind):
    import marginkit as mk

    return mk.list_plugins()[kind]


def _structure_cases():
    """Every CSR defect against every entry point; other formats against a few."""
    from marginkit._dask import SUPPORTED_SOLVERS

    solvers = _registered("solver")
    kernels = [k for k in _registered("kernel") if k not in ("precomputed", "callable")]
    entries = {f"solve:{s}": _solve(s) for s in solvers}
    entries["solve:snkp:rbf"] = _solve("snkp", "rbf")
    for k in kernels:
        for side in ("A", "B", "diag"):
            entries[f"kernel:{k}:{side}"] = _kernel_call(k, side)
    entries["predict:linear"] = _predict("linear")
    entries["predict:rbf"] = _predict("rbf")
    entries["verify"] = _verify
    for name in ("PerceptronClassifier", "SVMClassifier", "IteratedTikhonovClassifier"):
        for method in ("fit", "predict"):
            entries[f"estimator:{name}:{method}"] = _estimator(name, method)
    dask_solvers = sorted(s for s in SUPPORTED_SOLVERS if s in solvers)
    cases = []
    for kind, (exc, pattern) in CSR_DEFECTS.items():
        for entry, fn in entries.items():
            cases.append(Case(f"csr:{kind}:{entry}", lambda k, fn=fn: _untouched(fn)(k),
                              exc, pattern))
        for s in dask_solvers:
            if kind in FROM_ARRAY_PASSES:
                cases.append(Case(f"csr:{kind}:dask_from_array:{s}", _dask_from_array(kind, s),
                                  exc, "the sparse matrix behind the dask array X " + pattern))
            # the chunk's rows are named by their row in X
            cases.append(Case(f"csr:{kind}:dask_chunk:{s}", _dask_chunk(kind, s), exc,
                              "X chunk 1 " + pattern))
    for kind, (exc, pattern) in OTHER_DEFECTS.items():
        for entry in ("solve:snkp", "solve:fista", "kernel:rbf:A", "predict:linear",
                      "estimator:SVMClassifier:fit"):
            cases.append(Case(f"{kind.split('_')[0]}:{kind}:{entry}",
                              lambda k, fn=entries[entry]: _untouched(fn)(k), exc, pattern))
    for s in solvers:
        cases.append(Case(f"plugin:feature_map_corrupt:{s}", _corrupt_feature_map(s), "ValueError",
                          r"feature_map\(X\) \(CSR\): column index 1000000 of row "
                          rf"{ROW} is out of range \[0, {D}\)"))
    block_defects = {"col_too_large": r"\(CSR\): column index 1000000 of row 1 is out of range",
                     "indptr_decreasing": r"\(CSR\): indptr decreases at row 1 "}
    for kind, pattern in block_defects.items():
        for where in ("snkp", "fista", "dcd", "iterated_tikhonov", "plugin", "SVMClassifier",
                      "predict"):
            cases.append(Case(f"kernel_block:{kind}:{where}", _corrupt_kernel_block(kind, where),
                              "ValueError", "returned " + pattern))
        cases.append(Case(f"plot:{kind}:decision_boundary", _plot_boundary(kind), "ValueError",
                          "^X " + pattern))
    for s in dask_solvers:
        cases.append(Case(f"dask:chunk_shape:{s}", _dask_wrong_shape(s), "ValueError",
                          rf"X chunk 0 has shape \({N // 2}, {D + 2}\) but the dask array "
                          rf"declares \({N // 2}, {D}\)"))
    return cases


# ------------------------------------------------------------------ accepted layouts
def _same_answers(M, ref):
    """Every kernel, a solve and a prediction agree on M and on the reference matrix."""
    import marginkit as mk

    X, y = _data()
    for name in ("linear", "rbf", "laplacian"):
        k = mk.get_plugin("kernel", name)()
        np.testing.assert_allclose(k(M, X), k(ref, X), rtol=1e-12, err_msg=name)
        np.testing.assert_allclose(k(M), k(ref), rtol=1e-12, err_msg=name)
    a = mk.solve(M, y, solver="snkp", max_iter=200)
    b = mk.solve(ref, y, solver="snkp", max_iter=200)
    assert a.status == b.status
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-12)
    np.testing.assert_array_equal(a.predict(M), b.predict(ref))
    return "same"


def _trailing_entries(_):
    """indptr[-1] < len(indices): the entries past it (garbage indices) are not part of
    the matrix, as in scipy's prune."""
    X, _y = _data()
    ref = sp.csr_matrix(X)
    M = ref.copy()
    M.indices = np.r_[M.indices, [10**6, -5]].astype(M.indices.dtype)
    M.data = np.r_[M.data, [np.nan, 7.0]]
    return _same_answers(M, ref)


def _stale_canonical_flag(_):
    """A matrix scipy once found canonical, then given duplicate and unsorted indices:
    the flag is not trusted."""
    X, _y = _data()
    M = sp.csr_matrix(X)
    assert M.has_canonical_format  # cached True from here on
    a, b = int(M.indptr[ROW]), int(M.indptr[ROW + 1])
    M.indices[a:b] = M.indices[a:b][::-1].copy()  # unsorted row
    c = int(M.indptr[3])
    M.indices[c + 1] = M.indices[c]  # a duplicate in row 3
    ref = sp.csr_matrix((M.data.copy(), M.indices.copy(), M.indptr.copy()), shape=M.shape)
    ref.sum_duplicates()
    return _same_answers(M, ref)


def _odd_index_dtypes(_):
    X, _y = _data()
    ref = sp.csr_matrix(X)
    M = ref.copy()
    M.indices = M.indices.astype(np.uint16)
    M.indptr = M.indptr.astype(np.int16)
    return _same_answers(M, ref)


def _strided_arrays(_):
    """data/indices views with a stride (not contiguous): copied, not rejected."""
    X, _y = _data()
    ref = sp.csr_matrix(X)
    M = ref.copy()
    M.data = np.repeat(M.data, 2)[::2]
    M.indices = np.repeat(M.indices, 2)[::2]
    return _same_answers(M, ref)


def _dense_layout(kind):
    """Dense layouts other than C/F order (views with odd strides, unaligned data): the
    same answers as a contiguous copy, from every kernel and a solve."""
    def run(_):
        X, _y = _data()
        if kind == "negative_strides":
            A = X[::-1, ::-1].copy()[::-1, ::-1]
        elif kind == "strided_columns":
            A = np.asfortranarray(np.c_[X, X])[:, ::2]
            A[...] = np.c_[X, X][:, ::2]
            A = A[:, :D]
        elif kind == "unaligned":
            raw = np.zeros(X.size * 8 + 1, dtype=np.uint8)
            A = np.frombuffer(raw.data, dtype=np.float64, count=X.size, offset=1).reshape(X.shape)
            A[...] = X
        elif kind == "read_only_broadcast":
            A = np.broadcast_to(X[:, :1], (N, D))
            X = np.ascontiguousarray(A)
        return _same_answers(A, np.ascontiguousarray(A)) if kind != "read_only_broadcast" \
            else _kernels_agree(A, X)
    return run


def _kernels_agree(A, ref):
    import marginkit as mk

    for name in ("linear", "rbf", "laplacian", "poly"):
        k = mk.get_plugin("kernel", name)()
        np.testing.assert_allclose(k(A, ref), k(ref, ref), rtol=1e-12, err_msg=name)
    return "same"


# ------------------------------------------------------------------ small items
def _xarray_numpy(_):
    try:
        import xarray as xr
    except ImportError:
        return "skip: xarray not installed"
    import marginkit as mk

    X, y = _data()
    res = mk.solve(xr.DataArray(X, dims=("s", "f")), xr.DataArray(y, dims=("s",)),
                   solver="snkp", max_iter=200)
    ref = mk.solve(X, y, solver="snkp", max_iter=200)
    assert res.status == ref.status == "separable"
    np.testing.assert_array_equal(res.coef_, ref.coef_)
    return "same"


def _huge_int(param, solver):
    def run(_):
        import marginkit as mk

        X, y = _data()
        return mk.solve(X, y, solver=solver, **{param: 10**400}).status
    return run


def _nan_object_labels(_):
    import marginkit as mk

    X, _y = _data()
    y = np.array([1.0 if i % 2 else np.nan for i in range(N)], dtype=object)
    return mk.solve(X, y, solver="snkp").status


def _small_cases():
    return [
        Case("small:csr_trailing_entries", _trailing_entries, None),
        Case("small:csr_stale_canonical_flag", _stale_canonical_flag, None),
        Case("small:csr_uint16_int16_indices", _odd_index_dtypes, None),
        Case("small:csr_strided_arrays", _strided_arrays, None),
        Case("small:dense_negative_strides", _dense_layout("negative_strides"), None),
        Case("small:dense_strided_columns", _dense_layout("strided_columns"), None),
        Case("small:dense_unaligned", _dense_layout("unaligned"), None),
        Case("small:dense_zero_strides", _dense_layout("read_only_broadcast"), None),
        Case("small:xarray_on_numpy", _xarray_numpy, None),
        Case("small:C_10e400", _huge_int("C", "fista"), "ValueError",
             r"C=~1e400 \(an int\) is out of range: too large for a float64"),
        Case("small:max_iter_10e400", _huge_int("max_iter", "snkp"), "ValueError",
             r"max_iter=~1e400 \(an int\) is out of range"),
        Case("small:time_limit_10e400", _huge_int("time_limit", "snkp"), "ValueError",
             r"time_limit=~1e400 \(an int\) is out of range"),
        Case("small:object_labels_nan", _nan_object_labels, "ValueError",
             r"y contains NaN or another missing label"),
    ]


# ------------------------------------------------------------------ LIBSVM files
#: file name -> (content, compression); written by ``prepare_files`` (the test process),
#: so that the worker's memory measurements see the loading alone
FILES = {}
for _ext, _comp in (("", None), (".gz", "gzip"), (".xz", "xz")):
    FILES[f"zeros{_ext}"] = (lambda: bytes(128 << 20), _comp)  # 128 MiB (130 KB gzipped)
    FILES[f"long{_ext}"] = (lambda: b" " * (80 << 20) + b"\n1 1:1\n", _comp)
    FILES[f"index_3e9{_ext}"] = (lambda: b"1 1:1 3000000000:2\n-1 2:1\n", _comp)
    FILES[f"index_3e19{_ext}"] = (lambda: b"1 1:1 30000000000000000000:2\n-1 2:1\n", _comp)


# an IDX labels file declaring 10 labels, followed by 256 MiB of zeros (the reader stops
# where the header says the data ends)
FILES["idx_trailing.gz"] = (lambda: bytes([0, 0, 8, 1]) + (10).to_bytes(4, "big")
                            + bytes(range(10)) + bytes(256 << 20), "gzip")
FILES["idx_images.gz"] = (lambda: bytes([0, 0, 8, 3]) + b"".join(
    d.to_bytes(4, "big") for d in (10, 2, 2)) + bytes(40), "gzip")


def prepare_files(tmp, names=None):
    for name in names or FILES:
        raw_fn, compress = FILES[name]
        path = os.path.join(tmp, name)
        if os.path.exists(path):
            continue
        raw = raw_fn()
        if compress == "gzip":
            raw = gzip.compress(raw, 6)
        elif compress == "xz":
            raw = lzma.compress(raw, preset=1)
        with open(path, "wb") as fh:
            fh.write(raw)


def _libsvm(name, sklearn=True):
    def run(_):
        from marginkit.datasets import load_libsvm

        hidden = ("sklearn", "sklearn.datasets")
        saved = {m: sys.modules.get(m) for m in hidden}
        if not sklearn:  # the pure-Python reader, for this case only
            sys.modules.update(dict.fromkeys(hidden))
        try:
            X, y = load_libsvm(os.path.join(os.environ["HOSTILE_TMP"], name))
        finally:
            for m, mod in saved.items():
                if mod is None:
                    sys.modules.pop(m, None)
                else:
                    sys.modules[m] = mod
        assert X.shape[0] == y.shape[0] == 2 and X.nnz == 3, (X.shape, X.nnz)
        return f"{X.shape} {X.indices.dtype}"
    return run


def _mnist(images, labels):
    def run(_):
        from marginkit.datasets import load_mnist_idx

        tmp = os.environ["HOSTILE_TMP"]
        X, y = load_mnist_idx(os.path.join(tmp, images), os.path.join(tmp, labels))
        assert X.shape == (10, 4) and y.tolist() == list(range(10)), (X.shape, y)
        return "read"
    return run


def _cli_fit(name):
    def run(_):
        import contextlib

        from marginkit.cli import main

        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = main(["fit", os.path.join(os.environ["HOSTILE_TMP"], name), "--solver", "snkp",
                         "--max-iter", "5"])
        text = err.getvalue()
        assert "Traceback" not in text and len(text.strip().splitlines()) == 1, text
        assert code == 2, (code, text)
        raise ValueError(text.strip())  # the one line, matched against the pattern
    return run


def _libsvm_cases():
    nul = r"line 1: not a text file \(a NUL byte at offset 0\)"
    cases = []
    # measured alone (memory and time): a few combinations; the others share a worker
    # (an exhausted address space would still fail them) and run measured in the slow set
    measured = {("gz", True), ("xz", False), ("plain", False)}
    for ext in ("", ".gz", ".xz"):
        tag = ext[1:] or "plain"
        for sk in (True, False):
            reader = "sklearn" if sk else "python"
            fresh = (tag, sk) in measured
            cases.append(Case(f"libsvm:zeros_128MiB:{tag}:{reader}", _libsvm(f"zeros{ext}", sk),
                              "ValueError", nul, measured=fresh, max_rss_mib=32 if fresh else None,
                              max_seconds=2))
            cases.append(Case(f"libsvm:line_80MiB:{tag}:{reader}", _libsvm(f"long{ext}", sk),
                              "ValueError", r"line 1: longer than 64 MiB without a newline",
                              measured=fresh and tag == "gz", max_rss_mib=160 if fresh else None,
                              max_seconds=20))
            cases.append(Case(f"libsvm:index_3e9:{tag}:{reader}", _libsvm(f"index_3e9{ext}", sk),
                              None))
            cases.append(Case(f"libsvm:index_3e19:{tag}:{reader}", _libsvm(f"index_3e19{ext}", sk),
                              "ValueError", r"line 1: feature index 30000000000000000000 is too "
                                            r"large \(the largest supported index is 2\*\*63 - 1\)"))
    cases.append(Case("mnist:idx_trailing_256MiB", _mnist("idx_images.gz", "idx_trailing.gz"),
                      None, measured=True, max_rss_mib=32))
    cases += [
        Case("cli:zeros_128MiB", _cli_fit("zeros.gz"), "ValueError",
             r"^marginkit fit: error: argument TRAIN: .*" + nul),
        Case("cli:index_3e9", _cli_fit("index_3e9"), "ValueError",
             r"^marginkit fit: error: argument TRAIN: .* has 3000000000 features .* more than "
             r"the memory budget"),
        Case("cli:index_3e19", _cli_fit("index_3e19.xz"), "ValueError",
             r"^marginkit fit: error: argument TRAIN: .*feature index 30000000000000000000 is "
             "too large"),
    ]
    return cases


# ------------------------------------------------------------------ results files
def _npz(path, header, arrays=(), compress=True):
    """An archive as numpy.savez writes it, with any header (a dict, or the JSON text) and
    members."""
    text = header if isinstance(header, str) else json.dumps(header)
    members = {"__meta__": np.frombuffer(text.encode(), dtype=np.uint8)}
    members.update(arrays)
    (np.savez_compressed if compress else np.savez)(path, **members)
    return path


def _saved(tmp, kernel="linear", sparse=False):
    """A genuine saved result and its header (json) and arrays (dict)."""
    import marginkit as mk

    X, y = _data()
    res = mk.solve(sp.csr_matrix(X) if sparse else X, y, solver="snkp", kernel=kernel,
                   max_iter=500)
    path = os.path.join(tmp, f"good_{kernel}_{sparse}.npz")
    res.save(path)
    with zipfile.ZipFile(path) as zf:
        arrays = {n[:-4]: np.load(io.BytesIO(zf.read(n))) for n in zf.namelist()}
    header = json.loads(arrays.pop("__meta__").tobytes())
    return res, header, arrays


def _tampered(edit, kernel="linear", sparse=False, text=None):
    """Load a genuine file after ``edit(header, arrays)`` changed it (and ``text(json)``
    its JSON text)."""
    def run(_):
        import marginkit as mk

        tmp = os.environ["HOSTILE_TMP"]
        _res, header, arrays = _saved(tmp, kernel, sparse)
        edit(header, arrays)
        if text is not None:
            header = text(json.dumps(header))
        path = _npz(os.path.join(tmp, "tampered.npz"), header, arrays)
        back = mk.load_result(path)
        return repr(back)
    return run


def _fields(header):
    return header["fields"]


def _plugin(kind, name, **params):
    return {"__plugin__": [kind, name],
            "params": {"__dict__": {k: v for k, v in params.items()}}}


def _set(path, value):
    def edit(header, arrays):
        node = header
        keys = path.split(".")
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value
    return edit


def _deep(depth):
    node = 1.0
    for _ in range(depth):
        node = {"__seq__": [node]}
    return node


def _bomb(n_bytes, declared=True, max_bytes=None):
    """A results file with a zero member of ``n_bytes`` (deflated: ~n_bytes / 1000),
    loaded with the default limit or ``max_bytes``."""
    def run(_):
        import marginkit as mk

        tmp = os.environ["HOSTILE_TMP"]
        path = os.path.join(tmp, f"bomb_{n_bytes}_{declared}.npz")
        n = n_bytes // 8
        coef = {"__array__": "big", "dtype": "<f8", "shape": [n]} if declared else None
        header = {"__result__": 2, "fields": {"status": "max_iter", "n_iter": 1, "time_s": 0.0,
                                              "coef_": coef}}
        npy = io.BytesIO()
        np.lib.format.write_array_header_1_0(npy, {"descr": "<f8", "fortran_order": False,
                                                   "shape": (n,)})
        meta = io.BytesIO()
        np.save(meta, np.frombuffer(json.dumps(header).encode(), dtype=np.uint8))
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
            zf.writestr("__meta__.npy", meta.getvalue())
            with zf.open("big.npy", "w", force_zip64=True) as fh:
                fh.write(npy.getvalue())
                chunk = bytes(1 << 24)
                for _ in range(n_bytes // len(chunk)):
                    fh.write(chunk)
        kw = {} if max_bytes is None else {"max_bytes": max_bytes}
        return repr(mk.load_result(path, **kw))
    return run


def _load_pipe(_):
    """A named pipe nobody writes to: opening it would block forever."""
    import marginkit as mk

    path = os.path.join(os.environ["HOSTILE_TMP"], "pipe.npz")
    if not os.path.exists(path):
        os.mkfifo(path)
    return repr(mk.load_result(path))


def _result_cases():
    S = r"corrupt Result.save header: "
    c = [
        Case("result:named_pipe", _load_pipe, "ValueError",
             r"is not a file written by Result.save \(not a regular file\)"),
        Case("result:override_predict", _tampered(_set("fields.predict", _plugin("kernel", "rbf"))),
             "ValueError", S + r"r: unknown field\(s\) \['predict'\]"),
        Case("result:override_score", _tampered(_set("fields.score", "x")),
             "ValueError", S + r"r: unknown field\(s\) \['score'\]"),
        Case("result:override_decision_function",
             _tampered(_set("fields.decision_function", _plugin("kernel", "linear"))),
             "ValueError", S + r"r: unknown field\(s\) \['decision_function'\]"),
        Case("result:override_verify",
             _tampered(_set("fields.certificate.fields.verify", _plugin("kernel", "linear"))),
             "ValueError", S + r"r.certificate.fields: unknown field\(s\) \['verify'\] for "
                               r"SeparatorCertificate"),
        Case("result:override_check",
             _tampered(_set("fields.certificate.fields.check", True)),
             "ValueError", S + r"r.certificate.fields: unknown field\(s\) \['check'\]"),
        Case("result:unregistered_kernel", _tampered(_set("fields.kernel", _plugin("kernel", "evil"))),
             "ValueError", S + r"r.kernel: unknown kernel 'evil'.*import the package"),
        Case("result:kernel_bad_params",
             _tampered(_set("fields.kernel", _plugin("kernel", "rbf", gamma=-1.0))), "ValueError",
             S + r"r.kernel: kernel 'rbf' refused the parameters: .*gamma=-1.0 is out of range"),
        Case("result:kernel_unknown_param",
             _tampered(_set("fields.kernel", _plugin("kernel", "rbf", predict="x"))), "ValueError",
             S + r"r.kernel: kernel 'rbf' refused the parameters: .*unknown parameter"),
        Case("result:callable_kernel_by_name",
             _tampered(_set("fields.kernel", _plugin("kernel", "callable", function="os.system"))),
             "ValueError", S + r"r.kernel: kernel 'callable' refused the parameters"),
        Case("result:solver_plugin_as_kernel",
             _tampered(_set("fields.kernel", _plugin("solver", "snkp"))), "ValueError",
             S + r"r.kernel: expected a kernel plug-in, got a 'solver' one"),
        Case("result:unknown_certificate",
             _tampered(_set("fields.certificate.__certificate__", "Evil")), "ValueError",
             r"certificate type 'Evil' is unknown.*import"),
        Case("result:certificate_wrong_type",
             _tampered(_set("fields.certificate.fields.alpha", "all good")), "ValueError",
             S + r"r.certificate.fields.alpha: expected an array, got a str"),
        Case("result:certificate_missing_field",
             _tampered(lambda h, a: h["fields"]["certificate"]["fields"].pop("alpha")),
             "ValueError", S + r"r.certificate.fields: SeparatorCertificate needs the "
                               r"field\(s\) \['alpha'\]"),
        Case("result:status_not_a_string", _tampered(_set("fields.status", {"__dict__": {}})),
             "ValueError", S + r"r.status: expected a string, got a dict node"),
        Case("result:unknown_node_kind", _tampered(_set("fields.extra", {"__pickle__": "x"})),
             "ValueError", S + r"r.extra: expected a dict, got a pickle node"),
        Case("result:json_list", _tampered(_set("fields.history", [1, 2])),
             "ValueError", S + r"r.history: expected a dict, got a JSON list"),
        Case("result:deep_nesting", _tampered(_set("fields.extra", {"__dict__": {"a": _deep(200)}})),
             "ValueError", S + r"the header: nests containers deeper than 64 levels"),
        Case("result:very_deep_nesting",  # deeper than json's own recursion limit
             _tampered(_set("fields.extra", {"__dict__": {"a": "DEEP"}}),
                       text=lambda t: t.replace('"DEEP"', '{"__seq__": [' * 100_000 + "1"
                                                + "]}" * 100_000)),
             "ValueError", S + r"the header: nests containers deeper than 64 levels"),
        Case("result:config_unknown_field", _tampered(_set("fields.config.__config__.evil", 1)),
             "ValueError", S + r"r.config: unknown Config field\(s\) \['evil'\]"),
        Case("result:config_unregistered_solver",
             _tampered(_set("fields.config.__config__.solver", "evil")), "ValueError",
             S + r"r.config.solver: unknown solver 'evil'"),
        Case("result:config_bad_solver_param",
             _tampered(_set("fields.config.__config__.solver_params", {"__dict__": {"bogus": 1}})),
             "ValueError", S + r"r.config: not a valid Config .*unknown parameter\(s\) \['bogus'\]"),
        Case("result:config_bad_stop",
             _tampered(_set("fields.config.__config__.stop",
                            {"__seq__": [{"__seq__": ["max_iter", {"__dict__": {"n": -3}}],
                                          "tuple": True}]})),
             "ValueError", S + r"r.config.stop\[0\]: .*n=-3 is out of range"),
        Case("result:array_member_missing", _tampered(_set("fields.coef_.__array__", "nope")),
             "ValueError", S + r"r.coef_: names the array member 'nope.npy', which the file lacks"),
        Case("result:array_dtype_mismatch", _tampered(_set("fields.coef_.dtype", "<f4")),
             "ValueError", S + r"r.coef_: the member '\w+.npy' holds <f8 \(\d+,\) but the header "
                               r"declares <f4"),
        Case("result:array_object_dtype", _tampered(_set("fields.coef_.dtype", "|O")),
             "ValueError", S + r"r.coef_: arrays of dtype object are not accepted"),
        Case("result:array_referenced_twice",
             _tampered(lambda h, a: h["fields"].__setitem__("dual_vector", h["fields"]["coef_"])),
             "ValueError", S + r"r.dual_vector: refers to the array member '\w+.npy' a second "
                               "time"),
        Case("result:undeclared_member", _tampered(lambda h, a: a.__setitem__("extra", np.zeros(3))),
             "ValueError", r"is not a file written by Result.save \(member 'extra.npy' is not an "
                           "array the header declares\\)"),
        Case("result:sparse_support_bad_index", _tampered(_corrupt_support, kernel="rbf", sparse=True),
             "ValueError", S + r"r.support_: is not a valid CSR matrix \(r.support_ \(CSR\): "
                               r"column index 99 of row 3 is out of range"),
        Case("result:sparse_support_bad_indptr",
             _tampered(_corrupt_support_indptr, kernel="rbf", sparse=True), "ValueError",
             S + r"r.support_: is not a valid CSR matrix .*indptr decreases"),
        Case("result:support_rows_disagree", _tampered(_drop_support_coef, kernel="rbf"),
             "ValueError", S + r"r.support_: has \d+ rows but support_coef_ has \d+ entries"),
        Case("result:bomb_128MiB_declared", _bomb(128 << 20, max_bytes=32 << 20), "ValueError",
             S + r"r.coef_: an array of 134217728 bytes exceeds the limit \(33554432 bytes of "
                 r"max_bytes=33554432 left\)", measured=True, max_rss_mib=48),
        Case("result:bomb_128MiB_undeclared", _bomb(128 << 20, declared=False), "ValueError",
             r"not a file written by Result.save \(member 'big.npy' is not an array the header "
             r"declares\)", measured=True, max_rss_mib=48),
        Case("result:bomb_64MiB_loads_within_limit", _bomb(64 << 20), None, measured=True,
             max_rss_mib=64 + 48),
    ]
    return c


def _member_key(node):
    return node["__array__"]


def _corrupt_support(header, arrays):
    key = _member_key(header["fields"]["support_"]["__csr__"]["indices"])
    ind = arrays[key].copy()
    ptr = arrays[_member_key(header["fields"]["support_"]["__csr__"]["indptr"])]
    ind[int(ptr[3])] = 99
    arrays[key] = ind


def _corrupt_support_indptr(header, arrays):
    key = _member_key(header["fields"]["support_"]["__csr__"]["indptr"])
    ptr = arrays[key].copy()
    ptr[3] = 10**6
    arrays[key] = ptr


def _drop_support_coef(header, arrays):
    key = _member_key(header["fields"]["support_coef_"])
    arrays[key] = arrays[key][:-1].copy()
    header["fields"]["support_coef_"]["shape"] = [arrays[key].shape[0]]


# ------------------------------------------------------------------ the documented rows
def _table_run(row, solver):
    def run(_):
        tmp = os.path.join(os.environ["HOSTILE_TMP"], f"table_{row.id}")
        os.makedirs(tmp, exist_ok=True)
        args = row.build(tmp)
        if row.entry == "load_libsvm":
            from marginkit.datasets import load_libsvm

            return load_libsvm(args["path"]).__class__.__name__
        import marginkit as mk

        X, y = args.pop("X"), args.pop("y")
        before = _snapshot(X)
        try:
            return mk.solve(X, y, solver=solver, max_iter=20, **args).status
        finally:
            assert _snapshot(X) == before, "the caller's matrix was modified"
    return run


def _table_cases():
    """The rows of docs/reliability.md marked to run in a worker process, against every
    registered solver (``solve`` rows) or once."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import reliability_table as RT

    out = []
    for row in RT.CASES:
        if not row.isolated:
            continue
        assert row.solvers == "all" and row.entry in ("solve", "load_libsvm"), row.id
        targets = _registered("solver") if row.entry == "solve" else [None]
        for solver in targets:
            out.append(Case(f"table:{row.id}:{solver or row.entry}", _table_run(row, solver),
                            row.expect, row.match))
    return out


def cases():
    return (_structure_cases() + _small_cases() + _libsvm_cases() + _result_cases()
            + _table_cases())


def _slow_cases():
    out = [Case("result:bomb_2GiB_declared", _bomb(2 << 30), "ValueError",
                r"r.coef_: an array of 2147483648 bytes exceeds the limit \(1073741824 bytes "
                r"of max_bytes=1073741824 left\)", measured=True, max_rss_mib=48)]
    for c in _libsvm_cases():  # every reader and compression, measured alone
        if c.id.startswith("libsvm:zeros") or c.id.startswith("libsvm:line"):
            out.append(dataclasses.replace(c, id=c.id + ":measured", measured=True,
                                           max_rss_mib=32 if "zeros" in c.id else 160))
    return out


SLOW_CASES = _slow_cases()


# ------------------------------------------------------------------------------ worker
def _status_kib(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


def _memory_mark():
    """Resident memory now (KiB), after resetting the peak (Linux's clear_refs), so that
    the peak read after a case is that case's alone."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return _status_kib("VmRSS"), "VmHWM"
    except OSError:  # not Linux: the process-wide peak (a case below it reads as 0)
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, None


def _peak_kib(field):
    if field is None:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return _status_kib(field)


def _outcome(case):
    rss0, field = _memory_mark()
    t0 = time.perf_counter()
    out = {}
    signal.alarm(ALARM_S)
    try:
        out["value"] = repr(case.run(case.id.split(":")[1]))[:200]
        out["exc"] = None
    except Exception as exc:  # noqa: BLE001 - reported to the test
        out["exc"] = type(exc).__name__
        out["msg"] = str(exc)[:2000]
    finally:
        signal.alarm(0)
    out["seconds"] = time.perf_counter() - t0
    out["rss_growth_mib"] = max(0, _peak_kib(field) - rss0) / 1024
    return out


def _address_space():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) << 10
    return 0


def main(argv):
    tmp, mem_mib, ids = argv[0], int(argv[1]), argv[2:]
    os.environ["HOSTILE_TMP"] = tmp
    import marginkit  # noqa: F401 - imported before the limit and the measurements
    import marginkit.sklearn  # noqa: F401
    import sklearn.datasets  # noqa: F401
    if mem_mib:  # headroom over what the imports reserved
        limit = _address_space() + (mem_mib << 20)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    by_id = {c.id: c for c in cases() + SLOW_CASES}
    for cid in ids:
        print(f"begin {cid}", flush=True)
        print(f"end {cid} {json.dumps(_outcome(by_id[cid]))}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
