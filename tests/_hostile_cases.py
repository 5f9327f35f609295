"""The hostile-input cases of ``tests/test_hostile.py`` and the worker that runs them.

A case is a JSON-able description (``Case``) of one attack: what to build (data that are
legal but hostile, a malformed CSR matrix, a tampered results file, a misbehaving
plug-in...), which marginkit entry point to call, and what outcomes are acceptable:

* ``honest``: a ``ValueError``/``TypeError`` whose message matches ``match`` (it names the
  argument), or a result whose every claim the independent references of
  ``tests/_hostile_ref.py`` confirm;
* ``refuse``: only the clear error is acceptable;
* ``ok``: only a confirmed result is acceptable (normal data, or a hostile input that has
  a right answer, e.g. an rbf kernel on distinct points);
* ``reject``: ``certificate.verify`` must say False (or raise the clear error).

Cases run in a worker process (``python tests/_hostile_cases.py``, one per group of
cases) that imports marginkit once and forks one child per case, with a timeout and a
memory cap: a segfault, an abort, a hang or memory exhaustion is the failure of that case
alone, named by its id. The catalogue is regenerated identically in the worker from the
registered plug-ins (``marginkit.list_plugins()``).
"""
import contextlib
import dataclasses
import gzip
import hashlib
import io
import json
import math
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

import numpy as np
import scipy.sparse as sp

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import _hostile_ref as R  # noqa: E402

#: seconds a case may take (the machine is shared: generous) and its memory cap above
#: what the worker holds when it forks
CASE_TIMEOUT = 60.0
MEMORY_CAP = 3 * 2**30

#: the refusal of a malformed matrix names the argument and what is wrong with it
def structure_match(arg):
    return (rf"(?s)(?=.*\b{arg}\b)(?=.*(indices|indptr|index|column|CSR|sparse|"
            rf"structure|length|nonzero|monoton|out of range|row))")


SCALE_MATCH = r"\bX\b"
PSD_MATCH = r"positive semi-?definite|\bPSD\b|not positive"


@dataclasses.dataclass
class Case:
    id: str
    group: str
    action: str
    spec: dict
    expect: str = "honest"
    match: str = r"\bX\b"
    slow: bool = False
    timeout: float = CASE_TIMEOUT
    memory: int = MEMORY_CAP
    item: int = 0  # the issue's item (13) the case covers
    needs: tuple = ()
    env: str = "default"


# ============================================================================ data
def separable(n=24, d=3, seed=0, margin=0.15):
    """Linearly separable through the origin, with a margin, no zero rows."""
    rng = np.random.default_rng(seed)
    w = np.arange(1, d + 1, dtype=float)[::-1]
    w /= np.linalg.norm(w)
    X = []
    while len(X) < n:
        x = rng.standard_normal(d)
        if abs(x @ w) > margin:
            X.append(x)
    X = np.array(X)
    y = (X @ w > 0).astype(int)
    if y.min() == y.max():
        X[0] = -X[0]
        y = (X @ w > 0).astype(int)
    return X, y


def overlapping(n=40, d=3, seed=0, noise=0.8, balance=0.0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = (X[:, 0] + noise * rng.standard_normal(n) > balance).astype(int)
    return X, y


def random_problem(seed=0):
    """Overlapping classes of random size, dimension and noise (seed 29 and 33 are
    unbalanced enough for the classical SVM's multiplier to dominate at C = 1e-300)."""
    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(20, 80)), int(rng.integers(2, 6))
    X = rng.standard_normal((n, d))
    y = (X[:, 0] + rng.uniform(0.2, 1.5) * rng.standard_normal(n) > 0).astype(int)
    return X, y


def xor(n=8, seed=0):
    """Not separable by a homogeneous linear function (its signed points surround 0)."""
    rng = np.random.default_rng(seed)
    base = np.array([[1, 1], [-1, -1], [1, -1], [-1, 1]], dtype=float)
    X = np.vstack([base] * (n // 4)) + 0.05 * rng.standard_normal((n, 2))
    y = np.array([0, 0, 1, 1] * (n // 4))
    return X, y


def duplicates_opposite():
    X = np.array([[1.0, 2.0], [1.0, 2.0], [0.5, -1.0], [-1.0, 0.3]])
    return X, np.array([0, 1, 0, 1])


def near_duplicates(offset, spacing=0.01, dtype="f64"):
    """XOR of four points ``spacing`` apart at coordinates ~``offset``: distinct points, so
    rbf / laplacian separate them, but ||a||^2 + ||b||^2 - 2ab cancels."""
    base = np.array([[0, 0], [1, 0], [0, 1], [1, 1], [2, 0], [2, 1]], dtype=float)
    X = offset + spacing * base
    y = np.array([0, 1, 1, 0, 0, 1])
    return X.astype(np.float32 if dtype == "f32" else np.float64), y


def heart_scale():
    import marginkit as mk

    return mk.datasets.load_heart_scale()


def libsvm_data(name):
    """A data set of the benchmark folder ($MARGINKIT_DATA)."""
    import marginkit as mk

    return mk.datasets.load_libsvm(name)


DATA = {"separable": separable, "overlapping": overlapping, "xor": xor,
        "random_problem": random_problem,
        "duplicates": duplicates_opposite, "near_duplicates": near_duplicates,
        "heart_scale": heart_scale, "libsvm": libsvm_data}


def layout(X, how):
    if how == "dense":
        return np.ascontiguousarray(X)
    if how == "fortran":
        return np.asfortranarray(X)
    if how == "csr":
        return sp.csr_matrix(X)
    if how == "csr64":
        M = sp.csr_matrix(X)
        M.indices = M.indices.astype(np.int64)
        M.indptr = M.indptr.astype(np.int64)
        return M
    raise ValueError(how)


def build_data(spec):
    """(X, y) of a data spec: {"kind", "args", "scale", "dtype", "layout"}."""
    kind = spec.get("kind", "separable")
    X, y = DATA[kind](**spec.get("args", {}))
    if sp.issparse(X):
        X = X.toarray()
    scale = spec.get("scale", 1.0)
    dtype = spec.get("dtype", "f64")
    X = np.asarray(X, dtype=np.float64) * scale
    if dtype == "f32":
        X = X.astype(np.float32)
    return layout(X, spec.get("layout", "dense")), y


def malform(M, how):
    """A CSR matrix whose structure is broken after construction (scipy checks little of
    it there): an index >= n_features or negative, lengths that disagree, a non-monotone
    indptr."""
    M = sp.csr_matrix(M, copy=True)
    nnz = M.nnz
    if how == "index_high":
        M.indices[nnz // 2] = M.shape[1] + 10**6
    elif how == "index_at_n":
        M.indices[-1] = M.shape[1]
    elif how == "index_negative":
        M.indices[nnz // 2] = -(10**6)
    elif how == "data_short":
        M.data = M.data[:-3].copy()
    elif how == "indices_short":
        M.indices = M.indices[:-3].copy()
    elif how == "indptr_past_end":
        M.indptr[-1] = nnz + 1000
    elif how == "indptr_nonmonotone":
        k = len(M.indptr) // 2
        M.indptr[k] = M.indptr[k + 1] + 5
    elif how == "indptr_negative":
        M.indptr[1] = -(10**6)
    else:
        raise ValueError(how)
    return M


MALFORMATIONS = ("index_high", "index_at_n", "index_negative", "data_short", "indices_short",
                 "indptr_past_end", "indptr_nonmonotone", "indptr_negative")


# ============================================================================ outcome plumbing
class Raised(Exception):
    """marginkit raised ``exc`` (the outcome of the case, judged by the parent)."""

    def __init__(self, exc):
        super().__init__(repr(exc))
        self.exc = exc


def call(fn, *args, **kwargs):
    """Run a marginkit entry point; its exceptions become the case's outcome."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - any exception is an outcome to judge
        raise Raised(exc) from exc


def snapshot(X):
    if sp.issparse(X):
        return [np.array(getattr(X, a), copy=True).tobytes()
                for a in ("data", "indices", "indptr") if hasattr(X, a)]
    if isinstance(X, np.ndarray):
        return (X.tobytes(order="A"), X.flags.writeable, X.flags.c_contiguous)
    return None


def plain(X):
    return X.toarray() if sp.issparse(X) else np.asarray(X)


STATUSES = {"separable", "infeasible", "certified", "converged", "max_iter", "time_limit",
            "callback", "interrupted"}


# ============================================================================ plug-in facts
def solver_facts():
    """name -> {"family", "kernels"} for every registered solver (composition decides)."""
    import marginkit as mk
    from marginkit._api import compose

    out = {}
    kernels = mk.list_plugins()["kernel"]
    for name in mk.list_plugins()["solver"]:
        cls = mk.get_plugin("solver", name)
        prov = set(getattr(cls, "provides", ()))
        if "min_margin" in prov:
            fam = "perceptron"
        elif "n_certified" in prov:
            fam = "svm"
        elif "decrement" in prov:
            fam = "tikhonov"
        else:
            fam = "other"
        ok = []
        for k in kernels:
            params = {"function": _neg_kernel} if k == "callable" else {}
            try:
                compose(mk.Config(solver=name, kernel=k, kernel_params=params))
            except (ValueError, TypeError):
                continue
            ok.append(k)
        out[name] = {"family": fam, "kernels": ok}
    return out


def _neg_kernel(A, B):
    """A callable kernel that is not positive semi-definite: 1 on equal points, 2 elsewhere
    (K = 2 ee^T - I on distinct points: eigenvalue -1)."""
    A = np.asarray(A.toarray() if sp.issparse(A) else A, dtype=np.float64)
    B = np.asarray(B.toarray() if sp.issparse(B) else B, dtype=np.float64)
    d2 = ((A[:, None, :] - B[None, :, :]) ** 2).sum(axis=2)
    return np.where(d2 == 0, 1.0, 2.0)


def _rbf_callable(A, B):
    """exp(-||a - b||^2 / 2) from explicit differences (a PSD callable kernel)."""
    A = np.asarray(A.toarray() if sp.issparse(A) else A, dtype=np.float64)
    B = np.asarray(B.toarray() if sp.issparse(B) else B, dtype=np.float64)
    return np.exp(-0.5 * ((A[:, None, :] - B[None, :, :]) ** 2).sum(axis=2))


CALLABLES = {"neg": _neg_kernel, "rbf": _rbf_callable}

#: kernel parameters used for each kernel in the cases (the reference reads the same)
KERNEL_PARAMS = {
    "linear": {}, "rbf": {"gamma": 0.5}, "laplacian": {"gamma": 0.5}, "poly": {},
    "spline": {}, "precomputed": {}, "callable": {"function": "rbf"},
    "nystroem": {"n_components": 12, "random_state": 0},
    "rff": {"n_components": 30, "random_state": 0},
}


def kernel_params(name, params=None):
    """The case's kernel parameters with the callable's name resolved to the function."""
    p = dict(KERNEL_PARAMS.get(name, {}) if params is None else params)
    if name == "callable":
        p["function"] = CALLABLES[p.get("function", "rbf")]
    return p


def gram_input(X, kname, kparams):
    """What ``solve`` takes: X, or K(X, X) for kernel='precomputed' (from the reference's
    formula of the rbf kernel in float64)."""
    if kname != "precomputed":
        return X
    K = np.asarray(R.kernel_block(("rbf", {"gamma": 0.5}), X, X), dtype=np.float64)
    return K


# ============================================================================ references of a Result
def result_problems(res, X, y, spec, facts):
    """Every claim of ``res`` checked by the references; [] when all hold."""
    out = []
    solver = spec["solver"]
    fam = facts[solver]["family"]
    kname = spec.get("kernel", "linear")
    kp = kernel_params(kname, spec.get("kernel_params"))
    params = spec.get("params", {})
    classes = np.unique(np.asarray(y))
    if res.status not in STATUSES:
        return [f"unknown status {res.status!r}"]
    if res.classes_ is not None and list(np.asarray(res.classes_).tolist()) != list(classes.tolist()):
        out.append(f"classes_ {res.classes_!r} are not the labels {classes.tolist()}")
    for field in ("coef_", "dual_coef_", "dual_vector", "support_coef_"):
        v = getattr(res, field, None)
        if v is not None and not np.all(np.isfinite(np.asarray(v, dtype=float))):
            out.append(f"{field} is not finite")
    if res.intercept_ is not None and not math.isfinite(float(res.intercept_)):
        out.append("intercept_ is not finite")
    want = spec.get("status")
    if want is not None and res.status not in ([want] if isinstance(want, str) else want):
        out.append(f"status {res.status!r}, expected {want!r} on these data")
    try:
        pred = call(res.predict, X)
    except Raised as r:
        return out + [f"predict on the training data raised {type(r.exc).__name__}: {r.exc}"]
    if not set(np.asarray(pred).tolist()) <= set(classes.tolist()):
        out.append("predict returned labels outside the classes")
    cert = res.certificate
    claim = {"separable": "separator", "infeasible": "infeasibility",
             "certified": "certified_points"}.get(res.status)
    if claim is not None and (cert is None or cert.kind != claim):
        out.append(f"status {res.status!r} without a {claim!r} certificate")
    fitted = res.kernel if kname in ("nystroem", "rff") else None
    if fam == "perceptron":
        spec_k = (kname, kp)
        try:
            ctx = R.GramContext(X, y, classes, spec_k, fitted)
        except ValueError as exc:
            return out + [f"reference: {exc}"]
        if res.status == "separable" or (cert is not None and cert.kind == "separator"):
            out += R.separator_problems(ctx, cert.alpha)
            if res.status == "separable" and not np.array_equal(np.asarray(pred), np.asarray(y)):
                out.append("status 'separable' but predict misclassifies training points")
        if res.status == "infeasible" or (cert is not None and cert.kind == "infeasibility"):
            eps = float(params.get("delta" if solver == "snkpvn" else "eps", 1e-6))
            out += R.infeasibility_problems(ctx, cert.p, eps)
        if res.margin_bounds is not None and spec.get("truth") == "separable":
            # float32 data: the solver's Gram carries float32 rounding (the bounds are
            # not re-checked claims), allowed for
            single = getattr(X, "dtype", None) == np.float32
            out += R.margin_bound_problems(ctx, res.margin_bounds, True,
                                           rtol=1e-4 if single else 1e-6)
    elif fam == "svm":
        n = X.shape[0]
        gamma = float(params["C"]) if params.get("C") is not None else 64.0 / n
        # the library's default perturbation: the paper's n/128 with the default box,
        # 1/(2 C) with a user's C (mu C = 1/2 either way)
        if params.get("mu") is not None:
            mu = float(params["mu"])
        else:
            mu = n / 128.0 if params.get("C") is None else 0.5 / gamma
        stop = spec.get("stop")
        fraction = 0.0
        if isinstance(stop, (list, tuple)) and len(stop) == 2 and stop[0] == "certified_points":
            fraction = float(stop[1].get("fraction", 0.0))
        # an exact kernel (no feature map) sees X as given: scale does not apply
        exact = kname not in ("linear", "nystroem", "rff")
        cfg = {"gamma": gamma, "mu": mu,
               "scale": None if exact else params.get("scale", "std"),
               "formulation": "svm" if solver == "fista_svm" else "hsvm",
               "fraction": fraction if res.status == "certified" else -1.0}
        mask = res.certified_mask
        if res.status == "certified" or (mask is not None and np.any(mask)):
            if cert is None:
                out.append("certified points without a certificate")
            else:
                if not np.array_equal(np.asarray(cert.mask, bool), np.asarray(mask, bool)):
                    out.append("certified_mask differs from the certificate's mask")
            fcoef = (res.extra or {}).get("feature_space_coef")
            bound = None if cert is None else cert.value
            out += R.certified_problems(X, y, classes, (kname, kp), fitted, cfg,
                                        res.dual_coef_, mask, res.coef_, res.intercept_ or 0.0,
                                        feature_coef=fcoef, bound=bound)
    elif fam == "tikhonov":
        if res.status == "converged" or cert is not None:
            fields = {k: getattr(res, k) for k in ("coef_", "intercept_", "dual_coef_",
                                                     "support_", "support_coef_")}
            fields["feature_space_coef"] = (res.extra or {}).get("feature_space_coef")
            cfg = {"loss": params.get("loss", "logistic"), "t": params.get("t", 1),
                   "lam": params.get("lam"), "tol": params.get("tol", 1e-8),
                   "fit_intercept": params.get("fit_intercept", False),
                   "n_components": params.get("n_components")}
            Xk = X
            out += R.decrement_problems((kname, kp), Xk, y, classes, fitted, fields, cfg)
    return out


# ============================================================================ actions
def act_solve(case, facts):
    import marginkit as mk

    spec = case.spec
    X, y = build_data(spec["data"])
    kname = spec.get("kernel", "linear")
    kp = kernel_params(kname, spec.get("kernel_params"))
    Xin = gram_input(X, kname, kp)
    if kname == "precomputed" and spec.get("gram") is not None:
        Xin = layout(np.array(spec["gram"], dtype=float), spec["data"].get("layout", "dense"))
        y = np.array(spec["labels"])
    if spec.get("malform"):
        Xin = malform(Xin, spec["malform"])
    before = snapshot(Xin)
    kw = dict(solver=spec["solver"], kernel=kname, kernel_params=kp,
              max_iter=spec.get("max_iter", 3000), random_state=0, **spec.get("params", {}))
    if spec.get("stop") is not None:
        kw["stop"] = tuple(spec["stop"]) if isinstance(spec["stop"], list) else spec["stop"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = call(mk.solve, Xin, y, **kw)
    if spec.get("malform"):
        # no reference runs on a malformed matrix (scipy's own code trusts its structure)
        return [f"solve accepted a malformed matrix ({res.status})"], {}
    out = []
    if snapshot(Xin) != before:
        out.append("the caller's X was modified")
    Xref = Xin if kname != "precomputed" else np.asarray(plain(Xin), dtype=np.float64)
    out += result_problems(res, Xref, y, spec, facts)
    return out, {"status": res.status, "n_iter": int(res.n_iter)}


def act_kernel(case, facts):
    """kernel(A, B) on a malformed operand, or agreement with the reference formula."""
    import marginkit as mk

    spec = case.spec
    kname = spec["kernel"]
    kp = kernel_params(kname, spec.get("kernel_params"))
    A, _ = build_data(spec["A"])
    B, _ = build_data(spec["B"]) if spec.get("B") else (None, None)
    kern = mk.get_plugin("kernel", kname)(**kp)
    if kname in ("nystroem", "rff"):
        call(kern.fit, plain(A if B is None else B))
    if spec.get("malform"):
        if spec.get("bad") == "B":
            B = malform(sp.csr_matrix(B), spec["malform"])
        else:
            A = malform(sp.csr_matrix(A), spec["malform"])
    K = call(kern, A, B)
    if spec.get("malform"):
        return [f"kernel(A, B) accepted a malformed {spec.get('bad', 'A')} ({np.shape(K)})"], {}
    out = []
    Bref = A if B is None else B
    Kref = np.asarray(R.kernel_block((kname, kp), A, Bref, kern), dtype=np.float64)
    K = np.asarray(K, dtype=np.float64)
    if K.shape != Kref.shape:
        return [f"K has shape {K.shape}, expected {Kref.shape}"], {}
    single = np.asarray(plain(A)).dtype == np.float32
    atol = spec.get("atol", 1e-5 if single else 1e-10)
    err = float(np.max(np.abs(K - Kref))) if K.size else 0.0
    if not err <= atol * max(1.0, float(np.max(np.abs(Kref))) if K.size else 1.0):
        out.append(f"K(A, B) differs from the kernel's formula by {err:.3g} (allowed {atol:g})")
    return out, {"max_error": err}


def act_predict(case, facts):
    """A clean fit, then predict / decision_function on a malformed matrix."""
    import marginkit as mk

    spec = case.spec
    X, y = build_data(spec["data"])
    kname = spec.get("kernel", "linear")
    kp = kernel_params(kname, spec.get("kernel_params"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = mk.solve(X, y, solver=spec["solver"], kernel=kname, kernel_params=kp,
                       max_iter=200, random_state=0)
    bad = malform(sp.csr_matrix(X), spec["malform"])
    call(getattr(res, spec.get("method", "predict")), bad)
    return ["predict accepted a malformed matrix"], {}


def act_estimator(case, facts):
    import marginkit.sklearn as mks

    spec = case.spec
    X, y = build_data(spec["data"])
    est = getattr(mks, spec["estimator"])(**spec.get("params", {}))
    bad = malform(sp.csr_matrix(X), spec["malform"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if spec["stage"] == "fit":
            call(est.fit, bad, y)
        else:
            est.fit(sp.csr_matrix(X), y)
            call(est.predict, bad)
    return [f"{spec['estimator']}.{spec['stage']} accepted a malformed matrix"], {}


def act_dask(case, facts):
    """A dask array of row chunks (dense or CSR, possibly one malformed chunk)."""
    import dask
    import dask.array as da
    import marginkit as mk

    spec = case.spec
    X, y = build_data(spec["data"])
    n = X.shape[0]
    cuts = [0, n // 3, 2 * n // 3, n]
    blocks = []
    for i in range(3):
        blk = X[cuts[i]:cuts[i + 1]]
        if spec.get("malform") and i == 1:
            blk = malform(sp.csr_matrix(blk), spec["malform"])
        meta = blk[:0] if not sp.issparse(blk) else sp.csr_matrix((0, X.shape[1]), dtype=blk.dtype)
        blocks.append(da.from_delayed(dask.delayed(lambda b=blk: b)(), shape=blk.shape,
                                      dtype=blk.dtype, meta=meta))
    DX = da.concatenate(blocks, axis=0)
    Dy = da.from_array(np.asarray(y), chunks=tuple(np.diff(cuts)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with dask.config.set(scheduler="sync"):
            res = call(mk.solve, DX, Dy, solver=spec["solver"], max_iter=spec.get("max_iter", 3000),
                       random_state=0, **spec.get("params", {}))
    if spec.get("malform"):
        return [f"a dask array with a malformed chunk was solved ({res.status})"], {}
    Xl = plain(X) if not sp.issparse(X) else X
    return result_problems(res, Xl, y, spec, facts), {"status": res.status}


# ---------------------------------------------------------------------------- results files
def _clean_result(solver="snkp", kernel="rbf", X=None, y=None, **kw):
    import marginkit as mk

    if X is None:
        X, y = separable(12, 3, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mk.solve(X, y, solver=solver, kernel=kernel, max_iter=500, random_state=0, **kw), X, y


def _npz_members(path):
    import zipfile

    with zipfile.ZipFile(path) as z:
        return {info.filename: z.read(info.filename) for info in z.infolist()}


def _write_npz(path, members, compress=True):
    import zipfile

    mode = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", mode) as z:
        for name, blob in members.items():
            z.writestr(name, blob)


def _npy_bytes(arr):
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.asarray(arr), allow_pickle=False)
    return buf.getvalue()


def _meta_of(members):
    raw = members["__meta__.npy"]
    arr = np.lib.format.read_array(io.BytesIO(raw), allow_pickle=False)
    return json.loads(arr.tobytes().decode())


def _set_meta(members, meta):
    blob = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    members["__meta__.npy"] = _npy_bytes(blob)


def _zero_bomb(path, size):
    """A results file whose ``coef_`` member is a .npy of ``size`` zero bytes, deflated
    about 1000:1 (written by hand: one compressed block of 1 MiB of zeros, flushed so that
    it decodes alone, repeated; building a 2 GiB member this way takes a second)."""
    import struct
    import zlib

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "|u1", "fortran_order": False,
                                                  "shape": (size,)})
    head = header.getvalue()
    mib = bytes(2**20)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = c.compress(head) + c.flush(zlib.Z_FULL_FLUSH)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = c.compress(mib) + c.flush(zlib.Z_FULL_FLUSH)
    tail = zlib.compressobj(9, zlib.DEFLATED, -15).flush(zlib.Z_FINISH)
    full, rest = divmod(size, len(mib))
    crc = zlib.crc32(head)
    for _ in range(full):
        crc = zlib.crc32(mib, crc)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    last = c.compress(bytes(rest)) + c.flush(zlib.Z_FULL_FLUSH) if rest else b""
    crc = zlib.crc32(bytes(rest), crc)
    meta = _npy_bytes(np.frombuffer(json.dumps(
        {"__dict__": {"status": "max_iter", "coef_": {"__array__": "r.coef_"}}}).encode(), np.uint8))
    members = [("__meta__.npy", 0, zlib.crc32(meta), [meta], len(meta)),
               ("r.coef_.npy", 8, crc, [first, block, last, tail], len(head) + size)]
    with open(path, "wb") as fh:
        central = []
        for name, method, mcrc, parts, usize in members:
            counts = [1, full, 1, 1] if method else [1]
            csize = sum(len(p) * k for p, k in zip(parts, counts))
            offset = fh.tell()
            nm = name.encode()
            fh.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, mcrc,
                                 csize, usize, len(nm), 0) + nm)
            for part, k in zip(parts, counts):
                for _ in range(k):
                    fh.write(part)
            central.append(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method,
                                       0, 0x21, mcrc, csize, usize, len(nm), 0, 0, 0, 0, 0,
                                       offset) + nm)
        start = fh.tell()
        for entry in central:
            fh.write(entry)
        fh.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(central), len(central),
                             fh.tell() - start, start, 0))


def _fields_node(meta):
    """The header's dict of Result fields (``{"__dict__": ...}`` of the first format,
    ``{"fields": ...}`` of later ones)."""
    if isinstance(meta, dict):
        for key in ("fields", "__dict__"):
            if isinstance(meta.get(key), dict):
                return meta[key]
    raise AssertionError(f"unknown results header {str(meta)[:200]}")


def _certificate_fields(node):
    """The dict of a certificate node's stored fields, whatever the format."""
    for key in ("fields", "state"):
        sub = node.get(key)
        if isinstance(sub, dict):
            return sub.get("__dict__", sub) if key == "state" else sub
    raise AssertionError(f"unknown certificate node {str(node)[:200]}")


def _csr_members(node):
    """{part: (member name, array node or None)} of a CSR node, whatever the format."""
    ref = node["__csr__"]
    if isinstance(ref, str):  # first format: members key.data, key.indices, key.indptr
        return {part: (f"{ref}.{part}.npy", None) for part in ("data", "indices", "indptr")}
    return {part: (ref[part]["__array__"] + ".npy", ref[part]) for part in ("data", "indices", "indptr")}


def act_load(case, facts):
    """A tampered results file: load_result must refuse it, or load only data (no method
    replaced, no crash on use)."""
    import marginkit as mk

    spec = case.spec
    how = spec["tamper"]
    tmp = case_tmpdir()
    path = os.path.join(tmp, "result.npz")
    res, X, y = _clean_result(solver=spec.get("solver", "snkp"), kernel=spec.get("kernel", "rbf"))
    res.save(path)
    members = _npz_members(path)
    meta = _meta_of(members)
    fields = _fields_node(meta)
    plugin = {"__plugin__": ["kernel", "rbf"], "params": {"__dict__": {"gamma": 1.0}}}
    if how in ("predict", "score", "decision_function", "__class__", "__dict__", "save"):
        fields[how] = plugin
    elif how == "certificate.verify":
        _certificate_fields(fields["certificate"])["verify"] = plugin
    elif how == "certificate.check":
        _certificate_fields(fields["certificate"])["check"] = plugin
    elif how == "unknown_field":
        fields["no_such_field"] = 1
    elif how == "deep":
        # 100 000 nested lists in the header (written as text: json.dumps itself recurses)
        fields["extra"] = {"__dict__": {"deep": 0}}
        text = json.dumps(meta).replace('"deep": 0', '"deep": ' + "[" * 100_000 + "0" + "]" * 100_000)
        members["__meta__.npy"] = _npy_bytes(np.frombuffer(text.encode(), dtype=np.uint8))
    elif how in ("support_index_high", "support_nonmonotone", "support_short"):
        sup = sp.csr_matrix(X)
        res2, _, _ = _clean_result(solver="snkp", kernel="rbf", X=sup, y=y)
        res2.save(path)
        members = _npz_members(path)
        meta = _meta_of(members)
        parts = _csr_members(_fields_node(meta)["support_"])
        if how == "support_index_high":
            name, _ = parts["indices"]
            ind = np.lib.format.read_array(io.BytesIO(members[name])).copy()
            ind[len(ind) // 2] = 10**6
            members[name] = _npy_bytes(ind)
        elif how == "support_nonmonotone":
            name, _ = parts["indptr"]
            ptr = np.lib.format.read_array(io.BytesIO(members[name])).copy()
            ptr[len(ptr) // 2] = ptr[-1] + 7
            members[name] = _npy_bytes(ptr)
        else:
            # data shorter than indices, declared so in the header (when it declares)
            name, node = parts["data"]
            dat = np.lib.format.read_array(io.BytesIO(members[name]))[:-2].copy()
            members[name] = _npy_bytes(dat)
            if node is not None and "shape" in node:
                node["shape"] = [int(dat.shape[0])]
                _set_meta(members, meta)
        _write_npz(path, members)
        loaded = call(mk.load_result, path)
        call(loaded.predict, X)
        return ["a results file with a malformed sparse support_ was loaded and used"], {}
    elif how == "declared_huge":
        # a member that declares 2^34 float64 entries (128 GiB) and holds 64 bytes,
        # named as the header declares it
        members["huge.npy"] = _huge_header(2**34)
        fields["coef_"] = {"__array__": "huge"}
    elif how == "zero_bomb":
        _zero_bomb(path, spec.get("size", 2**31))
        loaded = call(mk.load_result, path)
        return [f"a results file with a {spec.get('size', 2**31) / 2**30:g} GiB member was "
                "loaded"], {}
    elif how == "declared_huge_consistent":
        # the header declares the same 128 GiB shape as the member: only a size limit
        # stops the read
        members["huge.npy"] = _huge_header(2**34)
        fields["coef_"] = {"__array__": "huge", "dtype": "<f8", "shape": [2**34]}
    elif how == "plugin_unknown":
        fields["kernel"] = {"__plugin__": ["kernel", "no_such_kernel"], "params": {"__dict__": {}}}
    elif how == "plugin_bad_params":
        fields["kernel"] = {"__plugin__": ["kernel", "rbf"], "params": {"__dict__": {"gamma": -1.0}}}
    elif how == "plugin_kind":
        fields["kernel"] = {"__plugin__": ["nonsense", "rbf"], "params": {"__dict__": {}}}
    elif how == "header_list":
        meta = [1, 2, 3]
        _set_meta(members, meta)
    elif how == "missing_array":
        fields["coef_"] = {"__array__": "r.nothing"}
    else:
        raise ValueError(how)
    if how not in ("deep", "header_list"):
        _set_meta(members, meta)
    _write_npz(path, members)
    loaded = call(mk.load_result, path)
    out = []
    import marginkit as mk2

    for name in ("predict", "score", "decision_function", "save"):
        if name in loaded.__dict__:
            out.append(f"the file replaced Result.{name}")
    if type(loaded) is not mk2.Result:
        out.append(f"load_result returned {type(loaded).__name__}")
    cert = getattr(loaded, "certificate", None)
    if cert is not None:
        for name in ("verify", "check"):
            if name in getattr(cert, "__dict__", {}):
                out.append(f"the file replaced certificate.{name}")
    if how in ("unknown_field",) and "no_such_field" in loaded.__dict__:
        out.append("an unknown header key became an attribute")
    if how == "plugin_bad_params":
        out.append("a kernel with gamma=-1 was restored")
    if not out:
        pred = call(loaded.predict, X)
        if not np.array_equal(np.asarray(pred), np.asarray(res.predict(X))):
            out.append("the loaded result predicts differently")
    return out, {}


def _huge_header(n):
    """A .npy member that declares n float64 entries and holds none."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False,
                                                  "shape": (n,)})
    return header.getvalue() + bytes(64)


# ---------------------------------------------------------------------------- LIBSVM
def _write_libsvm(path, how, spec):
    if how == "nul":
        with gzip.open(path, "wb", compresslevel=9) as fh:
            chunk = bytes(2**20)
            for _ in range(spec.get("mib", 128)):
                fh.write(chunk)
    elif how == "huge_index":
        with open(path, "w") as fh:
            fh.write(f"1 1:0.5 {spec['index']}:1.0\n-1 2:0.25\n")
    elif how == "garbage":
        rng = np.random.default_rng(spec.get("seed", 0))
        with open(path, "wb") as fh:
            fh.write(rng.integers(0, 256, size=spec.get("size", 4096), dtype=np.uint8).tobytes())
    elif how == "bad_last_line":
        rng = np.random.default_rng(0)
        lines = spec.get("lines", 100_000)
        d = 20
        with open(path, "w") as fh:
            for start in range(0, lines, 10_000):
                block = rng.uniform(-1, 1, size=(min(10_000, lines - start), d))
                for i, row in enumerate(block):
                    fh.write(("1" if (start + i) % 2 else "-1") + " "
                             + " ".join(f"{j + 1}:{v:.6f}" for j, v in enumerate(row)) + "\n")
            fh.write("1 3:0.5 2:0.1\n")  # decreasing indices: an error at the very end
    elif how == "long_line":
        with open(path, "w") as fh:
            fh.write("1 " + " ".join(f"{j}:1" for j in range(1, spec.get("entries", 2_000_000))) + "\n")
            fh.write("-1 1:1\n")
    else:
        raise ValueError(how)


def act_libsvm(case, facts):
    from marginkit.datasets import load_libsvm

    spec = case.spec
    tmp = case_tmpdir()
    path = os.path.join(tmp, spec.get("name", "data.txt"))
    _write_libsvm(path, spec["file"], spec)
    size = os.path.getsize(path)
    reset_peak()
    t0 = time.perf_counter()
    out = []
    try:
        X, y = call(load_libsvm, path)
    finally:
        peak = peak_rss_increase()
    info = {"peak_mib": peak / 2**20, "file_mib": size / 2**20,
            "seconds": time.perf_counter() - t0}
    if spec.get("max_peak") is not None and peak > spec["max_peak"]:
        out.append(f"loading used {peak / 2**20:.0f} MiB")
    if spec["file"] == "huge_index" and spec["index"] < 2**63:
        # int64 indices supported: the matrix must be the file's
        idx = spec["index"]
        if X.shape != (2, idx) or X.indices.dtype != np.int64 or X[0, idx - 1] != 1.0 \
                or X[0, 0] != 0.5 or X[1, 1] != 0.25 or list(y) != [1.0, -1.0]:
            out.append(f"the matrix of a file with feature index {idx} is wrong "
                       f"(shape {X.shape}, indices {X.indices.dtype})")
        return out, info
    out.append(f"load_libsvm accepted the {spec['file']} file ({X.shape})")
    return out, info


def act_libsvm_memory(case, facts):
    """A large valid file with one bad line at its end: the error must come with memory
    bounded by a small multiple of what the parsed CSR would take."""
    from marginkit.datasets import load_libsvm

    spec = case.spec
    tmp = case_tmpdir()
    path = os.path.join(tmp, "big.txt")
    _write_libsvm(path, "bad_last_line", spec)
    lines, d = spec.get("lines", 100_000), 20
    csr_bytes = lines * d * 12 + (lines + 1) * 8
    reset_peak()
    try:
        call(load_libsvm, path)
        out = ["a file with decreasing indices on its last line was accepted"]
    except Raised as r:
        if not isinstance(r.exc, ValueError) or "line" not in str(r.exc):
            raise
        out = []
    peak = peak_rss_increase()
    limit = spec.get("factor", 4) * csr_bytes + 16 * 2**20
    if peak > limit:
        out.append(f"peak memory {peak / 2**20:.0f} MiB for a {os.path.getsize(path) / 2**20:.0f} "
                   f"MiB file ({csr_bytes / 2**20:.0f} MiB of CSR; allowed {limit / 2**20:.0f})")
    return out, {"peak_mib": peak / 2**20, "csr_mib": csr_bytes / 2**20}


def act_cli(case, facts):
    """The command line on bad input: exit 2, one line on stderr, no traceback."""
    from marginkit.cli import main

    spec = case.spec
    tmp = case_tmpdir()
    path = os.path.join(tmp, spec.get("name", "train.txt"))
    _write_libsvm(path, spec["file"], spec)
    err = io.StringIO()
    outbuf = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(outbuf):
        try:
            rc = main(["fit", path, "--solver", spec.get("solver", "snkp")])
        except SystemExit as exc:
            rc = exc.code
        except BaseException as exc:  # noqa: BLE001 - an escaping exception is a failure
            return [f"marginkit fit raised {type(exc).__name__}: {exc}"], {}
    text = err.getvalue()
    out = []
    if rc != 2:
        out.append(f"exit code {rc}, expected 2")
    if "Traceback" in text:
        out.append("a traceback was printed")
    if len(text.strip().splitlines()) != 1:
        out.append(f"stderr has {len(text.strip().splitlines())} lines: {text[-300:]!r}")
    return out, {"stderr": text[-300:]}


# ---------------------------------------------------------------------------- tampering
def _base(kind):
    """A valid result of each claim kind, and its data."""
    import marginkit as mk

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind == "separator":
            X, y = separable(16, 3, seed=2)
            res = mk.solve(X, y, solver="snkp", kernel="rbf", kernel_params={"gamma": 0.5})
            spec = ("rbf", {"gamma": 0.5})
        elif kind in ("separator_poly", "separator_precomputed"):
            # points of very different norms: normalizing by sqrt(K(x, x)) matters
            X, y = np.array(UNEQUAL_NORMS), np.array([0, 1, 1, 0, 0])
            kp = {"degree": 2, "coef0": 1.0, "gamma": 1.0}
            spec = ("poly", kp)
            if kind == "separator_precomputed":
                X = np.asarray(R.kernel_block(spec, X, X), dtype=np.float64)
                res = mk.solve(X, y, solver="snkp", kernel="precomputed", max_iter=20000)
                spec = ("precomputed", {})
            else:
                res = mk.solve(X, y, solver="snkp", kernel="poly", kernel_params=kp,
                               max_iter=20000)
        elif kind == "infeasibility":
            X, y = xor(8, seed=1)
            res = mk.solve(X, y, solver="nvn")
            spec = ("linear", {})
        elif kind == "certified":
            X, y = overlapping(40, 3, seed=3)
            res = mk.solve(X, y, solver="fista")
            spec = ("linear", {})
        elif kind == "certified_svm":
            X, y = overlapping(40, 3, seed=3)
            res = mk.solve(X, y, solver="fista_svm")
            spec = ("linear", {})
        elif kind == "decrement":
            X, y = overlapping(40, 3, seed=4)
            res = mk.solve(X, y, solver="iterated_tikhonov", t=2, kernel="rbf",
                           kernel_params={"gamma": 0.5})
            spec = ("rbf", {"gamma": 0.5})
        elif kind in ("decrement_linear", "decrement_linear_csr"):
            X, y = overlapping(40, 3, seed=4)
            if kind == "decrement_linear_csr":
                X = sp.csr_matrix(X)
            res = mk.solve(X, y, solver="iterated_tikhonov", t=1, fit_intercept=True)
            spec = ("linear", {})
        else:
            raise ValueError(kind)
    return res, X, y, spec


#: five points of very different norms (poly kernel, degree 2) and an alpha that separates
#: them under Y K Y but not under the normalized G
UNEQUAL_NORMS = [[0.629, -0.661], [0.64, 0.105], [-0.107, 0.072], [3.912, 2.841],
                 [-0.704, -1.265]]
UNNORMALIZED_ALPHA = [0.1455, 0.4065, 0.91, 0.0431, 0.8227]


def _set(obj, name, value):
    """Set a certificate's field. A read-only property (a threshold the certificate derives
    from the run's configuration) cannot be tampered with that way and is left as it is:
    the rest of the tamper must then still be rejected."""
    try:
        setattr(obj, name, value)
    except AttributeError:
        pass


def act_tamper(case, facts):
    """A valid certificate with one field changed so that its claim is false (the
    reference says so: else the tamper is no tamper); verify must reject it."""
    import copy

    spec = case.spec
    kind, how = spec["kind"], spec["tamper"]
    res, X, y, kspec = _base(kind)
    cert = res.certificate
    if cert is None or not cert.verify(X, y):
        raise AssertionError(f"the base result of {kind!r} has no verifying certificate")
    cert = copy.deepcopy(cert)
    classes = np.unique(y)
    yv = np.asarray(y).copy()
    n = X.shape[0]
    if kind in ("separator_poly", "separator_precomputed"):
        if how != "alpha_unnormalized":
            raise ValueError(how)
        # an alpha with Y K Y alpha > 0 (no normalization) whose G alpha has a negative
        # entry: f = sum_j alpha_j y_j phi(x_j) / sqrt(K(x_j, x_j)) misclassifies a point
        cert.alpha = np.array(UNNORMALIZED_ALPHA)
        ctx = R.GramContext(X, y, classes, kspec)
        if not R.separator_problems(ctx, cert.alpha):
            raise AssertionError("the unnormalized alpha separates")
    elif kind == "separator":
        # the claim judged: G alpha > 0 on (X, yv) under the run's kernel, labels mapped
        # by the run's classes
        if how == "alpha_negated":
            cert.alpha = -cert.alpha
        elif how == "alpha_vertex":
            G = np.asarray(R.GramContext(X, y, classes, kspec).G, dtype=np.float64)
            j = int(np.argmin(G.min(axis=0)))  # the column with the most negative entry
            if not G[:, j].min() < 0:
                raise AssertionError("every vertex separates")
            cert.alpha = np.zeros(n)
            cert.alpha[j] = 1.0
        elif how == "alpha_nan":
            cert.alpha = cert.alpha.copy()
            cert.alpha[0] = np.nan
        elif how == "alpha_short":
            cert.alpha = cert.alpha[:-1].copy()
        elif how == "labels_flipped":
            yv[0] = classes[1] if yv[0] == classes[0] else classes[0]
        elif how == "labels_outside":
            yv = yv.astype(object)
            yv[0] = "intruder"
        elif how == "classes_swapped":
            _set(cert, "classes", np.asarray(classes)[::-1].copy())
        elif how == "kernel_swapped":
            # a point among three of the other class 0.6 away: the uniform alpha separates
            # under gamma = 50 (G ~ I) but not under the run's gamma = 0.5; the certificate
            # says gamma = 50
            import marginkit as mk

            X = np.array([[0.0, 0.0], [0.6, 0.0], [-0.3, 0.52], [-0.3, -0.52]])
            y = np.array([0, 1, 1, 1])
            yv, n = y.copy(), 4
            base = mk.solve(X, y, solver="snkp", kernel="rbf", kernel_params={"gamma": 0.5})
            if base.status != "separable":
                raise AssertionError("the base run does not separate")
            cert = copy.deepcopy(base.certificate)
            cert.alpha = np.full(n, 1.0 / n)
            _set(cert, "kernel", mk.get_plugin("kernel", "rbf")(gamma=50.0))
            if R.separator_problems(R.GramContext(X, y, classes, ("rbf", {"gamma": 50.0})),
                                    cert.alpha):
                raise AssertionError("uniform alpha does not separate at gamma=50")
        else:
            raise ValueError(how)
        if how != "labels_outside":
            # labels flipped: the data given to verify; otherwise the run's own
            ctx = R.GramContext(X, yv, classes, kspec)
            if not R.separator_problems(ctx, cert.alpha):
                raise AssertionError(f"tamper {how} left a true claim")
    elif kind == "infeasibility":
        ctx = R.GramContext(X, y, classes, kspec)
        e1 = np.zeros(n)
        e1[0] = 1.0
        if how == "p_off_simplex":
            cert.p = cert.p * 1.5
        elif how == "p_negative":
            p = cert.p.copy()
            p[0] -= 0.5
            p[1] += 0.5
            cert.p = p
        elif how == "p_nan":
            cert.p = cert.p.copy()
            cert.p[0] = np.nan
        elif how == "p_other":
            # a p of other data (separable): verified on those data it is no certificate
            X, y = separable(8, 2, seed=9)
            yv = np.asarray(y).copy()
            n = X.shape[0]
            ctx = R.GramContext(X, y, classes, kspec)
            cert.p = np.full(n, 1.0 / n)
        elif how in ("eps_0.5", "eps_1", "eps_5"):
            eps = float(how.split("_")[1])
            if eps == 0.5:
                # p = t e_i + (1 - t) e_j with ||p||_G = 0.4 (G_ij most negative): no
                # certificate at 1e-6, "true" at the tampered eps
                G = np.asarray(ctx.G, dtype=np.float64)
                i, j = np.unravel_index(np.argmin(G), G.shape)
                lo, hi = 0.5, 1.0
                for _ in range(100):
                    t = 0.5 * (lo + hi)
                    v = t * t + (1 - t) ** 2 + 2 * t * (1 - t) * G[i, j]
                    lo, hi = (t, hi) if v < 0.16 else (lo, t)
                if not G[i, j] < -0.7:
                    raise AssertionError("no pair with G_ij < -0.7")
                cert.p = np.zeros(n)
                cert.p[i], cert.p[j] = t, 1 - t
            else:
                cert.p = e1  # ||e_1||_G = 1
            _set(cert, "eps", eps)
        elif how == "p_short":
            cert.p = cert.p[:-1].copy()
        elif how == "labels_outside":
            yv = yv.astype(object)
            yv[0] = "intruder"
        else:
            raise ValueError(how)
        if how != "labels_outside" and not R.infeasibility_problems(ctx, cert.p, 1e-6):
            raise AssertionError(f"tamper {how} left a true claim")
    elif kind in ("certified", "certified_svm"):
        form = "svm" if kind == "certified_svm" else "hsvm"
        cfg = {"gamma": 64.0 / n, "mu": n / 128.0, "scale": "std", "formulation": form,
               "fraction": 0.0}
        Z = R.standardize(X, "std")[0]
        opt = R.SVMOptimum(Z, R.signs(y, classes), cfg["gamma"], cfg["mu"], form)
        wrong = np.flatnonzero(~(opt.scaled_margins() > 0))
        if how == "mask_wrong_point":
            cert.mask = cert.mask.copy()
            cert.mask[wrong[0]] = True
        elif how == "mask_all":
            cert.mask = np.ones(n, dtype=bool)
        elif how == "coef_negated":
            cert.coef = -cert.coef
            cert.intercept = -cert.intercept
        elif how == "intercept_shifted":
            cert.intercept = cert.intercept + 1e3
        elif how == "r_out_of_box":
            cert.r = cert.r.copy()
            cert.r[np.argmax(cert.r)] = 10.0 * cfg["gamma"]
        elif how == "r_scaled":
            cert.r = np.minimum(cert.r * 3.0, cfg["gamma"])
            cert.mask = cert.mask.copy()
            cert.mask[wrong[0]] = True
        elif how == "mu_gamma_with_mask":
            # the fields of another problem's certificate (C = 1e3, mu = 1e-3), with a
            # point the run's optimum misclassifies added to its mask
            import marginkit as mk

            other = mk.solve(X, y, solver="fista" if form == "hsvm" else "fista_svm",
                             C=1e3, mu=1e-3, max_iter=20000)
            if other.certificate is None:
                raise AssertionError("no certificate for the other problem")
            oc = other.certificate
            for field in ("r", "mask", "gamma", "mu", "coef", "intercept", "t_bar", "value"):
                _set(cert, field, copy.deepcopy(getattr(oc, field)))
            cert.mask = cert.mask.copy()
            cert.mask[wrong[0]] = True
        elif how == "labels_outside":
            yv = yv.astype(object)
            yv[0] = "intruder"
        elif how == "classes_swapped":
            _set(cert, "classes", np.asarray(classes)[::-1].copy())
        elif how == "coef_scaled":
            # the same decisions (coef and intercept times 1.5), but not w(r)
            cert.coef = cert.coef * 1.5
            cert.intercept = cert.intercept * 1.5
        elif how == "mask_within_distance":
            # a point the certificate leaves out because its bound cannot certify it
            # (level - r_j <= ||r - r*||), though w(r) classifies it with margin
            # > 1 - mu level: added to the mask
            r = cert.r
            level = min(cfg["gamma"], 1 / cfg["mu"])
            dist = float(np.linalg.norm(r - opt.r))
            th = np.asarray(opt.scaled_margins(r / opt.sigma), float) * opt.sigma
            H = np.asarray(opt.H, dtype=np.float64)
            G = H @ (H.T @ r) + cfg["mu"] * r - 1.0
            p = np.where(r <= 0, np.minimum(G, 0), np.where(r >= cfg["gamma"], np.maximum(G, 0), G))
            pn = float(np.linalg.norm(p))
            free = ~cert.mask & (r < level) & (th > 1 - cfg["mu"] * level) & (level - r <= dist)
            # preferably one that ||p(r)|| alone (without the 1/mu) would certify
            pick = np.flatnonzero(free & (level - r > pn))
            pick = pick if pick.size else np.flatnonzero(free)
            if not pick.size:
                raise AssertionError("no point within ||r - r*|| of the level")
            cert.mask = cert.mask.copy()
            cert.mask[pick[0]] = True
        elif how == "r_unbalanced":
            # the classical SVM's r moved off y^T r = 0 on points outside the mask, each
            # away from r* within the box, until r is farther from r* than 1.5 times the
            # smallest certified margin level - r_i (so no valid bound certifies that
            # point), the classifier recomputed for the moved r
            r = cert.r.copy()
            ypm = R.signs(y, classes)
            level = min(cfg["gamma"], 1 / cfg["mu"])
            need = 1.5 * float(np.min(level - r[cert.mask]))
            rstar, moved = opt.r, 0.0
            for k in np.flatnonzero(~cert.mask):
                if moved >= need:
                    break
                step = (cfg["gamma"] - r[k]) if rstar[k] < r[k] else -r[k]
                r[k] += step
                moved = math.hypot(moved, step)
            if moved < need:
                raise AssertionError("r cannot be moved far enough")
            Zs, m, s = R.standardize(X, "std")
            w = np.asarray((ypm * r) @ np.asarray(Zs, dtype=np.float64))
            coef = np.asarray(s, dtype=np.float64) * w
            cert.r, cert.coef = r, coef
            cert.intercept = float(cert.t_bar - np.asarray(m, dtype=np.float64) @ coef)
        elif how == "mask_empty":
            cert.mask = np.zeros(n, dtype=bool)
        elif how == "mask_short":
            cert.mask = cert.mask[:-1].copy()
        elif how == "mask_uncertified_point":
            # an early iterate r (its projected-gradient bound is large) and one point the
            # optimum misclassifies although w(r) classifies it with margin > 1 - mu level:
            # only the error bound keeps it from being certified
            import marginkit as mk

            X, y = overlapping(40, 3, seed=24, noise=1.2)
            yv, n = y.copy(), 40
            cfg.update(gamma=64.0 / n, mu=n / 128.0)
            level = min(cfg["gamma"], 1 / cfg["mu"])
            Z = R.standardize(X, "std")[0]
            opt = R.SVMOptimum(Z, R.signs(y, classes), cfg["gamma"], cfg["mu"], form)
            wrong = ~(np.asarray(opt.scaled_margins(), float) > 0)
            found = None
            for k in range(1, 61):
                early = mk.solve(X, y, solver="fista", max_iter=k, stop=("max_iter", {"n": k}))
                r = early.dual_coef_
                th = np.asarray(opt.scaled_margins(r / opt.sigma), float) * opt.sigma
                ok = wrong & (th > 1 - cfg["mu"] * level) & (r < level)
                if ok.any():
                    found = (early, int(np.flatnonzero(ok)[0]))
                    break
            if found is None:
                raise AssertionError("no early iterate classifies a misclassified point")
            early, i = found
            base = mk.solve(X, y, solver="fista")
            cert = copy.deepcopy(base.certificate)
            cert.r, cert.coef, cert.intercept = early.dual_coef_.copy(), early.coef_.copy(), \
                float(early.intercept_)
            cert.t_bar = float(early.extra["t_bar"])
            cert.mask = np.zeros(n, dtype=bool)
            cert.mask[i] = True
            _set(cert, "value", 0.0)
        else:
            raise ValueError(how)
        truth_classes = cert.classes if how == "classes_swapped" else classes
        if how != "labels_outside" and not R.certified_problems(
                X, y, truth_classes, kspec, None, cfg, cert.r, cert.mask, cert.coef,
                cert.intercept):
            raise AssertionError(f"tamper {how} left a true claim")
    elif kind in ("decrement", "decrement_linear", "decrement_linear_csr"):
        linear = kind != "decrement"
        fields_cfg = {"loss": "logistic", "t": 1 if linear else 2, "lam": None, "tol": 1e-8,
                      "fit_intercept": linear}
        lam = 1.0 / n

        def fields_of(coef):
            # the (tampered) certificate's model as the reference reads a Result
            if linear:
                return {"coef_": coef[:-1], "intercept_": float(coef[-1]), "dual_coef_": None,
                        "support_": None, "support_coef_": None}
            return {"coef_": None, "intercept_": 0.0, "dual_coef_": coef, "support_": X,
                    "support_coef_": coef}

        def nu_of(coef):
            return R.final_decrement(kspec, X, y, classes, None, fields_of(coef), fields_cfg)

        if how == "coef_prev_forged":
            # coef moved, and the anchor moved with it so that the moved coef solves the
            # subproblem anchored there exactly (its gradient g/n + lam (beta - beta') = 0)
            beta = cert.coef * 1.5
            K = np.asarray(R.kernel_block(kspec, X, X), dtype=np.float64)
            ypm = R.signs(y, classes)
            m = ypm * (K @ beta)
            g = -ypm / (1.0 + np.exp(m))
            cert.coef = beta
            cert.coef_prev = beta + g / (n * lam)
        elif how == "target_raised":
            _set(cert, "target", 1e3)
            cert.coef = cert.coef * 1.5
        elif how == "coef_scaled":
            cert.coef = cert.coef * 1.01
        elif how in ("coef_nudged", "coef_nudged_value_1", "intercept_nudged"):
            # coef moved along one direction until its decrement on the exact final
            # subproblem is twice the tolerance: a near miss, not a wild model. The
            # direction is the data's leading one (top eigenvector of K, or of Phi^T Phi),
            # where the loss part of the Hessian outweighs lam; or the intercept alone
            v = np.zeros(cert.coef.shape)
            if how == "intercept_nudged":
                v[-1] = 1.0
            elif linear:
                D = np.asarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64)
                v[:-1] = np.linalg.eigh(D.T @ D)[1][:, -1]
            else:
                K = np.asarray(R.kernel_block(kspec, X, X), dtype=np.float64)
                v = np.linalg.eigh(K)[1][:, -1]
            base = np.array(cert.coef, dtype=np.float64)
            d0 = 1e-6 * max(np.linalg.norm(base), 1.0)
            nu0 = nu_of(base + d0 * v)
            step = d0 * 2e-8 / nu0
            cert.coef = base + step * v
            nu = nu_of(cert.coef)
            if not 1.5e-8 < nu < 3e-8:
                raise AssertionError(f"the nudge gave a decrement of {nu:.3g}")
            if how == "coef_nudged_value_1":
                _set(cert, "value", 1.0)
        else:
            raise ValueError(how)
        if not R.decrement_problems(kspec, X, y, classes, None, fields_of(cert.coef), fields_cfg):
            raise AssertionError(f"tamper {how} left a true claim")
    ok = call(cert.verify, X, yv)
    if ok:
        return [f"verify accepted the certificate with {how}"], {}
    verdict = call(cert.check, X, yv)
    if verdict:
        return ["check() holds while verify() is False"], {}
    return [], {}


# ---------------------------------------------------------------------------- concurrency
def act_threads(case, facts):
    import threading

    import marginkit as mk

    spec = case.spec
    what = spec["what"]
    out = []
    if what == "shared_solver":
        name = spec["solver"]
        inst = mk.get_plugin("solver", name)(**spec.get("params", {}))
        datasets = [overlapping(40 + 4 * i, 3, seed=i) for i in range(4)]
        kw = dict(max_iter=spec.get("max_iter", 300), random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            serial = [mk.solve(X, y, solver=mk.get_plugin("solver", name)(**spec.get("params", {})),
                               **kw) for X, y in datasets]
        results, errors = {}, []
        barrier = threading.Barrier(len(datasets))

        def work(i):
            try:
                barrier.wait()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    for _ in range(3):
                        X, y = datasets[i]
                        results[i] = mk.solve(X, y, solver=inst, **kw)
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=work, args=(i,)) for i in range(len(datasets))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out += [f"a thread failed: {e}" for e in errors[:3]]
        for i, ref in enumerate(serial):
            got = results.get(i)
            if got is None:
                continue
            if got.status != ref.status or got.n_iter != ref.n_iter:
                out.append(f"data set {i}: {got.status}/{got.n_iter} in threads, "
                           f"{ref.status}/{ref.n_iter} alone")
            for field in ("coef_", "dual_coef_"):
                a, b = getattr(got, field), getattr(ref, field)
                if a is not None and b is not None and not np.allclose(a, b, rtol=1e-9, atol=1e-12):
                    out.append(f"data set {i}: {field} differs in threads")
    elif what == "blas_limit":
        from threadpoolctl import threadpool_info, threadpool_limits

        threadpool_limits(limits=2, user_api="blas")
        before = [m["num_threads"] for m in threadpool_info() if m["user_api"] == "blas"]
        errors = []
        datasets = [overlapping(300, 40, seed=i) for i in range(4)]

        def work(i):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    for _ in range(3):
                        mk.solve(*datasets[i], solver="fista", max_iter=20)
            except Exception as exc:  # noqa: BLE001
                errors.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        after = [m["num_threads"] for m in threadpool_info() if m["user_api"] == "blas"]
        out += [f"a thread failed: {e}" for e in errors[:3]]
        if before != after:
            out.append(f"BLAS threads {before} before overlapping solves, {after} after")
    elif what == "nystroem_refit":
        # a Result keeps the feature map it was fit with, whatever happens to the kernel
        # instance later: refitted by the user, or fitted by another run (in a thread)
        params = {"n_components": 10, "random_state": 0}
        X1, y1 = overlapping(40, 3, seed=1)
        X2, y2 = overlapping(50, 3, seed=2)
        X2 = X2 * 5.0 + 3.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref1 = mk.solve(X1, y1, solver="fista", kernel="nystroem", kernel_params=params)
            ref2 = mk.solve(X2, y2, solver="fista", kernel="nystroem", kernel_params=params)
            kern = mk.get_plugin("kernel", "nystroem")(**params)
            if spec["how"] == "user_refit":
                res = {1: mk.solve(X1, y1, solver="fista", kernel=kern)}
                kern.fit(X2)
            elif spec["how"] == "second_run":
                res = {1: mk.solve(X1, y1, solver="fista", kernel=kern)}
                mk.solve(X2, y2, solver="fista", kernel=kern)
            else:
                res = {}
                barrier = threading.Barrier(2)

                def work(i, X, y):
                    barrier.wait()
                    res[i] = mk.solve(X, y, solver="fista", kernel=kern)

                ts = [threading.Thread(target=work, args=(1, X1, y1)),
                      threading.Thread(target=work, args=(2, X2, y2))]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join()
            for i, (X, ref) in {1: (X1, ref1), 2: (X2, ref2)}.items():
                if i not in res:
                    continue
                got = np.asarray(res[i].decision_function(X))
                want = np.asarray(ref.decision_function(X))
                if not np.allclose(got, want, rtol=1e-9, atol=1e-12):
                    out.append(f"run {i}: its predictions differ from a run with its own "
                               f"kernel instance ({spec['how']})")
    else:
        raise ValueError(what)
    return out, {}


# ---------------------------------------------------------------------------- plug-ins
def act_plugin(case, facts):
    import importlib.metadata

    import marginkit as mk
    from marginkit.plugins import Smoother, StoppingRule

    spec = case.spec
    what = spec["what"]
    X, y = build_data(spec.get("data", {"kind": "separable", "args": {"n": 20}}))
    if what in ("smoother_raises", "smoother_short", "smoother_long", "smoother_nan"):

        class Bad(Smoother):
            strong_convexity_norm = "l1"

            def argmin_simplex(self, g, mu, q=None):
                g = np.asarray(g, dtype=float)
                if what == "smoother_raises":
                    raise ZeroDivisionError("boom from the smoother")
                e = np.exp(-(g - g.min()) / mu)
                p = e / e.sum()
                if what == "smoother_short":
                    return p[:-3]
                if what == "smoother_long":
                    return np.concatenate([p, np.ones(10_000)])
                p = p.copy()
                p[0] = np.nan
                return p

            def value(self, p, q=None):
                return 0.0

        mk.register("smoother", "bad_smoother")(Bad)
        res = call(mk.solve, X, y, solver="snkp", smoother="bad_smoother", max_iter=50)
        if what == "smoother_nan":
            return result_problems(res, X, y, {"solver": "snkp", "kernel": "linear",
                                               "truth": "separable"}, facts), {}
        return [f"the smoother's failure ({what}) did not stop the run: {res.status}"], {}
    if what in ("rule_claims_separable", "rule_claims_infeasible", "rule_claims_certified",
                "rule_raises"):
        claim = {"rule_claims_separable": "separable", "rule_claims_infeasible": "infeasible",
                 "rule_claims_certified": "certified", "rule_raises": None}[what]

        class Liar(StoppingRule):
            status = claim or "separable"

            def check(self, state):
                if claim is None:
                    raise KeyError("boom from the rule")
                return claim

        mk.register("stopping", "liar")(Liar)
        solver = spec["solver"]
        Xd, yd = build_data(spec["data"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = call(mk.solve, Xd, yd, solver=solver, stop=["liar"], max_iter=30)
        if claim is None:
            return [f"the rule's exception was swallowed ({res.status})"], {}
        return result_problems(res, Xd, yd, {"solver": solver, "kernel": "linear",
                                             "truth": spec["data"].get("truth")}, facts), \
            {"status": res.status}
    if what == "entry_point_systemexit":
        tmp = case_tmpdir()
        with open(os.path.join(tmp, "mk_exit_plugin.py"), "w") as fh:
            fh.write("raise SystemExit(3)\n")
        sys.path.insert(0, tmp)
        eps = [importlib.metadata.EntryPoint("exiter", "mk_exit_plugin:Solver", "marginkit.solvers")]
        importlib.metadata.entry_points = lambda group=None: [e for e in eps if e.group == group]
        mk.reset_registry()
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                names = call(mk.list_plugins)["solver"]
        except SystemExit as exc:
            return [f"SystemExit({exc.code}) from an entry point escaped list_plugins"], {}
        out = []
        if "exiter" in names:
            out.append("the broken entry point was registered")
        if not any("exiter" in str(w.message) for w in caught):
            out.append("no warning names the broken entry point")
        if "fista" not in names:
            out.append("the built-ins were lost")
        return out, {}
    if what == "rename_builtin":
        cls = mk.get_plugin("solver", "fista")
        try:
            call(mk.register("solver", "alias_of_fista"), cls)
        except Raised as r:
            if isinstance(r.exc, (ValueError, TypeError)):
                return ([] if cls.name == "fista" else ["refused, but fista was renamed"]), {}
            raise
        out = []
        if cls.name != "fista":
            out.append(f"registering the built-in again renamed it: name {cls.name!r}")
        Xo, yo = overlapping(30, 3, seed=0)
        res = mk.solve(Xo, yo, solver="fista")
        if res.solver != "fista":
            out.append(f"a run of 'fista' reports solver {res.solver!r}")
        return out, {}
    if what == "kernel_wrong_shape":
        def wrong(A, B):
            return np.ones((A.shape[0], B.shape[0] + 1))

        call(mk.solve, X, y, solver="snkp", kernel=wrong, max_iter=20)
        return ["a callable kernel of the wrong shape was accepted"], {}
    raise ValueError(what)


# ---------------------------------------------------------------------------- smaller
class _ArrayDuck:
    """Array-like with ``__dask_graph__`` returning None (what an xarray DataArray backed
    by numpy does): numpy data, not a dask array."""

    def __init__(self, a):
        self._a = np.asarray(a)
        self.shape, self.dtype, self.ndim = self._a.shape, self._a.dtype, self._a.ndim

    def __array__(self, dtype=None, copy=None):
        return self._a if dtype is None else self._a.astype(dtype)

    def __dask_graph__(self):
        return None

    def __len__(self):
        return len(self._a)


def act_misc(case, facts):
    import marginkit as mk

    spec = case.spec
    what = spec["what"]
    X, y = separable(20, 3, seed=0)
    if what == "duck_dask_graph":
        res = call(mk.solve, _ArrayDuck(X), y, solver="snkp")
        return result_problems(res, X, y, {"solver": "snkp", "kernel": "linear",
                                           "truth": "separable"}, facts), {}
    if what == "xarray":
        import xarray

        res = call(mk.solve, xarray.DataArray(X), y, solver="snkp")
        return result_problems(res, X, y, {"solver": "snkp", "kernel": "linear"}, facts), {}
    if what == "huge_int_param":
        res = call(mk.solve, X, y, solver=spec["solver"], **{spec["param"]: 10**400})
        return [f"{spec['param']}=10**400 was accepted ({res.status})"], {}
    if what == "nan_label":
        yo = np.array([1.0] * 10 + [np.nan] * 10, dtype=object)
        res = call(mk.solve, X, yo, solver="snkp")
        return [f"labels with NaN were accepted (classes {res.classes_!r})"], {}
    if what == "memory_budget":
        Xb, yb = overlapping(spec.get("n", 3000), 4, seed=0)
        budget = spec.get("budget", 8 * 2**20)
        reset_peak()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = call(mk.solve, Xb, yb, solver=spec["solver"], kernel=spec["kernel"],
                       kernel_params=spec.get("kernel_params", {}), memory_budget=budget,
                       max_iter=5, **spec.get("params", {}))
        peak = peak_rss_increase()
        if peak > 2 * budget + 32 * 2**20:
            return [f"memory_budget={budget / 2**20:g} MiB, peak {peak / 2**20:.0f} MiB"], \
                {"peak_mib": peak / 2**20}
        return [], {"peak_mib": peak / 2**20, "status": res.status}
    raise ValueError(what)


ACTIONS = {"solve": act_solve, "kernel": act_kernel, "predict": act_predict,
           "estimator": act_estimator, "dask": act_dask, "load": act_load,
           "libsvm": act_libsvm, "libsvm_memory": act_libsvm_memory, "cli": act_cli,
           "tamper": act_tamper, "threads": act_threads, "plugin": act_plugin,
           "misc": act_misc}


# ============================================================================ memory
def _status_kib(key):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


_BASE_RSS = [0]


def reset_peak():
    """Start measuring the peak resident memory of this process (Linux: VmHWM is reset by
    writing 5 to /proc/self/clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass
    _BASE_RSS[0] = _status_kib("VmRSS")


def peak_rss_increase():
    return max(0, _status_kib("VmHWM") - _BASE_RSS[0]) * 1024


_TMP = [None]


def case_tmpdir():
    d = tempfile.mkdtemp(prefix="case-", dir=_TMP[0])
    return d


# ============================================================================ catalogue
def _sample(cases, keys, k, salt):
    """A deterministic sample of ``cases``: every value of each key in ``keys`` at least
    once, then the stablest-hashed others, up to ``k``."""
    chosen, seen = [], set()
    order = sorted(cases, key=lambda c: hashlib.sha1((salt + c.id).encode()).hexdigest())
    for c in order:
        vals = {(key, str(c.spec.get(key) if key in c.spec else c.spec.get("data", {}).get(key)))
                for key in keys}
        if vals - seen:
            chosen.append(c)
            seen |= vals
    for c in order:
        if len(chosen) >= k:
            break
        if c not in chosen:
            chosen.append(c)
    return chosen


#: the reproductions of the issue, always in the default run
PINNED = {
    "scale-1e+155-f64-dense-perceptron-linear", "scale-1e+300-f64-csr-perceptron-linear",
    "scale-1e-310-f64-dense-dcd-linear", "extreme-dcd-1e-310",
    "cancel-rbf-1e+06-f64-dense-nvn", "cancel-rbf-1e+06-f64-dense-snkpvn",
    "cancel-rbf-1e+06-f64-dense-isnkpvn", "cancel-rbf-1000-f32-dense-nvn",
    "cancel-kernel-rbf-1000-f32-dense", "cancel-kernel-rbf-1e+06-f64-dense",
    "nonpsd-precomputed-dense-nvn", "nonpsd-precomputed-dense-snkpvn",
    "nonpsd-precomputed-dense-isnkpvn", "nonpsd-callable-dense-isnkpvn",
    "extreme-fista_svm-C0.0001-mu1.0-random29-f64",
    "extreme-fista_svm-C1e-300-mu1e+300-random29-f64",
    "tikhonov-poly-t3-f64-dense", "tikhonov-poly-t3-f32-dense",
    "tikhonov-poly-heart-t3-f64", "tikhonov-poly-heart-t1-f64",
    "f32rbf-perceptron-0", "f32rbf-perceptron-1",
}


def catalogue():
    """Every case (``slow`` marks those outside the default sample)."""
    facts = solver_facts()
    solvers = sorted(facts)
    fam = {s: facts[s]["family"] for s in solvers}
    cases = []

    def add(group, items, keys, k):
        sample = {c.id for c in _sample(items, keys, k, group)} | PINNED
        for c in items:
            c.slow = c.id not in sample
        cases.extend(items)

    # --- 1. malformed CSR structure, every entry point ---------------------------------
    items = []
    for how in MALFORMATIONS:
        for s in solvers:
            for dt in ("f64", "f32"):
                items.append(Case(f"csr-solve-{how}-{s}-{dt}", "csr", "solve",
                                  {"solver": s, "malform": how, "max_iter": 50,
                                   "params": _classifier_params(s),
                                   "data": {"kind": "separable", "args": {"n": 20},
                                            "dtype": dt, "layout": "csr"}},
                                  expect="refuse", match=structure_match("X"), item=1))
    add("csr-solve", items, ("malform", "solver"), 12)
    items = []
    for how in MALFORMATIONS:
        for k in facts[solvers[0]]["kernels"] + [kk for kk in ("nystroem", "rff")]:
            if k in ("precomputed",):
                continue
            for bad in ("A", "B"):
                items.append(Case(f"csr-kernel-{how}-{k}-{bad}", "csr", "kernel",
                                  {"kernel": k, "malform": how, "bad": bad,
                                   "A": {"kind": "separable", "args": {"n": 10}},
                                   "B": {"kind": "separable", "args": {"n": 7, "seed": 3}}},
                                  expect="refuse", match=structure_match(bad), item=1))
    add("csr-kernel", list({c.id: c for c in items}.values()), ("malform", "kernel"), 9)
    items = []
    for how in MALFORMATIONS:
        for s, k in (("snkp", "linear"), ("snkp", "rbf"), ("fista", "linear"),
                     ("iterated_tikhonov", "rbf"), ("fista", "rff")):
            for method in ("predict", "decision_function"):
                items.append(Case(f"csr-predict-{how}-{s}-{k}-{method}", "csr", "predict",
                                  {"solver": s, "kernel": k, "malform": how, "method": method,
                                   "data": {"kind": "separable", "args": {"n": 16}}},
                                  expect="refuse", match=structure_match("X"), item=1))
    add("csr-predict", items, ("malform", "kernel"), 4)
    items = []
    for how in MALFORMATIONS:
        for est in ("PerceptronClassifier", "SVMClassifier", "IteratedTikhonovClassifier"):
            for stage in ("fit", "predict"):
                items.append(Case(f"csr-estimator-{how}-{est}-{stage}", "csr", "estimator",
                                  {"estimator": est, "malform": how, "stage": stage,
                                   "params": {"max_iter": 100},
                                   "data": {"kind": "separable", "args": {"n": 20}}},
                                  expect="refuse", match=structure_match("X"), item=1))
    add("csr-estimator", items, ("malform", "estimator"), 4)
    try:
        from marginkit._dask import SUPPORTED_SOLVERS
        dask_solvers = sorted(SUPPORTED_SOLVERS)
    except ImportError:  # pragma: no cover
        dask_solvers = []
    items = []
    for how in MALFORMATIONS:
        for s in dask_solvers:
            items.append(Case(f"csr-dask-{how}-{s}", "csr", "dask",
                              {"solver": s, "malform": how, "max_iter": 50,
                               "params": _classifier_params(s),
                               "data": {"kind": "separable", "args": {"n": 24},
                                        "layout": "csr"}},
                              expect="refuse", match=structure_match("X"), item=1,
                              needs=("dask",)))
    add("csr-dask", items, ("malform", "solver"), 4)

    # --- 2. distance-kernel cancellation -----------------------------------------------
    items = []
    for k in ("rbf", "laplacian"):
        for off, dt in ((1e6, "f64"), (1e3, "f32"), (1e8, "f64")):
            for lay in ("dense", "csr"):
                for s in solvers:
                    if k not in facts[s]["kernels"] or fam[s] not in ("perceptron", "tikhonov"):
                        continue
                    items.append(Case(
                        f"cancel-{k}-{off:g}-{dt}-{lay}-{s}", "cancel", "solve",
                        {"solver": s, "kernel": k, "kernel_params": {"gamma": 1.0},
                         "params": _classifier_params(s), "truth": "separable",
                         "data": {"kind": "near_duplicates",
                                  "args": {"offset": off, "dtype": dt},
                                  "dtype": dt, "layout": lay}},
                        expect="honest", item=2))
                items.append(Case(
                    f"cancel-kernel-{k}-{off:g}-{dt}-{lay}", "cancel", "kernel",
                    {"kernel": k, "kernel_params": {"gamma": 1.0},
                     "A": {"kind": "near_duplicates", "args": {"offset": off, "dtype": dt},
                           "dtype": dt, "layout": lay},
                     "atol": 1e-4 if dt == "f32" else 1e-9},
                    expect="ok", item=2))
    for s in solvers:
        if fam[s] == "svm" and "nystroem" in facts[s]["kernels"]:
            items.append(Case(
                f"cancel-nystroem-rbf-1e6-{s}", "cancel", "solve",
                {"solver": s, "kernel": "nystroem",
                 "kernel_params": {"n_components": 6, "random_state": 0,
                                   "base_params": {"gamma": 1.0}},
                 "data": {"kind": "near_duplicates", "args": {"offset": 1e6}}},
                expect="honest", item=2))
    add("cancel", items, ("solver", "kernel"), 12)

    # --- 3. Gram matrices that are not PSD ---------------------------------------------
    items = []
    for s in solvers:
        if fam[s] not in ("perceptron", "tikhonov"):
            continue
        for lay in ("dense", "csr"):
            if "precomputed" in facts[s]["kernels"]:
                items.append(Case(
                    f"nonpsd-precomputed-{lay}-{s}", "nonpsd", "solve",
                    {"solver": s, "kernel": "precomputed", "gram": [[1.0, 2.0], [2.0, 1.0]],
                     "labels": [0, 1], "params": _classifier_params(s),
                     "data": {"kind": "separable", "layout": lay}},
                    expect="honest", match=PSD_MATCH, item=3))
            if "callable" in facts[s]["kernels"]:
                items.append(Case(
                    f"nonpsd-callable-{lay}-{s}", "nonpsd", "solve",
                    {"solver": s, "kernel": "callable", "kernel_params": {"function": "neg"},
                     "params": _classifier_params(s),
                     "data": {"kind": "overlapping", "args": {"n": 12}, "layout": lay}},
                    expect="honest", match=PSD_MATCH, item=3))
    add("nonpsd", items, ("solver",), 14)

    # --- 4. magnitudes near overflow / underflow ---------------------------------------
    items = []
    scales = [(1e154, "f64"), (1e155, "f64"), (1e200, "f64"), (1e300, "f64"), (1e-160, "f64"),
              (1e-310, "f64"),
              (1e19, "f32"), (1e30, "f32"), (1e-20, "f32"), (1e-40, "f32")]
    for sc, dt in scales:
        for lay in ("dense", "fortran", "csr"):
            for s in solvers:
                for k in ("linear", "rbf", "laplacian", "poly"):
                    if k not in facts[s]["kernels"]:
                        continue
                    items.append(Case(
                        f"scale-{sc:g}-{dt}-{lay}-{s}-{k}", "scale", "solve",
                        {"solver": s, "kernel": k, "params": _classifier_params(s),
                         "truth": "separable",
                         "data": {"kind": "separable", "args": {"n": 20}, "scale": sc,
                                  "dtype": dt, "layout": lay}},
                        expect="honest", match=SCALE_MATCH, item=4))
    add("scale", items, ("solver", "scale", "kernel"), 14)
    for s in dask_solvers:
        if fam[s] != "perceptron":
            continue
        cases.append(Case(f"scale-dask-1e155-{s}", "scale", "dask",
                          {"solver": s, "truth": "separable", "max_iter": 100,
                           "params": _classifier_params(s),
                           "data": {"kind": "separable", "args": {"n": 24}, "scale": 1e155}},
                          expect="honest", match=SCALE_MATCH, item=4, needs=("dask",),
                          slow=s not in ("nvn", "isnkpvn", "snkpvn")))

    # --- float32 data with rbf --------------------------------------------------------
    items = []
    for s in solvers:
        if fam[s] != "perceptron":
            continue
        for seed in range(4):
            items.append(Case(
                f"f32rbf-{s}-{seed}", "f32rbf", "solve",
                {"solver": s, "kernel": "rbf", "kernel_params": {"gamma": 0.5},
                 "truth": "separable", "params": _classifier_params(s),
                 "data": {"kind": "overlapping", "args": {"n": 40, "d": 3, "seed": seed},
                          "dtype": "f32", "scale": 10.0}},
                expect="honest", item=4))
    add("f32rbf", items, ("solver",), 8)

    # --- 5. C / mu extremes for the SVM family ----------------------------------------
    items = []
    extremes = [(1e-4, 1.0), (1e-300, 1e300), (1e300, 1.0), (None, 1e300), (1e-300, None),
                (1e300, None), (1e-12, None)]
    for s in solvers:
        if fam[s] != "svm":
            continue
        for C, mu in extremes:
            for kind, args in (("random29", {"seed": 29}), ("random33", {"seed": 33}),
                               ("overlapping", {"n": 40, "d": 3, "seed": 0})):
                for dt in ("f64", "f32"):
                    params = {}
                    if C is not None:
                        params["C"] = C
                    if mu is not None:
                        params["mu"] = mu
                    dk = "overlapping" if kind == "overlapping" else "random_problem"
                    items.append(Case(
                        f"extreme-{s}-C{C}-mu{mu}-{kind}-{dt}", "extreme", "solve",
                        {"solver": s, "params": params, "max_iter": 5000,
                         "data": {"kind": dk, "args": args, "dtype": dt}},
                        expect="honest", match=r"\bC\b|\bmu\b|scale|magnitude|\bX\b", item=5))
        items.append(Case(f"extreme-{s}-1e-310", "extreme", "solve",
                          {"solver": s, "max_iter": 2000,
                           "data": {"kind": "overlapping", "scale": 1e-310}},
                          expect="honest", match=SCALE_MATCH, item=5))
    add("extreme", items, ("solver",), 8)

    # --- 12. FISTA's error bound near 1e-12 (benchmark data) --------------------------------
    for name, needs in (("heart_scale", ()), ("ionosphere_scale", ("data:ionosphere_scale",))):
        # as read from the file: CSR (the issue's numbers)
        data = ({"kind": "heart_scale", "layout": "csr"} if name == "heart_scale"
                else {"kind": "libsvm", "args": {"name": name}, "layout": "csr"})
        for s in ("fista", "fista_svm", "dcd"):
            if s not in facts:
                continue
            cases.append(Case(
                f"bound-1e-12-{name}-{s}", "extreme", "solve",
                {"solver": s, "data": data, "max_iter": 200_000,
                 "stop": ["tolerance", {"tol": 1e-12, "attribute": "error_bound"}]},
                expect="honest", item=12, timeout=600, needs=needs,
                slow=(name, s) != ("heart_scale", "fista")))
            cases.append(Case(
                f"bound-fraction-0.9-{name}-{s}", "extreme", "solve",
                {"solver": s, "data": data, "max_iter": 200_000,
                 "stop": ["certified_points", {"fraction": 0.9}]},
                expect="honest", item=12, slow=True, timeout=600, needs=needs))

    # --- 6. iterated Tikhonov claims (poly and every other kernel) ---------------------
    items = []
    for s in solvers:
        if fam[s] != "tikhonov":
            continue
        for k in facts[s]["kernels"]:
            if k == "callable":
                continue
            for t in (1, 3):
                for dt in ("f64", "f32"):
                    for lay in ("dense", "csr"):
                        data = {"kind": "overlapping", "args": {"n": 40, "d": 3, "seed": 5},
                                "dtype": dt, "layout": lay}
                        if k == "spline":
                            data = {"kind": "overlapping", "args": {"n": 40, "d": 3, "seed": 5},
                                    "dtype": dt, "layout": lay, "scale": 0.3}
                        items.append(Case(
                            f"tikhonov-{k}-t{t}-{dt}-{lay}", "tikhonov", "solve",
                            {"solver": s, "kernel": k, "params": {"t": t},
                             "data": data, "status": "converged"},
                            expect="honest", item=6))
        for dt in ("f64", "f32"):
            for t in (1, 3):
                items.append(Case(
                    f"tikhonov-poly-heart-t{t}-{dt}", "tikhonov", "solve",
                    {"solver": s, "kernel": "poly", "params": {"t": t},
                     "data": {"kind": "heart_scale", "dtype": dt}},
                    expect="honest", item=6, slow=f"tikhonov-poly-heart-t{t}-{dt}" not in PINNED,
                    timeout=240))
    add("tikhonov", items, ("kernel",), 10)

    # --- 7. tampered certificates -------------------------------------------------------
    tampers = {
        "separator": ("alpha_negated", "alpha_vertex", "alpha_nan", "alpha_short",
                      "labels_flipped", "labels_outside", "kernel_swapped"),
        "separator_poly": ("alpha_unnormalized",),
        "separator_precomputed": ("alpha_unnormalized",),
        "infeasibility": ("p_off_simplex", "p_negative", "p_nan", "p_other", "eps_0.5",
                          "eps_1", "eps_5", "p_short", "labels_outside"),
        "certified": ("mask_wrong_point", "mask_all", "coef_negated", "intercept_shifted",
                      "r_out_of_box", "r_scaled", "mu_gamma_with_mask", "labels_outside",
                      "classes_swapped", "mask_empty", "mask_short", "mask_uncertified_point",
                      "coef_scaled", "mask_within_distance"),
        "certified_svm": ("mask_wrong_point", "coef_negated", "mu_gamma_with_mask",
                          "r_unbalanced"),
        "decrement": ("coef_prev_forged", "target_raised", "coef_scaled", "coef_nudged",
                      "coef_nudged_value_1"),
        "decrement_linear": ("coef_scaled", "coef_nudged", "coef_nudged_value_1",
                             "intercept_nudged"),
        "decrement_linear_csr": ("coef_nudged", "intercept_nudged"),
    }
    for kind, hows in tampers.items():
        for how in hows:
            cases.append(Case(f"tamper-{kind}-{how}", "tamper", "tamper",
                              {"kind": kind, "tamper": how}, expect="reject",
                              match=r"label|classes|\by\b|shape|length|\bp\b|alpha|mask|finite",
                              item=7))

    # --- 8. saved results -------------------------------------------------------------
    for how in ("predict", "score", "decision_function", "__class__", "__dict__",
                "certificate.verify", "certificate.check", "unknown_field", "deep",
                "support_index_high", "support_nonmonotone", "support_short", "declared_huge",
                "declared_huge_consistent",
                "plugin_unknown", "plugin_bad_params", "plugin_kind", "header_list",
                "missing_array"):
        cases.append(Case(f"load-{how}", "load", "load", {"tamper": how}, expect="refuse",
                          match=r"result|\.npz|header|field|key|support_|plug-?in|kernel|gamma|"
                                r"array|member|size|nest|deep",
                          item=8, memory=2 * 2**30))
    cases.append(Case("load-zero_bomb", "load", "load", {"tamper": "zero_bomb", "size": 2**31},
                      expect="refuse", match=r"member|size|large|limit|\.npz|result", item=8,
                      memory=1536 * 2**20, timeout=120))

    # --- 9. LIBSVM loader and CLI ------------------------------------------------------
    for name, spec, memory, slow in (
            ("nul128", {"file": "nul", "mib": 128, "name": "nul.gz"}, 1536 * 2**20, True),
            ("nul8", {"file": "nul", "mib": 8, "name": "nul.gz", "max_peak": 128 * 2**20},
             512 * 2**20, False),
            ("index_2_31", {"file": "huge_index", "index": 2**31 + 1}, MEMORY_CAP, False),
            ("index_2_63", {"file": "huge_index", "index": 2**63 + 5}, MEMORY_CAP, False),
            ("index_1e30", {"file": "huge_index", "index": 10**30}, MEMORY_CAP, False),
            ("garbage", {"file": "garbage", "seed": 1}, MEMORY_CAP, False),
            ("garbage_big", {"file": "garbage", "seed": 2, "size": 2**22}, MEMORY_CAP, False)):
        cases.append(Case(f"libsvm-{name}", "libsvm", "libsvm", spec,
                          expect="honest" if name == "index_2_31" else "refuse",
                          match=r"line|text|index|feature|compressed|int64|large|no samples",
                          item=9, memory=memory, slow=slow, timeout=180 if slow else CASE_TIMEOUT))
    cases.append(Case("libsvm-memory-bad-last-line", "libsvm", "libsvm_memory",
                      {"lines": 100_000, "factor": 4}, expect="ok", item=9, slow=True,
                      timeout=300, memory=4 * 2**30))
    cases.append(Case("libsvm-memory-bad-last-line-small", "libsvm", "libsvm_memory",
                      {"lines": 30_000, "factor": 4}, expect="ok", item=9, timeout=120))
    for name, spec in (("index_2_31", {"file": "huge_index", "index": 2**31 + 1}),
                       ("garbage", {"file": "garbage", "seed": 3}),
                       ("nul", {"file": "nul", "mib": 4, "name": "nul.gz"})):
        cases.append(Case(f"cli-fit-{name}", "libsvm", "cli", spec, expect="ok", item=9))

    # --- 10. concurrency -----------------------------------------------------------------
    for s in solvers:
        if fam[s] == "other" and s != "pegasos":
            continue
        params = {"t": 2} if fam[s] == "tikhonov" else {}
        cases.append(Case(f"threads-shared-{s}", "threads", "threads",
                          {"what": "shared_solver", "solver": s, "params": params},
                          expect="ok", item=10, env="threads",
                          slow=s not in ("fista", "dcd", "snkp", "iterated_tikhonov", "isnkpvn")))
    cases.append(Case("threads-blas-limit", "threads", "threads", {"what": "blas_limit"},
                      expect="ok", item=10, env="threads"))
    for how in ("user_refit", "second_run", "threads"):
        cases.append(Case(f"threads-nystroem-{how}", "threads", "threads",
                          {"what": "nystroem_refit", "how": how},
                          expect="ok", item=10, env="threads"))

    # --- 11. plug-ins ---------------------------------------------------------------------
    for what, match in (("smoother_raises", r"boom"),
                        ("smoother_short", r"smoother|length|shape|bad_smoother"),
                        ("smoother_long", r"smoother|length|shape|bad_smoother"),
                        ("smoother_nan", r"smoother|NaN|finite|bad_smoother")):
        cases.append(Case(f"plugin-{what}", "plugin", "plugin", {"what": what},
                          expect={"smoother_raises": "propagate",
                                  "smoother_nan": "honest"}.get(what, "refuse"),
                          match=match, item=11))
    for claim, data in (("separable", {"kind": "xor", "truth": "infeasible"}),
                        ("infeasible", {"kind": "separable", "args": {"n": 20},
                                        "truth": "separable"}),
                        ("certified", {"kind": "overlapping", "args": {"n": 30}})):
        for s in solvers:
            if claim == "certified" and fam[s] != "svm":
                continue
            if claim != "certified" and fam[s] != "perceptron":
                continue
            cases.append(Case(f"plugin-rule-claims-{claim}-{s}", "plugin", "plugin",
                              {"what": f"rule_claims_{claim}", "solver": s, "data": data},
                              expect="honest", match=r"liar|stopping|rule", item=11,
                              slow=s not in ("snkp", "nvn", "fista", "dcd", "perceptron")))
    cases.append(Case("plugin-rule-raises", "plugin", "plugin",
                      {"what": "rule_raises", "solver": "snkp",
                       "data": {"kind": "separable"}},
                      expect="propagate", match=r"boom", item=11))
    for what in ("entry_point_systemexit", "rename_builtin", "kernel_wrong_shape"):
        cases.append(Case(f"plugin-{what}", "plugin", "plugin", {"what": what},
                          expect="ok" if what != "kernel_wrong_shape" else "refuse",
                          match=r"shape|callable", item=11))

    # --- 13. smaller ----------------------------------------------------------------------
    cases.append(Case("misc-duck-dask-graph", "misc", "misc", {"what": "duck_dask_graph"},
                      expect="ok", item=13))
    cases.append(Case("misc-xarray", "misc", "misc", {"what": "xarray"}, expect="ok", item=13,
                      needs=("xarray",)))
    for s, p in (("fista", "C"), ("fista", "mu"), ("dcd", "C"), ("snkp", "max_iter"),
                 ("isnkpvn", "eps"), ("snkp", "time_limit")):
        cases.append(Case(f"misc-huge-int-{s}-{p}", "misc", "misc",
                          {"what": "huge_int_param", "solver": s, "param": p},
                          expect="refuse", match=rf"\b{p}\b", item=13))
    cases.append(Case("misc-nan-label", "misc", "misc", {"what": "nan_label"},
                      expect="refuse", match=r"\by\b.*NaN|NaN.*\by\b|label", item=13))
    for s, k, kp, params in (("iterated_tikhonov", "rbf", {}, {}),
                             ("fista", "rff", {"n_components": 4000, "random_state": 0}, {})):
        cases.append(Case(f"misc-memory-budget-{s}-{k}", "misc", "misc",
                          {"what": "memory_budget", "solver": s, "kernel": k,
                           "kernel_params": kp, "params": params, "n": 2000,
                           "budget": 8 * 2**20},
                          expect="honest", match=r"memory_budget|memory|GiB|MiB",
                          item=13, timeout=120))

    # --- statuses on clean data (item 2: a reference for every status) -------------------
    cases.extend(status_cases(facts))
    for s in dask_solvers:
        fam_s = fam[s]
        data = ({"kind": "separable", "args": {"n": 24}} if fam_s == "perceptron"
                else {"kind": "overlapping", "args": {"n": 40}})
        for lay in ("dense", "csr"):
            data = dict(data, layout=lay)
            cases.append(Case(f"status-dask-{s}-{lay}", "status", "dask",
                              {"solver": s, "data": data, "max_iter": 2000,
                               "params": {"t": 1} if fam_s == "tikhonov" else {},
                               "truth": "separable" if fam_s == "perceptron" else None},
                              expect="ok", item=2, needs=("dask",),
                              slow=(s, lay) not in (("snkp", "dense"), ("fista", "csr"),
                                                    ("iterated_tikhonov", "dense"))))
    ids = [c.id for c in cases]
    if len(ids) != len(set(ids)):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise AssertionError(f"duplicate case ids {dup[:5]}")
    return cases


def _classifier_params(s):
    return {"t": 1} if s == "iterated_tikhonov" else {}


def status_cases(facts):
    """Clean data for every status each solver can return, pinned (normal behaviour)."""
    out = []
    for s in sorted(facts):
        fam = facts[s]["family"]
        ks = facts[s]["kernels"]
        if fam == "perceptron":
            for k in ("linear", "rbf", "poly", "laplacian", "spline", "precomputed", "callable"):
                if k not in ks:
                    continue
                data = {"kind": "separable", "args": {"n": 24}}
                if k == "spline":
                    data["scale"] = 0.3
                out.append(Case(f"status-separable-{s}-{k}", "status", "solve",
                                {"solver": s, "kernel": k, "data": data, "truth": "separable",
                                 "status": "separable", "max_iter": 20000},
                                expect="ok", item=2, slow=k not in ("linear", "rbf")))
            for lay in ("csr", "fortran"):
                out.append(Case(f"status-separable-{s}-linear-{lay}-f32", "status", "solve",
                                {"solver": s, "data": {"kind": "separable", "args": {"n": 24},
                                                       "layout": lay, "dtype": "f32"},
                                 "truth": "separable", "status": "separable",
                                 "max_iter": 20000}, expect="ok", item=2, slow=True))
            if "dual_certificate" in str(_default_stop(s)):
                for data in ({"kind": "xor"}, {"kind": "duplicates"}):
                    out.append(Case(f"status-infeasible-{s}-{data['kind']}", "status", "solve",
                                    {"solver": s, "data": data,
                                     "status": "infeasible" if data["kind"] == "xor" else None,
                                     "max_iter": 100000}, expect="ok", item=2))
                out.append(Case(f"status-infeasible-{s}-eps1e-300", "status", "solve",
                                {"solver": s, "data": {"kind": "duplicates"},
                                 "params": {"delta" if s == "snkpvn" else "eps": 1e-300},
                                 "max_iter": 3000}, expect="honest", item=7,
                                match=r"\beps\b|\bdelta\b"))
            out.append(Case(f"status-max_iter-{s}", "status", "solve",
                            {"solver": s, "data": {"kind": "xor"}, "max_iter": 3,
                             "stop": ["max_iter", {"n": 3}], "status": "max_iter"},
                            expect="ok", item=2))
        elif fam == "svm":
            for k in ("linear", "nystroem", "rff"):
                if k not in ks:
                    continue
                out.append(Case(f"status-certified-{s}-{k}", "status", "solve",
                                {"solver": s, "kernel": k,
                                 "data": {"kind": "overlapping", "args": {"n": 40}},
                                 "status": "certified", "max_iter": 20000},
                                expect="ok", item=2, slow=k != "linear"))
            for lay, dt in (("csr", "f64"), ("dense", "f32"), ("fortran", "f64")):
                out.append(Case(f"status-certified-{s}-{lay}-{dt}", "status", "solve",
                                {"solver": s, "data": {"kind": "overlapping", "args": {"n": 40},
                                                       "layout": lay, "dtype": dt},
                                 "status": "certified", "max_iter": 20000},
                                expect="ok", item=2, slow=True))
            out.append(Case(f"status-certified-{s}-fraction", "status", "solve",
                            {"solver": s, "data": {"kind": "overlapping", "args": {"n": 40}},
                             "stop": ["certified_points", {"fraction": 0.5}],
                             "status": ["certified", "max_iter"], "max_iter": 20000},
                            expect="ok", item=2))
            out.append(Case(f"status-max_iter-{s}", "status", "solve",
                            {"solver": s, "data": {"kind": "overlapping", "args": {"n": 40}},
                             "max_iter": 2, "stop": ["max_iter", {"n": 2}],
                             "status": "max_iter"}, expect="ok", item=2))
            if s == "dcd":
                out.append(Case("status-converged-dcd-liblinear", "status", "solve",
                                {"solver": s, "data": {"kind": "overlapping", "args": {"n": 40}},
                                 "stop": ["liblinear", {"tol": 0.1}], "status": "converged",
                                 "max_iter": 1000}, expect="ok", item=2))
        elif fam == "tikhonov":
            for k, extra in (("linear", {}), ("rbf", {}), ("linear", {"fit_intercept": True}),
                             ("rbf", {"n_components": 12}), ("nystroem", {}), ("laplacian", {})):
                if k not in ks:
                    continue
                for t in (1, 3):
                    tag = "-".join(f"{a}{b}" for a, b in extra.items())
                    out.append(Case(f"status-converged-{s}-{k}-t{t}{'-' + tag if tag else ''}",
                                    "status", "solve",
                                    {"solver": s, "kernel": k, "params": {"t": t, **extra},
                                     "data": {"kind": "overlapping", "args": {"n": 40}},
                                     "status": "converged"}, expect="ok", item=2,
                                    slow=bool(extra) and t == 3))
            out.append(Case(f"status-max_iter-{s}", "status", "solve",
                            {"solver": s, "params": {"t": 3},
                             "data": {"kind": "overlapping", "args": {"n": 40}}, "max_iter": 2,
                             "status": "max_iter"}, expect="ok", item=2))
        else:
            out.append(Case(f"status-max_iter-{s}", "status", "solve",
                            {"solver": s, "data": {"kind": "overlapping", "args": {"n": 40}},
                             "status": "max_iter", "params": {"epochs": 5}}, expect="ok", item=2))
    return out


def _default_stop(s):
    import marginkit as mk

    return mk.get_plugin("solver", s)().default_stop


# ============================================================================ worker
def run_case(case, facts):
    """One case in this (forked) process: {"kind": "done"/"error"/"harness", ...}."""
    try:
        problems, info = ACTIONS[case.action](case, facts)
        return {"kind": "done", "problems": problems, "info": _jsonable(info)}
    except Raised as r:
        exc = r.exc
        return {"kind": "error", "type": type(exc).__name__,
                "value_or_type": isinstance(exc, (ValueError, TypeError)),
                "message": str(exc)[:2000],
                "chain": [f"{type(e).__name__}: {e}"[:300] for e in _chain(exc)]}
    except BaseException:  # noqa: BLE001 - a failure of the test harness itself
        return {"kind": "harness", "traceback": traceback.format_exc()[-4000:]}


def _chain(exc):
    seen = []
    while exc is not None and exc not in seen and len(seen) < 5:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def _jsonable(obj):
    try:
        json.dumps(obj)
        return obj
    except (TypeError, ValueError):
        return {k: str(v) for k, v in obj.items()}


def _fork_case(case, facts):
    """Run ``case`` in a forked child: its outcome, or a crash / hang / memory report."""
    import resource

    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            os.close(rfd)
            null = os.open(os.path.join(_TMP[0], f"{os.getpid()}.log"),
                           os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(null, 1)
            os.dup2(null, 2)
            vm = _status_kib("VmSize") * 1024
            try:
                resource.setrlimit(resource.RLIMIT_AS, (vm + case.memory, resource.RLIM_INFINITY))
            except (ValueError, OSError):
                pass
            out = run_case(case, facts)
            sys.stdout.flush()
            sys.stderr.flush()
            with open(os.path.join(_TMP[0], f"{os.getpid()}.log"), "rb") as fh:
                log = fh.read()[-3000:].decode("utf-8", "replace")
            out["stderr"] = log
            data = json.dumps(out).encode()
            view = memoryview(data)
            while view:
                k = os.write(wfd, view)
                view = view[k:]
        except BaseException:  # noqa: BLE001
            code = 3
        finally:
            os._exit(code)
    os.close(wfd)
    chunks, deadline, timed_out = [], time.monotonic() + case.timeout, False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([rfd], [], [], min(left, 1.0))
        if ready:
            chunk = os.read(rfd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    os.close(rfd)
    _, status = os.waitpid(pid, 0)
    log = ""
    try:
        with open(os.path.join(_TMP[0], f"{pid}.log"), "rb") as fh:
            log = fh.read()[-2000:].decode("utf-8", "replace")
    except OSError:
        pass
    if timed_out:
        return {"kind": "hang", "seconds": case.timeout, "stderr": log}
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return {"kind": "crash", "signal": signal.Signals(sig).name, "stderr": log}
    try:
        return json.loads(b"".join(chunks).decode())
    except ValueError:
        return {"kind": "crash", "signal": f"exit {os.WEXITSTATUS(status)} without a report",
                "stderr": log}


def worker_main(ids):
    """Run the cases ``ids`` (one JSON line per case on stdout)."""
    _TMP[0] = tempfile.mkdtemp(prefix="mk-hostile-")
    cases = {c.id: c for c in catalogue()}
    wanted = [cases[i] for i in ids]
    needs = {n for c in wanted for n in c.needs}
    import marginkit  # noqa: F401 - imported once, before forking
    import marginkit.sklearn  # noqa: F401
    import marginkit.cli  # noqa: F401
    if "dask" in needs:
        import dask.array  # noqa: F401
    facts = solver_facts()
    for case in wanted:
        t0 = time.monotonic()
        if any(not _importable(n) for n in case.needs):
            out = {"kind": "unavailable", "needs": list(case.needs)}
        else:
            out = _fork_case(case, facts)
        out["id"] = case.id
        out["seconds"] = time.monotonic() - t0
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
    import shutil

    shutil.rmtree(_TMP[0], ignore_errors=True)


def _importable(name):
    """An optional module is installed, or (``data:NAME``) a benchmark data set is found."""
    import importlib.util

    if name.startswith("data:"):
        from marginkit.datasets import find_data_file

        try:
            find_data_file(name[5:])
        except FileNotFoundError:
            return False
        return True
    return importlib.util.find_spec(name) is not None


#: environment of each worker kind: BLAS and OpenMP on one thread (the machine is shared;
#: threaded BLAS on a loaded machine is 100x slower), except for the concurrency cases
ENVS = {
    "default": {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
    "threads": {},
}


def run_cases(cases, extra_timeout=120.0):
    """Run ``cases`` in worker processes (one per environment); {id: outcome}."""
    results = {}
    by_env = {}
    for c in cases:
        by_env.setdefault(c.env, []).append(c)
    for env_name, group in by_env.items():
        env = dict(os.environ)
        for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env.pop(k, None)
        env.update(ENVS[env_name])
        env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
        budget = sum(c.timeout + 5 for c in group) + extra_timeout
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__)] + [c.id for c in group],
                                cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            out, err = proc.communicate(timeout=budget)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        for line in out.splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            results[rec["id"]] = rec
        for c in group:
            results.setdefault(c.id, {"kind": "worker", "stderr": err[-3000:],
                                      "returncode": proc.returncode})
    return results


def judge(case, outcome):
    """None when the outcome is acceptable for ``case``, else the reason it is not."""
    kind = outcome.get("kind")
    if kind == "unavailable":
        return None
    if kind == "crash":
        return f"the process died ({outcome['signal']}); stderr: {outcome.get('stderr', '')[-500:]}"
    if kind == "hang":
        return f"no answer within {outcome['seconds']:g} s (hang)"
    if kind == "harness":
        return f"test harness error:\n{outcome['traceback']}"
    if kind == "worker":
        return f"the worker process failed (rc {outcome.get('returncode')}): {outcome['stderr']}"
    if kind == "error":
        msg = f"{outcome['type']}: {outcome['message']}"
        if "Exception ignored" in outcome.get("stderr", ""):
            return "an exception was printed as 'Exception ignored'"
        if case.expect == "propagate":
            # the plug-in's own exception, or an error that carries it
            text = " ".join([outcome["message"]] + outcome.get("chain", []))
            return None if re.search(case.match, text) else f"raised {msg} without the plug-in's error"
        if case.expect == "ok":
            return f"raised {msg}"
        if not outcome["value_or_type"]:
            return f"raised {msg} (not a ValueError/TypeError)"
        if not re.search(case.match, outcome["message"]):
            return f"raised {msg}, which does not match {case.match!r}"
        return None
    problems = outcome.get("problems", [])
    if "Exception ignored" in outcome.get("stderr", ""):
        problems = problems + ["an exception was printed as 'Exception ignored': "
                               + outcome["stderr"][-400:]]
    if case.expect in ("refuse", "propagate") and not problems:
        return "returned without the expected refusal"
    if problems:
        return "; ".join(problems)
    return None


if __name__ == "__main__":
    worker_main(sys.argv[1:])
