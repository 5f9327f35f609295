"""Shared helpers of the SVM reproduction scripts (paper 001): data, LIBLINEAR, timing.

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


def liblinear_train(Xtr, ytr, C, extra=""):
    """Train LIBLINEAR (-s 3 -B 1 -c C); returns (model, seconds of train(), #iter, hit_max_iter).

    Only ``train`` is timed (the conversion to LIBLINEAR's format is not). Its console output
    is captured at the file-descriptor level to read the iteration count.
    """
    from liblinear import liblinearutil as ll

    prob = ll.problem(ytr, Xtr)
    param = ll.parameter(f"-s 3 -B 1 -c {C!r} {extra}")
    fd = sys.stdout.fileno()
    sys.stdout.flush()
    saved = os.dup(fd)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), fd)
        try:
            t0 = time.perf_counter()
            model = ll.train(prob, param)
            el = time.perf_counter() - t0
        finally:
            sys.stdout.flush()
            os.dup2(saved, fd)
            os.close(saved)
        tmp.seek(0)
        out = tmp.read().decode(errors="replace")
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
