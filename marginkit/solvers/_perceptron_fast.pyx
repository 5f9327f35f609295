"""Cython cores of the perceptron / von Neumann family (Ramdas & Pena 2014).

Each core holds the iterates of one algorithm as float64 vectors and does one whole
iteration per ``step()`` with the GIL released. G (the normalized signed Gram) is only
touched through a ``GramOperator``: ``matvec`` (G a), ``column`` (G e_j) and ``entries``
(a few G_ij, for the exact finish of ISNKPVN). The
products G alpha and G p are maintained by linearity, so each iteration costs one
product with G (a column for the vertex methods, one matvec for the smoothed ones);
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
from marginkit.utils._operator cimport FeatureOperator, GramOperator

__all__ = ["PerceptronCore", "NKPCore", "NormalizedPerceptronCore", "NVNCore",
           "SmoothedCore", "IteratedSmoothedCore", "MinNormPoint", "csr_normalized_cross"]


ctypedef fused _index_t:
    int
    long long

ctypedef fused _data_t:
    float
    double


def csr_normalized_cross(const _data_t[::1] data, const _index_t[::1] indices,
                         const _index_t[::1] indptr, const double[::1] inv,
                         double[:, ::1] C):
    """C += X_n^T X_n for CSR X (rows scaled by ``inv``), in float64: sum over rows of
    nnz_i^2 multiply-adds, without a scaled copy of X. Both orders of each pair of entries
    are added (duplicate column indices count correctly); C is symmetric up to round-off."""
    cdef Py_ssize_t i, n = inv.shape[0]
    cdef _index_t a, b
    cdef double s, xa
    with nogil:
        for i in range(n):
            # each entry scaled by 1/||x_i|| before the product: inv[i]^2 overflows for
            # rows of norm below 1e-154 whose scaled entries are of order 1
            s = inv[i]
            for a in range(indptr[i], indptr[i + 1]):
                xa = data[a] * s
                for b in range(indptr[i], indptr[i + 1]):
                    C[indices[a], indices[b]] += xa * (data[b] * s)


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


cdef class _Core:
    """Shared state: alpha, G alpha, p (in the simplex), G p and the bounds they give."""

    cdef GramOperator op
    cdef readonly Py_ssize_t n
    cdef readonly Py_ssize_t k
    cdef readonly Py_ssize_t imin
    # min_i (G alpha)_i, ||alpha||_G, current and best ||p||_G, tolerance for dual checks
    cdef readonly double min_margin
    cdef readonly double alpha_norm
    cdef readonly double cur_dual
    cdef readonly double dual_norm
    cdef readonly double dual_tol
    cdef readonly double mu
    cdef double[::1] alpha
    cdef double[::1] ga
    cdef double[::1] p
    cdef double[::1] gp
    cdef double[::1] best_p
    cdef double[::1] col
    cdef readonly object alpha_arr, ga_arr, p_arr, gp_arr, best_p_arr

    def __init__(self, GramOperator op, double dual_tol=0.0):
        self.op = op
        self.n = op.n
        self.dual_tol = dual_tol
        self.alpha_arr = np.zeros(self.n)
        self.ga_arr = np.zeros(self.n)
        self.p_arr = np.full(self.n, 1.0 / self.n)
        self.gp_arr = np.zeros(self.n)
        self.best_p_arr = self.p_arr.copy()
        self.alpha = self.alpha_arr
        self.ga = self.ga_arr
        self.p = self.p_arr
        self.gp = self.gp_arr
        self.best_p = self.best_p_arr
        self.col = np.zeros(self.n)
        self.dual_norm = INFINITY
        self.cur_dual = INFINITY
        self.mu = 0.0
        self.k = 0

    cdef void _margins(self) noexcept nogil:
        """min_margin, imin and ||alpha||_G from alpha and G alpha; fresh G alpha if > 0."""
        cdef Py_ssize_t i = _argmin(&self.ga[0], self.n)
        self._set_margins(i, self.ga[i], _dot(&self.alpha[0], &self.ga[0], self.n))

    cdef void _set_margins(self, Py_ssize_t imin, double gmin, double aga) noexcept nogil:
        """Same as ``_margins`` with min, argmin and alpha^T G alpha already known."""
        self.imin = imin
        self.min_margin = gmin
        if self.min_margin > 0.0:
            # about to report "separable": recompute G alpha exactly
            self.op.matvec(&self.alpha[0], &self.ga[0])
            self.imin = _argmin(&self.ga[0], self.n)
            self.min_margin = self.ga[self.imin]
            aga = _dot(&self.alpha[0], &self.ga[0], self.n)
        self.alpha_norm = _gnorm(aga)

    cdef void _dual(self, double fresh_below) noexcept nogil:
        """cur_dual = ||p||_G from p and G p; keep the best p. Fresh G p near the tolerance."""
        self._set_dual(_dot(&self.p[0], &self.gp[0], self.n), fresh_below)

    cdef void _set_dual(self, double pgp, double fresh_below) noexcept nogil:
        self.cur_dual = _gnorm(pgp)
        if self.cur_dual <= fresh_below:
            self.op.matvec(&self.p[0], &self.gp[0])
            self.cur_dual = _gnorm(_dot(&self.p[0], &self.gp[0], self.n))
        if self.cur_dual < self.dual_norm:
            self.dual_norm = self.cur_dual
            memcpy(&self.best_p[0], &self.p[0], self.n * sizeof(double))

    def margin_bounds(self):
        """(lower, upper) on rho_K (Ramdas & Pena 2014, Lemma 3): min(G alpha)/||alpha||_G and best ||p||_G."""
        lower = self.min_margin / self.alpha_norm if (self.min_margin > 0 and self.alpha_norm > 0) \
            else -np.inf
        return lower, self.dual_norm


cdef class PerceptronCore(_Core):
    """Classic kernel perceptron on the unnormalized signed Gram Gu = Y K Y.

    counts_i = number of updates on point i; the normalized coefficients are
    alpha_i = counts_i sqrt(K_ii) (so G alpha and Gu counts have the same signs).
    """

    cdef double[::1] counts
    cdef double[::1] sd
    cdef readonly object counts_arr
    cdef double alpha_sum

    def __init__(self, GramOperator op, double dual_tol=0.0):
        if op.normalize:
            raise ValueError("PerceptronCore needs the unnormalized Gram operator (normalize=False)")
        _Core.__init__(self, op, dual_tol)
        self.counts_arr = np.zeros(self.n)
        self.counts = self.counts_arr
        self.sd = op.sqrt_diag
        self.alpha_sum = 0.0
        with nogil:
            self._stats()

    cdef void _stats(self) noexcept nogil:
        cdef Py_ssize_t i
        cdef double m, v, sq
        # most violated point for the classic rule (unnormalized margins)
        self.imin = _argmin(&self.ga[0], self.n)
        m = INFINITY
        for i in range(self.n):
            v = self.ga[i] / self.sd[i]
            if v < m:
                m = v
        if m > 0.0:
            self.op.matvec(&self.counts[0], &self.ga[0])
            self.imin = _argmin(&self.ga[0], self.n)
            m = INFINITY
            for i in range(self.n):
                v = self.ga[i] / self.sd[i]
                if v < m:
                    m = v
        self.min_margin = m
        # ||alpha||_G^2 = counts^T Gu counts; p = alpha / sum(alpha) lies in the simplex
        sq = _dot(&self.counts[0], &self.ga[0], self.n)
        self.alpha_norm = _gnorm(sq)
        if self.alpha_sum > 0.0:
            self.cur_dual = self.alpha_norm / self.alpha_sum
            if self.cur_dual < self.dual_norm:
                self.dual_norm = self.cur_dual
                for i in range(self.n):
                    self.best_p[i] = self.alpha[i] / self.alpha_sum

    def step(self):
        cdef Py_ssize_t i, j
        with nogil:
            j = self.imin
            self.counts[j] += 1.0
            self.alpha[j] += self.sd[j]
            self.alpha_sum += self.sd[j]
            self.op.column(j, &self.col[0])
            for i in range(self.n):
                self.ga[i] += self.col[i]
            self.k += 1
            self._stats()

    def normalized_ga(self):
        """G alpha for the normalized alpha (= (Gu counts) / sqrt(K_ii))."""
        return self.ga_arr / np.asarray(self.sd)


cdef class NKPCore(_Core):
    """Normalized Kernel Perceptron (Ramdas & Pena 2014, sec. 4): alpha_{k+1} = (1-t) alpha_k + t e_i,
    t = 1/(k+1), i = argmin_i (G alpha_k)_i; alpha_0 = 0. alpha (k >= 1) is the dual p."""

    def __init__(self, GramOperator op, double dual_tol=0.0):
        _Core.__init__(self, op, dual_tol)
        with nogil:
            self._margins()

    def step(self):
        cdef Py_ssize_t i, j
        cdef double t
        with nogil:
            j = self.imin
            t = 1.0 / (self.k + 1)
            self.op.column(j, &self.col[0])
            for i in range(self.n):
                self.alpha[i] *= 1.0 - t
                self.ga[i] = (1.0 - t) * self.ga[i] + t * self.col[i]
            self.alpha[j] += t
            self.k += 1
            self._margins()
            memcpy(&self.p[0], &self.alpha[0], self.n * sizeof(double))
            memcpy(&self.gp[0], &self.ga[0], self.n * sizeof(double))
            self._dual(self.dual_tol)


cdef class NormalizedPerceptronCore(_Core):
    """Normalized Perceptron (Ramdas & Pena 2014, sec. 2.1) in feature space:
    w_{k+1} = (1-t) w_k + t y_i x_i/||x_i||, t = 1/(k+1), i the most misclassified point.

    The margins S Phi w are recomputed from w every iteration (one pass over Phi);
    alpha tracks w = Phi^T S alpha, and ||alpha||_G = ||w||_2."""

    cdef FeatureOperator fop
    cdef double[::1] w
    cdef readonly object w_arr

    def __init__(self, FeatureOperator op, double dual_tol=0.0):
        _Core.__init__(self, op, dual_tol)
        self.fop = op
        self.w_arr = np.zeros(max(op.d, 1))
        self.w = self.w_arr
        with nogil:
            self._stats()

    cdef void _stats(self) noexcept nogil:
        self.imin = _argmin(&self.ga[0], self.n)
        self.min_margin = self.ga[self.imin]
        self.alpha_norm = _gnorm(_dot(&self.w[0], &self.w[0], self.fop.d))
        if self.k > 0:
            self.cur_dual = self.alpha_norm
            if self.cur_dual < self.dual_norm:
                self.dual_norm = self.cur_dual
                memcpy(&self.best_p[0], &self.alpha[0], self.n * sizeof(double))

    def step(self):
        cdef Py_ssize_t i, j
        cdef double t
        with nogil:
            j = self.imin
            t = 1.0 / (self.k + 1)
            for i in range(self.fop.d):
                self.w[i] *= 1.0 - t
            self.fop.add_row(j, t, &self.w[0])
            for i in range(self.n):
                self.alpha[i] *= 1.0 - t
            self.alpha[j] += t
            # margins of w, from scratch
            self.fop.fmatvec(&self.w[0], &self.ga[0])
            memcpy(&self.p[0], &self.alpha[0], self.n * sizeof(double))
            self.k += 1
            self._stats()


cdef class NVNCore(_Core):
    """Normalized von Neumann (Ramdas & Pena 2014, sec. 5, kernelized): p_0 = 1/n, j = argmin (G p)_j,
    exact line search theta = argmin_{[0,1]} ||(1-t) p + t e_j||_G, p <- (1-theta) p + theta e_j.

    alpha = p: G p > 0 is a separator, ||p||_G <= eps an infeasibility certificate."""

    def __init__(self, GramOperator op, double dual_tol=0.0):
        _Core.__init__(self, op, dual_tol)
        with nogil:
            self.op.matvec(&self.p[0], &self.gp[0])
            self._stats()

    cdef void _stats(self) noexcept nogil:
        memcpy(&self.alpha[0], &self.p[0], self.n * sizeof(double))
        memcpy(&self.ga[0], &self.gp[0], self.n * sizeof(double))
        self._margins()
        if self.min_margin > 0.0:
            memcpy(&self.gp[0], &self.ga[0], self.n * sizeof(double))
        self._dual(self.dual_tol)

    def step(self):
        cdef Py_ssize_t i, j
        cdef double a, b, c, den, t
        with nogil:
            j = self.imin
            self.op.column(j, &self.col[0])
            a = _dot(&self.p[0], &self.gp[0], self.n)
            b = self.gp[j]
            c = self.col[j]
            # ||(1-t) p + t e_j||_G^2 = (1-t)^2 a + 2 t (1-t) b + t^2 c, minimized over [0, 1]
            den = a - 2.0 * b + c
            t = (a - b) / den if den > 0.0 else 0.0
            if t < 0.0:
                t = 0.0
            elif t > 1.0:
                t = 1.0
            for i in range(self.n):
                self.p[i] *= 1.0 - t
                self.gp[i] = (1.0 - t) * self.gp[i] + t * self.col[i]
            self.p[j] += t
            self.k += 1
            self._stats()


cdef class SmoothedCore(_Core):
    """Smoothed Normalized Kernel Perceptron (SNKP, Ramdas & Pena 2014 sec. 4) and SNKPVN(q, delta)
    (sec. 6), one algorithm box with different smoothers:

        alpha_{k+1} = (1 - t)(alpha_k + t p_k) + t^2 p_{mu_k}(alpha_k),   t = 2/(k+3)
        mu_{k+1}    = (1 - t) mu_k
        p_{k+1}     = (1 - t) p_k + t p_{mu_{k+1}}(alpha_{k+1})

    with p_mu(alpha) = smoother.argmin(G alpha, mu, q). v = p_{mu_k}(alpha_k) and G v are
    kept from the previous iteration, so an iteration costs one product G v. With the
    entropy smoother v and G v are kept unnormalized (the softmax weights and their
    product) and scaled by ``_vscale`` = 1 / sum(weights) where they are used.
    """

    cdef SimplexSmoother sm
    cdef double[::1] v
    cdef double[::1] gv
    cdef double[::1] q
    cdef bint has_q
    cdef readonly double mu0
    cdef readonly object q_arr
    cdef double _pgp
    cdef double _vscale
    # warm-restart attempts rejected by the base-case check (each cost one G v)
    cdef readonly Py_ssize_t rejected_restarts
    cdef bint _entropy

    def __init__(self, GramOperator op, SimplexSmoother sm, double mu0, q=None,
                 double dual_tol=0.0):
        _Core.__init__(self, op, dual_tol)
        self.sm = sm
        # the entropy's softmax is inlined in the iteration (min of G alpha already known,
        # normalization folded into the p update)
        self._entropy = type(sm) is EntropySmoother
        self.mu0 = mu0
        self.v = np.zeros(self.n)
        self.gv = np.zeros(self.n)
        self.q_arr = np.full(self.n, 1.0 / self.n) if q is None else np.array(q, dtype=np.float64)
        self.q = self.q_arr
        self.has_q = q is not None
        self.restart(self.q_arr, None)

    def restart(self, q, gq=None):
        """alpha_0 = q, mu_0, p_0 = p_{mu_0}(alpha_0); G q reused when given."""
        cdef double[::1] qv = np.ascontiguousarray(q, dtype=np.float64)
        cdef double[::1] gqv
        cdef bint have_gq = gq is not None
        if have_gq:
            gqv = np.ascontiguousarray(gq, dtype=np.float64)
        with nogil:
            memcpy(&self.q[0], &qv[0], self.n * sizeof(double))
            memcpy(&self.alpha[0], &qv[0], self.n * sizeof(double))
            if have_gq:
                memcpy(&self.ga[0], &gqv[0], self.n * sizeof(double))
            else:
                self.op.matvec(&self.alpha[0], &self.ga[0])
            self._start()
        self.sm.check_error()  # a Python smoother's error, raised once the loop is done

    cdef void _start(self) noexcept nogil:
        self._start_at(0)

    cdef void _start_at(self, Py_ssize_t k0) noexcept nogil:
        """Start the inner loop at alpha = q (G alpha given) at index k0 of the schedule
        mu_k = 2 mu_0 / ((k + 1)(k + 2)), t_k = 2 / (k + 3).

        The paper starts at k0 = 0. Its induction (appendix) holds from any k0 >= 0 at
        which -1/2 ||p_k0||_G^2 >= L_mu(alpha_k0) with mu = mu_k0, alpha_k0 = q and
        p_k0 = p_mu(q); for the prox-center q that inequality reads
        ||r||_G^2 <= mu ||r||_#^2 with r = p_k0 - q (checked here exactly for the l2
        smoother, # = 2; always true at k0 = 0, where mu_0 >= the bound lambda_# on
        ||.||_G^2 / ||.||_#^2). A k0 that fails the check is lowered by 15% until one passes
        (each failed check costs one G v; ``rejected_restarts`` counts them)."""
        cdef Py_ssize_t i
        cdef double rgr, r2, r, gr
        if self.sm.norm != 2:
            # the check is written for the l2 prox-function
            k0 = 0
        while True:
            self.k = k0
            self.mu = self.mu0 * (2.0 / ((k0 + 1.0) * (k0 + 2.0)))
            self.sm.argmin(&self.ga[0], self.mu, &self.q[0], &self.v[0], self.n)
            self._vscale = 1.0
            self.op.matvec(&self.v[0], &self.gv[0])
            if k0 == 0:
                break
            rgr = 0.0
            r2 = 0.0
            for i in range(self.n):
                r = self.v[i] - self.q[i]
                gr = self.gv[i] - self.ga[i]
                rgr += r * gr
                r2 += r * r
            if rgr <= self.mu * r2:
                break
            self.rejected_restarts += 1
            k0 = (k0 * 85) // 100
        memcpy(&self.p[0], &self.v[0], self.n * sizeof(double))
        memcpy(&self.gp[0], &self.gv[0], self.n * sizeof(double))
        self._margins()
        self._dual(self.dual_tol)

    cdef void _iterate(self) noexcept nogil:
        cdef Py_ssize_t i, imin = 0
        cdef double t = 2.0 / (self.k + 3)
        cdef double c1 = 1.0 - t, c2 = (1.0 - t) * t, c3 = t * t * self._vscale
        cdef double gmin = INFINITY, aga, pgp, tv
        aga = mk_pf_combine3(&self.alpha[0], &self.ga[0], &self.p[0], &self.gp[0], &self.v[0],
                             &self.gv[0], c1, c2, c3, self.n, &gmin, &imin)
        self.mu = c1 * self.mu
        # v = p_{mu_{k+1}}(alpha_{k+1}): used for p_{k+1} now and for alpha_{k+2} next time
        if self._entropy:
            # softmax(-G alpha / mu) shifted by its minimum: weights in (0, 1], left
            # unnormalized (G v is linear in v); the normalization is _vscale
            self._vscale = 1.0 / (<EntropySmoother>self.sm).weights(
                &self.ga[0], gmin, 1.0 / self.mu, &self.v[0], self.n)
        else:
            self.sm.argmin(&self.ga[0], self.mu, &self.q[0], &self.v[0], self.n)
            self._vscale = 1.0
        self.op.matvec(&self.v[0], &self.gv[0])
        tv = t * self._vscale
        pgp = mk_pf_combine2(&self.p[0], &self.gp[0], &self.v[0], &self.gv[0], c1, tv, self.n)
        self.k += 1
        self._set_margins(imin, gmin, aga)
        self._pgp = pgp

    def step(self):
        with nogil:
            self._iterate()
            self._set_dual(self._pgp, self.dual_tol)
        self.sm.check_error()

    def smoothed_loss(self):
        """L_mu(alpha) = -<alpha, p_mu(alpha)>_G - mu d(p_mu(alpha)) + 1/2 ||alpha||_G^2."""
        pm = np.empty(self.n)
        cdef double[::1] pv = pm
        cdef double d
        with nogil:
            self.sm.argmin(&self.ga[0], self.mu, &self.q[0], &pv[0], self.n)
            d = self.sm.value_of(&pv[0], &self.q[0], self.n)
        self.sm.check_error()
        return float(-pm @ self.ga_arr - self.mu * d + 0.5 * self.alpha_norm ** 2)


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


# the finish runs one major cycle (about one pass over the data) every this many steps
cdef Py_ssize_t _FINISH_PERIOD = 2


cdef class IteratedSmoothedCore(SmoothedCore):
    """ISNKPVN(gamma, eps) (Ramdas & Pena 2014, sec. 6) as one state machine.

    Each ``step()`` is one inner SNKPVN(q_t, delta_t) iteration. When the inner loop
    returns (||p_k||_G < delta_t, no separator yet, ||p_k||_G > eps), the outer loop
    restarts it from q_{t+1} = p_k with delta_{t+1} = ||q_{t+1}||_G / gamma.

    With ``finish_cap`` > 0, every second step also runs one major cycle of a
    ``MinNormPoint`` (Wolfe's algorithm on the same problem, corral of at most
    ``finish_cap`` vertices), started at the most violated point of G p_k, until it stops. Its
    candidates ("separator", "certificate") are checked by the caller, then taken with
    ``accept_finish`` (the outer loop restarts at q = its p) or refused with
    ``refuse_finish``; the iterations above never read its state otherwise.
    """

    cdef readonly double gamma
    cdef readonly double delta
    cdef readonly Py_ssize_t outer
    cdef readonly bint warm
    cdef readonly MinNormPoint finish
    cdef readonly bint finish_decided
    # steps taken (the finish runs a major cycle every _FINISH_PERIOD of them)
    cdef readonly Py_ssize_t steps

    def __init__(self, GramOperator op, SimplexSmoother sm, double mu0, double eps,
                 double gamma, bint warm=True, Py_ssize_t finish_cap=0):
        self.gamma = gamma
        self.outer = 0
        self.warm = warm
        self.finish = MinNormPoint(op, finish_cap) if finish_cap > 0 else None
        self.finish_decided = False
        self.steps = 0
        SmoothedCore.__init__(self, op, sm, mu0, None, eps)
        # delta_0 = ||q_0||_G / gamma, with G q_0 = G alpha_0
        self.delta = _gnorm(_dot(&self.q[0], &self.ga[0], self.n)) / gamma
        with nogil:
            self._settle()
        self.sm.check_error()

    cdef void _settle(self) noexcept nogil:
        """Restart the inner loop while it has returned and the run is not over."""
        while (self.cur_dual < self.delta and self.min_margin <= 0.0
               and self.dual_norm > self.dual_tol):
            memcpy(&self.q[0], &self.p[0], self.n * sizeof(double))
            memcpy(&self.alpha[0], &self.p[0], self.n * sizeof(double))
            memcpy(&self.ga[0], &self.gp[0], self.n * sizeof(double))
            self.delta = self.cur_dual / self.gamma
            self.outer += 1
            # warm restart: try the schedule index the last inner loop reached (its mu),
            # rather than mu_0 again (see _start_at)
            self._start_at(self.k if self.warm else 0)

    def step(self):
        cdef MinNormPoint fin = self.finish
        with nogil:
            self._iterate()
            self._set_dual(self._pgp, self.delta if self.delta > self.dual_tol else self.dual_tol)
            self._settle()
            self.steps += 1
            if (fin is not None and self.steps % _FINISH_PERIOD == 0
                    and self.min_margin <= 0.0 and self.dual_norm > self.dual_tol):
                if fin._state == MNP_IDLE:
                    fin.begin(_argmin(&self.gp[0], self.n))
                fin.major(self.dual_tol * self.dual_tol)
        self.sm.check_error()

    @property
    def finish_state(self):
        """State of the finish: "off", or that of its ``MinNormPoint``."""
        return "off" if self.finish is None else self.finish.state

    def accept_finish(self):
        """Take the finish's checked candidate p as the next prox-center: the outer loop
        restarts at q = alpha = p (delta = ||p||_G / gamma, k = 0, the paper's start, so
        its invariant holds), and p becomes the best p if its norm is lower. A separator
        candidate gives G alpha > 0 at once, a certificate ||best p||_G <= eps."""
        cdef MinNormPoint fin = self.finish
        cdef double norm
        if fin is None or fin._state not in (MNP_SEPARATOR, MNP_CERTIFICATE):
            raise RuntimeError("the finish has no candidate to accept")
        with nogil:
            norm = _gnorm(fin.norm_sq)
            memcpy(&self.q[0], &fin.p[0], self.n * sizeof(double))
            memcpy(&self.alpha[0], &fin.p[0], self.n * sizeof(double))
            memcpy(&self.ga[0], &fin.gp[0], self.n * sizeof(double))
            if norm < self.dual_norm:
                self.dual_norm = norm
                memcpy(&self.best_p[0], &fin.p[0], self.n * sizeof(double))
            self.delta = norm / self.gamma
            self.outer += 1
            self._start_at(0)
            # taken once: the finish has done its work
            fin.stop()
        self.finish_decided = True
        self.sm.check_error()

    def refuse_finish(self):
        """Drop a candidate that failed the caller's check; the finish stops for good."""
        if self.finish is not None:
            self.finish.stop()
