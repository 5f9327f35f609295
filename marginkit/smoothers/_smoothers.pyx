"""Smoothed minimizers over the simplex (Ramdas & Pena 2014, eq. (pmuf) and sec. 6).

For a score vector g (g = G alpha in the solvers) and mu > 0,

    p_mu(g) = argmin_{p in simplex} <g, p> + mu d(p).

``EntropySmoother``: d(p) = sum_i p_i log p_i + log n (1-strongly convex in l1, center
1/n); p_mu(g) = softmax(-g / mu), computed with the maximum shifted out (stable).

``L2Smoother``: d_q(p) = 1/2 ||p - q||_2^2 (1-strongly convex in l2, center q);
p_mu(g) = Euclidean projection of q - g / mu onto the simplex, by Michelot's / Newton's
iteration on the threshold from a lower bound (a few vectorized passes over n, no sorting,
no allocation per call).

References
----------
A. Ramdas and J. Peña, "Margins, Kernels and Non-linear Smoothed Perceptrons",
Proceedings of the 31st International Conference on Machine Learning (ICML 2014);
arXiv:1505.04123.
"""
import numpy as np

from libc.math cimport INFINITY, NAN, fabs, log

cdef extern from "_vexp.h":
    double mk_exp_weights(const double* g, double shift, double inv, double* out,
                          Py_ssize_t n) noexcept nogil

cdef extern from *:
    """
    /* the projection onto the simplex (L2Smoother), with the MK_CLONES, MK_NOCONTRACT and
       MK_EXP_BLOCK of _vexp.h (included above) */

    /* out = q - g * inv (q = NULL: the constant c); returns max(out) (NaN ignored, -inf
       when every entry is NaN) */
    MK_CLONES MK_NOCONTRACT
    static double mk_l2_start(const double* g, const double* q, double c, double inv,
                              double* out, ptrdiff_t n)
    {
        double m[8], y;
        ptrdiff_t i, j;
        for (j = 0; j < 8; j++) m[j] = -INFINITY;
        for (i = 0; i < n; i++) {
            y = (q != NULL ? q[i] : c) - g[i] * inv;
            out[i] = y;
            m[i % 8] = y > m[i % 8] ? y : m[i % 8];
        }
        for (j = 1; j < 8; j++) m[0] = m[j] > m[0] ? m[j] : m[0];
        return m[0];
    }

    /* over d_i = y_i - m > t: *s = sum d_i, *k = their number (by blocks: a vectorized
       select into a small buffer, then eight interleaved partial sums in a fixed order) */
    MK_CLONES MK_NOCONTRACT
    static void mk_l2_select(const double* y, double m, double t, double* u, double* w,
                             ptrdiff_t n)
    {
        double d;
        ptrdiff_t i;
        for (i = 0; i < n; i++) {
            d = y[i] - m;
            u[i] = d > t ? d : 0.0;
            w[i] = d > t ? 1.0 : 0.0;
        }
    }

    static void mk_l2_active(const double* y, double m, double t, ptrdiff_t n, double* s,
                             double* k)
    {
        double u[MK_EXP_BLOCK], w[MK_EXP_BLOCK], sl[8], kl[8];
        ptrdiff_t b, i, j, mm;
        for (j = 0; j < 8; j++) { sl[j] = 0.0; kl[j] = 0.0; }
        for (b = 0; b < n; b += MK_EXP_BLOCK) {
            mm = n - b < MK_EXP_BLOCK ? n - b : MK_EXP_BLOCK;
            mk_l2_select(y + b, m, t, u, w, mm);
            for (i = 0; i + 8 <= mm; i += 8)
                for (j = 0; j < 8; j++) {
                    sl[j] += u[i + j];
                    kl[j] += w[i + j];
                }
            for (j = 0; i + j < mm; j++) {
                sl[j] += u[i + j];
                kl[j] += w[i + j];
            }
        }
        *s = ((sl[0] + sl[1]) + (sl[2] + sl[3])) + ((sl[4] + sl[5]) + (sl[6] + sl[7]));
        *k = ((kl[0] + kl[1]) + (kl[2] + kl[3])) + ((kl[4] + kl[5]) + (kl[6] + kl[7]));
    }

    /* y_i <- max(y_i - m - t, 0) */
    MK_CLONES MK_NOCONTRACT
    static void mk_l2_finish(double* y, double m, double t, ptrdiff_t n)
    {
        double d;
        ptrdiff_t i;
        for (i = 0; i < n; i++) {
            d = y[i] - m;
            y[i] = d > t ? d - t : 0.0;
        }
    }
    """
    double mk_l2_start(const double* g, const double* q, double c, double inv, double* out,
                       Py_ssize_t n) noexcept nogil
    void mk_l2_active(const double* y, double m, double t, Py_ssize_t n, double* s,
                      double* k) noexcept nogil
    void mk_l2_finish(double* y, double m, double t, Py_ssize_t n) noexcept nogil

__all__ = ["SimplexSmoother", "EntropySmoother", "L2Smoother", "PythonSmoother"]


cdef class SimplexSmoother:
    """Base class. Subclasses implement ``argmin`` and ``value_of`` (nogil)."""

    cdef void argmin(self, const double* g, double mu, const double* q, double* out,
                     Py_ssize_t n) noexcept nogil:
        pass

    cdef double value_of(self, const double* p, const double* q, Py_ssize_t n) noexcept nogil:
        return 0.0

    cdef int check_error(self) except -1:
        return 0

    def argmin_simplex(self, g, mu, q=None):
        """argmin over the simplex of <g, p> + mu d_q(p) (Python wrapper of ``argmin``)."""
        cdef double[::1] gv = np.ascontiguousarray(g, dtype=np.float64).ravel()
        cdef Py_ssize_t n = gv.shape[0]
        cdef double m = float(mu)
        cdef double[::1] qv
        cdef const double* qp = NULL
        if n == 0:
            raise ValueError("g is empty")
        if not m > 0:
            raise ValueError(f"mu={mu!r} must be > 0")
        if q is not None:
            qv = np.ascontiguousarray(q, dtype=np.float64).ravel()
            if qv.shape[0] != n:
                raise ValueError(f"q has length {qv.shape[0]}, g has {n}")
            qp = &qv[0]
        out = np.empty(n)
        cdef double[::1] ov = out
        with nogil:
            self.argmin(&gv[0], m, qp, &ov[0], n)
        self.check_error()
        return out

    def value(self, p, q=None):
        """d_q(p) (Python wrapper of ``value_of``)."""
        cdef double[::1] pv = np.ascontiguousarray(p, dtype=np.float64).ravel()
        cdef Py_ssize_t n = pv.shape[0]
        cdef double[::1] qv
        cdef const double* qp = NULL
        if q is not None:
            qv = np.ascontiguousarray(q, dtype=np.float64).ravel()
            if qv.shape[0] != n:
                raise ValueError(f"q has length {qv.shape[0]}, p has {n}")
            qp = &qv[0]
        cdef double d = self.value_of(&pv[0], qp, n)
        self.check_error()
        return d


cdef class EntropySmoother(SimplexSmoother):
    """p_mu(g) = exp(-g/mu) / ||exp(-g/mu)||_1; d(p) = sum p log p + log n (center 1/n).

    ``q`` is ignored (the entropy's center is the uniform distribution).
    """

    def __cinit__(self):
        self.norm = 1

    cdef void argmin(self, const double* g, double mu, const double* q, double* out,
                     Py_ssize_t n) noexcept nogil:
        cdef Py_ssize_t i
        cdef double gmin = g[0], inv
        for i in range(1, n):
            if g[i] < gmin:
                gmin = g[i]
        # log-sum-exp: shift by the largest exponent -gmin/mu so every term is <= 1
        inv = 1.0 / self.weights(g, gmin, 1.0 / mu, out, n)
        for i in range(n):
            out[i] *= inv

    cdef double weights(self, const double* g, double gmin, double inv, double* out,
                        Py_ssize_t n) noexcept nogil:
        """out_i = exp(-(g_i - gmin) inv), 0 below exp(-700); returns sum_i out_i.

        The unnormalized softmax for a known gmin = min_i g_i (so every weight is <= 1 and
        the largest is 1) and inv = 1 / mu, for callers that fold the normalization into
        a later pass."""
        return mk_exp_weights(g, gmin, inv, out, n)

    cdef double value_of(self, const double* p, const double* q, Py_ssize_t n) noexcept nogil:
        cdef Py_ssize_t i
        cdef double acc = 0.0
        for i in range(n):
            if p[i] > 0.0:
                acc += p[i] * log(p[i])
        return acc + log(<double>n)


cdef class L2Smoother(SimplexSmoother):
    """p_mu^q(g) = projection of q - g/mu onto the simplex; d_q(p) = 1/2 ||p - q||^2.

    ``q=None`` (NULL) means q = 1/n.
    """

    def __cinit__(self):
        self.norm = 2

    cdef void argmin(self, const double* g, double mu, const double* q, double* out,
                     Py_ssize_t n) noexcept nogil:
        cdef Py_ssize_t i
        cdef double m, t, tn, s, k, kold, comp, d, u
        # y = q - g / mu and its maximum m; the projection is p_i = max(y_i - m - t, 0) with
        # t the root of f(t) = sum_i max(d_i - t, 0) - 1, d = y - m; working on d keeps
        # full resolution on the support, which lies in (-1, 0] (no absorption of the 1 at
        # |y| ~ 1e300)
        m = mk_l2_start(g, q, 1.0 / n, 1.0 / mu, out, n)
        # Newton on the convex, decreasing, piecewise-linear f from t = -1 <= root
        # (f(-1) >= 0: the maximum alone gives 1): t <- (sum_{d > t} d - 1) / #{d > t}
        # increases to the root and stops once the set {d > t} no longer shrinks
        # (Michelot's iteration; a handful of vectorized passes). t is never lowered: when
        # the root is one of the d_i, rounding could otherwise move t one ulp below and
        # above it in turn and the set would alternate between two sizes forever; with t
        # non-decreasing the set only shrinks, so at most n + 1 passes
        t = -1.0
        kold = -1.0
        while True:
            mk_l2_active(out, m, t, n, &s, &k)
            if k == kold or k == 0.0:
                break
            kold = k
            tn = (s - 1.0) / k
            if tn > t:
                t = tn
        if k == 0.0:
            # no entry above t: every entry of y NaN, or y_i = +inf (g_i = -inf or g_i/mu
            # overflowing); all weights 0
            t = -1.0
        else:
            # recompute t over the support with compensated (Neumaier) summation in index
            # order: t = (sum_{d > t} d - 1) / #{d > t}
            s = 0.0
            comp = 0.0
            k = 0.0
            for i in range(n):
                d = out[i] - m
                if d > t:
                    u = s + d
                    if fabs(s) >= fabs(d):
                        comp += (s - u) + d
                    else:
                        comp += (d - u) + s
                    s = u
                    k += 1.0
            t = ((s + comp) - 1.0) / k
        mk_l2_finish(out, m, t, n)

    cdef double value_of(self, const double* p, const double* q, Py_ssize_t n) noexcept nogil:
        cdef Py_ssize_t i
        cdef double acc = 0.0, r
        for i in range(n):
            r = p[i] - (q[i] if q != NULL else 1.0 / n)
            acc += r * r
        return 0.5 * acc


def _plugin_name(obj):
    return getattr(obj, "name", None) or type(obj).__name__


def _checked_point(obj, raw, Py_ssize_t n):
    """``raw`` (what ``obj.argmin_simplex`` returned for g of length n) as a float64
    vector, or ValueError naming the smoother: it must be n finite reals in the simplex."""
    owner = f"smoother {_plugin_name(obj)!r}: argmin_simplex"
    try:
        res = np.asarray(raw)
    except Exception as exc:
        raise ValueError(f"{owner} returned {type(raw).__name__}, not a vector of {n} "
                         "numbers") from exc
    if res.dtype.kind not in "fiu":
        raise ValueError(f"{owner} returned an array of dtype {res.dtype}; it must return "
                         f"{n} real numbers (a point of the simplex)")
    if res.shape != (n,):
        raise ValueError(f"{owner} returned shape {res.shape} for g of length {n}; it must "
                         f"return a vector of length {n}")
    res = np.ascontiguousarray(res, dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(res))
    if bad.size:
        raise ValueError(f"{owner} returned {res[bad[0]]} at index {bad[0]}; it must return "
                         "finite numbers")
    low, total = float(res.min()), float(res.sum())
    # the sum of n numbers in [0, 1] carries a rounding of at most about n eps
    if low < 0.0 or abs(total - 1.0) > 1e-9 + 4.0 * n * np.finfo(np.float64).eps:
        raise ValueError(f"{owner} returned a point outside the simplex (min {low:.6g}, sum "
                         f"{total:.17g}); it must return p >= 0 with sum(p) = 1")
    return res


cdef class PythonSmoother(SimplexSmoother):
    """Adapter for a third-party Smoother plug-in written in Python.

    Calls ``obj.argmin_simplex(g, mu, q)`` and ``obj.value(p, q)`` with the GIL (slower,
    but any plug-in works) and checks what they return: n finite reals in the simplex, a
    finite real. The compiled loops that call ``argmin`` / ``value_of`` cannot raise, so
    the first error (an exception of the plug-in, wrapped in ``PluginError`` naming it,
    or a ``ValueError`` for a result that fails the check) is kept: ``out`` gets the
    uniform point 1/n so the loop ends on valid numbers, later calls call nothing, and
    ``check_error`` (run by the core's Python method once its loop returns) raises it.
    An adapter serves one run (``cython_smoother`` builds one per run).
    """

    def __init__(self, obj, int norm=1):
        self._obj = obj
        self.norm = norm
        self._error = None

    cdef void argmin(self, const double* g, double mu, const double* q, double* out,
                     Py_ssize_t n) noexcept nogil:
        cdef Py_ssize_t i
        with gil:
            if self._error is None:
                try:
                    self._argmin_py(g, mu, q, out, n)
                    return
                except BaseException as exc:
                    self._error = exc
        for i in range(n):
            out[i] = 1.0 / n

    cdef int _argmin_py(self, const double* g, double mu, const double* q, double* out,
                        Py_ssize_t n) except -1:
        cdef Py_ssize_t i
        gv = np.empty(n)
        cdef double[::1] gm = gv
        for i in range(n):
            gm[i] = g[i]
        qv = None
        if q != NULL:
            qv = np.array(<double[:n]>(<double*>q))
        try:
            raw = self._obj.argmin_simplex(gv, mu, qv)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # SystemExit too: only Ctrl-C stays itself
            raise _plugin_error(self._obj, "argmin_simplex", exc) from exc
        cdef double[::1] rm = _checked_point(self._obj, raw, n)
        for i in range(n):
            out[i] = rm[i]
        return 0

    cdef double value_of(self, const double* p, const double* q, Py_ssize_t n) noexcept nogil:
        with gil:
            if self._error is None:
                try:
                    return self._value_py(p, q, n)
                except BaseException as exc:
                    self._error = exc
        return NAN

    cdef double _value_py(self, const double* p, const double* q, Py_ssize_t n) except? -1:
        pv = np.array(<double[:n]>(<double*>p))
        qv = None if q == NULL else np.array(<double[:n]>(<double*>q))
        try:
            raw = self._obj.value(pv, qv)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # SystemExit too: only Ctrl-C stays itself
            raise _plugin_error(self._obj, "value", exc) from exc
        arr = np.asarray(raw)
        if arr.shape != () or arr.dtype.kind not in "fiu" or not np.isfinite(arr):
            raise ValueError(f"smoother {_plugin_name(self._obj)!r}: value returned {raw!r}; "
                             "it must return a finite real number")
        return float(arr)

    cdef int check_error(self) except -1:
        if self._error is not None:
            raise self._error
        return 0


def _plugin_error(obj, method, exc):
    from marginkit.plugins import PluginError
    from marginkit.utils._text import exception_text

    return PluginError(f"smoother {_plugin_name(obj)!r} raised {type(exc).__name__} in "
                       f"{method}: {exception_text(exc)}")


def vexp_neg(const double[::1] z):
    """exp(-z) by the smoothers' vectorized exp (``_vexp.h``), for z in [0, 700); 0 where
    z >= 700. The entropy smoother's weights are this function of (g - min g) / mu; tests
    measure its error against a long double reference."""
    cdef Py_ssize_t n = z.shape[0]
    out = np.empty(n)
    cdef double[::1] o = out
    if n:
        with nogil:
            mk_exp_weights(&z[0], 0.0, 1.0, &o[0], n)
    return out
