# Prox-functions on the simplex (Ramdas & Pena 2014, secs. 4 and 6), callable from nogil Cython code.

cdef class SimplexSmoother:
    # 1 for a prox-function 1-strongly convex in l1 (entropy), 2 for l2
    cdef readonly int norm
    # out = argmin_{p in simplex} <g, p> + mu d_q(p); q may be NULL (center 1/n)
    cdef void argmin(self, const double* g, double mu, const double* q, double* out,
                     Py_ssize_t n) noexcept nogil
    # d_q(p)
    cdef double value_of(self, const double* p, const double* q, Py_ssize_t n) noexcept nogil
    # raise the error a call of argmin / value_of met, if any (called with the GIL by the
    # Python method that ran the loop: those calls cannot raise themselves)
    cdef int check_error(self) except -1


cdef class EntropySmoother(SimplexSmoother):
    # unnormalized softmax weights exp(-(g_i - gmin) inv) and their sum
    cdef double weights(self, const double* g, double gmin, double inv, double* out,
                        Py_ssize_t n) noexcept nogil


cdef class L2Smoother(SimplexSmoother):
    pass


cdef class PythonSmoother(SimplexSmoother):
    cdef object _obj
    # the first error met (None: none); once set, argmin and value_of call nothing
    cdef object _error
    cdef int _argmin_py(self, const double* g, double mu, const double* q, double* out,
                        Py_ssize_t n) except -1
    cdef double _value_py(self, const double* p, const double* q, Py_ssize_t n) except? -1
