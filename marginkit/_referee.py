"""What the SVM family's and iterated Tikhonov's referees share: row blocks and rounding.

The certificates of ``svm/_certificate.py`` (``CertifiedPointsCertificate``) and
``tikhonov/`` (``NewtonDecrementCertificate``) recompute their claims from the data in
float64, as sums over row blocks of X (a numpy array in C or F order, a scipy sparse
matrix, or a dask array whose row chunks are computed one at a time: X is never held
whole), and bound the rounding error of that recomputation (docs/svm.md section 6,
docs/tikhonov.md).

Rounding model (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed.,
sections 2.2 and 3.1): every float64 operation returns op(a, b)(1 + delta) with
|delta| <= u = 2^-53, plus an absolute error of at most eta = 2^-1075 when the result is
subnormal; a sum of k products, in any order and with or without fused multiply-adds, is
then within gamma_k * sum |terms| + k eta of its exact value, gamma_k = k u / (1 - k u).
"""
import math

import numpy as np
import scipy.sparse as sp

#: unit roundoff of float64
UNIT = 2.0 ** -53
#: the largest absolute error of a float64 operation whose result is subnormal (a bound:
#: half the smallest subnormal, counted as a whole one)
ETA = 2.0 ** -1074
#: row blocks of at most this many stored entries (bounded temporaries)
BLOCK_ENTRIES = 1 << 21
#: row blocks of a feature map (``RowBlocks``' ``row_width``) of at most this many
#: entries of the map (the referee holds a few such blocks: its rows and their bounds)
MAP_BLOCK_ENTRIES = 1 << 24
#: unit roundoff of long double (2^-64 on x87, 2^-113 for binary128, 2^-53 where long
#: double is float64): the IEEE formats round correctly. IBM's double-double (ppc64le,
#: 106 bits) does not: its sums err by a few 2^-106 of |a| + |b| (found by review), so
#: its unit is taken as 2^-100 there
_LONG = np.finfo(np.longdouble)
LONG_UNIT = float(_LONG.epsneg) if int(_LONG.nmant) in (52, 63, 112) else 2.0 ** -100


def gamma(k):
    """gamma_k = k u / (1 - k u) (Higham, Lemma 3.1); inf when k u >= 1/2."""
    ku = float(k) * UNIT
    return math.inf if ku >= 0.5 else ku / (1.0 - ku)


def gamma_long(k):
    """gamma_k in long double's unit roundoff ``LONG_UNIT``, for sums run in long double."""
    return k * LONG_UNIT / (1.0 - k * LONG_UNIT)


def scaled_norm(v, top=None, overwrite=False):
    """(||v||_2, a bound on its rounding error) without overflow or underflow.

    The entries are divided by the power of two at or above max |v_i| (exact), squared,
    summed and the square root scaled back: the computed norm N satisfies
    |N - ||v||| <= gamma_{n+2} N (Higham, section 3.1), plus 2 eta (eta = 2^-1074) for a
    norm near float64's subnormal range. Non-finite entries give inf, as
    does a norm beyond float64's range (finite entries near its largest number).
    ``top``: max |v_i| when the caller has it (NaN if an entry is NaN); ``overwrite``:
    v (a float64 vector) may be scaled in place, instead of into a fresh copy.
    """
    v = np.asarray(v, dtype=np.float64).ravel()
    if v.size == 0:
        return 0.0, 0.0
    top = float(np.max(np.abs(v))) if top is None else float(top)
    if not math.isfinite(top):
        return math.inf, math.inf
    if top == 0.0:
        return 0.0, 0.0
    e = math.frexp(top)[1]
    e = min(max(e, -1021), 1023)
    # exact (a power of two), entries in [-1, 1]
    w = np.ldexp(v, -e, out=v if overwrite else None)
    # the sum of squares by numpy's own loop, not BLAS: OpenBLAS hands a dot of more than
    # 10^4 entries to its worker threads, which then spin for a while and take the
    # second core from the OpenMP passes of whatever runs next (the next solve of a
    # one-vs-rest fit); the bound holds for any order of the sum
    root = math.sqrt(float(np.einsum("i,i->", w, w)))
    if math.frexp(root)[1] + e > 1024:
        return math.inf, math.inf  # the norm itself is beyond float64's range
    norm = math.ldexp(root, e)
    bound = gamma(v.size + 2) * norm * (1.0 + 4 * UNIT)
    if norm < 2.0 ** -969:
        # the scaling back to a subnormal norm, and the bound's own products, round to
        # 2^-1074 absolute, not relative (eta of Higham's model, twice)
        bound += 2 * ETA
    return norm, bound


def pow2_at_least(cm):
    """The power of two 2^e >= cm per entry (1 where cm is 0 or not finite), e clipped
    to [-1021, 1023] so that 2^e and 2^-e are finite (as ``solvers.svm._fast._pow2_at_least``)."""
    cm = np.asarray(cm, dtype=np.float64)
    _, e = np.frexp(cm)
    e = np.clip(e, -1021, 1023)
    out = np.ldexp(1.0, e)
    return np.where((cm > 0) & np.isfinite(cm), out, 1.0)


def _is_dask(X):
    return type(X) is not np.ndarray and hasattr(X, "__dask_graph__")


class UnreadableX(ValueError):
    """check_X's ``ValueError`` on X read by a check (a dask array's chunk that is not
    finite, say): a check raises it, where other ``ValueError`` of data that can be read
    but do not fit the claim are a rejected verdict."""


def known_row_chunks(X):
    """A dask array X with known row chunk sizes: X itself, or, for unknown sizes (what
    indexing by a dask mask leaves), a new array over the same chunks whose sizes are
    measured (a pass over them); the caller's array is left as it is. Every check reads
    such an X (the SVM kinds refused it and the Newton-decrement checks rejected or read
    it: found by review)."""
    if hasattr(X, "__dask_graph__") and any(np.isnan(c) for axis in X.chunks[:2]
                                            for c in axis):  # rows, or columns
        X = X.map_blocks(lambda b: b, dtype=X.dtype)
        X.compute_chunk_sizes()
    return X


class MapRefused(ValueError):
    """A feature map's ``ValueError`` on rows of X that were read (X of another width
    than the map's, say): data that do not fit a claim, which a check rejects."""


def read_X(X, row_offset=0):
    """``check_X(X)``, its ``ValueError`` as ``UnreadableX`` (``row_offset``: X is a row
    block of a larger matrix, the rows its errors name are counted from there)."""
    from ._validation import check_X

    try:
        return check_X(X, row_offset=row_offset)
    except UnreadableX:
        raise
    except ValueError as exc:
        raise UnreadableX(str(exc)) from None


class RowBlocks:
    """X as a sequence of row blocks (float64 C-ordered arrays, or CSR matrices as stored).

    Parameters
    ----------
    X : ndarray (C or F order), scipy sparse matrix or dask array, float32/float64
        In-memory arrays are cut into blocks of at most ``BLOCK_ENTRIES`` stored entries
        (one block when X is small); a dask array is read one row chunk at a time (its
        column chunks merged), so the referee never holds all of X.
    fmap : callable or None
        A feature map applied to every block (a kernel approximation's fitted map); the
        blocks are then the rows of Phi(X).
    native : bool
        Without a feature map, yield float32 blocks as stored (dense in C order, CSR as
        is) instead of float64 copies: for kernels that read each entry as its float64
        value (exact), so the numbers are those of the copies without writing them.
    kernel : Kernel or None
        Instead of ``fmap``: a kernel whose rows are read as a referee reads them
        (``certificates.referee_rows``), with a bound e_i >= ||w * (Phi~_i - Phi(x_i))||
        on each row's distance to the exact map, kept in ``row_error`` (w: the column
        weights ``error_weights``, 1 while they are None; set them between passes).
    row_width : int or None
        The width of the blocks yielded (a map's number of features): the blocks are
        cut to hold at most ``MAP_BLOCK_ENTRIES`` of them too.

    Attributes
    ----------
    n : number of rows; ``width`` : X's number of columns (None when a dask array does
    not know it); ``chain`` : the longest summation chain of a column sum over the
    blocks (rows of the largest block plus the number of blocks), the k of the gamma_k
    bounds of sums over rows; ``row_error`` : with a ``kernel`` whose rows carry a
    rounding bound, the n-vector of the bounds e_i of the rows read so far (None
    otherwise: rows as computed).
    """

    def __init__(self, X, fmap=None, max_entries=BLOCK_ENTRIES, native=False, kernel=None,
                 row_width=None):
        from ._validation import check_X

        self.fmap = fmap
        self.kernel = kernel
        self.native = bool(native) and fmap is None and kernel is None
        self._cache = None
        self._cache_err = None
        self.row_error = None
        self.error_weights = None
        self._noted = None  # the weights of the bounds in row_error (one cached block)
        if _is_dask(X):
            if X.ndim != 2:
                raise ValueError(f"X must be 2-D, got a {X.ndim}-D dask array")
            from ._validation import without_empty_row_chunks

            X = known_row_chunks(X)
            if len(X.chunks[1]) > 1:
                X = X.rechunk({1: -1})

            X = without_empty_row_chunks(X)
            self._dask = X
            self._bounds = np.concatenate([[0], np.cumsum(X.chunks[0])]).astype(np.int64)
            self.X = None
            d = X.shape[1]
            self.width = int(d) if d == d else None  # NaN: unknown column chunk sizes
        else:
            self._dask = None
            X = check_X(X)
            self.X = X
            n, d = X.shape
            self.width = int(d)
            per_row = max(1.0, (X.nnz / max(n, 1)) if sp.issparse(X) else float(d),
                          float(row_width or 0) * (max_entries / MAP_BLOCK_ENTRIES))
            rows = max(1, int(max_entries // per_row))
            if sp.issparse(X) and X.nnz > max_entries:
                # blocks of about max_entries stored entries each, from row 0 (the cut at
                # entry 0 is the last of any leading empty rows: those rows start block 0),
                # and of at most ``rows`` rows when a map's rows are wider (found by
                # review: 262,154 rows of 400 features in one block)
                cuts = np.searchsorted(X.indptr, np.arange(0, X.nnz, max_entries), side="right") - 1
                extra = np.arange(0, n, rows) if row_width else []
                self._bounds = np.unique(np.concatenate([[0], cuts, extra, [n]])).astype(np.int64)
            else:
                self._bounds = np.unique(np.concatenate([np.arange(0, n, rows), [n]])).astype(np.int64)
        self.n = int(self._bounds[-1])
        sizes = np.diff(self._bounds)
        self.n_blocks = int(sizes.size)
        self.chain = int(sizes.max(initial=0)) + self.n_blocks

    def _raw(self, k):
        from ._validation import check_chunk_shape

        lo, hi = int(self._bounds[k]), int(self._bounds[k + 1])
        if self._dask is not None:
            B = self._dask.blocks[k, 0].compute()  # a chunk is read here only
            try:
                check_chunk_shape(np.shape(B), (hi - lo, self._dask.shape[1]), k)
            except ValueError as exc:
                raise UnreadableX(str(exc)) from None
            B = read_X(B, lo)
        elif self.n_blocks == 1:
            B = self.X
        else:
            B = self.X[lo:hi]
        return lo, hi, B

    def __iter__(self):
        if self._cache is not None:
            if self._cache_err is not None and self._noted is not self.error_weights:
                # (the bounds of the same weights are those already noted)
                self._note_error(self._cache_err, *self._cache[:2])
            yield self._cache
            return
        for k in range(self.n_blocks):
            lo, hi, B = self._raw(k)
            B, err = self._prepare(B, lo, hi)
            if self.n_blocks == 1 and self._dask is None and \
                    (self.fmap is not None or self.kernel is not None):
                # one block: Phi(X) (and its entry bounds) once for every pass
                self._cache, self._cache_err = (lo, hi, B), err
            yield lo, hi, B

    def _note_error(self, err, lo, hi):
        if self.row_error is None:
            self.row_error = np.zeros(self.n)
        self.row_error[lo:hi] = row_bounds(err, self.error_weights)
        self._noted = self.error_weights

    def map(self, fn, per_block=(), common=()):
        """``[fn(B, *v_b, *common) for each block B]`` in block order, ``v_b`` the block's
        slices of the n-vectors ``per_block`` (the interface the certificates' passes share
        with the Dask backend's chunk pools, which run ``fn`` where the chunks are held)."""
        return [fn(B, *[v[lo:hi] for v in per_block], *common) for lo, hi, B in self]

    @property
    def n_samples(self):
        return self.n

    def _prepare(self, B, lo, hi):
        """(the block as yielded, its entry bounds or None)."""
        from ._validation import check_X

        if self.native and B.dtype in (np.float32, np.float64):
            if sp.issparse(B) or B.flags.c_contiguous:
                return B, None
            return np.ascontiguousarray(B), None
        B = float64_block(B)
        if self.kernel is not None:
            try:
                Phi, err = referee_rows(self.kernel, B)
            except ValueError as exc:  # X was read: the map refuses these data
                if isinstance(exc, (MapRefused, UnreadableX)):
                    raise
                raise MapRefused(f"the feature map refuses X: {exc}") from None
            Phi = float64_block(check_X(Phi, name="feature_map(X)"))
            if err is not None:
                self._note_error(err, lo, hi)
            return Phi, err
        if self.fmap is not None:
            from .plugins import _frozen, checked_features

            view = _frozen(B)
            try:
                Phi = self.fmap(view)
            except ValueError as exc:  # X was read: the map refuses these data
                raise MapRefused(f"the feature map refuses X: {exc}") from None
            Phi = checked_features(B if Phi is view else Phi, B, "the feature map")
            B = float64_block(check_X(Phi, name="feature_map(X)"))
        return B, None


def map_rows(kernel, X):
    """``kernel.feature_map(X)``, 2-D with one row per row of X (``ValueError`` naming the
    kernel otherwise: a map assigned to an instance is not guarded as a plug-in's methods
    are, and a matrix of other rows would be read with X's labels)."""
    from .plugins import _frozen, checked_features

    if type(kernel).__module__.partition(".")[0] == "marginkit":
        return checked_features(kernel.feature_map(X), X, f"kernel {type(kernel).__name__}")
    # a plug-in's map however it is reached (a property, an instance's attribute: not
    # guarded as its class's methods are) reads X through a read-only view; an identity
    # map gets X back (found by review: predict and verify let such a map write into X)
    view = _frozen(X)
    out = kernel.feature_map(view)
    return checked_features(X if out is view else out, X, f"kernel {type(kernel).__name__}")


def feature_rows(kernel, X, max_entries=1 << 18):
    """Phi(X) as the solvers and the referees compute it: the linear kernel's map is X as
    given (float32 data stay float32, the solvers' fast path); any other feature map is
    evaluated on float64 rows (``float64_block``), so a solver certifies the problem its
    referee checks whatever X's dtype. The rows are converted one block of at most
    ``max_entries`` stored entries at a time (no float64 copy of a float32 X), after an
    unfitted map is fitted on all of X."""
    from .kernels.builtin import LinearKernel

    if isinstance(kernel, LinearKernel):
        from .kernels.builtin import _LINEAR_DEFINING

        own = [name for name in _LINEAR_DEFINING if name in getattr(kernel, "__dict__", ())]
        if own:
            raise TypeError(f"this LinearKernel has {', '.join(own)} set on the instance: the "
                            "linear kernel is the identity map wherever marginkit meets one; "
                            "register a marginkit.plugins.Kernel for another kernel")
        return map_rows(kernel, X)
    if getattr(kernel, "fitted", True) is False:
        kernel.fit(X)  # on every row (fitted lazily, a map would fit on the first block)
    Phi = _all_feature_rows(kernel, X, max_entries)
    if type(kernel).__module__.partition(".")[0] != "marginkit":
        if sp.issparse(Phi):
            from ._validation import checked_csr

            # its structure checked before scipy's indexing reads it (C++ that trusts it)
            Phi = checked_csr(Phi, "feature_map(X)")
        check_map_agrees(kernel, X, Phi)
    return Phi


#: rows of X on which a plug-in's map is compared with its kernel function
MAP_CHECK_ROWS = 256


#: how far a plug-in's kernel function may be from its map's inner products, relative to
#: sqrt(s_i s_j) (``check_map_agrees``); the runs, the referees and ``predict`` of its
#: models read the map, so the function is held to the map within this much only
MAP_RTOL = 1e-6


def plugin_map(kernel):
    """Whether ``kernel`` is a plug-in (not one of marginkit's) with a feature map: the
    runs read its map, and so do ``predict`` of its models and the referee."""
    return getattr(kernel, "feature_map", None) is not None and \
        type(kernel).__module__.partition(".")[0] != "marginkit"


def _map_disagreement(kernel, K, G, scale, where):
    """``ValueError`` naming ``kernel`` at the first entry where K and G = <Phi, Phi>
    differ by more than ``MAP_RTOL`` ``scale`` (``where(index)``: the two rows of X it
    is), if any."""
    bad = np.abs(K - G) > MAP_RTOL * scale + 1e-300
    if np.any(bad):
        idx = np.unravel_index(int(np.argmax(bad)), np.shape(bad))
        a, b = where(idx)
        raise ValueError(
            f"kernel {type(kernel).__name__}: feature_map disagrees with the kernel function "
            f"on X: K(x_{a}, x_{b}) = {K[idx]:.9g} but <Phi(x_{a}), Phi(x_{b})> = "
            f"{G[idx]:.9g}; a kernel's map must satisfy K(A, B) = feature_map(A) @ "
            "feature_map(B).T")


def check_map_agrees(kernel, X, Phi, max_entries=1 << 18):
    """``ValueError`` naming the plug-in ``kernel`` when its feature map ``Phi`` (of X's
    rows: a dense matrix, or CSR whose structure has been checked) disagrees with its
    kernel function: |K(x_i, x_j) - <Phi_i, Phi_j>| above ``MAP_RTOL`` sqrt(s_i s_j), s_i the
    larger of K(x_i, x_i) and ||Phi_i||^2, on every pair of up to ``MAP_CHECK_ROWS``
    rows spread evenly over X and, when the plug-in has a ``diag`` of its own, on the
    diagonal of every row (evaluated on float64 row blocks of at most ``max_entries``
    stored entries). The solvers work on Phi, the referee and ``predict`` read one or
    the other (found by review: a map that dropped a column the kernel function read
    gave an "infeasible" certificate for separable data, and models whose ``predict``
    missed 40% of the training points). A kernel function (or ``diag``) that raises on
    these rows (not implemented, written for another layout or for state the map does
    not need) is not compared: the run reads only the map. Only the rows compared are
    converted to float64."""
    from .linalg._norms import row_sqnorms
    from .plugins import Kernel

    n = X.shape[0]
    if n == 0:
        return
    rows = np.unique(np.linspace(0, n - 1, min(n, MAP_CHECK_ROWS)).astype(np.int64))
    P = Phi[rows] if sp.issparse(Phi) else np.asarray(np.asarray(Phi)[rows], dtype=np.float64)
    G = P @ P.T
    G = np.asarray(G.toarray() if sp.issparse(G) else G, dtype=np.float64)
    try:
        A = float64_block(X[rows])
        K = np.asarray(kernel(A, A), dtype=np.float64)
    except Exception:  # a function that cannot evaluate these rows: nothing to compare
        K = None
    if K is not None and K.shape == G.shape:
        sd = np.sqrt(np.maximum(np.abs(np.diagonal(K)), np.abs(np.diagonal(G))))
        _map_disagreement(kernel, K, G, np.outer(sd, sd),
                          lambda idx: (rows[idx[0]], rows[idx[1]]))
    if getattr(type(kernel), "diag", None) is Kernel.diag:
        return  # the default diag evaluates the function row by row: not on every row
    per_row = (X.nnz / n) if sp.issparse(X) else float(X.shape[1])
    step = max(1, int(max_entries // max(1.0, per_row)))
    try:
        kd = np.concatenate([np.asarray(kernel.diag(float64_block(X[lo:lo + step])),
                                        dtype=np.float64).ravel() for lo in range(0, n, step)])
    except Exception:
        return
    if kd.shape != (n,):
        return  # the solvers' own checks of diag name it
    gd = row_sqnorms(Phi if sp.issparse(Phi) else np.asarray(Phi))
    _map_disagreement(kernel, kd, gd, np.maximum(np.abs(kd), np.abs(gd)),
                      lambda idx: (idx[0], idx[0]))


def _all_feature_rows(kernel, X, max_entries):
    """``feature_rows``' Phi(X), one block of rows at a time."""
    n = X.shape[0]
    per_row = (X.nnz / max(n, 1)) if sp.issparse(X) else float(X.shape[1])
    rows = max(1, int(max_entries // max(1.0, per_row)))
    as_is = X.dtype == np.float64 and (sp.issparse(X) or X.flags.c_contiguous)
    if n <= rows or as_is:
        return map_rows(kernel, float64_block(X))
    first = map_rows(kernel, float64_block(X[:rows]))
    if sp.issparse(first):
        return sp.vstack([first] + [map_rows(kernel, float64_block(X[lo:lo + rows]))
                                    for lo in range(rows, n, rows)], format="csr")
    out = np.empty((n,) + first.shape[1:], dtype=first.dtype)
    out[:rows] = first
    del first
    for lo in range(rows, n, rows):
        part = map_rows(kernel, float64_block(X[lo:lo + rows]))
        if np.shape(part)[1:] != out.shape[1:]:  # (broadcast silently: found by review)
            raise ValueError(f"kernel {type(kernel).__name__}: feature_map returned "
                             f"{np.shape(part)[1]} features for rows {lo}.., "
                             f"{out.shape[1]} for the first rows")
        out[lo:lo + rows] = part
    return out


def float64_block(B):
    """A row block in float64: dense C-ordered, or CSR with its structure as stored. A
    feature map is evaluated on float64 rows (a float32 block would make Phi(X) float32,
    whose rounding the referees' float64 bounds do not cover)."""
    if sp.issparse(B):
        return B if B.dtype == np.float64 else B.astype(np.float64)
    if B.dtype != np.float64 or not B.flags.c_contiguous:
        return np.ascontiguousarray(B, dtype=np.float64)
    return B


def absolute(B):
    """|B| entrywise (a CSR block keeps its structure)."""
    if sp.issparse(B):
        return sp.csr_matrix((np.abs(B.data), B.indices, B.indptr), shape=B.shape)
    return np.abs(B)


def row_lengths(B):
    """Stored entries per row of the block (the k of a row's dot-product bound)."""
    if sp.issparse(B):
        return np.diff(B.indptr)
    return np.full(B.shape[0], B.shape[1], dtype=np.int64)


def stopping_rules(stop, default_stop):
    """The stopping rules of a run's configuration as instances (``Config.stop``, or its
    saved dict form; ``default_stop`` when it is None), or None when an entry cannot be
    read back (a rule instance that a saved configuration keeps only as its repr)."""
    from ._config import StopSpec
    from ._registry import REGISTRIES
    from .plugins import StoppingRule

    try:
        specs = StopSpec()(default_stop if stop is None else stop, "stop", "config")
    except (TypeError, ValueError):
        return None
    names = REGISTRIES["stopping"].names()
    rules = []
    for spec in specs:
        if isinstance(spec, StoppingRule):
            rules.append(spec)
            continue
        name, params = (spec, {}) if isinstance(spec, str) else spec
        if name not in names:
            return None
        rules.append(REGISTRIES["stopping"].get(name)(**params))
    return rules


# ---------------------------------------------------------------- a map's rows, with bounds
def _features(kernel, Xb):
    """The block's features Phi(X_b) in float64 (validated: dense or canonical CSR)."""
    from ._validation import check_X

    Xb = float64_block(check_X(Xb, allow_empty=True))
    try:
        Phi = map_rows(kernel, Xb)
    except MapRefused:
        raise
    except ValueError as exc:  # X was read: the map refuses these data (another width)
        raise MapRefused(f"the feature map refuses X: {exc}") from None
    return float64_block(check_X(Phi, name="feature_map(X)", allow_empty=True))


def row_bounds(err, weights=None):
    """Per row of an entry bound ``err`` (``referee_rows``), a bound e_i >= ||w * (Phi~_i
    - Phi(x_i))||_2 for non-negative column ``weights`` w (1 when None): the row norm of
    w * err with its own rounding. Entries 0 * inf count as inf."""
    k = err.shape[1]
    e = np.empty(err.shape[0])
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        for a in range(0, err.shape[0], 4096):  # (bounded temporaries)
            W = err[a:a + 4096] if weights is None else err[a:a + 4096] * weights
            e[a:a + 4096] = np.sqrt(np.einsum("ij,ij->i", W, W))
        # rows whose sum of squares may have underflowed, overflowed or is NaN: again,
        # scaled by their largest entry (NaN: 0 * inf, counted as inf)
        redo = np.flatnonzero(~((e > 1e-140) & (e < 1e140)))
        if redo.size:
            V = err[redo] if weights is None else err[redo] * weights
            V = np.where(np.isnan(V), np.inf, V)
            top = np.max(V, axis=1, initial=0.0)
            safe = np.where((top > 0) & np.isfinite(top), top, 1.0)
            Q = V / safe[:, None]
            e[redo] = top * np.sqrt(np.einsum("ij,ij->i", Q, Q))
        e = e * (1 + gamma(k + 8)) + 8 * ETA
    return np.where(np.isnan(e), np.inf, e)


def referee_rows(kernel, Xb):
    """The block's features as a referee reads them, and per entry a bound on
    |Phi~_ij - Phi(x_i)_j|, the distance to the exact map of the fit's stored numbers
    (None for a map without rounding of its own: the identity of the linear kernel, a
    plug-in's map; ``row_bounds`` turns it into row norms). An approximation gives its
    rows with that bound (``careful_features``:
    Nystroem's K(x, C) by the base kernel's careful path times the normalization P, or
    ``feature_rounding`` of the map's rows: random Fourier features' phases x . w + b).
    Found by review: the referees took the rows of a Nystroem map as exact data, and a
    "separable" claim with min G alpha = 2e-12 verified where the exact map's was -8e-12
    (|K_CC^{-1/2}| of 2.5e6 amplifying the rounding of K(X, C))."""
    # marginkit's own maps only: a subclass's or a plug-in's map is its own (found by
    # review: a subclass of the Nystroem kernel with another map was refereed on its
    # parent's, and a plug-in's careful_features was taken without a check)
    own = type(kernel).__module__.partition(".")[0] == "marginkit"
    careful = getattr(kernel, "careful_features", None) if own else None
    if careful is not None:
        from ._validation import check_X

        P, err = careful(float64_block(check_X(Xb, allow_empty=True)))
    else:
        P = _features(kernel, Xb)
        rounding = getattr(kernel, "feature_rounding", None) if own else None
        if rounding is None:
            return P, None
        err = rounding(Xb, P)
    return P, np.asarray(err, dtype=np.float64)
