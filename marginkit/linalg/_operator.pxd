# Gram operators of Ramdas & Pena 2014 (normalized signed Gram G), usable from nogil Cython code.
from marginkit.utils._rows cimport RowBlock

cdef class GramOperator:
    cdef readonly Py_ssize_t n
    cdef readonly bint normalize
    # s_i = y_i / sqrt(K_ii) (normalized) or y_i (unnormalized): G = S K S
    cdef double[::1] _scale
    # sqrt(K_ii), for converting unnormalized coefficients to normalized ones
    cdef double[::1] _sqrt_diag

    cdef void matvec(self, const double* a, double* out) noexcept nogil
    cdef void column(self, Py_ssize_t j, double* out) noexcept nogil
    cdef void entries(self, Py_ssize_t j, const Py_ssize_t* rows, Py_ssize_t m,
                      double* out) noexcept nogil


cdef class FeatureOperator(GramOperator):
    cdef readonly Py_ssize_t d
    cdef readonly int layout
    cdef object _phi
    # C-order or CSR rows (marginkit.utils._rows); None for an F-order Phi
    cdef readonly RowBlock rows
    cdef const double[::1, :] _f64
    cdef const float[::1, :] _f32
    cdef double[::1] _w      # d-vector scratch (Phi^T S a)
    cdef double[::1] _u      # n-vector scratch (S a) for the BLAS path

    cdef void rmatvec(self, const double* a, double* w) noexcept nogil
    cdef void fmatvec(self, const double* w, double* out) noexcept nogil
    cdef void add_row(self, Py_ssize_t j, double c, double* w) noexcept nogil
    cdef double row_dot(self, Py_ssize_t i, const double* w) noexcept nogil


cdef class DenseGramOperator(GramOperator):
    cdef readonly bint single
    cdef object _G
    cdef float[:, ::1] _g32
    cdef double[:, ::1] _g64
