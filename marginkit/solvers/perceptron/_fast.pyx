"""Cython block passes of the perceptron / von Neumann family (Ramdas & Pena 2014).

The n-vectors of a run live per row block: ``VertexBlock`` for the vertex methods
(perceptron, normalized perceptron, NKP, NVN; driver
``marginkit.solvers.perceptron.VertexIteration``), ``SmoothedBlock`` for the smoothed
family (driver ``marginkit.solvers.perceptron.SmoothedIteration``). G (the normalized
signed Gram) is only touched through a ``GramOperator``: ``matvec`` (G a), ``column``
(G e_j), ``fmatvec`` (S X w, for a column through w = s_j x_j on several blocks) and
``entries`` (a few G_ij, for the exact finish of ISNKPVN). The products G alpha and G p
are maintained by linearity, so each iteration costs one product with G (a column for the
vertex methods, one matvec for the smoothed ones);
G alpha is recomputed from scratch before a run may be declared separable, and G p
before ||p||_G may be declared below a tolerance.
"""
import numpy as np

from libc.math cimport INFINITY, exp, hypot, isfinite, sqrt
from libc.string cimport memcpy, memset

from marginkit.smoothers._smoothers cimport EntropySmoother, SimplexSmoother

cdef extern from *:
    """
    /* The two O(n) passes of a smoothed (SNKP) iteration, written so that they vectorize:
       eight interleaved partial sums and minima (a fixed order: every instruction set
       gives the same bits, contraction into FMA off), GCC on x86-64 Linux compiling SSE2,
       AVX2 and AVX-512 versions picked at load time. */
    #include <stddef.h>
    #include <math.h>
    #if defined(__GNUC__) && !defined(__clang__)
    #define MK_PF_NOCONTRACT __attribute__((optimize("fp-contract=off", "no-trapping-math")))
    #if defined(__x86_64__) && defined(__linux__)
    #define MK_PF_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
    #else
    #define MK_PF_CLONES
    #endif
    #else
    #define MK_PF_NOCONTRACT
    #define MK_PF_CLONES
    #endif

    /* x = c1 x + c2 y + c3 z and gx = c1 gx + c2 gy + c3 gz; returns x . gx, *gmin =
       min gx and *imin its first index (NaN entries ignored; +inf and 0 when there is no
       number) */
    MK_PF_CLONES MK_PF_NOCONTRACT
    static double mk_pf_combine3(double* restrict x, double* restrict gx,
                                 const double* restrict y, const double* restrict gy,
                                 const double* restrict z, const double* restrict gz,
                                 double c1, double c2, double c3, ptrdiff_t n,
                                 double* gmin, ptrdiff_t* imin)
    {
        /* lane j: the partial sum, minimum and first index of the minimum (as a double,
           exact below 2^53, so that the selects vectorize) of the entries i = j mod 8 */
        double s[8], m[8], ix[8], a, g, best;
        ptrdiff_t i, j, n8 = n - n % 8;
        for (j = 0; j < 8; j++) { s[j] = 0.0; m[j] = INFINITY; ix[j] = 0.0; }
        for (i = 0; i < n8; i += 8) {
            for (j = 0; j < 8; j++) {
                a = c1 * x[i + j] + c2 * y[i + j] + c3 * z[i + j];
                g = c1 * gx[i + j] + c2 * gy[i + j] + c3 * gz[i + j];
                x[i + j] = a;
                gx[i + j] = g;
                s[j] += a * g;
                ix[j] = g < m[j] ? (double)(i + j) : ix[j];
                m[j] = g < m[j] ? g : m[j];
            }
        }
        for (j = 0; i + j < n; j++) {
            a = c1 * x[i + j] + c2 * y[i + j] + c3 * z[i + j];
            g = c1 * gx[i + j] + c2 * gy[i + j] + c3 * gz[i + j];
            x[i + j] = a;
            gx[i + j] = g;
            s[j] += a * g;
            ix[j] = g < m[j] ? (double)(i + j) : ix[j];
            m[j] = g < m[j] ? g : m[j];
        }
        /* the global minimum, and the smallest first index among the lanes reaching it */
        best = m[0];
        for (j = 1; j < 8; j++) best = m[j] < best ? m[j] : best;
        *gmin = best;
        *imin = 0;
        if (best < INFINITY) {
            double first = (double)n;
            for (j = 0; j < 8; j++)
                if (m[j] == best && ix[j] < first) first = ix[j];
            *imin = (ptrdiff_t)first;
        }
        return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    }

    /* x = c1 x + c2 y and gx = c1 gx + c2 gy; returns x . gx */
    MK_PF_CLONES MK_PF_NOCONTRACT
    static double mk_pf_combine2(double* restrict x, double* restrict gx,
                                 const double* restrict y, const double* restrict gy,
                                 double c1, double c2, ptrdiff_t n)
    {
        double s[8], a, g;
        ptrdiff_t i, j, n8 = n - n % 8;
        for (j = 0; j < 8; j++) s[j] = 0.0;
        for (i = 0; i < n8; i += 8) {
            for (j = 0; j < 8; j++) {
                a = c1 * x[i + j] + c2 * y[i + j];
                g = c1 * gx[i + j] + c2 * gy[i + j];
                x[i + j] = a;
                gx[i + j] = g;
                s[j] += a * g;
            }
        }
        for (j = 0; i + j < n; j++) {
            a = c1 * x[i + j] + c2 * y[i + j];
            g = c1 * gx[i + j] + c2 * gy[i + j];
            x[i + j] = a;
            gx[i + j] = g;
            s[j] += a * g;
        }
        return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    }
    """
    double mk_pf_combine3(double* x, double* gx, const double* y, const double* gy,
                          const double* z, const double* gz, double c1, double c2, double c3,
                          Py_ssize_t n, double* gmin, Py_ssize_t* imin) noexcept nogil
    double mk_pf_combine2(double* x, double* gx, const double* y, const double* gy,
                          double c1, double c2, Py_ssize_t n) noexcept nogil
from marginkit.linalg._operator cimport FeatureOperator, GramOperator
from marginkit.utils._rows cimport csr_rows_t, row_start, row_stop

__all__ = ["VertexBlock", "seq_dot", "SmoothedBlock", "MinNormPoint", "csr_normalized_cross"]


def csr_normalized_cross(csr_rows_t X, const double[::1] inv, double[:, ::1] C):
    """C += X_n^T X_n for a CSR row block X (rows scaled by ``inv``), in float64: sum over
    rows of nnz_i^2 multiply-adds, without a scaled copy of X. Both orders of each pair of
    entries are added (duplicate column indices count correctly); C is symmetric up to
    round-off."""
    cdef Py_ssize_t i, a, b
    cdef double s, xa
    if inv.shape[0] != X.n or C.shape[0] != X.d or C.shape[1] != X.d:
        raise ValueError(f"csr_normalized_cross: X is {X.n} x {X.d}, inv has "
                         f"{inv.shape[0]} entries and C is {C.shape[0]} x {C.shape[1]}")
    with nogil:
        for i in range(X.n):
            # each entry scaled by 1/||x_i|| before the product: inv[i]^2 overflows for
            # rows of norm below 1e-154 whose scaled entries are of order 1
            s = inv[i]
            for a in range(row_start(X, i), row_stop(X, i)):
                xa = X.data[a] * s
                for b in range(row_start(X, i), row_stop(X, i)):
                    C[X.indices[a], X.indices[b]] += xa * (X.data[b] * s)


cdef inline Py_ssize_t _argmin(const double* x, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i, best = 0
    cdef double v = x[0]
    for i in range(1, n):
        if x[i] < v:
            v = x[i]
            best = i
    return best


cdef inline double _dot(const double* a, const double* b, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    cdef double acc = 0.0
    for i in range(n):
        acc += a[i] * b[i]
    return acc


cdef inline double _gnorm(double sq) noexcept nogil:
    return sqrt(sq) if sq > 0.0 else 0.0


def seq_dot(a, b):
    """a . b summed in index order (float64), as the blocks' own dot products."""
    cdef double[::1] x = np.ascontiguousarray(a, dtype=np.float64)
    cdef double[::1] z = np.ascontiguousarray(b, dtype=np.float64)
    if x.shape[0] == 0:
        return 0.0
    return _dot(&x[0], &z[0], x.shape[0])


cdef double[::1] _d_vector(w, Py_ssize_t d):
    """w as a float64 d-vector (the compiled passes read d entries of it)."""
    cdef double[::1] wv = np.ascontiguousarray(w, dtype=np.float64)
    if wv.shape[0] < d:
        raise ValueError(f"w has {wv.shape[0]} entries, the feature map has {d}")
    return wv


cdef class _Block:
    """What every block of the perceptron family holds: its Gram operator ``op`` (and
    ``fop``, the same operator when it is a ``FeatureOperator``), its rows ``offset ..
    offset + n`` of the problem, alpha, G alpha, p, G p and the best p, and the generic
    passes over them. Arrays are addressed by name (``_arrays``); indices the driver sees
    are global."""

    cdef GramOperator op
    cdef FeatureOperator fop
    cdef readonly Py_ssize_t n
    cdef readonly Py_ssize_t offset
    cdef double[::1] alpha
    cdef double[::1] ga
    cdef double[::1] p
    cdef double[::1] gp
    cdef double[::1] best_p
    cdef readonly object alpha_arr, ga_arr, p_arr, gp_arr, best_p_arr
    cdef dict _arrays

    def __init__(self, GramOperator op, Py_ssize_t offset, Py_ssize_t n_total):
        self.op = op
        self.fop = op if isinstance(op, FeatureOperator) else None
        self.n = op.n
        self.offset = offset
        self.alpha_arr = np.zeros(self.n)
        self.ga_arr = np.zeros(self.n)
        self.p_arr = np.full(self.n, 1.0 / n_total)
        self.gp_arr = np.zeros(self.n)
        self.best_p_arr = self.p_arr.copy()
        self.alpha = self.alpha_arr
        self.ga = self.ga_arr
        self.p = self.p_arr
        self.gp = self.gp_arr
        self.best_p = self.best_p_arr
        self._arrays = {"alpha": self.alpha_arr, "ga": self.ga_arr, "p": self.p_arr,
                        "gp": self.gp_arr, "best_p": self.best_p_arr}

    cdef inline Py_ssize_t _own(self, Py_ssize_t j) noexcept nogil:
        j -= self.offset
        return j if 0 <= j < self.n else -1

    def gram(self, src, dst):
        """dst = G src with the block's operator (one block: the whole G)."""
        cdef double[::1] a = self._arrays[src]
        cdef double[::1] out = self._arrays[dst]
        if self.n:
            with nogil:
                self.op.matvec(&a[0], &out[0])

    def primal(self, src):
        """X_c^T S_c src (d-vector; a ``FeatureOperator`` block)."""
        return self.fop.primal(self._arrays[src])

    def fdot(self, dst, w):
        """dst = S_c X_c w."""
        cdef double[::1] wv = _d_vector(w, self.fop.d)
        cdef double[::1] out = self._arrays[dst]
        if self.n:
            with nogil:
                self.fop.fmatvec(&wv[0], &out[0])

    def dot(self, a, b):
        cdef double[::1] x = self._arrays[a]
        cdef double[::1] z = self._arrays[b]
        if not self.n:
            return 0.0
        return _dot(&x[0], &z[0], self.n)

    def copy(self, dst, src):
        self._arrays[dst][:] = self._arrays[src]

    def margin_stats(self):
        """(min_i (G alpha)_i, its first global index, alpha . G alpha) over the block."""
        cdef Py_ssize_t i
        if not self.n:
            return INFINITY, -1, 0.0
        i = _argmin(&self.ga[0], self.n)
        return self.ga[i], i + self.offset, _dot(&self.alpha[0], &self.ga[0], self.n)


cdef class VertexBlock(_Block):
    """The rows of one block for the vertex methods of Ramdas & Pena 2014 (perceptron,
    normalized perceptron, NKP, NVN): alpha, G alpha, p, G p, the best p and the perceptron's
    mistake counts, and the block passes of an iteration. The driver
    (``marginkit.solvers.perceptron.VertexIteration``) holds the scalars and makes every
    decision; indices ``j`` are global (the block holds rows ``offset .. offset + n``).

    The column G e_j is ``op.column`` when ``w`` is None (one block holding all rows, any
    Gram operator), else S_c X_c w with w = s_j x_j (``row``, from the block holding j).
    """

    cdef double[::1] counts
    cdef double[::1] col
    cdef double[::1] sd
    cdef readonly object counts_arr

    def __init__(self, GramOperator op, Py_ssize_t offset, Py_ssize_t n_total):
        _Block.__init__(self, op, offset, n_total)
        self.counts_arr = np.zeros(self.n)
        self.counts = self.counts_arr
        self.col = np.zeros(max(self.n, 1))
        self.sd = np.ascontiguousarray(op.sqrt_diag, dtype=np.float64)
        self._arrays["counts"] = self.counts_arr

    cdef _fill_col(self, Py_ssize_t j, w):
        cdef double[::1] wv
        if not self.n:
            return
        if w is None:
            with nogil:
                self.op.column(j - self.offset, &self.col[0])
        else:
            wv = _d_vector(w, self.fop.d)
            with nogil:
                self.fop.fmatvec(&wv[0], &self.col[0])

    # -- generic pieces (names: alpha, ga, p, gp, best_p, counts) ----------------------
    def primal_over_sd(self, src):
        """X_c^T S_c (src / sqrt(K_ii)) (the perceptron's weight vector)."""
        return self.fop.primal(self._arrays[src] / np.asarray(self.sd))

    def row(self, Py_ssize_t j):
        """w = s_j x_j (d-vector) of the block's row j (global index)."""
        if self._own(j) < 0:
            raise ValueError(f"row {j} is not in this block")
        w = np.zeros(max(self.fop.d, 1))
        cdef double[::1] wv = w
        with nogil:
            self.fop.add_row(j - self.offset, 1.0, &wv[0])
        return w

    def add_row(self, Py_ssize_t j, double c, w):
        """w += c s_j x_j (in place; the block holds row j); returns w."""
        cdef double[::1] wv = w
        _d_vector(w, self.fop.d)
        if self._own(j) < 0:
            raise ValueError(f"row {j} is not in this block")
        with nogil:
            self.fop.add_row(j - self.offset, c, &wv[0])
        return w

    # -- perceptron (unnormalized Gram Gu; ga = Gu counts) --------------------------------
    def perc_stats(self):
        """(min (Gu c)_i, its first global index, min_i (Gu c)_i / sqrt(K_ii), c . Gu c,
        sqrt(K_jj) at that index)."""
        cdef Py_ssize_t i, imin
        cdef double m = INFINITY, v, sq
        if not self.n:
            return INFINITY, -1, INFINITY, 0.0, 0.0
        with nogil:
            imin = _argmin(&self.ga[0], self.n)
            for i in range(self.n):
                v = self.ga[i] / self.sd[i]
                if v < m:
                    m = v
            sq = _dot(&self.counts[0], &self.ga[0], self.n)
        return self.ga[imin], imin + self.offset, m, sq, self.sd[imin]

    def perc_update(self, Py_ssize_t j, w):
        """c_j += 1, alpha_j += sqrt(K_jj), Gu c += Gu e_j; then ``perc_stats``."""
        cdef Py_ssize_t i, jl = self._own(j)
        if jl >= 0:
            self.counts[jl] += 1.0
            self.alpha[jl] += self.sd[jl]
        self._fill_col(j, w)
        with nogil:
            for i in range(self.n):
                self.ga[i] += self.col[i]
        return self.perc_stats()

    def best_from_alpha(self, double alpha_sum):
        cdef Py_ssize_t i
        with nogil:
            for i in range(self.n):
                self.best_p[i] = self.alpha[i] / alpha_sum

    # -- NKP --------------------------------------------------------------------------
    def nkp_update(self, Py_ssize_t j, w, double t):
        """alpha = (1-t) alpha + t e_j, G alpha likewise, p = alpha, G p = G alpha; then
        ``margin_stats``."""
        cdef Py_ssize_t i, jl = self._own(j)
        self._fill_col(j, w)
        with nogil:
            for i in range(self.n):
                self.alpha[i] *= 1.0 - t
                self.ga[i] = (1.0 - t) * self.ga[i] + t * self.col[i]
        if jl >= 0:
            self.alpha[jl] += t
        self.sync_p()
        return self.margin_stats()

    def sync_p(self):
        """p = alpha, G p = G alpha."""
        if self.n:
            memcpy(&self.p[0], &self.alpha[0], self.n * sizeof(double))
            memcpy(&self.gp[0], &self.ga[0], self.n * sizeof(double))

    # -- normalized perceptron (feature space) -------------------------------------------
    def np_update(self, Py_ssize_t j, double t, w):
        """alpha = (1-t) alpha + t e_j, G alpha = S_c X_c w from scratch, p = alpha;
        (min G alpha, its first global index)."""
        cdef Py_ssize_t i, jl = self._own(j)
        cdef double[::1] wv = _d_vector(w, self.fop.d)
        if not self.n:
            return INFINITY, -1
        with nogil:
            for i in range(self.n):
                self.alpha[i] *= 1.0 - t
            if jl >= 0:
                self.alpha[jl] += t
            self.fop.fmatvec(&wv[0], &self.ga[0])
            memcpy(&self.p[0], &self.alpha[0], self.n * sizeof(double))
            i = _argmin(&self.ga[0], self.n)
        return self.ga[i], i + self.offset

    # -- NVN --------------------------------------------------------------------------
    def nvn_column(self, Py_ssize_t j, w):
        """G e_j into the block; (p . G p, (G p)_j, (G e_j)_j) (the last two 0 unless the
        block holds j)."""
        cdef Py_ssize_t jl = self._own(j)
        self._fill_col(j, w)
        if not self.n:
            return 0.0, 0.0, 0.0
        a = _dot(&self.p[0], &self.gp[0], self.n)
        if jl < 0:
            return a, 0.0, 0.0
        return a, self.gp[jl], self.col[jl]

    def nvn_update(self, Py_ssize_t j, double t):
        """p = (1-t) p + t e_j, G p likewise (with the column of ``nvn_column``); then
        ``nvn_sync``."""
        cdef Py_ssize_t i, jl = self._own(j)
        with nogil:
            for i in range(self.n):
                self.p[i] *= 1.0 - t
                self.gp[i] = (1.0 - t) * self.gp[i] + t * self.col[i]
        if jl >= 0:
            self.p[jl] += t
        return self.nvn_sync()

    def nvn_sync(self):
        """alpha = p, G alpha = G p; then ``margin_stats``."""
        if self.n:
            memcpy(&self.alpha[0], &self.p[0], self.n * sizeof(double))
            memcpy(&self.ga[0], &self.gp[0], self.n * sizeof(double))
        return self.margin_stats()


cdef class SmoothedBlock(_Block):
    """The rows of one block for the smoothed family (SNKP, SNKPVN, ISNKPVN of Ramdas &
    Pena 2014): alpha, G alpha, p, G p, v, G v, the prox-center q and the best p, and the
    block passes of an iteration. The driver (``marginkit.solvers.perceptron``) holds the
    scalars (k, mu, norms) and reduces the passes' partial results over the blocks.

    ``op`` is the block's Gram operator. With one block holding all rows, ``iterate``
    does a whole iteration in one nogil pass sequence (the smoother and G v included);
    with several blocks (a ``FeatureOperator`` each, G v = S_c X_c sum_b X_b^T S_b v_b),
    an iteration is ``combine`` (alpha, G alpha), the smoother's block pieces
    (``weights`` for the entropy, ``l2_raw`` / ``l2_eval`` / ``l2_final`` for l2),
    each returning X_c^T S_c v_c, and ``finish`` (G v, p, G p). With the entropy smoother
    v and G v are kept unnormalized (softmax weights shifted by the global minimum of
    G alpha) and scaled by the driver's ``vscale`` where they are used.
    """

    cdef SimplexSmoother sm
    cdef readonly bint entropy
    cdef double[::1] v
    cdef double[::1] gv
    cdef double[::1] q
    cdef readonly object v_arr, gv_arr, q_arr
    cdef object _sorted, _csum

    def __init__(self, GramOperator op, SimplexSmoother sm, q, Py_ssize_t offset,
                 Py_ssize_t n_total):
        _Block.__init__(self, op, offset, n_total)
        self.sm = sm
        # the entropy's softmax is inlined in the iteration (min of G alpha already known,
        # normalization folded into the p update)
        self.entropy = type(sm) is EntropySmoother
        self.v_arr = np.zeros(self.n)
        self.gv_arr = np.zeros(self.n)
        self.q_arr = np.full(self.n, 1.0 / n_total) if q is None \
            else np.array(q, dtype=np.float64)
        self.v = self.v_arr
        self.gv = self.gv_arr
        self.q = self.q_arr
        self._arrays.update(v=self.v_arr, gv=self.gv_arr, q=self.q_arr)

    # -- generic pieces (names: alpha, ga, p, gp, v, gv, q, best_p) -------------------
    def scale(self, name, double factor):
        a = self._arrays[name]
        a *= factor

    def set(self, name, values):
        self._arrays[name][:] = values

    def argmin_gp(self):
        """(min_i (G p)_i, its first index in the block)."""
        cdef Py_ssize_t i
        if not self.n:
            return INFINITY, 0
        i = _argmin(&self.gp[0], self.n)
        return self.gp[i], i

    # -- one block holding all rows --------------------------------------------------
    def smooth(self, double mu):
        """v = p_mu(alpha) = smoother.argmin(G alpha, mu, q), G v (one block)."""
        with nogil:
            self.sm.argmin(&self.ga[0], mu, &self.q[0], &self.v[0], self.n)
            self.op.matvec(&self.v[0], &self.gv[0])
        self.sm.check_error()  # a Python smoother's error, raised once the loop is done

    def iterate(self, double c1, double c2, double c3, double mu, double t):
        """One whole iteration (one block): alpha = c1 alpha + c2 p + c3 v (and G alpha),
        v = p_mu(alpha), G v, p = c1 p + t vscale v (and G p). Returns
        (min G alpha, its first global index, alpha . G alpha, p . G p, vscale)."""
        cdef Py_ssize_t imin = 0
        cdef double gmin = INFINITY, aga, pgp, vscale = 1.0
        with nogil:
            aga = mk_pf_combine3(&self.alpha[0], &self.ga[0], &self.p[0], &self.gp[0],
                                 &self.v[0], &self.gv[0], c1, c2, c3, self.n, &gmin, &imin)
            if self.entropy:
                # softmax(-G alpha / mu) shifted by its minimum: weights in (0, 1], left
                # unnormalized (G v is linear in v); the normalization is vscale
                vscale = 1.0 / (<EntropySmoother>self.sm).weights(
                    &self.ga[0], gmin, 1.0 / mu, &self.v[0], self.n)
            else:
                self.sm.argmin(&self.ga[0], mu, &self.q[0], &self.v[0], self.n)
            self.op.matvec(&self.v[0], &self.gv[0])
            pgp = mk_pf_combine2(&self.p[0], &self.gp[0], &self.v[0], &self.gv[0], c1,
                                 t * vscale, self.n)
        self.sm.check_error()
        return gmin, imin + self.offset, aga, pgp, vscale

    def smoothed_loss_part(self, double mu):
        """(-<p_mu(alpha), G alpha>, d(p_mu(alpha))) (one block)."""
        pm = np.empty(self.n)
        cdef double[::1] pv = pm
        cdef double d
        with nogil:
            self.sm.argmin(&self.ga[0], mu, &self.q[0], &pv[0], self.n)
            d = self.sm.value_of(&pv[0], &self.q[0], self.n)
        self.sm.check_error()
        return float(-pm @ self.ga_arr), d

    # -- several blocks ----------------------------------------------------------------
    def combine(self, double c1, double c2, double c3):
        """alpha = c1 alpha + c2 p + c3 v, G alpha likewise; (min G alpha, its first
        global index, alpha . G alpha) over the block."""
        cdef Py_ssize_t imin = 0
        cdef double gmin = INFINITY, aga
        if not self.n:
            return INFINITY, -1, 0.0
        with nogil:
            aga = mk_pf_combine3(&self.alpha[0], &self.ga[0], &self.p[0], &self.gp[0],
                                 &self.v[0], &self.gv[0], c1, c2, c3, self.n, &gmin, &imin)
        return gmin, imin + self.offset, aga

    def weights(self, double gmin, double inv):
        """v_i = exp(-((G alpha)_i - gmin) inv) (the global gmin): (sum v, X_c^T S_c v)."""
        cdef double total = 0.0
        if self.n:
            with nogil:
                total = (<EntropySmoother>self.sm).weights(&self.ga[0], gmin, inv, &self.v[0],
                                                           self.n)
        return total, self.fop.primal(self.v_arr)

    def finish(self, w, double c1, double tv):
        """G v = S_c X_c w, p = c1 p + tv v (and G p); p . G p over the block."""
        self.fdot("gv", w)
        if not self.n:
            return 0.0
        return mk_pf_combine2(&self.p[0], &self.gp[0], &self.v[0], &self.gv[0], c1, tv, self.n)

    # l2 smoother: v = proj_simplex(q - G alpha / mu), its threshold found by the driver
    def l2_raw(self, double inv):
        np.subtract(self.q_arr, self.ga_arr * inv, out=self.v_arr)
        self._sorted = np.sort(self.v_arr)[::-1]
        self._csum = np.cumsum(self._sorted)
        return float(self._sorted[0]) if self.n else -INFINITY

    def l2_eval(self, taus):
        """Number and sum of the entries of u = q - G alpha / mu above each tau."""
        k = np.searchsorted(-self._sorted, -np.asarray(taus), side="left")
        if not self.n:
            return k.astype(np.float64), np.zeros(k.shape)
        sums = np.where(k > 0, self._csum[np.maximum(k - 1, 0)], 0.0)
        return k.astype(np.float64), sums

    def l2_final(self, double tau):
        """v = max(u - tau, 0); X_c^T S_c v."""
        v = self.v_arr
        v -= tau
        v[v < 0.0] = 0.0
        self._sorted = self._csum = None
        return self.fop.primal(v)

    # -- restarts ----------------------------------------------------------------------
    def restart_sums(self):
        """(r . G r, r . r) for r = v - q, G r = G v - G alpha (alpha = q): the warm
        restart's base case."""
        cdef Py_ssize_t i
        cdef double rgr = 0.0, r2 = 0.0, r, gr
        with nogil:
            for i in range(self.n):
                r = self.v[i] - self.q[i]
                gr = self.gv[i] - self.ga[i]
                rgr += r * gr
                r2 += r * r
        return rgr, r2

    def restart_at_p(self):
        """ISNKPVN's outer step: q = alpha = p, G alpha = G p."""
        if self.n:
            memcpy(&self.q[0], &self.p[0], self.n * sizeof(double))
            memcpy(&self.alpha[0], &self.p[0], self.n * sizeof(double))
            memcpy(&self.ga[0], &self.gp[0], self.n * sizeof(double))


# states of MinNormPoint
cdef enum:
    MNP_IDLE = 0
    MNP_RUNNING = 1
    MNP_SEPARATOR = 2
    MNP_CERTIFICATE = 3
    MNP_STOPPED = 4

_MNP_STATES = {MNP_IDLE: "idle", MNP_RUNNING: "running", MNP_SEPARATOR: "separator",
               MNP_CERTIFICATE: "certificate", MNP_STOPPED: "stopped"}

# a vertex enters only when it lowers ||p||_G^2 by more than this (|G_ij| <= 1: the
# products G p carry an absolute round-off far below it)
cdef double _MNP_GAP = 1e-15
# a vertex whose squared distance to the affine hull of the corral (in the lifted
# metric G + 1 1^T) is below this fraction of its own is numerically in that hull
cdef double _MNP_INDEPENDENT = 1e-12


cdef class MinNormPoint:
    """Wolfe's minimum-norm-point algorithm for min_{p in simplex} ||p||_G, the point of
    least norm z* = sum_i p*_i a_i in conv{a_i} (a_i = y_i phi(x_i) / ||phi(x_i)||), with
    the vertices priced over all n points by G p.

    A major cycle (``major``) computes G p with one product (p is supported on the
    corral S, |S| <= ``cap``; with a feature map, w = Phi^T S p from the |S| rows and
    one pass S Phi w), stops with a *candidate* when G p > 0 (a separator) or
    ||p||_G^2 <= ``tol_sq`` (an infeasibility certificate), else adds the vertex
    j = argmin_i (G p)_i to S and runs the minor cycles: the affine minimizer
    mu = M^{-1} 1 / (1^T M^{-1} 1) of S, M = G_SS + 1 1^T (positive definite while S is
    affinely independent), kept as M = R^T R (R upper triangular, a column appended per
    vertex, Givens rotations per removal); if mu > 0 it is the new p, otherwise p moves
    towards mu until a weight vanishes and that vertex leaves S. In exact arithmetic
    ||p||_G decreases strictly each major cycle and the run ends in finitely many.

    It stops for good (``state`` "stopped") when it cannot make numerical progress: no
    decrease of ||p||_G^2, a gain below 1e-15, a vertex numerically in the affine hull of
    S, the entering vertex dropped at once, or |S| = ``cap``. Only the n-vectors p and
    G p are stored, and the |S| entries G_Sj of each new column (``GramOperator.entries``).
    """

    cdef GramOperator op
    cdef FeatureOperator fop
    cdef double[::1] w
    cdef readonly Py_ssize_t n
    cdef readonly Py_ssize_t cap
    cdef readonly Py_ssize_t size
    cdef readonly Py_ssize_t steps
    cdef int _state
    cdef readonly double norm_sq
    cdef readonly double gmin
    cdef Py_ssize_t[::1] idx
    cdef double[::1] lam
    cdef double[::1] mu
    cdef double[::1] u
    cdef double[::1] ent
    cdef double[:, ::1] R
    cdef double[::1] p
    cdef double[::1] gp
    cdef readonly object p_arr, gp_arr

    def __init__(self, GramOperator op, Py_ssize_t cap):
        self.op = op
        self.fop = op if isinstance(op, FeatureOperator) else None
        self.w = np.zeros(max(op.d, 1) if self.fop is not None else 1)
        self.n = op.n
        self.cap = max(1, min(cap, op.n))
        self.size = 0
        self.steps = 0
        self._state = MNP_IDLE
        self.norm_sq = INFINITY
        self.gmin = -INFINITY
        self.idx = np.zeros(self.cap, dtype=np.intp)
        self.lam = np.zeros(self.cap)
        self.mu = np.zeros(self.cap)
        self.u = np.zeros(self.cap)
        self.ent = np.zeros(self.cap)
        self.R = np.zeros((self.cap, self.cap))
        self.p_arr = np.zeros(self.n)
        self.gp_arr = np.zeros(self.n)
        self.p = self.p_arr
        self.gp = self.gp_arr

    @property
    def state(self):
        """"idle", "running", "separator", "certificate" (candidates) or "stopped"."""
        return _MNP_STATES[self._state]

    @property
    def support(self):
        """The corral S (indices of the nonzero weights of p)."""
        return np.array(self.idx[:self.size])

    def run(self, Py_ssize_t j0, Py_ssize_t max_steps, double tol_sq):
        """Start at the vertex j0 and run at most ``max_steps`` major cycles; the state."""
        if j0 < 0 or j0 >= self.n:
            raise IndexError(f"vertex {j0} out of range for n={self.n}")
        with nogil:
            self.begin(j0)
            while self._state == MNP_RUNNING and self.steps < max_steps:
                self.major(tol_sq)
        return self.state

    cdef void stop(self) noexcept nogil:
        self._state = MNP_STOPPED

    def start_at(self, Py_ssize_t j0):
        """S = {j0}, p = e_j0 (no cycle yet)."""
        with nogil:
            self.begin(j0)

    def cycle(self, double tol_sq):
        """One major cycle; the state."""
        with nogil:
            self.major(tol_sq)
        return self.state

    def halt(self):
        """Stop for good."""
        self._state = MNP_STOPPED

    cdef void begin(self, Py_ssize_t j0) noexcept nogil:
        """S = {j0}, p = e_j0."""
        cdef double g
        cdef Py_ssize_t t
        for t in range(self.size):
            self.p[self.idx[t]] = 0.0
        self.op.entries(j0, &j0, 1, &g)
        self.steps = 0
        self.norm_sq = INFINITY
        if not (isfinite(g) and g + 1.0 > 0.0):
            self.size = 0
            self._state = MNP_STOPPED
            return
        self.idx[0] = j0
        self.lam[0] = 1.0
        self.R[0, 0] = sqrt(g + 1.0)
        self.size = 1
        self.p[j0] = 1.0
        self._state = MNP_RUNNING

    cdef int major(self, double tol_sq) noexcept nogil:
        """One major cycle (see the class docstring); returns the state."""
        cdef Py_ssize_t t, j, m
        cdef double pgp = 0.0, prev = self.norm_sq
        if self._state != MNP_RUNNING:
            return self._state
        if self.fop is not None:
            # G p = S Phi w with w = sum_{s in S} p_s s_s phi_s: |S| rows, then one pass
            memset(&self.w[0], 0, self.fop.d * sizeof(double))
            for t in range(self.size):
                self.fop.add_row(self.idx[t], self.lam[t], &self.w[0])
            self.fop.fmatvec(&self.w[0], &self.gp[0])
        else:
            self.op.matvec(&self.p[0], &self.gp[0])
        for t in range(self.size):
            pgp += self.lam[t] * self.gp[self.idx[t]]
        j = _argmin(&self.gp[0], self.n)
        self.steps += 1
        self.norm_sq = pgp
        self.gmin = self.gp[j]
        if not (isfinite(pgp) and isfinite(self.gmin)):
            self._state = MNP_STOPPED
        elif self.gmin > 0.0:
            self._state = MNP_SEPARATOR
        elif pgp <= tol_sq:
            self._state = MNP_CERTIFICATE
        elif pgp >= prev or pgp - self.gmin <= _MNP_GAP or self.size >= self.cap:
            self._state = MNP_STOPPED
        else:
            for t in range(self.size):
                if self.idx[t] == j:
                    self._state = MNP_STOPPED
            if self._state == MNP_RUNNING and self._enter(j):
                self._minor()
        return self._state

    cdef bint _enter(self, Py_ssize_t j) noexcept nogil:
        """Append vertex j to S with weight 0: a new column of R (R^T r = M_Sj)."""
        cdef Py_ssize_t t, s, m = self.size
        cdef double g, acc, rho2
        self.op.entries(j, &self.idx[0], m, &self.ent[0])
        self.op.entries(j, &j, 1, &g)
        rho2 = g + 1.0
        for t in range(m):
            acc = self.ent[t] + 1.0
            for s in range(t):
                acc -= self.R[s, t] * self.R[s, m]
            self.R[t, m] = acc / self.R[t, t]
            rho2 -= self.R[t, m] * self.R[t, m]
        if not (isfinite(rho2) and rho2 > _MNP_INDEPENDENT * (g + 1.0)):
            self._state = MNP_STOPPED
            return False
        self.R[m, m] = sqrt(rho2)
        self.idx[m] = j
        self.lam[m] = 0.0
        self.size = m + 1
        return True

    cdef bint _affine_minimizer(self) noexcept nogil:
        """mu = M^{-1} 1 / (1^T M^{-1} 1) on S, from M = R^T R; False if not finite."""
        cdef Py_ssize_t t, s, m = self.size
        cdef double acc, total = 0.0
        for t in range(m):
            acc = 1.0
            for s in range(t):
                acc -= self.R[s, t] * self.u[s]
            self.u[t] = acc / self.R[t, t]
        for t in range(m - 1, -1, -1):
            acc = self.u[t]
            for s in range(t + 1, m):
                acc -= self.R[t, s] * self.mu[s]
            self.mu[t] = acc / self.R[t, t]
        for t in range(m):
            total += self.mu[t]
        # 1^T M^{-1} 1 > 0 for a positive definite M; anything else is round-off gone wrong
        if not (isfinite(total) and total > 0.0):
            return False
        for t in range(m):
            self.mu[t] /= total
        return True

    cdef void _minor(self) noexcept nogil:
        """Minor cycles after a vertex entered (it is the last of S, weight 0)."""
        cdef Py_ssize_t t, k, m, entering = self.idx[self.size - 1]
        cdef double theta, r, total
        cdef bint inside
        while True:
            if not self._affine_minimizer():
                self._state = MNP_STOPPED
                return
            m = self.size
            inside = True
            for t in range(m):
                if not (self.mu[t] > 0.0):
                    inside = False
            if inside:
                for t in range(m):
                    self.lam[t] = self.mu[t]
                    self.p[self.idx[t]] = self.mu[t]
                return
            # the largest step towards mu that keeps the weights >= 0; vertex k leaves S
            theta = INFINITY
            k = 0
            for t in range(m):
                if not (self.mu[t] > 0.0):
                    r = self.lam[t] / (self.lam[t] - self.mu[t])
                    if r < theta:
                        theta = r
                        k = t
            if not (theta <= 1.0):
                # some mu_t <= 0 gives a ratio in [0, 1] unless the weights are broken
                self._state = MNP_STOPPED
                return
            if self.idx[k] == entering and self.lam[k] == 0.0:
                # numerically, the new vertex does not lower ||p||_G: no progress
                self._remove(k)
                self._state = MNP_STOPPED
                return
            total = 0.0
            for t in range(m):
                self.lam[t] = (1.0 - theta) * self.lam[t] + theta * self.mu[t]
                if self.lam[t] < 0.0:
                    self.lam[t] = 0.0
            self.lam[k] = 0.0
            self._remove(k)
            # any other weight rounded to zero leaves too
            t = 0
            while t < self.size:
                if self.lam[t] <= 0.0 and self.size > 1:
                    self._remove(t)
                else:
                    t += 1
            for t in range(self.size):
                total += self.lam[t]
            for t in range(self.size):
                self.lam[t] /= total
                self.p[self.idx[t]] = self.lam[t]

    cdef void _remove(self, Py_ssize_t k) noexcept nogil:
        """Drop the k-th vertex of S: delete column k of R, restore the triangle with
        Givens rotations of rows (c, c + 1) (R^T R stays M without row and column k)."""
        cdef Py_ssize_t t, c, m = self.size
        cdef double a, b, h, cs, sn, x, z
        self.p[self.idx[k]] = 0.0
        for c in range(k, m - 1):
            for t in range(c + 2):
                self.R[t, c] = self.R[t, c + 1]
            self.idx[c] = self.idx[c + 1]
            self.lam[c] = self.lam[c + 1]
        for c in range(k, m - 1):
            a = self.R[c, c]
            b = self.R[c + 1, c]
            h = hypot(a, b)
            if h == 0.0:
                continue
            cs = a / h
            sn = b / h
            for t in range(c, m - 1):
                x = self.R[c, t]
                z = self.R[c + 1, t]
                self.R[c, t] = cs * x + sn * z
                self.R[c + 1, t] = cs * z - sn * x
            self.R[c + 1, c] = 0.0
        self.size = m - 1


# the per-layout kernels dispatch on the row block's class through a table (see
# ``marginkit.utils._rows.ByLayout``: Cython's dispatch costs microseconds per call)
from marginkit.utils._rows import dispatch_by_layout  # noqa: E402

dispatch_by_layout(globals())
