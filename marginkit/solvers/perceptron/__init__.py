"""The perceptron / von Neumann family of Ramdas & Pena 2014.

Every solver works with the normalized signed Gram matrix (sec. 3)

    G_ij = y_i y_j K(x_i, x_j) / sqrt(K(x_i, x_i) K(x_j, x_j)),

through a ``marginkit.linalg._operator.GramOperator`` (feature space for the linear
kernel, never an n x n matrix; a private dense G otherwise). The function
f = sum_i alpha_i y_i phi(x_i) / sqrt(K(x_i, x_i)) separates the data iff G alpha > 0
(Lemma 1); a p in the simplex with ||p||_G = 0 proves that none does (Gordan's theorem
for RKHSs, sec. 5), and for every p in the simplex and alpha,

    min_i (G alpha)_i / ||alpha||_G  <=  rho_K  <=  ||p||_G          (Lemma 3),

which is ``Result.margin_bounds``.

=========================  ===================================  ========================
solver                     algorithm                            default stop, max_iter
=========================  ===================================  ========================
``perceptron``             classic kernel perceptron (sec. 2.1) separated, 10_000
``normalized_perceptron``  Normalized Perceptron (sec. 2.1)     separated, 10_000
``nkp``                    Normalized Kernel Perceptron (s. 4)  separated, 10_000
``snkp``                   Smoothed NKP (sec. 4, entropy)       separated, 10_000
``nvn``                    Normalized von Neumann (sec. 5)      separated + dual_certificate, 100_000
``snkpvn``                 SNKPVN(q, delta) (sec. 6, l2)        separated + dual_certificate, 100_000
``isnkpvn``                ISNKPVN(gamma, eps) (sec. 6, l2)     separated + dual_certificate, 100_000
=========================  ===================================  ========================

State attributes for stopping rules: ``min_margin`` (min_i (G alpha)_i, recomputed
exactly before it is reported positive), ``dual_norm`` (best ||p||_G seen, p in the
simplex), ``dual_tol`` (the solver's eps or delta), ``alpha_norm``, ``mu``.

Modules
-------
``_family``      what every solver of the family returns: claims, certificates, margin
                 bounds, the model (``_FamilyState``, ``_PerceptronFamily``)
``_blocks``      the row-block driver the vertex and smoothed iterations share
``_vertex``      ``perceptron``, ``normalized_perceptron``, ``nkp``, ``nvn``
``_gram_bound``  the bound on lambda_max(G) behind the l2 smoother's mu_0
``_smoothed``    ``snkp``, ``snkpvn`` and the smoothed iteration ISNKPVN runs
``_finish``      the exact finish of ``isnkpvn`` (Wolfe's minimum-norm-point algorithm)
``_iterated``    ``isnkpvn``

References
----------
A. Ramdas and J. Pena, "Margins, Kernels and Non-linear Smoothed Perceptrons",
Proceedings of the 31st International Conference on Machine Learning (ICML), 2014;
arXiv:1505.04123.
"""
from ._family import _FamilyState, _PerceptronFamily, family_fields
from ._gram_bound import bound_from_cross, gram_norm_bound, normalized_feature_cross
from ._iterated import ISNKPVN, _IteratedState
from ._smoothed import SNKP, SNKPVN, SmoothedIteration
from ._vertex import NKP, NVN, NormalizedPerceptron, Perceptron, VertexIteration

__all__ = ["Perceptron", "NormalizedPerceptron", "NKP", "SNKP", "NVN", "SNKPVN", "ISNKPVN"]
