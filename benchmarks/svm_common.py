"""Shared helpers of the SVM reproduction scripts (arXiv:2512.03947): data, LIBLINEAR, timing.

Data come from the folder named by MARGINKIT_DATA (LIBSVM files, xz-compressed).
"""
import lzma
import os
import sys
import tempfile
import time

import numpy as np
import scipy.sparse as sp

import marginkit as mk
from marginkit.solvers.svm import scaling_statistics

N_FEATURES = {"a9a": 123, "madelon": 500}
OFFICIAL_TEST = {"a9a": "a9a.t.xz", "madelon": "madelon.t.xz"}
FILES = {"a9a": "a9a.xz", "madelon": "madelon.xz", "mushrooms": "mushrooms.xz",
         "splice": "splice.combined.xz", "svmguide1": "svmguide1.xz",
         "heart": "heart_scale.xz", "breast-cancer": "breast-cancer_scale.xz",
         "ionosphere": "ionosphere_scale.xz", "australian": "australian_scale.xz",
         "diabetes": "diabetes_scale.xz", "german.numer": "german.numer_scale.xz",
         "fourclass": "fourclass_scale.xz"}


def data_dir():
    folder = os.environ.get("MARGINKIT_DATA")
    if not folder or not os.path.isdir(folder):
        sys.exit("set MARGINKIT_DATA to the folder with the LIBSVM data files")
    return folder


def _read(path, n_features=None):
    from sklearn.datasets import load_svmlight_file

    with lzma.open(path) as fh:
        X, y = load_svmlight_file(fh, n_features=n_features)
    return X.tocsr(), np.where(y == np.max(y), 1.0, -1.0)


def a9a_int32():
    """(X, y, X_test, y_test) of a9a / a9a.t with int32 CSR indices (the loader may give
    int64, which libsvm-based SVC refuses) and labels +-1."""
    X, y, Xt, yt = load_split("a9a")
    return _int32(X), y, _int32(Xt), yt


def _int32(X):
    return sp.csr_matrix((X.data, X.indices.astype(np.int32), X.indptr.astype(np.int32)),
                         shape=X.shape)


def load_split(name, seed=0):
    """(X_train, y_train, X_test, y_test): the official split when there is one, else a
    stratified 70/30 split with a fixed seed (paper section 5.1)."""
    folder = data_dir()
    nf = N_FEATURES.get(name)
    X, y = _read(os.path.join(folder, FILES[name]), nf)
    if name in OFFICIAL_TEST:
        Xt, yt = _read(os.path.join(folder, OFFICIAL_TEST[name]), X.shape[1])
        return X, y, Xt, yt
    from sklearn.model_selection import train_test_split

    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, stratify=y, random_state=seed)
    return Xtr.tocsr(), ytr, Xte.tocsr(), yte


def std_scaled(Xtr, Xte):
    """X Diag(sigma)^-1 with the training sigma (no centering), the paper's LIBLINEAR input."""
    _, s = scaling_statistics(Xtr, "scale")
    D = sp.diags(s)
    if sp.issparse(Xtr):
        return (Xtr @ D).tocsr(), (Xte @ D).tocsr()
    return Xtr * s, Xte * s


# ---------------------------------------------------------------------------- LIBLINEAR
#: LIBLINEAR's dual solvers stop after this many outer iterations (``train_one`` in
#: linear.cpp, ``int dual_solver_max_iter = 300;``): a constant of the C source, with no
#: option of ``train`` or of the Python interface that changes it (``-e`` changes the
#: tolerance of the stopping test, not the limit). arXiv:2512.03947 recompiled LIBLINEAR to raise
#: it (sec. 5.3, Table 4); ``liblinear_library(max_iter)`` does the same.
LIBLINEAR_MAX_ITER = 300
_LIMIT_LINE = "int dual_solver_max_iter = 300;"
# the functions of the C library used here (prototypes copied from the stock wrapper)
_LIBLINEAR_FUNCTIONS = ("train", "check_parameter", "set_print_string_function",
                        "free_and_destroy_model", "srand")


def cache_dir():
    """Where built libraries are kept (``$MARGINKIT_BENCH_CACHE``, else
    ``~/.cache/marginkit-bench``)."""
    folder = os.environ.get("MARGINKIT_BENCH_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "marginkit-bench")
    os.makedirs(folder, exist_ok=True)
    return folder


def liblinear_library(max_iter=None, build=True):
    """The C library of liblinear-official, loaded with ``ctypes``.

    ``max_iter=None`` (or 300) is the installed build. Another value is the installed
    version rebuilt from its source distribution (fetched once with ``pip download``, as
    the ordinary client does) with the one constant changed, ``dual_solver_max_iter = 300``
    -> ``max_iter`` in ``train_one``, compiled by its own ``setup.py`` like the installed
    build, and cached in ``cache_dir()``. With ``build=False`` a missing build raises
    ``FileNotFoundError`` instead of being made.
    """
    import ctypes

    from liblinear import liblinear as stock

    if max_iter is None or int(max_iter) == LIBLINEAR_MAX_ITER:
        lib = stock.liblinear
    else:
        lib = ctypes.CDLL(_built_library(int(max_iter), build))
        for name in _LIBLINEAR_FUNCTIONS[:-1]:
            getattr(lib, name).restype = getattr(stock.liblinear, name).restype
            getattr(lib, name).argtypes = getattr(stock.liblinear, name).argtypes
    lib.srand.restype = None
    lib.srand.argtypes = [ctypes.c_uint]
    return lib


def _built_library(max_iter, build):
    import glob
    import importlib.metadata
    import shutil
    import subprocess
    import tarfile

    version = importlib.metadata.version("liblinear-official")
    target = os.path.join(cache_dir(), f"liblinear-{version}-maxiter{max_iter}.so")
    if os.path.exists(target):
        return target
    if not build:
        raise FileNotFoundError(f"{target} is not built; run liblinear_library({max_iter})")
    src = os.path.join(cache_dir(), "sdist")
    archives = glob.glob(os.path.join(src, f"liblinear_official-{version}.tar.gz"))
    if not archives:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:",
                        "--no-deps", "-d", src, f"liblinear-official=={version}"], check=True)
        archives = glob.glob(os.path.join(src, f"liblinear_official-{version}.tar.gz"))
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(archives[0]) as tar:
            tar.extractall(tmp, filter="data")
        root = os.path.join(tmp, f"liblinear_official-{version}")
        cpp = os.path.join(root, "cpp-source", "linear.cpp")
        with open(cpp) as fh:
            code = fh.read()
        if code.count(_LIMIT_LINE) != 1:
            raise RuntimeError(f"{cpp}: expected the line {_LIMIT_LINE!r} once")
        with open(cpp, "w") as fh:
            fh.write(code.replace(_LIMIT_LINE, f"int dual_solver_max_iter = {max_iter};"))
        subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=root,
                       check=True, stdout=subprocess.DEVNULL)
        built = glob.glob(os.path.join(root, "liblinear", "clib*.so"))
        shutil.copyfile(built[0], target + ".part")
        os.replace(target + ".part", target)
    return target


def liblinear_problem(X, y, col_scale=None, block_rows=1 << 16):
    """LIBLINEAR's ``problem`` for ``(X Diag(col_scale), y)``, written in row blocks.

    ``liblinear.problem(y, X)`` converts a dense array with a Python loop over its entries
    and copies a CSR matrix whole, so a float32 or dense X would be copied twice; here the
    float64 values go block by block straight into LIBLINEAR's own node array, laid out as
    ``liblinear.csr_to_problem`` lays it out (per row its entries with 1-based indices,
    a slot for the bias node, a terminator). That array (16 bytes per entry) is the only
    copy of X; temporaries are one block. A dense row keeps all its d entries. ``X`` is
    dense or CSR, float32 or float64; ``col_scale`` (length d) multiplies the columns.
    """
    from ctypes import POINTER, addressof, c_double, c_uint64, cast, sizeof

    from liblinear import liblinear as stock

    n, d = X.shape
    s = np.ones(d) if col_scale is None else np.asarray(col_scale, dtype=np.float64)
    sparse = sp.issparse(X)
    if sparse:
        X = sp.csr_matrix(X)
        counts = np.diff(X.indptr).astype(np.int64)
    else:
        counts = np.full(n, d, dtype=np.int64)
    rowptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts + 2, out=rowptr[1:])
    space = np.empty(rowptr[-1], dtype=stock.feature_node)
    for lo in range(0, n, block_rows):
        hi = min(n, lo + block_rows)
        seg = space[rowptr[lo]:rowptr[hi]]
        seg["index"] = -1  # the bias slot and the terminator; the entries are written next
        if sparse:
            B = X[lo:hi]
            if not B.has_sorted_indices:
                B = B.copy()
                B.sort_indices()
            # entry j of the block's row r sits at j + 2 r (two extra nodes per row before)
            pos = np.arange(B.nnz) + 2 * np.repeat(np.arange(hi - lo), counts[lo:hi])
            seg["index"][pos] = B.indices + 1
            seg["value"][pos] = B.data * s[B.indices]
        else:
            nodes = seg.reshape(hi - lo, d + 2)
            nodes["index"][:, :d] = np.arange(1, d + 1)
            nodes["value"][:, :d] = X[lo:hi] * s
    prob = stock.problem.__new__(stock.problem)
    prob.l, prob.n, prob.bias = n, d, -1
    prob.x_space, prob.rowptr = space, rowptr
    prob.y = (c_double * n)()
    np.ctypeslib.as_array(prob.y, (n,))[:] = y
    prob.x = (POINTER(stock.feature_node) * n)()
    base = addressof(space.ctypes.data_as(POINTER(stock.feature_node))[0])
    np.ctypeslib.as_array(cast(prob.x, POINTER(c_uint64)), (n,))[:] = (
        rowptr[:-1] * sizeof(stock.feature_node) + base)
    return prob


def liblinear_decision(model, X, col_scale=None, block_rows=1 << 16):
    """The decision values of a binary LIBLINEAR model (trained on ``X Diag(col_scale)``
    with ``-B 1``) on X, read from its weights in row blocks (no copy of X); positive
    means ``model.get_labels()[0]``."""
    d = model.nr_feature
    w = np.ctypeslib.as_array(model.w, (d + 1,)).copy()
    ws = w[:d] if col_scale is None else w[:d] * col_scale
    out = np.empty(X.shape[0])
    for lo in range(0, X.shape[0], block_rows):
        hi = min(X.shape[0], lo + block_rows)
        out[lo:hi] = X[lo:hi] @ ws
    return out + w[d] * model.bias


def liblinear_train(Xtr, ytr, C, extra="", seed=None, lib=None):
    """Train LIBLINEAR (-s 3 -B 1 -c C); returns (model, seconds of train(), #iter, hit_max_iter).

    ``Xtr``: a matrix (converted by liblinear's ``problem``) or a ``problem`` already
    built (``liblinear_problem``; ``ytr`` is then not read).

    ``seed``: the C ``rand()`` that orders the coordinates of every epoch is seeded with
    ``srand(seed)`` just before the call (the library's, through ``ctypes``), so a run is
    reproducible; None leaves the stream where it is (a fresh process starts as if seeded
    with 1). ``lib``: a library from ``liblinear_library`` (default: the installed one).
    Only ``train`` is timed (not the conversion to LIBLINEAR's format); its console
    output goes to a callback, which gives the iteration count.
    """
    from liblinear import liblinear as stock
    from liblinear import liblinearutil as ll

    lib = liblinear_library() if lib is None else lib
    prob = Xtr if isinstance(Xtr, stock.problem) else ll.problem(ytr, Xtr)
    param = ll.parameter(f"-s 3 -B 1 -c {C!r} {extra}")
    messages = []
    param.print_func = stock.PRINT_STRING_FUN(lambda s: messages.append(s.decode()))
    prob.set_bias(param.bias)
    lib.set_print_string_function(param.print_func)
    err = lib.check_parameter(prob, param)
    if err:
        raise ValueError(f"liblinear: {err.decode()}")
    if seed is not None:
        lib.srand(int(seed))
    t0 = time.perf_counter()
    model = stock.toPyModel(lib.train(prob, param))
    el = time.perf_counter() - t0
    out = "".join(messages)
    n_iter = None
    for line in out.splitlines():
        if "#iter" in line:
            n_iter = int(line.split("=")[-1])
    return model, el, n_iter, "reaching max number of iterations" in out


def liblinear_predict(model, X):
    from liblinear import liblinearutil as ll

    labels, _, _ = ll.predict(np.zeros(X.shape[0]), X, model, "-q")
    return np.asarray(labels)


def timed_solve(X, y, **kw):
    t0 = time.perf_counter()
    res = mk.solve(X, y, **kw)
    return res, time.perf_counter() - t0


def median(xs):
    return float(np.median(np.asarray(xs)))
