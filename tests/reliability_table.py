"""The reliability cases of issue 8, and the generator of ``docs/reliability.md``.

Each ``Case`` is one input tried against marginkit: how to build it, which entry point
receives it, and what marginkit must do (raise a given exception whose message matches
a pattern, accept it, or give an honest answer). ``tests/test_reliability.py`` runs
every case (against every registered solver where that makes sense), and checks that
``docs/reliability.md`` is the table generated here from the same cases.

Regenerate the document after changing the cases::

    python tests/reliability_table.py
"""
import dataclasses
import gzip
import lzma
import os
import sys
from typing import Callable, Optional

import numpy as np
import scipy.sparse as sp

DOC_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "docs",
                        "reliability.md")
REGENERATE = "python tests/reliability_table.py"


@dataclasses.dataclass(frozen=True)
class Case:
    """One input and what marginkit must do with it.

    ``build(tmp_path)`` returns the call's arguments: for ``solve`` a dict with ``X``,
    ``y`` and keywords; for ``load_libsvm`` a dict with ``path``; for ``estimator`` a
    dict with ``X``, ``y`` and estimator keywords.
    ``isolated`` cases run in a worker process (``tests/test_inputs_hostile.py``).
    ``expect`` is ``"ValueError"``/``"TypeError"`` (with ``match``, a regex the message
    must contain), ``"accepted"`` (same answer as the plain float64 input, input
    untouched) or ``"honest"`` (a correct answer or an honest status; ``truth`` tells
    whether the data is ``"separable"`` or ``"infeasible"`` through the origin).
    """

    id: str
    section: str
    entry: str
    what: str
    build: Callable
    expect: str
    does: str
    match: str = ""
    truth: Optional[str] = None
    solvers: str = "all"  # "all", "classifiers", "precomputed", "callable", "normalizing", "param:<name>"
    allow_error: bool = False  # "honest" cases: a ValueError is an acceptable refusal
    kwargs: dict = dataclasses.field(default_factory=dict)
    #: run in a worker process by tests/test_inputs_hostile.py (an input that crashed or
    #: exhausted the process before its check existed), not in the test process
    isolated: bool = False


# ------------------------------------------------------------------------- data sets
def separable():
    """Six points separable through the origin (labels 0/1)."""
    X = np.array([[2.0, 1.0], [1.5, 2.0], [2.5, 0.5], [-2.0, -1.0], [-1.0, -2.5], [-1.5, -0.5]])
    return X, np.array([1, 1, 1, 0, 0, 0])


def xor():
    X = np.array([[1.0, 1.0], [-1.0, -1.0], [1.0, -1.0], [-1.0, 1.0]])
    return X, np.array([1, 1, 0, 0])


def _with(X, y=None, **kw):
    if y is None:
        y = separable()[1]
    return dict(X=X, y=y, **kw)


def _nan_dense(_):
    X, y = separable()
    X[2, 1] = np.nan
    return _with(X, y)


def _inf_dense(_):
    X, y = separable()
    X[4, 0] = -np.inf
    return _with(X, y)


def _nan_csr(_):
    X, y = separable()
    X = sp.csr_matrix(X)
    X.data[3] = np.nan
    return _with(X, y)


def _inf_csc(_):
    X, y = separable()
    X = sp.csc_matrix(X)
    X.data[0] = np.inf
    return _with(X, y)


def _gram(X):
    return X @ X.T


def _nan_gram(_):
    X, y = separable()
    K = _gram(X)
    K[1, 1] = np.nan
    return _with(K, y, kernel="precomputed")


def _gram_not_square(_):
    X, y = separable()
    return _with(_gram(X)[:, :5], y, kernel="precomputed")


def _gram_asym(_):
    X, y = separable()
    K = _gram(X)
    K[0, 3] += 1.0
    return _with(K, y, kernel="precomputed")


def _gram_asym_sparse(_):
    X, y = separable()
    K = _gram(X)
    K[0, 3] += 1.0
    return _with(sp.csr_matrix(K), y, kernel="precomputed")


def _gram_neg_diag(_):
    X, y = separable()
    K = _gram(X)
    K[2, 2] = -1.0
    return _with(K, y, kernel="precomputed")


def _const(value):
    def build(_):
        return dict(value)
    return build


def _sep(**kw):
    def build(_):
        X, y = separable()
        return _with(X, y, **kw)
    return build


def _Xy(fX, fy=None, **kw):
    def build(_):
        X, y = separable()
        return dict(X=fX(X), y=y if fy is None else fy(y), **kw)
    return build


def _wrong_shape_kernel(A, B):
    return np.ones((A.shape[0], B.shape[0] + 1))


def _nan_kernel(A, B):
    K = np.asarray(A @ B.T, dtype=np.float64)
    K[0, 0] = np.nan
    return K


def _zero_row(_):
    X, y = separable()
    X[4] = 0.0
    return _with(X, y)


# hostile but valid data --------------------------------------------------------------
def _scaled(s, dtype=np.float64):
    def build(_):
        X, y = separable()
        return _with((X * s).astype(dtype), y)
    return build


def _mixed_norms(_):
    X, y = separable()
    X = X * np.array([1e150, 1e-150, 1.0, 1e100, 1e-100, 1.0])[:, None]
    return _with(X, y)


def _near_duplicates_f32(_):
    """Points 4e-6 apart with opposite labels: the float32 rbf Gram rounds them together, but
    distinct points are always separable by rbf (its Gram is positive definite)."""
    X = np.full((4, 5), 4e-6, dtype=np.float32)
    X[3, 1] = 0.0
    return dict(X=X, y=np.array(["a", "a", "a", "b"]), kernel="rbf")


def _constant_feature(_):
    X, y = separable()
    return _with(np.hstack([X, np.full((6, 1), 5.0)]), y)


def _dup_same(_):
    X, y = separable()
    return _with(np.vstack([X, X, X[:2]]), np.concatenate([y, y, y[:2]]))


def _dup_opposite(_):
    X, y = separable()
    X = np.vstack([X, X[:1]])
    return _with(X, np.concatenate([y, [0]]))


def _n1(_):
    return dict(X=np.array([[1.0, 2.0]]), y=np.array([1]))


def _n2(_):
    return dict(X=np.array([[1.0, 0.5], [-1.0, 0.25]]), y=np.array([1, 0]))


def _d1(_):
    return dict(X=np.array([[1.0], [2.0], [0.5], [-1.0], [-3.0]]), y=np.array([1, 1, 1, 0, 0]))


def _unbalanced(_):
    rng = np.random.default_rng(0)
    neg = np.column_stack([rng.uniform(0.5, 2.0, 20), rng.uniform(-1.0, 1.0, 20)])
    X = np.vstack([neg, [[-1.0, 0.1]]])
    return dict(X=X, y=np.array([0] * 20 + [1]))


def _xor(_):
    X, y = xor()
    return _with(X, y)


# accepted inputs ----------------------------------------------------------------------
def _readonly(_):
    X, y = separable()
    X.flags.writeable = False
    return _with(X, y)


def _noncanonical_csr(_):
    X, y = separable()
    # every entry split in two duplicates, indices of each row reversed
    rows, cols = np.nonzero(X)
    vals = X[rows, cols]
    data, indices, indptr = [], [], [0]
    for i in range(X.shape[0]):
        m = rows == i
        for c, v in zip(cols[m][::-1], vals[m][::-1]):
            data += [v / 2, v / 2]
            indices += [c, c]
        indptr.append(len(data))
    M = sp.csr_matrix((np.array(data), np.array(indices, dtype=np.int32),
                       np.array(indptr, dtype=np.int32)), shape=X.shape)
    return _with(M, y)


def _csr_idx(dtype):
    def build(_):
        X, y = separable()
        M = sp.csr_matrix(X)
        M.indices = M.indices.astype(dtype)
        M.indptr = M.indptr.astype(dtype)
        return _with(M, y)
    return build


# corrupt sparse structure (scipy's constructor checks lengths only; attributes can be
# replaced after construction) --------------------------------------------------------
def _corrupt_csr(kind):
    def build(_):
        X, y = separable()
        M = sp.csr_matrix(X)
        indices, indptr, data = M.indices.copy(), M.indptr.copy(), M.data
        if kind == "col":
            indices[int(indptr[3])] = 1_000_000
            return _with(sp.csr_matrix((data, indices, indptr), shape=M.shape), y)
        if kind == "negative":
            indices[int(indptr[3])] = -7
        elif kind == "indptr_down":
            indptr[3] = 10**6
        elif kind == "indptr_end":
            indptr[4:] += 10**6
        elif kind == "lengths":
            data = data[:-3]
        elif kind == "indptr_len":
            indptr = indptr[:-2]
        elif kind == "float_idx":
            indices = indices.astype(np.float64)
        M.indices, M.indptr, M.data = indices, indptr, data
        return _with(M, y)
    return build


def _corrupt_other(fmt):
    def build(_):
        X, y = separable()
        if fmt == "csc":
            M = sp.csc_matrix(X)
            M.indices = M.indices.copy()
            M.indices[1] = 1_000_000
        else:
            M = sp.coo_matrix(X)
            M.row[5] = 1_000_000
        return _with(M, y)
    return build


def _trailing_entries(_):
    """Entries past indptr[-1] (with garbage indices): not part of the matrix."""
    X, y = separable()
    M = sp.csr_matrix(X)
    M.indices = np.r_[M.indices, [10**6, -5]].astype(M.indices.dtype)
    M.data = np.r_[M.data, [np.nan, 7.0]]
    return _with(M, y)


def _stale_flag(_):
    """scipy found M canonical once (the flag is cached), then its indices changed."""
    X, y = separable()
    M = sp.csr_matrix(X)
    assert M.has_canonical_format
    M.indices[[0, 1]] = M.indices[[1, 0]]  # row 0 unsorted
    return _with(M, y)


def _narrow_indices(_):
    X, y = separable()
    M = sp.csr_matrix(X)
    M.indices, M.indptr = M.indices.astype(np.uint16), M.indptr.astype(np.int16)
    return _with(M, y)


# LIBSVM files ---------------------------------------------------------------------------
def _libsvm(text, name="data.txt", compress=None):
    def build(tmp_path):
        path = os.path.join(str(tmp_path), name)
        raw = text.encode()
        if compress == "gzip":
            raw = gzip.compress(raw)
        elif compress == "xz":
            raw = lzma.compress(raw)
        elif compress == "truncated-xz":
            raw = lzma.compress(raw)[:-12]
        with open(path, "wb") as fh:
            fh.write(raw)
        return dict(path=path)
    return build


GOOD = "1 1:0.5 3:1.0\n-1 2:0.25\n"


def _libsvm_bytes(raw_fn, name, compress=None):
    def build(tmp_path):
        path = os.path.join(str(tmp_path), name)
        raw = raw_fn()
        if compress == "gzip":
            raw = gzip.compress(raw, 6)
        with open(path, "wb") as fh:
            fh.write(raw)
        return dict(path=path)
    return build


def _cli(*argv, text=GOOD, raw=None):
    """``marginkit fit`` on a file holding ``text`` (or the bytes ``raw``; {file} in argv
    is its path)."""
    def build(tmp_path):
        if raw is None:
            path = _libsvm(text, "train.txt")(tmp_path)["path"]
        else:
            path = _libsvm_bytes(lambda: raw, "train.gz", "gzip")(tmp_path)["path"]
        return dict(argv=[a.format(file=path) for a in argv])
    return build

def _stored(kind):
    """A file that ``mk.load_result`` must refuse."""
    def build(tmp_path):
        path = os.path.join(str(tmp_path), "result.npz")
        meta = {"json": b"{not json",
                "array": b'{"__dict__": {"coef_": {"__array__": "r.coef_"}}}',
                "cert": b'{"__dict__": {"certificate": {"__certificate__": "ThirdPartyCert", '
                        b'"state": {}}}}',
                "pickle": b'{"__dict__": {}}'}.get(kind)
        if kind == "missing":
            return dict(path=path)
        if kind == "npy":
            path = path[:-1] + "y"
            np.save(path, np.zeros(3))
            return dict(path=path)
        arrays = {"__meta__": np.frombuffer(meta, dtype=np.uint8)}
        if kind == "pickle":
            arrays["payload"] = np.array([object()], dtype=object)
        np.savez(path, **arrays)
        return dict(path=path)
    return build


def _tampered(edit):
    """A result saved by ``Result.save``, then ``edit(header, arrays)``-ed."""
    def build(tmp_path):
        import io
        import json
        import zipfile

        import marginkit as mk

        X, y = separable()
        sparse = edit.__name__ == "_bad_support"
        res = mk.solve(sp.csr_matrix(X) if sparse else X, y, solver="snkp",
                       kernel="rbf" if sparse else "linear", max_iter=500)
        path = os.path.join(str(tmp_path), "result.npz")
        res.save(path)
        with zipfile.ZipFile(path) as zf:
            arrays = {n[:-4]: np.load(io.BytesIO(zf.read(n))) for n in zf.namelist()}
        header = json.loads(arrays.pop("__meta__").tobytes())
        text = edit(header, arrays)
        meta = text if isinstance(text, str) else json.dumps(header)
        np.savez(path, __meta__=np.frombuffer(meta.encode(), dtype=np.uint8), **arrays)
        return dict(path=path)
    return build


def _override_predict(header, arrays):
    header["fields"]["predict"] = {"__plugin__": ["kernel", "rbf"], "params": {"__dict__": {}}}


def _override_verify(header, arrays):
    header["fields"]["certificate"]["fields"]["verify"] = True


def _unregistered_plugin(header, arrays):
    header["fields"]["kernel"] = {"__plugin__": ["kernel", "evil"], "params": {"__dict__": {}}}


def _deep_header(header, arrays):
    import json

    header["fields"]["extra"] = {"__dict__": {"a": "DEEP"}}
    return json.dumps(header).replace('"DEEP"', '{"__seq__": [' * 5000 + "1" + "]}" * 5000)


def _undeclared_member(header, arrays):
    arrays["payload"] = np.zeros(1000)


def _bad_support(header, arrays):
    node = header["fields"]["support_"]["__csr__"]
    ind = arrays[node["indices"]["__array__"]].copy()
    ind[int(arrays[node["indptr"]["__array__"]][3])] = 99
    arrays[node["indices"]["__array__"]] = ind


# ------------------------------------------------------------------------------- cases
R, A, H, L, E, C, S = ("Rejected inputs", "Accepted inputs", "Numerically hostile but valid data",
                       "Malformed LIBSVM files", "Estimators", "Command line", "Stored results")
T = "Corrupt sparse matrices"

CASES = [
    # --- rejected: data
    Case("nan_dense", R, "solve", "NaN in dense X", _nan_dense, "ValueError",
         "names the row(s) holding NaN/inf", r"X contains NaN or infinity in row\(s\) \[2\]"),
    Case("inf_dense", R, "solve", "-inf in dense X", _inf_dense, "ValueError",
         "names the row(s) holding NaN/inf", r"X contains NaN or infinity in row\(s\) \[4\]"),
    Case("nan_csr", R, "solve", "NaN stored in CSR data", _nan_csr, "ValueError",
         "names the row(s), without densifying", r"X contains NaN or infinity in row\(s\) \[\d\]"),
    Case("inf_csc", R, "solve", "inf stored in CSC data", _inf_csc, "ValueError",
         "names the row(s), without densifying", r"X contains NaN or infinity in row\(s\)"),
    Case("nan_gram", R, "solve", "NaN in a precomputed Gram matrix", _nan_gram, "ValueError",
         "names the row(s) holding NaN/inf", r"NaN or infinity in row\(s\) \[1\]",
         solvers="precomputed"),
    Case("x_1d", R, "solve", "1-D X", _Xy(lambda X: X[:, 0]), "ValueError",
         "asks for 2-D input and suggests reshape(-1, 1)", r"X must be 2-D.*reshape\(-1, 1\)"),
    Case("x_3d", R, "solve", "3-D X", _Xy(lambda X: X[:, :, None]), "ValueError",
         "asks for 2-D input", r"X must be 2-D"),
    Case("xy_mismatch", R, "solve", "len(y) != n_samples", _Xy(lambda X: X, lambda y: y[:5]),
         "ValueError", "gives both lengths", r"y has 5 entries but X has 6 rows"),
    Case("empty_rows", R, "solve", "X with 0 rows", _const(dict(X=np.zeros((0, 2)), y=[])),
         "ValueError", "reports the empty shape", r"X is empty \(shape \(0, 2\)\)"),
    Case("empty_cols", R, "solve", "X with 0 features", _Xy(lambda X: X[:, :0]), "ValueError",
         "reports the empty shape", r"X is empty \(shape \(6, 0\)\)"),
    Case("ragged", R, "solve", "ragged list of rows", _const(dict(X=[[1.0, 2.0], [3.0]], y=[0, 1])),
         "ValueError", "asks for rows of equal length", r"X could not be converted to an array"),
    Case("complex", R, "solve", "complex X", _Xy(lambda X: X.astype(complex)), "TypeError",
         "asks for real values", r"X is complex"),
    Case("object", R, "solve", "object-dtype X", _Xy(lambda X: X.astype(object)), "TypeError",
         "asks for a numeric array", r"X has dtype object"),
    Case("strings", R, "solve", "string X", _Xy(lambda X: X.astype(str)), "TypeError",
         "asks for numbers", r"X has non-numeric dtype"),
    Case("x_none", R, "solve", "X=None", _const(dict(X=None, y=[0, 1])), "TypeError",
         "asks for an array", r"X is None"),
    Case("one_class", R, "solve", "a single class in y", _Xy(lambda X: X, lambda y: np.ones_like(y)),
         "ValueError", "a classifier needs two labels", r"y has a single class \[1\]",
         solvers="classifiers"),
    Case("n1", R, "solve", "$n = 1$ (one sample is one class)", _n1, "ValueError",
         "single-class error: one sample cannot define two classes", r"y has a single class",
         solvers="classifiers"),
    Case("three_classes", R, "solve", "three classes in y",
         _Xy(lambda X: X, lambda y: np.array([0, 1, 2, 0, 1, 2])), "ValueError",
         "points to the one-vs-rest estimators", r"3 classes.*one-vs-rest", solvers="classifiers"),
    Case("y_nan", R, "solve", "NaN label", _Xy(lambda X: X, lambda y: np.r_[np.nan, y[1:]]),
         "ValueError", "every sample needs a label", r"y contains NaN", solvers="classifiers"),
    Case("y_2d", R, "solve", "y of shape (n, 2)", _Xy(lambda X: X, lambda y: np.c_[y, y]),
         "ValueError", "asks for 1-D labels", r"y must be 1-D"),
    Case("gram_not_square", R, "solve", "precomputed Gram of shape (6, 5)", _gram_not_square,
         "ValueError", "asks for the square K(X, X)", r"square \(n, n\) Gram matrix.*\(6, 5\)",
         solvers="precomputed"),
    Case("gram_asym", R, "solve", "non-symmetric precomputed Gram", _gram_asym, "ValueError",
         "names an asymmetric pair", r"not symmetric \(X\[0, 3\]", solvers="precomputed"),
    Case("gram_asym_sparse", R, "solve", "non-symmetric sparse Gram", _gram_asym_sparse,
         "ValueError", "names an asymmetric pair, without densifying", r"not symmetric \(X\[0, 3\]",
         solvers="precomputed"),
    Case("gram_neg_diag", R, "solve", "Gram with $K(x, x) < 0$", _gram_neg_diag, "ValueError",
         "names the rows with a negative diagonal", r"negative diagonal.*row\(s\) \[2\]",
         solvers="precomputed"),
    Case("kernel_shape", R, "solve", "callable kernel returning the wrong shape",
         _sep(kernel=_wrong_shape_kernel), "ValueError", "gives the expected block shape",
         r"callable kernel _wrong_shape_kernel returned a block of shape", solvers="callable"),
    Case("kernel_nan", R, "solve", "callable kernel returning NaN", _sep(kernel=_nan_kernel),
         "ValueError", "says the kernel must be finite",
         r"callable kernel _nan_kernel returned NaN or infinity", solvers="callable"),
    Case("zero_norm", R, "solve", "zero-norm point where normalization needs $K(x, x) > 0$",
         _zero_row, "ValueError", "names the zero-norm rows and the fixes",
         r"row\(s\) \[4\].*K\(x, x\) = 0|zero-norm point.*row\(s\) \[4\]",
         solvers="normalizing"),
    # --- rejected: parameters
    Case("max_iter_0", R, "solve", "max_iter=0", _sep(max_iter=0), "ValueError",
         "names the field and its range", r"max_iter=0 is out of range"),
    Case("max_iter_float", R, "solve", "max_iter=2.5", _sep(max_iter=2.5), "TypeError",
         "names the field and its type", r"max_iter=2.5 has type float"),
    Case("time_limit_nan", R, "solve", "time_limit=nan", _sep(time_limit=float("nan")), "ValueError",
         "names the field", r"time_limit=nan must be finite"),
    Case("unknown_solver", R, "solve", "unknown solver name", _sep(solver="nope"), "ValueError",
         "lists the registered solvers", r"unknown solver 'nope'; registered solvers: \[",
         solvers="none"),
    Case("unknown_kernel", R, "solve", "unknown kernel name", _sep(kernel="nope"), "ValueError",
         "lists the registered kernels", r"unknown kernel 'nope'; registered kernels: \["),
    Case("unknown_smoother", R, "solve", "unknown smoother name", _sep(smoother="nope"),
         "ValueError", "lists the registered smoothers",
         r"unknown smoother 'nope'; registered smoothers: \["),
    Case("unknown_stop", R, "solve", "unknown stopping rule", _sep(stop="nope"), "ValueError",
         "lists the registered rules", r"unknown stopping 'nope'; registered stoppings: \["),
    Case("unknown_param", R, "solve", "unknown solver parameter", _sep(bogus=1), "TypeError",
         "lists the solver's valid parameters", r"unknown parameter\(s\) \['bogus'\]; valid parameters"),
    Case("unknown_kernel_param", R, "solve", "unknown kernel parameter",
         _sep(kernel="rbf", kernel_params={"gama": 1.0}), "TypeError",
         "lists the kernel's valid parameters", r"unknown parameter\(s\) \['gama'\]; valid parameters: \['gamma'\]"),
    Case("unknown_stop_param", R, "solve", "unknown stopping-rule parameter",
         _sep(stop=("max_iter", {"m": 3})), "TypeError", "lists the rule's valid parameters",
         r"unknown parameter\(s\) \['m'\]; valid parameters: \['n'\]"),
    Case("gamma_negative", R, "solve", "kernel gamma < 0",
         _sep(kernel="rbf", kernel_params={"gamma": -1.0}), "ValueError", "names gamma and its range",
         r"gamma=-1.0 is out of range"),
    Case("gamma_nan", R, "solve", "kernel gamma = nan",
         _sep(kernel="rbf", kernel_params={"gamma": float("nan")}), "ValueError", "names gamma",
         r"gamma=nan must be finite"),
    Case("C_negative", R, "solve", "C < 0 (SVM family)", _sep(C=-1.0), "ValueError",
         "names C and its range", r"C=-1.0 is out of range", solvers="param:C"),
    Case("C_inf", R, "solve", "C = inf (SVM family)", _sep(C=float("inf")), "ValueError",
         "names C", r"C=inf must be finite", solvers="param:C"),
    Case("lam_negative", R, "solve", "lam < 0 (pegasos, iterated Tikhonov)", _sep(lam=-1.0),
         "ValueError", "names lam and its range", r"lam=-1.0 is out of range", solvers="param:lam"),
    Case("lam_nan", R, "solve", "lam = nan", _sep(lam=float("nan")), "ValueError", "names lam",
         r"lam=nan must be finite", solvers="param:lam"),
    Case("eps_negative", R, "solve", "eps < 0 (isnkpvn)", _sep(eps=-1e-6), "ValueError",
         "names eps and its range", r"eps=-1e-06 is out of range", solvers="param:eps"),
    Case("eps_inf", R, "solve", "eps = inf", _sep(eps=float("inf")), "ValueError", "names eps",
         r"eps=inf must be finite", solvers="param:eps"),
    Case("random_state_str", R, "solve", "random_state='seed'", _sep(random_state="seed"),
         "TypeError", "names random_state", r"random_state='seed' must be None"),
    Case("C_huge_int", R, "solve", "C = 10**400 (an int beyond float64)", _sep(C=10**400),
         "ValueError", "names C by its magnitude (the int is not printed)",
         r"C=~1e400 \(an int\) is out of range: too large for a float64", solvers="param:C"),
    Case("y_object_nan", R, "solve", "object labels {1.0, nan}",
         _Xy(lambda X: X, lambda y: np.array([1.0 if v else np.nan for v in y], dtype=object)),
         "ValueError", "every sample needs a label (NaN is not a class)", r"y contains NaN",
         solvers="classifiers"),
    Case("y_nat", R, "solve", "datetime labels with a NaT (a missing date)",
         _Xy(lambda X: X, lambda y: np.where(y > 0, np.datetime64("2020-01-01"),
                                             np.datetime64("NaT"))),
         "ValueError", "every sample needs a label (NaT was a class, and the referee then "
         "refused the run's own claim: found by review)", r"y contains NaT",
         solvers="classifiers"),
    Case("y_object_none", R, "solve", "object labels {1, None}",
         _Xy(lambda X: X, lambda y: np.array([1 if v > 0 else None for v in y], dtype=object)),
         "ValueError", "every sample needs a label (None is not a class)",
         r"y contains NaN or another missing label", solvers="classifiers"),
    # --- corrupt sparse structure: checked in O(nnz) before any compiled code reads it
    Case("csr_col_out_of_range", T, "solve", "CSR column index >= n_features (scipy's "
         "constructor does not check it)", _corrupt_csr("col"), "ValueError",
         "names the index, its row and the valid range",
         r"X \(CSR\): column index 1000000 of row 3 is out of range \[0, 2\)", isolated=True),
    Case("csr_col_negative", T, "solve", "negative CSR column index (indices replaced after "
         "construction)", _corrupt_csr("negative"), "ValueError", "names the index and its row",
         r"X \(CSR\): column index -7 of row 3 is out of range", isolated=True),
    Case("csr_indptr_decreasing", T, "solve", "indptr not monotone", _corrupt_csr("indptr_down"),
         "ValueError", "names the row where indptr decreases",
         r"X \(CSR\): indptr decreases at row 3", isolated=True),
    Case("csr_indptr_past_end", T, "solve", "indptr[-1] > len(indices)",
         _corrupt_csr("indptr_end"), "ValueError", "gives both lengths",
         r"X \(CSR\): indptr\[-1\] = \d+ .* exceeds the length 12 of indices and data",
         isolated=True),
    Case("csr_lengths_differ", T, "solve", "len(data) != len(indices)", _corrupt_csr("lengths"),
         "ValueError", "gives both lengths",
         r"X \(CSR\): indices has 12 entries but data has 9", isolated=True),
    Case("csr_indptr_length", T, "solve", "indptr of length != n_samples + 1",
         _corrupt_csr("indptr_len"), "ValueError", "gives the expected length",
         r"X \(CSR\): indptr has 5 entries, expected n_rows \+ 1 = 7", isolated=True),
    Case("csr_float_indices", T, "solve", "float index arrays", _corrupt_csr("float_idx"),
         "TypeError", "asks for integer index arrays",
         r"X \(CSR\): indices has dtype float64; the index arrays of a sparse matrix must be "
         r"integers", isolated=True),
    Case("csc_row_out_of_range", T, "solve", "CSC row index >= n_samples", _corrupt_other("csc"),
         "ValueError", "checked before the conversion to CSR (scipy's C++ trusts it)",
         r"X \(CSC\): row index 1000000 of column 0 is out of range \[0, 6\)", isolated=True),
    Case("coo_row_out_of_range", T, "solve", "COO row index >= n_samples (set after "
         "construction)", _corrupt_other("coo"), "ValueError", "checked before the conversion",
         r"X \(COO\): row index 1000000 of stored entry 5 is out of range \[0, 6\)",
         isolated=True),
    Case("csr_trailing_entries", T, "solve", "entries past indptr[-1] (garbage indices, NaN)",
         _trailing_entries, "accepted", "not part of the matrix, as in scipy's prune (views, "
         "no copy)"),
    Case("csr_stale_canonical_flag", T, "solve", "CSR unsorted after scipy cached "
         "has_canonical_format = True", _stale_flag, "accepted",
         "the order is checked by marginkit's own scan, not the flag; sorted in a private copy"),
    Case("csr_narrow_index_dtypes", T, "solve", "uint16 indices, int16 indptr", _narrow_indices,
         "accepted", "range-checked, then converted to int64 (a copy of the index arrays only)"),
    # --- accepted without copies where possible, never modified
    Case("readonly", A, "solve", "read-only dense X (flags.writeable = False)", _readonly, "accepted",
         "used in place (no copy), not modified"),
    Case("fortran", A, "solve", "Fortran-ordered X", _Xy(np.asfortranarray), "accepted",
         "used in place by check_X; a solver needing C order makes a private copy"),
    Case("float32", A, "solve", "float32 X", _Xy(lambda X: X.astype(np.float32)), "accepted",
         "kept in float32 (no copy)"),
    Case("int8", A, "solve", "int8 X", _Xy(lambda X: np.round(X * 2).astype(np.int8)), "accepted",
         "converted to float32 (4x the int8 size, not 8x)"),
    Case("int64", A, "solve", "int64 X", _Xy(lambda X: np.round(X * 2).astype(np.int64)), "accepted",
         "converted to float64"),
    Case("bool", A, "solve", "bool X (with a sign column)",
         _Xy(lambda X: np.c_[X[:, 0] > 0, X[:, 0] < 0]), "accepted", "converted to float32"),
    Case("list", A, "solve", "nested Python lists", _Xy(lambda X: X.tolist(), lambda y: y.tolist()),
         "accepted", "converted to float64"),
    Case("csr_int32", A, "solve", "CSR with int32 indices", _csr_idx(np.int32), "accepted",
         "used in place (no copy)"),
    Case("csr_int64", A, "solve", "CSR with int64 indices", _csr_idx(np.int64), "accepted",
         "used in place (no copy)"),
    Case("csc", A, "solve", "CSC matrix", _Xy(sp.csc_matrix), "accepted",
         "converted to CSR (never densified)"),
    Case("coo", A, "solve", "COO matrix", _Xy(sp.coo_matrix), "accepted",
         "converted to CSR (never densified)"),
    Case("csr_noncanonical", A, "solve", "CSR with duplicate entries and unsorted indices",
         _noncanonical_csr, "accepted", "duplicates summed and indices sorted in a private copy"),
    Case("gram_f32_fortran", A, "solve", "precomputed Gram, float32, Fortran order",
         lambda _: _with(np.asfortranarray(_gram(separable()[0]).astype(np.float32)),
                         kernel="precomputed"),
         "accepted", "symmetry checked blockwise; used as given", solvers="precomputed"),
    Case("gram_csr", A, "solve", "precomputed Gram as a CSR matrix",
         lambda _: _with(sp.csr_matrix(_gram(separable()[0])), kernel="precomputed"),
         "accepted", "symmetry checked on the nonzeros, never densified by the checks",
         solvers="precomputed"),
    Case("labels_str", A, "solve", "string labels", _Xy(lambda X: X, lambda y: np.where(y, "yes", "no")),
         "accepted", "mapped to -1/+1, classes_ keeps the strings"),
    # --- numerically hostile but valid
    Case("huge", H, "solve", "values around 1e150", _scaled(1e150), "honest",
         "same answer as unscaled data (normalized or scaled, no overflow)", truth="separable"),
    Case("tiny", H, "solve", "values around 1e-150", _scaled(1e-150), "honest",
         "same answer as unscaled data (no underflow to zero norms)", truth="separable"),
    Case("mixed_norms", H, "solve", "row norms from 1e-150 to 1e150 in one X", _mixed_norms, "honest",
         "correct answer (the normalized kernel only sees directions)", truth="separable"),
    Case("extreme_huge", H, "solve", "values around 1e300 (squares overflow float64)",
         _scaled(1e300), "honest", "correct answer, honest status or a clear ValueError; never a "
         "false certificate", truth="separable", allow_error=True),
    Case("extreme_tiny", H, "solve", "values around 1e-300 (squares underflow float64)",
         _scaled(1e-300), "honest", "correct answer, honest status or a clear ValueError; never a "
         "false certificate", truth="separable", allow_error=True),
    Case("f32_huge", H, "solve", "float32 values around 1e30 (squares overflow float32)",
         _scaled(1e30, np.float32), "honest", "correct answer or honest status", truth="separable"),
    Case("f32_tiny", H, "solve", "float32 values around 1e-30 (squares underflow float32)",
         _scaled(1e-30, np.float32), "honest", "correct answer or honest status", truth="separable"),
    Case("f32_max", H, "solve", "float32 values around 1e38 (next to float32's maximum)",
         _scaled(1e38, np.float32), "honest", "correct answer or honest status", truth="separable"),
    Case("f32_near_duplicates_rbf", H, "solve",
         "float32, rbf kernel, opposite labels on points 4e-6 apart (Gram rounds to all ones)",
         _near_duplicates_f32, "honest", "never a false 'infeasible' (rbf separates distinct "
         "points); an honest 'max_iter' is fine", truth="separable"),
    Case("rbf_gamma_max", H, "solve", "rbf at gamma = 1e308 (gamma D2 overflows; "
         "the Gram matrix is the identity)",
         _sep(kernel="rbf", kernel_params={"gamma": 1e308}), "honest",
         "correct answer: the entry bounds stay finite (2^-1050 where exp(-gamma D2) "
         "underflows, 1 where the distance itself overflows), so the identity Gram "
         "certifies", truth="separable"),
    Case("constant_feature", H, "solve", "a constant feature", _constant_feature, "honest",
         "correct answer", truth="separable"),
    Case("dup_same", H, "solve", "duplicate points with the same label", _dup_same, "honest",
         "correct answer", truth="separable"),
    Case("dup_opposite", H, "solve", "duplicate points with opposite labels", _dup_opposite, "honest",
         "never 'separable'; certified 'infeasible' by the solvers with a dual certificate",
         truth="infeasible"),
    Case("xor", H, "solve", "XOR (not linearly separable)", _xor, "honest",
         "never 'separable'; certified 'infeasible' by the solvers with a dual certificate",
         truth="infeasible"),
    Case("n2", H, "solve", "$n = 2$ (one point per class)", _n2, "honest", "correct answer",
         truth="separable"),
    Case("d1", H, "solve", "$d = 1$", _d1, "honest", "correct answer", truth="separable"),
    Case("unbalanced", H, "solve", "20 points of one class, 1 of the other", _unbalanced, "honest",
         "correct answer", truth="separable"),
    # --- LIBSVM files
    Case("libsvm_bad_value", L, "load_libsvm", "non-numeric value `2:abc`",
         _libsvm("1 1:0.5\n-1 2:abc\n"), "ValueError", "names the file, the line and the token",
         r"line 2: bad value 'abc'"),
    Case("libsvm_bad_label", L, "load_libsvm", "non-numeric label",
         _libsvm("1 1:0.5\nfoo 2:1\n"), "ValueError", "names the line and the label",
         r"line 2: bad label 'foo'"),
    Case("libsvm_bad_index", L, "load_libsvm", "non-integer index `x:1`",
         _libsvm("1 1:0.5\n-1 x:1\n"), "ValueError", "names the line and the entry",
         r"line 2: bad feature index 'x'"),
    Case("libsvm_zero_index", L, "load_libsvm", "index 0", _libsvm("1 1:0.5\n-1 0:1\n"),
         "ValueError", "says indices start at 1", r"line 2: feature index 0 .*not positive"),
    Case("libsvm_negative_index", L, "load_libsvm", "negative index",
         _libsvm("1 1:0.5\n1 2:1\n-1 -3:1\n"), "ValueError", "says indices start at 1",
         r"line 3: feature index -3 .*not positive"),
    Case("libsvm_truncated", L, "load_libsvm", "line cut inside an entry `3:`",
         _libsvm("1 1:0.5 3:"), "ValueError", "names the line and the entry",
         r"line 1: truncated or malformed entry '3:'"),
    Case("libsvm_decreasing", L, "load_libsvm", "decreasing indices",
         _libsvm("1 3:0.5 2:1\n"), "ValueError", "asks for increasing indices",
         r"line 1: feature indices must be strictly increasing"),
    Case("libsvm_nonfinite", L, "load_libsvm", "value `nan`", _libsvm("1 1:0.5\n-1 1:nan\n"),
         "ValueError", "names the line", r"line 2: value 'nan' is not finite"),
    Case("libsvm_missing_label", L, "load_libsvm", "line without a label",
         _libsvm("1 1:0.5\n2:1\n"), "ValueError", "names the line",
         r"line 2: missing label"),
    Case("libsvm_gz_not_gz", L, "load_libsvm", "`.gz` name on a plain text file",
         _libsvm(GOOD, "data.gz"), "ValueError", "says the suffix does not match the content",
         r"ends in '.gz' but the file is not compressed"),
    Case("libsvm_xz_is_gz", L, "load_libsvm", "`.xz` name on a gzip file",
         _libsvm(GOOD, "data.xz", "gzip"), "ValueError", "names the real compression",
         r"ends in '.xz' but the file is gzip-compressed"),
    Case("libsvm_truncated_xz", L, "load_libsvm", "truncated `.xz` file",
         _libsvm(GOOD * 50, "data.xz", "truncated-xz"), "ValueError",
         "reports a corrupt or truncated compressed file", r"corrupt or truncated compressed file"),
    Case("libsvm_empty", L, "load_libsvm", "file with no data lines", _libsvm("# nothing\n\n"),
         "ValueError", "reports no samples", r"no samples"),
    Case("libsvm_nul_bytes", L, "load_libsvm", "128 MiB of NUL bytes (130 KB gzipped)",
         _libsvm_bytes(lambda: bytes(128 << 20), "zeros.gz", "gzip"), "ValueError",
         "refused at the first block read (10 ms, no memory), names the offset",
         r"line 1: not a text file \(a NUL byte at offset 0\)", isolated=True),
    Case("libsvm_long_line", L, "load_libsvm", "a line of 80 MiB (no newline in it)",
         _libsvm_bytes(lambda: b" " * (80 << 20) + b"\n1 1:1\n", "long.gz", "gzip"),
         "ValueError", "refused once the line passes 64 MiB (the text is streamed)",
         r"line 1: longer than 64 MiB without a newline", isolated=True),
    Case("libsvm_index_too_large", L, "load_libsvm", "feature index 3e19 (beyond int64)",
         _libsvm("1 1:1 30000000000000000000:2\n"), "ValueError",
         "names the line; indices up to 2**63 - 1 load as int64 column indices",
         r"line 1: feature index 30000000000000000000 is too large"),
    # --- estimators
    Case("est_nan", E, "estimator", "NaN in X passed to fit", _nan_dense, "ValueError",
         "rejects it with a ValueError mentioning NaN", r"(?i)nan"),
    Case("est_one_class", E, "estimator", "a single class in y",
         _Xy(lambda X: X, lambda y: np.ones_like(y)), "ValueError",
         "rejects it with a ValueError about the single class", r"(?i)class"),
    Case("est_three_classes", E, "estimator", "three classes in y",
         _Xy(lambda X: np.vstack([X, [[0.0, 3.0], [0.5, 3.0]]]),
             lambda y: np.array([0, 0, 0, 1, 1, 1, 2, 2])),
         "accepted", "one-vs-rest: classes_ has the three labels, predict returns them"),
    # --- stored results (mk.load_result never unpickles)
    Case("stored_missing", S, "load_result", "missing file", _stored("missing"), "FileNotFoundError",
         "the usual FileNotFoundError", r"missing|No such file"),
    Case("stored_npy", S, "load_result", "a `.npy` array instead of a saved result", _stored("npy"),
         "ValueError", "says it is not a file written by Result.save",
         r"not a file written by Result.save.*single array"),
    Case("stored_pickle", S, "load_result", "an archive holding an object (pickled) array",
         _stored("pickle"), "ValueError", "refuses it without unpickling anything",
         r"not a file written by Result.save"),
    Case("stored_bad_json", S, "load_result", "a header that is not JSON", _stored("json"),
         "ValueError", "reports a corrupt header", r"corrupt Result.save header"),
    Case("stored_missing_array", S, "load_result", "a header naming an array the file lacks",
         _stored("array"), "ValueError", "reports a corrupt header", r"corrupt Result.save header"),
    Case("stored_unknown_cert", S, "load_result", "a certificate class nobody registered",
         _stored("cert"), "ValueError", "names the class and says to import its plug-in",
         r"certificate type 'ThirdPartyCert' is unknown.*import"),
    Case("stored_override_method", S, "load_result", "a header key `predict` holding a plug-in",
         _tampered(_override_predict), "ValueError", "only Result's fields are read; keys are data",
         r"r: unknown field\(s\) \['predict'\]"),
    Case("stored_override_verify", S, "load_result", "a certificate field `verify`",
         _tampered(_override_verify), "ValueError", "only the certificate's declared fields",
         r"r.certificate.fields: unknown field\(s\) \['verify'\]"),
    Case("stored_unregistered_plugin", S, "load_result", "a plug-in name nobody registered",
         _tampered(_unregistered_plugin), "ValueError", "plug-ins by registered name only",
         r"r.kernel: unknown kernel 'evil'.*import the package that registers it"),
    Case("stored_deep_nesting", S, "load_result", "a header nested 5000 levels deep",
         _tampered(_deep_header), "ValueError", "a depth limit, not a RecursionError",
         r"nests containers deeper than 64 levels"),
    Case("stored_undeclared_member", S, "load_result", "a member the header does not declare "
         "(e.g. a 2 GiB zero member in a 2 MB file)", _tampered(_undeclared_member), "ValueError",
         "refused without reading it; declared members are size-checked before reading "
         "(limit max_bytes, 1 GiB by default)",
         r"not a file written by Result.save \(member 'payload.npy' is not an array the header "
         r"declares\)"),
    Case("stored_corrupt_support", S, "load_result", "a sparse `support_` with a column index "
         "out of range", _tampered(_bad_support), "ValueError",
         "the structural check of sparse input, before anything uses it",
         r"r.support_: is not a valid CSR matrix \(r.support_ \(CSR\): column index 99"),
    # --- command line (exit code 2, one line on stderr, no traceback)
    Case("cli_bad_file", C, "cli", "`marginkit fit` on a malformed file",
         _cli("fit", "{file}", "--solver", "snkp", text="1 1:0.5\n-1 2:abc\n"), "UsageError",
         "exit code 2, names the argument, the line and the token",
         r"argument TRAIN: .*line 2: bad value 'abc'"),
    Case("cli_missing_file", C, "cli", "`marginkit fit` on a missing file",
         _cli("fit", "{file}.missing", "--solver", "snkp"), "UsageError",
         "exit code 2, says where it searched", r"no data file"),
    Case("cli_unknown_solver", C, "cli", "`marginkit fit --solver nope`",
         _cli("fit", "{file}", "--solver", "nope"), "UsageError",
         "exit code 2, lists the registered solvers", r"argument --solver: unknown solver 'nope'"),
    Case("cli_bad_C", C, "cli", "`marginkit fit --C -1`", _cli("fit", "{file}", "--solver", "fista",
                                                              "--C", "-1"),
         "UsageError", "exit code 2, names --C", r"--C"),
    Case("cli_bad_param", C, "cli", "`marginkit fit --param eps=-1`",
         _cli("fit", "{file}", "--solver", "isnkpvn", "--param", "eps=-1"), "UsageError",
         "exit code 2, names the parameter and its range", r"eps=-1 is out of range"),
    Case("cli_unknown_param", C, "cli", "`marginkit fit --param bogus=1`",
         _cli("fit", "{file}", "--solver", "snkp", "--param", "bogus=1"), "UsageError",
         "exit code 2, lists the valid parameters", r"unknown parameter\(s\) \['bogus'\]"),
    Case("cli_nul_file", C, "cli", "`marginkit fit` on a gzipped file of NUL bytes",
         _cli("fit", "{file}", "--solver", "snkp", raw=bytes(1 << 20)), "UsageError",
         "exit code 2, one line", r"argument TRAIN: .*not a text file \(a NUL byte"),
    Case("cli_huge_feature_index", C, "cli", "`marginkit fit` on a file naming feature 3e9",
         _cli("fit", "{file}", "--solver", "snkp", text="1 1:1 3000000000:2\n-1 2:1\n"),
         "UsageError", "exit code 2 before solving: one float64 vector would take 22 GiB",
         r"has 3000000000 features \(its highest index\); one float64 vector over them takes"),
]


# ------------------------------------------------------------------ known deviations
#: bugs in other modules, routed to their owners; the tests mark them xfail(strict=True)
#: so they fail loudly once fixed (then delete the entry and regenerate the document).
#: (test, case id or None, solver or None) -> reason
KNOWN_BUGS = {}


# --------------------------------------------------------------------------- generator
_SOLVER_NOTE = {
    "all": "every registered solver",
    "classifiers": "every registered classifier",
    "precomputed": "solvers accepting kernel='precomputed'",
    "callable": "solvers accepting a callable kernel",
    "normalizing": "perceptron / von Neumann family (normalized Gram)",
    "none": "(solver lookup)",
}

PREAMBLE = r"""# Reliability: bad inputs and what marginkit does

<!-- Generated by `{regen}` from the cases in tests/reliability_table.py;
     tests/test_reliability.py runs every case and fails if this file is out of date. -->

Every row below is a case that `tests/test_reliability.py` runs, against every registered
solver where the last column says so (and a pure-numpy reference solver, so the input checks
are exercised whatever is registered). Rejections are `ValueError`/`TypeError` whose message
names the argument and the fix; the pattern shown is pinned by the test.

## Input policy

`mk.solve`, `mk.Config`, every plug-in's parameters and the command line go through one
module, `marginkit/_validation.py`; the estimators first validate with scikit-learn (the
messages `check_estimator` expects) and then call `solve`, which applies the same checks; the
LIBSVM loader reports parse errors with the file and line number.

* `X` is used in place when it is already float32/float64 (C or Fortran order, read-only
  included) or canonical CSR with int32/int64 indices. Otherwise a private copy is made:
  bool, int8, uint8, int16, uint16 and float16 become float32 (exact, and a large int8
  matrix grows 4x rather than 8x); other integer types become float64. Sparse input of any
  format becomes canonical CSR (duplicates summed, indices sorted) and is never densified.
* Sparse input of every format has its structure checked before anything reads its index
  arrays (marginkit's kernels, and scipy's own conversions, which are C++ that trusts them):
  indptr of length $n + 1$, starting at 0, non-decreasing; indices and data of one length, at
  least indptr[-1] (entries past it are ignored, as scipy does); every index in range;
  integer index arrays. $O(\mathrm{{nnz}})$ vectorized numpy, no copy of the data (0.3 ms on a9a, 0.8 ms
  on rcv1-sized CSR: as long as scipy's own canonical-format test it replaces). The same
  check runs in `solve`, the kernels, `predict`, the certificates, the estimators (before
  scikit-learn's validation), on every Dask chunk and on the sparse matrices a Dask graph
  holds, and on sparse arrays in results files.
* The caller's arrays are never modified (checked byte for byte by the tests). A run's
  solver, kernel and rules read `X` and `y` through read-only views, and a kernel plug-in
  defined outside marginkit gets read-only views of its operands wherever it is called
  (`predict`, `verify` included), its blocks checked as a callable kernel's are.
* $n = 1$ is a single class, so classifiers reject it with the single-class error.
* Long runs stop with `time_limit=seconds` (status `"time_limit"`). Ctrl-C during a solve
  raises `KeyboardInterrupt`, as in any Python code, with BLAS thread counts restored and
  the plug-in instances unchanged; with `interrupt="return"` it ends the run at the next
  iteration boundary with status `"interrupted"` and a consistent `Result` (a second
  Ctrl-C aborts at once). An estimator's `fit` that raises or is interrupted leaves the
  estimator as it was before the call (a refit keeps the previous fit, whole): a fit
  works on a private copy and publishes what it changed in one assignment, fits of one
  estimator are serialized (a fit of it from its own callback is a `RuntimeError`; a
  callback that waits on another thread fitting the same instance waits forever: fit a
  clone there), and `predict`, `decision_function` and `predict_proba` read
  one copy of the fitted attributes, so a prediction in another thread during a refit
  reads one fit, the old or the new. A Ctrl-C during the eigendecomposition of an exact
  kernel's Gram matrix (`iterated_tikhonov`, seconds at n = 4,000) is handled when the
  decomposition returns: LAPACK holds the interpreter meanwhile.

Loading: `load_libsvm` parses the text as a stream (memory ~1.1x the returned matrix with
scikit-learn's parser, ~1.7x with the pure-Python one; lines of more than 64 MiB and NUL
bytes refused at once; feature indices up to $2^{{63}} - 1$ as int64 column indices).
`load_result` never unpickles and never resolves a name in the file to code: only the
fields of `Result`, plug-ins by registered name with parameters their table validates,
certificates of registered types through their constructors with their declared fields, a
`Config` through its validation; members are size-checked against the header before they
are read (the header at most 4 MiB, the arrays together at most `max_bytes`, 1 GiB by
default), nesting is limited to 64 levels, and anything else is a `ValueError` naming the
place in the file: a damaged member (its checksum, its deflate stream, its `.npy` header),
bytes before the archive, a model `predict` cannot use (coefficients not finite, other than
two labels) and a model other than the one its certificate checks. An exact-kernel SVM's
certificate holds a fingerprint (SHA-256) of the predictor it checks: the rows
`support_` (read as a float64 CSR matrix, so dense, CSR and float32 rows give the same
one) and `support_coef_`; `load_result` compares it with the loaded predictor, and the
referee recomputes it from X, y and the certificate's r, so a file whose predictor was
edited is refused, and one whose fingerprint was edited with it fails `verify`. A
"separable" certificate of the perceptron family holds the separator the result predicts
with (`coef_`, or `support_coef_` with the fingerprint of its rows, the rows of X where
alpha is not 0) and its intercept: `load_result` compares them with the model
`decision_function` evaluates (`coef_`, else a kernel approximation's
`extra["feature_space_coef"]`, else the kernel expansion), and the referee checks, besides
G alpha > 0, that this separator classifies every training point correctly beyond the
rounding of its recomputation in float64. A certificate that holds the model also holds
its labels, kernel and intercept (none of them may be missing from it while the result
has them), and its labels make the result a classifier. The Newton-decrement certificate
of an iterated Tikhonov model binds its last proximal iterate to the model: `coef_` and
`intercept_` (the iterate split by `fit_intercept`), a feature map's
`extra["feature_space_coef"]`, or the fingerprint of a kernel expansion (the training rows
and representer weights of an exact kernel, or the Nystroem centres and their
coefficients; the referee bounds the RKHS norm of their difference from its own model of
the iterate, which must be within 1e-9 of the iterate's norm). The
thresholds of every certificate's claim are those of the result's configuration: a
certificate whose `config` is not `r.config` is refused (both copies edited alike cannot
be told from the run's: the thresholds are those `r.config` shows). An "infeasible"
certificate is a claim about the data alone: the model of an infeasible result (its last
iterate) and its labels are not bound to it. A certificate that binds a model
but holds none (files of format 3 and before, 4 and before for iterated Tikhonov kernel
models, or a plug-in's certificate built without one) checks the claim about the data, not
the model the result predicts with, and nothing in a file tells those cases from a file
edited to remove the model's copy: `load_result` refuses it, naming
`load_result(path, allow_unbound=True)`, which loads it with a `UserWarning` (and
`marginkit predict --allow-unbound`).
A one-vs-rest model of
`marginkit fit -m` reads all its members within one `max_bytes`.

Rows marked "in a worker process" (inputs that crashed or exhausted the process before
their check existed) run in `tests/test_inputs_hostile.py`, in a separate process under an
address-space limit and an alarm, so that a regression fails the case instead of ending
the test run; that file also runs each structural defect against every solver, built-in
kernel, `predict`, certificate check, estimator and Dask solve.

## Claims and their referee

A status that is a claim (`"separable"`, `"infeasible"`, `"certified"`, `"converged"` with a
Newton-decrement certificate) is reported only after the run loop has re-checked the
certificate of that claim on the training data, whichever stopping rule made it (built-in or
third-party); a claim that fails the check is not reported and the run goes on (or ends
`max_iter`). The check is the certificate's own `check(X, y)` (`marginkit.certificates`), the
same one `verify` runs:

* it recomputes the claim from $X$, $y$ and the kernel in float64 by a path of its own, never
  the solver's numbers: feature maps through rows scaled to unit norm without squaring raw
  entries (no overflow at $|x| \sim 10^{{300}}$, no underflow at $10^{{-300}}$), other kernels through the
  kernel's `careful_block` (RBF through the centered Gram with a proven cancellation bound,
  the flagged rows from explicit differences; Laplacian from explicit differences);
* it carries a bound on its own rounding, and a claim holds only beyond it: a claim within
  the rounding error of its threshold is not a certificate;
* the thresholds are the run's configuration (the `eps` of the `dual_certificate` rules or the
  solver's own tolerance), never a number the certificate stores about itself; `eps` and
  `delta` must lie in (0, 1) (every $p$ in the simplex has $\|p\|_G \le 1$);
* labels outside the run's classes are refused, and so is a certificate whose kernel is not
  the run's (its class and parameters are those the run's configuration builds; a fitted
  map's state, the Nystroem centres or random features, is part of the certificate: a saved
  result refits it on the training rows, reproducibly with an integer `random_state`);
* feature maps other than the linear kernel's are evaluated on float64 rows, by the referee
  and by every solver, so the problem a solver certifies is the one the referee checks,
  whatever $X$'s dtype; the perceptron family's claims on `nystroem` and `rff` hold for the
  map of the fit's stored numbers in exact arithmetic: the referee reads the rows with a
  bound on their own rounding (Nystroem's $K(X, C)$ by the base kernel's careful path times
  $|P|$, the random features' phases) and every recomputed $(G\alpha)_i$ and $\|p\|_G$
  carries it (found by review: a false `"separable"` claim verified under
  $|K_{{CC}}^{{-1/2}}| = 2.5 \cdot 10^6$); the SVM and iterated Tikhonov referees take those rows
  as computed (docs/kernels.md, section 4);
* a kernel plug-in's own `careful_block` is checked before a referee reads it (a pair of real
  blocks of the right shape, $E \ge 0$, $K$ within both error bounds of its `__call__`);
* a kernel that is not positive semi-definite on the data ($p^\top G p < 0$ beyond rounding) ends
  the run with `NotPositiveSemidefiniteError` (a `ValueError`), not a certificate; a norm in
  $G$ (the infeasibility claim, the margin bounds) is trusted for a precomputed, callable or
  plug-in kernel only after a Cholesky factorization of its normalized Gram matrix proves
  $\lambda_{{\min}}(G) \ge -\delta$ with $\delta$ at the rounding level ($n \le 4096$; the claim is
  checked on $G + \delta I$, and float32 entries count their rounding in $\delta$): found by review, a
  copositive but indefinite Gram matrix had $p^\top G p = 0$ with $G p \ne 0$ and a verified
  "infeasible" claim.

The solvers' own fast paths were fixed where they gave false claims: the RBF Gram is computed
on centered rows, and rows whose cancellation bound exceeds the kernel's tolerance are
recomputed from explicit differences (two points 0.01 apart at coordinates $\sim 10^6$ get
$K = \exp(-\gamma \cdot 10^{{-4}})$, not 1); the Gram operator's row norms cannot overflow, and
norms its products cannot represent (normalized solvers: outside $[2^{{-1000}}, 2^{{1000}}]$;
the classic perceptron, which works with the raw Gram $X X^\top$: outside
$[2^{{-500}}, 2^{{500}}]$) are refused with a message to rescale $X$, as is a Gram matrix whose
entries overflow (a polynomial kernel of large rows). `Result.margin_bounds` of the
perceptron family are the referee's too: $\alpha$'s margin and the best $p$'s $G$-norm
recomputed after the run and rounded outwards.

## Guarantees and where they are tested

| guarantee | test |
|---|---|
| a clear error of the documented type, or a `Result` whose certificate verifies from the data alone, over random shapes, dtypes, sparsity and labels | `tests/test_properties.py` (hypothesis) |
| same `random_state` gives bitwise-identical results; 1 and 2 threads agree to $10^{{-12}}$ | `tests/test_reproducibility.py` |
| the BLAS threads the run loop chooses (one thread on busy cores) change no iteration count or status and the coefficients by BLAS rounding only; a caller's `threadpool_limits` wins; the default threads come back after a run, a failing one included | `tests/test_threads.py` |
| results survive pickle, and `Result.save` / `mk.load_result` (npz + JSON, no pickle) | `tests/test_reproducibility.py` |
| concurrent registry lookups, broken entry points isolated (whatever `load()` raises, `SystemExit` included), `overwrite=True` needed to replace, a second registration never renames a plug-in | `tests/test_registry.py`, `tests/test_reliability.py` |
| one Solver, Kernel, Smoother or StoppingRule instance serves concurrent runs (per-run state lives in the run; `nystroem`/`rff` fit a private copy per run); the BLAS thread counts after concurrent solves, failing ones included, are those from before; an estimator's predict during a refit in another thread reads one fit, and two threads' fits of one estimator do not mix | `tests/test_concurrency.py` |
| a Python smoother's exception ends the run with a `PluginError` naming it (the original chained); a result that is not $n$ finite reals in the simplex is a `ValueError` naming it, checked before use | `tests/test_smoothers.py` |
| a kernel plug-in that writes into its operands raises (functions, staticmethods, classmethods, mixins, compiled methods, partialmethods); a malformed block (wrong shape, 1-D, None, complex, strings, NaN, K(A, A) not symmetric) is a `ValueError` naming the plug-in | `tests/test_kernel_plugins.py` |
| a claim is re-checked by one of marginkit's certificate types, with the run's configuration (its kernel, its thresholds), whatever configuration the offered certificate holds; a plug-in solver's `finalize` returns the model and variables its certificate checks (else a `TypeError` naming it), and its margin bounds are the referee's; a kernel model on a kernel with a feature map predicts through the map, as the referee checks it; a `LinearKernel` subclass cannot redefine the kernel; a plug-in's `diag()` and a sparse Gram block's structure are checked before use; non-finite scores are an error naming the rows | `tests/test_plugin_contracts.py`, `tests/test_inputs_hostile.py` |
| `time_limit`; Ctrl-C raises `KeyboardInterrupt` with BLAS limits restored and plug-ins unchanged, or (`interrupt="return"`) ends the run between iterations without corrupting the state | `tests/test_api.py`, `tests/test_reliability.py` |
| every claim re-checked by the referee before the run stops; no false "infeasible" under RBF at large offsets or in float32; non-PSD Grams refused; tampered certificates, labels and thresholds rejected; the rounding bounds cover a long-double recomputation | `tests/test_referee.py` |
| the SVM family's certified points and iterated Tikhonov's Newton decrement: referees with rounding bounds, scale refusals, thresholds from the run's configuration | `tests/test_svm_trust.py`, `tests/test_tikhonov_trust.py` |
| hostile but legal inputs (malformed CSR at every entry point, cancelling distances, non-PSD Grams, magnitudes from $10^{{-310}}$ to $10^{{300}}$, float32, extreme $C$ and $\mu$, tampered certificates and result files) over solvers, kernels, dtypes and layouts, each case in a forked child with a timeout and a memory cap, judged by independent references (extended precision, exact optima); `-m slow` runs the whole grid | `tests/test_hostile.py` |
| weakening the certificate and verify code (a comparison, a normalization, a rounding term, a guard, trusting a stored field) makes a test fail | `python tests/mutation_check.py` (not in the default run) |
"""


def _solvers_note(case):
    note = _targets_note(case)
    if case.isolated:
        return "in a worker process" if note == "-" else f"{note} (in a worker process)"
    return note


def _targets_note(case):
    if case.entry != "solve":
        return "-"
    if case.solvers.startswith("param:"):
        return f"solvers with parameter `{case.solvers[6:]}`"
    return _SOLVER_NOTE[case.solvers]


def _outcome(case):
    if case.expect in ("ValueError", "TypeError", "UsageError", "FileNotFoundError"):
        return f"`{case.expect}`: {case.does} (message matches `{case.match}`)"
    if case.expect == "accepted":
        return f"accepted: {case.does}"
    return f"{case.does} (data is {case.truth} through the origin)"


def _esc(text):
    return text.replace("|", "\\|")


def render():
    """The text of docs/reliability.md for the current CASES."""
    out = [PREAMBLE.format(regen=REGENERATE)]
    for section in (R, T, A, H, L, E, C, S):
        out.append(f"\n## {section}\n")
        out.append("| case | input | entry point | what marginkit does | run against |")
        out.append("|---|---|---|---|---|")
        for c in CASES:
            if c.section == section:
                out.append(f"| `{c.id}` | {_esc(c.what)} | `{c.entry}` | {_esc(_outcome(c))} | "
                           f"{_solvers_note(c)} |")
    out += _render_known()
    return "\n".join(out) + "\n"


def _render_known():
    if not KNOWN_BUGS:
        return ["\n## Known deviations\n",
                "None: every case above passes. A deviation found later is listed here as a "
                "strict `xfail` of the tests (it fails as soon as the bug is fixed, so this "
                "list cannot go stale).\n"]
    out = ["\n## Known deviations\n",
           "Bugs found by these cases and not fixed yet. Each is a strict `xfail` in the tests "
           "(it fails as soon as the bug is fixed, so this list cannot go stale).\n",
           "| test | case | solver | deviation |", "|---|---|---|---|"]
    for (test, case, solver), reason in KNOWN_BUGS.items():
        out.append(f"| {test} | {case or '-'} | {solver or '-'} | {_esc(reason)} |")
    return out


def main(argv=None):
    text = render()
    path = os.path.normpath(DOC_PATH)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    print(f"wrote {path} ({sum(1 for _ in CASES)} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
