"""Smoothed minimizers over the simplex (paper 000, eq. (pmuf) and sec. 6).

For a score vector g (g = G alpha in the solvers) and mu > 0,

    p_mu(g) = argmin_{p in simplex} <g, p> + mu d(p).

``EntropySmoother``: d(p) = sum_i p_i log p_i + log n (1-strongly convex in l1, center
1/n); p_mu(g) = softmax(-g / mu), computed with the maximum shifted out (stable).

``L2Smoother``: d_q(p) = 1/2 ||p - q||_2^2 (1-strongly convex in l2, center q);
p_mu(g) = Euclidean projection of q - g / mu onto the simplex, by Condat's algorithm
(L. Condat, "Fast projection onto the simplex and the l1 ball", Math. Program. 158, 2016;
expected O(n), no sorting, no allocation per call).
"""
import numpy as np

from libc.math cimport INFINITY, exp, fabs, log
from libc.stdlib cimport free, realloc

__all__ = ["SimplexSmoother", "EntropySmoother", "L2Smoother", "PythonSmoother"]


cdef class SimplexSmoother:
    """Base class. Subclasses implement ``argmin`` and ``value_of`` (nogil)."""

    cdef void argmin(self, const double* g, double mu, const double* q, double* out,
                     Py_ssize_t n) noexcept nogil:
        pass

    cdef double value_of(self, const double* p, const double* q, Py_ssize_t n) noexcept nogil:
        return 0.0

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
        return self.value_of(&pv[0], qp, n)


cdef class EntropySmoother(SimplexSmoother):
    """p_mu(g) = exp(-g/mu) / ||exp(-g/mu)||_1; d(p) = sum p log p + log n (center 1/n).

    ``q`` is ignored (the entropy's center is the uniform distribution).
    """

    def __cinit__(self):
        self.norm = 1

    cdef void argmin(self, const double* g, double mu, const double* q, double* out,
                     Py_ssize_t n) noexcept nogil:
        cdef Py_ssize_t i
        cdef double gmin = g[0], total = 0.0, inv, z
        for i in range(1, n):
            if g[i] < gmin:
                gmin = g[i]
        # log-sum-exp: shift by the largest exponent -gmin/mu so every term is <= 1
        inv = 1.0 / mu
        for i in range(n):
            z = (g[i] - gmin) * inv
            # exp(-z) < 1e-304 is negligible next to the largest term (= 1); skipping it also
            # avoids libm's slow path for subnormal results
            if z < 700.0:
                out[i] = exp(-z)
                total += out[i]
            else:
                out[i] = 0.0
        inv = 1.0 / total
        for i in range(n):
            out[i] *= inv

    cdef double value_of(self, const double* p, const double* q, Py_ssize_t n) noexcept nogil:
        cdef Py_ssize_t i
        cdef double acc = 0.0
        for i in range(n):
            if p[i] > 0.0:
                acc += p[i] * log(p[i])
        return acc + log(<double>n)


cdef class L2Smoother(SimplexSmoother):
    """p_mu^q(g) = projection of q - g/mu onto the simplex; d_q(p) = 1/2 ||p - q||^2.

    ``q=None`` (NULL) means q = 1/n. Holds a scratch buffer: one instance must not be
    used from two threads at once.
    """

    def __cinit__(self):
        self.norm = 2
        self._buf = NULL
        self._cap = 0

    def __dealloc__(self):
        free(self._buf)

    cdef void argmin(self, const double* g, double mu, const double* q, double* out,
                     Py_ssize_t n) noexcept nogil:
        cdef Py_ssize_t i, j, k, kold, start
        cdef double inv = 1.0 / mu, c = 1.0 / n, y, tau, m, s, comp, t, d
        cdef double* aux
        cdef double* nb
        if self._cap < n:
            # grows only when n grows: no allocation in the solvers' iterations
            nb = <double*>realloc(self._buf, n * sizeof(double))
            if nb == NULL:
                # out of memory: fall back to the center (a feasible point)
                for i in range(n):
                    out[i] = q[i] if q != NULL else c
                return
            self._buf = nb
            self._cap = n
        aux = self._buf
        # y = q - g / mu and its maximum m; the projection only depends on y - m, and the
        # support {y_i > tau} lies in (m - 1, m] (tau >= m - 1 as p_max <= 1), so working on
        # d = y - m keeps full resolution there (no absorption of the 1 at |y| ~ 1e300)
        m = -INFINITY
        for i in range(n):
            y = (q[i] if q != NULL else c) - g[i] * inv
            out[i] = y
            if y > m:
                m = y
        # Condat (2016), Algorithm 1 (as in his reference C code, one work buffer) on d.
        # Pass 1 builds a candidate set v = aux[kold + 1:k] with tau = (sum v - 1) / |v|
        # kept as a running mean; the candidates it discards stay in aux[:kold + 1].
        d = out[0] - m
        aux[0] = d
        tau = d - 1.0
        k = 1
        kold = -1
        for i in range(1, n):
            d = out[i] - m
            if d > tau:
                aux[k] = d
                tau += (d - tau) / (k - kold)
                if tau <= d - 1.0:
                    tau = d - 1.0
                    kold = k - 1
                k += 1
        # pass 2: the discarded candidates > tau rejoin v (stored just before it)
        start = 0
        if kold >= 0:
            kold += 1
            k -= kold
            start = kold
            j = kold
            while j > 0:
                j -= 1
                if aux[j] > tau:
                    start -= 1
                    aux[start] = aux[j]
                    k += 1
                    tau += (aux[start] - tau) / k
        aux = aux + start
        # pass 3: drop the members <= tau until v is stable; then v = {d_i > tau}
        while True:
            kold = k - 1
            k = 0
            for i in range(kold + 1):
                if aux[i] > tau:
                    aux[k] = aux[i]
                    k += 1
                else:
                    tau += (tau - aux[i]) / (kold - i + k)
            if k > kold:
                break
        if k == 0:
            # only with NaN in y: fall back to the vertex at the maximum
            aux[0] = 0.0
            k = 1
        # recompute t = tau from v with compensated (Neumaier) summation, t = (sum v - 1) / |v|,
        # so that the result does not depend on the order in which v was visited;
        # p_i = max(y_i - m - t, 0)
        s = 0.0
        comp = 0.0
        for i in range(k):
            d = aux[i]
            t = s + d
            if fabs(s) >= fabs(d):
                comp += (s - t) + d
            else:
                comp += (d - t) + s
            s = t
        t = ((s + comp) - 1.0) / k
        for i in range(n):
            d = out[i] - m
            out[i] = d - t if d > t else 0.0

    cdef double value_of(self, const double* p, const double* q, Py_ssize_t n) noexcept nogil:
        cdef Py_ssize_t i
        cdef double acc = 0.0, r
        for i in range(n):
            r = p[i] - (q[i] if q != NULL else 1.0 / n)
            acc += r * r
        return 0.5 * acc


cdef class PythonSmoother(SimplexSmoother):
    """Adapter for a third-party Smoother plug-in written in Python.

    Calls ``obj.argmin_simplex(g, mu, q)`` with the GIL (slower, but any plug-in works).
    """

    def __init__(self, obj, int norm=1):
        self._obj = obj
        self.norm = norm

    cdef void argmin(self, const double* g, double mu, const double* q, double* out,
                     Py_ssize_t n) noexcept nogil:
        with gil:
            self._argmin_py(g, mu, q, out, n)

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
        res = np.asarray(self._obj.argmin_simplex(gv, mu, qv), dtype=np.float64).ravel()
        cdef double[::1] rm = res
        for i in range(n):
            out[i] = rm[i]
        return 0

    cdef double value_of(self, const double* p, const double* q, Py_ssize_t n) noexcept nogil:
        with gil:
            return float(self._obj.value(np.array(<double[:n]>(<double*>p)),
                                         None if q == NULL else np.array(<double[:n]>(<double*>q))))
