"""The constants of the linear SVM solvers' rounding bounds (docs/svm.md, sections 2 and 4).

``_RoundingConstants`` holds, for the data of a run and its largest box bound, the norms
of the scaled rows and the gamma_k factors with which the solvers bound the rounding error
of the margins the Cython kernels compute through the implicit centering. The data
wrappers (``_data._Data``, ``_data._Blocked``) compute it once per run.

References
----------
.. [1] N. J. Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., SIAM,
   2002, sections 2.2 and 3.1 (the rounding model, gamma_k).
"""
import math

import numpy as np

from ... import _referee as R


class _RoundingConstants:
    """Per-run constants of the solvers' rounding bounds (docs/svm.md, sections 2 and 4).

    With xi_i = ||s * x_i|| and mu_m = ||s * m||, every rounding error of the margins
    computed by the kernels through the implicit centering is bounded by gamma_K times
    (xi_i + mu_m)(rho . xi + B mu_m) + B (B = sum of the dual vector rho whose margins are
    computed; Cauchy-Schwarz on the scaled rows): ``xi`` (n), ``xi_norm`` = ||xi||,
    ``xi_max``, ``xim_norm`` = ||xi + mu_m e||, ``mu_m``, ``sqrt_n``, ``gK`` = gamma_K
    with K = n + (longest row) + d + 40 (the summation chains of the scatter, the gather
    and the centering; with ``n_blocks`` row blocks, whose partial sums are added in block
    order, n_blocks - 1 more), ``g3`` = gamma_4, and ``under``, the absolute error of subnormal
    intermediate results."""

    def __init__(self, data, gamma, sums=None, n_blocks=1):
        n, d = data.n, data.d
        if sums is None:
            self.xi = data.xi
            xsq_sum, xi_sum = float(np.sum(data.xsq)), float(np.sum(self.xi))
            xi_max = float(self.xi.max(initial=0.0))
            longest = int(np.diff(data.indptr).max(initial=0)) if data.sparse else d
        else:
            # the same sums reduced over the row blocks of a run (``_Blocked``)
            self.xi = None
            xsq_sum, xi_sum, xi_max, longest = sums
        self.xi_norm = math.sqrt(xsq_sum)
        self.xi_max = xi_max
        self.mu_m = float(np.sqrt(data.M))
        # ||xi + mu_m e||^2 = sum xsq + 2 mu_m sum xi + n mu_m^2
        self.xim_norm = math.sqrt(xsq_sum + 2.0 * self.mu_m * xi_sum + n * self.mu_m ** 2) \
            * (1.0 + 4 * R.UNIT)
        self.sqrt_n = float(np.sqrt(n))
        K = n + longest + d + 40 + (n_blocks - 1)
        self.K = K
        self.gK = R.gamma(K)
        self.g3 = R.gamma(4)
        s_norm = R.scaled_norm(data.s)[0]
        self.under = 2.0 * K * R.ETA * (self.xim_norm * (s_norm + 1.0)
                                        + self.sqrt_n * (3.0 * n * gamma + 1.0))
        self.n = n
        self.gamma = gamma

    def array_long_double(self):
        """[gamma_K, gamma_4, ||xi + mu_m e||, mu_m, sqrt(n), under] for the full bound
        whose sums run in long double (gamma in long double's unit roundoff; the only
        float64 rounding left, of each p_i, is the kernel's; long double's exponent range
        leaves only that rounding to underflow), then [gamma_K, gamma_4, under] in float64
        for the float64 version of the same pass."""
        gL = R.gamma_long
        return np.array([gL(self.K), gL(4), self.xim_norm, self.mu_m, self.sqrt_n,
                         4.0 * self.sqrt_n * R.ETA, self.gK, self.g3, self.under])
